//! The journal refuses damage to its write-ahead log: never a shorter history, never a
//! silent change, and nothing modified by an open that fails. Each case starts from a crash
//! copy (the two files as a killed process leaves them, with acknowledged writes held only
//! in the log) and damages it as the issue found: a flipped bit in the middle of the log, a
//! log truncated mid-way, a missing, emptied or foreign log, a 0-byte journal file beside
//! its log. Reading a journal leaves both files byte for byte as they were.

use std::fs;
use std::path::{Path, PathBuf};

use clio_journal::{EntryKind, Journal, JournalConfig, JournalError, NewEntry, RunFilter, RunId};
use serde_json::json;

use crate::support::{TestResult, log_batches, new_run};

fn wal_of(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_os_string();
    name.push("-wal");
    PathBuf::from(name)
}

/// A journal with one run of `n` entries, written through the log and copied as a crash
/// leaves it: returns the copy's path.
fn crashed_journal(
    dir: &Path,
    n: u64,
) -> Result<PathBuf, Box<dyn std::error::Error + Send + Sync>> {
    let live = dir.join("live.redb");
    let journal = Journal::open(&live, JournalConfig::default())?;
    let run = journal.create_run(new_run("damage", "proc-d"))?;
    for i in 0..n {
        let entry = NewEntry::new(EntryKind::Step, json!({ "i": i, "text": "explains" }));
        journal.append(run, entry.with_identity(format!("s{i}")))?;
    }
    let copy = dir.join("journal.redb");
    fs::copy(&live, &copy)?;
    fs::copy(wal_of(&live), wal_of(&copy))?;
    drop(journal);
    Ok(copy)
}

/// Both files' bytes (`None` for a missing one).
fn bytes_of(path: &Path) -> (Option<Vec<u8>>, Option<Vec<u8>>) {
    (fs::read(path).ok(), fs::read(wal_of(path)).ok())
}

/// Where the records of the log's generation lie: (offset, length) of each one's first copy.
fn records(log: &[u8]) -> Vec<(usize, usize)> {
    log_batches(log).iter().map(|b| (b.record, b.len)).collect()
}

/// Opens `path`, which must be refused as damaged naming `file`, with both files unchanged.
fn refused(path: &Path, file: &Path, says: &str) -> TestResult {
    let before = bytes_of(path);
    for open in [Journal::open, Journal::open_read_only] {
        let err = match open(path, JournalConfig::default()) {
            Ok(_) => return Err(format!("a damaged journal opened ({says})").into()),
            Err(err) => err,
        };
        let JournalError::Corrupted { path: named, detail } = &err else {
            return Err(format!("expected Corrupted, got {err:?}").into());
        };
        assert_eq!(named, file, "{err}");
        assert!(detail.contains(says), "{detail}");
        assert!(detail.contains("nothing was changed"), "{detail}");
        assert_eq!(bytes_of(path), before, "a failed open changed the files: {err}");
    }
    Ok(())
}

#[test]
fn a_flipped_bit_in_the_middle_of_the_log_is_refused_not_rolled_back() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = crashed_journal(dir.path(), 20)?;
    let mut log = fs::read(wal_of(&path))?;
    let recs = records(&log);
    assert!(recs.len() >= 20, "the writes went through the log: {}", recs.len());
    let (at, len) = recs[recs.len() / 2];
    log[at + len / 2] ^= 0x08;
    fs::write(wal_of(&path), &log)?;
    refused(&path, &wal_of(&path), &format!("offset {at}"))
}

#[test]
fn a_log_truncated_mid_way_is_refused() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = crashed_journal(dir.path(), 20)?;
    let log = fs::read(wal_of(&path))?;
    let recs = records(&log);
    let (at, len) = recs[recs.len() / 2];
    for cut in [at + len / 2, at, at + len] {
        fs::write(wal_of(&path), &log[..cut])?;
        refused(&path, &wal_of(&path), "cut short")?;
    }
    // Half the file, as `truncate -s` would: the records may all lie before the cut, and
    // then nothing is lost and the journal opens whole.
    fs::write(wal_of(&path), &log[..log.len() / 2])?;
    let last = recs.last().map_or(0, |(at, len)| at + len);
    if last <= log.len() / 2 {
        assert_eq!(Journal::open(&path, JournalConfig::default())?.entry_count(RunId(1))?, 20);
    } else {
        refused(&path, &wal_of(&path), "cut short")?;
    }
    Ok(())
}

