//! [`Runtime`]: runs flows on a journal and a registry, and the entry points the CLI calls —
//! [`Runtime::run`], [`Runtime::resume`], [`Runtime::replay`], [`Runtime::answer`],
//! [`Runtime::cancel`], [`Runtime::cancel_task`], [`Runtime::questions`], [`Runtime::runs`].
//!
//! A run is driven from the top of its flow's `forward` every time: on a fresh run nothing
//! is recorded yet; on a resume each call finds its record ([`crate::Ctx`]). When every
//! piece of live work waits on a question nobody in this process can answer, the run is left
//! `awaiting_input` in the journal and the driver returns; `answer` then `resume` continue it
//! later, in this process or another.

mod history;
mod state;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use clio_journal::{
    EntryKind, Journal, JournalError, NewEntry, NewRun, RunFilter, RunId, RunRecord, RunStatus,
    RunUpdate, TaskId, TaskStatus, TaskUpdate,
};
use clio_spec::FlowSelection;
use serde_json::{Value, json};

use crate::ctx::{Ctx, ScopeTask};
use crate::error::{FlowError, Mismatch};
use crate::flow::{Flow, reference};
use crate::model::Models;
use crate::registry::Registry;
use crate::result::FlowOutput;

use state::SANDBOX_OFF;
pub(crate) use state::{Finished, RunState, Starting, blocking, digest, outcome};

/// How a runtime runs flows.
#[derive(Debug, Clone)]
pub struct RuntimeConfig {
    /// Names this process in the journal (tasks and runs it owns).
    pub owner: String,
    /// The conversation's workspace folder; `None` makes workspace use a `no_workspace`
    /// refusal.
    pub workspace: Option<PathBuf>,
    /// The most entries one run records (the seed's 10,000).
    pub max_entries: u64,
    /// CLIO's own bound on how deeply flows nest, under any flow limit.
    pub max_depth: u64,
    /// The model runs use when nothing else names one (`account/model` or an id).
    pub model: String,
    /// The most model iterations of a react loop when its worker sets none.
    pub max_iters: u64,
    /// The model catalog and providers the react loop uses.
    pub models: Models,
    /// The deployment's tool settings, the person's rules and the confirmation policy
    /// that decide each tool's permission and callers.
    pub permissions: clio_plugins::PermissionSettings,
    /// How `run_code` scripts are confined (give a plugin's executables the same policy
    /// through the [`crate::Workspace`] they are registered with). Under mode `off` every
    /// run records a `sandbox_off` event once.
    pub sandbox: clio_tools::Sandbox,
    /// Whether a person can be asked: the gate's questions (whether to trust a plugin,
    /// whether to allow a tool) wait for an answer (`true`), or, in a run nobody will
    /// answer (the CLI's `--no-input`), are refused at once: `FlowNotTrusted` for trust,
    /// `permission_denied` for a tool. Answers a run already has still count.
    pub interactive: bool,
    /// Where a person's yes to a trust question is recorded, pinned to the digest they
    /// were shown, so later runs trust the plugin too; `None`: the yes holds for the run
    /// only (it is recorded in the run either way).
    pub trust_store: Option<clio_plugins::Store>,
    /// The person's limits for every workflow (Settings → Execution & history → Workflows;
    /// `[workflows]` of config.toml): the tighter of these and a workflow's own bounds
    /// applies, and both are recorded in its `wf-limits` when it starts.
    pub workflows: clio_workflow::Settings,
    /// The share of a model's context window (`context_tokens`) a react loop's
    /// conversation may fill before its older turns are compacted into a summary
    /// (`crate::react`'s compaction); a model with no recorded window is never compacted.
    pub compact_at: f64,
}

impl Default for RuntimeConfig {
    fn default() -> Self {
        RuntimeConfig {
            owner: format!("pid-{}", std::process::id()),
            workspace: None,
            max_entries: 10_000,
            max_depth: 16,
            model: String::new(),
            max_iters: 20,
            models: Models::default(),
            permissions: clio_plugins::PermissionSettings::default(),
            sandbox: clio_tools::Sandbox::default(),
            interactive: true,
            trust_store: None,
            workflows: clio_workflow::Settings::default(),
            compact_at: 0.8,
        }
    }
}

/// A question a run waits on.
#[derive(Debug, Clone, PartialEq)]
pub struct Question {
    /// The run.
    pub run: RunId,
    /// The question's id: its entry's sequence number in the run.
    pub id: u64,
    /// The question's text.
    pub text: String,
    /// What kind of answer it takes.
    pub schema: crate::AskSchema,
    /// The offered options (lowercase values) when `schema` is `options`.
    pub options: Vec<String>,
    /// Why it is asked.
    pub reason: String,
}

