//! Runs pinned to the agent that launched them: `clio run AGENT` records the checksum of
//! the agent's frozen spec; once the agent file changes, `runs resume`, `runs answer` and
//! `runs replay` refuse the run, naming each changed field, until the change is accepted
//! with `--accept-changed-agent`, which the run records.
//!
//! The agent writes a note with `write_note`, which the home's config makes ask for
//! permission, so its run waits for an answer: a run left to be resumed.

use std::path::PathBuf;

use clio_journal::{Journal, JournalConfig, RunId, RunUpdate};
use insta::assert_snapshot;
use serde_json::Value;

use crate::support::{Outcome, clio, temp_home};

const AGENT: &str = "id = \"pinned\"\nversion = \"1.0.0\"\nrole = \"Keeps notes.\"\n";
const CHANGED: &str = "id = \"pinned\"\nversion = \"1.1.0\"\nrole = \"Keeps careful notes.\"\n";

const SCRIPT: &str = r#"
[[script]]
agent = "pinned"
prompt = "Note the batch"

[[script.turn]]
text = "I will note it."
tool_calls = [{ name = "write_note", arguments = { note = "batch 7 passes" } }]

[[script.turn]]
text = "Noted."
"#;

/// A home with the agent, a scripted model for it, a workspace, and a config that makes
/// `write_note` ask for permission.
struct Case {
    home: PathBuf,
}

impl Case {
    fn new(name: &str) -> Case {
        let home = temp_home(&format!("pinning-{name}"));
        std::fs::create_dir_all(home.join("workspace")).unwrap();
        std::fs::write(home.join("agent.toml"), AGENT).unwrap();
        std::fs::write(home.join("script.toml"), SCRIPT).unwrap();
        let models = "[[provider]]\nname = \"scripted\"\nkind = \"scripted\"\nscript = \"script.toml\"\n\n\
                      [[model]]\naccount = \"offline\"\nid = \"notes\"\nprovider = \"scripted\"\n\
                      capabilities = { tool_calling = true }\n";
        std::fs::write(home.join("models.toml"), models).unwrap();
        let config = "[tools]\npermissions = { \"write_note\" = \"ask\" }\n";
        std::fs::write(home.join("config.toml"), config).unwrap();
        Case { home }
    }

    fn h(&self) -> &str {
        self.home.to_str().unwrap()
    }

    fn path(&self, name: &str) -> String {
        self.home.join(name).to_str().unwrap().to_owned()
    }

    /// Runs `clio --home HOME args...`.
    fn clio(&self, args: &[&str]) -> Outcome {
        let mut full = vec!["--home", self.h()];
        full.extend(args.iter().copied());
        clio(&full)
    }

    /// Starts the agent's run (run 1); it waits for permission to write the note. Returns
    /// the question's id.
    fn start(&self) -> String {
        let (agent, models, workspace) =
            (self.path("agent.toml"), self.path("models.toml"), self.path("workspace"));
        let outcome = self.clio(&[
            "run",
            &agent,
            "--input",
            "Note the batch",
            "--models",
            &models,
            "--workspace",
            &workspace,
            "--json",
        ]);
        assert_eq!(outcome.code, 0, "{}", outcome.render());
        let value: Value = serde_json::from_str(&outcome.stdout).unwrap();
        assert_eq!(value["status"], "awaiting_input", "{value}");
        value["questions"][0]["id"].as_u64().unwrap().to_string()
    }

    /// Returns the checksum `clio agent spec` prints for the agent file as it is now.
    fn checksum(&self) -> String {
        let spec = self.clio(&["agent", "spec", &self.path("agent.toml"), "--json"]);
        assert_eq!(spec.code, 0, "{}", spec.render());
        let value: Value = serde_json::from_str(&spec.stdout).unwrap();
        value["checksum"].as_str().unwrap().to_owned()
    }

    /// Returns run 1's launch as its journal record keeps it.
    fn launch(&self) -> Value {
        let journal =
            Journal::open(self.home.join("journal.redb"), JournalConfig::default()).unwrap();
        let record = journal.run(RunId(1)).unwrap().unwrap();
        journal.close().unwrap();
        record.launch.expect("run 1 has a launch")
    }

