//! Cancellation: cancelling a task cancels its whole subtree, live work stops, and every
//! task of the subtree is recorded cancelled; cancelling a run cancels everything.

use std::time::Duration;

use clio_flow::{FlowOutput, FnFlow, RunOutcome, Worker, WorkerReply};
use clio_journal::{Journal, TaskKind, TaskStatus};
use serde_json::{Value, json};

use crate::support::{Counter, registry, runtime, sel};

fn forever() -> Worker {
    Worker::handler("forever", |_req| async move {
        std::future::pending::<()>().await;
        Ok(WorkerReply::text("never"))
    })
}

async fn wait_for_task(
    journal: &Journal,
    run: clio_journal::RunId,
    kind: TaskKind,
) -> clio_journal::TaskId {
    for _ in 0..2000 {
        if let Ok(tasks) = journal.tasks(run)
            && let Some(t) =
                tasks.iter().find(|t| t.kind == kind && t.status == TaskStatus::Running)
        {
            return t.id;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    panic!("no running {kind:?} task");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_a_child_flow_cancels_its_subtree() {
    let c = Counter::default();
    let inner = FnFlow::new("inner", |_t: Value, ctx| async move {
        ctx.call("forever", "x").await?;
        Ok(FlowOutput::text("never"))
    });
    let outer = FnFlow::new("outer", |_t: Value, ctx| async move {
        match ctx.call("inner", ()).await {
            Ok(_) => Ok(FlowOutput::text("finished")),
            Err(err) => Ok(FlowOutput::text(format!("caught {}", err.reason()))),
        }
    });
    let journal = Journal::open_in_memory().unwrap();
    let rt = runtime(&journal, registry(&c).subagent(forever()).flow(inner).flow(outer));
    let run = rt.create(sel("outer"), json!(null)).await.unwrap();
    let driver = tokio::spawn({
        let rt = rt.clone();
        async move { rt.resume(run).await }
    });
    wait_for_task(&journal, run, TaskKind::Subagent).await;
    let flow_task =
        journal.tasks(run).unwrap().iter().find(|t| t.kind == TaskKind::Flow).unwrap().id;
    let n = rt.cancel_task(flow_task).await.unwrap();
    assert_eq!(n, 2, "the child flow and its subagent");
    let report = driver.await.unwrap().unwrap();
    assert_eq!(crate::support::answer(&report), "caught call_cancelled");
    let tasks = journal.tasks(run).unwrap();
    assert!(tasks.iter().all(|t| t.status == TaskStatus::Cancelled), "{tasks:?}");
    let events = journal.entries(run).unwrap();
    assert!(events.iter().any(|e| e.payload.get("event") == Some(&json!("cancelled"))));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_a_run_cancels_everything() {
    let c = Counter::default();
    let flow = FnFlow::new("stuck", |_t: Value, ctx| async move {
        ctx.call("forever", "x").await?;
        Ok(FlowOutput::text("never"))
    });
    let journal = Journal::open_in_memory().unwrap();
    let rt = runtime(&journal, registry(&c).subagent(forever()).flow(flow));
    let run = rt.create(sel("stuck"), json!(null)).await.unwrap();
    let driver = tokio::spawn({
        let rt = rt.clone();
        async move { rt.resume(run).await }
    });
    wait_for_task(&journal, run, TaskKind::Subagent).await;
    assert_eq!(rt.cancel(run).await.unwrap(), 1);
    let report = driver.await.unwrap().unwrap();
    assert!(matches!(report.outcome, RunOutcome::Cancelled), "{:?}", report.outcome);
    assert_eq!(journal.run(run).unwrap().unwrap().status, clio_journal::RunStatus::Cancelled);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stop_ends_a_workers_turn_not_a_started_flow() {
    let c = Counter::default();
    let flow = FnFlow::new("patient", |_t: Value, ctx| async move {
        let err = ctx.call("forever", "x").await.unwrap_err();
        Ok(FlowOutput::text(err.reason()))
    });
    let journal = Journal::open_in_memory().unwrap();
    let rt = runtime(&journal, registry(&c).subagent(forever()).flow(flow));
    let run = rt.create(sel("patient"), json!(null)).await.unwrap();
    let driver = tokio::spawn({
        let rt = rt.clone();
        async move { rt.resume(run).await }
    });
    let worker = wait_for_task(&journal, run, TaskKind::Subagent).await;
    // The task is recorded running a moment before its turn is live; try until it is.
    let mut stopped = false;
    for _ in 0..2000 {
        if rt.stop(worker).unwrap() {
            stopped = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    assert!(stopped, "the worker's turn was never live");
    let report = driver.await.unwrap().unwrap();
    assert_eq!(crate::support::answer(&report), "call_stopped");
    assert_eq!(journal.run(run).unwrap().unwrap().status, clio_journal::RunStatus::Succeeded);
}

/// A read-only tool that waits until the run is cancelled.
fn slow_read() -> clio_flow::Tool {
    clio_flow::Tool::new("slow_read", |_args: Value| async move {
        std::future::pending::<()>().await;
        Ok(json!("never"))
    })
    .read_only()
}

/// Issue 46 item 7: a read-only tool a flow calls is recorded once it has ended when it is
/// quick, but one that keeps running is in the journal as running (so `runs tree` and the
/// viewer show it), a cancel counts and cancels it, and a quick one is still one write.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_read_only_tool_is_visible_and_counted_by_cancel() {
    let c = Counter::default();
    let flow = FnFlow::new("reader", |_t: Value, ctx| async move {
        ctx.call("echo", json!({"quick": true})).await?;
        ctx.call("slow_read", json!({})).await?;
        Ok(FlowOutput::text("never"))
    });
    let journal = Journal::open_in_memory().unwrap();
    let rt = runtime(&journal, registry(&c).tool(slow_read()).flow(flow));
    let run = rt.create(sel("reader"), json!(null)).await.unwrap();
    let driver = tokio::spawn({
        let rt = rt.clone();
        async move { rt.resume(run).await }
    });
    let running = wait_for_task(&journal, run, TaskKind::Tool).await;
    let tasks = journal.tasks(run).unwrap();
    let task = tasks.iter().find(|t| t.id == running).unwrap();
    assert_eq!(task.target, "slow_read");
    let quick = tasks.iter().find(|t| t.target == "echo").unwrap();
    assert_eq!(quick.status, TaskStatus::Succeeded);
    // The quick call was one write: no acceptance entry; nor has the running one.
    let entries = journal.entries(run).unwrap();
    assert!(
        !entries.iter().any(|e| e.identity.as_deref().is_some_and(|i| i.ends_with("@accepted"))),
        "{entries:?}"
    );
    assert_eq!(rt.cancel(run).await.unwrap(), 1, "the running read-only tool is counted");
    let report = driver.await.unwrap().unwrap();
    assert!(matches!(report.outcome, RunOutcome::Cancelled), "{:?}", report.outcome);
    let status = journal.task(running).unwrap().unwrap().status;
    assert_eq!(status, TaskStatus::Cancelled);
}

/// A read-only tool written as running and then ended is one task, found again by a
/// replay, which runs nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_read_only_tool_ends_on_the_task_it_was_written_as() {
    let c = Counter::default();
    let slow = clio_flow::Tool::new("slow_ok", |_args: Value| async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        Ok(json!("read"))
    })
    .read_only();
    let flow = FnFlow::new("reader", |_t: Value, ctx| async move {
        let r = ctx.call("slow_ok", json!({})).await?;
        Ok(FlowOutput::text(r.value.to_string()))
    });
    let journal = Journal::open_in_memory().unwrap();
    let rt = runtime(&journal, registry(&c).tool(slow).flow(flow));
    let report = rt.run(sel("reader"), json!(null)).await.unwrap();
    assert_eq!(crate::support::answer(&report), "\"read\"");
    let tasks = journal.tasks(report.run).unwrap();
    assert_eq!(tasks.len(), 1, "{tasks:?}");
    assert_eq!(tasks[0].status, TaskStatus::Succeeded);
    let replay = rt.replay(report.run).await.unwrap();
    assert_eq!(crate::support::answer(&replay), "\"read\"");
    assert_eq!(replay.submitted, 0);
}
