//! What calls take and give back: [`CallInput`] (text as is, a single result's public text,
//! anything else as JSON), [`CallResult`] (a child's answer, value, outputs, handle, …) and
//! [`FlowOutput`] (what a flow returns).
//!
//! [`CallResult`] deliberately implements neither `Serialize` nor `Into<Value>`: a list or
//! mapping holding results cannot be built as a `serde_json::Value`, so it cannot be passed
//! to a child by mistake. Build plain data (`r.answer`, `r.value`) instead. Results reach
//! the journal through the private `to_json` / `from_json` pair.

use std::fmt;

use clio_journal::TaskId;

use crate::command::object;
use serde_json::{Map, Value};

/// What a call ran: its kind, as the seed names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CallKind {
    /// An installed agent (`marketplace/id`) or this agent (`"self"`).
    Agent,
    /// A subagent of a carried plugin.
    Subagent,
    /// A flow.
    Flow,
    /// A tool.
    Tool,
}

impl CallKind {
    /// Returns the kind's name: `agent`, `subagent`, `flow` or `tool`.
    pub fn as_str(self) -> &'static str {
        match self {
            CallKind::Agent => "agent",
            CallKind::Subagent => "subagent",
            CallKind::Flow => "flow",
            CallKind::Tool => "tool",
        }
    }

    fn parse(s: &str) -> CallKind {
        match s {
            "agent" => CallKind::Agent,
            "subagent" => CallKind::Subagent,
            "tool" => CallKind::Tool,
            _ => CallKind::Flow,
        }
    }
}

/// A child's result.
#[derive(Debug, Clone, PartialEq)]
pub struct CallResult {
    /// The final answer as text; empty for a tool.
    pub answer: String,
    /// The raw result; for a tool, the value it returned.
    pub value: Value,
    /// The other outputs of the child.
    pub outputs: Map<String, Value>,
    /// The child's whole public response in order, with any addendum.
    pub response_text: String,
    /// The child's task handle.
    pub handle: TaskId,
    /// What was called.
    pub target: String,
    /// What kind of target it was.
    pub kind: CallKind,
    /// The model it ran on, as `account/model`; empty for a tool.
    pub model: String,
    /// Its position in a gather or `as_completed`, when it was one of several.
    pub index: Option<usize>,
    /// The child's typed `workflow_state`.
    pub workflow_state: Value,
}

impl CallResult {
    /// Returns output `name`, else the `workflow_state` section `name` (the seed's
    /// `result.<name>`).
    pub fn get(&self, name: &str) -> Option<&Value> {
        self.outputs.get(name).or_else(|| self.workflow_state.get(name))
    }

    /// Returns the number of outputs (`len(result)`).
    pub fn len(&self) -> usize {
        self.outputs.len()
    }

    /// Returns whether the result has no outputs.
    pub fn is_empty(&self) -> bool {
        self.outputs.is_empty()
    }

    /// Returns the result's public text: the answer, or for a tool its value as text.
    pub fn public_text(&self) -> String {
        if self.kind == CallKind::Tool && self.answer.is_empty() {
            match &self.value {
                Value::String(s) => s.clone(),
                Value::Null => String::new(),
                v => v.to_string(),
            }
        } else {
            self.answer.clone()
        }
    }

    /// Returns the record form of the result, as the journal stores it.
    pub fn to_json(&self) -> Value {
        // Every field, `outputs` too: tools hand this form to agents as it is.
        object([
            ("answer", self.answer.as_str().into()),
            ("value", self.value.clone()),
            ("outputs", Value::Object(self.outputs.clone())),
            ("response_text", self.response_text.as_str().into()),
            ("handle", self.handle.0.into()),
            ("target", self.target.as_str().into()),
            ("kind", self.kind.as_str().into()),
            ("model", self.model.as_str().into()),
            ("index", self.index.into()),
            ("workflow_state", self.workflow_state.clone()),
        ])
    }

    /// Reads a result back from its record form.
    pub fn from_json(v: &Value) -> Option<CallResult> {
        let s = |k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_owned();
        Some(CallResult {
            answer: s("answer"),
            value: v.get("value").cloned().unwrap_or(Value::Null),
            outputs: recorded_outputs(v),
            response_text: s("response_text"),
            handle: TaskId(v.get("handle")?.as_u64()?),
            target: s("target"),
            kind: CallKind::parse(&s("kind")),
            model: s("model"),
            index: v.get("index").and_then(Value::as_u64).map(|i| i as usize),
            workflow_state: v.get("workflow_state").cloned().unwrap_or(Value::Null),
        })
    }
}

