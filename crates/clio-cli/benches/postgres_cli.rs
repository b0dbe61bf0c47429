//! `clio runs list` on a PostgreSQL journal against the same command on the embedded one
//! (issue 44, item 2: no command pays for background threads it does not need), one JSON
//! line on stdout:
//!
//! - `runs_list_postgres`: the median wall time of `clio runs list` from process start to
//!   exit, over 11 runs of each, on a home whose embedded journal holds 20 finished runs
//!   and on a PostgreSQL database holding the same 20; and the median round trip of one
//!   `SELECT 1` to the server (a connection of the bench's own). The goal is the
//!   PostgreSQL command within 1.5 × the embedded one plus one round trip; before this
//!   issue it paid a lease renewer's sleep of up to 2 s at exit (2.08 s wall). The line
//!   also gives the time to open one new connection (`connect_ms`: PostgreSQL starts a
//!   backend process per connection), which a command cannot avoid and the goal's one
//!   round trip does not count, and the goal with it (`goal_with_connect_ms`).
//!
//! The server is the test server of `clio_postgres::test_server` (`$CLIO_TEST_POSTGRES`,
//! or a throwaway cluster); the binary is the one `cargo bench` builds for this bench (the
//! release profile). The round trip and the command's own connection setup are both on
//! loopback here; against a remote server each costs its network's round trips more.

#![allow(clippy::print_stdout, reason = "a benchmark reports on stdout")]

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

use clio_journal::{Journal, JournalConfig, NewRun, RunStatus, RunUpdate};
use clio_postgres::test_server;
use serde_json::json;

const RUNS: usize = 20;
const TRIES: usize = 11;

fn new_run(i: usize) -> NewRun {
    NewRun {
        flow: "bench".into(),
        input: json!({ "task": format!("t{i}") }),
        input_digest: "d".into(),
        fingerprint: "x".into(),
        owner: "bench".into(),
        launch: None,
    }
}

/// Records `RUNS` finished runs in `journal`.
fn fill(journal: &Journal) {
    for i in 0..RUNS {
        let run = journal.create_run(new_run(i)).expect("create a run");
        let done = RunUpdate { status: Some(RunStatus::Succeeded), ..RunUpdate::default() };
        journal.update_run(run, done).expect("finish a run");
    }
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

/// The median wall time, in ms, of `clio --home home [extra] runs list`.
fn time_list(home: &Path, extra: &[&str]) -> f64 {
    let once = || {
        let t = Instant::now();
        let status = Command::new(env!("CARGO_BIN_EXE_clio"))
            .arg("--home")
            .arg(home)
            .args(extra)
            .args(["runs", "list"])
            .env_remove("RUST_LOG")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .expect("clio runs");
        assert!(status.success(), "clio runs list failed");
        t.elapsed().as_secs_f64() * 1000.0
    };
    // One untimed run loads the binary into the page cache.
    once();
    median((0..TRIES).map(|_| once()).collect())
}

/// The median round trip, in ms, of `SELECT 1` on one connection to `url`.
fn round_trip(url: &str) -> f64 {
    let mut client = postgres::Client::connect(url, postgres::NoTls).expect("the bench server");
    client.simple_query("SELECT 1").expect("warm up");
    let tries: Vec<f64> = (0..101)
        .map(|_| {
            let t = Instant::now();
            client.simple_query("SELECT 1").expect("SELECT 1");
            t.elapsed().as_secs_f64() * 1000.0
        })
        .collect();
    median(tries)
}

/// The median time, in ms, to open a new connection to `url` (TCP, the startup message,
/// authentication, and the server's start of a backend process for it).
fn connect_time(url: &str) -> f64 {
    let tries: Vec<f64> = (0..21)
        .map(|_| {
            let t = Instant::now();
            let client = postgres::Client::connect(url, postgres::NoTls).expect("connect");
            let ms = t.elapsed().as_secs_f64() * 1000.0;
            drop(client);
            ms
        })
        .collect();
    median(tries)
}

fn main() {
    let url = test_server::fresh_database();
    let dir = tempfile::tempdir().expect("a temporary folder");
    let embedded = dir.path().join("embedded");
    std::fs::create_dir_all(&embedded).expect("a home");
    {
        let journal = Journal::open(embedded.join("journal.redb"), JournalConfig::default())
            .expect("the embedded journal");
        fill(&journal);
    }
    {
        let journal = clio_postgres::open_url(&url).expect("the PostgreSQL journal");
        fill(&journal);
    }
    let shared = dir.path().join("shared");
    std::fs::create_dir_all(&shared).expect("a home");
    let embedded_ms = time_list(&embedded, &[]);
    let postgres_ms = time_list(&shared, &["--journal", &url]);
    let rtt_ms = round_trip(&url);
    let connect_ms = connect_time(&url);
    let goal_ms = 1.5 * embedded_ms + rtt_ms;
    let line = json!({
        "bench": "runs_list_postgres",
        "includes": format!(
            "clio runs list from process start to exit (median of {TRIES}), on a PostgreSQL journal and on the embedded one, each holding {RUNS} finished runs; the round trip is one SELECT 1 on an open connection (median of 101), connect_ms one new connection (median of 21; a command must open one); goal: PostgreSQL within 1.5 x embedded + 1 round trip"
        ),
        "runs": RUNS,
        "embedded_ms": round2(embedded_ms),
        "postgres_ms": round2(postgres_ms),
        "round_trip_ms": round2(rtt_ms),
        "goal_ms": round2(goal_ms),
        "connect_ms": round2(connect_ms),
        "goal_with_connect_ms": round2(goal_ms + connect_ms),
        "ratio_to_goal": round2(postgres_ms / goal_ms),
        "met": postgres_ms <= goal_ms,
        "before_issue_44_ms": 2080,
    });
    println!("{line}");
}
