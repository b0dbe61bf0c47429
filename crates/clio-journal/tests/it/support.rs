//! Helpers shared by the integration tests: a test result type and record builders.

use clio_journal::{EntryKind, Journal, NewEntry, NewRun, NewTask, RunId, TaskKind, TaskStatus};
use serde_json::json;

/// The result type of tests, so they can use `?`.
pub(crate) type TestResult = Result<(), Box<dyn std::error::Error + Send + Sync>>;

/// Returns a run to create, of flow `flow`, owned by `owner`.
pub(crate) fn new_run(flow: &str, owner: &str) -> NewRun {
    NewRun {
        flow: flow.to_owned(),
        input: json!({"task": "count"}),
        input_digest: "sha256:00".to_owned(),
        fingerprint: "flow@1+plugins:none".to_owned(),
        owner: owner.to_owned(),
        launch: None,
    }
}

/// Returns a running task of `run` to create, owned by `owner`.
pub(crate) fn new_task(run: RunId, owner: &str) -> NewTask {
    NewTask {
        run,
        parent: None,
        kind: TaskKind::Tool,
        target: "echo".to_owned(),
        label: "echo".to_owned(),
        status: TaskStatus::Running,
        model: None,
        owner: owner.to_owned(),
        call: None,
    }
}

/// Returns a step entry numbered `n` with identity `step-{n}`.
pub(crate) fn step(n: u64) -> NewEntry {
    NewEntry::new(EntryKind::Step, json!({"n": n})).with_identity(format!("step-{n}"))
}

/// Opens a journal in memory with one run.
pub(crate) fn journal_with_run() -> Result<(Journal, RunId), clio_journal::JournalError> {
    let journal = Journal::open_in_memory()?;
    let run = journal.create_run(new_run("count", "proc-a"))?;
    Ok((journal, run))
}
