//! Tool calls written as text: small models often answer `<tool_call>{"name": "read_file",
//! "arguments": {"path": "a.txt"}}</tool_call>` in their message instead of the API's
//! `tool_calls`. For a model whose catalog entry opts in (`text_tool_calls = true`), such
//! blocks are read as tool calls and taken out of the answer's text; anything that does
//! not parse stays text, so a quoted example never turns into a call by accident of form.
//!
//! Some models (Qwen2.5-Coder among them) leave the tags out and answer with the call
//! object alone, bare or in a ```` ```json ```` fence. Such an answer is a call only when
//! it is nothing but that object, has an `arguments` (or `parameters`) field and names a
//! tool the request offered: an object inside prose, or one naming no offered tool, stays
//! text.

use serde_json::{Map, Value};

use crate::ToolCall;

const OPEN: &str = "<tool_call>";
const CLOSE: &str = "</tool_call>";

/// Returns the tool calls written in `text` and the text that remains around them; no
/// calls when no block parses. Ids are `text_call_<n>` from 1, in order. `offered` are
/// the names of the request's tools, which an untagged whole-answer call must name.
pub(crate) fn extract(text: &str, offered: &[&str]) -> (Vec<ToolCall>, String) {
    if !text.contains(OPEN) {
        return match whole_answer_call(text, offered) {
            Some((name, arguments)) => {
                (vec![ToolCall { id: "text_call_1".to_owned(), name, arguments }], String::new())
            }
            None => (Vec::new(), text.to_owned()),
        };
    }
    let mut calls = Vec::new();
    let mut rest = String::new();
    let mut tail = text;
    while let Some(start) = tail.find(OPEN) {
        let after = &tail[start + OPEN.len()..];
        // A block the model did not close runs to the end of the text.
        let (body, closed) = match after.find(CLOSE) {
            Some(end) => (&after[..end], true),
            None => (after, false),
        };
        let consumed = start + OPEN.len() + body.len() + if closed { CLOSE.len() } else { 0 };
        let next = &tail[consumed..];
        match parse_call(body) {
            Some((name, arguments)) => {
                rest.push_str(&tail[..start]);
                calls.push(ToolCall {
                    id: format!("text_call_{}", calls.len() + 1),
                    name,
                    arguments,
                });
            }
            None => rest.push_str(&tail[..consumed]),
        }
        tail = next;
        if next.is_empty() {
            break;
        }
    }
    rest.push_str(tail);
    if calls.is_empty() {
        return (calls, text.to_owned());
    }
    (calls, rest.trim().to_owned())
}

/// Reads an answer that is one untagged call object and nothing else, bare or fenced.
fn whole_answer_call(text: &str, offered: &[&str]) -> Option<(String, Value)> {
    let mut body = text.trim();
    if let Some(fenced) = body.strip_prefix("```") {
        let fenced = fenced.strip_suffix("```")?;
        body = fenced.strip_prefix("json").unwrap_or(fenced).trim();
    }
    let Value::Object(object) = serde_json::from_str::<Value>(body).ok()? else { return None };
    if !object.contains_key("arguments") && !object.contains_key("parameters") {
        return None;
    }
    let (name, arguments) = parse_call(body)?;
    offered.contains(&name.as_str()).then_some((name, arguments))
}

/// Reads one block: `{"name": …, "arguments": {…}}` (`parameters` is accepted too, and
/// arguments given as a JSON string are parsed).
fn parse_call(body: &str) -> Option<(String, Value)> {
    let Value::Object(mut object) = serde_json::from_str::<Value>(body.trim()).ok()? else {
        return None;
    };
    let name = object.remove("name")?.as_str()?.trim().to_owned();
    if name.is_empty() {
        return None;
    }
    let arguments = object
        .remove("arguments")
        .or_else(|| object.remove("parameters"))
        .unwrap_or_else(|| Value::Object(Map::new()));
    let arguments = match arguments {
        Value::String(raw) => serde_json::from_str(&raw).unwrap_or(Value::String(raw)),
        other => other,
    };
    Some((name, arguments))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    #[test]
    fn a_written_call_becomes_a_tool_call() {
        let text = "Let me look.\n<tool_call>\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"a.txt\"}}\n</tool_call>";
        let (calls, rest) = extract(text, &[]);
        assert_eq!(calls.len(), 1);
        assert_eq!(calls[0].name, "read_file");
        assert_eq!(calls[0].arguments, json!({ "path": "a.txt" }));
        assert_eq!(calls[0].id, "text_call_1");
        assert_eq!(rest, "Let me look.");
    }

    #[test]
    fn several_calls_an_unclosed_one_and_string_arguments() {
        let text = "<tool_call>{\"name\":\"a\",\"arguments\":\"{\\\"x\\\":1}\"}</tool_call> and <tool_call>{\"name\":\"b\"}";
        let (calls, rest) = extract(text, &[]);
        assert_eq!(calls.iter().map(|c| c.name.as_str()).collect::<Vec<_>>(), ["a", "b"]);
        assert_eq!(calls[0].arguments, json!({ "x": 1 }));
        assert_eq!(calls[1].arguments, json!({}));
        assert_eq!(rest, "and");
    }

    #[test]
    fn text_that_does_not_parse_stays_text() {
        for text in [
            "plain answer",
            "<tool_call>not json</tool_call>",
            "<tool_call>{\"arguments\": {}}</tool_call>",
            "<tool_call>{\"name\": \"\"}</tool_call>",
        ] {
            let (calls, rest) = extract(text, &[]);
            assert!(calls.is_empty(), "{text}");
            assert_eq!(rest, text);
        }
    }

    #[test]
    fn a_whole_answer_call_without_tags_names_an_offered_tool() {
        let offered = ["tally"];
        for text in [
            "{\"name\": \"tally\", \"arguments\": {\"label\": \"alpha\"}}",
            "```json\n{\n  \"name\": \"tally\",\n  \"arguments\": {\"label\": \"alpha\"}\n}\n```",
            "  ```\n{\"name\": \"tally\", \"parameters\": {\"label\": \"alpha\"}}```\n",
        ] {
            let (calls, rest) = extract(text, &offered);
            assert_eq!(calls.len(), 1, "{text}");
            assert_eq!(
                (calls[0].name.as_str(), &calls[0].arguments),
                ("tally", &json!({ "label": "alpha" }))
            );
            assert_eq!(rest, "");
        }
        for text in [
            "Call it so: {\"name\": \"tally\", \"arguments\": {}}",
            "{\"name\": \"count\", \"arguments\": {}}",
            "{\"name\": \"tally\"}",
            "```json\n{\"name\": \"tally\", \"arguments\": {}}",
        ] {
            let (calls, rest) = extract(text, &offered);
            assert!(calls.is_empty(), "{text}");
            assert_eq!(rest, text);
        }
    }

    proptest! {
        #[test]
        fn never_panics_and_keeps_text_without_calls(text in ".{0,200}") {
            let (calls, rest) = extract(&text, &[]);
            if calls.is_empty() {
                prop_assert_eq!(rest, text);
            }
        }

        #[test]
        fn a_call_round_trips(name in "[a-z_]{1,12}", value in 0i64..1000) {
            let text = format!("<tool_call>{}</tool_call>", json!({ "name": name, "arguments": { "n": value } }));
            let (calls, rest) = extract(&text, &[]);
            prop_assert_eq!(calls.len(), 1);
            prop_assert_eq!(&calls[0].name, &name);
            prop_assert_eq!(&calls[0].arguments, &json!({ "n": value }));
            prop_assert_eq!(rest, "");
        }
    }
}
