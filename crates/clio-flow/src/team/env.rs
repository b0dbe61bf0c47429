//! [`AgentEnv`]: one session's view of its team, the `env` of the seed's functions, and
//! what it needs to start children: `run`, `wait_agents`, `cancel_agent`, `ask` (and the
//! parent's `reply`), `checkpoint`, `claim_iteration`, `stop_reason`, `restrict_router`,
//! `routing_change`.

use std::fmt;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use clio_journal::{NewSession, SessionId, SessionRecord, SessionStatus};
use clio_spec::Requires;
use clio_team::{SessionAllowlist, SessionState, StoredRoute, complete_input};
use futures::FutureExt;
use serde_json::{Value, json};
use tokio::sync::{Semaphore, oneshot};

use crate::model::{Message, ModelError, ModelRequest, ModelResponse, Models, RouterAllowlist};
use crate::team::{
    AgentRecord, CancelSignal, PendingAsk, SubagentJob, SubagentOutcome, SubagentRunner, Team,
    TeamError, blocking, rules,
};

/// What a session's children inherit from it: its model, provider and whole context.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AgentContext {
    /// The model it runs on.
    pub model: String,
    /// The provider it runs on (empty: the model's own).
    pub provider: String,
    /// Its model input so far, system prompt first.
    pub messages: Vec<Message>,
}

/// One task of `run`: a text, or a text with a model, provider, budget and context.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TaskSpec {
    /// What the subagent is to do.
    pub task: String,
    /// The model it runs on; `None` uses the parent's.
    pub model: Option<String>,
    /// The provider it runs on; `None` uses the parent's.
    pub provider: Option<String>,
    /// How many model iterations it may claim, across replies, turns and restarts.
    pub iteration_budget: Option<u64>,
    /// `"full"` gives a child on another model the parent's whole context; `"task"` gives
    /// any child only the system prompt and its task. `None`: full on the parent's model,
    /// task on another.
    pub context: Option<String>,
}

impl From<&str> for TaskSpec {
    fn from(task: &str) -> Self {
        TaskSpec { task: task.to_owned(), ..TaskSpec::default() }
    }
}

impl From<String> for TaskSpec {
    fn from(task: String) -> Self {
        TaskSpec { task, ..TaskSpec::default() }
    }
}

/// Options of `run`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunOptions {
    /// How long to wait, in seconds (default 240, at most 1800; longer is cut to it).
    pub timeout_secs: Option<u64>,
    /// The task team the children share; `None` gives them a team of their own.
    pub team: Option<String>,
}

/// Options of `wait_agents`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WaitOptions {
    /// How long to wait, in seconds (as `run`).
    pub timeout_secs: Option<u64>,
}

/// Options of `ask`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AskOptions {
    /// How long to wait for the reply, in seconds (default 600).
    pub timeout_secs: Option<u64>,
}

/// What a parent's `reply` did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplyOutcome {
    /// The child was waiting in `ask` and has the reply.
    Delivered,
    /// The child was idle with a question; a new turn started from its checkpoint.
    Woken,
}

/// Why `claim_iteration` refuses a session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StopReason {
    /// Its whole iteration budget is claimed.
    BudgetExhausted {
        /// Iterations claimed.
        used: u64,
        /// Its budget.
        budget: u64,
    },
    /// It was cancelled (with its descendants).
    Cancelled,
    /// It has ended (`done`, `failed` or `lost`).
    Ended {
        /// Its status.
        status: String,
    },
}

impl fmt::Display for StopReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StopReason::BudgetExhausted { used, budget } => {
                write!(f, "iteration budget exhausted ({used} of {budget} used)")
            }
            StopReason::Cancelled => f.write_str("the session was cancelled"),
            StopReason::Ended { status } => write!(f, "the session has ended ({status})"),
        }
    }
}

