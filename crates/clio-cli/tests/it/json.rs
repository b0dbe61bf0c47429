//! `--json` on every command that reports something: what each prints on stdout parses as
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
