//! Agent definitions built in code, frozen specs read back from JSON, golden checksums,
//! and the property that checksums do not depend on key order.

use clio_spec::{
    AgentDef, AgentDefinitionError, AgentSpec, FlowSelection, Prefers, Requires, canonical_json,
    canonical_sha256,
};
use proptest::prelude::*;
use serde_json::{Map, Value, json};

type TestResult = Result<(), Box<dyn std::error::Error>>;

fn base() -> AgentDef {
    AgentDef {
        plugins: Some(vec!["core".into(), "memory".into(), "search@^2".into()]),
        requires: Some(Requires { tool_calling: true, ..Requires::default() }),
        prefers: Some(Prefers { provider: "local".into(), ..Prefers::default() }),
        ..AgentDef::new("researcher")
    }
}

fn derived() -> AgentDef {
    AgentDef {
        version: Some("2.1.0".into()),
        plugins: Some(vec!["clio/pdf@^1.2".into()]),
        requires: Some(Requires { context_tokens: 64_000, ..Requires::default() }),
        flow: Some(FlowSelection::new("workflow")),
        ..AgentDef::new("reviewer")
    }
    .extends(base())
}

#[test]
fn defaults_apply_to_an_agent_with_only_an_id() -> TestResult {
    let spec = AgentDef::new("helper").spec()?;
    assert_eq!(spec.version(), "0.0.0");
    assert_eq!(spec.name(), "helper");
    assert_eq!(spec.role(), "");
    assert_eq!(spec.flow(), &FlowSelection::new("react"));
    let plugins: Vec<(&str, &str)> =
        spec.plugins().iter().map(|p| (p.reference.as_str(), p.layer.as_str())).collect();
    assert_eq!(plugins, [("core", "<default>"), ("memory", "<default>")]);
    assert_eq!(spec.layers(), ["helper"]);
    assert_eq!(spec.source(), "<code>");
    Ok(())
}

#[test]
fn layers_flatten_base_first() -> TestResult {
    let spec = derived().spec()?;
    assert_eq!(spec.id(), "reviewer");
    assert_eq!(spec.name(), "reviewer");
    assert_eq!(spec.version(), "2.1.0");
    assert_eq!(spec.layers(), ["researcher", "reviewer"]);
    let plugins: Vec<(&str, &str)> =
        spec.plugins().iter().map(|p| (p.reference.as_str(), p.layer.as_str())).collect();
    assert_eq!(
        plugins,
        [
            ("core", "researcher"),
            ("memory", "researcher"),
            ("search@^2", "researcher"),
            ("clio/pdf@^1.2", "reviewer")
        ]
    );
    assert_eq!(
        spec.requires(),
        &Requires { tool_calling: true, context_tokens: 64_000, ..Requires::default() }
    );
    assert_eq!(spec.prefers().provider, "local");
    assert_eq!(spec.flow().id, "workflow");
    assert_eq!(spec.plugin_refs().len(), 4);
    Ok(())
}

/// Golden checksums: a change to the canonical form or to the spec's content fields
/// changes these, and this test makes the change visible.
#[test]
fn golden_checksums() -> TestResult {
    assert_eq!(
        AgentDef::new("helper").spec()?.checksum(),
        "90f4c5c269ab0ac2bfa3b1ce5c4725fdf46bee96a8e95ba76929e36bd3cdd4f6"
    );
    assert_eq!(
        derived().spec()?.checksum(),
        "40502b412acfc94e31733ef357b060358d3cd38cf21a771394b1478f71236e7b"
    );
    Ok(())
}

#[test]
fn source_does_not_change_the_checksum() -> TestResult {
    let text = "id = \"helper\"\n";
    let a = AgentDef::from_toml(text, "a/agent.toml")?.spec()?;
    let b = AgentDef::from_toml(text, "elsewhere/agent.toml")?.spec()?;
    assert_eq!(a.checksum(), b.checksum());
    assert_ne!(a.source(), b.source());
    Ok(())
}

#[test]
fn toml_and_json_definitions_agree() -> TestResult {
    let toml = "id = \"a\"\nplugins = [\"core\"]\n[requires]\nvision = true\n";
    let json = r#"{"id": "a", "plugins": ["core"], "requires": {"vision": true}}"#;
    let a = AgentDef::from_toml(toml, "a.toml")?.spec()?;
    let b = AgentDef::from_json(json, "a.json")?.spec()?;
    assert_eq!(a.checksum(), b.checksum());
    Ok(())
}

#[test]
fn json_parse_errors_carry_line_and_column() {
    let err =
        AgentDef::from_json("{\n  \"id\": \"a\",\n  \"plugin\": []\n}", "a.json").unwrap_err();
    match err {
        AgentDefinitionError::Parse { source_name, line, message, .. } => {
            assert_eq!(source_name, "a.json");
            assert_eq!(line, 3);
            assert!(message.contains("unknown field `plugin`"), "{message}");
        }
        other => panic!("expected a parse error, got {other:?}"),
    }
}

#[test]
fn a_plugin_in_two_layers_is_not_a_duplicate() -> TestResult {
    let child = AgentDef { plugins: Some(vec!["search@^2.5".into()]), ..AgentDef::new("child") }
        .extends(base());
    let spec = child.spec()?;
    let search = spec.plugins().iter().find(|p| p.reference.starts_with("search")).unwrap();
    assert_eq!(search.reference, "search@^2.5");
    assert_eq!(search.layer, "child");
    assert_eq!(spec.plugins()[2].reference, "search@^2.5", "kept in the base's place");
    Ok(())
}

