//! `clio workflow run`, `clio run`, `clio runs answer|resume|cancel` and `clio models
//! list`: the commands that drive runs, with live progress, and leave every run resumable.

use std::io::{IsTerminal, Write};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, anyhow};
use clio_flow::{
    FlowError, FlowSelection, Registry, RunOutcome, RunReport, Runtime, RuntimeConfig,
};
use clio_journal::{Journal, RunId, RunRecord, TaskKind, TaskRecord, TaskStatus};
use serde_json::{Value, json};

use super::{read_text, replay, write_json};
use crate::args::{
    DriveArgs, ModelsListArgs, RunAnswerArgs, RunArgs, RunCommandArgs, RunResumeArgs,
    WorkflowRunArgs,
};
use crate::config::{HomeConfig, ModelsChoice};
use crate::drivers::Drivers;
use crate::error::{CliError, journal_error};
use crate::home::{Held, Home};
use crate::launch::{
    Launch, Untrusted, agent_flow, agent_spec, installed_flow_provider, open_journal, owner,
    prepare_runtime_vouching, runtime,
};
use crate::paint::{Paint, Verdict};
use crate::pin::{self, AgentChange, OnAgentChange};
use crate::progress::{Progress, entries_warning};
use crate::serve::Endpoint;
use crate::tasks::{TaskNumbers, kind_name, step_name};

/// The async runtime of a command that drives many runs at once (`serve`, `worker`): a
/// worker thread per core. Its workers do not spin for awaited journal writes: with many
/// runs, most waits overlap other work.
pub(super) fn tokio_runtime() -> Result<tokio::runtime::Runtime, CliError> {
    build_runtime(tokio::runtime::Builder::new_multi_thread())
}

/// The longest a foreground run's worker spins for an awaited journal write before it
/// sleeps: longer than a write's apply and flush on this machine's disk (200–300 µs when
/// the disk is slow), short enough that a slower disk costs little CPU.
const PARK_SPIN: std::time::Duration = std::time::Duration::from_micros(500);

/// The async runtime of a command that drives one run in the foreground: one worker
/// thread (unless `TOKIO_WORKER_THREADS` says otherwise). A run's tasks mostly wait (on the
/// journal's writer thread, on tool servers and model providers, which are other threads
/// and processes), so one thread serves them all, and a chain's step wakes the tasks it
/// talks to on that thread rather than handing each over to another core and back: the
/// 1,000-step chain of the CLI bench went from 0.51 s to 0.38 s (`docs/performance.md`).
/// Blocking work still goes to the blocking pool. A worker about to sleep while the run
/// awaits a journal write spins for its delivery first (up to [`PARK_SPIN`]): the chain's
/// 0.35 s went to 0.27 s, as the wake-up after each flush cost tens of microseconds here.
pub(super) fn foreground_runtime() -> Result<tokio::runtime::Runtime, CliError> {
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    if std::env::var_os("TOKIO_WORKER_THREADS").is_none() {
        builder.worker_threads(1);
    }
    // Waiting for the journal's flush, the worker stays awake for the delivery instead of
    // sleeping and being woken (`clio_journal::spin_for_awaited_write`).
    builder.on_thread_park(|| clio_journal::spin_for_awaited_write(PARK_SPIN));
    build_runtime(builder)
}

/// Starts the home's sandbox check on `rt` while the command goes on to open its journal
/// and read its plugins: the check is a process of its own, and the run's first confined
/// tool server or script waits for it. A config that does not load is left for the
/// command's own load to report.
fn probe_sandbox_ahead(rt: &tokio::runtime::Runtime, home: &Home) {
    if let Ok(settings) = crate::config::HomeConfig::load(home) {
        let _entered = rt.enter();
        settings.sandbox().probe_ahead();
    }
}

fn build_runtime(
    mut builder: tokio::runtime::Builder,
) -> Result<tokio::runtime::Runtime, CliError> {
    builder
        .enable_all()
        .build()
        .context("cannot start the async runtime")
        .map_err(CliError::internal)
}

fn launch_of(drive: &DriveArgs, agent: Option<std::path::PathBuf>) -> Result<Launch, CliError> {
    Launch {
        agent,
        plugins: drive.plugins.clone(),
        workspace: drive.workspace.clone(),
        models: drive.models.clone(),
        model: drive.model.clone().unwrap_or_default(),
        no_input: drive.no_input,
        ..Launch::default()
    }
    .absolute()
}

