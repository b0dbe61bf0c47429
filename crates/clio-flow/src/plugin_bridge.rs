//! Plugin folders into the [`Registry`]: what a loaded [`clio_plugins::Plugin`] brings —
//! executable tools, subagents with their prompt files, and workflow files that become
//! flows — and the basic tools of the built-in `core` and `memory` plugins on a
//! [`Workspace`].
//!
//! A plugin is declared with its version, its content digest (`clio_plugins::plugin_digest`)
//! and whether the host found it trusted at that digest; none of its code (tools, hooks,
//! MCP servers, bindings, flows) runs until it is trusted, which the gate asks the person
//! about (`crate::gate`), showing what is listed here. Executable tools get their JSON arguments on stdin and
//! answer one JSON value on stdout; a non-zero exit, a timeout, or output that is not
//! JSON fails the call with a message naming the plugin, the tool and what went wrong.
//! They run under the [`Workspace`]'s sandbox policy ([`crate::Sandbox`]): they write only
//! to the workspace, read it and their own plugin folder, and reach the network only when
//! they declare `network = true` and the deployment allows it.
//!
//! A tool on one of the plugin's `[[mcp_servers]]` is called through [`McpServers`]
//! (clio-tools): the server starts on the tool's first call, a crashed server restarts,
//! and a tool's `read_only` decides whether a call its crash cut short is sent again.
//!
//! A plugin's command hooks are registered with the runtime ([`crate::RuntimeHook`]); its
//! tools carry the plugin's id and their declared `defer`, `callers` and `permission`,
//! which the gate applies at run time.
//!
//! A plugin's `[[native_tools]]` claim built-in tools already in the registry (the basic
//! tools, `run_code`, the orchestration tools: tools of no plugin or of a built-in
//! plugin), so register those first. A claim's options replace the tool's own; an unset
//! `defer` follows the plugin's `defer`, any other unset option keeps the tool's own.
//! When several plugins claim one tool, `permission` is the strictest of theirs, `callers`
//! the narrowest (`direct` against `code` is an error), and `defer` is true if any says
//! so. A name that is no built-in tool of the registry is an error naming the built-in
//! tools (SPEC §4: a plugin's unknown values fail when it loads).

use std::path::{Path, PathBuf};
use std::time::Duration;

use clio_plugins::{
    BUILTIN_PLUGINS, Callers, FlowSource, HookHandler, NativeTool, Plugin, Prompt, ToolImpl,
    ToolOptions,
};
use clio_tools::{Access, McpConfig, McpServers, Sandbox, TOOL_TIMEOUT};
use serde_json::{Map, Value, json};

use crate::ctx::Ctx;
use crate::error::FlowError;
use crate::flow::{Flow, FlowFuture};
use crate::gate::{HOOK_TIMEOUT, HookRun, RuntimeHook};
use crate::options::{OptionSpec, OptionType};
use crate::registry::{Registry, Tool, Worker};
use crate::workflow_flow::WorkflowFlow;
use crate::workspace::Workspace;

fn failed(message: String) -> FlowError {
    FlowError::CallFailed { handle: None, message }
}

/// Adds everything `plugin` brings to `registry`, declaring the plugin at its version
/// with `trusted`; its executable tools run in `workspace`'s root when it has one.
///
/// Prompt files are read now, so a missing prompt is an error at start, naming the file.
/// The plugin's MCP servers belong to its tools: they stop when the last of those tools
/// is dropped. [`register_plugin_with_mcp`] shares one [`McpServers`] instead.
pub fn register_plugin(
    registry: Registry,
    plugin: &Plugin,
    trusted: bool,
    workspace: &Workspace,
) -> Result<Registry, FlowError> {
    let mcp = McpServers::new(McpConfig::default());
    register_plugin_with_mcp(registry, plugin, trusted, workspace, &mcp)
}

