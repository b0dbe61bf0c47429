//! Inputs that cost without bound, and inputs that hide what they mean: dense DAGs check in
//! time linear in their edges, a key named twice is refused by name and position, and a
//! control character in a target or model is refused naming the step and field.

use clio_workflow::{Step, Workflow, WorkflowError, render_dot, render_mermaid, render_text};
use proptest::prelude::*;

/// A step `fan` waiting on 100,000 steps: finding repeats by searching the list kept so
/// far was 5 * 10^9 comparisons here (minutes, unoptimised); one pass is instant.
#[test]
fn a_wide_fan_in_checks_in_one_pass() {
    let n = 100_000;
    let mut steps: Vec<Step> = (0..n).map(|i| Step::new(format!("s{i}"), "t")).collect();
    let mut after: Vec<String> = (0..n).map(|i| format!("s{i}")).collect();
    after.push("s7".to_owned());
    steps.push(Step::new("fan", "t").after(after).input("$s0 and $s99999"));
    let workflow = Workflow::new(steps).unwrap();
    assert_eq!(workflow.final_steps(), ["fan"]);
    assert_eq!(workflow.layers().len(), 2);
}

/// A dense DAG (every step waits on every earlier one) and its drawings.
#[test]
fn a_dense_dag_checks_and_draws() {
    let n = 600;
    let steps: Vec<Step> = (0..n)
        .map(|i| {
            let step = Step::new(format!("s{i}"), "t").after((0..i).map(|j| format!("s{j}")));
            if i > 0 { step.input(format!("$s0 $s{}", i - 1)) } else { step }
        })
        .collect();
    let workflow = Workflow::new(steps).unwrap();
    assert_eq!(workflow.layers().len(), n);
    assert!(render_text(&workflow).ends_with(&format!("final: s{}\n", n - 1)));
    assert_eq!(render_mermaid(&workflow).lines().count(), 1 + n + n * (n - 1) / 2);
    assert_eq!(render_dot(&workflow).lines().count(), 4 + n + n * (n - 1) / 2);
}

/// A chain of 30,000 steps whose last step references every step: a search per
/// reference was 4.5 * 10^8 edge visits; one incremental search per step is 30,000.
#[test]
fn references_far_up_a_chain_are_found_in_one_search() {
    let n = 30_000;
    let mut steps: Vec<Step> = (0..n)
        .map(|i| {
            let step = Step::new(format!("s{i}"), "t");
            if i == 0 { step } else { step.after([format!("s{}", i - 1)]) }
        })
        .collect();
    let refs: Vec<String> = (0..n).map(|i| format!("$s{i}")).collect();
    steps.push(Step::new("last", "t").after([format!("s{}", n - 1)]).input(refs.join(" ")));
    assert!(Workflow::new(steps.clone()).is_ok());
    // A reference to a step it does not wait on is still refused.
    steps.push(Step::new("side", "t"));
    let last = steps.len() - 2;
    steps[last].input = Some(format!("{} $side", refs.join(" ")).into());
    assert_eq!(
        Workflow::new(steps).unwrap_err(),
        WorkflowError::UnreachableReference { step: "last".into(), reference: "side".into() }
    );
}

#[test]
fn a_nul_in_a_target_or_model_names_the_step_and_field() {
    let text = r#"{"steps": [{"id": "a", "target": "tool"}, {"id": "b", "target": "to\u0000ol"}]}"#;
    let error = Workflow::from_json(text).unwrap_err();
    assert_eq!(
        error,
        WorkflowError::ControlCharacter { step: "b".into(), field: "target", code: 0, position: 3 }
    );
    assert_eq!(
        error.to_string(),
        "step `b` field `target` holds control character U+0000 at character 3: a target is a name without control characters"
    );
    let text = r#"[{"id": "a", "target": "t", "model": "local/q\nwen"}]"#;
    let error = Workflow::from_json(text).unwrap_err();
    assert!(matches!(error, WorkflowError::ControlCharacter { field: "model", code: 10, .. }));
    // Text inputs and descriptions may hold newlines and tabs.
    let text = r#"[{"id": "a", "target": "t", "input": "line\n\tnext", "description": "x\ny"}]"#;
    assert!(Workflow::from_json(text).is_ok());
}

#[test]
fn a_key_named_twice_is_refused_by_name_and_place() {
    let text = "{\"steps\": [\n  {\"id\": \"a\", \"target\": \"safe\", \"target\": \"rm\"}\n]}";
    let error = Workflow::from_json(text).unwrap_err();
    assert_eq!(error, WorkflowError::DuplicateKey { key: "target".into(), line: 2, column: 33 });
    assert_eq!(
        error.to_string(),
        "duplicate key `target` at line 2, column 33: an object may name each key once"
    );
    let text = r#"{"steps": [{"id": "a", "target": "t"}], "steps": []}"#;
    assert!(matches!(
        Workflow::from_json(text),
        Err(WorkflowError::DuplicateKey { key, line: 1, column: 41 }) if key == "steps"
    ));
    // Inside an input object too.
    let text = r#"[{"id": "a", "target": "t", "input": {"q": 1, "q": 2}}]"#;
    assert!(matches!(Workflow::from_json(text), Err(WorkflowError::DuplicateKey { .. })));
}

proptest! {
    /// A workflow with any one of its keys repeated (at any depth) is refused with that key;
    /// without the repeat it reads.
    #[test]
    fn any_repeated_key_is_refused(
        at in 0usize..6,
        target in "[a-z]{1,8}",
    ) {
        let keys = ["steps", "id", "target", "input", "q", "after"];
        let key = keys[at];
        let base = format!(
            r#"{{"steps": [{{"id": "a", "target": "{target}"}}, {{"id": "b", "target": "{target}", "input": {{"q": "$a"}}, "after": ["a"]}}]}}"#
        );
        prop_assert!(Workflow::from_json(&base).is_ok());
        let needle = format!("\"{key}\":");
        let first = base.find(&needle).unwrap();
        // Repeat the key, with a value of the same kind, just before its first use.
        let value = match key {
            "steps" | "after" => "[]",
            "input" => "{}",
            _ => "\"x\"",
        };
        let doubled = format!("{}\"{key}\": {value}, {}", &base[..first], &base[first..]);
        match Workflow::from_json(&doubled) {
            Err(WorkflowError::DuplicateKey { key: found, line: 1, column }) => {
                prop_assert_eq!(found, key);
                let second = first + needle.len() + value.len() + 3;
                prop_assert_eq!(column, second + 1, "{}", doubled);
            }
            other => prop_assert!(false, "{:?} for {}", other, doubled),
        }
    }
}
