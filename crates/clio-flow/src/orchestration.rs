//! The tools of the built-in `orchestration` plugin (SPEC §4, §8): `run_flow` and
//! `run_workflow` start work in the background, `flow_result` reads how it stands, and the
//! `council_*` tools are the subagent team of the run's agent.
//!
//! Background work: `run_flow` and `run_workflow` start their child with [`Ctx::start`]
//! and return at once with `{"handle", "target", "status": "running"}`; the child is a
//! task under the tool's own task and keeps running after the tool returns (the run waits
//! for started work before it ends). When the caller is a react loop, the child's result
//! arrives in its conversation when the child ends (`crate::react`'s `background` module);
//! any caller can also read it: `flow_result(handle)` returns the child's record (`status`, and `answer`/`value`/`outputs` once it succeeded,
//! `error` once it failed) without waiting. The journal holds the result on the child's
//! task, so a flow can also read it there. A child a restart cut off is started again,
//! as the same task, when its run is resumed ([`reattach_cut_off`]).
//!
//! Teams: each team tool (`council_run`, `council_wait`, also named `council_wait_agents`,
//! `council_cancel_agent`, ...) is [`AgentEnv::call_tool`] acting as the session of the
//! agent that calls it: a team subagent's own session inside its work, else the leader
//! session of the run, [`run_leader`] (`run-<id>`), which the first call creates.
//! [`register_orchestration_tools`] gives each runtime a team of its own (its journal, its
//! owner); the subagents an agent starts run as that agent, each turn a react-loop call of
//! the run ([`turns`]), and a team call made by a flow rather than an agent runs its
//! subagents on a [`ModelRunner`]. [`register_team_tools`] uses a given team and its runner
//! instead. [`run_team`] reads a run's team back from the journal.
//!
//! [`ORCHESTRATION_TOOLS`] names every tool registered here; the plugin's declaration in
//! clio-plugins (`clio_plugins::orchestration`) must list the same tools, and a test holds
//! them together.
//!
//! `run_workflow`'s arguments are the built-in `workflow` flow's task fields, passed as
//! they are; `model` also picks the child's model.

use std::sync::{Arc, Mutex, PoisonError, Weak};

use clio_journal::{
    Journal, JournalError, RunId, SessionId, TaskId, TaskKind, TaskRecord, TaskStatus, TaskUpdate,
};
use serde_json::{Map, Value, json};
use tokio::sync::Mutex as AsyncMutex;

mod turns;

use turns::CallRunner;

use crate::ctx::Ctx;
use crate::error::FlowError;
use crate::gate::Caller;
use crate::registry::{Registry, Target, Tool};
use crate::result::CallInput;
use crate::runtime::{RuntimeInner, blocking};
use crate::team::{
    AgentContext, ModelRunner, SessionSummary, TEAM_TOOLS, Team, TeamConfig, TeamTool,
};

/// The names of the orchestration tools, in the order they are registered: the
/// background-work tools, then the team tools.
pub const ORCHESTRATION_TOOLS: [&str; 19] = [
    "run_flow",
    "run_workflow",
    "flow_result",
    "council_run",
    "council_wait",
    "council_wait_agents",
    "council_cancel_agent",
    "council_ask",
    "council_reply",
    "council_checkpoint",
    "council_claim_iteration",
    "council_stop_reason",
    "council_controls",
    "council_enabled",
    "council_require_enabled",
    "council_reconcile_orphans",
    "council_restrict_router",
    "council_routing_change",
    "council_wake_allowed",
];

/// What team tools are called in front of a team tool's name.
const TEAM_PREFIX: &str = "council_";

/// The fields of `run_workflow` that go into the `workflow` flow's task.
const WORKFLOW_FIELDS: [&str; 8] = [
    "workflow",
    "task",
    "editors",
    "max_added_steps",
    "max_edit_rounds",
    "allowed_targets",
    "approve_edits",
    "model",
];

fn invalid(message: impl Into<String>) -> FlowError {
    FlowError::CallRefused {
        handle: None,
        refusal: "invalid_arguments".into(),
        message: message.into(),
    }
}

