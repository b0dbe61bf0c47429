//! `clio journal check` and `clio journal salvage OUT` on whole and damaged journals, and
//! what every other command says when it meets damage: the error naming the table and key
//! and what to do, never a panic.

use std::path::Path;

use clio_journal::{EntryKind, Journal, JournalConfig, NewEntry, NewRun};
use serde_json::{Value, json};

use crate::support::{clio, temp_home};

/// Writes two runs into the journal of `home`: run 1 with entries whose payloads carry
/// markers, run 2 with one entry.
fn populate(home: &Path) {
    let journal = Journal::open(home.join("journal.redb"), JournalConfig::default()).unwrap();
    let new_run = |flow: &str| NewRun {
        flow: flow.into(),
        input: json!("task"),
        input_digest: "d".into(),
        fingerprint: "f".into(),
        owner: "test".into(),
        launch: None,
    };
    let first = journal.create_run(new_run("first")).unwrap();
    for n in 0..4 {
        let payload = json!({"word": format!("cli-marker-{n}")});
        journal.append(first, NewEntry::new(EntryKind::Event, payload)).unwrap();
    }
    let second = journal.create_run(new_run("second")).unwrap();
    journal.append(second, NewEntry::new(EntryKind::Event, json!("kept"))).unwrap();
    journal.close().unwrap();
}

/// Flips one bit inside every copy of `needle` in the file at `path`.
fn damage(path: &Path, needle: &str) {
    let mut bytes = std::fs::read(path).unwrap();
    let marker = needle.as_bytes();
    let mut at = 0;
    let mut found = 0;
    while let Some(pos) = bytes[at..].windows(marker.len()).position(|w| w == marker) {
        bytes[at + pos + marker.len() / 2] ^= 0x04;
        at += pos + marker.len();
        found += 1;
    }
    assert!(found > 0, "{needle} is not in {}", path.display());
    std::fs::write(path, &bytes).unwrap();
}

fn home_arg(home: &Path) -> String {
    home.display().to_string()
}

#[test]
fn journal_check_says_a_whole_journal_is_whole() {
    let home = temp_home("journal-check-whole");
    populate(&home);
    let outcome = clio(&["--home", &home_arg(&home), "journal", "check"]);
    assert_eq!(outcome.code, 0, "{}", outcome.render());
    assert!(outcome.stdout.contains("format 3, records checksummed"), "{}", outcome.stdout);
    assert!(
        outcome.stdout.contains("2 runs, 5 entries, 0 tasks, 0 sessions"),
        "{}",
        outcome.stdout
    );
    assert!(outcome.stdout.contains("storage: passed"), "{}", outcome.stdout);
    assert!(outcome.stdout.contains("whole: no problem found"), "{}", outcome.stdout);
}

#[test]
fn journal_check_lists_each_problem_and_exits_1() {
    let home = temp_home("journal-check-damaged");
    populate(&home);
    damage(&home.join("journal.redb"), "cli-marker-2");
    let outcome = clio(&["--home", &home_arg(&home), "journal", "check"]);
    assert_eq!(outcome.code, 1, "{}", outcome.render());
    assert!(
        outcome.stdout.contains("clio_entries (run 1, seq 2): its value fails its checksum"),
        "{}",
        outcome.stdout
    );
    assert!(outcome.stderr.contains("is damaged: 2 problems found"), "{}", outcome.stderr);
    assert!(outcome.stderr.contains("hint: `clio journal salvage OUT`"), "{}", outcome.stderr);

    let outcome = clio(&["--home", &home_arg(&home), "journal", "check", "--json"]);
    assert_eq!(outcome.code, 1, "{}", outcome.render());
    let report: Value = serde_json::from_str(&outcome.stdout).unwrap();
    assert_eq!(report["whole"], json!(false));
    assert_eq!(report["format_version"], json!(3));
    let problems = report["problems"].as_array().unwrap();
    assert!(
        problems.iter().any(|p| p["table"] == "clio_entries" && p["key"] == "run 1, seq 2"),
        "{problems:?}"
    );
    assert_eq!(report["storage"]["outcome"], json!("failed"));
}

