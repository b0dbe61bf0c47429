//! A plugin declared in Python (`Plugin`, `Pack`, `@tool`, `native_tool`, `@hook`,
//! `@host_call`, `Subagent`) built into clio-plugins' [`Plugin`] with its builder, so that
//! `describe()` is `Plugin::describe` and every check (ids, versions, references, option
//! values, hook events, ordering cycles, host calls outside their binding) is the Rust one.
//!
//! The declaration crosses the bridge as JSON in the manifest's shape (`plugin.toml`'s
//! fields, `docs/plugins.md`): the Python layer writes it, this module reads it strictly —
//! an unknown field or a value outside a closed set is refused naming the field's path and
//! the allowed values, as the manifest reader does.

use clio_plugins::{
    Callers, Hook, HookEventKind, NativeTool, Pack, Permission, Plugin, Prompt, PromptFile,
    ScriptBinding, Subagent, Tool, ToolOptions,
};
use clio_spec::{FlowSelection, PluginRef, Prefers, Requires, parse_plugin_version};
use serde_json::{Map, Value, json};

use crate::rules::{Family, Refusal, Rule};

/// A declaration problem: the field's path and what is wrong.
fn refused(field: &str, message: impl Into<String>) -> Box<Refusal> {
    let message = message.into();
    Box::new(Refusal {
        family: Family::Plugin,
        kind: "invalid_declaration".to_owned(),
        message: format!("{field}: {message}"),
        details: json!({"problems": [{"code": "invalid_declaration", "field": field, "message": message}]}),
    })
}

/// Reads the fields of one object, refusing any not in `known`.
struct Fields<'a> {
    path: String,
    map: &'a Map<String, Value>,
}

impl<'a> Fields<'a> {
    fn open(value: &'a Value, path: &str, known: &[&str]) -> Rule<Fields<'a>> {
        let Value::Object(map) = value else {
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

    fn get(&self, key: &str) -> Option<&'a Value> {
        self.map.get(key).filter(|v| !v.is_null())
    }

    fn string(&self, key: &str) -> Rule<Option<String>> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(other) => Err(refused(&self.at(key), format!("must be text, found {other}"))),
        }
    }

    fn required(&self, key: &str) -> Rule<String> {
        self.string(key)?.ok_or_else(|| refused(&self.at(key), "is required"))
    }

