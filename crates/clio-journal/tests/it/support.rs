//! Helpers shared by the integration tests: a test result type, record builders, a small
//! journal file with markers in its records, and damaging a file where a marker is.

use std::fs;
use std::path::{Path, PathBuf};

use clio_journal::{
    EntryKind, Journal, JournalConfig, JournalError, NewEntry, NewRun, NewSession, NewTask, RunId,
    SessionId, SessionStatus, TaskKind, TaskStatus, TaskUpdate,
};
use serde_json::json;

/// The result type of tests, so they can use `?`.
pub(crate) type TestResult = Result<(), Box<dyn std::error::Error + Send + Sync>>;

/// Returns a run to create, of flow `flow`, owned by `owner`.
pub(crate) fn new_run(flow: &str, owner: &str) -> NewRun {
    NewRun {
        flow: flow.to_owned(),
        input: json!({"task": "count"}),
        input_digest: "sha256:00".to_owned(),
        fingerprint: "flow@1+plugins:none".to_owned(),
        owner: owner.to_owned(),
        launch: None,
    }
}

/// Returns a running task of `run` to create, owned by `owner`.
pub(crate) fn new_task(run: RunId, owner: &str) -> NewTask {
    NewTask {
        run,
        parent: None,
        kind: TaskKind::Tool,
        target: "echo".to_owned(),
        label: "echo".to_owned(),
        status: TaskStatus::Running,
        model: None,
        owner: owner.to_owned(),
        call: None,
    }
}

/// Returns a step entry numbered `n` with identity `step-{n}`.
pub(crate) fn step(n: u64) -> NewEntry {
    NewEntry::new(EntryKind::Step, json!({"n": n})).with_identity(format!("step-{n}"))
}

/// Opens a journal in memory with one run.
pub(crate) fn journal_with_run() -> Result<(Journal, RunId), clio_journal::JournalError> {
    let journal = Journal::open_in_memory()?;
    let run = journal.create_run(new_run("count", "proc-a"))?;
    Ok((journal, run))
}

/// Writes, closes and returns a journal in `dir` holding two runs, with tasks, entries whose
/// payloads carry unique markers, and sessions.
pub(crate) fn write_journal(dir: &Path) -> Result<PathBuf, JournalError> {
    let path = dir.join("journal.redb");
    let journal = Journal::open(&path, JournalConfig::default())?;
    let run = journal.create_run(new_run("flow-marker-runrec", "proc-a"))?;
    let task = journal.create_task(clio_journal::NewTask {
        target: "target-marker-task".into(),
        ..new_task(run, "proc-a")
    })?;
    journal.update_task(
        task,
        TaskUpdate { status: Some(TaskStatus::Succeeded), ..TaskUpdate::default() },
    )?;
    for n in 0..6u64 {
        let entry =
            NewEntry::new(EntryKind::Step, json!({"n": n, "word": format!("payload-marker-{n}")}))
                .with_identity(format!("site-{n}"));
        journal.append(run, if n == 2 { entry.with_task(task) } else { entry })?;
    }
    let other = journal.create_run(new_run("second", "proc-b"))?;
    journal.append_batch(
        other,
        (0..3u64)
            .map(|n| {
                NewEntry::new(EntryKind::Event, json!({"m": n})).with_identity(format!("ev-{n}"))
            })
            .collect(),
    )?;
    journal.create_task(new_task(other, "proc-b"))?;
    for (id, status) in [("s-1", SessionStatus::Done), ("s-2", SessionStatus::Running)] {
        journal.create_session(NewSession {
            id: SessionId(id.into()),
            leader: None,
            parent: None,
            team: Some(format!("team-marker-{id}")),
            managed: false,
            enabled: None,
            status,
            iteration_budget: Some(5),
            router_allowlist: None,
            owner: "proc-a".into(),
            run: None,
        })?;
    }
    journal.close()?;
    Ok(path)
}

/// Flips one bit in the middle of every copy of `needle` in the file at `path` (copy-on-write
/// leaves stale copies in free pages; the live one is among them). Returns how many.
pub(crate) fn flip_every(path: &Path, needle: &str) -> std::io::Result<usize> {
    let mut bytes = fs::read(path)?;
    let needle = needle.as_bytes();
    let mut found = 0;
    let mut at = 0;
    while let Some(pos) = bytes[at..].windows(needle.len()).position(|w| w == needle) {
        let start = at + pos;
        bytes[start + needle.len() / 2] ^= 0x04;
        found += 1;
        at = start + needle.len();
    }
    fs::write(path, &bytes)?;
    Ok(found)
}

/// One batch of a paged write-ahead log (`docs/journal-format.md`), as its first copy says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LogBatch {
    /// Where its first copy starts (0 for the generation's first, which holds the header).
    pub(crate) at: usize,
    /// Where its record starts in the first copy (past the header, for the first batch).
    pub(crate) record: usize,
    /// The record's length: its 24-byte header and its payload.
    pub(crate) len: usize,
    /// Where its second copy starts: the first's length rounded up to whole 4 KiB pages.
    pub(crate) second: usize,
    /// Its lsn.
    pub(crate) lsn: u64,
}

impl LogBatch {
    /// Where the next batch starts.
    pub(crate) fn end(&self) -> usize {
        self.second + (self.second - self.at)
    }
}

/// The batches of the paged log `log` holds, in order, read from their first copies (their
/// headers alone: no checksum is verified).
pub(crate) fn log_batches(log: &[u8]) -> Vec<LogBatch> {
    let mut out = Vec::new();
    if log.get(..4) != Some(b"CLWP".as_slice()) {
        return out;
    }
    let mut at = 0;
    loop {
        let record = if at == 0 { 32 } else { at };
        if log.get(record..record + 4) != Some(b"CLW3".as_slice()) {
            return out;
        }
        let size = u32::from_le_bytes([
            log[record + 4],
            log[record + 5],
            log[record + 6],
            log[record + 7],
        ]);
        let mut number = [0u8; 8];
        number.copy_from_slice(&log[record + 8..record + 16]);
        let len = 24 + size as usize;
        let span = (record - at + len).next_multiple_of(4096);
        let batch =
            LogBatch { at, record, len, second: at + span, lsn: u64::from_le_bytes(number) };
        // A leftover of an earlier generation past the last batch: not this one's.
        if out.last().is_some_and(|last: &LogBatch| last.lsn + 1 != batch.lsn) {
            return out;
        }
        out.push(batch);
        at = batch.end();
    }
}
