//! The raw command line, as clap parses it. Commands validate and interpret it.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

/// Durable orchestration for AI agents: check, freeze and run agents, flows and workflows.
#[derive(Debug, Parser)]
#[command(name = "clio", version, propagate_version = true)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub(crate) command: Command,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Freeze and verify agent specs
    #[command(subcommand)]
    Agent(AgentCommand),
}

#[derive(Debug, Subcommand)]
pub(crate) enum AgentCommand {
    /// Freeze an agent definition into a spec and print it with its checksum
    #[command(
        after_help = "Example:\n  clio agent spec examples/agents/reviewer.toml --json > reviewer.spec.json"
    )]
    Spec(AgentSpecArgs),
    /// Check that a frozen spec's checksum matches its content
    #[command(after_help = "Example:\n  clio agent verify reviewer.spec.json")]
    Verify(AgentVerifyArgs),
}

#[derive(Debug, Args)]
pub(crate) struct AgentSpecArgs {
    /// The agent definition: a `.toml` or `.json` file
    pub(crate) file: PathBuf,
    /// Print the spec as JSON (the form `clio agent verify` reads)
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(Debug, Args)]
pub(crate) struct AgentVerifyArgs {
    /// The frozen spec, as written by `clio agent spec --json`
    pub(crate) file: PathBuf,
    /// Print the result as JSON
    #[arg(long)]
    pub(crate) json: bool,
}
