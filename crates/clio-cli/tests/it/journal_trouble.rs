//! What `clio` says when its journal cannot be used: a file that is not a journal (cut
//! short, foreign, a folder), a journal or log it may not read, a home it may not write,
//! and two first starts racing to create the journal. Each is the user's to fix (exit 1,
//! the file named, a hint saying what to do); none is an internal fault (exit 255).

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Stdio};

use clio_journal::{Journal, JournalConfig};

use crate::support::{Outcome, clio, temp_home};

/// The commands tried on each journal: one that only reads, one that starts a run.
const COMMANDS: [&[&str]; 2] = [&["runs", "list"], &["run", "no-such-flow", "--input", "x"]];

fn clio_at(home: &Path, args: &[&str]) -> Outcome {
    let mut full = vec!["--home", home.to_str().unwrap()];
    full.extend(args.iter().copied());
    clio(&full)
}

/// Runs every command of [`COMMANDS`] against `home`, checks that each exits 1 naming
/// `named` and offering a hint that contains `advice`, and that what is at the journal's
/// place (when this user can read it) is left as it was.
fn refused(home: &Path, named: &Path, advice: &str) {
    let journal = home.join("journal.redb");
    let before = std::fs::read(&journal).ok();
    for args in COMMANDS {
        let outcome = clio_at(home, args);
        let shown = outcome.render();
        assert_eq!(outcome.code, 1, "clio {args:?}: {shown}");
        let error = outcome.stderr.lines().next().unwrap_or_default();
        assert!(error.contains(&named.display().to_string()), "{args:?} names no file: {shown}");
        assert!(
            outcome.stderr.lines().any(|l| l.starts_with("hint:") && l.contains(advice)),
            "{args:?}: no hint with {advice:?}: {shown}"
        );
        assert!(std::fs::read(&journal).ok() == before, "{args:?} changed {}", journal.display());
    }
}

/// Returns whether this process reads files whatever their permissions (root), where a
/// chmod cannot make a journal unreadable.
fn reads_anything(probe: &Path) -> bool {
    std::fs::write(probe, "probe").unwrap();
    std::fs::set_permissions(probe, std::fs::Permissions::from_mode(0o000)).unwrap();
    let privileged = std::fs::read(probe).is_ok();
    let _ = std::fs::remove_file(probe);
    privileged
}

#[test]
fn a_file_that_is_not_a_journal_is_named_with_what_to_do() {
    // Three bytes: cut short before a journal's first bytes.
    let home = temp_home("trouble-tiny");
    let journal = home.join("journal.redb");
    std::fs::write(&journal, b"red").unwrap();
    refused(&home, &journal, "journal.redb (3 bytes) should be your journal");
    refused(&home, &journal, "move it away");

    // A foreign file: something else entirely.
    let home = temp_home("trouble-foreign");
    let journal = home.join("journal.redb");
    let png: Vec<u8> = b"\x89PNG\r\n\x1a\n".iter().copied().cycle().take(4096).collect();
    std::fs::write(&journal, png).unwrap();
    refused(&home, &journal, "restore it and");
    refused(&home, &journal, "`clio journal check`");

    // A folder where the journal file should be.
    let home = temp_home("trouble-folder");
    let journal = home.join("journal.redb");
    std::fs::create_dir_all(journal.join("inside")).unwrap();
    refused(&home, &journal, "is a folder where the journal file should be");
}