impl Question {
    pub(crate) fn from_payload(run: RunId, id: u64, p: &Value) -> Question {
        let s = |k: &str| p.get(k).and_then(Value::as_str).unwrap_or("").to_owned();
        Question {
            run,
            id,
            text: s("question"),
            schema: crate::AskSchema::parse(&s("schema")),
            options: p
                .get("options")
                .and_then(Value::as_array)
                .map(|a| a.iter().filter_map(Value::as_str).map(str::to_owned).collect())
                .unwrap_or_default(),
            reason: s("reason"),
        }
    }

    /// Checks `text` against the question and returns the answer's value: text, a bool, or
    /// the chosen option's lowercase value.
    pub fn parse_answer(&self, text: &str) -> Result<Value, FlowError> {
        let t = text.trim();
        match self.schema {
            crate::AskSchema::Bool => match t.to_lowercase().as_str() {
                "y" | "yes" | "true" | "1" => Ok(Value::Bool(true)),
                "n" | "no" | "false" | "0" => Ok(Value::Bool(false)),
                _ => {
                    Err(FlowError::AnswerInvalid { answer: text.into(), needs: "yes or no".into() })
                }
            },
            crate::AskSchema::Options => {
                let lower = t.to_lowercase();
                if self.options.contains(&lower) {
                    Ok(Value::String(lower))
                } else {
                    Err(FlowError::AnswerInvalid {
                        answer: text.into(),
                        needs: format!("one of {}", self.options.join(", ")),
                    })
                }
            }
            crate::AskSchema::Text => Ok(Value::String(text.to_owned())),
        }
    }
}

/// How a drive runs a flow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// For real: new commands run and are recorded.
    Live,
    /// From the records only; `frontier`: the run had not ended, so a command with no
    /// record marks the end of its history instead of a mismatch.
    Replay { frontier: bool },
}

/// What [`Runtime::check_replay`] found.
#[derive(Debug, Clone)]
pub struct ReplayReport {
    /// The run.
    pub run: RunId,
    /// Whether the run had ended (then its replay must reach the flow's end).
    pub finished: bool,
    /// How many commands (calls, steps, questions) the history holds.
    pub commands: u64,
    /// How many of them the current code reached.
    pub reached: u64,
    /// Clean, or the first mismatch.
    pub verdict: ReplayVerdict,
}

/// The verdict of a replay check.
#[derive(Debug, Clone)]
pub enum ReplayVerdict {
    /// The current code reproduces the history: `outcome` is how the replay ended (the
    /// recorded answer or error, or `AwaitingInput` at the end of an unfinished run's
    /// history).
    Clean {
        /// How the replay ended.
        outcome: RunOutcome,
    },
    /// The current code departs from the history: a `Nondeterminism` naming the new
    /// command and what the history holds unreached, or a `FlowReplayMismatch` naming a
    /// changed flow version, plugin set or input.
    Mismatch(FlowError),
}

/// A run just created by [`Runtime::start`], not yet driven.
pub struct RunHandle {
    runtime: Runtime,
    record: RunRecord,
}

impl std::fmt::Debug for RunHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunHandle").field("run", &self.record.id).finish()
    }
}

impl RunHandle {
    /// Returns the run's id.
    pub fn id(&self) -> RunId {
        self.record.id
    }

    /// Drives the run until it ends or waits for input, as [`Runtime::run`] does; a drive
    /// cut short (the process stopped) is taken up again by [`Runtime::resume`].
    pub async fn drive(self) -> Result<RunReport, FlowError> {
        self.runtime.drive_record(self.record, Mode::Live, true).await
    }
}

/// How a drive of a run ended.
#[derive(Debug, Clone)]
pub enum RunOutcome {
    /// The flow returned.
    Succeeded(FlowOutput),
    /// The flow ended with an error.
    Failed(FlowError),
    /// Every piece of live work waits on these questions; the run is left `awaiting_input`.
    AwaitingInput(Vec<Question>),
    /// The run was cancelled.
    Cancelled,
}

/// What one drive of a run did.
#[derive(Debug, Clone)]
pub struct RunReport {
    /// The run.
    pub run: RunId,
    /// How it ended.
    pub outcome: RunOutcome,
    /// How many tasks this drive submitted (zero for a pure replay).
    pub submitted: u64,
    /// How many step closures this drive ran (zero for a pure replay).
    pub steps_run: u64,
}

