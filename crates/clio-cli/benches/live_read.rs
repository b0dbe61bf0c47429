//! `cargo xtask bench live_read` (issue 44, item 4): reading a long run is cheap and does
//! not slow the run. Through the release `clio` binary, each command timed from process
//! start to exit, one JSON line per measure on stdout:
//!
//! - `live_read_show_events`: `clio runs show`, `runs show --json`, `runs events`,
//!   `runs events --json` and a page of `runs events` of a 9,500-step chain workflow's
//!   run (nearly 10,000 entries with its views, the most a run may record: SPEC §7),
//!   each the median of 5 processes (the two `--json` ones, whose output is the whole
//!   run, one process each); once with the journal opened by the reader itself
//!   (the run ended, nobody holds it), once served by the process that holds it (`clio
//!   serve` on the home, as a live run's process serves the other `clio`s). Goal: `runs
//!   show` and `runs events` under 100 ms each.
//! - `live_read_chain_under_readers`: the steps per second of a chain workflow run alone,
//!   then of the same chain in a fresh home while 10 `clio runs show 1` processes a second
//!   read it (each served by the run's process over its socket); the ratio of the two.
//!   Goal: the run falls by at most 20 % (ratio ≥ 0.8).
//!
//! The steps' target is the `noop` tool of the test plugin the W8 bench uses (`w8`), an MCP
//! server that is this bench binary itself. `CLIO_LIVE_READ_STEPS` sizes the big run
//! (default 9,500), `CLIO_LIVE_READ_CHAIN` the chain read while it runs (default 3,000),
//! `CLIO_LIVE_READ_KEEP=<dir>` keeps the homes.

#![allow(clippy::print_stdout, reason = "a benchmark reports on stdout")]

