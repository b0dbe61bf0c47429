//! [`Call`]: one call of a target, as a builder (`evidence`, `key`, `model`, `label`) that
//! is awaitable, and the durable protocol every call follows.
//!
//! Protocol of a fresh call, each write durable before the next: (1) a `call` entry with the
//! call's identity records the intent; (2) the child's task is created with its parent and
//! the call's identity; (3) an `<identity>@accepted` entry links the identity to the task
//! (an indexed link, which cancellation and re-attachment look up); (4) the child runs;
//! (5) its result or error is recorded on the task. On replay: a task that finished returns
//! its record; an intent without acceptance raises `TaskStateUncertain` and is never
//! submitted again; a side-effecting tool left running raises `CallInterrupted` (a tool
//! with a context, such as `run_code`, only if one of its own calls was to a side-effecting
//! tool); anything else left running runs again on the same task (a child flow or react
//! loop resumes from its own entries).
//!
//! One exception: a read-only tool a flow calls (no agent, no script) runs first and is
//! recorded once it has ended, intent and task with its result in one write, with no
//! acceptance entry: a replay finds the task by the call identity it names
//! ([`Call::run_then_record`]). A crash before the write leaves no trace and a resume calls
//! it again, which a read-only tool allows. One still running after 100 ms is written as
//! running then (intent and task, no acceptance), so every running task is in the tree
//! and counted by a cancel; its end is an update of that task.
//! (Read-only as the gate believes it: an untrusted plugin's claim is not.)
//!
//! Every call of a tool passes the gate (`crate::gate`) before step (1), whoever makes it,
//! and a tool's code runs only through `gate::run`, with what `gate::before` let through;
//! a flow of an untrusted plugin waits for the person's trust before step (1) too.

use std::future::{Future, IntoFuture};
use std::panic::Location;
use std::pin::Pin;

use clio_journal::{
    EntryKind, NewEntry, NewTask, TaskId, TaskKind, TaskRecord, TaskStatus, TaskUpdate,
};
use clio_plugins::HookEventKind;
use serde_json::{Map, Value, json};

use super::Ctx;
use crate::command::{Command, object};
use crate::error::FlowError;
use crate::gate;
use crate::registry::{Resolved, Target, Tool, WorkerRequest, WorkerRun};
use crate::result::{CallInput, CallKind, CallResult, input_text};
use crate::runtime::blocking;

/// One call of a target; await it, or pass it to `gather` / `as_completed`.
pub struct Call {
    ctx: Ctx,
    target: Target,
    input: CallInput,
    evidence: Vec<TaskId>,
    key: String,
    model: String,
    label: String,
    site_identity: String,
    pub(crate) extra_tools: Vec<Tool>,
    pub(crate) index: Option<usize>,
    /// The slots of a gather's `limit`: one is held while the call runs (not while it
    /// replays from its record, nor while it waits to be admitted).
    pub(crate) slots: Option<std::sync::Arc<tokio::sync::Semaphore>>,
    /// The slot taken once a new call was admitted, before it is written.
    slot: std::sync::Mutex<Option<tokio::sync::OwnedSemaphorePermit>>,
    pub(crate) from_code: bool,
    pub(crate) from_agent: bool,
    // A workflow step: its target is data, so `callers` sees it as made by whoever the
    // workflow's work is for (the scope's origin).
    step: bool,
    // A worker's conversation before its task (a team subagent's inherited context).
    history: Vec<crate::model::Message>,
    // The team session a worker runs as: it claims its iterations, checkpoints its input
    // and keeps to its allowlist.
    team: Option<Box<crate::team::AgentEnv>>,
    // The calling agent's conversation, for a contextual tool (the team tools).
    conversation: Option<std::sync::Arc<Vec<crate::model::Message>>>,
}

/// What accepting a call decided: its recorded outcome, a written task to run, or a
/// read-only tool to run before anything is written.
///
/// Each variant is boxed: a call holds its `Accepted` until it ends, and unboxed, every call
/// in flight held the largest (a worker's, about 520 bytes) whatever it was (issue 24).
enum Accepted {
    Done(Box<Result<CallResult, FlowError>>),
    Run {
        task: TaskId,
        ready: Box<Ready>,
    },
    /// A read-only tool to run first and record once it has ended ([`Call::run_then_record`]).
    RunThenRecord(Box<Unwritten>),
}

impl Accepted {
    fn done(res: Result<CallResult, FlowError>) -> Accepted {
        Accepted::Done(Box::new(res))
    }
}

/// What an accepted call runs: a tool the gate passed, a flow or a worker.
enum Ready {
    Tool(std::sync::Arc<Tool>, gate::Passed),
    Flow {
        flow: std::sync::Arc<dyn crate::flow::Flow>,
        options: Map<String, Value>,
        input: Value,
        plugin: Option<String>,
    },
    Worker {
        // Boxed, as in `Resolved`: a worker is much larger than the other variants.
        worker: Box<crate::registry::Worker>,
        kind: CallKind,
        input: Value,
    },
}

impl Ready {
    /// Returns what a resolved target runs on `input` once it has passed the gate (a tool
    /// brings its [`gate::Passed`] instead).
    fn child(resolved: Resolved, input: Value) -> Result<Ready, FlowError> {
        match resolved {
            Resolved::Flow { flow, options, plugin } => {
                Ok(Ready::Flow { flow, options, input, plugin })
            }
            Resolved::Worker { worker, kind } => Ok(Ready::Worker { worker, kind, input }),
            Resolved::Tool(tool) => Err(FlowError::CallRefused {
                handle: None,
                refusal: "not_gated".into(),
                message: format!("tool {} did not pass the gate", tool.name),
            }),
        }
    }
}

/// How long a read-only tool a flow calls runs before it is written as running (see
/// [`Call::run_then_record`]): a quick one is recorded once, when it has ended.
const READ_ONLY_VISIBLE_AFTER: std::time::Duration = std::time::Duration::from_millis(100);

/// A read-only tool call not yet written: what [`Call::run_then_record`] runs and records.
struct Unwritten {
    tool: std::sync::Arc<Tool>,
    passed: gate::Passed,
    intent: NewEntry,
    task: NewTask,
}

fn kind_of_task(kind: CallKind) -> TaskKind {
    match kind {
        CallKind::Agent => TaskKind::Agent,
        CallKind::Subagent => TaskKind::Subagent,
        CallKind::Flow => TaskKind::Flow,
        CallKind::Tool => TaskKind::Tool,
    }
}

/// How long a tool running when its run is suspended may take to finish and be recorded.
const FINISH_ON_SUSPEND: std::time::Duration = std::time::Duration::from_secs(30);

