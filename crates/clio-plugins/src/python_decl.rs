//! A plugin declared in Python (`ai.iowarp.clio/plugin.py`: a `Plugin` subclass or
//! instance, a `Pack`, `@tool`, `native_tool`, `@hook`, `@host_call`, `Subagent`), read as
//! `plugin.toml` is.
//!
//! The file is never imported: the carried package's `_plugin_decl.py` reads the
//! declaration from its syntax tree (as [`crate::python::discover`] reads flows) into JSON
//! in the manifest's shape, which [`plugin_from_declaration`] builds into a [`Plugin`] with
//! the builder, so every check (ids, versions, references, option values, hook events,
//! ordering cycles, host calls outside their binding) is the one `plugin.toml` gets. A
//! tool or hook that names a Python `function` runs in the plugin's Python child, once the
//! plugin is trusted ([`ToolImpl::Python`], [`HookHandler::Python`]).

use std::path::{Path, PathBuf};
use std::process::Command;

use clio_spec::{FlowSelection, PluginRef, Prefers, Requires, parse_plugin_version};
use serde_json::{Map, Value as Json};

use crate::decl::{
    Callers, NativeTool, Permission, Prompt, PromptFile, ScriptBinding, Subagent, Tool, ToolImpl,
    ToolOptions,
};
use crate::hooks::{Hook, HookEventKind, HookHandler};
use crate::plugin::{Pack, Plugin};
use crate::problem::{Problem, ProblemCode};

/// The Python file a plugin may be declared in, inside `ai.iowarp.clio/`.
pub const PLUGIN_PY: &str = "plugin.py";

/// A declaration that does not build: the field's path and what is wrong, and the
/// builder's problems when it got that far.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{}{message}", if field.is_empty() { String::new() } else { format!("{field}: ") })]
pub struct DeclarationProblem {
    /// The field's path (`tools[1].callers`); empty for the declaration as a whole.
    pub field: String,
    /// What is wrong.
    pub message: String,
    /// The builder's problems (ids, versions, references, hooks), if it ran.
    pub problems: Vec<Problem>,
}

type Built<T> = Result<T, Box<DeclarationProblem>>;

fn refused(field: &str, message: impl Into<String>) -> Box<DeclarationProblem> {
    Box::new(DeclarationProblem {
        field: field.to_owned(),
        message: message.into(),
        problems: Vec::new(),
    })
}

/// Reads the fields of one object, refusing any not in `known`.
struct Fields<'a> {
    path: String,
    map: &'a Map<String, Json>,
}

impl<'a> Fields<'a> {
    fn open(value: &'a Json, path: &str, known: &[&str]) -> Built<Fields<'a>> {
        let Json::Object(map) = value else {
            return Err(refused(path, format!("must be a mapping, found {value}")));
        };
        if let Some(unknown) = map.keys().find(|k| !known.contains(&k.as_str())) {
            return Err(refused(
                &join(path, unknown),
                format!("unknown field; the fields are {}", known.join(", ")),
            ));
        }
        Ok(Fields { path: path.to_owned(), map })
    }

    fn at(&self, key: &str) -> String {
        join(&self.path, key)
    }

    fn get(&self, key: &str) -> Option<&'a Json> {
        self.map.get(key).filter(|v| !v.is_null())
    }

    fn string(&self, key: &str) -> Built<Option<String>> {
        match self.get(key) {
            None => Ok(None),
            Some(Json::String(s)) => Ok(Some(s.clone())),
            Some(other) => Err(refused(&self.at(key), format!("must be text, found {other}"))),
        }
    }

    fn required(&self, key: &str) -> Built<String> {
        self.string(key)?.ok_or_else(|| refused(&self.at(key), "is required"))
    }

    fn boolean(&self, key: &str) -> Built<Option<bool>> {
        match self.get(key) {
            None => Ok(None),
            Some(Json::Bool(b)) => Ok(Some(*b)),
            Some(other) => {
                Err(refused(&self.at(key), format!("must be true or false, found {other}")))
            }
        }
    }

    fn strings(&self, key: &str) -> Built<Option<Vec<String>>> {
        match self.get(key) {
            None => Ok(None),
            Some(Json::Array(items)) => items
                .iter()
                .map(|item| match item {
                    Json::String(s) => Ok(s.clone()),
                    other => Err(refused(
                        &self.at(key),
                        format!("must be a list of text, found {other}"),
                    )),
                })
                .collect::<Built<Vec<String>>>()
                .map(Some),
            Some(other) => {
                Err(refused(&self.at(key), format!("must be a list of text, found {other}")))
            }
        }
    }