impl fmt::Display for CallResult {
    /// Writes the answer (`str(result)`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.answer)
    }
}

/// What a call passes to its target.
///
/// Build it from text, from one [`CallResult`] (its public text), from a JSON value, or
/// from `()` for the flow's own task. There is no conversion from a collection of results.
#[derive(Debug, Clone, PartialEq)]
pub enum CallInput {
    /// The flow's own task (the default input).
    Task,
    /// Text, passed as it is.
    Text(String),
    /// Plain data, passed as JSON (a tool takes a mapping of its arguments).
    Json(Value),
}

impl From<()> for CallInput {
    fn from((): ()) -> Self {
        CallInput::Task
    }
}

impl From<&str> for CallInput {
    fn from(s: &str) -> Self {
        CallInput::Text(s.to_owned())
    }
}

impl From<String> for CallInput {
    fn from(s: String) -> Self {
        CallInput::Text(s)
    }
}

impl From<&String> for CallInput {
    fn from(s: &String) -> Self {
        CallInput::Text(s.clone())
    }
}

impl From<&CallResult> for CallInput {
    fn from(r: &CallResult) -> Self {
        CallInput::Text(r.public_text())
    }
}

impl From<CallResult> for CallInput {
    fn from(r: CallResult) -> Self {
        CallInput::Text(r.public_text())
    }
}

impl From<Value> for CallInput {
    fn from(v: Value) -> Self {
        match v {
            Value::String(s) => CallInput::Text(s),
            v => CallInput::Json(v),
        }
    }
}

impl CallInput {
    /// Returns the input as the JSON value the child receives, with `task` for the default
    /// (read only then: a scope's task may be kept as text, parsed on first use).
    pub(crate) fn resolve(&self, task: &crate::scope_task::ScopeTask) -> Value {
        match self {
            CallInput::Task => crate::compact_json::copy(task.get()),
            CallInput::Text(s) => Value::String(s.clone()),
            CallInput::Json(v) => crate::compact_json::copy(v),
        }
    }
}

/// Returns the text an agent or subagent receives for `input`: text as is, anything else
/// as JSON.
pub fn input_text(input: &Value) -> String {
    match input {
        Value::String(s) => s.clone(),
        v => v.to_string(),
    }
}

/// Returns what [`FlowOutput::mapping`] makes the outputs of mapping `value`: its keys
/// other than `answer`, in the order that removing `answer` leaves.
fn mapping_outputs(value: &Value) -> Map<String, Value> {
    let mut outputs = value.as_object().map(crate::compact_json::copy_map).unwrap_or_default();
    outputs.remove("answer");
    outputs
}

/// Returns whether `outputs` are exactly the outputs of mapping `value`, keys in the same
/// order, found without copying either.
fn are_mapping_outputs(outputs: &Map<String, Value>, value: &Value) -> bool {
    let Value::Object(map) = value else { return false };
    // The key order `Map::remove` leaves, from a copy of the keys alone.
    let mut keys: Map<String, Value> = map.keys().map(|k| (k.clone(), Value::Null)).collect();
    keys.remove("answer");
    keys.len() == outputs.len()
        && keys.keys().zip(outputs).all(|(key, (name, v))| key == name && map.get(key) == Some(v))
}

/// Returns the outputs a record holds: its `outputs`, or those of its mapping `value` when
/// it leaves them out (see [`FlowOutput::to_json`]).
fn recorded_outputs(record: &Value) -> Map<String, Value> {
    match record.get("outputs") {
        Some(outputs) => outputs.as_object().map(crate::compact_json::copy_map).unwrap_or_default(),
        None => record.get("value").map(mapping_outputs).unwrap_or_default(),
    }
}

/// What a flow returns: an answer with outputs that travel with it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct FlowOutput {
    /// The answer as text.
    pub answer: String,
    /// The raw value (the whole mapping a flow returned, or its text).
    pub value: Value,
    /// The other keys, readable by a calling flow as outputs.
    pub outputs: Map<String, Value>,
    /// The typed `workflow_state`, if any.
    pub workflow_state: Value,
    /// The model the answer came from, if one.
    pub model: String,
}

impl FlowOutput {
    /// Returns the output of a flow that answers `text`.
    pub fn text(text: impl Into<String>) -> FlowOutput {
        let answer = text.into();
        FlowOutput { value: Value::String(answer.clone()), answer, ..FlowOutput::default() }
    }