/// Does what [`register_plugin`] does with the content digest `digest` a caller has just
/// computed for `plugin` (`clio_plugins::plugin_digest`), to decide its trust: the folder
/// is not read and hashed a second time (a plugin that brings a server's binary is
/// megabytes), and the digest recorded is the one trust was decided on.
pub fn register_plugin_with_digest(
    registry: Registry,
    plugin: &Plugin,
    trusted: bool,
    digest: String,
    workspace: &Workspace,
) -> Result<Registry, FlowError> {
    let mcp = McpServers::new(McpConfig::default());
    register(registry, plugin, trusted, digest, workspace, &mcp)
}

/// Does what [`register_plugin`] does, declaring the plugin's MCP servers in `mcp`, whose
/// owner can stop them all with [`McpServers::shutdown`]; the servers run in
/// `workspace`'s root when it has one.
pub fn register_plugin_with_mcp(
    registry: Registry,
    plugin: &Plugin,
    trusted: bool,
    workspace: &Workspace,
    mcp: &McpServers,
) -> Result<Registry, FlowError> {
    let digest = clio_plugins::plugin_digest(plugin)
        .map_err(|e| failed(format!("plugin {}: its content digest: {e}", plugin.id)))?;
    register(registry, plugin, trusted, digest, workspace, mcp)
}