/// Runs a workflow file through the built-in `workflow` flow.
pub(super) fn workflow_run(
    home: &Home,
    args: &WorkflowRunArgs,
    quiet: bool,
    paint: Paint,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Result<(), CliError> {
    let text = read_text(&args.file)?;
    let workflow = clio_workflow::Workflow::from_json(&text).map_err(|e| {
        CliError::user(anyhow!("{}: {e}", args.file.display()))
            .hint("`clio workflow check FILE` reports the first problem")
    })?;
    let task = given_input(args.task.as_deref(), args.input_json.as_deref())?;
    let run = clio_flow::WorkflowRun {
        editors: args.editors.clone(),
        max_added_steps: args.max_added_steps.map(u64::from),
        max_edit_rounds: args.max_edit_rounds.map(u64::from),
        approve_edits: args.approve_edits,
        // `--model` is the run's model (the launch's, below): per the seeds' model choice
        // a step's own `model`, then a subagent's preference, come before it; it is not
        // the workflow's `model`, which would outrank every preference.
        ..clio_flow::WorkflowRun::new(workflow, task)
    };
    let launch = launch_of(&args.drive, None)?;
    let check =
        |runtime: &Runtime| check_targets(runtime, &run.workflow, &args.editors, &args.file);
    let show = Show::of(&args.drive, quiet, paint);
    start_checked(
        home,
        launch,
        FlowSelection::new("workflow"),
        run.input(),
        &args.drive,
        &check,
        show,
        out,
        err,
    )
}

/// Checks, before a run exists, that every step's target and every `--editor` is known to
/// the runtime the run would use.
fn check_targets(
    runtime: &Runtime,
    workflow: &clio_workflow::Workflow,
    editors: &[String],
    file: &std::path::Path,
) -> Result<(), CliError> {
    use clio_workflow::TargetKind;
    let registry = runtime.registry();
    let kind_of = |target: &str| match registry.kind_of(target) {
        Some(clio_flow::CallKind::Flow) => TargetKind::Flow,
        Some(_) => TargetKind::Other,
        None => TargetKind::Unknown,
    };
    workflow.check_targets(kind_of).map_err(|e| {
        CliError::user(anyhow!("{}: {e}", file.display())).hint(
            "pass the plugin that provides it with --plugin DIR (or install and trust it); no run was created",
        )
    })?;
    for editor in editors {
        if registry.kind_of(editor).is_none() {
            return Err(CliError::user(anyhow!(
                "--editor {editor}: no agent, subagent or flow of that name"
            ))
            .hint("an editor is an agent or flow of a plugin passed with --plugin DIR; no run was created"));
        }
    }
    Ok(())
}

/// Runs an agent definition or a flow by id.
pub(super) fn run(
    home: &Home,
    args: &RunCommandArgs,
    quiet: bool,
    paint: Paint,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Result<(), CliError> {
    let path = std::path::Path::new(&args.target);
    // An agent run is pinned to the spec its file freezes to now (`crate::pin`).
    // An agent file, or an agent class of a Python file (`agents/reviewer.py:Reviewer`).
    let python_agent = crate::launch::python_class(&args.target).is_some();
    let spec = if path.is_file() || python_agent {
        Some(agent_spec(path)?)
    } else if args.target.ends_with(".toml") || args.target.ends_with(".json") {
        // A folder, pipe or device by that name is named as such, a missing file as missing.
        let refused = if path.exists() { crate::input::read_file(path).err() } else { None };
        return Err(refused.unwrap_or_else(|| {
            CliError::user(anyhow!("cannot read {}: no such file", args.target))
        }));
    } else {
        None
    };
    let mut selection = match &spec {
        Some(spec) => agent_flow(spec),
        None => FlowSelection::new(args.target.clone()),
    };
    for option in &args.options {
        let (key, value) = option.split_once('=').ok_or_else(|| {
            CliError::usage(anyhow!("--option {option}: write it as KEY=VALUE"))
                .hint("`clio run TARGET --help` shows an example")
        })?;
        // A JSON value that names a key twice is refused, not read with the last value.
        if let Some(dup) = clio_spec::duplicate_json_key(value) {
            return Err(CliError::usage(anyhow!("--option {option}: {dup}"))
                .hint("`clio run TARGET --help` shows an example"));
        }
        let value = serde_json::from_str(value).unwrap_or_else(|_| Value::String(value.into()));
        selection.options.insert(key.to_owned(), value);
    }
    let mut launch = launch_of(&args.drive, spec.as_ref().map(|_| path.to_path_buf()))?;
    match &spec {
        Some(spec) => launch.pin(spec),
        // A flow of an installed, trusted plugin runs without `--plugin`.
        None => {
            if let Some(folder) = installed_flow_provider(home, &args.target, &launch.plugins)? {
                launch.plugins.push(folder);
            }
        }
    }
    let input = given_input(args.input.as_deref(), args.input_json.as_deref())?;
    let show = Show::of(&args.drive, quiet, paint);
    let chosen = selection.clone();
    let check = |runtime: &Runtime| check_flow_options(runtime, &chosen, &args.options);
    start_checked(home, launch, selection, input, &args.drive, &check, show, out, err)
}

/// Returns the launch's input from `--input` (text, a JSON object or list, `@FILE.json`)
/// or `--input-json` (JSON; clap makes sure exactly one is given).
fn given_input(input: Option<&str>, input_json: Option<&str>) -> Result<Value, CliError> {
    use crate::launch_input::{InputFlag, launch_input};
    match (input, input_json) {
        (_, Some(json)) => launch_input(InputFlag::InputJson, json),
        (Some(text), None) => launch_input(InputFlag::Input, text),
        (None, None) => {
            Err(CliError::usage(anyhow!("give the input with --input or --input-json")))
        }
    }
}

/// Checks, before a run exists, the options of the flow `selection` names (`--option`s
/// given, and an agent's own) against the options it declares; the error names each bad
/// one, the flag it came from, the type it needs and every option the flow takes.
fn check_flow_options(
    runtime: &Runtime,
    selection: &FlowSelection,
    given: &[String],
) -> Result<(), CliError> {
    // An unknown flow is reported when the run is created, with its own hint.
    let Some(flow) = runtime.registry().get_flow(&selection.id) else { return Ok(()) };
    let Err(FlowError::OptionsInvalid { flow: id, problems }) =
        flow.checked_options(&selection.options)
    else {
        return Ok(());
    };
    let flag =
        |name: &str| given.iter().rev().find(|o| o.split_once('=').is_some_and(|(k, _)| k == name));
    let lines: Vec<String> = problems
        .iter()
        .map(|p| {
            let what = if p.needs == "no such option" {
                format!("flow {id} has no option {}", p.option)
            } else {
                format!("{} needs {} (got {})", p.option, p.needs, p.got)
            };
            match flag(&p.option) {
                Some(option) => format!("--option {option}: {what}"),
                None => format!("the agent's flow option {}: {what}", p.option),
            }
        })
        .collect();
    let declared: Vec<String> =
        flow.options().iter().map(|o| format!("{} ({})", o.name, o.ty.describe())).collect();
    let limits = clio_flow::LIMIT_NAMES.join(", ");
    let takes = if declared.is_empty() {
        format!(
            "flow {id} takes no options of its own, only the limits every flow takes: {limits} (each an integer >= 0)"
        )
    } else {
        format!(
            "the options of flow {id}: {}; and the limits every flow takes: {limits} (each an integer >= 0)",
            declared.join(", ")
        )
    };
    Err(CliError::user(anyhow!("{}", lines.join("; "))).hint(takes).hint("no run was created"))
}

/// What a driven run shows besides its outcome: progress and the closing summary (not
/// with `--quiet` or `--json`), in colour or not.
#[derive(Debug, Clone, Copy)]
pub(super) struct Show {
    progress: bool,
    json: bool,
    paint: Paint,
}

impl Show {
    fn of(drive: &DriveArgs, quiet: bool, paint: Paint) -> Show {
        Show { progress: !(drive.json || quiet), json: drive.json, paint }
    }
}

/// Creates a run and drives it, after `check` has passed on the runtime the run would
/// use: mistakes are caught before a run exists.
#[allow(clippy::too_many_arguments, reason = "the two ways of starting a run share it")]
fn start_checked(
    home: &Home,
    launch: Launch,
    selection: FlowSelection,
    input: Value,
    drive: &DriveArgs,
    check: &dyn Fn(&Runtime) -> Result<(), CliError>,
    show: Show,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Result<(), CliError> {
    let rt = foreground_runtime()?;
    probe_sandbox_ahead(&rt, home);
    // The journal opens (on a fresh home, creates: mostly waiting for the disk) while this
    // thread reads the plugins, digests them and builds the registry; a journal that does
    // not open is still the error reported first. Without a thread to spare, the journal
    // opens here once the plugins are read.
    let (journal, prepared) = std::thread::scope(|scope| {
        let opening = std::thread::Builder::new().spawn_scoped(scope, || open_journal(home)).ok();
        // With --trust the folders passed count as trusted; the trust is recorded below,
        // once the command's checks have passed.
        let prepared = prepare_runtime_vouching(home, &launch, drive.trust);
        let journal = match opening {
            Some(opening) => {
                opening.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic))
            }
            None => open_journal(home),
        };
        (journal, prepared)
    });
    let journal = journal?;
    let (prepared, untrusted) = prepared?;
    let runtime = prepared.with_journal(journal.clone());
    if launch.no_input && !untrusted.is_empty() {
        return Err(refuse_untrusted(&untrusted));
    }
    check(&runtime)?;
    if drive.trust {
        // The person vouches for the folders named on this command line, as `clio plugin
        // trust DIR` would: recorded now that nothing refused the command, before anything
        // of them runs.
        let store = clio_plugins::Store::new(home.root());
        // Noted as progress is: not with --quiet or --json.
        let mut sink = std::io::sink();
        let note: &mut dyn Write = if show.progress { &mut *err } else { &mut sink };
        for folder in &drive.plugins {
            super::plugin::trust_folder(&store, folder, note)?;
        }
    }
    // The launch goes into the run's record in the run's own transaction: there is no
    // moment at which the run exists without it.
    let start = runtime.start(selection, input, Some(launch.to_json()?));
    let handle = rt.block_on(start)?;
    let run = handle.id();
    if drive.detach {
        // serve drives it, resuming it from its record (the handle is not needed there).
        return submitted(home, run, runtime, show, out, err);
    }
    if show.progress {
        writeln!(err, "run {} started; `clio runs show {}` shows it", run.0, run.0)?;
    }
    drive_run(&rt, home, &runtime, &journal, Drive::Start(Box::new(handle)), show, out, err)
}

/// Which run [`drive_run`] drives: one just started, driven from the record it was created
/// with, or one recorded before, resumed.
enum Drive {
    Start(Box<clio_flow::RunHandle>),
    Resume(RunId),
}

/// A drive spawned on the runtime, aborted if it is dropped before it ended (an error
/// between its start and its end returns from the command without it).
struct DriveTask(tokio::task::JoinHandle<Result<clio_flow::RunReport, clio_flow::FlowError>>);

impl Drop for DriveTask {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl Drive {
    fn run(&self) -> RunId {
        match self {
            Drive::Start(handle) => handle.id(),
            Drive::Resume(run) => *run,
        }
    }
}

/// The error of a new run that may not ask (`--no-input`) while some of its plugins are
/// not trusted: no one could trust them during the run, so it is refused before it exists,
/// naming each plugin and the command that trusts it.
fn refuse_untrusted(untrusted: &[Untrusted]) -> CliError {
    let names: Vec<String> = untrusted.iter().map(|p| format!("{} {}", p.id, p.version)).collect();
    let (noun, verb) = if names.len() == 1 { ("plugin", "is") } else { ("plugins", "are") };
    let mut error = CliError::user(anyhow!(
        "--no-input: {noun} {} {verb} not trusted, and a run that may not ask cannot trust {}; no run was created",
        names.join(", "),
        if names.len() == 1 { "it" } else { "them" }
    ));
    for plugin in untrusted {
        error =
            error.hint(format!("trust {} with `{}`, then run again", plugin.id, plugin.trust_with));
    }
    if untrusted.iter().any(|p| p.passed) {
        error = error.hint("or add --trust to vouch for the --plugin folders of this command");
    }
    error.hint("or run without --no-input to be asked before any of its code runs")
}

/// Hands a run created for `--detach` to the `clio serve` that serves this command, and
/// prints its id (alone on stdout, or `{"run", "status": "submitted"}` with `--json`).
fn submitted(
    home: &Home,
    run: RunId,
    runtime: Runtime,
    show: Show,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Result<(), CliError> {
    if home.held().is_none() && home.shared_journal().is_some() {
        return submitted_to_workers(home, run, &runtime, show, out, err);
    }
    let Some(drivers) = home.held().and_then(|held| held.drivers.as_ref()) else {
        return Err(CliError::internal(anyhow!(
            "run {} was created, but no `clio serve` drives it",
            run.0
        )));
    };
    hand_over(drivers, run, runtime);
    let pid = std::process::id();
    if show.json {
        return write_json(out, &json!({"run": run.0, "status": "submitted", "process": pid}));
    }
    writeln!(out, "{}", run.0)?;
    if show.progress {
        writeln!(
            err,
            "run {} started in clio serve (process {pid}); `clio runs show {}` shows it",
            run.0, run.0
        )?;
    }
    Ok(())
}

/// Leaves a run created for `--detach` on a shared journal to its workers: this process
/// gives up the run's first lease, and the first `clio worker` to look claims it.
fn submitted_to_workers(
    home: &Home,
    run: RunId,
    runtime: &Runtime,
    show: Show,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Result<(), CliError> {
    runtime.journal().release_run(run).map_err(journal_error)?;
    if show.json {
        return write_json(
            out,
            &json!({"run": run.0, "status": "submitted", "journal": home.journal_path()}),
        );
    }
    writeln!(out, "{}", run.0)?;
    if show.progress {
        writeln!(
            err,
            "run {} submitted to the workers of {}; `clio runs show {}` shows it",
            run.0,
            home.journal_path().display(),
            run.0
        )?;
    }
    Ok(())
}

/// Drives run `run` to its end (or until it waits on people, or Ctrl-C), serving the
/// `runs` commands of other processes meanwhile (`crate::serve`).
#[allow(clippy::too_many_arguments, reason = "starting and resuming a run share it")]
fn drive_run(
    rt: &tokio::runtime::Runtime,
    home: &Home,
    runtime: &Runtime,
    journal: &Journal,
    which: Drive,
    show: Show,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Result<(), CliError> {
    let run = which.run();
    let json = show.json;
    // While this process holds the journal, the others' `runs` commands are run here.
    let held =
        Held { journal: journal.clone(), runtime: runtime.clone(), run: Some(run), drivers: None };
    // A shared journal is opened by every process itself: there is nothing to serve.
    let served = if home.shared_journal().is_some() {
        Ok(None)
    } else {
        Endpoint::start(rt, home, Arc::new(held)).map(Some)
    };
    let _endpoint = match served {
        Ok(endpoint) => endpoint,
        Err(error) => {
            writeln!(
                err,
                "warning: cannot listen on {}: {error}; other clio commands cannot reach this journal until the run ends",
                home.socket_path().display()
            )?;
            None
        }
    };
    // Log lines would tear a terminal's bars: with logging on, progress is plain lines.
    let tty = std::io::stderr().is_terminal() && !crate::log::active();
    // No progress at all with --quiet or --json: not even a tree's empty header.
    let mut progress = show.progress.then(|| Progress::new(journal.clone(), run, tty));
    let report = rt.block_on(async {
        // Ctrl-C is listened for before the run starts: a signal that comes while its
        // first work runs is not lost (or taken by the default handler, which kills).
        let mut interrupt =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())
                .context("cannot listen for Ctrl-C")
                .map_err(CliError::internal)?;
        // The drive runs as a task of the runtime, not on this thread: its calls then wake
        // the tasks they talk to (a tool server's transport, say) on the same worker
        // thread, where waking this thread each time cost a hand-off between threads.
        let mut drive = DriveTask(match which {
            Drive::Start(handle) => tokio::spawn(handle.drive()),
            Drive::Resume(run) => {
                let runtime = runtime.clone();
                tokio::spawn(async move { runtime.resume(run).await })
            }
        });
        // Progress is pushed: the journal says when it committed something (`changes`),
        // and progress reads it then, at most once per `GAP` (a burst of commits is one
        // read, shown a moment after it began). A change is shown `GAP` after it came at
        // the earliest: a task that ends within that is shown once, as it ended. The slow
        // tick only moves the clocks a terminal shows while nothing is written.
        const GAP: Duration = Duration::from_millis(40);
        let mut changes = journal.changes();
        // On a shared journal, `runs stop` from another process reaches this drive as a
        // `stop_requested` event in the run (`super::stop`), read when a commit is heard.
        let mut stop_requests = super::stop::StopRequests::default();
        let mut stop_notices = journal.is_shared().then(|| journal.changes());
        if stop_notices.is_some() {
            let _ = stop_requests.watch(journal, run);
        }
        // The requests are read `GAP` after a commit is heard: a burst of the run's own
        // commits is one read.
        let mut stop_due: Option<tokio::time::Instant> = None;
        let clock = Duration::from_millis(if tty { 250 } else { 2_000 });
        let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + clock, clock);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        // When a change seen is to be shown.
        let mut due: Option<tokio::time::Instant> = None;
        loop {
            let show_at = due.unwrap_or_else(|| tokio::time::Instant::now() + clock);
            tokio::select! {
                report = &mut drive.0 => {
                    let report = report.unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()));
                    if let Some(p) = progress.as_mut() { p.tick(err); }
                    return Ok::<_, CliError>(Some(report));
                }
                () = changes.changed(), if due.is_none() && progress.is_some() => {
                    due = Some(tokio::time::Instant::now() + GAP);
                }
                () = tokio::time::sleep_until(show_at), if due.is_some() => {
                    due = None;
                    if let Some(p) = progress.as_mut() { p.tick(err) }
                    ticks.reset();
                }
                _ = ticks.tick() => if let Some(p) = progress.as_mut() { p.tick(err) },
                () = async {
                    match stop_notices.as_mut() {
                        Some(notices) => notices.changed().await,
                        None => std::future::pending().await,
                    }
                }, if stop_due.is_none() => {
                    stop_due = Some(tokio::time::Instant::now() + GAP);
                }
                () = async {
                    match stop_due {
                        Some(due) => tokio::time::sleep_until(due).await,
                        None => std::future::pending().await,
                    }
                } => {
                    stop_due = None;
                    let _ = stop_requests.serve(journal, |r| (r == run).then(|| runtime.clone()));
                }
                _ = interrupt.recv() => {
                    // The drive stops where it is, and is gone before anything else runs.
                    drive.0.abort();
                    let _ = (&mut drive.0).await;
                    return Ok(None);
                }
            }
        }
    })?;
    // The tree must be done drawing before the outcome, the warnings or the resume hint
    // are printed under it.
    let warned = progress.as_ref().is_some_and(Progress::warned);
    let live = progress.as_ref().map(Progress::elapsed);
    if let Some(progress) = progress {
        progress.finish(report.is_none());
    }
    let Some(report) = report else {
        // The work in flight stops with the process; recording it as interrupted now
        // (rather than at the next start) tells `runs list` the truth at once. On a shared
        // journal only this run is this process's to mark (which gives up its lease).
        if journal.is_shared() {
            let update = clio_journal::RunUpdate {
                status: Some(clio_journal::RunStatus::Interrupted),
                ..clio_journal::RunUpdate::default()
            };
            let _ = journal.update_run(run, update);
        } else {
            let _ = journal.reconcile::<&str>(&[]);
        }
        return Err(CliError::interrupted(anyhow!("interrupted: run {} stopped", run.0))
            .hint(format!("continue it with `clio runs resume {}`", run.0)));
    };
    // The run's writes are done: the close's checkpoint (most of a close's time, the flush
    // of what the run wrote into the journal's file) goes on on the writer's thread while
    // the reports below read and print.
    let checkpoint = (!journal.is_shared()).then(|| journal.checkpoint());
    let report = report.map_err(|error| match error {
        FlowError::Nondeterminism { .. } => replay::stopped(journal, run, &error, json, out),
        error => CliError::from(error),
    })?;
    // The run's tasks, read once for every report below (a large run has thousands),
    // without their results, which none of them reads: a workflow's own task holds every
    // step's result.
    let tasks = journal.tasks_without_results(run).map_err(journal_error)?;
    let cut = cut_short_of(&tasks);
    warn_cut_short(run, &cut, err)?;
    if matches!(report.outcome, RunOutcome::Succeeded(_)) {
        warn_failed_tasks(&tasks, run, &cut, err)?;
    }
    if !warned {
        warn_entries(journal, run, err)?;
    }
    if let Some(live) = live {
        summarize(&tasks, &report, live, show.paint, err)?;
    }
    let finished = finish(journal, &report, &cut, &tasks, json, out);
    if let Some(checkpoint) = checkpoint {
        await_checkpoint(journal, checkpoint, err)?;
    }
    finished
}

/// Waits for the checkpoint started when the run's writes ended. One that failed is a
/// warning, not the command's failure: the run's writes are durable in the journal's
/// write-ahead log, which the next open applies.
fn await_checkpoint(
    journal: &Journal,
    checkpoint: clio_journal::Pending<()>,
    err: &mut dyn Write,
) -> Result<(), CliError> {
    if let Err(error) = checkpoint.wait() {
        writeln!(
            err,
            "warning: {}: copying the run's writes from the write-ahead log into the file failed ({error}); they are durable in the log, and the next command that opens the journal applies them",
            journal.path().display()
        )?;
    }
    Ok(())
}

/// Prints the closing line of a run's progress: how it ended, the time this process spent
/// driving it (not the time it lay stopped, for a resumed run), its tasks by status and
/// the tokens they spent.
fn summarize(
    tasks: &[TaskRecord],
    report: &RunReport,
    live: Duration,
    paint: Paint,
    err: &mut dyn Write,
) -> Result<(), CliError> {
    let (status, verdict) = match &report.outcome {
        RunOutcome::Succeeded(_) => ("succeeded", Verdict::Good),
        RunOutcome::AwaitingInput(_) => ("is waiting for an answer", Verdict::Pending),
        // A run stopped by a replay mismatch is reported on its own.
        RunOutcome::Failed(FlowError::Nondeterminism { .. }) => return Ok(()),
        // A drive that stopped to be resumed (a provider out of reach, a flow's process
        // that died) leaves its run interrupted, not failed.
        RunOutcome::Failed(FlowError::CallInterrupted { .. }) => {
            ("was interrupted", Verdict::Pending)
        }
        RunOutcome::Failed(_) => ("failed", Verdict::Bad),
        RunOutcome::Cancelled => ("was cancelled", Verdict::Bad),
    };
    writeln!(
        err,
        "run {} {} after {:.1}s: {}",
        report.run.0,
        paint.word(status, verdict),
        live.as_secs_f64(),
        task_summary(tasks)
    )?;
    Ok(())
}

/// Returns a run's tasks counted by status, then the tokens they spent:
/// `9 tasks (8 succeeded, 1 failed), 5370 tokens`.
fn task_summary(tasks: &[TaskRecord]) -> String {
    let mut counts: Vec<(&str, usize)> = Vec::new();
    for task in tasks {
        let name = crate::tasks::status_name(task.status);
        match counts.iter_mut().find(|(n, _)| *n == name) {
            Some((_, count)) => *count += 1,
            None => counts.push((name, 1)),
        }
    }
    let by_status: Vec<String> = counts.iter().map(|(n, c)| format!("{c} {n}")).collect();
    let tokens: u64 = tasks.iter().map(|t| t.input_tokens + t.output_tokens).sum();
    let n = tasks.len();
    let plural = if n == 1 { "" } else { "s" };
    if by_status.is_empty() {
        format!("{n} task{plural}, {tokens} tokens")
    } else {
        format!("{n} task{plural} ({}), {tokens} tokens", by_status.join(", "))
    }
}

/// Warns, even with `--quiet`, when a run succeeded although some of its tasks failed (a
/// tool the agent got an error from, a step an editor repaired): a success should not hide
/// a failure. Calls cut short by a crash are reported on their own, not again here.
fn warn_failed_tasks(
    tasks: &[TaskRecord],
    run: RunId,
    cut: &[CutShort],
    err: &mut dyn Write,
) -> Result<(), CliError> {
    let failed: Vec<&TaskRecord> = tasks
        .iter()
        .filter(|t| t.status == TaskStatus::Failed && !cut.iter().any(|c| c.task.id == t.id))
        .collect();
    if failed.is_empty() {
        return Ok(());
    }
    let numbers = TaskNumbers::of(tasks);
    writeln!(err, "warning: run {} succeeded, but {} of its tasks failed:", run.0, failed.len())?;
    for task in failed {
        let cause = task.error.as_deref().map(crate::progress::error_message).unwrap_or_default();
        let step = step_name(task).map(|s| format!(" ({s})")).unwrap_or_default();
        writeln!(
            err,
            "  #{} {} {}{step}: {cause}",
            numbers.number(task.id.0),
            kind_name(task.kind),
            task.target
        )?;
    }
    Ok(())
}

/// Warns, whatever the outcome and even with `--quiet`, when the run has used 80 % of its
/// journal entries and progress did not say so already: the run (or its next resume) may
/// fail at the cap, and a person told in time can act before it does.
fn warn_entries(journal: &Journal, run: RunId, err: &mut dyn Write) -> Result<(), CliError> {
    if let Some(message) = entries_warning(journal, run) {
        writeln!(err, "warning: {message}")?;
    }
    Ok(())
}

/// A call to a side-effecting tool that was running when a process stopped: the runtime
/// does not run it again (SPEC §7, `CallInterrupted`), so its effect may or may not have
/// happened, and the caller (a react loop's model, a workflow step) got an error instead.
struct CutShort {
    task: TaskRecord,
    parent: Option<TaskRecord>,
    // The numbers of the call and its caller within the run, as people see them.
    number: u64,
    parent_number: Option<u64>,
}

/// Returns the run's calls that were cut short, in task order.
fn cut_short(journal: &Journal, run: RunId) -> Result<Vec<CutShort>, CliError> {
    let tasks = journal.tasks(run).map_err(journal_error)?;
    Ok(cut_short_of(&tasks))
}

/// Returns the calls of a run's `tasks` that were cut short, in task order.
fn cut_short_of(tasks: &[TaskRecord]) -> Vec<CutShort> {
    // A recorded error is read back as the `FlowError` it was, and matched by variant.
    let interrupted = |t: &TaskRecord| {
        t.kind == TaskKind::Tool
            && t.status == TaskStatus::Failed
            && t.error
                .as_deref()
                .map(FlowError::from_record)
                .is_some_and(|e| matches!(e, FlowError::CallInterrupted { .. }))
    };
    let numbers = TaskNumbers::of(tasks);
    tasks
        .iter()
        .filter(|t| interrupted(t))
        .map(|t| CutShort {
            task: t.clone(),
            parent: t.parent.and_then(|p| tasks.iter().find(|c| c.id == p).cloned()),
            number: numbers.number(t.id.0),
            parent_number: t.parent.map(|p| numbers.number(p.0)),
        })
        .collect()
}

/// Warns, whatever the outcome and even with `--quiet`, about calls that were cut short:
/// a run that succeeds after one must not look as if nothing happened.
fn warn_cut_short(run: RunId, cut: &[CutShort], err: &mut dyn Write) -> Result<(), CliError> {
    if cut.is_empty() {
        return Ok(());
    }
    writeln!(
        err,
        "warning: run {}: {} call(s) of side-effecting tools were cut short when a process stopped and were not run again; each effect may or may not have happened:",
        run.0,
        cut.len()
    )?;
    for c in cut {
        let by = match (&c.parent, c.parent_number) {
            (Some(p), Some(n)) => format!(", called by #{n} {} {}", kind_name(p.kind), p.target),
            _ => String::new(),
        };
        writeln!(err, "  #{} tool {}{by}", c.number, c.task.target)?;
    }
    writeln!(err, "hint: check those effects by hand; `clio runs show {}` shows the calls", run.0)?;
    Ok(())
}

/// Adds the calls that were cut short to a JSON outcome, when there are any.
fn with_cut_short(mut value: Value, cut: &[CutShort]) -> Value {
    if !cut.is_empty() {
        value["interrupted_calls"] = Value::Array(cut_short_json(cut));
    }
    value
}

/// Returns the calls a stop cut short as `--json` lists them (`interrupted_calls`).
fn cut_short_json(cut: &[CutShort]) -> Vec<Value> {
    cut.iter()
        .map(|c| json!({"task": c.task.id.0, "number": c.number, "tool": c.task.target, "parent": c.task.parent.map(|p| p.0)}))
        .collect()
}

/// A succeeded run as `--json` prints it, the same keys in the same order as the other
/// outcomes' objects: it borrows the run's output where building a JSON value of it first
/// would copy every step's output of a workflow.
#[derive(serde::Serialize)]
struct SucceededJson<'a> {
    run: u64,
    status: &'static str,
    answer: &'a str,
    outputs: &'a serde_json::Map<String, Value>,
    model: Value,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    interrupted_calls: Vec<Value>,
}

