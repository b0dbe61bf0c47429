//! Guards the write-ahead log: a journal whose process died with batches held only in its
//! log reopens with every acknowledged write, exactly as it was written.
//!
//! A crash is simulated by copying the journal file and its `-wal` while the journal is
//! open and idle: the copy holds what a process killed at that moment leaves on disk (redb
//! keeps commits made through the log in memory only). A proptest runs random programs of
//! every kind of write, with a small checkpoint size so that the log starts over many times,
//! and checks the reopened copy against the journal it was copied from.

use std::fs;
use std::path::{Path, PathBuf};

use clio_journal::{
    EntryKind, Journal, JournalConfig, JournalError, NewEntry, NewSession, RunFilter, RunId,
    RunStatus, RunUpdate, SessionId, SessionStatus, SessionUpdate, TaskId, TaskStatus, TaskUpdate,
};
use proptest::prelude::*;
use serde_json::{Value, json};

use crate::support::{TestResult, new_run, new_task};

fn config(checkpoint_bytes: u64) -> JournalConfig {
    JournalConfig { checkpoint_bytes, ..JournalConfig::default() }
}

fn wal_of(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_os_string();
    name.push("-wal");
    PathBuf::from(name)
}

/// Copies the journal at `path` and its log into `dir`, as a crash now would leave them.
fn crash_copy(path: &Path, dir: &Path) -> std::io::Result<PathBuf> {
    fs::create_dir_all(dir)?;
    let copy = dir.join("journal.redb");
    fs::copy(path, &copy)?;
    if wal_of(path).exists() {
        fs::copy(wal_of(path), wal_of(&copy))?;
    }
    Ok(copy)
}

/// Everything a journal holds, as JSON, for comparing two journals.
fn state(journal: &Journal) -> Result<Value, JournalError> {
    let mut runs = Vec::new();
    for run in journal.runs(&RunFilter::default())? {
        let id = run.id;
        let entries = journal.entries(id)?;
        // What the identity index answers for each entry's identity.
        let mut by_identity = Vec::new();
        for identity in entries.iter().filter_map(|e| e.identity.as_deref()) {
            by_identity.push(journal.entry_by_identity(id, identity)?.map(|e| e.seq));
        }
        runs.push(json!({
            "run": run,
            "tasks": journal.tasks(id)?,
            "entries": entries,
            "by_identity": by_identity,
            "count": journal.entry_count(id)?,
        }));
    }
    Ok(json!({ "runs": runs, "sessions": journal.sessions()? }))
}

/// Drops the `updated_at_ms` stamps, which differ between two reconciles of equal states.
fn without_update_times(value: Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.into_iter()
                .filter(|(k, _)| k != "updated_at_ms")
                .map(|(k, v)| (k, without_update_times(v)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.into_iter().map(without_update_times).collect()),
        other => other,
    }
}

/// One write of a random program; indexes pick among what exists (modulo).
#[derive(Debug, Clone)]
enum Op {
    CreateRun,
    Append {
        run: usize,
        n: u8,
    },
    TaskWithEntries {
        run: usize,
    },
    EndedTask {
        run: usize,
    },
    FinishTask {
        task: usize,
    },
    Session,
    Claim {
        session: usize,
    },
    Checkpoint {
        session: usize,
    },
    FinishRun {
        run: usize,
    },
    Prune,
    Flush,
    /// The checkpoint a close makes, ahead of it ([`Journal::checkpoint`]).
    CloseCheckpoint,
    /// Several appends sent together, so that they share a batch.
    Burst {
        run: usize,
        n: u8,
    },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        Just(Op::CreateRun),
        (any::<usize>(), 1u8..4).prop_map(|(run, n)| Op::Append { run, n }),
        any::<usize>().prop_map(|run| Op::TaskWithEntries { run }),
        any::<usize>().prop_map(|run| Op::EndedTask { run }),
        any::<usize>().prop_map(|task| Op::FinishTask { task }),
        Just(Op::Session),
        any::<usize>().prop_map(|session| Op::Claim { session }),
        any::<usize>().prop_map(|session| Op::Checkpoint { session }),
        any::<usize>().prop_map(|run| Op::FinishRun { run }),
        Just(Op::Prune),
        Just(Op::Flush),
        Just(Op::CloseCheckpoint),
        (any::<usize>(), 2u8..12).prop_map(|(run, n)| Op::Burst { run, n }),
    ]
}

