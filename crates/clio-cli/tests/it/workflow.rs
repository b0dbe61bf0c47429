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
