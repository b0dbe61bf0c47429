//! Subagent teams (SPEC §8, the seed's `council` namespace): persisted leader/subagent
//! ownership, durable iteration budgets, questions to a parent, cancellation of subtrees
//! and orphan recovery.
//!
//! [`Team`] is the handle: a journal, a [`SubagentRunner`] that executes one subagent turn,
//! and a [`TeamConfig`]. [`Team::env`] gives the [`AgentEnv`] of one session, the `env` of
//! the seed, on which `run`, `wait_agents`, `cancel_agent`, `ask`, `checkpoint`,
//! `claim_iteration`, `stop_reason`, `restrict_router` and `routing_change` act; the
//! seed's `db` functions (`controls`, `enabled`, `require_enabled`, `reconcile_orphans`,
//! `wake_allowed`) are methods of [`Team`] over the journal, and pure functions over a
//! [`SessionTree`] in [`rules`]. [`AgentEnv::call_tool`] is the same API as tools: a name
//! and JSON arguments in, JSON out, errors as data; [`AgentEnv::tools`] binds them to a
//! session as registry tools. [`ModelRunner`] is a runner that chats with a model through
//! the session's restricted router; the orchestration tools run an agent's subagents as
//! react-loop calls of its run instead ([`AgentEnv::with_runner`]).
//!
//! Invariants: every session, status, budget claim, answer, the question a turn ends with,
//! checkpoint and route command is in the journal before the call that made it returns; a
//! child inherits its parent's allowlist unchanged, and routers only ever narrow it; a
//! cancelled session is never restarted. What it does not do: keep anything across a
//! restart that the journal does not hold (a question waiting in `ask` is a live exchange
//! and ends with its process), or give children a workspace of their own (children share
//! the checkout).

mod env;
mod runner;
mod tools;

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use clio_journal::{
    Journal, JournalError, NewSession, RunId, SessionId, SessionRecord, SessionStatus,
    SessionUpdate,
};
use serde_json::{Value, json};
use tokio::sync::{oneshot, watch};
use tokio_util::sync::CancellationToken;

use crate::model::Message;

pub use clio_team::rules;
pub use clio_team::{EnabledConfig, SessionAllowlist, SessionTree, TeamError, complete_input};
pub use env::{
    AgentContext, AgentEnv, AskOptions, ReplyOutcome, RestrictedRouter, RouteCommand, RouteIssuer,
    RunOptions, StopReason, TaskSpec, WaitOptions,
};
pub use runner::ModelRunner;
pub use tools::{TEAM_TOOLS, TeamTool};

use clio_team::SessionState;

/// How a team runs subagents.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TeamConfig {
    /// Names this process in the sessions it creates.
    pub owner: String,
    /// Whether sessions may use managed subagents when no session setting decides.
    pub enabled: EnabledConfig,
    /// How many children of one `run` work at once; the rest wait for a slot (16).
    pub max_parallel: usize,
    /// How long `run` and `wait_agents` wait when no `timeout_secs` is given (240).
    pub default_timeout_secs: u64,
    /// The longest wait `run` and `wait_agents` accept; longer ones are cut to it (1800).
    pub max_timeout_secs: u64,
    /// How long `ask` waits for the parent when no `timeout_secs` is given (600).
    pub ask_timeout_secs: u64,
}

impl Default for TeamConfig {
    fn default() -> Self {
        TeamConfig {
            owner: format!("pid-{}", std::process::id()),
            enabled: EnabledConfig { configured: true, invocation: None },
            max_parallel: 16,
            default_timeout_secs: 240,
            max_timeout_secs: 1800,
            ask_timeout_secs: 600,
        }
    }
}

/// What a leader session starts with.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LeaderSettings {
    /// Its own managed-subagents setting; `None` leaves it to the configuration.
    pub enabled: Option<bool>,
    /// The providers and models its requests, and its children's, may go to.
    pub router: SessionAllowlist,
    /// How many model iterations it may claim; `None` is unbounded.
    pub iteration_budget: Option<u64>,
    /// The run whose flow it leads, if any: the team's sessions belong to it (on a shared
    /// journal their writes are fenced by its lease); `None` for a team of no run.
    pub run: Option<RunId>,
}

