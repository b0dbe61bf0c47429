//! Benchmarks of the flow runtime (SPEC §10), one JSON line per workload on stdout, each
//! with no-op work inside so that only orchestration and durability are measured:
//!
//! - `baseline`: the journal's own single durable append, 1,000 times in a row (clio-flow
//!   may not depend on redb, so a bare redb loop lives in clio-journal's bench; this is the
//!   cost of one durable commit through the journal);
//! - `baseline_raw`: the physical floor, 1,000 × (append 128 bytes to a file, `fdatasync`)
//!   in the same folder, with no journal at all; `baseline_raw_overwrite` the same into a
//!   file grown with zeros first, as the journal's write-ahead log writes (no file size
//!   changes, so a cheaper flush on ext4);
//! - W1: 1,000 sequential no-op `ctx.step`s, with the journal's quick repair on (the
//!   default) and off, each line with its ratio to both baselines of this run. The raw
//!   loop and W1 (quick repair on) run in 3 alternated rounds, and each line reports the
//!   median of its rounds (`runs_ms`), W1's ratio the median of each round's ratio to the
//!   raw loop of its round: the disk's rate drifts within a run. A round runs W1 twice and
//!   times the second: the first, right after the raw loop, was 40-45 µs a step slower
//!   (`runs_after_raw_ms`); `cargo xtask
//!   bench` also compares it with a bare redb commit measured by the journal bench;
//!   W1spin the same on a runtime like the CLI's foreground one (one worker, which spins
//!   for an awaited journal write before it sleeps), in a process of its own;
//!   W1wf the same 1,000 steps as a chain workflow (each step waits on the one before)
//!   through the `workflow` flow, with read-only no-op tool targets;
//! - W2: a 1,000-way `gather` of read-only no-op tool calls; W2s the same with a
//!   side-effecting no-op tool (intent and acceptance are durable before the tool runs);
//!   W2wf the 1,000 calls as a fan-out workflow (no step waits on another);
//! - W3: the 1,000-step workflow DAG (10 layers × 100, each step waiting on 2 of the layer
//!   before) with read-only no-op tool targets, given as the run's input; W3s the same DAG
//!   with side-effecting targets (W2 and W2s, then W3 and W3s, run in 3 alternated rounds
//!   after an untimed run of each, and each line reports the run of median time, the twin's
//!   ratio the median of each round's ratio); W3b the same workflow
//!   called from a flow (the run's input is then small: see the report for why it matters);
//! - W4: a child process killed with SIGKILL after 900 of 1,000 steps, then the time for
//!   this process to resume the run to completion;
//! - W5: a warm replay of a finished 10,000-entry run (the median of five, and the fastest);
//! - W6: 1,000 runs each left waiting in `ask`;
//! - W7: 1,000 runs at once, each 10 sequential no-op `ctx.step`s (runs and steps per
//!   second, commits and `fdatasync`s per run);
//! - the Python front end (`support/python.rs`, issue 42): W1, W2, W3 and W7 written as a
//!   plugin's Python flows (`support/python_plugin/`), each against its Rust twin in
//!   alternated rounds, the protocol's cost per command and the child's start on lines of
//!   their own (`W1py`, `W2py`, `W3py`, `PYproto`, `PYstart`, `W7py`; `py` names them all);
//! - `scale_chain_<N>` and `scale_fanout_<N>`: chain and fan-out workflows of N = 20 (a
//!   small workflow publishes its view at every event), 100, 1,000 and 9,000 read-only
//!   no-op steps, each with its time and memory per step, and a 10,000-way fan-out, whose
//!   run alone has its entry cap raised to 11,000 (its calls are 10,000 entries; the line
//!   says so) to check the memory goal of under 50 MB at its peak.
//!
//! Every line says what it includes. `commits` counts the journal's durable commits during
//! the workload (`Journal::commits`; in `immediate` mode one `fdatasync` of the write-ahead
//! log each, a checkpoint a few more); `fdatasyncs` counts the flushes the journal made of
//! its file and its log during it (`Journal::flushes`: each `fdatasync`, or `fsync` where a
//! length changed, counted as it is made); `entries` counts the run's journal entries (all of
//! them, acceptances included). `peak_rss_kb` is the process's high-water mark (`VmHWM`)
//! after the workload, reset before each workload (`/proc/self/clear_refs`), so it is that
//! workload's peak; `rss_before_kb` is the resident size when it started, and
//! `peak_rss_per_step_bytes` the growth over it per step.
//! `CLIO_FLOW_BENCH_ONLY=W2,W3` runs only the workloads named (`scale` names the curve); `CLIO_FLOW_BENCH_KEEP=<dir>`
//! keeps the journals the workloads wrote there, for a look at what they recorded.
//!
//! The bench allocates as the `clio` binary does: jemalloc with one arena
//! (`.cargo/config.toml`; `docs/decisions.md`).
#![allow(clippy::print_stdout, reason = "a benchmark reports on stdout")]