/// Runs `op` on `journal`, keeping track of what exists in `runs`, `tasks`, `sessions`.
fn apply(
    journal: &Journal,
    op: &Op,
    runs: &mut Vec<RunId>,
    tasks: &mut Vec<TaskId>,
    sessions: &mut Vec<SessionId>,
    counter: &mut u64,
) -> TestResult {
    *counter += 1;
    let n = *counter;
    let pick = |items: &[RunId], i: usize| items.get(i % items.len().max(1)).copied();
    let payload =
        json!({ "n": n, "text": "é ✓ \"quoted\"", "pad": "x".repeat((n % 7 * 40) as usize) });
    match op {
        Op::CreateRun => runs.push(journal.create_run(new_run("wal", "proc-w"))?),
        Op::Append { run, n: count } => {
            if let Some(run) = pick(runs, *run) {
                let entries = (0..*count)
                    .map(|i| {
                        NewEntry::new(EntryKind::Step, payload.clone())
                            .with_identity(format!("a-{n}-{i}"))
                    })
                    .collect();
                journal.append_batch(run, entries)?;
            }
        }
        Op::TaskWithEntries { run } => {
            if let Some(run) = pick(runs, *run) {
                let (task, _) = journal.create_task_with_entries(
                    run,
                    vec![
                        NewEntry::new(EntryKind::Call, payload.clone())
                            .with_identity(format!("c-{n}")),
                    ],
                    new_task(run, "proc-w"),
                    vec![
                        NewEntry::new(EntryKind::Event, json!({})).with_identity(format!("ok-{n}")),
                    ],
                )?;
                tasks.push(task);
            }
        }
        Op::EndedTask { run } => {
            if let Some(run) = pick(runs, *run) {
                let (rec, _) = journal.record_ended_task(
                    run,
                    vec![
                        NewEntry::new(EntryKind::Call, payload.clone())
                            .with_identity(format!("e-{n}")),
                    ],
                    new_task(run, "proc-w"),
                    vec![],
                    |_| TaskUpdate {
                        status: Some(TaskStatus::Succeeded),
                        result: Some(json!("done")),
                        ..TaskUpdate::default()
                    },
                )?;
                tasks.push(rec.id);
            }
        }
        Op::FinishTask { task } => {
            if !tasks.is_empty() {
                let task = tasks.remove(task % tasks.len());
                // A finished task refuses the update; that is part of the program too.
                let _ = journal.update_task(
                    task,
                    TaskUpdate {
                        status: Some(TaskStatus::Failed),
                        error: Some(format!("failed {n}")),
                        input_tokens: Some(n),
                        ..TaskUpdate::default()
                    },
                );
            }
        }
        Op::Session => {
            let id = SessionId(format!("s-{n}"));
            journal.create_session(NewSession {
                id: id.clone(),
                leader: sessions.first().cloned(),
                parent: None,
                team: Some("team".into()),
                managed: true,
                enabled: Some(true),
                status: SessionStatus::Running,
                iteration_budget: Some(3),
                router_allowlist: None,
                owner: "proc-w".into(),
                run: None,
            })?;
            sessions.push(id);
        }
        Op::Claim { session } => {
            if !sessions.is_empty() {
                journal.claim_iteration(&sessions[session % sessions.len()])?;
            }
        }
        Op::Checkpoint { session } => {
            if !sessions.is_empty() {
                let id = &sessions[session % sessions.len()];
                let status =
                    if n.is_multiple_of(2) { SessionStatus::Done } else { SessionStatus::Idle };
                journal.update_session(
                    id,
                    SessionUpdate {
                        status: Some(status),
                        checkpoint: Some(payload.clone()),
                        ..SessionUpdate::default()
                    },
                )?;
            }
        }
        Op::FinishRun { run } => {
            if let Some(run) = pick(runs, *run) {
                journal.update_run(
                    run,
                    RunUpdate {
                        status: Some(RunStatus::Succeeded),
                        answer: Some(payload.clone()),
                        ..RunUpdate::default()
                    },
                )?;
            }
        }
        Op::Prune => {
            let pruned = journal.prune(u64::MAX)?;
            if pruned.runs > 0 {
                let left: Vec<RunId> =
                    journal.runs(&RunFilter::default())?.iter().map(|r| r.id).collect();
                runs.retain(|r| left.contains(r));
                tasks.retain(|t| journal.task(*t).ok().flatten().is_some());
            }
        }
        Op::Flush => journal.flush()?,
        Op::CloseCheckpoint => journal.checkpoint().wait()?,
        Op::Burst { run, n: count } => {
            if let Some(run) = pick(runs, *run) {
                let pending: Vec<_> = (0..*count)
                    .map(|i| {
                        journal.nonblocking().append(
                            run,
                            NewEntry::new(EntryKind::Step, json!({ "burst": n, "i": i }))
                                .with_identity(format!("b-{n}-{i}")),
                        )
                    })
                    .collect();
                for p in pending {
                    p.wait()?;
                }
            }
        }
    }
    Ok(())
}

