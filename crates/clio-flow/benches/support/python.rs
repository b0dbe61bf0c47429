//! The flow bench's Python lines (issue 42, item 7): W1, W2, W3 and W7 written in Python
//! (`support/python_plugin/ai.iowarp.clio/flows/bench.py`), run by the runtime as a
//! plugin's Python flows are: `clio_flow::register_plugin` of the bench plugin (trusted),
//! the plugin's child (`python3 -I -B -u …/_flow_host.py`, in the sandbox of the default
//! `RuntimeConfig`: bubblewrap where it runs, else Landlock) started by the first run and
//! shared by every later run of the same registry, every `ctx` operation a request on the
//! line protocol that the runtime records as it records a Rust flow's.
//!
//! Each Python workload runs in alternated rounds with its Rust twin, on fresh journals,
//! after an untimed run of each (which also starts the child and imports the flow file), and
//! its line gives the median of its rounds and the median of each round's ratio to the
//! Rust twin: the disk's rate drifts within a run.
//!
//! - `W1py_sequential_steps`: 1,000 `ctx.step` of a no-op Python function, against W1's
//!   Rust flow (goal: within 1.3×);
//! - `W2py_gather_1000_tools`: `ctx.gather` of 1,000 read-only no-op tool calls, against
//!   W2's Rust flow (goal: within 3×);
//! - `W3py_dag_10x100`: the 10 × 100 DAG written as a Python flow, each call started once
//!   the 2 calls of the layer before it waits on are done (an asyncio task per node),
//!   against W3 (the same DAG as a workflow given as the run's input); `W3py_dag_10x100_layers`
//!   the same DAG run as a gather per layer (a barrier, as the peers of `bench/peers` run it);
//! - `PY_protocol_per_command`: the Python front end's own cost per command: W1 and W2 in
//!   Python and in Rust on journals of `eventual` durability (no `fdatasync`), alternated;
//!   the difference per step (one round trip: the request, the step run in the child, the
//!   reply) and per member of a gather;
//! - `PY_child_start`: the first run of a fresh registry, which starts the child (the
//!   sandbox, the interpreter, the package, the flow file's import), against a warm run;
//! - `W7py_1000_runs_x_10_steps`: 1,000 runs of a 10-step Python flow started at once on one
//!   journal, all served by the plugin's one child; `W7py_memory` the peak resident memory of
//!   the bench process and of the child during it.
//!
//! `CLIO_FLOW_BENCH_ONLY` names them `W1py`, `W2py`, `W3py`, `PYproto`, `PYstart`, `W7py`
//! (`py` all of them).

use std::path::{Path, PathBuf};

use clio_flow::{Registry, Runtime, RuntimeConfig, Workspace, instant, selection};
use clio_journal::Durability;
use serde_json::{Value, json};

use super::{
    Measured, median, median_ratio, open, peak_rss_kb, ratios, registry, report, report_measured,
    reset_peak, round2, runs_ms, want,
};

/// The bench plugin's folder (the one holding `ai.iowarp.clio/`).
fn plugin_folder() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/support/python_plugin")
}

/// Whether a Python workload runs: named itself, or `py` (all of them).
fn want_py(name: &str) -> bool {
    want(name) || want("py")
}

/// Returns whether any Python workload runs.
pub(crate) fn any() -> bool {
    ["W1py", "W2py", "W3py", "PYproto", "PYstart", "W7py"].iter().any(|w| want_py(w))
}

/// Returns the bench registry with the bench plugin's Python flows added (trusted): a new
/// pool, whose child starts with the first run that needs it.
fn py_registry() -> Registry {
    let plugin = clio_plugins::load_plugin(&plugin_folder()).expect("the bench plugin loads");
    clio_flow::register_plugin(registry(), &plugin, true, &Workspace::new(None))
        .expect("the bench plugin registers")
}

/// A workload: the stem of its journals' names, the flow and its options.
type Load = (&'static str, &'static str, Value);