impl StopReason {
    /// Returns the reason as JSON: `{"reason", "message"}` plus the budget figures.
    pub fn to_json(&self) -> Value {
        let reason = match self {
            StopReason::BudgetExhausted { .. } => "budget_exhausted",
            StopReason::Cancelled => "cancelled",
            StopReason::Ended { .. } => "ended",
        };
        let mut v = json!({ "reason": reason, "message": self.to_string() });
        if let (StopReason::BudgetExhausted { used, budget }, Value::Object(map)) = (self, &mut v) {
            map.insert("used".into(), json!(used));
            map.insert("budget".into(), json!(budget));
        }
        v
    }
}

/// Who issued a route command. A manual pick is not one: it is composer state that the
/// next submitted turn snapshots, so it never re-routes a running turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RouteIssuer {
    /// The agent's own routing.
    AgentRouting,
    /// The engine's authentication rescue.
    AuthRescue,
}

impl RouteIssuer {
    fn name(self) -> &'static str {
        match self {
            RouteIssuer::AgentRouting => "agent_routing",
            RouteIssuer::AuthRescue => "auth_rescue",
        }
    }
}

/// A route command issued for a session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouteCommand {
    /// Its number; commands of a session are numbered from 1.
    pub seq: u64,
    /// The provider preferred.
    pub provider: String,
    /// The model preferred.
    pub model: String,
    /// The command, as its issuer named it.
    pub command: String,
    /// Who issued it (`agent_routing` or `auth_rescue`).
    pub issuer: String,
}

impl RouteCommand {
    /// Returns `{"preference": {"provider", "model"}, "command", "seq", "issuer"}`.
    pub fn to_json(&self) -> Value {
        json!({
            "preference": { "provider": self.provider, "model": self.model },
            "command": self.command,
            "seq": self.seq,
            "issuer": self.issuer,
        })
    }
}

/// A model router held to a session's inherited allowlist: every request, every retry and
/// every automatic fallback goes through it.
#[derive(Debug, Clone)]
pub struct RestrictedRouter {
    models: Models,
    allow: RouterAllowlist,
}

impl RestrictedRouter {
    /// Returns the allowlist it applies.
    pub fn allowlist(&self) -> &RouterAllowlist {
        &self.allow
    }

    /// Returns this router narrowed further by `extra`; it never widens.
    pub fn restrict(mut self, extra: &RouterAllowlist) -> RestrictedRouter {
        self.allow = self.allow.restrict(extra);
        self
    }

    /// Sends `request` held to `requires` and the allowlist; fallbacks the allowlist does
    /// not allow are skipped.
    pub async fn complete(
        &self,
        request: &ModelRequest,
        requires: &Requires,
    ) -> Result<ModelResponse, ModelError> {
        self.models.complete(request, requires, &self.allow).await
    }
}

/// One session's view of its team: the `env` of the seed's functions.
#[derive(Clone)]
pub struct AgentEnv {
    team: Team,
    session: SessionId,
    context: AgentContext,
    // Runs the turns this env starts, instead of the team's runner.
    runner: Option<Arc<dyn SubagentRunner>>,
}

impl fmt::Debug for AgentEnv {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AgentEnv").field("session", &self.session).finish_non_exhaustive()
    }
}

impl AgentEnv {
    pub(super) fn new(team: Team, session: SessionId, context: AgentContext) -> AgentEnv {
        AgentEnv { team, session, context, runner: None }
    }

    /// Returns this env with `context` as what children inherit.
    pub fn with_context(mut self, context: AgentContext) -> AgentEnv {
        self.context = context;
        self
    }

    /// Returns this env with `runner` running the subagent turns it starts (`run`,
    /// `reply`) instead of the team's runner: the runtime passes one that runs each turn
    /// as a call of the run that asked for it. The children's own envs keep it.
    pub fn with_runner(mut self, runner: impl SubagentRunner + 'static) -> AgentEnv {
        self.runner = Some(Arc::new(runner));
        self
    }

