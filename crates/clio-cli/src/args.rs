//! The raw command line, as clap parses it. Commands validate and interpret it.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

/// Durable orchestration for AI agents: check, freeze and run agents, flows and workflows.
#[derive(Debug, Parser)]
#[command(
    name = "clio",
    version = VERSION,
    propagate_version = true,
    disable_help_flag = true,
    disable_version_flag = true,
    after_help = TOP_EXAMPLES
)]
pub(crate) struct Cli {
    /// Where CLIO keeps its journal, store and config [default: $CLIO_HOME, else ~/.clio]
    #[arg(long, global = true, value_name = "DIR", help_heading = GLOBAL)]
    pub(crate) home: Option<PathBuf>,
    /// A shared journal to use instead of the home's file: postgres://USER@HOST:PORT/DB
    /// [default: `journal` in config.toml, else $CLIO_HOME/journal.redb]
    #[arg(long, global = true, value_name = "URL", help_heading = GLOBAL)]
    pub(crate) journal: Option<String>,
    /// When to colour the output: auto colours a terminal unless NO_COLOR is set
    #[arg(long, global = true, value_enum, default_value_t = ColorChoice::Auto, value_name = "WHEN", help_heading = GLOBAL)]
    pub(crate) color: ColorChoice,
    /// Log on stderr: -v a run's start and end, -vv each call too (RUST_LOG chooses in detail)
    #[arg(long, short, global = true, action = clap::ArgAction::Count, help_heading = GLOBAL)]
    pub(crate) verbose: u8,
    /// Print no progress or notes: only the outcome, warnings and errors
    #[arg(long, short, global = true, conflicts_with = "verbose", help_heading = GLOBAL)]
    pub(crate) quiet: bool,
    /// Print help
    #[arg(long, short, global = true, action = clap::ArgAction::Help, help_heading = GLOBAL)]
    help: Option<bool>,
    /// Print the version
    #[arg(long, short = 'V', global = true, action = clap::ArgAction::Version, help_heading = GLOBAL)]
    version: Option<bool>,
    #[command(subcommand)]
    pub(crate) command: Command,
}

/// The heading of the seven flags every command takes, apart from each command's own.
pub(crate) const GLOBAL: &str = "Global options";

/// The examples `clio --help` ends with: the main jobs, one line each.
const TOP_EXAMPLES: &str = "\
Examples:
  clio plugin check examples/marketplace
  clio workflow run examples/workflows/batch7.json --task \"Review batch 7\" \\
    --plugin examples/marketplace/plugins/materials --models examples/models/models.toml
  clio run examples/agents/minimal.toml --input \"Say hello\" --models examples/models/models.toml
  clio runs list --status failed --since 2d
  clio runs answer 3 yes
  clio serve

Each command's --help lists its own options, then the global ones; `clio man COMMAND` prints
its manual page.";

impl Cli {
    /// Returns whether the command submits a run to `clio serve` (`--detach`).
    pub(crate) fn detached(&self) -> bool {
        match &self.command {
            Command::Workflow(WorkflowCommand::Run(a)) => a.drive.detach,
            Command::Run(a) => a.drive.detach,
            _ => false,
        }
    }

    /// Makes the paths of a command submitted by another process absolute against that
    /// process's folder `cwd`: the process serving it works in a folder of its own.
    pub(crate) fn resolve_paths(&mut self, cwd: &std::path::Path) {
        let at = |path: &mut PathBuf| {
            if path.is_relative() {
                *path = cwd.join(&*path);
            }
        };
        let drive = match &mut self.command {
            Command::Workflow(WorkflowCommand::Run(a)) => {
                at(&mut a.file);
                &mut a.drive
            }
            Command::Run(a) => {
                // The target is an agent file when one is there, else a flow id.
                let file = cwd.join(&a.target);
                if std::path::Path::new(&a.target).is_relative() && file.is_file() {
                    a.target = file.display().to_string();
                }
                &mut a.drive
            }
            _ => return,
        };
        drive.plugins.iter_mut().for_each(at);
        drive.workspace.iter_mut().for_each(at);
        drive.models.iter_mut().for_each(at);
    }

