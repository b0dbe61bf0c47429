//! The rules the Python package asks for, as plain Rust over JSON text: each function takes
//! and returns what crosses the bridge (text), calls the crate that owns the rule, and turns
//! its error into a [`Refusal`] the Python layer raises as the seeds' class.
//!
//! Nothing here decides anything of its own: an agent is frozen by `clio_spec::AgentDef`, a
//! spec verified by `clio_spec::AgentSpec`, a range by `clio_spec::VersionRange`, a
//! workflow checked by `clio_workflow::Workflow`, the hook events are `clio_plugins`'.

use clio_spec::{
    AgentDef, AgentDefinitionError, AgentSpec, PluginRef, Prefers, Requires, VersionRange,
    VersionRangeError, parse_plugin_version, validate_id,
};
use serde_json::{Map, Value, json};

/// Which Python exception a refusal becomes (`clio_agent.sdk._bridge`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Family {
    /// `AgentDefinitionError`.
    Agent,
    /// `VersionRangeError` (`clio_agent.sdk.versions`).
    Range,
    /// `WorkflowError`.
    Workflow,
    /// `ValueError`: a `Requires` or `Prefers` mapping that does not read.
    Value,
    /// `PluginDeclarationError` (a `ValueError`): a plugin declaration clio-plugins refuses.
    Plugin,
}

impl Family {
    /// The name the Python layer maps to its class.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Family::Agent => "agent",
            Family::Range => "range",
            Family::Workflow => "workflow",
            Family::Value => "value",
            Family::Plugin => "plugin",
        }
    }
}

/// A rule's refusal: the family of its Python class, the Rust error's variant (snake
/// case), its message (the Rust error's `Display`, as the CLI prints it) and its fields.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Refusal {
    pub(crate) family: Family,
    pub(crate) kind: String,
    pub(crate) message: String,
    pub(crate) details: Value,
}

/// What every rule function returns.
pub(crate) type Rule<T> = Result<T, Box<Refusal>>;