#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

#[path = "support/dag.rs"]
mod dag;
#[path = "support/python.rs"]
mod python;
#[path = "support/report.rs"]
mod report;
use dag::dag_of;
use report::round2;
use std::path::Path;
use std::process::{Command, Stdio};

use clio_flow::{
    FlowError, FlowOutput, FnFlow, Registry, RunOutcome, Runtime, RuntimeConfig, Tool, instant,
    selection,
};
use clio_journal::{Durability, EntryKind, Journal, JournalConfig, NewEntry, NewRun};
use serde_json::{Value, json};

const CHILD: &str = "CLIO_FLOW_BENCH_W4_CHILD";
const SCALE_CHILD: &str = "CLIO_FLOW_BENCH_SCALE_CHILD";
const SPIN_CHILD: &str = "CLIO_FLOW_BENCH_W1_SPIN_CHILD";

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

fn rss_kb() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1).and_then(|n| n.parse().ok()))
        })
        .unwrap_or(0)
}

/// Resets the process's high-water mark to its resident size (Linux: `5` to
/// `/proc/self/clear_refs`), so the next `peak_rss_kb` is the next workload's peak; returns
/// the resident size now.
fn reset_peak() -> u64 {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
    rss_kb()
}

/// Prints workload `bench`'s line (`support/report.rs`) with this target's fields, then
/// `extra`.
fn report(bench: &str, n: u64, ms: f64, extra: Value) {
    report::print_line(
        bench,
        n,
        ms,
        report::merged(json!({ "peak_rss_kb": peak_rss_kb() }), extra),
    );
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
        // Side-effecting: the gate writes intent and acceptance before it runs.
        .tool(Tool::new("effect", |args: Value| async move { Ok(args) }))
        .flow(steps_flow_named("steps10", 10))
        .flow(FnFlow::new("fan_effect", |_t: Value, ctx| async move {
            let calls = (0..1_000).map(|i| ctx.call("effect", json!({ "i": i }))).collect();
            let res = ctx.gather(calls).await?;
            Ok(FlowOutput::text(res.len().to_string()))
        }))
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
    let mut config = JournalConfig { durability, ..JournalConfig::default() };
    // `CLIO_FLOW_BENCH_WRITER_SPIN_US=n`: the journal writer's spin (`writer_spin`), for an
    // experiment; the default otherwise.
    if let Some(us) =
        std::env::var("CLIO_FLOW_BENCH_WRITER_SPIN_US").ok().and_then(|v| v.parse().ok())
    {
        config.writer_spin = std::time::Duration::from_micros(us);
    }
    Journal::open(path, config).expect("journal opens")
}

fn rt(journal: &Journal, reg: Registry) -> Runtime {
    Runtime::new(journal.clone(), reg, RuntimeConfig::default())
}

fn ok(outcome: &RunOutcome) {
    assert!(matches!(outcome, RunOutcome::Succeeded(_)), "{outcome:?}");
}

/// Returns a flow named `name` of `n` sequential no-op steps.
fn steps_flow_named(name: &'static str, n: u64) -> FnFlow {
    FnFlow::new(name, move |_t: Value, ctx| async move {
        for i in 0..n {
            ctx.step("noop", || async move { Ok(i) }).await?;
        }
        Ok(FlowOutput::text(n.to_string()))
    })
}

/// Returns a workflow of `n` steps of `target`: a chain (each waits on the one before) or
/// a fan-out (none waits).
fn shaped(n: usize, chain: bool, target: &str) -> Value {
    let steps: Vec<Value> = (0..n)
        .map(|i| {
            let mut step = json!({ "id": format!("s{i}"), "target": target, "input": { "i": i } });
            if chain && i > 0 {
                step["after"] = json!([format!("s{}", i - 1)]);
            }
            step
        })
        .collect();
    json!({ "workflow": { "steps": steps } })
}

fn dag() -> Value {
    dag_of("noop")
}

/// Returns whether workload `name` runs: all of them, or those named in
/// `CLIO_FLOW_BENCH_ONLY` (comma-separated, e.g. `W5`).
fn want(name: &str) -> bool {
    std::env::var("CLIO_FLOW_BENCH_ONLY").map_or(true, |only| only.split(',').any(|w| w == name))
}

