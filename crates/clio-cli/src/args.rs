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
    /// Check and draw workflows (JSON DAGs of steps)
    #[command(subcommand)]
    Workflow(WorkflowCommand),
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

#[derive(Debug, Subcommand)]
pub(crate) enum WorkflowCommand {
    /// Check a workflow file: ids, targets, dependencies, cycles and input references
    #[command(after_help = "Example:\n  clio workflow check examples/workflows/batch7.json")]
    Check(WorkflowCheckArgs),
    /// Draw a workflow's DAG as text, Mermaid or DOT
    #[command(
        after_help = "Examples:\n  clio workflow show examples/workflows/batch7.json\n  clio workflow show examples/workflows/batch7.json --format mermaid"
    )]
    Show(WorkflowShowArgs),
}

#[derive(Debug, Args)]
pub(crate) struct WorkflowCheckArgs {
    /// The workflow: a JSON object with `steps`, or a list of steps
    pub(crate) file: PathBuf,
    /// Print the result as JSON
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(Debug, Args)]
pub(crate) struct WorkflowShowArgs {
    /// The workflow: a JSON object with `steps`, or a list of steps
    pub(crate) file: PathBuf,
    /// How to draw the DAG
    #[arg(long, value_enum, default_value_t = DrawFormat::Text)]
    pub(crate) format: DrawFormat,
}

/// The drawings `clio workflow show` can make.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum DrawFormat {
    /// Layers of steps, for a terminal
    Text,
    /// A Mermaid flowchart, for Markdown
    Mermaid,
    /// Graphviz DOT
    Dot,
}