fn register(
    mut registry: Registry,
    plugin: &Plugin,
    trusted: bool,
    digest: String,
    workspace: &Workspace,
    mcp: &McpServers,
) -> Result<Registry, FlowError> {
    let mut also: Vec<String> = plugin
        .mcp_servers
        .iter()
        .map(|s| format!("mcp server {}: {} {}", s.name, s.command, s.args.join(" ")))
        .collect();
    also.extend(
        plugin
            .bindings
            .iter()
            .map(|b| format!("script binding {} answering {}", b.name, b.host_calls.join(", "))),
    );
    let info = crate::registry::PluginInfo {
        version: plugin.version.to_string(),
        trusted,
        digest,
        trust_with: String::new(),
        also,
    };
    registry = registry.declare_plugin(plugin.id.clone(), info);
    let folder = plugin.folder.clone();
    for server in &plugin.mcp_servers {
        // The server is the plugin's code, confined as its executable tools are: the
        // workspace (its working folder), its plugin folder and the installation of the
        // program it names (an interpreter found on the PATH) to read, and the network
        // only if it declares it and the deployment allows it.
        let mut read: Vec<PathBuf> = folder.as_deref().map(plugin_root).into_iter().collect();
        read.extend(clio_tools::program_prefixes(Path::new(&server.command)));
        let access = Access {
            workspace: workspace.root().map(Path::to_path_buf),
            read,
            write: Vec::new(),
            network: server.network,
            // Of `clio`'s environment, only what config.toml's `[tools] env` allows it.
            env: workspace.sandbox().env_for(&plugin.id, &format!("mcp:{}", server.name)),
        };
        mcp.declare(&plugin.id, folder.as_deref(), server, workspace.sandbox(), &access)?;
    }
    // One Python child runs the plugin's Python flows, tools and hooks (started when the
    // first of them runs).
    let python = (plugin.tools.iter().any(|t| matches!(t.implementation, ToolImpl::Python { .. }))
        || plugin.hooks.iter().any(|h| matches!(h.handler, HookHandler::Python { .. }))
        || plugin.flows.iter().any(|f| matches!(f.source, FlowSource::Python { .. })))
    .then(|| {
        let root = folder.as_deref().map_or_else(PathBuf::new, plugin_root);
        crate::python_flow::Pool::new(&plugin.id, root, clio_plugins::python::interpreter())
    });
    for tool in &plugin.tools {
        let bridged = match &tool.implementation {
            ToolImpl::Python { file, function } => {
                let Some(pool) = &python else { continue };
                python_tool(pool, &tool.name, file, function)
            }
            ToolImpl::Executable { command, network } => {
                let Some(folder) = &folder else {
                    return Err(failed(format!(
                        "plugin {}: tool {} names an executable but the plugin has no folder",
                        plugin.id, tool.name
                    )));
                };
                executable_tool(&plugin.id, &tool.name, folder, command, *network, workspace)
            }
            ToolImpl::Mcp { server, tool: remote } => {
                let (mcp, plugin_id) = (mcp.clone(), plugin.id.clone());
                let (server, remote, read_only) = (server.clone(), remote.clone(), tool.read_only);
                Tool::new(tool.name.clone(), move |args: Value| {
                    let (mcp, plugin_id) = (mcp.clone(), plugin_id.clone());
                    let (server, remote) = (server.clone(), remote.clone());
                    async move { Ok(mcp.call(&plugin_id, &server, &remote, args, read_only).await?) }
                })
            }
            // The host registers its own implementation under this name.
            ToolImpl::Host => continue,
        };
        // The plugin's `defer` is the default of its tools' own.
        let mut options = tool.options;
        options.defer = options.defer.or(plugin.defer);
        let mut bridged =
            bridged.describe(tool.description.clone()).of_plugin(&plugin.id).options(options);
        bridged.read_only = tool.read_only;
        bridged.schema = tool.input_schema.clone();
        registry = registry.tool(bridged);
    }
    for native in &plugin.native_tools {
        registry = claim_native(registry, plugin, native)?;
    }
    for hook in &plugin.hooks {
        let run = match &hook.handler {
            HookHandler::Command { command, timeout_secs } => {
                let Some(folder) = &folder else {
                    return Err(failed(format!(
                        "plugin {}: hook {} names an executable but the plugin has no folder",
                        plugin.id, hook.id
                    )));
                };
                HookRun::Command {
                    program: folder.join(command),
                    cwd: workspace.root().map(Path::to_path_buf),
                    timeout: timeout_secs.map_or(HOOK_TIMEOUT, Duration::from_secs),
                }
            }
            HookHandler::Python { file, function } => {
                let Some(pool) = &python else { continue };
                HookRun::Contextual(python_hook(pool, &hook.id, file, function))
            }
            // The host registers its own callback with `Registry::hook`.
            HookHandler::Host => continue,
        };
        registry =
            registry.hook(RuntimeHook { plugin: plugin.id.clone(), hook: hook.clone(), run });
    }
    for subagent in &plugin.subagents {
        let prompt = match &subagent.prompt {
            Prompt::Text(text) => text.clone(),
            Prompt::File(file) => {
                let Some(folder) = &folder else {
                    return Err(failed(format!(
                        "plugin {}: subagent {} names prompt file {} but the plugin has no folder",
                        plugin.id,
                        subagent.id,
                        file.path.display()
                    )));
                };
                let path = folder.join(&file.path);
                std::fs::read_to_string(&path).map_err(|e| {
                    failed(format!(
                        "plugin {}: subagent {}: cannot read prompt {}: {e}",
                        plugin.id,
                        subagent.id,
                        path.display()
                    ))
                })?
            }
        };
        let mut worker = Worker::react(subagent.id.clone(), prompt.trim_end().to_owned());
        worker.description = subagent.description.clone();
        worker.max_iters = subagent.max_iters;
        worker.tools = match &subagent.tools {
            Some(tools) => tools.clone(),
            None => plugin.tool_names().map(str::to_owned).collect(),
        };
        declared_fields(&mut worker, plugin, subagent)?;
        worker = worker.with_flow(subagent.flow.clone());
        worker.requires = plugin.model_requires;
        registry = registry.subagent(worker);
    }
    for flow in &plugin.flows {
        if let Some(pool) = &python
            && let Some(python_flow) = crate::python_flow::PythonFlow::from_decl(
                flow,
                &plugin.id,
                &plugin.version.to_string(),
                pool,
            )
        {
            registry = registry.plugin_flow(plugin.id.clone(), python_flow);
            continue;
        }
        if let FlowSource::Workflow { workflow, .. } = &flow.source {
            let file_flow = WorkflowFileFlow {
                id: flow.id.clone(),
                description: flow.description.clone(),
                version: plugin.version.to_string(),
                shape: workflow_shape(workflow),
                workflow: workflow.clone(),
            };
            registry = registry.plugin_flow(plugin.id.clone(), file_flow);
        }
    }
    registry = register_plugin_bindings(registry, plugin, workspace);
    Ok(registry)
}

/// Returns a Python file of a plugin (relative to `ai.iowarp.clio/`) as the child names
/// it, relative to the plugin folder.
fn python_file(file: &Path) -> String {
    format!("{}/{}", clio_plugins::PLUGIN_DIR, file.to_string_lossy().replace('\\', "/"))
}

