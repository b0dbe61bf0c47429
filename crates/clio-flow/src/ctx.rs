//! [`Ctx`]: what a flow calls things through. Every operation is a [`Command`] — data
//! naming what is asked — and its recorded result; the methods here are a thin layer that
//! builds the command, finds its record on replay, or carries it out and records it.
//!
//! Replay identity: each command is identified by the run, the scope it runs in (the task
//! of the flow or worker that makes it), its call site (`#[track_caller]`), a digest of its
//! target and input, and how many times that same command was made before in the scope; or
//! by its `key`.

mod call;
mod gather;

use std::collections::HashMap;
use std::future::Future;
use std::panic::Location;
use std::sync::{Arc, Mutex, PoisonError};

use clio_journal::{EntryKind, NewEntry, Pending, RawEntry, RunId, TaskId, TaskKind, TaskStatus};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;

use crate::command::{AskSchema, Command, object};
use crate::error::FlowError;
use crate::flow::Limits;
use crate::registry::Target;
use crate::result::{CallInput, CallResult};
use crate::runtime::{Question, RunState, blocking, digest};
use crate::workspace::Workspace;

pub(crate) use crate::scope_task::ScopeTask;
pub use call::Call;
pub use gather::{Gather, ReturnWhen, Settled};

/// Where a context's commands run: the flow or worker task that makes them.
pub(crate) struct Scope {
    /// What work this scope is: the run's own flow, a child task's, or a worker's.
    pub(crate) kind: ScopeKind,
    pub(crate) task: ScopeTask,
    pub(crate) options: Map<String, Value>,
    pub(crate) parent: Option<TaskId>,
    pub(crate) prefix: String,
    pub(crate) depth: u64,
    pub(crate) limits: Vec<Limits>,
    pub(crate) model: String,
    pub(crate) cancel: CancellationToken,
    pub(crate) tools: Vec<crate::registry::Tool>,
    pub(crate) seat: Option<Arc<Seat>>,
    /// Whom the work of this scope is for, as the `callers` rule sees a workflow step it
    /// runs: the run's own flow (`Flow`), or the agent or script that asked for the work
    /// (through `run_flow`, `run_workflow` or a script's call), inherited by the flows it
    /// calls.
    pub(crate) origin: crate::gate::Caller,
    /// The agent `"self"` names here: the subagent whose declared flow this work is part
    /// of (its react loop); `None`, the run's own agent.
    pub(crate) this: Option<crate::registry::Worker>,
    /// The plugin whose code this scope runs (its flow's, workflow file's or subagent's);
    /// `None`: no plugin's (the host's or a built-in flow, an agent). Only a plugin's own
    /// code may call its internal subagents.
    pub(crate) plugin: Option<String>,
    occurrences: Mutex<HashMap<String, u64>>,
}

/// What work a scope holds, which also decides its identities' prefix (`prefix`): the
/// run's own flow (no prefix), the work of a child task (`t<task>/`: a flow's, or a
/// contextual tool's), or a worker's (`w<task>/`: an agent's react loop or a handler).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ScopeKind {
    Root,
    Task,
    Worker,
}

/// The agent a context works for, as the team tools need it: which agent a subagent it
/// starts runs as, the team session it acts as, and its conversation so far.
#[derive(Debug, Clone, Default)]
pub(crate) struct Seat {
    /// The target name of the agent (or subagent) whose react loop this context is under.
    pub(crate) agent: String,
    /// The team session the agent is; `None`: the leader of the run.
    pub(crate) session: Option<crate::team::AgentEnv>,
    /// Its conversation when it made the tool call this context serves (empty otherwise).
    pub(crate) messages: Arc<Vec<crate::model::Message>>,
}

/// The flow context: calls, steps, questions, events and views of one flow's run.
///
/// Cheap to clone; every clone is the same scope.
#[derive(Clone)]
pub struct Ctx {
    pub(crate) run: Arc<RunState>,
    pub(crate) scope: Arc<Scope>,
}

impl std::fmt::Debug for Ctx {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ctx").field("run", &self.run.run).field("depth", &self.scope.depth).finish()
    }
}

