//! A JSON Schema checker for what tools declare: the subset of JSON Schema that tool
//! argument schemas use (`type`, `properties`, `required`, `additionalProperties`,
//! `items`, `enum`, `const`, `anyOf`/`oneOf`, numeric and length bounds). A keyword it
//! does not know is ignored, as the schema's own spec asks of validators; so a schema using
//! more than this subset is checked less strictly, never refused.
//!
//! Used on a model's tool-call arguments before the tool runs: arguments that do not fit
//! never reach the tool, and the model is told each problem with its path.

use serde_json::Value;

/// Returns the problems of `value` against `schema`, each as `path: what is wrong`
/// (`$` is the whole value); empty when it fits.
pub fn schema_problems(schema: &Value, value: &Value) -> Vec<String> {
    let mut problems = Vec::new();
    check(schema, value, "$", &mut problems);
    problems
}

fn check(schema: &Value, value: &Value, path: &str, problems: &mut Vec<String>) {
    let Value::Object(schema) = schema else {
        // `false` admits nothing; `true` and non-schemas admit anything.
        if schema == &Value::Bool(false) {
            problems.push(format!("{path}: no value is allowed here"));
        }
        return;
    };
    if let Some(expected) = schema.get("type") {
        let types: Vec<&str> = match expected {
            Value::String(t) => vec![t.as_str()],
            Value::Array(ts) => ts.iter().filter_map(Value::as_str).collect(),
            _ => Vec::new(),
        };
        if !types.is_empty() && !types.iter().any(|t| is_type(value, t)) {
            problems.push(format!(
                "{path}: expected {}, got {}",
                types.join(" or "),
                type_of(value)
            ));
            return;
        }
    }
    if let Some(Value::Array(allowed)) = schema.get("enum")
        && !allowed.contains(value)
    {
        let shown: Vec<String> = allowed.iter().map(Value::to_string).collect();
        problems.push(format!("{path}: {value} is not one of {}", shown.join(", ")));
    }
    if let Some(constant) = schema.get("const")
        && constant != value
    {
        problems.push(format!("{path}: must be {constant}"));
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(Value::Array(options)) = schema.get(key) {
            let fits = options.iter().filter(|o| schema_problems(o, value).is_empty()).count();
            if fits == 0 || (key == "oneOf" && fits > 1) {
                problems.push(format!("{path}: fits {fits} of the {key} alternatives"));
            }
        }
    }
    match value {
        Value::Object(object) => {
            let properties = schema.get("properties").and_then(Value::as_object);
            if let Some(Value::Array(required)) = schema.get("required") {
                for name in required.iter().filter_map(Value::as_str) {
                    if !object.contains_key(name) {
                        problems.push(format!("{path}: `{name}` is required"));
                    }
                }
            }
            for (name, item) in object {
                let at = format!("{path}.{name}");
                match properties.and_then(|p| p.get(name)) {
                    Some(property) => check(property, item, &at, problems),
                    None => match schema.get("additionalProperties") {
                        Some(Value::Bool(false)) => {
                            let known: Vec<&str> = properties
                                .map(|p| p.keys().map(String::as_str).collect())
                                .unwrap_or_default();
                            problems.push(format!(
                                "{path}: unknown field `{name}` (known: {})",
                                if known.is_empty() { "none".to_owned() } else { known.join(", ") }
                            ));
                        }
                        Some(extra @ Value::Object(_)) => check(extra, item, &at, problems),
                        _ => {}
                    },
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for (i, item) in items.iter().enumerate() {
                    check(item_schema, item, &format!("{path}[{i}]"), problems);
                }
            }
            bound(schema, "minItems", "maxItems", items.len(), "items", path, problems);
        }
        Value::String(text) => {
            bound(
                schema,
                "minLength",
                "maxLength",
                text.chars().count(),
                "characters",
                path,
                problems,
            );
        }
        Value::Number(n) => {
            let n = n.as_f64().unwrap_or(f64::NAN);
            if let Some(min) = schema.get("minimum").and_then(Value::as_f64)
                && n < min
            {
                problems.push(format!("{path}: {n} is below the minimum {min}"));
            }
            if let Some(max) = schema.get("maximum").and_then(Value::as_f64)
                && n > max
            {
                problems.push(format!("{path}: {n} is above the maximum {max}"));
            }
        }
        Value::Bool(_) | Value::Null => {}
    }
}

fn bound(
    schema: &serde_json::Map<String, Value>,
    min_key: &str,
    max_key: &str,
    count: usize,
    unit: &str,
    path: &str,
    problems: &mut Vec<String>,
) {
    let count = u64::try_from(count).unwrap_or(u64::MAX);
    if let Some(min) = schema.get(min_key).and_then(Value::as_u64)
        && count < min
    {
        problems.push(format!("{path}: {count} {unit}, at least {min} needed"));
    }
    if let Some(max) = schema.get(max_key).and_then(Value::as_u64)
        && count > max
    {
        problems.push(format!("{path}: {count} {unit}, at most {max} allowed"));
    }
}

fn is_type(value: &Value, name: &str) -> bool {
    match name {
        "object" => value.is_object(),
        "array" => value.is_array(),
        "string" => value.is_string(),
        "boolean" => value.is_boolean(),
        "null" => value.is_null(),
        "number" => value.is_number(),
        "integer" => {
            value.is_i64() || value.is_u64() || value.as_f64().is_some_and(|f| f.fract() == 0.0)
        }
        // An unknown type name is not this checker's to refuse.
        _ => true,
    }
}

fn type_of(value: &Value) -> &'static str {
    match value {
        Value::Object(_) => "an object",
        Value::Array(_) => "an array",
        Value::String(_) => "a string",
        Value::Bool(_) => "a boolean",
        Value::Null => "null",
        Value::Number(_) => "a number",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    fn file_schema() -> Value {
        json!({
            "type": "object",
            "properties": {
                "path": { "type": "string", "minLength": 1 },
                "lines": { "type": "integer", "minimum": 1 },
                "mode": { "enum": ["text", "bytes"] },
                "tags": { "type": "array", "items": { "type": "string" }, "maxItems": 2 }
            },
            "required": ["path"],
            "additionalProperties": false
        })
    }

    #[test]
    fn fitting_arguments_have_no_problems() {
        let args = json!({ "path": "a.txt", "lines": 3, "mode": "text", "tags": ["x"] });
        assert!(schema_problems(&file_schema(), &args).is_empty());
        assert!(schema_problems(&json!({ "type": "object" }), &json!({ "any": 1 })).is_empty());
        assert!(schema_problems(&json!(true), &json!([1, 2])).is_empty());
    }

    #[test]
    fn each_problem_names_its_path() {
        let args = json!({ "lines": 0, "mode": "xml", "tags": ["a", 2, "c"], "colour": "red" });
        let problems = schema_problems(&file_schema(), &args);
        for expected in [
            "$: `path` is required",
            "$.lines: 0 is below the minimum 1",
            "$.mode: \"xml\" is not one of \"text\", \"bytes\"",
            "$.tags[1]: expected string, got a number",
            "$.tags: 3 items, at most 2 allowed",
            "$: unknown field `colour` (known: path, lines, mode, tags)",
        ] {
            assert!(problems.iter().any(|p| p == expected), "{expected} not in {problems:#?}");
        }
        // A model's literal copy of the schema is not a path.
        let problems = schema_problems(&file_schema(), &json!({ "type": "object" }));
        assert!(problems.contains(&"$: `path` is required".to_owned()), "{problems:?}");
        assert_eq!(
            schema_problems(&file_schema(), &json!("a.txt")),
            ["$: expected object, got a string"]
        );
    }

    #[test]
    fn alternatives_and_constants() {
        let schema = json!({ "oneOf": [{ "type": "string" }, { "type": "integer" }] });
        assert!(schema_problems(&schema, &json!(3)).is_empty());
        assert_eq!(schema_problems(&schema, &json!(null)), ["$: fits 0 of the oneOf alternatives"]);
        assert_eq!(schema_problems(&json!({ "const": 1 }), &json!(2)), ["$: must be 1"]);
        assert_eq!(schema_problems(&json!(false), &json!(2)), ["$: no value is allowed here"]);
    }

    fn any_json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i32>().prop_map(|n| json!(n)),
            "[a-z]{0,6}".prop_map(Value::String),
        ];
        leaf.prop_recursive(3, 24, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                prop::collection::btree_map("[a-z]{1,4}", inner, 0..4)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest! {
        #[test]
        fn any_schema_and_value_never_panic(schema in any_json(), value in any_json()) {
            let _ = schema_problems(&schema, &value);
        }

        #[test]
        fn an_empty_schema_admits_everything(value in any_json()) {
            let problems = schema_problems(&json!({}), &value);
            prop_assert!(problems.is_empty(), "{:?}", problems);
        }
    }
}
