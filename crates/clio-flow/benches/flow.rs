//! Benchmarks of the flow runtime (SPEC §10), one JSON line per workload on stdout, each
//! with no-op work inside so that only orchestration and durability are measured:
//!
//! - `baseline`: the journal's own single durable append, 1,000 times in a row (clio-flow
//!   may not depend on redb, so a bare redb loop lives in clio-journal's bench; this is the
//!   cost of one durable commit through the journal);
//! - W1: 1,000 sequential no-op `ctx.step`s, with the journal's quick repair on (the
//!   default) and off; `cargo xtask bench` compares it with a bare redb commit measured by
//!   the journal bench of the same run;
//! - W2: a 1,000-way `gather` of no-op tool calls;
//! - W3: the 1,000-step workflow DAG (10 layers × 100, each step waiting on 2 of the layer
//!   before) with no-op tool targets, given as the run's input; W3b the same workflow
//!   called from a flow (the run's input is then small: see the report for why it matters);
//! - W4: a child process killed with SIGKILL after 900 of 1,000 steps, then the time for
//!   this process to resume the run to completion;
//! - W5: a warm replay of a finished 10,000-entry run (the median of five, and the fastest);
//! - W6: 1,000 runs each left waiting in `ask`.
//!
//! `peak_rss_kb` is the process's high-water mark (`VmHWM`) after the workload.
//! `CLIO_FLOW_BENCH_ONLY=W2,W3` runs only the workloads named; `CLIO_FLOW_BENCH_KEEP=<dir>`
//! keeps the journals the workloads wrote there, for a look at what they recorded.
#![allow(clippy::print_stdout, reason = "a benchmark reports on stdout")]

use std::path::Path;
use std::process::{Command, Stdio};

use clio_flow::{
    FlowError, FlowOutput, FnFlow, Registry, RunOutcome, Runtime, RuntimeConfig, Tool, instant,
    selection,
};
use clio_journal::{Durability, EntryKind, Journal, JournalConfig, NewEntry, NewRun};
use serde_json::{Value, json};

const CHILD: &str = "CLIO_FLOW_BENCH_W4_CHILD";

fn peak_rss_kb() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1).and_then(|n| n.parse().ok()))
        })
        .unwrap_or(0)
}

fn report(bench: &str, n: u64, ms: f64, extra: Value) {
    let mut line = json!({
        "bench": bench,
        "n": n,
        "total_ms": (ms * 1000.0).round() / 1000.0,
        "per_op_us": ((ms * 1000.0 / n.max(1) as f64) * 10.0).round() / 10.0,
        "peak_rss_kb": peak_rss_kb(),
    });
    if let (Some(obj), Value::Object(more)) = (line.as_object_mut(), extra) {
        obj.extend(more);
    }
    println!("{line}");
}

fn steps_flow(n: u64, block_at: Option<u64>, marker: Option<std::path::PathBuf>) -> FnFlow {
    FnFlow::new("steps", move |_t: Value, ctx| {
        let marker = marker.clone();
        async move {
            for i in 0..n {
                let marker = marker.clone();
                ctx.step("noop", || async move {
                    if Some(i) == block_at {
                        if let Some(m) = marker {
                            std::fs::write(m, "ready")
                                .map_err(|e| FlowError::stall("bench", e.to_string()))?;
                        }
                        std::future::pending::<()>().await;
                    }
                    Ok(i)
                })
                .await?;
            }
            Ok(FlowOutput::text(n.to_string()))
        }
    })
}

fn registry() -> Registry {
    Registry::new()
        .tool(Tool::new("noop", |args: Value| async move { Ok(args) }).read_only())
        .flow(steps_flow(1_000, None, None))
        .flow(FnFlow::new("fan", |_t: Value, ctx| async move {
            let calls = (0..1_000).map(|i| ctx.call("noop", json!({ "i": i }))).collect();
            let res = ctx.gather(calls).await?;
            Ok(FlowOutput::text(res.len().to_string()))
        }))
        .flow(FnFlow::new("dag", |_t: Value, ctx| async move {
            let r = ctx.call("workflow", dag()).await?;
            Ok(FlowOutput::text(r.answer.len().to_string()))
        }))
        .flow(FnFlow::new("ask", |_t: Value, ctx| async move {
            let a = ctx.ask("go?").await?;
            Ok(FlowOutput::text(a))
        }))
}

fn open(path: &Path, durability: Durability) -> Journal {
    Journal::open(path, JournalConfig { durability, ..JournalConfig::default() })
        .expect("journal opens")
}

fn rt(journal: &Journal, reg: Registry) -> Runtime {
    Runtime::new(journal.clone(), reg, RuntimeConfig::default())
}