/// Runs `load` once on a fresh journal at `dir/<stem>-<tag>.redb` of `durability`.
async fn run_once(
    dir: &Path,
    reg: &Registry,
    load: &Load,
    tag: &str,
    durability: Durability,
) -> Measured {
    let (stem, flow, options) = load;
    let journal = open(&dir.join(format!("{stem}-{tag}.redb")), durability);
    super::measure_on(
        &journal,
        reg.clone(),
        selection(*flow, options.clone()),
        Value::Null,
        RuntimeConfig::default(),
    )
    .await
}

/// Runs `rust` and `py` once each untimed, then `rounds` rounds of both in turn; returns
/// the measured runs of each in round order.
async fn alternated(
    dir: &Path,
    reg: &Registry,
    (rust, py): (&Load, &Load),
    durability: Durability,
    rounds: usize,
) -> (Vec<Measured>, Vec<Measured>) {
    run_once(dir, reg, rust, "untimed", durability).await;
    run_once(dir, reg, py, "untimed", durability).await;
    let (mut a, mut b) = (Vec::new(), Vec::new());
    for round in 0..rounds {
        a.push(run_once(dir, reg, rust, &round.to_string(), durability).await);
        b.push(run_once(dir, reg, py, &round.to_string(), durability).await);
    }
    (a, b)
}

/// How many rounds each Python workload and its Rust twin run.
const ROUNDS: usize = 3;

/// How many rounds W1py and W1 run: their ratio moved most from round to round (the disk's
/// `fdatasync` took from 250 to 990 µs within one run on this machine).
const W1_ROUNDS: usize = 5;

/// The run of median time among `runs`.
fn middle(runs: &[Measured]) -> &Measured {
    let mut order: Vec<&Measured> = runs.iter().collect();
    order.sort_by(|x, y| x.ms.total_cmp(&y.ms));
    order[order.len() / 2]
}

/// The fields comparing a Python workload's runs with its Rust twin's.
fn against_rust(py: &[Measured], rust: &[Measured], n: u64, twin: &str) -> Value {
    let r = middle(rust);
    let per = |x: f64| round2(x / n as f64);
    let extra_us: Vec<f64> =
        py.iter().zip(rust).map(|(p, r)| (p.ms - r.ms) * 1000.0 / n as f64).collect();
    json!({
        "runs_ms": runs_ms(py),
        "rust_bench": twin,
        "rust_ms": round2(r.ms),
        "rust_runs_ms": runs_ms(rust),
        "ratio_to_rust": median_ratio(py, rust),
        "ratios_to_rust": ratios(py, rust),
        "rust_commits_per_step": per(r.commits as f64),
        "rust_fdatasyncs_per_step": per(r.fdatasyncs as f64),
        "rust_entries_per_step": per(r.entries as f64),
        "same_entries_as_rust": middle(py).entries == r.entries,
        // The Python front end's cost per step over the Rust flow's, in each round.
        "extra_us_per_step": round2(median(&extra_us)),
        "journal_writer_spin_us": writer_spin_us(),
    })
}