/// Appends 128 bytes to a plain file and `fdatasync`s it, 1,000 times; returns the total
/// milliseconds: the floor a durable step cannot go under on this disk.
fn raw_fdatasync_ms(dir: &Path) -> f64 {
    use std::io::Write;
    let path = dir.join("raw_fdatasync.bin");
    let mut file = std::fs::File::create(&path).expect("raw file");
    let record = [7u8; 128];
    let t = instant();
    for _ in 0..1_000 {
        file.write_all(&record).expect("write");
        file.sync_data().expect("fdatasync");
    }
    t.elapsed().as_secs_f64() * 1000.0
}

/// Writes 128 bytes at each of 1,000 offsets of a file grown with zeros (and flushed)
/// first, and `fdatasync`s each; returns the total milliseconds. The journal's write-ahead
/// log writes into space grown the same way, so its flushes change no file size: on this
/// machine's ext4 such a flush took about two thirds of an appending one.
fn raw_overwrite_fdatasync_ms(dir: &Path) -> f64 {
    use std::os::unix::fs::FileExt;
    let path = dir.join("raw_overwrite_fdatasync.bin");
    let file = std::fs::File::create(&path).expect("raw file");
    file.write_all_at(&vec![0u8; 128 * 1_000], 0).expect("zeros");
    file.sync_all().expect("fsync");
    let record = [7u8; 128];
    let t = instant();
    for i in 0..1_000u64 {
        file.write_all_at(&record, i * 128).expect("write");
        file.sync_data().expect("fdatasync");
    }
    t.elapsed().as_secs_f64() * 1000.0
}

/// How many rounds of the raw loop and W1 run, alternated: the disk's rate drifts within a
/// run (250 µs a flush at the start of one run, 168 µs a minute later), so W1 is compared
/// with the raw loop of its own round and the line reports the medians.
const W1_ROUNDS: usize = 3;

/// Returns the median of `xs`.
fn median(xs: &[f64]) -> f64 {
    let mut sorted = xs.to_vec();
    sorted.sort_by(f64::total_cmp);
    sorted[sorted.len() / 2]
}

/// What one run of a workload left: its wall time, the journal's commits during it and
/// the run's entries.
struct Measured {
    ms: f64,
    commits: u64,
    fdatasyncs: u64,
    entries: usize,
    rss_before_kb: u64,
    peak_kb: u64,
}

/// Runs `flow` on `input` on a fresh file journal at `path` and measures it.
async fn measure(path: &Path, flow: &str, input: Value) -> Measured {
    measure_with(path, flow, input, RuntimeConfig::default()).await
}

/// [`measure`] on a runtime of `config`.
async fn measure_with(path: &Path, flow: &str, input: Value, config: RuntimeConfig) -> Measured {
    let journal = open(path, Durability::Immediate);
    measure_on(&journal, registry(), selection(flow, json!({})), input, config).await
}

/// Runs `flow` on `input` on `journal` with registry `reg` and measures it.
async fn measure_on(
    journal: &Journal,
    reg: Registry,
    flow: clio_flow::FlowSelection,
    input: Value,
    config: RuntimeConfig,
) -> Measured {
    let runtime = Runtime::new(journal.clone(), reg, config);
    let rss_before_kb = reset_peak();
    let commits = journal.commits();
    let fdatasyncs = flushes(journal);
    let t = instant();
    let name = flow.id.clone();
    let r = runtime.run(flow, input).await.expect(&name);
    let ms = t.elapsed().as_secs_f64() * 1000.0;
    let commits = journal.commits() - commits;
    let fdatasyncs = flushes(journal) - fdatasyncs;
    // The peak of the run itself, before the entries are read back to be counted.
    let peak_kb = peak_rss_kb();
    ok(&r.outcome);
    // `CLIO_FLOW_BENCH_NO_ENTRIES=1` leaves the count out, so that a heap profiler's peak
    // is the run's.
    let entries = match std::env::var_os("CLIO_FLOW_BENCH_NO_ENTRIES") {
        Some(_) => 0,
        None => journal.entries(r.run).expect("entries").len(),
    };
    Measured { ms, commits, fdatasyncs, entries, rss_before_kb, peak_kb }
}

/// Rounds of a read-only workload and its side-effecting twin, alternated.
const PAIR_ROUNDS: usize = 3;

/// A workload to measure: the stem of its journals' file names, its flow and its input.
type Workload = (&'static str, &'static str, Value);

