//! `clio runs replay N` checks a recorded run against the current code without running
//! or writing anything; a resume that meets a mismatch stops before running anything new
//! and says what to do; a run near its entry cap says so.
//!
//! The runs are a workflow of two tool steps from the crash tests' plugin: `tally`
//! (side-effecting: one line per call in the workspace's `tally.log`, so a call that ran
//! shows) then `checkpoint` (read-only). A mismatching history is made with the journal
//! library: a recorded call at a place no current code reaches (`OLD_PLACE`), as a flow
//! edited since the run was recorded would leave behind. (Tool steps only: an agent's
//! worker records its steps in a scope of its own, which `Runtime::check_replay` does not
//! count as reached when it replays the worker's recorded result, so an agent's finished
//! run does not replay cleanly yet.)

use std::path::PathBuf;

use clio_journal::{EntryKind, Journal, JournalConfig, NewEntry, NewRun, RunId, RunStatus};
use insta::assert_snapshot;
use serde_json::{Value, json};

use crate::support::{Outcome, clio, temp_home};

/// The replay identity of a call the current code never makes: a call site in a file the
/// flow no longer has.
const OLD_PLACE: &str = "src/old.rs:1:1:0000000000000000#0";

const PLUGIN: &str = "crates/clio-cli/tests/data/side-effects/counter";
const MODELS: &str = "crates/clio-cli/tests/data/side-effects/models.toml";

/// A home with a workspace and the two-step workflow in it.
struct Case {
    home: PathBuf,
    workspace: PathBuf,
    workflow: PathBuf,
}

impl Case {
    fn new(name: &str) -> Case {
        let home = temp_home(&format!("replay-{name}"));
        let workspace = home.join("workspace");
        std::fs::create_dir_all(&workspace).unwrap();
        let workflow = home.join("tools.json");
        let steps = json!({ "steps": [
            { "id": "first", "target": "tally", "input": { "label": "first" } },
            { "id": "pause", "target": "checkpoint", "input": { "label": "pause" }, "after": ["first"] }
        ]});
        std::fs::write(&workflow, steps.to_string()).unwrap();
        // The plugin's code runs unattended only once it is trusted.
        let trusted = clio(&["--home", home.to_str().unwrap(), "plugin", "trust", PLUGIN]);
        assert_eq!(trusted.code, 0, "{}", trusted.render());
        Case { home, workspace, workflow }
    }

    fn h(&self) -> &str {
        self.home.to_str().unwrap()
    }

    /// Runs the workflow (run 1 in a fresh home), with `extra` flags.
    fn run(&self, extra: &[&str]) -> Outcome {
        let mut args = vec!["--home", self.h(), "workflow", "run"];
        args.extend([self.workflow.to_str().unwrap(), "--task", "count", "--plugin", PLUGIN]);
        args.extend(["--models", MODELS, "--workspace", self.workspace.to_str().unwrap()]);
        args.extend(extra.iter().copied());
        clio(&args)
    }

    /// Runs `clio --home HOME args...`.
    fn clio(&self, args: &[&str]) -> Outcome {
        let mut full = vec!["--home", self.h()];
        full.extend(args.iter().copied());
        clio(&full)
    }

    fn journal(&self) -> Journal {
        Journal::open(self.home.join("journal.redb"), JournalConfig::default()).unwrap()
    }

    /// Returns run `run`'s record and entries as JSON, to compare before and after.
    fn snapshot(&self, run: u64) -> Value {
        let journal = self.journal();
        let record = journal.run(RunId(run)).unwrap().unwrap();
        let entries = journal.entries(RunId(run)).unwrap();
        let value = json!({ "run": record, "entries": entries });
        journal.close().unwrap();
        value
    }

    /// Returns the status of run `run`.
    fn status(&self, run: u64) -> RunStatus {
        let journal = self.journal();
        let status = journal.run(RunId(run)).unwrap().unwrap().status;
        journal.close().unwrap();
        status
    }

    /// Records in run `run` a call of `tally` at `OLD_PLACE`, which the code never reaches.
    fn plant_old_call(&self, run: u64) {
        let journal = self.journal();
        // A call entry as the runtime writes it: the command itself.
        let payload = json!({"command": "call", "target": "tally", "input": {}});
        let entry = NewEntry::new(EntryKind::Call, payload).with_identity(OLD_PLACE);
        journal.append(RunId(run), entry).unwrap();
        journal.close().unwrap();
    }

