//! Issue 44 item 5 and the journal defects of item 7, through the `clio` binary: after a
//! crash, commands that only read share the journal and a refusal names who holds it; a
//! journal is its owner's only; another user is told "permission denied"; a damaged file's
//! panic inside the storage engine does not print before CLIO's error.

use std::path::{Path, PathBuf};

use clio_journal::{EntryKind, Journal, JournalConfig, NewEntry, NewRun};
use serde_json::json;

use crate::support::{Outcome, clio, temp_home};

/// Writes a journal with one run of a few entries under `live` and copies its file and its
/// log into `home` while it is open: the copy is what a SIGKILL leaves (records in the log
/// that the file lacks). Returns the live journal, still open.
fn crashed_home(live: &Path, home: &Path) -> Journal {
    let journal = Journal::open(live.join("journal.redb"), JournalConfig::default()).unwrap();
    let run = journal
        .create_run(NewRun {
            flow: "demo".into(),
            input: json!("task"),
            input_digest: "d".into(),
            fingerprint: "f".into(),
            owner: "clio-4000000".into(),
            launch: None,
        })
        .unwrap();
    for n in 0..6 {
        let entry =
            NewEntry::new(EntryKind::Step, json!({ "n": n })).with_identity(format!("s{n}"));
        journal.append(run, entry).unwrap();
    }
    for name in ["journal.redb", "journal.redb-wal"] {
        std::fs::copy(live.join(name), home.join(name)).unwrap();
    }
    journal
}

fn files(home: &Path) -> Vec<Option<Vec<u8>>> {
    ["journal.redb", "journal.redb-wal"].iter().map(|n| std::fs::read(home.join(n)).ok()).collect()
}

/// Twenty commands that only read, all at once, on a journal a killed process left with
/// records to recover: every one succeeds (each used to take the journal to recover it, and
/// 3 of 20 failed "already open in another process" though no run process was left), and
/// none of them wrote to it.
#[test]
fn readers_after_a_crash_share_the_journal() {
    let live = temp_home("sharing-live");
    let home = temp_home("sharing");
    let _live = crashed_home(&live, &home);
    let before = files(&home);
    let h = home.to_str().unwrap().to_owned();
    let commands: Vec<std::thread::JoinHandle<(Vec<&str>, Outcome)>> = (0..20)
        .map(|i| {
            let h = h.clone();
            std::thread::spawn(move || {
                let args: Vec<&str> = match i % 4 {
                    0 => vec!["runs", "list"],
                    1 => vec!["runs", "show", "1"],
                    2 => vec!["runs", "events", "1"],
                    _ => vec!["runs", "export", "1"],
                };
                let mut full = vec!["--home", h.as_str()];
                full.extend(args.iter().copied());
                (args, clio(&full))
            })
        })
        .collect();
    for command in commands {
        let (args, outcome) = command.join().unwrap();
        assert_eq!(outcome.code, 0, "clio {}: {}", args.join(" "), outcome.render());
    }
    assert_eq!(files(&home), before, "a reader wrote to the journal");
    // The first command that writes recovers it for good, and readers still see it all.
    let list = clio(&["--home", &h, "runs", "list", "--json"]);
    assert_eq!(list.code, 0, "{}", list.render());
}

/// A command refused because another process writes the journal names that process: its
/// pid, its command line and that it writes.
#[test]
fn already_open_names_who_holds_the_journal() {
    let home = temp_home("sharing-held");
    let held = Journal::open(home.join("journal.redb"), JournalConfig::default()).unwrap();
    let h = home.to_str().unwrap();
    for args in [vec!["runs", "list"], vec!["journal", "check"]] {
        let mut full = vec!["--home", h];
        full.extend(args.iter().copied());
        let outcome = clio(&full);
        assert_eq!(outcome.code, 1, "{}", outcome.render());
        let named = format!("already open in another process: pid {} (", std::process::id());
        assert!(outcome.stderr.contains(&named), "{}", outcome.render());
        assert!(outcome.stderr.contains("), writing"), "{}", outcome.render());
    }
    drop(held);
}

