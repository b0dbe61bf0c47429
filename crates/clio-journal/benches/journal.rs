//! The journal benchmark: prints one JSON object per line, each beside the same run's own
//! baselines (a raw `write + fdatasync` loop and a bare redb one-insert-per-commit loop on
//! the same disk), because the disk flush is the limit and it is noisy.
//!
//! Workloads: single appender (immediate), 100 concurrent appenders (immediate), a warm read
//! of one run's 10,000 entries, and reopening a large file (1,000,000 entries by default,
//! `CLIO_BENCH_ENTRIES` to scale it) after a clean close and after a SIGKILL during appends.
//! The killed appender is this binary re-run with `CLIO_BENCH_CHILD` set.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::fs::OpenOptions;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clio_journal::{EntryKind, Journal, JournalConfig, NewEntry, NewRun, RunId};
use serde_json::{Value, json};

type BenchResult<T = ()> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

const CHILD_ENV: &str = "CLIO_BENCH_CHILD";
const CHILD_QUICK_REPAIR_ENV: &str = "CLIO_BENCH_CHILD_QUICK_REPAIR";

fn peak_rss_kb() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// Prints workload `workload`'s line: what it includes, then `fields`, then the peak RSS.
fn emit(workload: &str, includes: &str, mut fields: Value) {
    if let Value::Object(map) = &mut fields {
        map.insert("peak_rss_kb".into(), json!(peak_rss_kb()));
        let mut line = serde_json::Map::new();
        line.insert("bench".into(), json!("journal"));
        line.insert("workload".into(), json!(workload));
        line.insert("includes".into(), json!(includes));
        line.extend(std::mem::take(map));
        println!("{}", Value::Object(line));
    }
}

