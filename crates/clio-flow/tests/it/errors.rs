//! Every outcome of the seed's table, produced by a flow and checked for its reason, its
//! handle and its JSON form.

use clio_flow::{
    FlowError, FlowOutput, FnFlow, Limits, Registry, Runtime, RuntimeConfig, Worker, selection,
};
use clio_journal::Journal;
use serde_json::{Value, json};

use crate::support::{Counter, error, registry, runtime, sel};

/// Runs a flow whose forward makes one call of `target` and returns its error.
async fn call_error(reg: Registry, target: &'static str) -> FlowError {
    call_error_in(reg, target, RuntimeConfig::default()).await
}

/// Does what [`call_error`] does on a runtime configured by `config`.
async fn call_error_in(reg: Registry, target: &'static str, config: RuntimeConfig) -> FlowError {
    let flow = FnFlow::new("probe", move |_t: Value, ctx| async move {
        let r = ctx.call(target, json!({})).await?;
        Ok(FlowOutput::text(r.answer))
    });
    let journal = Journal::open_in_memory().unwrap();
    let rt = Runtime::new(journal, reg.flow(flow), config);
    let report = rt.run(sel("probe"), json!("task")).await.unwrap();
    error(&report)
}

fn failing(id: &'static str, err: FlowError) -> Worker {
    Worker::handler(id, move |_req| {
        let err = err.clone();
        async move { Err(err) }
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn call_failed_and_its_kinds_carry_the_child_handle() {
    let c = Counter::default();
    let err = call_error(registry(&c), "fail").await;
    assert_eq!(err.reason(), "call_failed");
    assert!(err.handle().is_some());
    assert!(err.is_call_failed());

    let reg = registry(&c)
        .subagent(failing(
            "waiter",
            FlowError::CallAwaitingInput { handle: None, answer: "which one?".into() },
        ))
        .subagent(failing(
            "stopper",
            FlowError::CallStopped { handle: None, message: "provider timeout".into() },
        ));
    let err = call_error(reg.clone(), "waiter").await;
    assert_eq!(err.reason(), "call_awaiting_input");
    assert!(err.is_call_failed());
    assert_eq!(err.to_json()["details"]["answer"], "which one?");
    let err = call_error(reg, "stopper").await;
    assert_eq!(err.reason(), "call_stopped");
    assert!(err.is_call_failed() && err.handle().is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_and_untrusted_targets_are_refused() {
    let c = Counter::default();
    let err = call_error(registry(&c), "nobody").await;
    assert_eq!(err.reason(), "flow_target_unknown");
    assert_eq!(err.to_json()["details"]["target"], "nobody");

    let foreign =
        FnFlow::new("foreign", |_t: Value, _ctx| async move { Ok(FlowOutput::text("x")) });
    let reg = registry(&c)
        .plugin("shady", "1.0.0", false)
        .plugin_flow("shady", foreign)
        .trust_with("shady", "clio plugin trust shady-folder");
    // A run that can ask puts the question to the person first (tests/it/adversarial.rs);
    // one nobody answers refuses, naming the plugin and how to trust it.
    let config = RuntimeConfig { interactive: false, ..RuntimeConfig::default() };
    let err = call_error_in(reg, "foreign", config).await;
    assert_eq!(err.reason(), "flow_not_trusted");
    assert_eq!(err.to_json()["details"]["plugin"], "shady");
    assert_eq!(err.to_json()["details"]["version"], "1.0.0");
    assert!(err.to_string().contains("`clio plugin trust shady-folder`"), "{err}");

    let trusted =
        FnFlow::new("friendly", |_t: Value, _ctx| async move { Ok(FlowOutput::text("hi")) });
    let reg = registry(&c).plugin("good", "1.0.0", true).plugin_flow("good", trusted);
    let flow = FnFlow::new("probe", |_t: Value, ctx| async move {
        let r = ctx.call(selection("friendly", json!({})), ()).await?;
        let s = ctx.call("clio/standard", "q").await?;
        Ok(FlowOutput::text(format!("{} {}", r.answer, s.answer)))
    });
    let journal = Journal::open_in_memory().unwrap();
    let report = runtime(&journal, reg.flow(flow)).run(sel("probe"), json!("t")).await.unwrap();
    assert_eq!(crate::support::answer(&report), "hi standard: q");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_name_their_code() {
    let c = Counter::default();
    let flow = FnFlow::new("ws", |_t: Value, ctx| async move {
        let ws = ctx.workspace();
        let path = ctx.step("write", || async move { ws.write("a.txt", "x") }).await?;
        Ok(FlowOutput::text(path))
    });
    let journal = Journal::open_in_memory().unwrap();
    let err = error(
        &runtime(&journal, registry(&c).flow(flow)).run(sel("ws"), json!(null)).await.unwrap(),
    );
    assert_eq!(err.reason(), "call_refused");
    assert_eq!(err.to_json()["details"]["refusal"], "no_workspace");

    let flow = FnFlow::new("start-tool", |_t: Value, ctx| async move {
        ctx.start("echo", json!({})).await?;
        Ok(FlowOutput::text("no"))
    });
    let err = error(
        &runtime(&journal, registry(&c).flow(flow))
            .run(sel("start-tool"), json!(null))
            .await
            .unwrap(),
    );
    assert_eq!(err.to_json()["details"]["refusal"], "start_tool");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workspace_reads_writes_and_appends_inside_its_root() {
    let dir = tempfile::tempdir().unwrap();
    let c = Counter::default();
    let flow = FnFlow::new("ws", |_t: Value, ctx| async move {
        let ws = ctx.workspace();
        let w = ws.clone();
        ctx.step("write", || async move { w.write("reports/a.md", "hello") }).await?;
        let w = ws.clone();
        ctx.step("append", || async move { w.append("log.jsonl", &json!({ "n": 1 })) }).await?;
        let w = ws.clone();
        ctx.step("append", || async move { w.append("log.jsonl", &json!("text")) }).await?;
        let outside = ws.read("../etc/passwd").unwrap_err();
        let text = ws.read("reports/a.md")?;
        Ok(FlowOutput::text(format!("{text} {}", outside.to_json()["details"]["refusal"])))
    });
    let journal = Journal::open_in_memory().unwrap();
    let config =
        RuntimeConfig { workspace: Some(dir.path().to_path_buf()), ..RuntimeConfig::default() };
    let rt = Runtime::new(journal, registry(&c).flow(flow), config);
    let report = rt.run(sel("ws"), json!(null)).await.unwrap();
    assert_eq!(crate::support::answer(&report), "hello \"outside_workspace\"");
    let log = std::fs::read_to_string(dir.path().join("log.jsonl")).unwrap();
    assert_eq!(log, "{\"n\":1}\ntext\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flow_stall_carries_its_fields() {
    let c = Counter::default();
    let flow = FnFlow::new("stuck", |_t: Value, _ctx| async move {
        Err(FlowError::FlowStall {
            stall: "planner_no_directions".into(),
            message: "the planner returned no directions".into(),
            step: "plan".into(),
            predicate: Some(Box::new(json!("directions non-empty"))),
            observed: Some(Box::new(json!({ "directions": [] }))),
            handle: None,
        })
    });
    let journal = Journal::open_in_memory().unwrap();
    let err = error(
        &runtime(&journal, registry(&c).flow(flow)).run(sel("stuck"), json!(null)).await.unwrap(),
    );
    let j = err.to_json();
    assert_eq!(j["reason"], "flow_stall");
    assert_eq!(j["details"]["stall"], "planner_no_directions");
    assert_eq!(j["details"]["step"], "plan");
    assert_eq!(j["details"]["observed"], json!({ "directions": [] }));
    assert_eq!(FlowError::from_json(&j).to_json(), j, "the JSON form reads back");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_checkpoint_limit_ends_the_run() {
    let c = Counter::default();
    let flow = FnFlow::new("many", |_t: Value, ctx| async move {
        for i in 0..10u64 {
            ctx.step("n", || async move { Ok(i) }).await?;
        }
        Ok(FlowOutput::text("all"))
    });
    let journal = Journal::open_in_memory().unwrap();
    let config = RuntimeConfig { max_entries: 5, ..RuntimeConfig::default() };
    let rt = Runtime::new(journal.clone(), registry(&c).flow(flow), config);
    let report = rt.run(sel("many"), json!(null)).await.unwrap();
    let err = error(&report);
    assert_eq!(err.reason(), "flow_checkpoint_limit");
    let entries = journal.entries(report.run).unwrap();
    let (warnings, counted): (Vec<_>, Vec<_>) =
        entries.iter().partition(|e| e.identity.as_deref() == Some("key:entries-warning"));
    assert_eq!(counted.len(), 5);
    assert_eq!(warnings.len(), 1, "the warning at 80 % of the cap is recorded once");
    assert_eq!(warnings[0].payload["event"], "entries_warning");
    assert_eq!(warnings[0].payload["entries"], 4);
    assert_eq!(RuntimeConfig::default().max_entries, 10_000);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resume_under_other_code_plugins_or_input_is_a_replay_mismatch() {
    let c = Counter::default();
    let v1 = || {
        FnFlow::new("versioned", |_t: Value, ctx| async move {
            ctx.ask("name?").await?;
            Ok(FlowOutput::text("x"))
        })
    };
    let journal = Journal::open_in_memory().unwrap();
    let rt = runtime(&journal, registry(&c).plugin("p", "1.0.0", true).flow(v1().version("1")));
    let report = rt.run(sel("versioned"), json!("in")).await.unwrap();

    let rt2 = runtime(&journal, registry(&c).plugin("p", "1.0.0", true).flow(v1().version("2")));
    let err = rt2.resume(report.run).await.unwrap_err();
    assert_eq!(err.reason(), "flow_replay_mismatch");
    assert_eq!(err.to_json()["details"]["differs"][0]["what"], "flow version");

    let rt3 = runtime(&journal, registry(&c).plugin("p", "2.0.0", true).flow(v1().version("1")));
    let err = rt3.resume(report.run).await.unwrap_err();
    assert_eq!(err.to_json()["details"]["differs"][0]["what"], "plugin set");

    let err = rt.resume_with_input(report.run, json!("other")).await.unwrap_err();
    assert_eq!(err.to_json()["details"]["differs"][0]["what"], "input");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replay_that_asks_for_something_else_is_nondeterminism() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    let c = Counter::default();
    let flip = Arc::new(AtomicBool::new(false));
    let f = Arc::clone(&flip);
    let flow = FnFlow::new("fickle", move |_t: Value, ctx| {
        let target = if f.load(Ordering::SeqCst) { "critic" } else { "writer" };
        async move {
            let r = ctx.call(target, "x").await?;
            Ok(FlowOutput::text(r.answer))
        }
    });
    let journal = Journal::open_in_memory().unwrap();
    let reg = registry(&c).flow(flow);
    let report = runtime(&journal, reg.clone()).run(sel("fickle"), json!(null)).await.unwrap();
    flip.store(true, Ordering::SeqCst);
    let replay = runtime(&journal, reg).replay(report.run).await.unwrap();
    let err = error(&replay);
    assert!(matches!(err, FlowError::Nondeterminism { .. }), "{err:?}");
    assert_eq!(err.reason(), "flow_replay_mismatch");
    assert_eq!(replay.submitted, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_limit_names_itself() {
    let c = Counter::default();
    let flow = FnFlow::new("chatty", |_t: Value, ctx| async move {
        ctx.call("writer", "a").await?;
        ctx.call("echo", json!({})).await?;
        ctx.call("writer", "b").await?;
        Ok(FlowOutput::text("x"))
    })
    .limits(Limits { max_model_calls: 1, ..Limits::default() });
    let journal = Journal::open_in_memory().unwrap();
    let err = error(
        &runtime(&journal, registry(&c).flow(flow)).run(sel("chatty"), json!(null)).await.unwrap(),
    );
    assert_eq!(err.reason(), "flow_limit_exceeded");
    assert_eq!(err.details()["limit"], "max_model_calls");
}

/// A replay that finds a record of another kind at an identity (a call where it now asks)
/// is `Nondeterminism` naming both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replay_that_finds_another_kind_of_record_is_nondeterminism() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    let c = Counter::default();
    let flip = Arc::new(AtomicBool::new(false));
    let f = Arc::clone(&flip);
    let flow = FnFlow::new("fickle", move |_t: Value, ctx| {
        let asks = f.load(Ordering::SeqCst);
        async move {
            if asks {
                ctx.ask_full("which?", clio_flow::AskSchema::Text, &[], "", "k").await?;
                return Ok(FlowOutput::text("asked"));
            }
            let r = ctx.call("writer", "x").key("k").await?;
            Ok(FlowOutput::text(r.answer))
        }
    });
    let journal = Journal::open_in_memory().unwrap();
    let reg = registry(&c).flow(flow);
    let report = runtime(&journal, reg.clone()).run(sel("fickle"), json!(null)).await.unwrap();
    flip.store(true, Ordering::SeqCst);
    let replay = runtime(&journal, reg).replay(report.run).await.unwrap();
    match error(&replay) {
        FlowError::Nondeterminism { identity, journaled, requested, .. } => {
            assert_eq!((identity.as_str(), journaled.as_str()), ("key:k", "Call"));
            assert_eq!(requested, "ask");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(replay.submitted, 0);
}

/// The journal's form of an error reads back as the error it was (`to_record` and
/// `from_record` are the only writer and reader), with the message recorded when it
/// happened; text that is no recorded error is kept whole as a `CallFailed`.
#[test]
fn a_recorded_error_reads_back_as_the_flow_error_it_was() {
    use clio_journal::TaskId;
    let errors = [
        FlowError::CallInterrupted {
            handle: Some(TaskId(7)),
            message: "the process stopped".into(),
        },
        FlowError::CallRefused {
            handle: None,
            refusal: "sandbox_unavailable".into(),
            message: "no sandbox".into(),
        },
        FlowError::FlowNotTrusted {
            target: "sneak".into(),
            plugin: "hostile".into(),
            version: "6.6.6".into(),
            digest: "sha256:00".into(),
            trust_with: "clio plugin trust ./hostile".into(),
        },
        FlowError::CallCancelled { handle: Some(TaskId(3)) },
    ];
    for error in errors {
        let record = error.to_record();
        let back = FlowError::from_record(&record);
        assert_eq!(back.to_json(), error.to_json(), "{record}");
        assert_eq!(FlowError::recorded_message(&record), error.to_string());
    }
    let text = "disk on fire (written by hand)";
    let back = FlowError::from_record(text);
    assert!(
        matches!(&back, FlowError::CallFailed { handle: None, message } if message == text),
        "{back:?}"
    );
    assert_eq!(FlowError::recorded_message(text), text);
    assert!(matches!(FlowError::from_record("[1, 2]"), FlowError::CallFailed { .. }));
}
