//! [`Plugin`] and [`Pack`]: the declaration of everything one plugin brings, built in
//! Rust with [`PluginBuilder`] or read from a folder ([`crate::load_plugin`]), checked the
//! same way either way ([`Plugin::problems`]) and described as JSON ([`Plugin::describe`]).

use std::collections::BTreeSet;
use std::path::PathBuf;

use clio_spec::{PluginRef, Prefers, Requires, validate_id};
use semver::Version;
use serde_json::{Value as Json, json};

use crate::decl::{
    FlowDecl, McpServer, NativeTool, ScriptBinding, Subagent, Tool, ToolImpl, slash_path,
};
use crate::hooks::{Hook, HookOrderError, HookRef, order_hooks};
use crate::problem::{Problem, ProblemCode, Sink};

/// Everything one plugin declares (SPEC §4).
///
/// Fields are plain data; [`Plugin::problems`] says what is wrong with a value built by
/// hand, and [`PluginBuilder::build`] refuses one with problems.
#[derive(Debug, Clone, PartialEq)]
pub struct Plugin {
    /// The plugin's id: `[a-z0-9][a-z0-9_-]{0,63}`.
    pub id: String,
    /// Its version, a full semver version.
    pub version: Version,
    /// What it is for.
    pub description: String,
    /// The plugins it needs, resolved transitively on install.
    pub requires: Vec<PluginRef>,
    /// For a pack, the plugins it brings; resolved like `requires`.
    pub members: Vec<PluginRef>,
    /// What a model must be able to do for this plugin's tools.
    pub model_requires: Requires,
    /// What model it would like.
    pub model_prefers: Prefers,
    /// The plugin's default for its tools' `defer`.
    pub defer: Option<bool>,
    /// Its tools.
    pub tools: Vec<Tool>,
    /// Built-in tools it claims, with its own options.
    pub native_tools: Vec<NativeTool>,
    /// Its hooks.
    pub hooks: Vec<Hook>,
    /// Its subagents.
    pub subagents: Vec<Subagent>,
    /// Its flows.
    pub flows: Vec<FlowDecl>,
    /// Its prompt files, relative to `ai.iowarp.clio/` (`prompts/...`).
    pub prompts: Vec<PathBuf>,
    /// Script bindings it answers.
    pub bindings: Vec<ScriptBinding>,
    /// MCP servers it declares.
    pub mcp_servers: Vec<McpServer>,
    /// The `ai.iowarp.clio/` folder it was read from; `None` when built in code.
    pub folder: Option<PathBuf>,
}

impl Plugin {
    /// Starts building plugin `id` at `version`; both are checked by
    /// [`PluginBuilder::build`].
    pub fn builder(id: impl Into<String>, version: &str) -> PluginBuilder {
        PluginBuilder {
            plugin: Plugin::empty(id.into(), Version::new(0, 0, 0)),
            version: version.to_owned(),
            bad_refs: Vec::new(),
        }
    }

    pub(crate) fn empty(id: String, version: Version) -> Plugin {
        Plugin {
            id,
            version,
            description: String::new(),
            requires: Vec::new(),
            members: Vec::new(),
            model_requires: Requires::default(),
            model_prefers: Prefers::default(),
            defer: None,
            tools: Vec::new(),
            native_tools: Vec::new(),
            hooks: Vec::new(),
            subagents: Vec::new(),
            flows: Vec::new(),
            prompts: Vec::new(),
            bindings: Vec::new(),
            mcp_servers: Vec::new(),
            folder: None,
        }
    }

    /// Returns every plugin reference this plugin depends on: `requires`, then `members`.
    pub fn dependencies(&self) -> impl Iterator<Item = &PluginRef> {
        self.requires.iter().chain(&self.members)
    }

    /// Returns the names of every tool this plugin offers, its own and native ones.
    pub fn tool_names(&self) -> impl Iterator<Item = &str> {
        self.tools
            .iter()
            .map(|t| t.name.as_str())
            .chain(self.native_tools.iter().map(|t| t.name.as_str()))
    }

    /// Returns the order its hooks run in, or the cycle that prevents one.
    pub fn hook_order(&self) -> Result<Vec<usize>, HookOrderError> {
        let refs: Vec<HookRef<'_>> = self
            .hooks
            .iter()
            .map(|hook| HookRef { plugin: &self.id, plugin_order: 0, hook })
            .collect();
        order_hooks(&refs)
    }

