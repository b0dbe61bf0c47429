//! Journal files on disk: reopening, bad input (a missing folder, a file that is not a
//! journal, a damaged file), a newer format refused without modification, and the committed
//! format-1 file still opening.

use std::fs;
use std::path::{Path, PathBuf};

use clio_journal::{
    EntryKind, FORMAT_VERSION, Journal, JournalConfig, JournalEntry, JournalError, NewEntry,
    NewSession, RunId, RunStatus, RunUpdate, SessionId, SessionStatus, TaskStatus, TaskUpdate,
};
use serde_json::json;

use crate::support::{TestResult, new_run, new_task, step};

fn open(path: &Path) -> Result<Journal, JournalError> {
    Journal::open(path, JournalConfig::default())
}

#[test]
fn a_journal_file_keeps_its_records_across_reopen() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("journal.redb");
    let journal = open(&path)?;
    let run = journal.create_run(new_run("count", "proc-a"))?;
    journal.append_batch(run, (0..3).map(step).collect())?;
    journal.close()?;

    let journal = open(&path)?;
    assert_eq!(journal.path(), path);
    assert_eq!(journal.entries(run)?.len(), 3);
    assert_eq!(journal.append(run, step(3))?, 3);
    Ok(())
}

#[test]
fn a_path_in_a_missing_folder_is_an_io_error_naming_it() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("no-such-folder/journal.redb");
    let err = open(&path).err().ok_or("opened")?;
    assert!(matches!(&err, JournalError::Io { path: p, .. } if *p == path), "{err:?}");
    assert!(err.to_string().contains("no-such-folder/journal.redb"), "{err}");
    Ok(())
}

#[test]
fn a_file_that_is_not_a_journal_is_refused_untouched() -> TestResult {
    let dir = tempfile::tempdir()?;
    for (name, content) in [
        ("notes.txt", b"hello, this is not a database\n".to_vec()),
        ("short", b"redb".to_vec()),
        ("zeros", vec![0u8; 8192]),
    ] {
        let path = dir.path().join(name);
        fs::write(&path, &content)?;
        let err = open(&path).err().ok_or("opened")?;
        assert!(matches!(&err, JournalError::NotAJournal { path: p } if *p == path), "{err:?}");
        assert_eq!(err.to_string(), format!("{} is not a clio journal", path.display()));
        assert_eq!(fs::read(&path)?, content, "{name} was modified");
    }
    Ok(())
}

#[test]
fn a_redb_file_of_something_else_is_not_a_journal() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("other.redb");
    {
        let db = redb::Database::create(&path)?;
        let txn = db.begin_write()?;
        let table: redb::TableDefinition<&str, &str> = redb::TableDefinition::new("users");
        txn.open_table(table)?.insert("ada", "lovelace")?;
        txn.commit()?;
    }
    let before = fs::read(&path)?;
    let err = open(&path).err().ok_or("opened")?;
    assert!(matches!(err, JournalError::NotAJournal { .. }), "{err:?}");
    assert_eq!(fs::read(&path)?, before);
    Ok(())
}

/// Writes a journal at `path` holding one run with one entry, and closes it.
fn write_one_entry(path: &std::path::Path) -> TestResult {
    let journal = open(path)?;
    let run = journal.create_run(new_run("count", "proc-a"))?;
    journal.append(run, step(0))?;
    journal.close()?;
    Ok(())
}

#[test]
fn a_newer_format_is_refused_and_left_byte_for_byte_unmodified() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("journal.redb");
    write_one_entry(&path)?;
    {
        // What a future format would write: a larger version number.
        let db = redb::Database::create(&path)?;
        let txn = db.begin_write()?;
        let meta: redb::TableDefinition<&str, u64> = redb::TableDefinition::new("clio_meta");
        txn.open_table(meta)?.insert("format_version", FORMAT_VERSION + 1)?;
        txn.commit()?;
    }
    let before = fs::read(&path)?;
    let err = open(&path).err().ok_or("opened")?;
    match &err {
        JournalError::UpgradeRequired { path: p, found, supported } => {
            assert_eq!((p, *found, *supported), (&path, FORMAT_VERSION + 1, FORMAT_VERSION));
        }
        other => return Err(format!("unexpected error {other:?}").into()),
    }
    assert!(err.to_string().contains("upgrade clio"), "{err}");
    assert_eq!(fs::read(&path)?, before, "the newer file was modified");
    Ok(())
}