impl Call {
    pub(crate) fn new(ctx: Ctx, target: Target, input: CallInput, site: &Location<'_>) -> Call {
        let resolved_input = input.resolve(&ctx.scope.task);
        let what = object([("target", target.to_json()), ("input", resolved_input)]);
        let site_identity = ctx.identity(site, &what, "");
        Call::with_identity(ctx, target, input, site_identity, String::new())
    }

    /// Returns a call named by `key` from the start, for the runtime's own keyed calls:
    /// unlike `ctx.call(..).key(..)` it digests nothing and takes no occurrence at a call
    /// site (every call made from that site is keyed).
    pub(crate) fn keyed(ctx: Ctx, target: Target, input: CallInput, key: String) -> Call {
        debug_assert!(!key.is_empty(), "a keyed call needs its key");
        Call::with_identity(ctx, target, input, String::new(), key)
    }

    pub(crate) fn with_identity(
        ctx: Ctx,
        target: Target,
        input: CallInput,
        site_identity: String,
        key: String,
    ) -> Call {
        Call {
            ctx,
            target,
            input,
            evidence: Vec::new(),
            key,
            model: String::new(),
            label: String::new(),
            site_identity,
            extra_tools: Vec::new(),
            index: None,
            slots: None,
            slot: std::sync::Mutex::new(None),
            from_code: false,
            from_agent: false,
            step: false,
            history: Vec::new(),
            team: None,
            conversation: None,
        }
    }

    /// Returns the call with `handles` of earlier calls whose results the child may read.
    pub fn evidence(mut self, handles: impl IntoIterator<Item = TaskId>) -> Call {
        self.evidence = handles.into_iter().collect();
        self
    }

    /// Returns the call named by `key`, unique within the run, instead of its call site.
    pub fn key(mut self, key: impl Into<String>) -> Call {
        self.key = key.into();
        self
    }

    /// Returns the call run on `model` (`account/model` or an id).
    pub fn model(mut self, model: impl Into<String>) -> Call {
        self.model = model.into();
        self
    }

    /// Returns the call with `label`, the child's name in the views.
    pub fn label(mut self, label: impl Into<String>) -> Call {
        self.label = label.into();
        self
    }

    /// Returns the call marked as made by a `run_code` script: a tool whose callers are
    /// `direct` refuses it (`CallRefused`, refusal `callers`).
    pub fn from_code(mut self) -> Call {
        self.from_code = true;
        self
    }

    /// Returns the call marked as made directly by an agent's react loop: a tool whose
    /// callers are `code` refuses it, and the tool's permission and hooks apply.
    pub(crate) fn by_agent(mut self) -> Call {
        self.from_agent = true;
        self
    }

    /// Returns the call marked as a workflow step: its target comes from the workflow, so
    /// the `callers` rule sees it as made by whoever the workflow runs for (an agent's
    /// `run_workflow`, a script), not as the workflow flow's own code.
    pub(crate) fn step(mut self) -> Call {
        self.step = true;
        self
    }

    /// Returns the call of a worker that starts from `history` (its task last) and runs
    /// as team session `env`.
    pub(crate) fn team_turn(
        mut self,
        history: Vec<crate::model::Message>,
        env: crate::team::AgentEnv,
    ) -> Call {
        self.history = history;
        self.team = Some(Box::new(env));
        self
    }

    /// Returns the call with the calling agent's `conversation`, which a contextual tool
    /// reads from its context's seat.
    pub(crate) fn conversation(
        mut self,
        conversation: std::sync::Arc<Vec<crate::model::Message>>,
    ) -> Call {
        self.conversation = Some(conversation);
        self
    }

    fn caller(&self) -> gate::Caller {
        if self.from_code {
            gate::Caller::Code
        } else if self.from_agent {
            gate::Caller::Agent
        } else if self.step {
            self.ctx.scope.origin
        } else {
            gate::Caller::Flow
        }
    }

    /// Returns whom the work of this call's child is for: the flow's own origin when the
    /// flow's code made the call, else the agent or script that made it.
    fn child_origin(&self) -> gate::Caller {
        match self.caller() {
            gate::Caller::Flow => self.ctx.scope.origin,
            other => other,
        }
    }

    pub(crate) fn ctx_run(&self) -> &std::sync::Arc<crate::runtime::RunState> {
        &self.ctx.run
    }

    /// Returns the call with `tool` added to the child's tools for this call only.
    pub(crate) fn with_tool(mut self, tool: Tool) -> Call {
        self.extra_tools.push(tool);
        self
    }

    /// Returns the call's replay identity.
    pub fn identity(&self) -> String {
        if self.key.is_empty() {
            self.site_identity.clone()
        } else {
            format!("{}key:{}", self.ctx.scope.prefix, self.key)
        }
    }

    fn command(&self, input: &Value, wait: bool) -> Command {
        Command::Call {
            target: self.target.to_json(),
            input: input.clone(),
            evidence: self.evidence.iter().map(|t| t.0).collect(),
            key: self.key.clone(),
            model: self.model.clone(),
            label: self.label.clone(),
            wait,
        }
    }

    pub(crate) async fn start(self) -> Result<TaskId, FlowError> {
        match self.accept(false).await? {
            Accepted::Done(res) => match *res {
                Ok(r) => Ok(r.handle),
                Err(e) => e.handle().ok_or(e),
            },
            // Tools are refused before; a started call is always written first.
            Accepted::RunThenRecord(unwritten) => Err(FlowError::CallRefused {
                handle: None,
                refusal: "start_tool".into(),
                message: format!("tool {} cannot be started, only called", unwritten.tool.name),
            }),
            Accepted::Run { task, ready } => {
                let run = std::sync::Arc::clone(&self.ctx.run);
                // Counted busy from the spawn on, so the run never looks idle before the
                // started work first runs.
                let starting = crate::runtime::Starting::new(&run);
                let handle = tokio::spawn(tracing::Instrument::in_current_span(async move {
                    // The result is recorded on the task; the starter reads it from there.
                    let (_, finished) = starting.handing_over(self.body(task, *ready)).await;
                    drop(finished);
                }));
                run.spawn_background(handle);
                Ok(task)
            }
        }
    }

