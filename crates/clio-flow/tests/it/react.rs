//! The `react` loop on the scripted provider: model, tool calls, model, final answer; each
//! iteration recorded so a resumed loop does not pay again; `max_iters` stops it; a model
//! that cannot meet the worker's requirements is refused with `model_requirement_unmet`.

use std::path::Path;

use clio_flow::{
    FlowOutput, FnFlow, ModelCapabilities, ModelCatalog, ModelInfo, Models, Registry, RunOutcome,
    Runtime, RuntimeConfig, ScriptedProvider, Worker,
};
use clio_journal::{EntryKind, Journal};
use serde_json::{Value, json};

use crate::support::{Counter, answer, error, registry, sel};

const SCRIPT: &str = r#"
[[script]]
agent = "researcher"
prompt = "Summarise *"

[[script.turn]]
text = "I will record a note first."
tool_calls = [{ name = "effect", arguments = { note = "solar" } }]
usage = { input_tokens = 100, output_tokens = 10 }

[[script.turn]]
text = "Perovskite cells reach 26.1 %."
usage = { input_tokens = 200, output_tokens = 20 }

[[script]]
agent = "sloppy"

[[script.turn]]
tool_calls = [{ name = "effect", arguments = "{\"path\": \"data/batch7/fat" }]

[[script.turn]]
tool_calls = [{ name = "effect", arguments = { path = "data/batch7/fatigue.csv" } }]

[[script.turn]]
text = "Done."

[[script]]
agent = "looper"

[[script.turn]]
tool_calls = [{ name = "echo", arguments = { again = true } }]

[[script.turn]]
tool_calls = [{ name = "echo", arguments = { again = true } }]

[[script.turn]]
tool_calls = [{ name = "echo", arguments = { again = true } }]
"#;

fn provider() -> ScriptedProvider {
    ScriptedProvider::from_toml(SCRIPT, Path::new("script.toml")).unwrap()
}

fn runtime_with(journal: &Journal, reg: Registry, models: Models) -> Runtime {
    let config =
        RuntimeConfig { model: "offline/scripted".into(), models, ..RuntimeConfig::default() };
    Runtime::new(journal.clone(), reg, config)
}

fn flow(target: &'static str) -> FnFlow {
    FnFlow::new("research", move |task: Value, ctx| async move {
        let r = ctx.call(target, task).await?;
        Ok(FlowOutput::from(r))
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_react_loop_calls_tools_and_replays_without_paying_again() {
    let c = Counter::default();
    let reg = registry(&c)
        .subagent(Worker::react("researcher", "You research papers.").with_tools(&["effect"]))
        .flow(flow("researcher"));
    let journal = Journal::open_in_memory().unwrap();
    let report = runtime_with(&journal, reg.clone(), Models::offline(provider()))
        .run(sel("research"), json!("Summarise the solar cells paper"))
        .await
        .unwrap();
    assert_eq!(answer(&report), "Perovskite cells reach 26.1 %.");
    assert_eq!(report.output().unwrap().model, "offline/scripted");
    assert_eq!(c.get(), 1, "the tool ran once");
    let task =
        journal.tasks(report.run).unwrap().into_iter().find(|t| t.target == "researcher").unwrap();
    assert_eq!((task.input_tokens, task.output_tokens), (300, 30));
    let steps =
        journal.entries(report.run).unwrap().iter().filter(|e| e.kind == EntryKind::Step).count();
    assert_eq!(steps, 2, "each model iteration is recorded");
    // A replay with a provider that has no script pays nothing and needs none.
    let empty = ScriptedProvider::from_toml("", Path::new("empty.toml")).unwrap();
    let replay =
        runtime_with(&journal, reg, Models::offline(empty)).replay(report.run).await.unwrap();
    assert_eq!(answer(&replay), answer(&report));
    assert_eq!((replay.submitted, replay.steps_run), (0, 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_iters_stops_the_loop() {
    let c = Counter::default();
    let mut looper = Worker::react("looper", "").with_tools(&["echo"]);
    looper.max_iters = 2;
    let reg = registry(&c).subagent(looper).flow(flow("looper"));
    let journal = Journal::open_in_memory().unwrap();
    let report = runtime_with(&journal, reg, Models::offline(provider()))
        .run(sel("research"), json!("go"))
        .await
        .unwrap();
    let err = error(&report);
    assert_eq!(err.reason(), "call_stopped");
    assert!(err.to_string().contains("max_iters"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_that_cannot_meet_the_requirements_is_refused() {
    let c = Counter::default();
    let mut seer = Worker::react("researcher", "");
    seer.requires.vision = true;
    let reg = registry(&c).subagent(seer).flow(flow("researcher"));
    let small =
        ModelInfo::new("offline", "scripted", "scripted").with_capabilities(ModelCapabilities {
            tool_calling: true,
            vision: false,
            context_tokens: 8_000,
            output_tokens: 1_000,
        });
    let models = Models::new(ModelCatalog::new(vec![small]).unwrap())
        .with_provider(std::sync::Arc::new(provider()));
    let journal = Journal::open_in_memory().unwrap();
    let report = runtime_with(&journal, reg, models)
        .run(sel("research"), json!("Summarise x"))
        .await
        .unwrap();
    let RunOutcome::Failed(err) = &report.outcome else { panic!("{:?}", report.outcome) };
    assert_eq!(err.reason(), "call_refused");
    assert_eq!(err.details()["refusal"], "model_requirement_unmet");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tool_arguments_that_are_not_a_json_object_never_reach_the_tool() {
    let c = Counter::default();
    let reg = registry(&c)
        .subagent(Worker::react("sloppy", "You call tools.").with_tools(&["effect"]))
        .flow(flow("sloppy"));
    let journal = Journal::open_in_memory().unwrap();
    let report = runtime_with(&journal, reg, Models::offline(provider()))
        .run(sel("research"), json!("go"))
        .await
        .unwrap();
    assert_eq!(answer(&report), "Done.");
    assert_eq!(c.get(), 1, "only the call with a JSON object ran");
    // The loop went on after the refused call: the model sent it again, whole.
    let tools: Vec<_> =
        journal.tasks(report.run).unwrap().into_iter().filter(|t| t.target == "effect").collect();
    assert_eq!(tools.len(), 1, "one task for the one call that ran");
}