#[test]
fn spec_json_round_trips() -> TestResult {
    let spec = derived().spec()?;
    let text = serde_json::to_string(&spec.to_json())?;
    let back = AgentSpec::from_json(&text)?;
    assert_eq!(back, spec);
    assert_eq!(back.checksum(), spec.checksum());
    Ok(())
}

#[test]
fn from_json_refuses_a_wrong_checksum() -> TestResult {
    let mut value = derived().spec()?.to_json();
    value["role"] = json!("changed after freezing");
    let err = AgentSpec::from_json(&value.to_string()).unwrap_err();
    assert!(matches!(err, AgentDefinitionError::ChecksumMismatch { .. }), "{err:?}");
    assert!(err.to_string().starts_with("checksum mismatch: the spec records "), "{err}");
    Ok(())
}

#[test]
fn from_json_refuses_unknown_fields_and_a_missing_checksum() -> TestResult {
    let mut value = derived().spec()?.to_json();
    value["extra"] = json!(1);
    let err = AgentSpec::from_json(&value.to_string()).unwrap_err();
    assert!(err.to_string().contains("unknown field `extra`"), "{err}");

    let mut value = derived().spec()?.to_json();
    value.as_object_mut().unwrap().remove("checksum");
    let err = AgentSpec::from_json(&value.to_string()).unwrap_err();
    assert_eq!(err, AgentDefinitionError::MissingChecksum);

    let err = AgentSpec::from_json("not json").unwrap_err();
    assert!(matches!(err, AgentDefinitionError::Parse { line: 1, .. }), "{err:?}");
    Ok(())
}

#[test]
fn from_json_refuses_a_reference_that_does_not_parse() -> TestResult {
    let mut value = derived().spec()?.to_json();
    value["plugins"][0]["reference"] = json!("Core@latest");
    // Recompute the checksum so that only the reference is wrong.
    let mut content = value.clone();
    content.as_object_mut().unwrap().remove("checksum");
    content.as_object_mut().unwrap().remove("source");
    value["checksum"] = json!(canonical_sha256(&content));
    let err = AgentSpec::from_json(&value.to_string()).unwrap_err();
    assert!(matches!(err, AgentDefinitionError::BadReference { .. }), "{err:?}");
    Ok(())
}

#[test]
fn errors_name_the_layer_and_value() {
    let dup =
        AgentDef { plugins: Some(vec!["core".into(), "core@^1".into()]), ..AgentDef::new("x") };
    assert_eq!(
        dup.spec().unwrap_err().to_string(),
        "layer `x` lists plugin `core` twice: \"core\" and \"core@^1\"; keep one"
    );
    let bad = AgentDef { plugins: Some(vec!["core".into(), "pdf@".into()]), ..AgentDef::new("x") };
    let err = bad.spec().unwrap_err();
    assert!(
        matches!(&err, AgentDefinitionError::BadReference { layer, value, .. } if layer == "x" && value == "pdf@"),
        "{err:?}"
    );
    let empty = AgentDef::new("  ");
    assert!(matches!(empty.spec().unwrap_err(), AgentDefinitionError::EmptyId { .. }));
}

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        any::<f64>().prop_filter("finite", |f| f.is_finite()).prop_map(|f| json!(f)),
        "[ -~é\u{0}\n]{0,8}".prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 32, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map("[a-z_]{1,6}", inner, 0..5)
                .prop_map(|map| Value::Object(map.into_iter().collect())),
        ]
    })
}

/// Rebuilds every object of `value` with its keys inserted in reverse order.
fn reverse_keys(value: &Value) -> Value {
    match value {
        Value::Object(map) => {
            let mut reversed = Map::new();
            for (key, item) in map.iter().rev() {
                reversed.insert(key.clone(), reverse_keys(item));
            }
            Value::Object(reversed)
        }
        Value::Array(items) => Value::Array(items.iter().map(reverse_keys).collect()),
        other => other.clone(),
    }
}

proptest! {
    #[test]
    fn canonical_form_ignores_key_order(value in json_value()) {
        let reversed = reverse_keys(&value);
        prop_assert_eq!(canonical_json(&value), canonical_json(&reversed));
        prop_assert_eq!(canonical_sha256(&value), canonical_sha256(&reversed));
        // The canonical text is JSON that reads back to the same value.
        let back: Value = serde_json::from_str(&canonical_json(&value)).unwrap();
        prop_assert_eq!(canonical_json(&back), canonical_json(&value));
    }

    #[test]
    fn spec_checksum_ignores_option_key_order(
        options in prop::collection::btree_map("[a-z]{1,6}", json_value(), 0..6)
    ) {
        let forward: Map<String, Value> = options.clone().into_iter().collect();
        let backward: Map<String, Value> = options.into_iter().rev().collect();
        let spec = |options: Map<String, Value>| {
            AgentDef { flow: Some(FlowSelection { id: "campaign".into(), options }), ..AgentDef::new("a") }
                .spec()
                .unwrap()
        };
        let (a, b) = (spec(forward), spec(backward));
        prop_assert_eq!(a.checksum(), b.checksum());
        // A spec read back from its JSON keeps its checksum.
        let back = AgentSpec::from_json(&a.to_json().to_string()).unwrap();
        prop_assert_eq!(back.checksum(), a.checksum());
    }
}