/// Returns tool `name`, Python function `function` of the plugin's `file`, run in the
/// plugin's child with the call's arguments as keyword arguments.
fn python_tool(
    pool: &std::sync::Arc<crate::python_flow::Pool>,
    name: &str,
    file: &Path,
    function: &str,
) -> Tool {
    let pool = std::sync::Arc::clone(pool);
    let (file, function, shown) = (python_file(file), function.to_owned(), format!("tool {name}"));
    Tool::contextual(name.to_owned(), move |args: Value, ctx: crate::ctx::Ctx| {
        let pool = std::sync::Arc::clone(&pool);
        let (file, function, shown) = (file.clone(), function.clone(), shown.clone());
        async move { pool.call_function(&ctx, &file, &function, "kwargs", &shown, args).await }
    })
}

/// Returns hook `id`, Python function `function` of the plugin's `file`, run in the
/// plugin's child on a `HookEvent`; what it returns is its decision (`None`: no decision),
/// as a command hook's printed JSON is.
fn python_hook(
    pool: &std::sync::Arc<crate::python_flow::Pool>,
    id: &str,
    file: &Path,
    function: &str,
) -> crate::gate::ContextualHook {
    let pool = std::sync::Arc::clone(pool);
    let (file, function, name) = (python_file(file), function.to_owned(), format!("hook {id}"));
    contextual_hook(move |ctx, event| {
        let pool = std::sync::Arc::clone(&pool);
        let (file, function, name) = (file.clone(), function.clone(), name.clone());
        Box::pin(async move {
            let call = pool.call_function(ctx, &file, &function, "hook", &name, event);
            match tokio::time::timeout(HOOK_TIMEOUT, call).await {
                Ok(Ok(Value::Null)) => clio_plugins::HookOutcome::from_exit(Some(0), "", ""),
                Ok(Ok(answer)) => {
                    clio_plugins::HookOutcome::from_exit(Some(0), &answer.to_string(), "")
                }
                Ok(Err(err)) => clio_plugins::HookOutcome::Failed { reason: err.to_string() },
                Err(_) => clio_plugins::HookOutcome::Failed {
                    reason: format!("timed out after {} s", HOOK_TIMEOUT.as_secs()),
                },
            }
        })
    })
}

/// Returns `f` as a hook callback (the closure's lifetimes made explicit).
fn contextual_hook<F>(f: F) -> crate::gate::ContextualHook
where
    F: for<'a> Fn(
            &'a crate::ctx::Ctx,
            Value,
        ) -> std::pin::Pin<
            Box<dyn std::future::Future<Output = clio_plugins::HookOutcome> + Send + 'a>,
        > + Send
        + Sync
        + 'static,
{
    std::sync::Arc::new(f)
}

/// Sets what `subagent` of `plugin` declares beyond its prompt and tools on `worker`: its
/// plugin, the plugins it carries (their tools too when its `tools` is unset), its
/// preferred model, provider and effort, its structured outputs (each schema checked
/// again, for a plugin built in code) and whether it is internal.
fn declared_fields(
    worker: &mut Worker,
    plugin: &Plugin,
    subagent: &clio_plugins::Subagent,
) -> Result<(), FlowError> {
    worker.plugin = Some(plugin.id.clone());
    for reference in &subagent.plugins {
        let parsed = clio_spec::PluginRef::parse(reference).map_err(|e| {
            failed(format!(
                "plugin {}: subagent {} carries {reference:?}, which is no plugin reference: {e}",
                plugin.id, subagent.id
            ))
        })?;
        let id = parsed.id().to_owned();
        if id != plugin.id && !worker.carries.contains(&id) {
            worker.carries.push(id);
        }
    }
    worker.carried_tools = subagent.tools.is_none();
    if let Some(prefers) = &subagent.prefers {
        // Unset is `None`, not the empty string.
        let set = |v: &String| (!v.trim().is_empty()).then(|| v.clone());
        worker.model = set(&prefers.model);
        worker.provider = set(&prefers.provider);
        worker.effort = set(&prefers.effort);
    }
    for (name, schema) in &subagent.structured_outputs {
        if let Some(problem) = clio_plugins::schema_problems(schema).into_iter().next() {
            return Err(failed(format!(
                "plugin {}: subagent {}: structured output {name}: {problem}",
                plugin.id, subagent.id
            )));
        }
    }
    worker.structured_outputs = subagent.structured_outputs.clone();
    worker.internal = subagent.internal;
    Ok(())
}

