//! A subagent's declarations take effect at run time: the plugins it carries bring their
//! tools (a carried plugin the run lacks stops the run before it starts), its preferred
//! provider and effort choose its model and travel on its requests, its structured
//! outputs are the only way its loop ends, and an internal subagent answers only its own
//! plugin's code. Work a react loop starts with `run_flow` or `run_workflow` is delivered
//! into its conversation when it ends, at turn boundaries the journal records, so a replay
//! or a resume after a crash delivers the same results at the same turns.

use std::path::Path;
use std::sync::{Arc, Mutex};

use clio_flow::{
    FlowOutput, FnFlow, Message, ModelCapabilities, ModelCatalog, ModelInfo, Models, Registry,
    RunOutcome, Runtime, RuntimeConfig, ScriptedProvider, Tool, Worker,
    register_orchestration_tools, register_plugin,
};
use clio_journal::{Journal, RunId, TaskStatus};
use clio_plugins::{Plugin, Subagent};
use clio_spec::Prefers;
use serde_json::{Value, json};

use crate::gate::Recorder;
use crate::support::{answer, error, sel};

/// A flow `id` that calls `target` on its task and answers with the result (its outputs
/// as `outputs`).
fn caller(id: &str, target: &'static str) -> FnFlow {
    FnFlow::new(id, move |task: Value, ctx| async move {
        let r = ctx.call(target, task).await?;
        Ok(FlowOutput::from(r))
    })
}

/// A runtime on `scripted` (recorded by the returned recorder), run model `offline/scripted`.
fn runtime(journal: &Journal, reg: Registry, text: &str) -> (Runtime, Arc<Recorder>) {
    let scripted = ScriptedProvider::from_toml(text, Path::new("declarations.toml")).unwrap();
    let recorder = Arc::new(Recorder { inner: scripted.clone(), seen: Mutex::new(Vec::new()) });
    let config = RuntimeConfig {
        model: "offline/scripted".into(),
        models: Models::offline(scripted).with_provider(recorder.clone()),
        ..RuntimeConfig::default()
    };
    (Runtime::new(journal.clone(), reg, config), recorder)
}

/// A read-only tool of plugin `plugin` (allowed without a question) that answers its name.
fn plugin_tool(plugin: &str, name: &'static str) -> Tool {
    Tool::new(name, move |_args: Value| async move { Ok(json!(name)) })
        .of_plugin(plugin)
        .read_only()
}

/// The texts of the user messages of request `n`.
fn user_messages(recorder: &Recorder, n: usize) -> Vec<String> {
    recorder.seen.lock().unwrap()[n]
        .messages
        .iter()
        .filter_map(|m| match m {
            Message::User { content, .. } => Some(content.clone()),
            _ => None,
        })
        .collect()
}

// --- plugins ---------------------------------------------------------------------------

fn plugin_a(carries: &[&str]) -> Plugin {
    let mut helper = Subagent::new("helper");
    helper.plugins = carries.iter().map(|p| (*p).to_owned()).collect();
    Plugin::builder("a", "1.0.0")
        .tool(clio_plugins::Tool::new("a_tool", "A's tool."))
        .subagent(helper)
        .build()
        .unwrap()
}

fn plugin_b() -> Plugin {
    Plugin::builder("b", "1.0.0")
        .tool(clio_plugins::Tool::new("b_tool", "B's tool."))
        .build()
        .unwrap()
}

const HELPER: &str = r#"
[[script]]
agent = "helper"

[[script.turn]]
tool_calls = [{ name = "b_tool", arguments = {} }, { name = "a_tool", arguments = {} }]