impl RunReport {
    /// Returns the answer when the run succeeded.
    pub fn output(&self) -> Option<&FlowOutput> {
        match &self.outcome {
            RunOutcome::Succeeded(out) => Some(out),
            _ => None,
        }
    }

    /// Returns the error when the run failed.
    pub fn error(&self) -> Option<&FlowError> {
        match &self.outcome {
            RunOutcome::Failed(err) => Some(err),
            _ => None,
        }
    }
}

pub(crate) struct RuntimeInner {
    pub(crate) journal: Journal,
    pub(crate) registry: Registry,
    pub(crate) config: RuntimeConfig,
    pub(crate) live: Mutex<HashMap<RunId, Arc<RunState>>>,
    /// The journal's [`Journal::instance_tag`], taken once.
    journal_tag: String,
}

impl RuntimeInner {
    /// Returns the owner part of the tags of calls driven by `owner` on this runtime's
    /// journal ([`clio_tools::call_tag`]): the journal's instance tag and the owner, so that
    /// two journals' runs of the same number (and the same owner, as two runtimes of one
    /// process have) never share a tag.
    pub(crate) fn tag_owner(&self, owner: &str) -> String {
        format!("{}:{owner}", self.journal_tag)
    }
}

/// Runs flows durably on a journal.
///
/// Cheap to clone. Every method works on runs recorded by any process: a run started here
/// can be answered, resumed or cancelled by another process later.
#[derive(Clone)]
pub struct Runtime {
    pub(crate) inner: Arc<RuntimeInner>,
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime").field("journal", &self.inner.journal).finish()
    }
}

/// Names an outcome in the log.
fn outcome_name(outcome: &RunOutcome) -> &'static str {
    match outcome {
        RunOutcome::Succeeded(_) => "succeeded",
        RunOutcome::AwaitingInput(_) => "awaiting_input",
        RunOutcome::Failed(_) => "failed",
        RunOutcome::Cancelled => "cancelled",
    }
}

fn fingerprint(flow: &dyn Flow, registry: &Registry) -> Value {
    json!({ "flow": flow.id(), "version": flow.version(), "plugins": registry.plugin_set() })
}

impl Runtime {
    /// Returns a runtime over `journal` reaching what `registry` holds.
    pub fn new(journal: Journal, registry: Registry, config: RuntimeConfig) -> Runtime {
        Runtime {
            inner: Arc::new(RuntimeInner {
                journal_tag: journal.instance_tag(),
                journal,
                registry,
                config,
                live: Mutex::new(HashMap::new()),
            }),
        }
    }

    /// Returns the journal.
    pub fn journal(&self) -> &Journal {
        &self.inner.journal
    }

    /// Returns the registry.
    pub fn registry(&self) -> &Registry {
        &self.inner.registry
    }

    /// Lists the runs `filter` selects, newest first.
    pub fn runs(&self, filter: &RunFilter) -> Result<Vec<RunRecord>, FlowError> {
        Ok(self.inner.journal.runs(filter)?)
    }

    fn flow_of(&self, selection: &FlowSelection) -> Result<Arc<dyn Flow>, FlowError> {
        Ok(self.flow_and_plugin(selection)?.0)
    }

    /// Returns the flow `selection` names and the plugin that brings it (`None`: the host's
    /// or a built-in flow), whose trust the run asks for before the flow starts.
    fn flow_and_plugin(
        &self,
        selection: &FlowSelection,
    ) -> Result<(Arc<dyn Flow>, Option<String>), FlowError> {
        // A subagent carrying a plugin the run does not have would lack its tools.
        self.inner.registry.check_carried()?;
        let target = crate::registry::Target::Selection(selection.clone());
        match self.inner.registry.resolve(&target)? {
            crate::registry::Resolved::Flow { flow, plugin, .. } => Ok((flow, plugin)),
            _ => Err(FlowError::FlowTargetUnknown { target: selection.id.clone() }),
        }
    }

    /// Creates a run of `selection` on `input` and drives it until it ends or waits for
    /// input. Invalid options are refused before anything is recorded.
    ///
    /// A chain of fast steps waits on a journal write at each step. Awaited from a thread
    /// that sleeps while it waits (`block_on`'s), each step pays for that thread's wake-up;
    /// spawned as a task on a worker that spins for awaited writes first
    /// ([`clio_journal::spin_for_awaited_write`] in the runtime's `on_thread_park`, as the
    /// `clio` binary does), a 1,000-step chain took about 200 ms where it took 320.
    pub async fn run(
        &self,
        selection: FlowSelection,
        input: Value,
    ) -> Result<RunReport, FlowError> {
        self.start(selection, input, None).await?.drive().await
    }

