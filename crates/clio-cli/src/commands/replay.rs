//! `clio runs replay N`, and what the CLI says when a resume stops because the code no
//! longer matches a run's history.
//!
//! A resume runs the flow again from the top, each call finding its record; code edited
//! since the run was recorded can ask for something new where the history holds something
//! else. The runtime then stops before running anything (`FlowError::Nondeterminism`) and
//! leaves the run resumable. `runs replay` finds the same mismatch without executing or
//! writing anything (`Runtime::check_replay`), so a person can check a run against edited
//! code before resuming it.

use std::io::Write;

use anyhow::anyhow;
use clio_flow::{FlowError, RecordedCommand, ReplayReport, ReplayVerdict, RunOutcome};
use clio_journal::{Journal, RunId};
use serde_json::{Value, json};

use super::run::{Relaunched, foreground_runtime, relaunch};
use super::runs::status_name;
use super::write_json;
use crate::args::RunReplayArgs;
use crate::error::CliError;
use crate::home::Home;
use crate::pin::{self, OnAgentChange};

/// Replays run `args.run` against the current code and plugins and prints the verdict:
/// exit 0 when it replays cleanly, 1 at the first mismatch.
pub(super) fn replay(
    home: &Home,
    args: &RunReplayArgs,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Result<(), CliError> {
    let rt = foreground_runtime()?;
    let run = RunId(args.run);
    // A check writes nothing, not even the acceptance of a changed agent.
    let on_change = OnAgentChange::from_flag(args.accept_changed_agent, false);
    let Relaunched { runtime, agent_change, .. } = relaunch(home, args.run, on_change)?;
    if let Some(change) = &agent_change {
        pin::note(run, change, false, err)?;
    }
    let report = rt.block_on(runtime.check_replay(run))?;
    if args.json {
        write_json(out, &report_json(&report))?;
    } else {
        write_report(&report, out)?;
    }
    match &report.verdict {
        ReplayVerdict::Clean { .. } => Ok(()),
        ReplayVerdict::Mismatch(error) => Err(mismatch_error(run, error)),
    }
}

/// The error a replay check ends with at a mismatch, with what to do about it.
fn mismatch_error(run: RunId, error: &FlowError) -> CliError {
    let cli = CliError::user(anyhow!("run {} does not replay against the current code", run.0));
    match error {
        FlowError::Nondeterminism { .. } => fixes(run).into_iter().fold(cli, CliError::hint),
        _ => cli.hint(format!(
            "resume it with the flow version and plugins it was recorded with, or cancel it with `clio runs cancel {}`",
            run.0
        )),
    }
}

/// What a person can do about a run whose code no longer matches its history.
fn fixes(run: RunId) -> [String; 3] {
    [
        "a call that moved: give it a `key` so that its identity survives edits".to_owned(),
        "new code: guard it with `ctx.patched(\"id\")` so that runs recorded before the change take the old path"
            .to_owned(),
        format!("or give up on the run: `clio runs cancel {}`", run.0),
    ]
}

/// The error of a run that stopped because its code no longer matches its history
/// (`runs resume`, `run`, `workflow run`): what happened, that nothing ran and the run is
/// still resumable, and what to do. With `json`, the outcome is printed on `out` first.
pub(super) fn stopped(
    journal: &Journal,
    run: RunId,
    error: &FlowError,
    json: bool,
    out: &mut dyn Write,
) -> CliError {
    // The runtime left the run interrupted or awaiting input; a failed read says so less
    // precisely rather than hiding the mismatch.
    let status =
        journal.run(run).ok().flatten().map_or("interrupted", |record| status_name(record.status));
    if json {
        let value = json!({"run": run.0, "status": status, "error": error.to_json()});
        if let Err(write_error) = write_json(out, &value) {
            return write_error;
        }
    }
    // The mismatch stays the cause (classified once, `From<FlowError>`), printed under
    // what it means for the run.
    let cli = CliError::from(error.clone())
        .context(format!(
            "run {} stopped before running anything new: the code no longer matches its history",
            run.0
        ))
        .hint(format!(
        "the run is left {status}; `clio runs replay {}` shows the mismatch without running anything",
        run.0
    ));
    fixes(run).into_iter().fold(cli, CliError::hint)
}

/// Writes a replay check's verdict for a person.
fn write_report(report: &ReplayReport, out: &mut dyn Write) -> Result<(), CliError> {
    let run = report.run.0;
    let reached = format!("{} of {} recorded commands reached", report.reached, report.commands);
    match &report.verdict {
        ReplayVerdict::Clean { outcome } if report.finished => {
            writeln!(
                out,
                "run {run} replays cleanly: {reached}; the current code ends it as recorded ({})",
                outcome_text(outcome)
            )?;
        }
        ReplayVerdict::Clean { .. } => {
            writeln!(out, "run {run} replays cleanly up to the end of its history: {reached}")?;
            writeln!(out, "`clio runs resume {run}` continues it from there")?;
        }
        ReplayVerdict::Mismatch(error) => {
            writeln!(out, "run {run} does not replay against the current code: {reached}")?;
            write_mismatch(error, out)?;
        }
    }
    Ok(())
}

/// Writes a mismatch: where the code departs from the history and what the history
/// still holds there, or what differs between the run's record and the code.
fn write_mismatch(error: &FlowError, out: &mut dyn Write) -> Result<(), CliError> {
    match error {
        FlowError::Nondeterminism { identity, journaled, requested, unreached } => {
            writeln!(out, "  at:       {identity}")?;
            writeln!(out, "  recorded: {journaled}")?;
            writeln!(out, "  now:      {requested}")?;
            if !unreached.is_empty() {
                writeln!(
                    out,
                    "  recorded, not reached by the current code ({}):",
                    unreached.len()
                )?;
                for command in unreached {
                    writeln!(out, "    {}", unreached_line(command))?;
                }
            }
        }
        FlowError::FlowReplayMismatch { differs } => {
            for m in differs {
                writeln!(out, "  {}: recorded {:?}, now {:?}", m.what, m.recorded, m.now)?;
            }
        }
        other => writeln!(out, "  {other}")?,
    }
    Ok(())
}

/// One recorded command the code did not reach: kind, target, identity, and whether
/// running it again could repeat an effect.
fn unreached_line(command: &RecordedCommand) -> String {
    let effect = if command.side_effecting { "side-effecting" } else { "read-only" };
    let target = if command.target.is_empty() { "(target not recorded)" } else { &command.target };
    format!("{} {target} at {} ({effect})", command.kind, command.identity)
}

/// Names how a replay ended, for a person.
fn outcome_text(outcome: &RunOutcome) -> String {
    match outcome {
        RunOutcome::Succeeded(_) => "succeeded".to_owned(),
        RunOutcome::Failed(error) => format!("failed: {error}"),
        RunOutcome::AwaitingInput(questions) => {
            format!("awaiting input: {} question(s)", questions.len())
        }
        RunOutcome::Cancelled => "cancelled".to_owned(),
    }
}

/// Returns a replay check's verdict as JSON: `clean`, the counts, and the outcome or the
/// mismatch (the error's JSON form, as the run's `replay_mismatch` event holds it).
fn report_json(report: &ReplayReport) -> Value {
    let mut value = json!({
        "run": report.run.0,
        "finished": report.finished,
        "commands": report.commands,
        "reached": report.reached,
    });
    match &report.verdict {
        ReplayVerdict::Clean { outcome } => {
            value["clean"] = json!(true);
            value["outcome"] = json!(outcome_name(outcome));
        }
        ReplayVerdict::Mismatch(error) => {
            value["clean"] = json!(false);
            value["mismatch"] = error.to_json();
        }
    }
    value
}

/// The stable name of how a replay ended, for JSON.
fn outcome_name(outcome: &RunOutcome) -> &'static str {
    match outcome {
        RunOutcome::Succeeded(_) => "succeeded",
        RunOutcome::Failed(_) => "failed",
        RunOutcome::AwaitingInput(_) => "awaiting_input",
        RunOutcome::Cancelled => "cancelled",
    }
}
