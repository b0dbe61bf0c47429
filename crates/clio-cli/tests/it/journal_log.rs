//! Damage to the write-ahead log beside the journal, as a failing disk leaves it, after a
//! SIGKILL in the middle of a run whose tool has a side effect (the side-effects plugin):
//! damage before the log's last batch is refused by every command with its offset, both
//! files unchanged, `journal check` reports it (exit 1) and `journal salvage` lists the run
//! it could not copy; one damaged copy of the last batch is read past from the other, and
//! the run resumes with every effect done once. Also: a `journal.redb` cut inside its
//! header exits 1 naming the file and what to do.

use std::path::Path;

use clio_journal::{EntryKind, Journal, JournalConfig, NewEntry, NewRun};
use serde_json::json;

use crate::side_effects::case;
use crate::support::{Sandbox, clio, temp_home};

/// Every tally of an uninterrupted run, in order.
const ALL_TALLIES: [&str; 4] = ["first", "agent-1", "agent-2", "last"];

/// One batch of the paged log: where its two copies start and where its record starts.
#[derive(Debug, Clone, Copy)]
struct Batch {
    at: usize,
    record: usize,
    second: usize,
}

/// The batches of a paged log (`docs/journal-format.md`): each starts on a 4 KiB page of
/// its own and is written twice; the first holds the generation's 32-byte header.
fn batches(log: &[u8]) -> Vec<Batch> {
    let mut out = Vec::new();
    let mut at = 0;
    let mut lsn = None;
    loop {
        let record = if at == 0 { 32 } else { at };
        if log.get(record..record + 4) != Some(b"CLW3".as_slice()) {
            return out;
        }
        let size = u32::from_le_bytes(log[record + 4..record + 8].try_into().unwrap()) as usize;
        let this = u64::from_le_bytes(log[record + 8..record + 16].try_into().unwrap());
        if lsn.is_some_and(|prev: u64| prev + 1 != this) {
            return out;
        }
        lsn = Some(this);
        let span = (record - at + 24 + size).next_multiple_of(4096);
        out.push(Batch { at, record, second: at + span });
        at += 2 * span;
    }
}

/// A run killed between its calls (two effects done), with its writes in the log.
fn killed(name: &str) -> (Sandbox, Vec<u8>) {
    let case = case(name);
    let killed = case.run(Some("kill-at-agent-mid"));
    assert_eq!(killed.code, -1, "the process is killed: {}", killed.render());
    assert_eq!(case.tallies(), ["first", "agent-1"]);
    let log = std::fs::read(case.home.join("journal.redb-wal")).unwrap();
    assert!(batches(&log).len() > 2, "the run's writes are in the log: {}", batches(&log).len());
    (case, log)
}

fn files(case: &Sandbox) -> (Vec<u8>, Vec<u8>) {
    (
        std::fs::read(case.home.join("journal.redb")).unwrap(),
        std::fs::read(case.home.join("journal.redb-wal")).unwrap(),
    )
}

#[test]
fn damage_before_the_last_batch_is_refused_everywhere_and_reported_by_check() {
    let (case, log) = killed("log-damage-earlier");
    let all = batches(&log);
    let last = all.len() - 1;
    let page = |at: usize| {
        let mut bytes = log.clone();
        bytes[at..at + 4096].fill(0);
        (bytes, at)
    };
    let damages = [
        ("the first page zeroed", page(0)),
        ("a middle batch's second copy zeroed", page(all[last / 2].second)),
        ("a bit flipped in the batch before the last", {
            let mut bytes = log.clone();
            bytes[all[last - 1].record + 30] ^= 0x04;
            (bytes, all[last - 1].at)
        }),
    ];
    for (what, (bytes, offset)) in damages {
        std::fs::write(case.home.join("journal.redb-wal"), &bytes).unwrap();
        let before = files(&case);
        let commands: [&[&str]; 4] = [
            &["runs", "list"],
            &["runs", "show", "1"],
            &["runs", "resume", "1"],
            &["journal", "check"],
        ];
        for args in commands {
            let mut full = vec!["--home", case.h()];
            full.extend_from_slice(args);
            let out = clio(&full);
            assert_eq!(out.code, 1, "{what}: {args:?}: {}", out.render());
            let said = format!("{}{}", out.stdout, out.stderr);
            assert!(said.contains("journal.redb-wal"), "{what}: {args:?}: {}", out.render());
            assert!(
                said.contains(&format!("offset {offset}")),
                "{what}: {args:?}: {}",
                out.render()
            );
            assert_eq!(case.tallies(), ["first", "agent-1"], "{what}: {args:?}: nothing ran again");
            assert!(files(&case) == before, "{what}: {args:?}: the files changed");
        }
        let check = clio(&["--home", case.h(), "journal", "check"]);
        assert!(!check.stdout.contains("whole: no problem"), "{what}: {}", check.render());
        assert!(check.stdout.contains("write-ahead log"), "{what}: {}", check.render());
        // Salvage copies nothing of run 1, whose latest writes are in the log, and says so.
        let out = case.home.join(format!("salvaged-{}.redb", offset));
        let salvage =
            clio(&["--home", case.h(), "journal", "salvage", out.to_str().unwrap(), "--json"]);
        assert_eq!(salvage.code, 0, "{what}: {}", salvage.render());
        let report: serde_json::Value = serde_json::from_str(&salvage.stdout).unwrap();
        let left = report["left"].as_array().unwrap();
        assert!(left.iter().any(|r| r["run"] == 1), "{what}: {}", salvage.stdout);
        assert!(report["copied"].as_array().unwrap().is_empty(), "{what}: {}", salvage.stdout);
        assert!(files(&case) == before, "{what}: salvage changed the files");
    }
    // With its log back, the run resumes to the end, each effect once.
    std::fs::write(case.home.join("journal.redb-wal"), &log).unwrap();
    let resumed = case.resume();
    assert_eq!(resumed.code, 0, "{}", resumed.render());
    assert_eq!(case.tallies(), ALL_TALLIES);
}