/// The journal writer's spin the bench's journals use, in microseconds.
fn writer_spin_us() -> u64 {
    let default = clio_journal::JournalConfig::default().writer_spin.as_micros() as u64;
    std::env::var("CLIO_FLOW_BENCH_WRITER_SPIN_US")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Prints the line of a Python workload measured against its Rust twin, with `more`.
fn report_pair(bench: &str, n: u64, py: &[Measured], rust: &[Measured], twin: &str, more: Value) {
    let mut extra = against_rust(py, rust, n, twin);
    if let (Some(obj), Value::Object(more)) = (extra.as_object_mut(), more) {
        obj.extend(more);
    }
    report_measured(bench, n, middle(py), extra);
}

/// Prints the Python lines; `w7_rust_ms` is the Rust W7 of this run (0 when it did not run).
pub(crate) async fn benches(dir: &Path, w7_rust_ms: f64) {
    let dir = &dir.join("py");
    std::fs::create_dir_all(dir).expect("the Python bench's folder");

    if want_py("PYstart") {
        // A fresh registry: its first run starts the plugin's child.
        let reg = py_registry();
        let load: Load = ("pystart", "py-steps", json!({ "n": 1 }));
        let cold = run_once(dir, &reg, &load, "cold", Durability::Immediate).await;
        let warm = run_once(dir, &reg, &load, "warm", Durability::Immediate).await;
        report(
            "PY_child_start",
            1,
            cold.ms,
            json!({
                "includes": "the first run of a 1-step Python flow on a fresh registry: the sandbox, the interpreter and the clio_agent package started, the flow file imported, then the step (one durable commit); warm_ms the same run again on the child now running",
                "warm_ms": round2(warm.ms),
                "start_ms": round2(cold.ms - warm.ms),
            }),
        );
    }

    let reg = py_registry();
    if want_py("W1py") {
        let rust: Load = ("w1rust", "steps", json!({}));
        let py: Load = ("w1py", "py-steps", json!({ "n": 1_000 }));
        let (r, p) = alternated(dir, &reg, (&rust, &py), Durability::Immediate, W1_ROUNDS).await;
        let extra = json!({
            "includes": format!("1,000 ctx.step of a no-op Python function in one Python flow (its plugin's child already running), each one durable journal commit; the median of {W1_ROUNDS} rounds alternated with W1's Rust flow, after an untimed run of each"),
            "goal_ratio_to_rust": 1.3,
        });
        report_pair("W1py_sequential_steps", 1_000, &p, &r, "W1_sequential_steps", extra);
    }
    if want_py("W2py") {
        let rust: Load = ("w2rust", "fan", json!({}));
        let py: Load = ("w2py", "py-fan", json!({ "n": 1_000 }));
        let (r, p) = alternated(dir, &reg, (&rust, &py), Durability::Immediate, ROUNDS).await;
        let extra = json!({
            "includes": format!("ctx.gather of 1,000 read-only no-op tool calls in one Python flow (one request, one reply); the median of {ROUNDS} rounds alternated with W2's Rust flow, after an untimed run of each"),
            "goal_ratio_to_rust": 3.0,
        });
        report_pair("W2py_gather_1000_tools", 1_000, &p, &r, "W2_gather_1000_tools", extra);
    }
    if want_py("W3py") {
        let rust: Load = ("w3rust", "workflow", json!({}));
        // The Rust W3 is the workflow DAG given as the run's input.
        let rust_runs = {
            let mut runs = Vec::new();
            let mut py_runs = Vec::new();
            let mut layer_runs = Vec::new();
            let py: Load = ("w3py", "py-dag", json!({ "exact": true }));
            let layers: Load = ("w3pylayers", "py-dag", json!({ "exact": false }));
            dag_run(dir, &rust, "untimed").await;
            run_once(dir, &reg, &py, "untimed", Durability::Immediate).await;
            run_once(dir, &reg, &layers, "untimed", Durability::Immediate).await;
            for round in 0..ROUNDS {
                let tag = round.to_string();
                runs.push(dag_run(dir, &rust, &tag).await);
                py_runs.push(run_once(dir, &reg, &py, &tag, Durability::Immediate).await);
                layer_runs.push(run_once(dir, &reg, &layers, &tag, Durability::Immediate).await);
            }
            (runs, py_runs, layer_runs)
        };
        let (r, p, l) = rust_runs;
        let extra = json!({
            "includes": format!("the 10x100 DAG of read-only no-op tool calls written as a Python flow: an asyncio task per node, each ctx.call awaited once the 2 calls of the layer before it waits on are done; the median of {ROUNDS} rounds alternated with W3 (the DAG as a workflow given as the run's input), after an untimed run of each"),
        });
        report_pair("W3py_dag_10x100", 1_000, &p, &r, "W3_dag_10x100", extra);
        let extra = json!({
            "includes": format!("the 10x100 DAG as a Python flow of 10 ctx.gather of 100 read-only no-op tool calls, one per layer (a barrier per layer, as bench/peers' DBOS and LangGraph run it); the median of {ROUNDS} rounds alternated with W3 and W3py"),
        });
        report_pair("W3py_dag_10x100_layers", 1_000, &l, &r, "W3_dag_10x100", extra);
    }
    if want_py("PYproto") {
        let rust: Load = ("protorust", "steps", json!({}));
        let py: Load = ("protopy", "py-steps", json!({ "n": 1_000 }));
        let (r1, p1) = alternated(dir, &reg, (&rust, &py), Durability::Eventual, ROUNDS).await;
        let rust: Load = ("protorust2", "fan", json!({}));
        let py: Load = ("protopy2", "py-fan", json!({ "n": 1_000 }));
        let (r2, p2) = alternated(dir, &reg, (&rust, &py), Durability::Eventual, ROUNDS).await;
        let diff = |p: &[Measured], r: &[Measured]| {
            let each: Vec<f64> = p.iter().zip(r).map(|(p, r)| p.ms - r.ms).collect();
            median(&each)
        };
        let step_ms = diff(&p1, &r1);
        let gather_ms = diff(&p2, &r2);
        report(
            "PY_protocol_per_command",
            1_000,
            step_ms,
            json!({
                "includes": format!("the Python front end's own cost per command: the median over {ROUNDS} alternated rounds of (1,000 ctx.step in a Python flow - 1,000 ctx.step in W1's Rust flow), both on journals of eventual durability (no fdatasync), so per_op_us is one step's round trip through the child (request, the function run in Python, reply, the runtime's parsing and JSON) over a Rust step's cost; gather_member_us the same for a member of W2's gather of 1,000"),
                "step_round_trip_us": round2(step_ms * 1000.0 / 1_000.0),
                "gather_member_us": round2(gather_ms * 1000.0 / 1_000.0),
                "py_steps_runs_ms": runs_ms(&p1),
                "rust_steps_runs_ms": runs_ms(&r1),
                "py_gather_runs_ms": runs_ms(&p2),
                "rust_gather_runs_ms": runs_ms(&r2),
            }),
        );
    }
    drop(reg);

    if want_py("W7py") {
        w7(dir, w7_rust_ms).await;
    }
}

/// Runs the Rust W3 (the workflow DAG given as the run's input) on a fresh journal.
async fn dag_run(dir: &Path, load: &Load, tag: &str) -> Measured {
    let journal = open(&dir.join(format!("{}-{tag}.redb", load.0)), Durability::Immediate);
    super::measure_on(
        &journal,
        registry(),
        selection("workflow", json!({})),
        super::dag(),
        RuntimeConfig::default(),
    )
    .await
}

/// The processes descended from this one whose program is a Python interpreter: the
/// plugin's child (under bubblewrap, a grandchild).
fn python_children() -> Vec<u32> {
    let me = std::process::id();
    let mut parent = std::collections::HashMap::new();
    let mut comm = std::collections::HashMap::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else { continue };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else { continue };
        // `pid (comm) state ppid …`: the name may hold spaces, so read after the last ')'.
        let Some((head, tail)) = stat.rsplit_once(')') else { continue };
        let ppid = tail.split_whitespace().nth(1).and_then(|p| p.parse::<u32>().ok());
        let name = head.split_once('(').map(|(_, n)| n.to_owned()).unwrap_or_default();
        if let Some(ppid) = ppid {
            parent.insert(pid, ppid);
            comm.insert(pid, name);
        }
    }
    let descends = |mut pid: u32| {
        for _ in 0..64 {
            match parent.get(&pid) {
                Some(&p) if p == me => return true,
                Some(&p) if p > 1 => pid = p,
                _ => return false,
            }
        }
        false
    };
    parent
        .keys()
        .copied()
        .filter(|&pid| comm.get(&pid).is_some_and(|c| c.starts_with("python")) && descends(pid))
        .collect()
}

