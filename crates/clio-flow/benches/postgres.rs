//! The flow runtime on the PostgreSQL journal (issue 23), one JSON line per workload on
//! stdout, each with no-op work inside so that only orchestration and durability are
//! measured, all on one server: `$CLIO_TEST_POSTGRES` when it is set, else a throwaway
//! cluster started with `.ci/postgres` and stopped when the bench exits. Each workload gets
//! a fresh database of its own.
//!
//! - `pg_bare_commits_<c>`: PostgreSQL's own commit rate, one small row per transaction
//!   (BEGIN, INSERT, COMMIT) on `c` = 1 and 4 connections at once, no journal: the floor of
//!   every line below;
//! - `pg_W1`: 1,000 sequential no-op `ctx.step`s in one flow, each one durable journal
//!   commit;
//! - `pg_W2`: a 1,000-way `ctx.gather` of read-only no-op tool calls in one flow;
//! - `pg_W2s`: the same gather of side-effecting no-op tool calls (each writes its intent
//!   and task before it runs and ends the task after);
//! - `pg_W3`: the 1,000-step workflow DAG of read-only no-op tools (10 layers of 100, each
//!   step after 2 of the layer before: `support/dag.rs`, the flow bench's W3);
//!
//!   W1, W2, W2s and W3 each run `CLIO_PG_BENCH_ROUNDS` times (3 unless set), each round
//!   alternating the journal's writes grouped (the default: a batch's writes in a few
//!   statements) and not (`_ungrouped`: each write of a batch on its own in a savepoint, a
//!   round trip a statement, each task's end a transaction of its own, as before grouping),
//!   each on a fresh database; a line gives the median
//!   round's time, the handle's round trips and commits per operation, and for the grouped
//!   line the ratio to the ungrouped one of the same round;
//! - `pg_throughput_<w>w`: `CLIO_PG_BENCH_RUNS` runs (10,000 unless set) of
//!   `CLIO_PG_BENCH_STEPS` sequential no-op steps each (3 unless set), created first and
//!   then driven by `w` = 1, 2 and 4 workers, each a thread with its own journal handle
//!   and runtime, looping claim_run → resume → release_run as `clio worker` does: runs/s
//!   and commits/s beside the bare commit rate;
//! - DBOS Transact (`bench/postgres/dbos_bench.py`) on the same server, when its venv is
//!   there (`bench/postgres/setup-dbos` makes it; `CLIO_DBOS_PYTHON` names another
//!   Python): its lines follow CLIO's, or one line says why they are missing.
//!
//! `CLIO_PG_BENCH_ONLY=bare,W1,W2,W2s,W3,throughput,dbos` runs only the workloads named.
#![allow(clippy::print_stdout, reason = "a benchmark reports on stdout")]

#[path = "support/dag.rs"]
mod dag;
#[path = "support/report.rs"]
mod report;
use report::round2;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use clio_flow::{
    FlowOutput, FnFlow, Registry, RunOutcome, Runtime, RuntimeConfig, Tool, instant, selection,
};
use clio_journal::{Journal, RunFilter, RunStatus};
use clio_postgres::{PostgresConfig, Traffic, test_server};
use serde_json::{Value, json};

/// How long a worker's lease lasts: far longer than a run, so none lapses mid-drive.
const LEASE: Duration = Duration::from_secs(60);

/// Prints workload `bench`'s line (`support/report.rs`) with this target's fields, then
/// `extra`.
fn report(bench: &str, n: u64, ms: f64, extra: Value) {
    report::print_line(
        bench,
        n,
        ms,
        report::merged(json!({ "engine": "clio", "journal": "postgres" }), extra),
    );
}

/// Returns whether workload `name` runs: all of them, or those named in
/// `CLIO_PG_BENCH_ONLY` (comma-separated).
fn want(name: &str) -> bool {
    std::env::var("CLIO_PG_BENCH_ONLY").map_or(true, |only| only.split(',').any(|w| w == name))
}