#[test]
fn a_damaged_header_is_a_typed_error_not_a_panic() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("journal.redb");
    write_one_entry(&path)?;
    let mut bytes = fs::read(&path)?;
    for b in &mut bytes[16..512] {
        *b ^= 0x5a;
    }
    fs::write(&path, &bytes)?;
    let err = open(&path).err().ok_or("opened")?;
    assert!(
        matches!(err, JournalError::Corrupted { .. } | JournalError::Storage { .. }),
        "{err:?}"
    );
    Ok(())
}

#[test]
fn a_second_open_of_the_same_file_is_refused_while_the_first_is_open() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("journal.redb");
    let _journal = open(&path)?;
    let err = open(&path).err().ok_or("opened twice")?;
    assert!(matches!(err, JournalError::AlreadyOpen { .. }), "{err:?}");
    Ok(())
}

/// Several openers racing on a fresh path (processes started at once in an empty home) each
/// get the journal or a clear `AlreadyOpen`, never an i/o error from another's creation;
/// one journal results, and no temporary file is left behind.
#[test]
fn openers_racing_to_create_a_journal_all_get_it_or_already_open() -> TestResult {
    for round in 0..20 {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("journal.redb");
        let start = std::sync::Arc::new(std::sync::Barrier::new(4));
        let openers: Vec<_> = (0..4)
            .map(|_| {
                let (path, start) = (path.clone(), std::sync::Arc::clone(&start));
                std::thread::spawn(move || {
                    start.wait();
                    open(&path)
                })
            })
            .collect();
        let mut opened = Vec::new();
        for opener in openers {
            match opener.join().map_err(|_| "an opener panicked")? {
                Ok(journal) => opened.push(journal),
                Err(JournalError::AlreadyOpen { .. }) => {}
                Err(err) => return Err(format!("round {round}: {err:?}").into()),
            }
        }
        assert!(!opened.is_empty(), "round {round}: nobody opened the journal");
        drop(opened);
        let journal = open(&path)?;
        assert_eq!(journal.create_run(new_run("count", "proc-a"))?, RunId(1));
        drop(journal);
        let mut names: Vec<String> = fs::read_dir(dir.path())?
            .map(|e| e.map(|e| e.file_name().to_string_lossy().into_owned()))
            .collect::<Result<_, _>>()?;
        names.sort();
        assert_eq!(names, ["journal.redb", "journal.redb-wal"], "round {round}");
    }
    Ok(())
}

fn v1_fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/v1/journal.redb")
}

/// Writes the format-1 fixture: one finished run with a task, three entries and a session.
fn write_v1_fixture(path: &Path) -> TestResult {
    let journal = open(path)?;
    let run = journal.create_run(new_run("count", "proc-a"))?;
    let task = journal.create_task(new_task(run, "proc-a"))?;
    journal.append(
        run,
        NewEntry::new(EntryKind::Call, json!({"target": "echo"}))
            .with_identity("call-0")
            .with_task(task),
    )?;
    journal.update_task(
        task,
        TaskUpdate {
            status: Some(TaskStatus::Succeeded),
            result: Some(json!("hi")),
            ..Default::default()
        },
    )?;
    journal.append(
        run,
        NewEntry::new(EntryKind::Question, json!({"text": "go on?"})).with_identity("ask-0"),
    )?;
    journal.append(run, NewEntry::new(EntryKind::Answer, json!(true)).with_identity("answer-0"))?;
    journal.create_session(NewSession {
        id: SessionId("s-1".into()),
        leader: None,
        parent: None,
        team: None,
        managed: false,
        enabled: Some(true),
        status: SessionStatus::Done,
        iteration_budget: Some(10),
        router_allowlist: None,
        owner: "proc-a".into(),
        run: None,
    })?;
    journal.update_run(
        run,
        RunUpdate {
            status: Some(RunStatus::Succeeded),
            answer: Some(json!("hi")),
            ..Default::default()
        },
    )?;
    journal.close()?;
    Ok(())
}

