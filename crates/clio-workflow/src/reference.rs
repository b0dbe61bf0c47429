//! Input references: `$task` and `$<step>` in a step's input text or in the values of its
//! input object, and `$$` for a literal `$`.
//!
//! A reference is `$` followed by the longest run of id characters (`a-z`, `0-9`, `-`, `_`).
//! A `$` followed by anything else (or by nothing) stays a literal `$`.

use serde_json::{Map, Value};

use crate::id::is_id_char;

/// One piece of a text with references.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Piece<'a> {
    /// Literal text.
    Text(&'a str),
    /// A reference, by name without `$`.
    Ref(&'a str),
}

/// Splits `text` into literal pieces and references.
pub(crate) fn pieces(text: &str) -> Vec<Piece<'_>> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find('$') {
        if at > 0 {
            out.push(Piece::Text(&rest[..at]));
        }
        let after = &rest[at + 1..];
        if let Some(tail) = after.strip_prefix('$') {
            out.push(Piece::Text("$"));
            rest = tail;
            continue;
        }
        let len = after.find(|c: char| !is_id_char(c)).unwrap_or(after.len());
        if len == 0 {
            out.push(Piece::Text("$"));
        } else {
            out.push(Piece::Ref(&after[..len]));
        }
        rest = &after[len..];
    }
    if !rest.is_empty() {
        out.push(Piece::Text(rest));
    }
    out
}

/// Returns every name referenced in `input`, in order of appearance (repeats included).
pub(crate) fn references(input: &Value) -> Vec<&str> {
    let mut out = Vec::new();
    collect(input, &mut out);
    out
}

fn collect<'a>(value: &'a Value, out: &mut Vec<&'a str>) {
    match value {
        Value::String(text) => {
            out.extend(pieces(text).into_iter().filter_map(|piece| match piece {
                Piece::Ref(name) => Some(name),
                Piece::Text(_) => None,
            }))
        }
        Value::Array(items) => items.iter().for_each(|item| collect(item, out)),
        Value::Object(map) => map.values().for_each(|item| collect(item, out)),
        Value::Null | Value::Bool(_) | Value::Number(_) => {}
    }
}

/// Returns `input` with its references replaced by the values `lookup` gives.
///
/// A string that is only one reference becomes the value itself; a reference inside text
/// becomes the value's text ([`text_of`]). A name `lookup` does not know stays as written
/// (validation makes that impossible for a checked workflow).
pub(crate) fn resolve<'v>(input: &Value, lookup: &impl Fn(&str) -> Option<&'v Value>) -> Value {
    match input {
        Value::String(text) => {
            let parts = pieces(text);
            if let [Piece::Ref(name)] = parts.as_slice()
                && let Some(value) = lookup(name)
            {
                return value.clone();
            }
            let mut out = String::with_capacity(text.len());
            for part in parts {
                match part {
                    Piece::Text(literal) => out.push_str(literal),
                    Piece::Ref(name) => match lookup(name) {
                        Some(value) => out.push_str(&text_of(value)),
                        None => {
                            out.push('$');
                            out.push_str(name);
                        }
                    },
                }
            }
            Value::String(out)
        }
        Value::Array(items) => {
            Value::Array(items.iter().map(|item| resolve(item, lookup)).collect())
        }
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(key, item)| (key.clone(), resolve(item, lookup)))
                .collect::<Map<_, _>>(),
        ),
        other => other.clone(),
    }
}

/// Returns the text of a value: a string as it is, anything else as compact JSON.
pub fn text_of(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn splits_references() {
        assert_eq!(
            pieces("Review $draft against $task."),
            vec![
                Piece::Text("Review "),
                Piece::Ref("draft"),
                Piece::Text(" against "),
                Piece::Ref("task"),
                Piece::Text("."),
            ]
        );
        assert_eq!(
            pieces("costs $$5 or $ 3"),
            vec![
                Piece::Text("costs "),
                Piece::Text("$"),
                Piece::Text("5 or "),
                Piece::Text("$"),
                Piece::Text(" 3"),
            ]
        );
        assert_eq!(pieces("$"), vec![Piece::Text("$")]);
        assert_eq!(pieces("$Task"), vec![Piece::Text("$"), Piece::Text("Task")]);
    }

    #[test]
    fn resolves_whole_values_and_text() {
        let task = json!({"goal": "x"});
        let draft = json!("the draft");
        let lookup = |name: &str| match name {
            "task" => Some(&task),
            "draft" => Some(&draft),
            _ => None,
        };
        assert_eq!(resolve(&json!("$task"), &lookup), task);
        assert_eq!(
            resolve(&json!("Review $draft against $task; pay $$3"), &lookup),
            json!("Review the draft against {\"goal\":\"x\"}; pay $3")
        );
        assert_eq!(
            resolve(&json!({"a": "$draft", "b": {"c": ["$task"]}}), &lookup),
            json!({"a": "the draft", "b": {"c": [{"goal": "x"}]}})
        );
    }
}