    fn list(&self, key: &str) -> Built<Vec<(String, &'a Json)>> {
        match self.get(key) {
            None => Ok(Vec::new()),
            Some(Json::Array(items)) => Ok(items
                .iter()
                .enumerate()
                .map(|(i, item)| (format!("{}[{i}]", self.at(key)), item))
                .collect()),
            Some(other) => Err(refused(&self.at(key), format!("must be a list, found {other}"))),
        }
    }
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() { key.to_owned() } else { format!("{path}.{key}") }
}

/// A value of a closed set (`callers`, `permission`), refused with the allowed values.
fn choice<T>(
    fields: &Fields<'_>,
    key: &str,
    parse: fn(&str) -> Option<T>,
    allowed: &[&str],
) -> Built<Option<T>> {
    match fields.string(key)? {
        None => Ok(None),
        Some(text) => parse(&text).map(Some).ok_or_else(|| {
            refused(
                &fields.at(key),
                format!("unknown value {text:?}; the values are {}", allowed.join(", ")),
            )
        }),
    }
}

fn options(fields: &Fields<'_>) -> Built<ToolOptions> {
    Ok(ToolOptions {
        defer: fields.boolean("defer")?,
        callers: choice(fields, "callers", Callers::parse, Callers::ALLOWED)?,
        permission: choice(fields, "permission", Permission::parse, Permission::ALLOWED)?,
    })
}

fn typed<T: serde::de::DeserializeOwned>(value: &Json, field: &str) -> Built<T> {
    serde_json::from_value(value.clone()).map_err(|e| refused(field, e.to_string()))
}

fn tool(path: &str, value: &Json, file: &Path) -> Built<Tool> {
    let f = Fields::open(
        value,
        path,
        &[
            "name",
            "description",
            "read_only",
            "input_schema",
            "defer",
            "callers",
            "permission",
            "function",
            "line",
        ],
    )?;
    let mut tool = Tool::new(f.required("name")?, f.string("description")?.unwrap_or_default())
        .options(options(&f)?);
    if f.boolean("read_only")?.unwrap_or(false) {
        tool = tool.read_only();
    }
    if let Some(schema) = f.get("input_schema") {
        tool = tool.input_schema(schema.clone());
    }
    if let Some(function) = f.string("function")? {
        tool = tool.implementation(ToolImpl::Python { file: file.to_path_buf(), function });
    }
    Ok(tool)
}

fn native_tool(path: &str, value: &Json) -> Built<NativeTool> {
    let f = Fields::open(value, path, &["name", "defer", "callers", "permission", "line"])?;
    Ok(NativeTool { name: f.required("name")?, options: options(&f)? })
}

fn hook(path: &str, value: &Json, file: &Path) -> Built<Hook> {
    let f = Fields::open(
        value,
        path,
        &["event", "id", "before", "after", "tools", "fail_closed", "function", "line"],
    )?;
    let event = f.required("event")?;
    let kind = HookEventKind::from_key(&event).ok_or_else(|| {
        let known: Vec<&str> = HookEventKind::all().map(HookEventKind::key).collect();
        refused(
            &f.at("event"),
            format!("unknown event {event:?}; the events are {}", known.join(", ")),
        )
    })?;
    let mut hook = Hook::new(kind, f.required("id")?);
    hook.before = f.strings("before")?.unwrap_or_default();
    hook.after = f.strings("after")?.unwrap_or_default();
    hook.tools = f.string("tools")?.unwrap_or_default();
    hook.fail_closed = f.boolean("fail_closed")?.unwrap_or(false);
    if let Some(function) = f.string("function")? {
        hook.handler = HookHandler::Python { file: file.to_path_buf(), function };
    }
    Ok(hook)
}

