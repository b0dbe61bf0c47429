//! `Journal::check` and `Journal::salvage` on whole and damaged journals: the check reads
//! without writing and names each problem's table and key; a salvage copies exactly the runs
//! that read whole, keeps their ids, rebuilds the indexes and reports what it left.

use std::fs;
use std::path::Path;

use clio_journal::{
    Journal, JournalConfig, JournalError, NewEntry, Problem, RunFilter, RunId, SessionId,
    StorageCheck, TaskId,
};
use redb::TableDefinition;
use serde_json::json;

use crate::support::{TestResult, flip_every, new_run, write_journal};

fn has_problem(problems: &[Problem], table: &str, key: &str, says: &str) -> bool {
    problems
        .iter()
        .any(|p| p.table == table && p.key.as_deref() == Some(key) && p.detail.contains(says))
}

/// Changes the file at `path` through redb itself: what damage confined to one index (a
/// lost or a wrong row) amounts to.
fn edit(
    path: &Path,
    f: impl FnOnce(&redb::WriteTransaction) -> Result<(), redb::Error>,
) -> TestResult {
    let db = redb::Database::create(path)?;
    let txn = db.begin_write()?;
    f(&txn)?;
    txn.commit()?;
    Ok(())
}

#[test]
fn a_whole_journal_checks_clean_and_is_not_written_to() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = write_journal(dir.path())?;
    let before = fs::read(&path)?;
    let report = Journal::check(&path)?;
    assert!(report.is_whole(), "{:?}", report.problems);
    assert_eq!(report.storage, StorageCheck::Passed);
    assert_eq!(report.format_version, Some(clio_journal::FORMAT_VERSION));
    assert!(report.checksummed);
    let counts = report.counts;
    assert_eq!((counts.runs, counts.entries, counts.tasks, counts.sessions), (2, 9, 2, 2));
    assert!(report.notes.is_empty(), "{:?}", report.notes);
    assert_eq!(fs::read(&path)?, before, "the check wrote to the journal");
    Ok(())
}

#[test]
fn check_names_the_table_and_key_of_each_damaged_record() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = write_journal(dir.path())?;
    for needle in ["payload-marker-3", "team-marker-s-2", "target-marker-task"] {
        assert!(flip_every(&path, needle)? >= 1, "{needle}");
    }
    let before = fs::read(&path)?;
    let report = Journal::check(&path)?;
    assert!(!report.is_whole());
    let problems = &report.problems;
    assert!(has_problem(problems, "clio_entries", "run 1, seq 3", "checksum"), "{problems:#?}");
    assert!(has_problem(problems, "clio_sessions", "session \"s-2\"", "checksum"), "{problems:#?}");
    assert!(has_problem(problems, "clio_tasks", "task 1", "checksum"), "{problems:#?}");
    // redb's own check sees the changed pages too (its page checksums, which reads skip).
    assert!(matches!(report.storage, StorageCheck::Failed { .. }), "{:?}", report.storage);
    assert!(problems.iter().any(|p| p.table == "file" && p.detail.contains("integrity check")));
    // Nothing else: the indexes of the damaged records are not blamed for them.
    assert_eq!(problems.len(), 4, "{problems:#?}");
    assert_eq!(fs::read(&path)?, before, "the check wrote to the journal");
    Ok(())
}

#[test]
fn check_compares_every_index_with_the_records() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = write_journal(dir.path())?;
    edit(&path, |txn| {
        let identities: TableDefinition<(u64, &str), u64> = TableDefinition::new("clio_identities");
        let mut index = txn.open_table(identities)?;
        index.remove((1, "site-2"))?;
        index.insert((2, "ev-1"), 2)?;
        let live: TableDefinition<u64, ()> = TableDefinition::new("clio_live_tasks");
        txn.open_table(live)?.insert(1, ())?;
        let run_tasks: TableDefinition<(u64, u64), ()> = TableDefinition::new("clio_run_tasks");
        txn.open_table(run_tasks)?.remove((2, 2))?;
        let heads: TableDefinition<u64, u64> = TableDefinition::new("clio_run_heads");
        txn.open_table(heads)?.insert(2, 5)?;
        let meta: TableDefinition<&str, u64> = TableDefinition::new("clio_meta");
        txn.open_table(meta)?.insert("next_task", 2)?;
        Ok(())
    })?;
    let report = Journal::check(&path)?;
    let p = &report.problems;
    assert!(has_problem(p, "clio_identities", "run 1, \"site-2\"", "missing: entry 2"), "{p:#?}");
    assert!(has_problem(p, "clio_identities", "run 2, \"ev-1\"", "entry 1 holds"), "{p:#?}");
    assert!(has_problem(p, "clio_live_tasks", "task 1", "not active"), "{p:#?}");
    assert!(has_problem(p, "clio_run_tasks", "run 2, task 2", "missing"), "{p:#?}");
    assert!(has_problem(p, "clio_entries", "run 2", "entries 3 to 4 are missing"), "{p:#?}");
    assert!(has_problem(p, "clio_meta", "next_task", "id 2 is in use"), "{p:#?}");
    assert_eq!(p.len(), 6, "{p:#?}");
    Ok(())
}

