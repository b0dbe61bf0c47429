//! The flow bench's Python workloads (`benches/support/python_plugin`, issue 42) at a size
//! that runs fast: what their Python flows record is what the bench's Rust twins record —
//! a sequential `ctx.step` is one entry and one durable commit, a member of a gather one
//! entry, a node of the DAG one entry — so the bench's lines compare the same work. No
//! timing is asserted: the times are the bench's.

use std::path::{Path, PathBuf};

use clio_flow::{
    FlowOutput, FnFlow, Registry, RunOutcome, Runtime, RuntimeConfig, Tool, Workspace,
    register_plugin, selection,
};
use clio_journal::{Journal, JournalConfig};
use serde_json::{Value, json};

/// The bench plugin's folder (the one holding `ai.iowarp.clio/`).
fn bench_plugin() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/support/python_plugin")
}

/// The bench's Rust twins at size `n`, and its read-only no-op tool, with the bench
/// plugin's Python flows registered (trusted).
fn registry(n: u64) -> Registry {
    let rust = Registry::new()
        .tool(Tool::new("noop", |args: Value| async move { Ok(args) }).read_only())
        .flow(FnFlow::new("steps", move |_t: Value, ctx| async move {
            for i in 0..n {
                ctx.step("noop", || async move { Ok(i) }).await?;
            }
            Ok(FlowOutput::text(n.to_string()))
        }))
        .flow(FnFlow::new("fan", move |_t: Value, ctx| async move {
            let calls = (0..n).map(|i| ctx.call("noop", json!({ "i": i }))).collect();
            let res = ctx.gather(calls).await?;
            Ok(FlowOutput::text(res.len().to_string()))
        }));
    let plugin = clio_plugins::load_plugin(&bench_plugin()).expect("the bench plugin loads");
    register_plugin(rust, &plugin, true, &Workspace::new(None)).expect("it registers")
}

/// What one run left: its answer, the journal's durable commits during it and its entries.
struct Run {
    answer: String,
    commits: u64,
    entries: usize,
}

/// Runs `flow` with `options` on a fresh file journal at `path`, as the bench does: its
/// durability, and the default sandbox (with the sandbox off, a run records that it ran
/// without one: an entry the bench's runs do not have).
async fn run(runtime_registry: &Registry, path: &Path, flow: &str, options: Value) -> Run {
    let journal = Journal::open(path, JournalConfig::default()).unwrap();
    let runtime = Runtime::new(journal.clone(), runtime_registry.clone(), RuntimeConfig::default());
    let before = journal.commits();
    let done = runtime.run(selection(flow, options), Value::Null).await.unwrap();
    let commits = journal.commits() - before;
    let RunOutcome::Succeeded(out) = done.outcome else {
        panic!("{flow} did not succeed: {:?}", done.outcome);
    };
    let entries = journal.entries(done.run).unwrap().len();
    Run { answer: out.answer, commits, entries }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_bench_python_flows_record_what_their_rust_twins_record() {
    let dir = tempfile::tempdir().unwrap();
    let registry = registry(20);

    // W1: 20 sequential steps, one entry and one durable commit each, in both.
    let rust = run(&registry, &dir.path().join("w1-rust.redb"), "steps", json!({})).await;
    let py = run(&registry, &dir.path().join("w1-py.redb"), "py-steps", json!({ "n": 20 })).await;
    assert_eq!((rust.answer.as_str(), py.answer.as_str()), ("20", "20"));
    assert_eq!(py.entries, 20, "one entry per Python step");
    assert_eq!(py.entries, rust.entries, "the same entries as the Rust steps");
    assert_eq!(py.commits, rust.commits, "the same durable commits as the Rust steps");
    assert!(py.commits >= 20, "each step is its own commit: {} commits", py.commits);

    // W2: a gather of 20 read-only calls, one entry each (its commits are the group
    // commit's to decide, in Rust as in Python).
    let rust = run(&registry, &dir.path().join("w2-rust.redb"), "fan", json!({})).await;
    let py = run(&registry, &dir.path().join("w2-py.redb"), "py-fan", json!({ "n": 20 })).await;
    assert_eq!((rust.answer.as_str(), py.answer.as_str()), ("20", "20"));
    assert_eq!(py.entries, rust.entries, "a Python gather member is one entry, as in Rust");

    // W3: the DAG, 3 layers of 4 here, with each node waiting on its 2 nodes before, or a
    // gather per layer: one entry per node either way.
    for exact in [true, false] {
        let path = dir.path().join(format!("w3-py-{exact}.redb"));
        let options = json!({ "layers": 3, "width": 4, "exact": exact });
        let py = run(&registry, &path, "py-dag", options).await;
        assert_eq!(py.answer, "12", "exact = {exact}");
        assert_eq!(py.entries, 12, "one entry per node (exact = {exact})");
    }
}