#[test]
fn a_missing_emptied_or_foreign_log_is_refused_while_the_file_expects_one() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = crashed_journal(dir.path(), 5)?;
    let log = fs::read(wal_of(&path))?;
    fs::remove_file(wal_of(&path))?;
    refused(&path, &wal_of(&path), "missing")?;
    assert!(!wal_of(&path).exists(), "no log was made");
    fs::write(wal_of(&path), b"")?;
    refused(&path, &wal_of(&path), "empty")?;
    // The log of another journal's crash.
    let other = tempfile::tempdir()?;
    let foreign = crashed_journal(other.path(), 5)?;
    fs::copy(wal_of(&foreign), wal_of(&path))?;
    refused(&path, &wal_of(&path), "another journal")?;
    // With its own log back, every acknowledged write is there.
    fs::write(wal_of(&path), &log)?;
    assert_eq!(Journal::open(&path, JournalConfig::default())?.entry_count(RunId(1))?, 5);
    Ok(())
}

#[test]
fn a_zero_byte_journal_beside_its_log_is_refused_not_made_new() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = crashed_journal(dir.path(), 5)?;
    fs::write(&path, b"")?;
    refused(&path, &path, "is empty")?;
    fs::remove_file(&path)?;
    refused(&path, &path, "is missing")?;
    assert!(!path.exists(), "no journal was made");
    Ok(())
}

#[test]
fn only_a_torn_tail_is_dropped() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = crashed_journal(dir.path(), 6)?;
    let whole = fs::read(wal_of(&path))?;
    let file = fs::read(&path)?;
    let last = *log_batches(&whole).last().ok_or("no record")?;
    // The last batch's write cut short: the second half of its first copy and its second
    // copy never reached the disk.
    let mut log = whole.clone();
    for b in &mut log[last.record + last.len / 2..last.end()] {
        *b = 0;
    }
    fs::write(wal_of(&path), &log)?;
    let journal = Journal::open(&path, JournalConfig::default())?;
    assert_eq!(journal.entry_count(RunId(1))?, 5, "the torn last append is dropped, no more");
    drop(journal);
    // Either copy of the last batch damaged alone: the other is read, every append kept.
    for (from, to) in [(last.at, last.second), (last.second, last.end())] {
        let mut log = whole.clone();
        for b in &mut log[from..to] {
            *b = 0;
        }
        fs::write(wal_of(&path), &log)?;
        fs::write(&path, &file)?;
        let journal = Journal::open_read_only(&path, JournalConfig::default())?;
        assert_eq!(journal.entry_count(RunId(1))?, 6, "zeroed {from}..{to}");
    }
    Ok(())
}

#[test]
fn reading_a_journal_writes_nothing() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("journal.redb");
    {
        let journal = Journal::open(&path, JournalConfig::default())?;
        let run = journal.create_run(new_run("read", "proc-r"))?;
        journal.append(run, NewEntry::new(EntryKind::Step, json!(1)).with_identity("a"))?;
        journal.close()?;
    }
    let before = bytes_of(&path);
    for _ in 0..3 {
        let journal = Journal::open_read_only(&path, JournalConfig::default())?;
        assert_eq!(journal.runs(&RunFilter::default())?.len(), 1);
        assert_eq!(journal.entries(RunId(1))?.len(), 1);
        let refused = journal.append(RunId(1), NewEntry::new(EntryKind::Step, json!(2)));
        assert!(matches!(refused, Err(JournalError::ReadOnly { .. })), "{refused:?}");
        drop(journal);
        assert_eq!(bytes_of(&path), before, "a read-only open changed the files");
    }
    // A journal a crash left with records in its log (and a file redb must repair) is
    // recovered in memory: the records read, and the files are unchanged.
    fs::create_dir_all(dir.path().join("c"))?;
    let crashed = crashed_journal(&dir.path().join("c"), 4)?;
    let before = bytes_of(&crashed);
    let journal = Journal::open_read_only(&crashed, JournalConfig::default())?;
    assert_eq!(journal.entry_count(RunId(1))?, 4);
    drop(journal);
    assert_eq!(bytes_of(&crashed), before, "a read-only open of a crashed journal wrote");
    Ok(())
}

