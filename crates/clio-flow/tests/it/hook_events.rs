//! The hook events of an agent session beyond the tool gate: `SessionStart` and
//! `SessionEnd` around a react loop, `UserPromptSubmit` on its task (deny, modify, ask,
//! context), `PostToolBatch` after each turn's tool calls, `AfterModel` context carried to
//! the next model request, and `SemanticEvent` on `ctx.record_event` / `ctx.publish`;
//! every invocation is recorded, so neither a replay nor a resume runs a hook again.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use clio_flow::{
    FlowOutput, FnFlow, HookRun, Message, Registry, RunOutcome, Runtime, RuntimeConfig,
};
use clio_journal::{EntryKind, Journal};
use clio_plugins::{HookAnswer, HookOutcome, PermissionSettings};
use serde_json::{Value, json};

use crate::gate::{Ran, Setup, allowed, hook, hook_events, run, runs, runtime_of, script, tool};
use crate::support::{answer, error, sel};

/// Writes a hook `name` into `dir` that appends each event it gets to `<name>.log`, one
/// line each, then runs `body`.
fn logging_hook(dir: &Path, name: &str, body: &str) -> PathBuf {
    crate::gate::script_file(
        dir,
        name,
        &format!("cat \"$0.event\" >> \"$0.log\"\necho >> \"$0.log\"\n{body}"),
    )
}

/// The events hook `program` got, in order.
fn logged(program: &Path) -> Vec<Value> {
    let log = std::fs::read_to_string(program.with_extension("sh.log")).unwrap_or_default();
    log.lines().filter(|l| !l.is_empty()).map(|l| serde_json::from_str(l).unwrap()).collect()
}

fn names(ran: &Ran) -> Vec<String> {
    hook_events(ran).iter().map(|e| e["event"].as_str().unwrap().to_owned()).collect()
}

