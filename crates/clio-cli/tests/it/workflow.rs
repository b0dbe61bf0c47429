//! `clio workflow check` and `clio workflow show` on the built binary: drawings are
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
