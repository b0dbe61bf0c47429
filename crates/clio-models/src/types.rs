//! The plain data of one model call: messages, tool specs, the request, and the response
//! with its token usage.
//!
//! These types are serialisable because the runtime journals responses: a replayed call
//! returns the recorded [`ModelResponse`] (and so the same [`Usage`]) instead of calling
//! the model again, which keeps budgets exact across restarts.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One message of a chat, tagged by its role.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "snake_case", deny_unknown_fields)]
pub enum Message {
    /// Instructions for the model: the agent's or subagent's prompt.
    System {
        /// The text of the instructions.
        content: String,
    },
    /// What the person (or the calling flow) says: a task, evidence, a follow-up.
    User {
        /// The text of the message.
        content: String,
        /// Images for a vision model, as URLs (`https://…` or
        /// `data:image/png;base64,…`); a request with images needs a model with `vision`.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        images: Vec<String>,
    },
    /// A turn of the model: text, tool calls, or both.
    Assistant {
        /// The text the model wrote; may be empty when it only calls tools.
        #[serde(default)]
        content: String,
        /// The tools the model asked to call, in order.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<ToolCall>,
    },
    /// The result of one tool call, answering the call with the same id.
    Tool {
        /// The id of the [`ToolCall`] this result answers.
        tool_call_id: String,
        /// The tool's result as text.
        content: String,
    },
}

impl Message {
    /// Returns a system message with `content`.
    pub fn system(content: impl Into<String>) -> Message {
        Message::System { content: content.into() }
    }

    /// Returns a user message with `content`.
    pub fn user(content: impl Into<String>) -> Message {
        Message::User { content: content.into(), images: Vec::new() }
    }

    /// Returns a user message with `content` and `images` (URLs or data URIs).
    pub fn user_with_images(content: impl Into<String>, images: Vec<String>) -> Message {
        Message::User { content: content.into(), images }
    }

    /// Returns an assistant message with `content` and no tool calls.
    pub fn assistant(content: impl Into<String>) -> Message {
        Message::Assistant { content: content.into(), tool_calls: Vec::new() }
    }

    /// Returns the assistant message that a `response` stands for, to append to the chat
    /// before the tool results.
    pub fn from_response(response: &ModelResponse) -> Message {
        Message::Assistant {
            content: response.text.clone(),
            tool_calls: response.tool_calls.clone(),
        }
    }

    /// Returns a tool-result message answering the call `tool_call_id`.
    pub fn tool_result(tool_call_id: impl Into<String>, content: impl Into<String>) -> Message {
        Message::Tool { tool_call_id: tool_call_id.into(), content: content.into() }
    }

    /// Returns the text of the message (for an assistant turn, its text without the
    /// tool calls).
    pub fn content(&self) -> &str {
        match self {
            Message::System { content }
            | Message::User { content, .. }
            | Message::Assistant { content, .. }
            | Message::Tool { content, .. } => content,
        }
    }

    /// Returns the role's name as chat-completion APIs spell it (`system`, `user`,
    /// `assistant`, `tool`).
    pub fn role(&self) -> &'static str {
        match self {
            Message::System { .. } => "system",
            Message::User { .. } => "user",
            Message::Assistant { .. } => "assistant",
            Message::Tool { .. } => "tool",
        }
    }
}

/// A tool call the model asked for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolCall {
    /// The call's id, echoed by the tool-result message that answers it.
    pub id: String,
    /// The name of the tool.
    pub name: String,
    /// The arguments as JSON.
    ///
    /// When a model sends arguments that are not valid JSON, they are kept as a JSON
    /// string holding the raw text, so that the tool (or the react loop) can report the
    /// problem back to the model instead of the call failing.
    #[serde(default)]
    pub arguments: Value,
}

/// A tool offered to the model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolSpec {
    /// The tool's name, as the model will call it.
    pub name: String,
    /// What the tool does, written for the model.
    #[serde(default)]
    pub description: String,
    /// The JSON schema of the tool's arguments (an `object` schema).
    #[serde(default = "empty_object_schema")]
    pub parameters: Value,
}

fn empty_object_schema() -> Value {
    serde_json::json!({ "type": "object", "properties": {} })
}

