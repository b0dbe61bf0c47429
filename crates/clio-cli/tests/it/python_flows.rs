//! Flows written in Python (issue 42), driven through the `clio` binary: the seeds'
//! examples of the writing plugin (`examples/marketplace/plugins/writing`) on the scripted
//! models of `examples/models`, and the test plugin `tests/data/python-flows/pyfx`, whose
//! flows call a side-effecting tool (`tally`: one line per call in the workspace's
//! tally.log) with kill points left as files in the workspace (see its plugin.toml):
//! - the seed's `Review` from an agent that selects it and from a workflow step; the
//!   person-decides loop answered across processes;
//! - SIGKILL of `clio` while a side-effecting call is in flight and while a gather of 20
//!   is half done, and SIGKILL of the Python child alone: the resume does each effect
//!   once and ends with the uninterrupted run's answer;
//! - an edited `.py` stops the resume naming both Python sites; `ctx.patched`; `runs
//!   replay`;
//! - trust asked before any of a plugin's Python runs; the sandbox (bubblewrap, Landlock);
//! - bad flows and bad children: each a clear error naming the file, none hangs.
//!
//! Every `clio` started here is killed after [`LIMIT`], failing the test, so that nothing
//! hangs CI.

use std::io::Read as _;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::{Outcome, workspace_root};

/// The longest a `clio` command of these tests may take.
const LIMIT: Duration = Duration::from_secs(180);

/// The test plugin of Python flows with side effects and kill points.
const PYFX: &str = "crates/clio-cli/tests/data/python-flows/pyfx";

/// The example plugin holding the seeds' Python flows.
const WRITING: &str = "examples/marketplace/plugins/writing";

/// The example plugin `materials`, with the seed's `Batch7` as flow `batch7-flow`.
const MATERIALS: &str = "examples/marketplace/plugins/materials";

/// The test plugin whose hook kills clio at the n-th session a run starts.
const KILLER: &str = "crates/clio-cli/tests/data/python-flows/killer";

/// The example models file (one scripted model).
const MODELS: &str = "examples/models/models.toml";

/// The task the writing plugin's scripted answers expect.
const POEM: &str = "a short poem about the sea";

/// The revised poem the scripted writer answers the seed's `Review` with.
const REVISED: &str = "Grey water folds on the shingle, / draws breath, and folds again; / the tide keeps the moon's time.";

/// Runs `clio args…` from the workspace root with `env` added, killing it (and failing)
/// after [`LIMIT`].
fn clio_timed(args: &[&str], env: &[(&str, &str)]) -> Outcome {
    let mut child = Command::new(env!("CARGO_BIN_EXE_clio"))
        .args(args)
        .current_dir(workspace_root())
        .env_remove("RUST_LOG")
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let out = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stdout.read_to_string(&mut text);
        text
    });
    let err = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text);
        text
    });
    let deadline = Instant::now() + LIMIT;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let outcome = Outcome {
        code: status.and_then(|s| s.code()).unwrap_or(-1),
        stdout: out.join().unwrap(),
        stderr: err.join().unwrap(),
    };
    assert!(
        status.is_some(),
        "`clio {}` hung: killed after {LIMIT:?}\n{}",
        args.join(" "),
        outcome.render()
    );
    outcome
}

/// A test's own folder: a clio home (`home/`, its sandbox mode in config.toml), a
/// workspace outside it (`ws/`), and room for copies of plugins.
struct Case {
    root: PathBuf,
    home: PathBuf,
    ws: PathBuf,
}

