//! A step of a workflow: who runs it, what it receives and which steps it waits on.
//!
//! [`Step`] is plain data with public fields; it is checked when it becomes part of a
//! [`Workflow`](crate::Workflow).

use serde::Serialize;
use serde_json::{Map, Value};

/// One step of a workflow, in the shape of its JSON form.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Step {
    /// The step's name: 1 to 64 lowercase letters, digits, `-` and `_`; `task` is reserved.
    pub id: String,
    /// Who runs the step: a subagent, `marketplace/id`, a flow id, a tool, or `self`.
    pub target: String,
    /// What the step receives: text or a JSON object, with `$task` and `$<step>` references.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub input: Option<Value>,
    /// The ids of the steps it waits on.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub after: Vec<String>,
    /// Instructions for a step without an input.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Options for a flow target.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub options: Option<Map<String, Value>>,
    /// The model the step runs on, as `account/model` or a model id.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
}

impl Step {
    /// Returns a step with only an id and a target.
    pub fn new(id: impl Into<String>, target: impl Into<String>) -> Step {
        Step {
            id: id.into(),
            target: target.into(),
            input: None,
            after: Vec::new(),
            description: None,
            options: None,
            model: None,
        }
    }

    /// Returns the step with `input` as its input.
    pub fn input(mut self, input: impl Into<Value>) -> Step {
        self.input = Some(input.into());
        self
    }

    /// Returns the step waiting on the steps `after`.
    pub fn after<I, S>(mut self, after: I) -> Step
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.after = after.into_iter().map(Into::into).collect();
        self
    }

    /// Returns the step with `description` as its instructions.
    pub fn description(mut self, description: impl Into<String>) -> Step {
        self.description = Some(description.into());
        self
    }

    /// Returns the step with `options` for its flow target.
    pub fn options(mut self, options: Map<String, Value>) -> Step {
        self.options = Some(options);
        self
    }

    /// Returns the step running on `model`.
    pub fn model(mut self, model: impl Into<String>) -> Step {
        self.model = Some(model.into());
        self
    }

    /// Returns the step's JSON form.
    pub fn to_json(&self) -> Value {
        let mut map = Map::new();
        map.insert("id".into(), Value::String(self.id.clone()));
        map.insert("target".into(), Value::String(self.target.clone()));
        if let Some(input) = &self.input {
            map.insert("input".into(), input.clone());
        }
        if !self.after.is_empty() {
            map.insert(
                "after".into(),
                Value::Array(self.after.iter().cloned().map(Value::String).collect()),
            );
        }
        if let Some(description) = &self.description {
            map.insert("description".into(), Value::String(description.clone()));
        }
        if let Some(options) = &self.options {
            map.insert("options".into(), Value::Object(options.clone()));
        }
        if let Some(model) = &self.model {
            map.insert("model".into(), Value::String(model.clone()));
        }
        Value::Object(map)
    }
}

/// Returns the name of a JSON value's kind, for error messages.
pub(crate) fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "text",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}
