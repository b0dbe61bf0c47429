//! SIGKILL in the middle of `clio workflow run`, then `clio runs resume`, with a tool that
//! has a side effect: guards against a side effect done twice after a crash, and against
//! a crash that loses one silently.
//!
//! The test plugin `tests/data/side-effects/counter` has `tally` (not read-only: appends
//! one line per call to `tally.log` in the workspace) and `checkpoint` (read-only). Each
//! kills the clio process that runs it (SIGKILL to its parent) when a kill file in the
//! workspace names the call, so every kill lands at an exact point: between two calls
//! (the run resumes to the uninterrupted answer, every effect done once), or while a
//! `tally` call runs, before or after its effect (the runtime does not run it again: it
//! raises `CallInterrupted`, and the CLI reports the call whatever the outcome).
//!
//! The workflow (`workflow.json`) runs, in order: `first` (tally), `pause` (checkpoint),
//! `agent` (a react loop on the scripted model: tally `agent-1`, checkpoint `agent-mid`,
//! tally `agent-2`, one per turn, then an answer), `last` (tally).

use insta::assert_snapshot;

use crate::support::{Sandbox, clio};

/// Every tally of an uninterrupted run, in order.
const ALL_TALLIES: [&str; 4] = ["first", "agent-1", "agent-2", "last"];

/// A home and a workspace of their own, whose run is the workflow.
pub(crate) fn case(name: &str) -> Sandbox {
    let command = [
        "workflow",
        "run",
        "crates/clio-cli/tests/data/side-effects/workflow.json",
        "--task",
        "count",
        "--plugin",
        "crates/clio-cli/tests/data/side-effects/counter",
        "--models",
        "crates/clio-cli/tests/data/side-effects/models.toml",
    ];
    Sandbox::new(&format!("side-effects-{name}"), &command)
}

/// Returns the status of run 1.
fn status(case: &Sandbox) -> String {
    let listed = clio(&["--home", case.h(), "runs", "list", "--json"]);
    let runs: serde_json::Value = serde_json::from_str(&listed.stdout).unwrap();
    runs[0]["status"].as_str().unwrap_or_default().to_owned()
}

/// Asserts that no tally happened more than once.
fn assert_at_most_once(tallies: &[String], what: &str) {
    for label in ALL_TALLIES {
        let n = tallies.iter().filter(|t| *t == label).count();
        assert!(n <= 1, "{what}: {label} tallied {n} times: {tallies:?}");
    }
}

/// The uninterrupted run's answer, in a home named after `test`.
fn reference(test: &str) -> String {
    let case = case(&format!("{test}-reference"));
    let outcome = case.run(None);
    assert_eq!(outcome.code, 0, "{}", outcome.render());
    assert_eq!(case.tallies(), ALL_TALLIES);
    outcome.stdout
}

#[test]
fn a_run_killed_between_calls_resumes_with_every_side_effect_once() {
    let reference = reference("between");
    // Each point: the kill file, and the tallies done before the kill.
    let points: [(&str, &[&str]); 2] = [
        // Between two workflow steps: `first` is done, the checkpoint step is running.
        ("kill-at-pause", &["first"]),
        // Inside the react loop, between its two tallies.
        ("kill-at-agent-mid", &["first", "agent-1"]),
    ];
    for (kill, before) in points {
        let case = case(kill);
        let killed = case.run(Some(kill));
        assert_eq!(killed.code, -1, "{kill}: the process is killed: {}", killed.render());
        assert_eq!(case.tallies(), before, "{kill}");
        assert_eq!(status(&case), "interrupted", "{kill}");

        let resumed = case.resume();
        assert_eq!(resumed.code, 0, "{kill}: {}", resumed.render());
        assert_eq!(resumed.stdout, reference, "{kill}");
        assert_eq!(resumed.stderr, "", "{kill}: nothing to report");
        assert_eq!(case.tallies(), ALL_TALLIES, "{kill}: every side effect exactly once");
        assert_eq!(status(&case), "succeeded", "{kill}");

        // Resuming a finished run does nothing again.
        let again = case.resume();
        assert_eq!(again.stdout, reference, "{kill}");
        assert_eq!(case.tallies(), ALL_TALLIES, "{kill}");
    }
}