    /// Returns the output of a flow that returns a mapping: its `answer` key is the text,
    /// the other keys travel as outputs.
    pub fn mapping(map: Map<String, Value>) -> FlowOutput {
        let answer = map.get("answer").map(crate::result::input_text).unwrap_or_default();
        let map = Value::Object(map);
        let outputs = mapping_outputs(&map);
        let workflow_state = outputs.get("workflow_state").cloned().unwrap_or(Value::Null);
        FlowOutput { answer, value: map, outputs, workflow_state, model: String::new() }
    }

    /// Returns the record form stored as a run's answer. The outputs of a mapping are the
    /// mapping's other keys: the record holds them once, in `value`.
    pub fn to_json(&self) -> Value {
        let mut record = object([
            ("answer", self.answer.as_str().into()),
            ("value", self.value.clone()),
            ("workflow_state", self.workflow_state.clone()),
            ("model", self.model.as_str().into()),
        ]);
        if !are_mapping_outputs(&self.outputs, &self.value)
            && let Value::Object(fields) = &mut record
        {
            fields.insert("outputs".into(), Value::Object(self.outputs.clone()));
        }
        record
    }

    /// Returns the record form, as [`to_json`](Self::to_json) does, moving the value into
    /// it instead of copying it when the value is a mapping whose other keys are the
    /// outputs (a large workflow's result is tens of megabytes). The value is then left
    /// out of this output until [`restore_value`](Self::restore_value) makes it again from
    /// the outputs, with the place of its `answer` key returned here.
    pub(crate) fn take_record(&mut self) -> (Value, Option<usize>) {
        let place = match &self.value {
            Value::Object(map)
                if map.get("answer").and_then(Value::as_str) == Some(self.answer.as_str())
                    && are_mapping_outputs(&self.outputs, &self.value) =>
            {
                map.keys().position(|k| k == "answer")
            }
            _ => None,
        };
        let Some(place) = place else { return (self.to_json(), None) };
        let record = object([
            ("answer", self.answer.as_str().into()),
            ("value", std::mem::take(&mut self.value)),
            ("workflow_state", self.workflow_state.clone()),
            ("model", self.model.as_str().into()),
        ]);
        (record, Some(place))
    }

    /// Makes the value [`take_record`](Self::take_record) moved out again: the outputs with
    /// the answer at `place`.
    pub(crate) fn restore_value(&mut self, place: usize) {
        // The outputs are the value with `answer` removed the way `Map::remove` removes it:
        // the last key took its place. Undone: that key goes back to the end, `answer` to
        // its place.
        // Room for the answer too: a map that grows past its room takes its table's.
        let mut map = Map::with_capacity(self.outputs.len() + 1);
        for (key, v) in &self.outputs {
            map.insert(key.clone(), crate::compact_json::copy(v));
        }
        if let Some(moved) = map.keys().nth(place).cloned()
            && let Some(v) = map.shift_remove(&moved)
        {
            map.insert(moved, v);
        }
        map.shift_insert(place, "answer".into(), Value::String(self.answer.clone()));
        self.value = Value::Object(map);
    }

    /// Reads an output back from its record form.
    pub fn from_json(v: &Value) -> FlowOutput {
        let s = |k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_owned();
        FlowOutput {
            answer: s("answer"),
            value: v.get("value").cloned().unwrap_or(Value::Null),
            outputs: recorded_outputs(v),
            workflow_state: v.get("workflow_state").cloned().unwrap_or(Value::Null),
            model: s("model"),
        }
    }
}

impl From<&str> for FlowOutput {
    fn from(s: &str) -> Self {
        FlowOutput::text(s)
    }
}

impl From<String> for FlowOutput {
    fn from(s: String) -> Self {
        FlowOutput::text(s)
    }
}