fn per_sec(n: u64, took: Duration) -> f64 {
    (n as f64 / took.as_secs_f64() * 10.0).round() / 10.0
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

fn new_run(journal: &Journal, flow: &str) -> BenchResult<RunId> {
    Ok(journal.create_run(NewRun {
        flow: flow.into(),
        input: json!({"task": "bench"}),
        input_digest: "sha256:00".into(),
        fingerprint: "bench@1".into(),
        owner: "bench".into(),
        launch: None,
    })?)
}

fn entry(i: u64) -> NewEntry {
    NewEntry::new(EntryKind::Step, json!({"i": i, "result": "ok", "tokens": 42}))
        .with_identity(format!("site:bench.rs:1|digest:{i:016x}|0"))
}

/// Raw `pwrite + fdatasync` of 128 bytes, `n` times.
fn raw_fsync_loop(dir: &Path, n: u64) -> BenchResult<f64> {
    let file = OpenOptions::new()
        .create(true)
        .truncate(true)
        .read(true)
        .write(true)
        .open(dir.join("raw"))?;
    let buf = [7u8; 128];
    let start = Instant::now();
    for i in 0..n {
        file.write_all_at(&buf, i * 128)?;
        file.sync_data()?;
    }
    Ok(per_sec(n, start.elapsed()))
}

/// Bare redb: one small insert per `Durability::Immediate` commit, `n` times.
fn bare_redb_loop(dir: &Path, n: u64, quick_repair: bool) -> BenchResult<f64> {
    let path = dir.join(format!("bare-{quick_repair}.redb"));
    let db = redb::Database::create(&path)?;
    let table: redb::TableDefinition<u64, &[u8]> = redb::TableDefinition::new("t");
    let value = [7u8; 100];
    let start = Instant::now();
    for i in 0..n {
        let mut txn = db.begin_write()?;
        txn.set_quick_repair(quick_repair);
        txn.open_table(table)?.insert(i, value.as_slice())?;
        txn.commit()?;
    }
    Ok(per_sec(n, start.elapsed()))
}

fn single_appender(dir: &Path, n: u64, quick_repair: bool) -> BenchResult<f64> {
    let path = dir.join(format!("single-{quick_repair}.redb"));
    let journal = Journal::open(&path, JournalConfig { quick_repair, ..JournalConfig::default() })?;
    let run = new_run(&journal, "single")?;
    let start = Instant::now();
    for i in 0..n {
        journal.append(run, entry(i))?;
    }
    Ok(per_sec(n, start.elapsed()))
}

/// A lone appender's `n` durable appends through the write-ahead log, with a checkpoint size
/// of `checkpoint_bytes`: the flushes per append (the journal's own count: the log's
/// `fdatasync`s, its growth, and every checkpoint's flushes of the redb file) and the log's
/// bytes per append (where its last written byte lies, over `n`, measured before the
/// close clears it; `None` when the log started over during the appends).
fn log_per_step(dir: &Path, n: u64, checkpoint_bytes: u64) -> BenchResult<(f64, Option<f64>, f64)> {
    let path = dir.join(format!("per-step-{checkpoint_bytes}.redb"));
    let journal =
        Journal::open(&path, JournalConfig { checkpoint_bytes, ..JournalConfig::default() })?;
    let run = new_run(&journal, "per-step")?;
    let before = journal.flushes().unwrap_or(0);
    let start = Instant::now();
    for i in 0..n {
        journal.append(run, entry(i))?;
    }
    let took = start.elapsed();
    let flushes = journal.flushes().unwrap_or(0) - before;
    let log = std::fs::read(format!("{}-wal", path.display()))?;
    let end = log.iter().rposition(|b| *b != 0).map_or(0, |at| at + 1) as f64;
    let bytes = (checkpoint_bytes >= n * 16 * 1024).then(|| round3(end / n as f64));
    drop(journal);
    Ok((round3(flushes as f64 / n as f64), bytes, per_sec(n, took)))
}

fn concurrent_appenders(dir: &Path, appenders: u64, each: u64) -> BenchResult<(f64, f64)> {
    let journal = Arc::new(Journal::open(dir.join("concurrent.redb"), JournalConfig::default())?);
    let runs: Vec<RunId> =
        (0..appenders).map(|_| new_run(&journal, "concurrent")).collect::<BenchResult<_>>()?;
    let start = Instant::now();
    let threads: Vec<_> = runs
        .into_iter()
        .map(|run| {
            let journal = Arc::clone(&journal);
            std::thread::spawn(move || -> BenchResult {
                for i in 0..each {
                    journal.append(run, entry(i))?;
                }
                Ok(())
            })
        })
        .collect();
    for t in threads {
        t.join().map_err(|_| "appender panicked")??;
    }
    let took = start.elapsed();
    let commits_hint = per_sec(appenders * each, took);
    Ok((commits_hint, took.as_secs_f64() * 1000.0))
}

fn read_run(dir: &Path, n: u64) -> BenchResult<(f64, f64)> {
    let journal = Journal::open(dir.join("read.redb"), JournalConfig::default())?;
    let run = new_run(&journal, "read")?;
    for chunk in (0..n).collect::<Vec<_>>().chunks(1000) {
        journal.append_batch(run, chunk.iter().map(|&i| entry(i)).collect())?;
    }
    let mut best = f64::MAX;
    let mut first = 0.0;
    for round in 0..6 {
        let start = Instant::now();
        let entries = journal.entries(run)?;
        let ms = start.elapsed().as_secs_f64() * 1000.0;
        if entries.len() as u64 != n {
            return Err("short read".into());
        }
        if round == 0 {
            first = ms;
        }
        best = best.min(ms);
    }
    Ok((round3(best), round3(first)))
}

/// Issue 44 item 4: the last page (100 entries) of the run of [`read_run`], read with
/// `Journal::entries_page`, best of six, in milliseconds; and the time to open that journal
/// for reading as a killed writer leaves it (records in its log: recovered in memory under a
/// shared lock), best of three.
fn read_page_and_crashed_open(dir: &Path, n: u64) -> BenchResult<(f64, f64)> {
    let journal = Journal::open(dir.join("read.redb"), JournalConfig::default())?;
    let runs = journal.runs(&clio_journal::RunFilter::default())?;
    let run = runs.iter().find(|r| r.flow == "read").map(|r| r.id).ok_or("no run read")?;
    let mut page_best = f64::MAX;
    for _ in 0..6 {
        let start = Instant::now();
        let page = journal.entries_page(run, n - 100, 100)?;
        page_best = page_best.min(start.elapsed().as_secs_f64() * 1000.0);
        if page.len() != 100 {
            return Err("short page".into());
        }
    }
    // A crash copy: the file and its log copied while the journal is open after appends.
    journal.append(run, entry(n))?;
    let crashed = dir.join("crashed");
    std::fs::create_dir_all(&crashed)?;
    std::fs::copy(dir.join("read.redb"), crashed.join("read.redb"))?;
    std::fs::copy(dir.join("read.redb-wal"), crashed.join("read.redb-wal"))?;
    drop(journal);
    let mut open_best = f64::MAX;
    for _ in 0..3 {
        let start = Instant::now();
        let reader = Journal::open_read_only(crashed.join("read.redb"), JournalConfig::default())?;
        let count = reader.entry_count(run)?;
        open_best = open_best.min(start.elapsed().as_secs_f64() * 1000.0);
        if count != n + 1 {
            return Err("the crashed journal lost entries".into());
        }
    }
    Ok((round3(page_best), round3(open_best)))
}

/// Fills a journal with `total` entries (in runs of 10,000) and closes it cleanly.
fn build_large(path: &Path, total: u64) -> BenchResult<Duration> {
    let journal = Journal::open(path, JournalConfig::default())?;
    let start = Instant::now();
    let mut left = total;
    while left > 0 {
        let run = new_run(&journal, "large")?;
        let in_run = left.min(10_000);
        let mut i = 0;
        while i < in_run {
            let n = (in_run - i).min(2_000);
            journal.append_batch(run, (i..i + n).map(entry).collect())?;
            i += n;
        }
        left -= in_run;
    }
    journal.close()?;
    Ok(start.elapsed())
}

fn time_open(path: &Path) -> BenchResult<(f64, Journal)> {
    let start = Instant::now();
    let journal = Journal::open(path, JournalConfig::default())?;
    Ok((round3(start.elapsed().as_secs_f64() * 1000.0), journal))
}

/// Runs the appender child on `path` and SIGKILLs it after `acks` acknowledged appends.
fn crash_child(path: &Path, acks: usize, quick_repair: bool) -> BenchResult<usize> {
    let mut child = Command::new(std::env::current_exe()?)
        .env(CHILD_ENV, path)
        .env(CHILD_QUICK_REPAIR_ENV, if quick_repair { "1" } else { "0" })
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()?;
    let stdout = child.stdout.take().ok_or("no child stdout")?;
    let mut seen = 0;
    for line in BufReader::new(stdout).lines() {
        if line?.starts_with("ack ") {
            seen += 1;
            if seen >= acks {
                break;
            }
        }
    }
    child.kill()?;
    child.wait()?;
    Ok(seen)
}

/// The child: appends from 8 threads until killed, printing each acknowledgement.
fn child_main(path: &str) -> BenchResult {
    let quick_repair = std::env::var(CHILD_QUICK_REPAIR_ENV).map(|v| v == "1").unwrap_or(true);
    let journal = Journal::open(path, JournalConfig { quick_repair, ..JournalConfig::default() })?;
    let run = new_run(&journal, "crash")?;
    let threads: Vec<_> = (0..8u64)
        .map(|t| {
            let journal = journal.clone();
            std::thread::spawn(move || -> BenchResult {
                for i in 0u64.. {
                    let seq = journal.append(run, entry(t << 32 | i))?;
                    let mut out = std::io::stdout().lock();
                    writeln!(out, "ack {seq}")?;
                    out.flush()?;
                }
                Ok(())
            })
        })
        .collect();
    for t in threads {
        t.join().map_err(|_| "child appender panicked")??;
    }
    Ok(())
}

fn main() -> BenchResult {
    if let Ok(path) = std::env::var(CHILD_ENV) {
        return child_main(&path);
    }
    // `cargo bench` passes `--bench`; other arguments are not used.
    let large: u64 =
        std::env::var("CLIO_BENCH_ENTRIES").ok().and_then(|v| v.parse().ok()).unwrap_or(1_000_000);
    let dir = tempfile::tempdir()?;
    let dir = dir.path();

    let raw = raw_fsync_loop(dir, 1000)?;
    let bare = bare_redb_loop(dir, 500, false)?;
    let bare_qr = bare_redb_loop(dir, 500, true)?;
    emit(
        "baselines",
        "1,000 × (pwrite 128 bytes + fdatasync) on a plain file, and 500 bare redb commits of one small insert each (Durability::Immediate), with and without quick repair; no journal",
        json!({"raw_write_fdatasync_per_sec": raw, "bare_redb_commits_per_sec": bare,
               "bare_redb_quick_repair_commits_per_sec": bare_qr}),
    );

    let single = single_appender(dir, 500, true)?;
    emit(
        "single_appender_immediate",
        "one thread appending entries one at a time, each acknowledged after its durable commit (write-ahead log, quick repair on)",
        json!({"entries_per_sec": single, "quick_repair": true,
               "baseline_raw_fdatasync_per_sec": raw, "baseline_bare_redb_per_sec": bare,
               "baseline_bare_redb_quick_repair_per_sec": bare_qr,
               "ratio": round3(single / bare), "ratio_to_bare_quick_repair": round3(single / bare_qr),
               "goal_ratio": 0.8}),
    );
    let single_nqr = single_appender(dir, 500, false)?;
    emit(
        "single_appender_immediate_no_quick_repair",
        "the single appender with quick repair off",
        json!({"entries_per_sec": single_nqr, "quick_repair": false,
               "baseline_bare_redb_per_sec": bare, "ratio": round3(single_nqr / bare), "goal_ratio": 0.8}),
    );

    let (flushes, bytes, rate) = log_per_step(dir, 500, 16 << 20)?;
    let (flushes_small, _, _) = log_per_step(dir, 2000, 1 << 20)?;
    emit(
        "log_per_step",
        "a lone appender's 500 durable appends (one small step entry each, with its identity): the journal's flushes per append (log fdatasyncs, its growth, checkpoints) and the log's bytes per append; then 2,000 appends with a 1 MiB checkpoint size, so that the log starts over many times (the checkpoints' flushes included)",
        json!({"appends": 500, "flushes_per_append": flushes, "log_bytes_per_append": bytes,
               "entries_per_sec": rate, "flushes_per_append_1mib_checkpoints": flushes_small,
               "goal_flushes_per_append": 1.0}),
    );

    let (concurrent, took_ms) = concurrent_appenders(dir, 100, 100)?;
    emit(
        "concurrent_100_appenders_immediate",
        "100 threads appending 100 entries each to one journal, each append acknowledged after its durable commit (commits shared by the writer's batches)",
        json!({"entries_per_sec": concurrent, "entries": 10_000, "elapsed_ms": round3(took_ms),
               "single_appender_per_sec": single, "ratio_to_single": round3(concurrent / single),
               "goal_ratio_to_single": 30, "baseline_bare_redb_per_sec": bare,
               "baseline_raw_fdatasync_per_sec": raw}),
    );

    let (best, first) = read_run(dir, 10_000)?;
    emit(
        "read_run_10000_entries",
        "reading one run's 10,000 entries back with Journal::entries: the first read and the best of six",
        json!({"warm_ms": best, "first_ms": first, "goal_ms": 30}),
    );

    let (page_ms, crashed_open_ms) = read_page_and_crashed_open(dir, 10_000)?;
    emit(
        "read_page_of_10000_entries",
        "the last 100 of one run's 10,000 entries with Journal::entries_page (a page of `runs events` or GET events?after=&limit=), best of six; beside it the whole run's warm read",
        json!({"page_ms": page_ms, "whole_run_warm_ms": best, "goal_ms": 5}),
    );
    emit(
        "read_only_open_after_crash",
        "Journal::open_read_only and an entry count of that journal copied while open (a killed writer's files: 10,001 entries, records in the log), recovered in memory under a shared lock, best of three",
        json!({"open_ms": crashed_open_ms}),
    );

    let path = dir.join("large.redb");
    let built = build_large(&path, large)?;
    let size = std::fs::metadata(&path)?.len();
    let (clean_ms, journal) = time_open(&path)?;
    drop(journal);
    emit(
        "reopen_after_clean_close",
        "Journal::open of a cleanly closed file of the given entries (runs of 10,000), to the open handle",
        json!({"entries": large, "file_bytes": size, "open_ms": clean_ms,
               "build_entries_per_sec": per_sec(large, built)}),
    );

    let acked = crash_child(&path, 300, true)?;
    let (crash_ms, journal) = time_open(&path)?;
    let runs = journal.runs(&clio_journal::RunFilter::default())?;
    let survived = match runs.first() {
        Some(run) if run.flow == "crash" => journal.entry_count(run.id)?,
        _ => 0,
    };
    drop(journal);
    emit(
        "reopen_after_crash",
        "Journal::open of the large file after a child appending from 8 threads was SIGKILLed: redb's repair and the log's recovery, quick repair on",
        json!({"entries": large, "open_ms": crash_ms, "quick_repair": true, "acked_before_kill": acked,
               "entries_of_killed_run": survived, "goal_ms": 50}),
    );

    let acked = crash_child(&path, 300, false)?;
    let (crash_nqr_ms, journal) = time_open(&path)?;
    drop(journal);
    emit(
        "reopen_after_crash_no_quick_repair",
        "the reopen after a SIGKILL with quick repair off (redb rebuilds its allocator state from the trees)",
        json!({"entries": large, "open_ms": crash_nqr_ms, "quick_repair": false, "acked_before_kill": acked}),
    );
    Ok(())
}