/// Runs `a` and `b` once each untimed (the first side-effecting run of a process was the
/// slowest of its rounds by half), then [`PAIR_ROUNDS`] rounds of `a` and `b` in turn
/// (either may be left out), each on a fresh journal; returns the measured runs of each in
/// round order.
async fn alternated(
    dir: &Path,
    a: Option<Workload>,
    b: Option<Workload>,
) -> (Vec<Measured>, Vec<Measured>) {
    let (mut runs_a, mut runs_b) = (Vec::new(), Vec::new());
    for (stem, flow, input) in a.iter().chain(b.iter()) {
        measure(&dir.join(format!("{stem}-untimed.redb")), flow, input.clone()).await;
    }
    for round in 0..PAIR_ROUNDS {
        if let Some((stem, flow, input)) = &a {
            runs_a.push(
                measure(&dir.join(format!("{stem}-{round}.redb")), flow, input.clone()).await,
            );
        }
        if let Some((stem, flow, input)) = &b {
            runs_b.push(
                measure(&dir.join(format!("{stem}-{round}.redb")), flow, input.clone()).await,
            );
        }
    }
    (runs_a, runs_b)
}

/// The run of median time among `runs` (the later of the middle two for an even count),
/// or `None` when the workload did not run.
fn middle(runs: &[Measured]) -> Option<&Measured> {
    let mut order: Vec<&Measured> = runs.iter().collect();
    order.sort_by(|x, y| x.ms.total_cmp(&y.ms));
    order.get(order.len() / 2).copied()
}

/// Each run's time in milliseconds, rounded, in round order.
fn runs_ms(runs: &[Measured]) -> Vec<f64> {
    runs.iter().map(|m| round2(m.ms)).collect()
}

/// Each round's time of `num` over that of `den`, rounded; empty when either did not run.
fn ratios(num: &[Measured], den: &[Measured]) -> Vec<f64> {
    num.iter().zip(den).filter(|(_, d)| d.ms > 0.0).map(|(n, d)| round2(n.ms / d.ms)).collect()
}

/// The median of [`ratios`], or 0 when there is none (the line then says the other
/// workload did not run).
fn median_ratio(num: &[Measured], den: &[Measured]) -> f64 {
    let each = ratios(num, den);
    if each.is_empty() { 0.0 } else { median(&each) }
}

/// Returns the flushes `journal` has made of its file and its log since it was opened.
fn flushes(journal: &Journal) -> u64 {
    journal.flushes().expect("a journal file counts its flushes")
}

/// Reports `m` as `bench` over `n` steps, with its commits and entries per step and
/// whatever `extra` adds.
fn report_measured(bench: &str, n: u64, m: &Measured, extra: Value) {
    let per = |x: f64| round2(x / n as f64);
    let mut more = json!({
        "commits": m.commits,
        "commits_per_step": per(m.commits as f64),
        "fdatasyncs": m.fdatasyncs,
        "fdatasyncs_per_step": per(m.fdatasyncs as f64),
        "entries": m.entries,
        "entries_per_step": per(m.entries as f64),
        "rss_before_kb": m.rss_before_kb,
        // The run's own peak: a line of alternated rounds is reported after later runs.
        "peak_rss_kb": m.peak_kb,
        "run_peak_rss_kb": m.peak_kb,
        "peak_rss_per_step_bytes": (m.peak_kb.saturating_sub(m.rss_before_kb) * 1024) / n.max(1),
    });
    if let (Some(obj), Value::Object(extra)) = (more.as_object_mut(), extra) {
        obj.extend(extra);
    }
    report(bench, n, m.ms, more);
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
        json!({ "includes": "1,000 single durable appends through the journal (each its own commit, through the write-ahead log); no bare redb in clio-flow" }),
    );
    base_ms
}