    pub(crate) async fn run(self) -> Result<CallResult, FlowError> {
        let index = self.index;
        // Each stage is boxed, so a call waiting (for its slot, its tool or its commit)
        // holds only the stage it is in: unboxed, every call in flight held the largest
        // stage, about 13 KB, which a 9,000-way fan-out holds 9,000 times (issue 24).
        let accepted = Box::pin(self.accept(true)).await?;
        // A call that runs holds a slot of its gather's limit: taken when it was admitted
        // (a new call), or now (work a restart left running).
        let taken = self.slot.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take();
        let _slot = match (&self.slots, &accepted, taken) {
            (_, _, Some(slot)) => Some(slot),
            (Some(slots), Accepted::Run { .. } | Accepted::RunThenRecord(_), None) => {
                std::sync::Arc::clone(slots).acquire_owned().await.ok()
            }
            _ => None,
        };
        let res = match accepted {
            Accepted::Done(res) => *res,
            Accepted::Run { task, ready } => Box::pin(self.body(task, *ready)).await,
            Accepted::RunThenRecord(unwritten) => Box::pin(self.run_then_record(unwritten)).await,
        };
        res.map(|mut r| {
            r.index = index;
            r
        })
    }

    fn check_limits(&self, resolved: &Resolved) -> Result<(), FlowError> {
        let run = &self.ctx.run;
        let scope = &self.ctx.scope;
        let exceeded = |limit: &str, max: u64, reached: u64| FlowError::FlowLimitExceeded {
            limit: limit.to_owned(),
            max,
            reached,
        };
        if let Resolved::Flow { .. } = resolved {
            let depth = scope.depth + 1;
            let bound = run.rt.config.max_depth;
            if bound > 0 && depth > bound {
                return Err(exceeded("max_depth", bound, depth));
            }
            for (i, limits) in scope.limits.iter().enumerate() {
                let relative = depth.saturating_sub(i as u64);
                if limits.max_depth > 0 && relative > limits.max_depth {
                    return Err(exceeded("max_depth", limits.max_depth, relative));
                }
            }
        }
        for limits in &scope.limits {
            if resolved.kind() != CallKind::Tool
                && limits.max_model_calls > 0
                && run.model_calls() >= limits.max_model_calls
            {
                return Err(exceeded("max_model_calls", limits.max_model_calls, run.model_calls()));
            }
            if limits.budget_tokens > 0 && run.tokens() >= limits.budget_tokens {
                return Err(exceeded("budget_tokens", limits.budget_tokens, run.tokens()));
            }
        }
        Ok(())
    }

    async fn accept(&self, wait: bool) -> Result<Accepted, FlowError> {
        let run = &self.ctx.run;
        // Inside a subagent's declared flow, "self" is that subagent's react loop.
        let this = match (&self.target, &self.ctx.scope.this) {
            (Target::Name(name), Some(this)) if name == "self" => Some(this.clone()),
            _ => None,
        };
        let this_called = this.is_some();
        let found = match this {
            Some(worker) => {
                Ok(Resolved::Worker { worker: Box::new(worker), kind: CallKind::Subagent })
            }
            None => run.rt.registry.resolve(&self.target),
        };
        let resolved = match found {
            Err(FlowError::FlowTargetUnknown { target }) => self
                .ctx
                .scope
                .tools
                .iter()
                .find(|t| t.name == target)
                .map(|t| Resolved::Tool(std::sync::Arc::new(t.clone())))
                .ok_or(FlowError::FlowTargetUnknown { target })?,
            res => res?,
        };
        if let Resolved::Worker { worker, kind: CallKind::Subagent } = &resolved {
            internal_check(&self.ctx, worker, this_called)?;
        }
        let kind = resolved.kind();
        if !wait && kind == CallKind::Tool {
            return Err(FlowError::CallRefused {
                handle: None,
                refusal: "start_tool".into(),
                message: format!("tool {} cannot be started, only called", self.target.name()),
            });
        }
        let input = self.input.resolve(&self.ctx.scope.task);
        let identity = self.identity();
        // The trust and permission questions the gate asks before a call is recorded belong
        // to the call: reached with it (the gate does not run again for a recorded call, and
        // a new call's gate finds its questions). A plugin trusted since needs no question.
        let _ = run.recorded(&format!("{}key:trust:{identity}", self.ctx.scope.prefix));
        let _ = run.recorded(&format!("{}key:permission:{identity}", self.ctx.scope.prefix));
        if let Some(intent) = run.recorded(&identity) {
            if intent.kind != EntryKind::Call {
                return Err(FlowError::Nondeterminism {
                    identity,
                    journaled: format!("{:?}", intent.kind),
                    requested: "call".into(),
                    unreached: Vec::new(),
                });
            }
            if kind != CallKind::Tool {
                run.count_model_call();
            }
            // A call accepted before it ran has an acceptance entry naming its task; a call
            // recorded once it had ended is found through its task, which names the call.
            let accepted = run.recorded(&format!("{identity}@accepted")).and_then(|e| e.task);
            let Some(task) = accepted.or_else(|| run.task_of_call(&identity)) else {
                return Ok(Accepted::done(Err(FlowError::TaskStateUncertain {
                    handle: None,
                    target: self.target.name().to_owned(),
                })));
            };
            let rec = match run.task(task) {
                Some(rec) => rec,
                None => {
                    let _busy = run.activity.busy();
                    let journal = run.rt.journal.clone();
                    blocking(move || journal.task(task)).await?.ok_or(
                        FlowError::TaskStateUncertain {
                            handle: Some(task),
                            target: self.target.name().to_owned(),
                        },
                    )?
                }
            };
            return Box::pin(self.replayed(rec, resolved, input)).await;
        }
        // A new call. Limits first: a run refused by a limit replays to the same refusal.
        self.check_limits(&resolved)?;
        run.check_entry_room()?;
        let requested = format!(
            "call of {} (input digest {})",
            self.target.name(),
            crate::runtime::digest(&input)
        );
        // A call the gate refused before left a receipt, not a call: the history holds it,
        // and it may be decided again at once. A callers rule refuses without running.
        if let Resolved::Tool(tool) = &resolved {
            gate::check_callers(&self.ctx, tool, self.caller())?;
        }
        let refused_before = run.recorded(&format!("{identity}@receipt")).is_some()
            || run
                .recorded(&format!("{}key:trust:{identity}@trust", self.ctx.scope.prefix))
                .is_some();
        run.admit(&identity, &requested, !refused_before).await?;
        // Its gather's limit is taken once it is admitted, before it is written: a call
        // waiting for the history holds no slot a recorded one needs, and a call waiting
        // for a slot has no task a crash would leave running.
        if let Some(slots) = &self.slots {
            let slot = std::sync::Arc::clone(slots).acquire_owned().await.ok();
            *self.slot.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = slot;
        }
        // Again: calls replayed while this one waited count toward the limits too.
        self.check_limits(&resolved)?;
        // The gate: a tool passes it whole; a flow of an untrusted plugin waits for the
        // person's trust. Boxed, as the gate's state is large and most calls need little.
        let ready = match resolved {
            Resolved::Tool(tool) => {
                let passed =
                    Box::pin(gate::before(&self.ctx, &identity, &tool, input, self.caller()))
                        .await?;
                Ready::Tool(tool, passed)
            }
            Resolved::Flow { plugin: Some(plugin), flow, options } => {
                let key = format!("trust:{identity}");
                Box::pin(gate::ensure_trusted(&self.ctx, &key, &plugin, flow.id())).await?;
                Ready::Flow { flow, options, input, plugin: Some(plugin) }
            }
            other => Ready::child(other, input)?,
        };
        // A call that waited (for its slot, the history or the gate) while its run or its
        // scope stopped starts nothing: it is not written, so a resume issues it again
        // rather than finding a task it would take for one cut short.
        if let Some(why) = run.suspension() {
            return Err(FlowError::CallInterrupted { handle: None, message: why });
        }
        if run.is_cancelled() || self.ctx.scope.cancel.is_cancelled() {
            return Err(FlowError::CallCancelled { handle: None });
        }
        run.reserve_entry()?;
        if kind != CallKind::Tool {
            run.count_model_call();
        }
        let journal = run.rt.journal.clone();
        let run_id = run.run;
        let input = match &ready {
            Ready::Tool(_, passed) => passed.input(),
            Ready::Flow { input, .. } | Ready::Worker { input, .. } => input,
        };
        let mut intent = NewEntry::new(EntryKind::Call, self.command(input, wait).into_json())
            .with_identity(identity.clone());
        intent.task = self.ctx.scope.parent;
        let new_task = NewTask {
            run: run_id,
            parent: self.ctx.scope.parent,
            kind: kind_of_task(kind),
            target: self.target.name().to_owned(),
            label: if self.label.is_empty() {
                self.target.name().to_owned()
            } else {
                self.label.clone()
            },
            status: TaskStatus::Running,
            model: None,
            owner: run.rt.config.owner.clone(),
            call: Some(identity.clone()),
        };
        // A read-only tool a flow calls may run again after a crash, so it runs first and
        // is recorded once it has ended: one durable write instead of two, and no
        // acceptance entry (its task names the call).
        let ready = match ready {
            Ready::Tool(tool, passed)
                if wait
                    && gate::believed_read_only(&self.ctx, &tool)
                    && !tool.is_contextual()
                    && self.caller() == gate::Caller::Flow =>
            {
                let unwritten = Unwritten { tool, passed, intent, task: new_task };
                return Ok(Accepted::RunThenRecord(Box::new(unwritten)));
            }
            other => other,
        };
        // The intent, the task and the acceptance are one atomic write, so a crash never
        // leaves a call recorded as asked for but not known to be accepted.
        let accepted = NewEntry::new(EntryKind::Call, json!({ "accepted": true }))
            .with_identity(format!("{identity}@accepted"));
        let _busy = run.activity.busy();
        let (task, _) = journal
            .nonblocking()
            .create_task_with_entries(run_id, vec![intent], new_task, vec![accepted])
            .await?;
        run.count_submitted();
        Ok(Accepted::Run { task, ready: Box::new(ready) })
    }

