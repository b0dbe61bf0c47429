//! The tools of the built-in `orchestration` plugin (SPEC §4, §8): `run_flow` and
//! `run_workflow` start work in the background, and `flow_result` reads how it stands.
//!
//! Background work: `run_flow` and `run_workflow` start their child with [`Ctx::start`]
//! and return at once with `{"handle", "target", "status": "running"}`; the child is a
//! task under the tool's own task and keeps running after the tool returns (the run waits
//! for started work before it ends). The runtime has no way to push a result into an
//! agent's conversation when a child ends, so the agent reads it: `flow_result(handle)`
//! returns the child's record (`status`, and `answer`/`value`/`outputs` once it succeeded,
//! `error` once it failed) without waiting. The journal holds the result on the child's
//! task, so a flow can also read it there.
//!
//! [`register_team_tools`] adds the subagent-team tools of one session (`council_run`,
//! `council_wait`, also named `council_wait_agents`, `council_cancel_agent`, ...) as they
//! are: [`AgentEnv::tools`] bound to that session, each going through
//! [`AgentEnv::call_tool`]. A registry belongs to a runtime, not to a session, so every
//! agent of a run using that registry acts as that one session.
//!
//! `run_workflow`'s arguments are the built-in `workflow` flow's task fields, passed as
//! they are; `model` also picks the child's model.

use clio_journal::{TaskId, TaskStatus};
use serde_json::{Map, Value, json};

use crate::ctx::Ctx;
use crate::error::FlowError;
use crate::registry::{Registry, Target, Tool};
use crate::result::CallInput;
use crate::runtime::blocking;
use crate::team::AgentEnv;

/// The names of the orchestration tools, in the order they are registered.
pub const ORCHESTRATION_TOOLS: [&str; 3] = ["run_flow", "run_workflow", "flow_result"];

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

/// Starts `target` on `input` (on `model` when not empty) and returns the handle record.
async fn start(ctx: &Ctx, target: Target, input: Value, model: &str) -> Result<Value, FlowError> {
    let name = target.name().to_owned();
    let mut call = ctx.call(target, CallInput::from(input)).label(format!("background {name}"));
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
    if ctx.run.rt.registry.get_flow(&flow).is_none() {
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

async fn flow_result(args: Value, ctx: Ctx) -> Result<Value, FlowError> {
    let handle = args
        .get("handle")
        .and_then(Value::as_u64)
        .ok_or_else(|| invalid("`handle` is the number run_flow or run_workflow returned"))?;
    let journal = ctx.run.rt.journal.clone();
    let record = blocking(move || journal.task(TaskId(handle))).await?;
    let Some(record) = record.filter(|r| r.run == ctx.run_id()) else {
        return Err(invalid(format!("no task {handle} in this run")));
    };
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

/// Returns `registry` with the orchestration tools `run_flow`, `run_workflow` and
/// `flow_result`, registered in code (no plugin id), so they are allowed by default like
/// the host's other built-in tools; deployment and person rules still apply.
pub fn register_orchestration_tools(registry: Registry) -> Registry {
    let run_flow_tool = Tool::contextual("run_flow", run_flow).describe(
        "Starts flow `flow` on `input` with `options` (and `model`) in the background and \
         returns its handle at once; read its result later with flow_result(handle).",
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
         and `approve_edits`; returns its handle at once; read its result with \
         flow_result(handle).",
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
    let flow_result_tool = Tool::contextual("flow_result", flow_result).read_only().describe(
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
    registry.tool(run_flow_tool).tool(run_workflow_tool).tool(flow_result_tool)
}

/// Returns `registry` with the team tools of `env`'s session, named `council_` + each
/// [`crate::TEAM_TOOLS`] name, plus `council_wait_agents`, the seed's name for
/// `council_wait`. Their errors come back as data (`{"error": {"reason", "message"}}`).
pub fn register_team_tools(registry: Registry, env: &AgentEnv) -> Registry {
    let mut registry = registry;
    for tool in env.tools("council_") {
        if tool.name == "council_wait" {
            let alias = Tool { name: "council_wait_agents".into(), ..tool.clone() };
            registry = registry.tool(alias);
        }
        registry = registry.tool(tool);
    }
    registry
}
