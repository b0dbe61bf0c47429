//! Conversation compaction: a react loop whose conversation would exceed its model's
//! context window (more than [`RuntimeConfig::compact_at`](crate::RuntimeConfig) of the
//! model's `context_tokens`, by the deterministic estimate
//! [`ModelRequest::estimated_input_tokens`]) has its older turns summarised before the
//! next model call.
//!
//! 1. The turns to summarise are chosen: everything after the task up to the most recent
//!    whole turns that fit in half the limit (a turn is never split from its tool
//!    results). The system prompt and the task stay as they are. The summary may take a
//!    quarter of the limit (its request's `max_output_tokens`), and nothing is compacted
//!    when the turns to summarise are no longer than that.
//! 2. `PreCompact` hooks run first (`<scope>compact:<iteration>`), seeing the agent, its
//!    model, the iteration, the tokens before and the window; they observe, and their
//!    `additional_context` is passed to the summariser as instructions.
//! 3. The summary is written by the built-in flow `compact` ([`CompactFlow`]), called as a
//!    task of the loop (keyed `compact:<iteration>`): one model call, recorded as a step of
//!    that task, so it is in the run's tree and a resume or a replay reads it back.
//! 4. The conversation becomes: the system prompt, the summary (which replaces an earlier
//!    one), the task, then the kept turns. Later requests carry how many model turns were
//!    summarised away (`ModelRequest::prior_turns`).
//! 5. A `compacted` event records the tokens before and after, the window and the summary's
//!    task.
//!
//! Every input of the decision is recorded (the model's answers, the tools' results, the
//! summary), so a replay rebuilds the same conversation, compaction included.

use clio_plugins::HookEventKind;
use serde_json::{Value, json};

use crate::ctx::Ctx;
use crate::error::FlowError;
use crate::flow::{Flow, FlowFuture};
use crate::gate;
use crate::model::{Message, ModelRequest, RouterAllowlist, ToolSpec};
use crate::registry::WorkerRequest;
use crate::result::{CallInput, FlowOutput};

/// The id of the built-in flow that writes a compaction's summary.
pub const COMPACT_FLOW: &str = "compact";

/// What the summary message of a compacted conversation starts with.
pub(crate) const SUMMARY_HEADING: &str = "Summary of the earlier part of this conversation (compacted to fit the model's context window):";

/// The instructions of the summariser.
const SUMMARISER: &str = "You compact a conversation between an agent, its tools and the \
     person. Write a concise summary of the transcript you are given that lets the agent \
     carry on its task without it: what was asked, what was done (tools called and what \
     they returned that still matters), what was found or decided, and what is left to do. \
     Keep names, numbers, paths and identifiers exactly. Answer with the summary only.";

/// Where a loop's conversation stands, for its compactions.
#[derive(Debug, Default)]
pub(super) struct Compaction {
    /// The index of the task message.
    pub(super) task_at: usize,
    /// The index of the summary message, once there is one (just before the task).
    summary_at: Option<usize>,
    /// The model turns summarised away so far.
    pub(super) prior_turns: u64,
}

impl Compaction {
    pub(super) fn new(task_at: usize) -> Compaction {
        Compaction { task_at, summary_at: None, prior_turns: 0 }
    }
}

fn tokens_of(model: &str, agent: &str, messages: &[Message], tools: &[ToolSpec]) -> u64 {
    let mut probe = ModelRequest::new(model, agent, messages.to_vec());
    probe.tools = tools.to_vec();
    probe.estimated_input_tokens()
}

/// Returns the index the kept turns start at: the earliest start of a whole turn (a
/// message that is not a tool result) after the task whose messages to the end fit in
/// `budget` tokens, and at least the last turn; `None` when nothing before it is left to
/// summarise.
fn cut_point(messages: &[Message], first: usize, budget: u64, model: &str) -> Option<usize> {
    let mut cut = None;
    for at in (first..messages.len()).rev() {
        if matches!(messages[at], Message::Tool { .. }) {
            continue;
        }
        if cut.is_some() && tokens_of(model, "", &messages[at..], &[]) > budget {
            break;
        }
        cut = Some(at);
    }
    cut.filter(|&c| c > first)
}

