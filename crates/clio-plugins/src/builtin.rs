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

/// Returns the `orchestration` plugin: `run_flow`, `run_workflow`, the subagent-team
/// tools of SPEC §8, and the `workflow` and `council` flows.
pub fn orchestration() -> Plugin {
    let mut plugin = Plugin::empty("orchestration".to_owned(), version());
    plugin.description = "Flows, workflows and subagent teams.".to_owned();
    let s = |d: &str| json!({"type": "string", "description": d});
    plugin.tools = vec![
        tool(
            "run_flow",
            "Start a flow as background work and get its handle.",
            false,
            object(
                json!({"flow": s("flow id"), "input": {}, "options": {"type": "object"}, "model": s("model")}),
                &["flow"],
            ),
        ),
        tool(
            "run_workflow",
            "Start a workflow (a JSON DAG of steps) as background work.",
            false,
            object(json!({"workflow": {}, "task": {}}), &["workflow"]),
        ),
        tool(
            "run",
            "Run each task in its own subagent and wait for them.",
            false,
            object(
                json!({"tasks": {"type": "array"}, "timeout_secs": {"type": "integer"}}),
                &["tasks"],
            ),
        ),
        tool(
            "wait_agents",
            "Wait for running subagents.",
            true,
            object(
                json!({"session_ids": {"type": "array"}, "timeout_secs": {"type": "integer"}}),
                &[],
            ),
        ),
        tool(
            "cancel_agent",
            "Cancel a subagent, its descendants and their queued work.",
            false,
            object(json!({"session_id": s("session")}), &["session_id"]),
        ),
        tool(
            "ask",
            "Ask the parent agent a question and wait for its answer.",
            true,
            object(
                json!({"question": s("question"), "timeout_secs": {"type": "integer"}}),
                &["question"],
            ),
        ),
    ];
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
