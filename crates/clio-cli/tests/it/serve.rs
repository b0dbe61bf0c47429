//! The `runs` commands from a second process while a run holds the journal: the process
//! that drives the run serves them over `$CLIO_HOME/clio.sock`, with the output and exit
//! codes they have when they open the journal themselves.
//!
//! The test plugin `tests/data/serve/holder` has `hold`, which keeps a run in progress
//! until the test leaves a release file in the workspace, and `asked`, which needs the
//! person's permission: `ask.json` runs both side by side, so its run waits on a question
//! while it is still in progress; `hold.json` only holds. Nothing waits by sleeping: each
//! test polls for the state it needs, with a timeout.

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::{Outcome, Sandbox, clio, workspace_root};

pub(crate) const PLUGIN: &str = "crates/clio-cli/tests/data/serve/holder";

/// A home whose run is workflow `file` of the serve test data.
pub(crate) fn case(name: &str, file: &str) -> Sandbox {
    let workflow = format!("crates/clio-cli/tests/data/serve/{file}");
    let command = ["workflow", "run", &workflow, "--task", "hold on", "--plugin", PLUGIN];
    Sandbox::new(&format!("serve-{name}"), &command)
}

/// A `clio` process started in the background, killed if the test ends before it does.
pub(crate) struct Owner {
    pub(crate) child: Option<Child>,
}

impl Owner {
    /// Starts the run of `case` quietly in the background.
    fn start(case: &Sandbox, file: &str) -> Owner {
        let workflow = format!("crates/clio-cli/tests/data/serve/{file}");
        Owner::spawn(&[
            "--home",
            case.h(),
            "workflow",
            "run",
            &workflow,
            "--task",
            "hold on",
            "--plugin",
            PLUGIN,
            "--workspace",
            case.ws(),
            "--quiet",
        ])
    }

    /// Starts `clio args…` in the background.
    pub(crate) fn spawn(args: &[&str]) -> Owner {
        let child = Command::new(env!("CARGO_BIN_EXE_clio"))
            .args(args)
            .current_dir(workspace_root())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        Owner { child: Some(child) }
    }

    /// Waits for the process to end and returns what it did.
    pub(crate) fn finish(mut self) -> Outcome {
        let output = self.child.take().unwrap().wait_with_output().unwrap();
        Outcome {
            code: output.status.code().unwrap_or(-1),
            stdout: String::from_utf8(output.stdout).unwrap(),
            stderr: String::from_utf8(output.stderr).unwrap(),
        }
    }

    /// Sends the process `signal` (`TERM`, `INT`) as `kill` does.
    pub(crate) fn signal(&self, signal: &str) {
        let pid = self.child.as_ref().unwrap().id().to_string();
        let sent = Command::new("kill").args([&format!("-{signal}"), &pid]).status().unwrap();
        assert!(sent.success());
    }

    /// Kills the process (SIGKILL) and waits for it.
    pub(crate) fn kill(mut self) {
        let mut child = self.child.take().unwrap();
        child.kill().unwrap();
        child.wait().unwrap();
    }
}