fn subagent(path: &str, value: &Json) -> Built<Subagent> {
    let f = Fields::open(
        value,
        path,
        &[
            "id",
            "prompt",
            "plugins",
            "description",
            "tools",
            "prefers",
            "flow",
            "max_iters",
            "structured_outputs",
            "internal",
            "line",
        ],
    )?;
    let mut subagent = Subagent::new(f.required("id")?);
    if let Some(prompt) = f.get("prompt") {
        let p = Fields::open(prompt, &f.at("prompt"), &["text", "file"])?;
        subagent.prompt = match (p.string("text")?, p.string("file")?) {
            (Some(text), None) => Prompt::Text(text),
            (None, Some(file)) => Prompt::File(PromptFile::new(file)),
            (None, None) => Prompt::Text(String::new()),
            (Some(_), Some(_)) => {
                return Err(refused(&f.at("prompt"), "give either text or file, not both"));
            }
        };
    }
    subagent.plugins = f.strings("plugins")?.unwrap_or_default();
    subagent.description = f.string("description")?.unwrap_or_default();
    subagent.tools = f.strings("tools")?;
    if let Some(prefers) = f.get("prefers") {
        subagent.prefers = Some(typed::<Prefers>(prefers, &f.at("prefers"))?);
    }
    if let Some(flow) = f.get("flow") {
        subagent.flow = typed::<FlowSelection>(flow, &f.at("flow"))?;
    }
    if let Some(max) = f.get("max_iters") {
        subagent.max_iters = typed::<u64>(max, &f.at("max_iters"))?;
    }
    if let Some(outputs) = f.get("structured_outputs") {
        subagent.structured_outputs =
            typed::<Map<String, Json>>(outputs, &f.at("structured_outputs"))?;
    }
    subagent.internal = f.boolean("internal")?.unwrap_or(false);
    Ok(subagent)
}

/// The fields of a declaration document (the manifest's, plus `kind`, `class`, `line`).
const PLUGIN_FIELDS: &[&str] = &[
    "file",
    "kind",
    "class",
    "line",
    "id",
    "version",
    "description",
    "requires",
    "members",
    "model",
    "defer",
    "tools",
    "native_tools",
    "hooks",
    "subagents",
    "bindings",
];

/// Builds the plugin a declaration in the manifest's shape describes (what a Python
/// `Plugin` declares, `docs/python-package.md`), checked by the builder; an unknown field
/// or a value outside a closed set is refused naming the field's path. The functions of
/// its tools and hooks are in `file` (relative to `ai.iowarp.clio/`).
pub fn plugin_from_declaration(
    value: &Json,
    file: &Path,
) -> Result<Plugin, Box<DeclarationProblem>> {
    let f = Fields::open(value, "", PLUGIN_FIELDS)?;
    let id = f.required("id")?;
    let version = f.string("version")?.unwrap_or_else(|| "0.0.0".to_owned());
    if f.string("kind")?.as_deref() == Some("pack") {
        let members = f
            .strings("members")?
            .unwrap_or_default()
            .iter()
            .map(|m| PluginRef::parse(m).map_err(|e| refused("members", format!("{m:?}: {e}"))))
            .collect::<Built<Vec<PluginRef>>>()?;
        clio_spec::validate_id(&id).map_err(|e| refused("id", e.to_string()))?;
        let version = parse_plugin_version(&version)
            .map_err(|e| refused("version", format!("{version:?}: {e}")))?;
        let description = f.string("description")?.unwrap_or_default();
        return Ok(Pack { id, version, description, members }.to_plugin());
    }
    let mut builder =
        Plugin::builder(id, &version).description(f.string("description")?.unwrap_or_default());
    for reference in f.strings("requires")?.unwrap_or_default() {
        builder = builder.requires(&reference);
    }
    if let Some(model) = f.get("model") {
        let m = Fields::open(model, "model", &["requires", "prefers"])?;
        if let Some(requires) = m.get("requires") {
            builder = builder.model_requires(typed::<Requires>(requires, "model.requires")?);
        }
        if let Some(prefers) = m.get("prefers") {
            builder = builder.model_prefers(typed::<Prefers>(prefers, "model.prefers")?);
        }
    }
    for (path, item) in f.list("tools")? {
        builder = builder.tool(tool(&path, item, file)?);
    }
    for (path, item) in f.list("native_tools")? {
        builder = builder.native_tool(native_tool(&path, item)?);
    }
    for (path, item) in f.list("hooks")? {
        builder = builder.hook(hook(&path, item, file)?);
    }
    for (path, item) in f.list("subagents")? {
        builder = builder.subagent(subagent(&path, item)?);
    }
    for (path, item) in f.list("bindings")? {
        let b = Fields::open(item, &path, &["name", "host_calls"])?;
        builder = builder.binding(ScriptBinding {
            name: b.required("name")?,
            host_calls: b.strings("host_calls")?.unwrap_or_default(),
        });
    }
    let defer = f.boolean("defer")?;
    let mut plugin = builder.build().map_err(|error| {
        let crate::plugin::DeclarationError::Invalid { problems, .. } = &error;
        Box::new(DeclarationProblem {
            field: String::new(),
            message: error.to_string(),
            problems: problems.clone(),
        })
    })?;
    plugin.defer = defer;
    Ok(plugin)
}

