//! The JSON-schema subset a subagent's `structured_outputs` may use, and the checker the
//! runtime validates a structured answer with.
//!
//! Supported keywords: `type` (one name or a list of `object`, `array`, `string`,
//! `number`, `integer`, `boolean`, `null`), `properties`, `required`, `items`, `enum`,
//! `additionalProperties` (`false`, `true` or a schema), and the annotations `title`,
//! `description`, `default`, `examples`, `$schema`. Any other keyword is refused by
//! [`schema_problems`] (and so by `plugin check` and by loading the plugin), so that no
//! part of a declared schema is silently ignored at run time.

use serde_json::Value;

/// The keywords [`validate`] checks.
pub const SCHEMA_KEYWORDS: [&str; 6] =
    ["type", "properties", "required", "items", "enum", "additionalProperties"];

/// Keywords that only annotate a schema: allowed, never checked.
const ANNOTATIONS: [&str; 5] = ["title", "description", "default", "examples", "$schema"];

/// The type names `type` may hold.
const TYPES: [&str; 7] = ["object", "array", "string", "number", "integer", "boolean", "null"];

/// Returns every reason `schema` is not a schema of the supported subset, each naming the
/// place in the schema (`properties.name.type`) and what is wrong; empty when it is one.
pub fn schema_problems(schema: &Value) -> Vec<String> {
    let mut problems = Vec::new();
    check_at(schema, "", &mut problems);
    problems
}

fn at(path: &str, key: &str) -> String {
    if path.is_empty() { key.to_owned() } else { format!("{path}.{key}") }
}

fn check_at(schema: &Value, path: &str, problems: &mut Vec<String>) {
    let Value::Object(map) = schema else {
        let place = if path.is_empty() { "the schema".to_owned() } else { path.to_owned() };
        problems.push(format!("{place} must be a JSON-schema object, not {schema}"));
        return;
    };
    for (key, value) in map {
        let here = at(path, key);
        match key.as_str() {
            "type" => {
                let names: Vec<&Value> = match value {
                    Value::Array(list) if !list.is_empty() => list.iter().collect(),
                    Value::String(_) => vec![value],
                    _ => {
                        problems.push(format!("{here} must be a type name or a list of them"));
                        continue;
                    }
                };
                for name in names {
                    if !name.as_str().is_some_and(|n| TYPES.contains(&n)) {
                        problems.push(format!(
                            "{here}: {name} is not a type (types: {})",
                            TYPES.join(", ")
                        ));
                    }
                }
            }
            "properties" => match value {
                Value::Object(props) => {
                    for (name, sub) in props {
                        check_at(sub, &at(&here, name), problems);
                    }
                }
                _ => problems.push(format!("{here} must map property names to schemas")),
            },
            "required" => {
                if !value.as_array().is_some_and(|l| l.iter().all(Value::is_string)) {
                    problems.push(format!("{here} must be a list of property names"));
                }
            }
            "items" => check_at(value, &here, problems),
            "enum" => {
                if value.as_array().is_none_or(Vec::is_empty) {
                    problems.push(format!("{here} must be a non-empty list of values"));
                }
            }
            "additionalProperties" => {
                if !value.is_boolean() {
                    check_at(value, &here, problems);
                }
            }
            other if ANNOTATIONS.contains(&other) => {}
            other => problems.push(format!(
                "{here}: keyword {other:?} is not supported (supported: {}; annotations: {})",
                SCHEMA_KEYWORDS.join(", "),
                ANNOTATIONS.join(", ")
            )),
        }
    }
}

/// Returns every way `value` breaks `schema` (a schema of the supported subset), each
/// naming where in the value (`$.items[2].name`); empty when it validates.
pub fn validate(schema: &Value, value: &Value) -> Vec<String> {
    let mut errors = Vec::new();
    validate_at(schema, value, "$", &mut errors);
    errors
}

fn type_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn is_type(value: &Value, name: &str) -> bool {
    let actual = type_of(value);
    actual == name
        || (name == "number" && actual == "integer")
        || (name == "integer" && value.as_f64().is_some_and(|f| f.fract() == 0.0))
}