/// Runs `program`, crash-copying the journal after each op whose index is in `crash_at`;
/// checks every copy reopens to the state the journal had when it was copied, twice over
/// (the second open finds a log with nothing left to apply).
fn check_program(program: &[Op], crash_at: &[usize], checkpoint_bytes: u64) -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("journal.redb");
    let journal = Journal::open(&path, config(checkpoint_bytes))?;
    let (mut runs, mut tasks, mut sessions, mut counter) = (Vec::new(), Vec::new(), Vec::new(), 0);
    let mut copies = Vec::new();
    for (idx, op) in program.iter().enumerate() {
        apply(&journal, op, &mut runs, &mut tasks, &mut sessions, &mut counter)?;
        if crash_at.contains(&idx) {
            let crashed = crash_copy(&path, &dir.path().join(format!("crash-{idx}")))?;
            // The same journal checkpointed: its redb file alone holds everything.
            journal.flush()?;
            let clean = crash_copy(&path, &dir.path().join(format!("clean-{idx}")))?;
            copies.push((idx, crashed, clean));
        }
    }
    drop(journal);
    for (idx, copy, clean) in copies {
        let expected = {
            let journal = Journal::open(&clean, config(checkpoint_bytes))?;
            let before = state(&journal)?;
            // Reconciling reads the live-task and live-session indexes, which `state` does
            // not show: it must change the same records in both.
            let reconciled = journal.reconcile::<&str>(&[])?;
            json!({ "before": before, "reconciled": format!("{reconciled:?}"), "after": without_update_times(state(&journal)?) })
        };
        for open in 0..2 {
            let reopened = Journal::open(&copy, config(checkpoint_bytes))?;
            // The first open finds the state as copied; it then reconciles, and the second
            // open finds the reconciled state.
            let (found, wanted) = if open == 0 {
                (state(&reopened)?, &expected["before"])
            } else {
                (without_update_times(state(&reopened)?), &expected["after"])
            };
            if &found != wanted {
                return Err(format!(
                    "crash after op {idx} ({:?}), open {open}: the journal differs\n\
                     expected {wanted:#}\nfound {found:#}",
                    program[idx]
                )
                .into());
            }
            if open == 0 {
                let reconciled = reopened.reconcile::<&str>(&[])?;
                let wanted = expected["reconciled"].as_str().unwrap_or_default();
                assert_eq!(
                    format!("{reconciled:?}"),
                    wanted,
                    "crash after op {idx}: reconcile differs"
                );
                assert_eq!(
                    without_update_times(state(&reopened)?),
                    expected["after"],
                    "crash after op {idx}: reconciled state differs"
                );
            }
            reopened.close()?;
        }
        // The recovered journal takes new writes.
        let reopened = Journal::open(&copy, config(checkpoint_bytes))?;
        let run = reopened.create_run(new_run("after", "proc-x"))?;
        reopened.append(run, NewEntry::new(EntryKind::Step, json!(1)).with_identity("x"))?;
        assert_eq!(reopened.entry_count(run)?, 1);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// A crash at any point between writes loses nothing acknowledged and adds nothing:
    /// the reopened journal is the journal as it was, whatever the log held and however
    /// often it had started over.
    #[test]
    fn a_crash_copy_reopens_to_exactly_the_acknowledged_state(
        program in proptest::collection::vec(op(), 1..40),
        crash_at in proptest::collection::vec(any::<prop::sample::Index>(), 1..4),
        small in any::<bool>(),
    ) {
        let mut program = program;
        program.insert(0, Op::CreateRun);
        let crash_at: Vec<usize> = crash_at.iter().map(|i| i.index(program.len())).collect();
        let checkpoint_bytes = if small { 1_024 } else { 16 << 20 };
        check_program(&program, &crash_at, checkpoint_bytes).map_err(|e| TestCaseError::fail(e.to_string()))?;
    }
}