    /// Creates a run of `selection` on `input`, with `launch` (what the caller put around
    /// the run, as for [`Runtime::create_with_launch`]) in the same transaction, and
    /// returns a handle that drives it. Invalid options are refused before anything is
    /// recorded. The handle drives the run from the record as created: nothing is read
    /// back, resolved or digested again, as a [`Runtime::resume`] of the new id would.
    pub async fn start(
        &self,
        selection: FlowSelection,
        input: Value,
        launch: Option<Value>,
    ) -> Result<RunHandle, FlowError> {
        let record = self.create_record(selection, input, launch).await?;
        Ok(RunHandle { runtime: self.clone(), record })
    }

    /// Creates a run of `selection` on `input` without driving it, and returns its id.
    pub async fn create(&self, selection: FlowSelection, input: Value) -> Result<RunId, FlowError> {
        Ok(self.create_record(selection, input, None).await?.id)
    }

    /// Creates a run as [`Runtime::create`] does, with `launch` (what the caller put around
    /// the run, such as the CLI's agent file, plugins and models) recorded in the run's
    /// record in the same transaction: a process killed at any moment leaves either no run
    /// or a run that says how to rebuild its runtime, never a run without it.
    pub async fn create_with_launch(
        &self,
        selection: FlowSelection,
        input: Value,
        launch: Value,
    ) -> Result<RunId, FlowError> {
        Ok(self.create_record(selection, input, Some(launch)).await?.id)
    }

    /// Creates a run and returns its record as created.
    async fn create_record(
        &self,
        selection: FlowSelection,
        input: Value,
        launch: Option<Value>,
    ) -> Result<RunRecord, FlowError> {
        let flow = self.flow_of(&selection)?;
        flow.checked_options(&selection.options)?;
        let fp = fingerprint(flow.as_ref(), &self.inner.registry);
        let new = NewRun {
            flow: reference(&selection).to_string(),
            input_digest: digest(&input),
            input,
            fingerprint: fp.to_string(),
            owner: self.inner.config.owner.clone(),
            launch,
        };
        let journal = self.inner.journal.clone();
        // The record the journal made, handed back rather than read back or copied first.
        blocking(move || journal.create_run_record(new)).await
    }

    /// Drives run `run` again from the top of its flow: finished calls return their
    /// records, and work left unfinished continues. A finished run is not run again: its
    /// recorded outcome is returned.
    pub async fn resume(&self, run: RunId) -> Result<RunReport, FlowError> {
        self.drive(run, Mode::Live).await
    }

    /// Replays finished run `run` from its journal without submitting anything: every call,
    /// step and question must find its record, else the replay fails with
    /// [`FlowError::Nondeterminism`]. Returns what the flow returns on replay.
    pub async fn replay(&self, run: RunId) -> Result<RunReport, FlowError> {
        self.drive(run, Mode::Replay { frontier: false }).await
    }

    /// Checks recorded run `run` against the current code and plugins without executing
    /// anything: no tool, model, hook or child runs, and nothing is written. The flow is
    /// replayed from its records; a finished run must replay to its end, and a run that has
    /// not ended must replay to the end of its history (the first command it has no record
    /// of). Returns the verdict: clean, or the first mismatch.
    pub async fn check_replay(&self, run: RunId) -> Result<ReplayReport, FlowError> {
        let rec = self.record(run)?;
        let finished = rec.status.is_finished();
        let fingerprint = self.fingerprint_mismatch(&rec);
        if let Err(err) = fingerprint {
            return Ok(ReplayReport {
                run,
                finished,
                commands: 0,
                reached: 0,
                verdict: ReplayVerdict::Mismatch(err),
            });
        }
        let (report, state) =
            self.drive_state(rec, Mode::Replay { frontier: !finished }, false).await?;
        let state =
            state.ok_or(FlowError::RunState { run, message: "replay kept no state".into() })?;
        let commands = state.recorded_commands();
        let unreached = state.unreached();
        let reached = (commands - unreached.len()) as u64;
        let verdict = match report.outcome {
            RunOutcome::Failed(err @ FlowError::Nondeterminism { .. }) => {
                ReplayVerdict::Mismatch(err)
            }
            // The flow ended (as it did, or with the error it recorded), or every piece of
            // its work reached the end of the history: what the history holds beyond that
            // was not reached by the current code.
            outcome => match unreached.first() {
                Some(first)
                    if finished
                        || matches!(outcome, RunOutcome::Succeeded(_) | RunOutcome::Failed(_)) =>
                {
                    ReplayVerdict::Mismatch(FlowError::Nondeterminism {
                        identity: first.identity.clone(),
                        journaled: format!("{} {}", first.kind, first.target),
                        requested: "nothing: the current code ended without reaching it".into(),
                        unreached,
                    })
                }
                _ => ReplayVerdict::Clean { outcome },
            },
        };
        Ok(ReplayReport { run, finished, commands: commands as u64, reached, verdict })
    }

