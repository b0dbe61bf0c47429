//! The `react` loop: system prompt, task and evidence, then model call, tool calls, model
//! call … until a final answer or `max_iters`. Each model call is a recorded step of the
//! worker's task and each tool call is a call (a task) of it, so a resumed loop replays
//! what it already has and pays only for what it has not.
//!
//! The model sees the tools the gate lets it see (`crate::gate`): a denied tool or one only
//! `run_code` scripts may call is not listed; a deferred tool is named in the built-in
//! `search_tools`' description only, until a `search_tools` call (a recorded step) loads
//! it for the rest of the loop. Tool calls are made as the agent's (`by_agent`), so their
//! permission, questions and hooks apply; a `PostToolUse` hook's `additional_context` is
//! appended to the tool result the model reads.
//!
//! A loop is an agent session: `SessionStart` hooks run before it (their context is a user
//! message before the task) and `SessionEnd` hooks after it ends with an answer, a refusal,
//! a stop or a failure — not when it is cut short (journal trouble, cancellation,
//! nondeterminism), since a resumed loop still ends later. `UserPromptSubmit` hooks see
//! the task first; `PostToolBatch` hooks see each turn's tool calls (name, id, whether it
//! succeeded). Every invocation is recorded under the loop's own identities
//! (`<scope>session`, `<scope>prompt`, `<scope>model:<n>`), so a resumed loop reads them.
//!
//! A subagent's structured outputs are finishing tools (the `structured` module); work the
//! loop starts with `run_flow` or `run_workflow` is delivered into its conversation when it
//! ends, at recorded turn boundaries (the `background` module).
//!
//! A conversation that would outgrow its model's context window is compacted before the
//! model call that would overflow it: `PreCompact` hooks run, the older turns are
//! summarised by the built-in flow `compact` (a recorded task), and the loop goes on from
//! the summary, the task and its recent turns (the `compact` module).
//!
//! [`ReactFlow`] is the built-in flow `react`: it runs this agent (`"self"`) on its task.

use std::collections::BTreeSet;
use std::sync::Arc;

mod background;
mod compact;
mod structured;

pub use compact::{COMPACT_FLOW, CompactFlow};

use clio_plugins::{DecisionKind, HookEventKind};
use serde_json::{Value, json};

use crate::ctx::Ctx;
use crate::error::FlowError;
use crate::flow::{Flow, FlowFuture};
use crate::gate::{self, Listing};
use crate::model::{
    CutOffPolicy, FinishReason, Message, ModelError, ModelRequest, ModelResponse, RetryNotice,
    RouterAllowlist, ToolSpec, observe_retries,
};
use crate::registry::{Tool, WorkerReply, WorkerRequest};
use crate::result::{CallInput, FlowOutput};
use crate::runtime::RunState;
use crate::team::{AgentEnv, RestrictedRouter, TeamError};

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

/// Returns the observer that records each retry of a model request of `agent`'s turn
/// `iteration` as a `model_retry` event of the run (the progress shows it). The events are
/// not commands: a replay, which never calls the model, has none to match.
fn retry_events(run: &Arc<RunState>, agent: &str, iteration: u64) -> crate::model::RetryObserver {
    let (journal, id, agent) = (run.rt.journal.clone(), run.run, agent.to_owned());
    Arc::new(move |notice: &RetryNotice| {
        let event = json!({
            "event": "model_retry",
            "agent": agent,
            "iteration": iteration,
            "provider": notice.provider,
            "url": notice.url,
            "attempt": notice.attempt,
            "error": notice.error,
            "wait_ms": u64::try_from(notice.wait.as_millis()).unwrap_or(u64::MAX),
        });
        let entry = clio_journal::NewEntry::new(clio_journal::EntryKind::Event, event);
        // Sent, not awaited: the write commits with the run's next ones.
        drop(journal.nonblocking().append(id, entry));
    })
}

