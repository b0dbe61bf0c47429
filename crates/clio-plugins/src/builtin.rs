//! The plugins every deployment has (SPEC §4): `core`, `memory` and `orchestration`.
//!
//! Declarations only: their tools and flows are implemented by the runtime (clio-flow),
//! which registers them under these plugin ids ([`ToolImpl::Host`]). Their version is this
//! crate's version. The built-in flows `react`, `workflow` and `council` always exist.

use semver::Version;
use serde_json::{Value as Json, json};

use crate::decl::{Callers, FlowDecl, Tool, ToolOptions};
use crate::plugin::Plugin;

/// The ids of the built-in plugins.
pub const BUILTIN_PLUGINS: [&str; 3] = ["core", "memory", "orchestration"];

/// The flows that always exist, whatever plugins an agent carries.
pub const BUILTIN_FLOWS: [&str; 3] = ["react", "workflow", "council"];

fn version() -> Version {
    Version::parse(env!("CARGO_PKG_VERSION")).unwrap_or_else(|_| Version::new(0, 0, 0))
}

fn object(properties: Json, required: &[&str]) -> Json {
    json!({"type": "object", "properties": properties, "required": required})
}

fn tool(name: &str, description: &str, read_only: bool, schema: Json) -> Tool {
    let tool = Tool::new(name, description).input_schema(schema);
    if read_only { tool.read_only() } else { tool }
}

/// Returns the `core` plugin: `search_tools`, the file tools, `run_code`, and the
/// `react` flow.
pub fn core() -> Plugin {
    let mut plugin = Plugin::empty("core".to_owned(), version());
    plugin.description = "The basic tools every agent has.".to_owned();
    let path = json!({"path": {"type": "string"}});
    plugin.tools = vec![
        tool(
            "search_tools",
            "Find deferred tools by name or description and load them.",
            true,
            object(json!({"query": {"type": "string"}}), &["query"]),
        )
        .options(ToolOptions { callers: Some(Callers::Direct), ..ToolOptions::default() }),
        tool(
            "read_file",
            "Read a text file of the workspace.",
            true,
            object(path.clone(), &["path"]),
        ),
        tool(
            "write_file",
            "Write a text file of the workspace.",
            false,
            object(
                json!({"path": {"type": "string"}, "text": {"type": "string"}}),
                &["path", "text"],
            ),
        ),
        tool("list_files", "List files of the workspace under a folder.", true, object(path, &[])),
        tool(
            "run_code",
            "Run a script that may call the agent's tools through the generated `clio` module.",
            false,
            object(json!({"language": {"type": "string"}, "code": {"type": "string"}}), &["code"]),
        )
        .options(ToolOptions { callers: Some(Callers::Direct), ..ToolOptions::default() }),
    ];
    plugin.flows = vec![FlowDecl::host("react", "Call the model and its tools until it answers.")];
    plugin
}

/// Returns the `memory` plugin: notes kept in the workspace.
pub fn memory() -> Plugin {
    let mut plugin = Plugin::empty("memory".to_owned(), version());
    plugin.description = "Notes the agent keeps in its workspace.".to_owned();
    plugin.tools = vec![
        tool(
            "read_notes",
            "Read the agent's notes, or one note by name.",
            true,
            object(json!({"name": {"type": "string"}}), &[]),
        ),
        tool(
            "write_note",
            "Write or replace a note.",
            false,
            object(
                json!({"name": {"type": "string"}, "text": {"type": "string"}}),
                &["name", "text"],
            ),
        ),
    ];
    plugin
}