    /// Returns whether the command asked for JSON output (`--json`, or a command whose
    /// output is JSON lines), so that an error is printed as JSON on stdout too.
    pub(crate) fn wants_json(&self) -> bool {
        match &self.command {
            Command::Plugin(c) => match c {
                PluginCommand::Check(a) => a.json,
                PluginCommand::Install(a) => a.json,
                PluginCommand::List(a) => a.json,
                PluginCommand::Trust(a) => a.json,
                PluginCommand::Remove(a) => a.json,
            },
            Command::Agent(AgentCommand::Spec(a)) => a.json,
            Command::Agent(AgentCommand::Verify(a)) => a.json,
            Command::Workflow(WorkflowCommand::Check(a)) => a.json,
            Command::Workflow(WorkflowCommand::Run(a)) => a.drive.json,
            Command::Workflow(WorkflowCommand::Show(a)) => a.json,
            Command::Run(a) => a.drive.json,
            Command::Models(ModelsCommand::List(a)) => a.json,
            Command::Runs(c) => match c {
                RunsCommand::List(a) => a.json,
                RunsCommand::Show(a) => a.json,
                RunsCommand::Tree(a) | RunsCommand::Cancel(a) => a.json,
                RunsCommand::Stop(a) => a.json,
                RunsCommand::Events(a) => a.json,
                RunsCommand::Export(a) => a.json,
                RunsCommand::Answer(a) => a.json,
                RunsCommand::Resume(a) => a.json,
                RunsCommand::Replay(a) => a.json,
                RunsCommand::Prune(a) => a.json,
                RunsCommand::Owner => true,
            },
            Command::Journal(JournalCommand::Check(a)) => a.json,
            Command::Journal(JournalCommand::Salvage(a)) => a.json,
            Command::Completions(a) => a.json,
            Command::Man(a) => a.json,
            Command::Serve(a) => a.json,
            Command::Worker(a) => a.json,
            Command::Complete(_) => false,
        }
    }
}

/// The version `--version` prints: the package's, and the commit it was built from when
/// the build could tell (`build.rs`).
const VERSION: &str = match option_env!("CLIO_COMMIT") {
    Some(_) => concat!(env!("CARGO_PKG_VERSION"), " (", env!("CLIO_COMMIT"), ")"),
    None => env!("CARGO_PKG_VERSION"),
};

/// When to colour what a person reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum ColorChoice {
    Auto,
    Always,
    Never,
}

/// The shells `clio completions` writes scripts for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Shell {
    Bash,
    Zsh,
    Fish,
    Elvish,
    Powershell,
}