/// What a react loop tells a model whose answer was cut off at its output-token limit.
const CONTINUE_AFTER_CUT_OFF: &str = "Your answer was cut off at the output-token limit. \
     Continue exactly where it stopped, without repeating what you wrote.";

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

/// Returns the refusal for `call`'s arguments when they are not a JSON object or do not
/// fit `schema` (the tool's, as the model was shown it); `None` when they may run.
fn invalid_arguments(call: &crate::model::ToolCall, schema: Option<&Value>) -> Option<FlowError> {
    let refuse = |problem: String| FlowError::CallRefused {
        handle: None,
        refusal: "arguments_invalid".into(),
        message: format!("the arguments of tool {} {problem}", call.name),
    };
    if !call.arguments.is_object() {
        let shown: String = match &call.arguments {
            Value::String(raw) => raw.chars().take(200).collect(),
            other => other.to_string(),
        };
        return Some(refuse(format!(
            "are not a JSON object: {shown}; call it again with its arguments as a JSON object"
        )));
    }
    let problems = crate::model::schema_problems(schema?, &call.arguments);
    if problems.is_empty() {
        return None;
    }
    Some(refuse(format!(
        "do not fit its schema: {}; call it again with arguments that do",
        problems.join("; ")
    )))
}

/// The tools a react loop shows its model: the ones listed in full, the deferred ones
/// (by name only, in `search_tools`' description) and which of those are loaded.
struct Tools {
    listed: Vec<ToolSpec>,
    deferred: Vec<ToolSpec>,
    loaded: BTreeSet<String>,
    search_is_builtin: bool,
    /// Every tool the loop was given, hidden ones included (the gate refuses those with
    /// their own reason); a name outside it is not the agent's to call.
    given: BTreeSet<String>,
}

impl Tools {
    fn of(tools: &[Tool], ctx: &Ctx) -> Tools {
        let (mut listed, mut deferred) = (Vec::new(), Vec::new());
        for t in tools {
            let spec = ToolSpec {
                name: t.name.clone(),
                description: t.description.clone(),
                parameters: t.schema.clone(),
            };
            match gate::listing(ctx, t) {
                Listing::Full => listed.push(spec),
                Listing::Deferred => deferred.push(spec),
                Listing::Hidden => {}
            }
        }
        let search_is_builtin = !tools.iter().any(|t| t.name == SEARCH_TOOLS);
        let given = tools.iter().map(|t| t.name.clone()).collect();
        Tools { listed, deferred, loaded: BTreeSet::new(), search_is_builtin, given }
    }

    fn specs(&self) -> Vec<ToolSpec> {
        let mut specs = self.listed.clone();
        specs.extend(self.deferred.iter().filter(|s| self.loaded.contains(&s.name)).cloned());
        let unloaded: Vec<&str> = self
            .deferred
            .iter()
            .filter(|s| !self.loaded.contains(&s.name))
            .map(|s| s.name.as_str())
            .collect();
        if self.search_is_builtin && !unloaded.is_empty() {
            specs.push(ToolSpec {
                name: SEARCH_TOOLS.into(),
                description: format!(
                    "Loads deferred tools so that you can call them, and returns their schemas. \
                     `query`: words of a tool's name or description, or `select:name,name`. \
                     Deferred tools: {}.",
                    unloaded.join(", ")
                ),
                parameters: json!({
                    "type": "object",
                    "properties": { "query": { "type": "string" } },
                    "required": ["query"],
                }),
            });
        }
        specs
    }

    fn is_search(&self, name: &str) -> bool {
        self.search_is_builtin && name == SEARCH_TOOLS
    }

    fn is_given(&self, name: &str) -> bool {
        self.given.contains(name)
    }

    /// Returns the argument schema of tool `name`, when the model was shown it.
    fn schema_of(&self, name: &str) -> Option<&Value> {
        self.listed.iter().chain(&self.deferred).find(|s| s.name == name).map(|s| &s.parameters)
    }

