//! Workflows at scale (issue 24, `issues show 24`): a chain writes one journal entry per
//! step, not two, because a step's events follow from its recorded result (an implicit
//! batch, no `wf-events` entry), so a long chain fits the run's 10,000-entry cap. Here a
//! 1,000-step chain; the slow tier (`tests/slow`) runs the 9,000-step one.

use serde_json::{Value, json};

use crate::support::{Counter, fresh_then_replay, registry};

/// Returns a chain of `n` steps of tool `target`: step `s<i>` waits on `s<i-1>`.
pub(crate) fn chain(n: usize, target: &str) -> Value {
    let steps: Vec<Value> = (0..n)
        .map(|i| {
            let mut step = json!({ "id": format!("s{i}"), "target": target, "input": { "i": i } });
            if i > 0 {
                step["after"] = json!([format!("s{}", i - 1)]);
            }
            step
        })
        .collect();
    json!({ "steps": steps })
}

/// Runs a chain of `n` read-only steps to success under the default entry cap, replays it
/// exactly, and checks that it wrote at most 1.1 journal entries per step (acceptances,
/// views and the limits included), no event batch, and about one durable commit per step
/// (a step's events used to cost a commit of their own: two a step).
pub(crate) async fn a_chain_fits(n: usize) {
    let c = Counter::default();
    let input = json!({ "workflow": chain(n, "echo") });
    let (fresh, journal) = fresh_then_replay(registry(&c), "workflow", input).await;
    let out = fresh.output().unwrap_or_else(|| panic!("{:?}", fresh.outcome));
    let last = format!("s{}", n - 1);
    assert_eq!(out.outputs["results"][&last], json!({ "i": n - 1 }));
    let entries = journal.entries(fresh.run).unwrap();
    let batches = entries
        .iter()
        .filter(|e| e.identity.as_deref().is_some_and(|i| i.contains("wf-event")))
        .count();
    assert_eq!(batches, 0, "a chain logs no event batch");
    let per_step = entries.len() as f64 / n as f64;
    assert!(per_step <= 1.1, "{} entries for {n} steps", entries.len());
    let commits = journal.commits();
    assert!(commits as f64 <= 1.1 * n as f64 + 10.0, "{commits} commits for {n} steps");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue_24_a_1000_step_chain_writes_one_entry_per_step() {
    a_chain_fits(1_000).await;
}

/// A 9,000-step chain fits the seed's 10,000-entry cap (about 25 s in a debug build).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue_24_a_9000_step_chain_fits_the_entry_cap() {
    a_chain_fits(9_000).await;
}
