//! `run_code` with real Python scripts: tool calls through the generated `clio` module are
//! child tasks of the `run_code` task; a `direct`-only tool is refused from code; a
//! binding's host call is answered with an event and no task; a timeout, a syntax error,
//! an exception, a crash and too much output each fail with a message the agent can act
//! on; a `run_code` task cut short is `CallInterrupted` unless every tool it called is
//! read-only; an agent on the scripted model calls `run_code` end to end.

use std::path::Path;
use std::sync::Arc;

use clio_flow::{
    Binding, FlowError, FlowOutput, FnFlow, Models, Registry, RunCodeConfig, RunOutcome, RunReport,
    Runtime, RuntimeConfig, ScriptedProvider, Tool, Worker, register_run_code,
};
use clio_journal::{Journal, RunId, TaskStatus};
use clio_plugins::{Callers, ToolOptions};
use serde_json::{Value, json};
use tokio::sync::Notify;

use crate::support::{Counter, registry, sel};

/// The tools of `support::registry`, plus `private` (callers `direct`), `block` (read-only,
/// never returns, signals `blocked`), the binding `stream` (`__stream_write__`, and
/// `__other_write__`, which is outside its prefix), `run_code`, and the flow `code`, which
/// calls `run_code` on its task.
fn setup(c: &Counter, blocked: &Arc<Notify>) -> Registry {
    let direct = ToolOptions { callers: Some(Callers::Direct), ..ToolOptions::default() };
    let blocked = Arc::clone(blocked);
    let reg = registry(c)
        .tool(
            Tool::new("private", |_args: Value| async move { Ok(json!("secret")) }).options(direct),
        )
        .tool(
            Tool::new("block", move |_args: Value| {
                let blocked = Arc::clone(&blocked);
                async move {
                    blocked.notify_one();
                    std::future::pending::<Result<Value, FlowError>>().await
                }
            })
            .read_only(),
        )
        .binding(
            Binding::new("stream")
                .host_call("__stream_write__", |args: Value| async move {
                    Ok(json!({ "written": args["text"] }))
                })
                .host_call("__other_write__", |_args: Value| async move { Ok(json!("bound?")) }),
        )
        .flow(FnFlow::new("code", |task: Value, ctx| async move {
            let res = ctx.call("run_code", task).await?;
            Ok(FlowOutput::text(res.value["stdout"].as_str().unwrap_or_default()))
        }));
    register_run_code(reg, RunCodeConfig { output_limit: 4096, ..RunCodeConfig::default() })
}

fn runtime(journal: &Journal, reg: Registry, workspace: &Path) -> Runtime {
    let config = RuntimeConfig {
        workspace: Some(workspace.to_path_buf()),
        model: "offline/scripted".into(),
        ..RuntimeConfig::default()
    };
    Runtime::new(journal.clone(), reg, config)
}

struct Fixture {
    journal: Journal,
    counter: Counter,
    blocked: Arc<Notify>,
    dir: tempfile::TempDir,
}

impl Fixture {
    fn new() -> Fixture {
        Fixture {
            journal: Journal::open_in_memory().unwrap(),
            counter: Counter::default(),
            blocked: Arc::new(Notify::new()),
            dir: tempfile::tempdir().unwrap(),
        }
    }

    fn runtime(&self) -> Runtime {
        runtime(&self.journal, setup(&self.counter, &self.blocked), self.dir.path())
    }

    async fn run(&self, input: Value) -> RunReport {
        self.runtime().run(sel("code"), input).await.unwrap()
    }

    /// Returns the run's tasks as `(target, parent target, status)`.
    fn tasks(&self, run: RunId) -> Vec<(String, String, TaskStatus)> {
        let tasks = self.journal.tasks(run).unwrap();
        let target = |id| tasks.iter().find(|t| Some(t.id) == id).map(|t| t.target.clone());
        tasks
            .iter()
            .map(|t| (t.target.clone(), target(t.parent).unwrap_or_default(), t.status))
            .collect()
    }

    /// Returns the run's events (the payloads' `result`).
    fn events(&self, run: RunId) -> Vec<Value> {
        self.journal
            .entries(run)
            .unwrap()
            .into_iter()
            .filter(|e| e.kind == clio_journal::EntryKind::Event)
            .map(|e| e.payload["command"]["event"].clone())
            .collect()
    }
}

fn stdout(report: &RunReport) -> String {
    crate::support::answer(report)
}