    /// Runs read-only tool `tool` on `input`, then records the call as ended: the
    /// `intent` and the `task` (naming the call) with its result, in one atomic write.
    /// A crash before that write leaves no trace, so a resumed run calls the tool again,
    /// as it may a read-only tool left running. The task is in the journal (and the tree)
    /// once it has ended; cancelling the flow cancels it while it runs.
    async fn run_then_record(&self, unwritten: Box<Unwritten>) -> Result<CallResult, FlowError> {
        let run = std::sync::Arc::clone(&self.ctx.run);
        let _permit =
            match (&run.concurrency, (self.ctx.scope.kind == crate::ctx::ScopeKind::Worker)) {
                (Some(sem), false) => Some(sem.clone().acquire_owned().await),
                _ => None,
            };
        let _busy = run.activity.busy();
        // What only the tool's run needs is scoped to it, and the run is boxed: a call
        // waiting for its commit holds neither (a 9,000-way fan-out waits 9,000 times).
        let (value, tool_name, intent, task, written) = {
            // Taken out of its box, which is freed here rather than when the call ends.
            let Unwritten { tool, passed, intent, task } = *{ unwritten };
            let token = self.ctx.scope.cancel.child_token();
            let identity = self.identity();
            let mut value = Box::pin(async {
                tokio::select! {
                    value = clio_tools::as_call(
                        clio_tools::call_tag(&run.rt.tag_owner(&run.rt.config.owner), run.run.0, &identity),
                        gate::run(&self.ctx, &identity, &tool, passed, None),
                    ) => value,
                    () = token.cancelled() => Err(FlowError::CallCancelled { handle: None }),
                }
            });
            // Every running task is visible: a tool still running after
            // `READ_ONLY_VISIBLE_AFTER` is written as running (its intent and its task, which
            // names the call), so `runs tree` and the viewer show it and `runs cancel`
            // counts and cancels it; its end is then an update of that task. A resume finds
            // the task through the call it names, and runs it again (read-only).
            let mut written = None;
            let value = tokio::select! {
                biased;
                value = &mut value => value,
                () = tokio::time::sleep(READ_ONLY_VISIBLE_AFTER) => {
                    let journal = run.rt.journal.clone();
                    let (id, _) = journal
                        .nonblocking()
                        .create_task_with_entries(run.run, vec![intent.clone()], task.clone(), Vec::new())
                        .await?;
                    run.count_submitted();
                    run.register_token(id, token.clone());
                    written = Some(id);
                    value.await
                }
            };
            (value, tool.name.clone(), intent, task, written)
        };
        if let Err(err) = &value
            && run.is_stopping()
        {
            // The run is ending: nothing more recorded, so a resume calls it again.
            return Err(match written {
                Some(id) => err.clone().with_handle(id),
                None => err.clone(),
            });
        }
        let (target, index) = (self.target.name().to_owned(), self.index);
        let outcome = value.map(|(value, context)| CallResult {
            answer: String::new(),
            value,
            outputs: context_outputs(context),
            response_text: String::new(),
            handle: TaskId(0),
            target,
            kind: CallKind::Tool,
            model: String::new(),
            index,
            workflow_state: Value::Null,
        });
        // Built here, so the journal's writer only names the task in it.
        let mut update = ended_update(&outcome, 0, 0);
        let error = outcome.as_ref().err().cloned();
        let finish = move |handle: TaskId| {
            if let Some(Value::Object(result)) = &mut update.result {
                result.insert("handle".into(), json!(handle.0));
            }
            if let Some(err) = error {
                update.error = Some(err.with_handle(handle).to_record());
            }
            update
        };
        let journal = run.rt.journal.clone();
        let rec = match written {
            None => {
                let (rec, _) = journal
                    .nonblocking()
                    .record_ended_task(run.run, vec![intent], task, Vec::new(), finish)
                    .await?;
                run.count_submitted();
                rec
            }
            Some(id) => match journal.nonblocking().update_task(id, finish(id)).await {
                Ok(rec) => rec,
                // Cancelled from outside while it ran: the cancellation stands.
                Err(clio_journal::JournalError::TaskFinished { .. }) => {
                    return Err(FlowError::CallCancelled { handle: Some(id) });
                }
                Err(err) => return Err(err.into()),
            },
        };
        let handle = rec.id;
        run.remember_task(rec);
        // A read-only tool ran before its task was written: its start and end are one line.
        match &outcome {
            Ok(_) => tracing::debug!(task = handle.0, target = %tool_name, "call ran and ended"),
            Err(error) => {
                tracing::debug!(task = handle.0, target = %tool_name, %error, "call ran and failed");
            }
        }
        match outcome {
            Ok(mut r) => {
                r.handle = handle;
                Ok(r)
            }
            Err(err) => Err(err.with_handle(handle)),
        }
    }