/// How one subagent turn ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SubagentOutcome {
    /// It answered; an empty answer counts as no answer (`lost`).
    Answer(String),
    /// It ended its turn with a question for its parent; it is idle until a reply wakes it.
    Question(String),
    /// It failed, for the reason given.
    Failed(String),
    /// It stopped without an answer (`lost`).
    Stopped,
}

/// A signal that the subagent was cancelled; the team also drops the runner's future.
#[derive(Debug, Clone)]
pub struct CancelSignal(CancellationToken);

impl CancelSignal {
    /// Returns true once the subagent is cancelled.
    pub fn is_cancelled(&self) -> bool {
        self.0.is_cancelled()
    }

    /// Returns a future that completes when the subagent is cancelled.
    pub fn cancelled(&self) -> impl Future<Output = ()> + Send + '_ {
        self.0.cancelled()
    }
}

/// One turn of a subagent to execute.
#[derive(Debug, Clone)]
pub struct SubagentJob {
    /// The subagent's own env: for `claim_iteration`, `ask`, `checkpoint`, nested `run`,
    /// `restrict_router`.
    pub env: AgentEnv,
    /// Its task.
    pub task: String,
    /// The model it runs on (`account/model` or an id; empty: none chosen).
    pub model: String,
    /// The provider it prefers (empty: the model's own).
    pub provider: String,
    /// The model input to start from: the parent's context and the task, or only the
    /// system prompt and the task, or a consumed checkpoint and the reply that woke it.
    pub messages: Vec<Message>,
    /// The parent's reply when this turn was woken by one.
    pub reply: Option<String>,
    /// Cancellation of this subagent (or an ancestor).
    pub cancel: CancelSignal,
}

/// The future a [`SubagentRunner`] returns.
pub type RunnerFuture = Pin<Box<dyn Future<Output = SubagentOutcome> + Send>>;

/// What [`SubagentRunner::hold`] returns: while it lives, the owner of the runner's turns
/// (a run) stays open. The team drops it once the turn's end is recorded.
pub type TurnHold = Box<dyn std::any::Any + Send>;

/// Executes subagent turns: the react loop in the runtime, a script in tests.
///
/// The future may be dropped at any await point when the subagent is cancelled. A closure
/// `Fn(SubagentJob) -> impl Future<Output = SubagentOutcome>` is a runner.
pub trait SubagentRunner: Send + Sync {
    /// Runs one turn of `job` and says how it ended.
    fn run(&self, job: SubagentJob) -> RunnerFuture;

    /// Called when a turn is queued, before it waits for a slot: returns what keeps the
    /// turn's owner from ending until the turn has ended and its end is recorded, or
    /// `None` when there is nothing to hold (the default). The runtime's runner holds its
    /// run open, so a run whose flow returns right after a team tool started a subagent
    /// waits for that subagent instead of ending before its turn began.
    fn hold(&self) -> Option<TurnHold> {
        None
    }
}

impl<F, Fut> SubagentRunner for F
where
    F: Fn(SubagentJob) -> Fut + Send + Sync,
    Fut: Future<Output = SubagentOutcome> + Send + 'static,
{
    fn run(&self, job: SubagentJob) -> RunnerFuture {
        Box::pin(self(job))
    }
}

/// A subagent's record, as `run`, `wait_agents` and `cancel_agent` return it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentRecord {
    /// The session.
    pub session_id: SessionId,
    /// `queued`, `running`, `idle`, `done`, `failed`, `cancelled` or `lost`; `running`
    /// after a wait means: call `wait_agents` again.
    pub status: String,
    /// Its answer, once done.
    pub answer: Option<String>,
    /// The question it waits on (`ask`, while running) or ended its turn with (idle).
    pub question: Option<String>,
    /// Why it failed.
    pub error: Option<String>,
}

impl AgentRecord {
    /// Returns the record as JSON: `session_id`, `status`, `answer`, `question`, and
    /// `error` when it failed.
    pub fn to_json(&self) -> Value {
        let mut v = json!({
            "session_id": self.session_id.0,
            "status": self.status,
            "answer": self.answer,
            "question": self.question,
        });
        if let (Some(error), Value::Object(map)) = (&self.error, &mut v) {
            map.insert("error".into(), Value::String(error.clone()));
        }
        v
    }
}

