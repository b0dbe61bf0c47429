//! Reads typed fields out of a [`Node`] table, reporting every wrong type, missing field
//! and unknown field into a [`Sink`] instead of stopping at the first, which is what
//! lets `plugin check` list every problem of a manifest at once.

use crate::problem::{ProblemCode, Sink};
use crate::tree::{Node, Value};

/// The fields of one table, read one by one; [`Fields::finish`] reports those never read.
pub(crate) struct Fields<'n> {
    entries: &'n [(String, Node)],
    prefix: String,
    known: Vec<&'static str>,
    pub(crate) line: Option<u32>,
}

impl<'n> Fields<'n> {
    /// Opens `node` as a table at field path `prefix`; reports `wrong_type` otherwise.
    pub(crate) fn open(node: &'n Node, prefix: &str, sink: &mut Sink<'_>) -> Option<Fields<'n>> {
        match &node.value {
            Value::Table(entries) => Some(Fields {
                entries,
                prefix: prefix.to_owned(),
                known: Vec::new(),
                line: node.line,
            }),
            other => {
                sink.push(
                    ProblemCode::WrongType,
                    prefix,
                    node.line,
                    format!("expected a table, found {}", other.kind()),
                );
                None
            }
        }
    }

    /// Returns the field path of `key` in this table, such as `tools[0].name`.
    pub(crate) fn path(&self, key: &str) -> String {
        if self.prefix.is_empty() { key.to_owned() } else { format!("{}.{key}", self.prefix) }
    }

    /// Returns the raw node of `key`, marking the key as known.
    pub(crate) fn get(&mut self, key: &'static str) -> Option<&'n Node> {
        self.known.push(key);
        self.entries.iter().find(|(k, _)| k == key).map(|(_, node)| node)
    }

    /// Reports a wrong type for `key`.
    fn wrong(&self, sink: &mut Sink<'_>, key: &str, node: &Node, expected: &str) {
        sink.push(
            ProblemCode::WrongType,
            self.path(key),
            node.line,
            format!("expected {expected}, found {}", node.value.kind()),
        );
    }

    /// Reads an optional string.
    pub(crate) fn str(&mut self, sink: &mut Sink<'_>, key: &'static str) -> Option<String> {
        let node = self.get(key)?;
        match &node.value {
            Value::Str(s) => Some(s.clone()),
            _ => {
                self.wrong(sink, key, node, "a string");
                None
            }
        }
    }

    /// Reads a required string; reports `missing_field` when absent.
    pub(crate) fn req_str(&mut self, sink: &mut Sink<'_>, key: &'static str) -> Option<String> {
        if !self.entries.iter().any(|(k, _)| k == key) {
            self.known.push(key);
            sink.push(ProblemCode::MissingField, self.path(key), self.line, "required field");
            return None;
        }
        self.str(sink, key)
    }

    /// Reads an optional boolean.
    pub(crate) fn bool(&mut self, sink: &mut Sink<'_>, key: &'static str) -> Option<bool> {
        let node = self.get(key)?;
        match node.value {
            Value::Bool(b) => Some(b),
            _ => {
                self.wrong(sink, key, node, "a boolean");
                None
            }
        }
    }

    /// Reads an optional non-negative integer.
    pub(crate) fn u64(&mut self, sink: &mut Sink<'_>, key: &'static str) -> Option<u64> {
        let node = self.get(key)?;
        match node.value {
            Value::Int(i) if i >= 0 => u64::try_from(i).ok(),
            _ => {
                self.wrong(sink, key, node, "a non-negative integer");
                None
            }
        }
    }

    /// Reads an optional list of strings; each item that is not a string is reported.
    pub(crate) fn str_list(
        &mut self,
        sink: &mut Sink<'_>,
        key: &'static str,
    ) -> Option<Vec<(String, Option<u32>)>> {
        let node = self.get(key)?;
        let Value::Array(items) = &node.value else {
            self.wrong(sink, key, node, "a list of strings");
            return None;
        };
        let mut out = Vec::new();
        for (idx, item) in items.iter().enumerate() {
            match &item.value {
                Value::Str(s) => out.push((s.clone(), item.line)),
                other => sink.push(
                    ProblemCode::WrongType,
                    format!("{}[{idx}]", self.path(key)),
                    item.line,
                    format!("expected a string, found {}", other.kind()),
                ),
            }
        }
        Some(out)
    }

    /// Reads an optional list of tables, returning each with its field path.
    pub(crate) fn table_list(
        &mut self,
        sink: &mut Sink<'_>,
        key: &'static str,
    ) -> Vec<(String, &'n Node)> {
        let Some(node) = self.get(key) else { return Vec::new() };
        let Value::Array(items) = &node.value else {
            self.wrong(sink, key, node, "a list of tables");
            return Vec::new();
        };
        items
            .iter()
            .enumerate()
            .map(|(idx, item)| (format!("{}[{idx}]", self.path(key)), item))
            .collect()
    }

    /// Reports every key that was never read as `unknown_field`, naming the known ones.
    pub(crate) fn finish(self, sink: &mut Sink<'_>) {
        for (key, node) in self.entries {
            if !self.known.contains(&key.as_str()) {
                let mut known = self.known.clone();
                known.sort_unstable();
                known.dedup();
                sink.push(
                    ProblemCode::UnknownField,
                    self.path(key),
                    node.line,
                    format!("unknown field, expected one of: {}", known.join(", ")),
                );
            }
        }
    }

    /// Marks keys as known without reading them (fields kept for compatibility only).
    pub(crate) fn ignore(&mut self, keys: &[&'static str]) {
        self.known.extend_from_slice(keys);
    }
}