#[derive(Debug, Args)]
pub(crate) struct CompletionsArgs {
    /// The shell to write completions for
    #[arg(value_enum)]
    pub(crate) shell: Shell,
    /// Print `{"shell": SHELL, "script": TEXT}` instead of the script
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Check, install, list, trust and remove plugins
    #[command(
        subcommand,
        after_help = "Examples:\n  clio plugin check examples/marketplace\n  clio plugin install examples/marketplace materials@^0.1\n  clio plugin trust examples/marketplace/plugins/materials\n  clio plugin list"
    )]
    Plugin(PluginCommand),
    /// Freeze and verify agent specs
    #[command(
        subcommand,
        after_help = "Examples:\n  clio agent spec examples/agents/reviewer.toml --json > reviewer.spec.json\n  clio agent verify reviewer.spec.json"
    )]
    Agent(AgentCommand),
    /// Check, draw and run workflows (JSON DAGs of steps)
    #[command(
        subcommand,
        after_help = "Examples:\n  clio workflow check examples/workflows/batch7.json\n  clio workflow show examples/workflows/batch7.json --format mermaid\n  clio workflow run examples/workflows/batch7.json --task \"Review batch 7\" \\\n    --plugin examples/marketplace/plugins/materials --models examples/models/models.toml"
    )]
    Workflow(WorkflowCommand),
    /// Run an agent (a definition file) or a flow (by id) on an input, durably
    #[command(
        after_help = "Examples:\n  clio run examples/agents/minimal.toml --input \"Say hello\" --models examples/models/models.toml\n  clio run batch7 --plugin examples/marketplace/plugins/materials --input \"Review batch 7\""
    )]
    Run(RunCommandArgs),
    /// List the models runs may use, and where they come from
    #[command(
        subcommand,
        after_help = "Examples:\n  clio models list\n  clio models list --models examples/models/models.toml --json"
    )]
    Models(ModelsCommand),
    /// Inspect and manage the runs in the journal
    #[command(
        subcommand,
        after_help = "Examples:\n  clio runs list --status failed --since 2d\n  clio runs show 3\n  clio runs events 3 --follow\n  clio runs answer 3 yes\n  clio runs resume 3\n  clio runs prune --older-than 30d"
    )]
    Runs(RunsCommand),
    /// Check the journal file for damage, and salvage what still reads from a damaged one
    #[command(
        subcommand,
        after_help = "Examples:\n  clio journal check\n  clio journal salvage ~/salvaged.redb"
    )]
    Journal(JournalCommand),
    /// Hold the journal and serve the `runs` commands of other clio processes, until Ctrl-C
    #[command(
        after_help = "While it runs, `clio runs list|show|tree|events|export|answer|cancel|prune|replay|resume` from any terminal go through it (over $CLIO_HOME/clio.sock), and `clio run … --detach` and `clio workflow run … --detach` submit runs to it. It resumes the runs a crash left interrupted when it starts, drives the runs it holds to their end (a run waiting on a question goes on once it is answered), and serves the HTTP API (docs/http-api.md) and the run viewer on 127.0.0.1. The first line it prints is the viewer's address, with the token that lets the page answer and cancel.\n\nExamples:\n  clio serve\n  clio serve --port 0"
    )]
    Serve(ServeArgs),
    /// Claim and drive the runs of a shared journal, with a lease, until Ctrl-C
    #[command(
        after_help = "Any number of workers, on any machines, share one PostgreSQL journal (--journal URL, or journal = \"postgres://…\" in config.toml). Each claims runnable runs (new, interrupted, or waiting runs whose questions are answered) with a lease it renews while it drives them; a worker that dies loses its leases after --lease, and another resumes its runs from their history, never doing a side-effecting call twice. A run's lease moves on only by a claim, and every write carries its epoch, so a worker that stalled past its lease can no longer write into the run. Submit runs from anywhere with `clio workflow run … --detach` or `clio run … --detach`, answer with `clio runs answer`: the same URL is all they need. See docs/deploy.md.\n\nExamples:\n  clio worker --journal postgres://clio@db:5432/clio\n  clio worker --concurrency 8 --lease 30"
    )]
    Worker(WorkerArgs),
    /// Print a shell completion script on stdout
    #[command(
        after_help = "Examples:\n  clio completions bash > ~/.local/share/bash-completion/completions/clio\n  clio completions zsh > ~/.zfunc/_clio"
    )]
    Completions(CompletionsArgs),
    /// Print a manual page (roff) on stdout: clio(1), or a command's
    #[command(
        after_help = "Examples:\n  clio man > clio.1 && man ./clio.1\n  clio man runs list | man -l -\n  clio man --dir ~/.local/share/man/man1\n  clio man --markdown > cli-reference.md"
    )]
    Man(ManArgs),
    /// List the values a shell completes: run ids, flow ids, statuses (for the scripts of
    /// `clio completions`)
    #[command(name = "__complete", hide = true)]
    Complete(CompleteArgs),
}

#[derive(Debug, Args)]
pub(crate) struct ManArgs {
    /// The command whose page to print, as `runs list` [default: clio(1) itself]
    #[arg(value_name = "COMMAND")]
    pub(crate) command: Vec<String>,
    /// Write every command's page into this folder (clio.1, clio-runs.1, clio-runs-list.1, …)
    #[arg(long, value_name = "DIR", conflicts_with_all = ["command", "markdown"])]
    pub(crate) dir: Option<PathBuf>,
    /// Print the reference of every command in Markdown instead: each one's --help
    #[arg(long)]
    pub(crate) markdown: bool,
    /// Print `{"page": NAME, "roff": TEXT}` (with --dir, `{"pages": [FILE, …]}`) instead
    #[arg(long)]
    pub(crate) json: bool,
}

/// What `clio __complete` lists for the shell completion scripts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum CompleteKind {
    /// The home's run ids, newest first
    Runs,
    /// The flow ids of the home's runs and installed, trusted plugins
    Flows,
    /// The statuses `--status` takes
    Statuses,
}

#[derive(Debug, Args)]
pub(crate) struct CompleteArgs {
    /// What to list
    #[arg(value_enum)]
    pub(crate) kind: CompleteKind,
}

#[derive(Debug, Subcommand)]
pub(crate) enum JournalCommand {
    /// Check the journal for damage without writing to it
    #[command(after_help = JOURNAL_CHECK_HELP)]
    Check(JsonArgs),
    /// Copy every run that still reads whole into a new journal file
    #[command(after_help = JOURNAL_SALVAGE_HELP)]
    Salvage(JournalSalvageArgs),
}