/// One request to a model.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ModelRequest {
    /// The model, as `account/model` or a catalog id.
    pub model: String,
    /// The id of the agent or subagent making the request.
    ///
    /// The scripted provider matches its scripts on it; HTTP providers do not send it.
    pub agent: String,
    /// The chat so far, oldest first.
    pub messages: Vec<Message>,
    /// The tools the model may call.
    pub tools: Vec<ToolSpec>,
    /// The most tokens the answer may have; 0 leaves it to the provider.
    pub max_output_tokens: u64,
    /// The sampling temperature; `None` takes the model's (catalog), else the provider's.
    pub temperature: Option<f64>,
    /// The sampling seed, for providers that honour one; `None` takes the model's.
    pub seed: Option<u64>,
    /// Whether the model must call a tool: `"required"` when only a tool call can end the
    /// turn (a subagent with structured outputs), `"auto"` or `"none"`; `None` sends none.
    pub tool_choice: Option<String>,
    /// The reasoning effort (`low`, `medium`, `high`), from the child's `Prefers`; empty
    /// leaves it to the provider.
    pub effort: String,
    /// The model's turns of this conversation that a compaction summarised away (their
    /// assistant messages are no longer in `messages`): a react loop's turn is this plus
    /// [`ModelRequest::assistant_turns`]. HTTP providers do not send it.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub prior_turns: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl ModelRequest {
    /// Returns a request to `model` on behalf of `agent` with `messages` and no tools.
    pub fn new(
        model: impl Into<String>,
        agent: impl Into<String>,
        messages: Vec<Message>,
    ) -> ModelRequest {
        ModelRequest { model: model.into(), agent: agent.into(), messages, ..Default::default() }
    }

    /// Returns the text of the last user message, or `""` when there is none.
    ///
    /// In a react loop this is the task: tool results are `tool` messages, so the last
    /// user message stays the same across the loop's turns.
    pub fn last_user_message(&self) -> &str {
        self.messages
            .iter()
            .rev()
            .find_map(|m| match m {
                Message::User { content, .. } => Some(content.as_str()),
                _ => None,
            })
            .unwrap_or("")
    }

    /// Returns true when a message of the chat carries an image.
    pub fn has_images(&self) -> bool {
        self.messages
            .iter()
            .any(|m| matches!(m, Message::User { images, .. } if !images.is_empty()))
    }

    /// Returns how many assistant turns the chat already holds.
    pub fn assistant_turns(&self) -> usize {
        self.messages.iter().filter(|m| matches!(m, Message::Assistant { .. })).count()
    }

    /// Returns the model's turn this request asks for, counting from 0: the turns a
    /// compaction summarised away ([`ModelRequest::prior_turns`]) and the assistant
    /// messages the chat holds.
    pub fn turn(&self) -> usize {
        usize::try_from(self.prior_turns)
            .unwrap_or(usize::MAX)
            .saturating_add(self.assistant_turns())
    }

    /// Returns the deterministic estimate of this request's input tokens that
    /// [`Usage::estimate`] charges: one token per four characters of its messages and tool
    /// specs, and 85 per image. A react loop compacts its conversation on it.
    pub fn estimated_input_tokens(&self) -> u64 {
        Usage::estimate(self, "", &[]).input_tokens
    }
}

/// Why the model stopped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FinishReason {
    /// The model finished its answer.
    Stop,
    /// The model asked for tool calls.
    ToolCalls,
    /// The answer reached the output-token limit.
    Length,
    /// The provider filtered the answer.
    ContentFilter,
    /// Any other reason, as the provider named it.
    Other(String),
}

impl FinishReason {
    /// Returns the reason for a provider's `finish_reason` text.
    pub fn from_provider(text: &str) -> FinishReason {
        match text {
            "stop" | "eos" | "end_turn" => FinishReason::Stop,
            "tool_calls" | "function_call" | "tool_use" => FinishReason::ToolCalls,
            "length" | "max_tokens" => FinishReason::Length,
            "content_filter" => FinishReason::ContentFilter,
            other => FinishReason::Other(other.to_owned()),
        }
    }
}

/// The tokens one model call consumed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Usage {
    /// Tokens of the request (prompt, chat, tool specs).
    pub input_tokens: u64,
    /// Tokens of the answer.
    pub output_tokens: u64,
}