fn text_arg(args: &Value, name: &str) -> Result<Option<String>, FlowError> {
    match args.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(other) => Err(invalid(format!("`{name}` must be a string, not {other}"))),
    }
}

/// The key of the child a `run_flow` or `run_workflow` call starts (one per call), so
/// that `flow_result` finds the start again after a restart.
const BACKGROUND_KEY: &str = "background";

/// Starts `target` on `input` (on `model` when not empty) and returns the handle record.
async fn start(ctx: &Ctx, target: Target, input: Value, model: &str) -> Result<Value, FlowError> {
    let name = target.name().to_owned();
    let mut call = ctx
        .call(target, CallInput::from(input))
        .key(BACKGROUND_KEY)
        .label(format!("background {name}"));
    if !model.is_empty() {
        call = call.model(model.to_owned());
    }
    let handle = call.start().await?;
    Ok(json!({ "handle": handle.0, "target": name, "status": "running" }))
}

async fn run_flow(args: Value, ctx: Ctx) -> Result<Value, FlowError> {
    let flow = text_arg(&args, "flow")?
        .filter(|f| !f.is_empty())
        .ok_or_else(|| invalid("`flow` names the flow to run"))?;
    if ctx.registry().get_flow(&flow).is_none() {
        return Err(FlowError::FlowTargetUnknown { target: flow });
    }
    let options = match args.get("options") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(map)) => map.clone(),
        Some(other) => return Err(invalid(format!("`options` must be a mapping, not {other}"))),
    };
    let input = args.get("input").cloned().unwrap_or(Value::Null);
    let model = text_arg(&args, "model")?.unwrap_or_default();
    let selection = clio_spec::FlowSelection { id: flow, options };
    start(&ctx, Target::Selection(selection), input, &model).await
}

async fn run_workflow(args: Value, ctx: Ctx) -> Result<Value, FlowError> {
    let Value::Object(given) = args else {
        return Err(invalid("run_workflow takes a mapping of its arguments"));
    };
    if !given.get("workflow").is_some_and(Value::is_object) {
        return Err(invalid("`workflow` must be the workflow as a mapping (its steps)"));
    }
    if let Some(unknown) = given.keys().find(|k| !WORKFLOW_FIELDS.contains(&k.as_str())) {
        return Err(invalid(format!(
            "run_workflow has no argument `{unknown}`; it takes {}",
            WORKFLOW_FIELDS.join(", ")
        )));
    }
    let model = text_arg(&Value::Object(given.clone()), "model")?.unwrap_or_default();
    start(&ctx, Target::Name("workflow".into()), Value::Object(given), &model).await
}

/// Returns whether no live process works on `record` any more: a restart cut it off
/// (`interrupted`, or still `running` under another process's name).
fn cut_off(ctx: &Ctx, record: &TaskRecord) -> bool {
    match record.status {
        TaskStatus::Interrupted => true,
        TaskStatus::Running => record.owner != ctx.config().owner,
        _ => false,
    }
}