fn ok(outcome: &RunOutcome) {
    assert!(matches!(outcome, RunOutcome::Succeeded(_)), "{outcome:?}");
}

fn dag() -> Value {
    let mut steps = Vec::new();
    for layer in 0..10 {
        for i in 0..100 {
            let mut step =
                json!({ "id": format!("s{layer}_{i}"), "target": "noop", "input": { "i": i } });
            if layer > 0 {
                step["after"] = json!([
                    format!("s{}_{}", layer - 1, i),
                    format!("s{}_{}", layer - 1, (i + 1) % 100)
                ]);
            }
            steps.push(step);
        }
    }
    json!({ "workflow": { "steps": steps } })
}

/// Returns whether workload `name` runs: all of them, or those named in
/// `CLIO_FLOW_BENCH_ONLY` (comma-separated, e.g. `W5`).
fn want(name: &str) -> bool {
    std::env::var("CLIO_FLOW_BENCH_ONLY").map_or(true, |only| only.split(',').any(|w| w == name))
}

/// Appends 1,000 entries one durable commit each; returns the total milliseconds.
fn baseline(dir: &Path) -> f64 {
    let journal = open(&dir.join("baseline.redb"), Durability::Immediate);
    let run = journal
        .create_run(NewRun {
            flow: "baseline".into(),
            input: Value::Null,
            input_digest: String::new(),
            fingerprint: String::new(),
            owner: "bench".into(),
            launch: None,
        })
        .expect("run");
    let t = instant();
    for i in 0..1_000u64 {
        journal
            .append(run, NewEntry::new(EntryKind::Step, json!({ "result": i })))
            .expect("append");
    }
    let base_ms = t.elapsed().as_secs_f64() * 1000.0;
    report(
        "baseline_journal_append",
        1_000,
        base_ms,
        json!({ "note": "journal single durable append; no bare redb in clio-flow" }),
    );
    base_ms
}

