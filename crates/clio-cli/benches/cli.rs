//! W8 (issue 24): the flow bench's W1–W4 end to end through the release `clio` binary,
//! each timed from process start to exit, one JSON line per workload on stdout:
//!
//! - `W8_W1_cli_chain_1000`: `clio workflow run` of a 1,000-step chain workflow (each step
//!   waits on the one before);
//! - `W8_W2_cli_fanout_1000`: a 1,000-way fan-out workflow (no step waits on another);
//! - `W8_W3_cli_dag_10x100`: the flow bench's 10 × 100 DAG (each step waits on 2 of the
//!   layer before);
//! - `W8_W4_cli_resume_after_kill_at_900`: the chain of W1 killed with SIGKILL while its
//!   step 900 runs (900 steps done), then `clio runs resume` timed to its exit;
//! - `W8_one_step`: a one-step workflow, the fixed cost of a `clio workflow run` (process
//!   start, journal open, plugin load, the tool server's start, exit).
//!
//! Every step's target is `noop`, a read-only tool of a test plugin written into the
//! bench's temporary folder: an MCP server that answers each call with its arguments. The
//! server is this bench binary itself, copied into the plugin folder and started by clio
//! with `CLIO_CLI_BENCH_MCP_SERVER=1`, so a step costs clio's work and one JSON-RPC round
//! trip over a pipe, the closest a plugin tool comes to the in-process bench's closure (an
//! executable tool would start a process per step). It runs in clio's sandbox, as any
//! plugin's server does.
//!
//! The one-step, W1, W2 and W3 lines are the median of 5 runs (`runs_ms` lists them: a
//! single run moved by 20 % and more between tries on the shared machine); W4 is one.
//! Each run gets a home of its own (`--home`, with the plugin trusted first, untimed)
//! and the default configuration: `immediate` durability, the journal's quick repair on.
//! One untimed one-step run first loads the binary into the page cache (and, as a person's
//! first run would, leaves a passed sandbox check in the cache folder, the bench's own
//! `XDG_CACHE_HOME`, which the timed runs believe: `Sandbox::kept_check`). The binary is the
//! one `cargo bench` builds for this bench (`CARGO_BIN_EXE_clio`: a bench's binaries are
//! built with the bench profile, which is the release profile), so nothing else needs
//! building. `cargo xtask bench` adds a `W8_vs_in_process` line with the ratios to the
//! flow bench's W1, W1wf, W2, W2wf, W3 and W4 of the same run. `CLIO_CLI_BENCH_ONLY=W1,W4`
//! runs only the workloads named; `CLIO_CLI_BENCH_KEEP=<dir>` keeps the homes.

#![allow(clippy::print_stdout, reason = "a benchmark reports on stdout")]

use std::io::{BufRead, Write};
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

mod w8;

use w8::{Case, RUNS, SERVER, dag, median, report, round2, shaped, timed, write_plugin};

/// The kill file: while it is in the workspace, the server holds call 900 unanswered and
/// renames it to [`HELD`], for the bench to kill clio there.
const ARM: &str = "hold-at-900";
const HELD: &str = "held-at-900";

fn want(name: &str) -> bool {
    std::env::var("CLIO_CLI_BENCH_ONLY").map_or(true, |only| only.split(',').any(|w| w == name))
}

/// The MCP server of the `noop` tool: newline-delimited JSON-RPC on stdin and stdout. It
/// answers `initialize`, `tools/list` and `tools/call` (the arguments back, as structured
/// content), ignores notifications, and exits when its stdin closes.
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
                if args["i"] == 900 && std::fs::rename(ARM, HELD).is_ok() {
                    // W4: this call is never answered; the bench kills clio here.
                    continue;
                }
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

const RUNS_NOTE: &str = "the median of 5 runs, each in a home of its own (runs_ms lists them)";

