//! The `react` loop: system prompt, task and evidence, then model call, tool calls, model
//! call … until a final answer or `max_iters`. Each model call is a recorded step of the
//! worker's task and each tool call is a call (a task) of it, so a resumed loop replays
//! what it already has and pays only for what it has not.
//!
//! [`ReactFlow`] is the built-in flow `react`: it runs this agent (`"self"`) on its task.

use serde_json::{Value, json};

use crate::ctx::Ctx;
use crate::error::FlowError;
use crate::flow::{Flow, FlowFuture};
use crate::model::{Message, ModelError, ModelRequest, ModelResponse, RouterAllowlist, ToolSpec};
use crate::registry::{WorkerReply, WorkerRequest};
use crate::result::{CallInput, FlowOutput};

/// The built-in `react` flow: this agent's own loop on the task.
#[derive(Debug, Clone, Copy, Default)]
pub struct ReactFlow;

impl Flow for ReactFlow {
    fn id(&self) -> &str {
        "react"
    }

    fn description(&self) -> &str {
        "This agent works out the steps itself: model, tools, model, until a final answer."
    }

    fn forward<'a>(&'a self, task: Value, ctx: Ctx) -> FlowFuture<'a> {
        Box::pin(async move {
            let res = ctx.call("self", CallInput::from(task)).await?;
            Ok(FlowOutput::from(res))
        })
    }
}

fn model_error(err: ModelError) -> FlowError {
    match err.reason() {
        "model_requirement_unmet"
        | "model_not_allowed"
        | "model_unknown"
        | "model_ambiguous"
        | "no_model_chosen" => FlowError::CallRefused {
            handle: None,
            refusal: err.reason().to_owned(),
            message: err.to_string(),
        },
        _ if err.is_provider_failure() => {
            FlowError::CallStopped { handle: None, message: err.to_string() }
        }
        _ => FlowError::CallFailed { handle: None, message: err.to_string() },
    }
}

/// Runs the react loop for a worker.
pub(crate) async fn run_worker(req: WorkerRequest) -> Result<WorkerReply, FlowError> {
    let ctx = req.ctx.clone();
    let models = ctx.run.rt.config.models.clone();
    let mut task = req.text.clone();
    if !req.evidence.is_empty() {
        task.push_str("\n\nEvidence:\n");
        task.push_str(&Value::Array(req.evidence.clone()).to_string());
    }
    let mut messages = Vec::new();
    if !req.prompt.is_empty() {
        messages.push(Message::system(req.prompt.clone()));
    }
    messages.push(Message::user(task));
    let tools: Vec<ToolSpec> = req
        .tools
        .iter()
        .map(|t| ToolSpec {
            name: t.name.clone(),
            description: t.description.clone(),
            parameters: t.schema.clone(),
        })
        .collect();
    let (mut input_tokens, mut output_tokens) = (0u64, 0u64);
    let mut response_text = String::new();
    for iteration in 0..req.max_iters {
        let mut request = ModelRequest::new(req.model.clone(), req.id.clone(), messages.clone());
        request.tools = tools.clone();
        let requires = req.requires;
        let models = models.clone();
        let response: ModelResponse = ctx
            .step(&format!("model:{iteration}"), || async move {
                models
                    .complete(&request, &requires, &RouterAllowlist::unrestricted())
                    .await
                    .map_err(model_error)
            })
            .await?;
        input_tokens += response.usage.input_tokens;
        output_tokens += response.usage.output_tokens;
        if !response.text.is_empty() {
            if !response_text.is_empty() {
                response_text.push('\n');
            }
            response_text.push_str(&response.text);
        }
        if response.tool_calls.is_empty() {
            return Ok(WorkerReply {
                answer: response.text.clone(),
                value: Value::String(response.text),
                response_text,
                model: response.model,
                input_tokens,
                output_tokens,
                ..WorkerReply::default()
            });
        }
        messages.push(Message::from_response(&response));
        for call in &response.tool_calls {
            let content =
                match ctx.call(call.name.clone(), CallInput::Json(call.arguments.clone())).await {
                    Ok(r) => r.public_text(),
                    Err(err) => json!({ "error": err.to_json() }).to_string(),
                };
            messages.push(Message::tool_result(call.id.clone(), content));
        }
    }
    Err(FlowError::CallStopped {
        handle: None,
        message: format!("{} reached max_iters ({}) without a final answer", req.id, req.max_iters),
    })
}