    /// Returns the runner of the turns this env starts.
    pub(super) fn runner(&self) -> Option<&Arc<dyn SubagentRunner>> {
        self.runner.as_ref()
    }

    /// Returns an env of `session` in the same team with this env's runner.
    fn sibling(&self, session: SessionId, context: AgentContext) -> AgentEnv {
        AgentEnv {
            runner: self.runner.clone(),
            ..AgentEnv::new(self.team.clone(), session, context)
        }
    }

    /// Returns the session.
    pub fn session(&self) -> &SessionId {
        &self.session
    }

    /// Returns the team.
    pub fn team(&self) -> &Team {
        &self.team
    }

    /// Returns the context children inherit.
    pub fn context(&self) -> &AgentContext {
        &self.context
    }

    fn timeout(&self, secs: Option<u64>) -> Duration {
        let config = self.team.config();
        Duration::from_secs(
            secs.unwrap_or(config.default_timeout_secs).min(config.max_timeout_secs),
        )
    }

    /// Runs each task in its own subagent and waits for all of them, up to `timeout_secs`.
    ///
    /// Refuses with [`TeamError::NotEnabled`] before creating any session when this session
    /// cannot use managed subagents. More than `max_parallel` (16) tasks start as earlier
    /// ones finish. A record still `running` after the wait means: call `wait_agents`. The
    /// wait also ends early when a child asks a question not shown before, so the parent
    /// can `reply`.
    pub async fn run(
        &self,
        tasks: Vec<TaskSpec>,
        opts: RunOptions,
    ) -> Result<Vec<AgentRecord>, TeamError> {
        for (index, spec) in tasks.iter().enumerate() {
            if spec.task.trim().is_empty() {
                return Err(TeamError::InvalidTask { index, problem: "the task is empty".into() });
            }
            if let Some(context) =
                spec.context.as_deref().filter(|c| !matches!(*c, "full" | "task"))
            {
                return Err(TeamError::InvalidTask {
                    index,
                    problem: format!("context must be \"full\" or \"task\", not {context:?}"),
                });
            }
        }
        let timeout = self.timeout(opts.timeout_secs);
        self.team.require_enabled(&self.session).await?;
        let parent = self.team.session(&self.session).await?;
        let slots = Arc::new(Semaphore::new(self.team.config().max_parallel.max(1)));
        let mut ids = Vec::with_capacity(tasks.len());
        let mut task_team = opts.team.clone();
        for spec in tasks {
            let rec = self.create_child(&parent, &spec, &mut task_team).await?;
            let messages = self.child_messages(&spec);
            let model = spec.model.clone().unwrap_or_else(|| self.context.model.clone());
            let provider = spec.provider.clone().unwrap_or_else(|| self.context.provider.clone());
            let state = SessionState {
                task: spec.task.clone(),
                model: model.clone(),
                provider: provider.clone(),
                ..SessionState::default()
            };
            self.team.update_state(&rec.id, None, |s| *s = state).await?;
            let env = self.sibling(
                rec.id.clone(),
                AgentContext {
                    model: model.clone(),
                    provider: provider.clone(),
                    messages: Vec::new(),
                },
            );
            let job = SubagentJob {
                env,
                task: spec.task,
                model,
                provider,
                messages,
                reply: None,
                cancel: CancelSignal(self.team.token(&rec.id, Some(&self.session))),
            };
            self.team.spawn_turn(job, Arc::clone(&slots));
            ids.push(rec.id);
        }
        self.team.wait_for(&ids, timeout).await
    }