    fn is_unloaded(&self, name: &str) -> bool {
        self.deferred.iter().any(|s| s.name == name) && !self.loaded.contains(name)
    }

    /// Returns the names of the deferred tools that `query` finds.
    fn search(&self, query: &str) -> Vec<String> {
        let query = query.trim();
        if let Some(names) = query.strip_prefix("select:") {
            let wanted: Vec<&str> = names.split(',').map(str::trim).collect();
            return self
                .deferred
                .iter()
                .filter(|s| wanted.contains(&s.name.as_str()))
                .map(|s| s.name.clone())
                .collect();
        }
        let words: Vec<String> = query.split_whitespace().map(str::to_lowercase).collect();
        self.deferred
            .iter()
            .filter(|s| {
                let text = format!("{} {}", s.name, s.description).to_lowercase();
                words.is_empty() || words.iter().any(|w| text.contains(w.as_str()))
            })
            .map(|s| s.name.clone())
            .collect()
    }

    /// Loads the deferred tools named `found` and returns their schemas as the tool result.
    fn load(&mut self, found: &[String]) -> String {
        let mut out = Vec::new();
        for spec in self.deferred.iter().filter(|s| found.contains(&s.name)) {
            self.loaded.insert(spec.name.clone());
            out.push(json!({
                "name": spec.name,
                "description": spec.description,
                "input_schema": spec.parameters,
            }));
        }
        json!({ "tools": out }).to_string()
    }
}

/// Before a team subagent's model call: claims an iteration of its durable budget,
/// checkpoints `input`, and returns `models` held to its allowlist.
async fn team_turn(
    env: &AgentEnv,
    input: &[Message],
    models: crate::model::Models,
) -> Result<RestrictedRouter, FlowError> {
    let session = env.session().0.clone();
    let failed = |err: TeamError| FlowError::CallFailed {
        handle: None,
        message: format!("team session {session}: {err}"),
    };
    if !env.claim_iteration().await.map_err(failed)? {
        let why = env.stop_reason().await.map_err(failed)?;
        let why = why.map_or_else(|| "refused".to_owned(), |r| r.to_string());
        return Err(FlowError::CallStopped {
            handle: None,
            message: format!("team session {session} has no iteration left: {why}"),
        });
    }
    env.checkpoint(input).await.map_err(failed)?;
    env.restrict_router(models).await.map_err(failed)
}

/// The built-in tool that loads deferred tools.
pub const SEARCH_TOOLS: &str = "search_tools";

/// Runs the react loop for a worker: an agent session between `SessionStart` and
/// `SessionEnd`.
pub(crate) async fn run_worker(req: WorkerRequest) -> Result<WorkerReply, FlowError> {
    let ctx = req.ctx.clone();
    let session = format!("{}session", ctx.scope.prefix);
    let about = json!({ "agent": req.id, "model": req.model });
    let start = gate::Subject {
        prompt: Some(req.text.clone()),
        payload: about.clone(),
        ..gate::Subject::default()
    };
    let started = gate::hooks(&ctx, &session, &start, HookEventKind::SESSION_START, None).await?;
    let result = converse(&req, started.additional_context).await;
    let ended = match &result {
        Ok(reply) => Some(gate::Subject {
            payload: json!({ "agent": req.id, "model": reply.model, "outcome": "answered" }),
            answer: Some(Value::String(reply.answer.clone())),
            ..gate::Subject::default()
        }),
        Err(err) if ends_session(err) => Some(gate::Subject {
            payload: json!({ "agent": req.id, "model": req.model, "outcome": err.reason(),
                             "error": err.to_json() }),
            ..gate::Subject::default()
        }),
        Err(_) => None,
    };
    if let Some(end) = ended {
        let fired = gate::hooks(&ctx, &session, &end, HookEventKind::SESSION_END, None).await;
        // The loop's own error is the one to report.
        if let (Ok(_), Err(err)) = (&result, fired) {
            return Err(err);
        }
    }
    result
}

