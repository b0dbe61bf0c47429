//! The built-in `council` flow: the same question to several members — each optionally
//! on its own model — then one synthesised answer.
//!
//! Options: `members` (call targets), `models` (models, used in turn; with more models than
//! members the members are used in turn, so `members = ["self"]` with three models asks the
//! agent itself on three models), and `synthesizer` (the target that writes the one answer,
//! `"self"` by default). As the seeds' `ThreeModels` has it, `models` alone makes the
//! members: one member per model, each this agent (`"self"`) on its own model. A council
//! with neither members nor models stalls with `council_invalid`. Members are asked with one `gather`, so a
//! member that fails does not stop the others; the council fails only when every member
//! does. The answer's outputs hold each member's answer (or error) and model.

use serde_json::{Value, json};

use crate::ctx::Ctx;
use crate::error::FlowError;
use crate::flow::{Flow, FlowFuture};
use crate::options::{OptionSpec, OptionType};
use crate::result::{CallInput, FlowOutput, input_text};

/// The built-in `council` flow.
#[derive(Debug, Clone, Copy, Default)]
pub struct CouncilFlow;

fn strings(value: Option<&Value>) -> Vec<String> {
    value
        .and_then(Value::as_array)
        .map(|items| items.iter().filter_map(Value::as_str).map(str::to_owned).collect())
        .unwrap_or_default()
}

impl Flow for CouncilFlow {
    fn id(&self) -> &str {
        "council"
    }

    fn description(&self) -> &str {
        "Asks several members the same question, optionally each on its own model, and \
         synthesises one answer. Options: members, models, synthesizer."
    }

    fn shape(&self) -> &str {
        "council ::= gather(member*) synthesizer"
    }

    fn options(&self) -> Vec<OptionSpec> {
        let list = || OptionType::List(Box::new(OptionType::Str));
        vec![
            OptionSpec::new("members", list(), json!([])),
            OptionSpec::new("models", list(), json!([])),
            OptionSpec::new("synthesizer", OptionType::Str, json!("self")),
        ]
    }

    fn forward<'a>(&'a self, task: Value, ctx: Ctx) -> FlowFuture<'a> {
        Box::pin(async move {
            let mut members = strings(ctx.options().get("members"));
            let models: Vec<String> = strings(ctx.options().get("models"))
                .into_iter()
                .map(|m| m.trim().to_owned())
                .filter(|m| !m.is_empty())
                .collect();
            // The seeds: "its models option puts each member on its own model" — with no
            // members named, each model is one member, this agent on that model.
            if members.is_empty() && !models.is_empty() {
                members = vec!["self".to_owned(); models.len()];
            }
            let synthesizer = ctx
                .options()
                .get("synthesizer")
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
                .unwrap_or("self")
                .to_owned();
            if members.is_empty() {
                return Err(FlowError::stall(
                    "council_invalid",
                    "the council has no members: pass the `members` option, such as [\"self\"], \
                     or the `models` option, one member per model",
                ));
            }
            let seats = members.len().max(models.len());
            let question = input_text(&task);
            let mut calls = Vec::with_capacity(seats);
            let mut seating = Vec::with_capacity(seats);
            for seat in 0..seats {
                let member = members[seat % members.len()].clone();
                let model = if models.is_empty() {
                    String::new()
                } else {
                    models[seat % models.len()].clone()
                };
                let mut call = ctx
                    .call(member.clone(), CallInput::from(task.clone()))
                    .label(format!("council seat {}", seat + 1));
                if !model.is_empty() {
                    call = call.model(model.clone());
                }
                calls.push(call);
                seating.push((member, model));
            }
            let results = ctx.gather(calls).settled().await;

            let mut answers = Vec::new();
            let mut records = Vec::new();
            let mut handles = Vec::new();
            let mut first_error = None;
            for ((member, model), res) in seating.iter().zip(results) {
                match res {
                    Some(Ok(result)) => {
                        let used = if result.model.is_empty() {
                            model.clone()
                        } else {
                            result.model.clone()
                        };
                        answers.push(format!("### {member} ({used})\n\n{}", result.answer.trim()));
                        records.push(
                            json!({"member": member, "model": used, "answer": result.answer}),
                        );
                        handles.push(result.handle);
                    }
                    Some(Err(err)) => {
                        records.push(
                            json!({"member": member, "model": model, "error": err.to_json()}),
                        );
                        first_error.get_or_insert(err);
                    }
                    None => {
                        records.push(json!({"member": member, "model": model, "error": "not run"}));
                    }
                }
            }
            if answers.is_empty() {
                return Err(first_error.unwrap_or_else(|| {
                    FlowError::stall("council_empty", "no member of the council answered")
                }));
            }
            let brief = format!(
                "Question:\n{question}\n\nThe council's answers:\n\n{}\n\nWrite one answer that \
                 synthesises them: keep what they agree on, and say where they differ.",
                answers.join("\n\n")
            );
            let synthesis =
                ctx.call(synthesizer, brief).evidence(handles).label("council synthesis").await?;
            let mut output = FlowOutput::text(synthesis.answer.clone());
            output.model = synthesis.model.clone();
            output.outputs.insert("members".to_owned(), Value::Array(records));
            Ok(output)
        })
    }
}