async fn benches(dir: &Path) {
    // Baseline: one durable append per commit through the journal (W1 is measured against
    // it, so it runs whenever W1 does).
    let base_ms = if want("baseline") || want("W1") { baseline(dir) } else { 0.0 };
    let mut raw_ms = 0.0;
    let mut w1_ms = 0.0;

    if want("baseline") || want("W1") {
        let overwrite_ms = raw_overwrite_fdatasync_ms(dir);
        report(
            "baseline_raw_overwrite_fdatasync",
            1_000,
            overwrite_ms,
            json!({
                "includes": "write(128 bytes) at 1,000 offsets of a file grown with zeros first + fdatasync each: no size change, as the journal's write-ahead log writes; once, before the rounds",
                "fdatasyncs": 1_000,
            }),
        );
        // The raw loop and W1 (the default journal: quick repair on) in alternated rounds;
        // each round's ratio is W1 over that round's raw loop. A W1 run right after a raw
        // loop was 40-45 µs a step slower than one right after another W1 run, with or
        // without quick repair: each round runs W1 twice after its raw loop, and the
        // second, the steady state, is the one timed against it.
        let (mut raws, mut w1s, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
        let mut after_raw = Vec::new();
        let mut last = None;
        for round in 0..W1_ROUNDS {
            let raw = raw_fdatasync_ms(dir);
            raws.push(round2(raw));
            if want("W1") {
                let path = dir.join(format!("W1_sequential_steps-{round}-after-raw.redb"));
                after_raw.push(round2(w1_run(&path, true).await.0));
                let path = dir.join(format!("W1_sequential_steps-{round}.redb"));
                let (ms, commits, fdatasyncs, entries) = w1_run(&path, true).await;
                w1s.push(round2(ms));
                ratios.push(round2(ms / raw));
                last = Some((commits, fdatasyncs, entries));
            }
        }
        raw_ms = median(&raws);
        report(
            "baseline_raw_write_fdatasync",
            1_000,
            raw_ms,
            json!({
                "includes": "write(128 bytes) + fdatasync on a plain file, no journal; the median of the rounds alternated with W1's",
                "fdatasyncs": 1_000,
                "runs_ms": raws,
            }),
        );
        if let Some((commits, fdatasyncs, entries)) = last {
            w1_ms = median(&w1s);
            let extra = json!({
                "includes": format!("1,000 ctx.step in one flow, each one durable journal commit; the median of {W1_ROUNDS} rounds, each timed after its raw loop and one W1 run (runs_after_raw_ms: those runs, right after the raw loop)"),
                "ratio_to_baseline": round2(w1_ms / base_ms),
                "ratio_to_raw_fdatasync": median(&ratios),
                "ratios_to_raw_fdatasync": ratios,
                "goal_ratio_to_raw_fdatasync": 1.1,
                "ratio_to_raw_overwrite_fdatasync": round2(w1_ms / overwrite_ms),
                "commits": commits,
                "fdatasyncs": fdatasyncs,
                "entries": entries,
                "runs_ms": w1s,
                "runs_after_raw_ms": after_raw,
            });
            report("W1_sequential_steps", 1_000, w1_ms, extra);
            // With quick repair off (a checkpoint's redb commit flushes once, not twice), once.
            let path = dir.join("W1_sequential_steps_no_quick_repair.redb");
            let (ms, commits, fdatasyncs, entries) = w1_run(&path, false).await;
            let extra = json!({
                "includes": "1,000 ctx.step in one flow, each one durable journal commit, quick repair off, after the rounds above",
                "ratio_to_baseline": round2(ms / base_ms),
                "ratio_to_raw_fdatasync": round2(ms / raw_ms),
                "goal_ratio_to_raw_fdatasync": 1.1,
                "commits": commits,
                "fdatasyncs": fdatasyncs,
                "entries": entries,
            });
            report("W1_sequential_steps_no_quick_repair", 1_000, ms, extra);
        }
    }

    if want("W1spin") {
        // W1 again on the runtime `clio` drives a foreground run on: one worker, which spins
        // for an awaited journal write before it sleeps. A process of its own, as a runtime
        // is built once per process here.
        let out = Command::new(std::env::current_exe().expect("exe"))
            .env(SPIN_CHILD, dir)
            .stderr(Stdio::inherit())
            .output()
            .expect("the W1spin child runs");
        assert!(out.status.success(), "the W1spin child failed: {}", out.status);
        let child: Value = serde_json::from_slice(&out.stdout).expect("the W1spin child's line");
        let ms = child["ms"].as_f64().expect("the W1spin child's milliseconds");
        let extra = json!({
            "includes": "1,000 ctx.step in one flow, each one durable journal commit, on a one-worker tokio runtime whose worker spins for an awaited journal write before it sleeps (clio_journal::spin_for_awaited_write, 500 µs at most), as clio drives a foreground run; in a process of its own, after an untimed run of the same flow",
            "ratio_to_w1": if w1_ms > 0.0 { round2(ms / w1_ms) } else { 0.0 },
            "ratio_to_raw_fdatasync": round2(ms / raw_ms),
            "goal_ratio_to_raw_fdatasync": 1.1,
            "commits": child["commits"],
            "fdatasyncs": child["fdatasyncs"],
            "entries": child["entries"],
        });
        report("W1_sequential_steps_park_spin", 1_000, ms, extra);
    }

    if want("W1wf") {
        let m = measure(&dir.join("w1wf.redb"), "workflow", shaped(1_000, true, "noop")).await;
        let extra = json!({
            "includes": "a 1,000-step chain workflow of read-only no-op tools, through the workflow flow, in-process",
            "ratio_to_w1": if w1_ms > 0.0 { round2(m.ms / w1_ms) } else { 0.0 },
            "ratio_to_raw_fdatasync": if raw_ms > 0.0 { round2(m.ms / raw_ms) } else { 0.0 },
        });
        report_measured("W1wf_chain_1000_via_workflow", 1_000, &m, extra);
    }

    // W2 and W2s (then W3 and W3s) in alternated rounds after an untimed run of each: run
    // once each, their ratio moved from 0.8 to 2.1 between runs of the same binary on this
    // machine, with the first workload of a process the slowest.
    let mut w2_ms = 0.0;
    let (w2s, w2ss) = alternated(
        dir,
        want("W2").then(|| ("w2", "fan", Value::Null)),
        want("W2s").then(|| ("w2s", "fan_effect", Value::Null)),
    )
    .await;
    if let Some(m) = middle(&w2s) {
        w2_ms = m.ms;
        let extra = json!({
            "includes": format!("ctx.gather of 1,000 read-only no-op tool calls in one flow; the median of {PAIR_ROUNDS} rounds alternated with W2s's, after an untimed run of each"),
            "runs_ms": runs_ms(&w2s),
        });
        report_measured("W2_gather_1000_tools", 1_000, m, extra);
    }
    if let Some(m) = middle(&w2ss) {
        let extra = json!({
            "includes": format!("ctx.gather of 1,000 side-effecting no-op tool calls (intent and acceptance durable before each runs, then its result); the median of {PAIR_ROUNDS} rounds alternated with W2's"),
            "runs_ms": runs_ms(&w2ss),
            "ratio_to_w2": median_ratio(&w2ss, &w2s),
            "ratios_to_w2": ratios(&w2ss, &w2s),
            "goal_ratio_to_w2": 2.0,
        });
        report_measured("W2s_gather_1000_side_effecting_tools", 1_000, m, extra);
    }

    if want("W2wf") {
        let m = measure(&dir.join("w2wf.redb"), "workflow", shaped(1_000, false, "noop")).await;
        let extra = json!({
            "includes": "a 1,000-step fan-out workflow of read-only no-op tools, through the workflow flow",
            "ratio_to_w2": if w2_ms > 0.0 { round2(m.ms / w2_ms) } else { 0.0 },
        });
        report_measured("W2wf_fanout_1000_via_workflow", 1_000, &m, extra);
    }

    let (w3s, w3ss) = alternated(
        dir,
        want("W3").then(|| ("w3", "workflow", dag())),
        want("W3s").then(|| ("w3s", "workflow", dag_of("effect"))),
    )
    .await;
    if let Some(m) = middle(&w3s) {
        let extra = json!({
            "includes": format!("the 10x100 DAG workflow of read-only no-op tools, given as the run's input; the median of {PAIR_ROUNDS} rounds alternated with W3s's, after an untimed run of each"),
            "runs_ms": runs_ms(&w3s),
        });
        report_measured("W3_dag_10x100", 1_000, m, extra);
    }
    if let Some(m) = middle(&w3ss) {
        let extra = json!({
            "includes": format!("the 10x100 DAG workflow of side-effecting no-op tools; the median of {PAIR_ROUNDS} rounds alternated with W3's"),
            "runs_ms": runs_ms(&w3ss),
            "ratio_to_w3": median_ratio(&w3ss, &w3s),
            "ratios_to_w3": ratios(&w3ss, &w3s),
            "goal_ratio_to_w3": 2.0,
        });
        report_measured("W3s_dag_10x100_side_effecting", 1_000, m, extra);
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
            json!({ "includes": "the 10x100 DAG of read-only no-op tools, run as a child of a flow of its own (ctx.call of the workflow flow) rather than given as the run's input" }),
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
            json!({
                "includes": "Runtime::resume of a 1,000-step run whose process was SIGKILLed while step 900 ran: the reopen's replay of the 900 recorded steps and the 100 left, run durably; n counts the steps left",
                "steps_run": r.steps_run,
            }),
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
        let replay_ms = median(&times);
        let fastest_ms = times.iter().copied().fold(f64::MAX, f64::min);
        let mut read_ms = f64::MAX;
        let mut entries = 0;
        for _ in 0..3 {
            let t = instant();
            entries = journal.entries(r.run).expect("entries").len();
            read_ms = read_ms.min(t.elapsed().as_secs_f64() * 1000.0);
        }
        let extra = json!({
            "includes": "Runtime::replay of a finished 10,000-step run, warm (after one untimed replay): reading its entries and matching every step against them, nothing submitted; the median of the replays",
            "submitted": replay.submitted,
            "entries": entries,
            "read_entries_ms": (read_ms * 1000.0).round() / 1000.0,
            "fastest_ms": (fastest_ms * 1000.0).round() / 1000.0,
            "replays": times.len(),
        });
        report("W5_replay_10000_entries", 10_000, replay_ms, extra);
        drop(journal);
    }

    let mut w7_ms = 0.0;
    if want("W7") {
        // W7: 1,000 runs at once, each 10 steps, on one journal.
        let journal = open(&dir.join("w7.redb"), Durability::Immediate);
        let runtime = rt(&journal, registry());
        let rss_before_kb = reset_peak();
        let commits = journal.commits();
        let fdatasyncs = flushes(&journal);
        let t = instant();
        let mut handles = Vec::new();
        for _ in 0..1_000 {
            let runtime = runtime.clone();
            handles.push(tokio::spawn(async move {
                runtime.run(selection("steps10", json!({})), Value::Null).await
            }));
        }
        let mut succeeded = 0u64;
        for h in handles {
            if let Ok(Ok(r)) = h.await
                && matches!(r.outcome, RunOutcome::Succeeded(_))
            {
                succeeded += 1;
            }
        }
        let ms = t.elapsed().as_secs_f64() * 1000.0;
        w7_ms = ms;
        let commits = journal.commits() - commits;
        let fdatasyncs = flushes(&journal) - fdatasyncs;
        let secs = ms / 1000.0;
        report(
            "W7_1000_runs_x_10_steps",
            10_000,
            ms,
            json!({
                "includes": "1,000 runs started at once on one journal, each 10 sequential ctx.step; n counts steps",
                "succeeded": succeeded,
                "runs_per_s": round2(succeeded as f64 / secs),
                "steps_per_s": round2(succeeded as f64 * 10.0 / secs),
                "goal_steps_per_s": 5_000,
                "commits": commits,
                "commits_per_run": round2(commits as f64 / 1_000.0),
                "fdatasyncs": fdatasyncs,
                "fdatasyncs_per_run": round2(fdatasyncs as f64 / 1_000.0),
                "rss_before_kb": rss_before_kb,
            }),
        );
        drop(journal);
    }

    if want("scale") {
        // The scale curve: per-step time and memory as the workflow grows, each point in a
        // process of its own, so that its peak is its own and not what earlier workloads
        // left allocated.
        // A 10,000-way fan-out (issue 24's memory goal: under 50 MB at its peak) does not
        // fit the run's default cap of 10,000 entries (its calls alone are 10,000): that
        // point alone raises the cap, and its line says so.
        let points = [20usize, 100, 1_000, 9_000]
            .into_iter()
            .flat_map(|n| [("chain", n), ("fanout", n)])
            .chain([("fanout", 10_000)]);
        for (shape, n) in points {
            {
                let status = Command::new(std::env::current_exe().expect("exe"))
                    .env(SCALE_CHILD, format!("{shape}:{n}"))
                    .env("CLIO_FLOW_BENCH_DIR", dir)
                    .stdout(Stdio::inherit())
                    .status()
                    .expect("scale child");
                assert!(status.success(), "the scale point {shape} {n} failed");
            }
        }
    }

    if python::any() {
        // The Python front end on W1, W2, W3 and W7 (`support/python.rs`).
        python::benches(dir, w7_ms).await;
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
            json!({
                "includes": "1,000 runs started at once on one journal, each to its ctx.ask: until every run is parked awaiting input, its question durable",
                "waiting": waiting,
                "rss_before_kb": before,
            }),
        );
    }
}