/// Starts background child `record` again, as the same task, when a restart cut it off:
/// the start its `run_flow` or `run_workflow` call recorded is made again in that call's
/// scope, so the runtime finds the task and re-attaches it (a finished child is never run
/// again). `once` serialises the check, so that the child is re-attached once; the run
/// then waits for it like any started work.
async fn reattach(ctx: &Ctx, record: &TaskRecord, once: &AsyncMutex<()>) -> Result<(), FlowError> {
    let Some(starter) = record.parent else { return Ok(()) };
    let identity = format!("t{}/key:{BACKGROUND_KEY}", starter.0);
    let accepted = ctx.run.recorded(&format!("{identity}@accepted")).and_then(|e| e.task);
    let (Some(intent), true) = (ctx.run.recorded(&identity), accepted == Some(record.id)) else {
        // Not started by these tools: nothing to start again.
        return Ok(());
    };
    let command = intent.payload_value().unwrap_or(Value::Null);
    let _once = once.lock().await;
    let (journal, id) = (ctx.journal().clone(), record.id);
    let now = blocking(move || journal.task(id)).await?;
    if !now.is_some_and(|r| cut_off(ctx, &r)) {
        return Ok(());
    }
    let target = match &command["target"] {
        Value::String(name) => Target::Name(name.clone()),
        other => Target::Selection(serde_json::from_value(other.clone()).map_err(|err| {
            FlowError::CallFailed {
                handle: Some(id),
                message: format!("the recorded start of task {id} does not read back: {err}"),
            }
        })?),
    };
    let text = |key: &str| command[key].as_str().unwrap_or_default().to_owned();
    let (journal, owner) = (ctx.journal().clone(), ctx.config().owner.clone());
    let update = TaskUpdate {
        status: Some(TaskStatus::Running),
        owner: Some(owner),
        ..TaskUpdate::default()
    };
    blocking(move || journal.update_task(id, update)).await?;
    // The scope of the call that started it, under the run's cancellation, working for
    // whoever made that call (so the gate's `callers` sees its workflow's steps as theirs).
    let mut s = ctx.child_scope(
        starter,
        &Value::Null,
        Map::new(),
        ctx.scope.depth,
        None,
        ctx.scope.model.clone(),
        ctx.run.cancel.child_token(),
    );
    s.origin = origin_of(ctx, starter);
    let scope = ctx.with_scope(s);
    let mut call = scope
        .call(target, CallInput::from(command["input"].clone()))
        .key(BACKGROUND_KEY)
        .label(text("label"));
    if !text("model").is_empty() {
        call = call.model(text("model"));
    }
    call.start().await.map(|_| ())
}

/// Returns whom the `run_flow` or `run_workflow` call of task `starter` worked for: an
/// agent when its react loop made it (its identity is in a worker's scope), a script when
/// a tool (`run_code`) did, else the flow whose code made it.
fn origin_of(ctx: &Ctx, starter: TaskId) -> Caller {
    let Some(record) = ctx.run.task(starter) else { return Caller::Flow };
    let by_tool =
        record.parent.and_then(|p| ctx.run.task(p)).is_some_and(|p| p.kind == TaskKind::Tool);
    if by_tool {
        Caller::Code
    } else if record.call.as_deref().is_some_and(|c| c.starts_with('w')) {
        Caller::Agent
    } else {
        Caller::Flow
    }
}

/// Starts again, as their own tasks, the background children a restart cut off in the
/// run of `ctx` (its root context): called when a run is resumed, before its flow runs,
/// so that started work finishes even if the agent never asks `flow_result` again.
///
/// Only a child whose `run_flow` or `run_workflow` call returned its handle: a starter cut
/// off itself is reported interrupted to the agent, which may start the work again, so its
/// child is left as it is. A child that cannot be started again stays cut off (and
/// `flow_result` reports it so) rather than failing the run.
pub(crate) async fn reattach_cut_off(ctx: &Ctx) {
    let started = |t: &TaskRecord| {
        t.parent.and_then(|p| ctx.run.task(p)).is_some_and(|p| p.status == TaskStatus::Succeeded)
    };
    let mut cut: Vec<TaskRecord> = ctx.run.tasks_where(|t| cut_off(ctx, t));
    cut.retain(started);
    cut.sort_by_key(|t| t.id);
    let once = AsyncMutex::new(());
    for record in &cut {
        let _ = reattach(ctx, record, &once).await;
    }
}

