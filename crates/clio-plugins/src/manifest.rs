//! Reading a plugin folder: `<folder>/ai.iowarp.clio/plugin.toml` with its `prompts/`,
//! `flows/*.json` and command files, into a [`Plugin`], reporting every problem with its
//! file, line and field. `docs/plugins.md` is the reference of the manifest's fields.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use clio_spec::{FlowSelection, PluginRef, Prefers, Requires, parse_plugin_version};
use semver::Version;
use serde_json::Map;

use crate::decl::{
    Callers, McpServer, NativeTool, Permission, Prompt, PromptFile, ScriptBinding, Subagent, Tool,
    ToolImpl, ToolOptions,
};
use crate::files::{check_command, inside, list_files, read_flows, report_refused};
use crate::hooks::{HOOK_EVENTS, Hook, HookEventKind, HookHandler};
use crate::plugin::Plugin;
use crate::problem::{Problem, ProblemCode, Sink, read_or_report};
use crate::reader::Fields;
use crate::tree::{Node, Value, parse_toml, to_json};

/// The folder inside a plugin that makes it a CLIO plugin.
pub const PLUGIN_DIR: &str = "ai.iowarp.clio";
/// The manifest inside [`PLUGIN_DIR`].
pub const MANIFEST_FILE: &str = "plugin.toml";

/// Why a plugin folder cannot be loaded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LoadError {
    /// The folder has no `ai.iowarp.clio/`.
    #[error("{} is not a CLIO plugin: it has no ai.iowarp.clio/ folder", folder.display())]
    NotAPlugin {
        /// The folder.
        folder: PathBuf,
    },
    /// The plugin has problems; `problems` lists every one (the first is shown).
    #[error("plugin {} is invalid: {}{}", folder.display(), problems.first().map(ToString::to_string).unwrap_or_default(), if problems.len() > 1 { format!(" (and {} more)", problems.len() - 1) } else { String::new() })]
    Invalid {
        /// The folder.
        folder: PathBuf,
        /// Every problem found.
        problems: Vec<Problem>,
    },
}

/// Loads the plugin in `folder` the way an install does; any error-severity problem
/// refuses it.
pub fn load_plugin(folder: &Path) -> Result<Plugin, LoadError> {
    if !folder.join(PLUGIN_DIR).is_dir() {
        return Err(LoadError::NotAPlugin { folder: folder.to_path_buf() });
    }
    let mut problems = Vec::new();
    let plugin = read_plugin(folder, "", &mut problems);
    problems.retain(|p| p.severity() == crate::problem::Severity::Error);
    match plugin {
        Some(plugin) if problems.is_empty() => Ok(plugin),
        _ => Err(LoadError::Invalid { folder: folder.to_path_buf(), problems }),
    }
}

