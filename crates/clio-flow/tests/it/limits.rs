//! Flow limits: `max_depth`, `max_concurrency`, `max_model_calls` and `budget_tokens`, set
//! on the flow or as options, each refusing with `FlowLimitExceeded` naming it.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use clio_flow::{FlowOutput, FnFlow, Limits, Tool, selection};
use clio_journal::Journal;
use serde_json::{Value, json};

use crate::support::{Counter, answer, error, registry, runtime, sel};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_depth_stops_a_recursing_flow() {
    let c = Counter::default();
    let flow = FnFlow::new("recurse", |_t: Value, ctx| async move {
        let r = ctx.call("recurse", ()).await?;
        Ok(FlowOutput::text(r.answer))
    })
    .limits(Limits { max_depth: 3, ..Limits::default() });
    let journal = Journal::open_in_memory().unwrap();
    let err = error(
        &runtime(&journal, registry(&c).flow(flow)).run(sel("recurse"), json!(null)).await.unwrap(),
    );
    assert_eq!(err.details()["limit"], "max_depth");
    assert_eq!(err.details()["max"], 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn budget_tokens_is_checked_before_each_new_call() {
    let c = Counter::default();
    let flow = FnFlow::new("spend", |_t: Value, ctx| async move {
        for i in 0..10 {
            ctx.call("writer", json!(i)).await?;
        }
        Ok(FlowOutput::text("x"))
    });
    let journal = Journal::open_in_memory().unwrap();
    // Each writer call spends 15 tokens; the third call finds 30 >= 30 and is refused.
    let report = runtime(&journal, registry(&c).flow(flow))
        .run(selection("spend", json!({ "budget_tokens": 30 })), json!(null))
        .await
        .unwrap();
    let err = error(&report);
    assert_eq!(err.details()["limit"], "budget_tokens");
    assert_eq!(c.get(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_concurrency_caps_calls_running_at_once() {
    let c = Counter::default();
    let now = Arc::new(AtomicUsize::new(0));
    let peak = Arc::new(AtomicUsize::new(0));
    let (n, p) = (Arc::clone(&now), Arc::clone(&peak));
    let probe = Tool::new("probe", move |_args: Value| {
        let (n, p) = (Arc::clone(&n), Arc::clone(&p));
        async move {
            let cur = n.fetch_add(1, Ordering::SeqCst) + 1;
            p.fetch_max(cur, Ordering::SeqCst);
            tokio::task::yield_now().await;
            n.fetch_sub(1, Ordering::SeqCst);
            Ok(json!(cur))
        }
    });
    let flow = FnFlow::new("wide", |_t: Value, ctx| async move {
        let calls = (0..30).map(|i| ctx.call("probe", json!(i))).collect();
        ctx.gather(calls).await?;
        Ok(FlowOutput::text("ok"))
    });
    let journal = Journal::open_in_memory().unwrap();
    let report = runtime(&journal, registry(&c).tool(probe).flow(flow))
        .run(selection("wide", json!({ "max_concurrency": 2 })), json!(null))
        .await
        .unwrap();
    assert_eq!(answer(&report), "ok");
    assert!(peak.load(Ordering::SeqCst) <= 2, "peak {}", peak.load(Ordering::SeqCst));
}
