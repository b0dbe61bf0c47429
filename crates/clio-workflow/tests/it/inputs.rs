//! Input resolution as the seed says: `$task` and `$<step>` in text or object values, a
//! whole-value reference replaced by the value itself, `$$` for `$`, and the default input
//! of a step without one.

use clio_workflow::{Event, RunConfig};
use serde_json::{Value, json};

use crate::support::{Driver, config, workflow};

fn finish_with(run: &mut Driver, step: &str, answer: Value) {
    run.start(step);
    run.apply(Event::Finished { step: step.into(), answer, model: None, state: None });
}

#[test]
fn references_resolve_in_text_and_object_values() {
    let wf = workflow(include_str!("../data/valid/references.json"));
    let mut run = Driver::new(&wf, RunConfig { task: json!({"goal": "fatigue"}), ..config(&[]) });
    assert_eq!(
        run.start_of("draft").input,
        json!({"goal": "fatigue"}),
        "a lone $task is the value itself"
    );
    finish_with(&mut run, "draft", json!({"text": "v1"}));
    assert_eq!(
        run.start_of("check").input,
        json!({
            "text": {"text": "v1"},
            "brief": "Review {\"text\":\"v1\"} against {\"goal\":\"fatigue\"}",
            "price": "costs $5",
            "nested": {"deep": [{"goal": "fatigue"}]}
        })
    );
    finish_with(&mut run, "check", json!("fine"));
    assert_eq!(run.start_of("final_v2").input, json!("Revise {\"text\":\"v1\"} using fine."));
}

#[test]
fn steps_without_input_get_the_default_object() {
    let wf = workflow(include_str!("../data/valid/defaults.json"));
    let mut run = Driver::new(&wf, config(&[]));
    assert_eq!(run.start_of("plain").input, json!("study batch7"), "nothing at all: the task");
    assert_eq!(
        run.start_of("described").input,
        json!({"task": "study batch7", "instructions": "List three risks", "inputs": {}})
    );
    finish_with(&mut run, "plain", json!("p"));
    finish_with(&mut run, "described", json!("d"));
    assert_eq!(
        run.start_of("joined").input,
        json!({"task": "study batch7", "inputs": {"plain": "p", "described": "d"}})
    );
    finish_with(&mut run, "joined", json!("j"));
    let start = run.start_of("joined-with-notes");
    assert_eq!(
        start.input,
        json!({"task": "study batch7", "instructions": "Summarise", "inputs": {"joined": "j"}})
    );
    assert_eq!(start.model.as_deref(), Some("local/qwen3"));
}

#[test]
fn options_and_models_reach_the_start_action() {
    let wf = workflow(include_str!("../data/valid/council_options.json"));
    let run = Driver::new(&wf, config(&[]));
    let start = run.start_of("ask");
    assert_eq!(
        start.options.as_ref().map(|o| Value::Object(o.clone())),
        Some(json!({"members": ["a", "b", "c"], "rounds": 2}))
    );
    assert_eq!(start.model.as_deref(), Some("openai/gpt-5"));
}

#[test]
fn targets_are_checked_when_known() {
    use clio_workflow::{TargetKind, WorkflowError};
    let wf = workflow(include_str!("../data/valid/council_options.json"));
    assert_eq!(
        wf.check_targets(|t| if t == "council" { TargetKind::Flow } else { TargetKind::Other }),
        Ok(())
    );
    assert_eq!(
        wf.check_targets(|_| TargetKind::Other),
        Err(WorkflowError::OptionsOnNonFlow { step: "ask".into(), target: "council".into() })
    );
    assert_eq!(
        wf.check_targets(|t| if t == "council" { TargetKind::Flow } else { TargetKind::Unknown }),
        Err(WorkflowError::UnknownTarget {
            step: "sum-up".into(),
            target: "tools/summarise".into()
        })
    );
}