/// Reads field `field` (kB) of `/proc/<pid>/status`.
fn status_kb(pid: u32, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(field))
                .and_then(|l| l.split_whitespace().nth(1).and_then(|n| n.parse().ok()))
        })
        .unwrap_or(0)
}

/// W7 with a Python flow: 1,000 runs of 10 steps at once on one journal and one child.
async fn w7(dir: &Path, w7_rust_ms: f64) {
    // The children of registries dropped before are still there (a pool's child outlives
    // its registry: its reader task holds it, and it holds the pipe the child waits on):
    // only the child W7 starts counts.
    let before = python_children();
    let reg = py_registry();
    let journal = open(&dir.join("w7py.redb"), Durability::Immediate);
    let runtime = Runtime::new(journal.clone(), reg, RuntimeConfig::default());
    // One untimed run starts the child, so the line measures the runs, not its start.
    let warm = runtime.run(selection("py-steps", json!({ "n": 10 })), Value::Null).await;
    assert!(matches!(warm.expect("w7py warm-up").outcome, clio_flow::RunOutcome::Succeeded(_)));
    let children: Vec<u32> =
        python_children().into_iter().filter(|pid| !before.contains(pid)).collect();
    let child_before_kb: u64 = children.iter().map(|&p| status_kb(p, "VmRSS:")).sum();
    for pid in &children {
        // Its high-water mark from now on (as `reset_peak` does for this process).
        let _ = std::fs::write(format!("/proc/{pid}/clear_refs"), "5");
    }
    let rss_before_kb = reset_peak();
    let commits = journal.commits();
    let fdatasyncs = super::flushes(&journal);
    let t = instant();
    let mut handles = Vec::new();
    for _ in 0..1_000 {
        let runtime = runtime.clone();
        handles.push(tokio::spawn(async move {
            runtime.run(selection("py-steps", json!({ "n": 10 })), Value::Null).await
        }));
    }
    let mut succeeded = 0u64;
    let mut runs = Vec::new();
    for h in handles {
        if let Ok(Ok(r)) = h.await
            && matches!(r.outcome, clio_flow::RunOutcome::Succeeded(_))
        {
            succeeded += 1;
            runs.push(r.run);
        }
    }
    let ms = t.elapsed().as_secs_f64() * 1000.0;
    let peak_kb = peak_rss_kb();
    let child_peak_kb: u64 = children.iter().map(|&p| status_kb(p, "VmHWM:")).sum();
    let commits = journal.commits() - commits;
    let fdatasyncs = super::flushes(&journal) - fdatasyncs;
    let entries: usize = runs.iter().map(|&r| journal.entries(r).expect("entries").len()).sum();
    let secs = ms / 1000.0;
    let per_run = |x: f64| round2(x / 1_000.0);
    report(
        "W7py_1000_runs_x_10_steps",
        10_000,
        ms,
        json!({
            "includes": "1,000 runs of a 10-step Python flow (ctx.step of a no-op function) started at once on one journal, every instance served by the plugin's one child process (started by an untimed run before); n counts steps",
            "succeeded": succeeded,
            "runs_per_s": round2(succeeded as f64 / secs),
            "steps_per_s": round2(succeeded as f64 * 10.0 / secs),
            "goal_steps_per_s": 5_000,
            "rust_w7_ms": round2(w7_rust_ms),
            "ratio_to_rust_w7": if w7_rust_ms > 0.0 { round2(ms / w7_rust_ms) } else { 0.0 },
            "commits": commits,
            "commits_per_run": per_run(commits as f64),
            "fdatasyncs": fdatasyncs,
            "fdatasyncs_per_run": per_run(fdatasyncs as f64),
            "entries": entries,
            "entries_per_run": per_run(entries as f64),
            "python_children": children.len(),
        }),
    );
    report(
        "W7py_memory",
        1_000,
        ms,
        json!({
            "includes": "the peak resident memory during W7py (1,000 runs of a 10-step Python flow at once): this process's (the runtime, the journal) and the plugin's child's (one interpreter serving the 1,000 instances), each its high-water mark reset before the runs; n counts runs",
            "rss_before_kb": rss_before_kb,
            "peak_rss_kb": peak_kb,
            "child_rss_before_kb": child_before_kb,
            "child_peak_rss_kb": child_peak_kb,
            "total_peak_rss_kb": peak_kb + child_peak_kb,
            "peak_growth_per_run_bytes": ((peak_kb.saturating_sub(rss_before_kb) + child_peak_kb.saturating_sub(child_before_kb)) * 1024) / 1_000,
            "python_children": children.len(),
        }),
    );
    drop(runtime);
    drop(journal);
}