/// Applies `plugin`'s claim `native` to the built-in tool of that name in `registry`.
fn claim_native(
    mut registry: Registry,
    plugin: &Plugin,
    native: &NativeTool,
) -> Result<Registry, FlowError> {
    let is_builtin = |t: &Tool| t.plugin.is_empty() || BUILTIN_PLUGINS.contains(&t.plugin.as_str());
    let Some(tool) = registry.get_tool(&native.name).filter(|t| is_builtin(t)).cloned() else {
        let mut builtins: Vec<&str> =
            registry.tools().filter(|t| is_builtin(t)).map(|t| t.name.as_str()).collect();
        builtins.sort_unstable();
        let what = match registry.get_tool(&native.name) {
            Some(t) => format!("a tool of plugin {}, not a built-in tool", t.plugin),
            None => "not a built-in tool of this runtime".to_owned(),
        };
        return Err(failed(format!(
            "plugin {}: native tool {} is {what} (built-in tools: {})",
            plugin.id,
            native.name,
            if builtins.is_empty() { "none".to_owned() } else { builtins.join(", ") }
        )));
    };
    let mut options = native.options;
    options.defer = options.defer.or(plugin.defer);
    let claims = registry.native_claims(&native.name, tool.options);
    claims.by.push((plugin.id.clone(), options));
    let (own, by) = (claims.own, claims.by.clone());
    let options = claimed_options(own, &by).map_err(|message| {
        failed(format!("plugin {}: native tool {}: {message}", plugin.id, native.name))
    })?;
    Ok(registry.tool(tool.options(options)))
}

/// Returns the options of a built-in tool whose own are `own` under the claims `by`
/// (plugin, options): each option set by a claim replaces the tool's own; among claims the
/// strictest `permission`, the narrowest `callers` and a `defer` that any claim sets to
/// true win. Fails when two claims allow disjoint callers.
fn claimed_options(own: ToolOptions, by: &[(String, ToolOptions)]) -> Result<ToolOptions, String> {
    let permission = by.iter().filter_map(|(_, o)| o.permission).max();
    let mut callers: Option<(&str, Callers)> = None;
    for (plugin, options) in by {
        let Some(wanted) = options.callers else { continue };
        callers = match callers {
            None => Some((plugin, wanted)),
            Some((_, Callers::Both)) => Some((plugin, wanted)),
            Some(kept) if wanted == Callers::Both || wanted == kept.1 => Some(kept),
            Some((other, kept)) => {
                return Err(format!(
                    "callers {:?} of plugin {plugin} conflicts with callers {:?} of plugin {other}",
                    wanted.as_str(),
                    kept.as_str()
                ));
            }
        };
    }
    let defers: Vec<bool> = by.iter().filter_map(|(_, o)| o.defer).collect();
    let defer = (!defers.is_empty()).then(|| defers.contains(&true));
    Ok(ToolOptions {
        defer: defer.or(own.defer),
        callers: callers.map(|(_, c)| c).or(own.callers),
        permission: permission.or(own.permission),
    })
}

/// Returns a tool that runs `command` of plugin folder `folder` (its `ai.iowarp.clio/`)
/// with the JSON arguments on stdin, sandboxed on `workspace`: it reads and writes the
/// workspace, reads its plugin's folder, and has the network only if it declares it
/// (`network`) and the workspace's sandbox allows it.
fn executable_tool(
    plugin: &str,
    name: &str,
    folder: &Path,
    command: &Path,
    network: bool,
    workspace: &Workspace,
) -> Tool {
    let label = format!("plugin {plugin}: tool {name}");
    let program = folder.join(command);
    let sandbox = workspace.sandbox().clone();
    let access = Access {
        workspace: workspace.root().map(Path::to_path_buf),
        read: vec![plugin_root(folder)],
        write: Vec::new(),
        network,
        // Of `clio`'s environment, only what config.toml's `[tools] env` allows it.
        env: sandbox.env_for(plugin, name),
    };
    Tool::new(name.to_owned(), move |args: Value| {
        let (label, program, sandbox, access) =
            (label.clone(), program.clone(), sandbox.clone(), access.clone());
        async move { run_executable(&label, &program, &sandbox, &access, &args, TOOL_TIMEOUT).await }
    })
}

