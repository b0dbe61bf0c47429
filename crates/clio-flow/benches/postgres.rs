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
//! - `pg_throughput_<w>w`: `CLIO_PG_BENCH_RUNS` runs (10,000 unless set) of
//!   `CLIO_PG_BENCH_STEPS` sequential no-op steps each (3 unless set), created first and
//!   then driven by `w` = 1, 2 and 4 workers, each a thread with its own journal handle
//!   and runtime, looping claim_run → resume → release_run as `clio worker` does: runs/s
//!   and commits/s beside the bare commit rate;
//! - DBOS Transact (`bench/postgres/dbos_bench.py`) on the same server, when its venv is
//!   there (`bench/postgres/setup-dbos` makes it; `CLIO_DBOS_PYTHON` names another
//!   Python): its lines follow CLIO's, or one line says why they are missing.
//!
//! `CLIO_PG_BENCH_ONLY=bare,W1,W2,throughput,dbos` runs only the workloads named.
#![allow(clippy::print_stdout, reason = "a benchmark reports on stdout")]

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
use clio_postgres::{PostgresConfig, test_server};
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
}

fn open(url: &str, connections: usize) -> Journal {
    let config = PostgresConfig { connections, lease: LEASE, ..PostgresConfig::new(url) };
    clio_postgres::open(&config).expect("the PostgreSQL journal opens")
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

/// Runs `flow` once on a fresh database and reports it as `bench` over 1,000 operations.
///
/// The journal is opened outside `tokio`: the driver's synchronous client connects with a
/// runtime of its own, which cannot start inside another.
fn one_run(tokio: &tokio::runtime::Runtime, bench: &str, flow: &str, includes: &str, bare_1: f64) {
    let url = test_server::fresh_database();
    let journal = open(&url, 4);
    let rt = runtime(&journal, "bench", 1);
    let before = journal.commits();
    let t = instant();
    let r = tokio.block_on(rt.run(selection(flow, json!({})), Value::Null)).expect(bench);
    let ms = t.elapsed().as_secs_f64() * 1000.0;
    let commits = journal.commits() - before;
    ok(&r.outcome);
    let entries = journal.entries(r.run).expect("entries").len();
    drop(rt);
    drop(journal);
    let per_commit_bare_us = if bare_1 > 0.0 { 1e6 / bare_1 } else { 0.0 };
    report(
        bench,
        1_000,
        ms,
        json!({
            "includes": includes,
            "commits": commits,
            "commits_per_op": round2(commits as f64 / 1_000.0),
            "entries": entries,
            "bare_commit_us": round2(per_commit_bare_us),
            "ratio_to_bare_commit": if per_commit_bare_us > 0.0 { round2(ms * 1000.0 / 1_000.0 / per_commit_bare_us) } else { 0.0 },
        }),
    );
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
    if want("W1") {
        one_run(
            &tokio,
            "pg_W1_sequential_steps",
            "steps",
            "1,000 ctx.step in one flow, each one durable journal commit, on the PostgreSQL journal",
            bare_1,
        );
    }
    if want("W2") {
        one_run(
            &tokio,
            "pg_W2_gather_1000_tools",
            "fan",
            "ctx.gather of 1,000 read-only no-op tool calls in one flow, on the PostgreSQL journal",
            bare_1,
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
