//! A small document tree that TOML manifests and JSON files both read into, so that one
//! field reader ([`crate::reader`]) reports every problem with its field path and, for
//! TOML, its line.
//!
//! TOML keeps spans (through `toml::de::DeTable`), so every TOML node knows its line;
//! `serde_json` keeps none, so JSON nodes have no line and only JSON syntax errors do.

use serde_json::{Map, Number, Value as Json};
use toml::de::{DeTable, DeValue};

/// One value of a manifest with the line it starts on, when the format knows it.
#[derive(Debug, Clone)]
pub(crate) struct Node {
    pub(crate) line: Option<u32>,
    pub(crate) value: Value,
}

/// The value of a [`Node`].
#[derive(Debug, Clone)]
pub(crate) enum Value {
    Str(String),
    Int(i64),
    Float(f64),
    Bool(bool),
    /// A TOML date or time, kept as written.
    Datetime(String),
    Array(Vec<Node>),
    /// Entries in document order (TOML: key order of the parser's map).
    Table(Vec<(String, Node)>),
    /// JSON `null`.
    Null,
}

impl Value {
    /// Names the kind of value, for "expected a string, found an integer" messages.
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            Value::Str(_) => "a string",
            Value::Int(_) => "an integer",
            Value::Float(_) => "a float",
            Value::Bool(_) => "a boolean",
            Value::Datetime(_) => "a date",
            Value::Array(_) => "a list",
            Value::Table(_) => "a table",
            Value::Null => "null",
        }
    }
}

/// A syntax error: the message and the line, when there is one.
#[derive(Debug, Clone)]
pub(crate) struct SyntaxError {
    pub(crate) line: Option<u32>,
    pub(crate) message: String,
}

/// Parses TOML text into a tree whose nodes carry their lines.
pub(crate) fn parse_toml(text: &str) -> Result<Node, SyntaxError> {
    let table = DeTable::parse(text).map_err(|err| {
        let mut message = err.message().trim_end().to_owned();
        // The parser says "duplicate key" without the key; its span holds it.
        if message == "duplicate key"
            && let Some(key) = err.span().and_then(|span| text.get(span))
        {
            message = format!(
                "duplicate key `{}`: a table may name each key once",
                key.trim().trim_matches('"')
            );
        }
        SyntaxError { line: err.span().map(|span| line_of(text, span.start)), message }
    })?;
    let lines = Lines::new(text);
    let line = Some(lines.line_of(table.span().start));
    Ok(Node { line, value: toml_table(&lines, table.get_ref()) })
}

/// The byte offsets where each line of a text starts, so that the line of every node is
/// a binary search (counting newlines from the start for each node made a manifest of
/// 10,000 tools take minutes).
pub(crate) struct Lines {
    starts: Vec<usize>,
}

impl Lines {
    pub(crate) fn new(text: &str) -> Lines {
        let mut starts = vec![0];
        starts.extend(text.bytes().enumerate().filter(|&(_, b)| b == b'\n').map(|(i, _)| i + 1));
        Lines { starts }
    }

    /// Returns the 1-based line of byte `offset`, as [`line_of`] does.
    pub(crate) fn line_of(&self, offset: usize) -> u32 {
        // The number of line starts at or before `offset`.
        let line = self.starts.partition_point(|&start| start <= offset);
        u32::try_from(line.max(1)).unwrap_or(u32::MAX)
    }
}

fn toml_table(text: &Lines, table: &DeTable<'_>) -> Value {
    let mut entries: Vec<(String, Node)> = table
        .iter()
        .map(|(key, value)| {
            let node = toml_node(text, value.get_ref(), value.span().start);
            (key.get_ref().to_string(), node)
        })
        .collect();
    // The parser's map is sorted by key; document order reads better in reports.
    entries.sort_by_key(|(_, node)| node.line);
    Value::Table(entries)
}

fn toml_node(text: &Lines, value: &DeValue<'_>, offset: usize) -> Node {
    let value = match value {
        DeValue::String(s) => Value::Str(s.to_string()),
        DeValue::Integer(i) => {
            let digits = i.as_str().replace('_', "");
            match i64::from_str_radix(&digits, i.radix()) {
                Ok(n) => Value::Int(n),
                Err(_) => Value::Float(f64::INFINITY),
            }
        }
        DeValue::Float(f) => Value::Float(f.as_str().replace('_', "").parse().unwrap_or(f64::NAN)),
        DeValue::Boolean(b) => Value::Bool(*b),
        DeValue::Datetime(d) => Value::Datetime(d.to_string()),
        DeValue::Array(items) => Value::Array(
            items.iter().map(|item| toml_node(text, item.get_ref(), item.span().start)).collect(),
        ),
        DeValue::Table(table) => toml_table(text, table),
    };
    Node { line: Some(text.line_of(offset)), value }
}