impl From<CallResult> for FlowOutput {
    /// A result returned as it is.
    fn from(r: CallResult) -> Self {
        FlowOutput {
            answer: r.answer,
            value: r.value,
            outputs: r.outputs,
            workflow_state: r.workflow_state,
            model: r.model,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The record forms of a call's result and of a flow's output, which the journal keeps
    /// and replays read back, are what `json!` wrote for them.
    #[test]
    fn record_forms_are_unchanged_and_read_back() {
        let mut outputs = Map::new();
        outputs.insert("results".into(), json!({"a": [1, 2]}));
        let result = CallResult {
            answer: "done".into(),
            value: json!({"x": 1.5}),
            outputs: outputs.clone(),
            response_text: "r".into(),
            handle: TaskId(7),
            target: "noop".into(),
            kind: CallKind::Tool,
            model: "m".into(),
            index: Some(3),
            workflow_state: json!({"steps": []}),
        };
        let expected = json!({
            "answer": "done", "value": {"x": 1.5}, "outputs": {"results": {"a": [1, 2]}},
            "response_text": "r", "handle": 7, "target": "noop", "kind": "tool", "model": "m",
            "index": 3, "workflow_state": {"steps": []},
        });
        assert_eq!(result.to_json().to_string(), expected.to_string());
        assert_eq!(CallResult::from_json(&result.to_json()), Some(result));

        // A mapping's outputs are its other keys: the record holds them once, in `value`.
        let output = FlowOutput::mapping(outputs);
        let expected = json!({
            "answer": "", "value": {"results": {"a": [1, 2]}}, "workflow_state": null,
            "model": "",
        });
        assert_eq!(output.to_json().to_string(), expected.to_string());
        let back = FlowOutput::from_json(&output.to_json());
        assert_eq!(format!("{back:?}"), format!("{output:?}"));
        // Outputs that are not the mapping's are kept.
        let mut other = output.clone();
        other.outputs.insert("extra".into(), json!(1));
        assert_eq!(other.to_json()["outputs"], json!({"results": {"a": [1, 2]}, "extra": 1}));
        assert_eq!(FlowOutput::from_json(&other.to_json()), other);
        // A flow's result called from another flow keeps its outputs: tools hand a task's
        // recorded result to agents as it is.
        let call = flow_call(output);
        assert_eq!(call.to_json()["outputs"], json!({"results": {"a": [1, 2]}}));
        assert_eq!(CallResult::from_json(&call.to_json()), Some(call));
    }

    /// Returns the result of a call of a flow that returned `output`.
    fn flow_call(output: FlowOutput) -> CallResult {
        CallResult {
            answer: output.answer,
            value: output.value,
            outputs: output.outputs,
            response_text: String::new(),
            handle: TaskId(3),
            target: "wf".into(),
            kind: CallKind::Flow,
            model: output.model,
            index: None,
            workflow_state: output.workflow_state,
        }
    }

    /// A mapping's output, whatever its keys (an `answer` among them or not, anywhere),
    /// reads back from its record exactly: values, and keys in the same order.
    #[test]
    fn a_mapping_output_reads_back_from_its_record() {
        use proptest::prelude::*;
        let keys = proptest::collection::vec(
            (prop_oneof!["[a-c]{1,2}", Just("answer".to_owned())], any::<i8>()),
            0..6,
        );
        proptest!(|(pairs in keys)| {
            let map: Map<String, Value> = pairs.into_iter().map(|(k, v)| (k, json!(v))).collect();
            let output = FlowOutput::mapping(map);
            let back = FlowOutput::from_json(&output.to_json());
            prop_assert_eq!(format!("{back:?}"), format!("{output:?}"));
            let call = flow_call(output);
            let back = CallResult::from_json(&call.to_json()).expect("reads back");
            prop_assert_eq!(format!("{back:?}"), format!("{call:?}"));
        });
    }

    /// Taking the record out of an output gives the record `to_json` gives, and restoring
    /// the value gives the output back, key order included; answers that are not text and
    /// outputs that are not a mapping's take the copying path.
    #[test]
    fn a_record_taken_out_of_an_output_is_its_record_and_the_value_comes_back() {
        use proptest::prelude::*;
        let keys = proptest::collection::vec(
            (prop_oneof!["[a-c]{1,2}", Just("answer".to_owned())], any::<i8>(), any::<bool>()),
            0..6,
        );
        proptest!(|(pairs in keys, text in any::<bool>())| {
            let map: Map<String, Value> = pairs
                .into_iter()
                .map(|(k, v, as_text)| {
                    let v = if as_text || (text && k == "answer") { json!(v.to_string()) } else { json!(v) };
                    (k, v)
                })
                .collect();
            for output in [FlowOutput::mapping(map.clone()), FlowOutput::text("plain")] {
                let mut taken = output.clone();
                let (record, place) = taken.take_record();
                prop_assert_eq!(&record, &output.to_json());
                if let Some(place) = place {
                    taken.restore_value(place);
                }
                prop_assert_eq!(format!("{taken:?}"), format!("{output:?}"));
            }
        });
    }
}
