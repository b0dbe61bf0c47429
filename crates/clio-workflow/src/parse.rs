//! Reading a workflow's JSON form into [`Step`]s, naming the step and field of the first
//! problem (unknown fields and wrong types are refused).

use serde_json::{Map, Value};

use crate::error::WorkflowError;
use crate::step::{Step, kind_of};

/// Reads the steps of a workflow: an object with `steps`, or a bare list of steps.
pub(crate) fn steps_from_value(value: Value) -> Result<Vec<Step>, WorkflowError> {
    let list = match value {
        Value::Array(list) => list,
        Value::Object(mut map) => {
            if let Some(field) = map.keys().find(|key| *key != "steps") {
                return Err(WorkflowError::UnknownWorkflowField { field: field.clone() });
            }
            match map.remove("steps") {
                Some(Value::Array(list)) => list,
                Some(other) => return Err(WorkflowError::NotAWorkflow { found: kind_of(&other) }),
                None => return Err(WorkflowError::NoSteps),
            }
        }
        other => return Err(WorkflowError::NotAWorkflow { found: kind_of(&other) }),
    };
    list.into_iter().enumerate().map(|(index, value)| step_from_value(index, value)).collect()
}

fn step_from_value(index: usize, value: Value) -> Result<Step, WorkflowError> {
    let Value::Object(mut map) = value else {
        return Err(WorkflowError::StepNotObject { index, found: kind_of(&value) });
    };
    let label = match map.get("id") {
        Some(Value::String(id)) => id.clone(),
        _ => format!("steps[{index}]"),
    };
    const FIELDS: [&str; 7] = ["id", "target", "input", "after", "description", "options", "model"];
    if let Some(field) = map.keys().find(|key| !FIELDS.contains(&key.as_str())) {
        return Err(WorkflowError::UnknownField { step: label, field: field.clone() });
    }
    let id = required_text(&mut map, &label, "id")?;
    let target = required_text(&mut map, &label, "target")?;
    let input = match take(&mut map, "input") {
        None => None,
        Some(value @ (Value::String(_) | Value::Object(_))) => Some(value),
        Some(other) => return Err(wrong(&label, "input", "text or a JSON object", &other)),
    };
    let after = match take(&mut map, "after") {
        None => Vec::new(),
        Some(Value::Array(items)) => items
            .into_iter()
            .map(|item| match item {
                Value::String(text) => Ok(text),
                other => Err(wrong(&label, "after", "a list of step ids", &other)),
            })
            .collect::<Result<_, _>>()?,
        Some(other) => return Err(wrong(&label, "after", "a list of step ids", &other)),
    };
    let description = optional_text(&mut map, &label, "description")?;
    let options = match take(&mut map, "options") {
        None => None,
        Some(Value::Object(options)) => Some(options),
        Some(other) => return Err(wrong(&label, "options", "a JSON object", &other)),
    };
    let model = optional_text(&mut map, &label, "model")?;
    Ok(Step { id, target, input, after, description, options, model })
}

/// Removes a field, treating `null` as absent.
fn take(map: &mut Map<String, Value>, field: &str) -> Option<Value> {
    map.remove(field).filter(|value| !value.is_null())
}

fn required_text(
    map: &mut Map<String, Value>,
    label: &str,
    field: &'static str,
) -> Result<String, WorkflowError> {
    optional_text(map, label, field)?
        .ok_or_else(|| WorkflowError::MissingField { step: label.to_owned(), field })
}

fn optional_text(
    map: &mut Map<String, Value>,
    label: &str,
    field: &'static str,
) -> Result<Option<String>, WorkflowError> {
    match take(map, field) {
        None => Ok(None),
        Some(Value::String(text)) => Ok(Some(text)),
        Some(other) => Err(wrong(label, field, "text", &other)),
    }
}

fn wrong(label: &str, field: &'static str, expected: &'static str, found: &Value) -> WorkflowError {
    WorkflowError::WrongType { step: label.to_owned(), field, expected, found: kind_of(found) }
}