impl Ctx {
    /// Returns the context of the run's own flow; `plugin` is the plugin whose flow it is
    /// (it may call that plugin's internal subagents).
    pub(crate) fn root(
        run: Arc<RunState>,
        task: ScopeTask,
        options: Map<String, Value>,
        model: String,
        plugin: Option<String>,
    ) -> Ctx {
        let limits = vec![run.limits];
        let cancel = run.cancel.child_token();
        Ctx {
            run,
            scope: Arc::new(Scope {
                kind: ScopeKind::Root,
                task,
                options,
                parent: None,
                prefix: String::new(),
                depth: 0,
                limits,
                model,
                cancel,
                tools: Vec::new(),
                seat: None,
                origin: crate::gate::Caller::Flow,
                this: None,
                plugin,
                occurrences: Mutex::new(HashMap::new()),
            }),
        }
    }

    /// Returns the scope of the work of child task `task`, for the caller to change before
    /// it becomes a context ([`Ctx::with_scope`]): a scope is never changed once work can
    /// see it.
    #[allow(clippy::too_many_arguments, reason = "one place builds child scopes")]
    pub(crate) fn child_scope(
        &self,
        task: TaskId,
        input: &Value,
        options: Map<String, Value>,
        depth: u64,
        limits: Option<Limits>,
        model: String,
        cancel: CancellationToken,
    ) -> Scope {
        let mut chain = self.scope.limits.clone();
        chain.extend(limits);
        Scope {
            kind: ScopeKind::Task,
            task: ScopeTask::copy_of(input),
            options,
            parent: Some(task),
            prefix: format!("t{}/", task.0),
            depth,
            limits: chain,
            model,
            cancel,
            tools: Vec::new(),
            seat: self.scope.seat.clone(),
            origin: self.scope.origin,
            this: self.scope.this.clone(),
            plugin: self.scope.plugin.clone(),
            occurrences: Mutex::new(HashMap::new()),
        }
    }

    /// Returns a context of this run for `scope`.
    /// The registry of the run's runtime: the features built on the engine reach the
    /// runtime through these three, not through its fields.
    pub(crate) fn registry(&self) -> &crate::registry::Registry {
        &self.run.rt.registry
    }

    /// The journal the run is recorded in.
    pub(crate) fn journal(&self) -> &clio_journal::Journal {
        &self.run.rt.journal
    }

    /// The configuration of the run's runtime.
    pub(crate) fn config(&self) -> &crate::runtime::RuntimeConfig {
        &self.run.rt.config
    }

    pub(crate) fn with_scope(&self, scope: Scope) -> Ctx {
        Ctx { run: Arc::clone(&self.run), scope: Arc::new(scope) }
    }

    /// Returns this context with its own cancellation `cancel` (a child of the scope's), for
    /// work that must end when something outside the flow ends it: a team subagent turn
    /// run as a call. Its keyed calls have the same identities as the scope's.
    pub(crate) fn with_cancel(&self, cancel: CancellationToken) -> Ctx {
        let scope = &self.scope;
        Ctx {
            run: Arc::clone(&self.run),
            scope: Arc::new(Scope {
                kind: scope.kind,
                task: scope.task.clone(),
                options: scope.options.clone(),
                parent: scope.parent,
                prefix: scope.prefix.clone(),
                depth: scope.depth,
                limits: scope.limits.clone(),
                model: scope.model.clone(),
                cancel,
                tools: scope.tools.clone(),
                seat: scope.seat.clone(),
                origin: scope.origin,
                this: scope.this.clone(),
                plugin: scope.plugin.clone(),
                occurrences: Mutex::new(HashMap::new()),
            }),
        }
    }

    /// Returns a context of the run's own scope (no identity prefix, no parent task) that
    /// keeps this one's cancellation: for a question that belongs to the run rather than
    /// to the call that asks it, such as the trust question of a plugin, which any of its
    /// calls may be the first to ask.
    pub(crate) fn run_scope(&self) -> Ctx {
        let scope = &self.scope;
        self.with_scope(Scope {
            kind: ScopeKind::Root,
            task: ScopeTask::Value(Value::Null),
            options: Map::new(),
            parent: None,
            prefix: String::new(),
            depth: 0,
            limits: scope.limits.clone(),
            model: scope.model.clone(),
            cancel: scope.cancel.clone(),
            tools: Vec::new(),
            seat: None,
            origin: scope.origin,
            this: None,
            plugin: None,
            occurrences: Mutex::new(HashMap::new()),
        })
    }