#[test]
fn a_journal_log_or_home_this_user_may_not_use_is_named_with_what_to_do() {
    let home = temp_home("trouble-denied");
    if reads_anything(&home.join("probe")) {
        // Root reads and writes whatever the permissions say; the folder case above is
        // what such a user can meet instead.
        return;
    }
    let journal = home.join("journal.redb");
    Journal::open(&journal, JournalConfig::default()).unwrap().close().unwrap();
    let wal = home.join("journal.redb-wal");
    let mode = |path: &Path, mode| {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap()
    };

    mode(&journal, 0o000);
    refused(&home, &journal, "check the owner and permissions of");
    mode(&journal, 0o600);

    // The journal itself opens (and redb marks it open in its header) before the log is
    // read, so only the message is checked here.
    mode(&wal, 0o000);
    for args in COMMANDS {
        let outcome = clio_at(&home, args);
        assert_eq!(outcome.code, 1, "{args:?}: {}", outcome.render());
        let wal_named = outcome.stderr.lines().next().unwrap_or_default().contains("redb-wal");
        assert!(wal_named, "{args:?}: {}", outcome.render());
        let hint = "check the owner and permissions of";
        assert!(outcome.stderr.contains(hint), "{args:?}: {}", outcome.render());
    }
    mode(&wal, 0o600);

    // A home folder this user may not write, with no journal yet.
    let empty = temp_home("trouble-home");
    mode(&empty, 0o500);
    let outcome = clio_at(&empty, &["run", "no-such-flow", "--input", "x"]);
    mode(&empty, 0o700);
    assert_eq!(outcome.code, 1, "{}", outcome.render());
    assert!(outcome.stderr.contains("check the owner and permissions of"), "{}", outcome.render());
}

/// A run's journal opens on a thread of its own while its plugins are read: when both
/// are wrong, the journal is still the error reported, as when the two came one after
/// the other, and the plugin's own error comes once the journal is mended.
#[test]
fn a_journal_that_cannot_be_used_is_reported_before_a_plugin_that_cannot_be_read() {
    let home = temp_home("trouble-and-plugin");
    let journal = home.join("journal.redb");
    std::fs::write(&journal, b"red").unwrap();
    let plugin = home.join("not-a-plugin");
    std::fs::create_dir_all(&plugin).unwrap();
    let workflow = home.join("one.json");
    std::fs::write(&workflow, r#"{"steps": [{"id": "s0", "target": "noop"}]}"#).unwrap();
    let args = [
        "workflow",
        "run",
        workflow.to_str().unwrap(),
        "--task",
        "t",
        "--plugin",
        plugin.to_str().unwrap(),
        "--no-input",
    ];
    let outcome = clio_at(&home, &args);
    assert_eq!(outcome.code, 1, "{}", outcome.render());
    let first = outcome.stderr.lines().next().unwrap_or_default();
    assert!(first.contains(&journal.display().to_string()), "{}", outcome.render());

    std::fs::remove_file(&journal).unwrap();
    let outcome = clio_at(&home, &args);
    assert_eq!(outcome.code, 1, "{}", outcome.render());
    let first = outcome.stderr.lines().next().unwrap_or_default();
    assert!(first.contains("not-a-plugin"), "{}", outcome.render());
    assert!(!first.contains("journal.redb"), "{}", outcome.render());
}

/// Two `clio` processes started at once in an empty home race to create its journal:
/// each gets the journal or a clear "already open", never a missing temporary file or an
/// internal error, and the journal they leave opens.
#[test]
fn first_starts_racing_in_an_empty_home_create_one_journal() {
    for round in 0..20 {
        let home = temp_home(&format!("trouble-race-{round}"));
        let h = home.to_str().unwrap();
        let spawn = || {
            Command::new(env!("CARGO_BIN_EXE_clio"))
                .args(["--home", h, "run", "no-such-flow", "--input", "x"])
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        };
        let (first, second) = (spawn(), spawn());
        for child in [first, second] {
            let output = child.wait_with_output().unwrap();
            let stderr = String::from_utf8_lossy(&output.stderr);
            let code = output.status.code();
            assert_eq!(code, Some(1), "round {round}: {stderr}");
            assert!(!stderr.contains("os error 2"), "round {round}: {stderr}");
            assert!(
                stderr.contains("no-such-flow") || stderr.contains("already open"),
                "round {round}: {stderr}"
            );
        }
        let list = clio_at(&home, &["runs", "list"]);
        assert_eq!(list.code, 0, "round {round}: {}", list.render());
        let _ = std::fs::remove_dir_all(&home);
    }
}