    /// Resumes run `run` as if it had been started with `input`: a different input is
    /// refused with [`FlowError::FlowReplayMismatch`].
    pub async fn resume_with_input(
        &self,
        run: RunId,
        input: Value,
    ) -> Result<RunReport, FlowError> {
        let rec = self.record(run)?;
        if digest(&input) != rec.input_digest {
            return Err(FlowError::FlowReplayMismatch {
                differs: vec![Mismatch {
                    what: "input".into(),
                    recorded: rec.input.to_string(),
                    now: input.to_string(),
                }],
            });
        }
        self.drive(run, Mode::Live).await
    }

    fn record(&self, run: RunId) -> Result<RunRecord, FlowError> {
        self.inner.journal.run(run)?.ok_or(FlowError::RunNotFound { run })
    }

    fn finished_report(rec: &RunRecord) -> RunReport {
        let outcome = match rec.status {
            RunStatus::Succeeded => RunOutcome::Succeeded(
                rec.answer.as_ref().map(FlowOutput::from_json).unwrap_or_default(),
            ),
            RunStatus::Cancelled => RunOutcome::Cancelled,
            _ => RunOutcome::Failed(
                rec.error
                    .as_deref()
                    .map(FlowError::from_record)
                    .unwrap_or(FlowError::RunState { run: rec.id, message: "failed".into() }),
            ),
        };
        RunReport { run: rec.id, outcome, submitted: 0, steps_run: 0 }
    }

    async fn drive(&self, run: RunId, mode: Mode) -> Result<RunReport, FlowError> {
        let rec = self.record(run)?;
        self.drive_record(rec, mode, false).await
    }

    /// Checks the record of a run against the flow, plugin set and input resuming it.
    fn fingerprint_mismatch(&self, rec: &RunRecord) -> Result<(), FlowError> {
        let selection: FlowSelection = serde_json::from_str(&rec.flow).map_err(|e| {
            FlowError::RunState { run: rec.id, message: format!("bad flow selection: {e}") }
        })?;
        let flow = self.flow_of(&selection)?;
        let now = fingerprint(flow.as_ref(), &self.inner.registry);
        let recorded: Value = serde_json::from_str(&rec.fingerprint).unwrap_or(Value::Null);
        let mut differs = Vec::new();
        for (key, what) in
            [("flow", "flow"), ("version", "flow version"), ("plugins", "plugin set")]
        {
            let (a, b) = (recorded.get(key), now.get(key));
            if a != b {
                let text = |v: Option<&Value>| v.and_then(Value::as_str).unwrap_or("").to_owned();
                differs.push(Mismatch { what: what.into(), recorded: text(a), now: text(b) });
            }
        }
        if digest(&rec.input) != rec.input_digest {
            differs.push(Mismatch {
                what: "input".into(),
                recorded: rec.input_digest.clone(),
                now: digest(&rec.input),
            });
        }
        if differs.is_empty() { Ok(()) } else { Err(FlowError::FlowReplayMismatch { differs }) }
    }

    /// Drives the run of record `rec`; `just_created` skips checking the record against
    /// the flow and input it was created from moments ago.
    async fn drive_record(
        &self,
        rec: RunRecord,
        mode: Mode,
        just_created: bool,
    ) -> Result<RunReport, FlowError> {
        if rec.status.is_finished() && mode == Mode::Live {
            return Ok(Self::finished_report(&rec));
        }
        Ok(self.drive_state(rec, mode, just_created).await?.0)
    }