    async fn create_child(
        &self,
        parent: &SessionRecord,
        spec: &TaskSpec,
        task_team: &mut Option<String>,
    ) -> Result<SessionRecord, TeamError> {
        let tree = self.team.tree().await?;
        let mut n = tree.sessions().filter(|r| r.parent.as_ref() == Some(&parent.id)).count() + 1;
        let allow = SessionAllowlist::decode(parent.router_allowlist.as_deref());
        loop {
            let id = SessionId(format!("{}.{n}", parent.id));
            let team = task_team.get_or_insert_with(|| id.0.clone()).clone();
            let new = NewSession {
                id: id.clone(),
                leader: Some(parent.leader.clone().unwrap_or_else(|| parent.id.clone())),
                parent: Some(parent.id.clone()),
                team: Some(team),
                managed: true,
                // A new session starts without its source's settings.
                enabled: None,
                status: SessionStatus::Queued,
                iteration_budget: spec.iteration_budget,
                router_allowlist: allow.encode(),
                owner: self.team.config().owner.clone(),
                // A child belongs to the run its parent belongs to.
                run: parent.run,
            };
            let journal = self.team.journal().clone();
            match blocking(move || journal.create_session(new)).await {
                Err(TeamError::SessionExists { .. }) => n += 1,
                other => return other,
            }
        }
    }

    fn child_messages(&self, spec: &TaskSpec) -> Vec<Message> {
        let other_model = spec.model.as_ref().is_some_and(|m| *m != self.context.model)
            || spec.provider.as_ref().is_some_and(|p| *p != self.context.provider);
        let full = match spec.context.as_deref() {
            Some("full") => true,
            Some(_) => false,
            None => !other_model,
        };
        let mut messages: Vec<Message> = if full {
            self.context.messages.clone()
        } else {
            self.context
                .messages
                .iter()
                .take_while(|m| matches!(m, Message::System { .. }))
                .cloned()
                .collect()
        };
        messages.push(Message::user(spec.task.clone()));
        messages
    }

    /// Waits again for subagents by `ids` (`None`: all of this session's children), with
    /// the same records and timeout as `run`.
    pub async fn wait_agents(
        &self,
        ids: Option<Vec<SessionId>>,
        opts: WaitOptions,
    ) -> Result<Vec<AgentRecord>, TeamError> {
        let tree = self.team.tree().await?;
        let ids = match ids {
            Some(ids) => {
                for id in &ids {
                    if tree.get(id).is_none() {
                        return Err(TeamError::SessionNotFound { session: id.clone() });
                    }
                    if !rules::controls(&tree, &self.session, id) {
                        return Err(TeamError::NotControlled {
                            actor: self.session.clone(),
                            target: id.clone(),
                        });
                    }
                }
                ids
            }
            None => tree
                .sessions()
                .filter(|r| r.parent.as_ref() == Some(&self.session))
                .map(|r| r.id.clone())
                .collect(),
        };
        self.team.wait_for(&ids, self.timeout(opts.timeout_secs)).await
    }

    /// Cancels subagent `target` and its descendants, queued work included, and returns
    /// its record.
    pub async fn cancel_agent(&self, target: &SessionId) -> Result<AgentRecord, TeamError> {
        let tree = self.team.tree().await?;
        let rec = tree
            .get(target)
            .ok_or_else(|| TeamError::SessionNotFound { session: target.clone() })?;
        if !rules::controls(&tree, &self.session, target) {
            return Err(TeamError::NotControlled {
                actor: self.session.clone(),
                target: target.clone(),
            });
        }
        let mut doomed = vec![rec.id.clone()];
        doomed.extend(tree.descendants(target));
        // The journal first, so a wait that sees a turn end reads its final status.
        let guard = self.team.inner.writes.lock().await;
        let (journal, ids) = (self.team.journal().clone(), doomed.clone());
        let rec = blocking(move || {
            for id in &ids {
                if journal.session(id)?.is_some_and(|r| !r.status.is_terminal()) {
                    let update = clio_journal::SessionUpdate {
                        status: Some(SessionStatus::Cancelled),
                        ..Default::default()
                    };
                    journal.update_session(id, update)?;
                }
            }
            journal.session(&ids[0])
        })
        .await?;
        drop(guard);
        {
            let mut live = self.team.lock_live();
            for id in &doomed {
                if let Some(l) = live.get_mut(id) {
                    l.token.cancel();
                    l.ask = None;
                }
            }
        }
        self.team.changed();
        let rec = rec.ok_or_else(|| TeamError::SessionNotFound { session: target.clone() })?;
        self.team.record_of(&rec)
    }

