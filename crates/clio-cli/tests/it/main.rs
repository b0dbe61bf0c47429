//! The one integration-test binary of clio-cli: every module under `tests/it` is listed
//! here, and `no_forgotten_test_files` fails when one is not.

mod agent;
mod at_scale;
mod config;
mod conventions;
mod db_outage;
mod exit_codes;
mod guard;
mod inputs;
mod journal;
mod journal_log;
mod journal_sharing;
mod journal_trouble;
mod json;
mod launch;
mod native_tools;
mod orchestration;
mod pinning;
mod plugin;
mod python_fleet;
mod python_flows;
mod question_beside_chain;
mod readme;
mod replay;
mod run;
mod runs;
mod sandbox_env;
mod serve;
mod serve_errors;
mod serve_http;
mod serve_postgres;
mod side_effects;
mod support;
mod team_crash;
mod team_fleet;
mod trust_flag;
mod viewer_e2e;
mod workers;
mod workflow;

#[test]
fn no_forgotten_test_files() {
    let listed: &[&str] = &[
        "agent",
        "at_scale",
        "config",
        "conventions",
        "db_outage",
        "exit_codes",
        "guard",
        "inputs",
        "journal",
        "journal_log",
        "journal_sharing",
        "json",
        "journal_trouble",
        "launch",
        "native_tools",
        "orchestration",
        "pinning",
        "plugin",
        "python_fleet",
        "python_flows",
        "question_beside_chain",
        "readme",
        "replay",
        "run",
        "runs",
        "sandbox_env",
        "serve",
        "serve_errors",
        "serve_http",
        "serve_postgres",
        "side_effects",
        "support",
        "workers",
        "team_crash",
        "team_fleet",
        "trust_flag",
        "viewer_e2e",
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
