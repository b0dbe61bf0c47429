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

/// A script for agent `reader`: 29 turns that each call `echo` with a page of text, then
/// an answer; and the summariser's (`compact`) answer.
fn long_script() -> String {
    let mut script = String::from("[[script]]\nagent = \"reader\"\n\n");
    for page in 1..=29 {
        script.push_str(&format!(
            "[[script.turn]]\ntext = \"Reading page {page}.\"\ntool_calls = [{{ name = \"echo\", arguments = {{ page = {page}, text = \"{}\" }} }}]\n\n",
            "lorem ipsum ".repeat(16)
        ));
    }
    script.push_str("[[script.turn]]\ntext = \"Read 29 pages.\"\n\n");
    script.push_str(
        "[[script]]\nagent = \"compact\"\n\n[[script.turn]]\ntext = \"The reader has been reading pages of lorem ipsum with echo, one page a turn.\"\n",
    );
    script
}

/// A scripted model with a 2,000-token context window, as a small local model has.
fn small_window(script: &str) -> Models {
    let provider = ScriptedProvider::from_toml(script, Path::new("long.toml")).unwrap();
    let small =
        ModelInfo::new("offline", "scripted", "scripted").with_capabilities(ModelCapabilities {
            tool_calling: true,
            vision: false,
            context_tokens: 2_000,
            output_tokens: 500,
        });
    Models::new(ModelCatalog::new(vec![small]).unwrap())
        .with_provider(std::sync::Arc::new(provider))
}

/// Issue 46 item 1: a 30-iteration task on a scripted model with a 2,000-token window.
/// Without compaction its history would outgrow the window (the scripted model refuses a
/// request past it, as a server does); with it, `PreCompact` hooks run first, the older
/// turns are summarised by a recorded `compact` task, the tokens before and after are
/// events, and a replay rebuilds the same conversation without calling any model.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_task_on_a_small_window_is_compacted_and_replays() {
    use std::sync::atomic::{AtomicU64, Ordering};
    let c = Counter::default();
    let mut reader = Worker::react("reader", "You read pages.").with_tools(&["echo"]);
    reader.max_iters = 30;
    let fired = std::sync::Arc::new(AtomicU64::new(0));
    let seen = std::sync::Arc::clone(&fired);
    let mut pre_compact = crate::gate::hook("PreCompact", "keep-pages", Default::default(), false);
    pre_compact.run = clio_flow::HookRun::Host(std::sync::Arc::new(move |event: Value| {
        seen.fetch_add(1, Ordering::SeqCst);
        assert_eq!(event["payload"]["agent"], "reader", "{event}");
        Box::pin(async move {
            let answer = json!({ "additional_context": "Keep the page numbers." });
            clio_plugins::HookOutcome::Answered(Box::new(
                clio_plugins::HookAnswer::parse(&answer.to_string()).unwrap(),
            ))
        })
    }));
    let reg = registry(&c).subagent(reader).flow(flow("reader")).hook(pre_compact);
    let journal = Journal::open_in_memory().unwrap();
    let script = long_script();
    let report = runtime_with(&journal, reg.clone(), small_window(&script))
        .run(sel("research"), json!("Read every page"))
        .await
        .unwrap();
    assert_eq!(answer(&report), "Read 29 pages.");

    let entries = journal.entries(report.run).unwrap();
    let compactions: Vec<Value> = entries
        .iter()
        .filter(|e| e.payload["command"]["event"]["event"] == "compacted")
        .map(|e| e.payload["command"]["event"].clone())
        .collect();
    assert!(!compactions.is_empty(), "the conversation was compacted");
    for event in &compactions {
        let (before, after) =
            (event["tokens_before"].as_u64().unwrap(), event["tokens_after"].as_u64().unwrap());
        assert!(before > 1_600, "compacted past 80 % of the window: {event}");
        assert!(after < before, "{event}");
        assert!(after <= 2_000, "{event}");
    }
    assert_eq!(fired.load(Ordering::SeqCst), compactions.len() as u64, "PreCompact ran first");
    let summaries: Vec<_> =
        journal.tasks(report.run).unwrap().into_iter().filter(|t| t.target == "compact").collect();
    assert_eq!(summaries.len(), compactions.len(), "each summary is a recorded task");
    assert!(summaries.iter().all(|t| t.status == clio_journal::TaskStatus::Succeeded));

    // A replay rebuilds the same conversation, compactions included, and calls nothing.
    let empty = ScriptedProvider::from_toml("", Path::new("empty.toml")).unwrap();
    let replay =
        runtime_with(&journal, reg, Models::offline(empty)).replay(report.run).await.unwrap();
    assert_eq!(answer(&replay), "Read 29 pages.");
    assert_eq!((replay.submitted, replay.steps_run), (0, 0));
}

/// Without room to compact, the small window is what a long history meets: the scripted
/// model refuses a request past it, naming both numbers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_past_the_window_is_refused_by_the_scripted_model() {
    let c = Counter::default();
    let reader = Worker::react("reader", "x".repeat(10_000)).with_tools(&["echo"]);
    let reg = registry(&c).subagent(reader).flow(flow("reader"));
    let journal = Journal::open_in_memory().unwrap();
    let report = runtime_with(&journal, reg, small_window(&long_script()))
        .run(sel("research"), json!("Read every page"))
        .await
        .unwrap();
    let err = error(&report);
    assert!(err.to_string().contains("context_exceeded"), "{err}");
}

/// A plugin that declares a `pre_compact` hook loads again.
#[test]
fn a_plugin_with_a_pre_compact_hook_loads() {
    let dir = tempfile::tempdir().unwrap();
    let clio = dir.path().join("ai.iowarp.clio");
    std::fs::create_dir_all(clio.join("hooks")).unwrap();
    std::fs::write(
        clio.join("plugin.toml"),
        "id = \"compactor\"\nversion = \"0.1.0\"\ndescription = \"Watches compactions.\"\n\n\
         [[hooks]]\nevent = \"pre_compact\"\nid = \"note\"\ncommand = \"hooks/note\"\n",
    )
    .unwrap();
    std::fs::write(clio.join("hooks/note"), "#!/bin/sh\necho '{}'\n").unwrap();
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::Permissions::from_mode(0o755);
        std::fs::set_permissions(clio.join("hooks/note"), mode).unwrap();
    }
    let plugin = clio_plugins::load_plugin(dir.path()).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(plugin.hooks.len(), 1);
}
