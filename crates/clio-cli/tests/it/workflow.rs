//! `clio workflow check`, `show` and `run` on the built binary: drawings are
//! snapshots, and a bad workflow names the file, the step and the field.

use insta::assert_snapshot;

use crate::support::{clio, clio_in};

#[test]
fn check_the_example_workflow() {
    let outcome = clio(&["workflow", "check", "examples/workflows/batch7.json"]);
    assert_snapshot!(outcome.render(), @r"
    exit: 0
    --- stdout
    ok: examples/workflows/batch7.json — 5 steps in 3 layers; final: review
    ");
    let json = clio(&["workflow", "check", "examples/workflows/batch7.json", "--json"]);
    assert_eq!(json.code, 0);
    let value: serde_json::Value = serde_json::from_str(&json.stdout).unwrap();
    assert_eq!(value["steps"], 5);
    assert_eq!(value["final"], serde_json::json!(["review"]));
}

#[test]
fn show_draws_text_mermaid_and_dot() {
    let mut all = String::new();
    for format in ["text", "mermaid", "dot"] {
        let outcome =
            clio(&["workflow", "show", "examples/workflows/batch7.json", "--format", format]);
        assert_eq!(outcome.code, 0, "{}", outcome.render());
        all.push_str(&format!("## {format}\n{}", outcome.stdout));
    }
    assert_snapshot!(all);
}

#[test]
fn bad_workflows_name_the_file_and_step() {
    let dir = std::env::temp_dir().join(format!("clio-cli-wf-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let cases = [
        (
            "cycle.json",
            r#"[{"id": "a", "target": "x", "after": ["b"]}, {"id": "b", "target": "x", "after": ["a"]}]"#,
        ),
        ("unknown-dep.json", r#"[{"id": "a", "target": "x", "after": ["nope"]}]"#),
        ("not-json.json", "{\"steps\": [\n"),
    ];
    let mut all = String::new();
    for (name, text) in cases {
        std::fs::write(dir.join(name), text).unwrap();
        let outcome = clio_in(&dir, &["workflow", "check", name]);
        assert_eq!(outcome.code, 1, "{}", outcome.render());
        all.push_str(&format!("## {name}\n{}", outcome.render()));
    }
    std::fs::remove_dir_all(&dir).unwrap();
    let usage = clio(&["workflow", "show", "examples/workflows/batch7.json", "--format", "svg"]);
    assert_eq!(usage.code, 2, "{}", usage.render());
    assert_snapshot!(all);
}

/// Issue 24, "the CLI pays twice": a workflow step through `clio workflow run` wrote its
/// call and then a batch of workflow events (two entries and two commits a step), and a
/// small workflow two views a step more. A 40-step chain of the read-only `checkpoint`
/// tool now writes at most 1.1 entries a step, no batch of events, and views only on
/// their clock (the end's, and one per 250 ms at the most).
#[test]
fn issue_24_a_chain_run_by_clio_writes_about_one_entry_a_step() {
    use clio_journal::{EntryKind, Journal, JournalConfig, RunId};
    const PLUGIN: &str = "crates/clio-cli/tests/data/side-effects/counter";
    const MODELS: &str = "crates/clio-cli/tests/data/side-effects/models.toml";
    const STEPS: usize = 40;
    let home = crate::support::temp_home("wf-chain-entries");
    let workspace = home.join("workspace");
    std::fs::create_dir_all(&workspace).unwrap();
    let steps: Vec<serde_json::Value> = (0..STEPS)
        .map(|i| {
            let mut step = serde_json::json!({
                "id": format!("s{i}"), "target": "checkpoint", "input": { "label": format!("s{i}") }
            });
            if i > 0 {
                step["after"] = serde_json::json!([format!("s{}", i - 1)]);
            }
            step
        })
        .collect();
    let file = home.join("chain.json");
    std::fs::write(&file, serde_json::json!({ "steps": steps }).to_string()).unwrap();
    let h = home.to_str().unwrap();
    let trusted = clio(&["--home", h, "plugin", "trust", PLUGIN]);
    assert_eq!(trusted.code, 0, "{}", trusted.render());
    let started = std::time::Instant::now();
    let ran = clio(&[
        "--home",
        h,
        "workflow",
        "run",
        file.to_str().unwrap(),
        "--task",
        "chain",
        "--plugin",
        PLUGIN,
        "--models",
        MODELS,
        "--workspace",
        workspace.to_str().unwrap(),
        "--no-input",
        "--quiet",
    ]);
    let took = started.elapsed();
    assert_eq!(ran.code, 0, "{}", ran.render());
    let journal = Journal::open(home.join("journal.redb"), JournalConfig::default()).unwrap();
    let entries = journal.entries(RunId(1)).unwrap();
    journal.close().unwrap();
    let id = |e: &clio_journal::JournalEntry| e.identity.clone().unwrap_or_default();
    let calls = entries.iter().filter(|e| e.kind == EntryKind::Call).count();
    assert_eq!(calls, STEPS, "one call entry a step");
    assert!(!entries.iter().any(|e| id(e).contains("wf-events")), "no batch of events");
    let views = entries.iter().filter(|e| e.kind == EntryKind::View).count();
    let most = 1 + (took.as_millis() / 250) as usize;
    assert!(views <= most, "{views} views in {took:?}");
    // Besides the calls and the views: the workflow's limits, and at most one event (the
    // sandbox's, where it is off).
    let others: Vec<String> = entries
        .iter()
        .filter(|e| !matches!(e.kind, EntryKind::Call | EntryKind::View))
        .map(id)
        .collect();
    assert!(others.len() <= 2, "{others:?}");
    if took.as_millis() < 500 {
        assert!(entries.len() as f64 <= 1.1 * STEPS as f64, "{} entries", entries.len());
    }
}

/// Issue 46 items 4 and 5 on the built binary: a launch passes structured input
/// (`--input-json`, `--input @FILE.json`, `--input '{…}'`) to `workflow run` and to
/// `run workflow` with the workflow flow's own fields; config.toml's `[workflows]` limits
/// apply where they are tighter, and `runs show` shows the limits the run recorded.
#[test]
fn issue_46_structured_launch_input_and_the_persons_workflow_limits() {
    const PLUGIN: &str = "crates/clio-cli/tests/data/side-effects/counter";
    const MODELS: &str = "crates/clio-cli/tests/data/side-effects/models.toml";
    let home = crate::support::temp_home("wf-structured-input");
    let workspace = home.join("workspace");
    std::fs::create_dir_all(&workspace).unwrap();
    std::fs::write(home.join("config.toml"), "[workflows]\nmax_added_steps = 1\n").unwrap();
    let steps = serde_json::json!({ "steps": [
        { "id": "mark", "target": "checkpoint", "input": "$task" }
    ]});
    let file = home.join("wf.json");
    std::fs::write(&file, steps.to_string()).unwrap();
    let h = home.to_str().unwrap();
    let ws = workspace.to_str().unwrap();
    let trusted = clio(&["--home", h, "plugin", "trust", PLUGIN]);
    assert_eq!(trusted.code, 0, "{}", trusted.render());
    let common =
        ["--plugin", PLUGIN, "--models", MODELS, "--workspace", ws, "--no-input", "--json"];
    let answer = |outcome: &crate::support::Outcome| -> String {
        assert_eq!(outcome.code, 0, "{}", outcome.render());
        let value: serde_json::Value = serde_json::from_str(&outcome.stdout).unwrap();
        value.to_string()
    };

    // `workflow run --input-json`: `$task` is the object itself, which the tool takes.
    let mut args = vec!["--home", h, "workflow", "run", file.to_str().unwrap()];
    args.extend(["--input-json", r#"{"label": "from-json"}"#]);
    args.extend(common);
    let ran = clio(&args);
    assert!(answer(&ran).contains("from-json"), "{}", ran.render());

    // `run workflow --input-json` with the workflow flow's fields, as a flow calls it.
    let fields = serde_json::json!({
        "workflow": steps, "task": { "label": "fields" }, "max_added_steps": 3
    });
    let fields_text = fields.to_string();
    let mut args = vec!["--home", h, "run", "workflow", "--input-json", &fields_text];
    args.extend(common);
    let ran = clio(&args);
    assert!(answer(&ran).contains("fields"), "{}", ran.render());
    let shown = clio(&["--home", h, "runs", "show", "2"]);
    assert_eq!(shown.code, 0, "{}", shown.render());
    assert!(
        shown.stdout.contains(
            "limits: max_added_steps 1 (workflow 3, settings 1); max_edit_rounds open (workflow open, settings open)"
        ),
        "{}",
        shown.stdout
    );

    // `--input @FILE.json` reads the same fields from a file, and `--input '{…}'` is JSON.
    let input_file = home.join("input.json");
    std::fs::write(&input_file, fields_text.replace("fields", "from-file")).unwrap();
    let at = format!("@{}", input_file.display());
    let mut args = vec!["--home", h, "run", "workflow", "--input", &at];
    args.extend(common);
    let ran = clio(&args);
    assert!(answer(&ran).contains("from-file"), "{}", ran.render());
    let inline = fields_text.replace("fields", "inline");
    let mut args = vec!["--home", h, "run", "workflow", "--input", &inline];
    args.extend(common);
    let ran = clio(&args);
    assert!(answer(&ran).contains("inline"), "{}", ran.render());

    // JSON that does not parse is refused before a run exists, naming the flag.
    let mut args = vec!["--home", h, "run", "workflow", "--input-json", "{\"workflow\": "];
    args.extend(common);
    let refused = clio(&args);
    assert_eq!(refused.code, 2, "{}", refused.render());
    assert!(refused.stderr.contains("--input-json: not JSON"), "{}", refused.render());
    // A limit of the wrong type in config.toml is refused naming the field.
    std::fs::write(home.join("config.toml"), "[workflows]\nmax_edit_rounds = -1\n").unwrap();
    let mut args = vec!["--home", h, "workflow", "run", file.to_str().unwrap()];
    args.extend(["--input-json", r#"{"label": "x"}"#]);
    args.extend(common);
    let refused = clio(&args);
    assert_eq!(refused.code, 1, "{}", refused.render());
    assert!(refused.stderr.contains("max_edit_rounds"), "{}", refused.render());
}

/// Issue 46 item 8: `workflow run --model` is the run's model, the last of the seeds' model
/// choice (a call's model, its flow's, the child's preference, the run's): a subagent that
/// prefers a model runs on it, one without a preference on `--model`.
#[test]
fn issue_46_workflow_run_model_is_the_runs_model_not_a_subagents() {
    let home = crate::support::temp_home("wf-model-choice");
    let plugin = home.join("prefs");
    let clio_dir = plugin.join("ai.iowarp.clio");
    std::fs::create_dir_all(&clio_dir).unwrap();
    std::fs::write(
        clio_dir.join("plugin.toml"),
        "id = \"prefs\"\nversion = \"0.1.0\"\ndescription = \"Two subagents.\"\n\n\
         [[subagents]]\nid = \"picky\"\ndescription = \"Prefers b.\"\nprompt = \"Answer.\"\n\
         tools = []\nprefers = { model = \"offline/b\" }\n\n\
         [[subagents]]\nid = \"easy\"\ndescription = \"No preference.\"\nprompt = \"Answer.\"\n\
         tools = []\n",
    )
    .unwrap();
    std::fs::write(
        home.join("script.toml"),
        "[[script]]\nagent = \"picky\"\n[[script.turn]]\ntext = \"picky answered\"\n\n\
         [[script]]\nagent = \"easy\"\n[[script.turn]]\ntext = \"easy answered\"\n",
    )
    .unwrap();
    std::fs::write(
        home.join("models.toml"),
        "[[provider]]\nname = \"scripted\"\nkind = \"scripted\"\nscript = \"script.toml\"\n\n\
         [[model]]\naccount = \"offline\"\nid = \"a\"\nprovider = \"scripted\"\n\n\
         [[model]]\naccount = \"offline\"\nid = \"b\"\nprovider = \"scripted\"\n",
    )
    .unwrap();
    let workflow = serde_json::json!({ "steps": [
        { "id": "one", "target": "picky", "input": "$task" },
        { "id": "two", "target": "easy", "input": "$task" }
    ]});
    let file = home.join("wf.json");
    std::fs::write(&file, workflow.to_string()).unwrap();
    let h = home.to_str().unwrap();
    let models = home.join("models.toml");
    let ran = clio(&[
        "--home",
        h,
        "workflow",
        "run",
        file.to_str().unwrap(),
        "--task",
        "hello",
        "--plugin",
        plugin.to_str().unwrap(),
        "--trust",
        "--models",
        models.to_str().unwrap(),
        "--model",
        "offline/a",
        "--no-input",
        "--json",
    ]);
    assert_eq!(ran.code, 0, "{}", ran.render());
    let shown = clio(&["--home", h, "runs", "show", "1", "--json"]);
    assert_eq!(shown.code, 0, "{}", shown.render());
    let value: serde_json::Value = serde_json::from_str(&shown.stdout).unwrap();
    let model_of = |target: &str| {
        let tasks = value["tasks"].as_array().unwrap();
        let task =
            tasks.iter().find(|t| t["target"] == target).unwrap_or_else(|| panic!("{value}"));
        task["model"].as_str().unwrap_or_default().to_owned()
    };
    assert_eq!(model_of("picky"), "offline/b", "the subagent's preference outranks --model");
    assert_eq!(model_of("easy"), "offline/a", "--model is the run's model");
    assert!(!value["run"]["input"].as_object().unwrap().contains_key("model"), "{value}");
}
