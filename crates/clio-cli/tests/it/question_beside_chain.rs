//! Issue 44 item 3 through `clio`: a step that waits for a permission answer beside an
//! independent 10-step chain. The whole chain runs before the run is recorded
//! `awaiting_input` (it used to wait after one chain step, each `runs resume` moving the
//! chain one step on), and the answer finishes the run without running a step twice.

use serde_json::{Value, json};

use crate::support::{clio, temp_home};

const PLUGIN: &str = "crates/clio-cli/tests/data/serve/holder";

#[test]
fn a_permission_question_beside_a_chain_lets_the_whole_chain_run() {
    let home = temp_home("question-beside-chain");
    let workspace = home.join("ws");
    std::fs::create_dir_all(&workspace).unwrap();
    // The chain's `hold` steps return at once: their release files are there.
    let mut steps = vec![json!({ "id": "q", "target": "asked", "input": { "label": "asked" } })];
    for i in 0..10 {
        std::fs::write(workspace.join(format!("release-c{i}")), "").unwrap();
        let mut step = json!({ "id": format!("c{i}"), "target": "hold", "input": { "label": format!("c{i}") } });
        if i > 0 {
            step["after"] = json!([format!("c{}", i - 1)]);
        }
        steps.push(step);
    }
    let wf = home.join("wf.json");
    std::fs::write(&wf, json!({ "steps": steps }).to_string()).unwrap();
    let (h, ws) = (home.to_str().unwrap(), workspace.to_str().unwrap());
    let trusted = clio(&["--home", h, "plugin", "trust", PLUGIN]);
    assert_eq!(trusted.code, 0, "{}", trusted.render());
    let ran = clio(&[
        "--home",
        h,
        "workflow",
        "run",
        wf.to_str().unwrap(),
        "--task",
        "t",
        "--plugin",
        PLUGIN,
        "--workspace",
        ws,
        "--quiet",
    ]);
    assert_eq!(ran.code, 0, "{}", ran.render());
    let shown = clio(&["--home", h, "runs", "show", "1", "--json"]);
    let value: Value =
        serde_json::from_str(&shown.stdout).unwrap_or_else(|e| panic!("{e}: {}", shown.render()));
    let text = value.to_string();
    assert!(text.contains("awaiting_input"), "{text}");
    let tree = clio(&["--home", h, "runs", "tree", "1"]);
    let held = tree.stdout.matches("tool hold").count();
    let done = tree.stdout.matches("[succeeded]").count();
    assert_eq!(
        (held, done),
        (10, 10),
        "every chain step ran before the run waits: {}",
        tree.stdout
    );
    let answered = clio(&["--home", h, "runs", "answer", "1", "1", "yes"]);
    assert_eq!(answered.code, 0, "{}", answered.render());
    let tree = clio(&["--home", h, "runs", "tree", "1"]);
    assert!(tree.stdout.starts_with("run 1  workflow  succeeded"), "{}", tree.stdout);
    assert_eq!(tree.stdout.matches("tool hold").count(), 10, "no step ran twice: {}", tree.stdout);
}