    /// Returns run 1's events with `event` = `name`.
    fn events(&self, name: &str) -> Vec<Value> {
        let events = self.clio(&["runs", "events", "1", "--json"]);
        assert_eq!(events.code, 0, "{}", events.render());
        let entries: Vec<Value> = serde_json::from_str(&events.stdout).unwrap();
        entries.into_iter().map(|e| e["payload"].clone()).filter(|p| p["event"] == name).collect()
    }
}

#[test]
fn a_changed_agent_is_refused_until_the_change_is_accepted() {
    let case = Case::new("changed");
    let question = case.start();
    let recorded = case.checksum();
    let show = case.clio(&["runs", "show", "1"]);
    let pinned = format!("  agent:  {} (spec checksum {recorded})\n", case.path("agent.toml"));
    assert!(show.stdout.contains(&pinned), "{}", show.render());

    std::fs::write(case.home.join("agent.toml"), CHANGED).unwrap();
    let now = case.checksum();
    let refused = case.clio(&["runs", "resume", "1", "--quiet"]);
    assert_eq!(refused.code, 1, "{}", refused.render());
    let text = refused.render().replace(case.h(), "[home]");
    let text = text.replace(&recorded, "[recorded]").replace(&now, "[now]");
    assert_snapshot!(text, @r#"
    exit: 1
    --- stderr
    error: run 1 is pinned to agent [home]/agent.toml with spec checksum [recorded], but the file now freezes to [now]: version was "1.0.0", now "1.1.0"; role was "Keeps notes.", now "Keeps careful notes."
    hint: pass --accept-changed-agent to continue under the changed spec
    hint: or restore the agent file as it was; `clio agent spec FILE` prints its checksum
    "#);
    // Answering and replaying are refused the same way, and nothing was recorded.
    let answer = case.clio(&["runs", "answer", "1", &question, "yes"]);
    assert_eq!(answer.code, 1, "{}", answer.render());
    assert!(answer.stderr.contains("role was \"Keeps notes.\""), "{}", answer.render());
    let replay = case.clio(&["runs", "replay", "1"]);
    assert_eq!(replay.code, 1, "{}", replay.render());
    assert!(replay.stderr.contains("version was \"1.0.0\""), "{}", replay.render());
    assert!(case.events("agent_changed_accepted").is_empty());

    let accepted = case.clio(&["runs", "resume", "1", "--quiet", "--accept-changed-agent"]);
    assert_eq!(accepted.code, 0, "{}", accepted.render());
    assert!(accepted.stdout.contains("run 1 is waiting for an answer"), "{}", accepted.render());
    assert!(accepted.stderr.contains("note: run 1 continues under agent"), "{}", accepted.render());
    let events = case.events("agent_changed_accepted");
    assert_eq!(
        events,
        [serde_json::json!({
            "event": "agent_changed_accepted",
            "recorded": recorded,
            "now": now,
            "fields": ["version", "role"],
        })]
    );
    // The run is pinned to the changed spec now, in its journal record: it goes on without
    // the flag.
    assert_eq!(case.launch()["agent_checksum"], now.as_str());
    let show = case.clio(&["runs", "show", "1"]);
    assert!(show.stdout.contains(&format!("(spec checksum {now})")), "{}", show.render());
    assert!(
        show.stdout.contains("agent change accepted (version, role)"),
        "the event is shown: {}",
        show.render()
    );
    let answered = case.clio(&["runs", "answer", "1", &question, "yes"]);
    assert_eq!(answered.code, 0, "{}", answered.render());
    let done = case.clio(&["runs", "resume", "1", "--quiet"]);
    assert_eq!(done.code, 0, "{}", done.render());
    assert_eq!(done.stdout, "Noted.\n");
    assert_eq!(case.events("agent_changed_accepted").len(), 1);
}

/// The launch lives in the run's journal record, pinned there; no launch file is written.
#[test]
fn the_launch_is_kept_in_the_runs_journal_record() {
    let case = Case::new("in-journal");
    case.start();
    let launch = case.launch();
    assert_eq!(launch["agent"], case.path("agent.toml"), "{launch}");
    assert_eq!(launch["agent_checksum"], case.checksum(), "{launch}");
    assert!(!case.home.join("runs").exists(), "a launch file was written");
}

/// A launch record written before runs were pinned (no checksum) resumes as it did.
#[test]
fn a_launch_record_without_a_checksum_still_resumes() {
    let case = Case::new("old-record");
    let question = case.start();
    let mut launch = case.launch();
    let map = launch.as_object_mut().unwrap();
    assert!(map.remove("agent_checksum").is_some() && map.remove("agent_spec").is_some());
    let journal = Journal::open(case.home.join("journal.redb"), JournalConfig::default()).unwrap();
    let update = RunUpdate { launch: Some(launch), ..RunUpdate::default() };
    journal.update_run(RunId(1), update).unwrap();
    journal.close().unwrap();
    std::fs::write(case.home.join("agent.toml"), CHANGED).unwrap();

    let show = case.clio(&["runs", "show", "1"]);
    assert!(show.stdout.contains("(not pinned to a spec checksum)"), "{}", show.render());
    let answered = case.clio(&["runs", "answer", "1", &question, "yes"]);
    assert_eq!(answered.code, 0, "{}", answered.render());
    let done = case.clio(&["runs", "resume", "1", "--quiet"]);
    assert_eq!(done.code, 0, "{}", done.render());
    assert_eq!(done.stdout, "Noted.\n");
}

/// Giving up on a run must not need its agent as it was: `runs cancel` does not check it.
#[test]
fn a_run_can_be_cancelled_whatever_its_agent_file_holds() {
    let case = Case::new("cancel");
    case.start();
    std::fs::write(case.home.join("agent.toml"), CHANGED).unwrap();
    let cancelled = case.clio(&["runs", "cancel", "1"]);
    assert_eq!(cancelled.code, 0, "{}", cancelled.render());
}

/// `runs answer` accepts a change as `runs resume` does, and records it.
#[test]
fn an_answer_can_accept_the_changed_agent() {
    let case = Case::new("answer");
    let question = case.start();
    std::fs::write(case.home.join("agent.toml"), CHANGED).unwrap();
    let answered = case.clio(&["runs", "answer", "1", &question, "yes", "--accept-changed-agent"]);
    assert_eq!(answered.code, 0, "{}", answered.render());
    assert!(answered.stderr.contains("(version, role)"), "{}", answered.render());
    assert_eq!(case.events("agent_changed_accepted").len(), 1);
    let done = case.clio(&["runs", "resume", "1", "--quiet"]);
    assert_eq!(done.code, 0, "{}", done.render());
    assert_eq!(done.stdout, "Noted.\n");
}

const PY_AGENT: &str = "from clio_agent.sdk import Agent\n\n\nclass Pinned(Agent):\n    id = \"pinned\"\n    version = \"1.0.0\"\n    role = \"Keeps notes.\"\n";

#[test]
fn an_agent_class_in_a_python_file_runs_and_its_runs_are_pinned_to_it() {
    let case = Case::new("python");
    std::fs::write(case.home.join("agent.py"), PY_AGENT).unwrap();
    let agent = format!("{}:Pinned", case.path("agent.py"));
    let (models, workspace) = (case.path("models.toml"), case.path("workspace"));
    let started = case.clio(&[
        "run",
        &agent,
        "--input",
        "Note the batch",
        "--models",
        &models,
        "--workspace",
        &workspace,
        "--json",
    ]);
    assert_eq!(started.code, 0, "{}", started.render());
    let value: Value = serde_json::from_str(&started.stdout).unwrap();
    assert_eq!(value["status"], "awaiting_input", "{value}");
    // The run is pinned to the spec the class freezes to, with `agent spec`'s checksum.
    let spec = case.clio(&["agent", "spec", &agent, "--json"]);
    assert_eq!(spec.code, 0, "{}", spec.render());
    let spec: Value = serde_json::from_str(&spec.stdout).unwrap();
    let launch = case.launch();
    assert_eq!(launch["agent_checksum"], spec["checksum"], "{launch}");
    assert!(launch["agent"].as_str().unwrap().ends_with("agent.py:Pinned"), "{launch}");
    // A changed class refuses the run's resume, naming what changed.
    let changed = PY_AGENT.replace("Keeps notes.", "Keeps careful notes.");
    std::fs::write(case.home.join("agent.py"), changed).unwrap();
    let refused = case.clio(&["runs", "resume", "1"]);
    assert_eq!(refused.code, 1, "{}", refused.render());
    assert!(refused.stderr.contains("role"), "{}", refused.render());
}