/// Reads the plugin in `folder`, pushing every problem; `prefix` is the folder's display
/// path relative to the checked root (`""` or `plugins/pdf/`). Returns the plugin when
/// the manifest was readable enough to have an id and version.
pub(crate) fn read_plugin(
    folder: &Path,
    prefix: &str,
    problems: &mut Vec<Problem>,
) -> Option<Plugin> {
    let clio_dir = folder.join(PLUGIN_DIR);
    if !clio_dir.is_dir() {
        let shown = if prefix.is_empty() {
            ".".to_owned()
        } else {
            prefix.trim_end_matches('/').to_owned()
        };
        problems.push(Problem {
            code: ProblemCode::NotAPlugin,
            file: shown,
            line: None,
            field: String::new(),
            message: "a folder without ai.iowarp.clio/ is not a CLIO plugin".to_owned(),
        });
        return None;
    }
    let dir_prefix = format!("{prefix}{PLUGIN_DIR}/");
    let file = format!("{dir_prefix}{MANIFEST_FILE}");
    // A plugin declared in Python (`plugin.py`, read without running it) when it has no
    // `plugin.toml`; with both, the manifest declares it.
    let python = clio_dir.join(crate::python_decl::PLUGIN_PY);
    if !clio_dir.join(MANIFEST_FILE).exists() && python.is_file() {
        let mut plugin = crate::python_decl::read_python_plugin(&clio_dir, &dir_prefix, problems)?;
        plugin.folder = Some(clio_dir.clone());
        let mut sink =
            Sink { file: format!("{dir_prefix}{}", crate::python_decl::PLUGIN_PY), problems };
        plugin.prompts = list_files(&mut sink, &clio_dir, &clio_dir.join("prompts"));
        plugin.check_into(&mut sink);
        plugin.flows.extend(read_flows(problems, &dir_prefix, &clio_dir));
        report_refused(problems, prefix, folder);
        return Some(plugin);
    }
    let text = read_or_report(&clio_dir.join(MANIFEST_FILE), file.clone(), "manifest", problems)?;
    let root = match parse_toml(&text) {
        Ok(root) => root,
        Err(err) => {
            problems.push(Problem {
                code: ProblemCode::ParseError,
                file,
                line: err.line,
                field: String::new(),
                message: err.message,
            });
            return None;
        }
    };
    let mut sink = Sink { file, problems };
    let mut origins = Origins::default();
    let (mut plugin, complete) = read_manifest(&mut sink, &root, &clio_dir, &mut origins)?;
    plugin.folder = Some(clio_dir.clone());
    plugin.prompts = list_files(&mut sink, &clio_dir, &clio_dir.join("prompts"));
    let first_problem = sink.problems.len();
    plugin.check_into(&mut sink);
    // Declaration checks know the paths of what was read, not of the manifest, nor
    // lines: map each back to the manifest's entry and take its line.
    let mut lines = BTreeMap::new();
    index_lines(&root, "", &mut lines);
    for problem in &mut sink.problems[first_problem..] {
        problem.field = origins.remap(&problem.field);
        if problem.line.is_none() {
            problem.line = lines.get(&problem.field).copied();
        }
    }
    plugin.flows.extend(read_flows(problems, &dir_prefix, &clio_dir));
    // What trust would refuse, the check refuses too: the same walk as the digest's.
    report_refused(problems, prefix, folder);
    complete.then_some(plugin)
}

/// For each list the manifest has, the manifest index of every entry that was read
/// (entries too broken to read are left out of the plugin, which shifts indexes).
#[derive(Default)]
struct Origins {
    lists: BTreeMap<&'static str, Vec<usize>>,
}

impl Origins {
    fn keep(&mut self, list: &'static str, idx: usize) {
        self.lists.entry(list).or_default().push(idx);
    }

    /// Rewrites `tools[1].name` into the manifest's index for that tool.
    fn remap(&self, field: &str) -> String {
        let Some((list, rest)) = field.split_once('[') else { return field.to_owned() };
        let Some((idx, tail)) = rest.split_once(']') else { return field.to_owned() };
        let (Some(origins), Ok(idx)) = (self.lists.get(list), idx.parse::<usize>()) else {
            return field.to_owned();
        };
        match origins.get(idx) {
            Some(original) => format!("{list}[{original}]{tail}"),
            None => field.to_owned(),
        }
    }
}

fn index_lines(node: &Node, path: &str, lines: &mut BTreeMap<String, u32>) {
    if let Some(line) = node.line {
        lines.insert(path.to_owned(), line);
    }
    match &node.value {
        Value::Table(entries) => {
            for (key, child) in entries {
                let child_path =
                    if path.is_empty() { key.clone() } else { format!("{path}.{key}") };
                index_lines(child, &child_path, lines);
            }
        }
        Value::Array(items) => {
            for (idx, child) in items.iter().enumerate() {
                index_lines(child, &format!("{path}[{idx}]"), lines);
            }
        }
        _ => {}
    }
}