    /// Drives the run of record `rec` and returns its report with the state it ran on.
    async fn drive_state(
        &self,
        rec: RunRecord,
        mode: Mode,
        just_created: bool,
    ) -> Result<(RunReport, Option<Arc<RunState>>), FlowError> {
        let run = rec.id;
        let replay_only = mode != Mode::Live;
        let selection: FlowSelection = serde_json::from_str(&rec.flow).map_err(|e| {
            FlowError::RunState { run, message: format!("bad flow selection: {e}") }
        })?;
        let (flow, plugin) = self.flow_and_plugin(&selection)?;
        let options = flow.checked_options(&selection.options)?;
        if !just_created {
            self.fingerprint_mismatch(&rec)?;
        }
        let previous = rec.status;
        // A run this process just created is already running under this owner: its record
        // (which holds the whole input) need not be written again.
        let unchanged = rec.status == RunStatus::Running && rec.owner == self.inner.config.owner;
        if !replay_only
            && !unchanged
            && !rec.owner.is_empty()
            && rec.owner != self.inner.config.owner
        {
            // What the process that drove it last left running (its calls' processes, found
            // by the tag the journal's record of them gives) ends before the run goes on.
            let prefix = clio_tools::run_prefix(&self.inner.tag_owner(&rec.owner), run.0);
            let kill =
                move || Ok::<_, clio_journal::JournalError>(clio_tools::kill_leftovers(&prefix));
            blocking(kill).await?;
        }
        if !replay_only && !unchanged {
            let update = RunUpdate {
                status: Some(RunStatus::Running),
                owner: Some(self.inner.config.owner.clone()),
                ..RunUpdate::default()
            };
            self.inner.journal.nonblocking().update_run(run, update).await?;
        }
        let state = RunState::load(
            Arc::clone(&self.inner),
            run,
            flow.limits().with_options(&options),
            replay_only,
            mode == Mode::Replay { frontier: true },
        )
        .await?;
        // Code this run starts runs with the process's own rights: the run says so, once.
        if !replay_only
            && self.inner.config.sandbox.mode == clio_tools::SandboxMode::Off
            && state.recorded(SANDBOX_OFF).is_none()
        {
            let event = NewEntry::new(
                EntryKind::Event,
                json!({
                    "event": "sandbox_off",
                    "message": "the sandbox is off ([sandbox] mode = \"off\"): this run's \
                                run_code scripts and plugin executables run unconfined, with \
                                the process's own rights",
                }),
            )
            .with_identity(SANDBOX_OFF);
            self.inner.journal.nonblocking().append(run, event).await?;
        }
        if !replay_only {
            self.live().insert(run, Arc::clone(&state));
        }
        // A plugin's flow runs as its plugin's code (it may call its internal subagents).
        let model = flow.model().to_owned();
        let ctx = Ctx::root(
            Arc::clone(&state),
            ScopeTask::copy_of(&rec.input),
            options,
            model,
            plugin.clone(),
        );
        // Background work a restart cut off starts again now, not when the agent next asks.
        if !replay_only {
            for start in self.inner.registry.drive_starts() {
                start(ctx.clone()).await;
            }
        }
        // A flow of a plugin not trusted yet runs only once the person trusts the plugin
        // (the run's first question, `trust:run`), which is asked before anything else.
        let forward = async {
            if let Some(plugin) = &plugin {
                let _ = ctx.run.recorded("key:trust:run");
                crate::gate::ensure_trusted(&ctx, "trust:run", plugin, flow.id()).await?;
            }
            flow.forward(rec.input, ctx.clone()).await
        };
        // The run's span holds what its calls log, on whichever task they run.
        let span = tracing::info_span!("run", run = run.0);
        span.in_scope(|| {
            if replay_only {
                tracing::debug!(flow = %selection.id, "replay started");
            } else if unchanged {
                tracing::info!(flow = %selection.id, "run started");
            } else {
                tracing::info!(flow = %selection.id, was = ?previous, "run resumed");
            }
        });
        // What the run starts outside any call (a hook, an MCP server) carries its tag too,
        // so that a resume finds what it left (`clio_tools::kill_leftovers`).
        let tag = clio_tools::call_tag(&self.inner.tag_owner(&self.inner.config.owner), run.0, "-");
        let driven = tracing::Instrument::instrument(state.drive(forward), span.clone());
        let outcome = clio_tools::as_call(tag, driven).await;
        self.live().remove(&run);
        // The flow's context holds the run's state and a copy of its input: let go of now,
        // so that the state's records can be freed (below) before the answer is written.
        drop(ctx);
        let (submitted, steps_run) = (state.submitted(), state.steps_run());
        let cancelled = state.is_cancelled();
        let suspended = state.suspension();
        if replay_only {
            span.in_scope(|| tracing::debug!(outcome = outcome_name(&outcome), "replay ended"));
            return Ok((RunReport { run, submitted, steps_run, outcome }, Some(state)));
        }
        // The records loaded for replay (every entry of the run) take a while to free; the
        // caller need not wait for that. The journal is let go of here, though: a caller
        // may open its file again as soon as the run returns.
        if let Some(loaded) = state.into_loaded() {
            drop(tokio::task::spawn_blocking(move || drop(loaded)));
        }
        // The answer record takes the output's value rather than a copy of it; the value is
        // made again from the outputs once the journal has written the record (below).
        let mut outcome = outcome;
        let mut moved_value = None;
        let update = match &mut outcome {
            RunOutcome::Succeeded(out) => {
                let (record, place) = out.take_record();
                moved_value = place;
                RunUpdate {
                    status: Some(RunStatus::Succeeded),
                    answer: Some(record),
                    ..RunUpdate::default()
                }
            }
            RunOutcome::Failed(FlowError::CallCancelled { .. }) | RunOutcome::Cancelled => {
                RunUpdate { status: Some(RunStatus::Cancelled), ..RunUpdate::default() }
            }
            // The code no longer matches the history: nothing new ran, and the run stays
            // as resumable as it was, for code that matches again (a key, a patch marker).
            RunOutcome::Failed(err @ FlowError::Nondeterminism { .. }) => {
                // Info, not a warning: the caller reports the mismatch to the person.
                span.in_scope(|| {
                    tracing::info!(error = %err, "replay mismatch: the run stops, nothing new ran");
                });
                let event = NewEntry::new(
                    EntryKind::Event,
                    json!({ "event": "replay_mismatch", "error": err.to_json() }),
                );
                self.inner.journal.nonblocking().append(run, event).await?;
                let status = match previous {
                    RunStatus::AwaitingInput => RunStatus::AwaitingInput,
                    _ => RunStatus::Interrupted,
                };
                RunUpdate { status: Some(status), ..RunUpdate::default() }
            }
            // The run stopped itself to be resumed (a provider that stayed unreachable):
            // what it had not finished is unrecorded, and `runs resume` takes it up.
            RunOutcome::Failed(err) if suspended.is_some() => {
                let event = NewEntry::new(
                    EntryKind::Event,
                    json!({ "event": "run_suspended", "message": err.to_string() }),
                );
                self.inner.journal.nonblocking().append(run, event).await?;
                RunUpdate { status: Some(RunStatus::Interrupted), ..RunUpdate::default() }
            }
            RunOutcome::Failed(err) => RunUpdate {
                status: Some(RunStatus::Failed),
                error: Some(err.to_record()),
                ..RunUpdate::default()
            },
            RunOutcome::AwaitingInput(_) => {
                RunUpdate { status: Some(RunStatus::AwaitingInput), ..RunUpdate::default() }
            }
        };
        let journal = self.inner.journal.clone();
        let update = if cancelled {
            RunUpdate { status: Some(RunStatus::Cancelled), ..RunUpdate::default() }
        } else {
            update
        };
        let written = journal.nonblocking().update_run(run, update).await;
        if let (RunOutcome::Succeeded(out), Some(place)) = (&mut outcome, moved_value) {
            out.restore_value(place);
        }
        written?;
        let outcome = if cancelled { RunOutcome::Cancelled } else { outcome };
        span.in_scope(|| {
            tracing::info!(outcome = outcome_name(&outcome), submitted, steps_run, "run ended");
        });
        Ok((RunReport { run, submitted, steps_run, outcome }, None))
    }

