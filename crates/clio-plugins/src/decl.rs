//! The parts a plugin declares: tools and their options, native tools, subagents and
//! their prompts, flows, script bindings and MCP servers. Hooks are in
//! [`crate::hooks`]; the plugin that holds them all is in [`crate::plugin`].
//!
//! These are declarations only. Running a tool, an MCP server or a hook is the runtime's
//! job (clio-flow); this crate says what exists and checks that it is well formed.

use std::collections::BTreeMap;
use std::path::PathBuf;

use clio_spec::{FlowSelection, Prefers};
use serde_json::{Map, Value as Json, json};

/// Declares a closed set of option values with their spelling in files.
macro_rules! option_enum {
    ($(#[$meta:meta])* $name:ident { $($(#[$vmeta:meta])* $variant:ident = $text:literal,)* }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum $name {
            $($(#[$vmeta])* $variant,)*
        }

        impl $name {
            /// The values allowed in files, in documentation order.
            pub const ALLOWED: &'static [&'static str] = &[$($text,)*];

            /// Parses a value as written in files; `None` for anything else.
            pub fn parse(s: &str) -> Option<$name> {
                match s {
                    $($text => Some($name::$variant),)*
                    _ => None,
                }
            }

            /// Returns the value as written in files.
            pub fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $text,)*
                }
            }
        }
    };
}

option_enum! {
    /// A tool's permission: whether a call runs, asks the person first, or is refused.
    ///
    /// Ordered from least to most restrictive, so `max` picks the stricter one.
    Permission {
        /// The call runs without asking.
        Allow = "allow",
        /// The person is asked first (a durable question).
        Ask = "ask",
        /// The call is refused and the tool hidden from the agent.
        Deny = "deny",
    }
}

option_enum! {
    /// Who may call a tool: the agent itself, only `run_code` scripts, or both.
    Callers {
        /// Only the agent, as a direct tool call.
        Direct = "direct",
        /// Only `run_code` scripts; the schema stays out of the prompt.
        Code = "code",
        /// Both the agent and scripts.
        Both = "both",
    }
}

/// The three options every tool and native tool has; `None` leaves each to the defaults.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ToolOptions {
    /// `true` lists the tool by name only until `search_tools` loads it.
    pub defer: Option<bool>,
    /// Who may call the tool; unset means the tool's own default, `both`.
    pub callers: Option<Callers>,
    /// The tool's default permission; unset follows `read_only`.
    pub permission: Option<Permission>,
}

impl ToolOptions {
    fn describe(&self) -> Json {
        json!({
            "defer": self.defer,
            "callers": self.callers.map(Callers::as_str),
            "permission": self.permission.map(Permission::as_str),
        })
    }
}

/// How a declared tool is carried out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolImpl {
    /// The host registers an implementation (a Rust closure or trait object) under the
    /// plugin's id and the tool's name; used by built-in plugins and library users.
    Host,
    /// An executable, relative to `ai.iowarp.clio/`, that reads JSON arguments on stdin
    /// and prints a JSON result. It runs sandboxed (clio-flow's `Sandbox`).
    Executable {
        /// The program's path, relative to `ai.iowarp.clio/`.
        command: PathBuf,
        /// Whether it needs the network (`network = true`); the sandbox gives it the
        /// network only if the deployment allows it too, and never without this.
        network: bool,
    },
    /// A tool of an MCP server that the plugin declares.
    Mcp {
        /// The name of the [`McpServer`].
        server: String,
        /// The tool's name on that server (defaults to the declared name).
        tool: String,
    },
    /// A Python function of the plugin (`@tool` in `plugin.py`), called with the tool's
    /// arguments as keyword arguments in the plugin's Python child, sandboxed, once the
    /// plugin is trusted.
    Python {
        /// The file that defines it, relative to `ai.iowarp.clio/`.
        file: PathBuf,
        /// The function's name in that file.
        function: String,
    },
}

/// A tool a plugin brings.
#[derive(Debug, Clone, PartialEq)]
pub struct Tool {
    /// The name the model sees: `[A-Za-z0-9_-]{1,64}`.
    pub name: String,
    /// What the tool does, shown to the model.
    pub description: String,
    /// Whether the tool only reads; unset permissions follow it.
    pub read_only: bool,
    /// The JSON schema of the tool's arguments.
    pub input_schema: Json,
    /// `defer`, `callers` and `permission`.
    pub options: ToolOptions,
    /// How the tool runs.
    pub implementation: ToolImpl,
}

impl Tool {
    /// Declares a tool with the host's implementation, an empty object schema and no
    /// options set.
    pub fn new(name: impl Into<String>, description: impl Into<String>) -> Tool {
        Tool {
            name: name.into(),
            description: description.into(),
            read_only: false,
            input_schema: json!({"type": "object"}),
            options: ToolOptions::default(),
            implementation: ToolImpl::Host,
        }
    }