/// One session as people and programs read it from the journal, with the team state
/// decoded: what `clio runs tree` shows of a run's team.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionSummary {
    /// The session.
    pub session_id: SessionId,
    /// The leader of its team (`None` for a leader).
    pub leader: Option<SessionId>,
    /// The session that started it.
    pub parent: Option<SessionId>,
    /// Its task team.
    pub team: Option<String>,
    /// As in [`AgentRecord::status`]: `done` without an answer reads `lost`.
    pub status: String,
    /// The model it runs on (empty: none recorded).
    pub model: String,
    /// The task it was started on (empty for a leader).
    pub task: String,
    /// Its answer, once done.
    pub answer: Option<String>,
    /// The question its last turn ended with.
    pub question: Option<String>,
    /// Why it failed, or why its team state does not read back.
    pub error: Option<String>,
    /// The model iterations it claimed.
    pub iterations_used: u64,
    /// Its iteration budget; `None` is unbounded.
    pub iteration_budget: Option<u64>,
}

impl SessionSummary {
    /// Returns the summary of `record`.
    pub fn of(record: &SessionRecord) -> SessionSummary {
        let (state, bad) = match SessionState::of(record) {
            Ok(state) => (state, None),
            Err(err) => (SessionState::default(), Some(err.to_string())),
        };
        let status = shown_status(record.status, state.answer.is_some());
        SessionSummary {
            session_id: record.id.clone(),
            leader: record.leader.clone(),
            parent: record.parent.clone(),
            team: record.team.clone(),
            status: status.to_owned(),
            model: state.model,
            task: state.task,
            answer: state.answer,
            question: state.question,
            error: bad.or(state.error),
            iterations_used: record.iterations_used,
            iteration_budget: record.iteration_budget,
        }
    }

    /// Returns the summary as JSON, one key per field (ids as strings).
    pub fn to_json(&self) -> Value {
        json!({
            "session_id": self.session_id.0,
            "leader": self.leader.as_ref().map(|s| &s.0),
            "parent": self.parent.as_ref().map(|s| &s.0),
            "team": self.team,
            "status": self.status,
            "model": self.model,
            "task": self.task,
            "answer": self.answer,
            "question": self.question,
            "error": self.error,
            "iterations_used": self.iterations_used,
            "iteration_budget": self.iteration_budget,
        })
    }
}

/// A team: sessions in a journal, the runner that executes subagents, and what this
/// process runs now. Cheap to clone.
#[derive(Clone)]
pub struct Team {
    inner: Arc<Inner>,
}

struct Inner {
    journal: Journal,
    runner: Arc<dyn SubagentRunner>,
    config: TeamConfig,
    live: Mutex<HashMap<SessionId, Live>>,
    // Serialises the read-modify-write of a session's status and team state.
    writes: tokio::sync::Mutex<()>,
    changes: watch::Sender<u64>,
    // How many calls this process is making as each leader (`begin_leading`).
    leading: Mutex<HashMap<SessionId, u64>>,
}

/// What this process holds for a session it runs or waits on.
#[derive(Default)]
struct Live {
    token: CancellationToken,
    // True while a spawned turn of it exists in this process (queued or running).
    running: bool,
    // Counts its turns started in this process, so an ending turn removes the entry only
    // when no later turn has started.
    turn: u64,
    ask: Option<PendingAsk>,
}

struct PendingAsk {
    question: String,
    // True once a wait has returned the question to the parent.
    shown: bool,
    reply: oneshot::Sender<String>,
}

impl fmt::Debug for Team {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Team")
            .field("journal", &self.inner.journal)
            .field("config", &self.inner.config)
            .finish_non_exhaustive()
    }
}

/// Runs a journal call on the blocking pool.
async fn blocking<T, F>(f: F) -> Result<T, TeamError>
where
    T: Send + 'static,
    F: FnOnce() -> Result<T, JournalError> + Send + 'static,
{
    match tokio::task::spawn_blocking(f).await {
        Ok(res) => res.map_err(TeamError::from),
        Err(err) => Err(TeamError::WorkerStopped { message: err.to_string() }),
    }
}