/// Issue 44 item 5: after a crash, readers share the journal. Readers of a journal a crash
/// left with work to recover each recover it in memory under a shared lock: any number
/// read it at once (they used to take it exclusively, one by one, and the others failed
/// "already open"); a writer is refused while they read, and recovers it once they are
/// done.
#[test]
fn readers_of_a_crashed_journal_share_it_and_exclude_only_writers() -> TestResult {
    let dir = tempfile::tempdir()?;
    let crashed = crashed_journal(dir.path(), 5)?;
    let before = bytes_of(&crashed);
    let readers: Vec<Journal> = (0..4)
        .map(|_| Journal::open_read_only(&crashed, JournalConfig::default()))
        .collect::<Result<_, _>>()?;
    for reader in &readers {
        assert_eq!(reader.entry_count(RunId(1))?, 5);
    }
    let writer = Journal::open(&crashed, JournalConfig::default());
    assert!(matches!(writer, Err(JournalError::AlreadyOpen { .. })), "{:?}", writer.err());
    drop(readers);
    assert_eq!(bytes_of(&crashed), before, "readers wrote");
    let writer = Journal::open(&crashed, JournalConfig::default())?;
    assert_eq!(writer.entry_count(RunId(1))?, 5);
    // And with the writer holding it, a reader is refused.
    let reader = Journal::open_read_only(&crashed, JournalConfig::default());
    assert!(matches!(reader, Err(JournalError::AlreadyOpen { .. })), "{:?}", reader.err());
    Ok(())
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig { cases: 48, ..Default::default() })]

    /// Flipped bits and truncations at random offsets of a crash copy's log: opening gives a
    /// clear error with both files unchanged, or exactly the acknowledged entries (the last
    /// batch's other copy read past a damaged one); never a panic, never a changed entry,
    /// never one fewer.
    #[test]
    fn damage_to_the_log_is_refused_or_reads_exactly(
        n in 3u64..12,
        at in proptest::prelude::any::<proptest::sample::Index>(),
        bit in 0u8..8,
        truncate in proptest::prelude::any::<bool>(),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let path = crashed_journal(dir.path(), n).unwrap();
        let mut log = fs::read(wal_of(&path)).unwrap();
        let end = records(&log).last().map_or(32, |(at, len)| at + len);
        let offset = at.index(end);
        if truncate {
            log.truncate(offset);
        } else {
            log[offset] ^= 1 << bit;
        }
        fs::write(wal_of(&path), &log).unwrap();
        let before = bytes_of(&path);
        let opened = std::panic::catch_unwind(|| Journal::open(&path, JournalConfig::default()));
        let Ok(opened) = opened else {
            return Err(proptest::test_runner::TestCaseError::fail("opening panicked"));
        };
        match opened {
            Ok(journal) => {
                let entries = journal.entries(RunId(1)).unwrap_or_default();
                // A bit or a cut reaches one copy of a batch, or cuts the log (refused):
                // even the last batch reads from its other copy.
                proptest::prop_assert!(entries.len() as u64 == n, "{} of {n} entries", entries.len());
                for (i, e) in entries.iter().enumerate() {
                    proptest::prop_assert_eq!(&e.payload, &json!({ "i": i, "text": "explains" }));
                }
            }
            Err(err) => {
                proptest::prop_assert!(
                    matches!(err, JournalError::Corrupted { .. }),
                    "not a damage error: {err:?}"
                );
                proptest::prop_assert!(bytes_of(&path) == before, "a refused open changed the files");
            }
        }
    }
}