impl Case {
    fn new(name: &str, sandbox: &str) -> Case {
        let root =
            std::env::temp_dir().join(format!("clio-cli-pyflows-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let home = root.join("home");
        let ws = root.join("ws");
        std::fs::create_dir_all(&home).unwrap();
        std::fs::create_dir_all(&ws).unwrap();
        std::fs::write(home.join("config.toml"), format!("[sandbox]\nmode = \"{sandbox}\"\n"))
            .unwrap();
        Case { root, home, ws }
    }

    fn h(&self) -> &str {
        self.home.to_str().unwrap()
    }

    fn ws(&self) -> &str {
        self.ws.to_str().unwrap()
    }

    /// Runs `clio --home HOME args…`.
    fn clio(&self, args: &[&str]) -> Outcome {
        self.clio_env(args, &[])
    }

    fn clio_env(&self, args: &[&str], env: &[(&str, &str)]) -> Outcome {
        let mut all = vec!["--home", self.h()];
        all.extend_from_slice(args);
        clio_timed(&all, env)
    }

    /// Trusts plugin folder `dir` at its content now.
    fn trust(&self, dir: &str) {
        let trusted = self.clio(&["plugin", "trust", dir]);
        assert_eq!(trusted.code, 0, "{}", trusted.render());
    }

    /// Runs flow `flow` of plugin folder `plugin` on `input`, quietly, in the workspace.
    fn run(&self, flow: &str, plugin: &str, input: &str) -> Outcome {
        self.clio(&[
            "run",
            flow,
            "--plugin",
            plugin,
            "--input",
            input,
            "--workspace",
            self.ws(),
            "--quiet",
        ])
    }

    fn resume(&self, run: u64) -> Outcome {
        self.clio(&["runs", "resume", &run.to_string(), "--quiet"])
    }

    /// Copies plugin folder `src` (relative to the workspace root) to `<root>/<name>`,
    /// for a test that edits it; returns the copy's path.
    fn copy_plugin(&self, src: &str, name: &str) -> String {
        let to = self.root.join(name);
        copy_dir(&workspace_root().join(src), &to);
        to.to_str().unwrap().to_owned()
    }

    /// Writes a plugin `<root>/<id>` with one flow file `flows/<id>.py` holding `source`.
    fn python_plugin(&self, id: &str, source: &str) -> String {
        let dir = self.root.join(id);
        let flows = dir.join("ai.iowarp.clio/flows");
        std::fs::create_dir_all(&flows).unwrap();
        std::fs::write(
            dir.join("ai.iowarp.clio/plugin.toml"),
            format!("id = \"{id}\"\nversion = \"0.1.0\"\ndescription = \"A test flow.\"\n"),
        )
        .unwrap();
        std::fs::write(flows.join(format!("{id}.py")), source).unwrap();
        dir.to_str().unwrap().to_owned()
    }

    /// Returns the lines of tally.log: one per side effect.
    fn tallies(&self) -> Vec<String> {
        let log = std::fs::read_to_string(self.ws.join("tally.log")).unwrap_or_default();
        log.lines().map(str::to_owned).collect()
    }

    /// Returns how many sessions the killer plugin's hook counted.
    fn sessions(&self) -> usize {
        let log = std::fs::read_to_string(self.ws.join("sessions.log")).unwrap_or_default();
        log.lines().count()
    }

    /// Leaves kill file `name` in the workspace.
    fn arm(&self, name: &str) {
        std::fs::write(self.ws.join(name), "").unwrap();
    }

    /// Returns `runs show RUN --json`.
    fn show(&self, run: u64) -> Value {
        let shown = self.clio(&["runs", "show", &run.to_string(), "--json"]);
        assert_eq!(shown.code, 0, "{}", shown.render());
        serde_json::from_str(&shown.stdout).unwrap()
    }

    fn status(&self, run: u64) -> String {
        self.show(run)["run"]["status"].as_str().unwrap_or_default().to_owned()
    }

    /// Returns the entries of run `run`.
    fn entries(&self, run: u64) -> Vec<Value> {
        self.show(run)["entries"].as_array().cloned().unwrap_or_default()
    }

    /// Returns the answer of run `run` (its text).
    fn answer(&self, run: u64) -> String {
        self.show(run)["run"]["answer"]["answer"].as_str().unwrap_or_default().to_owned()
    }
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            // `fs::copy` keeps the permissions: the tools stay executable.
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

/// Counts each line of `tallies`, failing on any done more than once.
fn assert_once_each(tallies: &[String], what: &str) {
    for label in tallies {
        let n = tallies.iter().filter(|t| *t == label).count();
        assert_eq!(n, 1, "{what}: {label} tallied {n} times: {tallies:?}");
    }
}

// --- the seeds' examples -------------------------------------------------------------

#[test]
fn the_seeds_review_runs_from_an_agent_that_selects_it() {
    let case = Case::new("review-agent", "auto");
    let agent = "crates/clio-cli/tests/data/python-flows/review-agent.toml";
    let ran = case.clio(&[
        "run", agent, "--plugin", WRITING, "--trust", "--input", POEM, "--models", MODELS,
        "--quiet",
    ]);
    assert_eq!(ran.code, 0, "{}", ran.render());
    assert_eq!(ran.stdout.trim(), REVISED, "{}", ran.render());
    // The writer, the two reviewers in one gather, the writer again: the seed's flow.
    let tree = case.clio(&["runs", "tree", "1"]);
    let lines: Vec<&str> = tree.stdout.lines().collect();
    assert!(lines[0].contains("review") && lines[0].contains("succeeded"), "{}", tree.render());
    for who in ["writer", "critic", "fact-checker"] {
        assert!(
            lines.iter().any(|l| l.contains(&format!("subagent {who} [succeeded]"))),
            "{who}: {}",
            tree.render()
        );
    }
    let writers = lines.iter().filter(|l| l.contains("subagent writer")).count();
    assert_eq!(writers, 2, "{}", tree.render());
    // Its commands carry the Python sites of the plugin's review.py.
    let shown = case.show(1);
    let sites: Vec<&str> = shown["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["identity"].as_str())
        .filter(|i| i.starts_with("ai.iowarp.clio/flows/review.py:"))
        .collect();
    assert!(sites.iter().any(|i| i.starts_with("ai.iowarp.clio/flows/review.py:11:")), "{sites:?}");
    assert!(sites.iter().any(|i| i.starts_with("ai.iowarp.clio/flows/review.py:15:")), "{sites:?}");
}

#[test]
fn the_seeds_review_runs_as_a_workflow_step() {
    let case = Case::new("review-step", "auto");
    let workflow = "crates/clio-cli/tests/data/python-flows/review-step.json";
    let ran = case.clio(&[
        "workflow", "run", workflow, "--task", POEM, "--plugin", WRITING, "--trust", "--models",
        MODELS, "--quiet",
    ]);
    assert_eq!(ran.code, 0, "{}", ran.render());
    assert!(
        ran.stdout.contains(&format!("## review (offline/demo)\n\n{REVISED}")),
        "{}",
        ran.render()
    );
    let tree = case.clio(&["runs", "tree", "1"]);
    assert!(tree.stdout.contains("flow review (step review) [succeeded]"), "{}", tree.render());
    assert!(tree.stdout.contains("subagent fact-checker [succeeded]"), "{}", tree.render());
    assert!(tree.stdout.contains("(step notes) [succeeded]"), "{}", tree.render());
}

/// Returns the text of the open question of run `run` (the last question entry).
fn open_question(case: &Case, run: u64) -> String {
    let shown = case.show(run);
    let entries = shown["entries"].as_array().unwrap();
    let question = entries.iter().rev().find(|e| e["kind"] == "question").expect("a question");
    question["payload"]["question"].as_str().unwrap_or_default().to_owned()
}

#[test]
fn the_person_decides_loop_revise_then_accept_across_processes() {
    // The killer plugin beside it kills clio at a session start the test chooses.
    let case = Case::new("decides", "off");
    // First process: the draft, the reviewer's notes, then the question; with no terminal
    // the process ends there.
    let started = case.clio(&[
        "run",
        "draft-and-review",
        "--plugin",
        WRITING,
        "--plugin",
        KILLER,
        "--trust",
        "--input",
        POEM,
        "--models",
        MODELS,
        "--workspace",
        case.ws(),
        "--quiet",
    ]);
    assert_eq!(started.code, 0, "{}", started.render());
    assert_eq!(case.status(1), "awaiting_input", "{}", started.render());
    assert!(open_question(&case, 1).contains("the second line drags"), "{}", started.render());
    assert_eq!(case.sessions(), 2, "the draft and the notes");

    // Second process: "Revise", recorded only, while nothing waits on it.
    let revise = case.clio(&["runs", "answer", "1", "Revise", "--record-only"]);
    assert_eq!(revise.code, 0, "{}", revise.render());
    assert_eq!(case.status(1), "awaiting_input");

    // Third process: the resume replays up to the question, takes the answer recorded
    // before it got there, and is SIGKILLed as the revision starts.
    case.arm("kill-at-session-3");
    let killed = case.resume(1);
    assert_eq!(killed.code, -1, "clio is killed: {}", killed.render());
    assert_eq!(case.status(1), "interrupted");

    // Fourth: the resume revises and asks about the revised draft; the answer given
    // before the question was reached is kept (not asked again).
    let resumed = case.resume(1);
    assert_eq!(resumed.code, 0, "{}", resumed.render());
    assert_eq!(case.status(1), "awaiting_input", "{}", resumed.render());
    assert!(open_question(&case, 1).contains("ready to publish"), "{}", resumed.render());

    // Fifth process: "Accept" (in any case: options come back in lowercase) ends it.
    let accept = case.clio(&["runs", "answer", "1", "Accept"]);
    assert_eq!(accept.code, 0, "{}", accept.render());
    if case.status(1) != "succeeded" {
        let resumed = case.resume(1);
        assert_eq!(resumed.code, 0, "{}", resumed.render());
    }
    let shown = case.show(1);
    assert_eq!(shown["run"]["status"], "succeeded", "{shown}");
    assert!(case.answer(1).starts_with("Revised draft: Grey water folds"), "{shown}");
    let entries = shown["entries"].as_array().unwrap();
    let questions = entries.iter().filter(|e| e["kind"] == "question").count();
    let answers: Vec<&Value> =
        entries.iter().filter(|e| e["kind"] == "answer").map(|e| &e["payload"]["value"]).collect();
    assert_eq!(questions, 2, "one question per round: {shown}");
    assert_eq!(answers, ["revise", "accept"], "{shown}");
    // Draft, notes, revision, notes: each done once across the processes; only the
    // revision killed as it started began again.
    let tree = case.clio(&["runs", "tree", "1"]);
    assert_eq!(tree.stdout.matches("agent self [succeeded]").count(), 2, "{}", tree.render());
    assert_eq!(
        tree.stdout.matches("subagent reviewer [succeeded]").count(),
        2,
        "{}",
        tree.render()
    );
    assert_eq!(case.sessions(), 5, "4 sessions, and the killed one's start again");
}

/// Answers yes to whatever run 1 waits on, and resumes it, until it ends.
fn drive_to_end(case: &Case) {
    for _ in 0..4 {
        match case.status(1).as_str() {
            "awaiting_input" => {
                let yes = case.clio(&["runs", "answer", "1", "yes"]);
                assert_eq!(yes.code, 0, "{}", yes.render());
            }
            "interrupted" | "running" => {
                let resumed = case.resume(1);
                assert_eq!(resumed.code, 0, "{}", resumed.render());
            }
            _ => return,
        }
    }
}

/// Returns the lines of `runs tree 1`, sorted (a gather's members take their task numbers
/// in the order they start).
fn tree_lines(case: &Case) -> Vec<String> {
    let tree = case.clio(&["runs", "tree", "1"]);
    assert_eq!(tree.code, 0, "{}", tree.render());
    let mut lines: Vec<String> = tree
        .stdout
        .lines()
        .map(|l| l.trim_start_matches(|c: char| !c.is_ascii_alphanumeric() && c != '#').to_owned())
        .map(|l| l.split_once(' ').map_or(l.clone(), |(_, rest)| rest.to_owned()))
        .collect();
    lines.sort();
    lines
}

/// Runs example flow `flow` (`args`: its plugins, input and models) uninterrupted, and
/// again SIGKILLed at the start of its `kill_at`-th session (an agent's or subagent's
/// react loop): the resume ends with the same answer, the same tasks each done once, and
/// only the session cut at its start begins again. Questions are answered yes.
fn killed_example_resumes_to_its_answer(
    name: &str,
    flow: &str,
    args: &[&str],
    kill_at: usize,
) -> Case {
    let run = |case: &Case| {
        let mut all = vec!["run", flow, "--plugin", KILLER, "--trust"];
        all.extend_from_slice(args);
        all.extend(["--workspace", case.ws(), "--quiet"]);
        case.clio(&all)
    };
    let reference = Case::new(&format!("{name}-reference"), "off");
    let ran = run(&reference);
    assert_eq!(ran.code, 0, "{name}: {}", ran.render());
    drive_to_end(&reference);
    assert_eq!(reference.status(1), "succeeded", "{name}");
    let answer = reference.answer(1);
    assert!(!answer.is_empty(), "{name}");
    let sessions = reference.sessions();
    assert!(sessions >= kill_at, "{name}: {sessions} sessions");

    let case = Case::new(name, "off");
    case.arm(&format!("kill-at-session-{kill_at}"));
    let killed = run(&case);
    assert_eq!(killed.code, -1, "{name}: clio is killed: {}", killed.render());
    assert_eq!(case.status(1), "interrupted", "{name}");
    assert_eq!(case.sessions(), kill_at, "{name}");
    let resumed = case.resume(1);
    assert_eq!(resumed.code, 0, "{name}: {}", resumed.render());
    drive_to_end(&case);
    assert_eq!(case.status(1), "succeeded", "{name}");
    assert_eq!(case.answer(1), answer, "{name}: the uninterrupted answer");
    assert_eq!(tree_lines(&case), tree_lines(&reference), "{name}: the same tasks, each once");
    assert_eq!(case.sessions(), sessions + 1, "{name}: nothing but the killed session again");
    case
}

#[test]
fn the_seeds_review_killed_mid_run_resumes_running_nothing_twice() {
    // Killed as the writer starts its revision, after the gather of the two reviewers.
    let args = ["--plugin", WRITING, "--input", POEM, "--models", MODELS];
    let case = killed_example_resumes_to_its_answer("example-review", "review", &args, 4);
    assert_eq!(case.answer(1), REVISED);
}

#[test]
fn three_models_asks_the_council_on_three_models_and_resumes_after_a_kill() {
    let models = r#"models=["offline/demo","offline/second","offline/third"]"#;
    let args = [
        "--plugin",
        WRITING,
        "--option",
        models,
        "--input",
        POEM,
        "--models",
        "examples/models/three-models.toml",
        "--model",
        "offline/demo",
    ];
    // Killed as the synthesis starts, after the three members answered.
    let case =
        killed_example_resumes_to_its_answer("example-three-models", "three-models", &args, 4);
    // One member on each model, then the synthesis.
    let tree = case.clio(&["runs", "tree", "1"]);
    for (seat, model) in [(1, "offline/demo"), (2, "offline/second"), (3, "offline/third")] {
        let member = format!("agent self [succeeded] \"council seat {seat}\" model {model}");
        assert!(tree.stdout.contains(&member), "{member}: {}", tree.render());
    }
    assert!(tree.stdout.contains("flow council [succeeded]"), "{}", tree.render());
    assert!(case.answer(1).starts_with("The three models agree"), "{}", case.answer(1));
}

#[test]
fn deep_research_plans_researches_verifies_and_reports_and_resumes_after_a_kill() {
    let args =
        ["--plugin", WRITING, "--input", "How does the sea shape the coast?", "--models", MODELS];
    // Killed as the critic of the first round starts, after the parallel researchers.
    let case =
        killed_example_resumes_to_its_answer("example-deep-research", "deep-research", &args, 4);
    assert!(case.answer(1).starts_with("Report: the sea shapes the coast"), "{}", case.answer(1));
    // Two rounds: the critic named a gap, a researcher went after it, the critic was done.
    let events = case.clio(&["runs", "events", "1"]);
    assert!(
        events.stdout.contains(r#"{"round":0,"claims":2,"verified":2}"#),
        "{}",
        events.render()
    );
    assert!(
        events.stdout.contains(r#"{"round":1,"claims":1,"verified":3}"#),
        "{}",
        events.render()
    );
    let tree = case.clio(&["runs", "tree", "1"]);
    assert_eq!(
        tree.stdout.matches("subagent researcher [succeeded]").count(),
        3,
        "{}",
        tree.render()
    );
    assert_eq!(tree.stdout.matches("subagent critic [succeeded]").count(), 2, "{}", tree.render());
}

#[test]
fn batch7_as_a_python_workflow_with_an_approved_edit_resumes_after_a_kill() {
    let args = [
        "--plugin",
        MATERIALS,
        "--input",
        "Review batch 7 of the Ti-6Al-4V fatigue campaign",
        "--models",
        MODELS,
    ];
    // Killed as the second step (relate) starts.
    let case = killed_example_resumes_to_its_answer("example-batch7", "batch7-flow", &args, 2);
    // The editor's step, approved by the person, ran after the three steps.
    let tree = case.clio(&["runs", "tree", "1"]);
    assert!(tree.stdout.contains("flow workflow [succeeded]"), "{}", tree.render());
    assert!(tree.stdout.contains("(step porosity_check) [succeeded]"), "{}", tree.render());
    assert!(case.answer(1).contains("## porosity_check"), "{}", case.answer(1));
    let entries = case.entries(1);
    let approved = entries.iter().any(|e| e["kind"] == "answer" && e["payload"]["value"] == true);
    assert!(approved, "the edit was approved by the person");
}

// --- crashes -------------------------------------------------------------------------

/// The answer of flow `effects` run uninterrupted on "go".
const EFFECTS: &str = "go: tallied one, two, three (3 calls)";

/// A case whose home trusts the pyfx plugin, with the sandbox off: its tools kill the
/// clio process that runs them, which the sandbox is there to prevent.
fn crash_case(name: &str) -> Case {
    let case = Case::new(name, "off");
    case.trust(PYFX);
    case
}

#[test]
fn a_python_flow_run_uninterrupted_tallies_each_effect_once() {
    let case = crash_case("effects-reference");
    let ran = case.run("effects", PYFX, "go");
    assert_eq!(ran.code, 0, "{}", ran.render());
    assert_eq!(ran.stdout.trim(), EFFECTS);
    assert_eq!(case.tallies(), ["one", "two", "three"]);
    let ran = case.run("gather20", PYFX, "go");
    assert_eq!(ran.code, 0, "{}", ran.render());
    assert_eq!(ran.stdout.trim(), "go: gathered 20 calls");
    assert_eq!(case.tallies().len(), 3 + 21);
}

#[test]
fn sigkill_of_clio_while_a_python_flows_side_effecting_call_is_in_flight_does_each_effect_once() {
    // Each point: the kill file, and the tallies done when clio dies.
    let points: [(&str, &[&str]); 3] = [
        // `two` did its effect, then clio died before its answer: cut short, never again.
        ("kill-after-two", &["one", "two"]),
        // `two` was called, clio died before its effect: never done, and reported.
        ("kill-before-two", &["one"]),
        // Between two calls (a read-only checkpoint): nothing is cut short.
        ("kill-at-after-one", &["one"]),
    ];
    for (kill, before) in points {
        let case = crash_case(&format!("effects-{kill}"));
        case.arm(kill);
        let killed = case.run("effects", PYFX, "go");
        assert_eq!(killed.code, -1, "{kill}: clio is killed: {}", killed.render());
        assert_eq!(case.tallies(), before, "{kill}");
        assert_eq!(case.status(1), "interrupted", "{kill}");

        let resumed = case.resume(1);
        assert_eq!(resumed.code, 0, "{kill}: {}", resumed.render());
        assert_eq!(resumed.stdout.trim(), EFFECTS, "{kill}: the uninterrupted answer");
        let tallies = case.tallies();
        assert_once_each(&tallies, kill);
        let cut_short = kill.starts_with("kill-before-") || kill.starts_with("kill-after-");
        if kill == "kill-before-two" {
            assert_eq!(tallies, ["one", "three"], "{kill}: the cut-short call never runs");
        } else {
            assert_eq!(tallies, ["one", "two", "three"], "{kill}");
        }
        assert_eq!(
            resumed.stderr.contains("cut short when a process stopped"),
            cut_short,
            "{kill}: {}",
            resumed.render()
        );
        // A second resume does nothing again.
        let again = case.resume(1);
        assert_eq!(again.stdout.trim(), EFFECTS, "{kill}");
        assert_eq!(case.tallies(), tallies, "{kill}");
    }
}

#[test]
fn sigkill_of_clio_while_a_python_gather_of_20_is_half_done_does_each_effect_once() {
    let case = crash_case("gather-kill");
    case.arm("kill-after-g09");
    let killed = case.run("gather20", PYFX, "go");
    assert_eq!(killed.code, -1, "clio is killed: {}", killed.render());
    let before = case.tallies();
    assert!(before.contains(&"g09".to_owned()), "{before:?}");
    assert!(before.len() >= 10 && before.len() < 20, "half done: {before:?}");
    assert_eq!(case.status(1), "interrupted");

    let resumed = case.resume(1);
    assert_eq!(resumed.code, 0, "{}", resumed.render());
    assert_eq!(resumed.stdout.trim(), "go: gathered 20 calls", "the uninterrupted answer");
    let tallies = case.tallies();
    assert_once_each(&tallies, "gather");
    assert_eq!(tallies.len(), 21, "every member and the call after, once: {tallies:?}");
    assert_eq!(&tallies[..before.len()], before.as_slice(), "nothing done before ran again");
    // Only the call in flight (g09, after its effect) was cut short.
    assert!(
        resumed.stderr.contains("1 call(s) of side-effecting tools were cut short"),
        "{}",
        resumed.render()
    );
}

#[test]
fn the_python_child_killed_alone_leaves_the_run_resumable_with_each_effect_once() {
    let case = crash_case("child-kill");
    // `two` does its effect, then kills the Python child of the clio running it.
    case.arm("killchild-after-two");
    let stopped = case.run("effects", PYFX, "go");
    let killed = std::fs::read_to_string(case.ws.join("killed-children.log")).unwrap_or_default();
    assert_eq!(killed.lines().count(), 1, "one Python child killed: {killed:?}");
    // clio lives on: the run is left interrupted, naming the flow's file, not failed.
    assert_eq!(stopped.code, 1, "{}", stopped.render());
    assert!(stopped.stderr.contains("run 1 is interrupted"), "{}", stopped.render());
    assert!(stopped.stderr.contains("ai.iowarp.clio/flows/effects.py"), "{}", stopped.render());
    assert_eq!(case.status(1), "interrupted");
    assert_eq!(case.tallies(), ["one", "two"]);

    let resumed = case.resume(1);
    assert_eq!(resumed.code, 0, "{}", resumed.render());
    assert_eq!(resumed.stdout.trim(), EFFECTS, "the uninterrupted answer");
    assert_eq!(case.tallies(), ["one", "two", "three"], "each effect once");
    assert_eq!(case.status(1), "succeeded");
}

// --- edits, patches, replay ----------------------------------------------------------

/// Starts flow `flow` of a copy of pyfx and leaves it waiting at its question with the
/// answer yes recorded; returns the copy's folder.
fn waiting_at_question(case: &Case, flow: &str) -> String {
    let plugin = case.copy_plugin(PYFX, "plugin");
    case.trust(&plugin);
    let started = case.run(flow, &plugin, "go");
    assert_eq!(started.code, 0, "{}", started.render());
    assert_eq!(case.status(1), "awaiting_input", "{}", started.render());
    let answered = case.clio(&["runs", "answer", "1", "yes", "--record-only"]);
    assert_eq!(answered.code, 0, "{}", answered.render());
    plugin
}

/// Rewrites `file` with `edit` applied to its text.
fn edit_file(file: &Path, edit: impl Fn(&str) -> String) {
    let text = std::fs::read_to_string(file).unwrap();
    let edited = edit(&text);
    assert_ne!(edited, text, "the edit changed nothing in {}", file.display());
    std::fs::write(file, edited).unwrap();
}

#[test]
fn an_edited_py_stops_the_resume_naming_both_python_sites_and_runs_nothing() {
    const E1: &str = "        await ctx.call(\"tally\", {\"label\": \"e1\"})\n";
    const FORWARD: &str = "    async def forward(self, task, ctx):\n";
    // Each edit, and the new command's site (the recorded call is at line 11, column 15).
    type Edit = fn(&str) -> String;
    let edits: [(&str, Edit, &str); 3] = [
        (
            "a line added above the call",
            |t| t.replace(FORWARD, &format!("{FORWARD}        # a new comment line\n")),
            "edits.py:12:15:",
        ),
        (
            "a call inserted",
            |t| {
                t.replace(
                    E1,
                    &format!(
                        "        await ctx.call(\"tally\", {{\"label\": \"inserted\"}})\n{E1}"
                    ),
                )
            },
            "edits.py:11:15:",
        ),
        ("an input changed", |t| t.replace("\"e1\"", "\"e1-changed\""), "edits.py:11:15:"),
    ];
    for (what, edit, new_site) in edits {
        let case = Case::new(&format!("edit-{}", what.replace(' ', "-")), "off");
        let plugin = waiting_at_question(&case, "edits");
        assert_eq!(case.tallies(), ["e1"], "{what}");
        let file = Path::new(&plugin).join("ai.iowarp.clio/flows/edits.py");
        edit_file(&file, edit);
        case.trust(&plugin);
        let entries = case.entries(1);

        let resumed = case.resume(1);
        assert_eq!(resumed.code, 1, "{what}: {}", resumed.render());
        let said = &resumed.stderr;
        assert!(said.contains("the code no longer matches its history"), "{what}: {said}");
        // Both Python sites: the new command's, and the recorded one not reached.
        assert!(
            said.contains(&format!("nondeterminism at ai.iowarp.clio/flows/{new_site}")),
            "{what}: {said}"
        );
        assert!(
            said.contains("not reached: call tally at ai.iowarp.clio/flows/edits.py:11:15:"),
            "{what}: {said}"
        );
        // Nothing ran: no effect, no new entry, and the run is not finished.
        assert_eq!(case.tallies(), ["e1"], "{what}");
        assert_ne!(case.status(1), "succeeded", "{what}");
        // Nothing recorded but the mismatch itself, as an event.
        let now = case.entries(1);
        assert_eq!(&now[..entries.len()], entries.as_slice(), "{what}");
        for added in &now[entries.len()..] {
            assert_eq!(added["payload"]["event"], "replay_mismatch", "{what}: {added}");
        }

        // `runs replay` names the same mismatch, running nothing either.
        let replayed = case.clio(&["runs", "replay", "1"]);
        assert_ne!(replayed.code, 0, "{what}: {}", replayed.render());
        let all = format!("{}{}", replayed.stdout, replayed.stderr);
        assert!(all.contains(&format!("ai.iowarp.clio/flows/{new_site}")), "{what}: {all}");
        assert!(all.contains("ai.iowarp.clio/flows/edits.py:11:15:"), "{what}: {all}");
        assert_eq!(case.tallies(), ["e1"], "{what}");
    }
}

#[test]
fn the_unedited_flow_resumes_past_the_question() {
    // The control of the edit test: the same run, not edited, goes on and ends.
    let case = Case::new("edit-none", "off");
    waiting_at_question(&case, "edits");
    let resumed = case.resume(1);
    assert_eq!(resumed.code, 0, "{}", resumed.render());
    assert_eq!(resumed.stdout.trim(), "edited");
    assert_eq!(case.tallies(), ["e1", "e2"]);
}

#[test]
fn ctx_patched_lets_new_code_take_a_new_path_while_an_old_run_keeps_the_old_one() {
    let case = Case::new("patched", "off");
    let plugin = waiting_at_question(&case, "patched");
    let file = Path::new(&plugin).join("ai.iowarp.clio/flows/patched.py");
    edit_file(&file, |t| {
        t.replace(
            "        path = \"old path\"\n",
            "        path = \"old path\"\n        if await ctx.patched(\"second-tally\"):\n            await ctx.call(\"tally\", {\"label\": \"p-new\"}, key=\"p-new\")\n            path = \"new path\"\n",
        )
    });
    case.trust(&plugin);
    // The old run, recorded before the change: the old path, no new call.
    let old = case.resume(1);
    assert_eq!(old.code, 0, "{}", old.render());
    assert_eq!(old.stdout.trim(), "old path", "{}", old.render());
    assert_eq!(case.tallies(), ["p1"]);
    // A new run of the new code: the new path.
    let started = case.run("patched", &plugin, "go");
    assert_eq!(started.code, 0, "{}", started.render());
    let answered = case.clio(&["runs", "answer", "2", "yes"]);
    assert_eq!(answered.code, 0, "{}", answered.render());
    if case.status(2) != "succeeded" {
        let resumed = case.resume(2);
        assert_eq!(resumed.code, 0, "{}", resumed.render());
    }
    assert_eq!(case.answer(2), "new path");
    assert_eq!(case.tallies(), ["p1", "p1", "p-new"]);
    // Both replay cleanly on the new code, each down its own path.
    for run in ["1", "2"] {
        let replayed = case.clio(&["runs", "replay", run]);
        assert_eq!(replayed.code, 0, "run {run}: {}", replayed.render());
    }
    assert_eq!(case.tallies(), ["p1", "p1", "p-new"], "a replay runs nothing");
}

#[test]
fn runs_replay_checks_a_python_run_without_running_it() {
    let case = crash_case("replay");
    let ran = case.run("effects", PYFX, "go");
    assert_eq!(ran.code, 0, "{}", ran.render());
    let entries = case.entries(1);
    let replayed = case.clio(&["runs", "replay", "1"]);
    assert_eq!(replayed.code, 0, "{}", replayed.render());
    assert!(replayed.stdout.contains("run 1 replays cleanly"), "{}", replayed.render());
    assert!(replayed.stdout.contains("ends it as recorded (succeeded)"), "{}", replayed.render());
    assert_eq!(case.tallies(), ["one", "two", "three"], "nothing ran");
    assert_eq!(case.entries(1), entries, "nothing recorded");
}

// --- trust and the sandbox -----------------------------------------------------------

#[test]
fn an_untrusted_plugins_python_flow_is_asked_about_first_and_refused_under_no_input() {
    let case = Case::new("untrusted", "off");
    let imported = case.root.join("imported");
    let forwarded = case.root.join("forwarded");
    // Code at the top of the file, and in forward: either leaves a file when it runs.
    let source = format!(
        "import pathlib\npathlib.Path({imported:?}).write_text(\"the module ran\")\n\nfrom clio_agent.sdk import Flow\n\n\nclass Marked(Flow):\n    id = \"marked\"\n\n    async def forward(self, task, ctx):\n        pathlib.Path({forwarded:?}).write_text(\"forward ran\")\n        return \"ran\"\n"
    );
    let plugin = case.python_plugin("marked", &source);

    // Under --no-input: refused, naming the plugin and how to trust it; nothing ran.
    let refused = case.clio(&[
        "run",
        "marked",
        "--plugin",
        &plugin,
        "--input",
        "go",
        "--workspace",
        case.ws(),
        "--no-input",
    ]);
    assert_eq!(refused.code, 1, "{}", refused.render());
    assert!(refused.stderr.contains("plugin marked 0.1.0 is not trusted"), "{}", refused.render());
    assert!(refused.stderr.contains("clio plugin trust"), "{}", refused.render());
    assert!(!imported.exists() && !forwarded.exists(), "the plugin's Python ran");

    // Without: the run asks first, and waits; nothing ran.
    let asked = case.run("marked", &plugin, "go");
    assert_eq!(asked.code, 0, "{}", asked.render());
    assert_eq!(case.status(1), "awaiting_input", "{}", asked.render());
    assert!(open_question(&case, 1).starts_with("trust plugin marked 0.1.0"), "{}", asked.render());
    assert!(!imported.exists() && !forwarded.exists(), "the plugin's Python ran");

    // A yes, and it runs (the markers can appear: the checks above could fail).
    let yes = case.clio(&["runs", "answer", "1", "yes"]);
    assert_eq!(yes.code, 0, "{}", yes.render());
    if case.status(1) != "succeeded" {
        let resumed = case.resume(1);
        assert_eq!(resumed.code, 0, "{}", resumed.render());
    }
    assert_eq!(case.answer(1), "ran");
    assert!(imported.exists() && forwarded.exists());
}

/// Runs the pyfx `probe` flow under sandbox `mode` and returns its report, one line per
/// attempt, and whether its connection reached the test's listener.
fn probe(mode: &str) -> (String, bool) {
    let case = Case::new(&format!("probe-{mode}"), mode);
    case.trust(PYFX);
    let user = case.root.join("user");
    let outside = case.root.join("outside");
    std::fs::create_dir_all(&user).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(user.join(".secret"), "the person's").unwrap();
    std::fs::write(outside.join("secret.txt"), "not the run's").unwrap();
    std::fs::write(case.ws.join("inside.txt"), "the run's").unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let reached = Arc::new(AtomicUsize::new(0));
    let count = Arc::clone(&reached);
    // The thread ends with the test binary.
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            if stream.is_ok() {
                count.fetch_add(1, Ordering::SeqCst);
            }
        }
    });
    let task = serde_json::json!({
        "home": case.home,
        "user_file": user.join(".secret"),
        "outside": outside.join("secret.txt"),
        "port": port,
        "workspace": case.ws,
    })
    .to_string();
    let ran = case.clio_env(
        &[
            "run",
            "probe",
            "--plugin",
            PYFX,
            "--input-json",
            &task,
            "--workspace",
            case.ws(),
            "--quiet",
        ],
        &[("HOME", user.to_str().unwrap())],
    );
    assert_eq!(ran.code, 0, "{mode}: {}", ran.render());
    (ran.stdout, reached.load(Ordering::SeqCst) > 0)
}

fn a_python_flow_reaches_nothing_outside_its_sandbox(mode: &str) {
    let (report, reached) = probe(mode);
    for what in [
        "home clio.key",
        "home journal.redb",
        "home config.toml",
        "home folder",
        "outside",
        "network",
    ] {
        assert!(report.contains(&format!("{what}: refused (")), "{mode}: {what}:\n{report}");
    }
    let read: Vec<&str> = report.lines().filter(|l| l.ends_with(": READ")).collect();
    assert_eq!(read, ["workspace: READ"], "{mode}: only its own workspace:\n{report}");
    assert!(!reached, "{mode}: the flow reached the network");
    // Its own workspace it reads.
    assert!(report.contains("workspace: READ"), "{mode}:\n{report}");
}

#[test]
fn under_bubblewrap_a_python_flow_cannot_read_the_home_or_outside_the_workspace_nor_connect() {
    a_python_flow_reaches_nothing_outside_its_sandbox("bwrap");
}

#[test]
fn under_landlock_a_python_flow_cannot_read_the_home_or_outside_the_workspace_nor_connect() {
    a_python_flow_reaches_nothing_outside_its_sandbox("landlock");
}

#[test]
fn with_the_sandbox_off_the_probe_reads_and_connects() {
    // The control of the two tests above: unconfined, every attempt succeeds.
    let (report, reached) = probe("off");
    assert!(!report.contains("refused"), "{report}");
    assert!(reached, "{report}");
}

// --- bad flows, bad children ---------------------------------------------------------

/// A flow whose forward raises in a helper: ValueError at line 5, called from line 13.
const RAISER: &str = "from clio_agent.sdk import Flow\n\n\ndef check(task):\n    raise ValueError(f\"bad input {task}\")\n\n\nclass Raiser(Flow):\n    id = \"raiser\"\n\n    async def forward(self, task, ctx):\n        await ctx.step(lambda: 1)\n        check(task)\n        return \"never\"\n";

#[test]
fn a_python_flow_with_a_syntax_error_is_refused_naming_its_file_and_line() {
    let case = Case::new("syntax", "off");
    let source = "from clio_agent.sdk import Flow\n\n\nclass Syntax(Flow):\n    id = \"syntax\"\n\n    async def forward(self, task, ctx)\n        return \"never\"\n";
    let plugin = case.python_plugin("syntax", source);
    let ran = case.run("syntax", &plugin, "t");
    assert_eq!(ran.code, 1, "{}", ran.render());
    assert!(
        ran.stderr.contains("ai.iowarp.clio/flows/syntax.py:7: syntax error"),
        "{}",
        ran.render()
    );
    let checked = case.clio(&["plugin", "check", &plugin]);
    assert_eq!(checked.code, 1, "{}", checked.render());
    let said = format!("{}{}", checked.stdout, checked.stderr);
    assert!(said.contains("ai.iowarp.clio/flows/syntax.py:7"), "{}", checked.render());
}

#[test]
fn a_python_flow_that_does_not_import_fails_naming_its_file_and_line() {
    let case = Case::new("import", "off");
    let source = "from clio_agent.sdk import Flow\nimport no_such_module_anywhere\n\n\nclass Importer(Flow):\n    id = \"importer\"\n\n    async def forward(self, task, ctx):\n        return \"never\"\n";
    let plugin = case.python_plugin("importer", source);
    case.trust(&plugin);
    let ran = case.run("importer", &plugin, "t");
    assert_eq!(ran.code, 1, "{}", ran.render());
    assert!(
        ran.stderr.contains("ModuleNotFoundError at ai.iowarp.clio/flows/importer.py:2"),
        "{}",
        ran.render()
    );
    let error = &case.show(1)["run"]["error"];
    assert_eq!(error["reason"], "flow_exception", "{error}");
    assert_eq!(error["details"]["phase"], "import", "{error}");
    assert_eq!(error["details"]["line"], 2, "{error}");
}

#[test]
fn an_exception_in_forward_carries_the_python_traceback_in_runs_show_and_json() {
    let case = Case::new("raise", "off");
    let plugin = case.python_plugin("raiser", RAISER);
    case.trust(&plugin);
    let ran = case.clio(&[
        "run",
        "raiser",
        "--plugin",
        &plugin,
        "--input",
        "t",
        "--workspace",
        case.ws(),
        "--json",
    ]);
    assert_eq!(ran.code, 1, "{}", ran.render());
    let at = "flow raiser raised ValueError at ai.iowarp.clio/flows/raiser.py:5: bad input t";
    let check = |error: &Value, source: &str| {
        assert_eq!(error["reason"], "flow_exception", "{source}: {error}");
        assert_eq!(error["message"], at, "{source}: {error}");
        let details = &error["details"];
        assert_eq!(details["file"], "ai.iowarp.clio/flows/raiser.py", "{source}: {error}");
        assert_eq!(details["line"], 5, "{source}: {error}");
        assert_eq!(details["phase"], "forward", "{source}: {error}");
        let traceback = details["traceback"].as_str().unwrap_or_default();
        assert!(
            traceback.starts_with("Traceback (most recent call last):"),
            "{source}: {traceback}"
        );
        assert!(traceback.contains("raiser.py\", line 13, in forward"), "{source}: {traceback}");
        assert!(traceback.contains("raiser.py\", line 5, in check"), "{source}: {traceback}");
        assert!(traceback.contains("ValueError: bad input t"), "{source}: {traceback}");
    };
    let outcome: Value = serde_json::from_str(&ran.stdout).unwrap();
    check(&outcome["error"], "run --json");
    check(&case.show(1)["run"]["error"], "runs show --json");
    let shown = case.clio(&["runs", "show", "1"]);
    assert!(shown.stdout.contains(&format!("error:  {at}")), "{}", shown.render());
}

/// Writes an executable `name` in the case's folder that stands in for `python3`: the
/// flow runner's command (`…/_flow_host.py`) runs `body`; anything else (reading a
/// plugin's flow declarations) runs the real `python3`.
fn fake_python(case: &Case, name: &str, body: &str) -> String {
    use std::os::unix::fs::PermissionsExt as _;
    let path = std::env::var_os("PATH").unwrap_or_default();
    let python = std::env::split_paths(&path)
        .map(|dir| dir.join("python3"))
        .find(|p| p.is_file())
        .expect("python3 on PATH");
    let script = format!(
        "#!/bin/sh\ncase \"$*\" in\n  *_flow_host.py*) {body} ;;\n  *) exec {} \"$@\" ;;\nesac\n",
        python.display()
    );
    let file = case.root.join(name);
    std::fs::write(&file, script).unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o755)).unwrap();
    file.to_str().unwrap().to_owned()
}

/// Runs the raiser flow with `python` as the interpreter; returns the run's outcome.
fn with_interpreter(case: &Case, python: &str) -> Outcome {
    let plugin = case.python_plugin("raiser", RAISER);
    case.trust(&plugin);
    case.clio_env(
        &[
            "run",
            "raiser",
            "--plugin",
            &plugin,
            "--input",
            "t",
            "--workspace",
            case.ws(),
            "--quiet",
        ],
        &[("CLIO_PYTHON", python)],
    )
}

#[test]
fn a_python_child_that_exits_at_once_is_a_clear_error_naming_the_file() {
    let case = Case::new("exits", "off");
    let python = fake_python(&case, "exits", "echo 'the runner gave up' >&2; exit 3");
    let ran = with_interpreter(&case, &python);
    assert_eq!(ran.code, 1, "{}", ran.render());
    let said = &ran.stderr;
    assert!(said.contains("flow raiser (ai.iowarp.clio/flows/raiser.py)"), "{said}");
    assert!(said.contains("exited with status 3"), "{said}");
    assert!(said.contains("the runner gave up"), "what it printed: {said}");
}

#[test]
fn a_python_child_that_prints_non_protocol_text_is_a_clear_error_naming_the_file() {
    // Before its `ready`, and after it.
    let ready = r#"{"type":"ready","protocol":1,"pid":1,"python":"3"}"#;
    let bodies = [
        (
            "before-ready",
            "echo 'Hello, I am no protocol'; sleep 30".to_owned(),
            "\"Hello, I am no protocol\"",
        ),
        (
            "after-ready",
            format!("echo '{ready}'; echo 'garbage after ready'; sleep 30"),
            "\"garbage after ready\"",
        ),
    ];
    for (name, body, quoted) in bodies {
        let case = Case::new(&format!("chatty-{name}"), "off");
        let python = fake_python(&case, name, &body);
        let ran = with_interpreter(&case, &python);
        assert_eq!(ran.code, 1, "{name}: {}", ran.render());
        let said = &ran.stderr;
        assert!(
            said.contains("flow raiser (ai.iowarp.clio/flows/raiser.py): protocol error"),
            "{name}: {said}"
        );
        assert!(said.contains(quoted), "{name}: the line is quoted: {said}");
    }
}