/// Renders `messages` as the transcript the summariser reads.
fn transcript(messages: &[Message]) -> String {
    let mut out = String::new();
    for message in messages {
        match message {
            Message::System { content } => out.push_str(&format!("[system]\n{content}\n\n")),
            Message::User { content, .. } => out.push_str(&format!("[user]\n{content}\n\n")),
            Message::Assistant { content, tool_calls } => {
                out.push_str("[assistant]\n");
                if !content.is_empty() {
                    out.push_str(content);
                    out.push('\n');
                }
                for call in tool_calls {
                    out.push_str(&format!("(calls {} with {})\n", call.name, call.arguments));
                }
                out.push('\n');
            }
            Message::Tool { tool_call_id, content } => {
                out.push_str(&format!("[tool result {tool_call_id}]\n{content}\n\n"));
            }
        }
    }
    out
}

/// Compacts `messages` when they would fill more than the configured share of the model's
/// context window (see the module's documentation); does nothing otherwise.
pub(super) async fn maybe_compact(
    ctx: &Ctx,
    req: &WorkerRequest,
    messages: &mut Vec<Message>,
    state: &mut Compaction,
    tools: &[ToolSpec],
    iteration: u64,
) -> Result<(), FlowError> {
    let config = ctx.config();
    let window =
        config.models.catalog().get(&req.model).map(|m| m.capabilities.context_tokens).unwrap_or(0);
    let share =
        if config.compact_at > 0.0 && config.compact_at <= 1.0 { config.compact_at } else { 0.8 };
    if window == 0 {
        return Ok(());
    }
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss, clippy::cast_precision_loss)]
    let limit = ((window as f64) * share) as u64;
    let before = tokens_of(&req.model, &req.id, messages, tools);
    if before <= limit {
        return Ok(());
    }
    let first = state.task_at + 1;
    let Some(cut) = cut_point(messages, first, limit / 2, &req.model) else {
        // Nothing older than the last turn: nothing to summarise.
        return Ok(());
    };
    let summarised = &messages[first..cut];
    // The summary may be at most a quarter of the limit: what it replaces must be more,
    // or compacting would not shrink the conversation.
    let summary_tokens = (limit / 4).max(64);
    if tokens_of(&req.model, &req.id, summarised, &[]) <= summary_tokens {
        return Ok(());
    }
    let turns = summarised.iter().filter(|m| matches!(m, Message::Assistant { .. })).count();
    let identity = format!("{}compact:{iteration}", ctx.scope.prefix);
    let about = json!({
        "agent": req.id,
        "model": req.model,
        "iteration": iteration,
        "trigger": "auto",
        "tokens_before": before,
        "context_tokens": window,
        "messages": summarised.len(),
    });
    let subject = gate::Subject { payload: about, ..gate::Subject::default() };
    let verdict = gate::hooks(ctx, &identity, &subject, HookEventKind::PRE_COMPACT, None).await?;
    // An earlier summary is summarised again with the turns that followed it.
    let mut text = String::new();
    if let Some(at) = state.summary_at {
        text.push_str(&transcript(&messages[at..=at]));
    }
    text.push_str(&transcript(summarised));
    let input = json!({
        "agent": req.id,
        "model": req.model,
        "transcript": text,
        "instructions": verdict.additional_context,
        "max_tokens": summary_tokens,
    });
    let mut call = ctx
        .call(crate::flow::selection(COMPACT_FLOW, json!({})), CallInput::Json(input))
        .key(format!("compact:{iteration}"))
        .label(format!("compaction before turn {}", iteration + 1));
    if !req.model.is_empty() {
        call = call.model(req.model.clone());
    }
    let summary = call.await?;
    let head_end = state.summary_at.unwrap_or(state.task_at);
    let mut compacted: Vec<Message> = messages[..head_end].to_vec();
    compacted.push(Message::user(format!("{SUMMARY_HEADING}\n\n{}", summary.answer.trim())));
    compacted.push(messages[state.task_at].clone());
    compacted.extend_from_slice(&messages[cut..]);
    let messages_before = messages.len();
    *messages = compacted;
    state.summary_at = Some(head_end);
    state.task_at = head_end + 1;
    state.prior_turns += u64::try_from(turns).unwrap_or(u64::MAX);
    let after = tokens_of(&req.model, &req.id, messages, tools);
    ctx.record_event(json!({
        "event": "compacted",
        "agent": req.id,
        "model": req.model,
        "iteration": iteration,
        "tokens_before": before,
        "tokens_after": after,
        "context_tokens": window,
        "messages_before": messages_before,
        "messages_after": messages.len(),
        "turns_summarised": turns,
        "summary_task": summary.handle.0,
    }))
    .await?;
    Ok(())
}

