//! Plugin code against the person (issue 41), under bubblewrap and under Landlock:
//! - the control socket is the person's: a sandboxed tool that connects to
//!   `$CLIO_HOME/clio.sock` and tries `runs answer`, `runs cancel` and `runs export` gets
//!   nothing, cannot read the socket's key nor any file of `$CLIO_HOME`, and the run's
//!   question stays open; a `run_code` script that tries to cancel its own run neither;
//!   and under Landlock a workspace that holds `$CLIO_HOME` is refused, not granted;
//! - no process of a tool outlives its call: `clio` is SIGKILLed while a side-effecting
//!   tool runs that left a forked child and a `setsid` daemon behind; after `runs resume`,
//!   which reports the call cut short, none of its processes runs and none of their
//!   effects ever appears.
//!
//! The test plugin is `tests/data/guard/prober`.

use std::path::Path;
use std::time::Duration;

use serde_json::Value;

use crate::serve::{Owner, clio_at, status, wait_for};
use crate::support::Sandbox;

const PLUGIN: &str = "crates/clio-cli/tests/data/guard/prober";

/// A home with workspace `$CLIO_HOME/workspace` whose run is workflow `file`, confining
/// code with sandbox `mode`.
fn case(name: &str, file: &str, mode: &str) -> Sandbox {
    let workflow = format!("crates/clio-cli/tests/data/guard/{file}");
    let command = ["workflow", "run", &workflow, "--task", "guard", "--plugin", PLUGIN];
    let case = Sandbox::new(&format!("guard-{name}-{mode}"), &command);
    std::fs::write(case.home.join("config.toml"), format!("[sandbox]\nmode = \"{mode}\"\n"))
        .unwrap();
    case
}

/// Starts the run of `case` (workflow `file`) in the background.
fn start(case: &Sandbox, file: &str) -> Owner {
    let workflow = format!("crates/clio-cli/tests/data/guard/{file}");
    Owner::spawn(&[
        "--home",
        case.h(),
        "workflow",
        "run",
        &workflow,
        "--task",
        "guard",
        "--plugin",
        PLUGIN,
        "--workspace",
        case.ws(),
        "--quiet",
    ])
}

/// Returns run 1's entries as `runs show --json` lists them.
fn entries(case: &Sandbox) -> Vec<Value> {
    let show = clio_at(case, &["runs", "show", "1", "--json"]);
    assert_eq!(show.code, 0, "{}", show.render());
    let value: Value = serde_json::from_str(&show.stdout).unwrap();
    value["entries"].as_array().cloned().unwrap_or_default()
}

fn the_socket_answers_no_plugin(mode: &str) {
    let case = case("socket", "probe.json", mode);
    if mode == "landlock" {
        // Under Landlock the socket is there to connect to: the probe waits for it, so
        // that its attempts reach the owner and are refused there.
        std::fs::write(case.workspace.join("wait-for-socket"), "").unwrap();
    }
    // The HTTP API's token, as `clio serve` keeps it: no more readable than the key.
    std::fs::write(case.home.join("serve.token"), format!("{}\n", "ab".repeat(32))).unwrap();
    let owner = start(&case, "probe.json");
    let log = case.workspace.join("probe.log");
    wait_for("the probe's log", || log.exists());
    wait_for("the probe's step to end", || {
        let tree = clio_at(&case, &["runs", "tree", "1"]);
        tree.stdout.contains("[succeeded]")
    });
    let probed = std::fs::read_to_string(&log).unwrap();
    assert!(!probed.contains("SERVED"), "{mode}: an attempt got through:\n{probed}");
    assert!(!probed.contains("READ "), "{mode}: a file of the home was read:\n{probed}");
    for file in ["clio.key", "serve.token", "journal.redb", "config.toml"] {
        assert!(probed.contains(&format!("cannot read {file}: ")), "{mode}:\n{probed}");
    }
    let attempts = probed.lines().filter(|l| l.starts_with("answer ")).count();
    assert_eq!(attempts, 12, "{mode}:\n{probed}");
    match mode {
        // The socket does not exist inside: $CLIO_HOME is not there.
        "bwrap" => assert!(
            probed.lines().filter(|l| l.contains(": cannot connect: ")).count() == 14,
            "{probed}"
        ),
        // It exists, and the owner refuses every request: it does not carry the key.
        _ => assert_eq!(
            probed.lines().filter(|l| l.contains("does not carry the key of")).count(),
            14,
            "{probed}"
        ),
    }
    // The question stays open, the run goes on, and the person can still answer it.
    assert_eq!(status(&case, 1), "awaiting_input", "{mode}");
    let entries = entries(&case);
    let question = entries.iter().find(|e| e["kind"] == "question").expect("a question");
    let seq = question["seq"].as_u64().unwrap().to_string();
    assert!(!entries.iter().any(|e| e["kind"] == "answer"), "{mode}: {entries:?}");
    let answered = clio_at(&case, &["runs", "answer", "1", &seq, "yes"]);
    assert_eq!(answered.code, 0, "{mode}: {}", answered.render());
    // With no terminal, the run's process ends once the run only waits on its answer; the
    // answered run then goes on where it waited.
    let ended = owner.finish();
    assert_eq!(ended.code, 0, "{mode}: {}", ended.render());
    if status(&case, 1) != "succeeded" {
        let resumed = clio_at(&case, &["runs", "resume", "1"]);
        assert_eq!(resumed.code, 0, "{mode}: {}", resumed.render());
    }
    assert_eq!(status(&case, 1), "succeeded", "{mode}");
    let tree = clio_at(&case, &["runs", "tree", "1"]);
    assert!(tree.stdout.contains("(step asked) [succeeded]"), "{mode}: {}", tree.render());
}

