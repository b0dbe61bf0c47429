//! Damage to a paged write-ahead log over journals whose runs record side-effecting calls
//! (a task created with its intent and acceptance, then marked succeeded, as the runtime
//! does for a tool that is not read-only): every damaged copy opens to exactly the journal
//! it was copied from, or is refused with both files unchanged; never a shorter history,
//! which would make a resume run a succeeded call again. And what `check` and `salvage`
//! say of a damaged log: the damage as a problem, every run the log wrote to left and
//! listed, those that lived only in the log included. And a journal file cut inside its
//! header: damage, not an i/o error.

use std::fs;
use std::path::{Path, PathBuf};

use clio_journal::{
    EntryKind, Journal, JournalConfig, JournalError, NewEntry, NewTask, RunId, TaskKind,
    TaskStatus, TaskUpdate,
};
use proptest::prelude::*;
use serde_json::json;

use crate::support::{LogBatch, TestResult, log_batches, new_run};

fn wal_of(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_os_string();
    name.push("-wal");
    PathBuf::from(name)
}

fn bytes_of(path: &Path) -> (Option<Vec<u8>>, Option<Vec<u8>>) {
    (fs::read(path).ok(), fs::read(wal_of(path)).ok())
}

/// Records one side-effecting call of `run`: its intent and acceptance with the new task,
/// then the task succeeded with its result (two batches, as the runtime writes them).
fn call(journal: &Journal, run: RunId, n: u64, payload: usize) -> TestResult {
    let identity = format!("site:tally|{n}");
    let task = NewTask {
        run,
        parent: None,
        kind: TaskKind::Tool,
        target: "tally".to_owned(),
        label: format!("tally {n}"),
        status: TaskStatus::Running,
        model: None,
        owner: "proc-t".to_owned(),
        call: Some(identity.clone()),
    };
    let intent = NewEntry::new(EntryKind::Call, json!({"tool": "tally", "n": n}))
        .with_identity(identity.clone());
    let accepted = NewEntry::new(EntryKind::Event, json!({"accepted": n}))
        .with_identity(format!("{identity}|accepted"));
    let (task, _) = journal.create_task_with_entries(run, vec![intent], task, vec![accepted])?;
    let result = json!({"line": n, "pad": "x".repeat(payload)});
    journal.update_task(
        task,
        TaskUpdate {
            status: Some(TaskStatus::Succeeded),
            result: Some(result),
            ..TaskUpdate::default()
        },
    )?;
    Ok(())
}

/// What a journal holds: every run's entries and tasks, as JSON.
fn state(journal: &Journal) -> Result<serde_json::Value, JournalError> {
    let mut runs = Vec::new();
    for run in journal.runs(&clio_journal::RunFilter::default())? {
        let entries = journal.entries(run.id)?;
        let tasks = journal.tasks(run.id)?;
        runs.push(json!({"run": run, "entries": entries, "tasks": tasks}));
    }
    Ok(json!(runs))
}

/// The calls of the original journal that succeeded and that a resume of `reopened` would
/// run again: those whose task is missing or not succeeded there.
fn calls_run_again(original: &serde_json::Value, reopened: &serde_json::Value) -> Vec<String> {
    let succeeded = |state: &serde_json::Value| -> Vec<String> {
        let mut calls = Vec::new();
        for run in state.as_array().into_iter().flatten() {
            for task in run["tasks"].as_array().into_iter().flatten() {
                if task["status"] == "succeeded" {
                    calls.push(task["call"].as_str().unwrap_or_default().to_owned());
                }
            }
        }
        calls
    };
    let kept = succeeded(reopened);
    succeeded(original).into_iter().filter(|c| !kept.contains(c)).collect()
}

/// A journal of `runs` runs of `calls` side-effecting calls each, copied as a SIGKILL
/// leaves it (every write after the open's first in the log only): the copy's path, what
/// it holds and its log's batches.
fn crashed(
    dir: &Path,
    runs: usize,
    calls: u64,
    payload: usize,
) -> Result<(PathBuf, serde_json::Value, Vec<LogBatch>), Box<dyn std::error::Error + Send + Sync>> {
    let live = dir.join("live.redb");
    let journal = Journal::open(&live, JournalConfig::default())?;
    for r in 0..runs {
        let run = journal.create_run(new_run("effects", "proc-t"))?;
        for n in 0..calls {
            call(&journal, run, n + 10 * r as u64, payload)?;
        }
    }
    let expected = state(&journal)?;
    let copy = dir.join("journal.redb");
    fs::copy(&live, &copy)?;
    fs::copy(wal_of(&live), wal_of(&copy))?;
    drop(journal);
    let batches = log_batches(&fs::read(wal_of(&copy))?);
    Ok((copy, expected, batches))
}

