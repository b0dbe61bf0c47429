//! Issue 44 item 7: `--trust` records trust only when the command goes on. A command
//! refused after its plugins were read (a workflow that names a target nobody provides)
//! leaves the trust list as it was; one that runs trusts the folders it was given.

use serde_json::json;

use crate::support::{clio, temp_home};

const PLUGIN: &str = "crates/clio-cli/tests/data/serve/holder";

/// Says whether the home's trust list names the holder plugin.
fn trusted(home: &std::path::Path) -> bool {
    std::fs::read_to_string(home.join("trust.json")).is_ok_and(|t| t.contains("holder"))
}

#[test]
fn trust_is_recorded_only_when_the_command_goes_on() {
    let home = temp_home("trust-flag");
    let h = home.to_str().unwrap();
    let ws = home.join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::write(ws.join("release-a"), "").unwrap();
    let bad = home.join("bad.json");
    let steps = json!({ "steps": [
        { "id": "a", "target": "hold", "input": { "label": "a" } },
        { "id": "b", "target": "nobody_provides_this", "after": ["a"] }
    ]});
    std::fs::write(&bad, steps.to_string()).unwrap();
    let refused = clio(&[
        "--home",
        h,
        "workflow",
        "run",
        bad.to_str().unwrap(),
        "--task",
        "t",
        "--plugin",
        PLUGIN,
        "--workspace",
        ws.to_str().unwrap(),
        "--trust",
        "--quiet",
    ]);
    assert_ne!(refused.code, 0, "{}", refused.render());
    assert!(refused.stderr.contains("nobody_provides_this"), "{}", refused.render());
    assert!(!trusted(&home), "a refused command recorded trust");
    let good = home.join("good.json");
    let steps = json!({ "steps": [{ "id": "a", "target": "hold", "input": { "label": "a" } }] });
    std::fs::write(&good, steps.to_string()).unwrap();
    let ran = clio(&[
        "--home",
        h,
        "workflow",
        "run",
        good.to_str().unwrap(),
        "--task",
        "t",
        "--plugin",
        PLUGIN,
        "--workspace",
        ws.to_str().unwrap(),
        "--trust",
        "--no-input",
        "--quiet",
    ]);
    assert_eq!(ran.code, 0, "{}", ran.render());
    assert!(trusted(&home), "the command that ran trusted the folder");
}