/// Says whether a loop that failed with `err` has ended: a refusal, a stop (`max_iters`,
/// a provider failure) or a failure are its outcome, while journal trouble,
/// nondeterminism, cancellation or an interruption cut it short, and a resumed loop may
/// still end otherwise.
fn ends_session(err: &FlowError) -> bool {
    matches!(
        err,
        FlowError::CallRefused { .. }
            | FlowError::CallStopped { .. }
            | FlowError::CallFailed { .. }
            | FlowError::FlowLimitExceeded { .. }
    )
}

/// Passes the worker's task through the `UserPromptSubmit` hooks, which may deny or
/// defer it, ask the person, answer it in the model's place, or replace it; returns the
/// prompt to send (with the hooks' `additional_context` joined to it), or the answer a
/// hook synthesized.
async fn submit_prompt(req: &WorkerRequest, about: &Value) -> Result<Submitted, FlowError> {
    let ctx = &req.ctx;
    let subject = gate::Subject {
        prompt: Some(req.text.clone()),
        payload: about.clone(),
        ..gate::Subject::default()
    };
    let identity = format!("{}prompt", ctx.scope.prefix);
    let verdict =
        gate::hooks(ctx, &identity, &subject, HookEventKind::USER_PROMPT_SUBMIT, None).await?;
    let hook = verdict.decided_by.clone().unwrap_or_else(|| "a hook".to_owned());
    let reason = verdict.reason.clone().unwrap_or_default();
    let refused = |refusal: &str, what: &str| FlowError::CallRefused {
        handle: None,
        refusal: refusal.to_owned(),
        message: format!("the prompt to {} was {what} by hook {hook}: {reason}", req.id),
    };
    let mut prompt = match &verdict.input {
        Some(Value::String(text)) => text.clone(),
        Some(other) => other.to_string(),
        None => req.text.clone(),
    };
    match verdict.decision {
        DecisionKind::Deny => return Err(refused("hook_denied", "denied")),
        DecisionKind::Defer => return Err(refused("hook_deferred", "deferred")),
        DecisionKind::Synthesize => {
            let text = match verdict.result {
                Some(Value::String(text)) => text,
                Some(other) => other.to_string(),
                None => String::new(),
            };
            return Ok(Submitted::Answered(text));
        }
        DecisionKind::Ask => {
            let question = format!("send this prompt to {}?\n\n{prompt}", req.id);
            let why = if reason.is_empty() {
                format!("hook {hook} asks whether the prompt may be sent")
            } else {
                reason.clone()
            };
            let site = std::panic::Location::caller();
            let yes = ctx
                .ask_with(site, &question, crate::AskSchema::Bool, &[], &why, "prompt_submit")
                .await?;
            if !yes.as_bool().unwrap_or(false) {
                return Err(FlowError::CallRefused {
                    handle: None,
                    refusal: "permission_denied".into(),
                    message: format!("the person did not allow the prompt to {}", req.id),
                });
            }
        }
        DecisionKind::Modify | DecisionKind::Allow => {}
    }
    if !verdict.additional_context.is_empty() {
        prompt.push_str("\n\n");
        prompt.push_str(&verdict.additional_context);
    }
    Ok(Submitted::Prompt(prompt))
}

/// What `UserPromptSubmit` let through.
enum Submitted {
    /// The prompt to send the model.
    Prompt(String),
    /// A hook's answer in the model's place.
    Answered(String),
}