#[test]
fn check_refuses_what_it_cannot_check() -> TestResult {
    let dir = tempfile::tempdir()?;
    let missing = dir.path().join("missing.redb");
    assert!(matches!(Journal::check(&missing), Err(JournalError::Io { .. })));
    let text = dir.path().join("notes.txt");
    fs::write(&text, "not a journal")?;
    assert!(matches!(Journal::check(&text), Err(JournalError::NotAJournal { .. })));
    let path = write_journal(dir.path())?;
    let journal = Journal::open(&path, JournalConfig::default())?;
    let err = Journal::check(&path).err().ok_or("checked an open journal")?;
    assert!(matches!(err, JournalError::AlreadyOpen { .. }), "{err:?}");
    drop(journal);
    Ok(())
}

#[test]
fn check_reports_a_file_whose_header_is_damaged() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = write_journal(dir.path())?;
    let mut bytes = fs::read(&path)?;
    for b in &mut bytes[16..512] {
        *b ^= 0x5a;
    }
    fs::write(&path, &bytes)?;
    let report = Journal::check(&path)?;
    assert!(!report.is_whole());
    assert!(report.problems.iter().all(|p| p.table == "file"), "{:#?}", report.problems);
    assert!(matches!(report.storage, StorageCheck::Failed { .. }), "{:?}", report.storage);
    Ok(())
}

/// Reads everything the journal at `path` holds about run `run`, as JSON for comparing.
fn run_state(journal: &Journal, run: RunId) -> Result<serde_json::Value, JournalError> {
    Ok(json!({
        "run": journal.run(run)?,
        "entries": journal.entries(run)?,
        "tasks": journal.tasks(run)?,
    }))
}

#[test]
fn salvaging_a_whole_journal_copies_everything_with_its_ids() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = write_journal(dir.path())?;
    let out = dir.path().join("salvaged.redb");
    let report = Journal::salvage(&path, &out)?;
    let copied: Vec<_> = report.copied.iter().map(|r| (r.run.0, r.entries, r.tasks)).collect();
    assert_eq!(copied, vec![(1, 6, 1), (2, 3, 1)]);
    assert!(
        report.left.is_empty() && report.sessions_left.is_empty() && report.tasks_lost.is_empty()
    );
    assert_eq!(report.sessions_copied, 2);
    assert!(Journal::check(&out)?.is_whole());

    let old = Journal::open(&path, JournalConfig::default())?;
    let new = Journal::open(&out, JournalConfig::default())?;
    for run in [RunId(1), RunId(2)] {
        assert_eq!(run_state(&new, run)?, run_state(&old, run)?);
    }
    assert_eq!(new.sessions()?, old.sessions()?);
    assert_eq!(new.entry_by_identity(RunId(1), "site-4")?.map(|e| e.seq), Some(4));
    // The indexes were rebuilt: reconcile finds the live task and session through them.
    let reconciled = new.reconcile::<&str>(&[])?;
    assert_eq!((reconciled.tasks, reconciled.sessions, reconciled.runs), (1, 1, 2));
    // Ids go on from where the old journal left them.
    assert_eq!(new.create_run(new_run("next", "proc-c"))?, RunId(3));
    Ok(())
}

#[test]
fn salvage_leaves_out_each_run_that_does_not_read_whole_and_says_why() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = write_journal(dir.path())?;
    assert!(flip_every(&path, "payload-marker-3")? >= 1);
    assert!(flip_every(&path, "team-marker-s-2")? >= 1);
    let whole_run_2 = {
        let journal = Journal::open(&path, JournalConfig::default())?;
        run_state(&journal, RunId(2))?
    };
    let out = dir.path().join("salvaged.redb");
    let report = Journal::salvage(&path, &out)?;
    assert_eq!(report.copied.iter().map(|r| r.run).collect::<Vec<_>>(), vec![RunId(2)]);
    assert_eq!(report.left.len(), 1);
    assert_eq!(report.left[0].run, RunId(1));
    assert!(report.left[0].reason.contains("clio_entries (run 1, seq 3)"), "{:?}", report.left);
    assert_eq!(report.sessions_copied, 1);
    assert_eq!(report.sessions_left.len(), 1);
    assert_eq!(report.sessions_left[0].session, "s-2");

    let new = Journal::open(&out, JournalConfig::default())?;
    assert_eq!(run_state(&new, RunId(2))?, whole_run_2);
    assert_eq!(new.run(RunId(1))?, None);
    assert_eq!(new.task(TaskId(1))?, None, "the left run's task was copied");
    assert!(new.session(&SessionId("s-1".into()))?.is_some());
    // No id of the old journal is given again, not even the left run's.
    assert_eq!(new.create_run(new_run("next", "proc-c"))?, RunId(3));
    new.close()?;
    assert!(Journal::check(&out)?.is_whole());
    Ok(())
}

