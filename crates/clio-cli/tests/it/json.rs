//! `--json` on every command that prints data: what each prints on stdout parses as
//! JSON, on success and on failure (then `{"ok": false, ...}` with the same exit code as
//! without `--json`), and holds no JSON inside strings. The shapes are documented in
//! docs/cli.md.

use serde_json::Value;

use crate::support::{Outcome, clio, temp_home};

const PLUGIN: &str = "examples/marketplace/plugins/materials";

/// Parses what `outcome` printed on stdout, naming the command when it is not JSON.
fn parsed(args: &[&str], outcome: &Outcome) -> Value {
    serde_json::from_str(&outcome.stdout).unwrap_or_else(|e| {
        panic!("clio {}: stdout is not JSON ({e}):\n{}", args.join(" "), outcome.render())
    })
}

/// Runs `clio --home HOME ARGS` and returns its exit code and parsed stdout.
fn json_of(home: &str, args: &[&str]) -> (i32, Value) {
    let mut full = vec!["--home", home];
    full.extend_from_slice(args);
    let outcome = clio(&full);
    (outcome.code, parsed(args, &outcome))
}

#[test]
fn every_command_prints_json_on_success_and_on_failure() {
    let home = temp_home("json-every");
    let h = home.to_str().unwrap();
    let (code, _) = json_of(h, &["plugin", "trust", PLUGIN, "--json"]);
    assert_eq!(code, 0);

    // A run: never `"model": ""`.
    let (code, run) = json_of(
        h,
        &[
            "workflow",
            "run",
            "examples/workflows/batch7.json",
            "--task",
            "Review batch 7",
            "--plugin",
            PLUGIN,
            "--models",
            "examples/models/models.toml",
            "--workspace",
            "examples/workspace",
            "--editor",
            "independent_reviewer",
            "--json",
        ],
    );
    assert_eq!(code, 0, "{run}");
    assert_eq!(run["status"], "succeeded");
    assert!(
        run["model"].is_null() || run["model"].as_str().is_some_and(|m| !m.is_empty()),
        "{run}"
    );
    // The keys, in the order every outcome prints them; the outputs hold each step's.
    let keys: Vec<&str> = run.as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(keys, ["run", "status", "answer", "outputs", "model"], "{run}");
    assert!(run["answer"].as_str().is_some_and(|a| !a.is_empty()), "{run}");
    let results = run["outputs"]["results"].as_object().unwrap();
    let steps = run["outputs"]["workflow"].as_array().unwrap();
    assert!(!results.is_empty() && steps.len() >= results.len(), "{run}");

    // No JSON inside strings: the flow selection and the fingerprint are objects.
    let (code, list) = json_of(h, &["runs", "list", "--json"]);
    assert_eq!(code, 0);
    assert!(list[0]["flow"].is_object(), "{list}");
    assert!(!list[0]["fingerprint"].is_string(), "{list}");
    assert_eq!(list[0]["status"], "succeeded");
    assert_ne!(list[0]["launch"]["model"], "", "no model is null, not \"\": {list}");

    let (_, show) = json_of(h, &["runs", "show", "1", "--json"]);
    let tasks = show["tasks"].as_array().unwrap();
    assert_eq!(tasks[0]["number"], 1, "tasks are numbered within the run: {show}");
    assert!(tasks.iter().any(|t| t["step"] == "tests"), "workflow steps are named: {show}");
    for args in [
        &["runs", "tree", "1", "--json"][..],
        &["runs", "events", "1", "--json"],
        &["runs", "replay", "1", "--json"],
        &["runs", "resume", "1", "--json"],
        &["runs", "prune", "--before", "1970-01-02", "--json"],
        &["plugin", "list", "--json"],
        &["plugin", "check", PLUGIN, "--json"],
        &["agent", "spec", "examples/agents/minimal.toml", "--json"],
        &["workflow", "check", "examples/workflows/batch7.json", "--json"],
        &["models", "list", "--models", "examples/models/models.toml", "--json"],
        &["journal", "check", "--json"],
    ] {
        let (code, _) = json_of(h, args);
        assert_eq!(code, 0, "clio {}", args.join(" "));
    }

    // Failures: JSON on stdout too, with the exit code a person would get.
    for (args, exit) in [
        (&["runs", "cancel", "1", "--json"][..], 1),
        (&["runs", "answer", "1", "1", "yes", "--json"], 1),
        (&["runs", "show", "9", "--json"], 1),
        (&["runs", "list", "--status", "bogus", "--json"], 2),
        (&["workflow", "check", "examples/workflows/nosuch.json", "--json"], 1),
        (&["agent", "verify", "examples/agents/minimal.toml", "--json"], 1),
        (&["plugin", "remove", "examples/materials", "9.9.9", "--json"], 1),
        (&["plugin", "trust", "examples/materials", "9.9.9", "--json"], 1),
    ] {
        let (code, value) = json_of(h, args);
        assert_eq!(code, exit, "clio {}: {value}", args.join(" "));
        assert_eq!(value["ok"], false, "clio {}: {value}", args.join(" "));
    }
    let (_, checked) =
        json_of(h, &["workflow", "check", "examples/workflows/nosuch.json", "--json"]);
    assert!(checked["problems"][0].as_str().unwrap().starts_with("cannot read"), "{checked}");
    let (_, cancel) = json_of(h, &["runs", "cancel", "1", "--json"]);
    assert_eq!(cancel["error"]["exit_code"], 1, "{cancel}");
    assert!(cancel["error"]["message"].as_str().unwrap().contains("it has ended"), "{cancel}");
}

