//! The built-in `council` flow: members asked together (each on its own model when
//! `models` says so), one failing member not stopping the others, one synthesised answer,
//! and a replay that asks no one again.

use clio_flow::{FlowError, Registry, Worker, WorkerReply, selection};
use clio_journal::Journal;
use serde_json::{Value, json};

use crate::support::{Counter, answer, error, registry, runtime};

/// Members that answer with their id and the model they were given; `failing` fails.
fn council_registry(counter: &Counter) -> Registry {
    let mut reg = registry(counter);
    for id in ["physicist", "chemist"] {
        reg = reg.subagent(Worker::handler(id, move |req| async move {
            let mut reply = WorkerReply::text(format!("{id} says {} (on {})", req.text, req.model));
            reply.model = req.model.clone();
            Ok(reply)
        }));
    }
    reg.subagent(Worker::handler("failing", |_req| async move {
        Err(FlowError::CallFailed { handle: None, message: "out of ideas".into() })
    }))
    .subagent(Worker::handler("chair", |req| async move {
        Ok(WorkerReply::text(format!("synthesis of {} answers", req.text.matches("### ").count())))
    }))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn members_answer_and_the_chair_synthesises() {
    let counter = Counter::default();
    let journal = Journal::open_in_memory().unwrap();
    let rt = runtime(&journal, council_registry(&counter));
    let options = json!({"members": ["physicist", "chemist", "failing"], "synthesizer": "chair"});
    let report =
        rt.run(selection("council", options), json!("Why is the sky blue?")).await.unwrap();
    assert_eq!(answer(&report), "synthesis of 2 answers");
    let output = report.output().unwrap();
    let members = output.outputs["members"].as_array().unwrap();
    assert_eq!(members.len(), 3);
    assert_eq!(members[0]["answer"], "physicist says Why is the sky blue? (on )");
    assert_eq!(members[2]["error"]["reason"], "call_failed");

    // A replay asks no one again and gives the same answer.
    let replay = rt.replay(report.run).await.unwrap();
    assert_eq!(replay.submitted, 0);
    assert_eq!(answer(&replay), "synthesis of 2 answers");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_seat_can_have_its_own_model() {
    let counter = Counter::default();
    let journal = Journal::open_in_memory().unwrap();
    let rt = runtime(&journal, council_registry(&counter));
    let options =
        json!({"members": ["physicist"], "models": ["a/one", "b/two"], "synthesizer": "chair"});
    let report = rt.run(selection("council", options), json!("q")).await.unwrap();
    let members = report.output().unwrap().outputs["members"].clone();
    let models: Vec<&str> =
        members.as_array().unwrap().iter().map(|m| m["model"].as_str().unwrap()).collect();
    assert_eq!(models, ["a/one", "b/two"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_council_needs_members_and_an_answer() {
    let counter = Counter::default();
    let journal = Journal::open_in_memory().unwrap();
    let rt = runtime(&journal, council_registry(&counter));
    let report = rt.run(selection("council", json!({})), json!("q")).await.unwrap();
    let err = error(&report);
    assert_eq!(err.reason(), "flow_stall");
    assert!(err.to_string().contains("no members"), "{err}");

    let report = rt
        .run(
            selection("council", json!({"members": ["failing"], "synthesizer": "chair"})),
            json!("q"),
        )
        .await
        .unwrap();
    assert_eq!(error(&report).reason(), "call_failed");

    let bad = rt.run(selection("council", json!({"members": "physicist"})), Value::Null).await;
    assert!(matches!(bad, Err(FlowError::OptionsInvalid { .. })), "{bad:?}");
}

/// The seeds' `ThreeModels`, unchanged but for the language:
///
/// ```python
/// class ThreeModels(Flow):
///     id = "three-models"
///     models: tuple[str, ...] = ()
///
///     async def forward(self, question, ctx):
///         council = Flow("council", models=list(self.models))
///         return await ctx.call(council, question)
/// ```
fn three_models() -> clio_flow::FnFlow {
    clio_flow::FnFlow::new("three-models", |question: Value, ctx| async move {
        let models: Vec<String> = ctx.option("models").unwrap_or_default();
        let council = selection("council", json!({ "models": models }));
        let result = ctx.call(council, question).await?;
        Ok(clio_flow::FlowOutput::from(result))
    })
    .options(vec![clio_flow::OptionSpec::new(
        "models",
        clio_flow::OptionType::strings(),
        json!([]),
    )])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_models_as_the_seeds_write_it_asks_one_member_per_model() {
    let counter = Counter::default();
    let journal = Journal::open_in_memory().unwrap();
    let reg = council_registry(&counter)
        .this_agent(Worker::handler("self", |req| async move {
            let mut reply = if req.text.contains("The council's answers") {
                WorkerReply::text(format!(
                    "synthesis of {} answers",
                    req.text.matches("### self").count()
                ))
            } else {
                WorkerReply::text(format!("self on {}", req.model))
            };
            reply.model = req.model.clone();
            Ok(reply)
        }))
        .flow(three_models());
    let rt = runtime(&journal, reg);
    let options = json!({"models": ["a/one", "b/two", "c/three"]});
    let report = rt.run(selection("three-models", options), json!("why?")).await.unwrap();
    assert_eq!(answer(&report), "synthesis of 3 answers");

    let members = report.output().unwrap().outputs["members"].clone();
    let seats: Vec<(&str, &str, &str)> = members
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["member"].as_str().unwrap(),
                m["model"].as_str().unwrap(),
                m["answer"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        seats,
        [
            ("self", "a/one", "self on a/one"),
            ("self", "b/two", "self on b/two"),
            ("self", "c/three", "self on c/three")
        ],
        "one member per model"
    );

    // A replay asks no one again.
    let replay = rt.replay(report.run).await.unwrap();
    assert_eq!(replay.submitted, 0);
    assert_eq!(answer(&replay), "synthesis of 3 answers");
}