#[test]
fn salvage_leaves_out_the_run_of_a_damaged_task_and_rebuilds_damaged_indexes() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = write_journal(dir.path())?;
    assert!(flip_every(&path, "target-marker-task")? >= 1);
    edit(&path, |txn| {
        let identities: TableDefinition<(u64, &str), u64> = TableDefinition::new("clio_identities");
        txn.open_table(identities)?.remove((2, "ev-1"))?;
        Ok(())
    })?;
    let out = dir.path().join("salvaged.redb");
    let report = Journal::salvage(&path, &out)?;
    assert_eq!(report.copied.iter().map(|r| r.run).collect::<Vec<_>>(), vec![RunId(2)]);
    assert!(report.left[0].reason.contains("clio_tasks (task 1)"), "{:?}", report.left);
    let new = Journal::open(&out, JournalConfig::default())?;
    assert_eq!(new.entry_by_identity(RunId(2), "ev-1")?.map(|e| e.seq), Some(1));
    Ok(())
}

#[test]
fn salvage_never_overwrites_a_file() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = write_journal(dir.path())?;
    let out = dir.path().join("taken.redb");
    fs::write(&out, "mine")?;
    let err = Journal::salvage(&path, &out).err().ok_or("overwrote")?;
    assert!(matches!(&err, JournalError::DestinationExists { path: p } if *p == out), "{err:?}");
    assert_eq!(fs::read_to_string(&out)?, "mine");
    let err = Journal::salvage(&path, &path).err().ok_or("overwrote its source")?;
    assert!(matches!(err, JournalError::DestinationExists { .. }), "{err:?}");
    Ok(())
}

#[test]
fn a_salvaged_journal_takes_new_writes() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = write_journal(dir.path())?;
    let out = dir.path().join("salvaged.redb");
    Journal::salvage(&path, &out)?;
    let journal = Journal::open(&out, JournalConfig::default())?;
    let seq = journal.append(RunId(1), NewEntry::new(clio_journal::EntryKind::Event, json!(7)))?;
    assert_eq!(seq, 6);
    assert_eq!(journal.runs(&RunFilter::default())?.len(), 2);
    journal.close()?;
    let reread = Journal::open(&out, JournalConfig::default())?;
    assert_eq!(reread.entry_count(RunId(1))?, 7);
    Ok(())
}

#[test]
fn check_and_salvage_read_a_file_left_by_a_crash_without_writing_it() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = write_journal(dir.path())?;
    let journal = Journal::open(&path, JournalConfig::default())?;
    // The first write after an open is a checkpoint that makes the log live; the second
    // is in the log only.
    journal.append(RunId(2), NewEntry::new(clio_journal::EntryKind::Event, json!("early")))?;
    journal.append(RunId(2), NewEntry::new(clio_journal::EntryKind::Event, json!("late")))?;
    // What a SIGKILL leaves: the file and its log as they are while the journal is open.
    let crashed = dir.path().join("crashed");
    fs::create_dir(&crashed)?;
    let copy = crashed.join("journal.redb");
    fs::copy(&path, &copy)?;
    fs::copy(dir.path().join("journal.redb-wal"), crashed.join("journal.redb-wal"))?;
    drop(journal);
    let before = fs::read(&copy)?;

    let report = Journal::check(&copy)?;
    assert!(report.is_whole(), "{:#?}", report.problems);
    assert!(report.notes.iter().any(|n| n.contains("write-ahead log")), "{:?}", report.notes);
    let out = dir.path().join("salvaged.redb");
    let salvaged = Journal::salvage(&copy, &out)?;
    // Salvage applies the log to a private copy: run 2 is copied with its late entry.
    assert_eq!(salvaged.copied.len(), 2);
    assert!(salvaged.left.is_empty(), "{:?}", salvaged.left);
    assert_eq!(salvaged.copied[1].entries, 5);
    assert!(salvaged.notes.iter().any(|n| n.contains("write-ahead log")), "{:?}", salvaged.notes);
    assert_eq!(fs::read(&copy)?, before, "check or salvage wrote to the journal");
    // Opening it applies the log: the late entry is there.
    let reopened = Journal::open(&copy, JournalConfig::default())?;
    assert_eq!(reopened.entry_count(RunId(2))?, 5);
    Ok(())
}
