//! The commands: each turns validated arguments into library calls and renders the result.

mod agent;
mod workflow;

use std::io::Write;
use std::path::Path;

use anyhow::Context;

use crate::args::{AgentCommand, Cli, Command, WorkflowCommand};
use crate::error::CliError;

/// Runs the command `cli` names, writing its output to `out`.
pub(crate) fn dispatch(cli: Cli, out: &mut dyn Write) -> Result<(), CliError> {
    match cli.command {
        Command::Agent(AgentCommand::Spec(args)) => agent::spec(&args, out),
        Command::Agent(AgentCommand::Verify(args)) => agent::verify(&args, out),
        Command::Workflow(WorkflowCommand::Check(args)) => workflow::check(&args, out),
        Command::Workflow(WorkflowCommand::Show(args)) => workflow::show(&args, out),
    }
}

/// Reads a text file, naming it in the error.
fn read_text(path: &Path) -> Result<String, CliError> {
    std::fs::read_to_string(path)
        .with_context(|| format!("cannot read {}", path.display()))
        .map_err(CliError::user)
}

/// Writes `value` as pretty JSON followed by a newline.
fn write_json(out: &mut dyn Write, value: &serde_json::Value) -> Result<(), CliError> {
    let text = serde_json::to_string_pretty(value).map_err(CliError::internal)?;
    writeln!(out, "{text}")?;
    Ok(())
}