    /// Returns the replay identity of a command made at `site` about `what`.
    pub(crate) fn identity(&self, site: &Location<'_>, what: &Value, key: &str) -> String {
        if !key.is_empty() {
            return format!("{}key:{key}", self.scope.prefix);
        }
        let base = format!("{}:{}:{}:{}", site.file(), site.line(), site.column(), digest(what));
        let mut occ = self.scope.occurrences.lock().unwrap_or_else(PoisonError::into_inner);
        let n = match occ.get_mut(&base) {
            Some(n) => {
                *n += 1;
                *n - 1
            }
            None => {
                occ.insert(base.clone(), 1);
                0
            }
        };
        format!("{}{base}#{n}", self.scope.prefix)
    }

    /// Returns the replay identity of a command about `what` made at `file:line:column` as
    /// the `occurrence`-th such command of its site, counted by the front end that made it
    /// (a Python flow's runner counts its own; see `docs/python-flows.md`), or named by
    /// `key` when it is not empty.
    pub(crate) fn identity_at(
        &self,
        file: &str,
        line: u64,
        column: u64,
        occurrence: u64,
        what: &Value,
        key: &str,
    ) -> String {
        if !key.is_empty() {
            return format!("{}key:{key}", self.scope.prefix);
        }
        format!("{}{file}:{line}:{column}:{}#{occurrence}", self.scope.prefix, digest(what))
    }

    /// Returns the run's id.
    pub fn run_id(&self) -> RunId {
        self.run.run
    }

    /// Returns how many flows this run is nested in (0 for the run's own flow).
    pub fn depth(&self) -> u64 {
        self.scope.depth
    }

    /// Returns the task this flow was given.
    pub fn task(&self) -> &Value {
        self.scope.task.get()
    }

    /// Returns the flow's checked options, defaults filled.
    pub fn options(&self) -> &Map<String, Value> {
        &self.scope.options
    }

    /// Returns option `name` converted to `T`, if set and of that type.
    pub fn option<T: DeserializeOwned>(&self, name: &str) -> Option<T> {
        self.scope.options.get(name).and_then(|v| serde_json::from_value(v.clone()).ok())
    }

    /// Returns the handle of the task this context works for (`None` for the run's flow).
    pub fn handle(&self) -> Option<TaskId> {
        self.scope.parent
    }

    /// Returns the conversation's workspace.
    pub fn workspace(&self) -> Workspace {
        let config = &self.run.rt.config;
        Workspace::new(config.workspace.clone()).with_sandbox(config.sandbox.clone())
    }

    /// Returns a call of `target` with `input` (`()` passes the flow's own task). It starts
    /// when awaited, or when passed to [`gather`](Self::gather) or
    /// [`as_completed`](Self::as_completed).
    #[track_caller]
    pub fn call(&self, target: impl Into<Target>, input: impl Into<CallInput>) -> Call {
        Call::new(self.clone(), target.into(), input.into(), Location::caller())
    }

    /// Starts `target` on `input` and returns its task handle once accepted, without
    /// waiting for its result. Tools cannot be started. The run waits for started work
    /// before it ends.
    #[track_caller]
    pub fn start(
        &self,
        target: impl Into<Target>,
        input: impl Into<CallInput>,
    ) -> impl Future<Output = Result<TaskId, FlowError>> {
        let site = Location::caller();
        async move { Call::new(self.clone(), target.into(), input.into(), site).start().await }
    }

    /// Runs this agent's own react loop on `task` inside the flow (a model call).
    #[track_caller]
    pub fn react(
        &self,
        task: impl Into<CallInput>,
    ) -> impl Future<Output = Result<CallResult, FlowError>> {
        let site = Location::caller();
        async move { Call::new(self.clone(), Target::Name("self".into()), task.into(), site).await }
    }

    /// Runs `f` once and records its result; on replay returns the record without running
    /// `f`. Use it for every side effect and every value that could differ on a second run.
    /// An error `f` returns is recorded too and returned again on replay.
    #[track_caller]
    pub fn step<T, F, Fut>(&self, name: &str, f: F) -> impl Future<Output = Result<T, FlowError>>
    where
        T: Serialize + DeserializeOwned,
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<T, FlowError>>,
    {
        let site = Location::caller();
        async move {
            let cmd = Command::Step { name: name.to_owned() };
            let identity = self.identity(site, &cmd.to_json(), "");
            let value = self.recorded_or_run(identity.clone(), cmd, EntryKind::Step, f).await?;
            serde_json::from_value(value)
                .map_err(|e| FlowError::StepFailed { identity, message: e.to_string() })
        }
    }