async fn flow_result(args: Value, ctx: Ctx, once: Arc<AsyncMutex<()>>) -> Result<Value, FlowError> {
    let handle = args
        .get("handle")
        .and_then(Value::as_u64)
        .ok_or_else(|| invalid("`handle` is the number run_flow or run_workflow returned"))?;
    let journal = ctx.journal().clone();
    let record = blocking(move || journal.task(TaskId(handle))).await?;
    let Some(record) = record.filter(|r| r.run == ctx.run_id()) else {
        return Err(invalid(format!("no task {handle} in this run")));
    };
    if cut_off(&ctx, &record) {
        reattach(&ctx, &record, &once).await?;
    }
    let status = match record.status {
        TaskStatus::Succeeded => "succeeded",
        TaskStatus::Failed => "failed",
        TaskStatus::Cancelled => "cancelled",
        _ => "running",
    };
    let mut out = json!({ "handle": handle, "target": record.target, "status": status });
    if let Some(result) = &record.result {
        for key in ["answer", "value", "outputs"] {
            if let Some(v) = result.get(key) {
                out[key] = v.clone();
            }
        }
    }
    if let Some(error) = &record.error {
        out["error"] = serde_json::from_str(error).unwrap_or_else(|_| Value::String(error.clone()));
    }
    Ok(out)
}

/// Returns the tools `run_flow`, `run_workflow` and `flow_result`.
fn background_tools() -> Vec<Tool> {
    let run_flow_tool = Tool::contextual("run_flow", run_flow).describe(
        "Starts flow `flow` on `input` with `options` (and `model`) in the background and \
         returns its handle at once; its result arrives in your conversation when it \
             ends (flow_result(handle) reads how it stands meanwhile).",
    );
    let run_flow_tool = Tool {
        schema: json!({
            "type": "object",
            "properties": {
                "flow": { "type": "string", "description": "The flow's id." },
                "input": { "description": "The flow's task." },
                "options": { "type": "object", "description": "The flow's options." },
                "model": { "type": "string", "description": "The model it runs on." }
            },
            "required": ["flow"]
        }),
        ..run_flow_tool
    };
    let run_workflow_tool = Tool::contextual("run_workflow", run_workflow).describe(
        "Starts the built-in workflow flow in the background on `workflow` (steps) and \
         `task`, within `editors`, `max_added_steps`, `max_edit_rounds`, `allowed_targets` \
         and `approve_edits`; returns its handle at once; its result arrives in your conversation when it \
             ends (flow_result(handle) reads how it stands meanwhile).",
    );
    let run_workflow_tool = Tool {
        schema: json!({
            "type": "object",
            "properties": {
                "workflow": { "type": "object", "description": "The workflow: its steps." },
                "task": { "description": "The task the steps share." },
                "editors": { "type": "array", "items": { "type": "string" } },
                "max_added_steps": { "type": "integer", "minimum": 0 },
                "max_edit_rounds": { "type": "integer", "minimum": 0 },
                "allowed_targets": { "type": "array", "items": { "type": "string" } },
                "approve_edits": { "type": "boolean" },
                "model": { "type": "string" }
            },
            "required": ["workflow"]
        }),
        ..run_workflow_tool
    };
    let once = Arc::new(AsyncMutex::new(()));
    let flow_result_tool = Tool::contextual("flow_result", move |args: Value, ctx: Ctx| {
        flow_result(args, ctx, Arc::clone(&once))
    })
    .read_only()
    .describe(
        "Returns how work started by run_flow or run_workflow stands: status (running, \
         succeeded, failed, cancelled) and, once it ended, its answer or error. Does not wait.",
    );
    let flow_result_tool = Tool {
        schema: json!({
            "type": "object",
            "properties": { "handle": { "type": "integer", "minimum": 0 } },
            "required": ["handle"]
        }),
        ..flow_result_tool
    };
    vec![run_flow_tool, run_workflow_tool, flow_result_tool]
}

/// The team of each runtime that has called a team tool, dropped with its runtime.
type RuntimeTeams = Arc<Mutex<Vec<(Weak<RuntimeInner>, Team)>>>;

/// Where the team tools find their team.
#[derive(Clone)]
enum TeamSource {
    /// This team, whichever runtime calls.
    Given(Team),
    /// One team per runtime, made at its first team call.
    PerRuntime(RuntimeTeams),
}

