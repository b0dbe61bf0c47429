//! Typed options: defaults, conversion, every bad option named with the type it needs, a
//! bool never a number, unknown options refused, and `reference()`.

use clio_flow::{Flow, FlowError, FlowOutput, FnFlow, OptionSpec, OptionType, selection};
use clio_journal::Journal;
use serde_json::{Map, Value, json};

use crate::support::{Counter, answer, registry, runtime};

fn campaign() -> FnFlow {
    FnFlow::new("campaign", |_t: Value, ctx| async move {
        let cycles: u64 = ctx.option("max_cycles").unwrap_or(0);
        let reviewers: Vec<String> = ctx.option("reviewers").unwrap_or_default();
        Ok(FlowOutput::text(format!("{cycles} {}", reviewers.join("+"))))
    })
    .options(vec![
        OptionSpec::new("max_cycles", OptionType::Int { min: Some(1), max: None }, json!(3)),
        OptionSpec::new("reviewers", OptionType::strings(), json!(["independent_reviewer"])),
        OptionSpec::new("ratio", OptionType::Float, json!(0.5)),
        OptionSpec::new("loose", OptionType::Any, Value::Null),
    ])
}

fn map(v: Value) -> Map<String, Value> {
    v.as_object().cloned().unwrap_or_default()
}

#[test]
fn checked_options_fill_defaults_and_convert() {
    let f = campaign();
    let out = f
        .checked_options(&map(json!({ "max_cycles": 5.0, "ratio": 2, "loose": [1, "x"] })))
        .unwrap();
    assert_eq!(out["max_cycles"], json!(5));
    assert_eq!(out["ratio"], json!(2.0));
    assert_eq!(out["reviewers"], json!(["independent_reviewer"]));
    assert_eq!(out["loose"], json!([1, "x"]));
    assert_eq!(f.reference()["id"], "campaign");
    assert_eq!(f.reference()["options"]["max_cycles"], 3);
}

#[test]
fn checked_options_name_every_bad_option() {
    let err = campaign()
        .checked_options(&map(json!({
            "max_cycles": true, "reviewers": "one", "ratio": false, "bogus": 1, "max_depth": -1
        })))
        .unwrap_err();
    let FlowError::OptionsInvalid { problems, .. } = &err else { panic!("{err:?}") };
    let mut named: Vec<(&str, &str)> =
        problems.iter().map(|p| (p.option.as_str(), p.needs.as_str())).collect();
    named.sort();
    assert_eq!(
        named,
        vec![
            ("bogus", "no such option"),
            ("max_cycles", "an integer >= 1"),
            ("max_depth", "an integer >= 0"),
            ("ratio", "a number"),
            ("reviewers", "a list of text"),
        ]
    );
    let zero = campaign().checked_options(&map(json!({ "max_cycles": 0 }))).unwrap_err();
    assert_eq!(zero.reason(), "flow_options_invalid");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn options_reach_the_flow_from_a_selection() {
    let c = Counter::default();
    let journal = Journal::open_in_memory().unwrap();
    let rt = runtime(&journal, registry(&c).flow(campaign()));
    let report = rt
        .run(
            selection("campaign", json!({ "max_cycles": 5, "reviewers": ["a", "b"] })),
            json!(null),
        )
        .await
        .unwrap();
    assert_eq!(answer(&report), "5 a+b");
    let err =
        rt.run(selection("campaign", json!({ "max_cycles": "5" })), json!(null)).await.unwrap_err();
    assert_eq!(err.reason(), "flow_options_invalid");
}
