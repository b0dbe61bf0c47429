//! The one integration-test binary of this crate: every module under `tests/it` is listed
//! here, and `no_forgotten_test_files` fails when one is not.

mod adversarial;
mod ask;
mod cancel;
mod cancel_records;
mod corpus;
mod council;
mod crash;
mod declarations;
mod errors;
mod exact_replay;
mod gate;
mod gather;
mod hook_events;
mod independent_work;
mod limits;
mod mcp;
mod model_replies;
mod native_tools;
mod options;
mod orchestration;
mod plugins;
mod python_bench;
mod python_flow;
mod react;
mod replay;
mod run_code;
mod sandbox;
mod sandbox_bounds;
mod scale;
mod support;
mod team;
mod team_agents;
mod tool_lifetime;
mod workflow;

#[test]
fn no_forgotten_test_files() {
    let listed: &[&str] = &[
        "adversarial",
        "ask",
        "cancel",
        "cancel_records",
        "corpus",
        "council",
        "crash",
        "declarations",
        "errors",
        "exact_replay",
        "gate",
        "gather",
        "independent_work",
        "hook_events",
        "limits",
        "mcp",
        "model_replies",
        "native_tools",
        "options",
        "orchestration",
        "plugins",
        "python_bench",
        "python_flow",
        "react",
        "replay",
        "run_code",
        "sandbox",
        "sandbox_bounds",
        "scale",
        "support",
        "team",
        "team_agents",
        "tool_lifetime",
        "workflow",
    ];
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it");
    for entry in std::fs::read_dir(&dir).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        if name == "main.rs" || !name.ends_with(".rs") {
            continue;
        }
        let module = name.trim_end_matches(".rs");
        assert!(listed.contains(&module), "tests/it/{name} is not listed in tests/it/main.rs");
    }
}