impl Usage {
    /// Returns input plus output tokens, what `budget_tokens` counts.
    pub fn total(&self) -> u64 {
        self.input_tokens.saturating_add(self.output_tokens)
    }

    /// Returns a deterministic estimate for a call whose provider reports no usage: one
    /// token per four characters (rounded up) of the request's messages and tool specs,
    /// plus 85 per image, and of the answer's text and tool calls.
    pub fn estimate(request: &ModelRequest, text: &str, tool_calls: &[ToolCall]) -> Usage {
        fn tokens(chars: usize) -> u64 {
            u64::try_from(chars.div_ceil(4)).unwrap_or(u64::MAX)
        }
        let mut input = 0usize;
        let mut images = 0u64;
        for message in &request.messages {
            input = input.saturating_add(message.content().chars().count());
            match message {
                Message::Assistant { tool_calls, .. } => {
                    input = input.saturating_add(calls_chars(tool_calls));
                }
                Message::User { images: list, .. } => {
                    images = images.saturating_add(u64::try_from(list.len()).unwrap_or(u64::MAX));
                }
                _ => {}
            }
        }
        for tool in &request.tools {
            input = input
                .saturating_add(tool.name.len())
                .saturating_add(tool.description.chars().count())
                .saturating_add(tool.parameters.to_string().len());
        }
        let output = text.chars().count().saturating_add(calls_chars(tool_calls));
        Usage {
            input_tokens: tokens(input).saturating_add(images.saturating_mul(IMAGE_TOKENS)),
            output_tokens: tokens(output),
        }
    }
}

/// The tokens an image counts for in an estimate (what one low-detail image costs on
/// OpenAI's API).
const IMAGE_TOKENS: u64 = 85;

fn calls_chars(calls: &[ToolCall]) -> usize {
    calls.iter().map(|c| c.name.len().saturating_add(c.arguments.to_string().len())).sum()
}

/// The answer of one model call: what the runtime journals.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelResponse {
    /// The model that answered, as `account/model`.
    pub model: String,
    /// The provider that served it.
    pub provider: String,
    /// The text of the answer; may be empty when the model only calls tools.
    pub text: String,
    /// The tools the model asked to call, in order.
    #[serde(default)]
    pub tool_calls: Vec<ToolCall>,
    /// Why the model stopped.
    pub finish: FinishReason,
    /// The tokens the call consumed.
    pub usage: Usage,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_serialise_tagged_by_role() {
        let m = Message::tool_result("call_1", "42");
        let json = serde_json::to_string(&m).unwrap();
        assert_eq!(json, r#"{"role":"tool","tool_call_id":"call_1","content":"42"}"#);
        let back: Message = serde_json::from_str(&json).unwrap();
        assert_eq!(back, m);
        assert_eq!(back.role(), "tool");
    }

    #[test]
    fn response_round_trips_through_json() {
        let r = ModelResponse {
            model: "local/qwen".into(),
            provider: "ollama".into(),
            text: String::new(),
            tool_calls: vec![ToolCall {
                id: "c1".into(),
                name: "search".into(),
                arguments: serde_json::json!({"q": "x"}),
            }],
            finish: FinishReason::Other("weird".into()),
            usage: Usage { input_tokens: 10, output_tokens: 3 },
        };
        let back: ModelResponse =
            serde_json::from_str(&serde_json::to_string(&r).unwrap()).unwrap();
        assert_eq!(back, r);
        assert_eq!(back.usage.total(), 13);
    }

    #[test]
    fn last_user_message_skips_tool_results() {
        let mut req = ModelRequest::new(
            "m",
            "a",
            vec![Message::system("be brief"), Message::user("first"), Message::user("task")],
        );
        req.messages.push(Message::assistant("calling"));
        req.messages.push(Message::tool_result("c", "result"));
        assert_eq!(req.last_user_message(), "task");
        assert_eq!(req.assistant_turns(), 1);
    }

    #[test]
    fn estimate_is_deterministic_and_rounds_up() {
        let req = ModelRequest::new("m", "a", vec![Message::user("abcde")]);
        let u = Usage::estimate(&req, "abc", &[]);
        assert_eq!(u, Usage { input_tokens: 2, output_tokens: 1 });
    }
}
