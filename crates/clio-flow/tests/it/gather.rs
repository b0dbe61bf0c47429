//! `gather` (order, limit, return_when, return_exceptions, GatherFailed) and `as_completed`
//! (finishing order with indexes); a failure never cancels the others.

use clio_flow::{FlowError, FlowOutput, FnFlow, ReturnWhen, Tool, Worker, WorkerReply};
use clio_journal::TaskStatus;
use futures::StreamExt;
use serde_json::{Value, json};

use crate::support::{Counter, answer, error, fresh_then_replay, registry, runtime, sel};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gather_returns_results_in_call_order_and_replays() {
    let c = Counter::default();
    let flow = FnFlow::new("fan", |_t: Value, ctx| async move {
        let calls = (0..20).map(|i| ctx.call("echo", json!({ "i": i }))).collect();
        let results = ctx.gather(calls).limit(4).await?;
        let idx: Vec<String> =
            results.iter().map(|r| format!("{}{}", r.value["i"], r.index.unwrap_or(99))).collect();
        Ok(FlowOutput::text(idx.join(",")))
    });
    let (fresh, _) = fresh_then_replay(registry(&c).flow(flow), "fan", json!(null)).await;
    let expected: Vec<String> = (0..20).map(|i| format!("{i}{i}")).collect();
    assert_eq!(answer(&fresh), expected.join(","));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_failure_never_cancels_the_others() {
    let c = Counter::default();
    let flow = FnFlow::new("mixed", |_t: Value, ctx| async move {
        let calls = vec![
            ctx.call("effect", json!(1)),
            ctx.call("fail", json!({})),
            ctx.call("effect", json!(2)),
        ];
        ctx.gather(calls).await?;
        Ok(FlowOutput::text("unreachable"))
    });
    let journal = clio_journal::Journal::open_in_memory().unwrap();
    let report =
        runtime(&journal, registry(&c).flow(flow)).run(sel("mixed"), json!(null)).await.unwrap();
    let err = error(&report);
    let FlowError::GatherFailed { results } = &err else { panic!("{err:?}") };
    assert_eq!(results.len(), 3);
    assert!(results[0].is_ok() && results[1].is_err() && results[2].is_ok());
    assert_eq!(c.get(), 2, "both effects ran");
    assert_eq!(err.to_json()["details"]["results"].as_array().map(Vec::len), Some(3));
    let statuses: Vec<TaskStatus> =
        journal.tasks(report.run).unwrap().iter().map(|t| t.status).collect();
    assert_eq!(statuses.iter().filter(|s| **s == TaskStatus::Succeeded).count(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn settled_holds_each_error_in_place() {
    let c = Counter::default();
    let flow = FnFlow::new("settled", |_t: Value, ctx| async move {
        let calls = vec![ctx.call("fail", json!({})), ctx.call("echo", json!("ok"))];
        let res = ctx.gather(calls).settled().await;
        let shape: Vec<&str> = res
            .iter()
            .map(|r| match r {
                Some(Ok(_)) => "ok",
                Some(Err(e)) => e.reason(),
                None => "none",
            })
            .collect();
        Ok(FlowOutput::text(shape.join(",")))
    });
    let (fresh, _) = fresh_then_replay(registry(&c).flow(flow), "settled", json!(null)).await;
    assert_eq!(answer(&fresh), "call_failed,ok");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn return_when_any_returns_the_first_and_the_rest_keep_running() {
    let c = Counter::default();
    let (tx, rx) = tokio::sync::watch::channel(false);
    let slow = Worker::handler("slow", move |_req| {
        let mut rx = rx.clone();
        async move {
            while !*rx.borrow() {
                if rx.changed().await.is_err() {
                    break;
                }
            }
            Ok(WorkerReply::text("slow done"))
        }
    });
    let flow = FnFlow::new("race", move |_t: Value, ctx| {
        let tx = tx.clone();
        async move {
            let calls = vec![ctx.call("slow", "x"), ctx.call("writer", "fast")];
            let res = ctx.gather(calls).return_when(ReturnWhen::Any).settled().await;
            let first = res.iter().position(Option::is_some).unwrap_or(99);
            let none = res.iter().filter(|r| r.is_none()).count();
            let _ = tx.send(true);
            Ok(FlowOutput::text(format!("{first} {none}")))
        }
    });
    let journal = clio_journal::Journal::open_in_memory().unwrap();
    let report = runtime(&journal, registry(&c).subagent(slow).flow(flow))
        .run(sel("race"), json!(null))
        .await
        .unwrap();
    assert_eq!(answer(&report), "1 1");
    let tasks = journal.tasks(report.run).unwrap();
    assert!(
        tasks.iter().all(|t| t.status == TaskStatus::Succeeded),
        "the slow call finished: {tasks:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn as_completed_yields_in_finishing_order_with_indexes() {
    let c = Counter::default();
    let (tx, rx) = tokio::sync::watch::channel(0u64);
    // Call i finishes only after every call after it: finishing order is reversed.
    let gate = Tool::new("gate", move |args: Value| {
        let mut rx = rx.clone();
        async move {
            let i = args["i"].as_u64().unwrap_or(0);
            while *rx.borrow() != 3 - i {
                if rx.changed().await.is_err() {
                    break;
                }
            }
            Ok(json!(i))
        }
    })
    .read_only();
    let flow = FnFlow::new("ordered", move |_t: Value, ctx| {
        let tx = tx.clone();
        async move {
            let mut calls: Vec<_> = (0..3).map(|i| ctx.call("gate", json!({ "i": i }))).collect();
            calls.push(ctx.call("fail", json!({})));
            let mut stream = Box::pin(ctx.as_completed(calls, 16));
            let mut order = Vec::new();
            while let Some(s) = stream.next().await {
                match &s.result {
                    Ok(r) => order.push(format!("{}:{}", s.index, r.index.unwrap_or(99))),
                    Err(e) => order.push(format!("{}:{}", s.index, e.reason())),
                }
                tx.send_modify(|n| *n += 1);
            }
            Ok(FlowOutput::text(order.join(",")))
        }
    });
    let journal = clio_journal::Journal::open_in_memory().unwrap();
    let report = runtime(&journal, registry(&c).tool(gate).flow(flow))
        .run(sel("ordered"), json!(null))
        .await
        .unwrap();
    assert_eq!(answer(&report), "3:call_failed,2:2,1:1,0:0");
}