fn status_name(status: SessionStatus) -> &'static str {
    match status {
        SessionStatus::Queued => "queued",
        SessionStatus::Running => "running",
        SessionStatus::Idle => "idle",
        SessionStatus::Done => "done",
        SessionStatus::Failed => "failed",
        SessionStatus::Cancelled => "cancelled",
        SessionStatus::Lost => "lost",
    }
}

/// Returns the status callers see: a session done without an answer is `lost`.
fn shown_status(status: SessionStatus, answered: bool) -> &'static str {
    match (status, answered) {
        (SessionStatus::Done, false) => "lost",
        (status, _) => status_name(status),
    }
}

impl Team {
    /// Returns a team on `journal` whose subagents `runner` executes.
    pub fn new(
        journal: Journal,
        runner: impl SubagentRunner + 'static,
        config: TeamConfig,
    ) -> Team {
        let (changes, _) = watch::channel(0);
        Team {
            inner: Arc::new(Inner {
                journal,
                runner: Arc::new(runner),
                config,
                live: Mutex::new(HashMap::new()),
                writes: tokio::sync::Mutex::new(()),
                changes,
                leading: Mutex::new(HashMap::new()),
            }),
        }
    }

    /// Returns the configuration.
    pub fn config(&self) -> &TeamConfig {
        &self.inner.config
    }

    /// Returns the journal.
    pub fn journal(&self) -> &Journal {
        &self.inner.journal
    }

    /// Returns the env of session `session`, with an empty context (see
    /// [`AgentEnv::with_context`]).
    pub fn env(&self, session: SessionId) -> AgentEnv {
        AgentEnv::new(self.clone(), session, AgentContext::default())
    }

    /// Creates a leader session (running, not managed, owned by this process) and returns
    /// its record.
    pub async fn create_leader(
        &self,
        id: SessionId,
        settings: LeaderSettings,
    ) -> Result<SessionRecord, TeamError> {
        let new = NewSession {
            id,
            leader: None,
            parent: None,
            team: None,
            managed: false,
            enabled: settings.enabled,
            status: SessionStatus::Running,
            iteration_budget: settings.iteration_budget,
            router_allowlist: settings.router.encode(),
            owner: self.inner.config.owner.clone(),
            run: settings.run,
        };
        let journal = self.inner.journal.clone();
        blocking(move || journal.create_session(new)).await
    }

    /// Starts a call made as leader `id`: creates the leader session the first time
    /// (running, owned by this process), else marks it running and owned by this process,
    /// as a run resumed by a new process finds it. Pair each with [`Team::end_leading`].
    /// A leader created here belongs to no run (see [`Team::begin_leading_in`]).
    pub async fn begin_leading(&self, id: &SessionId) -> Result<SessionRecord, TeamError> {
        self.begin_leading_in(id, None).await
    }

    /// As [`Team::begin_leading`], for the leader of run `run`'s team: a leader created
    /// here belongs to `run`, and so do the subagents it starts, so that on a shared
    /// journal their writes are fenced by the run's lease as the run's own are.
    pub async fn begin_leading_in(
        &self,
        id: &SessionId,
        run: Option<RunId>,
    ) -> Result<SessionRecord, TeamError> {
        let _guard = self.inner.writes.lock().await;
        let (journal, sid) = (self.inner.journal.clone(), id.clone());
        let found = blocking(move || journal.session(&sid)).await?;
        let owner = self.inner.config.owner.clone();
        let rec = match found {
            None => {
                let settings = LeaderSettings { run, ..LeaderSettings::default() };
                self.create_leader(id.clone(), settings).await?
            }
            Some(rec) if rec.status == SessionStatus::Running && rec.owner == owner => rec,
            Some(_) => {
                let update = SessionUpdate {
                    status: Some(SessionStatus::Running),
                    owner: Some(owner),
                    ..SessionUpdate::default()
                };
                self.update(id, update).await?
            }
        };
        *self.lock_leading().entry(id.clone()).or_insert(0) += 1;
        Ok(rec)
    }