/// Adds the script bindings of folder plugin `plugin`: binding `name` is answered by the
/// executable `bindings/<name>` of its `ai.iowarp.clio/` folder, run in `workspace`'s root
/// under its sandbox (no network), which gets `{call, args}` as JSON on stdin and prints the value as JSON. A plugin built
/// in code brings its own [`Binding`] with [`Registry::binding`].
fn register_plugin_bindings(
    mut registry: Registry,
    plugin: &Plugin,
    workspace: &Workspace,
) -> Registry {
    let Some(folder) = &plugin.folder else { return registry };
    let sandbox = workspace.sandbox().clone();
    let access = Access {
        workspace: workspace.root().map(PathBuf::from),
        read: vec![plugin_root(folder)],
        write: Vec::new(),
        network: false,
        env: Vec::new(),
    };
    for decl in &plugin.bindings {
        // Of `clio`'s environment, only what config.toml's `[tools] env` allows it.
        let access = Access {
            env: sandbox.env_for(&plugin.id, &format!("binding:{}", decl.name)),
            ..access.clone()
        };
        let program = folder.join("bindings").join(&decl.name);
        let mut binding = crate::binding::Binding::new(decl.name.clone());
        binding.plugin = plugin.id.clone();
        for call in &decl.host_calls {
            let label = format!("plugin {}: binding {}: {call}", plugin.id, decl.name);
            let (program, call_name) = (program.clone(), call.clone());
            let (sandbox, access) = (sandbox.clone(), access.clone());
            binding = binding.host_call(call.clone(), move |args: Value| {
                let (label, program) = (label.clone(), program.clone());
                let (sandbox, access) = (sandbox.clone(), access.clone());
                let input = json!({ "call": call_name, "args": args });
                async move {
                    run_executable(
                        &label,
                        &program,
                        &sandbox,
                        &access,
                        &input,
                        clio_tools::TOOL_TIMEOUT,
                    )
                    .await
                }
            });
        }
        registry = registry.binding(binding);
    }
    registry
}

/// Returns the plugin folder whose `ai.iowarp.clio/` is `folder`: everything a plugin's
/// code may read of its own.
pub(crate) fn plugin_root(folder: &Path) -> PathBuf {
    match folder.parent() {
        Some(root) if folder.file_name().is_some_and(|n| n == clio_plugins::PLUGIN_DIR) => {
            root.to_path_buf()
        }
        _ => folder.to_path_buf(),
    }
}

/// Runs `program` under `sandbox` with `access` (in the workspace when there is one),
/// with `args` as JSON on stdin, and reads one JSON value from its stdout; `label` names
/// it in errors. A sandbox that cannot be had refuses the call
/// (`CallRefused(sandbox_unavailable)`), saying how to install one or turn it off; every
/// other failure fails it (`CallFailed`). The process side is [`clio_tools::run_executable`].
pub async fn run_executable(
    label: &str,
    program: &Path,
    sandbox: &Sandbox,
    access: &Access,
    args: &Value,
    timeout: Duration,
) -> Result<Value, FlowError> {
    clio_tools::run_executable(label, program, sandbox, access, args, timeout)
        .await
        .map_err(FlowError::from)
}