/// Opens a journal at `path`, creates a run and appends `n` entries through the log; returns
/// the still-open journal and the run.
fn journal_with_entries(path: &Path, n: u64) -> Result<(Journal, RunId), JournalError> {
    let journal = Journal::open(path, JournalConfig::default())?;
    let run = journal.create_run(new_run("wal", "proc-w"))?;
    for i in 0..n {
        journal
            .append(run, NewEntry::new(EntryKind::Step, json!(i)).with_identity(format!("s{i}")))?;
    }
    Ok((journal, run))
}

/// Returns where the records of the log's generation end and the lsn of the last one (read
/// from their headers alone): a 32-byte generation header, then records of a 24-byte header
/// and their payload.
fn records_end(log: &[u8]) -> (usize, u64) {
    crate::support::log_batches(log).last().map_or((0, 0), |b| (b.end(), b.lsn))
}

#[test]
fn a_torn_record_at_the_end_of_the_log_is_ignored() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("journal.redb");
    let (journal, run) = journal_with_entries(&path, 5)?;
    let copy = crash_copy(&path, &dir.path().join("crash"))?;
    drop(journal);
    // A batch whose write was cut short, right after the last whole one: its record's
    // header and half its payload, and no second copy.
    let mut wal = fs::read(wal_of(&copy))?;
    let (whole, last) = records_end(&wal);
    // The next record's header (64-byte payload, the next lsn, some checksum and chain),
    // then 10 bytes.
    let mut torn = b"CLW3\x40\x00\x00\x00".to_vec();
    torn.extend_from_slice(&(last + 1).to_le_bytes());
    torn.extend_from_slice(b"\x01\x02\x03\x04\x05\x06\x07\x08half a pay");
    let end = (whole + torn.len()).min(wal.len());
    wal.splice(whole..end, torn);
    fs::write(wal_of(&copy), &wal)?;
    let reopened = Journal::open(&copy, JournalConfig::default())?;
    assert_eq!(reopened.entry_count(run)?, 5);
    assert!(whole > 0 && last == 6, "the run and its five appends went through the log");
    Ok(())
}