#[test]
fn the_committed_format_1_file_opens() -> TestResult {
    let fixture = v1_fixture();
    if std::env::var_os("CLIO_REGENERATE_V1").is_some() {
        // Only when the fixture is deliberately rewritten; never in a normal run.
        let _ = fs::remove_file(&fixture);
        write_v1_fixture(&fixture)?;
    }
    // Opening for writing may touch the file, so open a copy.
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("journal.redb");
    fs::copy(&fixture, &path)?;
    let journal = open(&path)?;
    let run = journal.run(RunId(1))?.ok_or("run 1 missing")?;
    assert_eq!((run.status, run.answer), (RunStatus::Succeeded, Some(json!("hi"))));
    assert_eq!(run.launch, None, "a record written before runs kept their launch has none");
    let entries = journal.entries(RunId(1))?;
    let kinds: Vec<_> = entries.iter().map(|e| e.kind).collect();
    assert_eq!(kinds, vec![EntryKind::Call, EntryKind::Question, EntryKind::Answer]);
    assert_eq!(journal.entry_by_identity(RunId(1), "ask-0")?.map(|e| e.seq), Some(1));
    let asked = journal.entries_of_kinds(RunId(1), &[EntryKind::Question, EntryKind::Answer])?;
    assert_eq!(asked, entries[1..].to_vec());
    let tasks = journal.tasks(RunId(1))?;
    assert_eq!(tasks.len(), 1);
    assert_eq!(tasks[0].result, Some(json!("hi")));
    assert_eq!(
        journal.session(&SessionId("s-1".into()))?.map(|s| s.iteration_budget),
        Some(Some(10))
    );
    // Still writable: a new run gets the next id.
    assert_eq!(journal.create_run(new_run("count", "proc-b"))?, RunId(2));
    journal.close()?;
    // Opening upgraded it: it may now rely on a write-ahead log, which format 1 ignores, and
    // its records carry checksums.
    let db = redb::Database::create(&path)?;
    let meta: redb::TableDefinition<&str, u64> = redb::TableDefinition::new("clio_meta");
    let version = redb::ReadableDatabase::begin_read(&db)?
        .open_table(meta)?
        .get("format_version")?
        .map(|v| v.value());
    assert_eq!(version, Some(FORMAT_VERSION));
    drop(db);
    let report = Journal::check(&path)?;
    assert!(report.is_whole() && report.checksummed, "{report:#?}");
    assert_eq!(report.counts.entries, 3);
    Ok(())
}

#[test]
fn the_first_write_after_an_open_that_recovered_nothing_is_durable() -> TestResult {
    // An open with nothing to recover commits nothing; its first write marks the log live
    // in a commit of its own (a checkpoint), and the next goes through the log.
    let dir = tempfile::tempdir()?;
    let path = crate::support::write_journal(dir.path())?;
    for _ in 0..2 {
        let journal = open(&path)?;
        assert_eq!(journal.runs(&clio_journal::RunFilter::default())?.len(), 2);
        assert_eq!(journal.entries(RunId(1))?.len(), 6);
    }
    let journal = open(&path)?;
    let seq = journal.append(RunId(2), NewEntry::new(EntryKind::Event, json!("first")))?;
    journal.append(RunId(2), NewEntry::new(EntryKind::Event, json!("second")))?;
    drop(journal);
    let journal = open(&path)?;
    let entries = journal.entries(RunId(2))?;
    assert_eq!(entries.len(), seq as usize + 2);
    assert_eq!(entries[seq as usize].payload, json!("first"));
    assert_eq!(entries[seq as usize + 1].payload, json!("second"));
    Ok(())
}

#[test]
fn a_write_through_the_log_is_one_flush_of_the_disk() -> TestResult {
    // The count of flushes is the disk's work behind the commits: each write of an
    // immediate journal, made alone, is one flush of its log, and one more when redb grows
    // its file for it (rarely: the file grows by doubling); the first after the open is a
    // checkpoint (it marks the log live), which flushes the file as well.
    let dir = tempfile::tempdir()?;
    let path = crate::support::write_journal(dir.path())?;
    let journal = open(&path)?;
    let flushes = || journal.flushes().ok_or("an embedded journal counts its flushes");
    let opened = flushes()?;
    journal.append(RunId(2), NewEntry::new(EntryKind::Event, json!("first")))?;
    let checkpoint = flushes()? - opened;
    assert!(checkpoint >= 2, "a checkpoint flushes the file and the log: {checkpoint}");
    let before = flushes()?;
    let mut last = before;
    for i in 0..10 {
        journal.append(RunId(2), NewEntry::new(EntryKind::Event, json!(i)))?;
        let now = flushes()?;
        assert!(now > last, "write {i} was flushed: {last} then {now}");
        last = now;
    }
    let ten = last - before;
    assert!((10..=12).contains(&ten), "10 writes, {ten} flushes");
    // Reads flush nothing.
    journal.entries(RunId(2))?;
    assert_eq!(flushes()?, last);
    let in_memory = Journal::open_in_memory()?;
    in_memory.append(in_memory.create_run(new_run("f", "me"))?, step(1))?;
    assert_eq!(in_memory.flushes(), Some(0));
    Ok(())
}