    fn live(&self) -> std::sync::MutexGuard<'_, HashMap<RunId, Arc<RunState>>> {
        self.inner.live.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Returns the open questions of run `run`: asked and not answered yet.
    pub fn questions(&self, run: RunId) -> Result<Vec<Question>, FlowError> {
        let entries = self.inner.journal.entries(run)?;
        let answered: std::collections::HashSet<&str> = entries
            .iter()
            .filter(|e| e.kind == EntryKind::Answer)
            .filter_map(|e| e.identity.as_deref())
            .collect();
        Ok(entries
            .iter()
            .filter(|e| e.kind == EntryKind::Question)
            .filter(|e| {
                let id = e.identity.as_deref().unwrap_or("");
                !answered.contains(format!("{id}@answer").as_str())
            })
            .map(|e| Question::from_payload(run, e.seq, &e.payload))
            .collect())
    }

    /// Records `text` as the answer to question `question` of run `run` (its id from
    /// [`questions`](Self::questions)). A live run waiting on it continues at once; a run
    /// left awaiting input continues at its next [`resume`](Self::resume).
    pub async fn answer(&self, run: RunId, question: u64, text: &str) -> Result<Value, FlowError> {
        let entry = self
            .inner
            .journal
            .entry(run, question)?
            .filter(|e| e.kind == EntryKind::Question)
            .ok_or(FlowError::QuestionNotFound { run, question })?;
        let q = Question::from_payload(run, question, &entry.payload);
        let value = q.parse_answer(text)?;
        let identity = format!("{}@answer", entry.identity.unwrap_or_default());
        let journal = self.inner.journal.clone();
        let payload = json!({ "question": question, "text": text, "value": value });
        let id = identity.clone();
        let res = blocking(move || {
            journal.append(run, NewEntry::new(EntryKind::Answer, payload).with_identity(id))
        })
        .await;
        match res {
            Ok(_) => {}
            Err(FlowError::Journal(err))
                if matches!(*err, JournalError::DuplicateIdentity { .. }) =>
            {
                return Err(FlowError::QuestionNotFound { run, question });
            }
            Err(err) => return Err(err),
        }
        if let Some(state) = self.live().get(&run).cloned() {
            state.answered(identity, value.clone());
        }
        Ok(value)
    }