#[test]
fn a_log_that_does_not_follow_its_file_is_refused_naming_the_log() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("journal.redb");
    let (journal, _) = journal_with_entries(&path, 3)?;
    let early = crash_copy(&path, &dir.path().join("early"))?;
    // A checkpoint, then more records: the log now starts past what `early` holds.
    journal.flush()?;
    journal.create_run(new_run("later", "proc-w"))?;
    let late = crash_copy(&path, &dir.path().join("late"))?;
    drop(journal);
    let own_log = fs::read(wal_of(&early))?;
    fs::copy(wal_of(&late), wal_of(&early))?;
    let err = Journal::open(&early, JournalConfig::default()).err().ok_or("opened")?;
    match &err {
        JournalError::Corrupted { path, detail } => {
            assert_eq!(path, &wal_of(&early), "{err}");
            assert!(detail.contains("generation"), "{detail}");
        }
        other => return Err(format!("expected Corrupted, got {other:?}").into()),
    }
    // Nothing was lost: with its own log back, the journal opens with every entry.
    fs::write(wal_of(&early), own_log)?;
    let reopened = Journal::open(&early, JournalConfig::default())?;
    assert_eq!(reopened.entry_count(RunId(1))?, 3);
    Ok(())
}

#[test]
fn a_journal_opened_without_the_log_still_applies_one_a_crash_left() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("journal.redb");
    let (journal, run) = journal_with_entries(&path, 4)?;
    let copy = crash_copy(&path, &dir.path().join("crash"))?;
    drop(journal);
    let config = JournalConfig { write_ahead_log: false, ..JournalConfig::default() };
    let reopened = Journal::open(&copy, config.clone())?;
    assert_eq!(reopened.entry_count(run)?, 4);
    // Its own writes are durable commits to the redb file: a crash copy holds them with no
    // log at all.
    reopened.append(run, NewEntry::new(EntryKind::Step, json!(4)).with_identity("s4"))?;
    let again = crash_copy(&copy, &dir.path().join("again"))?;
    fs::remove_file(wal_of(&again))?;
    drop(reopened);
    assert_eq!(Journal::open(&again, config)?.entry_count(run)?, 5);
    Ok(())
}

#[test]
fn a_log_left_by_another_journal_at_the_same_path_is_never_applied() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("journal.redb");
    let (journal, _) = journal_with_entries(&path, 3)?;
    // Its log as a crash left it (nothing checkpointed), and as a clean close left it.
    let crashed = fs::read(wal_of(&path))?;
    journal.close()?;
    let closed = fs::read(wal_of(&path))?;
    // The journal file is deleted and the log a crash left is kept: that log may hold the
    // only copy of acknowledged work, so no new journal is made over it, and nothing changes.
    fs::remove_file(&path)?;
    fs::write(wal_of(&path), &crashed)?;
    let err = Journal::open(&path, JournalConfig::default()).err().ok_or("opened")?;
    assert!(matches!(err, JournalError::Corrupted { .. }), "{err:?}");
    assert!(err.to_string().contains("is missing"), "{err}");
    assert!(!path.exists(), "no journal was created");
    assert_eq!(fs::read(wal_of(&path))?, crashed, "the log is unchanged");
    // The log a clean close left holds nothing the file lacked: a new journal is made, and
    // the old records in it are never applied.
    fs::write(wal_of(&path), &closed)?;
    let fresh = Journal::open(&path, JournalConfig::default())?;
    assert!(fresh.runs(&RunFilter::default())?.is_empty(), "old runs came back");
    let run = fresh.create_run(new_run("new", "proc-n"))?;
    assert_eq!(run, RunId(1));
    fresh.append(run, NewEntry::new(EntryKind::Step, json!("new")).with_identity("n"))?;
    let copy = crash_copy(&path, &dir.path().join("copy"))?;
    drop(fresh);
    let reopened = Journal::open(&copy, JournalConfig::default())?;
    assert_eq!(reopened.entries(run)?.len(), 1);
    assert_eq!(reopened.runs(&RunFilter::default())?.len(), 1);
    Ok(())
}

#[test]
fn a_clean_close_leaves_a_log_that_reads_as_empty() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("journal.redb");
    let (journal, run) = journal_with_entries(&path, 3)?;
    assert_eq!(records_end(&fs::read(wal_of(&path))?).1, 4, "the writes went through the log");
    journal.close()?;
    // The checkpoint at close holds every record, so the log starts with no record.
    assert_eq!(records_end(&fs::read(wal_of(&path))?), (0, 0));
    let reopened = Journal::open(&path, JournalConfig::default())?;
    assert_eq!(reopened.entry_count(run)?, 3);
    Ok(())
}