/// A workflow file of a plugin (`flows/<id>.json`), run as a flow by the built-in
/// `workflow` flow.
///
/// Its options are the workflow flow's settings (`editors`, `max_added_steps`,
/// `max_edit_rounds`, `allowed_targets`, `approve_edits`, `model`); its task is the
/// workflow's task.
#[derive(Debug, Clone)]
pub struct WorkflowFileFlow {
    /// The flow's id (the file's name).
    pub id: String,
    /// What it does.
    pub description: String,
    /// The plugin's version, which versions the flow.
    pub version: String,
    /// Its steps in railroad grammar ([`workflow_shape`]), shown when trust is asked.
    pub shape: String,
    /// The workflow as read from the file.
    pub workflow: Value,
}

/// Returns the shape of `workflow` (an object with `steps`, or a list of steps) in the
/// railroad grammar a flow's shape uses: a `sequence` of one `terminal` per step, in the
/// file's order, each naming the step, its target and the steps it waits on.
pub fn workflow_shape(workflow: &Value) -> String {
    let steps = match workflow {
        Value::Object(map) => map.get("steps").and_then(Value::as_array),
        other => other.as_array(),
    };
    let terminals: Vec<String> = steps
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .map(|step| {
            let text = |k: &str| step.get(k).and_then(Value::as_str).unwrap_or("?");
            let after: Vec<&str> = step
                .get("after")
                .and_then(Value::as_array)
                .map(|a| a.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            let waits = if after.is_empty() {
                String::new()
            } else {
                format!(" after {}", after.join(", "))
            };
            let label = format!("{}: {}{waits}", text("id"), text("target"));
            format!("terminal({})", Value::String(label))
        })
        .collect();
    format!("sequence({})", terminals.join(", "))
}

impl Flow for WorkflowFileFlow {
    fn id(&self) -> &str {
        &self.id
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn version(&self) -> &str {
        &self.version
    }

    fn shape(&self) -> &str {
        &self.shape
    }

    fn options(&self) -> Vec<OptionSpec> {
        let strings = || OptionType::List(Box::new(OptionType::Str));
        let count = || OptionType::Int { min: Some(0), max: None };
        vec![
            OptionSpec::new("editors", strings(), json!([])),
            OptionSpec::new("max_added_steps", count(), Value::Null),
            OptionSpec::new("max_edit_rounds", count(), Value::Null),
            OptionSpec::new("allowed_targets", OptionType::Any, Value::Null),
            OptionSpec::new("approve_edits", OptionType::Bool, json!(false)),
            OptionSpec::new("model", OptionType::Str, json!("")),
        ]
    }

    fn forward<'a>(&'a self, task: Value, ctx: Ctx) -> FlowFuture<'a> {
        let mut input = Map::new();
        for (key, value) in ctx.options() {
            if !value.is_null() {
                input.insert(key.clone(), value.clone());
            }
        }
        // A workflow file may carry a `description`, which the flow already holds; the
        // workflow itself is its steps.
        let workflow = match &self.workflow {
            Value::Object(map) => map.get("steps").cloned().unwrap_or(Value::Null),
            other => other.clone(),
        };
        input.insert("workflow".to_owned(), workflow);
        input.insert("task".to_owned(), task);
        Box::pin(async move { WorkflowFlow.forward(Value::Object(input), ctx).await })
    }
}

/// The names of the tools [`register_basic_tools`] adds: what every runtime offers an
/// agent before plugins.
pub const BASIC_TOOLS: [&str; 5] =
    ["read_file", "write_file", "list_files", "read_notes", "write_note"];