/// The journal a run writes, and its log, are their owner's only in a home others may read.
#[test]
fn a_journal_in_a_world_readable_home_is_its_owners_only() {
    use std::os::unix::fs::PermissionsExt;
    let home = temp_home("sharing-modes");
    std::fs::set_permissions(&home, std::fs::Permissions::from_mode(0o755)).unwrap();
    let h = home.to_str().unwrap();
    let ran = clio(&[
        "--home",
        h,
        "run",
        "examples/agents/minimal.toml",
        "--input",
        "x",
        "--models",
        "examples/models/models.toml",
    ]);
    assert_eq!(ran.code, 0, "{}", ran.render());
    for name in ["journal.redb", "journal.redb-wal"] {
        let mode = std::fs::metadata(home.join(name)).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{name} is {mode:o}");
    }
}

/// Runs `clio` as user `nobody` (when this test runs as root and `setpriv` is there):
/// `None` otherwise.
fn clio_as_nobody(args: &[&str]) -> Option<Outcome> {
    // Only root may switch to another user.
    let uid = std::process::Command::new("id").arg("-u").output().ok()?;
    if String::from_utf8_lossy(&uid.stdout).trim() != "0" {
        return None;
    }
    let output = std::process::Command::new("setpriv")
        .args(["--reuid=nobody", "--regid=nogroup", "--clear-groups"])
        .arg(env!("CARGO_BIN_EXE_clio"))
        .args(args)
        .current_dir(crate::support::workspace_root())
        .env_remove("RUST_LOG")
        .output()
        .ok()?;
    Some(Outcome {
        code: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    })
}

/// Another user's commands on a journal are told "permission denied" (with the hint on
/// owners), never "already open", even while its owner holds it.
#[test]
fn another_users_command_is_told_permission_denied() {
    let home = temp_home("sharing-other-user");
    std::fs::create_dir_all(&home).unwrap();
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&home, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let held = Journal::open(home.join("journal.redb"), JournalConfig::default()).unwrap();
    let h = home.to_str().unwrap();
    let write = [
        "--home",
        h,
        "run",
        "examples/agents/minimal.toml",
        "--input",
        "x",
        "--models",
        "examples/models/models.toml",
    ];
    for args in [&["--home", h, "runs", "list"][..], &write[..]] {
        let Some(outcome) = clio_as_nobody(args) else { return };
        assert_eq!(outcome.code, 1, "{}", outcome.render());
        assert!(outcome.stderr.contains("Permission denied"), "{}", outcome.render());
        assert!(!outcome.stderr.contains("already open"), "{}", outcome.render());
    }
    drop(held);
}

/// A damaged journal whose damage makes the storage engine panic prints CLIO's own error,
/// not the panic's message and backtrace before it.
#[test]
fn a_panic_of_the_storage_engine_prints_only_clios_error() {
    let live = temp_home("sharing-damage-live");
    let source: PathBuf = {
        let journal = crashed_home(&live, &temp_home("sharing-damage-unused"));
        journal.close().unwrap();
        live.join("journal.redb")
    };
    let bytes = std::fs::read(&source).unwrap();
    let home = temp_home("sharing-damage");
    let h = home.to_str().unwrap();
    let mut caught = 0;
    // The page after the header's (redb's table of tables in a file this small), as the
    // journal crate's own test of the same damage.
    for at in (4096..4704.min(bytes.len())).step_by(8) {
        let mut damaged = bytes.clone();
        damaged[at] ^= 0xff;
        std::fs::write(home.join("journal.redb"), &damaged).unwrap();
        let _ = std::fs::remove_file(home.join("journal.redb-wal"));
        let outcome = clio(&["--home", h, "runs", "list"]);
        assert!(!outcome.stderr.contains("panicked"), "byte {at}: {}", outcome.render());
        assert!(!outcome.stderr.contains("backtrace"), "byte {at}: {}", outcome.render());
        if outcome.stderr.contains("the storage engine failed") {
            assert_eq!(outcome.code, 1, "{}", outcome.render());
            assert!(outcome.stderr.starts_with("error: "), "{}", outcome.render());
            caught += 1;
        }
    }
    assert!(caught > 0, "no damage made the storage engine panic: the test needs new offsets");
}
