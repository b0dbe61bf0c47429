//! The canonical JSON encoding that spec checksums are computed over.
//!
//! The rule, which is part of the spec format and must never change silently (golden
//! checksums in the tests pin it):
//!
//! 1. Objects are written with their keys sorted by the bytes of their UTF-8 encoding,
//!    whatever order they were built or parsed in.
//! 2. No insignificant whitespace: no space after `:` or `,`, no newlines.
//! 3. Strings are written as serde_json writes them: `"` and `\` escaped, control
//!    characters escaped (`\n`, `\t`, … or `\u00XX`), every other character as raw UTF-8.
//! 4. Numbers are written as serde_json writes them: integers in decimal without a
//!    fraction, other numbers in the shortest form that reads back to the same `f64`.
//! 5. Arrays keep their order; `true`, `false` and `null` are written as such.
//!
//! The checksum is the lowercase hex SHA-256 of those bytes.

use serde_json::Value;
use sha2::{Digest, Sha256};

/// Writes `value` in the canonical encoding described in the module documentation.
pub fn canonical_json(value: &Value) -> String {
    let mut out = String::new();
    write_value(value, &mut out);
    out
}

/// Returns the lowercase hex SHA-256 of `value`'s canonical encoding.
pub fn canonical_sha256(value: &Value) -> String {
    let digest = Sha256::digest(canonical_json(value).as_bytes());
    let mut hex = String::with_capacity(64);
    for byte in digest {
        hex.push(char::from_digit(u32::from(byte >> 4), 16).unwrap_or('0'));
        hex.push(char::from_digit(u32::from(byte & 0xf), 16).unwrap_or('0'));
    }
    hex
}

fn write_value(value: &Value, out: &mut String) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => out.push_str(&n.to_string()),
        Value::String(s) => write_string(s, out),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_value(item, out);
            }
            out.push(']');
        }
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
            out.push('{');
            for (i, (key, item)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_string(key, out);
                out.push(':');
                write_value(item, out);
            }
            out.push('}');
        }
    }
}

fn write_string(s: &str, out: &mut String) {
    // Serialising a `str` cannot fail; the fallback keeps this total anyway.
    match serde_json::to_string(s) {
        Ok(quoted) => out.push_str(&quoted),
        Err(_) => out.push_str("\"\""),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn sorts_keys_and_drops_whitespace() {
        let value = json!({"b": [1, 2.5, "x"], "a": {"z": null, "y": true}});
        assert_eq!(canonical_json(&value), r#"{"a":{"y":true,"z":null},"b":[1,2.5,"x"]}"#);
    }

    #[test]
    fn escapes_control_characters_and_keeps_unicode() {
        let value = json!({"k": "a\"b\\c\n\u{1}é"});
        assert_eq!(canonical_json(&value), "{\"k\":\"a\\\"b\\\\c\\n\\u0001é\"}");
    }

    #[test]
    fn distinguishes_strings_that_differ_by_a_nul() {
        assert_ne!(canonical_sha256(&json!("a")), canonical_sha256(&json!("a\u{0}")));
    }

    #[test]
    fn hashes_known_value() {
        // SHA-256 of the two bytes `{}`.
        assert_eq!(
            canonical_sha256(&json!({})),
            "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"
        );
    }
}