impl Drop for Owner {
    fn drop(&mut self) {
        if let Some(child) = self.child.as_mut() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Polls `ready` until it holds, for at most a minute.
pub(crate) fn wait_for(what: &str, mut ready: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !ready() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Runs `clio --home HOME args…`.
pub(crate) fn clio_at(case: &Sandbox, args: &[&str]) -> Outcome {
    let mut all = vec!["--home", case.h()];
    all.extend(args);
    clio(&all)
}

/// Runs a command that must succeed and returns its stdout as JSON.
fn json_of(case: &Sandbox, args: &[&str]) -> Value {
    let outcome = clio_at(case, args);
    assert_eq!(outcome.code, 0, "{args:?}: {}", outcome.render());
    serde_json::from_str(&outcome.stdout).unwrap()
}

/// Returns the status of run `run` as `runs list --json` gives it.
pub(crate) fn status(case: &Sandbox, run: u64) -> String {
    let runs = json_of(case, &["runs", "list", "--json"]);
    let list = runs.as_array().unwrap();
    let found = list.iter().find(|r| r["id"] == run);
    found.and_then(|r| r["status"].as_str()).unwrap_or_default().to_owned()
}

/// Returns the keys of a JSON object.
fn keys(value: &Value) -> BTreeSet<String> {
    value.as_object().map(|map| map.keys().cloned().collect()).unwrap_or_default()
}

fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or_default()
}

/// What the read-only commands print about run 1: list, show and tree as text and JSON.
struct Seen {
    list: Outcome,
    list_json: Value,
    show: Outcome,
    show_json: Value,
    tree: Outcome,
    tree_json: Value,
    events: Outcome,
}

fn seen(case: &Sandbox) -> Seen {
    Seen {
        list: clio_at(case, &["runs", "list"]),
        list_json: json_of(case, &["runs", "list", "--json"]),
        show: clio_at(case, &["runs", "show", "1"]),
        show_json: json_of(case, &["runs", "show", "1", "--json"]),
        tree: clio_at(case, &["runs", "tree", "1"]),
        tree_json: json_of(case, &["runs", "tree", "1", "--json"]),
        events: clio_at(case, &["runs", "events", "1"]),
    }
}

#[test]
fn every_runs_command_works_from_another_process_while_a_run_is_in_progress() {
    let case = case("answer", "ask.json");
    let owner = Owner::start(&case, "ask.json");
    let socket = case.home.join("clio.sock");
    // The run is in progress (hold) and waits on its question (asked).
    let mut question = None;
    wait_for("the run's question", || {
        if !socket.exists() {
            return false;
        }
        let show = clio_at(&case, &["runs", "show", "1", "--json"]);
        let Ok(value) = serde_json::from_str::<Value>(&show.stdout) else { return false };
        let entries = value["entries"].as_array().cloned().unwrap_or_default();
        question = entries.iter().find(|e| e["kind"] == "question").map(|e| e["seq"].clone());
        question.is_some()
    });
    let question = question.unwrap().as_u64().unwrap().to_string();

    let held = seen(&case);
    for outcome in [&held.list, &held.show, &held.tree, &held.events] {
        assert_eq!(outcome.code, 0, "{}", outcome.render());
        assert!(!outcome.stderr.contains("already open"), "{}", outcome.render());
    }
    assert_eq!(held.list_json[0]["status"], "running", "live, not interrupted");
    assert_eq!(first_line(&held.show.stdout), "run 1  workflow  running");
    assert_eq!(first_line(&held.tree.stdout), "run 1  workflow  running");
    assert!(
        held.show.stdout.contains("answer with: clio runs answer 1 yes|no"),
        "{}",
        held.show.stdout
    );
    let export = clio_at(&case, &["runs", "export", "1"]);
    assert_eq!(export.code, 0, "{}", export.render());
    assert!(export.stdout.lines().all(|l| serde_json::from_str::<Value>(l).is_ok()));

    // Errors come back as they would here, exit code included.
    let missing = clio_at(&case, &["runs", "show", "99"]);
    assert_eq!(missing.code, 1, "{}", missing.render());
    assert!(missing.stderr.starts_with("error: run 99 not found in "), "{}", missing.render());
    let missing = clio_at(&case, &["runs", "show", "99", "--json"]);
    assert_eq!(missing.code, 1);
    let error: Value = serde_json::from_str(&missing.stdout).unwrap();
    assert_eq!(error["ok"], false);

    // Nothing live is pruned; one process drives one run.
    let pruned = clio_at(&case, &["runs", "prune", "--older-than", "0m"]);
    assert_eq!(pruned.code, 0, "{}", pruned.render());
    assert_eq!(pruned.stdout, "pruned 0 run(s), with 0 task(s) and 0 journal entries\n");
    let resumed = clio_at(&case, &["runs", "resume", "1"]);
    assert_eq!(resumed.code, 1, "{}", resumed.render());
    assert!(resumed.stderr.starts_with("error: run 1 is running already"), "{}", resumed.render());

    // A command the owner does not serve says who holds the journal and what works.
    let second = clio_at(
        &case,
        &["workflow", "run", "crates/clio-cli/tests/data/serve/hold.json", "--task", "t"],
    );
    assert_eq!(second.code, 1, "{}", second.render());
    assert!(second.stderr.contains("is already open in another process"), "{}", second.render());
    assert!(second.stderr.contains("`clio runs` commands"), "{}", second.render());

    // A malformed request gets an error reply, and the owner goes on serving.
    let mut stream = UnixStream::connect(&socket).unwrap();
    stream.write_all(b"this is not a request\n").unwrap();
    let mut reply = String::new();
    BufReader::new(&stream).read_line(&mut reply).unwrap();
    let reply: Value = serde_json::from_str(&reply).unwrap();
    assert_eq!(reply["exit"], 2, "{reply}");
    assert!(reply["stderr"].as_str().unwrap().starts_with("error: malformed request"));

    // The answer reaches the live run, which goes on at once.
    let answered = clio_at(&case, &["runs", "answer", "1", &question, "yes"]);
    assert_eq!(answered.code, 0, "{}", answered.render());
    assert!(
        // Questions are numbered within their run: its only one is question 1.
        answered.stdout.starts_with("answered question 1 of run 1 with true\n"),
        "{}",
        answered.render()
    );
    wait_for("the allowed tool's result", || {
        let tree = clio_at(&case, &["runs", "tree", "1"]);
        tree.stdout.contains("(step asked) [succeeded]")
    });
    std::fs::write(case.workspace.join("release-ask"), "").unwrap();
    let ended = owner.finish();
    assert_eq!(ended.code, 0, "{}", ended.render());
    assert!(ended.stdout.contains("{\"allowed\":\"asked\"}"), "{}", ended.render());
    assert!(!socket.exists(), "the endpoint is removed when its owner ends");

    // Opened here, the commands print the same shapes.
    let own = seen(&case);
    assert_eq!(own.list_json[0]["status"], "succeeded");
    // The same columns (the table sizes them to what they hold).
    let words = |text: &str| first_line(text).split_whitespace().collect::<Vec<_>>().join(" ");
    assert_eq!(words(&own.list.stdout), words(&held.list.stdout));
    assert_eq!(keys(&own.list_json[0]), keys(&held.list_json[0]));
    assert_eq!(keys(&own.show_json), keys(&held.show_json));
    assert_eq!(keys(&own.show_json["run"]), keys(&held.show_json["run"]));
    assert_eq!(keys(&own.tree_json), keys(&held.tree_json));
    assert_eq!(first_line(&own.show.stdout), "run 1  workflow  succeeded");
    assert_eq!(first_line(&own.tree.stdout), "run 1  workflow  succeeded");
    assert_eq!(own.events.code, 0);
    let (own_first, held_first) = (first_line(&own.events.stdout), first_line(&held.events.stdout));
    assert_eq!(own_first, held_first, "the same first entry");
}

#[test]
fn a_cancel_from_another_process_stops_the_live_run() {
    let case = case("cancel", "hold.json");
    let owner = Owner::start(&case, "hold.json");
    let socket = case.home.join("clio.sock");
    wait_for("the run in progress", || socket.exists() && status(&case, 1) == "running");
    let mode = std::fs::metadata(&socket).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600, "the socket is its user's only");
    let cancelled = clio_at(&case, &["runs", "cancel", "1", "--json"]);
    assert_eq!(cancelled.code, 0, "{}", cancelled.render());
    let value: Value = serde_json::from_str(&cancelled.stdout).unwrap();
    assert_eq!(keys(&value), ["cancelled_tasks", "run"].map(String::from).into());
    assert_eq!(value["run"], 1);
    // The run stops without being released: its process reports it cancelled.
    let ended = owner.finish();
    assert_eq!(ended.code, 1, "{}", ended.render());
    assert!(ended.stderr.contains("error: run 1 was cancelled"), "{}", ended.render());
    assert_eq!(status(&case, 1), "cancelled");
    // Cancelled once, it cannot be cancelled again, served or not.
    let again = clio_at(&case, &["runs", "cancel", "1"]);
    assert_eq!(again.code, 1, "{}", again.render());
    assert!(again.stderr.starts_with("error: cannot cancel run 1: it has ended (cancelled)"));
}

#[test]
fn a_socket_left_by_a_killed_owner_breaks_nothing() {
    let case = case("stale", "hold.json");
    let owner = Owner::start(&case, "hold.json");
    let socket = case.home.join("clio.sock");
    wait_for("the run in progress", || socket.exists() && status(&case, 1) == "running");
    owner.kill();
    assert!(socket.exists(), "SIGKILL leaves the socket file");
    // Nothing answers there: the command opens the journal itself.
    let listed = clio_at(&case, &["runs", "list"]);
    assert_eq!(listed.code, 0, "{}", listed.render());
    assert_eq!(status(&case, 1), "interrupted");
    // The next owner replaces the stale socket and serves.
    let owner = Owner::start(&case, "hold.json");
    wait_for("run 2 in progress, served", || status(&case, 2) == "running");
    let tree = clio_at(&case, &["runs", "tree", "2"]);
    assert_eq!(tree.code, 0, "{}", tree.render());
    assert_eq!(first_line(&tree.stdout), "run 2  workflow  running");
    std::fs::write(case.workspace.join("release-hold"), "").unwrap();
    let ended = owner.finish();
    assert_eq!(ended.code, 0, "{}", ended.render());
    assert!(!socket.exists());
}

#[test]
fn clio_serve_holds_the_journal_and_serves_until_stopped() {
    let case = case("serve", "hold.json");
    std::fs::write(case.workspace.join("release-hold"), "").unwrap();
    let ran = case.run(None);
    assert_eq!(ran.code, 0, "{}", ran.render());
    let socket = case.home.join("clio.sock");
    for signal in ["TERM", "INT"] {
        let server = Owner::spawn(&["--home", case.h(), "serve", "--port", "0"]);
        wait_for("clio serve's socket", || UnixStream::connect(&socket).is_ok());
        assert_eq!(status(&case, 1), "succeeded");
        let tree = clio_at(&case, &["runs", "tree", "1"]);
        assert_eq!(tree.code, 0, "{}", tree.render());
        assert_eq!(first_line(&tree.stdout), "run 1  workflow  succeeded");
        let resumed = clio_at(&case, &["runs", "resume", "1"]);
        assert_eq!(resumed.code, 1, "{}", resumed.render());
        assert!(
            resumed.stderr.starts_with("error: cannot resume run 1: it has ended (succeeded)"),
            "{}",
            resumed.render()
        );
        let second = case.run(None);
        assert_eq!(second.code, 1, "{}", second.render());
        assert!(second.stderr.contains("already open in another process"), "{}", second.render());
        server.signal(signal);
        let stopped = server.finish();
        assert_eq!(stopped.code, 0, "{signal}: {}", stopped.render());
        assert!(stopped.stderr.contains("stopped serving"), "{}", stopped.render());
        assert!(!socket.exists(), "{signal}: the socket is removed");
    }
}