fn validate_at(schema: &Value, value: &Value, path: &str, errors: &mut Vec<String>) {
    let Value::Object(schema) = schema else { return };
    if let Some(wanted) = schema.get("type") {
        let names: Vec<&str> = match wanted {
            Value::String(name) => vec![name.as_str()],
            Value::Array(list) => list.iter().filter_map(Value::as_str).collect(),
            _ => Vec::new(),
        };
        if !names.is_empty() && !names.iter().any(|n| is_type(value, n)) {
            errors.push(format!(
                "{path}: expected {}, found {}",
                names.join(" or "),
                type_of(value)
            ));
            return;
        }
    }
    if let Some(Value::Array(allowed)) = schema.get("enum")
        && !allowed.contains(value)
    {
        let shown: Vec<String> = allowed.iter().map(Value::to_string).collect();
        errors.push(format!("{path}: {value} is not one of {}", shown.join(", ")));
    }
    if let Value::Object(fields) = value {
        if let Some(Value::Array(required)) = schema.get("required") {
            for name in required.iter().filter_map(Value::as_str) {
                if !fields.contains_key(name) {
                    errors.push(format!("{path}: property {name:?} is required"));
                }
            }
        }
        let props = schema.get("properties").and_then(Value::as_object);
        for (name, field) in fields {
            let here = format!("{path}.{name}");
            match props.and_then(|p| p.get(name)) {
                Some(sub) => validate_at(sub, field, &here, errors),
                None => match schema.get("additionalProperties") {
                    Some(Value::Bool(false)) => {
                        errors.push(format!("{path}: property {name:?} is not allowed"));
                    }
                    Some(sub @ Value::Object(_)) => validate_at(sub, field, &here, errors),
                    _ => {}
                },
            }
        }
    }
    if let (Value::Array(items), Some(sub)) = (value, schema.get("items")) {
        for (i, item) in items.iter().enumerate() {
            validate_at(sub, item, &format!("{path}[{i}]"), errors);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_subset_is_checked_and_other_keywords_are_refused() {
        let good = json!({
            "type": "object",
            "properties": { "n": { "type": "integer" }, "tags": { "type": "array", "items": { "enum": ["a", "b"] } } },
            "required": ["n"],
            "additionalProperties": false,
            "description": "a result"
        });
        assert!(schema_problems(&good).is_empty());
        assert_eq!(
            schema_problems(&json!({ "type": "object", "properties": { "n": { "minimum": 1 } } })),
            vec![
                "properties.n.minimum: keyword \"minimum\" is not supported (supported: type, \
                 properties, required, items, enum, additionalProperties; annotations: title, \
                 description, default, examples, $schema)"
                    .to_owned()
            ]
        );
        assert_eq!(
            schema_problems(&json!("text")),
            vec!["the schema must be a JSON-schema object, not \"text\"".to_owned()]
        );
        assert_eq!(
            schema_problems(&json!({ "type": "float" })),
            vec!["type: \"float\" is not a type (types: object, array, string, number, integer, boolean, null)".to_owned()]
        );
    }

    #[test]
    fn values_are_validated_with_every_error_named() {
        let schema = json!({
            "type": "object",
            "properties": { "n": { "type": "integer" }, "tags": { "type": "array", "items": { "enum": ["a", "b"] } } },
            "required": ["n", "tags"],
            "additionalProperties": false
        });
        assert!(validate(&schema, &json!({ "n": 3, "tags": ["a"] })).is_empty());
        assert_eq!(
            validate(&schema, &json!({ "n": 1.5, "tags": ["c"], "x": 1 })),
            vec![
                "$.n: expected integer, found number".to_owned(),
                "$.tags[0]: \"c\" is not one of \"a\", \"b\"".to_owned(),
                "$: property \"x\" is not allowed".to_owned(),
            ]
        );
        assert_eq!(
            validate(&schema, &json!({ "tags": [] })),
            vec!["$: property \"n\" is required".to_owned()]
        );
        assert_eq!(
            validate(&schema, &json!([1])),
            vec!["$: expected object, found array".to_owned()]
        );
        assert!(validate(&json!({ "type": "number" }), &json!(2)).is_empty());
    }
}