    /// Marks the tool as read-only.
    pub fn read_only(mut self) -> Tool {
        self.read_only = true;
        self
    }

    /// Sets the argument schema.
    pub fn input_schema(mut self, schema: Json) -> Tool {
        self.input_schema = schema;
        self
    }

    /// Sets the tool's options.
    pub fn options(mut self, options: ToolOptions) -> Tool {
        self.options = options;
        self
    }

    /// Sets how the tool runs.
    pub fn implementation(mut self, implementation: ToolImpl) -> Tool {
        self.implementation = implementation;
        self
    }

    pub(crate) fn describe(&self) -> Json {
        let implementation = match &self.implementation {
            ToolImpl::Host => json!({"kind": "host"}),
            ToolImpl::Executable { command, network } => {
                let mut out = json!({"kind": "executable", "command": slash_path(command)});
                // Shown only when asked for, so declarations without it describe as before.
                if *network {
                    out["network"] = json!(true);
                }
                out
            }
            ToolImpl::Python { file, function } => {
                json!({"kind": "python", "file": slash_path(file), "function": function})
            }
            ToolImpl::Mcp { server, tool } => {
                json!({"kind": "mcp", "server": server, "tool": tool})
            }
        };
        let mut out = json!({
            "name": self.name,
            "description": self.description,
            "read_only": self.read_only,
            "input_schema": self.input_schema,
            "implementation": implementation,
        });
        merge_into(&mut out, self.options.describe());
        out
    }
}

/// A built-in CLIO tool that a plugin claims, with its own options.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NativeTool {
    /// The built-in tool's name, such as `shell_bash`.
    pub name: String,
    /// `defer`, `callers` and `permission` for this plugin's use of it.
    pub options: ToolOptions,
}

impl NativeTool {
    /// Claims built-in tool `name` with no options set.
    pub fn new(name: impl Into<String>) -> NativeTool {
        NativeTool { name: name.into(), options: ToolOptions::default() }
    }

    pub(crate) fn describe(&self) -> Json {
        let mut out = json!({"name": self.name});
        merge_into(&mut out, self.options.describe());
        out
    }
}

/// A prompt file, relative to the plugin's `ai.iowarp.clio/` folder.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PromptFile {
    /// The path relative to `ai.iowarp.clio/`, such as `prompts/reviewer.md`.
    pub path: PathBuf,
}

impl PromptFile {
    /// Names prompt file `path`, relative to `ai.iowarp.clio/`.
    pub fn new(path: impl Into<PathBuf>) -> PromptFile {
        PromptFile { path: path.into() }
    }
}

/// A subagent's prompt: a file of the plugin, or text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Prompt {
    /// The prompt as text.
    Text(String),
    /// A file relative to `ai.iowarp.clio/`.
    File(PromptFile),
}

/// A subagent a plugin brings: the seed's `Subagent(id, prompt, plugins, description,
/// tools, prefers, flow, max_iters, structured_outputs, internal)`.
#[derive(Debug, Clone, PartialEq)]
pub struct Subagent {
    /// The subagent's id.
    pub id: String,
    /// Its system prompt.
    pub prompt: Prompt,
    /// Plugin references the subagent carries besides its own plugin.
    pub plugins: Vec<String>,
    /// What the subagent does, shown to callers.
    pub description: String,
    /// The tools it may use; `None` means every tool of its plugins.
    pub tools: Option<Vec<String>>,
    /// Its model preferences, if any.
    pub prefers: Option<Prefers>,
    /// The flow it runs, `react` by default.
    pub flow: FlowSelection,
    /// The most model iterations it may take; 0 means the runtime's bound.
    pub max_iters: u64,
    /// Named output schemas the subagent must fill.
    pub structured_outputs: Map<String, Json>,
    /// Internal subagents are not offered to the model as call targets.
    pub internal: bool,
}

impl Subagent {
    /// Declares subagent `id` with the seed's defaults.
    pub fn new(id: impl Into<String>) -> Subagent {
        Subagent {
            id: id.into(),
            prompt: Prompt::Text(String::new()),
            plugins: Vec::new(),
            description: String::new(),
            tools: None,
            prefers: None,
            flow: FlowSelection::new("react"),
            max_iters: 0,
            structured_outputs: Map::new(),
            internal: false,
        }
    }

    pub(crate) fn describe(&self) -> Json {
        let prompt = match &self.prompt {
            Prompt::Text(text) => json!({"text": text}),
            Prompt::File(file) => json!({"file": slash_path(&file.path)}),
        };
        json!({
            "id": self.id,
            "prompt": prompt,
            "plugins": self.plugins,
            "description": self.description,
            "tools": self.tools,
            "prefers": self.prefers.as_ref().map(|p| json!({
                "model": p.model, "provider": p.provider, "effort": p.effort,
            })),
            "flow": {"id": self.flow.id, "options": self.flow.options},
            "max_iters": self.max_iters,
            "structured_outputs": self.structured_outputs,
            "internal": self.internal,
        })
    }
}