impl TeamSource {
    fn team(&self, ctx: &Ctx) -> Team {
        let teams = match self {
            TeamSource::Given(team) => return team.clone(),
            TeamSource::PerRuntime(teams) => teams,
        };
        let rt = &ctx.run.rt;
        let mut teams = teams.lock().unwrap_or_else(PoisonError::into_inner);
        teams.retain(|(runtime, _)| runtime.strong_count() > 0);
        if let Some((_, team)) =
            teams.iter().find(|(runtime, _)| Weak::as_ptr(runtime) == Arc::as_ptr(rt))
        {
            return team.clone();
        }
        let config = TeamConfig { owner: rt.config.owner.clone(), ..TeamConfig::default() };
        let team =
            Team::new(rt.journal.clone(), ModelRunner::new(rt.config.models.clone()), config);
        teams.push((Arc::downgrade(rt), team.clone()));
        team
    }
}

/// Returns the leader session of run `run`'s team: the session every team tool called in
/// that run acts as.
pub fn run_leader(run: RunId) -> SessionId {
    SessionId(format!("run-{}", run.0))
}

/// Calls team tool `tool` with `args` as the session `ctx` works for: a team subagent's
/// own session when the call comes from its work, else the leader of `ctx`'s run. Errors
/// come back as data, like every team tool's.
///
/// Called by an agent, the subagents it starts run as that agent ([`CallRunner`]) and
/// inherit its conversation; the runtime's own teams only (a given team keeps its runner).
async fn call_as_session(source: &TeamSource, tool: &str, args: Value, ctx: &Ctx) -> Value {
    let team = source.team(ctx);
    // So that the end of the leading agent's turn reaches the team (`leader_turn_ended`).
    let _ = ctx.run.team.set(team.clone());
    let seat = ctx.scope.seat.clone();
    let member = seat.as_ref().and_then(|s| s.session.clone());
    let leader = member.is_none().then(|| run_leader(ctx.run_id()));
    if let Some(leader) = &leader
        && let Err(err) = team.begin_leading_in(leader, Some(ctx.run_id())).await
    {
        return err.to_json();
    }
    // The children inherit the caller's model: the agent's, else the runtime's default.
    let model = [ctx.scope.model.as_str(), ctx.config().model.as_str()]
        .into_iter()
        .find(|m| !m.is_empty())
        .unwrap_or("")
        .to_owned();
    let messages = seat.as_ref().map(|s| s.messages.to_vec()).unwrap_or_default();
    let context = AgentContext { model, provider: String::new(), messages };
    // A subagent that starts subagents nests a level deeper: bounded like nested flows.
    if let Some(env) = &member
        && tool == "run"
    {
        let (max, reached) = (ctx.config().max_depth, team_depth(env.session()) + 1);
        if max > 0 && reached > max {
            let err = FlowError::FlowLimitExceeded { limit: "max_depth".into(), max, reached };
            return json!({ "error": err.to_json() });
        }
    }
    let mut env =
        member.unwrap_or_else(|| team.env(run_leader(ctx.run_id()))).with_context(context);
    if let (TeamSource::PerRuntime(_), Some(seat)) = (source, &seat)
        && !seat.agent.is_empty()
    {
        env = env.with_runner(CallRunner { ctx: ctx.clone(), agent: seat.agent.clone() });
    }
    let out = env.call_tool(tool, args).await;
    let Some(leader) = leader else { return out };
    match team.end_leading(&leader).await {
        Ok(()) => out,
        Err(err) => err.to_json(),
    }
}

/// Returns how deep session `sid` is in its team: 0 for a leader, 1 for its children...
fn team_depth(sid: &SessionId) -> u64 {
    sid.0.matches('.').count() as u64
}

/// Returns the team tool `name` (`council_` + a [`TEAM_TOOLS`] name, or the alias
/// `council_wait_agents`) running `spec` through `source`.
fn team_tool(name: String, spec: &TeamTool, source: &TeamSource) -> Tool {
    let (tool, source) = (spec.name, source.clone());
    let it = Tool::contextual(name, move |args: Value, ctx: Ctx| {
        let source = source.clone();
        async move { Ok(call_as_session(&source, tool, args, &ctx).await) }
    })
    .describe(spec.description);
    let it = Tool { schema: spec.schema(), reads_conversation: true, ..it };
    if spec.read_only() { it.read_only() } else { it }
}

