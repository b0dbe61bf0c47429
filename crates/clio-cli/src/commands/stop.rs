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
//!
//! On a shared journal a running run is driven by the `clio worker` holding its lease,
//! another process, maybe on another machine: the request goes to it through the journal,
//! as a `stop_requested` event appended to the run, and the worker answers with a
//! `stop_done` event naming the turns it stopped ([`StopRequests`]), which this command
//! waits for and prints as it prints a stop done here.

use std::collections::HashMap;
use std::io::Write;
use std::time::{Duration, Instant};

use anyhow::anyhow;
use clio_flow::Runtime;
use clio_journal::{EntryKind, Journal, NewEntry, RunId, TaskId, TaskKind, TaskRecord};
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
    let runtime = home.held().and_then(|held| held.runtime_of(run));
    // On a shared journal the turns run in the worker that holds the run's lease: the stop
    // goes to it through the journal.
    if runtime.is_none() && journal.is_shared() && record.status == clio_journal::RunStatus::Running
    {
        return stop_through_journal(&journal, request, &wanted, out);
    }
    let Some(runtime) = runtime else {
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
    report(request, &stopped, out)
}

/// Prints the turns stopped (an error when there were none).
fn report(request: StopRequest, stopped: &[u64], out: &mut dyn Write) -> Result<(), CliError> {
    let run = request.run;
    if stopped.is_empty() {
        return Err(nothing_stopped(request));
    }
    if request.json {
        return write_json(out, &json!({ "run": run, "stopped": stopped }));
    }
    let list: Vec<String> = stopped.iter().map(|t| format!("task {t}")).collect();
    writeln!(
        out,
        "stopped {} turn(s) of run {run}: {} (each call ends with call_stopped; started flows keep running)",
        stopped.len(),
        list.join(", ")
    )?;
    Ok(())
}

fn nothing_stopped(request: StopRequest) -> CliError {
    CliError::user(anyhow!(
        "run {}{} has no model turn running now: nothing was stopped",
        request.run,
        request.task.map(|t| format!(" task {t}")).unwrap_or_default()
    ))
    .hint(format!("`clio runs tree {}` shows what runs", request.run))
}

/// The event a process that does not drive a run appends to it to ask the worker driving
/// it to stop turns: `{"event": "stop_requested", "task": n or null, "by"}`.
const REQUESTED: &str = "stop_requested";
/// The event the worker answers with: `{"event": "stop_done", "request": SEQ, "stopped"}`.
const DONE: &str = "stop_done";

/// How long `runs stop` on a shared journal waits for the worker driving the run to say
/// what it stopped: `$CLIO_STOP_WAIT_SECS`, else 10 s.
fn stop_wait() -> Duration {
    std::env::var("CLIO_STOP_WAIT_SECS")
        .ok()
        .and_then(|v| v.trim().parse::<f64>().ok())
        .filter(|s| s.is_finite() && *s >= 0.0)
        .map_or(Duration::from_secs(10), Duration::from_secs_f64)
}