/// Where a flow's procedure comes from.
#[derive(Debug, Clone, PartialEq)]
pub enum FlowSource {
    /// The host registers the flow's implementation (built-in and Rust flows).
    Host,
    /// A workflow file, `flows/<id>.json`, run by the built-in `workflow` flow.
    Workflow {
        /// The file, relative to `ai.iowarp.clio/`.
        path: PathBuf,
        /// The workflow as read (structure checked, steps not yet validated).
        workflow: Json,
    },
    /// A flow written in Python, a class in `flows/<name>.py`, run by the runtime's
    /// Python runner (`docs/python-flows.md`); declared as read from the file's syntax
    /// tree (see [`crate::python`]).
    Python {
        /// The file, relative to `ai.iowarp.clio/`.
        path: PathBuf,
        /// The class that declares the flow.
        class: String,
        /// The line of its `class` statement.
        line: u32,
        /// Its railroad diagram (`shape`).
        shape: String,
        /// Its model (`model`; empty: none).
        model: String,
        /// Its limits: `{max_depth, max_concurrency, max_model_calls, budget_tokens}`.
        limits: Json,
        /// Its options, each `{name, type, default, line}`.
        options: Vec<Json>,
    },
}

/// A flow a plugin provides.
#[derive(Debug, Clone, PartialEq)]
pub struct FlowDecl {
    /// The flow's id, the name agents select it by.
    pub id: String,
    /// What it does, shown in `run_flow`.
    pub description: String,
    /// Where its procedure comes from.
    pub source: FlowSource,
}

impl FlowDecl {
    /// Declares flow `id`, implemented by the host.
    pub fn host(id: impl Into<String>, description: impl Into<String>) -> FlowDecl {
        FlowDecl { id: id.into(), description: description.into(), source: FlowSource::Host }
    }

    pub(crate) fn describe(&self) -> Json {
        let source = match &self.source {
            FlowSource::Host => json!({"kind": "host"}),
            FlowSource::Workflow { path, .. } => {
                json!({"kind": "workflow", "file": slash_path(path)})
            }
            FlowSource::Python { path, class, line, shape, model, limits, options } => json!({
                "kind": "python",
                "file": slash_path(path),
                "class": class,
                "line": line,
                "shape": shape,
                "model": model,
                "limits": limits,
                "options": options,
            }),
        };
        json!({"id": self.id, "description": self.description, "source": source})
    }
}

/// A script binding: the reserved calls `__<name>_<call>__` a `run_code` script may make,
/// answered by the plugin's host functions without a tool call of their own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScriptBinding {
    /// The binding's name, the `<binding>` of `__<binding>_<name>__`.
    pub name: String,
    /// The full reserved names this binding answers, each `__<name>_<call>__`.
    pub host_calls: Vec<String>,
}

impl ScriptBinding {
    /// Says whether `call` is inside this binding's prefix: `__<name>_<something>__`.
    pub fn owns(&self, call: &str) -> bool {
        call.strip_prefix(&format!("__{}_", self.name))
            .and_then(|rest| rest.strip_suffix("__"))
            .is_some_and(|inner| !inner.is_empty())
    }
}

/// An MCP server a plugin declares, spoken to over stdio by the runtime.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpServer {
    /// The server's name, which tools refer to.
    pub name: String,
    /// The program to start; a relative path is relative to `ai.iowarp.clio/`.
    pub command: String,
    /// Its arguments.
    pub args: Vec<String>,
    /// Environment variables to set for it.
    pub env: BTreeMap<String, String>,
    /// Whether it needs the network (`network = true`). The server runs in the sandbox
    /// like a plugin's executable tool, and gets the network only if it declares it and
    /// the deployment allows it.
    pub network: bool,
}

/// Writes a relative path with `/` separators, the way reports and `describe` show it.
pub(crate) fn slash_path(path: &std::path::Path) -> String {
    path.components()
        .filter(|c| !matches!(c, std::path::Component::CurDir))
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join("/")
}

fn merge_into(target: &mut Json, extra: Json) {
    if let (Json::Object(target), Json::Object(extra)) = (target, extra) {
        target.extend(extra);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_parse_exactly_the_allowed_values() {
        assert_eq!(Permission::parse("ask"), Some(Permission::Ask));
        assert_eq!(Permission::parse("Ask"), None);
        assert_eq!(Callers::ALLOWED, ["direct", "code", "both"]);
        assert!(Permission::Deny > Permission::Ask && Permission::Ask > Permission::Allow);
    }

    #[test]
    fn a_binding_owns_only_its_prefix() {
        let binding = ScriptBinding { name: "stream".into(), host_calls: Vec::new() };
        assert!(binding.owns("__stream_write__"));
        assert!(!binding.owns("__stream___"));
        assert!(!binding.owns("__other_write__"));
        assert!(!binding.owns("stream_write"));
    }
}