/// Returns the team tools, in [`ORCHESTRATION_TOOLS`] order.
fn team_tools(source: &TeamSource) -> Vec<Tool> {
    let mut tools = Vec::new();
    for spec in TEAM_TOOLS {
        tools.push(team_tool(format!("{TEAM_PREFIX}{}", spec.name), spec, source));
        if spec.name == "wait" {
            // The seed's name for `wait`.
            tools.push(team_tool(format!("{TEAM_PREFIX}wait_agents"), spec, source));
        }
    }
    tools
}

/// Returns every orchestration tool as [`register_orchestration_tools`] registers it, in
/// [`ORCHESTRATION_TOOLS`] order.
pub fn orchestration_tools() -> Vec<Tool> {
    let mut tools = background_tools();
    tools.extend(team_tools(&TeamSource::PerRuntime(Arc::default())));
    tools
}

/// Returns `registry` with every orchestration tool ([`ORCHESTRATION_TOOLS`]): `run_flow`,
/// `run_workflow`, `flow_result`, and the team tools of each runtime's own team (its
/// journal and owner; an agent's subagents run as that agent, a flow's on a
/// [`ModelRunner`] on the runtime's models). They are registered in code (no
/// plugin id), so they are allowed by default like the host's other built-in tools;
/// deployment and person rules still apply.
pub fn register_orchestration_tools(registry: Registry) -> Registry {
    orchestration_tools().into_iter().fold(registry, Registry::tool)
}

/// Returns `registry` with the team tools (`council_run`, ..., and `council_wait_agents`,
/// the seed's name for `council_wait`) acting on `team` rather than the runtime's own:
/// each call acts as the leader of its run ([`run_leader`]). Their errors come back as
/// data (`{"error": {"reason", "message"}}`).
pub fn register_team_tools(registry: Registry, team: &Team) -> Registry {
    team_tools(&TeamSource::Given(team.clone())).into_iter().fold(registry, Registry::tool)
}

/// Returns the team of run `run` as the journal holds it: its leader ([`run_leader`]),
/// then the sessions it leads in id order (parents before their children). Empty when the
/// run's agents never called a team tool.
pub fn run_team(journal: &Journal, run: RunId) -> Result<Vec<SessionSummary>, JournalError> {
    let leader = run_leader(run);
    let mut members: Vec<SessionSummary> = journal
        .sessions()?
        .iter()
        .filter(|r| r.id == leader || r.leader.as_ref() == Some(&leader))
        .map(SessionSummary::of)
        .collect();
    // Ids are `<parent>.<n>`: compare the numbers, so `run-1.10` comes after `run-1.2`.
    let key = |s: &SessionSummary| -> Vec<(u64, String)> {
        s.session_id.0.split('.').map(|p| (p.parse().unwrap_or(0), p.to_owned())).collect()
    };
    members.sort_by_cached_key(key);
    Ok(members)
}

/// The team's tools as registry tools: the team itself knows nothing of the registry, so
/// the layer that registers them makes them.
impl crate::team::AgentEnv {
    /// Returns every team tool as a registry [`Tool`](crate::registry::Tool) acting for this session, named
    /// `prefix` + its name (`council_run`, ...). Errors come back as data, so the tools
    /// themselves never fail; the queries are read-only.
    pub fn tools(&self, prefix: &str) -> Vec<Tool> {
        TEAM_TOOLS
            .iter()
            .map(|t| {
                let env = self.clone();
                let name = t.name;
                let tool = Tool::new(format!("{prefix}{name}"), move |args: Value| {
                    let env = env.clone();
                    async move { Ok(env.call_tool(name, args).await) }
                })
                .describe(t.description);
                let tool = Tool { schema: t.schema(), ..tool };
                if t.read_only() { tool.read_only() } else { tool }
            })
            .collect()
    }
}
