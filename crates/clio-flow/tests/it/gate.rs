//! The gate around tool calls at run time: the permission order (a deployment deny beats a
//! person's allow, a person's rule beats the tool's default, unset follows `read_only`),
//! deny hides the tool, `ask` is a durable question answered across drives and recorded as
//! a permission receipt, command hooks (deny, exit 2, failure open and closed, modify, two
//! modifies, `PostToolUse` context) recorded as events, deferred tools loaded with
//! `search_tools`, and `callers` refusals from the agent and from code.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use clio_flow::{
    FlowOutput, FnFlow, HookRun, Message, ModelFuture, ModelInfo, ModelProvider, ModelRequest,
    Models, Registry, RunOutcome, RunReport, Runtime, RuntimeConfig, RuntimeHook, ScriptedProvider,
    Tool, Worker,
};
use clio_journal::{EntryKind, Journal};
use clio_plugins::{
    Callers, CallersRule, Hook, HookAnswer, HookEventKind, HookOutcome, Permission, PermissionRule,
    PermissionSettings, ToolOptions,
};
use serde_json::{Map, Value, json};

use crate::support::{answer, sel};

/// A provider that serves a script and remembers every request it got.
#[derive(Debug)]
pub(crate) struct Recorder {
    pub(crate) inner: ScriptedProvider,
    pub(crate) seen: Mutex<Vec<ModelRequest>>,
}

impl ModelProvider for Recorder {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn complete<'a>(&'a self, model: &'a ModelInfo, request: &'a ModelRequest) -> ModelFuture<'a> {
        self.seen.lock().unwrap().push(request.clone());
        self.inner.complete(model, request)
    }
}

impl Recorder {
    /// The names of the tools listed in request `n`.
    pub(crate) fn listed(&self, n: usize) -> Vec<String> {
        self.seen.lock().unwrap()[n].tools.iter().map(|t| t.name.clone()).collect()
    }

    /// The description of tool `name` in request `n`.
    pub(crate) fn description(&self, n: usize, name: &str) -> String {
        let seen = self.seen.lock().unwrap();
        seen[n].tools.iter().find(|t| t.name == name).map(|t| t.description.clone()).unwrap()
    }

    /// The tool results the model saw in the last request.
    pub(crate) fn tool_results(&self) -> Vec<String> {
        let seen = self.seen.lock().unwrap();
        seen.last()
            .unwrap()
            .messages
            .iter()
            .filter_map(|m| match m {
                Message::Tool { content, .. } => Some(content.clone()),
                _ => None,
            })
            .collect()
    }
}

/// A tool of plugin `files` that remembers the arguments of each run.
pub(crate) fn tool(name: &str, runs: &Arc<Mutex<Vec<Value>>>) -> Tool {
    let runs = Arc::clone(runs);
    Tool::new(name, move |args: Value| {
        let runs = Arc::clone(&runs);
        async move {
            runs.lock().unwrap().push(args.clone());
            Ok(json!({ "wrote": args }))
        }
    })
    .describe(format!("The {name} tool."))
    .of_plugin("files")
}

pub(crate) fn allowed(tool: Tool) -> Tool {
    tool.options(ToolOptions { permission: Some(Permission::Allow), ..ToolOptions::default() })
}

/// A script where agent `worker` calls `calls` (name, arguments) one per turn, then answers.
pub(crate) fn script(calls: &[(&str, Value)]) -> String {
    let mut s = String::from("[[script]]\nagent = \"worker\"\n");
    for (name, args) in calls {
        s.push_str(&format!(
            "\n[[script.turn]]\ntool_calls = [{{ name = \"{name}\", arguments = {} }}]\n",
            toml_inline(args)
        ));
    }
    // Twice: work started with run_flow or run_workflow that is still running when the
    // model first answers arrives in the conversation, and the model answers once more.
    s.push_str("\n[[script.turn]]\ntext = \"done\"\n");
    s.push_str("\n[[script.turn]]\ntext = \"done\"\n");
    s
}

fn toml_inline(v: &Value) -> String {
    match v {
        Value::Object(m) => {
            let parts: Vec<String> =
                m.iter().map(|(k, v)| format!("{k} = {}", toml_inline(v))).collect();
            format!("{{ {} }}", parts.join(", "))
        }
        Value::Array(items) => {
            let parts: Vec<String> = items.iter().map(toml_inline).collect();
            format!("[{}]", parts.join(", "))
        }
        other => other.to_string(),
    }
}

