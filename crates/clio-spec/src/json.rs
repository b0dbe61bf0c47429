//! Duplicate keys in JSON: serde_json accepts an object that names a key twice and keeps
//! the last value, so `{"target": "a", "target": "b"}` would run `b` with nothing said.
//! [`duplicate_json_key`] finds the first key repeated in an object, with its position, so
//! that every JSON input CLIO reads (workflows, agent definitions and specs, script files,
//! launch records) refuses one by name.
//!
//! [`toml_error_message`] names the key in the toml crate's "duplicate key" error.
//!
//! The check walks the text once without building values; a text that is not JSON has no
//! duplicate as far as this check goes, and the caller's own parse reports its syntax error
//! with its position.

use std::cell::RefCell;
use std::collections::HashSet;
use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};

/// A key an object names twice: the key and where its second occurrence starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DuplicateKey {
    /// The repeated key, unescaped.
    pub key: String,
    /// The 1-based line of the repeat.
    pub line: usize,
    /// The 1-based column (in characters) of the repeat's opening quote.
    pub column: usize,
}

impl fmt::Display for DuplicateKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "duplicate key `{}` at line {}, column {}: an object may name each key once",
            self.key, self.line, self.column
        )
    }
}

/// Returns the first key some object of the JSON `text` names twice (in text order), or
/// `None` when there is none or `text` is not JSON.
pub fn duplicate_json_key(text: &str) -> Option<DuplicateKey> {
    let found = RefCell::new(None);
    let mut deserializer = serde_json::Deserializer::from_str(text);
    let error = Walk { found: &found }.deserialize(&mut deserializer).err()?;
    let key = found.into_inner()?;
    // serde_json places the error after the key's closing quote; the key starts at the
    // opening quote that matches it.
    let end = offset_of(text, error.line(), error.column());
    let start = opening_quote(text, end).unwrap_or(end);
    let before = &text[..start];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    Some(DuplicateKey { key, line, column })
}

/// Returns the message of a TOML parse error of `text`, the repeated key named when the
/// error is a key named twice: the toml crate refuses one (with its span) but says only
/// "duplicate key".
pub fn toml_error_message(text: &str, error: &toml::de::Error) -> String {
    let message = error.message().trim_end();
    if message != "duplicate key" {
        return message.to_owned();
    }
    let written = error.span().and_then(|span| text.get(span)).unwrap_or("").trim();
    let key = ['"', '\'']
        .iter()
        .find_map(|q| written.strip_prefix(*q).and_then(|rest| rest.strip_suffix(*q)));
    match key.unwrap_or(written) {
        "" => message.to_owned(),
        key => format!("duplicate key `{key}`: a table may name each key once"),
    }
}

/// Returns the byte offset of serde_json's error position: `line` is 1-based and `column`
/// counts the bytes of that line read so far (serde_json counts bytes, not characters).
fn offset_of(text: &str, line: usize, column: usize) -> usize {
    let line_start = if line <= 1 {
        0
    } else {
        text.match_indices('\n').nth(line - 2).map_or(text.len(), |(at, _)| at + 1)
    };
    (line_start + column).min(text.len())
}

/// Returns the offset of the `"` that opens the string whose closing quote is the last
/// `"` before `end`.
fn opening_quote(text: &str, end: usize) -> Option<usize> {
    let bytes = text.as_bytes();
    let close = bytes[..end.min(bytes.len())].iter().rposition(|&b| b == b'"')?;
    let mut at = close;
    while at > 0 {
        at -= 1;
        if bytes[at] != b'"' {
            continue;
        }
        // A quote is escaped when an odd number of backslashes stand before it.
        let slashes = bytes[..at].iter().rev().take_while(|&&b| b == b'\\').count();
        if slashes % 2 == 0 {
            return Some(at);
        }
    }
    None
}

/// A seed that walks any JSON value and stops at the first repeated key, keeping it.
#[derive(Clone, Copy)]
struct Walk<'f> {
    found: &'f RefCell<Option<String>>,
}

impl<'de> DeserializeSeed<'de> for Walk<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Walk<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }

    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }

    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }

    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }

    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }

    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while seq.next_element_seed(self)?.is_some() {}
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut keys: HashSet<String> = HashSet::new();
        while let Some(key) = map.next_key::<String>()? {
            if keys.contains(&key) {
                *self.found.borrow_mut() = Some(key);
                return Err(de::Error::custom("duplicate key"));
            }
            keys.insert(key);
            map.next_value_seed(self)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_first_repeat_where_it_starts() {
        let dup = duplicate_json_key(r#"{"a": 1, "b": {"c": 1, "c": 2}, "a": 3}"#).unwrap();
        assert_eq!((dup.key.as_str(), dup.line, dup.column), ("c", 1, 24));
        let dup = duplicate_json_key("{\n  \"x\\\"y\": 1,\n  \"x\\\"y\": 2\n}").unwrap();
        assert_eq!((dup.key.as_str(), dup.line, dup.column), ("x\"y", 3, 3));
        let dup = duplicate_json_key("{\"ééé\":\"ü\",\"ééé\":\"a\\\"b\"}").unwrap();
        assert_eq!((dup.key.as_str(), dup.line, dup.column), ("ééé", 1, 12));
        let dup = duplicate_json_key("[{\"é\":1,\"é\":2}]").unwrap();
        assert_eq!((dup.key.as_str(), dup.line, dup.column), ("é", 1, 9));
    }

    #[test]
    fn a_toml_key_named_twice_is_named() {
        for (text, key) in [
            ("[limits]\nmax_depth = 3\nmax_depth = 4\n", "max_depth"),
            ("a = 1\n\"a\" = 2\n", "a"),
            ("p = { q = 1, q = 2 }", "q"),
        ] {
            let error = toml::from_str::<toml::Table>(text).unwrap_err();
            assert_eq!(
                toml_error_message(text, &error),
                format!("duplicate key `{key}`: a table may name each key once")
            );
        }
        let error = toml::from_str::<toml::Table>("a = ").unwrap_err();
        assert!(!toml_error_message("a = ", &error).contains("duplicate"));
    }

    #[test]
    fn no_repeat_and_no_json_find_nothing() {
        assert_eq!(duplicate_json_key(r#"{"a": {"a": 1}, "b": [{"a": 2}, {"a": 3}]}"#), None);
        assert_eq!(duplicate_json_key(r#"{"a": 1,, "a": 2}"#), None);
        assert_eq!(duplicate_json_key("not json"), None);
    }
}