/// The long help of `clio journal check`: what it reads, and what it does not.
const JOURNAL_CHECK_HELP: &str = "\
Reads the journal ($CLIO_HOME/journal.redb) without writing to it and lists every problem,
naming its table and key:
  - redb's own integrity check, which verifies the checksum of every page; it needs a
    writable file, so it runs on a private copy in the temporary folder (as much free
    space as the journal takes)
  - every record of every table: its checksum (each record carries one from journal
    format 3 on), that it decodes and says where it is stored
  - that the tables agree: each run has a record and a head, its entries are exactly
    0 to the head, and the identity, run-task and live indexes match the records

Exit 0 when the journal is whole, 1 with the list of problems otherwise. A journal in use
by another clio process cannot be checked (exit 1); writes a crash left in the write-ahead
log (journal.redb-wal) are not read, and the report says when there are some.

When there are problems: `clio journal salvage OUT` copies the runs that still read whole
into a new journal at OUT; or restore a copy of the journal.

Examples:
  clio journal check
  clio journal check --json";

/// The long help of `clio journal salvage`: what it copies, and how to use the result.
const JOURNAL_SALVAGE_HELP: &str = "\
Copies every run of the journal ($CLIO_HOME/journal.redb) that still reads whole into a
new journal at OUT, which must not exist. The journal itself is only read.

A run is copied only whole: its record, every entry from the first to the last and every
task it has, each verifying its checksum; a run with any part damaged or missing is left
out and listed with the reason. Sessions are copied one by one. The indexes are rebuilt
from the records copied, and every id stays the same (new runs get new ids).

To go on with the salvaged journal: move journal.redb (and journal.redb-wal) aside, keep
them, and move OUT to $CLIO_HOME/journal.redb.

Examples:
  clio journal salvage ~/salvaged.redb
  clio journal salvage ~/salvaged.redb --json";

#[derive(Debug, Args)]
pub(crate) struct JournalSalvageArgs {
    /// The new journal file to write (it must not exist)
    #[arg(value_name = "OUT")]
    pub(crate) out: PathBuf,
    /// Print what was copied and left as JSON
    #[arg(long)]
    pub(crate) json: bool,
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
    /// Run a workflow file durably, with live progress
    #[command(
        after_help = "Example:\n  clio workflow run examples/workflows/batch7.json --task \"Review batch 7\" \\\n    --plugin examples/marketplace/plugins/materials --models examples/models/models.toml \\\n    --workspace examples/workspace --editor independent_reviewer"
    )]
    Run(WorkflowRunArgs),
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
    /// Print the steps, layers, final steps and the drawing as JSON
    #[arg(long)]
    pub(crate) json: bool,
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

#[derive(Debug, Subcommand)]
pub(crate) enum RunsCommand {
    /// List runs, newest first: when each started, how long it took, what it ran, and its
    /// error or question
    #[command(
        after_help = "Examples:\n  clio runs list\n  clio runs list --status failed --since 2d\n  clio runs list --agent reviewer --limit 10 --page 2\n  clio runs list --status awaiting_input --json"
    )]
    List(RunsListArgs),
    /// Show a run: its status, answer, tasks and events
    #[command(after_help = "Example:\n  clio runs show 3")]
    Show(RunShowArgs),
    /// Draw a run's task tree
    #[command(after_help = "Example:\n  clio runs tree 3")]
    Tree(RunArgs),
    /// List a run's events in order: one line each, with its time and what happened
    #[command(
        after_help = "Times are UTC, then the time since the run started.\n\nExamples:\n  clio runs events 3\n  clio runs events 3 --follow\n  clio runs events 3 --json"
    )]
    Events(RunEventsArgs),
    /// Write a run, its tasks and its entries as JSON lines
    #[command(
        after_help = "Examples:\n  clio runs export 3 > run-3.jsonl\n  clio runs export 3 --json > run-3.json"
    )]
    Export(RunExportArgs),
    /// Answer the question a run is waiting on, and continue the run here
    #[command(
        after_help = "With no QUESTION, the answer goes to the run's only open question. The run then continues in this terminal, as `clio runs resume` does, unless another clio process holds it (`clio serve` continues it there, a worker on a shared journal picks it up) or --record-only is given.\n\nExamples:\n  clio runs answer 3 yes\n  clio runs answer 3 2 \"use the 12 specimens\"\n  clio runs answer 3 no --record-only"
    )]
    Answer(RunAnswerArgs),
    /// Continue a run from its journal: finished work is not done again
    #[command(after_help = "Example:\n  clio runs resume 3")]
    Resume(RunResumeArgs),
    /// Check that the current code still reproduces a run's history, running nothing
    #[command(after_help = REPLAY_HELP)]
    Replay(RunReplayArgs),
    /// Cancel a run and everything it started
    #[command(after_help = "Example:\n  clio runs cancel 3")]
    Cancel(RunArgs),
    /// Stop a model's current turn: its call ends with call_stopped, while started flows and background work keep running
    #[command(
        after_help = "Without TASK, every model turn of the run running now is stopped; with TASK, that agent's or subagent's turn. The run must be driven by a clio process (`clio run`, `clio runs resume`, `clio serve`).\n\nExamples:\n  clio runs stop 3\n  clio runs stop 3 12"
    )]
    Stop(RunStopArgs),
    /// Say which process serves the journal: `clio serve` (which takes runs with --detach)
    /// or a process driving a run of its own (for the hints of other commands)
    #[command(name = "__owner", hide = true)]
    Owner,
    /// Delete finished runs (and their tasks and entries) started before a date
    #[command(
        after_help = "Examples:\n  clio runs prune --older-than 30d\n  clio runs prune --before 2026-01-01"
    )]
    Prune(RunsPruneArgs),
}

