//! [`Command`]: every ctx operation as data. The journal records each command's JSON form
//! with its result, and [`crate::Ctx`] is a thin layer that builds commands; a later line
//! protocol can let flows in other languages send the same commands (SPEC §7, "Looking
//! ahead").

use serde_json::{Map, Value};

/// What kind of answer a question takes (`ctx.ask`'s `schema`), spelt in the journal as
/// `text`, `bool` or `options`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AskSchema {
    /// Any text.
    #[default]
    Text,
    /// Yes or no.
    Bool,
    /// One of the question's options.
    Options,
}

impl AskSchema {
    /// Returns the journal's spelling: `text`, `bool` or `options`.
    pub fn as_str(self) -> &'static str {
        match self {
            AskSchema::Text => "text",
            AskSchema::Bool => "bool",
            AskSchema::Options => "options",
        }
    }

    /// Reads the journal's spelling; anything else is `Text`, as questions recorded
    /// with another schema were always answered with text.
    pub fn parse(text: &str) -> AskSchema {
        match text {
            "bool" => AskSchema::Bool,
            "options" => AskSchema::Options,
            _ => AskSchema::Text,
        }
    }
}

impl std::fmt::Display for AskSchema {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl PartialEq<str> for AskSchema {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for AskSchema {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

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
        /// What kind of answer it takes.
        schema: AskSchema,
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
        self.clone().into_json()
    }

    /// Returns the command as the journal records it, moving its values in.
    pub fn into_json(self) -> Value {
        match self {
            Command::Call { target, input, evidence, key, model, label, wait } => object([
                ("command", "call".into()),
                ("target", target),
                ("input", input),
                ("evidence", evidence.into()),
                ("key", key.into()),
                ("model", model.into()),
                ("label", label.into()),
                ("wait", wait.into()),
            ]),
            Command::Step { name } => object([("command", "step".into()), ("name", name.into())]),
            Command::Ask { question, schema, options, reason } => object([
                ("command", "ask".into()),
                ("question", question.into()),
                ("schema", schema.as_str().into()),
                ("options", options.into()),
                ("reason", reason.into()),
            ]),
            Command::Event { event } => object([("command", "event".into()), ("event", event)]),
            Command::Publish { view } => object([("command", "publish".into()), ("view", view)]),
        }
    }
}

/// Returns a JSON object of `fields` in their order.
///
/// Unlike `json!`, which serialises each `Value` it is given into a new one, this moves the
/// values in: the records of large views and inputs are built on every call.
pub(crate) fn object<const N: usize>(fields: [(&str, Value); N]) -> Value {
    let mut map = Map::with_capacity(N);
    for (key, value) in fields {
        map.insert(key.to_owned(), value);
    }
    Value::Object(map)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Identities digest a command's record form, so it must not change: each variant's
    /// record is exactly what `json!` wrote for it before records were built by moving.
    #[test]
    fn the_record_form_is_what_json_wrote() {
        let target = json!({"id": "campaign", "options": {"max_cycles": 5, "tags": ["a", 1.5]}});
        let input = json!({"task": "é ✓", "n": [1, 2, {"deep": null}]});
        let cases = [
            (
                Command::Call {
                    target: target.clone(),
                    input: input.clone(),
                    evidence: vec![3, 9],
                    key: "k".into(),
                    model: "m/x".into(),
                    label: "l".into(),
                    wait: true,
                },
                json!({
                    "command": "call", "target": target, "input": input, "evidence": [3, 9],
                    "key": "k", "model": "m/x", "label": "l", "wait": true,
                }),
            ),
            (Command::Step { name: "noop".into() }, json!({"command": "step", "name": "noop"})),
            (
                Command::Ask {
                    question: "go?".into(),
                    schema: AskSchema::Options,
                    options: vec!["yes".into(), "no".into()],
                    reason: "why".into(),
                },
                json!({
                    "command": "ask", "question": "go?", "schema": "options",
                    "options": ["yes", "no"], "reason": "why",
                }),
            ),
            (Command::Event { event: input.clone() }, json!({"command": "event", "event": input})),
            (
                Command::Publish { view: target.clone() },
                json!({"command": "publish", "view": target}),
            ),
        ];
        for (command, expected) in cases {
            let text = serde_json::to_string(&expected).unwrap();
            assert_eq!(serde_json::to_string(&command.to_json()).unwrap(), text);
            assert_eq!(serde_json::to_string(&command.into_json()).unwrap(), text);
        }
        assert_eq!(
            serde_json::to_string(&object([("b", json!(1)), ("a", json!([true]))])).unwrap(),
            r#"{"b":1,"a":[true]}"#
        );
    }
}