/// The built-in flow `compact`: writes the summary of a conversation's older turns with
/// one model call, recorded as a step of its task. Its input is `{agent, model,
/// transcript, instructions}`; its answer is the summary.
#[derive(Debug, Clone, Copy, Default)]
pub struct CompactFlow;

impl Flow for CompactFlow {
    fn id(&self) -> &str {
        COMPACT_FLOW
    }

    fn description(&self) -> &str {
        "Summarises the older turns of a react loop's conversation when it outgrows its \
         model's context window (the loop calls it itself). Input: {transcript, \
         instructions, model, max_tokens}."
    }

    fn forward<'a>(&'a self, task: Value, ctx: Ctx) -> FlowFuture<'a> {
        Box::pin(async move {
            let field =
                |name: &str| task.get(name).and_then(Value::as_str).unwrap_or("").to_owned();
            let (model, transcript, instructions) =
                (field("model"), field("transcript"), field("instructions"));
            let model = if model.is_empty() { ctx.config().model.clone() } else { model };
            let mut brief = format!("The transcript to summarise:\n\n{transcript}");
            if !instructions.trim().is_empty() {
                brief.push_str(&format!("\n\nInstructions for the summary:\n{instructions}"));
            }
            let mut request = ModelRequest::new(
                model,
                COMPACT_FLOW,
                vec![Message::system(SUMMARISER), Message::user(brief)],
            );
            // The summary's length is bounded, so that it is shorter than what it replaces.
            request.max_output_tokens = task.get("max_tokens").and_then(Value::as_u64).unwrap_or(0);
            let models = ctx.config().models.clone();
            let response = ctx
                .step("summary", || async move {
                    models
                        .complete(
                            &request,
                            &clio_spec::Requires::default(),
                            &RouterAllowlist::unrestricted(),
                        )
                        .await
                        .map_err(super::model_error)
                })
                .await?;
            let mut output = FlowOutput::text(response.text.clone());
            output.model = response.model.clone();
            output.outputs.insert("usage".into(), json!(response.usage));
            Ok(output)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cut_keeps_whole_turns_and_leaves_something_to_summarise() {
        let call =
            crate::model::ToolCall { id: "c1".into(), name: "read".into(), arguments: json!({}) };
        let assistant = Message::Assistant { content: String::new(), tool_calls: vec![call] };
        let result = Message::tool_result("c1".to_owned(), "x".repeat(400));
        let messages = vec![
            Message::system("s"),
            Message::user("task"),
            assistant.clone(),
            result.clone(),
            assistant.clone(),
            result.clone(),
            assistant,
            result,
        ];
        // Room for one turn: the kept part starts at the last assistant message.
        assert_eq!(cut_point(&messages, 2, 120, "m"), Some(6));
        // Room for everything: nothing older is left to summarise.
        assert_eq!(cut_point(&messages, 2, 100_000, "m"), None);
        // No room even for the last turn: it is kept all the same.
        assert_eq!(cut_point(&messages, 2, 1, "m"), Some(6));
    }
}