#[derive(Debug, Args)]
pub(crate) struct RunsListArgs {
    /// Only runs with this status (can be repeated)
    #[arg(long, value_name = "STATUS", value_parser = clap::builder::PossibleValuesParser::new(RUN_STATUSES))]
    pub(crate) status: Vec<String>,
    /// Only runs of this agent: its definition file's name, with or without `.toml`
    #[arg(long, value_name = "NAME")]
    pub(crate) agent: Option<String>,
    /// Only runs of this flow, by id (`workflow` for workflow files)
    #[arg(long, value_name = "ID")]
    pub(crate) flow: Option<String>,
    /// Only runs started since: an age (30m, 12h, 2d, 1w) or a date (YYYY-MM-DD, UTC)
    #[arg(long, value_name = "AGE|DATE")]
    pub(crate) since: Option<String>,
    /// At most this many runs a page [default: 50, all with --json]
    #[arg(long, value_name = "N")]
    pub(crate) limit: Option<usize>,
    /// Which page of --limit runs to show, from 1 (newest first)
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub(crate) page: Option<u64>,
    /// Print the runs as JSON
    #[arg(long)]
    pub(crate) json: bool,
}

/// The statuses a run can have, as `--status` takes them.
pub(crate) const RUN_STATUSES: [&str; 6] =
    ["running", "awaiting_input", "succeeded", "failed", "cancelled", "interrupted"];

/// The long help of `clio runs replay`: what it checks, and what to do about a mismatch.
const REPLAY_HELP: &str = "\
A run is resumed by running its flow again from the top: every call, step and question
finds its record in the journal instead of running again. That only works while the code
asks for the same things in the same places. `runs replay` checks it without executing
anything: no tool, model or child runs, and nothing is written to the journal.

It prints either that the run replays cleanly (every recorded command reached; for an
unfinished run, up to the end of its history), or the first mismatch: the place of the
new call (its identity: `file:line:col:digest#occurrence` of the call site, or `key:...`
for a keyed call), what it asked for, and each recorded command the code no longer
reaches, side-effecting or read-only. Exit 0 when clean, 1 on a mismatch.

To fix a mismatch: give a call that moved a `key` so that its identity survives edits;
guard new code with `ctx.patched(\"id\")` so that runs recorded before the change take
the old path; or give up on the run with `clio runs cancel N`.

An agent's run is pinned to the spec its agent file froze to at launch: if the file has
changed since, the check is refused (exit 1, naming the changed fields) unless
--accept-changed-agent is given.

Examples:
  clio runs replay 3
  clio runs replay 3 --json";