    /// As a subagent, asks the parent `question` and waits for the reply text.
    ///
    /// Returns `None` when the parent is not running (or stops running while the child
    /// waits) or does not reply within `timeout_secs` (default 600): then choose the
    /// safest option and say so in the answer. Fails with [`TeamError::NoParent`] for a session without a parent.
    pub async fn ask(&self, question: &str, opts: AskOptions) -> Result<Option<String>, TeamError> {
        let rec = self.team.session(&self.session).await?;
        let parent =
            rec.parent.ok_or_else(|| TeamError::NoParent { session: self.session.clone() })?;
        if !self.team.is_running(&parent).await? {
            return Ok(None);
        }
        let (tx, mut rx) = oneshot::channel();
        let mut changes = self.team.inner.changes.subscribe();
        {
            let mut live = self.team.lock_live();
            let l = live.entry(self.session.clone()).or_default();
            l.ask = Some(PendingAsk { question: question.to_owned(), shown: false, reply: tx });
        }
        self.team.changed();
        let secs = opts.timeout_secs.unwrap_or(self.team.config().ask_timeout_secs);
        let deadline = tokio::time::Instant::now() + Duration::from_secs(secs);
        let reply = loop {
            tokio::select! {
                reply = &mut rx => break reply.ok(),
                () = tokio::time::sleep_until(deadline) => break None,
                changed = changes.changed() => {
                    // A parent whose turn ended, or that was cancelled, will not reply.
                    if changed.is_err() || !self.team.is_running(&parent).await? {
                        break rx.try_recv().ok();
                    }
                }
            }
        };
        if let Some(l) = self.team.lock_live().get_mut(&self.session) {
            l.ask = None;
        }
        self.team.changed();
        Ok(reply)
    }

    /// Replies `text` to child `child`: delivers it to a waiting `ask`, or wakes a child
    /// that ended its turn (idle with a question, or done) for a new turn from its
    /// checkpoint, if [`rules::wake_allowed`] and managed work is enabled. Its iteration
    /// budget carries over.
    pub async fn reply(&self, child: &SessionId, text: &str) -> Result<ReplyOutcome, TeamError> {
        let rec = self.team.session(child).await?;
        if rec.parent.as_ref() != Some(&self.session) {
            return Err(TeamError::NotControlled {
                actor: self.session.clone(),
                target: child.clone(),
            });
        }
        let pending = self.team.lock_live().get_mut(child).and_then(|l| l.ask.take());
        if let Some(ask) = pending
            && ask.reply.send(text.to_owned()).is_ok()
        {
            self.team.changed();
            return Ok(ReplyOutcome::Delivered);
        }
        if !matches!(rec.status, SessionStatus::Idle | SessionStatus::Done) {
            return Err(TeamError::NotWaiting { session: child.clone() });
        }
        if !self.team.wake_allowed(&self.session, child).await? {
            return Err(TeamError::WakeRefused {
                author: self.session.clone(),
                recipient: child.clone(),
            });
        }
        // Refused before the checkpoint is consumed.
        self.team.require_enabled(child).await?;
        let state = SessionState::of(&rec)?;
        let mut messages =
            state.messages.clone().unwrap_or_else(|| vec![Message::user(state.task.clone())]);
        messages.push(Message::user(text.to_owned()));
        if !self.team.take_for_new_turn(child).await? {
            // Another reply woke it first.
            return Err(TeamError::NotWaiting { session: child.clone() });
        }
        let env = self.sibling(
            child.clone(),
            AgentContext {
                model: state.model.clone(),
                provider: state.provider.clone(),
                messages: Vec::new(),
            },
        );
        let job = SubagentJob {
            env,
            task: state.task,
            model: state.model,
            provider: state.provider,
            messages,
            reply: Some(text.to_owned()),
            cancel: CancelSignal(self.team.token(child, Some(&self.session))),
        };
        self.team.spawn_turn(job, Arc::new(Semaphore::new(1)));
        Ok(ReplyOutcome::Woken)
    }