[[script.turn]]
text = "used both"
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subagent_without_tools_has_its_plugins_and_the_carried_plugins_tools() {
    let ws = clio_flow::Workspace::new(None);
    // The carried plugin is registered after the one that carries it: order does not matter.
    let reg = register_plugin(Registry::new(), &plugin_a(&["b@^1"]), true, &ws).unwrap();
    let reg = register_plugin(reg, &plugin_b(), true, &ws).unwrap();
    let reg = reg.tool(plugin_tool("a", "a_tool")).tool(plugin_tool("b", "b_tool"));
    let reg = reg.flow(caller("go", "helper"));
    let journal = Journal::open_in_memory().unwrap();
    let (rt, recorder) = runtime(&journal, reg.clone(), HELPER);
    let report = rt.run(sel("go"), json!("work")).await.unwrap();
    assert_eq!(answer(&report), "used both");
    let mut listed = recorder.listed(0);
    listed.sort();
    assert_eq!(listed, ["a_tool", "b_tool"]);
    assert_eq!(recorder.tool_results(), ["b_tool", "a_tool"]);
    let replay = runtime(&journal, reg, HELPER).0.replay(report.run).await.unwrap();
    assert_eq!(answer(&replay), "used both");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_carried_built_in_plugin_brings_the_tools_its_declaration_lists() {
    let ws = clio_flow::Workspace::new(None);
    let reg = register_orchestration_tools(Registry::new());
    let reg = register_plugin(reg, &plugin_a(&["orchestration"]), true, &ws).unwrap();
    let reg = reg.tool(plugin_tool("a", "a_tool")).flow(caller("go", "helper"));
    let text = "[[script]]\nagent = \"helper\"\n\n[[script.turn]]\ntext = \"ok\"\n";
    let journal = Journal::open_in_memory().unwrap();
    let (rt, recorder) = runtime(&journal, reg, text);
    assert_eq!(answer(&rt.run(sel("go"), json!("work")).await.unwrap()), "ok");
    let listed = recorder.listed(0);
    for tool in ["a_tool", "run_flow", "run_workflow", "flow_result", "council_run"] {
        assert!(listed.contains(&tool.to_owned()), "{tool} is offered: {listed:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subagent_carrying_a_plugin_the_run_lacks_stops_the_run_before_it_starts() {
    let ws = clio_flow::Workspace::new(None);
    let reg = register_plugin(Registry::new(), &plugin_a(&["b"]), true, &ws).unwrap();
    let reg = reg.tool(plugin_tool("a", "a_tool")).flow(caller("go", "helper"));
    let journal = Journal::open_in_memory().unwrap();
    let err = runtime(&journal, reg, HELPER).0.run(sel("go"), json!("work")).await.unwrap_err();
    assert_eq!(err.details()["refusal"], "plugin_not_loaded");
    assert!(
        err.to_string()
            .contains("subagent helper of plugin a carries plugin b, which is not loaded"),
        "{err}"
    );
    assert!(journal.runs(&Default::default()).unwrap().is_empty(), "no run was created");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_carried_reference_that_does_not_parse_fails_registration() {
    let mut plugin = plugin_a(&[]);
    plugin.subagents[0].plugins = vec!["B!".into()];
    let err = register_plugin(Registry::new(), &plugin, true, &clio_flow::Workspace::new(None))
        .unwrap_err();
    assert!(err.to_string().contains("subagent helper carries \"B!\""), "{err}");
}

// --- prefers -----------------------------------------------------------------------------

const PREFERS: &str = r#"
[[script]]
agent = "*"

[[script.turn]]
text = "answered"
"#;

/// Two models: `local/small` on provider `scripted` (the run's), `work/big` on `bigco`.
fn two_providers(text: &str) -> (Models, Arc<Recorder>, Arc<Recorder>) {
    let caps = ModelCapabilities { tool_calling: true, ..ModelCapabilities::default() };
    let catalog = ModelCatalog::new(vec![
        ModelInfo::new("local", "small", "scripted").with_capabilities(caps),
        ModelInfo::new("work", "big", "bigco").with_capabilities(caps),
    ])
    .unwrap();
    let small = ScriptedProvider::from_toml(text, Path::new("p.toml")).unwrap();
    let big = small.clone().named("bigco");
    let small = Arc::new(Recorder { inner: small, seen: Mutex::new(Vec::new()) });
    let big = Arc::new(Recorder { inner: big, seen: Mutex::new(Vec::new()) });
    let models = Models::new(catalog).with_provider(small.clone()).with_provider(big.clone());
    (models, small, big)
}

fn prefers_plugin(provider: &str, effort: &str) -> Plugin {
    let mut sub = Subagent::new("picky");
    sub.tools = Some(Vec::new());
    sub.prefers =
        Some(Prefers { provider: provider.into(), effort: effort.into(), ..Prefers::default() });
    Plugin::builder("p", "1.0.0").subagent(sub).build().unwrap()
}

async fn run_picky(provider: &str, effort: &str) -> (String, Arc<Recorder>, Arc<Recorder>) {
    let ws = clio_flow::Workspace::new(None);
    let reg = register_plugin(Registry::new(), &prefers_plugin(provider, effort), true, &ws)
        .unwrap()
        .flow(FnFlow::new("go", |task: Value, ctx| async move {
            let r = ctx.call("picky", task).await?;
            Ok(FlowOutput::text(r.model))
        }));
    let (models, small, big) = two_providers(PREFERS);
    let config = RuntimeConfig { model: "local/small".into(), models, ..RuntimeConfig::default() };
    let journal = Journal::open_in_memory().unwrap();
    let report = Runtime::new(journal, reg, config).run(sel("go"), json!("hi")).await.unwrap();
    (answer(&report), small, big)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_preferred_provider_chooses_the_model_and_the_effort_travels_on_the_request() {
    let (model, small, big) = run_picky("bigco", "high").await;
    assert_eq!(model, "work/big");
    assert!(small.seen.lock().unwrap().is_empty());
    let seen = big.seen.lock().unwrap();
    assert_eq!((seen[0].model.as_str(), seen[0].effort.as_str()), ("work/big", "high"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_preferred_provider_that_serves_no_model_is_passed_over_for_the_run_model() {
    let (model, small, big) = run_picky("nowhere", "low").await;
    assert_eq!(model, "local/small");
    assert!(big.seen.lock().unwrap().is_empty());
    assert_eq!(small.seen.lock().unwrap()[0].effort, "low");
}

// --- structured outputs ----------------------------------------------------------------

const STRUCTURED: &str = r#"
[[script]]
agent = "judge"

[[script.turn]]
text = "It looks fine to me."

[[script.turn]]
tool_calls = [{ name = "verdict", arguments = { score = "high", extra = 1 } }]

[[script.turn]]
tool_calls = [{ name = "verdict", arguments = { score = 4, label = "good" } }]
"#;

fn judge_registry(max_iters: u64) -> Registry {
    let mut judge = Worker::react("judge", "You judge.");
    judge.max_iters = max_iters;
    judge.structured_outputs.insert(
        "verdict".into(),
        json!({
            "type": "object",
            "properties": { "score": { "type": "integer" }, "label": { "enum": ["good", "bad"] } },
            "required": ["score", "label"],
            "additionalProperties": false
        }),
    );
    judge.structured_outputs.insert("skip".into(), json!({ "type": "object" }));
    Registry::new().subagent(judge).flow(caller("go", "judge"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_structured_output_ends_the_loop_only_with_arguments_that_validate() {
    let journal = Journal::open_in_memory().unwrap();
    let (rt, recorder) = runtime(&journal, judge_registry(0), STRUCTURED);
    let report = rt.run(sel("go"), json!("judge this")).await.unwrap();
    let RunOutcome::Succeeded(out) = &report.outcome else { panic!("{:?}", report.outcome) };
    assert_eq!(
        serde_json::from_str::<Value>(&out.answer).unwrap(),
        json!({ "score": 4, "label": "good" })
    );
    assert_eq!(out.outputs["structured_output"], "verdict");
    let mut listed = recorder.listed(0);
    listed.sort();
    assert_eq!(listed, ["skip", "verdict"], "each output is offered as a tool");
    // The text answer got a reminder; the invalid call got every validation error.
    let reminder = user_messages(&recorder, 1).pop().unwrap();
    assert!(reminder.contains("one of your structured outputs (verdict, skip)"), "{reminder}");
    let refused = recorder.tool_results().pop().unwrap();
    assert!(refused.contains("structured_output_invalid"), "{refused}");
    assert!(refused.contains("$.score: expected integer, found string"), "{refused}");
    assert!(refused.contains("$: property \\\"label\\\" is required"), "{refused}");
    assert!(refused.contains("$: property \\\"extra\\\" is not allowed"), "{refused}");
    let replay =
        runtime(&journal, judge_registry(0), STRUCTURED).0.replay(report.run).await.unwrap();
    assert_eq!(format!("{:?}", replay.outcome), format!("{:?}", report.outcome));
    assert_eq!((replay.submitted, replay.steps_run), (0, 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reminder_counts_as_an_iteration() {
    let journal = Journal::open_in_memory().unwrap();
    let (rt, _) = runtime(&journal, judge_registry(2), STRUCTURED);
    let report = rt.run(sel("go"), json!("judge this")).await.unwrap();
    let err = error(&report);
    assert!(err.to_string().contains("judge reached max_iters (2)"), "{err}");
}

#[test]
fn a_plugin_built_in_code_with_a_schema_outside_the_subset_fails_registration() {
    let mut sub = Subagent::new("shaped");
    sub.structured_outputs.insert("n".into(), json!({ "type": "integer", "minimum": 1 }));
    let plugin = Plugin::builder("s", "1.0.0").subagent(sub).build().unwrap();
    let err = register_plugin(Registry::new(), &plugin, true, &clio_flow::Workspace::new(None))
        .unwrap_err();
    assert!(err.to_string().contains("subagent shaped: structured output n: minimum"), "{err}");
}

// --- internal ----------------------------------------------------------------------------

const SECRET: &str = r#"
[[script]]
agent = "secret"

[[script.turn]]
text = "the secret answer"
"#;

/// Plugin `a` with the internal subagent `secret` and its flow `a_flow` calling it; plugin
/// `b`'s flow `b_flow` and the host's flow `host_flow` call it too.
fn internal_registry() -> Registry {
    let mut secret = Subagent::new("secret");
    secret.internal = true;
    secret.tools = Some(Vec::new());
    let a = Plugin::builder("a", "1.0.0")
        .subagent(secret)
        .flow(clio_plugins::FlowDecl::host("a_flow", "A's flow."))
        .build()
        .unwrap();
    let ws = clio_flow::Workspace::new(None);
    register_plugin(Registry::new(), &a, true, &ws)
        .unwrap()
        .plugin("b", "1.0.0", true)
        .plugin_flow("a", caller("a_flow", "secret"))
        .plugin_flow("b", caller("b_flow", "secret"))
        .flow(caller("host_flow", "secret"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_internal_subagent_answers_its_own_plugins_flow() {
    let journal = Journal::open_in_memory().unwrap();
    let (rt, _) = runtime(&journal, internal_registry(), SECRET);
    let report = rt.run(sel("a_flow"), json!("tell")).await.unwrap();
    assert_eq!(answer(&report), "the secret answer");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_internal_subagent_refuses_another_plugins_flow_and_the_hosts() {
    for (flow, caller) in [("b_flow", "plugin b's code"), ("host_flow", "code of no plugin")] {
        let journal = Journal::open_in_memory().unwrap();
        let (rt, recorder) = runtime(&journal, internal_registry(), SECRET);
        let report = rt.run(sel(flow), json!("tell")).await.unwrap();
        let err = error(&report);
        assert_eq!(err.details()["refusal"], "subagent_internal", "{flow}");
        let text = err.to_string();
        assert!(text.contains("subagent secret is internal to plugin a"), "{text}");
        assert!(text.contains(caller), "{text}");
        assert!(recorder.seen.lock().unwrap().is_empty(), "the subagent never ran");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_internal_subagent_answers_its_own_plugins_workflow_file() {
    let mut secret = Subagent::new("secret");
    secret.internal = true;
    secret.tools = Some(Vec::new());
    let steps = json!({ "steps": [{ "id": "ask", "target": "secret", "input": "$task" }] });
    let file = clio_plugins::FlowDecl {
        id: "a_wf".into(),
        description: "A's workflow file.".into(),
        source: clio_plugins::FlowSource::Workflow {
            path: "flows/a_wf.json".into(),
            workflow: steps,
        },
    };
    let a = Plugin::builder("a", "1.0.0").subagent(secret).flow(file).build().unwrap();
    let ws = clio_flow::Workspace::new(None);
    let reg = register_plugin(Registry::new(), &a, true, &ws).unwrap();
    let journal = Journal::open_in_memory().unwrap();
    let (rt, recorder) = runtime(&journal, reg, SECRET);
    let report = rt.run(sel("a_wf"), json!("tell")).await.unwrap();
    assert!(matches!(report.outcome, RunOutcome::Succeeded(_)), "{:?}", report.outcome);
    assert_eq!(recorder.seen.lock().unwrap().len(), 1, "the subagent ran once");
}

// --- background results ----------------------------------------------------------------

/// `boss` starts `slow` with run_flow, answers while it runs, gets its result, and answers
/// again.
const BOSS: &str = r#"
[[script]]
agent = "boss"

[[script.turn]]
tool_calls = [{ name = "run_flow", arguments = { flow = "slow", input = "x" } }]

[[script.turn]]
text = "I will wait for it."

[[script.turn]]
text = "It arrived."
"#;

/// `boss` starts a workflow whose step names the internal subagent `secret`.
const WORKFLOW: &str = r#"
[[script]]
agent = "boss"

[[script.turn]]
tool_calls = [{ name = "run_workflow", arguments = { workflow = { steps = [{ id = "ask", target = "secret", input = "tell" }] } } }]

[[script.turn]]
text = "Waiting."

[[script.turn]]
text = "It arrived."
"#;

/// The registry of one process: `slow` waits on `gate` (never ends when `None`), then
/// answers `slow(<task>)`.
fn boss_registry(gate: Option<Arc<tokio::sync::Notify>>) -> Registry {
    let slow = FnFlow::new("slow", move |task: Value, _ctx| {
        let gate = gate.clone();
        async move {
            match &gate {
                Some(gate) => gate.notified().await,
                None => std::future::pending::<()>().await,
            }
            Ok(FlowOutput::text(format!("slow({})", task.as_str().unwrap_or(""))))
        }
    });
    let boss = Worker::react("boss", "You lead.").with_tools(&["run_flow", "run_workflow"]);
    register_orchestration_tools(internal_registry())
        .subagent(boss)
        .flow(slow)
        .flow(caller("lead", "boss"))
}

/// Every user message the boss's model saw last, after its task.
fn deliveries(recorder: &Recorder) -> Vec<String> {
    let seen = recorder.seen.lock().unwrap();
    let last = seen.iter().rev().find(|r| r.agent == "boss").unwrap();
    last.messages
        .iter()
        .filter_map(|m| match m {
            Message::User { content, .. } if content.starts_with("Background work") => {
                Some(content.clone())
            }
            _ => None,
        })
        .collect()
}

/// The keys of the delivery steps recorded in run `run`, with what each delivered.
fn delivery_steps(journal: &Journal, run: RunId) -> Vec<(String, Vec<u64>)> {
    journal
        .entries(run)
        .unwrap()
        .into_iter()
        .filter_map(|e| {
            let identity = e.identity?;
            let key = identity.split_once("key:background:")?.1.to_owned();
            let handles = e.payload["result"]
                .as_array()?
                .iter()
                .filter_map(|d| d["handle"].as_u64())
                .collect();
            Some((key, handles))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn background_results_arrive_in_the_conversation_and_replay_exactly() {
    let gate = Arc::new(tokio::sync::Notify::new());
    let journal = Journal::open_in_memory().unwrap();
    let (rt, recorder) = runtime(&journal, boss_registry(Some(gate.clone())), BOSS);
    let run = rt.create(sel("lead"), json!("go")).await.unwrap();
    let driver = tokio::spawn({
        let rt = rt.clone();
        async move { rt.resume(run).await }
    });
    // The loop waits after "I will wait for it." until slow ends.
    wait_for(|| recorder.seen.lock().unwrap().len() >= 2).await;
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    assert!(!driver.is_finished(), "the loop does not end with work pending");
    gate.notify_one();
    let report = driver.await.unwrap().unwrap();
    assert_eq!(answer(&report), "It arrived.");
    let tasks = journal.tasks(run).unwrap();
    let slow = tasks.iter().find(|t| t.target == "slow").unwrap().id.0;
    assert_eq!(
        deliveries(&recorder),
        [format!(
            "Background work {slow} (run_flow of slow) has ended: succeeded.\n\nIts answer:\nslow(x)"
        )]
    );
    // Each boundary with work pending is recorded, with what it delivered.
    let steps = delivery_steps(&journal, run);
    assert_eq!(steps, [("1".to_owned(), vec![]), ("1:end".to_owned(), vec![slow])]);
    let (rt2, replayed) = runtime(&journal, boss_registry(None), BOSS);
    let replay = rt2.replay(run).await.unwrap();
    assert_eq!(format!("{:?}", replay.outcome), format!("{:?}", report.outcome));
    assert_eq!((replay.submitted, replay.steps_run), (0, 0));
    assert!(replayed.seen.lock().unwrap().is_empty(), "the replay asked no model");
}

/// A process stops while the loop waits for `slow`; the next process resumes the run:
/// the boundary recorded as delivering nothing delivers nothing again, `slow` finishes
/// once, on its own task, and its result arrives at the turn the loop was waiting at.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resume_after_a_crash_delivers_at_the_recorded_turns() {
    let journal = Journal::open_in_memory().unwrap();
    let config = |owner: &str, text: &str| {
        let scripted = ScriptedProvider::from_toml(text, Path::new("boss.toml")).unwrap();
        let recorder = Arc::new(Recorder { inner: scripted.clone(), seen: Mutex::new(Vec::new()) });
        let config = RuntimeConfig {
            owner: owner.into(),
            model: "offline/scripted".into(),
            models: Models::offline(scripted).with_provider(recorder.clone()),
            ..RuntimeConfig::default()
        };
        (config, recorder)
    };
    let (first, first_seen) = config("proc-1", BOSS);
    let rt = Runtime::new(journal.clone(), boss_registry(None), first);
    let run = rt.create(sel("lead"), json!("go")).await.unwrap();
    let driver = tokio::spawn({
        let rt = rt.clone();
        async move { rt.resume(run).await }
    });
    wait_for(|| first_seen.seen.lock().unwrap().len() >= 2).await;
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    driver.abort();
    let _ = driver.await;
    drop(rt);
    journal.reconcile(&["proc-2"]).unwrap();
    let before = delivery_steps(&journal, run);
    assert_eq!(before, [("1".to_owned(), vec![])], "only the boundary before the answer");

    let gate = Arc::new(tokio::sync::Notify::new());
    gate.notify_one();
    let (second, second_seen) = config("proc-2", BOSS);
    let rt = Runtime::new(journal.clone(), boss_registry(Some(gate)), second);
    let report = rt.resume(run).await.unwrap();
    assert_eq!(answer(&report), "It arrived.");
    let tasks = journal.tasks(run).unwrap();
    let slows: Vec<_> = tasks.iter().filter(|t| t.target == "slow").collect();
    assert_eq!(slows.len(), 1, "{tasks:?}");
    assert_eq!(slows[0].status, TaskStatus::Succeeded);
    let slow = slows[0].id.0;
    let after = delivery_steps(&journal, run);
    assert_eq!(after[0], ("1".to_owned(), vec![]), "the recorded boundary stands");
    assert_eq!(after[1], ("1:end".to_owned(), vec![slow]));
    let got = deliveries(&second_seen);
    assert!(got[0].contains("slow(x)"), "{got:?}");
    let replay = rt.replay(run).await.unwrap();
    assert_eq!(format!("{:?}", replay.outcome), format!("{:?}", report.outcome));
}

/// An agent's workflow naming another plugin's internal subagent fails, and the refusal
/// arrives in the agent's conversation as the workflow's error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workflow_naming_an_internal_subagent_fails_and_its_error_arrives() {
    let journal = Journal::open_in_memory().unwrap();
    let (rt, recorder) = runtime(&journal, boss_registry(None), WORKFLOW);
    let report = rt.run(sel("lead"), json!("go")).await.unwrap();
    assert!(matches!(report.outcome, RunOutcome::Succeeded(_)), "{:?}", report.outcome);
    let tasks = journal.tasks(report.run).unwrap();
    let workflow = tasks.iter().find(|t| t.target == "workflow").unwrap();
    assert_eq!(workflow.status, TaskStatus::Failed);
    assert!(!tasks.iter().any(|t| t.target == "secret"), "the subagent never ran");
    let got = deliveries(&recorder);
    assert_eq!(got.len(), 1, "{got:?}");
    let head =
        format!("Background work {} (run_workflow of workflow) has ended: failed.", workflow.id.0);
    assert!(got[0].starts_with(&head), "{}", got[0]);
    assert!(got[0].contains("subagent secret is internal to plugin a"), "{}", got[0]);
    let replay =
        runtime(&journal, boss_registry(None), WORKFLOW).0.replay(report.run).await.unwrap();
    assert_eq!(format!("{:?}", replay.outcome), format!("{:?}", report.outcome));
}

async fn wait_for(done: impl Fn() -> bool) {
    for _ in 0..2000 {
        if done() {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    panic!("the condition never held");
}