    /// Runs `f` once as a step recorded under `key` of this scope (`<scope>key:<key>`), as
    /// [`step`](Self::step) does; on replay returns the record without running `f`. A key
    /// names the step by what it is rather than where the code stands, so the code can ask
    /// first whether it is recorded ([`has_step`](Self::has_step)).
    pub(crate) async fn keyed_step<T, F, Fut>(&self, key: &str, f: F) -> Result<T, FlowError>
    where
        T: Serialize + DeserializeOwned,
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<T, FlowError>>,
    {
        let cmd = Command::Step { name: key.to_owned() };
        let identity = format!("{}key:{key}", self.scope.prefix);
        let value = self.recorded_or_run(identity.clone(), cmd, EntryKind::Step, f).await?;
        serde_json::from_value(value)
            .map_err(|e| FlowError::StepFailed { identity, message: e.to_string() })
    }

    /// Says whether the step [`keyed_step`](Self::keyed_step) records under `key` is
    /// recorded already (a replay or a resume will return its record).
    pub(crate) fn has_step(&self, key: &str) -> bool {
        self.run.recorded(&format!("{}key:{key}", self.scope.prefix)).is_some()
    }

    /// Returns the entry recorded under `identity`, which must be of `kind`; `None` when
    /// nothing is recorded there. A different kind is `Nondeterminism` naming `requested`.
    /// (A command with no record must then pass [`RunState::admit`] before it runs.)
    fn recorded_as(
        &self,
        identity: &str,
        kind: EntryKind,
        requested: &str,
    ) -> Result<Option<&RawEntry>, FlowError> {
        match self.run.recorded(identity) {
            Some(entry) if entry.kind == kind => Ok(Some(entry)),
            Some(entry) => Err(FlowError::Nondeterminism {
                identity: identity.to_owned(),
                journaled: format!("{:?}", entry.kind),
                requested: requested.into(),
                unreached: Vec::new(),
            }),
            None => Ok(None),
        }
    }

    pub(crate) async fn recorded_or_run<T, F, Fut>(
        &self,
        identity: String,
        cmd: Command,
        kind: EntryKind,
        f: F,
    ) -> Result<Value, FlowError>
    where
        T: Serialize,
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<T, FlowError>>,
    {
        if let Some(entry) = self.recorded_as(&identity, kind, cmd.name())? {
            let outcome = crate::runtime::outcome(entry);
            return match outcome.error {
                Some(err) => Err(FlowError::from_json(&err)),
                None => Ok(outcome.result.unwrap_or(Value::Null)),
            };
        }
        self.run.check_entry_room()?;
        // Steps run code; events and views only record what the flow says.
        let runs_code = matches!(kind, EntryKind::Step | EntryKind::PermissionReceipt);
        let requested = match &cmd {
            Command::Step { name } => format!("step {name}"),
            other => other.name().to_owned(),
        };
        self.run.admit(&identity, &requested, runs_code).await?;
        if self.run.replay_only {
            // Past the end of an unfinished run's history: an event or view is not recorded.
            return Ok(Value::Null);
        }
        self.run.reserve_entry()?;
        let busy = self.run.activity.busy();
        let res = f().await;
        self.run.count_step();
        let (payload, out) = match res {
            Ok(v) => {
                let v = serde_json::to_value(v).map_err(|e| FlowError::StepFailed {
                    identity: identity.clone(),
                    message: e.to_string(),
                })?;
                (object([("command", cmd.into_json()), ("result", v.clone())]), Ok(v))
            }
            // A run suspended to be resumed leaves the step unrecorded: the resume runs it
            // again.
            Err(err) if self.run.suspension().is_some() => {
                drop(busy);
                return Err(err);
            }
            Err(err) => {
                (object([("command", cmd.into_json()), ("error", err.to_json())]), Err(err))
            }
        };
        let journal = self.run.rt.journal.clone();
        let run = self.run.run;
        let mut entry = NewEntry::new(kind, payload).with_identity(identity);
        entry.task = self.scope.parent;
        journal.nonblocking().append(run, entry).await?;
        drop(busy);
        out
    }

    /// Returns the value logged under `key` in this scope, if the journal holds it.
    /// Returns whether the journal the run was loaded from records the call keyed `key` of
    /// this scope as ended with success (its task succeeded). A call made since the run was
    /// loaded is not counted: this reads what an earlier drive recorded.
    pub(crate) fn call_succeeded(&self, key: &str) -> bool {
        let id = format!("{}key:{key}", self.scope.prefix);
        self.run
            .task_of_call(&id)
            .and_then(|task| self.run.task_status(task))
            .is_some_and(|status| status == clio_journal::TaskStatus::Succeeded)
    }

