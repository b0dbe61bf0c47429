//! A subagent's structured outputs in its react loop: each is offered as a finishing tool
//! whose parameters are its schema; a call whose arguments validate ends the loop with
//! those arguments as the answer (their JSON), and the output's name in the reply's
//! `outputs.structured_output`. Arguments that do not validate go back to the model as a
//! tool error listing every validation error, so it can call again; a text answer gets a
//! reminder to call one of them. Validation is `clio_plugins::validate_schema` (the
//! subset `plugin check` accepts).

use serde_json::{Map, Value, json};

use crate::error::FlowError;
use crate::model::ToolSpec;

/// Returns the tool specs offering `outputs` (name → schema) to the model.
pub(super) fn specs(outputs: &Map<String, Value>) -> Vec<ToolSpec> {
    outputs
        .iter()
        .map(|(name, schema)| ToolSpec {
            name: name.clone(),
            description: format!(
                "Finish with your answer as the structured output `{name}`: call this with \
                 arguments that match its schema. The call ends your work."
            ),
            parameters: schema.clone(),
        })
        .collect()
}

/// Returns the tool result refusing `arguments` of output `name`, which break `schema`, or
/// `None` when they validate.
pub(super) fn refusal(name: &str, schema: &Value, arguments: &Value) -> Option<String> {
    let errors = clio_plugins::validate_schema(schema, arguments);
    if errors.is_empty() {
        return None;
    }
    let err = FlowError::CallRefused {
        handle: None,
        refusal: "structured_output_invalid".into(),
        message: format!(
            "the arguments of {name} do not match its schema: {}; call {name} again with arguments that do",
            errors.join("; ")
        ),
    };
    Some(json!({ "error": err.to_json() }).to_string())
}

/// Returns the reminder a text answer gets while structured outputs are declared.
pub(super) fn reminder(outputs: &Map<String, Value>) -> String {
    let names: Vec<&str> = outputs.keys().map(String::as_str).collect();
    format!(
        "Your answer must be a call of one of your structured outputs ({}), with arguments \
         that match its schema; a text answer does not end your work.",
        names.join(", ")
    )
}