fn read_manifest(
    sink: &mut Sink<'_>,
    root: &Node,
    clio_dir: &Path,
    origins: &mut Origins,
) -> Option<(Plugin, bool)> {
    let mut f = Fields::open(root, "", sink)?;
    let id = f.req_str(sink, "id");
    let version_line = f.get("version").and_then(|n| n.line);
    let version = f.req_str(sink, "version").and_then(|v| match parse_plugin_version(&v) {
        Ok(version) => Some(version),
        Err(err) => {
            sink.push(
                ProblemCode::InvalidVersion,
                "version",
                version_line,
                format!("{v:?}: {err}"),
            );
            None
        }
    });
    let mut plugin = Plugin::empty(
        id.clone().unwrap_or_default(),
        version.clone().unwrap_or(Version::new(0, 0, 0)),
    );
    plugin.description = f.str(sink, "description").unwrap_or_default();
    plugin.requires = refs(sink, &mut f, "requires");
    plugin.members = refs(sink, &mut f, "members");
    plugin.defer = f.bool(sink, "defer");
    if let Some(model) = f.get("model") {
        read_model(sink, model, &mut plugin);
    }
    for (idx, (path, node)) in f.table_list(sink, "tools").into_iter().enumerate() {
        if let Some(tool) = read_tool(sink, &path, node, clio_dir) {
            plugin.tools.push(tool);
            origins.keep("tools", idx);
        }
    }
    for (idx, (path, node)) in f.table_list(sink, "native_tools").into_iter().enumerate() {
        let Some(mut t) = Fields::open(node, &path, sink) else { continue };
        let name = t.req_str(sink, "name");
        let options = read_options(sink, &mut t);
        t.finish(sink);
        if let Some(name) = name {
            plugin.native_tools.push(NativeTool { name, options });
            origins.keep("native_tools", idx);
        }
    }
    for (idx, (path, node)) in f.table_list(sink, "hooks").into_iter().enumerate() {
        if let Some(hook) = read_hook(sink, &path, idx, node, clio_dir) {
            plugin.hooks.push(hook);
            origins.keep("hooks", idx);
        }
    }
    for (idx, (path, node)) in f.table_list(sink, "subagents").into_iter().enumerate() {
        if let Some(subagent) = read_subagent(sink, &path, node, clio_dir) {
            plugin.subagents.push(subagent);
            origins.keep("subagents", idx);
        }
    }
    for (idx, (path, node)) in f.table_list(sink, "mcp_servers").into_iter().enumerate() {
        let Some(mut s) = Fields::open(node, &path, sink) else { continue };
        let name = s.req_str(sink, "name");
        let command = s.req_str(sink, "command");
        let args =
            s.str_list(sink, "args").unwrap_or_default().into_iter().map(|(a, _)| a).collect();
        let env = string_table(sink, &mut s, "env");
        let network = s.bool(sink, "network").unwrap_or(false);
        let line = s.line;
        s.finish(sink);
        if let Some(command) = &command
            && command.contains('/')
        {
            check_command(sink, clio_dir, &format!("{path}.command"), line, command);
        }
        if let (Some(name), Some(command)) = (name, command) {
            plugin.mcp_servers.push(McpServer { name, command, args, env, network });
            origins.keep("mcp_servers", idx);
        }
    }
    for (idx, (path, node)) in f.table_list(sink, "bindings").into_iter().enumerate() {
        let Some(mut b) = Fields::open(node, &path, sink) else { continue };
        let name = b.req_str(sink, "name");
        let host_calls = b
            .str_list(sink, "host_calls")
            .unwrap_or_default()
            .into_iter()
            .map(|(c, _)| c)
            .collect();
        b.finish(sink);
        if let Some(name) = name {
            plugin.bindings.push(ScriptBinding { name, host_calls });
            origins.keep("bindings", idx);
        }
    }
    f.finish(sink);
    // Without an id there is nothing to check further; without a valid version the
    // declaration is still checked, but there is no plugin to install.
    id.map(|_| (plugin, version.is_some()))
}

fn refs(sink: &mut Sink<'_>, f: &mut Fields<'_>, key: &'static str) -> Vec<PluginRef> {
    let path = f.path(key);
    let mut out = Vec::new();
    for (idx, (text, line)) in f.str_list(sink, key).unwrap_or_default().into_iter().enumerate() {
        match PluginRef::parse(&text) {
            Ok(r) => out.push(r),
            Err(err) => sink.push(
                ProblemCode::InvalidReference,
                format!("{path}[{idx}]"),
                line,
                format!("{text:?}: {err}"),
            ),
        }
    }
    out
}