/// The flow `agent`: calls the react subagent `worker`, then reads the permission receipts.
pub(crate) fn agent_flow() -> FnFlow {
    FnFlow::new("agent", |task: Value, ctx| async move {
        let r = ctx.call("worker", task).await?;
        let receipts = ctx.permission_receipts(false).await?;
        let mut out = Map::new();
        out.insert("answer".into(), Value::String(r.answer));
        out.insert("receipts".into(), receipts);
        Ok(FlowOutput::mapping(out))
    })
}

pub(crate) struct Setup {
    pub(crate) tools: Vec<Tool>,
    pub(crate) hooks: Vec<RuntimeHook>,
    pub(crate) settings: PermissionSettings,
    pub(crate) script: String,
}

pub(crate) struct Ran {
    pub(crate) rt: Runtime,
    pub(crate) journal: Journal,
    pub(crate) report: RunReport,
    pub(crate) recorder: Arc<Recorder>,
}

pub(crate) fn runtime_of(setup: &Setup, journal: &Journal) -> (Runtime, Arc<Recorder>) {
    let names: Vec<&str> = setup.tools.iter().map(|t| t.name.as_str()).collect();
    let mut reg = Registry::new()
        .subagent(Worker::react("worker", "You work.").with_tools(&names))
        .flow(agent_flow());
    for t in &setup.tools {
        reg = reg.tool(t.clone());
    }
    for h in &setup.hooks {
        reg = reg.hook(h.clone());
    }
    let scripted = ScriptedProvider::from_toml(&setup.script, Path::new("gate.toml")).unwrap();
    let recorder = Arc::new(Recorder { inner: scripted.clone(), seen: Mutex::new(Vec::new()) });
    let models = Models::offline(scripted).with_provider(recorder.clone());
    // Hook programs run in the sandbox, which lets them write only the workspace: the
    // folder of the hook scripts is the workspace, so each may keep its `.event` file.
    let workspace = setup.hooks.iter().find_map(|h| match &h.run {
        HookRun::Command { program, .. } => program.parent().map(Path::to_path_buf),
        HookRun::Host(_) | HookRun::Contextual(_) => None,
    });
    let config = RuntimeConfig {
        model: "offline/scripted".into(),
        models,
        permissions: setup.settings.clone(),
        workspace,
        ..RuntimeConfig::default()
    };
    (Runtime::new(journal.clone(), reg, config), recorder)
}

pub(crate) async fn run(setup: &Setup) -> Ran {
    let journal = Journal::open_in_memory().unwrap();
    let (rt, recorder) = runtime_of(setup, &journal);
    let report = rt.run(sel("agent"), json!("go")).await.unwrap();
    Ran { rt, journal, report, recorder }
}

pub(crate) fn receipts(report: &RunReport) -> Vec<Value> {
    let out = report.output().unwrap_or_else(|| panic!("{:?}", report.outcome));
    out.outputs["receipts"].as_array().unwrap().clone()
}

fn rule(tool: &str, permission: Permission) -> PermissionRule {
    PermissionRule { tool: tool.into(), permission }
}