    async fn replayed(
        &self,
        rec: TaskRecord,
        resolved: Resolved,
        input: Value,
    ) -> Result<Accepted, FlowError> {
        let run = &self.ctx.run;
        let handle = Some(rec.id);
        if rec.status.is_terminal() {
            run.settle_subtree(rec.id);
        }
        match rec.status {
            TaskStatus::Succeeded => {
                if matches!(resolved, Resolved::Worker { .. }) {
                    run.add_tokens(rec.input_tokens + rec.output_tokens);
                }
                let res = rec.result.as_ref().and_then(CallResult::from_json).ok_or(
                    FlowError::CallFailed {
                        handle,
                        message: "the recorded result does not read back".into(),
                    },
                );
                Ok(Accepted::done(res))
            }
            TaskStatus::Failed => {
                let err = rec.error.as_deref().map(FlowError::from_record).unwrap_or(
                    FlowError::CallFailed {
                        handle,
                        message: "failed with no error recorded".into(),
                    },
                );
                Ok(Accepted::done(Err(err.with_handle(rec.id))))
            }
            TaskStatus::Cancelled => Ok(Accepted::done(Err(FlowError::CallCancelled { handle }))),
            // A tool left running would run again: past the end of the history, which a
            // replay of an unfinished run stops at. A child flow or worker replays inside.
            _ if run.replay_only && (!run.frontier || matches!(resolved, Resolved::Tool(_))) => {
                if run.frontier {
                    run.wait_at_frontier().await;
                }
                Err(FlowError::Nondeterminism {
                    identity: self.identity(),
                    journaled: format!("{:?}", rec.status),
                    requested: "a finished call".into(),
                    unreached: Vec::new(),
                })
            }
            _ => {
                if matches!(resolved, Resolved::Tool(_)) {
                    leftovers_killed(&self.ctx, &rec).await?;
                }
                if let Resolved::Tool(tool) = &resolved
                    && !gate::believed_read_only(&self.ctx, tool)
                    && !(tool.is_contextual() && calls_were_read_only(&self.ctx, rec.id).await?)
                {
                    let err = FlowError::CallInterrupted {
                        handle,
                        message: format!(
                            "side-effecting tool {} was running when the process stopped",
                            tool.name
                        ),
                    };
                    self.finish(rec.id, &Err(err.clone()), 0, 0).await?;
                    return Ok(Accepted::done(Err(err)));
                }
                // It runs again: through the gate again, which decides from what it recorded
                // (its questions' answers, its hooks' outcomes) and asks only what is new,
                // such as trust in a plugin no longer trusted.
                let identity = self.identity();
                let ready = match resolved {
                    Resolved::Tool(tool) => {
                        let gate = gate::before(&self.ctx, &identity, &tool, input, self.caller());
                        match Box::pin(gate).await {
                            Ok(passed) => Ready::Tool(tool, passed),
                            Err(err)
                                if matches!(
                                    err,
                                    FlowError::CallRefused { .. }
                                        | FlowError::FlowNotTrusted { .. }
                                ) =>
                            {
                                self.finish(rec.id, &Err(err.clone()), 0, 0).await?;
                                return Ok(Accepted::done(Err(err.with_handle(rec.id))));
                            }
                            Err(err) => return Err(err),
                        }
                    }
                    Resolved::Flow { plugin: Some(plugin), flow, options } => {
                        let key = format!("trust:{identity}");
                        let trust = gate::ensure_trusted(&self.ctx, &key, &plugin, flow.id());
                        match Box::pin(trust).await {
                            Ok(()) => Ready::Flow { flow, options, input, plugin: Some(plugin) },
                            Err(err @ FlowError::FlowNotTrusted { .. }) => {
                                self.finish(rec.id, &Err(err.clone()), 0, 0).await?;
                                return Ok(Accepted::done(Err(err)));
                            }
                            Err(err) => return Err(err),
                        }
                    }
                    other => Ready::child(other, input)?,
                };
                Ok(Accepted::Run { task: rec.id, ready: Box::new(ready) })
            }
        }
    }

    async fn finish(
        &self,
        task: TaskId,
        res: &Result<CallResult, FlowError>,
        input_tokens: u64,
        output_tokens: u64,
    ) -> Result<(), FlowError> {
        if self.ctx.run.replay_only {
            return Ok(());
        }
        let update = ended_update(res, input_tokens, output_tokens);
        let journal = self.ctx.run.rt.journal.clone();
        match journal.nonblocking().update_task(task, update).await {
            Ok(rec) => {
                self.ctx.run.remember_task(rec);
                Ok(())
            }
            // Cancelled from outside while it ran: the cancellation stands.
            Err(clio_journal::JournalError::TaskFinished { .. }) => Ok(()),
            Err(err) => Err(err.into()),
        }
    }