#[derive(Debug, Clone)]
enum Damage {
    Flip { at: prop::sample::Index, bit: u8 },
    ZeroPage { page: prop::sample::Index },
    Truncate { at: prop::sample::Index },
}

fn damage() -> impl Strategy<Value = Damage> {
    prop_oneof![
        (any::<prop::sample::Index>(), 0u8..8).prop_map(|(at, bit)| Damage::Flip { at, bit }),
        any::<prop::sample::Index>().prop_map(|page| Damage::ZeroPage { page }),
        any::<prop::sample::Index>().prop_map(|at| Damage::Truncate { at }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 40, ..ProptestConfig::default() })]

    /// Random damage anywhere before the log's last batch of a crash copy whose runs
    /// recorded side-effecting calls: both opens (read-only and for writing) answer
    /// exactly the journal that was copied, or refuse it as damaged with both files
    /// unchanged. No succeeded call is ever missing, so a resume never runs one again.
    #[test]
    fn damage_before_the_last_batch_is_read_exactly_or_refused(
        runs in 1usize..3,
        calls in 2u64..5,
        payload in prop_oneof![Just(10usize), 3000usize..9000],
        damage in damage(),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let (path, expected, batches) = crashed(dir.path(), runs, calls, payload).unwrap();
        prop_assert!(batches.len() >= 2, "the calls went through the log: {batches:?}");
        let last = batches.last().unwrap().at;
        let mut log = fs::read(wal_of(&path)).unwrap();
        match &damage {
            Damage::Flip { at, bit } => log[at.index(last)] ^= 1 << bit,
            Damage::ZeroPage { page } => {
                let p = page.index(last / 4096) * 4096;
                log[p..p + 4096].fill(0);
            }
            Damage::Truncate { at } => log.truncate(at.index(last)),
        }
        fs::write(wal_of(&path), &log).unwrap();
        let before = bytes_of(&path);
        for open in [Journal::open_read_only, Journal::open] {
            let opened = std::panic::catch_unwind(|| open(&path, JournalConfig::default()));
            let Ok(opened) = opened else {
                return Err(TestCaseError::fail("opening panicked"));
            };
            match opened {
                Ok(journal) => {
                    let read = state(&journal).unwrap();
                    let again = calls_run_again(&expected, &read);
                    prop_assert!(again.is_empty(), "{damage:?}: a resume would run {again:?} again");
                    prop_assert!(read == expected, "{damage:?}: the journal reads differently");
                    // The writable open applied the log: both reads are done.
                    break;
                }
                Err(err) => {
                    prop_assert!(
                        matches!(err, JournalError::Corrupted { .. }),
                        "{damage:?}: not a damage error: {err:?}"
                    );
                    prop_assert!(bytes_of(&path) == before, "{damage:?}: a refused open changed the files");
                }
            }
        }
    }
}