    /// Creates a run of the same flow, input and plugins as run `from`, with status
    /// `status`, launched as `from` was, that recorded the workflow's limits (its first
    /// entry) and then the old call; returns its id. Its replay or resume makes a new call
    /// (the workflow's first step) while the history holds a call of the same scope that
    /// the code never reaches.
    fn copy_with_old_call(&self, from: u64, status: RunStatus) -> u64 {
        let journal = self.journal();
        let record = journal.run(RunId(from)).unwrap().unwrap();
        let copy = journal
            .create_run(NewRun {
                flow: record.flow,
                input: record.input,
                input_digest: record.input_digest,
                fingerprint: record.fingerprint,
                owner: "test".into(),
                launch: record.launch,
            })
            .unwrap();
        let update =
            clio_journal::RunUpdate { status: Some(status), ..clio_journal::RunUpdate::default() };
        journal.update_run(copy, update).unwrap();
        let limits = journal.entry_by_identity(RunId(from), "key:wf-limits").unwrap().unwrap();
        let entry = NewEntry::new(limits.kind, limits.payload).with_identity("key:wf-limits");
        journal.append(copy, entry).unwrap();
        journal.close().unwrap();
        self.plant_old_call(copy.0);
        copy.0
    }

    /// Returns the lines of tally.log: one per `tally` call that ran.
    fn tallies(&self) -> Vec<String> {
        let log = std::fs::read_to_string(self.workspace.join("tally.log")).unwrap_or_default();
        log.lines().map(str::to_owned).collect()
    }
}

/// Replaces the home folder, whose name holds the test process id.
fn redact(case: &Case, text: &str) -> String {
    text.replace(case.h(), "[home]")
}