/// The commands the test above does not reach, each on success and on failure: an agent's
/// `clio run`, a plugin's install and removal, a run that waits on a question (answered,
/// resumed, cancelled), an agent spec verified, the journal salvaged, a run's export as
/// JSON lines; and the errors of a driven run (a refused launch, a failed run) with their
/// exit codes.
#[test]
fn the_rest_print_json_too() {
    let home = temp_home("json-rest");
    let h = home.to_str().unwrap();
    let models = "examples/models/models.toml";

    // An agent run answers with its model.
    let agent = "examples/agents/minimal.toml";
    let (code, run) =
        json_of(h, &["run", agent, "--input", "Say hello", "--models", models, "--json"]);
    assert_eq!(code, 0, "{run}");
    assert_eq!(
        (run["run"].as_u64(), run["status"].as_str()),
        (Some(1), Some("succeeded")),
        "{run}"
    );
    assert!(run["answer"].as_str().is_some_and(|a| a.starts_with("Hello!")), "{run}");
    assert_eq!(run["model"], "offline/demo", "{run}");
    assert!(run["outputs"].is_object(), "{run}");

    // Export is JSON lines: every line parses, the run's record first.
    let export = clio(&["--home", h, "runs", "export", "1"]);
    assert_eq!(export.code, 0, "{}", export.render());
    let lines: Vec<Value> =
        export.stdout.lines().map(|l| serde_json::from_str(l).expect(l)).collect();
    assert!(lines.len() > 2, "{}", export.stdout);

    // An agent spec, frozen and verified.
    let spec = clio(&["agent", "spec", agent, "--json"]);
    assert_eq!(spec.code, 0, "{}", spec.render());
    let spec_file = home.join("minimal.spec.json");
    std::fs::write(&spec_file, &spec.stdout).unwrap();
    let (code, verified) = json_of(h, &["agent", "verify", spec_file.to_str().unwrap(), "--json"]);
    assert_eq!(code, 0, "{verified}");
    assert_eq!(verified["ok"], true, "{verified}");
    assert!(verified["checksum"].is_string(), "{verified}");

    // A plugin installed from a marketplace for an agent, listed with its digest, removed.
    let lead = "examples/marketplace/agents/materials-lead.toml";
    let (code, installed) =
        json_of(h, &["plugin", "install", "examples/marketplace", "--agent", lead, "--json"]);
    assert_eq!(code, 0, "{installed}");
    let first = &installed[0];
    assert_eq!(
        (first["id"].as_str(), first["version"].as_str()),
        (Some("materials"), Some("0.1.0"))
    );
    assert!(first["digest"].as_str().is_some_and(|d| d.starts_with("sha256:")), "{installed}");
    assert!(first["path"].is_string() && first["marketplace"] == "examples", "{installed}");
    let (code, failed) = json_of(h, &["plugin", "install", "examples/nosuch", "--json"]);
    assert_eq!((code, &failed["ok"]), (1, &Value::Bool(false)), "{failed}");
    let (code, removed) =
        json_of(h, &["plugin", "remove", "examples/materials", "0.1.0", "--json"]);
    assert_eq!(code, 0, "{removed}");
    assert_eq!(removed["id"], "materials", "what was removed: {removed}");

    // A run that waits on the trust question: its questions, then an answer, a resume
    // that ends it; a second one cancelled, and a resume of it refused.
    let ask = ["run", "batch7", "--plugin", PLUGIN, "--input", "x", "--models", models, "--json"];
    let (code, waiting) = json_of(h, &ask);
    assert_eq!(code, 0, "{waiting}");
    assert_eq!(waiting["status"], "awaiting_input", "{waiting}");
    assert_eq!(waiting["questions"][0]["id"], 0, "{waiting}");
    assert_eq!(waiting["questions"][0]["schema"], "bool", "{waiting}");
    let n = waiting["run"].as_u64().unwrap().to_string();
    let (code, answered) =
        json_of(h, &["runs", "answer", &n, "0", "no", "--record-only", "--json"]);
    assert_eq!(code, 0, "{answered}");
    assert_eq!(answered["answer"], false, "{answered}");
    let (code, ended) = json_of(h, &["runs", "resume", &n, "--json"]);
    assert_eq!(code, 1, "a run refused its plugin's trust fails: {ended}");
    assert_eq!(ended["status"], "failed", "{ended}");
    assert!(ended["error"]["reason"].is_string(), "the error is an object: {ended}");
    let (_, waiting) = json_of(h, &ask);
    let n = waiting["run"].as_u64().unwrap().to_string();
    let (code, cancelled) = json_of(h, &["runs", "cancel", &n, "--json"]);
    assert_eq!(code, 0, "{cancelled}");
    assert!(cancelled["cancelled_tasks"].is_u64(), "{cancelled}");
    let (code, refused) = json_of(h, &["runs", "resume", &n, "--json"]);
    assert_eq!((code, &refused["status"]), (1, &Value::from("cancelled")), "{refused}");

    // A run that fails on a limit: its outcome, exit 1.
    let mut limited = vec!["run", "batch7", "--plugin", PLUGIN, "--input", "x", "--models", models];
    limited.extend(["--trust", "--option", "max_model_calls=1", "--json"]);
    let (code, failed) = json_of(h, &limited);
    assert_eq!((code, &failed["status"]), (1, &Value::from("failed")), "{failed}");
    assert_eq!(failed["error"]["reason"], "flow_stall", "{failed}");

    // Launches refused before a run exists: `{"ok": false}` with the exit code.
    let untrusted = home.join("materials");
    let source = crate::support::workspace_root().join(PLUGIN);
    crate::plugin::copy_dir(&source, &untrusted);
    // Another content than the one trusted above.
    std::fs::write(untrusted.join("ai.iowarp.clio/notes.txt"), "changed").unwrap();
    for (args, exit, says) in [
        (
            vec![
                "run",
                "batch7",
                "--plugin",
                untrusted.to_str().unwrap(),
                "--input",
                "x",
                "--no-input",
                "--json",
            ],
            1,
            "is not trusted",
        ),
        (
            vec![
                "run",
                agent,
                "--input",
                "x",
                "--models",
                models,
                "--option",
                "max_iters=abc",
                "--json",
            ],
            1,
            "--option max_iters=abc",
        ),
        (
            vec![
                "run",
                agent,
                "--input",
                "x",
                "--models",
                models,
                "--option",
                "max_iters",
                "--json",
            ],
            2,
            "KEY=VALUE",
        ),
        (
            vec![
                "run",
                agent,
                "--input",
                "x",
                "--models",
                models,
                "--model",
                "offline/nope",
                "--json",
            ],
            1,
            "--model offline/nope",
        ),
        (vec!["runs", "prune", "--older-than", "3x", "--json"], 2, "--older-than 3x"),
    ] {
        let (code, value) = json_of(h, &args);
        assert_eq!(code, exit, "clio {}: {value}", args.join(" "));
        assert_eq!(value["ok"], false, "clio {}: {value}", args.join(" "));
        assert_eq!(value["error"]["exit_code"], exit, "{value}");
        let message = value["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(says), "clio {}: {value}", args.join(" "));
        assert!(value["error"]["hints"].is_array(), "{value}");
    }

    // The journal salvaged into a new file: what was copied.
    let out = home.join("salvaged.redb");
    let (code, salvaged) = json_of(h, &["journal", "salvage", out.to_str().unwrap(), "--json"]);
    assert_eq!(code, 0, "{salvaged}");
    assert!(salvaged.is_object(), "{salvaged}");
    let (code, again) = json_of(h, &["journal", "salvage", out.to_str().unwrap(), "--json"]);
    assert_eq!((code, &again["ok"]), (1, &Value::Bool(false)), "OUT exists: {again}");
}