    /// Captures the last complete model input of `messages` (before an in-flight tool
    /// call) as this session's checkpoint, and returns it.
    pub async fn checkpoint(&self, messages: &[Message]) -> Result<Vec<Message>, TeamError> {
        let input = complete_input(messages);
        let stored = input.clone();
        self.team.update_state(&self.session, None, |s| s.messages = Some(stored)).await?;
        Ok(input)
    }

    /// Returns the checkpoint of this session, if one was captured.
    pub async fn last_checkpoint(&self) -> Result<Option<Vec<Message>>, TeamError> {
        let rec = self.team.session(&self.session).await?;
        Ok(SessionState::of(&rec)?.messages)
    }

    /// Reserves one model iteration of this session's durable budget; false when
    /// refused (see [`AgentEnv::stop_reason`]).
    pub async fn claim_iteration(&self) -> Result<bool, TeamError> {
        let (journal, id) = (self.team.journal().clone(), self.session.clone());
        let claimed = blocking(move || journal.claim_iteration(&id)).await?;
        Ok(claimed.is_some())
    }

    /// Returns why `claim_iteration` refuses this session, or `None` when it would not.
    pub async fn stop_reason(&self) -> Result<Option<StopReason>, TeamError> {
        let rec = self.team.session(&self.session).await?;
        Ok(match (rec.status, rec.iteration_budget) {
            (SessionStatus::Cancelled, _) => Some(StopReason::Cancelled),
            (_, Some(budget)) if rec.iterations_used >= budget => {
                Some(StopReason::BudgetExhausted { used: rec.iterations_used, budget })
            }
            (s, _) if s.is_terminal() => {
                Some(StopReason::Ended { status: super::status_name(s).into() })
            }
            _ => None,
        })
    }

    /// Returns this session's inherited allowlist.
    pub async fn allowlist(&self) -> Result<SessionAllowlist, TeamError> {
        let rec = self.team.session(&self.session).await?;
        Ok(SessionAllowlist::decode(rec.router_allowlist.as_deref()))
    }

    /// Returns `router` held to this session's inherited allowlist, for every request,
    /// retry and automatic fallback.
    pub async fn restrict_router(&self, router: Models) -> Result<RestrictedRouter, TeamError> {
        let allow = self.allowlist().await?.to_router();
        Ok(RestrictedRouter { models: router, allow })
    }

    /// Returns the number of the last route command issued for this session (0: none), to
    /// pass to `routing_change` later.
    pub async fn route_mark(&self) -> Result<u64, TeamError> {
        let rec = self.team.session(&self.session).await?;
        Ok(SessionState::of(&rec)?.route.map_or(0, |r| r.seq))
    }

    /// Issues a route command for this session and returns its number.
    pub async fn issue_route(
        &self,
        issuer: RouteIssuer,
        provider: &str,
        model: &str,
        command: &str,
    ) -> Result<u64, TeamError> {
        let mut seq = 0;
        self.team
            .update_state(&self.session, None, |s| {
                seq = s.route.as_ref().map_or(0, |r| r.seq) + 1;
                s.route = Some(StoredRoute {
                    seq,
                    provider: provider.to_owned(),
                    model: model.to_owned(),
                    command: command.to_owned(),
                    issuer: issuer.name().to_owned(),
                });
            })
            .await?;
        Ok(seq)
    }

    /// Returns the route command issued for this session since mark `before` (the latest
    /// one), or `None`.
    pub async fn routing_change(&self, before: u64) -> Result<Option<RouteCommand>, TeamError> {
        let rec = self.team.session(&self.session).await?;
        Ok(SessionState::of(&rec)?.route.filter(|r| r.seq > before).map(|r| RouteCommand {
            seq: r.seq,
            provider: r.provider,
            model: r.model,
            command: r.command,
            issuer: r.issuer,
        }))
    }
}