#[test]
fn a_side_effecting_call_cut_short_is_reported_and_never_run_again() {
    let reference = reference("cut-short");
    // Each point: the kill file, and the tallies there are at the end.
    let points: [(&str, &[&str]); 4] = [
        // The agent's second tally did its effect, then the process died: done once.
        ("kill-after-agent-2", &ALL_TALLIES),
        // The agent's first tally was running, before its effect: never done.
        ("kill-before-agent-1", &["first", "agent-2", "last"]),
        // A workflow step's tally, after its effect.
        ("kill-after-first", &["first"]),
        // A workflow step's tally, before its effect.
        ("kill-before-last", &["first", "agent-1", "agent-2"]),
    ];
    let mut all = String::new();
    for (kill, tallies) in points {
        let case = case(kill);
        let killed = case.run(Some(kill));
        assert_eq!(killed.code, -1, "{kill}: the process is killed: {}", killed.render());
        let resumed = case.resume();
        assert_eq!(case.tallies(), tallies, "{kill}");
        assert_at_most_once(&case.tallies(), kill);
        assert!(
            resumed.stderr.contains("were cut short when a process stopped"),
            "{kill}: the cut-short call is reported: {}",
            resumed.render()
        );
        // The report stays: a later resume says it again, and does nothing again.
        let again = case.resume();
        assert_eq!(again.render(), resumed.render(), "{kill}");
        assert_eq!(case.tallies(), tallies, "{kill}");
        let tree = clio(&["--home", case.h(), "runs", "tree", "1"]);
        let failed = |l: &str| l.contains(" tool tally ") && l.contains("[failed]");
        assert!(tree.stdout.lines().any(failed), "{kill}: {}", tree.render());
        all.push_str(&format!("## {kill}\n{}", resumed.render()));
    }
    // A react loop gets the interruption as the tool's result and goes on: the scripted
    // model does not read it, so its answer is the uninterrupted run's; only the report
    // (exit 0, a warning) tells the two apart. A workflow step whose tool was cut short
    // fails, and so does the run (no editor repairs it).
    assert!(all.contains(&reference), "{all}");
    assert_snapshot!(all);
}

#[test]
fn the_json_outcome_lists_the_calls_cut_short() {
    let case = case("json");
    let killed = case.run(Some("kill-after-agent-2"));
    assert_eq!(killed.code, -1, "{}", killed.render());
    let resumed = clio(&["--home", case.h(), "runs", "resume", "1", "--json"]);
    assert_eq!(resumed.code, 0, "{}", resumed.render());
    let value: serde_json::Value = serde_json::from_str(&resumed.stdout).unwrap();
    assert_eq!(value["status"], "succeeded");
    assert_eq!(
        value["interrupted_calls"],
        serde_json::json!([{"task": 6, "number": 6, "tool": "tally", "parent": 3}])
    );
}

/// Where the records of a paged write-ahead log lie: (offset, length) of each batch's first
/// copy (each batch starts on a 4 KiB page of its own and is written twice; the first holds
/// the generation's 32-byte header before its record).
fn log_records(log: &[u8]) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut at = 0;
    loop {
        let record = if at == 0 { 32 } else { at };
        if log.get(record..record + 4) != Some(b"CLW3".as_slice()) {
            return out;
        }
        let len = u32::from_le_bytes([
            log[record + 4],
            log[record + 5],
            log[record + 6],
            log[record + 7],
        ]);
        out.push((record, 24 + len as usize));
        at += 2 * (record - at + 24 + len as usize).next_multiple_of(4096);
    }
}