    /// Ends a call made as leader `id`. After the last such call of this process the
    /// leader becomes idle, unless a session it leads is still queued or running: then it
    /// stays running, so that a child's `ask` waits for it.
    pub async fn end_leading(&self, id: &SessionId) -> Result<(), TeamError> {
        let _guard = self.inner.writes.lock().await;
        let last = {
            let mut leading = self.lock_leading();
            match leading.get_mut(id) {
                Some(n) if *n > 1 => {
                    *n -= 1;
                    false
                }
                _ => {
                    leading.remove(id);
                    true
                }
            }
        };
        if !last {
            return Ok(());
        }
        let tree = self.tree().await?;
        let busy = tree.sessions().any(|r| r.leader.as_ref() == Some(id) && r.status.is_live());
        if !busy && tree.get(id).is_some_and(|r| r.status == SessionStatus::Running) {
            let update =
                SessionUpdate { status: Some(SessionStatus::Idle), ..SessionUpdate::default() };
            self.update(id, update).await?;
        }
        Ok(())
    }

    /// Says that the agent leading as `id` has ended its turn: unless a call as `id` is
    /// under way in this process, a running leader becomes idle, so that a child's `ask`
    /// gets no reply at once rather than waiting out its timeout for a parent that will
    /// not answer. The leader is running again at its next team call.
    pub async fn leader_turn_ended(&self, id: &SessionId) -> Result<(), TeamError> {
        let _guard = self.inner.writes.lock().await;
        if self.lock_leading().contains_key(id) {
            return Ok(());
        }
        let (journal, sid) = (self.inner.journal.clone(), id.clone());
        let found = blocking(move || journal.session(&sid)).await?;
        if found.is_some_and(|r| r.status == SessionStatus::Running) {
            let update =
                SessionUpdate { status: Some(SessionStatus::Idle), ..SessionUpdate::default() };
            self.update(id, update).await?;
        }
        Ok(())
    }

    /// Sets (or with `None` clears) the managed-subagents setting of session `sid`.
    pub async fn set_enabled(
        &self,
        sid: &SessionId,
        enabled: Option<bool>,
    ) -> Result<(), TeamError> {
        let update = SessionUpdate { enabled: Some(enabled), ..SessionUpdate::default() };
        self.update(sid, update).await.map(|_| ())
    }

    /// Sets the status of session `sid`, as the runtime does when a leader's turn starts
    /// (`running`) or ends (`idle`).
    pub async fn set_status(
        &self,
        sid: &SessionId,
        status: SessionStatus,
    ) -> Result<(), TeamError> {
        let update = SessionUpdate { status: Some(status), ..SessionUpdate::default() };
        self.update(sid, update).await.map(|_| ())
    }

    /// Returns a snapshot of every session.
    pub async fn tree(&self) -> Result<SessionTree, TeamError> {
        let journal = self.inner.journal.clone();
        blocking(move || journal.sessions()).await.map(SessionTree::new)
    }

    /// Returns the session `sid`, or [`TeamError::SessionNotFound`].
    pub async fn session(&self, sid: &SessionId) -> Result<SessionRecord, TeamError> {
        let (journal, id) = (self.inner.journal.clone(), sid.clone());
        blocking(move || journal.session(&id))
            .await?
            .ok_or_else(|| TeamError::SessionNotFound { session: sid.clone() })
    }

    /// Returns true when `actor` controls `target` ([`rules::controls`]).
    pub async fn controls(&self, actor: &SessionId, target: &SessionId) -> Result<bool, TeamError> {
        Ok(rules::controls(&self.tree().await?, actor, target))
    }

    /// Returns whether session `sid` can use managed subagents ([`rules::enabled`]).
    pub async fn enabled(&self, sid: &SessionId) -> Result<bool, TeamError> {
        rules::enabled(&self.tree().await?, sid, self.inner.config.enabled)
            .ok_or_else(|| TeamError::SessionNotFound { session: sid.clone() })
    }

    /// Refuses new managed work for `sid` with [`TeamError::NotEnabled`] unless it can use
    /// managed subagents; called before a session is bootstrapped or a checkpoint consumed.
    pub async fn require_enabled(&self, sid: &SessionId) -> Result<(), TeamError> {
        if self.enabled(sid).await? {
            Ok(())
        } else {
            Err(TeamError::NotEnabled { session: sid.clone() })
        }
    }