/// The user messages of the model request `n`.
fn user_messages(ran: &Ran, n: usize) -> Vec<String> {
    let seen = ran.recorder.seen.lock().unwrap();
    seen[n]
        .messages
        .iter()
        .filter_map(|m| match m {
            Message::User { content, .. } => Some(content.clone()),
            _ => None,
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_prompt_submit_deny_ends_the_session_naming_the_hook_and_reason() {
    let dir = tempfile::tempdir().unwrap();
    let deny = logging_hook(
        dir.path(),
        "deny.sh",
        r#"echo '{"decision": "deny", "reason": "no tasks on sunday"}'"#,
    );
    let seen = logging_hook(dir.path(), "seen.sh", "true");
    let setup = Setup {
        tools: Vec::new(),
        hooks: vec![
            hook("UserPromptSubmit", "sunday", deny.clone(), false),
            hook("SessionStart", "start", seen.clone(), false),
            hook("SessionEnd", "end", seen.clone(), false),
        ],
        settings: PermissionSettings::default(),
        script: script(&[]),
    };
    let ran = run(&setup).await;
    let err = error(&ran.report);
    assert_eq!(err.reason(), "call_refused");
    let text = err.to_string();
    assert!(text.contains("guard/sunday") && text.contains("no tasks on sunday"), "{text}");
    assert!(ran.recorder.seen.lock().unwrap().is_empty(), "the model was not called");
    assert_eq!(names(&ran), vec!["SessionStart", "UserPromptSubmit", "SessionEnd"]);
    assert_eq!(logged(&deny)[0]["prompt"], "go");
    let session = logged(&seen);
    assert_eq!(session[0]["event"], "SessionStart");
    assert_eq!(session[0]["payload"]["agent"], "worker");
    assert_eq!(session[1]["event"], "SessionEnd");
    assert_eq!(session[1]["payload"]["outcome"], "call_refused");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_prompt_submit_hook_replaces_the_prompt_and_adds_context() {
    let dir = tempfile::tempdir().unwrap();
    let modify = logging_hook(
        dir.path(),
        "modify.sh",
        r#"echo '{"decision": "modify", "input": "write a haiku", "additional_context": "the person likes short answers"}'"#,
    );
    let start = logging_hook(
        dir.path(),
        "start.sh",
        r#"echo '{"additional_context": "the workspace is empty"}'"#,
    );
    let setup = Setup {
        tools: Vec::new(),
        hooks: vec![
            hook("UserPromptSubmit", "rewrite", modify, false),
            hook("SessionStart", "start", start, false),
        ],
        settings: PermissionSettings::default(),
        script: script(&[]),
    };
    let ran = run(&setup).await;
    assert_eq!(answer(&ran.report), "done");
    assert_eq!(
        user_messages(&ran, 0),
        vec!["the workspace is empty", "write a haiku\n\nthe person likes short answers"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_hooks_bracket_the_loop_and_post_tool_batch_lists_each_call() {
    let dir = tempfile::tempdir().unwrap();
    let seen = logging_hook(dir.path(), "seen.sh", "true");
    let batch = logging_hook(
        dir.path(),
        "batch.sh",
        r#"echo '{"decision": "deny", "additional_context": "two calls, one failed"}'"#,
    );
    let writes = runs();
    let turns = "[[script]]\nagent = \"worker\"\n\
                 [[script.turn]]\ntool_calls = [{ name = \"write\", arguments = { text = \"hi\" } }, \
                 { name = \"missing\", arguments = {} }]\n\
                 [[script.turn]]\ntext = \"done\"\n";
    let setup = Setup {
        tools: vec![allowed(tool("write", &writes))],
        hooks: vec![
            hook("SessionStart", "start", seen.clone(), false),
            hook("SessionEnd", "end", seen.clone(), false),
            hook("PostToolBatch", "batch", batch.clone(), false),
        ],
        settings: PermissionSettings::default(),
        script: turns.into(),
    };
    let ran = run(&setup).await;
    assert_eq!(answer(&ran.report), "done");
    assert_eq!(writes.lock().unwrap().len(), 1);
    assert_eq!(names(&ran), vec!["SessionStart", "PostToolBatch", "SessionEnd"]);
    let batches = logged(&batch);
    assert_eq!(
        batches[0]["payload"]["tools"],
        json!([
            { "id": "call_1_1", "name": "write", "ok": true },
            { "id": "call_1_2", "name": "missing", "ok": false },
        ])
    );
    // An observer's deny is ignored with a warning; its context joins the next request.
    assert!(user_messages(&ran, 1).contains(&"two calls, one failed".to_owned()));
    let session = logged(&seen);
    assert_eq!(session.len(), 2);
    assert_eq!(session[0]["prompt"], "go");
    assert_eq!(
        (session[1]["event"].clone(), session[1]["answer"].clone()),
        (json!("SessionEnd"), json!("done"))
    );
    assert_eq!(session[1]["payload"]["outcome"], "answered");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_model_context_joins_the_next_model_request() {
    let dir = tempfile::tempdir().unwrap();
    let after =
        logging_hook(dir.path(), "after.sh", r#"echo '{"additional_context": "mind the budget"}'"#);
    let setup = Setup {
        tools: vec![allowed(tool("write", &runs()))],
        hooks: vec![hook("AfterModel", "budget", after, false)],
        settings: PermissionSettings::default(),
        script: script(&[("write", json!({ "text": "hi" }))]),
    };
    let ran = run(&setup).await;
    assert_eq!(answer(&ran.report), "done");
    assert!(!user_messages(&ran, 0).contains(&"mind the budget".to_owned()));
    let seen = ran.recorder.seen.lock().unwrap();
    let last = seen[1].messages.last().unwrap();
    assert!(
        matches!(last, Message::User { content, .. } if content == "mind the budget"),
        "{last:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_new_events_run_once_across_a_question_a_resume_and_a_replay() {
    let dir = tempfile::tempdir().unwrap();
    let ask = logging_hook(
        dir.path(),
        "ask.sh",
        r#"echo '{"decision": "ask", "reason": "this prompt mentions money"}'"#,
    );
    let seen = logging_hook(dir.path(), "seen.sh", "true");
    let writes = runs();
    let setup = Setup {
        tools: vec![allowed(tool("write", &writes))],
        hooks: vec![
            hook("UserPromptSubmit", "money", ask.clone(), false),
            hook("SessionStart", "start", seen.clone(), false),
            hook("SessionEnd", "end", seen.clone(), false),
            hook("PostToolBatch", "batch", seen.clone(), false),
        ],
        settings: PermissionSettings::default(),
        script: script(&[("write", json!({ "text": "hi" }))]),
    };
    let ran = run(&setup).await;
    let RunOutcome::AwaitingInput(qs) = &ran.report.outcome else {
        panic!("{:?}", ran.report.outcome)
    };
    assert_eq!(qs[0].reason, "this prompt mentions money");
    assert!(qs[0].text.contains("go"), "{}", qs[0].text);
    assert!(ran.recorder.seen.lock().unwrap().is_empty());
    let run_id = ran.report.run;
    // Another runtime on the same journal answers and resumes.
    let (rt, recorder) = runtime_of(&setup, &ran.journal);
    rt.answer(run_id, qs[0].id, "yes").await.unwrap();
    let report = rt.resume(run_id).await.unwrap();
    assert_eq!(answer(&report), "done");
    assert_eq!(recorder.seen.lock().unwrap().len(), 2);
    assert_eq!(logged(&ask).len(), 1, "the prompt hook did not run again on resume");
    let events: Vec<Value> = logged(&seen).iter().map(|e| e["event"].clone()).collect();
    assert_eq!(events, vec!["SessionStart", "PostToolBatch", "SessionEnd"]);
    // A replay reads every record and runs no hook.
    let replay = rt.replay(run_id).await.unwrap();
    assert_eq!(answer(&replay), "done");
    assert_eq!((replay.submitted, replay.steps_run), (0, 0));
    assert_eq!(logged(&ask).len(), 1);
    assert_eq!(logged(&seen).len(), 3);
    drop(ran.rt);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_who_refuses_the_prompt_ends_the_session() {
    let dir = tempfile::tempdir().unwrap();
    let ask = logging_hook(dir.path(), "ask.sh", r#"echo '{"decision": "ask"}'"#);
    let setup = Setup {
        tools: Vec::new(),
        hooks: vec![hook("UserPromptSubmit", "check", ask, false)],
        settings: PermissionSettings::default(),
        script: script(&[]),
    };
    let ran = run(&setup).await;
    let RunOutcome::AwaitingInput(qs) = &ran.report.outcome else {
        panic!("{:?}", ran.report.outcome)
    };
    ran.rt.answer(ran.report.run, qs[0].id, "no").await.unwrap();
    let report = ran.rt.resume(ran.report.run).await.unwrap();
    let err = error(&report);
    assert!(err.to_string().contains("permission_denied"), "{err}");
    assert!(ran.recorder.seen.lock().unwrap().is_empty());
}

/// A flow that records an event and publishes a view.
fn eventful() -> FnFlow {
    FnFlow::new("eventful", |_task: Value, ctx| async move {
        ctx.record_event(json!({ "kind": "milestone", "step": 1 })).await?;
        ctx.publish(json!({ "progress": 50 })).await?;
        Ok(FlowOutput::text("ok"))
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn semantic_event_hooks_observe_record_event_and_publish_once() {
    let dir = tempfile::tempdir().unwrap();
    let seen = logging_hook(dir.path(), "seen.sh", "true");
    let reg =
        Registry::new().flow(eventful()).hook(hook("SemanticEvent", "watch", seen.clone(), false));
    let journal = Journal::open_in_memory().unwrap();
    // The hook runs sandboxed: it may write its log only in the workspace.
    let config =
        RuntimeConfig { workspace: Some(dir.path().to_path_buf()), ..RuntimeConfig::default() };
    let rt = Runtime::new(journal.clone(), reg, config);
    let report = rt.run(sel("eventful"), json!("go")).await.unwrap();
    assert_eq!(answer(&report), "ok");
    let events = logged(&seen);
    assert_eq!(events.len(), 2, "one per event, none for the hooks' own records");
    assert_eq!(
        events[0]["payload"],
        json!({ "command": "event", "event": { "kind": "milestone", "step": 1 } })
    );
    assert_eq!(events[1]["payload"], json!({ "command": "publish", "view": { "progress": 50 } }));
    let invocations = journal
        .entries(report.run)
        .unwrap()
        .into_iter()
        .filter(|e| e.kind == EntryKind::Event && e.payload["result"]["event"] == "SemanticEvent")
        .count();
    assert_eq!(invocations, 4, "two invocations and two summaries");
    let replay = rt.replay(report.run).await.unwrap();
    assert_eq!(answer(&replay), "ok");
    assert_eq!(logged(&seen).len(), 2, "a replay runs no hook");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_semantic_event_hooks_an_event_records_nothing_more() {
    let journal = Journal::open_in_memory().unwrap();
    let rt =
        Runtime::new(journal.clone(), Registry::new().flow(eventful()), RuntimeConfig::default());
    let report = rt.run(sel("eventful"), json!("go")).await.unwrap();
    let hooks = journal
        .entries(report.run)
        .unwrap()
        .into_iter()
        .filter(|e| e.identity.as_deref().is_some_and(|i| i.contains("@SemanticEvent")))
        .count();
    assert_eq!(hooks, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_prompt_submit_hook_can_answer_in_the_models_place_or_defer() {
    let mut cached = hook("UserPromptSubmit", "cache", PathBuf::new(), false);
    cached.run = HookRun::Host(Arc::new(|event: Value| {
        Box::pin(async move {
            let answer = json!({ "decision": "synthesize", "result": format!("cached: {}", event["prompt"].as_str().unwrap()) });
            HookOutcome::Answered(Box::new(HookAnswer::parse(&answer.to_string()).unwrap()))
        })
    }));
    let setup = Setup {
        tools: Vec::new(),
        hooks: vec![cached],
        settings: PermissionSettings::default(),
        script: script(&[]),
    };
    let ran = run(&setup).await;
    assert_eq!(answer(&ran.report), "cached: go");
    assert!(ran.recorder.seen.lock().unwrap().is_empty(), "the model was not called");

    let dir = tempfile::tempdir().unwrap();
    let later = logging_hook(
        dir.path(),
        "later.sh",
        r#"echo '{"decision": "defer", "reason": "after the freeze"}'"#,
    );
    let setup = Setup { hooks: vec![hook("UserPromptSubmit", "later", later, false)], ..setup };
    let ran = run(&setup).await;
    let text = error(&ran.report).to_string();
    assert!(text.contains("hook_deferred") && text.contains("after the freeze"), "{text}");
}