/// One point of the scale curve (`chain:<n>` or `fanout:<n>`), measured in this process.
async fn scale_child(dir: &Path, point: &str) {
    let (shape, n) = point.split_once(':').expect("shape:n");
    let n: usize = n.parse().expect("n");
    let path = dir.join(format!("scale_{shape}_{n}.redb"));
    let default_cap = RuntimeConfig::default().max_entries;
    // Room for the calls and the workflow's own entries (its limits, views and batches).
    let cap = default_cap.max(n as u64 + 1_000);
    let config = RuntimeConfig { max_entries: cap, ..RuntimeConfig::default() };
    let m = measure_with(&path, "workflow", shaped(n, shape == "chain", "noop"), config).await;
    let mut extra = json!({
        "includes": format!("a {n}-step {shape} workflow of read-only no-op tools, through the workflow flow, in a process of its own"),
        "goal_peak_rss_per_step_bytes": 3_072,
    });
    if cap != default_cap {
        extra["includes"] = json!(format!(
            "a {n}-step {shape} workflow of read-only no-op tools, through the workflow flow, in a process of its own, the run's entry cap raised from {default_cap} to {cap} for this point only (its calls alone are {n} entries)"
        ));
        extra["max_entries"] = json!(cap);
        // Issue 24: a 10,000-way fan-out under 50 MB at its peak.
        extra["goal_run_peak_rss_kb"] = json!(50 * 1024);
    }
    report_measured(&format!("scale_{shape}_{n}"), n as u64, &m, extra);
}

