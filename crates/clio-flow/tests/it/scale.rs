//! Workflows at scale (issue 24, `issues show 24`): a chain writes one journal entry per
//! step, not two, because a step's events follow from its recorded result (an implicit
//! batch, no `wf-events` entry), so a long chain fits the run's 10,000-entry cap; and a
//! small workflow of fast steps does not write its live view after every event (it is
//! published on a clock), so it too writes about one entry per step.

use std::time::Duration;

use clio_flow::{Registry, Tool};
use clio_journal::EntryKind;
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

/// Issue 24: a fan-out "just fit" the cap at 9,900 steps; a 9,000-way fan-out of read-only
/// steps runs to success under the default cap, replays exactly, and writes at most 1.1
/// entries a step (its calls, the limits, the batches of events that settled together, its
/// views).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue_24_a_9000_way_fan_out_fits_the_entry_cap() {
    const N: usize = 9_000;
    let steps: Vec<Value> = (0..N)
        .map(|i| json!({ "id": format!("s{i}"), "target": "echo", "input": { "i": i } }))
        .collect();
    let c = Counter::default();
    let input = json!({ "workflow": { "steps": steps } });
    let (fresh, journal) = fresh_then_replay(registry(&c), "workflow", input).await;
    let out = fresh.output().unwrap_or_else(|| panic!("{:?}", fresh.outcome));
    assert_eq!(out.outputs["results"][format!("s{}", N - 1)], json!({ "i": N - 1 }));
    let entries = journal.entries(fresh.run).unwrap().len();
    assert!(entries as f64 <= 1.1 * N as f64, "{entries} entries for {N} steps");
}

/// A small chain of fast steps writes its calls, the limits and one final view: 1.1
/// entries a step at 20 steps, where it wrote 3.1 when it published a view per event.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue_24_a_20_step_chain_writes_at_most_1_1_entries_per_step() {
    a_chain_fits(20).await;
    a_chain_fits(50).await;
}

fn slow_registry() -> Registry {
    let slow = Tool::new("slow", |args: Value| async move {
        tokio::time::sleep(Duration::from_millis(400)).await;
        Ok(args)
    })
    .read_only();
    Registry::new()
        .tool(slow)
        .tool(Tool::new("echo", |args: Value| async move { Ok(args) }).read_only())
}

/// Runs `workflow` on the slow registry and returns, for each live view it published in
/// order (checked to be numbered from 0), how many steps it shows finished.
async fn finished_per_view(workflow: Value) -> Vec<usize> {
    let input = json!({ "workflow": workflow });
    let (fresh, journal) = fresh_then_replay(slow_registry(), "workflow", input).await;
    let views: Vec<_> = journal
        .entries(fresh.run)
        .unwrap()
        .into_iter()
        .filter(|e| e.kind == EntryKind::View)
        .collect();
    let ids: Vec<String> = views.iter().filter_map(|e| e.identity.clone()).collect();
    let numbered: Vec<String> = (0..ids.len()).map(|i| format!("key:wf-view-{i}")).collect();
    assert_eq!(ids, numbered);
    let finished = |e: &clio_journal::JournalEntry| {
        e.payload["command"]["view"]["workflow"]
            .as_array()
            .map_or(0, |steps| steps.iter().filter(|s| s["status"] == "finished").count())
    };
    views.iter().map(finished).collect()
}

/// Steps slower than the view's interval show on the run card as they finish: a view as
/// each of the first two steps finished, then the end's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_steps_publish_the_live_view_as_they_finish() {
    assert_eq!(finished_per_view(chain(3, "slow")).await, vec![1, 2, 3]);
}

/// A change that came too soon after the last view is shown once its interval ends, while
/// the workflow waits: the fast first step is on the run card while the slow one runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_is_shown_while_the_workflow_waits() {
    let workflow = json!({ "steps": [
        { "id": "fast", "target": "echo", "input": "a" },
        { "id": "slow", "target": "slow", "input": "b", "after": ["fast"] }
    ]});
    assert_eq!(finished_per_view(workflow).await, vec![1, 2]);
}

/// Issue 24: a workflow holds about 5 KB for each step running, so a fan-out wider than
/// CLIO's window (1,024 steps running at once) runs its steps within the window: the
/// first 1,024 start, the rest wait for them, and no step waits on a step it does not
/// depend on beyond that. Each step's tool waits until 1,024 steps have started, then
/// 100 ms more: without the window more than 1,024 would run at once; with a narrower one
/// none would pass the wait. The run then replays exactly.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue_24_a_fan_out_wider_than_the_window_runs_1024_steps_at_once() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    const N: usize = 1_100;
    const WINDOW: usize = 1_024;
    let started = Arc::new(AtomicUsize::new(0));
    let running = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let (s, r, m) = (started.clone(), running.clone(), most.clone());
    let gated = Tool::new("gated", move |args: Value| {
        let (started, running, most) = (s.clone(), r.clone(), m.clone());
        async move {
            started.fetch_add(1, Ordering::SeqCst);
            let now = running.fetch_add(1, Ordering::SeqCst) + 1;
            most.fetch_max(now, Ordering::SeqCst);
            let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
            while started.load(Ordering::SeqCst) < WINDOW && tokio::time::Instant::now() < deadline
            {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            // Long enough for any step launched past the window to start meanwhile.
            tokio::time::sleep(Duration::from_millis(100)).await;
            running.fetch_sub(1, Ordering::SeqCst);
            Ok(args)
        }
    })
    .read_only();
    let reg: Registry = registry(&Counter::default()).tool(gated);
    let steps: Vec<Value> = (0..N)
        .map(|i| json!({ "id": format!("s{i}"), "target": "gated", "input": { "i": i } }))
        .collect();
    let input = json!({ "workflow": { "steps": steps } });
    let (fresh, journal) = fresh_then_replay(reg, "workflow", input).await;
    let out = fresh.output().unwrap_or_else(|| panic!("{:?}", fresh.outcome));
    assert_eq!(out.outputs["results"][format!("s{}", N - 1)], json!({ "i": N - 1 }));
    assert_eq!(started.load(Ordering::SeqCst), N, "each step ran once");
    assert_eq!(most.load(Ordering::SeqCst), WINDOW, "steps running at once");
    let limits = journal.entry_by_identity(fresh.run, "key:wf-limits").unwrap().unwrap();
    assert_eq!(limits.payload["result"]["window"], json!(WINDOW), "{:?}", limits.payload);
}