#[test]
fn one_damaged_copy_of_the_last_batch_is_read_from_the_other_and_check_reports_it() {
    let (case, log) = killed("log-damage-last");
    let last = *batches(&log).last().unwrap();
    let mut bytes = log.clone();
    bytes[last.record + 30] ^= 0x04;
    std::fs::write(case.home.join("journal.redb-wal"), &bytes).unwrap();
    let check = clio(&["--home", case.h(), "journal", "check"]);
    assert_eq!(check.code, 1, "{}", check.render());
    assert!(check.stdout.contains(&format!("offset {}", last.at)), "{}", check.render());
    assert!(check.stdout.contains(&format!("offset {}", last.second)), "{}", check.render());
    let listed = clio(&["--home", case.h(), "runs", "list"]);
    assert_eq!(listed.code, 0, "{}", listed.render());
    // Read exactly: the resume runs only what had not run.
    let resumed = case.resume();
    assert_eq!(resumed.code, 0, "{}", resumed.render());
    assert_eq!(case.tallies(), ALL_TALLIES);
}

/// Writes a journal with one run into `home`.
fn journal_in(home: &Path) {
    let journal = Journal::open(home.join("journal.redb"), JournalConfig::default()).unwrap();
    let run = journal
        .create_run(NewRun {
            flow: "cut".into(),
            input: json!("task"),
            input_digest: "d".into(),
            fingerprint: "f".into(),
            owner: "test".into(),
            launch: None,
        })
        .unwrap();
    journal.append(run, NewEntry::new(EntryKind::Event, json!("kept"))).unwrap();
    journal.close().unwrap();
}

#[test]
fn a_journal_cut_inside_its_header_exits_1_naming_it_and_what_to_do() {
    let home = temp_home("journal-cut-header");
    journal_in(&home);
    let path = home.join("journal.redb");
    let whole = std::fs::read(&path).unwrap();
    for cut in [12, 100, 320, 511, 600] {
        std::fs::write(&path, &whole[..cut]).unwrap();
        for args in [&["runs", "list"][..], &["runs", "show", "1"], &["journal", "check"]] {
            let mut full = vec!["--home", home.to_str().unwrap()];
            full.extend_from_slice(args);
            let out = clio(&full);
            assert_eq!(out.code, 1, "cut at {cut}: {args:?}: {}", out.render());
            let said = format!("{}{}", out.stdout, out.stderr);
            assert!(said.contains(path.to_str().unwrap()), "cut at {cut}: {}", out.render());
            assert!(
                said.contains("clio journal salvage") || said.contains("restore"),
                "cut at {cut}: {args:?}: says what to do: {}",
                out.render()
            );
            assert!(!said.contains("panicked"), "{}", out.render());
        }
        assert_eq!(std::fs::read(&path).unwrap(), &whole[..cut], "the file was left as it was");
    }
}

/// The damage, swept: each 4 KiB page of the log's written part zeroed in turn, on
/// the files a SIGKILL left, then `runs resume 1`: refused (exit 1, files and effects as
/// they were) or resumed to the end with every effect done once. Never a succeeded call
/// run again.
#[test]
fn every_page_of_the_log_zeroed_in_turn_is_refused_or_resumed_with_each_effect_once() {
    let (case, log) = killed("log-damage-sweep");
    let journal = case.home.join("journal.redb");
    let wal = case.home.join("journal.redb-wal");
    let tally = case.workspace.join("tally.log");
    let file = std::fs::read(&journal).unwrap();
    let tallied = std::fs::read(&tally).unwrap();
    let written = log.iter().rposition(|b| *b != 0).unwrap() + 1;
    let (mut refused, mut resumed) = (0, 0);
    for page in 0..written.div_ceil(4096) {
        let mut bytes = log.clone();
        bytes[page * 4096..(page + 1) * 4096].fill(0);
        std::fs::write(&journal, &file).unwrap();
        std::fs::write(&wal, &bytes).unwrap();
        std::fs::write(&tally, &tallied).unwrap();
        let out = case.resume();
        match out.code {
            0 => {
                assert_eq!(case.tallies(), ALL_TALLIES, "page {page}: {}", out.render());
                resumed += 1;
            }
            1 => {
                assert_eq!(case.tallies(), ["first", "agent-1"], "page {page}: {}", out.render());
                assert!(out.stderr.contains("journal.redb-wal"), "page {page}: {}", out.render());
                assert!(std::fs::read(&journal).unwrap() == file, "page {page}: file changed");
                assert!(std::fs::read(&wal).unwrap() == bytes, "page {page}: log changed");
                refused += 1;
            }
            code => panic!("page {page}: exit {code}: {}", out.render()),
        }
    }
    // Every page before the last batch is refused; the last batch's pages are read past.
    let last = *batches(&log).last().unwrap();
    assert_eq!(refused, last.at / 4096, "refused {refused}, resumed {resumed}");
    assert_eq!(resumed, written.div_ceil(4096) - last.at / 4096);
}