fn env_number(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// Returns a flow named `name` of `n` sequential no-op steps.
fn steps_flow(name: &'static str, n: u64) -> FnFlow {
    FnFlow::new(name, move |_t: Value, ctx| async move {
        for i in 0..n {
            ctx.step("noop", || async move { Ok(i) }).await?;
        }
        Ok(FlowOutput::text(n.to_string()))
    })
}

fn registry(small_steps: u64) -> Registry {
    Registry::new()
        .tool(Tool::new("noop", |args: Value| async move { Ok(args) }).read_only())
        .flow(steps_flow("steps", 1_000))
        .flow(steps_flow("small", small_steps))
        .flow(FnFlow::new("fan", |_t: Value, ctx| async move {
            let calls = (0..1_000).map(|i| ctx.call("noop", json!({ "i": i }))).collect();
            let res = ctx.gather(calls).await?;
            Ok(FlowOutput::text(res.len().to_string()))
        }))
        // Side-effecting: intent and acceptance written before each runs, its end after.
        .tool(Tool::new("effect", |args: Value| async move { Ok(args) }))
        .flow(FnFlow::new("fan_effect", |_t: Value, ctx| async move {
            let calls = (0..1_000).map(|i| ctx.call("effect", json!({ "i": i }))).collect();
            let res = ctx.gather(calls).await?;
            Ok(FlowOutput::text(res.len().to_string()))
        }))
}

fn open(url: &str, connections: usize) -> Journal {
    open_counted(url, connections, true).0
}

/// Opens the journal at `url`, its writes grouped or not, with the count of its traffic.
fn open_counted(url: &str, connections: usize, group_writes: bool) -> (Journal, Traffic) {
    let config =
        PostgresConfig { connections, lease: LEASE, group_writes, ..PostgresConfig::new(url) };
    clio_postgres::open_counted(&config).expect("the PostgreSQL journal opens")
}

fn runtime(journal: &Journal, owner: &str, small_steps: u64) -> Runtime {
    let config = RuntimeConfig { owner: owner.to_owned(), ..RuntimeConfig::default() };
    Runtime::new(journal.clone(), registry(small_steps), config)
}

fn ok(outcome: &RunOutcome) {
    assert!(matches!(outcome, RunOutcome::Succeeded(_)), "{outcome:?}");
}

/// Measures the bare commit rate on 1 and 4 connections; returns the commits per second
/// of each.
fn bare(server: &str) -> (f64, f64) {
    let url = test_server::fresh_database();
    let mut rates = (0.0, 0.0);
    for clients in [1usize, 4] {
        let n = 2_000 / clients as u64;
        let ms = test_server::bare_commits(&url, clients, n).as_secs_f64() * 1000.0;
        let total = n * clients as u64;
        let per_s = total as f64 / (ms / 1000.0);
        report(
            &format!("pg_bare_commits_{clients}"),
            total,
            ms,
            json!({
                "includes": format!("bare PostgreSQL: {clients} connection(s) at once, each committing {n} transactions of BEGIN, INSERT one small row, COMMIT; no journal"),
                "commits_per_s": round2(per_s),
                "server": clio_postgres::redacted(server),
            }),
        );
        if clients == 1 {
            rates.0 = per_s;
        } else {
            rates.1 = per_s;
        }
    }
    rates
}

/// One run of a workload: its time, and what its journal handle asked of the server.
struct Measured {
    ms: f64,
    round_trips: u64,
    commits: u64,
    entries: usize,
}

/// Runs `flow` on `input` (the run's input) once on a fresh database, the journal's writes grouped or not.
///
/// The journal is opened outside `tokio`: the driver's synchronous client connects with a
/// runtime of its own, which cannot start inside another.
fn measure(
    tokio: &tokio::runtime::Runtime,
    bench: &str,
    flow: &str,
    input: &Value,
    group_writes: bool,
) -> Measured {
    let url = test_server::fresh_database();
    let (journal, traffic) = open_counted(&url, 4, group_writes);
    let rt = runtime(&journal, "bench", 1);
    let (trips, commits) = (traffic.round_trips(), traffic.commits());
    let t = instant();
    let r = tokio.block_on(rt.run(selection(flow, json!({})), input.clone())).expect(bench);
    let ms = t.elapsed().as_secs_f64() * 1000.0;
    let (round_trips, commits) = (traffic.round_trips() - trips, traffic.commits() - commits);
    ok(&r.outcome);
    let entries = journal.entries(r.run).expect("entries").len();
    drop(rt);
    drop(journal);
    Measured { ms, round_trips, commits, entries }
}

/// The median of `xs`.
fn median(xs: &[f64]) -> f64 {
    let mut xs = xs.to_vec();
    xs.sort_by(f64::total_cmp);
    xs.get(xs.len() / 2).copied().unwrap_or(0.0)
}

/// Runs `flow` in `rounds` rounds, each alternating grouped and ungrouped writes, and
/// reports `bench` and `bench`_ungrouped over 1,000 operations.
fn one_run(
    tokio: &tokio::runtime::Runtime,
    bench: &str,
    (flow, input): (&str, Value),
    includes: &str,
    bare_1: f64,
    rounds: u64,
) {
    let mut grouped = Vec::new();
    let mut ungrouped = Vec::new();
    for round in 0..rounds.max(1) {
        // Each goes first in every other round.
        let first = round % 2 == 0;
        let a = measure(tokio, bench, flow, &input, first);
        let b = measure(tokio, bench, flow, &input, !first);
        let (g, u) = if first { (a, b) } else { (b, a) };
        grouped.push(g);
        ungrouped.push(u);
    }
    let ratios: Vec<f64> = grouped.iter().zip(&ungrouped).map(|(g, u)| g.ms / u.ms).collect();
    let per_commit_bare_us = if bare_1 > 0.0 { 1e6 / bare_1 } else { 0.0 };
    for (name, runs, is_grouped, how) in [
        (
            bench.to_owned(),
            &grouped,
            true,
            "the journal's writes grouped (a batch's writes in a few statements: the default)",
        ),
        (
            format!("{bench}_ungrouped"),
            &ungrouped,
            false,
            "each write of a batch on its own in a savepoint, a round trip per statement (group_writes off: as before grouping)",
        ),
    ] {
        let ms = median(&runs.iter().map(|m| m.ms).collect::<Vec<_>>());
        let mid = runs.iter().find(|m| m.ms == ms).unwrap_or(&runs[0]);
        let mut extra = json!({
            "includes": format!("{includes}; {how}; the median of {} round(s), each on a fresh database, alternated with the other mode", runs.len()),
            "runs_ms": runs.iter().map(|m| round2(m.ms)).collect::<Vec<_>>(),
            "round_trips": mid.round_trips,
            "round_trips_per_op": round2(mid.round_trips as f64 / 1_000.0),
            "commits": mid.commits,
            "commits_per_op": round2(mid.commits as f64 / 1_000.0),
            "entries": mid.entries,
            "bare_commit_us": round2(per_commit_bare_us),
            "ratio_to_bare_commit": if per_commit_bare_us > 0.0 { round2(ms * 1000.0 / 1_000.0 / per_commit_bare_us) } else { 0.0 },
        });
        if is_grouped {
            extra["ratio_to_ungrouped"] = json!(round2(median(&ratios)));
            extra["ratios_to_ungrouped"] =
                json!(ratios.iter().map(|r| round2(*r)).collect::<Vec<_>>());
        }
        report(&name, 1_000, ms, extra);
    }
}

/// What the workers of one throughput point did.
#[derive(Default)]
struct Driven {
    runs: u64,
    handle_commits: u64,
}

/// One worker: its own journal handle and runtime on a thread of its own, claiming runs
/// until none is runnable.
fn worker(url: &str, name: &str, small_steps: u64) -> Driven {
    let journal = open(url, 2);
    let rt = runtime(&journal, name, small_steps);
    let tokio = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a worker's tokio runtime");
    let before = journal.commits();
    let mut runs = 0;
    while let Some(lease) = journal.claim_run(name, LEASE).expect("claim_run") {
        let report = tokio.block_on(rt.resume(lease.run)).expect("a drive");
        ok(&report.outcome);
        // The drive gave its lease up with the run's last write; this is what a worker
        // does whatever the drive did.
        journal.release_run(lease.run).expect("release_run");
        runs += 1;
    }
    let handle_commits = journal.commits() - before;
    Driven { runs, handle_commits }
}

/// Creates `n_runs` runs of `small_steps` steps on a fresh database, then drives them
/// with `workers` workers; reports runs/s and commits/s.
fn throughput(workers: usize, n_runs: u64, small_steps: u64, bare_1: f64, bare_4: f64) {
    let url = test_server::fresh_database();
    // Created by one handle from a few tasks at once, then handed to the workers by
    // dropping the handle (its leases go with it in one transaction).
    let t = instant();
    {
        let journal = open(&url, 4);
        let rt = runtime(&journal, "creator", small_steps);
        let tokio = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("the creator's tokio runtime");
        tokio.block_on(async {
            let mut handles = Vec::new();
            for c in 0..8 {
                let rt = rt.clone();
                let share = n_runs / 8 + u64::from(c < n_runs % 8);
                handles.push(tokio::spawn(async move {
                    for _ in 0..share {
                        rt.create(selection("small", json!({})), Value::Null)
                            .await
                            .expect("create");
                    }
                }));
            }
            for h in handles {
                h.await.expect("a creating task");
            }
        });
    }
    let create_ms = t.elapsed().as_secs_f64() * 1000.0;
    let server_before = test_server::server_commits(&url);
    let t = instant();
    let driven: Vec<Driven> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..workers)
            .map(|w| {
                let url = &url;
                scope.spawn(move || worker(url, &format!("worker-{w}"), small_steps))
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("a worker panicked")).collect()
    });
    let ms = t.elapsed().as_secs_f64() * 1000.0;
    let server_commits = test_server::server_commits(&url) - server_before;
    let runs: u64 = driven.iter().map(|d| d.runs).sum();
    let handle_commits: u64 = driven.iter().map(|d| d.handle_commits).sum();
    let check = open(&url, 1);
    let succeeded = check
        .runs(&RunFilter { statuses: vec![RunStatus::Succeeded], ..RunFilter::default() })
        .expect("runs")
        .len() as u64;
    drop(check);
    assert_eq!(succeeded, n_runs, "every run succeeds");
    let secs = ms / 1000.0;
    report(
        &format!("pg_throughput_{workers}w"),
        runs,
        ms,
        json!({
            "includes": format!("{n_runs} runs of {small_steps} sequential no-op ctx.step each, created beforehand, driven by {workers} worker thread(s), each with its own journal handle (2 connections) and runtime: claim_run, resume, release_run until nothing is runnable; n counts runs"),
            "workers": workers,
            "steps_per_run": small_steps,
            "succeeded": succeeded,
            "runs_per_s": round2(runs as f64 / secs),
            "steps_per_s": round2((runs * small_steps) as f64 / secs),
            "server_commits": server_commits,
            "server_commits_per_s": round2(server_commits as f64 / secs),
            "server_commits_per_run": round2(server_commits as f64 / runs.max(1) as f64),
            "journal_commits": handle_commits,
            "journal_commits_per_run": round2(handle_commits as f64 / runs.max(1) as f64),
            "bare_commits_per_s_1": round2(bare_1),
            "bare_commits_per_s_4": round2(bare_4),
            "create_ms": round2(create_ms),
            "created_runs_per_s": round2(n_runs as f64 / (create_ms / 1000.0)),
            "note": "server_commits: pg_stat_database.xact_commit of the run's database while the workers ran (writes, reads and lease renewals); journal_commits: the workers' journal handles' commit counts (their writes, plus a notice heard from the others now and then)",
        }),
    );
}