#[derive(Debug, Args)]
pub(crate) struct RunStopArgs {
    /// The run's id, as `clio runs list` shows it
    pub(crate) run: u64,
    /// The agent or subagent task whose turn to stop, as `clio runs tree` shows it [default: every model turn running now]
    pub(crate) task: Option<u64>,
    /// Print the result as JSON
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(Debug, Args)]
pub(crate) struct RunArgs {
    /// The run's id, as `clio runs list` shows it
    pub(crate) run: u64,
    /// Print the result as JSON
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(Debug, Args)]
pub(crate) struct RunEventsArgs {
    /// The run's id, as `clio runs list` shows it
    pub(crate) run: u64,
    /// Print the raw journal entries as JSON (JSON lines, one entry each, with --follow)
    #[arg(long)]
    pub(crate) json: bool,
    /// Keep printing the run's events as they are recorded, until the run ends (or Ctrl-C)
    #[arg(long)]
    pub(crate) follow: bool,
    /// Print only the events after this sequence number: the next page starts after the
    /// last one a page showed
    #[arg(long, value_name = "SEQ", conflicts_with_all = ["from", "follow"])]
    pub(crate) after: Option<u64>,
    /// Print at most this many events (a page; the journal reads only that page)
    #[arg(long, value_name = "N", conflicts_with_all = ["from", "follow"])]
    pub(crate) limit: Option<usize>,
    /// Print only the entries from this sequence number on, after a header line saying
    /// where the next read starts and whether the run has ended (what --follow reads)
    #[arg(long, hide = true, value_name = "SEQ")]
    pub(crate) from: Option<u64>,
}

#[derive(Debug, Args)]
pub(crate) struct RunShowArgs {
    /// The run's id, as `clio runs list` shows it
    pub(crate) run: u64,
    /// Print the result as JSON (entries included)
    #[arg(long)]
    pub(crate) json: bool,
    /// List the run's raw journal entries too (as `clio runs events` does)
    #[arg(long)]
    pub(crate) entries: bool,
}

#[derive(Debug, Args)]
pub(crate) struct RunExportArgs {
    /// The run's id, as `clio runs list` shows it
    pub(crate) run: u64,
    /// Print one JSON document, `{"run", "tasks", "entries"}`, instead of JSON lines
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("when").required(true).args(["older_than", "before"])))]
pub(crate) struct RunsPruneArgs {
    /// Prune finished runs started more than this long ago: 30d, 12h, 90m, 2w or 1h 30m
    #[arg(long, value_name = "AGE")]
    pub(crate) older_than: Option<String>,
    /// Prune finished runs started before this date (YYYY-MM-DD, UTC)
    #[arg(long, value_name = "DATE")]
    pub(crate) before: Option<String>,
    /// Print what was deleted as JSON
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(Debug, Subcommand)]
pub(crate) enum PluginCommand {
    /// Check a plugin folder or a whole marketplace the way an install loads it
    #[command(
        after_help = "Examples:\n  clio plugin check examples/marketplace\n  clio plugin check examples/marketplace/plugins/materials --json"
    )]
    Check(PluginCheckArgs),
    /// Install plugins from a marketplace folder, with everything they require
    #[command(
        after_help = "Examples:\n  clio plugin install examples/marketplace materials@^0.1\n  clio plugin install examples/marketplace --agent examples/marketplace/agents/materials-lead.toml"
    )]
    Install(PluginInstallArgs),
    /// List installed plugins and whether each is trusted
    #[command(after_help = "Example:\n  clio plugin list --json")]
    List(JsonArgs),
    /// Trust an installed plugin version, or a plugin folder, at its current content (its code may then run)
    #[command(
        after_help = "Examples:\n  clio plugin trust examples/materials 0.1.0\n  clio plugin trust examples/marketplace/plugins/materials"
    )]
    Trust(PluginTrustArgs),
    /// Remove an installed plugin version
    #[command(after_help = "Example:\n  clio plugin remove examples/materials 0.1.0")]
    Remove(PluginVersionArgs),
}

#[derive(Debug, Args)]
pub(crate) struct PluginCheckArgs {
    /// A plugin folder (with `ai.iowarp.clio/`) or a marketplace (with `.claude-plugin/marketplace.json`)
    pub(crate) path: PathBuf,
    /// Print the report as JSON
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(Debug, Args)]
pub(crate) struct PluginInstallArgs {
    /// The marketplace folder to install from
    pub(crate) marketplace: PathBuf,
    /// Plugin references such as `materials@^0.1` (can be repeated)
    pub(crate) references: Vec<String>,
    /// Install the plugins this agent definition lists
    #[arg(long, value_name = "FILE")]
    pub(crate) agent: Option<PathBuf>,
    /// Print what was installed as JSON
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(Debug, Args)]
pub(crate) struct PluginVersionArgs {
    /// The plugin as `marketplace/id`
    pub(crate) plugin: String,
    /// Its installed version, such as `0.1.0`
    #[arg(value_name = "VERSION")]
    pub(crate) plugin_version: String,
    /// Print what was removed as JSON
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(Debug, Args)]
pub(crate) struct PluginTrustArgs {
    /// The plugin as `marketplace/id` (then its installed VERSION), or a plugin folder (with `ai.iowarp.clio/`) as passed to `--plugin`
    pub(crate) plugin: String,
    /// The installed version, such as `0.1.0`; none for a folder
    #[arg(value_name = "VERSION")]
    pub(crate) plugin_version: Option<String>,
    /// Print what was trusted as JSON
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(Debug, Args)]
pub(crate) struct JsonArgs {
    /// Print the result as JSON
    #[arg(long)]
    pub(crate) json: bool,
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    #[test]
    fn the_command_line_is_consistent() {
        super::Cli::command().debug_assert();
    }
}