use std::io::{BufRead, Write};
use std::path::Path;
use std::process::{Child, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

#[allow(dead_code, reason = "helpers of the shared bench module this bench does not use")]
mod w8;

use w8::{Case, SERVER, median, round2, shaped, timed, write_plugin};

/// The MCP server of the `noop` tool: newline-delimited JSON-RPC on stdin and stdout.
fn serve_noop() {
    let stdin = std::io::stdin();
    let mut out = std::io::stdout().lock();
    for line in stdin.lock().lines() {
        let Ok(line) = line else { return };
        let Ok(msg) = serde_json::from_str::<Value>(&line) else { continue };
        let Some(id) = msg.get("id").cloned() else { continue };
        let result = match msg["method"].as_str().unwrap_or_default() {
            "initialize" => json!({
                "protocolVersion": msg["params"]["protocolVersion"].clone(),
                "capabilities": { "tools": {} },
                "serverInfo": { "name": "clio-bench-noop", "version": "0.1.0" },
            }),
            "tools/list" => json!({ "tools": [{
                "name": "noop",
                "description": "Return the arguments.",
                "inputSchema": { "type": "object" },
            }] }),
            "tools/call" => {
                let args = msg["params"]["arguments"].clone();
                json!({
                    "content": [{ "type": "text", "text": args.to_string() }],
                    "structuredContent": args,
                    "isError": false,
                })
            }
            _ => json!({}),
        };
        let reply = json!({ "jsonrpc": "2.0", "id": id, "result": result });
        if writeln!(out, "{reply}").and_then(|()| out.flush()).is_err() {
            return;
        }
    }
}

fn number(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// Runs `args` in `case` `times` times; returns the median milliseconds, every run's, and the
/// bytes the last one printed. A command that fails stops the bench.
fn median_command(case: &Case, args: &[&str], times: usize) -> (f64, Vec<f64>, usize) {
    let mut runs = Vec::new();
    let mut bytes = 0;
    for _ in 0..times {
        let t = Instant::now();
        let out = case.clio(args).output().expect("clio");
        runs.push(round2(t.elapsed().as_secs_f64() * 1000.0));
        assert!(
            out.status.success(),
            "clio {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr)
        );
        bytes = out.stdout.len();
    }
    (median(&runs), runs, bytes)
}

/// Stops `clio serve` when the bench ends, however it ends: with SIGINT (Ctrl-C), which
/// closes its journal as a person's stop does, then SIGKILL if it is still there after
/// 10 s (a killed serve would leave the journal for the next reader to recover).
struct Serve(Child);

impl Drop for Serve {
    fn drop(&mut self) {
        let pid = self.0.id().to_string();
        let _ = std::process::Command::new("kill").args(["-INT", &pid]).status();
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if matches!(self.0.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `clio serve` on `case`'s home and waits until its socket answers.
fn serve(case: &Case) -> Serve {
    let child = case
        .clio(&["serve", "--port", "0"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("clio serve");
    let serve = Serve(child);
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let sock = case.home.join("clio.sock");
        if sock.exists() && case.clio(&["runs", "list"]).output().is_ok_and(|o| o.status.success())
        {
            return serve;
        }
        assert!(Instant::now() < deadline, "clio serve did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Times the reads of run 1 of `case` (`how` names who opens the journal).
fn reads(case: &Case, steps: usize, how: &str, common: &str) {
    let page = "100";
    let reads: [(&str, Vec<&str>); 5] = [
        ("show", vec!["runs", "show", "1"]),
        ("show_json", vec!["runs", "show", "1", "--json"]),
        ("events", vec!["runs", "events", "1"]),
        ("events_json", vec!["runs", "events", "1", "--json"]),
        ("events_page", vec!["runs", "events", "1", "--after", "5000", "--limit", page]),
    ];
    let mut line = json!({
        "bench": "live_read_show_events",
        "entries": case.entries(),
        "workload": how,
        "includes": format!(
            "clio runs show|show --json|events|events --json|events --after 5000 --limit 100 of run 1, a {steps}-step chain workflow's ended run (`entries` its journal entries), {common}; {how}; the median of 5 processes each, of 1 for the --json ones (runs_ms lists them), bytes what the last printed"
        ),
        "n": steps,
        "goal_ms": 100.0,
    });
    for (name, args) in reads {
        let times = if name.ends_with("_json") { 1 } else { 5 };
        let (ms, runs, bytes) = median_command(case, &args, times);
        line[format!("{name}_ms")] = json!(ms);
        line[format!("{name}_runs_ms")] = json!(runs);
        line[format!("{name}_bytes")] = json!(bytes);
    }
    let met =
        ["show_ms", "events_ms"].iter().all(|k| line[k].as_f64().is_some_and(|ms| ms < 100.0));
    line["goal_met"] = json!(met);
    println!("{line}");
}

/// Runs the chain `file` in a fresh home named `name`, with `readers` `clio runs show 1`
/// processes started each second while it runs; returns its milliseconds, the reads
/// started, the reads that failed and the reads' median milliseconds.
fn chain_under_readers(
    dir: &Path,
    name: &str,
    plugin: &Path,
    file: &Path,
    readers: u64,
) -> (f64, u64, u64, f64) {
    let case = Arc::new(Case::new(dir, name, plugin));
    let done = Arc::new(AtomicBool::new(false));
    let started = Arc::new(AtomicU64::new(0));
    let failed = Arc::new(AtomicU64::new(0));
    let times = Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut spawner = None;
    if readers > 0 {
        let (case, done, started, failed, times) = (
            Arc::clone(&case),
            Arc::clone(&done),
            Arc::clone(&started),
            Arc::clone(&failed),
            Arc::clone(&times),
        );
        spawner = Some(std::thread::spawn(move || {
            let every = Duration::from_micros(1_000_000 / readers);
            let mut next = Instant::now() + every;
            let mut threads = Vec::new();
            while !done.load(Ordering::SeqCst) {
                let now = Instant::now();
                if now < next {
                    std::thread::sleep(next - now);
                    continue;
                }
                next += every;
                // Readers start only once the run exists (run 1 of this fresh home).
                if !case.home.join("clio.sock").exists() {
                    continue;
                }
                started.fetch_add(1, Ordering::SeqCst);
                let (case, failed, times) =
                    (Arc::clone(&case), Arc::clone(&failed), Arc::clone(&times));
                threads.push(std::thread::spawn(move || {
                    let t = Instant::now();
                    let ok = case
                        .clio(&["runs", "show", "1"])
                        .stdout(Stdio::null())
                        .stderr(Stdio::null())
                        .status()
                        .is_ok_and(|s| s.success());
                    if ok {
                        times.lock().expect("times").push(t.elapsed().as_secs_f64() * 1000.0);
                    } else {
                        failed.fetch_add(1, Ordering::SeqCst);
                    }
                }));
            }
            for thread in threads {
                let _ = thread.join();
            }
        }));
    }
    let ms = timed(case.workflow(file), name);
    done.store(true, Ordering::SeqCst);
    if let Some(spawner) = spawner {
        let _ = spawner.join();
    }
    let times = times.lock().expect("times").clone();
    let read_ms = if times.is_empty() { 0.0 } else { round2(median(&times)) };
    (ms, started.load(Ordering::SeqCst), failed.load(Ordering::SeqCst), read_ms)
}

fn main() {
    if std::env::var_os(SERVER).is_some() {
        serve_noop();
        return;
    }
    let steps = number("CLIO_LIVE_READ_STEPS", 9_500);
    let chain_steps = number("CLIO_LIVE_READ_CHAIN", 3_000);
    let tmp = tempfile::tempdir().expect("tempdir");
    // Kept: the homes are made there and left, also when the bench fails.
    let keep = std::env::var_os("CLIO_LIVE_READ_KEEP").map(std::path::PathBuf::from);
    if let Some(keep) = &keep {
        std::fs::create_dir_all(keep).expect("the folder to keep");
    }
    let dir = keep.as_deref().unwrap_or(tmp.path());
    let plugin = write_plugin(dir, &std::env::current_exe().expect("this bench's binary"));
    let files = dir.join("workflows");
    std::fs::create_dir_all(&files).expect("workflows folder");
    let write = |name: &str, text: String| {
        let path = files.join(name);
        std::fs::write(&path, text).expect("workflow file");
        path
    };
    let big = write("big.json", shaped(steps, true));
    let chain = write("chain.json", shaped(chain_steps, true));
    let common = "through the release clio binary, process start to exit, a home of its own";

    let case = Case::new(dir, "big", &plugin);
    timed(case.workflow(&big), "the big run");
    reads(&case, steps, "opened: the reader opens the journal itself", common);
    {
        let _serve = serve(&case);
        reads(&case, steps, "served: clio serve holds the journal and runs the reads", common);
    }

    // Alone and under readers, alternated, 3 of each; the medians compared.
    let (mut alone, mut loaded, mut started, mut failed, mut read_ms) =
        (Vec::new(), Vec::new(), 0, 0, Vec::new());
    for round in 0..3 {
        alone.push(round2(
            chain_under_readers(dir, &format!("alone-{round}"), &plugin, &chain, 0).0,
        ));
        let (ms, s, f, r) = chain_under_readers(dir, &format!("read-{round}"), &plugin, &chain, 10);
        loaded.push(round2(ms));
        started += s;
        failed += f;
        read_ms.push(r);
    }
    let (alone_ms, loaded_ms) = (median(&alone), median(&loaded));
    let per_s = |ms: f64| round2(chain_steps as f64 / (ms / 1000.0));
    let ratio = round2(per_s(loaded_ms) / per_s(alone_ms));
    let line = json!({
        "bench": "live_read_chain_under_readers",
        "includes": format!(
            "clio workflow run of a {chain_steps}-step chain, {common}: alone, and with 10 `clio runs show 1` processes started a second while it runs (served by the run's process); 3 rounds of each, alternated, medians compared"
        ),
        "n": chain_steps,
        "alone_ms": alone_ms,
        "alone_runs_ms": alone,
        "with_readers_ms": loaded_ms,
        "with_readers_runs_ms": loaded,
        "steps_per_s_alone": per_s(alone_ms),
        "steps_per_s_with_readers": per_s(loaded_ms),
        "ratio": ratio,
        "goal_ratio": 0.8,
        "goal_met": ratio >= 0.8,
        "reads_started": started,
        "reads_failed": failed,
        "read_median_ms_per_round": read_ms,
    });
    println!("{line}");
}