    async fn body(&self, task: TaskId, ready: Ready) -> Result<CallResult, FlowError> {
        let run = std::sync::Arc::clone(&self.ctx.run);
        let token = self.ctx.scope.cancel.child_token();
        run.register_token(task, token.clone());
        // A tool that makes calls of its own (`run_code`) holds no permit, so its calls can
        // take one.
        let leaf = !matches!(ready, Ready::Flow { .. })
            && !matches!(&ready, Ready::Tool(t, _) if t.is_contextual())
            && !(self.ctx.scope.kind == crate::ctx::ScopeKind::Worker);
        let _permit = match (&run.concurrency, leaf) {
            (Some(sem), true) => Some(sem.clone().acquire_owned().await),
            _ => None,
        };
        // Stop ends a worker's turn (`CallStopped`); it never ends a started flow.
        let stop = tokio_util::sync::CancellationToken::new();
        if matches!(ready, Ready::Worker { .. }) {
            run.register_stop(task, stop.clone());
        }
        let target = self.target.name().to_owned();
        tracing::debug!(task = task.0, target = %target, "call started");
        // A tool running in this process when its run is suspended (not cancelled) is let
        // finish, for a while, and its result recorded: its effect is then known, and a
        // resume replays it instead of reporting it cut short.
        let finishes_on_suspend = matches!(&ready, Ready::Tool(tool, _) if !tool.is_contextual());
        // Boxed: what the call runs is freed before it waits for its result's commit.
        let mut work = Box::pin(self.execute(task, ready, token.clone()));
        let res = tokio::select! {
            res = &mut work => res,
            () = token.cancelled() => {
                if finishes_on_suspend && run.suspension().is_some() && !run.is_cancelled() {
                    match tokio::time::timeout(FINISH_ON_SUSPEND, &mut work).await {
                        Ok(res) => res,
                        Err(_) => Err(FlowError::CallCancelled { handle: Some(task) }),
                    }
                } else {
                    Err(FlowError::CallCancelled { handle: Some(task) })
                }
            }
            () = stop.cancelled() => Err(FlowError::CallStopped { handle: Some(task), message: "stopped by Stop".into() }),
        };
        let (res, tokens) = match res {
            Ok((r, tokens)) => (Ok(r), tokens),
            Err(err) => (Err(err.with_handle(task)), (0, 0)),
        };
        match &res {
            Ok(_) => tracing::debug!(task = task.0, target = %target, "call ended"),
            Err(error) => tracing::debug!(task = task.0, target = %target, %error, "call failed"),
        }
        if !run.is_stopping() || res.is_ok() {
            self.finish(task, &res, tokens.0, tokens.1).await?;
        }
        res
    }

    async fn execute(
        &self,
        task: TaskId,
        ready: Ready,
        token: tokio_util::sync::CancellationToken,
    ) -> Result<(CallResult, (u64, u64)), FlowError> {
        let scope = &self.ctx.scope;
        let base = |kind: CallKind| CallResult {
            answer: String::new(),
            value: Value::Null,
            outputs: Map::new(),
            response_text: String::new(),
            handle: task,
            target: self.target.name().to_owned(),
            kind,
            model: String::new(),
            index: self.index,
            workflow_state: Value::Null,
        };
        match ready {
            Ready::Tool(tool, passed) => {
                // A tool with a context makes its calls as children of its task, ended
                // under its own token, for whoever made this call; it counts itself busy
                // except while it waits on them, so a question one of them asks can leave
                // the run awaiting input.
                let child = tool.is_contextual().then(|| {
                    let mut s = self.ctx.child_scope(
                        task,
                        passed.input(),
                        Map::new(),
                        scope.depth,
                        None,
                        scope.model.clone(),
                        token.child_token(),
                    );
                    s.origin = self.caller();
                    if let (Some(messages), Some(seat)) = (&self.conversation, &s.seat) {
                        let seat = crate::ctx::Seat {
                            messages: std::sync::Arc::clone(messages),
                            ..seat.as_ref().clone()
                        };
                        s.seat = Some(std::sync::Arc::new(seat));
                    }
                    self.ctx.with_scope(s)
                });
                let identity = self.identity();
                // Every process the tool starts carries the call's tag, the journal's record
                // of it (its task's owner, run and number): a resume finds what it left.
                let run = &self.ctx.run;
                let owner = run.rt.tag_owner(&run.rt.config.owner);
                let tag = clio_tools::call_tag(&owner, run.run.0, &task.0.to_string());
                let ran =
                    clio_tools::as_call(tag, gate::run(&self.ctx, &identity, &tool, passed, child));
                let (value, context) = Box::pin(ran).await?;
                let outputs = context_outputs(context);
                Ok((CallResult { value, outputs, ..base(CallKind::Tool) }, (0, 0)))
            }
            Ready::Flow { flow, options, input, plugin } => {
                let options = flow.checked_options(&options)?;
                let limits = flow.limits().with_options(&options);
                let model = [self.model.as_str(), flow.model(), scope.model.as_str()]
                    .into_iter()
                    .find(|m| !m.is_empty())
                    .unwrap_or("")
                    .to_owned();
                let mut s = self.ctx.child_scope(
                    task,
                    &input,
                    options,
                    scope.depth + 1,
                    Some(limits),
                    model,
                    token,
                );
                // A flow is no agent: its team calls act as the session it works for (the
                // run's leader outside any team subagent), with no agent to run as.
                {
                    s.origin = self.child_origin();
                    // The flow's code is its plugin's (none for a host's or built-in flow).
                    s.plugin = plugin;
                    s.seat = s.seat.take().and_then(|seat| {
                        let session = seat.session.clone()?;
                        Some(std::sync::Arc::new(crate::ctx::Seat {
                            agent: String::new(),
                            session: Some(session),
                            messages: std::sync::Arc::default(),
                        }))
                    });
                }
                let child = self.ctx.with_scope(s);
                let out = flow.forward(input, child).await?;
                Ok((
                    CallResult {
                        response_text: out.answer.clone(),
                        answer: out.answer,
                        value: out.value,
                        outputs: out.outputs,
                        model: out.model,
                        workflow_state: out.workflow_state,
                        ..base(CallKind::Flow)
                    },
                    (0, 0),
                ))
            }
            // Boxed: a react loop's state would make every call's future (a tool's
            // too) as large as the loop's.
            Ready::Worker { worker, kind, input } => {
                let base = base(kind);
                Box::pin(self.execute_worker(task, &worker, kind, input, token, base)).await
            }
        }
    }