/// Adds the basic tools of the built-in `core` and `memory` plugins ([`BASIC_TOOLS`]),
/// working in `workspace`: `read_file`, `write_file`, `list_files`, `read_notes`,
/// `write_note`.
///
/// Without a workspace root each of them is refused with `CallRefused(no_workspace)`.
pub fn register_basic_tools(registry: Registry, workspace: Workspace) -> Registry {
    let path_arg = |args: &Value, key: &str| -> Result<String, FlowError> {
        args.get(key)
            .and_then(Value::as_str)
            .map(str::to_owned)
            .ok_or_else(|| failed(format!("argument `{key}` is required and must be text")))
    };
    let ws = workspace.clone();
    let read_file = Tool::new("read_file", move |args: Value| {
        let ws = ws.clone();
        async move {
            let path = path_arg(&args, "path")?;
            Ok(json!({ "path": path, "text": ws.read(&path)? }))
        }
    })
    .read_only()
    .describe("Read a text file of the workspace: {path}.")
    .with_schema(object_schema(
        &[("path", "string", "The file's path, relative to the workspace.")],
        &["path"],
    ));
    let ws = workspace.clone();
    let write_file = Tool::new("write_file", move |args: Value| {
        let ws = ws.clone();
        async move {
            let path = path_arg(&args, "path")?;
            let text = path_arg(&args, "text")?;
            Ok(json!({ "written": ws.write(&path, &text)? }))
        }
    })
    .describe("Write a text file of the workspace: {path, text}.")
    .with_schema(object_schema(
        &[
            ("path", "string", "The file's path, relative to the workspace."),
            ("text", "string", "The file's whole new text."),
        ],
        &["path", "text"],
    ));
    let ws = workspace.clone();
    let list_files = Tool::new("list_files", move |args: Value| {
        let ws = ws.clone();
        async move {
            let dir = args.get("path").and_then(Value::as_str).unwrap_or(".").to_owned();
            list_dir(&ws, &dir)
        }
    })
    .read_only()
    .describe("List the files of a workspace folder: {path}.")
    .with_schema(object_schema(
        &[(
            "path",
            "string",
            "The folder, relative to the workspace; `.` (the default) is its root.",
        )],
        &[],
    ));
    let ws = workspace.clone();
    let read_notes = Tool::new("read_notes", move |_args: Value| {
        let ws = ws.clone();
        async move {
            let text = match ws.read("notes.md") {
                Ok(text) => text,
                Err(FlowError::CallFailed { .. }) => String::new(),
                Err(other) => return Err(other),
            };
            Ok(json!({ "notes": text }))
        }
    })
    .read_only()
    .describe("Read the notes kept in the workspace.")
    .with_schema(object_schema(&[], &[]));
    let ws = workspace;
    let write_note = Tool::new("write_note", move |args: Value| {
        let ws = ws.clone();
        async move {
            let note = path_arg(&args, "note")?;
            ws.append("notes.md", &Value::String(note))?;
            Ok(json!({ "saved": true }))
        }
    })
    .describe("Add a note to the workspace's notes: {note}.")
    .with_schema(object_schema(&[("note", "string", "The note's text.")], &["note"]));
    registry.tool(read_file).tool(write_file).tool(list_files).tool(read_notes).tool(write_note)
}

/// Returns the JSON Schema of an object whose `fields` are (name, JSON type,
/// description), of which `required` must be present, and no others.
pub(crate) fn object_schema(fields: &[(&str, &str, &str)], required: &[&str]) -> Value {
    let properties: serde_json::Map<String, Value> = fields
        .iter()
        .map(|(name, kind, about)| {
            let mut property = json!({ "description": about });
            if !kind.is_empty() {
                property["type"] = json!(kind);
            }
            ((*name).to_owned(), property)
        })
        .collect();
    json!({
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": false,
    })
}

fn list_dir(ws: &Workspace, dir: &str) -> Result<Value, FlowError> {
    let Some(root) = ws.root() else {
        return Err(FlowError::CallRefused {
            handle: None,
            refusal: "no_workspace".to_owned(),
            message: "the conversation has no workspace folder".to_owned(),
        });
    };
    let inside = Path::new(dir)
        .components()
        .all(|c| matches!(c, std::path::Component::Normal(_) | std::path::Component::CurDir));
    if !inside {
        return Err(FlowError::CallRefused {
            handle: None,
            refusal: "outside_workspace".to_owned(),
            message: format!("path {dir:?} is not inside the workspace"),
        });
    }
    let full = root.join(dir);
    Workspace::contained(root, &full, dir)?;
    let entries = std::fs::read_dir(&full).map_err(|e| failed(format!("list_files {dir}: {e}")))?;
    let mut names: Vec<String> = entries
        .flatten()
        .map(|entry| {
            let name = entry.file_name().to_string_lossy().into_owned();
            if entry.path().is_dir() { format!("{name}/") } else { name }
        })
        .collect();
    names.sort();
    Ok(json!({ "path": dir, "files": names }))
}