    /// Returns whether this drive replays a run that ended, strictly: it records nothing,
    /// and a command its history lacks, a view too, is a divergence.
    pub(crate) fn replays_an_ended_run(&self) -> bool {
        self.run.replay_only && !self.run.frontier
    }

    /// Returns how many entries keyed `<prefix>0`, `<prefix>1`, … in a row this scope's
    /// recorded history holds (the live views an earlier drive published), without
    /// counting them as reached.
    pub(crate) fn views_recorded(&self, prefix: &str) -> u64 {
        let mut n = 0;
        while self.run.is_recorded(&format!("{}key:{prefix}{n}", self.scope.prefix)) {
            n += 1;
        }
        n
    }

    pub(crate) fn logged(&self, key: &str) -> Option<Value> {
        let id = format!("{}key:{key}", self.scope.prefix);
        self.run.recorded(&id).map(|e| crate::runtime::outcome(e).result.unwrap_or(Value::Null))
    }

    /// Sends `value` to the journal under `key` of this scope, unless the journal holds
    /// the key already, as one write whose commit it does not wait for; `None` when there
    /// was nothing new to record. The entry's command holds `summary`, not a second copy of
    /// `value`: readers of a logged value read its result.
    ///
    /// The journal commits in the order writes are sent, so any write sent after this one
    /// (a call's task, say) is durable only once this one is: a caller may act on what it
    /// logged before the commit, provided every durable consequence goes through the same
    /// journal, and awaits the returned write later to learn whether it failed.
    pub(crate) fn submit_log(
        &self,
        key: &str,
        summary: Value,
        value: &impl Serialize,
    ) -> Result<Option<Pending<Vec<u64>>>, FlowError> {
        let id = format!("{}key:{key}", self.scope.prefix);
        if self.run.recorded(&id).is_some() {
            return Ok(None);
        }
        if let Some(why) = self.run.suspension() {
            return Err(FlowError::CallInterrupted { handle: None, message: why });
        }
        // A replay records nothing; past the end of an unfinished run's history there is
        // nothing to compare a log with.
        if self.run.replay_only && self.run.frontier {
            return Ok(None);
        }
        if self.run.replay_only {
            return Err(FlowError::Nondeterminism {
                identity: id,
                journaled: "nothing".into(),
                requested: "event".into(),
                unreached: Vec::new(),
            });
        }
        // Encoded straight from `value`: a large log need not be built as a `Value` first.
        #[derive(Serialize)]
        struct Logged<'a, T> {
            command: Value,
            result: &'a T,
        }
        let command = Command::Event { event: summary }.into_json();
        let text = serde_json::value::to_raw_value(&Logged { command, result: value })
            .map_err(|e| FlowError::StepFailed { identity: id.clone(), message: e.to_string() })?;
        self.run.reserve_entry()?;
        let mut entry = NewEntry::from_text(EntryKind::Event, text).with_identity(id);
        entry.task = self.scope.parent;
        Ok(Some(self.run.rt.journal.nonblocking().append_batch(self.run.run, vec![entry])))
    }

    /// Returns the time in milliseconds since the Unix epoch, read once and recorded.
    #[track_caller]
    pub fn now_ms(&self) -> impl Future<Output = Result<u64, FlowError>> {
        let site = Location::caller();
        async move {
            let cmd = Command::Step { name: "now".into() };
            let identity = self.identity(site, &cmd.to_json(), "");
            let v = self
                .recorded_or_run(identity, cmd, EntryKind::Step, || async {
                    Ok(crate::clock::now_ms())
                })
                .await?;
            Ok(v.as_u64().unwrap_or(0))
        }
    }

    /// Records `event` (a mapping) in the run, once; `SemanticEvent` hooks observe it.
    #[track_caller]
    pub fn record_event(&self, event: Value) -> impl Future<Output = Result<(), FlowError>> {
        let site = Location::caller();
        async move {
            let cmd = Command::Event { event };
            let identity = self.identity(site, &cmd.to_json(), "");
            self.record_event_as(identity, cmd).await
        }
    }

    /// Records event command `cmd` under `identity`, as [`Ctx::record_event`] does.
    pub(crate) async fn record_event_as(
        &self,
        identity: String,
        cmd: Command,
    ) -> Result<(), FlowError> {
        let observed = crate::gate::semantic_events_observed(self)?.then(|| cmd.clone());
        self.recorded_or_run(identity.clone(), cmd, EntryKind::Event, || async { Ok(Value::Null) })
            .await?;
        match observed {
            Some(cmd) => crate::gate::semantic_event(self, &identity, &cmd).await,
            None => Ok(()),
        }
    }

    /// Replaces the run's live view, which the run card draws; the last view recorded is
    /// the current one. `SemanticEvent` hooks observe it.
    ///
    /// A view's identity is its call site and occurrence only: what it shows is not digested
    /// (a view can be large and is published often), and a replay that would draw a
    /// different view is not a different run.
    #[track_caller]
    pub fn publish(&self, view: Value) -> impl Future<Output = Result<(), FlowError>> {
        let site = Location::caller();
        async move {
            let identity = self.identity(site, &json!({ "command": "publish" }), "");
            self.publish_as(identity, view).await
        }
    }

    /// Publishes `view` under `identity`, as [`Ctx::publish`] does.
    pub(crate) async fn publish_as(&self, identity: String, view: Value) -> Result<(), FlowError> {
        let cmd = Command::Publish { view };
        // The view moves into its record; a copy is kept only for hooks that observe it.
        let observed = crate::gate::semantic_events_observed(self)?.then(|| cmd.clone());
        self.recorded_or_run(identity.clone(), cmd, EntryKind::View, || async { Ok(Value::Null) })
            .await?;
        match observed {
            Some(cmd) => crate::gate::semantic_event(self, &identity, &cmd).await,
            None => Ok(()),
        }
    }

    /// As [`Ctx::publish`], named by `key` instead of its call site (so that editing the
    /// code around it does not rename it), with the view given as JSON text, so that a
    /// large view need not be built as a `Value`: `view` builds it as one only for hooks
    /// that observe it. The record is the one `publish` writes.
    ///
    /// The write is sent and not waited for (a view is no step: nothing depends on its
    /// being durable, and the journal commits it before anything sent after it), unless
    /// hooks observe it; the caller awaits the returned write later to learn whether it
    /// failed. `None` when nothing was sent.
    pub(crate) fn publish_text(
        &self,
        key: &str,
        text: Box<serde_json::value::RawValue>,
        view: impl FnOnce() -> Value,
    ) -> impl Future<Output = Result<Option<Pending<Vec<u64>>>, FlowError>> {
        let identity = format!("{}key:{key}", self.scope.prefix);
        async move {
            let recorded = self.recorded_as(&identity, EntryKind::View, "publish")?.is_some();
            if !recorded {
                self.run.admit(&identity, "publish", false).await?;
            }
            let mut sent = None;
            // A replay past the end of an unfinished run's history records nothing.
            if !recorded && !self.run.replay_only {
                #[derive(Serialize)]
                struct Published<'a> {
                    command: &'static str,
                    view: &'a serde_json::value::RawValue,
                }
                #[derive(Serialize)]
                struct Record<'a> {
                    command: Published<'a>,
                    result: (),
                }
                let record =
                    Record { command: Published { command: "publish", view: &text }, result: () };
                let payload = serde_json::value::to_raw_value(&record).map_err(|e| {
                    FlowError::StepFailed { identity: identity.clone(), message: e.to_string() }
                })?;
                self.run.reserve_entry()?;
                self.run.count_step();
                let mut entry =
                    NewEntry::from_text(EntryKind::View, payload).with_identity(identity.clone());
                entry.task = self.scope.parent;
                sent =
                    Some(self.run.rt.journal.nonblocking().append_batch(self.run.run, vec![entry]));
            }
            if crate::gate::semantic_events_observed(self)? {
                // Hooks see a view once it is durable, as they see every other command.
                if let Some(write) = sent.take() {
                    let _busy = self.run.activity.busy();
                    write.await?;
                }
                let cmd = Command::Publish { view: view() };
                crate::gate::semantic_event(self, &identity, &cmd).await?;
            }
            Ok(sent)
        }
    }

    /// Asks the person `question` and waits for the answer as text, however long it takes,
    /// across restarts.
    #[track_caller]
    pub fn ask(&self, question: &str) -> impl Future<Output = Result<String, FlowError>> {
        let site = Location::caller();
        async move {
            let v = self.ask_with(site, question, AskSchema::Text, &[], "", "").await?;
            Ok(v.as_str().unwrap_or("").to_owned())
        }
    }

    /// Asks a yes-or-no `question` and returns the answer as a bool.
    #[track_caller]
    pub fn ask_bool(&self, question: &str) -> impl Future<Output = Result<bool, FlowError>> {
        let site = Location::caller();
        async move {
            let v = self.ask_with(site, question, AskSchema::Bool, &[], "", "").await?;
            Ok(v.as_bool().unwrap_or(false))
        }
    }

    /// Offers `options` and returns the chosen one's value: its text in lowercase.
    #[track_caller]
    pub fn ask_choice(
        &self,
        question: &str,
        options: &[&str],
    ) -> impl Future<Output = Result<String, FlowError>> {
        let site = Location::caller();
        async move {
            let v = self.ask_with(site, question, AskSchema::Options, options, "", "").await?;
            Ok(v.as_str().unwrap_or("").to_owned())
        }
    }

    /// Asks with every argument of the seed: `schema` is [`AskSchema::Text`], `Bool` or
    /// `Options`,
    /// `reason` is recorded with the question, `key` names it stably. Returns the answer's
    /// value (text, bool, or lowercase option).
    #[track_caller]
    pub fn ask_full(
        &self,
        question: &str,
        schema: AskSchema,
        options: &[&str],
        reason: &str,
        key: &str,
    ) -> impl Future<Output = Result<Value, FlowError>> {
        let site = Location::caller();
        async move { self.ask_with(site, question, schema, options, reason, key).await }
    }

    pub(crate) async fn ask_with(
        &self,
        site: &Location<'_>,
        question: &str,
        schema: AskSchema,
        options: &[&str],
        reason: &str,
        key: &str,
    ) -> Result<Value, FlowError> {
        let cmd = Command::Ask {
            question: question.to_owned(),
            schema,
            options: options.iter().map(|o| o.to_lowercase()).collect(),
            reason: reason.to_owned(),
        };
        let identity = self.identity(site, &cmd.to_json(), key);
        self.ask_as(identity, cmd).await
    }

    /// Asks question command `cmd` (a [`Command::Ask`]) under `identity` and waits for
    /// its answer, as [`Ctx::ask_full`] does.
    pub(crate) async fn ask_as(&self, identity: String, cmd: Command) -> Result<Value, FlowError> {
        let payload = cmd.to_json();
        let question = match &cmd {
            Command::Ask { question, .. } => question.clone(),
            _ => String::new(),
        };
        let seq = match self.recorded_as(&identity, EntryKind::Question, "ask")? {
            Some(entry) => entry.seq,
            None => {
                self.run.check_entry_room()?;
                self.run.admit(&identity, &format!("ask {question:?}"), true).await?;
                self.run.reserve_entry()?;
                let _busy = self.run.activity.busy();
                let journal = self.run.rt.journal.clone();
                let run = self.run.run;
                let mut entry = NewEntry::new(EntryKind::Question, payload.clone())
                    .with_identity(identity.clone());
                entry.task = self.scope.parent;
                journal.nonblocking().append(run, entry).await?
            }
        };
        let q = Question::from_payload(self.run.run, seq, &payload);
        let answer_id = format!("{identity}@answer");
        tokio::select! {
            res = self.run.wait_answer(&answer_id, q) => res,
            () = self.scope.cancel.cancelled() => Err(FlowError::CallCancelled { handle: self.scope.parent }),
        }
    }

    /// Returns a recorded snapshot of the run's tool-permission decisions; `refresh` takes a
    /// new one. It describes history, never current permission.
    #[track_caller]
    pub fn permission_receipts(
        &self,
        refresh: bool,
    ) -> impl Future<Output = Result<Value, FlowError>> {
        let site = Location::caller();
        async move {
            let cmd = Command::Step { name: format!("permission_receipts:{refresh}") };
            let key = if refresh { String::new() } else { "permission_receipts".to_owned() };
            let identity = self.identity(site, &cmd.to_json(), &key);
            self.permission_receipts_as(identity, refresh).await
        }
    }

    /// Takes (or replays) the snapshot of permission decisions under `identity`, as
    /// [`Ctx::permission_receipts`] does.
    pub(crate) async fn permission_receipts_as(
        &self,
        identity: String,
        refresh: bool,
    ) -> Result<Value, FlowError> {
        let cmd = Command::Step { name: format!("permission_receipts:{refresh}") };
        let journal = self.run.rt.journal.clone();
        let run = self.run.run;
        self.recorded_or_run(identity, cmd, EntryKind::PermissionReceipt, || async move {
            let entries = blocking(move || journal.entries(run)).await?;
            let receipts: Vec<Value> = entries
                .into_iter()
                .filter(|e| {
                    e.kind == EntryKind::PermissionReceipt && e.payload.get("command").is_none()
                })
                .map(|e| e.payload)
                .collect();
            Ok(Value::Array(receipts))
        })
        .await
    }

    /// Returns the finished tool results of child `handle`, read without starting any work.
    pub async fn tool_results(&self, handle: TaskId) -> Result<Vec<Value>, FlowError> {
        let journal = self.run.rt.journal.clone();
        let run = self.run.run;
        let tasks = blocking(move || journal.tasks(run)).await?;
        Ok(tasks
            .into_iter()
            .filter(|t| t.parent == Some(handle) && t.kind == TaskKind::Tool && t.status == TaskStatus::Succeeded)
            .map(|t| json!({ "handle": t.id.0, "tool": t.target, "value": t.result.and_then(|r| r.get("value").cloned()) }))
            .collect())
    }

    /// Runs several calls together; see [`Gather`] for `limit`, `return_when` and
    /// `return_exceptions`. With `return_when = any`, which call won is recorded, and a
    /// replay returns the same one.
    #[track_caller]
    pub fn gather(&self, calls: Vec<Call>) -> Gather {
        Gather::new(calls, self.order(Location::caller()))
    }

    /// Yields each call's result as it settles, in finishing order, each with its index.
    /// The order is recorded: a resumed or replayed run gets the results it had already
    /// seen in the same order, then the rest as they settle.
    #[track_caller]
    pub fn as_completed(
        &self,
        calls: Vec<Call>,
        limit: usize,
    ) -> impl futures::Stream<Item = Settled> + Send + 'static {
        gather::as_completed(calls, limit, self.order(Location::caller()))
    }

    /// Returns where a gather or stream built at `site` records its delivery order.
    fn order(&self, site: &Location<'_>) -> gather::Order {
        let identity = self.identity(site, &Value::String("select".into()), "");
        gather::Order { ctx: self.clone(), identity }
    }

    /// Returns a gather of `calls` whose delivery order is recorded under `identity` (a
    /// front end's own site for it).
    pub(crate) fn gather_as(&self, calls: Vec<Call>, identity: String) -> Gather {
        Gather::new(calls, gather::Order { ctx: self.clone(), identity })
    }

    /// Returns an `as_completed` stream of `calls` whose delivery order is recorded under
    /// `identity`.
    pub(crate) fn as_completed_as(
        &self,
        calls: Vec<Call>,
        limit: usize,
        identity: String,
    ) -> impl futures::Stream<Item = Settled> + Send + 'static {
        gather::as_completed(calls, limit, gather::Order { ctx: self.clone(), identity })
    }

    /// Returns whether this run takes the code path added by the patch named `id`: `true`
    /// for a run that reaches this point past the end of its recorded history (a new run,
    /// or a resumed one whose history stops before here), `false` for a run whose history
    /// was recorded by code from before the patch. Use it to change a flow's code without
    /// breaking the runs in progress:
    ///
    /// ```text
    /// if ctx.patched("check-units").await? {
    ///     ctx.call("unit_checker", &draft).await?;   // new code
    /// }
    /// ```
    ///
    /// The answer is recorded (`<scope>key:patch:<id>`) and stays the same for the run.
    pub fn patched(&self, id: &str) -> impl Future<Output = Result<bool, FlowError>> {
        let identity = format!("{}key:patch:{id}", self.scope.prefix);
        async move {
            if self.run.recorded(&identity).is_some() {
                return Ok(true);
            }
            if let Some(known) = self.run.patch_decided(&identity) {
                return Ok(known);
            }
            let past = self.run.past_history(&identity).await;
            let past = self.run.decide_patch(&identity, past);
            if past && !self.run.replay_only {
                let payload = json!({
                    "command": { "command": "event", "event": { "patched": id } },
                    "result": true,
                });
                let mut entry =
                    NewEntry::new(EntryKind::Event, payload).with_identity(identity.clone());
                entry.task = self.scope.parent;
                self.run.reserve_entry()?;
                let _busy = self.run.activity.busy();
                self.run.rt.journal.nonblocking().append(self.run.run, entry).await?;
            }
            Ok(past)
        }
    }
}