#[test]
fn a_damaged_record_is_an_error_saying_what_to_do_not_a_panic() {
    let home = temp_home("journal-damaged-read");
    populate(&home);
    damage(&home.join("journal.redb"), "cli-marker-1");
    let outcome = clio(&["--home", &home_arg(&home), "runs", "events", "1"]);
    assert_eq!(outcome.code, 1, "{}", outcome.render());
    for says in [
        "is damaged",
        "clio_entries (run 1, seq 1)",
        "clio journal check",
        "clio journal salvage OUT",
    ] {
        assert!(outcome.stderr.contains(says), "{says} not in {}", outcome.stderr);
    }
    assert!(!outcome.stderr.contains("panicked"), "{}", outcome.stderr);
    // The rest of the journal still reads.
    let outcome = clio(&["--home", &home_arg(&home), "runs", "events", "2"]);
    assert_eq!(outcome.code, 0, "{}", outcome.render());
}

#[test]
fn journal_salvage_copies_the_runs_that_read_whole() {
    let home = temp_home("journal-salvage");
    populate(&home);
    damage(&home.join("journal.redb"), "cli-marker-3");
    let out = home.join("salvaged.redb");
    let outcome =
        clio(&["--home", &home_arg(&home), "journal", "salvage", &out.display().to_string()]);
    assert_eq!(outcome.code, 0, "{}", outcome.render());
    let text = &outcome.stdout;
    assert!(text.contains("copied 1 run:\n  run 2: 1 entries, 0 tasks"), "{text}");
    assert!(
        text.contains("left 1 run (not whole):\n  run 1: clio_entries (run 1, seq 3)"),
        "{text}"
    );
    assert!(text.contains("to use it: move"), "{text}");

    // Put in place of the damaged journal, it holds run 2 as it was.
    let fresh = temp_home("journal-salvaged-home");
    std::fs::rename(&out, fresh.join("journal.redb")).unwrap();
    let outcome = clio(&["--home", &home_arg(&fresh), "runs", "list", "--json"]);
    assert_eq!(outcome.code, 0, "{}", outcome.render());
    let runs: Value = serde_json::from_str(&outcome.stdout).unwrap();
    let ids: Vec<_> = runs.as_array().unwrap().iter().map(|r| r["id"].clone()).collect();
    assert_eq!(ids, vec![json!(2)]);
    let outcome = clio(&["--home", &home_arg(&fresh), "journal", "check"]);
    assert_eq!(outcome.code, 0, "{}", outcome.render());
}

#[test]
fn journal_salvage_reports_as_json_and_never_overwrites() {
    let home = temp_home("journal-salvage-json");
    populate(&home);
    let out = home.join("salvaged.redb");
    let out_arg = out.display().to_string();
    let outcome = clio(&["--home", &home_arg(&home), "journal", "salvage", &out_arg, "--json"]);
    assert_eq!(outcome.code, 0, "{}", outcome.render());
    let report: Value = serde_json::from_str(&outcome.stdout).unwrap();
    assert_eq!(report["copied"].as_array().map(Vec::len), Some(2));
    assert_eq!(report["left"], json!([]));

    let before = std::fs::read(&out).unwrap();
    let outcome = clio(&["--home", &home_arg(&home), "journal", "salvage", &out_arg]);
    assert_eq!(outcome.code, 1, "{}", outcome.render());
    assert!(outcome.stderr.contains("already exists"), "{}", outcome.stderr);
    assert_eq!(std::fs::read(&out).unwrap(), before);
}

#[test]
fn journal_commands_without_a_journal_say_so() {
    let home = temp_home("journal-none");
    for args in [&["journal", "check"][..], &["journal", "salvage", "out.redb"][..]] {
        let mut full = vec!["--home", home.to_str().unwrap()];
        full.extend_from_slice(args);
        let outcome = clio(&full);
        assert_eq!(outcome.code, 1, "{}", outcome.render());
        assert!(outcome.stderr.contains("no journal at"), "{}", outcome.stderr);
    }
}

#[test]
fn journal_help_explains_what_check_and_salvage_do() {
    let outcome = clio(&["journal", "check", "--help"]);
    assert_eq!(outcome.code, 0, "{}", outcome.render());
    for says in
        ["without writing", "private copy", "Exit 0 when the journal is whole", "salvage OUT"]
    {
        assert!(outcome.stdout.contains(says), "{says} not in {}", outcome.stdout);
    }
    let outcome = clio(&["journal", "salvage", "--help"]);
    assert_eq!(outcome.code, 0, "{}", outcome.render());
    for says in ["must not exist", "only whole", "every id stays the same", "move OUT"] {
        assert!(outcome.stdout.contains(says), "{says} not in {}", outcome.stdout);
    }
}