#[test]
fn a_damaged_log_is_refused_and_no_side_effect_runs_twice() {
    let case = case("damaged-log");
    let killed = case.run(Some("kill-at-agent-mid"));
    assert_eq!(killed.code, -1, "the process is killed: {}", killed.render());
    let before = case.tallies();
    assert_eq!(before, ["first", "agent-1"]);
    let journal = std::path::Path::new(case.h()).join("journal.redb");
    let wal = std::path::Path::new(case.h()).join("journal.redb-wal");
    let log = std::fs::read(&wal).unwrap();
    let records = log_records(&log);
    assert!(records.len() > 2, "the run's writes are in the log: {}", records.len());
    let (at, len) = records[records.len() / 2];
    let damages: [(&str, Option<Vec<u8>>); 3] = [
        ("a flipped bit", {
            let mut flipped = log.clone();
            flipped[at + len / 2] ^= 0x04;
            Some(flipped)
        }),
        ("a log cut mid-way", Some(log[..at + len / 2].to_vec())),
        ("a missing log", None),
    ];
    for (what, damaged) in damages {
        match &damaged {
            Some(bytes) => std::fs::write(&wal, bytes).unwrap(),
            None => std::fs::remove_file(&wal).unwrap(),
        }
        let files = (std::fs::read(&journal).unwrap(), std::fs::read(&wal).ok());
        for args in [&["runs", "list"][..], &["runs", "resume", "1"], &["runs", "show", "1"]] {
            let mut full = vec!["--home", case.h()];
            full.extend_from_slice(args);
            let out = clio(&full);
            assert_eq!(out.code, 1, "{what}: {args:?}: {}", out.render());
            assert!(
                out.stderr.contains("journal.redb-wal"),
                "{what}: names the log: {}",
                out.render()
            );
            assert_eq!(case.tallies(), before, "{what}: {args:?}: nothing ran again");
            let now = (std::fs::read(&journal).unwrap(), std::fs::read(&wal).ok());
            assert!(now == files, "{what}: {args:?}: a refused open changed the files");
        }
    }
    // With its log back, the run resumes to the uninterrupted answer, each effect once.
    std::fs::write(&wal, &log).unwrap();
    let resumed = case.resume();
    assert_eq!(resumed.code, 0, "{}", resumed.render());
    assert_eq!(case.tallies(), ALL_TALLIES);
}

#[test]
fn ctrl_c_exits_130_and_the_run_resumes_with_each_effect_once() {
    let case = case("ctrl-c");
    let interrupted = case.run(Some("int-at-pause"));
    assert_eq!(interrupted.code, 130, "Ctrl-C exits 130: {}", interrupted.render());
    assert!(interrupted.stderr.contains("interrupted: run 1 stopped"), "{}", interrupted.render());
    assert!(interrupted.stderr.contains("clio runs resume 1"), "{}", interrupted.render());
    assert_eq!(case.tallies(), ["first"]);
    let resumed = case.resume();
    assert_eq!(resumed.code, 0, "{}", resumed.render());
    assert_eq!(case.tallies(), ALL_TALLIES);
}

#[test]
fn a_finished_or_cancelled_run_refuses_cancel_answer_and_resume() {
    let case = case("lifecycle");
    let done = case.run(None);
    assert_eq!(done.code, 0, "{}", done.render());
    let cancel = clio(&["--home", case.h(), "runs", "cancel", "1"]);
    assert_eq!(cancel.code, 1, "{}", cancel.render());
    assert!(
        cancel.stderr.contains("cannot cancel run 1: it has ended (succeeded)"),
        "{}",
        cancel.render()
    );
    let answer = clio(&["--home", case.h(), "runs", "answer", "1", "1", "yes"]);
    assert_eq!(answer.code, 1, "{}", answer.render());
    assert!(answer.stderr.contains("it has ended (succeeded)"), "{}", answer.render());
    assert_eq!(status(&case), "succeeded", "nothing changed");

    // A run cancelled while interrupted: resuming it says so at once, without replaying.
    let other = super::side_effects::case("lifecycle-cancelled");
    let killed = other.run(Some("kill-at-pause"));
    assert_eq!(killed.code, -1, "{}", killed.render());
    let cancel = clio(&["--home", other.h(), "runs", "cancel", "1"]);
    assert_eq!(cancel.code, 0, "{}", cancel.render());
    let resumed = clio(&["--home", other.h(), "runs", "resume", "1"]);
    assert_eq!(resumed.code, 1, "{}", resumed.render());
    assert!(resumed.stderr.contains("run 1 was cancelled"), "{}", resumed.render());
    assert!(!resumed.stderr.contains("✓"), "no progress is replayed: {}", resumed.render());
    let answer = clio(&["--home", other.h(), "runs", "answer", "1", "1", "yes"]);
    assert_eq!(answer.code, 1, "{}", answer.render());
    assert!(answer.stderr.contains("it has ended (cancelled)"), "{}", answer.render());
}