/// The checkpoint a close makes, taken ahead of it: the file alone then holds every record
/// (where before it only the log held them), the writes after it go through the log again
/// once the first has made it live, and the close that follows leaves a log that reads as
/// empty.
#[test]
fn a_close_checkpoint_ahead_leaves_every_record_in_the_file_and_takes_later_writes() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("journal.redb");
    let (journal, run) = journal_with_entries(&path, 3)?;
    let file_alone = |name: &str| -> Result<u64, Box<dyn std::error::Error + Send + Sync>> {
        let copy = dir.path().join(name).join("journal.redb");
        fs::create_dir_all(dir.path().join(name))?;
        fs::copy(&path, &copy)?;
        let alone = Journal::open_read_only(&copy, JournalConfig::default())?;
        Ok(alone.entry_count(run)?)
    };
    // Before it, the file lacks what went through the log (or is refused without it).
    assert!(
        file_alone("before").map_or(true, |count| count < 3),
        "the writes went through the log"
    );
    journal.checkpoint().wait()?;
    assert_eq!(file_alone("after")?, 3, "the checkpoint wrote every record into the file");
    // The first write after it makes the log live again with a checkpoint; the next goes
    // through the log, and a crash then loses neither.
    for i in 3..5 {
        journal
            .append(run, NewEntry::new(EntryKind::Step, json!(i)).with_identity(format!("s{i}")))?;
    }
    assert!(records_end(&fs::read(wal_of(&path))?).1 > 4, "a later write goes through the log");
    let crashed = crash_copy(&path, &dir.path().join("crashed"))?;
    assert_eq!(Journal::open(&crashed, JournalConfig::default())?.entry_count(run)?, 5);
    journal.close()?;
    assert_eq!(records_end(&fs::read(wal_of(&path))?), (0, 0));
    assert_eq!(Journal::open(&path, JournalConfig::default())?.entry_count(run)?, 5);
    Ok(())
}

/// Opens that end in a crash before anything is written leave the log as it was: each
/// open after them reads it (the `many_kills_in_every_scenario` failure of the slow tier,
/// where two processes in a row were killed right after opening, and the third was refused
/// with "the log is of generation 1, but the journal expects generation 3").
#[test]
fn opens_killed_before_their_first_write_leave_a_journal_that_opens() -> TestResult {
    let dir = tempfile::tempdir()?;
    let (journal, run) = journal_with_entries(&dir.path().join("journal.redb"), 3)?;
    let mut copy = crash_copy(journal.path(), &dir.path().join("crash-0"))?;
    drop(journal);
    for crash in 1..=3 {
        // Opened (the log's records applied, a new generation started) and killed idle.
        let reopened = Journal::open(&copy, JournalConfig::default())?;
        assert_eq!(reopened.entries(run)?.len(), 3, "after crash {crash}");
        copy = crash_copy(&copy, &dir.path().join(format!("crash-{crash}")))?;
        drop(reopened);
    }
    let last = Journal::open(&copy, JournalConfig::default())?;
    assert_eq!(last.entries(run)?.len(), 3);
    // And it writes on: the next generation's first record, read back after a crash.
    last.append(run, NewEntry::new(EntryKind::Step, json!({"n": 4})))?;
    let copy = crash_copy(&copy, &dir.path().join("crash-last"))?;
    drop(last);
    assert_eq!(Journal::open(&copy, JournalConfig::default())?.entries(run)?.len(), 4);
    Ok(())
}