fn string_table(
    sink: &mut Sink<'_>,
    f: &mut Fields<'_>,
    key: &'static str,
) -> BTreeMap<String, String> {
    let path = f.path(key);
    let mut out = BTreeMap::new();
    let Some(node) = f.get(key) else { return out };
    let Value::Table(entries) = &node.value else {
        sink.push(
            ProblemCode::WrongType,
            path,
            node.line,
            format!("expected a table of strings, found {}", node.value.kind()),
        );
        return out;
    };
    for (name, value) in entries {
        match &value.value {
            Value::Str(s) => {
                out.insert(name.clone(), s.clone());
            }
            other => sink.push(
                ProblemCode::WrongType,
                format!("{path}.{name}"),
                value.line,
                format!("expected a string, found {}", other.kind()),
            ),
        }
    }
    out
}

fn read_model(sink: &mut Sink<'_>, node: &Node, plugin: &mut Plugin) {
    let Some(mut m) = Fields::open(node, "model", sink) else { return };
    if let Some(node) = m.get("requires")
        && let Some(mut r) = Fields::open(node, "model.requires", sink)
    {
        plugin.model_requires = Requires {
            tool_calling: r.bool(sink, "tool_calling").unwrap_or(false),
            vision: r.bool(sink, "vision").unwrap_or(false),
            context_tokens: r.u64(sink, "context_tokens").unwrap_or(0),
            output_tokens: r.u64(sink, "output_tokens").unwrap_or(0),
        };
        r.finish(sink);
    }
    if let Some(node) = m.get("prefers") {
        plugin.model_prefers = read_prefers(sink, node, "model.prefers").unwrap_or_default();
    }
    m.finish(sink);
}

fn read_prefers(sink: &mut Sink<'_>, node: &Node, path: &str) -> Option<Prefers> {
    let mut p = Fields::open(node, path, sink)?;
    let prefers = Prefers {
        model: p.str(sink, "model").unwrap_or_default(),
        provider: p.str(sink, "provider").unwrap_or_default(),
        effort: p.str(sink, "effort").unwrap_or_default(),
    };
    p.finish(sink);
    Some(prefers)
}

/// Reads `defer`, `callers` and `permission`, reporting values outside the allowed ones.
fn read_options(sink: &mut Sink<'_>, f: &mut Fields<'_>) -> ToolOptions {
    let mut options = ToolOptions::default();
    if let Some(node) = f.get("defer") {
        match node.value {
            Value::Bool(b) => options.defer = Some(b),
            ref other => sink.push(
                ProblemCode::InvalidOption,
                f.path("defer"),
                node.line,
                format!("{} is not allowed, expected one of: true, false", shown(other)),
            ),
        }
    }
    options.callers = choice(sink, f, "callers", Callers::ALLOWED, Callers::parse);
    options.permission = choice(sink, f, "permission", Permission::ALLOWED, Permission::parse);
    options
}

fn shown(value: &Value) -> String {
    match value {
        Value::Str(s) => format!("{s:?}"),
        other => other.kind().to_owned(),
    }
}

fn choice<T>(
    sink: &mut Sink<'_>,
    f: &mut Fields<'_>,
    key: &'static str,
    allowed: &[&str],
    parse: fn(&str) -> Option<T>,
) -> Option<T> {
    let node = f.get(key)?;
    let parsed = match &node.value {
        Value::Str(s) => parse(s),
        _ => None,
    };
    if parsed.is_none() {
        sink.push(
            ProblemCode::InvalidOption,
            f.path(key),
            node.line,
            format!(
                "{} is not allowed, expected one of: {}",
                shown(&node.value),
                allowed.join(", ")
            ),
        );
    }
    parsed
}

