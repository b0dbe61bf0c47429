//! Copies of JSON values whose objects hold no room to spare.
//!
//! The workspace builds `serde_json` with `preserve_order`, so an object is an `IndexMap`.
//! Its `clone` sizes the copy's entries to its hash table's capacity, and so does its
//! growth as keys arrive: a one-key object cloned holds room for 3 entries (336 bytes
//! rather than 112), a four-key one for 7. A workflow's result holds about two small
//! objects a step (its `workflow` report and, for a tool step, the tool's value in
//! `results`), and an output holds that mapping twice (its value and its outputs), so
//! for a 9,000-step workflow the spare room alone was about 600 bytes a step.
//!
//! [`copy`] and [`compact`] make every object exactly as large as its keys, keys in the
//! same order. Nesting past [`EXACT_DEPTH`] is copied as `Value::clone` copies it: the
//! walk is recursive, as `serde_json`'s own clone and drop are.

use serde_json::{Map, Value};

/// The deepest nesting made exact; deeper objects are left as they are.
const EXACT_DEPTH: usize = 64;

/// Returns a copy of `value` whose objects are no larger than their keys.
pub(crate) fn copy(value: &Value) -> Value {
    copy_at(value, 0)
}

/// Returns a copy of object `map` no larger than its keys, nor any object in it.
pub(crate) fn copy_map(map: &Map<String, Value>) -> Map<String, Value> {
    copy_map_at(map, 0)
}

/// Returns `value` with every object no larger than its keys, moving what it holds.
pub(crate) fn compact(value: Value) -> Value {
    compact_at(value, 0)
}

fn copy_at(value: &Value, depth: usize) -> Value {
    match value {
        Value::Object(map) if depth < EXACT_DEPTH => Value::Object(copy_map_at(map, depth)),
        Value::Array(items) if depth < EXACT_DEPTH => {
            Value::Array(items.iter().map(|v| copy_at(v, depth + 1)).collect())
        }
        other => other.clone(),
    }
}

fn copy_map_at(map: &Map<String, Value>, depth: usize) -> Map<String, Value> {
    let mut exact = Map::with_capacity(map.len());
    for (key, v) in map {
        exact.insert(key.clone(), copy_at(v, depth + 1));
    }
    exact
}

fn compact_at(value: Value, depth: usize) -> Value {
    match value {
        Value::Object(map) if depth < EXACT_DEPTH => {
            let mut exact = Map::with_capacity(map.len());
            for (key, v) in map {
                exact.insert(key, compact_at(v, depth + 1));
            }
            Value::Object(exact)
        }
        Value::Array(items) if depth < EXACT_DEPTH => {
            Value::Array(items.into_iter().map(|v| compact_at(v, depth + 1)).collect())
        }
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::{EXACT_DEPTH, compact, copy};
    use crate::test_json::json_value;
    use proptest::prelude::*;
    use serde_json::json;

    proptest! {
        /// A copy and a compacted value are the value, keys in the same order.
        #[test]
        fn copy_and_compact_keep_the_value_and_its_key_order(v in json_value()) {
            let text = v.to_string();
            prop_assert_eq!(copy(&v).to_string(), text.clone());
            prop_assert_eq!(&copy(&v), &v);
            prop_assert_eq!(compact(v.clone()).to_string(), text);
        }
    }

    #[test]
    fn a_value_nested_past_the_exact_depth_is_copied_whole() {
        let mut v = json!({ "leaf": [1, 2, 3] });
        for i in 0..EXACT_DEPTH + 10 {
            v = json!({ format!("k{i}"): v, "z": i });
        }
        assert_eq!(copy(&v), v);
        assert_eq!(compact(v.clone()), v);
    }
}