/// `CamelCase` → `camel_case`, for a variant's name.
fn snake(name: &str) -> String {
    let mut out = String::new();
    for (i, c) in name.chars().enumerate() {
        if c.is_ascii_uppercase() {
            if i > 0 {
                out.push('_');
            }
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

/// The variant's name of a `Debug` rendering (`InvalidId { .. }` → `invalid_id`).
fn variant(debug: &str) -> String {
    let end = debug.find(|c: char| !c.is_ascii_alphanumeric()).unwrap_or(debug.len());
    snake(&debug[..end])
}

/// The fields of a range error, for Python's `VersionRangeError`.
fn range_fields(error: &VersionRangeError) -> Value {
    json!({
        "input": error.input,
        "position": error.position,
        "kind": snake(&format!("{:?}", error.kind)),
    })
}

fn range_refusal(error: &VersionRangeError) -> Box<Refusal> {
    Box::new(Refusal {
        family: Family::Range,
        kind: snake(&format!("{:?}", error.kind)),
        message: error.to_string(),
        details: range_fields(error),
    })
}

/// An agent definition error with every field of its variant.
fn agent_refusal(error: &AgentDefinitionError) -> Box<Refusal> {
    use AgentDefinitionError as E;
    let details = match error {
        E::Parse { source_name, line, column, message } => {
            json!({"source_name": source_name, "line": line, "column": column, "problem": message})
        }
        E::EmptyId { layer } | E::DuplicateLayer { layer } => json!({ "layer": layer }),
        E::InvalidId { layer, source } => {
            json!({"layer": layer, "range_error": range_fields(source)})
        }
        E::InvalidVersion { layer, value, source }
        | E::InvalidFlow { layer, value, source }
        | E::BadReference { layer, value, source } => {
            json!({"layer": layer, "value": value, "range_error": range_fields(source)})
        }
        E::DuplicatePlugin { layer, plugin, first, second } => {
            json!({"layer": layer, "plugin": plugin, "first": first, "second": second})
        }
        E::MissingCore { layers, plugins } => json!({"layers": layers, "plugins": plugins}),
        E::UnknownLayer { layer, extends, known } => {
            json!({"layer": layer, "extends": extends, "known": known})
        }
        E::ExtendsCycle { cycle } => json!({ "cycle": cycle }),
        E::ChecksumMismatch { expected, actual } => {
            json!({"expected": expected, "actual": actual})
        }
        E::MissingChecksum => json!({}),
    };
    Box::new(Refusal {
        family: Family::Agent,
        kind: variant(&format!("{error:?}")),
        message: error.to_string(),
        details,
    })
}

fn workflow_refusal(error: &clio_workflow::WorkflowError) -> Box<Refusal> {
    let debug = format!("{error:?}");
    Box::new(Refusal {
        family: Family::Workflow,
        kind: variant(&debug),
        message: error.to_string(),
        details: json!({ "debug": debug }),
    })
}

fn value_refusal(what: &str, error: &serde_json::Error) -> Box<Refusal> {
    Box::new(Refusal {
        family: Family::Value,
        kind: "invalid".to_owned(),
        message: format!("{what}: {error}"),
        details: json!({ "what": what }),
    })
}

/// Freezes the agent definition `definition` (the JSON form `AgentDef::from_json` reads:
/// one layer, with the layers it extends under `layer`) read from `source`; returns the
/// spec's JSON text (`AgentSpec::to_json`), checksum included.
pub(crate) fn agent_spec(definition: &str, source: &str) -> Rule<String> {
    let def = AgentDef::from_json(definition, source).map_err(|e| agent_refusal(&e))?;
    let spec = def.spec().map_err(|e| agent_refusal(&e))?;
    Ok(spec.to_json().to_string())
}

/// Reads a spec's JSON text back, refusing unknown fields and a checksum that does not
/// match; returns it as `AgentSpec::to_json` writes it.
pub(crate) fn spec_verify(text: &str) -> Rule<String> {
    let spec = AgentSpec::from_json(text).map_err(|e| agent_refusal(&e))?;
    Ok(spec.to_json().to_string())
}

/// Parses a plugin reference: `{"id", "marketplace", "range"}`, the range as clio-spec
/// prints it (`null` when absent, as the marketplace).
pub(crate) fn plugin_ref(text: &str) -> Rule<String> {
    let parsed = PluginRef::parse(text).map_err(|e| range_refusal(&e))?;
    // The range as clio-spec prints it (`^1.2`; ` 1.2.3 ` without its spaces).
    let range = parsed.range().map(ToString::to_string);
    Ok(json!({"id": parsed.id(), "marketplace": parsed.marketplace(), "range": range}).to_string())
}

/// Whether the plugin reference `reference` accepts `version` (a full semver version).
pub(crate) fn plugin_ref_accepts(reference: &str, version: &str) -> Rule<bool> {
    let parsed = PluginRef::parse(reference).map_err(|e| range_refusal(&e))?;
    parsed.accepts(version).map_err(|e| range_refusal(&e))
}

/// Parses a range, returning its canonical text (`VersionRange`'s `Display`) and its
/// desugared comparators.
pub(crate) fn range_parse(text: &str) -> Rule<String> {
    let range = VersionRange::parse(text).map_err(|e| range_refusal(&e))?;
    Ok(json!({"text": range.to_string(), "desugared": range.desugared().to_string()}).to_string())
}

/// Whether the range `range` accepts `version`.
pub(crate) fn range_accepts(range: &str, version: &str) -> Rule<bool> {
    let range = VersionRange::parse(range).map_err(|e| range_refusal(&e))?;
    let version = parse_plugin_version(version).map_err(|e| range_refusal(&e))?;
    Ok(range.accepts(&version))
}

/// Checks a full plugin version; returns it as semver prints it.
pub(crate) fn version_parse(text: &str) -> Rule<String> {
    parse_plugin_version(text).map(|v| v.to_string()).map_err(|e| range_refusal(&e))
}

/// Checks an id (of a plugin, marketplace, agent or layer).
pub(crate) fn id_check(text: &str) -> Rule<()> {
    validate_id(text).map_err(|e| range_refusal(&e))
}

/// Reads a `Requires` mapping (unknown fields and wrong types refused); returns it whole.
pub(crate) fn requires(text: &str) -> Rule<String> {
    let value: Requires = serde_json::from_str(text).map_err(|e| value_refusal("Requires", &e))?;
    Ok(json!(value).to_string())
}

/// `Requires::union` of two mappings.
pub(crate) fn requires_union(a: &str, b: &str) -> Rule<String> {
    let a: Requires = serde_json::from_str(a).map_err(|e| value_refusal("Requires", &e))?;
    let b: Requires = serde_json::from_str(b).map_err(|e| value_refusal("Requires", &e))?;
    Ok(json!(a.union(&b)).to_string())
}

/// Reads a `Prefers` mapping (unknown fields and wrong types refused); returns it whole.
pub(crate) fn prefers(text: &str) -> Rule<String> {
    let value: Prefers = serde_json::from_str(text).map_err(|e| value_refusal("Prefers", &e))?;
    Ok(json!(value).to_string())
}

/// `Prefers::union`: `mine`, each unset field taken from `fallback`.
pub(crate) fn prefers_union(mine: &str, fallback: &str) -> Rule<String> {
    let mine: Prefers = serde_json::from_str(mine).map_err(|e| value_refusal("Prefers", &e))?;
    let fallback: Prefers =
        serde_json::from_str(fallback).map_err(|e| value_refusal("Prefers", &e))?;
    Ok(json!(mine.union(&fallback)).to_string())
}

/// Checks a workflow (`{"steps": [...]}` or a list of steps) as `clio workflow check`
/// does; returns it as `Workflow::to_json` writes it.
pub(crate) fn workflow(text: &str) -> Rule<String> {
    let workflow = clio_workflow::Workflow::from_json(text).map_err(|e| workflow_refusal(&e))?;
    Ok(workflow.to_json().to_string())
}

/// The SDK's hook event keys and CLIO's names, in order (`clio_plugins::HOOK_EVENTS`),
/// with what an answer to each may do.
pub(crate) fn hook_events() -> String {
    let events: Vec<Value> = clio_plugins::HookEventKind::all()
        .map(|kind| {
            json!({
                "key": kind.key(),
                "name": kind.name(),
                "power": snake(&format!("{:?}", kind.power())),
            })
        })
        .collect();
    Value::Array(events).to_string()
}

/// The refusal as the Python layer reads it: `{"family", "kind", "message", "details"}`.
pub(crate) fn refusal_json(refusal: &Refusal) -> String {
    let mut map = Map::new();
    map.insert("family".into(), Value::from(refusal.family.name()));
    map.insert("kind".into(), Value::from(refusal.kind.clone()));
    map.insert("message".into(), Value::from(refusal.message.clone()));
    map.insert("details".into(), refusal.details.clone());
    Value::Object(map).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(text: &str) -> Value {
        serde_json::from_str(text).unwrap()
    }

    #[test]
    fn an_agent_freezes_with_the_checksum_of_clio_spec() {
        let def = r#"{"id": "reviewer", "plugins": ["core", "clio/pdf@^1.2"]}"#;
        let spec = parsed(&agent_spec(def, "agents/reviewer.py:Reviewer").unwrap());
        let rust = AgentDef::from_json(def, "x").unwrap().spec().unwrap();
        assert_eq!(spec["checksum"], rust.checksum());
        assert_eq!(spec["source"], "agents/reviewer.py:Reviewer");
        let back = spec_verify(&spec.to_string()).unwrap();
        assert_eq!(parsed(&back), spec);
    }

    #[test]
    fn a_tampered_spec_is_refused_with_both_checksums() {
        let mut spec = parsed(&agent_spec(r#"{"id": "a"}"#, "<code>").unwrap());
        spec["role"] = Value::from("changed");
        let refusal = spec_verify(&spec.to_string()).unwrap_err();
        assert_eq!(refusal.family, Family::Agent);
        assert_eq!(refusal.kind, "checksum_mismatch");
        assert_eq!(refusal.details["expected"], spec["checksum"]);
        assert!(refusal.message.contains("checksum mismatch"), "{}", refusal.message);
    }

    #[test]
    fn agent_errors_carry_their_variant_and_fields() {
        let refusal = agent_spec(r#"{"id": "a", "plugins": ["memory"]}"#, "<code>").unwrap_err();
        assert_eq!(refusal.kind, "missing_core");
        assert_eq!(refusal.details["plugins"], json!(["memory"]));
        let refusal =
            agent_spec(r#"{"id": "a", "plugins": ["core", "pdf@^1", "pdf@^2"]}"#, "<code>")
                .unwrap_err();
        assert_eq!(refusal.kind, "duplicate_plugin");
        assert_eq!(refusal.details["second"], "pdf@^2");
        let refusal =
            agent_spec(r#"{"id": "a", "plugins": ["core", "pdf@latest"]}"#, "<code>").unwrap_err();
        assert_eq!(refusal.kind, "bad_reference");
        assert_eq!(refusal.details["range_error"]["kind"], "tag");
    }

    #[test]
    fn references_and_ranges_are_clio_specs() {
        assert_eq!(
            parsed(&plugin_ref("clio/pdf@^1.2").unwrap()),
            json!({"id": "pdf", "marketplace": "clio", "range": "^1.2"})
        );
        assert!(plugin_ref_accepts("clio/pdf@^1.2", "1.4.0").unwrap());
        assert!(!plugin_ref_accepts("clio/pdf@^1.2", "2.0.0").unwrap());
        let refusal = plugin_ref("Bad").unwrap_err();
        assert_eq!((refusal.family, refusal.kind.as_str()), (Family::Range, "invalid_id"));
        assert_eq!(refusal.details["position"], 0);
        assert!(range_accepts("1.2.3 - 2.3", "2.3.9").unwrap());
        assert_eq!(range_accepts("1.x.3", "1.0.0").unwrap_err().kind, "wildcard_then_number");
        assert!(version_parse("v1.0.0").is_err());
        assert!(id_check("ok-id").is_ok());
    }

    #[test]
    fn requirements_refuse_unknown_fields_and_unite() {
        assert_eq!(requires(r#"{"vison": true}"#).unwrap_err().family, Family::Value);
        let union = requires_union(
            r#"{"tool_calling": true, "context_tokens": 8000}"#,
            r#"{"vision": true, "context_tokens": 64000}"#,
        )
        .unwrap();
        assert_eq!(
            parsed(&union),
            json!({"tool_calling": true, "vision": true, "context_tokens": 64000, "output_tokens": 0})
        );
        assert!(prefers(r#"{"modle": "x"}"#).is_err());
        let union = prefers_union(r#"{"model": "a"}"#, r#"{"model": "b", "effort": "high"}"#);
        assert_eq!(
            parsed(&union.unwrap()),
            json!({"model": "a", "provider": "", "effort": "high"})
        );
    }

    #[test]
    fn a_workflow_is_refused_with_the_message_the_cli_prints() {
        let text = r#"{"steps": [{"id": "a", "target": "x", "after": ["b"]},
                                 {"id": "b", "target": "y", "after": ["a"]}]}"#;
        let refusal = workflow(text).unwrap_err();
        let rust = clio_workflow::Workflow::from_json(text).unwrap_err();
        assert_eq!(refusal.message, rust.to_string());
        assert_eq!(refusal.kind, "cycle");
        let ok = workflow(r#"[{"id": "a", "target": "x"}]"#).unwrap();
        assert_eq!(parsed(&ok), json!({"steps": [{"id": "a", "target": "x"}]}));
    }

    #[test]
    fn hook_events_are_clio_plugins() {
        let events = parsed(&hook_events());
        assert_eq!(events[0]["key"], "tool_call");
        assert_eq!(events[0]["name"], "PreToolUse");
        assert_eq!(events.as_array().unwrap().len(), clio_plugins::HOOK_EVENTS.len());
    }

    #[test]
    fn a_refusal_reads_as_json() {
        let refusal = plugin_ref("x@").unwrap_err();
        let value = parsed(&refusal_json(&refusal));
        assert_eq!(value["family"], "range");
        assert_eq!(value["kind"], "empty_range");
    }
}
