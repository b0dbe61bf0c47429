//! Guards against losing or tearing acknowledged appends when the process is killed.
//!
//! A child process (this test binary re-run on `child_appender`) appends from several threads
//! and prints each acknowledged sequence number; the parent SIGKILLs it after a seeded
//! random number of acknowledgements, reopens the file and checks that it holds a dense prefix
//! of entries that includes every acknowledged one and everything earlier rounds saw.
//! The default tier kills 5 times; the slow tier (`tests/slow`) reuses this module for 50.

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};

use clio_journal::{EntryKind, Journal, JournalConfig, NewEntry, RunId};
use serde_json::json;

use crate::support::{TestResult, new_run};

const CHILD_ENV: &str = "CLIO_JOURNAL_CRASH_CHILD";
const CHILD_THREADS: u64 = 4;

/// A small deterministic generator (xorshift64*), so the kill points repeat with the seed.
pub(crate) struct Rng(u64);

impl Rng {
    pub(crate) fn new(seed: u64) -> Self {
        Self(seed.max(1))
    }

    pub(crate) fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) % n.max(1)
    }
}

/// Runs `kills` rounds of append-and-SIGKILL against one journal file.
pub(crate) fn kill_rounds(kills: u64, seed: u64) -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("journal.redb");
    let run = {
        let journal = Journal::open(&path, JournalConfig::default())?;
        let run = journal.create_run(new_run("crash", "parent"))?;
        journal.close()?;
        run
    };
    let mut rng = Rng::new(seed);
    let mut survived = 0u64;
    for round in 0..kills {
        let wanted = 1 + rng.below(120);
        let acked = run_child_until(&path, round, wanted)?;
        let journal = Journal::open(&path, JournalConfig::default())?;
        let entries = journal.entries(run)?;
        let count = entries.len() as u64;
        for (idx, entry) in entries.iter().enumerate() {
            assert_eq!(entry.seq, idx as u64, "round {round}: sequence numbers are not dense");
            assert_eq!(entry.kind, EntryKind::Step);
            let identity = entry.identity.as_deref().ok_or("an entry lost its identity")?;
            let found = journal.entry_by_identity(run, identity)?.ok_or("identity not indexed")?;
            assert_eq!(found.seq, entry.seq);
        }
        assert!(
            count >= survived,
            "round {round}: {count} entries, fewer than the {survived} seen before"
        );
        if let Some(max) = acked.last() {
            assert!(
                *max < count,
                "round {round}: acknowledged seq {max} missing ({count} entries)"
            );
        }
        assert_eq!(journal.entry_count(run)?, count);
        survived = count;
        journal.close()?;
    }
    assert!(survived > 0, "no append survived any round");
    Ok(())
}

/// Starts the child on `path`, reads `wanted` acknowledgements, kills it and returns the
/// acknowledged sequence numbers, sorted.
fn run_child_until(
    path: &Path,
    round: u64,
    wanted: u64,
) -> Result<Vec<u64>, Box<dyn std::error::Error + Send + Sync>> {
    let exe = std::env::current_exe()?;
    let mut child = Command::new(exe)
        .args(["crash::child_appender", "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, path)
        .env("CLIO_JOURNAL_CRASH_ROUND", round.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()?;
    let stdout = child.stdout.take().ok_or("no child stdout")?;
    let mut acked = BTreeSet::new();
    for line in BufReader::new(stdout).lines() {
        let line = line?;
        if let Some(seq) = line.strip_prefix("ack ") {
            acked.insert(seq.trim().parse::<u64>()?);
            if acked.len() as u64 >= wanted {
                break;
            }
        }
    }
    child.kill()?;
    child.wait()?;
    Ok(acked.into_iter().collect())
}

#[test]
fn sigkill_during_appends_leaves_a_prefix_with_every_acknowledged_entry() -> TestResult {
    kill_rounds(5, 0x5eed_0001)
}

/// The child side: only acts when the parent set `CLIO_JOURNAL_CRASH_CHILD`.
#[test]
fn child_appender() -> TestResult {
    let Some(path) = std::env::var_os(CHILD_ENV) else { return Ok(()) };
    let round = std::env::var("CLIO_JOURNAL_CRASH_ROUND").unwrap_or_default();
    let journal = Journal::open(&path, JournalConfig::default())?;
    let run = RunId(1);
    let threads: Vec<_> = (0..CHILD_THREADS)
        .map(|t| {
            let journal = journal.clone();
            let round = round.clone();
            std::thread::spawn(move || -> TestResult {
                for i in 0u64.. {
                    let entry = NewEntry::new(
                        EntryKind::Step,
                        json!({"thread": t, "i": i, "pad": "x".repeat(64)}),
                    )
                    .with_identity(format!("r{round}-t{t}-{i}"));
                    let seq = journal.append(run, entry)?;
                    let mut out = std::io::stdout().lock();
                    writeln!(out, "ack {seq}")?;
                    out.flush()?;
                }
                Ok(())
            })
        })
        .collect();
    for handle in threads {
        handle.join().map_err(|_| "appender panicked")??;
    }
    Ok(())
}