pub(crate) fn runs() -> Arc<Mutex<Vec<Value>>> {
    Arc::new(Mutex::new(Vec::new()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deployment_deny_beats_a_person_allow_and_hides_the_tool() {
    let writes = runs();
    let setup = Setup {
        tools: vec![tool("write", &writes), allowed(tool("look", &runs()))],
        hooks: Vec::new(),
        settings: PermissionSettings {
            deployment: vec![rule("files/write", Permission::Deny)],
            person: vec![rule("write", Permission::Allow)],
            ..PermissionSettings::default()
        },
        script: script(&[("write", json!({ "text": "hi" }))]),
    };
    let ran = run(&setup).await;
    assert_eq!(answer(&ran.report), "done");
    assert_eq!(ran.recorder.listed(0), vec!["look"], "a denied tool is not listed");
    assert!(writes.lock().unwrap().is_empty(), "the denied tool never ran");
    let results = ran.recorder.tool_results();
    assert!(results[0].contains("permission_denied"), "{results:?}");
    let receipts = receipts(&ran.report);
    assert_eq!(receipts.len(), 1);
    assert_eq!(receipts[0]["decision"], "deny");
    assert_eq!(receipts[0]["layer"], "deployment");
    assert_eq!(receipts[0]["rule"], "files/write");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_rule_beats_the_tool_default_and_unset_follows_read_only() {
    let writes = runs();
    let looks = runs();
    let denied_by_default = tool("write", &writes)
        .options(ToolOptions { permission: Some(Permission::Deny), ..ToolOptions::default() });
    let setup = Setup {
        tools: vec![denied_by_default, tool("look", &looks).read_only()],
        hooks: Vec::new(),
        settings: PermissionSettings {
            person: vec![rule("write", Permission::Allow)],
            ..PermissionSettings::default()
        },
        script: script(&[("write", json!({ "text": "hi" })), ("look", json!({ "at": "x" }))]),
    };
    let ran = run(&setup).await;
    assert_eq!(answer(&ran.report), "done", "no question was asked");
    assert_eq!(writes.lock().unwrap().len(), 1, "the person's allow beats the tool's deny");
    assert_eq!(looks.lock().unwrap().len(), 1, "an unset read-only tool is allowed");
    assert_eq!(ran.recorder.listed(0), vec!["write", "look"]);
    assert!(receipts(&ran.report).is_empty(), "plain allows leave no receipt");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unset_side_effecting_tool_asks_durably_and_the_answer_is_a_receipt() {
    let writes = runs();
    let setup = Setup {
        tools: vec![tool("write", &writes)],
        hooks: Vec::new(),
        settings: PermissionSettings::default(),
        script: script(&[("write", json!({ "text": "hi" })), ("write", json!({ "text": "2" }))]),
    };
    let ran = run(&setup).await;
    let RunOutcome::AwaitingInput(qs) = &ran.report.outcome else {
        panic!("{:?}", ran.report.outcome)
    };
    assert_eq!(qs[0].schema, "bool");
    assert!(qs[0].text.contains("write"), "{}", qs[0].text);
    assert!(writes.lock().unwrap().is_empty());
    let run_id = ran.report.run;
    // Another runtime on the same journal answers and resumes, as `clio runs answer` and
    // `clio runs resume` do.
    let (rt, _) = runtime_of(&setup, &ran.journal);
    rt.answer(run_id, qs[0].id, "yes").await.unwrap();
    let report = rt.resume(run_id).await.unwrap();
    let RunOutcome::AwaitingInput(qs) = &report.outcome else { panic!("{:?}", report.outcome) };
    assert_eq!(writes.lock().unwrap().len(), 1, "the allowed call ran");
    rt.answer(run_id, qs[0].id, "no").await.unwrap();
    let report = rt.resume(run_id).await.unwrap();
    assert_eq!(answer(&report), "done");
    assert_eq!(writes.lock().unwrap().len(), 1, "the refused call did not run");
    let receipts = receipts(&report);
    assert_eq!(receipts.len(), 2);
    assert_eq!(
        (receipts[0]["decision"].clone(), receipts[0]["answer"].clone()),
        (json!("allow"), json!(true))
    );
    assert_eq!(receipts[0]["layer"], "read_only");
    assert_eq!(receipts[0]["tool"], "write");
    assert!(receipts[0]["input_digest"].as_str().is_some_and(|d| !d.is_empty()));
    assert_eq!(receipts[1]["decision"], "deny");
    // A replay decides the same without asking or running anything.
    let replay = rt.replay(run_id).await.unwrap();
    assert_eq!(answer(&replay), "done");
    assert_eq!((replay.submitted, replay.steps_run), (0, 0));
    drop(ran.rt);
}

/// Writes an executable hook script `name` into `dir` with `body` (after reading stdin).
pub(crate) fn script_file(dir: &Path, name: &str, body: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join(name);
    std::fs::write(&path, format!("#!/bin/sh\ncat > \"$0.event\"\n{body}\n")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

pub(crate) fn hook(event: &str, id: &str, program: PathBuf, fail_closed: bool) -> RuntimeHook {
    let mut hook = Hook::new(HookEventKind::from_name(event).unwrap(), id);
    hook.fail_closed = fail_closed;
    RuntimeHook {
        plugin: "guard".into(),
        hook,
        run: HookRun::Command { program, cwd: None, timeout: Duration::from_secs(10) },
    }
}

/// Runs agent `worker` calling the allowed tool `write` once under `hooks`.
async fn with_hooks(hooks: Vec<RuntimeHook>) -> (Ran, Arc<Mutex<Vec<Value>>>) {
    let writes = runs();
    let setup = Setup {
        tools: vec![allowed(tool("write", &writes))],
        hooks,
        settings: PermissionSettings::default(),
        script: script(&[("write", json!({ "text": "hi" }))]),
    };
    (run(&setup).await, writes)
}

pub(crate) fn hook_events(ran: &Ran) -> Vec<Value> {
    ran.journal
        .entries(ran.report.run)
        .unwrap()
        .into_iter()
        .filter(|e| e.kind == EntryKind::Event && e.payload["result"].get("hook").is_some())
        .map(|e| e.payload["result"].clone())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hook_that_denies_blocks_the_call_and_is_recorded() {
    let dir = tempfile::tempdir().unwrap();
    let deny = script_file(
        dir.path(),
        "deny.sh",
        r#"echo '{"decision": "deny", "reason": "no writes today"}'"#,
    );
    let (ran, writes) = with_hooks(vec![hook("PreToolUse", "deny", deny.clone(), false)]).await;
    assert_eq!(answer(&ran.report), "done");
    assert!(writes.lock().unwrap().is_empty());
    let results = ran.recorder.tool_results();
    assert!(results[0].contains("hook_denied") && results[0].contains("no writes today"));
    let events = hook_events(&ran);
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0]["hook"], "guard/deny");
    assert_eq!(events[0]["event"], "PreToolUse");
    // The hook got the HookEvent on stdin.
    let event: Value =
        serde_json::from_str(&std::fs::read_to_string(deny.with_extension("sh.event")).unwrap())
            .unwrap();
    assert_eq!(event["schema_version"], 1);
    assert_eq!(event["event"], "PreToolUse");
    assert_eq!(event["tool_name"], "write");
    assert_eq!(event["tool_input"], json!({ "text": "hi" }));
    assert_eq!(receipts(&ran.report)[0]["layer"], "hook guard/deny");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exit_2_denies_with_stderr_as_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let two = script_file(dir.path(), "two.sh", "echo 'blocked by policy' >&2\nexit 2");
    let (ran, writes) = with_hooks(vec![hook("PreToolUse", "two", two, false)]).await;
    assert!(writes.lock().unwrap().is_empty());
    let results = ran.recorder.tool_results();
    assert!(results[0].contains("blocked by policy"), "{results:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_hook_denies_only_when_it_fails_closed() {
    let dir = tempfile::tempdir().unwrap();
    let broken = script_file(dir.path(), "broken.sh", "echo 'oops' >&2\nexit 1");
    let (ran, writes) = with_hooks(vec![hook("PreToolUse", "open", broken.clone(), false)]).await;
    assert_eq!(writes.lock().unwrap().len(), 1, "a failing open hook is skipped");
    let summary = ran
        .journal
        .entries(ran.report.run)
        .unwrap()
        .into_iter()
        .find(|e| e.payload["result"].get("verdict").is_some())
        .unwrap();
    let warnings = summary.payload["result"]["verdict"]["warnings"].to_string();
    assert!(warnings.contains("failed and was skipped"), "{warnings}");

    let (ran, writes) = with_hooks(vec![hook("PreToolUse", "closed", broken, true)]).await;
    assert!(writes.lock().unwrap().is_empty(), "a failing closed hook denies");
    let results = ran.recorder.tool_results();
    assert!(results[0].contains("hook_denied") && results[0].contains("failed"), "{results:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hook_modifies_the_input_and_two_modifies_block_the_call() {
    let dir = tempfile::tempdir().unwrap();
    let modify = |name: &str, text: &str| {
        script_file(
            dir.path(),
            name,
            &format!(r#"echo '{{"decision": "modify", "input": {{"text": "{text}"}}}}'"#),
        )
    };
    let (ran, writes) =
        with_hooks(vec![hook("PreToolUse", "one", modify("one.sh", "changed"), false)]).await;
    assert_eq!(answer(&ran.report), "done");
    assert_eq!(*writes.lock().unwrap(), vec![json!({ "text": "changed" })]);

    let (ran, writes) = with_hooks(vec![
        hook("PreToolUse", "a", modify("a.sh", "first"), false),
        hook("PreToolUse", "b", modify("b.sh", "second"), false),
    ])
    .await;
    assert!(writes.lock().unwrap().is_empty());
    let results = ran.recorder.tool_results();
    assert!(results[0].contains("hook_conflict"), "{results:?}");
    assert_eq!(hook_events(&ran).len(), 2, "every invocation is recorded");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn post_tool_use_adds_context_and_replaces_the_output() {
    let dir = tempfile::tempdir().unwrap();
    let post = script_file(
        dir.path(),
        "post.sh",
        r#"echo '{"additional_context": "remember the style guide", "updated_output": {"wrote": "redacted"}}'"#,
    );
    let (ran, writes) = with_hooks(vec![hook("PostToolUse", "post", post.clone(), false)]).await;
    assert_eq!(writes.lock().unwrap().len(), 1);
    let results = ran.recorder.tool_results();
    assert!(results[0].contains("redacted"), "{results:?}");
    assert!(results[0].contains("remember the style guide"), "{results:?}");
    let event: Value =
        serde_json::from_str(&std::fs::read_to_string(post.with_extension("sh.event")).unwrap())
            .unwrap();
    assert_eq!(event["event"], "PostToolUse");
    assert_eq!(event["answer"], json!({ "wrote": { "text": "hi" } }));
    let events = hook_events(&ran);
    assert_eq!(events.len(), 1);
    assert_eq!(events[0]["event"], "PostToolUse");
    // A replay reads the hooks' record instead of running them.
    std::fs::remove_file(&post).unwrap();
    let replay = ran.rt.replay(ran.report.run).await.unwrap();
    assert_eq!(answer(&replay), "done");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deferred_tools_are_listed_by_name_until_search_tools_loads_them() {
    let deep_runs = runs();
    let deep = allowed(tool("deep", &deep_runs))
        .options(ToolOptions {
            defer: Some(true),
            permission: Some(Permission::Allow),
            ..ToolOptions::default()
        })
        .describe("Dives deep into an archive.");
    let setup = Setup {
        tools: vec![allowed(tool("look", &runs())), deep],
        hooks: Vec::new(),
        settings: PermissionSettings::default(),
        script: script(&[
            ("deep", json!({ "too": "early" })),
            ("search_tools", json!({ "query": "archive" })),
            ("deep", json!({ "now": true })),
        ]),
    };
    let ran = run(&setup).await;
    assert_eq!(answer(&ran.report), "done");
    assert_eq!(ran.recorder.listed(0), vec!["look", "search_tools"]);
    assert!(ran.recorder.description(0, "search_tools").contains("deep"));
    assert_eq!(ran.recorder.listed(2), vec!["look", "deep"], "loaded for the rest of the loop");
    assert_eq!(*deep_runs.lock().unwrap(), vec![json!({ "now": true })]);
    let results = ran.recorder.tool_results();
    assert!(results[0].contains("tool_deferred"), "{results:?}");
    assert!(results[1].contains("input_schema") && results[1].contains("deep"));
    let replay = ran.rt.replay(ran.report.run).await.unwrap();
    assert_eq!(answer(&replay), "done");
    assert_eq!((replay.submitted, replay.steps_run), (0, 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_code_only_tool_is_hidden_from_the_agent_and_refuses_its_calls() {
    let coded_runs = runs();
    let coded = allowed(tool("coded", &coded_runs))
        .options(ToolOptions { callers: Some(Callers::Code), ..ToolOptions::default() });
    let setup = Setup {
        tools: vec![allowed(tool("look", &runs())), coded],
        hooks: Vec::new(),
        settings: PermissionSettings::default(),
        script: script(&[("coded", json!({}))]),
    };
    let ran = run(&setup).await;
    assert_eq!(ran.recorder.listed(0), vec!["look"]);
    assert!(coded_runs.lock().unwrap().is_empty());
    assert!(ran.recorder.tool_results()[0].contains("callers"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_direct_only_tool_refuses_calls_from_code() {
    let direct_runs = runs();
    let flow = FnFlow::new("script", |_task: Value, ctx| async move {
        let refused = ctx.call("direct", json!({})).from_code().await.unwrap_err();
        let allowed = ctx.call("both", json!({})).from_code().await?;
        Ok(FlowOutput::text(format!("{}|{}", refused.reason(), allowed.public_text())))
    });
    let reg = Registry::new()
        .tool(allowed(tool("direct", &direct_runs)))
        .tool(allowed(tool("both", &runs())))
        .flow(flow);
    let config = RuntimeConfig {
        permissions: PermissionSettings {
            deployment_callers: vec![CallersRule {
                tool: "direct".into(),
                callers: Callers::Direct,
            }],
            ..PermissionSettings::default()
        },
        ..RuntimeConfig::default()
    };
    let journal = Journal::open_in_memory().unwrap();
    let report = Runtime::new(journal, reg, config).run(sel("script"), json!("go")).await.unwrap();
    let text = answer(&report);
    assert!(text.starts_with("call_refused|"), "{text}");
    assert!(direct_runs.lock().unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_before_model_hook_can_deny_the_model_call() {
    let dir = tempfile::tempdir().unwrap();
    let deny = script_file(dir.path(), "quiet.sh", "echo 'quiet hours' >&2\nexit 2");
    let setup = Setup {
        tools: Vec::new(),
        hooks: vec![hook("BeforeModel", "quiet", deny, false)],
        settings: PermissionSettings::default(),
        script: script(&[]),
    };
    let ran = run(&setup).await;
    let err = crate::support::error(&ran.report);
    assert_eq!(err.reason(), "call_refused");
    assert!(err.to_string().contains("quiet hours"), "{err}");
    assert!(ran.recorder.seen.lock().unwrap().is_empty(), "the model was not called");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stop_hook_asks_for_one_more_turn_and_model_events_are_recorded() {
    let dir = tempfile::tempdir().unwrap();
    let again = script_file(
        dir.path(),
        "again.sh",
        r#"echo '{"decision": "deny", "reason": "check again"}'"#,
    );
    let seen = script_file(dir.path(), "seen.sh", "true");
    let setup = Setup {
        tools: Vec::new(),
        hooks: vec![
            hook("Stop", "again", again, false),
            hook("AfterModel", "seen", seen.clone(), false),
            hook("SubagentStop", "done", seen, false),
        ],
        settings: PermissionSettings::default(),
        script: "[[script]]\nagent = \"worker\"\n[[script.turn]]\ntext = \"first\"\n\
                 [[script.turn]]\ntext = \"second\"\n"
            .into(),
    };
    let ran = run(&setup).await;
    assert_eq!(answer(&ran.report), "second", "one more turn, and only one");
    {
        let seen = ran.recorder.seen.lock().unwrap();
        assert!(
            matches!(seen[1].messages.last(), Some(Message::User { content, .. }) if content == "check again")
        );
    }
    let events: Vec<String> =
        hook_events(&ran).iter().map(|e| e["event"].as_str().unwrap().to_owned()).collect();
    assert_eq!(events, vec!["AfterModel", "Stop", "AfterModel", "Stop", "SubagentStop"]);
    let replay = ran.rt.replay(ran.report.run).await.unwrap();
    assert_eq!(answer(&replay), "second");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_hook_can_synthesize_the_result() {
    let mut synth = hook("PreToolUse", "cache", PathBuf::new(), false);
    synth.run = HookRun::Host(Arc::new(|event: Value| {
        Box::pin(async move {
            let answer = format!(
                r#"{{"decision": "synthesize", "result": {{"cached": {}}}}}"#,
                event["tool_input"]
            );
            HookOutcome::Answered(Box::new(HookAnswer::parse(&answer).unwrap()))
        })
    }));
    let (ran, writes) = with_hooks(vec![synth]).await;
    assert_eq!(answer(&ran.report), "done");
    assert!(writes.lock().unwrap().is_empty(), "the tool did not run");
    let results = ran.recorder.tool_results();
    assert_eq!(results[0], r#"{"cached":{"text":"hi"}}"#);
}

/// A plugin folder `guarded` with the tool `write` and a `tool_call` hook, both executables.
fn guarded_plugin(dir: &Path) -> clio_plugins::Plugin {
    use std::os::unix::fs::PermissionsExt;
    let root = dir.join("guarded");
    let clio = root.join("ai.iowarp.clio");
    std::fs::create_dir_all(clio.join("bin")).unwrap();
    std::fs::write(
        clio.join("plugin.toml"),
        r#"id = "guarded"
version = "0.1.0"
defer = false

[[tools]]
name = "write"
description = "Writes."
command = "bin/write"
permission = "allow"

[[hooks]]
event = "tool_call"
id = "no-secrets"
tools = "write"
command = "bin/guard"
timeout_secs = 5

[[subagents]]
id = "worker"
prompt = "You work."
"#,
    )
    .unwrap();
    let write = clio.join("bin/write");
    std::fs::write(&write, "#!/bin/sh\ncat > /dev/null\necho '{\"written\": true}'\n").unwrap();
    let guard = clio.join("bin/guard");
    std::fs::write(
        &guard,
        "#!/bin/sh\nif grep -q 'a secret'; then echo 'no secrets' >&2; exit 2; fi\necho '{}'\n",
    )
    .unwrap();
    for f in [&write, &guard] {
        std::fs::set_permissions(f, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    clio_plugins::load_plugin(&root).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_folder_brings_its_hooks_and_tool_options() {
    let dir = tempfile::tempdir().unwrap();
    let plugin = guarded_plugin(dir.path());
    let workspace = clio_flow::Workspace::new(None);
    let reg = clio_flow::register_plugin(Registry::new(), &plugin, true, &workspace)
        .unwrap()
        .flow(agent_flow());
    let text =
        script(&[("write", json!({ "text": "a secret" })), ("write", json!({ "text": "ok" }))]);
    let scripted = ScriptedProvider::from_toml(&text, Path::new("gate.toml")).unwrap();
    let recorder = Arc::new(Recorder { inner: scripted.clone(), seen: Mutex::new(Vec::new()) });
    let config = RuntimeConfig {
        model: "offline/scripted".into(),
        models: Models::offline(scripted).with_provider(recorder.clone()),
        ..RuntimeConfig::default()
    };
    let journal = Journal::open_in_memory().unwrap();
    let report = Runtime::new(journal, reg, config).run(sel("agent"), json!("go")).await.unwrap();
    assert_eq!(answer(&report), "done", "the tool's own allow means no question");
    let results = recorder.tool_results();
    assert!(results[0].contains("no secrets"), "{results:?}");
    assert_eq!(results[1], r#"{"written":true}"#);
    assert_eq!(receipts(&report)[0]["layer"], "hook guarded/no-secrets");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_cannot_call_what_its_agent_was_not_given() {
    // `worker` (the subagent itself) and `agent` (a flow) resolve as targets of the
    // registry; neither is one of the agent's tools, so the model may not call them.
    let setup = Setup {
        tools: vec![allowed(tool("look", &runs()))],
        hooks: Vec::new(),
        settings: PermissionSettings::default(),
        script: script(&[
            ("worker", json!({ "task": "again" })),
            ("agent", json!({})),
            ("nonexistent", json!({})),
        ]),
    };
    let ran = run(&setup).await;
    assert_eq!(answer(&ran.report), "done");
    let results = ran.recorder.tool_results();
    assert_eq!(results.len(), 3, "{results:?}");
    for (result, name) in results.iter().zip(["worker", "agent", "nonexistent"]) {
        assert!(result.contains("tool_not_offered"), "{result}");
        assert!(result.contains(&format!("tool {name} is not one of this agent's tools")));
    }
    let tasks = ran.journal.tasks(ran.report.run).unwrap();
    let count = |target: &str| tasks.iter().filter(|t| t.target == target).count();
    assert_eq!(count("worker"), 1, "only the flow's own call of the subagent");
    assert!(count("agent") <= 1, "the run's flow at most, never a second one");
    assert_eq!(count("nonexistent"), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hook_runs_in_the_sandbox_and_cannot_write_outside_the_workspace() {
    let workspace = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let target = outside.path().join("planted");
    let hook_script = script_file(
        workspace.path(),
        "plant.sh",
        &format!(
            "echo planted > {} 2>/dev/null || echo refused > \"$(dirname \"$0\")/outcome\"\necho '{{}}'",
            target.display()
        ),
    );
    let (ran, writes) =
        with_hooks(vec![hook("PreToolUse", "plant", hook_script.clone(), true)]).await;
    assert_eq!(answer(&ran.report), "done");
    assert_eq!(writes.lock().unwrap().len(), 1, "the hook allowed the call");
    assert!(!target.exists(), "the hook wrote outside the workspace");
    let outcome = std::fs::read_to_string(workspace.path().join("outcome")).unwrap();
    assert_eq!(outcome.trim(), "refused");
}