/// Returns the `orchestration` plugin: `run_flow`, `run_workflow` and `flow_result` for
/// background work, the subagent-team tools of SPEC §8 (`council_run`, `council_wait`,
/// also named `council_wait_agents`, ...), and the `workflow` and `council` flows.
///
/// The runtime implements these tools (clio-flow's `ORCHESTRATION_TOOLS`); a clio-flow
/// test checks that names, descriptions, read-only flags and schemas are the same here.
pub fn orchestration() -> Plugin {
    let mut plugin = Plugin::empty("orchestration".to_owned(), version());
    plugin.description = "Flows, workflows and subagent teams.".to_owned();
    let string = json!({"type": "string"});
    let count = json!({"type": "integer", "minimum": 0});
    let strings = json!({"type": "array", "items": {"type": "string"}});
    let mut tools = vec![
        tool(
            "run_flow",
            "Starts flow `flow` on `input` with `options` (and `model`) in the background and \
             returns its handle at once; its result arrives in your conversation when it \
             ends (flow_result(handle) reads how it stands meanwhile).",
            false,
            object(
                json!({
                    "flow": {"type": "string", "description": "The flow's id."},
                    "input": {"description": "The flow's task."},
                    "options": {"type": "object", "description": "The flow's options."},
                    "model": {"type": "string", "description": "The model it runs on."},
                }),
                &["flow"],
            ),
        ),
        tool(
            "run_workflow",
            "Starts the built-in workflow flow in the background on `workflow` (steps) and \
             `task`, within `editors`, `max_added_steps`, `max_edit_rounds`, `allowed_targets` \
             and `approve_edits`; returns its handle at once; its result arrives in your conversation when it \
             ends (flow_result(handle) reads how it stands meanwhile).",
            false,
            object(
                json!({
                    "workflow": {"type": "object", "description": "The workflow: its steps."},
                    "task": {"description": "The task the steps share."},
                    "editors": strings,
                    "max_added_steps": count,
                    "max_edit_rounds": count,
                    "allowed_targets": strings,
                    "approve_edits": {"type": "boolean"},
                    "model": string,
                }),
                &["workflow"],
            ),
        ),
        tool(
            "flow_result",
            "Returns how work started by run_flow or run_workflow stands: status (running, \
             succeeded, failed, cancelled) and, once it ended, its answer or error. Does not wait.",
            true,
            object(json!({"handle": count}), &["handle"]),
        ),
    ];
    let wait = (
        "Wait again for subagents by session_ids (default: all your children). Same records and timeout as run.",
        object(json!({"session_ids": strings, "timeout_secs": count}), &[]),
    );
    let team: Vec<(&str, &str, bool, Json)> = vec![
        (
            "run",
            "Run each task in its own subagent and wait for all of them. A task is a string or a dict with task and optional model, provider, iteration_budget and context. A child on another model gets only the system prompt and its task, unless context is \"full\". Records have session_id, status, answer and question. timeout_secs defaults to 240 (max 1800). If a status is still running, call wait. lost means the child stopped without an answer.",
            false,
            object(
                json!({
                    "tasks": {"type": "array", "items": {"oneOf": [
                        {"type": "string"},
                        {"type": "object", "properties": {
                            "task": string, "model": string, "provider": string,
                            "iteration_budget": count, "context": {"enum": ["full", "task"]},
                        }, "required": ["task"], "additionalProperties": false},
                    ]}},
                    "timeout_secs": count,
                    "team": string,
                }),
                &["tasks"],
            ),
        ),
        ("wait", wait.0, false, wait.1.clone()),
        ("wait_agents", wait.0, false, wait.1),
        (
            "cancel_agent",
            "Cancel a subagent (session_id) and its descendants, including queued work. Returns its record.",
            false,
            object(json!({"session_id": string}), &["session_id"]),
        ),
        (
            "ask",
            "As a subagent, ask your parent a question and wait for the reply text. The reply is null when the parent is not running or does not reply within timeout_secs (default 600): then choose the safest option and say so in your answer.",
            false,
            object(json!({"question": string, "timeout_secs": count}), &["question"]),
        ),
        (
            "reply",
            "Reply text to a child (session_id) that asked you a question.",
            false,
            object(json!({"session_id": string, "text": string}), &["session_id", "text"]),
        ),
        (
            "checkpoint",
            "Capture the last complete model input of messages, before its in-flight tool call.",
            false,
            object(
                json!({"messages": {"type": "array", "items": {"type": "object"}}}),
                &["messages"],
            ),
        ),
        (
            "claim_iteration",
            "Reserve one model iteration of your durable budget.",
            false,
            object(json!({}), &[]),
        ),
        (
            "stop_reason",
            "Give the cause when claim_iteration refuses you.",
            true,
            object(json!({}), &[]),
        ),
        (
            "controls",
            "Whether actor controls target: leaders control their descendants; subagents themselves and their direct children.",
            true,
            object(json!({"actor": string, "target": string}), &["actor", "target"]),
        ),
        (
            "enabled",
            "Whether session_id (default: you) can use managed subagents.",
            true,
            object(json!({"session_id": string}), &[]),
        ),
        (
            "require_enabled",
            "Refuse unless session_id (default: you) can use managed subagents.",
            false,
            object(json!({"session_id": string}), &[]),
        ),
        (
            "reconcile_orphans",
            "Mark lost the children a dead process left queued or running, sparing those whose session, leader or ancestor live_session_ids names. Returns the count.",
            false,
            object(json!({"live_session_ids": strings}), &[]),
        ),
        (
            "restrict_router",
            "The router allowlist your requests are held to.",
            true,
            object(json!({}), &[]),
        ),
        (
            "routing_change",
            "The route command issued for you since mark before, as {preference: {provider, model}, command}, or null.",
            true,
            object(json!({"before": count}), &[]),
        ),
        (
            "wake_allowed",
            "Whether a message from author may automatically resume recipient.",
            true,
            object(json!({"author": string, "recipient": string}), &["author", "recipient"]),
        ),
    ];
    for (name, description, read_only, schema) in team {
        tools.push(tool(&format!("council_{name}"), description, read_only, schema));
    }
    plugin.tools = tools;
    plugin.flows = vec![
        FlowDecl::host("workflow", "Run a workflow of steps as a DAG."),
        FlowDecl::host("council", "Ask several members and synthesize one answer."),
    ];
    plugin
}

/// Returns the three built-in plugins.
pub fn builtin_plugins() -> Vec<Plugin> {
    vec![core(), memory(), orchestration()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtins_are_well_formed_and_provide_the_builtin_flows() {
        let plugins = builtin_plugins();
        for plugin in &plugins {
            assert_eq!(plugin.problems("<builtin>"), Vec::new(), "{}", plugin.id);
        }
        let ids: Vec<&str> = plugins.iter().map(|p| p.id.as_str()).collect();
        assert_eq!(ids, BUILTIN_PLUGINS);
        let flows: Vec<&str> =
            plugins.iter().flat_map(|p| p.flows.iter().map(|f| f.id.as_str())).collect();
        assert_eq!(flows, BUILTIN_FLOWS);
    }
}