/// Stops turns of a run a worker drives: appends a `stop_requested` event to the run (its
/// history says who asked), which the worker holding the run's lease reads as soon as the
/// commit's notice reaches it, and waits for its `stop_done` answer, which names the turns
/// it stopped. A worker that does not answer in time (busy, or gone: its lease lapses and
/// the next worker cuts the run's live work short anyway) leaves the request pending,
/// which is said, not an error.
fn stop_through_journal(
    journal: &Journal,
    request: StopRequest,
    wanted: &[TaskId],
    out: &mut dyn Write,
) -> Result<(), CliError> {
    let run = RunId(request.run);
    if wanted.is_empty() {
        return Err(nothing_stopped(request));
    }
    let by = format!("clio process {}", std::process::id());
    let payload = json!({ "event": REQUESTED, "task": request.task, "by": by });
    let seq =
        journal.append(run, NewEntry::new(EntryKind::Event, payload)).map_err(journal_error)?;
    let deadline = Instant::now() + stop_wait();
    // Each look reads only what was appended since the last one.
    let mut next = seq + 1;
    loop {
        let entries = journal.entries_from(run, next).map_err(journal_error)?;
        next = entries.last().map_or(next, |e| e.seq + 1);
        let answer = entries
            .into_iter()
            .find(|e| is_event(&e.payload, DONE) && e.payload["request"] == json!(seq));
        if let Some(answer) = answer {
            let stopped: Vec<u64> = answer.payload["stopped"]
                .as_array()
                .map(|l| l.iter().filter_map(serde_json::Value::as_u64).collect())
                .unwrap_or_default();
            return report(request, &stopped, out);
        }
        let ended = journal
            .run(run)
            .map_err(journal_error)?
            .is_none_or(|r| r.status != clio_journal::RunStatus::Running);
        if ended || Instant::now() >= deadline {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    if request.json {
        return write_json(
            out,
            &json!({ "run": run.0, "stopped": [], "requested": seq, "pending": true }),
        );
    }
    writeln!(
        out,
        "asked the worker driving run {} to stop its turns (entry {seq} of the run); it has not answered yet",
        run.0
    )?;
    Ok(())
}

fn is_event(payload: &serde_json::Value, name: &str) -> bool {
    payload.get("event").and_then(serde_json::Value::as_str) == Some(name)
}

/// Where a worker has read each run it drives up to, for the stop requests appended to it
/// ([`StopRequests::serve`]).
#[derive(Debug, Default)]
pub(crate) struct StopRequests {
    read: HashMap<RunId, u64>,
}

impl StopRequests {
    /// Starts watching `run`, which this worker now drives: requests appended from now on
    /// are its (older ones were for an earlier drive, whose asker has had its answer).
    pub(crate) fn watch(&mut self, journal: &Journal, run: RunId) -> Result<(), CliError> {
        let next = journal.entry_count(run).map_err(journal_error)?;
        self.read.insert(run, next);
        Ok(())
    }

    /// Stops watching the runs for which `live` is false.
    pub(crate) fn forget(&mut self, live: impl Fn(RunId) -> bool) {
        self.read.retain(|run, _| live(*run));
    }

    /// Reads what was appended to each watched run since the last look, and for each stop
    /// request stops the turns it names on the runtime driving the run (`runtime_of`), then
    /// answers it with a `stop_done` event naming them. Returns a line for the worker's log
    /// per request served.
    pub(crate) fn serve(
        &mut self,
        journal: &Journal,
        runtime_of: impl Fn(RunId) -> Option<Runtime>,
    ) -> Result<Vec<String>, CliError> {
        let mut said = Vec::new();
        for (run, next) in &mut self.read {
            let entries = journal.entries_from(*run, *next).map_err(journal_error)?;
            for entry in entries {
                *next = entry.seq + 1;
                if entry.kind != EntryKind::Event || !is_event(&entry.payload, REQUESTED) {
                    continue;
                }
                let Some(runtime) = runtime_of(*run) else { continue };
                let wanted: Vec<TaskId> = match entry.payload["task"].as_u64() {
                    Some(task) => vec![TaskId(task)],
                    None => journal
                        .tasks(*run)
                        .map_err(journal_error)?
                        .iter()
                        .filter(|t| is_turn(t) && !t.status.is_terminal())
                        .map(|t| t.id)
                        .collect(),
                };
                let mut stopped = Vec::new();
                for task in wanted {
                    if runtime.stop(task)? {
                        stopped.push(task.0);
                    }
                }
                let payload = json!({ "event": DONE, "request": entry.seq, "stopped": stopped });
                journal
                    .append(*run, NewEntry::new(EntryKind::Event, payload))
                    .map_err(journal_error)?;
                let by = entry.payload["by"].as_str().unwrap_or("another process");
                said.push(format!(
                    "run {}: stopped {} turn(s) at the request of {by} (entry {})",
                    run.0,
                    stopped.len(),
                    entry.seq
                ));
            }
        }
        Ok(said)
    }
}