fn read_tool(sink: &mut Sink<'_>, path: &str, node: &Node, clio_dir: &Path) -> Option<Tool> {
    let mut t = Fields::open(node, path, sink)?;
    let name = t.req_str(sink, "name");
    let description = t.str(sink, "description").unwrap_or_default();
    let read_only = t.bool(sink, "read_only").unwrap_or(false);
    let schema = t.get("input_schema").map(|n| (n.line, to_json(n)));
    let options = read_options(sink, &mut t);
    let command_line = t.get("command").and_then(|n| n.line);
    let command = t.str(sink, "command");
    let mcp = t.str(sink, "mcp");
    let mcp_tool = t.str(sink, "mcp_tool");
    let network_line = t.get("network").and_then(|n| n.line);
    let network = t.bool(sink, "network");
    let line = t.line;
    t.finish(sink);
    let implementation = match (command, mcp) {
        (Some(_), Some(_)) => {
            sink.push(
                ProblemCode::InvalidOption,
                format!("{path}.command"),
                command_line,
                "a tool runs by `command` or by `mcp`, not both",
            );
            return None;
        }
        (Some(command), None) => {
            check_command(sink, clio_dir, &format!("{path}.command"), command_line, &command);
            ToolImpl::Executable { command: PathBuf::from(command), network: network == Some(true) }
        }
        (None, Some(_)) if network.is_some() => {
            sink.push(
                ProblemCode::InvalidOption,
                format!("{path}.network"),
                network_line,
                "`network` is for a tool run by `command`; a tool of an MCP server has the network its server declares (`network = true` in its [[mcp_servers]] entry)",
            );
            return None;
        }
        (None, Some(server)) => {
            let tool = mcp_tool.unwrap_or_else(|| name.clone().unwrap_or_default());
            ToolImpl::Mcp { server, tool }
        }
        (None, None) => {
            sink.push(
                ProblemCode::MissingField,
                format!("{path}.command"),
                line,
                "a tool in a folder needs `command` (an executable) or `mcp` (a server name)",
            );
            return None;
        }
    };
    let mut tool = Tool::new(name?, description).options(options).implementation(implementation);
    tool.read_only = read_only;
    if let Some((schema_line, schema)) = schema {
        if !schema.is_object() {
            sink.push(
                ProblemCode::WrongType,
                format!("{path}.input_schema"),
                schema_line,
                "expected a table (a JSON schema object)",
            );
        }
        tool.input_schema = schema;
    }
    Some(tool)
}

fn read_hook(
    sink: &mut Sink<'_>,
    path: &str,
    idx: usize,
    node: &Node,
    clio_dir: &Path,
) -> Option<Hook> {
    let mut h = Fields::open(node, path, sink)?;
    let event_line = h.get("event").and_then(|n| n.line);
    let event = h.req_str(sink, "event").and_then(|key| {
        let found = HookEventKind::from_key(&key);
        if found.is_none() {
            let known: Vec<&str> = HOOK_EVENTS.iter().map(|(k, _)| *k).collect();
            sink.push(
                ProblemCode::UnknownHookEvent,
                format!("{path}.event"),
                event_line,
                format!("unknown event {key:?}, expected one of: {}", known.join(", ")),
            );
        }
        found
    });
    let id = h.str(sink, "id");
    let before =
        h.str_list(sink, "before").unwrap_or_default().into_iter().map(|(s, _)| s).collect();
    let after = h.str_list(sink, "after").unwrap_or_default().into_iter().map(|(s, _)| s).collect();
    let tools = h.str(sink, "tools").unwrap_or_default();
    let fail_closed = h.bool(sink, "fail_closed").unwrap_or(false);
    let command_line = h.get("command").and_then(|n| n.line);
    let command = h.req_str(sink, "command");
    let timeout_secs = h.u64(sink, "timeout_secs");
    h.finish(sink);
    if let Some(command) = &command {
        check_command(sink, clio_dir, &format!("{path}.command"), command_line, command);
    }
    let event = event?;
    Some(Hook {
        event,
        // An unnamed hook is named after its event and position, as the SDK's `id=""`.
        id: id.filter(|id| !id.is_empty()).unwrap_or_else(|| format!("{}_{idx}", event.key())),
        before,
        after,
        tools,
        fail_closed,
        handler: HookHandler::Command { command: PathBuf::from(command?), timeout_secs },
    })
}