#[test]
fn check_reports_log_damage_and_salvage_lists_the_runs_that_lived_only_in_the_log() -> TestResult {
    let dir = tempfile::tempdir()?;
    let live = dir.path().join("live.redb");
    let journal = Journal::open(&live, JournalConfig::default())?;
    // Run 1 ends and is checkpointed into the file; runs 2 and 3 live only in the log.
    let first = journal.create_run(new_run("kept", "proc-t"))?;
    call(&journal, first, 1, 10)?;
    journal.update_run(
        first,
        clio_journal::RunUpdate {
            status: Some(clio_journal::RunStatus::Succeeded),
            ..clio_journal::RunUpdate::default()
        },
    )?;
    journal.flush()?;
    for _ in 0..2 {
        let run = journal.create_run(new_run("log-only", "proc-t"))?;
        call(&journal, run, 2, 10)?;
    }
    let path = dir.path().join("journal.redb");
    fs::copy(&live, &path)?;
    fs::copy(wal_of(&live), wal_of(&path))?;
    drop(journal);

    // Whole, the copy checks as whole (the log's writes are a note) and salvage applies the
    // log to a private copy: every run is copied, the file left as it was.
    let before = bytes_of(&path);
    let report = Journal::check(&path)?;
    assert!(report.is_whole(), "{:#?}", report.problems);
    let out = dir.path().join("whole-salvage.redb");
    let salvaged = Journal::salvage(&path, &out)?;
    let copied: Vec<_> = salvaged.copied.iter().map(|r| r.run).collect();
    assert_eq!(copied, [RunId(1), RunId(2), RunId(3)], "{:?}", salvaged.left);
    assert!(salvaged.notes.iter().any(|n| n.contains("applied to a private copy")));
    assert_eq!(bytes_of(&path), before, "check and salvage read only");

    // A zeroed page in an earlier batch: check reports it (not whole), naming the log and
    // the offset; salvage leaves every run the log wrote to, and its new journal gives no
    // id of theirs again.
    let log = fs::read(wal_of(&path))?;
    let batches = log_batches(&log);
    assert!(batches.len() >= 4, "{batches:?}");
    let hit = batches[1].second;
    let mut damaged = log.clone();
    damaged[hit..hit + 4096].fill(0);
    fs::write(wal_of(&path), &damaged)?;
    let before = bytes_of(&path);
    let report = Journal::check(&path)?;
    assert!(!report.is_whole());
    let problem = &report.problems[0];
    assert_eq!(problem.table, "write-ahead log");
    assert!(problem.detail.contains(&format!("offset {hit}")), "{}", problem.detail);
    assert!(problem.detail.contains("journal.redb-wal"), "{}", problem.detail);
    let out = dir.path().join("salvaged.redb");
    let salvaged = Journal::salvage(&path, &out)?;
    assert_eq!(bytes_of(&path), before, "check and salvage read only");
    assert_eq!(salvaged.copied.iter().map(|r| r.run).collect::<Vec<_>>(), [RunId(1)]);
    let left: Vec<_> = salvaged.left.iter().map(|r| r.run).collect();
    assert_eq!(left, [RunId(2), RunId(3)], "{:?}", salvaged.left);
    assert!(salvaged.left.iter().all(|r| r.reason.contains("damaged")), "{:?}", salvaged.left);
    assert!(
        salvaged.notes.iter().any(|n| n.contains("does not read whole")),
        "{:?}",
        salvaged.notes
    );
    let fresh = Journal::open(&out, JournalConfig::default())?;
    assert_eq!(fresh.create_run(new_run("after", "proc-t"))?, RunId(4));
    Ok(())
}

/// The second copy costs bytes, not flushes: each durable append through the paged log is
/// one flush, plus one flush of the log's length each time it grows by 1 MiB (every 128
/// small batches of 8 KiB until it reaches its checkpoint size).
#[test]
fn a_durable_append_is_one_flush_through_the_paged_log() -> TestResult {
    let dir = tempfile::tempdir()?;
    let journal = Journal::open(dir.path().join("journal.redb"), JournalConfig::default())?;
    let run = journal.create_run(new_run("flushes", "proc-f"))?;
    journal.append(run, NewEntry::new(EntryKind::Step, json!(0)))?;
    let before = journal.flushes().ok_or("a file journal counts its flushes")?;
    let n = 300;
    for i in 1..=n {
        journal.append(run, NewEntry::new(EntryKind::Step, json!(i)))?;
    }
    let flushes = journal.flushes().ok_or("counted")? - before;
    assert!((n..=n + 3).contains(&flushes), "{flushes} flushes for {n} appends");
    let log = fs::read(wal_of(&dir.path().join("journal.redb")))?;
    let batches = log_batches(&log);
    assert!(batches.len() as u64 > n, "every append is a batch of the log: {}", batches.len());
    assert!(batches.iter().all(|b| b.at % 4096 == 0 && b.second - b.at == 4096), "{batches:?}");
    Ok(())
}

/// A journal file cut inside the storage engine's header is damage (`Corrupted`, naming
/// the file), from every open and from `check`, not an i/o error of the machine; the file
/// is left as it was.
#[test]
fn a_journal_cut_inside_its_header_is_damage_not_an_io_error() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("journal.redb");
    let journal = Journal::open(&path, JournalConfig::default())?;
    journal.create_run(new_run("cut", "proc-c"))?;
    journal.close()?;
    let whole = fs::read(&path)?;
    for cut in [9, 12, 100, 320, 511] {
        fs::write(&path, &whole[..cut])?;
        for open in [Journal::open, Journal::open_read_only] {
            match open(&path, JournalConfig::default()) {
                Err(JournalError::Corrupted { path: named, .. }) => assert_eq!(named, path),
                Err(other) => return Err(format!("cut at {cut}: {other:?}").into()),
                Ok(_) => return Err(format!("cut at {cut}: opened").into()),
            }
        }
        let report = Journal::check(&path)?;
        assert!(!report.is_whole(), "cut at {cut}");
        assert_eq!(fs::read(&path)?, &whole[..cut], "cut at {cut}: the file changed");
    }
    Ok(())
}