async fn w4_child(dir: &Path) {
    let journal = open(&dir.join("w4.redb"), Durability::Immediate);
    let reg = Registry::new().flow(steps_flow(1_000, Some(900), Some(dir.join("w4.ready"))));
    let _ = rt(&journal, reg).run(selection("steps", json!({})), Value::Null).await;
}

/// Runs W1 once on a fresh journal at `path`; returns its milliseconds, the journal's
/// commits and flushes during it and the run's entries.
async fn w1_run(path: &Path, quick_repair: bool) -> (f64, u64, u64, usize) {
    let config = JournalConfig { quick_repair, ..JournalConfig::default() };
    let journal = Journal::open(path, config).expect("journal opens");
    let runtime = rt(&journal, registry());
    reset_peak();
    let commits = journal.commits();
    let fdatasyncs = flushes(&journal);
    let t = instant();
    let r = runtime.run(selection("steps", json!({})), Value::Null).await.expect("w1");
    let ms = t.elapsed().as_secs_f64() * 1000.0;
    let commits = journal.commits() - commits;
    let fdatasyncs = flushes(&journal) - fdatasyncs;
    ok(&r.outcome);
    (ms, commits, fdatasyncs, journal.entries(r.run).expect("entries").len())
}

/// Runs W1's flow once, untimed, on a journal at `path`: the first 1,000-step run of a
/// process, like a run right after another file's `fdatasync` loop, was 40-60 µs a step
/// slower than the next in every try, whichever W1 variant came first, so W1 measures the
/// steady state.
async fn warm_up(path: &Path) {
    let journal = open(path, Durability::Immediate);
    let r = rt(&journal, registry()).run(selection("steps", json!({})), Value::Null).await;
    ok(&r.expect("warm-up").outcome);
}

