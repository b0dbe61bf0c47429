//! The live view at scale (issue 47, item 1): `clio workflow run` of a 1,000-step workflow
//! with its progress drawn on a pseudo-terminal against the same run with its stderr on a
//! pipe (one plain line per change), one JSON line per workflow shape on stdout:
//!
//! - `progress_pty_chain_1000`: the 1,000-step chain (each step waits on the one before);
//! - `progress_pty_fanout_1000`: the 1,000-way fan-out (no step waits on another).
//!
//! Each line's `total_ms` is the median wall time of 5 runs on the pseudo-terminal,
//! `piped_ms` that of 5 runs piped, `ratio` the one over the other; the goal is a ratio of
//! at most 1.1 (`goal_ratio`). Before the bounded view a 1,000-step run took 18.4 s on a
//! 120×40 terminal against 9.5 s piped.
//!
//! The pseudo-terminal is util-linux `script` (the workspace forbids `unsafe`, which
//! `openpty` needs): it runs clio on a 120×40 terminal (`stty rows 40 cols 120`) and copies
//! what clio draws to a pipe this bench reads to its end. Neither mode passes `--quiet` or
//! `--json`, so both draw progress; the workflow's steps are the `cli` bench's read-only
//! no-op MCP tool (this bench's own binary, started with `CLIO_CLI_BENCH_MCP_SERVER=1`),
//! each run in a home of its own.

#![allow(
    clippy::print_stdout,
    clippy::print_stderr,
    reason = "a benchmark reports on stdout, and why it has no line on stderr"
)]

use std::io::{BufRead, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

use serde_json::{Value, json};

#[allow(dead_code, reason = "helpers of the shared bench module this bench does not use")]
mod w8;

use w8::{Case, RUNS, SERVER, median, path_str, report, round2, shaped, write_plugin};

/// The MCP server of the `noop` tool: each call answered with its arguments.
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

/// Quotes `word` for `sh`.
fn quoted(word: &str) -> String {
    format!("'{}'", word.replace('\'', "'\\''"))
}

/// The words of the command that runs workflow `file` in `case`, progress on.
fn words(case: &Case, plugin: &Path, file: &Path) -> Vec<String> {
    [
        env!("CARGO_BIN_EXE_clio"),
        "--home",
        path_str(&case.home),
        "workflow",
        "run",
        path_str(file),
        "--task",
        "bench",
        "--plugin",
        path_str(plugin),
        "--workspace",
        path_str(&case.workspace),
        "--no-input",
    ]
    .iter()
    .map(|w| (*w).to_owned())
    .collect()
}

/// Runs `command` to its end, reading all it prints; returns its milliseconds.
fn timed(mut command: Command, what: &str) -> f64 {
    let t = Instant::now();
    let out = command.stdin(Stdio::null()).output().expect("the command starts");
    let ms = t.elapsed().as_secs_f64() * 1000.0;
    assert!(
        out.status.success(),
        "{what}: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    ms
}

/// Runs `file` once piped and once on a pseudo-terminal, [`RUNS`] times each (the two
/// modes taking turns, so that the machine's load falls on both alike); returns the
/// medians and every run's milliseconds.
fn compare(dir: &Path, name: &str, plugin: &Path, file: &Path, cache: &Path) -> (f64, f64, Value) {
    let (mut piped, mut pty) = (Vec::new(), Vec::new());
    for i in 0..RUNS {
        let case = Case::new(dir, &format!("{name}-piped-{i}"), plugin);
        let w = words(&case, plugin, file);
        let mut command = Command::new(&w[0]);
        command.args(&w[1..]).current_dir(&case.workspace).env("XDG_CACHE_HOME", cache);
        command.env_remove("NO_COLOR");
        piped.push(round2(timed(command, "piped")));

        let case = Case::new(dir, &format!("{name}-pty-{i}"), plugin);
        let line: Vec<String> = words(&case, plugin, file).iter().map(|w| quoted(w)).collect();
        let script = format!("stty rows 40 cols 120; exec {}", line.join(" "));
        let mut command = Command::new("script");
        command.args(["-qefc", &script, "/dev/null"]).current_dir(&case.workspace);
        command.env("XDG_CACHE_HOME", cache).env("TERM", "xterm-256color").env_remove("NO_COLOR");
        pty.push(round2(timed(command, "pty")));
    }
    (median(&pty), median(&piped), json!({ "pty_runs_ms": pty, "piped_runs_ms": piped }))
}

fn main() {
    if std::env::var_os(SERVER).is_some() {
        serve_noop();
        return;
    }
    if Command::new("script").arg("--version").output().is_err() {
        eprintln!("progress_pty: util-linux `script` is missing; no pseudo-terminal, no line");
        return;
    }
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path();
    let plugin = write_plugin(dir, &std::env::current_exe().expect("this bench's binary"));
    let cache = dir.join("cache");
    let files = dir.join("workflows");
    std::fs::create_dir_all(&files).expect("workflows folder");
    let chain = files.join("chain.json");
    std::fs::write(&chain, shaped(1_000, true)).expect("workflow file");
    let fanout = files.join("fanout.json");
    std::fs::write(&fanout, shaped(1_000, false)).expect("workflow file");
    // Untimed: the binary and the plugin into the page cache, the sandbox's check kept.
    let warm = Case::new(dir, "warm-up", &plugin);
    w8::timed(warm.workflow(&chain), "warm-up");

    for (name, file, what) in
        [("chain", &chain, "the 1,000-step chain"), ("fanout", &fanout, "the 1,000-way fan-out")]
    {
        let (pty, piped, runs) = compare(dir, name, &plugin, file, &cache);
        let mut extra = json!({
            "includes": format!(
                "clio workflow run of {what} through the release binary, progress on: on a 120x40 pseudo-terminal (util-linux script, its output read to the end) against stderr on a pipe; the median of {RUNS} runs of each, a home of its own each; read-only no-op MCP tool steps"
            ),
            "piped_ms": round2(piped),
            "ratio": round2(pty / piped),
            "goal_ratio": 1.1,
        });
        if let (Some(obj), Value::Object(more)) = (extra.as_object_mut(), runs) {
            obj.extend(more);
        }
        report(&format!("progress_pty_{name}_1000"), 1_000, pty, extra);
    }
}
