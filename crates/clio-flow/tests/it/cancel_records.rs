//! Issue 44 item 7: a cancelled run leaves no task of its own unfinished. A cancel recorded
//! as cancelled only the tasks unfinished when it came: a call accepted in between was left
//! `running` (read as interrupted once the process was gone, and counted running by the
//! live summary).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use clio_flow::{FlowOutput, FnFlow, Registry, RunOutcome, Tool};
use clio_journal::{Journal, RunStatus};
use serde_json::{Value, json};

use crate::support::{runtime, sel};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_run_leaves_none_of_its_tasks_unfinished() {
    for round in 0..5u64 {
        let effects = Arc::new(AtomicU64::new(0));
        let counted = Arc::clone(&effects);
        let slow = Tool::new("slow_effect", move |args: Value| {
            let counted = Arc::clone(&counted);
            async move {
                tokio::time::sleep(Duration::from_millis(2)).await;
                counted.fetch_add(1, Ordering::SeqCst);
                Ok(json!({ "done": args }))
            }
        });
        let flow = FnFlow::new("busy", |_t: Value, ctx| async move {
            for i in 0..10_000 {
                ctx.call("slow_effect", json!({ "i": i })).await?;
            }
            Ok(FlowOutput::text("all"))
        });
        let reg = Registry::new().tool(slow).flow(flow);
        let journal = Journal::open_in_memory().unwrap();
        let rt = runtime(&journal, reg);
        let handle = rt.start(sel("busy"), json!({}), None).await.unwrap();
        let run = handle.id();
        let driven = tokio::spawn(handle.drive());
        // Let it get going, a little longer each round.
        while effects.load(Ordering::SeqCst) < 3 + round * 4 {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        rt.cancel(run).await.unwrap();
        let report = driven.await.unwrap().unwrap();
        assert!(matches!(report.outcome, RunOutcome::Cancelled), "{:?}", report.outcome);
        assert_eq!(journal.run(run).unwrap().unwrap().status, RunStatus::Cancelled);
        let left: Vec<_> = journal
            .tasks(run)
            .unwrap()
            .into_iter()
            .filter(|t| !t.status.is_terminal())
            .map(|t| (t.id, t.status))
            .collect();
        assert!(left.is_empty(), "round {round}: tasks left unfinished: {left:?}");
    }
}