/// Returns the Python of DBOS's venv, if it is there.
fn dbos_python() -> Option<PathBuf> {
    if let Some(python) = std::env::var_os("CLIO_DBOS_PYTHON") {
        return Some(PathBuf::from(python));
    }
    let home = std::env::var_os("HOME")?;
    let python = Path::new(&home).join(".cache/clio-dbos-venv/bin/python");
    python.exists().then_some(python)
}

/// Runs DBOS's side of the bench on the same server, its lines after CLIO's.
fn dbos() {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../bench/postgres/dbos_bench.py");
    let Some(python) = dbos_python() else {
        println!(
            "{}",
            json!({
                "bench": "dbos",
                "engine": "dbos",
                "includes": "nothing: DBOS's side of the PostgreSQL bench did not run",
                "skipped": "no DBOS venv at ~/.cache/clio-dbos-venv (bench/postgres/setup-dbos makes it; CLIO_DBOS_PYTHON names another Python)",
            })
        );
        return;
    };
    let url = test_server::fresh_database();
    let out = Command::new(&python)
        .arg(&script)
        .arg(&url)
        .stderr(std::process::Stdio::inherit())
        .output()
        .expect("the DBOS bench starts");
    print!("{}", String::from_utf8_lossy(&out.stdout));
    if !out.status.success() {
        println!(
            "{}",
            json!({
                "bench": "dbos",
                "engine": "dbos",
                "includes": "nothing: DBOS's side of the PostgreSQL bench failed",
                "failed": out.status.to_string(),
            })
        );
    }
}