#[test]
fn a_finished_run_replays_cleanly_and_nothing_is_written() {
    let case = Case::new("clean");
    let ran = case.run(&["--quiet"]);
    assert_eq!(ran.code, 0, "{}", ran.render());
    let before = case.snapshot(1);

    let replay = case.clio(&["runs", "replay", "1"]);
    assert_eq!(replay.code, 0, "{}", replay.render());
    assert_snapshot!(replay.render(), @r"
    exit: 0
    --- stdout
    run 1 replays cleanly: 2 of 2 recorded commands reached; the current code ends it as recorded (succeeded)
    ");
    assert_eq!(case.snapshot(1), before, "the replay changed the run's record or entries");
    assert_eq!(case.tallies(), ["first"], "the replay ran a tool");

    let json = case.clio(&["runs", "replay", "1", "--json"]);
    assert_eq!(json.code, 0, "{}", json.render());
    let value: Value = serde_json::from_str(&json.stdout).unwrap();
    assert_eq!(
        value,
        json!({"run": 1, "finished": true, "commands": 2, "reached": 2, "clean": true, "outcome": "succeeded"})
    );
}

#[test]
fn a_recorded_call_the_code_no_longer_reaches_is_a_mismatch() {
    let case = Case::new("unreached");
    let ran = case.run(&["--quiet"]);
    assert_eq!(ran.code, 0, "{}", ran.render());
    case.plant_old_call(1);
    let before = case.snapshot(1);

    let replay = case.clio(&["runs", "replay", "1"]);
    assert_eq!(replay.code, 1, "{}", replay.render());
    assert_snapshot!(replay.render(), @r#"
    exit: 1
    --- stdout
    run 1 does not replay against the current code: 2 of 3 recorded commands reached
      at:       src/old.rs:1:1:0000000000000000#0
      recorded: call tally
      now:      nothing: the current code ended without reaching it
      recorded, not reached by the current code (1):
        call tally at src/old.rs:1:1:0000000000000000#0 (side-effecting)
    --- stderr
    error: run 1 does not replay against the current code
    hint: a call that moved: give it a `key` so that its identity survives edits
    hint: new code: guard it with `ctx.patched("id")` so that runs recorded before the change take the old path
    hint: or give up on the run: `clio runs cancel 1`
    "#);
    assert_eq!(case.snapshot(1), before, "the replay changed the run's record or entries");
    assert_eq!(case.tallies(), ["first"]);
}

/// A replay names the new call's place and the recorded call it departs from.
#[test]
fn a_new_call_while_the_history_holds_an_unreached_one_names_both_places() {
    let case = Case::new("new-call");
    let ran = case.run(&["--quiet"]);
    assert_eq!(ran.code, 0, "{}", ran.render());
    let run = case.copy_with_old_call(1, RunStatus::Succeeded);
    let before = case.snapshot(run);

    let replay = case.clio(&["runs", "replay", &run.to_string()]);
    assert_eq!(replay.code, 1, "{}", replay.render());
    assert_eq!(case.snapshot(run), before, "the replay changed the run's record or entries");
    assert_snapshot!(replay.render());
    assert_eq!(case.tallies(), ["first"], "the replay ran the new call");
}

/// A resume that meets the mismatch runs nothing, names both places, says what to do,
/// leaves the run interrupted and records the mismatch in the run; the run can still be
/// cancelled as the hint says.
#[test]
fn a_resume_that_meets_a_mismatch_runs_nothing_and_says_what_to_do() {
    let case = Case::new("resume-mismatch");
    let ran = case.run(&["--quiet"]);
    assert_eq!(ran.code, 0, "{}", ran.render());
    let run = case.copy_with_old_call(1, RunStatus::Interrupted);
    assert_eq!(run, 2);

    let resume = case.clio(&["runs", "resume", "2", "--quiet"]);
    assert_eq!(resume.code, 1, "{}", resume.render());
    assert_snapshot!(redact(&case, &resume.render()));
    assert_eq!(case.tallies(), ["first"], "the resume ran the new call");
    assert_eq!(case.status(run), RunStatus::Interrupted, "the run stays resumable");

    let json = case.clio(&["runs", "resume", "2", "--json"]);
    assert_eq!(json.code, 1, "{}", json.render());
    let value: Value = serde_json::from_str(&json.stdout).unwrap();
    assert_eq!(value["status"], "interrupted", "{value}");
    assert_eq!(value["error"]["details"]["identity"], "key:wf:first", "{value}");

    let events = case.clio(&["runs", "events", "2"]);
    assert!(
        events.stdout.contains("replay mismatch, nothing ran: nondeterminism at key:wf:first"),
        "{}",
        events.render()
    );
    let cancel = case.clio(&["runs", "cancel", "2"]);
    assert_eq!(cancel.code, 0, "{}", cancel.render());
    assert_eq!(case.tallies(), ["first"]);
}

#[test]
fn a_run_near_its_entry_cap_warns_once_and_shows_the_warning() {
    let case = Case::new("entries");
    // The workflow records 4 counted entries (the limits, two calls, the final view), 5
    // if a live view comes between its two steps: the warning comes at 4 of 5.
    std::fs::write(case.home.join("config.toml"), "[limits]\nmax_entries = 5\n").unwrap();
    let message =
        "run 1 has used 4 of its 5 journal entries; at 5 it fails with flow_checkpoint_limit";

    let ran = case.run(&[]);
    assert_eq!(ran.code, 0, "{}", ran.render());
    let warning = format!("warning: {message}\n");
    assert_eq!(ran.stderr.matches(&warning).count(), 1, "{}", ran.render());

    let quiet = Case::new("entries-quiet");
    std::fs::copy(case.home.join("config.toml"), quiet.home.join("config.toml")).unwrap();
    let ran = quiet.run(&["--quiet"]);
    assert_eq!(ran.code, 0, "{}", ran.render());
    assert_eq!(ran.stderr, warning, "even --quiet warns");

    for command in ["show", "events"] {
        let shown = case.clio(&["runs", command, "1"]);
        assert_eq!(shown.code, 0, "{}", shown.render());
        let line = shown.stdout.lines().find(|l| l.contains("warning: ")).unwrap_or_default();
        // An event's line: its kind, then the warning (`runs events` also shows its time).
        let (kind, rest) = line.split_once("warning: ").unwrap_or_default();
        assert!(kind.trim_end().ends_with("event"), "{line}");
        assert_eq!(rest, message, "{line}");
    }
}