/// Runs workflow `file` [`RUNS`] times, each in a fresh home named after `name`; returns
/// the median milliseconds, every run's milliseconds in order, and the last run's case.
fn median_of_runs(dir: &Path, name: &str, plugin: &Path, file: &Path) -> (f64, Vec<f64>, Case) {
    let mut runs = Vec::with_capacity(RUNS);
    let mut last = None;
    for i in 0..RUNS {
        let case = Case::new(dir, &format!("{name}-{i}"), plugin);
        runs.push(round2(timed(case.workflow(file), name)));
        last = Some(case);
    }
    (median(&runs), runs, last.expect("at least one run"))
}

fn main() {
    if std::env::var_os(SERVER).is_some() {
        serve_noop();
        return;
    }
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path();
    let plugin = write_plugin(dir, &std::env::current_exe().expect("this bench's binary"));
    let files = dir.join("workflows");
    std::fs::create_dir_all(&files).expect("workflows folder");
    let write = |name: &str, text: String| {
        let path = files.join(name);
        std::fs::write(&path, text).expect("workflow file");
        path
    };
    let one = write("one.json", shaped(1, true));
    let chain = write("chain.json", shaped(1_000, true));
    let fanout = write("fanout.json", shaped(1_000, false));
    let dag = write("dag.json", dag());

    // Untimed: the binary and the plugin into the page cache, and the sandbox's check kept.
    let warm = Case::new(dir, "warm-up", &plugin);
    timed(warm.workflow(&one), "warm-up");

    // The warm-up kept the sandbox check's pass when bubblewrap confines the server here.
    let kept = dir.join("cache/clio/sandbox-check.json").exists();
    let common = format!(
        "through the release clio binary, process start to exit, a home of its own, read-only no-op MCP tool targets on a server under the sandbox ({})",
        if kept {
            "bubblewrap, its check's pass kept from the warm-up run"
        } else {
            "no bubblewrap check kept: Landlock, or a check in each run"
        }
    );
    if want("one") {
        let (ms, runs, case) = median_of_runs(dir, "one", &plugin, &one);
        let includes = format!("clio workflow run of a 1-step workflow {common}; {RUNS_NOTE}");
        let extra = json!({ "includes": includes, "entries": case.entries(), "runs_ms": runs });
        report("W8_one_step", 1, ms, extra);
    }
    let workloads = [
        ("W1", "W8_W1_cli_chain_1000", &chain, "a 1,000-step chain workflow"),
        ("W2", "W8_W2_cli_fanout_1000", &fanout, "a 1,000-way fan-out workflow"),
        ("W3", "W8_W3_cli_dag_10x100", &dag, "the 10x100 DAG workflow"),
    ];
    for (name, bench, file, what) in workloads {
        if !want(name) {
            continue;
        }
        let (ms, runs, case) = median_of_runs(dir, name, &plugin, file);
        let entries = case.entries();
        let extra = json!({
            "includes": format!("clio workflow run of {what} {common}; {RUNS_NOTE}"),
            "entries": entries,
            "entries_per_step": round2(entries as f64 / 1_000.0),
            "runs_ms": runs,
        });
        report(bench, 1_000, ms, extra);
    }
    if want("W4") {
        let case = Case::new(dir, "W4", &plugin);
        std::fs::write(case.workspace.join(ARM), "").expect("kill file");
        let mut child = case
            .workflow(&chain)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("clio");
        let deadline = Instant::now() + Duration::from_secs(300);
        while !case.workspace.join(HELD).exists() {
            assert!(child.try_wait().expect("wait").is_none(), "the W4 run ended before step 900");
            assert!(Instant::now() < deadline, "the W4 run never reached step 900");
            std::thread::sleep(Duration::from_millis(2));
        }
        child.kill().expect("SIGKILL");
        let _ = child.wait();
        let ms = timed(case.clio(&["runs", "resume", "1", "--quiet", "--json"]), "W4");
        let extra = json!({
            "includes": format!("clio runs resume of the 1,000-step chain killed with SIGKILL while step 900 ran (900 done), {common}; n counts the steps left"),
            "entries": case.entries(),
        });
        report("W8_W4_cli_resume_after_kill_at_900", 100, ms, extra);
    }
    if let Ok(keep) = std::env::var("CLIO_CLI_BENCH_KEEP") {
        let _ = std::fs::rename(tmp.keep(), keep);
    }
}