/// W1 on a runtime like the one `clio` drives a foreground run on; prints its
/// milliseconds, commits, flushes and entries as one JSON object.
async fn w1_spin_child(dir: &Path) {
    warm_up(&dir.join("w1spin-warm-up.redb")).await;
    let journal = open(&dir.join("w1spin.redb"), Durability::Immediate);
    let runtime = rt(&journal, registry());
    let commits = journal.commits();
    let fdatasyncs = flushes(&journal);
    let t = instant();
    let r = runtime.run(selection("steps", json!({})), Value::Null).await.expect("w1spin");
    let ms = t.elapsed().as_secs_f64() * 1000.0;
    ok(&r.outcome);
    let commits = journal.commits() - commits;
    let fdatasyncs = flushes(&journal) - fdatasyncs;
    let entries = journal.entries(r.run).expect("entries").len();
    println!(
        "{}",
        json!({ "ms": ms, "commits": commits, "fdatasyncs": fdatasyncs, "entries": entries })
    );
}

fn main() {
    if let Ok(dir) = std::env::var(SPIN_CHILD) {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .on_thread_park(|| {
                clio_journal::spin_for_awaited_write(std::time::Duration::from_micros(500))
            })
            .enable_all()
            .build()
            .expect("tokio runtime");
        runtime.block_on(w1_spin_child(Path::new(&dir)));
        return;
    }
    let runtime =
        tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("tokio runtime");
    if let Ok(dir) = std::env::var(CHILD) {
        runtime.block_on(w4_child(Path::new(&dir)));
        return;
    }
    if let (Ok(point), Ok(dir)) = (std::env::var(SCALE_CHILD), std::env::var("CLIO_FLOW_BENCH_DIR"))
    {
        runtime.block_on(scale_child(Path::new(&dir), &point));
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    runtime.block_on(benches(dir.path()));
    if let Ok(keep) = std::env::var("CLIO_FLOW_BENCH_KEEP") {
        let _ = std::fs::rename(dir.keep(), keep);
    }
}
