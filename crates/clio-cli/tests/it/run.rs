//! Running workflows, agents and flows on the built binary, offline on the scripted model:
//! the main job's answer, a question answered by a later process, a run killed with
//! SIGKILL and resumed to the same answer, cancellation, and the errors a person meets.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use insta::assert_snapshot;

use crate::support::{clio, temp_home, workspace_root};

/// The README's main job, with `--home` and any `extra` flags.
fn batch7(home: &str, extra: &[&str]) -> Vec<String> {
    let mut args: Vec<String> = [
        "--home",
        home,
        "workflow",
        "run",
        "examples/workflows/batch7.json",
        "--task",
        "Review batch 7 of the Ti-6Al-4V fatigue campaign",
        "--plugin",
        "examples/marketplace/plugins/materials",
        "--workspace",
        "examples/workspace",
        "--models",
        "examples/models/models.toml",
        "--editor",
        "independent_reviewer",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    args.extend(extra.iter().map(|s| (*s).to_owned()));
    args
}

fn run_batch7(home: &str, extra: &[&str]) -> crate::support::Outcome {
    let args = batch7(home, extra);
    clio(&args.iter().map(String::as_str).collect::<Vec<_>>())
}

/// Trusts the example plugin in `home`, as the README's first step does: its tool runs
/// only once it is trusted.
fn trust_materials(home: &str) {
    let plugin = "examples/marketplace/plugins/materials";
    let trusted = clio(&["--home", home, "plugin", "trust", plugin]);
    assert_eq!(trusted.code, 0, "{}", trusted.render());
}

#[test]
fn the_main_job_answers_with_every_step_and_the_editors_addition() {
    let home = temp_home("run-main");
    let h = home.to_str().unwrap();
    trust_materials(h);
    let outcome = run_batch7(h, &[]);
    assert_eq!(outcome.code, 0, "{}", outcome.render());
    assert_snapshot!(outcome.stdout);
    // Progress went to stderr, one line per change, ending with the added step.
    assert!(outcome.stderr.starts_with("run 1 started"), "{}", outcome.stderr);
    assert!(outcome.stderr.contains("tool csv_stats succeeded"), "{}", outcome.stderr);
    assert!(outcome.stderr.contains("tool workflow_add_step succeeded"), "{}", outcome.stderr);

    let tree = clio(&["--home", h, "runs", "tree", "1"]);
    assert!(tree.stdout.contains("tool csv_stats [succeeded]"), "{}", tree.stdout);
    let listed = clio(&["--home", h, "runs", "list", "--json"]);
    let runs: serde_json::Value = serde_json::from_str(&listed.stdout).unwrap();
    assert_eq!(runs[0]["status"], "succeeded");

    // Resuming a finished run returns its recorded answer and does no work again.
    let again = clio(&["--home", h, "runs", "resume", "1", "--quiet"]);
    assert_eq!(again.code, 0, "{}", again.render());
    assert_eq!(again.stdout, outcome.stdout);
    let tree_after = clio(&["--home", h, "runs", "tree", "1"]);
    assert_eq!(tree_after.stdout, tree.stdout);
}

#[test]
fn a_question_is_answered_by_a_later_process() {
    let home = temp_home("run-ask");
    let h = home.to_str().unwrap();
    trust_materials(h);
    let waiting = run_batch7(h, &["--approve-edits", "--json"]);
    assert_eq!(waiting.code, 0, "{}", waiting.render());
    let value: serde_json::Value = serde_json::from_str(&waiting.stdout).unwrap();
    assert_eq!(value["status"], "awaiting_input");
    let question = value["questions"][0]["id"].as_u64().unwrap().to_string();

    let bad = clio(&["--home", h, "runs", "answer", "1", &question, "perhaps"]);
    assert_eq!(bad.code, 1, "{}", bad.render());
    assert!(bad.stderr.contains("yes or no"), "{}", bad.stderr);

    let answered = clio(&["--home", h, "runs", "answer", "1", &question, "no"]);
    assert_eq!(answered.code, 0, "{}", answered.render());
    let resumed = clio(&["--home", h, "runs", "resume", "1", "--quiet"]);
    assert_eq!(resumed.code, 0, "{}", resumed.render());
    assert!(
        !resumed.stdout.contains("porosity_check"),
        "the refused step does not run: {}",
        resumed.stdout
    );
    assert!(resumed.stdout.contains("## review (offline/demo)"), "{}", resumed.stdout);
}

#[test]
fn a_killed_run_resumes_to_the_same_answer() {
    let reference_home = temp_home("run-kill-ref");
    trust_materials(reference_home.to_str().unwrap());
    let reference = run_batch7(reference_home.to_str().unwrap(), &[]);
    assert_eq!(reference.code, 0, "{}", reference.render());

    for kill_after in [1, 3, 6] {
        let home = temp_home(&format!("run-kill-{kill_after}"));
        let h = home.to_str().unwrap();
        trust_materials(h);
        let mut child = Command::new(env!("CARGO_BIN_EXE_clio"))
            .args(batch7(h, &[]))
            .current_dir(workspace_root())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let mut seen = 0;
        while seen < kill_after {
            match lines.next() {
                Some(Ok(line)) if line.starts_with('[') => seen += 1,
                Some(Ok(_)) => {}
                _ => break,
            }
        }
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();

        let resumed = clio(&["--home", h, "runs", "resume", "1", "--quiet"]);
        assert_eq!(resumed.code, 0, "kill after {kill_after}: {}", resumed.render());
        assert_eq!(resumed.stdout, reference.stdout, "kill after {kill_after}");
        let listed = clio(&["--home", h, "runs", "list", "--json"]);
        let runs: serde_json::Value = serde_json::from_str(&listed.stdout).unwrap();
        assert_eq!(runs[0]["status"], "succeeded");
    }
}

#[test]
fn an_agent_runs_its_flow_and_a_run_can_be_cancelled() {
    let home = temp_home("run-agent");
    let h = home.to_str().unwrap();
    let outcome = clio(&[
        "--home",
        h,
        "run",
        "examples/agents/minimal.toml",
        "--input",
        "Say hello",
        "--models",
        "examples/models/models.toml",
        "--json",
    ]);
    assert_eq!(outcome.code, 0, "{}", outcome.render());
    let value: serde_json::Value = serde_json::from_str(&outcome.stdout).unwrap();
    assert_eq!(value["status"], "succeeded");
    assert!(value["answer"].as_str().unwrap().starts_with("Hello!"), "{value}");

    let waiting = run_batch7(h, &["--approve-edits", "--quiet"]);
    assert_eq!(waiting.code, 0, "{}", waiting.render());
    let cancelled = clio(&["--home", h, "runs", "cancel", "2"]);
    assert_eq!(cancelled.code, 0, "{}", cancelled.render());
    let resumed = clio(&["--home", h, "runs", "resume", "2", "--quiet"]);
    assert_eq!(resumed.code, 1, "{}", resumed.render());
    assert!(resumed.stderr.contains("run 2 was cancelled"), "{}", resumed.stderr);
}

#[test]
fn models_are_listed() {
    let outcome = clio(&["models", "list", "--models", "examples/models/models.toml"]);
    assert_eq!(outcome.code, 0, "{}", outcome.render());
    assert_snapshot!(outcome.stdout, @"offline/demo             via scripted     tools, vision, context 1000000, output 100000");
}

#[test]
fn errors_say_what_to_do() {
    let home = temp_home("run-errors");
    let h = home.to_str().unwrap();
    let plugin = "examples/marketplace/plugins/materials";
    let cases: Vec<Vec<&str>> = vec![
        // A plugin's flow runs only once the plugin is trusted; a run that may not ask
        // the person is refused, naming the command that trusts it.
        vec!["run", "batch7", "--plugin", plugin, "--input", "x", "--no-input"],
        vec!["run", "no-such-flow", "--input", "x"],
        vec!["run", "missing-agent.toml", "--input", "x"],
        vec!["run", "batch7", "--plugin", plugin, "--input", "x", "--option", "approve_edits=3"],
        vec![
            "run",
            "examples/agents/minimal.toml",
            "--input",
            "Say hello",
            "--models",
            "examples/models/models.toml",
            "--model",
            "offline/nope",
        ],
        vec!["workflow", "run", "examples/workflows/batch7.json", "--task", "x"],
        vec![
            "workflow",
            "run",
            "examples/workflows/batch7.json",
            "--task",
            "x",
            "--plugin",
            plugin,
            "--models",
            "examples/models/models.toml",
            "--editor",
            "nosuch",
        ],
        vec![
            "run",
            "examples/agents/minimal.toml",
            "--input",
            "x",
            "--models",
            "examples/models/models.toml",
            "--option",
            "max_iters=abc",
        ],
        vec!["runs", "resume", "9"],
        vec!["runs", "answer", "9", "1", "yes"],
        vec!["models", "list"],
    ];
    let mut all = String::new();
    for args in cases {
        let mut full = vec!["--home", h];
        full.extend(args.iter().copied());
        let outcome = clio(&full);
        assert_ne!(outcome.code, 0, "{args:?}: {}", outcome.render());
        all.push_str(&format!("## clio {}\n{}", args.join(" "), outcome.render()));
    }
    let repo = workspace_root().display().to_string();
    let all = all.replace(h, "[home]").replace(&repo, "[repo]");
    assert_snapshot!(crate::support::redact_progress(&redact_digests(&all)));
    // Every mistake was caught before a run existed: the journal holds none.
    let runs = clio(&["--home", h, "runs", "list", "--json"]);
    assert_eq!(runs.code, 0, "{}", runs.render());
    let runs: serde_json::Value = serde_json::from_str(&runs.stdout).unwrap();
    assert_eq!(runs, serde_json::json!([]), "no run was created");
}

/// Replaces content digests (`sha256:` and 64 hex digits), which change with the files.
fn redact_digests(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find("sha256:") {
        out.push_str(&rest[..at]);
        let digits = rest[at + 7..].chars().take_while(char::is_ascii_hexdigit).count();
        out.push_str("sha256:[digest]");
        rest = &rest[at + 7 + digits..];
    }
    out.push_str(rest);
    out
}

#[test]
fn an_installed_and_trusted_agent_runs_its_plugins_flow() {
    let home = temp_home("run-installed");
    let h = home.to_str().unwrap();
    let agent = "examples/marketplace/agents/materials-lead.toml";
    let run = |extra: &[&str]| {
        let mut args = vec!["--home", h, "run", agent, "--input", "Review batch 7", "--quiet"];
        args.extend([
            "--workspace",
            "examples/workspace",
            "--models",
            "examples/models/models.toml",
        ]);
        args.extend(extra.iter().copied());
        clio(&args)
    };
    let not_installed = run(&[]);
    assert_eq!(not_installed.code, 1, "{}", not_installed.render());
    assert!(
        not_installed.stderr.contains("the plugins agent materials-lead needs are not installed")
            && not_installed.stderr.contains("needs examples/materials@^0.1"),
        "{}",
        not_installed.stderr
    );

    let installed =
        clio(&["--home", h, "plugin", "install", "examples/marketplace", "--agent", agent]);
    assert_eq!(installed.code, 0, "{}", installed.render());
    // Not trusted: the person is asked first (the run waits), shown the plugin and what
    // it brings; a run that may not ask is refused, naming the command that trusts it.
    let untrusted = run(&[]);
    assert_eq!(untrusted.code, 0, "{}", untrusted.render());
    assert!(
        untrusted.stdout.contains("trust plugin materials 0.1.0 (digest sha256:"),
        "{}",
        untrusted.stdout
    );
    let refused = run(&["--no-input"]);
    assert_eq!(refused.code, 1, "{}", refused.render());
    assert!(refused.stderr.contains("plugin materials 0.1.0 is not trusted"), "{}", refused.stderr);
    assert!(refused.stderr.contains("no run was created"), "{}", refused.stderr);
    assert!(
        refused.stderr.contains("`clio plugin trust examples/materials 0.1.0`"),
        "{}",
        refused.stderr
    );

    let trusted = clio(&["--home", h, "plugin", "trust", "examples/materials", "0.1.0"]);
    assert_eq!(trusted.code, 0, "{}", trusted.render());
    let outcome = run(&[]);
    assert_eq!(outcome.code, 0, "{}", outcome.render());
    assert!(outcome.stdout.starts_with("## porosity_check (offline/demo)"), "{}", outcome.stdout);
}

#[test]
fn the_homes_config_sets_tool_permissions_and_a_bad_value_is_named() {
    let home = temp_home("run-tool-settings");
    let h = home.to_str().unwrap();
    let agent = [
        "--home",
        h,
        "run",
        "examples/agents/minimal.toml",
        "--input",
        "Say hello",
        "--models",
        "examples/models/models.toml",
    ];
    std::fs::write(
        home.join("config.toml"),
        "[tools]\npermissions = { \"write_*\" = \"deny\" }\ncallers = { \"run_code\" = \"both\" }\n",
    )
    .unwrap();
    let outcome = clio(&agent);
    assert_eq!(outcome.code, 0, "{}", outcome.render());
    std::fs::write(home.join("config.toml"), "[tools]\npermissions = { \"x\" = \"maybe\" }\n")
        .unwrap();
    let outcome = clio(&agent);
    assert_eq!(outcome.code, 1, "{}", outcome.render());
    assert!(
        outcome
            .stderr
            .contains("tools.permissions.\"x\" = \"maybe\": allowed values are allow, ask, deny"),
        "{}",
        outcome.render()
    );
}

#[test]
fn a_workflow_step_starts_a_flow_in_the_background_with_run_flow() {
    let home = temp_home("run-orchestration");
    let file = home.join("background.json");
    let workflow = serde_json::json!({ "steps": [{
        "id": "start",
        "target": "run_flow",
        "input": {
            "flow": "council",
            "input": "Is Ti-6Al-4V fatigue-limited?",
            "options": { "members": ["self"], "models": ["offline/demo"] }
        }
    }]});
    std::fs::write(&file, workflow.to_string()).unwrap();
    let home = home.to_str().unwrap();
    let file = file.to_str().unwrap();
    let outcome = clio(&[
        "--home",
        home,
        "workflow",
        "run",
        file,
        "--task",
        "t",
        "--models",
        "examples/models/models.toml",
        "--workspace",
        "examples/workspace",
        "-q",
    ]);
    assert_eq!(outcome.code, 0, "{}", outcome.render());
    assert!(
        outcome.stdout.contains(r#"{"handle":2,"target":"council","status":"running"}"#),
        "the step gets the handle at once: {}",
        outcome.render()
    );
    let tree = clio(&["--home", home, "runs", "tree", "1"]);
    assert_eq!(tree.code, 0, "{}", tree.render());
    assert!(tree.stdout.contains("#1 tool run_flow (step start) [succeeded]"), "{}", tree.render());
    assert!(
        tree.stdout.contains("└─ #2 flow council [succeeded] \"background council\""),
        "the run waited for the started council: {}",
        tree.render()
    );
}

/// The README's main job on a machine without `python3` (the example tools are python3
/// scripts): a run that succeeds although tasks failed says so, with each full cause.
#[test]
fn a_run_that_succeeds_with_failed_tasks_says_so() {
    let home = temp_home("run-failed-tasks");
    let h = home.to_str().unwrap();
    let trusted = clio(&["--home", h, "plugin", "trust", "examples/marketplace/plugins/materials"]);
    assert_eq!(trusted.code, 0, "{}", trusted.render());
    // A workspace without the CSV file the scripted model asks csv_stats about: the tool
    // fails (a sandboxed tool gets the sandbox's own PATH, so clio's PATH cannot break it).
    let workspace = home.join("workspace");
    std::fs::create_dir_all(workspace.join("data/batch7/micrographs")).unwrap();
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_clio"))
        .args([
            "--home",
            h,
            "workflow",
            "run",
            "examples/workflows/batch7.json",
            "--task",
            "Review batch 7",
            "--plugin",
            "examples/marketplace/plugins/materials",
            "--workspace",
            workspace.to_str().unwrap(),
            "--models",
            "examples/models/models.toml",
            "--quiet",
        ])
        .current_dir(crate::support::workspace_root())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    // The scripted model answers without the tool's result: the run succeeds.
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("warning: run 1 succeeded, but 1 of its tasks failed"), "{stderr}");
    assert!(stderr.contains("tool csv_stats: call failed"), "names the failed tool: {stderr}");
    assert!(stderr.contains("No such file or directory"), "the whole cause: {stderr}");
    assert!(!stderr.contains("{\"reason\""), "the cause, not its JSON: {stderr}");
}

/// Issue 46 item 2: `clio runs stop RUN [TASK]`, from another terminal, ends the model's
/// current turn of a run `clio run` drives: the turn's call fails with `call_stopped`,
/// recorded on its task. A flow task is refused (Stop never ends a started flow), and a
/// run no process drives has no turn to stop.
#[test]
fn runs_stop_ends_the_models_current_turn() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    let release = Arc::new(AtomicBool::new(false));
    let held = Arc::clone(&release);
    // The model takes its time: until the test ends, or at most a minute.
    let server = crate::support::ChatServer::start(move |_| {
        for _ in 0..600 {
            if held.load(Ordering::SeqCst) {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        crate::support::ChatServer::answer("too late")
    });
    let home = temp_home("runs-stop");
    let h = home.to_str().unwrap().to_owned();
    std::fs::write(
        home.join("config.toml"),
        format!(
            "default_model = \"slow/m\"\n\n[[provider]]\nname = \"slow\"\nkind = \"openai\"\nbase_url = \"{}\"\n\n\
             [[model]]\naccount = \"slow\"\nid = \"m\"\nprovider = \"slow\"\ncapabilities = {{ tool_calling = true }}\n",
            server.url
        ),
    )
    .unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_clio"))
        .args(["--home", &h, "run", "examples/agents/minimal.toml", "--input", "Take your time"])
        .args(["--no-input", "--json"])
        .current_dir(workspace_root())
        .env_remove("RUST_LOG")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The turn is live once the model has been asked.
    for _ in 0..600 {
        if !server.requests().is_empty() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(!server.requests().is_empty(), "the model was never asked");
    let tree = clio(&["--home", &h, "runs", "tree", "1", "--json"]);
    let value: serde_json::Value = serde_json::from_str(&tree.stdout).unwrap();
    let tasks = value["tasks"].as_array().unwrap().clone();
    let flow = tasks.iter().find(|t| t["kind"] == "flow").map(|t| t["id"].as_u64().unwrap());
    if let Some(flow) = flow {
        let refused = clio(&["--home", &h, "runs", "stop", "1", &flow.to_string()]);
        assert_eq!(refused.code, 1, "{}", refused.render());
        assert!(refused.stderr.contains("never a started flow"), "{}", refused.render());
    }
    let stopped = clio(&["--home", &h, "runs", "stop", "1", "--json"]);
    assert_eq!(stopped.code, 0, "{}", stopped.render());
    let value: serde_json::Value = serde_json::from_str(&stopped.stdout).unwrap();
    let ids = value["stopped"].as_array().unwrap().clone();
    assert_eq!(ids.len(), 1, "{value}");
    let output = child.wait_with_output().unwrap();
    release.store(true, Ordering::SeqCst);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains("call_stopped"), "{stdout}");
    let shown = clio(&["--home", &h, "runs", "show", "1", "--json"]);
    let value: serde_json::Value = serde_json::from_str(&shown.stdout).unwrap();
    let turn = value["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["id"] == ids[0])
        .unwrap_or_else(|| panic!("{value}"))
        .clone();
    assert_eq!(turn["status"], "failed", "{turn}");
    assert!(turn.to_string().contains("call_stopped"), "{turn}");
    // No process drives the run now: it has ended, and there is nothing to stop.
    let again = clio(&["--home", &h, "runs", "stop", "1"]);
    assert_eq!(again.code, 1, "{}", again.render());
}

/// Issue 46 item 7 on the built binary: a read-only tool a workflow step runs was invisible
/// while it ran (`runs tree` did not show it, `runs cancel` said "0 unfinished"). Now it is
/// in the tree as running, and a cancel counts it and ends the run.
#[test]
fn a_running_read_only_tool_is_in_the_tree_and_counted_by_cancel() {
    use std::os::unix::fs::PermissionsExt;
    let home = temp_home("slow-read");
    let h = home.to_str().unwrap().to_owned();
    let plugin = home.join("slow");
    let clio_dir = plugin.join("ai.iowarp.clio");
    std::fs::create_dir_all(clio_dir.join("bin")).unwrap();
    std::fs::write(
        clio_dir.join("plugin.toml"),
        "id = \"slow\"\nversion = \"0.1.0\"\ndescription = \"A slow reader.\"\n\n\
         [[tools]]\nname = \"slow_read\"\ndescription = \"Reads, slowly.\"\nread_only = true\n\
         command = \"bin/slow_read\"\n",
    )
    .unwrap();
    let program = clio_dir.join("bin/slow_read");
    std::fs::write(&program, "#!/bin/sh\ncat > /dev/null\nsleep 60\necho '{\"read\": true}'\n")
        .unwrap();
    std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).unwrap();
    let workflow = home.join("wf.json");
    std::fs::write(&workflow, r#"{"steps": [{"id": "read", "target": "slow_read", "input": {}}]}"#)
        .unwrap();
    let workspace = home.join("ws");
    std::fs::create_dir_all(&workspace).unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_clio"))
        .args(["--home", &h, "workflow", "run", workflow.to_str().unwrap(), "--task", "t"])
        .args(["--plugin", plugin.to_str().unwrap(), "--trust", "--no-input", "--quiet"])
        .args(["--workspace", workspace.to_str().unwrap()])
        .current_dir(workspace_root())
        .env_remove("RUST_LOG")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut running = None;
    for _ in 0..300 {
        let tree = clio(&["--home", &h, "runs", "tree", "1", "--json"]);
        if let Ok(value) = serde_json::from_str::<serde_json::Value>(&tree.stdout) {
            running = value["tasks"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|t| t["target"] == "slow_read" && t["status"] == "running")
                .cloned();
        }
        if running.is_some() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert!(running.is_some(), "the running read-only tool is in the tree");
    let cancelled = clio(&["--home", &h, "runs", "cancel", "1"]);
    assert_eq!(cancelled.code, 0, "{}", cancelled.render());
    assert!(!cancelled.stdout.contains("(0 unfinished"), "{}", cancelled.render());
    assert!(cancelled.stdout.contains("unfinished"), "{}", cancelled.render());
    let output = child.wait_with_output().unwrap();
    assert_ne!(output.status.code(), Some(0), "a cancelled run does not succeed");
}

/// Issue 46 item 6 on the built binary: a plugin whose only content is a `fail_closed`
/// `tool_call` hook, passed untrusted, used to deny every tool without a word (the run
/// "succeeded" with its steps denied). Now the run asks to trust it before the hook decides
/// anything; a yes runs the hook and the step; under `--no-input` it is refused, naming it.
#[test]
fn an_untrusted_fail_closed_hook_asks_for_trust_instead_of_denying_every_tool() {
    use std::os::unix::fs::PermissionsExt;
    const COUNTER: &str = "crates/clio-cli/tests/data/side-effects/counter";
    let home = temp_home("guard-hook");
    let h = home.to_str().unwrap().to_owned();
    let guard = home.join("guard");
    let clio_dir = guard.join("ai.iowarp.clio");
    std::fs::create_dir_all(clio_dir.join("hooks")).unwrap();
    std::fs::write(
        clio_dir.join("plugin.toml"),
        "id = \"guard\"\nversion = \"0.1.0\"\ndescription = \"Guards every call.\"\n\n\
         [[hooks]]\nevent = \"tool_call\"\nid = \"watch\"\ncommand = \"hooks/watch\"\n\
         fail_closed = true\n",
    )
    .unwrap();
    let program = clio_dir.join("hooks/watch");
    std::fs::write(&program, "#!/bin/sh\ncat > /dev/null\necho watch >> watched.log\necho '{}'\n")
        .unwrap();
    std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).unwrap();
    let workflow = home.join("wf.json");
    std::fs::write(
        &workflow,
        r#"{"steps": [{"id": "mark", "target": "checkpoint", "input": {"label": "seen"}}]}"#,
    )
    .unwrap();
    let workspace = home.join("ws");
    std::fs::create_dir_all(&workspace).unwrap();
    let trusted = clio(&["--home", &h, "plugin", "trust", COUNTER]);
    assert_eq!(trusted.code, 0, "{}", trusted.render());
    let run = |extra: &[&str]| {
        let mut args = vec!["--home", h.as_str(), "workflow", "run", workflow.to_str().unwrap()];
        args.extend(["--task", "t", "--plugin", COUNTER, "--plugin", guard.to_str().unwrap()]);
        args.extend(["--workspace", workspace.to_str().unwrap(), "--quiet"]);
        args.extend(extra.iter().copied());
        clio(&args)
    };
    let refused = run(&["--no-input"]);
    assert_eq!(refused.code, 1, "{}", refused.render());
    assert!(refused.stderr.contains("guard"), "{}", refused.render());

    let asked = run(&["--json"]);
    let value: serde_json::Value =
        serde_json::from_str(&asked.stdout).unwrap_or_else(|e| panic!("{e}: {}", asked.render()));
    assert_eq!(value["status"], "awaiting_input", "asked, not denied: {value}");
    let question = &value["questions"][0];
    assert!(question.to_string().contains("trust plugin guard"), "{value}");
    assert!(!workspace.join("watched.log").exists(), "the hook did not run before the yes");
    let run_id = value["run"].as_u64().unwrap().to_string();
    let id = question["id"].as_u64().unwrap().to_string();
    let answered = clio(&["--home", &h, "runs", "answer", &run_id, &id, "yes", "--json"]);
    assert_eq!(answered.code, 0, "{}", answered.render());
    let resumed = clio(&["--home", &h, "runs", "resume", &run_id, "--json"]);
    let ended: serde_json::Value = serde_json::from_str(&resumed.stdout).unwrap_or_default();
    let shown = clio(&["--home", &h, "runs", "show", &run_id, "--json"]);
    let shown: serde_json::Value = serde_json::from_str(&shown.stdout).unwrap();
    assert_eq!(shown["run"]["status"], "succeeded", "{ended} {shown}");
    assert!(workspace.join("watched.log").exists(), "the trusted hook ran");
}