    /// Cancels run `run` and everything it started: live work stops, and the run and every
    /// unfinished task are recorded cancelled. Returns the number of tasks cancelled.
    pub async fn cancel(&self, run: RunId) -> Result<u64, FlowError> {
        self.record(run)?;
        let journal = self.inner.journal.clone();
        // What is unfinished is decided before live work is told to stop (see cancel_task).
        let reader = journal.clone();
        let unfinished: Vec<TaskId> = blocking(move || {
            Ok(reader
                .tasks(run)?
                .iter()
                .filter(|t| !t.status.is_terminal())
                .map(|t| t.id)
                .collect())
        })
        .await?;
        if let Some(state) = self.live().get(&run).cloned() {
            state.cancel_all();
        }
        blocking(move || {
            let n = unfinished.len() as u64;
            for id in &unfinished {
                cancel_record(&journal, *id)?;
            }
            let rec = journal.run(run)?;
            if rec.is_some_and(|r| !r.status.is_finished()) {
                journal.update_run(
                    run,
                    RunUpdate { status: Some(RunStatus::Cancelled), ..RunUpdate::default() },
                )?;
            }
            Ok(n)
        })
        .await
    }

    /// Stops the turn of worker task `task` (an agent or subagent running in this process):
    /// its call ends with `CallStopped`. Stop never ends a started flow: for a flow task, or
    /// a task not live here, it does nothing and returns `false`.
    pub fn stop(&self, task: TaskId) -> Result<bool, FlowError> {
        let rec = self.inner.journal.task(task)?;
        let Some(rec) = rec else { return Ok(false) };
        Ok(self.live().get(&rec.run).is_some_and(|state| state.stop(task)))
    }

    /// Cancels task `task` and its whole subtree (everything it started, transitively):
    /// live work stops and each unfinished task is recorded cancelled, with an event in the
    /// run. Returns the number of tasks cancelled.
    pub async fn cancel_task(&self, task: TaskId) -> Result<u64, FlowError> {
        let journal = self.inner.journal.clone();
        let rec = journal.task(task)?.ok_or(FlowError::RunState {
            run: RunId(0),
            message: format!("task {task} not found"),
        })?;
        let run = rec.run;
        // What is unfinished is decided before live work is told to stop, so the count does
        // not depend on how fast that work records its own cancellation.
        let reader = journal.clone();
        let (subtree, unfinished) = blocking(move || {
            let tasks = reader.tasks(run)?;
            let mut subtree = vec![task];
            let mut i = 0;
            while i < subtree.len() {
                let parent = subtree[i];
                subtree.extend(tasks.iter().filter(|t| t.parent == Some(parent)).map(|t| t.id));
                i += 1;
            }
            let unfinished: Vec<TaskId> = subtree
                .iter()
                .copied()
                .filter(|id| tasks.iter().any(|t| t.id == *id && !t.status.is_terminal()))
                .collect();
            Ok((subtree, unfinished))
        })
        .await?;
        if let Some(state) = self.live().get(&run).cloned() {
            state.cancel_task(task);
        }
        blocking(move || {
            let n = unfinished.len() as u64;
            for id in &unfinished {
                cancel_record(&journal, *id)?;
            }
            let ids: Vec<u64> = subtree.iter().map(|t| t.0).collect();
            journal.append(
                run,
                NewEntry::new(
                    EntryKind::Event,
                    json!({ "event": "cancelled", "task": task.0, "subtree": ids }),
                ),
            )?;
            Ok(n)
        })
        .await
    }
}

fn cancel_record(journal: &Journal, task: TaskId) -> Result<(), JournalError> {
    match journal.update_task(
        task,
        TaskUpdate { status: Some(TaskStatus::Cancelled), ..TaskUpdate::default() },
    ) {
        Ok(_) | Err(JournalError::TaskFinished { .. }) => Ok(()),
        Err(err) => Err(err),
    }
}