    /// Returns the declaration as JSON.
    pub fn describe(&self) -> Json {
        json!({
            "id": self.id,
            "version": self.version.to_string(),
            "description": self.description,
            "requires": self.requires.iter().map(ToString::to_string).collect::<Vec<_>>(),
            "members": self.members.iter().map(ToString::to_string).collect::<Vec<_>>(),
            "model": {
                "requires": serde_json::to_value(self.model_requires).unwrap_or(Json::Null),
                "prefers": serde_json::to_value(&self.model_prefers).unwrap_or(Json::Null),
            },
            "defer": self.defer,
            "tools": self.tools.iter().map(Tool::describe).collect::<Vec<_>>(),
            "native_tools": self.native_tools.iter().map(NativeTool::describe).collect::<Vec<_>>(),
            "hooks": self.hooks.iter().map(Hook::describe).collect::<Vec<_>>(),
            "subagents": self.subagents.iter().map(Subagent::describe).collect::<Vec<_>>(),
            "flows": self.flows.iter().map(FlowDecl::describe).collect::<Vec<_>>(),
            "prompts": self.prompts.iter().map(|p| slash_path(p)).collect::<Vec<_>>(),
            "bindings": self.bindings.iter().map(|b| json!({"name": b.name, "host_calls": b.host_calls})).collect::<Vec<_>>(),
            "mcp_servers": self.mcp_servers.iter().map(|s| {
                let mut out = json!({
                    "name": s.name, "command": s.command, "args": s.args, "env": s.env,
                });
                if s.network {
                    out["network"] = json!(true);
                }
                out
            }).collect::<Vec<_>>(),
        })
    }

    /// Returns what is wrong with the declaration itself (no files are read): ids and
    /// names, duplicates, host calls outside their binding, tools naming undeclared MCP
    /// servers, and hook ordering cycles. Problems name `file` and field paths.
    pub fn problems(&self, file: &str) -> Vec<Problem> {
        let mut problems = Vec::new();
        let mut sink = Sink { file: file.to_owned(), problems: &mut problems };
        self.check_into(&mut sink);
        problems
    }

    pub(crate) fn check_into(&self, sink: &mut Sink<'_>) {
        id_problem(sink, "id", &self.id);
        let mut names = BTreeSet::new();
        for (idx, name) in self.tool_names().enumerate() {
            let field = if idx < self.tools.len() {
                format!("tools[{idx}].name")
            } else {
                format!("native_tools[{}].name", idx - self.tools.len())
            };
            if !valid_tool_name(name) {
                sink.push(
                    ProblemCode::InvalidId,
                    &field,
                    None,
                    format!("tool name {name:?} must be 1 to 64 letters, digits, `_` or `-`"),
                );
            }
            if !names.insert(name) {
                sink.push(
                    ProblemCode::DuplicateTool,
                    &field,
                    None,
                    format!("tool {name:?} is declared twice"),
                );
            }
        }
        let ids = |items: Vec<&str>, what: &str, sink: &mut Sink<'_>| {
            let mut seen = BTreeSet::new();
            for (idx, id) in items.into_iter().enumerate() {
                let field = format!("{what}[{idx}]");
                id_problem(sink, &field, id);
                if !seen.insert(id) {
                    sink.push(
                        ProblemCode::DuplicateId,
                        field,
                        None,
                        format!("{id:?} is declared twice"),
                    );
                }
            }
        };
        ids(self.hooks.iter().map(|h| h.id.as_str()).collect(), "hooks", sink);
        ids(self.subagents.iter().map(|s| s.id.as_str()).collect(), "subagents", sink);
        ids(self.flows.iter().map(|f| f.id.as_str()).collect(), "flows", sink);
        ids(self.mcp_servers.iter().map(|s| s.name.as_str()).collect(), "mcp_servers", sink);
        ids(self.bindings.iter().map(|b| b.name.as_str()).collect(), "bindings", sink);
        for (idx, binding) in self.bindings.iter().enumerate() {
            for (call_idx, call) in binding.host_calls.iter().enumerate() {
                if !binding.owns(call) {
                    sink.push(
                        ProblemCode::HostCallOutsideBinding,
                        format!("bindings[{idx}].host_calls[{call_idx}]"),
                        None,
                        format!(
                            "{call:?} is outside the binding's prefix, expected __{}_<name>__",
                            binding.name
                        ),
                    );
                }
            }
        }
        for (idx, tool) in self.tools.iter().enumerate() {
            if let ToolImpl::Mcp { server, .. } = &tool.implementation
                && !self.mcp_servers.iter().any(|s| &s.name == server)
            {
                sink.push(
                    ProblemCode::UnknownMcpServer,
                    format!("tools[{idx}].mcp"),
                    None,
                    format!("no mcp server named {server:?} is declared"),
                );
            }
        }
        if let Err(HookOrderError::Cycle { hooks }) = self.hook_order() {
            sink.push(
                ProblemCode::HookCycle,
                "hooks",
                None,
                format!("hook ordering cycle: {}", hooks.join(" -> ")),
            );
        }
    }
}

/// Reports `value` as `invalid_id` when it breaks the id grammar.
pub(crate) fn id_problem(sink: &mut Sink<'_>, field: &str, value: &str) {
    if validate_id(value).is_err() {
        sink.push(
            ProblemCode::InvalidId,
            field,
            None,
            format!("{value:?} is not an id: lowercase letters, digits, `-` and `_`, starting with a letter or digit, at most 64"),
        );
    }
}

