//! [`ScopeTask`]: the task a flow scope's calls get by default and
//! [`Ctx::task`](crate::Ctx::task) returns, kept so that a run does not hold a large input twice.
//!
//! The flow's `forward` owns its input. The context keeps its own copy for the few flows
//! that ask for it (`ctx.task()`, or a call with `()` as its input). A large copy is kept
//! as compact JSON text, parsed on first use: a 9,000-step workflow's input is about
//! 820 bytes a step as a value and under 80 as text. The text parses back to the same
//! value: `serde_json` is built with `float_roundtrip`, and only values nested no deeper
//! than [`TEXT_DEPTH`] are kept as text, well under the parser's limit of 128.

use std::sync::{Arc, OnceLock};

use serde_json::Value;

/// The deepest nesting kept as text; a deeper value is kept as it is.
const TEXT_DEPTH: usize = 64;

/// A scope's task: the value itself, or its compact JSON text and the value parsed from
/// it once asked for.
#[derive(Debug)]
pub(crate) enum ScopeTask {
    Value(Value),
    Text { text: Arc<str>, parsed: OnceLock<Value> },
}

impl ScopeTask {
    /// Returns a copy of `task` for a scope whose flow is handed `task` itself: an array
    /// or object as its text (when nested no deeper than [`TEXT_DEPTH`]), anything else as
    /// a value.
    pub(crate) fn copy_of(task: &Value) -> ScopeTask {
        let container = matches!(task, Value::Array(_) | Value::Object(_));
        if !container || !depth_within(task, TEXT_DEPTH) {
            return ScopeTask::Value(task.clone());
        }
        match serde_json::to_string(task) {
            Ok(text) => ScopeTask::Text { text: text.into(), parsed: OnceLock::new() },
            Err(_) => ScopeTask::Value(task.clone()),
        }
    }

    /// Returns the task's value, parsing its text the first time.
    pub(crate) fn get(&self) -> &Value {
        match self {
            ScopeTask::Value(v) => v,
            ScopeTask::Text { text, parsed } => parsed.get_or_init(|| {
                // Text this module wrote from a value nested within TEXT_DEPTH always parses;
                // the null is unreachable.
                serde_json::from_str(text).unwrap_or(Value::Null)
            }),
        }
    }
}

impl Clone for ScopeTask {
    /// A text copy shares the text and parses on its own first use.
    fn clone(&self) -> ScopeTask {
        match self {
            ScopeTask::Value(v) => ScopeTask::Value(v.clone()),
            ScopeTask::Text { text, .. } => {
                ScopeTask::Text { text: Arc::clone(text), parsed: OnceLock::new() }
            }
        }
    }
}

/// Returns whether `value` nests no deeper than `max` arrays and objects.
fn depth_within(value: &Value, max: usize) -> bool {
    // An explicit stack: the value itself may be nested deeper than a thread's stack allows
    // a recursive walk to go.
    let mut stack = vec![(value, 0usize)];
    while let Some((v, depth)) = stack.pop() {
        match v {
            Value::Array(_) | Value::Object(_) if depth >= max => return false,
            Value::Array(items) => stack.extend(items.iter().map(|c| (c, depth + 1))),
            Value::Object(map) => stack.extend(map.values().map(|c| (c, depth + 1))),
            _ => {}
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_json::json_value;
    use proptest::prelude::*;
    use serde_json::json;

    fn nested(depth: usize) -> Value {
        (0..depth).fold(json!(1), |inner, _| json!([inner]))
    }

    #[test]
    fn a_large_object_is_kept_as_text_and_reads_back_the_same() {
        let task = json!({ "workflow": { "steps": [{ "id": "s0", "input": { "x": 0.1 } }] }, "n": u64::MAX });
        let kept = ScopeTask::copy_of(&task);
        assert!(matches!(kept, ScopeTask::Text { .. }));
        assert_eq!(kept.get(), &task);
        assert_eq!(kept.clone().get(), &task);
    }

    #[test]
    fn text_and_values_too_deep_for_text_are_kept_as_values() {
        assert!(matches!(ScopeTask::copy_of(&json!("essay")), ScopeTask::Value(_)));
        let deep = nested(TEXT_DEPTH + 1);
        let kept = ScopeTask::copy_of(&deep);
        assert!(matches!(kept, ScopeTask::Value(_)));
        assert_eq!(kept.get(), &deep);
        let within = nested(TEXT_DEPTH);
        assert!(matches!(ScopeTask::copy_of(&within), ScopeTask::Text { .. }));
        assert_eq!(ScopeTask::copy_of(&within).get(), &within);
    }

    proptest! {
        /// Whatever form it is kept in, the task reads back as the value it was made from,
        /// numbers and key order included.
        #[test]
        fn a_kept_task_reads_back_as_the_value(task in json_value()) {
            let kept = ScopeTask::copy_of(&task);
            prop_assert_eq!(kept.get(), &task);
            let a = serde_json::to_string(kept.get()).unwrap();
            prop_assert_eq!(a, serde_json::to_string(&task).unwrap());
        }
    }
}