/// What every command that drives a run takes.
#[derive(Debug, Args)]
pub(crate) struct DriveArgs {
    /// A plugin folder whose tools, subagents and flows the run may use (can be repeated)
    #[arg(long = "plugin", value_name = "DIR")]
    pub(crate) plugins: Vec<PathBuf>,
    /// The workspace folder the run's tools read and write
    #[arg(long, value_name = "DIR")]
    pub(crate) workspace: Option<PathBuf>,
    /// The models file [default: the models of $CLIO_HOME/config.toml, else $CLIO_HOME/models.toml]
    #[arg(long, value_name = "FILE")]
    pub(crate) models: Option<PathBuf>,
    /// The run's model, as `account/model` or an id [default: config.toml's default_model, else the catalog's only model]. As the seeds' model choice has it, it is the last choice: a call's own model, then its flow's, then the subagent's or agent's preferred model come first
    #[arg(long)]
    pub(crate) model: Option<String>,
    /// Print the outcome as JSON instead of the answer, and no progress
    #[arg(long)]
    pub(crate) json: bool,
    /// Ask the person nothing: what would need an answer (trusting a plugin, allowing a tool) is refused instead, and resumes of the run keep to it
    #[arg(long)]
    pub(crate) no_input: bool,
    /// Trust the plugin folders given with --plugin, at their content now, before the run
    /// starts (as `clio plugin trust DIR` does for each): you vouch for their code here,
    /// instead of answering the run's trust question
    #[arg(long)]
    pub(crate) trust: bool,
    /// Submit the run to the `clio serve` that holds the journal and print its id, instead
    /// of driving it here
    #[arg(long)]
    pub(crate) detach: bool,
}

/// How `clio worker` claims runs.
#[derive(Debug, Args)]
pub(crate) struct WorkerArgs {
    /// Print a failure (to open the journal, to start) as JSON on stdout too; what the
    /// worker logs on stderr stays text
    #[arg(long)]
    pub(crate) json: bool,
    /// The most runs this worker drives at once
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub(crate) concurrency: u32,
    /// Seconds a lease lasts unless renewed: how long a dead worker's runs wait for another
    #[arg(long, default_value_t = 10.0, value_name = "SECS")]
    pub(crate) lease: f64,
    /// The worker's name in the journal [default: HOST-PID]
    #[arg(long)]
    pub(crate) name: Option<String>,
    /// Stop once no run has been runnable for this many seconds (batch jobs, tests)
    #[arg(long, value_name = "SECS")]
    pub(crate) exit_when_idle: Option<f64>,
}

/// How `clio serve` listens for HTTP.
#[derive(Debug, Args)]
pub(crate) struct ServeArgs {
    /// Print a failure (to hold the journal, to listen) as JSON on stdout too; the lines it
    /// prints while it serves stay text
    #[arg(long)]
    pub(crate) json: bool,
    /// The TCP port of the HTTP API and the viewer; 0 picks a free one
    #[arg(long, default_value_t = 7411)]
    pub(crate) port: u16,
    /// The address to listen on; one that is not loopback needs --allow-remote
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1")]
    pub(crate) bind: std::net::IpAddr,
    /// Let a non-loopback --bind listen: every request, reads included, then needs the token
    #[arg(long)]
    pub(crate) allow_remote: bool,
}