/// Issue 44: a journal holds every run's inputs, answers and tool results; its file and
/// its log are their owner's only (0600) whatever the home folder's mode and the umask (it
/// used to be world-readable in a world-readable home, beside a socket kept "yours only").
#[test]
fn a_new_journal_and_its_log_are_their_owners_only() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = dir.path().join("journal.redb");
    let journal = Journal::open(&path, JournalConfig::default()).unwrap();
    let run = journal.create_run(new_run("modes", "proc-m"));
    assert!(run.is_ok(), "{run:?}");
    let wal = dir.path().join("journal.redb-wal");
    for file in [&path, &wal] {
        let mode = std::fs::metadata(file).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{} is {mode:o}", file.display());
    }
    drop(journal);
    // A journal an earlier build left readable by all is made its owner's at its next open.
    for file in [&path, &wal] {
        std::fs::set_permissions(file, std::fs::Permissions::from_mode(0o644)).unwrap();
    }
    drop(Journal::open(&path, JournalConfig::default()).unwrap());
    for file in [&path, &wal] {
        let mode = std::fs::metadata(file).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{} is {mode:o} after an open", file.display());
    }
    let copy = dir.path().join("salvaged.redb");
    Journal::salvage(&path, &copy).unwrap();
    let mode = std::fs::metadata(&copy).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "the salvaged copy is {mode:o}");
}

/// Issue 44 item 4: a page of a run's entries reads only that page, in order, and says
/// nothing past the run's end.
#[test]
fn a_page_of_entries_is_the_entries_from_its_start_up_to_its_limit() {
    let dir = tempfile::tempdir().unwrap();
    let journal = Journal::open(dir.path().join("journal.redb"), JournalConfig::default()).unwrap();
    let run = journal.create_run(new_run("paged", "proc-p")).unwrap();
    for i in 0..10 {
        journal.append(run, step(i)).unwrap();
    }
    let seqs = |from: u64, limit: usize| -> Vec<u64> {
        journal.entries_page(run, from, limit).unwrap().iter().map(|e| e.seq).collect()
    };
    assert_eq!(seqs(0, 3), vec![0, 1, 2]);
    assert_eq!(seqs(8, 5), vec![8, 9]);
    assert_eq!(seqs(10, 5), Vec::<u64>::new());
    assert_eq!(seqs(3, 0), Vec::<u64>::new());
    assert_eq!(seqs(0, usize::MAX).len(), 10);
    let all = journal.entries(run).unwrap();
    assert_eq!(journal.entries_page(run, 4, 2).unwrap(), all[4..6].to_vec());
    let missing = journal.entries_page(RunId(99), 0, 5);
    assert!(matches!(missing, Err(JournalError::RunNotFound { .. })), "{missing:?}");
}