/// Returns the line a field path (`tools[1].callers`) of `declaration` points at: the
/// `line` of the entry it is in, else the plugin's.
fn line_of(declaration: &Json, field: &str) -> Option<u32> {
    let line = |v: &Json| v.get("line").and_then(Json::as_u64).map(|n| n as u32);
    let head = field.split('.').next().unwrap_or("");
    if let Some((list, rest)) = head.split_once('[')
        && let Some(index) = rest.trim_end_matches(']').parse::<usize>().ok()
        && let Some(entry) = declaration.get(list).and_then(|l| l.get(index))
    {
        return line(entry).or_else(|| line(declaration));
    }
    line(declaration)
}

/// Reads the plugin `clio_dir/plugin.py` declares (never importing it), pushing every
/// problem with `plugin.py`'s path (`prefix` is `ai.iowarp.clio/`'s display path) and its
/// line; `None` when it does not declare one that builds.
pub(crate) fn read_python_plugin(
    clio_dir: &Path,
    prefix: &str,
    problems: &mut Vec<Problem>,
) -> Option<Plugin> {
    let file = format!("{prefix}{PLUGIN_PY}");
    let problem = |line: Option<u32>, field: &str, message: String| Problem {
        code: ProblemCode::PythonPluginInvalid,
        file: file.clone(),
        line,
        field: field.to_owned(),
        message,
    };
    let root = clio_dir.parent().unwrap_or(clio_dir);
    let read = read_declaration(&crate::python::interpreter(), root, &clio_dir.join(PLUGIN_PY));
    let answer = match read {
        Ok(answer) => answer,
        Err(err) => {
            problems.push(problem(None, "", format!("the declaration cannot be read: {err}")));
            return None;
        }
    };
    let errors = answer.get("errors").and_then(Json::as_array).cloned().unwrap_or_default();
    for error in &errors {
        let line = error.get("line").and_then(Json::as_u64).map(|n| n as u32).filter(|n| *n > 0);
        let message = error.get("message").and_then(Json::as_str).unwrap_or("").to_owned();
        // The reader's message starts with `file:line: `; the problem carries both.
        let message = match message.split_once(": ") {
            Some((place, rest)) if place.contains(PLUGIN_PY) => rest.to_owned(),
            _ => message,
        };
        problems.push(problem(line, "", message));
    }
    let declaration = answer.get("plugin").filter(|p| !p.is_null())?;
    if !errors.is_empty() {
        return None;
    }
    match plugin_from_declaration(declaration, Path::new(PLUGIN_PY)) {
        Ok(plugin) => Some(plugin),
        Err(refusal) => {
            if refusal.problems.is_empty() {
                let line = line_of(declaration, &refusal.field);
                problems.push(problem(line, &refusal.field, refusal.message.clone()));
            }
            for mut inner in refusal.problems {
                inner.file.clone_from(&file);
                if inner.line.is_none() {
                    inner.line = line_of(declaration, &inner.field);
                }
                problems.push(inner);
            }
            None
        }
    }
}

/// Runs the carried reader on `path` and returns its answer `{plugin, host_calls, errors}`.
fn read_declaration(interpreter: &Path, root: &Path, path: &Path) -> Result<Json, String> {
    let package = crate::python::package_dir().map_err(|e| e.to_string())?;
    let reader: PathBuf = package.join("clio_agent").join("_plugin_decl.py");
    if !reader.is_file() {
        return Err("this build's clio_agent package has no _plugin_decl.py".into());
    }
    let mut command = Command::new(interpreter);
    command.arg("-I").arg("-B").arg(&reader).arg("--root").arg(root).arg(path);
    let output =
        crate::python::output_within(command, crate::python::READ_WITHIN).map_err(|e| {
            format!(
                "cannot start {}: {e} (install python3, or name one with {})",
                interpreter.display(),
                crate::python::PYTHON_VAR
            )
        })?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    match serde_json::from_str::<Json>(stdout.trim()) {
        Ok(answer) if answer.is_object() => Ok(answer),
        _ => Err(format!(
            "{} ended {}: {}",
            reader.display(),
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        )),
    }
}