#[test]
fn under_bubblewrap_plugin_code_cannot_use_the_control_socket() {
    the_socket_answers_no_plugin("bwrap");
}

#[test]
fn under_landlock_plugin_code_cannot_use_the_control_socket() {
    the_socket_answers_no_plugin("landlock");
}

/// Returns the processes whose working folder is `dir`: a tool's, and what it left.
fn working_in(dir: &Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
    entries
        .flatten()
        .filter(|e| e.file_name().to_str().is_some_and(|n| n.parse::<u32>().is_ok()))
        .filter(|e| std::fs::read_link(e.path().join("cwd")).is_ok_and(|cwd| cwd == dir))
        .filter(|e| {
            // A zombie runs no more.
            let stat = std::fs::read_to_string(e.path().join("stat")).unwrap_or_default();
            let state = stat.rsplit_once(')').and_then(|(_, r)| r.trim_start().chars().next());
            !matches!(state, Some('Z' | 'X') | None)
        })
        .map(|e| {
            let cmd = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
            let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
            format!("{} {cmd}", e.file_name().to_string_lossy())
        })
        .collect()
}

fn nothing_outlives_a_killed_clio(mode: &str) {
    let case = case("linger", "linger.json", mode);
    let owner = start(&case, "linger.json");
    let started = case.workspace.join("started");
    wait_for("the tool to start", || started.exists());
    // Its child and its daemon are running, each to write late.log in four seconds.
    wait_for("the tool's processes", || working_in(&case.workspace).len() >= 3);
    owner.kill();
    let resumed = case.resume();
    assert!(resumed.stderr.contains("cut short"), "{mode}: {}", resumed.render());
    // Nothing of the call runs once the resume has reported it cut short...
    let left = working_in(&case.workspace);
    assert!(left.is_empty(), "{mode}: still running after the resume: {left:?}");
    // ...and nothing it would have done appears later (its child and daemon write four
    // seconds after the tool started; a resume slower than that would see them before
    // its report, which is no fault).
    let late = case.workspace.join("late.log");
    let at_report = std::fs::read_to_string(&late).ok();
    std::thread::sleep(Duration::from_secs(5));
    let later = std::fs::read_to_string(&late).ok();
    assert_eq!(later, at_report, "{mode}: an effect after the report");
    assert_eq!(status(&case, 1), "failed", "{mode}: {}", resumed.render());
}

#[test]
fn under_bubblewrap_no_process_of_a_tool_outlives_a_killed_clio() {
    nothing_outlives_a_killed_clio("bwrap");
}

#[test]
fn under_landlock_no_process_of_a_tool_outlives_a_killed_clio() {
    nothing_outlives_a_killed_clio("landlock");
}

#[test]
fn with_the_sandbox_off_no_process_of_a_tool_outlives_a_killed_clio() {
    nothing_outlives_a_killed_clio("off");
}

#[test]
fn under_landlock_a_workspace_that_holds_the_home_is_refused_not_granted() {
    // Landlock cannot take back a folder inside one it grants: the tool does not run.
    let case = case("holds", "probe-only.json", "landlock");
    let ran = crate::support::clio(&[
        "--home",
        case.h(),
        "workflow",
        "run",
        "crates/clio-cli/tests/data/guard/probe-only.json",
        "--task",
        "guard",
        "--plugin",
        PLUGIN,
        "--workspace",
        case.h(),
        "--quiet",
    ]);
    assert_eq!(ran.code, 1, "{}", ran.render());
    let home = case.home.display().to_string();
    assert!(ran.stderr.contains("call refused (sandbox_unavailable)"), "{}", ran.render());
    assert!(ran.stderr.contains(&format!("{home} would be granted")), "{}", ran.render());
    assert!(ran.stderr.contains("which no sandboxed program may see"), "{}", ran.render());
    assert!(!case.home.join("probe.log").exists(), "the probe ran");
}

/// A `run_code` script tries the home's files and the socket (a cancel of its own run).
fn a_script_gets_nothing_either(mode: &str) {
    let case = case("script", "code-probe.json", mode);
    let ran = crate::support::clio(&[
        "--home",
        case.h(),
        "workflow",
        "run",
        "crates/clio-cli/tests/data/guard/code-probe.json",
        "--task",
        "guard",
        "--workspace",
        case.ws(),
        "--json",
    ]);
    assert_eq!(ran.code, 0, "{mode}: {}", ran.render());
    let value: Value = serde_json::from_str(&ran.stdout).unwrap();
    let printed = value["outputs"]["results"]["code"]["stdout"].as_str().unwrap_or_default();
    assert!(printed.contains("cannot read clio.key: "), "{mode}: {printed}");
    assert!(printed.contains("cannot read journal.redb: "), "{mode}: {printed}");
    assert!(!printed.contains("READ "), "{mode}: {printed}");
    match mode {
        "bwrap" => assert!(printed.contains("cannot connect: "), "{printed}"),
        _ => assert!(printed.contains("does not carry the key of"), "{printed}"),
    }
    assert_eq!(status(&case, 1), "succeeded", "{mode}: not cancelled");
}

#[test]
fn under_bubblewrap_a_script_cannot_use_the_control_socket() {
    a_script_gets_nothing_either("bwrap");
}

#[test]
fn under_landlock_a_script_cannot_use_the_control_socket() {
    a_script_gets_nothing_either("landlock");
}