impl Team {
    /// Moves an idle or done session to queued for a new turn, clearing what its last
    /// turn ended with; false when it is no longer idle or done.
    async fn take_for_new_turn(&self, sid: &SessionId) -> Result<bool, TeamError> {
        let _guard = self.inner.writes.lock().await;
        let rec = self.session(sid).await?;
        if !matches!(rec.status, SessionStatus::Idle | SessionStatus::Done) {
            return Ok(false);
        }
        let mut state = SessionState::of(&rec)?;
        state.question = None;
        state.answer = None;
        state.error = None;
        let update = clio_journal::SessionUpdate {
            status: Some(SessionStatus::Queued),
            checkpoint: Some(state.to_value(sid)?),
            ..Default::default()
        };
        self.update(sid, update).await.map(|_| true)
    }

    /// Returns true when session `sid` exists and is running.
    async fn is_running(&self, sid: &SessionId) -> Result<bool, TeamError> {
        let (journal, id) = (self.inner.journal.clone(), sid.clone());
        let rec = blocking(move || journal.session(&id)).await?;
        Ok(rec.is_some_and(|r| r.status == SessionStatus::Running))
    }

    /// Spawns one turn of `job`, waiting for a slot of `slots` first.
    fn spawn_turn(&self, job: SubagentJob, slots: Arc<Semaphore>) {
        let team = self.clone();
        let sid = job.env.session.clone();
        let token = job.cancel.0.clone();
        let turn = {
            let mut live = self.lock_live();
            let l = live.entry(sid.clone()).or_default();
            l.running = true;
            l.turn += 1;
            l.turn
        };
        let runner = Arc::clone(job.env.runner().unwrap_or(&self.inner.runner));
        let hold = runner.hold();
        tokio::spawn(async move {
            let outcome = tokio::select! {
                biased;
                () = token.cancelled() => None,
                outcome = team.turn(job, runner, slots) => outcome,
            };
            // A journal failure here leaves the session live; reconcile marks it lost
            // once this process is gone.
            let _ = match outcome {
                Some(outcome) => team.finish(&sid, outcome).await,
                // Cancelled through an ancestor, perhaps after `cancel_agent` took its
                // snapshot of the tree: the record says so too.
                None => team.finish_cancelled(&sid).await,
            };
            // Only after the record is final, so a wait never sees a settled session
            // with a stale record; and only if no later turn of it has started.
            let mut live = team.lock_live();
            if live.get(&sid).is_some_and(|l| l.turn == turn) {
                live.remove(&sid);
            }
            drop(live);
            team.changed();
            // The turn's owner may end now.
            drop(hold);
        });
    }

    async fn finish_cancelled(&self, sid: &SessionId) -> Result<(), TeamError> {
        let _guard = self.inner.writes.lock().await;
        if self.session(sid).await?.status.is_terminal() {
            return Ok(());
        }
        let update = clio_journal::SessionUpdate {
            status: Some(SessionStatus::Cancelled),
            ..Default::default()
        };
        self.update(sid, update).await.map(|_| ())
    }

    /// Waits for a slot, marks the session running and runs the turn; `None` when the
    /// session was cancelled meanwhile.
    async fn turn(
        &self,
        job: SubagentJob,
        runner: Arc<dyn SubagentRunner>,
        slots: Arc<Semaphore>,
    ) -> Option<SubagentOutcome> {
        let _permit = slots.acquire_owned().await.ok()?;
        let sid = job.env.session.clone();
        {
            let _guard = self.inner.writes.lock().await;
            let rec = self.session(&sid).await.ok()?;
            if rec.status.is_terminal() {
                return None;
            }
            let update = clio_journal::SessionUpdate {
                status: Some(SessionStatus::Running),
                ..Default::default()
            };
            self.update(&sid, update).await.ok()?;
        }
        match AssertUnwindSafe(runner.run(job)).catch_unwind().await {
            Ok(outcome) => Some(outcome),
            Err(_) => Some(SubagentOutcome::Stopped),
        }
    }