const KINDS: [EntryKind; 9] = [
    EntryKind::Call,
    EntryKind::Step,
    EntryKind::Question,
    EntryKind::Answer,
    EntryKind::Event,
    EntryKind::Proposal,
    EntryKind::Decision,
    EntryKind::View,
    EntryKind::PermissionReceipt,
];

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(24))]

    /// Issue 44 item 4: the entries visited with their payloads as text are a whole
    /// read's, each payload's text decoding to the payload read whole, whatever the
    /// identities and payloads hold (quotes, backslashes, text that looks like a field).
    #[test]
    fn entries_visited_as_text_are_a_whole_reads(
        entries in proptest::collection::vec(
            (0..9usize, proptest::option::of("[a-z\"\\:,{}]{0,12}"), "[ -~]{0,20}"),
            0..40,
        ),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let journal =
            Journal::open(dir.path().join("journal.redb"), JournalConfig::default()).unwrap();
        let run = journal.create_run(new_run("texts", "proc-t")).unwrap();
        for (i, (kind, identity, text)) in entries.iter().enumerate() {
            let payload = json!({ "text": text, ",\"payload\":": [i], "payload": text });
            let mut entry = NewEntry::new(KINDS[*kind], payload);
            if let Some(identity) = identity {
                entry = entry.with_identity(format!("{identity},\"payload\":#{i}"));
            }
            journal.append(run, entry).unwrap();
        }
        let mut visited = Vec::new();
        journal
            .visit_entry_texts(run, |e| {
                let payload: serde_json::Value = serde_json::from_str(e.payload).unwrap();
                visited.push(JournalEntry {
                    run: e.run,
                    seq: e.seq,
                    kind: e.kind,
                    identity: e.identity.clone(),
                    task: e.task,
                    at_ms: e.at_ms,
                    payload,
                });
            })
            .unwrap();
        proptest::prop_assert_eq!(visited, journal.entries(run).unwrap());
        let missing = journal.visit_entry_texts(RunId(99), |_| {});
        let not_found = matches!(missing, Err(JournalError::RunNotFound { .. }));
        proptest::prop_assert!(not_found, "{:?}", missing);
    }

    /// Issue 44 item 4: the entries of some kinds, read by kind without decoding the
    /// others, are exactly a whole read's entries of those kinds, in order, whatever the
    /// identities and payloads hold (quotes, backslashes, text that looks like a kind).
    #[test]
    fn entries_read_by_kind_are_a_whole_reads_of_those_kinds(
        entries in proptest::collection::vec(
            (0..9usize, proptest::option::of("[a-z\"\\:,{}]{0,12}"), "[ -~]{0,20}"),
            0..40,
        ),
        wanted in proptest::collection::vec(proptest::bool::ANY, 9),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let journal =
            Journal::open(dir.path().join("journal.redb"), JournalConfig::default()).unwrap();
        let run = journal.create_run(new_run("kinds", "proc-k")).unwrap();
        for (i, (kind, identity, text)) in entries.iter().enumerate() {
            let payload = json!({ "kind": "question", "text": text, "view": [i] });
            let mut entry = NewEntry::new(KINDS[*kind], payload);
            if let Some(identity) = identity {
                entry = entry.with_identity(format!("{identity}#{i}"));
            }
            journal.append(run, entry).unwrap();
        }
        let kinds: Vec<EntryKind> =
            KINDS.iter().zip(&wanted).filter(|(_, w)| **w).map(|(k, _)| *k).collect();
        let whole: Vec<_> = journal
            .entries(run)
            .unwrap()
            .into_iter()
            .filter(|e| kinds.contains(&e.kind))
            .collect();
        proptest::prop_assert_eq!(journal.entries_of_kinds(run, &kinds).unwrap(), whole);
        let missing = journal.entries_of_kinds(RunId(99), &kinds);
        let not_found = matches!(missing, Err(JournalError::RunNotFound { .. }));
        proptest::prop_assert!(not_found, "{:?}", missing);
    }
}

/// Issue 44 item 4: a reader of a journal closed cleanly (its log not live) does not read
/// the log, which holds nothing the file lacks (reading it was most of a reader's open
/// after a long run): with a folder where the log was, which no read can get through, the
/// read-only open still reads every record.
#[test]
fn a_reader_of_a_journal_closed_cleanly_does_not_read_its_log() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("journal.redb");
    let wal = dir.path().join("journal.redb-wal");
    let journal = Journal::open(&path, JournalConfig::default())?;
    let run = journal.create_run(new_run("closed", "proc-c"))?;
    for i in 0..20 {
        journal.append(run, step(i))?;
    }
    let entries = journal.entries(run)?;
    journal.close()?;
    fs::remove_file(&wal)?;
    fs::create_dir(&wal)?;
    let reader = Journal::open_read_only(&path, JournalConfig::default())?;
    assert_eq!(reader.entries(run)?, entries);
    assert_eq!(reader.entries_of_kinds(run, &[EntryKind::Step])?.len(), entries.len());
    Ok(())
}