    /// Returns true when a message from `author` may automatically resume `recipient`
    /// ([`rules::wake_allowed`]).
    pub async fn wake_allowed(
        &self,
        author: &SessionId,
        recipient: &SessionId,
    ) -> Result<bool, TeamError> {
        Ok(rules::wake_allowed(&self.tree().await?, author, recipient))
    }

    /// Marks `lost` the children that a dead process left queued or running, sparing any
    /// whose own id, leader or ancestor `live_sids` names (a live process still owns that
    /// team) and any this process runs; returns how many it marked.
    pub async fn reconcile_orphans<S: AsRef<str>>(
        &self,
        live_sids: &[S],
    ) -> Result<u64, TeamError> {
        let mut live: HashSet<SessionId> =
            live_sids.iter().map(|s| SessionId(s.as_ref().to_owned())).collect();
        live.extend(self.lock_live().iter().filter(|(_, l)| l.running).map(|(id, _)| id.clone()));
        let _guard = self.inner.writes.lock().await;
        let orphans = rules::orphans(&self.tree().await?, &live);
        let journal = self.inner.journal.clone();
        let n = blocking(move || {
            let mut n = 0;
            for id in orphans {
                // Checked again inside the write: only a still-live status becomes lost.
                if journal.session(&id)?.is_some_and(|r| r.status.is_live()) {
                    let update =
                        SessionUpdate { status: Some(SessionStatus::Lost), ..Default::default() };
                    journal.update_session(&id, update)?;
                    n += 1;
                }
            }
            Ok(n)
        })
        .await?;
        self.changed();
        Ok(n)
    }

    fn lock_live(&self) -> MutexGuard<'_, HashMap<SessionId, Live>> {
        self.inner.live.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn lock_leading(&self) -> MutexGuard<'_, HashMap<SessionId, u64>> {
        self.inner.leading.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn changed(&self) {
        self.inner.changes.send_modify(|n| *n = n.wrapping_add(1));
    }

    async fn update(
        &self,
        sid: &SessionId,
        update: SessionUpdate,
    ) -> Result<SessionRecord, TeamError> {
        let (journal, id) = (self.inner.journal.clone(), sid.clone());
        let rec = blocking(move || journal.update_session(&id, update)).await?;
        self.changed();
        Ok(rec)
    }

    /// Changes the team state of `sid` with `f`, under the write lock.
    async fn update_state(
        &self,
        sid: &SessionId,
        status: Option<SessionStatus>,
        f: impl FnOnce(&mut SessionState),
    ) -> Result<SessionRecord, TeamError> {
        let _guard = self.inner.writes.lock().await;
        let rec = self.session(sid).await?;
        let mut state = SessionState::of(&rec)?;
        f(&mut state);
        let update = SessionUpdate {
            status,
            checkpoint: Some(state.to_value(sid)?),
            ..SessionUpdate::default()
        };
        self.update(sid, update).await
    }

    /// Returns the cancellation token of `sid`, creating it as a child of `parent`'s.
    fn token(&self, sid: &SessionId, parent: Option<&SessionId>) -> CancellationToken {
        let mut live = self.lock_live();
        if let Some(l) = live.get(sid) {
            return l.token.clone();
        }
        let token = match parent {
            Some(p) => live.entry(p.clone()).or_default().token.child_token(),
            None => CancellationToken::new(),
        };
        live.insert(sid.clone(), Live { token: token.clone(), ..Live::default() });
        token
    }

    /// Returns the record of `rec` as callers see it, with a live question if any.
    fn record_of(&self, rec: &SessionRecord) -> Result<AgentRecord, TeamError> {
        let state = SessionState::of(rec)?;
        let asked =
            self.lock_live().get(&rec.id).and_then(|l| l.ask.as_ref().map(|a| a.question.clone()));
        let status = shown_status(rec.status, state.answer.is_some());
        Ok(AgentRecord {
            session_id: rec.id.clone(),
            status: status.to_owned(),
            answer: state.answer,
            question: asked.or(state.question),
            error: state.error,
        })
    }
}