/// Returns the message of the run's error, which must be a `call_failed` of `run_code`.
fn failure(report: &RunReport) -> String {
    let err = crate::support::error(report);
    assert_eq!(err.reason(), "call_failed", "{err}");
    err.to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tool_calls_from_a_script_are_child_tasks() {
    let f = Fixture::new();
    let code = "import clio\n\
                print(clio.call('echo', {'x': 1})['x'])\n\
                print(clio.call('effect', {'note': 'n'}))\n";
    let report = f.run(json!({ "code": code })).await;
    assert_eq!(stdout(&report), "1\n{'done': {'note': 'n'}}\n");
    assert_eq!(f.counter.get(), 1, "the side effect ran once");
    assert_eq!(
        f.tasks(report.run),
        [
            ("run_code".into(), String::new(), TaskStatus::Succeeded),
            ("echo".into(), "run_code".into(), TaskStatus::Succeeded),
            ("effect".into(), "run_code".into(), TaskStatus::Succeeded),
        ]
    );
    // The finished run replays from its journal without running the script again.
    let replay = f.runtime().replay(report.run).await.unwrap();
    assert_eq!(stdout(&replay), stdout(&report));
    assert_eq!((replay.submitted, replay.steps_run), (0, 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_direct_only_tool_is_refused_from_code_with_an_error_the_script_reads() {
    let f = Fixture::new();
    let code = "import clio\n\
                for name in ['private', 'run_code', 'nothing', 'writer']:\n\
                \x20   try:\n\
                \x20       clio.call(name, {'code': 'print(1)'})\n\
                \x20   except clio.ToolError as e:\n\
                \x20       print(name, e.reason, e.refusal)\n";
    let report = f.run(json!({ "code": code })).await;
    assert_eq!(
        stdout(&report),
        "private call_refused callers\n\
         run_code call_refused callers\n\
         nothing flow_target_unknown \n\
         writer call_refused not_a_tool\n"
    );
    let tasks = f.tasks(report.run);
    assert_eq!(tasks.len(), 1, "refused calls start no task: {tasks:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_call_is_answered_with_an_event_and_no_task() {
    let f = Fixture::new();
    let code = "import clio\n\
                print(clio.call('__stream_write__', {'text': 'hi'}))\n\
                for name in ['__other_write__', '__nobody_write__']:\n\
                \x20   try:\n\
                \x20       clio.call(name, {})\n\
                \x20   except clio.ToolError as e:\n\
                \x20       print(name, e.refusal, e)\n";
    let report = f.run(json!({ "code": code })).await;
    insta::assert_snapshot!(stdout(&report), @r"
    {'written': 'hi'}
    __other_write__ not_bound call refused (not_bound): reserved call __other_write__ is not bound: no binding answers it
    __nobody_write__ not_bound call refused (not_bound): reserved call __nobody_write__ is not bound: no binding answers it
    ");
    assert_eq!(f.tasks(report.run).len(), 1, "a host call has no task of its own");
    assert_eq!(
        f.events(report.run),
        [json!({
            "event": "host_call",
            "binding": "stream",
            "call": "__stream_write__",
            "args": { "text": "hi" },
            "value": { "written": "hi" },
        })]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_script_that_runs_too_long_is_killed() {
    let f = Fixture::new();
    let code = "import time\nprint('started')\ntime.sleep(60)\n";
    let report = f.run(json!({ "code": code, "timeout_secs": 1 })).await;
    let message = failure(&report);
    assert!(message.contains("run_code timeout: the script ran longer than 1 s"), "{message}");
    assert!(message.contains("--- stdout ---\nstarted"), "what it printed is kept: {message}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_syntax_error_names_its_line() {
    let f = Fixture::new();
    let report = f.run(json!({ "code": "x = 1\ndef f(:\n    pass\n" })).await;
    let message = failure(&report);
    assert!(message.starts_with("call failed: run_code syntax_error: "), "{message}");
    assert!(message.contains("(line 2)"), "{message}");
    assert!(message.contains("SyntaxError"), "{message}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exception_comes_back_with_its_traceback() {
    let f = Fixture::new();
    let code = "def half(n):\n    return n / 0\n\nprint('before')\nhalf(4)\n";
    let report = f.run(json!({ "code": code })).await;
    // Python 3.11+ marks the failing expression with `~^` lines; older ones do not.
    let full = failure(&report);
    let message: Vec<&str> = full
        .lines()
        .filter(|l| !l.trim().chars().all(|c| c == '~' || c == '^') || l.trim().is_empty())
        .collect();
    insta::assert_snapshot!(message.join("\n"), @r#"
    call failed: run_code exception: the script raised ZeroDivisionError at line 2: division by zero
    Traceback (most recent call last):
      File "<script>", line 5, in <module>
        half(4)
      File "<script>", line 2, in half
        return n / 0
    ZeroDivisionError: division by zero
    --- stdout ---
    before
    "#);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_uncaught_refusal_fails_the_script_with_the_refusal() {
    let f = Fixture::new();
    let report = f.run(json!({ "code": "import clio\nclio.call('private', {})\n" })).await;
    let message = failure(&report);
    assert!(message.contains("the script raised ToolError at line 2"), "{message}");
    assert!(message.contains("call refused (callers)"), "{message}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_script_that_kills_itself_is_a_crash() {
    let f = Fixture::new();
    let code =
        "import os, signal\nprint('bye', flush=True)\nos.kill(os.getpid(), signal.SIGKILL)\n";
    let report = f.run(json!({ "code": code })).await;
    let message = failure(&report);
    assert!(
        message.contains("run_code crashed: the script's process was killed by signal 9"),
        "{message}"
    );
    assert!(message.contains("--- stdout ---\nbye"), "{message}");
    let exit = f.run(json!({ "code": "import sys\nsys.exit(3)\n" })).await;
    assert!(failure(&exit).contains("run_code exited: the script exited with code 3"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn too_much_output_kills_the_script() {
    let f = Fixture::new();
    let code = "import time\nwhile True:\n    print('x' * 1000)\n";
    let report = f.run(json!({ "code": code, "timeout_secs": 30 })).await;
    let message = failure(&report);
    assert!(
        message.contains("run_code output_too_large: the script printed more than 4096 bytes"),
        "{message}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_arguments_and_no_workspace_are_refused() {
    let f = Fixture::new();
    let report = f.run(json!({ "code": "print(1)", "language": "ruby" })).await;
    assert_eq!(crate::support::error(&report).details()["refusal"], "language_unsupported");
    let report = f.run(json!({ "script": "print(1)" })).await;
    assert!(failure(&report).contains("argument `code` is required"));
    let bare =
        Runtime::new(f.journal.clone(), setup(&f.counter, &f.blocked), RuntimeConfig::default());
    let report = bare.run(sel("code"), json!({ "code": "print(1)" })).await.unwrap();
    assert_eq!(crate::support::error(&report).details()["refusal"], "no_workspace");
}

/// Starts `code` in a run, waits until the script calls `block`, and drops the run as a
/// crash would; returns the run.
async fn interrupted(f: &Fixture, code: &str) -> RunId {
    let rt = f.runtime();
    let run = rt.create(sel("code"), json!({ "code": code })).await.unwrap();
    let driver = tokio::spawn(async move { rt.resume(run).await });
    f.blocked.notified().await;
    driver.abort();
    let _ = driver.await;
    run
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_script_cut_short_after_a_side_effect_is_interrupted() {
    let f = Fixture::new();
    let code = "import clio\nclio.call('effect', {'n': 1})\nclio.call('block', {})\n";
    let run = interrupted(&f, code).await;
    let report = f.runtime().resume(run).await.unwrap();
    let RunOutcome::Failed(err) = &report.outcome else { panic!("{:?}", report.outcome) };
    assert_eq!(err.reason(), "call_interrupted", "{err}");
    assert_eq!(f.counter.get(), 1, "the side effect is not made twice");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_script_cut_short_after_read_only_calls_runs_again_and_replays_them() {
    let f = Fixture::new();
    let code = "import clio, os\n\
                print(clio.call('echo', {'n': 1}))\n\
                if not os.path.exists('ran-once'):\n\
                \x20   open('ran-once', 'w').close()\n\
                \x20   clio.call('block', {})\n\
                print('done')\n";
    let run = interrupted(&f, code).await;
    let report = f.runtime().resume(run).await.unwrap();
    assert_eq!(stdout(&report), "{'n': 1}\ndone\n");
    let echoes = f.tasks(run).iter().filter(|(t, _, _)| t == "echo").count();
    assert_eq!(echoes, 1, "the finished call replays from the journal");
}

const AGENT_SCRIPT: &str = r#"
[[script]]
agent = "coder"

[[script.turn]]
text = "I will script it."
tool_calls = [{ name = "run_code", arguments = { code = "import clio\nprint(clio.call('echo', {'a': 1})['a'])\nclio.call('effect', {'b': 2})\nclio.call('__stream_write__', {'text': 'progress'})\nprint('ok')\n" } }]

[[script.turn]]
text = "The script printed 1 and ok."
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_calls_run_code_and_the_journal_shows_what_happened() {
    let f = Fixture::new();
    let provider = ScriptedProvider::from_toml(AGENT_SCRIPT, Path::new("agent.toml")).unwrap();
    let reg = setup(&f.counter, &f.blocked)
        .subagent(Worker::react("coder", "You write scripts.").with_tools(&["run_code"]))
        .flow(FnFlow::new("ask-coder", |task: Value, ctx| async move {
            Ok(FlowOutput::from(ctx.call("coder", task).await?))
        }));
    let config = RuntimeConfig {
        workspace: Some(f.dir.path().to_path_buf()),
        model: "offline/scripted".into(),
        models: Models::offline(provider),
        ..RuntimeConfig::default()
    };
    let rt = Runtime::new(f.journal.clone(), reg, config);
    let report = rt.run(sel("ask-coder"), json!("print things")).await.unwrap();
    assert_eq!(crate::support::answer(&report), "The script printed 1 and ok.");
    let tree: Vec<String> = f
        .tasks(report.run)
        .into_iter()
        .map(|(target, parent, status)| format!("{parent} -> {target}: {status:?}"))
        .collect();
    let events = f.events(report.run);
    insta::assert_json_snapshot!(
        "agent_run_code_journal",
        json!({ "tree": tree, "events": events })
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_folder_plugins_binding_is_answered_by_its_executable() {
    use std::os::unix::fs::PermissionsExt;
    let f = Fixture::new();
    let plugin_dir = tempfile::tempdir().unwrap();
    let clio_dir = plugin_dir.path().join("ai.iowarp.clio");
    std::fs::create_dir_all(clio_dir.join("bindings")).unwrap();
    std::fs::write(
        clio_dir.join("plugin.toml"),
        "id = \"logbook\"\nversion = \"0.1.0\"\ndescription = \"A log.\"\n\n\
         [[bindings]]\nname = \"log\"\nhost_calls = [\"__log_append__\"]\n",
    )
    .unwrap();
    let host = clio_dir.join("bindings/log");
    std::fs::write(
        &host,
        "#!/usr/bin/env python3\nimport json, sys\nreq = json.load(sys.stdin)\n\
         print(json.dumps({'call': req['call'], 'lines': [req['args']['line']]}))\n",
    )
    .unwrap();
    std::fs::set_permissions(&host, std::fs::Permissions::from_mode(0o755)).unwrap();
    let plugin = clio_plugins::load_plugin(plugin_dir.path()).unwrap();
    let workspace = clio_flow::Workspace::new(Some(f.dir.path().to_path_buf()));
    let reg = clio_flow::register_plugin(setup(&f.counter, &f.blocked), &plugin, true, &workspace)
        .unwrap();
    let rt = runtime(&f.journal, reg, f.dir.path());
    let code = "import clio\nprint(clio.call('__log_append__', {'line': 'hello'}))\n";
    let report = rt.run(sel("code"), json!({ "code": code })).await.unwrap();
    assert_eq!(stdout(&report), "{'call': '__log_append__', 'lines': ['hello']}\n");
    assert_eq!(f.events(report.run)[0]["binding"], "log");
}

/// `setup` plus `guarded` (side-effecting, permission `ask`, counts its runs in `c`) and
/// `forbidden` (permission `deny`).
fn gated(f: &Fixture, c: &Counter) -> Registry {
    use clio_plugins::Permission;
    let ask = ToolOptions { permission: Some(Permission::Ask), ..ToolOptions::default() };
    let deny = ToolOptions { permission: Some(Permission::Deny), ..ToolOptions::default() };
    let c = c.clone();
    setup(&f.counter, &f.blocked)
        .tool(
            Tool::new("guarded", move |args: Value| {
                let c = c.clone();
                async move {
                    c.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    Ok(json!({ "guarded": args }))
                }
            })
            .options(ask),
        )
        .tool(Tool::new("forbidden", |_args: Value| async move { Ok(json!("no")) }).options(deny))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_permission_question_from_a_script_waits_and_the_script_runs_again() {
    let f = Fixture::new();
    let guarded = Counter::default();
    let rt = runtime(&f.journal, gated(&f, &guarded), f.dir.path());
    let code = "import clio\n\
                print(clio.call('echo', {'n': 1}))\n\
                try:\n\
                \x20   clio.call('forbidden', {})\n\
                except clio.ToolError as e:\n\
                \x20   print(e.refusal)\n\
                print(clio.call('guarded', {'x': 1}))\n";
    let report = rt.run(sel("code"), json!({ "code": code })).await.unwrap();
    let RunOutcome::AwaitingInput(questions) = &report.outcome else {
        panic!("{:?}", report.outcome)
    };
    assert!(questions[0].text.starts_with("allow tool guarded"), "{questions:?}");
    assert_eq!(guarded.get(), 0, "nothing runs before the person answers");
    rt.answer(report.run, questions[0].id, "yes").await.unwrap();
    let resumed = rt.resume(report.run).await.unwrap();
    assert_eq!(stdout(&resumed), "{'n': 1}\npermission_denied\n{'guarded': {'x': 1}}\n");
    assert_eq!(guarded.get(), 1);
    let echoes = f.tasks(report.run).iter().filter(|(t, _, _)| t == "echo").count();
    assert_eq!(echoes, 1, "the script ran again and its finished call replayed");
}