/// The loop itself, after `SessionStart` (whose hooks gave `session_context`).
async fn converse(req: &WorkerRequest, session_context: String) -> Result<WorkerReply, FlowError> {
    let ctx = req.ctx.clone();
    let models = ctx.config().models.clone();
    let about = json!({ "agent": req.id, "model": req.model });
    let mut task = match submit_prompt(req, &about).await? {
        Submitted::Prompt(prompt) => prompt,
        Submitted::Answered(text) => return Ok(WorkerReply::text(text)),
    };
    if !req.evidence.is_empty() {
        task.push_str("\n\nEvidence:\n");
        task.push_str(&Value::Array(req.evidence.clone()).to_string());
    }
    // A team subagent starts from the context it inherited; its own system prompt leads
    // unless that context has one.
    let mut messages = req.history.clone();
    let has_system = messages.iter().any(|m| matches!(m, Message::System { .. }));
    if !req.prompt.is_empty() && !has_system {
        messages.insert(0, Message::system(req.prompt.clone()));
    }
    if !session_context.is_empty() {
        messages.push(Message::user(session_context));
    }
    messages.push(Message::user(task));
    let mut compaction = compact::Compaction::new(messages.len() - 1);
    let mut tools = Tools::of(&req.tools, &ctx);
    // Only tools that read the conversation that called them need a copy of it.
    let contextual = req.tools.iter().any(|t| t.reads_conversation);
    let (mut input_tokens, mut output_tokens) = (0u64, 0u64);
    let mut response_text = String::new();
    let mut stop_continued = false;
    // The text of answers cut off at the output-token limit, awaiting their continuation.
    let mut cut_off = String::new();
    // Context the hooks of the last turn (`AfterModel`, `PostToolBatch`) gave the next
    // model request.
    let mut carried: Vec<String> = Vec::new();
    let mut background = background::Background::default();
    for iteration in 0..req.max_iters {
        for text in background.deliver(&ctx, &format!("background:{iteration}"), false).await? {
            messages.push(Message::user(text));
        }
        let mut specs = tools.specs();
        specs.extend(structured::specs(&req.structured_outputs));
        compact::maybe_compact(&ctx, req, &mut messages, &mut compaction, &specs, iteration)
            .await?;
        let mut request = ModelRequest::new(req.model.clone(), req.id.clone(), messages.clone());
        request.tools = specs;
        request.prior_turns = compaction.prior_turns;
        if !req.structured_outputs.is_empty() {
            // Only a call of one of its outputs ends the loop.
            request.tool_choice = Some("required".to_owned());
        }
        request.effort.clone_from(&req.effort);
        for context in carried.drain(..) {
            request.messages.push(Message::user(context));
        }
        let turn = format!("{}model:{iteration}", ctx.scope.prefix);
        let about = json!({ "agent": req.id, "model": req.model, "iteration": iteration });
        let before = gate::Subject {
            prompt: messages.iter().rev().find_map(|m| match m {
                Message::User { content, .. } => Some(content.clone()),
                _ => None,
            }),
            payload: about.clone(),
            ..gate::Subject::default()
        };
        let verdict = gate::hooks(&ctx, &turn, &before, HookEventKind::BEFORE_MODEL, None).await?;
        if verdict.decision == DecisionKind::Deny {
            return Err(FlowError::CallRefused {
                handle: None,
                refusal: "hook_denied".into(),
                message: format!(
                    "a model call of {} was denied: {}",
                    req.id,
                    verdict.reason.unwrap_or_default()
                ),
            });
        }
        if !verdict.additional_context.is_empty() {
            request.messages.push(Message::user(verdict.additional_context));
        }
        let requires = req.requires;
        let step_models = models.clone();
        // Only a team subagent's step checkpoints its input.
        let seat = req.team.clone();
        let input = if seat.is_some() { messages.clone() } else { Vec::new() };
        let run = Arc::clone(&ctx.run);
        let response: ModelResponse = ctx
            .step(&format!("model:{iteration}"), || async move {
                let observer = retry_events(&run, &request.agent, iteration);
                let answer = observe_retries(observer, async {
                    let Some(env) = seat else {
                        return Ok::<_, FlowError>(
                            step_models
                                .complete(&request, &requires, &RouterAllowlist::unrestricted())
                                .await,
                        );
                    };
                    let router = team_turn(&env, &input, step_models).await?;
                    Ok(router.complete(&request, &requires).await)
                })
                .await?;
                answer.map_err(|err| {
                    // A provider that stayed unreachable past its retries' deadline leaves
                    // the run interrupted, for `runs resume` once it is back, rather than
                    // failing it for good.
                    if err.is_unreachable() {
                        run.suspend(format!(
                            "the model provider stayed unreachable: {err}; the run is \
                             interrupted, resume it when the provider is back"
                        ));
                    }
                    model_error(err)
                })
            })
            .await?;
        let after = gate::Subject {
            payload: about.clone(),
            answer: serde_json::to_value(&response).ok(),
            ..gate::Subject::default()
        };
        let observed = gate::hooks(&ctx, &turn, &after, HookEventKind::AFTER_MODEL, None).await?;
        if !observed.additional_context.is_empty() {
            carried.push(observed.additional_context);
        }
        input_tokens += response.usage.input_tokens;
        output_tokens += response.usage.output_tokens;
        if !response.text.is_empty() {
            if !response_text.is_empty() {
                response_text.push('\n');
            }
            response_text.push_str(&response.text);
        }
        if response.finish == FinishReason::Length {
            ctx.record_event(json!({
                "event": "model_cut_off",
                "agent": req.id,
                "model": response.model,
                "iteration": iteration,
                "tool_calls": response.tool_calls.len(),
            }))
            .await?;
            if response.tool_calls.is_empty() {
                let policy =
                    models.catalog().get(&response.model).map(|m| m.on_cut_off).unwrap_or_default();
                if policy == CutOffPolicy::Fail {
                    return Err(FlowError::CallFailed {
                        handle: None,
                        message: format!(
                            "output_cut_off: the answer of {} from {} reached its output-token limit",
                            req.id, response.model
                        ),
                    });
                }
                cut_off.push_str(&response.text);
                messages.push(Message::from_response(&response));
                messages.push(Message::user(CONTINUE_AFTER_CUT_OFF));
                continue;
            }
        }
        if response.tool_calls.is_empty() && !req.structured_outputs.is_empty() {
            // Only a structured output ends this loop: the model is reminded, and the
            // reminder's turn counts against max_iters.
            messages.push(Message::from_response(&response));
            messages.push(Message::user(structured::reminder(&req.structured_outputs)));
            continue;
        }
        if response.tool_calls.is_empty() && !background.is_empty() {
            // Work it started still runs: the loop does not end before its result arrives.
            messages.push(Message::from_response(&response));
            let key = format!("background:{iteration}:end");
            for text in background.deliver(&ctx, &key, true).await? {
                messages.push(Message::user(text));
            }
            continue;
        }
        if response.tool_calls.is_empty() {
            let stop = gate::Subject {
                payload: about,
                answer: Some(Value::String(response.text.clone())),
                ..gate::Subject::default()
            };
            let verdict = gate::hooks(&ctx, &turn, &stop, HookEventKind::STOP, None).await?;
            // A Stop hook's deny asks for one more turn, once per loop and within max_iters.
            if verdict.decision == DecisionKind::Deny && !stop_continued {
                stop_continued = true;
                messages.push(Message::from_response(&response));
                let reason = verdict.reason.unwrap_or_else(|| "continue".to_owned());
                messages.push(Message::user(reason));
                continue;
            }
            // An answer cut off at the token limit and continued is its parts joined.
            let answer = std::mem::take(&mut cut_off) + &response.text;
            return Ok(WorkerReply {
                answer: answer.clone(),
                value: Value::String(answer),
                response_text,
                model: response.model,
                input_tokens,
                output_tokens,
                ..WorkerReply::default()
            });
        }
        messages.push(Message::from_response(&response));
        // What a contextual tool (a team tool) sees of this conversation: the last complete
        // model input, without this turn's own tool calls.
        let conversation = contextual.then(|| Arc::new(crate::team::complete_input(&messages)));
        let mut batch = Vec::new();
        let mut wait_background = false;
        for (n, call) in response.tool_calls.iter().enumerate() {
            let (content, ok) = if let Some(schema) = req.structured_outputs.get(&call.name) {
                match structured::refusal(&call.name, schema, &call.arguments) {
                    Some(refused) => (refused, false),
                    None if background.is_empty() => {
                        // The loop ends here; calls after this one in the turn are not made.
                        let mut outputs = serde_json::Map::new();
                        outputs
                            .insert("structured_output".into(), Value::String(call.name.clone()));
                        return Ok(WorkerReply {
                            answer: call.arguments.to_string(),
                            value: call.arguments.clone(),
                            outputs,
                            response_text,
                            model: response.model,
                            input_tokens,
                            output_tokens,
                            ..WorkerReply::default()
                        });
                    }
                    None => {
                        wait_background = true;
                        let text = format!(
                            "Not accepted yet: background work you started is still running;                              its result follows. Call {} again once you have taken it into account.",
                            call.name
                        );
                        (text, false)
                    }
                }
            } else if tools.is_search(&call.name) {
                let query =
                    call.arguments.get("query").and_then(Value::as_str).unwrap_or("").to_owned();
                let found = tools.search(&query);
                // Recorded, so a resumed loop loads exactly the tools this one loaded.
                let found: Vec<String> = ctx
                    .step(&format!("search_tools:{iteration}:{n}"), || async move { Ok(found) })
                    .await?;
                (tools.load(&found), true)
            } else if !tools.is_given(&call.name) {
                // Without this, a model could name any flow, subagent or tool of the
                // registry and the call would resolve to it.
                let err = FlowError::CallRefused {
                    handle: None,
                    refusal: "tool_not_offered".into(),
                    message: format!("tool {} is not one of this agent's tools", call.name),
                };
                (json!({ "error": err.to_json() }).to_string(), false)
            } else if tools.is_unloaded(&call.name) {
                let err = FlowError::CallRefused {
                    handle: None,
                    refusal: "tool_deferred".into(),
                    message: format!(
                        "tool {} is deferred: load it with search_tools first",
                        call.name
                    ),
                };
                (json!({ "error": err.to_json() }).to_string(), false)
            } else if let Some(err) = invalid_arguments(call, tools.schema_of(&call.name)) {
                // Arguments that are not a JSON object (text a model cut short, or left
                // unparseable) or do not fit the tool's schema never reach the tool: the
                // model is told each problem, and can send them again.
                (json!({ "error": err.to_json() }).to_string(), false)
            } else {
                let mut call =
                    ctx.call(call.name.clone(), CallInput::Json(call.arguments.clone())).by_agent();
                if let Some(conversation) = &conversation {
                    call = call.conversation(Arc::clone(conversation));
                }
                match call.await {
                    Ok(r) => {
                        background.note(&r.target, &r.value);
                        let mut text = r.public_text();
                        if let Some(extra) =
                            r.outputs.get("additional_context").and_then(Value::as_str)
                        {
                            text.push_str("\n\n");
                            text.push_str(extra);
                        }
                        (text, true)
                    }
                    Err(err) => (json!({ "error": err.to_json() }).to_string(), false),
                }
            };
            batch.push(json!({ "id": call.id, "name": call.name, "ok": ok }));
            messages.push(Message::tool_result(call.id.clone(), content));
        }
        let mut payload = about;
        payload["tools"] = Value::Array(batch);
        let done = gate::Subject { payload, ..gate::Subject::default() };
        let observed =
            gate::hooks(&ctx, &turn, &done, HookEventKind::POST_TOOL_BATCH, None).await?;
        if !observed.additional_context.is_empty() {
            carried.push(observed.additional_context);
        }
        if wait_background {
            let key = format!("background:{iteration}:end");
            for text in background.deliver(&ctx, &key, true).await? {
                messages.push(Message::user(text));
            }
        }
    }
    Err(FlowError::CallStopped {
        handle: None,
        message: format!("{} reached max_iters ({}) without a final answer", req.id, req.max_iters),
    })
}
