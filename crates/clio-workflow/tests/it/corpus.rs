//! The data-driven corpus: every `tests/data/valid/*.json` must read, and its plan (text,
//! Mermaid and DOT renderings plus the first steps to start) is snapshotted; every
//! `tests/data/invalid/*.json` must be refused, and its error is snapshotted. Adding a case
//! is adding a file.

use std::path::{Path, PathBuf};

use clio_workflow::{
    Action, RunConfig, Scheduler, Workflow, render_dot, render_mermaid, render_text,
};
use serde_json::json;

fn cases(kind: &str) -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data").join(kind);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "json"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no cases in {}", dir.display());
    files
}

fn snapshot(kind: &str, path: &Path, content: String) {
    let name = format!("{kind}__{}", path.file_stem().unwrap().to_string_lossy());
    insta::with_settings!({
        snapshot_path => "../data/snapshots",
        prepend_module_to_snapshot => false,
        input_file => path,
        omit_expression => true,
    }, {
        insta::assert_snapshot!(name, content);
    });
}

/// Describes the plan of a valid workflow.
fn plan(workflow: &Workflow) -> String {
    let mut sched = Scheduler::new(
        workflow.clone(),
        RunConfig { task: json!("the task"), ..RunConfig::default() },
    );
    let first: Vec<String> = sched
        .take_actions()
        .into_iter()
        .filter_map(|action| match action {
            Action::Start(start) => {
                Some(format!("  {} → {} with {}", start.step, start.target, start.input))
            }
            _ => None,
        })
        .collect();
    format!(
        "{}\nstarts first:\n{}\n\n{}\n{}",
        render_text(workflow),
        first.join("\n"),
        render_mermaid(workflow),
        render_dot(workflow)
    )
}

#[test]
fn valid_workflows_read_and_plan() {
    for path in cases("valid") {
        let text = std::fs::read_to_string(&path).unwrap();
        let workflow = match Workflow::from_json(&text) {
            Ok(workflow) => workflow,
            Err(err) => panic!("{} should be valid: {err}", path.display()),
        };
        let again = Workflow::from_value(workflow.to_json());
        assert_eq!(again.as_ref(), Ok(&workflow), "{} does not round-trip", path.display());
        snapshot("valid", &path, plan(&workflow));
    }
}

#[test]
fn invalid_workflows_are_refused() {
    for path in cases("invalid") {
        let text = std::fs::read_to_string(&path).unwrap();
        match Workflow::from_json(&text) {
            Ok(_) => panic!("{} should be refused", path.display()),
            Err(err) => snapshot("invalid", &path, format!("{err}\n\n{err:?}\n")),
        }
    }
}