    async fn finish(&self, sid: &SessionId, outcome: SubagentOutcome) -> Result<(), TeamError> {
        let _guard = self.inner.writes.lock().await;
        let rec = self.session(sid).await?;
        if rec.status.is_terminal() {
            return Ok(());
        }
        let mut state = SessionState::of(&rec)?;
        let status = match outcome {
            SubagentOutcome::Answer(text) if !text.trim().is_empty() => {
                // The chat a later turn resumes from ends with what this one said.
                if let Some(messages) = &mut state.messages {
                    messages.push(Message::assistant(text.clone()));
                }
                state.answer = Some(text);
                state.question = None;
                SessionStatus::Done
            }
            SubagentOutcome::Answer(_) | SubagentOutcome::Stopped => SessionStatus::Lost,
            SubagentOutcome::Question(q) => {
                if let Some(messages) = &mut state.messages {
                    messages.push(Message::assistant(q.clone()));
                }
                state.question = Some(q);
                state.answer = None;
                SessionStatus::Idle
            }
            SubagentOutcome::Failed(err) => {
                state.error = Some(err);
                SessionStatus::Failed
            }
        };
        let update = clio_journal::SessionUpdate {
            status: Some(status),
            checkpoint: Some(state.to_value(sid)?),
            ..Default::default()
        };
        self.update(sid, update).await.map(|_| ())
    }

    /// Waits until session `sid` is settled in this process (its turn's end recorded), for
    /// at most the longest wait the team allows.
    pub(crate) async fn wait_settled(&self, sid: &SessionId) -> Result<(), TeamError> {
        let longest = Duration::from_secs(self.config().max_timeout_secs);
        self.wait_for(std::slice::from_ref(sid), longest).await.map(|_| ())
    }

    /// Waits until every session of `ids` is settled or `timeout` passes, and returns
    /// their records. Settled: not queued or running in this process, or asking a
    /// question not shown before.
    async fn wait_for(
        &self,
        ids: &[SessionId],
        timeout: Duration,
    ) -> Result<Vec<AgentRecord>, TeamError> {
        let deadline = tokio::time::Instant::now() + timeout;
        let mut rx = self.inner.changes.subscribe();
        loop {
            rx.borrow_and_update();
            // Liveness is read before the records: a session leaves `live` only once its
            // record is final, so a wait that sees it settled then reads its final record
            // (read the other way round, a child ending in between looked settled with
            // the record of before its answer).
            let settled = {
                let live = self.lock_live();
                ids.iter().all(|id| match live.get(id) {
                    Some(l) if l.running => l.ask.as_ref().is_some_and(|a| !a.shown),
                    _ => true,
                })
            };
            let (journal, wanted) = (self.inner.journal.clone(), ids.to_vec());
            let found = blocking(move || {
                wanted.iter().map(|id| journal.session(id)).collect::<Result<Vec<_>, _>>()
            })
            .await?;
            let mut records = Vec::with_capacity(ids.len());
            for (id, rec) in ids.iter().zip(found) {
                let rec = rec.ok_or_else(|| TeamError::SessionNotFound { session: id.clone() })?;
                records.push(self.record_of(&rec)?);
            }
            let timed_out = tokio::time::Instant::now() >= deadline;
            if settled || timed_out {
                let mut live = self.lock_live();
                for id in ids {
                    if let Some(ask) = live.get_mut(id).and_then(|l| l.ask.as_mut()) {
                        ask.shown = true;
                    }
                }
                return Ok(records);
            }
            tokio::select! {
                res = rx.changed() => { if res.is_err() { return Ok(records); } }
                () = tokio::time::sleep_until(deadline) => {}
            }
        }
    }
}
