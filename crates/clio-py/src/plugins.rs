//! A plugin declared in Python (`Plugin`, `Pack`, `@tool`, `native_tool`, `@hook`,
//! `@host_call`, `Subagent`) built into clio-plugins' [`Plugin`] with its builder, so that
//! `describe()` is `Plugin::describe` and every check (ids, versions, references, option
//! values, hook events, ordering cycles, host calls outside their binding) is the Rust one.
//!
//! The declaration crosses the bridge as JSON in the manifest's shape (`plugin.toml`'s
//! fields, `docs/plugins.md`): the Python layer writes it, and clio-plugins'
//! [`clio_plugins::plugin_from_declaration`] (the reader `clio` uses for a `plugin.py`) reads
//! it strictly — an unknown field or a value outside a closed set is refused naming the
//! field's path and the allowed values, as the manifest reader does. This module turns its
//! refusals into the SDK's exceptions, with the file and line of the entry at fault.

use std::path::Path;

use clio_plugins::{DeclarationProblem, PLUGIN_PY, Plugin};
use serde_json::{Value, json};

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

/// Builds the plugin with clio-plugins' own reader of declarations, the one `clio` uses for
/// a `plugin.py`: the functions of its tools and hooks are in `plugin.py`, whether the
/// declaration was imported or read from the file, so both describe alike.
fn build(value: &Value) -> Rule<Plugin> {
    clio_plugins::plugin_from_declaration(value, Path::new(PLUGIN_PY)).map_err(|problem| {
        let DeclarationProblem { field, message, problems } = *problem;
        if problems.is_empty() {
            return refused(&field, message);
        }
        Box::new(Refusal {
            family: Family::Plugin,
            kind: "invalid_declaration".to_owned(),
            message,
            details: json!({"problems": problems.iter().map(clio_plugins::Problem::to_json).collect::<Vec<_>>()}),
        })
    })
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