fn main() {
    let server = test_server::url();
    let (bare_1, bare_4) =
        if want("bare") || want("throughput") || want("W1") { bare(server) } else { (0.0, 0.0) };
    let tokio =
        tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("tokio runtime");
    let rounds = env_number("CLIO_PG_BENCH_ROUNDS", 3);
    if want("W1") {
        one_run(
            &tokio,
            "pg_W1_sequential_steps",
            ("steps", Value::Null),
            "1,000 ctx.step in one flow, each one durable journal commit, on the PostgreSQL journal",
            bare_1,
            rounds,
        );
    }
    if want("W2") {
        one_run(
            &tokio,
            "pg_W2_gather_1000_tools",
            ("fan", Value::Null),
            "ctx.gather of 1,000 read-only no-op tool calls in one flow, on the PostgreSQL journal",
            bare_1,
            rounds,
        );
    }
    if want("W2s") {
        one_run(
            &tokio,
            "pg_W2s_gather_1000_side_effecting_tools",
            ("fan_effect", Value::Null),
            "ctx.gather of 1,000 side-effecting no-op tool calls in one flow (intent and acceptance durable before each runs, then its end), on the PostgreSQL journal",
            bare_1,
            rounds,
        );
    }
    if want("W3") {
        one_run(
            &tokio,
            "pg_W3_dag_10x100",
            ("workflow", dag::dag_of("noop")),
            "the 10x100 DAG workflow of read-only no-op tools (each step after 2 of the layer before), given as the run's input, on the PostgreSQL journal",
            bare_1,
            rounds,
        );
    }
    drop(tokio);
    if want("throughput") {
        let n_runs = env_number("CLIO_PG_BENCH_RUNS", 10_000);
        let small_steps = env_number("CLIO_PG_BENCH_STEPS", 3);
        for workers in [1, 2, 4] {
            throughput(workers, n_runs, small_steps, bare_1, bare_4);
        }
    }
    if want("dbos") {
        dbos();
    }
}