/// Says whether `name` is a tool name the model APIs accept: `[A-Za-z0-9_-]{1,64}`.
pub(crate) fn valid_tool_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// Why a plugin built in code is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DeclarationError {
    /// The declaration has problems; `problems` lists every one.
    #[error("plugin {plugin} is invalid: {}", problems.iter().map(|p| format!("{} {}: {}", p.code, p.field, p.message)).collect::<Vec<_>>().join("; "))]
    Invalid {
        /// The plugin's id as given.
        plugin: String,
        /// Every problem.
        problems: Vec<Problem>,
    },
}

/// Builds a [`Plugin`] in code; [`PluginBuilder::build`] checks it.
#[derive(Debug, Clone)]
pub struct PluginBuilder {
    plugin: Plugin,
    version: String,
    bad_refs: Vec<(String, String)>,
}

impl PluginBuilder {
    /// Sets the description.
    pub fn description(mut self, text: impl Into<String>) -> PluginBuilder {
        self.plugin.description = text.into();
        self
    }

    /// Adds a required plugin reference such as `document-runtime@^2`.
    pub fn requires(mut self, reference: &str) -> PluginBuilder {
        match PluginRef::parse(reference) {
            Ok(r) => self.plugin.requires.push(r),
            Err(err) => self.bad_refs.push((reference.to_owned(), err.to_string())),
        }
        self
    }

    /// Sets what a model must be able to do.
    pub fn model_requires(mut self, requires: Requires) -> PluginBuilder {
        self.plugin.model_requires = requires;
        self
    }

    /// Sets what model the plugin would like.
    pub fn model_prefers(mut self, prefers: Prefers) -> PluginBuilder {
        self.plugin.model_prefers = prefers;
        self
    }

    /// Adds a tool.
    pub fn tool(mut self, tool: Tool) -> PluginBuilder {
        self.plugin.tools.push(tool);
        self
    }

    /// Claims a built-in tool.
    pub fn native_tool(mut self, tool: NativeTool) -> PluginBuilder {
        self.plugin.native_tools.push(tool);
        self
    }

    /// Adds a hook.
    pub fn hook(mut self, hook: Hook) -> PluginBuilder {
        self.plugin.hooks.push(hook);
        self
    }

    /// Adds a subagent.
    pub fn subagent(mut self, subagent: Subagent) -> PluginBuilder {
        self.plugin.subagents.push(subagent);
        self
    }

    /// Adds a flow.
    pub fn flow(mut self, flow: FlowDecl) -> PluginBuilder {
        self.plugin.flows.push(flow);
        self
    }

    /// Adds a script binding.
    pub fn binding(mut self, binding: ScriptBinding) -> PluginBuilder {
        self.plugin.bindings.push(binding);
        self
    }

    /// Declares an MCP server.
    pub fn mcp_server(mut self, server: McpServer) -> PluginBuilder {
        self.plugin.mcp_servers.push(server);
        self
    }

    /// Checks the declaration and returns the plugin, or every problem.
    pub fn build(self) -> Result<Plugin, DeclarationError> {
        let mut plugin = self.plugin;
        let mut problems = Vec::new();
        let file = "<code>";
        match clio_spec::parse_plugin_version(&self.version) {
            Ok(version) => plugin.version = version,
            Err(err) => problems.push(Problem {
                code: ProblemCode::InvalidVersion,
                file: file.to_owned(),
                line: None,
                field: "version".to_owned(),
                message: err.to_string(),
            }),
        }
        for (reference, message) in self.bad_refs {
            problems.push(Problem {
                code: ProblemCode::InvalidReference,
                file: file.to_owned(),
                line: None,
                field: "requires".to_owned(),
                message: format!("{reference:?}: {message}"),
            });
        }
        problems.extend(plugin.problems(file));
        if problems.is_empty() {
            Ok(plugin)
        } else {
            Err(DeclarationError::Invalid { plugin: plugin.id, problems })
        }
    }
}

/// A plugin that brings others: the seed's `Pack("documents", ["pdf", "docx"], version)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pack {
    /// The pack's id.
    pub id: String,
    /// Its version.
    pub version: Version,
    /// What it is for.
    pub description: String,
    /// The plugins it brings.
    pub members: Vec<PluginRef>,
}

impl Pack {
    /// Returns the pack as a [`Plugin`] that declares nothing but its members, which is
    /// how resolution and `describe` see it.
    pub fn to_plugin(&self) -> Plugin {
        let mut plugin = Plugin::empty(self.id.clone(), self.version.clone());
        plugin.description = self.description.clone();
        plugin.members = self.members.clone();
        plugin
    }

    /// Returns the declaration as JSON.
    pub fn describe(&self) -> Json {
        self.to_plugin().describe()
    }
}