/// Returns the 1-based line of byte `offset` in `text`.
pub(crate) fn line_of(text: &str, offset: usize) -> u32 {
    let end = offset.min(text.len());
    let newlines = text.as_bytes()[..end].iter().filter(|&&b| b == b'\n').count();
    u32::try_from(newlines + 1).unwrap_or(u32::MAX)
}

/// Parses JSON text into a tree (without lines) and also returns it as JSON. An object
/// that names a key twice is refused with the key and the repeat's line: serde_json would
/// keep the last value and say nothing.
pub(crate) fn parse_json(text: &str) -> Result<(Node, Json), SyntaxError> {
    let json: Json = serde_json::from_str(text).map_err(|err| SyntaxError {
        line: u32::try_from(err.line()).ok().filter(|&line| line > 0),
        message: err.to_string().split(" at line ").next().unwrap_or_default().to_owned(),
    })?;
    if let Some(duplicate) = clio_spec::duplicate_json_key(text) {
        return Err(SyntaxError {
            line: u32::try_from(duplicate.line).ok(),
            message: format!(
                "duplicate key {:?} (column {}): an object may name each key once",
                duplicate.key, duplicate.column
            ),
        });
    }
    Ok((json_node(&json), json))
}

/// Converts JSON into a tree without lines.
pub(crate) fn json_node(json: &Json) -> Node {
    let value = match json {
        Json::Null => Value::Null,
        Json::Bool(b) => Value::Bool(*b),
        Json::Number(n) => match n.as_i64() {
            Some(i) => Value::Int(i),
            None => Value::Float(n.as_f64().unwrap_or(f64::NAN)),
        },
        Json::String(s) => Value::Str(s.clone()),
        Json::Array(items) => Value::Array(items.iter().map(json_node).collect()),
        Json::Object(map) => {
            Value::Table(map.iter().map(|(key, value)| (key.clone(), json_node(value))).collect())
        }
    };
    Node { line: None, value }
}

/// Converts a tree into JSON (TOML dates become strings, non-finite floats `null`).
pub(crate) fn to_json(node: &Node) -> Json {
    match &node.value {
        Value::Str(s) | Value::Datetime(s) => Json::String(s.clone()),
        Value::Int(i) => Json::Number((*i).into()),
        Value::Float(f) => Number::from_f64(*f).map_or(Json::Null, Json::Number),
        Value::Bool(b) => Json::Bool(*b),
        Value::Array(items) => Json::Array(items.iter().map(to_json).collect()),
        Value::Table(entries) => Json::Object(
            entries.iter().map(|(key, value)| (key.clone(), to_json(value))).collect::<Map<_, _>>(),
        ),
        Value::Null => Json::Null,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn toml_nodes_know_their_lines() {
        let node = parse_toml("a = 1\n\n[t]\nb = \"x\"\n").unwrap_or_else(|e| panic!("{e:?}"));
        let Value::Table(entries) = node.value else { panic!("not a table") };
        assert_eq!(entries[0].0, "a");
        assert_eq!(entries[0].1.line, Some(1));
        let Value::Table(inner) = &entries[1].1.value else { panic!("not a table") };
        assert_eq!(inner[0].1.line, Some(4));
    }

    #[test]
    fn the_line_index_agrees_with_counting_newlines() {
        for text in ["", "a", "\n", "a\nb", "a\n\nbc\n", "\n\n\n"] {
            let lines = Lines::new(text);
            for offset in 0..=text.len() + 2 {
                assert_eq!(lines.line_of(offset), line_of(text, offset), "{text:?} at {offset}");
            }
        }
    }

    #[test]
    fn a_duplicate_json_key_is_refused_by_name() {
        let err = parse_json("{\n  \"name\": \"a\",\n  \"name\": \"b\"\n}")
            .err()
            .unwrap_or_else(|| panic!("parsed"));
        assert_eq!(err.line, Some(3));
        assert!(err.message.starts_with("duplicate key \"name\""), "{}", err.message);
        let nested = parse_json(r#"{"plugins": [{"source": "a", "source": "b"}]}"#);
        assert!(nested.is_err(), "a repeat in a nested object is refused too");
        assert!(parse_json(r#"[{"a": 1}, {"a": 2}]"#).is_ok(), "one key per object");
        // TOML manifests: the parser refuses a repeated key, by name and line.
        let err = parse_toml("id = \"a\"\nversion = \"1.0.0\"\nid = \"b\"\n")
            .err()
            .unwrap_or_else(|| panic!("parsed"));
        assert_eq!(err.line, Some(3));
        assert!(err.message.contains("duplicate key `id`"), "{}", err.message);
    }

    #[test]
    fn syntax_errors_carry_a_line() {
        let err = parse_toml("a = 1\nb = \n").err().unwrap_or_else(|| panic!("parsed"));
        assert_eq!(err.line, Some(2));
        let err = parse_json("{\n  \"a\": ,\n}").err().unwrap_or_else(|| panic!("parsed"));
        assert_eq!(err.line, Some(2));
    }
}