    /// Runs worker `worker` (an agent or subagent) on `input` as task `task`.
    async fn execute_worker(
        &self,
        task: TaskId,
        worker: &crate::registry::Worker,
        kind: CallKind,
        input: Value,
        token: tokio_util::sync::CancellationToken,
        base: CallResult,
    ) -> Result<(CallResult, (u64, u64)), FlowError> {
        let run = &self.ctx.run;
        let scope = &self.ctx.scope;
        let model = [self.model.as_str(), scope.model.as_str()]
            .into_iter()
            .find(|m| !m.is_empty())
            .map_or_else(|| preferred_model(run, worker), str::to_owned);
        let mut tools: Vec<Tool> = run.rt.registry.tools_of(worker);
        tools.extend(self.extra_tools.iter().cloned());
        let mut evidence = Vec::new();
        for handle in &self.evidence {
            if let Some(rec) = run.task(*handle) {
                let answer = rec
                    .result
                    .as_ref()
                    .and_then(|r| r.get("answer").cloned())
                    .unwrap_or(Value::Null);
                evidence
                    .push(json!({ "handle": handle.0, "target": rec.target, "answer": answer }));
            }
        }
        let mut s =
            self.ctx.child_scope(task, &input, Map::new(), scope.depth, None, model.clone(), token);
        {
            s.kind = crate::ctx::ScopeKind::Worker;
            s.prefix = format!("w{}/", task.0);
            s.tools = self.extra_tools.clone();
            // A subagent's work is its plugin's code; an agent's is no plugin's.
            s.plugin = worker.plugin.clone();
            // Whatever a worker asks for is an agent's.
            s.origin = gate::Caller::Agent;
            // A react loop is an agent with a seat: by the name it was called by (`self`
            // for the run's agent), so that its subagents resolve to it again. Inside a
            // team subagent's work any worker acts as that subagent; a handler worker is
            // no agent its subagents could run as (it claims no iterations).
            let session = self
                .team
                .as_deref()
                .cloned()
                .or_else(|| scope.seat.as_ref().and_then(|seat| seat.session.clone()));
            let agent = match worker.run {
                WorkerRun::React => self.target.name().to_owned(),
                WorkerRun::Handler(_) => String::new(),
            };
            s.seat = Some(std::sync::Arc::new(crate::ctx::Seat {
                agent,
                session,
                messages: std::sync::Arc::default(),
            }));
        }
        let child = self.ctx.with_scope(s);
        let subagent = kind == CallKind::Subagent;
        if subagent {
            let subject = crate::gate::Subject {
                prompt: Some(input_text(&input)),
                payload: json!({ "agent": worker.id }),
                ..crate::gate::Subject::default()
            };
            let event = HookEventKind::SUBAGENT_START;
            crate::gate::hooks(&self.ctx, &self.identity(), &subject, event, None).await?;
        }
        let req = WorkerRequest {
            id: worker.id.clone(),
            text: input_text(&input),
            input,
            evidence,
            model,
            prompt: worker.prompt.clone(),
            tools,
            requires: worker.requires,
            effort: worker.effort.clone().unwrap_or_default(),
            structured_outputs: worker.structured_outputs.clone(),
            history: self.history.clone(),
            team: self.team.as_deref().cloned(),
            max_iters: if worker.max_iters > 0 {
                worker.max_iters
            } else {
                run.rt.config.max_iters
            },
            ctx: child,
        };
        let reply = match (&worker.run, &worker.flow) {
            (WorkerRun::Handler(h), _) => {
                let _busy = run.activity.busy();
                h(req).await?
            }
            (WorkerRun::React, Some(selection)) => {
                Box::pin(declared_flow(worker, selection, req)).await?
            }
            (WorkerRun::React, None) => {
                let res = run.rt.registry.run_react(req).await;
                // The agent the run's own flow called leads the run's team: its turn has
                // ended. (Agents deeper down, or inside a subagent's work, do not lead it.)
                if scope.depth == 0
                    && scope.seat.is_none()
                    && self.team.is_none()
                    && let Some(team) = run.team.get()
                {
                    let _ = team.leader_turn_ended(&crate::run_leader(run.run)).await;
                }
                res?
            }
        };
        if subagent {
            let subject = crate::gate::Subject {
                payload: json!({ "agent": worker.id }),
                answer: Some(Value::String(reply.answer.clone())),
                ..crate::gate::Subject::default()
            };
            let event = HookEventKind::SUBAGENT_STOP;
            crate::gate::hooks(&self.ctx, &self.identity(), &subject, event, None).await?;
        }
        run.add_tokens(reply.input_tokens + reply.output_tokens);
        let mut outputs = reply.outputs;
        if !self.extra_tools.is_empty() {
            outputs.insert("tool_calls".into(), self.tool_calls_of(task).await?);
        }
        Ok((
            CallResult {
                answer: reply.answer.clone(),
                value: if reply.value.is_null() {
                    Value::String(reply.answer.clone())
                } else {
                    reply.value
                },
                response_text: if reply.response_text.is_empty() {
                    reply.answer
                } else {
                    reply.response_text
                },
                outputs,
                model: reply.model,
                workflow_state: reply.workflow_state,
                ..base
            },
            (reply.input_tokens, reply.output_tokens),
        ))
    }

    /// Returns the finished calls of the call-only tools a worker made during task `task`,
    /// read from the journal so that a resumed worker reports the same ones.
    async fn tool_calls_of(&self, task: TaskId) -> Result<Value, FlowError> {
        let names: Vec<String> = self.extra_tools.iter().map(|t| t.name.clone()).collect();
        let journal = self.ctx.run.rt.journal.clone();
        let run = self.ctx.run.run;
        let tasks = blocking(move || journal.tasks(run)).await?;
        Ok(Value::Array(
            tasks
                .into_iter()
                .filter(|t| t.parent == Some(task) && t.status == TaskStatus::Succeeded && names.contains(&t.target))
                .map(|t| json!({ "tool": t.target, "value": t.result.and_then(|r| r.get("value").cloned()) }))
                .collect(),
        ))
    }
}

/// Runs `worker`'s declared flow `selection` for `req`, in the worker's own scope (its
/// task), one level deeper and under the flow's limits, where `"self"` is the worker's
/// react loop; the flow's output is the worker's reply. A flow of an untrusted plugin
/// waits for the person's trust first (question `trust:flow` of the worker's scope).
async fn declared_flow(
    worker: &crate::registry::Worker,
    selection: &clio_spec::FlowSelection,
    req: WorkerRequest,
) -> Result<crate::registry::WorkerReply, FlowError> {
    let WorkerRequest { mut ctx, input, model, .. } = req;
    let resolved = ctx.run.rt.registry.resolve(&Target::Selection(selection.clone()))?;
    let Resolved::Flow { flow, options, plugin } = resolved else {
        return Err(FlowError::FlowTargetUnknown { target: selection.id.clone() });
    };
    if let Some(plugin) = plugin {
        gate::ensure_trusted(&ctx, "trust:flow", &plugin, flow.id()).await?;
    }
    let options = flow.checked_options(&options)?;
    let limits = flow.limits().with_options(&options);
    let (depth, bound) = (ctx.scope.depth + 1, ctx.run.rt.config.max_depth);
    if bound > 0 && depth > bound {
        return Err(FlowError::FlowLimitExceeded {
            limit: "max_depth".into(),
            max: bound,
            reached: depth,
        });
    }
    // The worker's scope is its own until its work starts.
    let Some(s) = std::sync::Arc::get_mut(&mut ctx.scope) else {
        return Err(FlowError::CallFailed {
            handle: None,
            message: format!(
                "subagent {}: its scope is shared, so flow {} cannot run in it",
                worker.id,
                flow.id()
            ),
        });
    };
    s.options = options;
    s.limits.push(limits);
    s.depth = depth;
    s.this = Some(crate::registry::Worker { flow: None, ..worker.clone() });
    if s.model.is_empty() {
        s.model = [flow.model(), model.as_str()]
            .into_iter()
            .find(|m| !m.is_empty())
            .unwrap_or("")
            .to_owned();
    }
    let out = flow.forward(input, ctx).await?;
    Ok(crate::registry::WorkerReply {
        response_text: out.answer.clone(),
        answer: out.answer,
        value: out.value,
        outputs: out.outputs,
        model: out.model,
        workflow_state: out.workflow_state,
        ..crate::registry::WorkerReply::default()
    })
}

