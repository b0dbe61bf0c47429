//! [`Command`]: every ctx operation as data. The journal records each command's JSON form
//! with its result, and [`crate::Ctx`] is a thin layer that builds commands; a later line
//! protocol can let flows in other languages send the same commands (SPEC §7, "Looking
//! ahead").

use serde_json::{Value, json};

/// One operation a flow asks of the runtime.
#[derive(Debug, Clone, PartialEq)]
pub enum Command {
    /// `ctx.call` / `ctx.start`: run `target` on `input`.
    Call {
        /// The target as recorded (a name or `{id, options}`).
        target: Value,
        /// The input the child receives.
        input: Value,
        /// Handles of earlier calls the child may read.
        evidence: Vec<u64>,
        /// The stable key, if any.
        key: String,
        /// The model asked for, if any.
        model: String,
        /// The child's label, if any.
        label: String,
        /// Whether the caller waits for the result (`call`) or only the handle (`start`).
        wait: bool,
    },
    /// `ctx.step`: run code once and record its result.
    Step {
        /// What the step is, for people.
        name: String,
    },
    /// `ctx.ask`: ask the person.
    Ask {
        /// The question.
        question: String,
        /// `text`, `bool` or `options`.
        schema: String,
        /// The options, lowercase.
        options: Vec<String>,
        /// Why it is asked.
        reason: String,
    },
    /// `ctx.record_event`.
    Event {
        /// The event, a mapping.
        event: Value,
    },
    /// `ctx.publish`.
    Publish {
        /// The new live view.
        view: Value,
    },
}

impl Command {
    /// Returns the command's name: `call`, `step`, `ask`, `event` or `publish`.
    pub fn name(&self) -> &'static str {
        match self {
            Command::Call { .. } => "call",
            Command::Step { .. } => "step",
            Command::Ask { .. } => "ask",
            Command::Event { .. } => "event",
            Command::Publish { .. } => "publish",
        }
    }

    /// Returns the command as the journal records it.
    pub fn to_json(&self) -> Value {
        match self {
            Command::Call { target, input, evidence, key, model, label, wait } => json!({
                "command": "call", "target": target, "input": input, "evidence": evidence,
                "key": key, "model": model, "label": label, "wait": wait,
            }),
            Command::Step { name } => json!({ "command": "step", "name": name }),
            Command::Ask { question, schema, options, reason } => json!({
                "command": "ask", "question": question, "schema": schema,
                "options": options, "reason": reason,
            }),
            Command::Event { event } => json!({ "command": "event", "event": event }),
            Command::Publish { view } => json!({ "command": "publish", "view": view }),
        }
    }
}
