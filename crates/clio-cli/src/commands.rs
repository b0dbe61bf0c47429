//! The commands: each turns validated arguments into library calls and renders the result.

mod agent;
pub(crate) mod api;
mod http;
mod journal;
mod manual;
mod plugin;
mod reference;
mod replay;
mod run;
mod runs;
mod stop;
mod worker;
mod workflow;

use std::io::{IsTerminal, Write};
use std::path::Path;

use crate::args::{
    AgentCommand, Cli, Command, JournalCommand, ModelsCommand, PluginCommand, RunsCommand,
    WorkflowCommand,
};
use crate::error::CliError;
use crate::home::Home;
use crate::paint::Paint;

/// Runs the command `cli` names, writing its output to `out` and progress to `err`.
pub(crate) fn dispatch(cli: Cli, out: &mut dyn Write, err: &mut dyn Write) -> Result<(), CliError> {
    // Completions and the man page are made from the command line's definition alone.
    match &cli.command {
        Command::Completions(args) => return manual::completions(args, out),
        Command::Man(args) if args.markdown => return reference::markdown(out),
        Command::Man(args) => return manual::man(args, out),
        _ => {}
    }
    let home = Home::locate(cli.home.as_deref(), cli.journal.as_deref())?;
    let paint = Paint::new(cli.color, std::io::stderr().is_terminal());
    dispatch_in(cli, &home, paint, out, err)
}

/// Returns whether the process holding the journal runs this command for others
/// (`crate::serve`): the `runs` commands, which need nothing but the journal and the run,
/// and the runs submitted to `clio serve` with `--detach`.
pub(crate) fn servable(cli: &Cli) -> bool {
    matches!(cli.command, Command::Runs(_)) || cli.detached()
}

/// Runs the command `cli` names with `home` (which may lend a served command the owner's
/// journal and runtime) and `paint`.
pub(crate) fn dispatch_in(
    cli: Cli,
    home: &Home,
    paint: Paint,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Result<(), CliError> {
    let home = home.clone();
    let quiet = cli.quiet;
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
        Command::Workflow(WorkflowCommand::Run(args)) => {
            run::workflow_run(&home, &args, quiet, paint, out, err)
        }
        Command::Run(args) => run::run(&home, &args, quiet, paint, out, err),
        Command::Models(ModelsCommand::List(args)) => {
            run::models_list(&home, &args, quiet, out, err)
        }
        Command::Runs(RunsCommand::Answer(mut args)) => {
            runs::answer(&home, &mut args, quiet, paint, out, err)
        }
        Command::Runs(RunsCommand::Resume(args)) => {
            run::resume(&home, &args, quiet, paint, out, err)
        }
        Command::Runs(RunsCommand::Replay(args)) => replay::replay(&home, &args, out, err),
        Command::Runs(RunsCommand::Cancel(args)) => run::cancel(&home, &args, out),
        Command::Runs(RunsCommand::Stop(args)) => {
            let request = stop::StopRequest { run: args.run, task: args.task, json: args.json };
            stop::stop(&home, request, out)
        }
        Command::Runs(RunsCommand::List(args)) => runs::list(&home, &args, out),
        Command::Runs(RunsCommand::Show(args)) => runs::show(&home, &args, out),
        Command::Runs(RunsCommand::Tree(args)) => runs::tree(&home, &args, out),
        Command::Runs(RunsCommand::Events(args)) => runs::events(&home, &args, out),
        Command::Runs(RunsCommand::Export(args)) => runs::export(&home, &args, out),
        Command::Runs(RunsCommand::Prune(args)) => runs::prune(&home, &args, out),
        Command::Runs(RunsCommand::Owner) => {
            let serve = home.held().is_some_and(|held| held.drivers.is_some());
            let value = serde_json::json!({ "serve": serve, "pid": std::process::id() });
            write_json(out, &value)
        }
        Command::Journal(JournalCommand::Check(args)) => journal::check(&home, &args, out),
        Command::Journal(JournalCommand::Salvage(args)) => journal::salvage(&home, &args, out),
        // On a shared journal, the viewer and the API only: workers drive its runs.
        Command::Serve(args) if home.shared_journal().is_some() => {
            http::serve_shared(&home, &args, out, err)
        }
        Command::Serve(args) => run::serve(&home, &args, out, err),
        Command::Worker(args) => worker::work(&home, &args, err),
        Command::Complete(args) => manual::values(&home, args.kind, out),
        Command::Completions(_) | Command::Man(_) => Ok(()),
    }
}

/// Reads an input file as text, bounded (`crate::input`), naming it in the error.
fn read_text(path: &Path) -> Result<String, CliError> {
    crate::input::read_file(path)
}

/// Writes `value` as pretty JSON followed by a newline.
pub(crate) fn write_json(out: &mut dyn Write, value: &serde_json::Value) -> Result<(), CliError> {
    let text = serde_json::to_string_pretty(value).map_err(CliError::internal)?;
    writeln!(out, "{text}")?;
    Ok(())
}
