//! `cargo xtask bench serve`: `clio serve` under load (issue 22). One serve process (the
//! release binary) holds a journal with `CLIO_SERVE_BENCH_RUNS` runs in progress (default
//! 100: the README's main job submitted with `--detach --approve-edits`, each waiting on
//! its editor's proposal, as runs waiting on people do) while `CLIO_SERVE_BENCH_STREAMS`
//! clients (default 50) follow runs' event streams. It measures the latency of the read
//! routes under that load (`runs`, `run`, `tasks`, `questions`), of the answers that let
//! every run go on, how long the followed streams take to see their runs end, and the serve
//! process's memory. One JSON line on stdout, as the other bench lines.
//!
//! The client is a few lines of HTTP/1.0 over TCP: the response ends when the server
//! closes the connection, so nothing needs decoding but the status line.

#![allow(clippy::print_stdout, reason = "a benchmark reports on stdout")]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// The workspace's root, where the README's examples are.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn clio() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_clio"));
    command.current_dir(root()).env("NO_COLOR", "1");
    command
}

fn number(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// Kills the serve process when the bench ends, however it ends.
struct Serve(Child);

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Sends one request to `addr`; returns its status and body.
fn send(addr: &str, method: &str, path: &str, token: &str, body: &str) -> (u16, String) {
    let mut stream = TcpStream::connect(addr).expect("connect to clio serve");
    let mut request = format!("{method} {path} HTTP/1.0\r\nHost: {addr}\r\n");
    if method == "POST" {
        request.push_str(&format!("Authorization: Bearer {token}\r\n"));
    }
    request.push_str(&format!("Content-Length: {}\r\n\r\n{body}", body.len()));
    stream.write_all(request.as_bytes()).expect("send");
    let mut response = String::new();
    stream.read_to_string(&mut response).expect("read");
    let (head, body) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
    let code = head.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    (code, body.to_owned())
}

/// Returns the `q`-quantile of sorted `samples`, in milliseconds.
fn quantile(samples: &[Duration], q: f64) -> f64 {
    if samples.is_empty() {
        return 0.0;
    }
    let at = ((samples.len() as f64 - 1.0) * q).round() as usize;
    (samples[at].as_secs_f64() * 1e6).round() / 1e3
}

/// Returns `VmRSS` and `VmHWM` of process `pid`, in MB.
fn memory_mb(pid: u32) -> (f64, f64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| -> f64 {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|kb| kb.parse::<f64>().ok())
            .map_or(0.0, |kb| (kb / 1024.0 * 10.0).round() / 10.0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

fn main() {
    let runs = number("CLIO_SERVE_BENCH_RUNS", 100);
    let streams = number("CLIO_SERVE_BENCH_STREAMS", 50).min(runs);
    let reads = number("CLIO_SERVE_BENCH_READS", 1000);
    let home = tempfile::tempdir().expect("a temporary home");
    let h = home.path().to_str().expect("a UTF-8 path").to_owned();
    let plugin = "examples/marketplace/plugins/materials";
    let trusted = clio().args(["--home", &h, "plugin", "trust", plugin]).output().expect("clio");
    assert!(trusted.status.success(), "{}", String::from_utf8_lossy(&trusted.stderr));

    let mut child = clio()
        .args(["--home", &h, "serve", "--port", "0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start clio serve");
    let stdout = child.stdout.take().expect("serve's stdout");
    let serve = Serve(child);
    let mut line = String::new();
    BufReader::new(stdout).read_line(&mut line).expect("serve's address");
    let rest = line.trim().strip_prefix("http://").expect("an http:// address");
    let (addr, token) = rest.split_once("/#token=").expect("the token");
    let (addr, token) = (addr.to_owned(), token.to_owned());
    let pid = serve.0.id();
    let (rss_idle, _) = memory_mb(pid);

    // The runs, submitted as a person would from a second terminal.
    let started = Instant::now();
    let mut ids = Vec::with_capacity(runs);
    for _ in 0..runs {
        let out = clio()
            .args(["--home", &h, "workflow", "run", "examples/workflows/batch7.json"])
            .args(["--task", "Review batch 7", "--plugin", plugin])
            .args(["--workspace", "examples/workspace", "--models", "examples/models/models.toml"])
            .args(["--editor", "independent_reviewer", "--approve-edits", "--detach"])
            .output()
            .expect("clio workflow run --detach");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        ids.push(String::from_utf8_lossy(&out.stdout).trim().parse::<u64>().expect("a run id"));
    }
    let submit_ms = started.elapsed().as_secs_f64() * 1e3 / runs as f64;
    // Every run waits on its editor's proposal before the load starts.
    let mut questions = Vec::with_capacity(runs);
    for id in &ids {
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let (code, body) =
                send(&addr, "GET", &format!("/api/v1/runs/{id}/questions"), &token, "");
            let value: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
            if code == 200
                && let Some(q) = value["questions"].as_array().and_then(|q| q.first())
            {
                questions.push(q["id"].as_u64().expect("a question id"));
                break;
            }
            assert!(Instant::now() < deadline, "run {id} never asked: {code} {body}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    // The followers: each stream counts its entries until its run's `end` event.
    let events = Arc::new(AtomicU64::new(0));
    let followers: Vec<_> = ids
        .iter()
        .take(streams)
        .map(|id| {
            let (addr, events, id) = (addr.clone(), Arc::clone(&events), *id);
            std::thread::spawn(move || -> Option<Instant> {
                let mut stream = TcpStream::connect(&addr).ok()?;
                stream.set_read_timeout(Some(Duration::from_secs(300))).ok()?;
                let request =
                    format!("GET /api/v1/runs/{id}/events/stream HTTP/1.0\r\nHost: {addr}\r\n\r\n");
                stream.write_all(request.as_bytes()).ok()?;
                for line in BufReader::new(stream).lines() {
                    let line = line.ok()?;
                    if line == "event: entry" {
                        events.fetch_add(1, Ordering::Relaxed);
                    } else if line == "event: end" {
                        return Some(Instant::now());
                    }
                }
                None
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(500));

    // Reads under load.
    let mut latencies = Vec::with_capacity(reads);
    for i in 0..reads {
        let id = ids[i % ids.len()];
        let path = match i % 4 {
            0 => "/api/v1/runs".to_owned(),
            1 => format!("/api/v1/runs/{id}"),
            2 => format!("/api/v1/runs/{id}/tasks"),
            _ => format!("/api/v1/runs/{id}/questions"),
        };
        let at = Instant::now();
        let (code, body) = send(&addr, "GET", &path, &token, "");
        latencies.push(at.elapsed());
        assert_eq!(code, 200, "GET {path}: {body}");
    }
    latencies.sort();
    let (rss_loaded, _) = memory_mb(pid);

    // The answers, each letting its run go on to its end.
    let answered_at = Instant::now();
    let mut answers = Vec::with_capacity(runs);
    for (id, q) in ids.iter().zip(&questions) {
        let body = json!({ "question": q, "answer": "yes" }).to_string();
        let at = Instant::now();
        let (code, text) = send(&addr, "POST", &format!("/api/v1/runs/{id}/answer"), &token, &body);
        answers.push(at.elapsed());
        assert_eq!(code, 200, "answer run {id}: {text}");
    }
    answers.sort();
    let ends: Vec<Option<Instant>> =
        followers.into_iter().map(|f| f.join().ok().flatten()).collect();
    let ended = ends.iter().filter(|e| e.is_some()).count();
    let last_end_s = ends
        .iter()
        .flatten()
        .map(|e| e.duration_since(answered_at).as_secs_f64())
        .fold(0.0, f64::max);
    let (rss_end, rss_peak) = memory_mb(pid);
    drop(serve);

    let round = |x: f64| (x * 100.0).round() / 100.0;
    println!(
        "{}",
        json!({
            "bench": "serve",
            "includes": "the release clio serve on loopback; runs are the README's main job waiting on an edit question; reads are runs, run, tasks and questions in turn, one connection each",
            "runs_in_progress": runs,
            "streams": streams,
            "reads": reads,
            "submit_ms_per_run": round(submit_ms),
            "read_p50_ms": quantile(&latencies, 0.5),
            "read_p95_ms": quantile(&latencies, 0.95),
            "read_p99_ms": quantile(&latencies, 0.99),
            "read_max_ms": quantile(&latencies, 1.0),
            "answer_p50_ms": quantile(&answers, 0.5),
            "answer_p99_ms": quantile(&answers, 0.99),
            "streams_ended": ended,
            "stream_entries": events.load(Ordering::Relaxed),
            "all_followed_runs_ended_s": round(last_end_s),
            "serve_rss_mb_idle": rss_idle,
            "serve_rss_mb_loaded": rss_loaded,
            "serve_rss_mb_end": rss_end,
            "serve_rss_mb_peak": rss_peak,
        })
    );
    assert_eq!(ended, streams, "every followed run's stream saw its end");
}
