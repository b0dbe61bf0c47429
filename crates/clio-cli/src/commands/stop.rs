//! `clio runs stop RUN [TASK]` (and `POST /api/v1/runs/{id}/stop`, and the viewer's Stop):
//! Stop ends a model's current turn, not the flow. The turn's call fails with
//! `CallStopped`, recorded on its task; a flow that called it sees `CallStopped`, and
//! started flows and background work keep running (cancelling is `clio runs cancel`).
//!
//! Without TASK, every model turn of the run that is live now (each agent and subagent
//! task running) is stopped; with TASK, that task's turn, which must be an agent's or a
//! subagent's. A turn is live in the process that drives the run (`clio run`,
//! `clio runs resume`, `clio serve`, which this command goes through while it runs): a run
//! no process drives has no turn to stop, and is refused saying so.

use std::io::Write;

use anyhow::anyhow;
use clio_journal::{RunId, TaskId, TaskKind, TaskRecord};
use serde_json::json;

use super::write_json;
use crate::error::{CliError, journal_error};
use crate::home::Home;
use crate::launch::open_journal;

/// What `runs stop` is given.
#[derive(Debug, Clone, Copy)]
pub(crate) struct StopRequest {
    /// The run.
    pub(crate) run: u64,
    /// The task whose turn to stop; `None`: every live model turn of the run.
    pub(crate) task: Option<u64>,
    /// Print the result as JSON.
    pub(crate) json: bool,
}

fn is_turn(task: &TaskRecord) -> bool {
    matches!(task.kind, TaskKind::Agent | TaskKind::Subagent)
}

/// Stops the turns `request` names; prints what was stopped (`{"run", "stopped": [ids]}`
/// with `--json`).
pub(crate) fn stop(home: &Home, request: StopRequest, out: &mut dyn Write) -> Result<(), CliError> {
    let run = RunId(request.run);
    let journal = open_journal(home)?;
    let record = journal.run(run).map_err(journal_error)?.ok_or_else(|| {
        CliError::user(anyhow!("run {} not found in {}", run.0, home.journal_path().display()))
            .hint("`clio runs list` shows the runs there are")
    })?;
    if record.status.is_finished() {
        let status = super::runs::status_name(record.status);
        return Err(CliError::user(anyhow!("cannot stop run {}: it has ended ({status})", run.0))
            .hint(format!("`clio runs show {}` shows how it ended", run.0)));
    }
    let tasks = journal.tasks(run).map_err(journal_error)?;
    let wanted: Vec<TaskId> = match request.task {
        Some(id) => {
            let Some(task) = tasks.iter().find(|t| t.id.0 == id) else {
                return Err(CliError::user(anyhow!("run {} has no task {id}", run.0))
                    .hint(format!("`clio runs tree {}` shows its tasks", run.0)));
            };
            if !is_turn(task) {
                let kind = format!("{:?}", task.kind).to_lowercase();
                return Err(CliError::user(anyhow!(
                    "task {id} is a {kind} ({}), not a model's turn: Stop ends a model's turn, never a started flow or a tool",
                    task.target
                ))
                .hint(format!(
                    "`clio runs cancel {}` cancels the run and everything it started",
                    run.0
                )));
            }
            if task.status.is_terminal() {
                return Err(CliError::user(anyhow!(
                    "task {id} ({}) has ended: there is no turn of it to stop",
                    task.target
                )));
            }
            vec![task.id]
        }
        None => {
            tasks.iter().filter(|t| is_turn(t) && !t.status.is_terminal()).map(|t| t.id).collect()
        }
    };
    let Some(runtime) = home.held().and_then(|held| held.runtime_of(run)) else {
        return Err(CliError::user(anyhow!(
            "run {} is not being driven by a clio process: it has no live turn to stop",
            run.0
        ))
        .hint(format!(
            "a run's turns run in the process that drives it (`clio run`, `clio runs resume {}`, `clio serve`); `clio runs cancel {}` gives the run up",
            run.0, run.0
        )));
    };
    let mut stopped = Vec::new();
    for task in wanted {
        if runtime.stop(task)? {
            stopped.push(task.0);
        }
    }
    if stopped.is_empty() {
        return Err(CliError::user(anyhow!(
            "run {}{} has no model turn running now: nothing was stopped",
            run.0,
            request.task.map(|t| format!(" task {t}")).unwrap_or_default()
        ))
        .hint(format!("`clio runs tree {}` shows what runs", run.0)));
    }
    if request.json {
        return write_json(out, &json!({ "run": run.0, "stopped": stopped }));
    }
    let list: Vec<String> = stopped.iter().map(|t| format!("task {t}")).collect();
    writeln!(
        out,
        "stopped {} turn(s) of run {}: {} (each call ends with call_stopped; started flows keep running)",
        stopped.len(),
        run.0,
        list.join(", ")
    )?;
    Ok(())
}
