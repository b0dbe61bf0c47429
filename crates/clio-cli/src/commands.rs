//! The commands: each turns validated arguments into library calls and renders the result.

mod agent;
mod journal;
mod plugin;
mod replay;
mod run;
mod runs;
mod workflow;

use std::io::Write;
use std::path::Path;

use anyhow::Context;

use crate::args::{
    AgentCommand, Cli, Command, JournalCommand, ModelsCommand, PluginCommand, RunsCommand,
    WorkflowCommand,
};
use crate::error::CliError;
use crate::home::Home;

/// Runs the command `cli` names, writing its output to `out` and progress to `err`.
pub(crate) fn dispatch(cli: Cli, out: &mut dyn Write, err: &mut dyn Write) -> Result<(), CliError> {
    let home = Home::locate(cli.home.as_deref())?;
    match cli.command {
        Command::Plugin(PluginCommand::Check(args)) => plugin::check(&args, out),
        Command::Plugin(PluginCommand::Install(args)) => plugin::install(&home, &args, out),
        Command::Plugin(PluginCommand::List(args)) => plugin::list(&home, &args, out),
        Command::Plugin(PluginCommand::Trust(args)) => plugin::trust(&home, &args, out),
        Command::Plugin(PluginCommand::Remove(args)) => plugin::remove(&home, &args, out),
        Command::Agent(AgentCommand::Spec(args)) => agent::spec(&args, out),
        Command::Agent(AgentCommand::Verify(args)) => agent::verify(&args, out),
        Command::Workflow(WorkflowCommand::Check(args)) => workflow::check(&args, out),
        Command::Workflow(WorkflowCommand::Show(args)) => workflow::show(&args, out),
        Command::Workflow(WorkflowCommand::Run(args)) => run::workflow_run(&home, &args, out, err),
        Command::Run(args) => run::run(&home, &args, out, err),
        Command::Models(ModelsCommand::List(args)) => run::models_list(&home, &args, out, err),
        Command::Runs(RunsCommand::Answer(args)) => run::answer(&home, &args, out, err),
        Command::Runs(RunsCommand::Resume(args)) => run::resume(&home, &args, out, err),
        Command::Runs(RunsCommand::Replay(args)) => replay::replay(&home, &args, out, err),
        Command::Runs(RunsCommand::Cancel(args)) => run::cancel(&home, &args, out),
        Command::Runs(RunsCommand::List(args)) => runs::list(&home, &args, out),
        Command::Runs(RunsCommand::Show(args)) => runs::show(&home, &args, out),
        Command::Runs(RunsCommand::Tree(args)) => runs::tree(&home, &args, out),
        Command::Runs(RunsCommand::Events(args)) => runs::events(&home, &args, out),
        Command::Runs(RunsCommand::Export(args)) => runs::export(&home, &args, out),
        Command::Runs(RunsCommand::Prune(args)) => runs::prune(&home, &args, out),
        Command::Journal(JournalCommand::Check(args)) => journal::check(&home, &args, out),
        Command::Journal(JournalCommand::Salvage(args)) => journal::salvage(&home, &args, out),
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