/// Prints a run's outcome; a failed or cancelled run is an error (exit 1), and so is a run
/// stopped because its code no longer matches its history.
fn finish(
    journal: &Journal,
    report: &RunReport,
    cut: &[CutShort],
    tasks: &[TaskRecord],
    json: bool,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    let run = report.run.0;
    let write_json =
        |out: &mut dyn Write, value: Value| write_json(out, &with_cut_short(value, cut));
    match &report.outcome {
        RunOutcome::Succeeded(output) => {
            if json {
                let succeeded = SucceededJson {
                    run,
                    status: "succeeded",
                    answer: &output.answer,
                    outputs: &output.outputs,
                    model: chosen_model(tasks, &output.model),
                    interrupted_calls: cut_short_json(cut),
                };
                let text = serde_json::to_string_pretty(&succeeded).map_err(CliError::internal)?;
                writeln!(out, "{text}")?;
                return Ok(());
            }
            writeln!(out, "{}", output.answer.trim_end())?;
            Ok(())
        }
        RunOutcome::AwaitingInput(questions) => {
            // Questions are numbered within the run, and each command shows the answer's
            // form; answering continues the run (`runs::answer`). JSON keeps the entry's
            // `id` and gives the `number` beside it.
            let open = journal.entries(report.run).map(|e| super::runs::open_questions(&e));
            let open = open.unwrap_or_default();
            if json {
                let list: Vec<Value> = questions
                    .iter()
                    .map(|q| {
                        let number = open.iter().find(|o| o.seq == q.id).map(|o| o.number);
                        json!({"id": q.id, "number": number, "question": q.text, "schema": q.schema, "options": q.options, "reason": q.reason})
                    })
                    .collect();
                return write_json(
                    out,
                    json!({"run": run, "status": "awaiting_input", "questions": list}),
                );
            }
            writeln!(out, "run {run} is waiting for an answer:")?;
            for q in questions {
                let options = if q.options.is_empty() {
                    String::new()
                } else {
                    format!(" [{}]", q.options.join("/"))
                };
                let shown = open.iter().find(|o| o.seq == q.id);
                let number = shown.map_or(q.id, |o| o.number);
                writeln!(out, "  question {number}: {}{options}", q.text)?;
                if !q.reason.is_empty() {
                    writeln!(out, "    why: {}", q.reason)?;
                }
                let command = match shown {
                    Some(o) => super::runs::answer_command(run, o, questions.len() == 1),
                    None => format!("clio runs answer {run} {} \"…\"", q.id),
                };
                writeln!(out, "  answer with: {command}")?;
            }
            writeln!(out, "the answer continues the run (--record-only only records it)")?;
            Ok(())
        }
        RunOutcome::Failed(error @ FlowError::Nondeterminism { .. }) => {
            Err(replay::stopped(journal, report.run, error, json, out))
        }
        // The run stopped itself to be resumed (its model provider stayed unreachable):
        // it is interrupted, not failed, and the person is told how to go on.
        RunOutcome::Failed(error)
            if journal.run(report.run).ok().flatten().map(|r| r.status)
                == Some(clio_journal::RunStatus::Interrupted) =>
        {
            if json {
                write_json(
                    out,
                    json!({"run": run, "status": "interrupted", "error": error.to_json()}),
                )?;
            }
            let stopped =
                CliError::from(error.clone()).context(format!("run {run} is interrupted"));
            // What stopped it says what to wait for: a model provider that stayed
            // unreachable, or a flow's Python process that died.
            let hint = if error.to_string().contains("model provider") {
                format!(
                    "`clio runs resume {run}` continues it once the model provider answers again"
                )
            } else {
                format!(
                    "`clio runs resume {run}` continues it: finished work is replayed, not done again"
                )
            };
            Err(stopped.hint(hint))
        }
        RunOutcome::Failed(error) => {
            if json {
                write_json(out, json!({"run": run, "status": "failed", "error": error.to_json()}))?;
            }
            // The run's error is the cause, classified once (`From<FlowError>`): a run
            // that failed on journal trouble exits as that trouble does, any other as the
            // failed run it is (1).
            let failed = CliError::from(error.clone()).context(format!("run {run} failed"));
            Err(failed.hint(format!("`clio runs show {run}` shows its steps and events")))
        }
        RunOutcome::Cancelled => {
            if json {
                write_json(out, json!({"run": run, "status": "cancelled"}))?;
            }
            Err(CliError::user(anyhow!("run {run} was cancelled")))
        }
    }
}