fn read_subagent(
    sink: &mut Sink<'_>,
    path: &str,
    node: &Node,
    clio_dir: &Path,
) -> Option<Subagent> {
    let mut s = Fields::open(node, path, sink)?;
    let id = s.req_str(sink, "id");
    let mut subagent = Subagent::new(id.clone().unwrap_or_default());
    if let Some(prompt) = s.get("prompt") {
        let field = s.path("prompt");
        match &prompt.value {
            Value::Str(text) => subagent.prompt = Prompt::Text(text.clone()),
            Value::Table(_) => {
                if let Some(mut p) = Fields::open(prompt, &field, sink) {
                    if let Some(file) = p.req_str(sink, "file") {
                        let file_field = format!("{field}.file");
                        if inside(sink, &file_field, prompt.line, &file)
                            && !clio_dir.join(&file).is_file()
                        {
                            sink.push(
                                ProblemCode::PromptMissing,
                                file_field,
                                prompt.line,
                                format!("prompt file {file:?} does not exist in ai.iowarp.clio/"),
                            );
                        }
                        subagent.prompt = Prompt::File(PromptFile::new(file));
                    }
                    p.finish(sink);
                }
            }
            other => sink.push(
                ProblemCode::WrongType,
                field,
                prompt.line,
                format!("expected text or a table with `file`, found {}", other.kind()),
            ),
        }
    }
    subagent.plugins =
        s.str_list(sink, "plugins").unwrap_or_default().into_iter().map(|(p, _)| p).collect();
    for (idx, reference) in subagent.plugins.iter().enumerate() {
        if let Err(err) = PluginRef::parse(reference) {
            sink.push(
                ProblemCode::InvalidReference,
                format!("{path}.plugins[{idx}]"),
                node.line,
                format!("{reference:?}: {err}"),
            );
        }
    }
    subagent.description = s.str(sink, "description").unwrap_or_default();
    subagent.tools =
        s.str_list(sink, "tools").map(|tools| tools.into_iter().map(|(t, _)| t).collect());
    if let Some(node) = s.get("prefers") {
        subagent.prefers = read_prefers(sink, node, &format!("{path}.prefers"));
    }
    if let Some(node) = s.get("flow") {
        match &node.value {
            Value::Str(id) => subagent.flow = FlowSelection::new(id.clone()),
            Value::Table(_) => {
                if let Some(mut fl) = Fields::open(node, &format!("{path}.flow"), sink) {
                    let id = fl.req_str(sink, "id");
                    let options = fl.get("options").map(to_json);
                    fl.finish(sink);
                    let options = match options {
                        Some(serde_json::Value::Object(map)) => map,
                        Some(_) => {
                            sink.push(
                                ProblemCode::WrongType,
                                format!("{path}.flow.options"),
                                node.line,
                                "expected a table",
                            );
                            Map::new()
                        }
                        None => Map::new(),
                    };
                    if let Some(id) = id {
                        subagent.flow = FlowSelection { id, options };
                    }
                }
            }
            other => sink.push(
                ProblemCode::WrongType,
                format!("{path}.flow"),
                node.line,
                format!(
                    "expected a flow id or a table with `id` and `options`, found {}",
                    other.kind()
                ),
            ),
        }
    }
    subagent.max_iters = s.u64(sink, "max_iters").unwrap_or(0);
    if let Some(node) = s.get("structured_outputs") {
        match to_json(node) {
            serde_json::Value::Object(map) => {
                for (name, schema) in &map {
                    for problem in crate::schema::schema_problems(schema) {
                        sink.push(
                            ProblemCode::StructuredOutputInvalid,
                            format!("{path}.structured_outputs.{name}"),
                            node.line,
                            format!("output {name:?}: {problem}"),
                        );
                    }
                }
                subagent.structured_outputs = map;
            }
            _ => sink.push(
                ProblemCode::WrongType,
                format!("{path}.structured_outputs"),
                node.line,
                "expected a table of output schemas",
            ),
        }
    }
    subagent.internal = s.bool(sink, "internal").unwrap_or(false);
    s.finish(sink);
    id.map(|_| subagent)
}