    fn boolean(&self, key: &str) -> Rule<Option<bool>> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(other) => {
                Err(refused(&self.at(key), format!("must be true or false, found {other}")))
            }
        }
    }

    fn strings(&self, key: &str) -> Rule<Option<Vec<String>>> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::Array(items)) => items
                .iter()
                .map(|item| match item {
                    Value::String(s) => Ok(s.clone()),
                    other => Err(refused(
                        &self.at(key),
                        format!("must be a list of text, found {other}"),
                    )),
                })
                .collect::<Rule<Vec<String>>>()
                .map(Some),
            Some(other) => {
                Err(refused(&self.at(key), format!("must be a list of text, found {other}")))
            }
        }
    }

    fn list(&self, key: &str) -> Rule<Vec<(String, &'a Value)>> {
        match self.get(key) {
            None => Ok(Vec::new()),
            Some(Value::Array(items)) => Ok(items
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
) -> Rule<Option<T>> {
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

fn options(fields: &Fields<'_>) -> Rule<ToolOptions> {
    Ok(ToolOptions {
        defer: fields.boolean("defer")?,
        callers: choice(fields, "callers", Callers::parse, Callers::ALLOWED)?,
        permission: choice(fields, "permission", Permission::parse, Permission::ALLOWED)?,
    })
}

fn typed<T: serde::de::DeserializeOwned>(value: &Value, field: &str) -> Rule<T> {
    serde_json::from_value(value.clone()).map_err(|e| refused(field, e.to_string()))
}

fn tool(path: &str, value: &Value) -> Rule<Tool> {
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
    Ok(tool)
}

fn native_tool(path: &str, value: &Value) -> Rule<NativeTool> {
    let f = Fields::open(value, path, &["name", "defer", "callers", "permission", "line"])?;
    Ok(NativeTool { name: f.required("name")?, options: options(&f)? })
}

fn hook(path: &str, value: &Value) -> Rule<Hook> {
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
    Ok(hook)
}

fn subagent(path: &str, value: &Value) -> Rule<Subagent> {
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
            typed::<Map<String, Value>>(outputs, &f.at("structured_outputs"))?;
    }
    subagent.internal = f.boolean("internal")?.unwrap_or(false);
    Ok(subagent)
}

/// The fields of a declaration document (the manifest's, plus `kind`, `class`, `line`).
const PLUGIN_FIELDS: &[&str] = &[
    "kind",
    "class",
    "file",
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

/// Builds the plugin a Python declaration describes, checked by clio-plugins' builder.
///
/// A declaration read from a `plugin.py` (`clio_agent._plugin_decl`) carries its `file` and
/// each entry's `line`: a refusal then starts with `file:line:` of the entry at fault.
pub(crate) fn plugin(text: &str) -> Rule<Plugin> {
    let value: Value = serde_json::from_str(text)
        .map_err(|e| refused("", format!("the declaration is not JSON: {e}")))?;
    build(&value).map_err(|refusal| locate(&value, refusal))
}

/// The line of the entry a field path is in (`tools[2].callers` → the third tool's
/// `line`), else the plugin's own.
fn line_of(value: &Value, field: &str) -> Option<u64> {
    let head = field.split('.').next().unwrap_or_default();
    let entry = head.split_once('[').and_then(|(list, index)| {
        let index: usize = index.trim_end_matches(']').parse().ok()?;
        value.get(list)?.get(index)?.get("line")?.as_u64()
    });
    entry.or_else(|| value.get("line").and_then(Value::as_u64))
}

/// Prefixes a refusal with the declaration's file and the line of the entry at fault.
fn locate(value: &Value, mut refusal: Box<Refusal>) -> Box<Refusal> {
    let Some(file) = value.get("file").and_then(Value::as_str) else { return refusal };
    let field = refusal.details["problems"][0]["field"].as_str().unwrap_or_default().to_owned();
    let Some(line) = line_of(value, &field) else { return refusal };
    refusal.message = format!("{file}:{line}: {}", refusal.message);
    refusal.details["file"] = json!(file);
    refusal.details["line"] = json!(line);
    refusal
}

fn build(value: &Value) -> Rule<Plugin> {
    let f = Fields::open(value, "", PLUGIN_FIELDS)?;
    let id = f.required("id")?;
    let version = f.string("version")?.unwrap_or_else(|| "0.0.0".to_owned());
    if f.string("kind")?.as_deref() == Some("pack") {
        let members = f
            .strings("members")?
            .unwrap_or_default()
            .iter()
            .map(|m| PluginRef::parse(m).map_err(|e| refused("members", format!("{m:?}: {e}"))))
            .collect::<Rule<Vec<PluginRef>>>()?;
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
        builder = builder.tool(tool(&path, item)?);
    }
    for (path, item) in f.list("native_tools")? {
        builder = builder.native_tool(native_tool(&path, item)?);
    }
    for (path, item) in f.list("hooks")? {
        builder = builder.hook(hook(&path, item)?);
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
        let clio_plugins::DeclarationError::Invalid { problems, .. } = &error;
        Box::new(Refusal {
            family: Family::Plugin,
            kind: "invalid_declaration".to_owned(),
            message: error.to_string(),
            details: json!({"problems": problems.iter().map(clio_plugins::Problem::to_json).collect::<Vec<_>>()}),
        })
    })?;
    plugin.defer = defer;
    Ok(plugin)
}

/// `describe()`: the declaration as clio-plugins describes it.
pub(crate) fn describe(text: &str) -> Rule<String> {
    Ok(plugin(text)?.describe().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_declaration_describes_as_clio_plugins_does() {
        let text = json!({
            "id": "spectroscopy", "version": "0.1.0", "requires": ["workspace"],
            "model": {"requires": {"context_tokens": 64000}},
            "tools": [{"name": "peaks", "description": "Find peaks", "read_only": true,
                       "defer": true, "callers": "code", "permission": "ask"}],
            "native_tools": [{"name": "shell_bash", "permission": "deny"}],
            "hooks": [{"event": "tool_call", "id": "guard", "tools": "shell_*", "fail_closed": true}],
            "subagents": [{"id": "reader", "prompt": {"file": "prompts/reader.md"}}],
        })
        .to_string();
        let described: Value = serde_json::from_str(&describe(&text).unwrap()).unwrap();
        assert_eq!(described["id"], "spectroscopy");
        assert_eq!(described["requires"], json!(["workspace"]));
        assert_eq!(described["model"]["requires"]["context_tokens"], 64000);
        assert_eq!(described["tools"][0]["callers"], "code");
        assert_eq!(described["hooks"][0]["fail_closed"], true);
        assert_eq!(described["subagents"][0]["prompt"], json!({"file": "prompts/reader.md"}));
    }

    #[test]
    fn unknown_values_and_fields_are_refused_naming_the_field() {
        let bad = json!({"id": "p", "tools": [{"name": "t", "callers": "sometimes"}]});
        let refusal = describe(&bad.to_string()).unwrap_err();
        assert!(
            refusal.message.starts_with("tools[0].callers: unknown value"),
            "{}",
            refusal.message
        );
        assert!(refusal.message.contains("direct, code, both"), "{}", refusal.message);
        let bad = json!({"id": "p", "hooks": [{"event": "tool_cal", "id": "h"}]});
        let refusal = describe(&bad.to_string()).unwrap_err();
        assert!(refusal.message.contains("tool_call"), "{}", refusal.message);
        let bad = json!({"id": "p", "colour": "red"});
        assert!(
            describe(&bad.to_string()).unwrap_err().message.starts_with("colour: unknown field")
        );
        let bad = json!({"id": "p", "version": "v1"});
        assert_eq!(describe(&bad.to_string()).unwrap_err().kind, "invalid_declaration");
    }

    #[test]
    fn a_declaration_read_from_a_file_is_refused_at_the_entry_line() {
        let bad = json!({"file": "ai.iowarp.clio/plugin.py", "line": 20, "id": "p",
                         "tools": [{"name": "a", "line": 5}, {"name": "b", "permission": "maybe", "line": 9}]});
        let refusal = describe(&bad.to_string()).unwrap_err();
        assert!(
            refusal.message.starts_with("ai.iowarp.clio/plugin.py:9: tools[1].permission"),
            "{}",
            refusal.message
        );
        assert_eq!(refusal.details["line"], 9);
        let bad = json!({"file": "ai.iowarp.clio/plugin.py", "line": 20, "id": "p", "colour": 1});
        assert!(
            describe(&bad.to_string())
                .unwrap_err()
                .message
                .starts_with("ai.iowarp.clio/plugin.py:20: colour")
        );
    }

    #[test]
    fn a_pack_describes_its_members() {
        let text = json!({"kind": "pack", "id": "documents", "version": "1.0.0",
                          "members": ["pdf", "docx"]});
        let described: Value = serde_json::from_str(&describe(&text.to_string()).unwrap()).unwrap();
        assert_eq!(described["members"], json!(["pdf", "docx"]));
    }
}