/// Returns the model a run answered with, for JSON: the one its flow names, else the one
/// model every model-using task of the run ran on, else null (none, or several).
fn chosen_model(tasks: &[TaskRecord], named: &str) -> Value {
    if !named.is_empty() {
        return Value::String(named.to_owned());
    }
    let mut models: Vec<&str> = tasks.iter().filter_map(|t| t.model.as_deref()).collect();
    models.sort_unstable();
    models.dedup();
    match models.as_slice() {
        [one] => Value::String((*one).to_owned()),
        _ => Value::Null,
    }
}

/// The runtime a run was launched with, rebuilt by [`relaunch`].
pub(super) struct Relaunched {
    pub(super) runtime: Runtime,
    pub(super) journal: Journal,
    /// How the run's agent file changed since the run was pinned, when the command went
    /// on anyway.
    pub(super) agent_change: Option<AgentChange>,
}

/// Rebuilds the runtime a run was launched with, after checking its agent file as
/// `on_change` says (`crate::pin`).
pub(super) fn relaunch(
    home: &Home,
    run: u64,
    on_change: OnAgentChange,
) -> Result<Relaunched, CliError> {
    let run_id = RunId(run);
    let journal = open_journal(home)?;
    let record = existing_run(home, &journal, run_id)?;
    let mut launch = Launch::load(home, &record)?;
    let agent_change = pin::enforce(&journal, run_id, &mut launch, on_change)?;
    let runtime = runtime(home, &launch, journal.clone())?;
    Ok(Relaunched { runtime, journal, agent_change })
}