/// A batch that goes through the log is answered once its record is on disk, before redb
/// holds it; a caller that reads right after its answer must still read its own write, and
/// so must a reader woken by the commit's notice.
#[test]
fn a_write_answered_from_the_log_is_read_back_at_once_by_its_caller() -> TestResult {
    let dir = tempfile::tempdir()?;
    let journal = Journal::open(dir.path().join("journal.redb"), JournalConfig::default())?;
    let runs: Vec<RunId> = (0..3)
        .map(|i| journal.create_run(crate::support::new_run(&format!("flow-{i}"), "proc-a")))
        .collect::<Result<_, _>>()?;
    std::thread::scope(|scope| -> TestResult {
        let workers: Vec<_> = runs
            .iter()
            .map(|&run| {
                let journal = journal.clone();
                scope.spawn(move || -> Result<(), String> {
                    for n in 0..150 {
                        let identity = format!("step-{n}");
                        let entry = NewEntry::new(EntryKind::Step, json!({"n": n}))
                            .with_identity(&identity);
                        let seq = journal.append(run, entry).map_err(|e| e.to_string())?;
                        let read = journal
                            .entry_by_identity(run, &identity)
                            .map_err(|e| e.to_string())?
                            .map(|e| e.seq);
                        if read != Some(seq) {
                            return Err(format!(
                                "run {run:?} step {n}: read {read:?} after seq {seq}"
                            ));
                        }
                        let count = journal.entry_count(run).map_err(|e| e.to_string())?;
                        if count != n + 1 {
                            return Err(format!("run {run:?} step {n}: {count} entries"));
                        }
                    }
                    Ok(())
                })
            })
            .collect();
        for worker in workers {
            worker.join().map_err(|_| "a worker panicked")??;
        }
        Ok(())
    })?;
    Ok(())
}

/// The writer begins its next transaction while it waits for a write: a journal opened,
/// read and closed must still commit and flush nothing, and leave its log as it was (the
/// file's header is the storage engine's own: it marks the file open and closed).
#[test]
fn a_journal_opened_and_only_read_commits_nothing_and_leaves_its_log_as_it_was() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("journal.redb");
    let (journal, run) = journal_with_entries(&path, 5)?;
    journal.close()?;
    let (file_len, log) = (fs::metadata(&path)?.len(), fs::read(wal_of(&path))?);
    let reopened = Journal::open(&path, JournalConfig::default())?;
    // What the open itself flushed (the storage engine marks the file open).
    let opened = reopened.flushes();
    assert_eq!(reopened.entries(run)?.len(), 5);
    // Long enough for the writer to have begun its transaction and opened its tables.
    std::thread::sleep(std::time::Duration::from_millis(50));
    assert_eq!(reopened.entry_count(run)?, 5);
    assert_eq!((reopened.commits(), reopened.flushes()), (0, opened));
    reopened.close()?;
    assert_eq!(fs::metadata(&path)?.len(), file_len, "the journal file grew");
    assert!(fs::read(wal_of(&path))? == log, "the write-ahead log changed");
    assert_eq!(Journal::open(&path, JournalConfig::default())?.entry_count(run)?, 5);
    Ok(())
}

/// A write that comes after the writer waited is stamped with the time it is written, not
/// the time its transaction was begun.
#[test]
fn a_write_after_an_idle_writer_is_stamped_when_it_is_written() -> TestResult {
    let dir = tempfile::tempdir()?;
    let journal = Journal::open(dir.path().join("journal.redb"), JournalConfig::default())?;
    let first = journal.create_run(new_run("first", "proc-t"))?;
    let first = journal.run(first)?.ok_or("the first run is gone")?;
    std::thread::sleep(std::time::Duration::from_millis(300));
    let since_epoch = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH)?;
    let before_ms = u64::try_from(since_epoch.as_millis())?;
    let second = journal.create_run(new_run("second", "proc-t"))?;
    let second = journal.run(second)?.ok_or("the second run is gone")?;
    assert!(
        second.started_at_ms >= before_ms,
        "stamped {} before the write at {before_ms}",
        second.started_at_ms
    );
    assert!(second.started_at_ms >= first.started_at_ms + 250);
    std::thread::sleep(std::time::Duration::from_millis(300));
    let update = RunUpdate { status: Some(RunStatus::Succeeded), ..RunUpdate::default() };
    let updated = journal.update_run(second.id, update)?;
    assert!(updated.updated_at_ms >= second.started_at_ms + 250, "{updated:?}");
    Ok(())
}