#[derive(Debug, Args)]
pub(crate) struct WorkflowRunArgs {
    /// The workflow: a JSON object with `steps`, or a list of steps
    pub(crate) file: PathBuf,
    /// The task the workflow works on (`$task` in step inputs): text, a JSON object or list,
    /// or `@FILE.json` read as JSON
    #[arg(long, visible_alias = "input", required_unless_present = "input_json")]
    pub(crate) task: Option<String>,
    /// The task as JSON (any JSON value; `@FILE` reads it from a file)
    #[arg(long, value_name = "JSON", conflicts_with = "task")]
    pub(crate) input_json: Option<String>,
    /// A step target that acts as an editor (can be repeated)
    #[arg(long = "editor", value_name = "TARGET")]
    pub(crate) editors: Vec<String>,
    /// The most steps editors may add
    #[arg(long)]
    pub(crate) max_added_steps: Option<u32>,
    /// The most editing rounds
    #[arg(long)]
    pub(crate) max_edit_rounds: Option<u32>,
    /// Ask a person to approve each proposed edit
    #[arg(long)]
    pub(crate) approve_edits: bool,
    #[command(flatten)]
    pub(crate) drive: DriveArgs,
}

#[derive(Debug, Args)]
pub(crate) struct RunCommandArgs {
    /// An agent definition file, or the id of a flow
    pub(crate) target: String,
    /// The input: the agent's or flow's task, as text; a JSON object or list is passed as
    /// JSON, and `@FILE.json` reads JSON from a file
    #[arg(long, required_unless_present = "input_json")]
    pub(crate) input: Option<String>,
    /// The input as JSON (any JSON value; `@FILE` reads it from a file), as a flow started
    /// by another receives it: `--input-json '{"workflow": {...}, "task": "..."}'`
    #[arg(long, value_name = "JSON", conflicts_with = "input")]
    pub(crate) input_json: Option<String>,
    /// A flow option as KEY=VALUE, the value read as JSON when it parses (can be repeated)
    #[arg(long = "option", value_name = "KEY=VALUE")]
    pub(crate) options: Vec<String>,
    #[command(flatten)]
    pub(crate) drive: DriveArgs,
}

#[derive(Debug, Args)]
pub(crate) struct RunAnswerArgs {
    /// The run's id
    pub(crate) run: u64,
    /// The question's number within the run, as `clio runs show` lists it (needed only
    /// when the run waits on more than one), then the answer: text, yes/no, or one of the
    /// offered options
    #[arg(value_name = "[QUESTION] ANSWER", num_args = 1..=2, required = true)]
    pub(crate) words: Vec<String>,
    /// The question's entry in the run's journal, as the runtime names it (from `words`)
    #[arg(skip)]
    pub(crate) question: u64,
    /// The answer (from `words`)
    #[arg(skip)]
    pub(crate) text: String,
    /// Go on although the agent file changed since the run was launched (recorded in the run)
    #[arg(long)]
    pub(crate) accept_changed_agent: bool,
    /// Only record the answer: do not continue the run here (`clio runs resume N` does later)
    #[arg(long)]
    pub(crate) record_only: bool,
    /// Print the recorded answer (and the run's outcome when it continues) as JSON
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(Debug, Args)]
pub(crate) struct RunResumeArgs {
    /// The run's id
    pub(crate) run: u64,
    /// Print the outcome as JSON instead of the answer, and no progress
    #[arg(long)]
    pub(crate) json: bool,
    /// Continue under the agent file as it is now, although it changed since the run was
    /// launched (recorded in the run)
    #[arg(long)]
    pub(crate) accept_changed_agent: bool,
}

#[derive(Debug, Args)]
pub(crate) struct RunReplayArgs {
    /// The run's id
    pub(crate) run: u64,
    /// Print the verdict as JSON
    #[arg(long)]
    pub(crate) json: bool,
    /// Check against the agent file as it is now, although it changed since the run was
    /// launched (nothing is recorded)
    #[arg(long)]
    pub(crate) accept_changed_agent: bool,
}

#[derive(Debug, Subcommand)]
pub(crate) enum ModelsCommand {
    /// List the models runs may use, with their capabilities
    #[command(
        after_help = "Models come from --models FILE, else the [[model]] tables of $CLIO_HOME/config.toml, else $CLIO_HOME/models.toml.\n\nExample:\n  clio models list --models examples/models/models.toml"
    )]
    List(ModelsListArgs),
}

#[derive(Debug, Args)]
pub(crate) struct ModelsListArgs {
    /// The models file [default: the models of $CLIO_HOME/config.toml, else $CLIO_HOME/models.toml]
    #[arg(long, value_name = "FILE")]
    pub(crate) models: Option<PathBuf>,
    /// Print the models as JSON
    #[arg(long)]
    pub(crate) json: bool,
}