/// Returns the record of run `run`, or the error that names the journal it is not in.
fn existing_run(home: &Home, journal: &Journal, run: RunId) -> Result<RunRecord, CliError> {
    journal.run(run).map_err(journal_error)?.ok_or_else(|| {
        CliError::user(anyhow!("run {} not found in {}", run.0, home.journal_path().display()))
            .hint("`clio runs list` shows the runs there are")
    })
}

/// Records an answer to a pending question.
pub(super) fn answer(
    home: &Home,
    args: &RunAnswerArgs,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Result<(), CliError> {
    let rt = foreground_runtime()?;
    let on_change = OnAgentChange::from_flag(args.accept_changed_agent, true);
    let Relaunched { runtime, journal, agent_change } = relaunch(home, args.run, on_change)?;
    // Served, the answer goes through the runtime driving the run, if one does here: the
    // live run goes on at once.
    let runtime = home.held().and_then(|held| held.runtime_of(RunId(args.run))).unwrap_or(runtime);
    refuse_finished(&journal, RunId(args.run), "answer a question of")?;
    if let Some(change) = &agent_change {
        pin::note(RunId(args.run), change, true, err)?;
    }
    let value =
        rt.block_on(runtime.answer(RunId(args.run), args.question, &args.text)).map_err(|e| {
            let hint = format!("`clio runs show {}` lists the run's questions", args.run);
            CliError::from(e).hint(hint)
        })?;
    // On a shared journal, a run whose questions are all answered goes back to the workers.
    if home.held().is_none() && journal.is_shared() {
        return answered_for_workers(home, &runtime, &journal, args, &value, out);
    }
    // Served by `clio serve`, the run goes on there: its live drive hears of the answer,
    // or a new drive starts on the runtime the run was launched with.
    let continued = match home.held().and_then(|held| held.drivers.as_ref()) {
        Some(drivers) => {
            if !drivers.answered(RunId(args.run)) {
                hand_over(drivers, RunId(args.run), runtime.clone());
            }
            true
        }
        None => false,
    };
    if args.json {
        let mut value = json!({"run": args.run, "question": args.question, "answer": value});
        if continued {
            value["continues"] = json!(true);
        }
        return write_json(out, &value);
    }
    writeln!(out, "answered question {} of run {} with {value}", args.question, args.run)?;
    match home.held() {
        // Served by the process driving that run: it goes on at once.
        Some(held) if held.run == Some(RunId(args.run)) || continued => {
            writeln!(out, "run {} goes on in process {}", args.run, std::process::id())?
        }
        // Served by a process that drives another run.
        Some(_) => writeln!(
            out,
            "continue the run with: clio runs resume {} (once process {} has ended)",
            args.run,
            std::process::id()
        )?,
        None => writeln!(out, "continue the run with: clio runs resume {}", args.run)?,
    }
    Ok(())
}

/// Finishes an answer given on a shared journal: a run left waiting whose questions are now
/// all answered is marked interrupted, which makes it runnable, and the next worker to look
/// claims it and goes on.
fn answered_for_workers(
    home: &Home,
    runtime: &Runtime,
    journal: &Journal,
    args: &RunAnswerArgs,
    value: &Value,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    let run = RunId(args.run);
    let open = runtime.questions(run)?;
    let status = journal.run(run).map_err(journal_error)?.map(|r| r.status);
    let waiting = status == Some(clio_journal::RunStatus::AwaitingInput);
    // A run still running (its other work busy) stays with the worker driving it, which
    // hands it back with its answers once it waits (`worker::answered_meanwhile`).
    let running = status == Some(clio_journal::RunStatus::Running);
    let continues = open.is_empty() && (waiting || running);
    if open.is_empty() && waiting {
        let update = clio_journal::RunUpdate {
            status: Some(clio_journal::RunStatus::Interrupted),
            ..clio_journal::RunUpdate::default()
        };
        journal.update_run(run, update).map_err(journal_error)?;
    }
    if args.json {
        let mut json = json!({"run": args.run, "question": args.question, "answer": value});
        if continues {
            json["continues"] = json!(true);
        }
        return write_json(out, &json);
    }
    writeln!(out, "answered question {} of run {} with {value}", args.question, args.run)?;
    if continues && running {
        writeln!(out, "run {} goes on in the worker driving it", args.run)?;
    } else if continues {
        writeln!(
            out,
            "run {} goes on in the next `clio worker` of {}",
            args.run,
            home.journal_path().display()
        )?;
    } else if !open.is_empty() {
        writeln!(out, "run {} still waits on {} question(s)", args.run, open.len())?;
    }
    Ok(())
}

/// Returns a question as JSON for programs, as a run waiting on it prints it.
pub(crate) fn question_json(q: &clio_flow::Question) -> Value {
    json!({"id": q.id, "question": q.text, "schema": q.schema, "options": q.options, "reason": q.reason})
}

/// Returns the paint of output nobody reads on a terminal.
pub(super) fn quiet_paint() -> Paint {
    Paint::new(crate::args::ColorChoice::Never, false)
}

/// Has `clio serve` drive run `run` on `runtime` (the runtime it was launched with);
/// its end is reported on serve's stderr. Returns `false` when it is driven already.
fn hand_over(drivers: &Arc<Drivers>, run: RunId, runtime: Runtime) -> bool {
    let log = Arc::clone(drivers);
    drivers.drive(run, runtime, move |runtime, report| {
        let mut text = Vec::new();
        if let Err(error) = report_served(runtime.journal(), run, report, &mut text) {
            let _ = error.render(&mut text);
        }
        log.log(String::from_utf8_lossy(&text).into_owned());
    })
}

/// Has `clio serve` drive run `run`, rebuilding the runtime it was launched with (after
/// checking its agent file as `on_change` says). Returns `false` when it is driven
/// already.
pub(crate) fn serve_drive(
    home: &Home,
    drivers: &Arc<Drivers>,
    run: RunId,
    on_change: OnAgentChange,
    err: &mut dyn Write,
) -> Result<bool, CliError> {
    if drivers.is_live(run) {
        return Ok(false);
    }
    let Relaunched { runtime, journal: _, agent_change } = relaunch(home, run.0, on_change)?;
    if let Some(change) = &agent_change {
        pin::note(run, change, true, err)?;
    }
    Ok(hand_over(drivers, run, runtime))
}

/// Reports on serve's stderr how a drive of run `run` ended: one line, then the calls
/// cut short by a crash, as `runs resume` warns of them.
fn report_served(
    journal: &Journal,
    run: RunId,
    report: Result<RunReport, FlowError>,
    err: &mut dyn Write,
) -> Result<(), CliError> {
    let how = match &report {
        Ok(report) => match &report.outcome {
            RunOutcome::Succeeded(_) => "succeeded".to_owned(),
            RunOutcome::AwaitingInput(questions) => {
                format!("is waiting for an answer ({} question(s))", questions.len())
            }
            RunOutcome::Failed(error) => format!("failed: {error}"),
            RunOutcome::Cancelled => "was cancelled".to_owned(),
        },
        Err(FlowError::Journal(cause)) => match cause.as_ref() {
            clio_journal::JournalError::Fenced { .. } => {
                format!("stopped here: {cause}; the worker that claimed it drives it now")
            }
            _ => format!("stopped: {cause}"),
        },
        Err(error) => format!("stopped: {error}"),
    };
    let tasks = journal.tasks(run).map_err(journal_error)?;
    writeln!(err, "run {} {how}: {}", run.0, task_summary(&tasks))?;
    let cut = cut_short(journal, run)?;
    warn_cut_short(run, &cut, err)
}

/// Continues a run from its journal.
pub(super) fn resume(
    home: &Home,
    args: &RunResumeArgs,
    quiet: bool,
    paint: Paint,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Result<(), CliError> {
    if let Some(held) = home.held() {
        match &held.drivers {
            Some(drivers) => return resume_in_serve(home, drivers, args, out, err),
            None => return Err(refuse_served_resume(held, args.run)),
        }
    }
    let rt = foreground_runtime()?;
    probe_sandbox_ahead(&rt, home);
    let on_change = OnAgentChange::from_flag(args.accept_changed_agent, true);
    let Relaunched { runtime, journal, agent_change } = relaunch(home, args.run, on_change)?;
    if let Some(change) = &agent_change {
        pin::note(RunId(args.run), change, true, err)?;
    }
    if journal.is_shared() {
        claim_for_resume(&journal, RunId(args.run))?;
    }
    let show = Show { progress: !(args.json || quiet), json: args.json, paint };
    // A cancelled run is not driven again: its progress would replay every line before
    // saying so.
    if let Some(record) = journal.run(RunId(args.run)).map_err(journal_error)?
        && record.status == clio_journal::RunStatus::Cancelled
    {
        if args.json {
            write_json(out, &json!({"run": args.run, "status": "cancelled"}))?;
        }
        return Err(CliError::user(anyhow!(
            "run {} was cancelled: there is nothing to resume",
            args.run
        ))
        .hint("start it again with `clio run` or `clio workflow run`"));
    }
    if show.progress {
        writeln!(
            err,
            "resuming run {}: finished work is replayed from the journal, not done again",
            args.run
        )?;
    }
    drive_run(&rt, home, &runtime, &journal, Drive::Resume(RunId(args.run)), show, out, err)
}

/// Takes the lease of run `run` on a shared journal before this process drives it, so that
/// no worker drives it too; refused when a worker holds it or it has nothing to resume.
fn claim_for_resume(journal: &Journal, run: RunId) -> Result<(), CliError> {
    let lease = Duration::from_secs(10);
    if journal.claim_this_run(run, &owner(), lease).map_err(journal_error)?.is_some() {
        return Ok(());
    }
    let status = journal.run(run).map_err(journal_error)?.map(|r| r.status);
    let error = match status {
        Some(clio_journal::RunStatus::Running) => CliError::user(anyhow!(
            "run {} is being driven by a worker that holds its lease",
            run.0
        ))
        .hint(
            "`clio runs show` shows how far it is; a worker that dies gives it up after its lease",
        ),
        Some(clio_journal::RunStatus::AwaitingInput) => {
            CliError::user(anyhow!("run {} waits for answers to its questions", run.0))
                .hint(format!("answer them with `clio runs answer {} QUESTION TEXT`", run.0))
        }
        _ => CliError::user(anyhow!("run {} has nothing to resume", run.0)),
    };
    Err(error)
}

/// Resumes a run in `clio serve`, which drives it from now on: the command returns at
/// once, saying so.
fn resume_in_serve(
    home: &Home,
    drivers: &Arc<Drivers>,
    args: &RunResumeArgs,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Result<(), CliError> {
    let run = RunId(args.run);
    let journal = open_journal(home)?;
    existing_run(home, &journal, run)?;
    refuse_finished(&journal, run, "resume")?;
    let on_change = OnAgentChange::from_flag(args.accept_changed_agent, true);
    let pid = std::process::id();
    if !serve_drive(home, drivers, run, on_change, err)? {
        return Err(CliError::user(anyhow!("run {} is running already, in process {pid}", run.0))
            .hint(format!("`clio runs show {}` shows how far it is", run.0)));
    }
    if args.json {
        return write_json(out, &json!({"run": run.0, "status": "resumed", "process": pid}));
    }
    writeln!(
        out,
        "run {} resumed in clio serve (process {pid}); `clio runs show {}` shows how far it is",
        run.0, run.0
    )?;
    Ok(())
}

/// The error of `runs resume` asked of a process that drives its own run: one such
/// process drives one run.
fn refuse_served_resume(held: &Held, run: u64) -> CliError {
    let pid = std::process::id();
    match held.run {
        Some(live) if live.0 == run => {
            CliError::user(anyhow!("run {run} is running already, in process {pid}"))
                .hint(format!("`clio runs show {run}` shows how far it is"))
        }
        Some(live) => CliError::user(anyhow!(
            "cannot resume run {run} now: process {pid} holds the journal while it drives run {}",
            live.0
        ))
        .hint(format!(
            "resume it once run {} has ended (or `clio runs cancel {}`)",
            live.0, live.0
        )),
        None => CliError::internal(anyhow!(
            "process {pid} holds the journal and has no driver for run {run}"
        )),
    }
}

/// Holds the journal and serves the other processes until Ctrl-C or SIGTERM: their `runs`
/// commands and detached runs over the socket (`crate::serve`), the HTTP API and the
/// viewer on `args.bind`:`args.port` (`crate::serve::http`). It drives runs: those a
/// crash left interrupted, from the start; those submitted or resumed; those whose
/// questions are answered. Cancels of runs it does not drive go through a runtime of its
/// own.
pub(super) fn serve(
    home: &Home,
    args: &crate::args::ServeArgs,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Result<(), CliError> {
    if home.shared_journal().is_some() {
        return Err(CliError::usage(anyhow!(
            "clio serve holds a journal file; {} is a shared journal, which workers drive",
            home.journal_path().display()
        ))
        .hint("run `clio worker` against it instead (docs/deploy.md)"));
    }
    let rt = tokio_runtime()?;
    let http = super::http::Config::of(args)?;
    let journal = open_journal(home)?;
    let Driving { served, held, drivers, mut reports } =
        driving(home, &journal, owner(), rt.handle());
    let token = crate::serve::token::load_or_create(home)?;
    let listener = rt.block_on(http.bind())?;
    let url = http.url(&listener, &token)?;
    let socket = home.socket_path();
    let endpoint = Endpoint::start(&rt, home, Arc::clone(&held)).map_err(|error| {
        CliError::user(anyhow!(error).context(format!("cannot listen on {}", socket.display())))
    })?;
    // The address comes first, alone on its line, for people and for programs.
    writeln!(out, "{url}")?;
    out.flush()?;
    writeln!(
        err,
        "serving the journal {} on {} and {}: `clio runs …` from other terminals go through this process; Ctrl-C stops it",
        home.journal_path().display(),
        socket.display(),
        url.split('#').next().unwrap_or(&url)
    )?;
    resume_interrupted(&served, &drivers, err)?;
    let server = rt.spawn(super::http::serve(listener, http, served, token));
    rt.block_on(async {
        use tokio::signal::unix::{SignalKind, signal};
        let mut interrupt = signal(SignalKind::interrupt())
            .context("cannot listen for Ctrl-C")
            .map_err(CliError::internal)?;
        let mut terminate = signal(SignalKind::terminate())
            .context("cannot listen for SIGTERM")
            .map_err(CliError::internal)?;
        loop {
            tokio::select! {
                _ = interrupt.recv() => break,
                _ = terminate.recv() => break,
                Some(report) = reports.recv() => write!(err, "{report}")?,
            }
        }
        Ok::<_, CliError>(())
    })?;
    server.abort();
    drop(endpoint);
    let n = drivers.n_live();
    // The drives in flight stop with the process; recording their work as interrupted now
    // tells `runs list` the truth at once, and the next `clio serve` resumes them.
    rt.shutdown_timeout(Duration::from_secs(5));
    journal.reconcile::<&str>(&[]).map_err(journal_error)?;
    if n > 0 {
        writeln!(
            err,
            "{n} run(s) in progress stopped: the next `clio serve` (or `clio runs resume N`) continues them"
        )?;
    }
    writeln!(err, "stopped serving {}", home.journal_path().display())?;
    Ok(())
}

/// What a process that drives many runs (`clio serve`, `clio worker`) lends the commands it
/// runs: its home holding the journal, a runtime of its own for answers and cancels, and
/// the drivers its runs go to.
pub(super) struct Driving {
    pub(super) served: Home,
    pub(super) held: Arc<Held>,
    pub(super) drivers: Arc<Drivers>,
    pub(super) reports: tokio::sync::mpsc::UnboundedReceiver<String>,
}

/// Sets up a process that drives many runs on `journal`, under the name `owner`, its drives
/// spawned on `handle`.
pub(super) fn driving(
    home: &Home,
    journal: &Journal,
    owner: String,
    handle: &tokio::runtime::Handle,
) -> Driving {
    let config = RuntimeConfig { owner, ..RuntimeConfig::default() };
    let runtime = Runtime::new(journal.clone(), Registry::new(), config);
    let (drivers, reports) = Drivers::new(handle.clone());
    let held = Arc::new(Held {
        journal: journal.clone(),
        runtime,
        run: None,
        drivers: Some(Arc::clone(&drivers)),
    });
    let served = home.holding(Arc::clone(&held));
    Driving { served, held, drivers, reports }
}

/// Has `clio serve` drive, from its start, the runs a crash left interrupted and the runs
/// waiting on questions that have all been answered; a run whose launch cannot be rebuilt
/// (its agent file changed, a plugin folder gone) is reported and left as it is.
fn resume_interrupted(
    home: &Home,
    drivers: &Arc<Drivers>,
    err: &mut dyn Write,
) -> Result<(), CliError> {
    let Some(held) = home.held() else { return Ok(()) };
    let filter = clio_journal::RunFilter {
        statuses: vec![
            clio_journal::RunStatus::Interrupted,
            clio_journal::RunStatus::AwaitingInput,
        ],
        ..clio_journal::RunFilter::default()
    };
    let mut runs = held.journal.runs(&filter).map_err(journal_error)?;
    runs.reverse();
    for record in runs {
        let answered = record.status == clio_journal::RunStatus::AwaitingInput
            && held.runtime.questions(record.id).is_ok_and(|q| q.is_empty());
        if record.status != clio_journal::RunStatus::Interrupted && !answered {
            continue;
        }
        let on_change = OnAgentChange::from_flag(false, true);
        match serve_drive(home, drivers, record.id, on_change, err) {
            Ok(_) => writeln!(
                err,
                "resuming run {} ({}): finished work is replayed from the journal, not done again",
                record.id.0,
                super::runs::status_name(record.status)
            )?,
            Err(error) => {
                writeln!(err, "warning: run {} is not resumed:", record.id.0)?;
                error.render(err)?;
            }
        }
    }
    Ok(())
}

/// Refuses to `what` run `run` when it has ended (succeeded, failed or cancelled), naming
/// how it ended.
fn refuse_finished(journal: &Journal, run: RunId, what: &str) -> Result<(), CliError> {
    let Some(record) = journal.run(run).map_err(journal_error)? else { return Ok(()) };
    if record.status.is_finished() {
        let status = super::runs::status_name(record.status);
        return Err(CliError::user(anyhow!(
            "cannot {what} run {}: it has ended ({status})",
            run.0
        ))
        .hint(format!("`clio runs show {}` shows how it ended", run.0)));
    }
    Ok(())
}

/// Cancels a run and its whole task tree.
pub(super) fn cancel(home: &Home, args: &RunArgs, out: &mut dyn Write) -> Result<(), CliError> {
    let rt = tokio_runtime()?;
    // A run can always be given up on. Cancelling runs no flow code, only marks the run
    // and its unfinished tasks in the journal, so it needs nothing the run was launched
    // with: not its launch record (which a run of an earlier build may have lost), nor its
    // agent file, plugins or models as they are now.
    let journal = open_journal(home)?;
    existing_run(home, &journal, RunId(args.run))?;
    refuse_finished(&journal, RunId(args.run), "cancel")?;
    // Served, the owner's runtime cancels (the one driving the run, if one does): its
    // live run stops at once.
    let runtime = match home.held() {
        Some(held) => held.runtime_of(RunId(args.run)).unwrap_or_else(|| held.runtime.clone()),
        None => {
            let config = RuntimeConfig { owner: owner(), ..RuntimeConfig::default() };
            Runtime::new(journal, Registry::new(), config)
        }
    };
    let n = rt.block_on(runtime.cancel(RunId(args.run)))?;
    if args.json {
        return write_json(out, &json!({"run": args.run, "cancelled_tasks": n}));
    }
    writeln!(out, "cancelled run {} ({n} unfinished task(s))", args.run)?;
    Ok(())
}

/// Lists the models a run would use: `--models`, else config.toml's, else models.toml's.
pub(super) fn models_list(
    home: &Home,
    args: &ModelsListArgs,
    quiet: bool,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Result<(), CliError> {
    let settings = HomeConfig::load(home)?;
    let Some(choice) = ModelsChoice::pick(home, args.models.as_deref(), &settings)? else {
        return Err(CliError::user(anyhow!(
            "no models: no --models file, no [[model]] in {}, no {}",
            home.root().join("config.toml").display(),
            home.root().join("models.toml").display()
        ))
        .hint("pass --models FILE, such as examples/models/models.toml, or declare models in config.toml (see docs/models.md)"));
    };
    let mut from = format!("models from {}", choice.source.path().display());
    if !choice.default_model.is_empty() {
        from.push_str(&format!("; default {}", choice.default_model));
    }
    if !quiet {
        writeln!(err, "{from}")?;
        if let Some(shadowed) = &choice.shadowed {
            writeln!(err, "note: {} is not read: config.toml declares models", shadowed.display())?;
        }
    }
    let config = choice.config;
    let models = config.catalog.models();
    if args.json {
        let list: Vec<Value> = models
            .iter()
            .map(|m| {
                json!({
                    "name": m.name(), "provider": m.provider, "api_model": m.api_model(),
                    "tool_calling": m.capabilities.tool_calling, "vision": m.capabilities.vision,
                    "context_tokens": m.capabilities.context_tokens,
                    "output_tokens": m.capabilities.output_tokens,
                })
            })
            .collect();
        return write_json(out, &Value::Array(list));
    }
    for m in models {
        let c = &m.capabilities;
        let mut caps = Vec::new();
        if c.tool_calling {
            caps.push("tools".to_owned());
        }
        if c.vision {
            caps.push("vision".to_owned());
        }
        if c.context_tokens > 0 {
            caps.push(format!("context {}", c.context_tokens));
        }
        if c.output_tokens > 0 {
            caps.push(format!("output {}", c.output_tokens));
        }
        writeln!(out, "{:<24} via {:<12} {}", m.name(), m.provider, caps.join(", "))?;
    }
    Ok(())
}