async fn benches(dir: &Path) {
    // Baseline: one durable append per commit through the journal (W1 is measured against
    // it, so it runs whenever W1 does).
    let base_ms = if want("baseline") || want("W1") { baseline(dir) } else { 0.0 };

    if want("W1") {
        // W1, on the default journal (quick repair on: two flushes per commit), then with
        // quick repair off (one flush, as a bare redb commit).
        for (name, quick_repair) in
            [("W1_sequential_steps", true), ("W1_sequential_steps_no_quick_repair", false)]
        {
            let path = dir.join(format!("{name}.redb"));
            let config = JournalConfig { quick_repair, ..JournalConfig::default() };
            let journal = Journal::open(&path, config).expect("journal opens");
            let t = instant();
            let r = rt(&journal, registry())
                .run(selection("steps", json!({})), Value::Null)
                .await
                .expect("w1");
            let ms = t.elapsed().as_secs_f64() * 1000.0;
            ok(&r.outcome);
            let ratio = ((ms / base_ms) * 100.0).round() / 100.0;
            report(name, 1_000, ms, json!({ "ratio_to_baseline": ratio }));
        }
    }

    if want("W2") {
        // W2.
        let journal = open(&dir.join("w2.redb"), Durability::Immediate);
        let runtime = rt(&journal, registry());
        let t = instant();
        let r = runtime.run(selection("fan", json!({})), Value::Null).await.expect("w2");
        ok(&r.outcome);
        report("W2_gather_1000_tools", 1_000, t.elapsed().as_secs_f64() * 1000.0, json!({}));
        drop(journal);
    }

    if want("W3") {
        // W3.
        let journal = open(&dir.join("w3.redb"), Durability::Immediate);
        // The runtime and the workflow (the run's input) are made before the clock starts.
        let (runtime, input) = (rt(&journal, registry()), dag());
        let t = instant();
        let r = runtime.run(selection("workflow", json!({})), input).await.expect("w3");
        ok(&r.outcome);
        report("W3_dag_10x100", 1_000, t.elapsed().as_secs_f64() * 1000.0, json!({}));
        drop(journal);
    }

    if want("W3b") {
        // W3.
        let journal = open(&dir.join("w3b.redb"), Durability::Immediate);
        let runtime = rt(&journal, registry());
        let t = instant();
        let r = runtime.run(selection("dag", json!({})), Value::Null).await.expect("w3b");
        ok(&r.outcome);
        report(
            "W3b_dag_10x100_called_from_a_flow",
            1_000,
            t.elapsed().as_secs_f64() * 1000.0,
            json!({}),
        );
        drop(journal);
    }

    if want("W4") {
        // W4: the child runs 1,000 steps and blocks inside step 900; it is killed there.
        let w4 = dir.join("w4.redb");
        let marker = dir.join("w4.ready");
        let mut child = Command::new(std::env::current_exe().expect("exe"))
            .env(CHILD, dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("child");
        while !marker.exists() {
            if child.try_wait().expect("wait").is_some() {
                panic!("the W4 child exited early");
            }
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        child.kill().expect("kill");
        let _ = child.wait();
        let journal = open(&w4, Durability::Immediate);
        let run = journal.runs(&clio_journal::RunFilter::default()).expect("runs")[0].id;
        let t = instant();
        let r = rt(&journal, registry()).resume(run).await.expect("w4");
        ok(&r.outcome);
        report(
            "W4_resume_after_kill_at_900",
            100,
            t.elapsed().as_secs_f64() * 1000.0,
            json!({ "steps_run": r.steps_run }),
        );
        drop(journal);
    }

    if want("W5") {
        // W5: build a finished run of 10,000 steps quickly, then replay it warm.
        let journal = open(&dir.join("w5.redb"), Durability::Eventual);
        let reg = Registry::new().flow(steps_flow(10_000, None, None));
        let runtime = rt(&journal, reg);
        let r = runtime.run(selection("steps", json!({})), Value::Null).await.expect("w5 build");
        ok(&r.outcome);
        journal.flush().expect("flush");
        // `CLIO_FLOW_BENCH_REPLAYS=n` replays n times first, for a profiler.
        let warm: usize =
            std::env::var("CLIO_FLOW_BENCH_REPLAYS").ok().and_then(|n| n.parse().ok()).unwrap_or(1);
        for _ in 0..warm {
            let _ = runtime.replay(r.run).await.expect("warm-up");
        }
        // Five measured replays: the median is reported, and the fastest beside it (this
        // machine's timings are noisy).
        let mut times = Vec::new();
        let mut replay = None;
        for _ in 0..5 {
            let t = instant();
            let done = runtime.replay(r.run).await.expect("w5");
            times.push(t.elapsed().as_secs_f64() * 1000.0);
            ok(&done.outcome);
            replay = Some(done);
            // Let the previous replay's state be freed before the next one starts.
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
        let replay = replay.expect("five replays");
        times.sort_by(f64::total_cmp);
        let replay_ms = times[times.len() / 2];
        let fastest_ms = times[0];
        let mut read_ms = f64::MAX;
        let mut entries = 0;
        for _ in 0..3 {
            let t = instant();
            entries = journal.entries(r.run).expect("entries").len();
            read_ms = read_ms.min(t.elapsed().as_secs_f64() * 1000.0);
        }
        let extra = json!({
            "submitted": replay.submitted,
            "entries": entries,
            "read_entries_ms": (read_ms * 1000.0).round() / 1000.0,
            "fastest_ms": (fastest_ms * 1000.0).round() / 1000.0,
            "replays": times.len(),
        });
        report("W5_replay_10000_entries", 10_000, replay_ms, extra);
        drop(journal);
    }

    if want("W6") {
        // W6: 1,000 runs each waiting in ask.
        let journal = open(&dir.join("w6.redb"), Durability::Eventual);
        let runtime = rt(&journal, registry());
        let before = peak_rss_kb();
        let t = instant();
        let mut handles = Vec::new();
        for _ in 0..1_000 {
            let runtime = runtime.clone();
            handles.push(tokio::spawn(async move {
                runtime.run(selection("ask", json!({})), Value::Null).await
            }));
        }
        let mut waiting = 0;
        for h in handles {
            if let Ok(Ok(r)) = h.await
                && matches!(r.outcome, RunOutcome::AwaitingInput(_))
            {
                waiting += 1;
            }
        }
        report(
            "W6_1000_runs_awaiting_ask",
            1_000,
            t.elapsed().as_secs_f64() * 1000.0,
            json!({ "waiting": waiting, "rss_before_kb": before }),
        );
    }
}

async fn w4_child(dir: &Path) {
    let journal = open(&dir.join("w4.redb"), Durability::Immediate);
    let reg = Registry::new().flow(steps_flow(1_000, Some(900), Some(dir.join("w4.ready"))));
    let _ = rt(&journal, reg).run(selection("steps", json!({})), Value::Null).await;
}

fn main() {
    let runtime =
        tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("tokio runtime");
    if let Ok(dir) = std::env::var(CHILD) {
        runtime.block_on(w4_child(Path::new(&dir)));
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    runtime.block_on(benches(dir.path()));
    if let Ok(keep) = std::env::var("CLIO_FLOW_BENCH_KEEP") {
        let _ = std::fs::rename(dir.keep(), keep);
    }
}