/// Returns the model `worker` runs on when neither its call nor its flow names one: its
/// preferred model or provider as [`ModelCatalog::choose_model`](crate::ModelCatalog::choose_model)
/// picks it (a preference that does not fit is passed over for the run's model), else the
/// run's model. When no catalog model fits at all, the preferred model is tried as named,
/// so its refusal says why.
fn preferred_model(run: &crate::runtime::RunState, worker: &crate::registry::Worker) -> String {
    let config = &run.rt.config;
    if worker.model.is_none() && worker.provider.is_none() {
        return config.model.clone();
    }
    let prefers = clio_spec::Prefers {
        model: worker.model.clone().unwrap_or_default(),
        provider: worker.provider.clone().unwrap_or_default(),
        effort: worker.effort.clone().unwrap_or_default(),
    };
    let allow = crate::model::RouterAllowlist::unrestricted();
    match config.models.catalog().choose_model(
        "",
        "",
        &prefers,
        &config.model,
        &worker.requires,
        &allow,
    ) {
        Ok(chosen) => chosen.model.name(),
        Err(_) => worker.model.clone().unwrap_or_else(|| config.model.clone()),
    }
}

/// Refuses a call of internal subagent `worker` unless it comes from its own plugin's code
/// (a flow, workflow file or subagent of that plugin), or is a subagent's own react loop
/// (`"self"` in its declared flow, `is_self`).
fn internal_check(
    ctx: &Ctx,
    worker: &crate::registry::Worker,
    is_self: bool,
) -> Result<(), FlowError> {
    if !worker.internal || is_self || ctx.scope.plugin == worker.plugin {
        return Ok(());
    }
    let caller = match &ctx.scope.plugin {
        Some(plugin) => format!("plugin {plugin}'s code"),
        None => "code of no plugin".to_owned(),
    };
    Err(FlowError::CallRefused {
        handle: None,
        refusal: "subagent_internal".into(),
        message: format!(
            "subagent {} is internal to plugin {}: only that plugin's flows, workflow files and subagents may call it, not {caller}",
            worker.id,
            worker.plugin.as_deref().unwrap_or("(none)")
        ),
    })
}

/// Returns a tool call's outputs: the `PostToolUse` hooks' `additional_context`, if any.
/// Kills what a tool call left running when the process that ran it stopped (`rec` is
/// its task, still running in the journal, under another owner): every process that carries
/// the call's tag ([`clio_tools::call_tag`]), `setsid` daemons included, before the call is
/// reported cut short or run again. A call this process runs is left alone.
async fn leftovers_killed(ctx: &Ctx, rec: &TaskRecord) -> Result<(), FlowError> {
    let run = &ctx.run;
    if rec.owner.is_empty() || rec.owner == run.rt.config.owner || run.replay_only {
        return Ok(());
    }
    let mut tag =
        clio_tools::call_tag(&run.rt.tag_owner(&rec.owner), run.run.0, &rec.id.0.to_string());
    tag.push('#');
    let kill = move || Ok::<_, clio_journal::JournalError>(clio_tools::kill_leftovers(&tag));
    let killed = blocking(kill).await?;
    if killed > 0 {
        tracing::debug!(task = rec.id.0, killed, "killed what the call left running");
    }
    Ok(())
}

fn context_outputs(context: String) -> Map<String, Value> {
    let mut outputs = Map::new();
    if !context.is_empty() {
        outputs.insert("additional_context".into(), Value::String(context));
    }
    outputs
}

/// Returns the update that records a call's end: its result (and model), or its error
/// (`cancelled` for a cancellation), with the tokens it spent.
fn ended_update(
    res: &Result<CallResult, FlowError>,
    input_tokens: u64,
    output_tokens: u64,
) -> TaskUpdate {
    let ended = match res {
        Ok(r) => TaskUpdate {
            status: Some(TaskStatus::Succeeded),
            result: Some(r.to_json()),
            model: (!r.model.is_empty()).then(|| r.model.clone()),
            ..TaskUpdate::default()
        },
        Err(err) => TaskUpdate {
            status: Some(if matches!(err, FlowError::CallCancelled { .. }) {
                TaskStatus::Cancelled
            } else {
                TaskStatus::Failed
            }),
            error: Some(err.to_record()),
            ..TaskUpdate::default()
        },
    };
    TaskUpdate { input_tokens: Some(input_tokens), output_tokens: Some(output_tokens), ..ended }
}

impl IntoFuture for Call {
    type Output = Result<CallResult, FlowError>;
    type IntoFuture = Pin<Box<dyn Future<Output = Self::Output> + Send>>;

    fn into_future(self) -> Self::IntoFuture {
        Box::pin(self.run())
    }
}

/// Says whether every call the contextual tool running as `task` made is to a read-only
/// tool, as the journal records them: then the tool may run again after a crash.
async fn calls_were_read_only(ctx: &Ctx, task: TaskId) -> Result<bool, FlowError> {
    let journal = ctx.run.rt.journal.clone();
    let run = ctx.run.run;
    let tasks = blocking(move || journal.tasks(run)).await?;
    let registry = &ctx.run.rt.registry;
    Ok(tasks.iter().filter(|t| t.parent == Some(task)).all(|t| {
        registry.get_tool(&t.target).is_some_and(|tool| crate::gate::believed_read_only(ctx, tool))
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_every_call_in_flight_holds_stays_small() {
        // A 9,000-way fan-out holds 9,000 of each while its calls wait for their commits
        // (issue 24): an accepted call's stage is boxed, and so is a team's environment,
        // which most calls lack. Unboxed, `Accepted` was 528 bytes and `Call` 536.
        assert!(std::mem::size_of::<Accepted>() <= 32, "{}", std::mem::size_of::<Accepted>());
        assert!(std::mem::size_of::<Call>() <= 432, "{}", std::mem::size_of::<Call>());
    }
}
