//! [`OpenAiProvider`]: chat completions with tool calling over HTTP
//! (`POST {base_url}/chat/completions`), the API that llama.cpp's server, Ollama, vLLM
//! and hosted services share.
//!
//! Each attempt has a timeout; 408, 429 and 5xx answers, connection errors and timeouts
//! are retried with jittered exponential backoff until a deadline (minutes by default),
//! waiting what a `Retry-After` header asks for (capped); each retry is told to the
//! caller's observer ([`observe_retries`]). Errors name the provider, the URL, the
//! status and the start of the body. The provider reads no environment variable (not
//! even the proxy ones): the key and the proxy are values in [`OpenAiConfig`].

use std::fmt;
use std::time::Duration;

use serde::Deserialize;
use serde_json::{Value, json};

use crate::error::excerpt;
use crate::stream::Assembler;
use crate::{
    FinishReason, Message, ModelError, ModelFuture, ModelInfo, ModelProvider, ModelRequest,
    ModelResponse, ToolCall, Usage,
};

/// How many characters of a response body an error keeps.
const BODY_EXCERPT: usize = 500;

/// When and how often a failed request is tried again.
///
/// A failed attempt that is worth retrying (408, 429, 5xx, a connection error, a timeout)
/// is tried again after a backoff that doubles from `initial_backoff` up to
/// `max_backoff`, with a random part (jitter, up to a quarter of the wait) so that many
/// clients do not come back at the same instant, until `max_attempts` attempts were made
/// or the next wait would end past `deadline` from the first attempt. A server's
/// `Retry-After` replaces the backoff (capped at `max_retry_after`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// The most attempts in all, the first included; at least 1 is made.
    pub max_attempts: u32,
    /// The wait before the second attempt; it doubles for each further attempt.
    pub initial_backoff: Duration,
    /// The longest wait between two attempts.
    pub max_backoff: Duration,
    /// The longest wait a `Retry-After` header may ask for; longer asks are cut to it.
    pub max_retry_after: Duration,
    /// How long after the first attempt retries may go on: an outage shorter than this
    /// costs only time.
    pub deadline: Duration,
}

impl Default for RetryPolicy {
    /// Up to 10 minutes of retries, waits from 0.5 s doubling to 30 s.
    fn default() -> RetryPolicy {
        RetryPolicy {
            max_attempts: 100,
            initial_backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(30),
            max_retry_after: Duration::from_secs(60),
            deadline: Duration::from_secs(600),
        }
    }
}

impl RetryPolicy {
    /// Returns the wait after failed attempt number `attempt` (from 1), given the
    /// server's `retry_after` if it sent one; without jitter.
    pub fn wait(&self, attempt: u32, retry_after: Option<Duration>) -> Duration {
        match retry_after {
            Some(asked) => asked.min(self.max_retry_after),
            None => {
                let factor = 1u32.checked_shl(attempt.saturating_sub(1)).unwrap_or(u32::MAX);
                self.initial_backoff.saturating_mul(factor).min(self.max_backoff)
            }
        }
    }

    /// Returns [`wait`](Self::wait) plus a random part of up to a quarter of it (none
    /// when the server asked for a time).
    pub fn jittered_wait(&self, attempt: u32, retry_after: Option<Duration>) -> Duration {
        let wait = self.wait(attempt, retry_after);
        if retry_after.is_some() {
            return wait;
        }
        let quarter = u64::try_from(wait.as_millis() / 4).unwrap_or(u64::MAX);
        if quarter == 0 {
            return wait;
        }
        wait + Duration::from_millis(random_u64() % (quarter + 1))
    }
}

/// A random number from the standard library's per-process hash keys (no dependency, and
/// no clock: replayed code never sees it, as retries happen inside a recorded step).
fn random_u64() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    std::collections::hash_map::RandomState::new().build_hasher().finish()
}

/// One retry, as the caller's observer (see [`observe_retries`]) is told of it.
#[derive(Debug, Clone, PartialEq)]
pub struct RetryNotice {
    /// The provider.
    pub provider: String,
    /// The URL the attempt went to.
    pub url: String,
    /// The attempt that failed (from 1).
    pub attempt: u32,
    /// Why it failed.
    pub error: String,
    /// The wait before the next attempt.
    pub wait: Duration,
}

/// Receives each [`RetryNotice`] of the requests made inside [`observe_retries`].
pub type RetryObserver = std::sync::Arc<dyn Fn(&RetryNotice) + Send + Sync>;

tokio::task_local! {
    static RETRY_OBSERVER: RetryObserver;
}

/// Runs `work` with `observer` told of every retry a provider makes inside it (the
/// runtime records each as an event a person sees in the progress).
pub async fn observe_retries<F: std::future::Future>(
    observer: RetryObserver,
    work: F,
) -> F::Output {
    RETRY_OBSERVER.scope(observer, work).await
}

fn notify_retry(notice: &RetryNotice) {
    let _ = RETRY_OBSERVER.try_with(|observer| observer(notice));
}

/// The settings of one OpenAI-compatible endpoint.
#[derive(Clone, PartialEq)]
pub struct OpenAiConfig {
    /// The provider's name, as the catalog's `provider` field names it.
    pub name: String,
    /// The API root, including the version path: `http://127.0.0.1:8080/v1` (llama.cpp),
    /// `http://127.0.0.1:11434/v1` (Ollama), `http://127.0.0.1:8000/v1` (vLLM).
    /// `/chat/completions` is appended unless the URL already ends with it.
    pub base_url: String,
    /// The API key sent as a bearer token; `None` sends none (local servers).
    pub api_key: Option<String>,
    /// The longest the server may take to start answering: to send its headers and, when
    /// streaming, its first chunk (a whole non-streamed answer must come within it).
    pub timeout: Duration,
    /// When streaming: the longest pause between two chunks of the answer. A slow server
    /// keeps sending; a dead one goes quiet, and the attempt ends after this.
    pub idle_timeout: Duration,
    /// Asks for the answer as a stream of chunks (`stream: true`); a server that answers
    /// in one piece anyway is read as such.
    pub stream: bool,
    /// The longest connecting may take.
    pub connect_timeout: Duration,
    /// When failed attempts are retried.
    pub retry: RetryPolicy,
    /// A proxy URL for every request; `None` connects directly.
    pub proxy: Option<String>,
}

impl OpenAiConfig {
    /// Returns the settings for `base_url` under the provider name `name`, with no key,
    /// a 120 s timeout, a 10 s connect timeout and the default retry policy.
    pub fn new(name: impl Into<String>, base_url: impl Into<String>) -> OpenAiConfig {
        OpenAiConfig {
            name: name.into(),
            base_url: base_url.into(),
            api_key: None,
            timeout: Duration::from_secs(120),
            idle_timeout: Duration::from_secs(60),
            stream: true,
            connect_timeout: Duration::from_secs(10),
            retry: RetryPolicy::default(),
            proxy: None,
        }
    }

    /// Returns the chat-completions URL.
    pub fn endpoint(&self) -> String {
        let base = self.base_url.trim().trim_end_matches('/');
        if base.ends_with("/chat/completions") {
            base.to_owned()
        } else {
            format!("{base}/chat/completions")
        }
    }
}

impl fmt::Debug for OpenAiConfig {
    // The key never appears in logs or error output.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenAiConfig")
            .field("name", &self.name)
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("timeout", &self.timeout)
            .field("idle_timeout", &self.idle_timeout)
            .field("stream", &self.stream)
            .field("connect_timeout", &self.connect_timeout)
            .field("retry", &self.retry)
            .field("proxy", &self.proxy)
            .finish()
    }
}

/// A provider for one OpenAI-compatible endpoint.
#[derive(Debug, Clone)]
pub struct OpenAiProvider {
    config: OpenAiConfig,
    url: String,
    client: reqwest::Client,
}

impl OpenAiProvider {
    /// Returns a provider for `config`, checking its URL and building the HTTP client.
    pub fn new(config: OpenAiConfig) -> Result<OpenAiProvider, ModelError> {
        let problem =
            |problem: String| ModelError::Config { provider: config.name.clone(), problem };
        let url = config.endpoint();
        let parsed = reqwest::Url::parse(&url)
            .map_err(|e| problem(format!("base URL `{}` is not a URL: {e}", config.base_url)))?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err(problem(format!(
                "base URL `{}` must start with http:// or https://",
                config.base_url
            )));
        }
        // No timeout for the whole request: a streamed answer may take long while tokens
        // keep coming. `attempt` bounds each phase instead.
        let mut builder =
            reqwest::Client::builder().no_proxy().connect_timeout(config.connect_timeout);
        if let Some(proxy) = &config.proxy {
            let proxy = reqwest::Proxy::all(proxy)
                .map_err(|e| problem(format!("proxy `{proxy}` is invalid: {e}")))?;
            builder = builder.proxy(proxy);
        }
        let client = builder.build().map_err(|e| problem(error_chain(&e)))?;
        Ok(OpenAiProvider { config, url, client })
    }

    /// Returns the provider's settings.
    pub fn config(&self) -> &OpenAiConfig {
        &self.config
    }

    async fn send(
        &self,
        model: &ModelInfo,
        request: &ModelRequest,
    ) -> Result<ModelResponse, ModelError> {
        let body = request_body(model, request, self.config.stream).to_string();
        let policy = self.config.retry;
        let max_attempts = policy.max_attempts.max(1);
        let started = tokio::time::Instant::now();
        let mut attempt = 0;
        loop {
            attempt += 1;
            let (err, retry_after) = match self.attempt(&body, attempt).await {
                Ok(text) => return self.parse(model, request, &text),
                Err(failure) => failure,
            };
            if attempt >= max_attempts || !err.is_unreachable() {
                return Err(err);
            }
            let wait = policy.jittered_wait(attempt, retry_after);
            if started.elapsed() + wait > policy.deadline {
                return Err(err);
            }
            notify_retry(&RetryNotice {
                provider: self.config.name.clone(),
                url: self.url.clone(),
                attempt,
                error: err.to_string(),
                wait,
            });
            tokio::time::sleep(wait).await;
        }
    }

    /// Makes one attempt and returns the body of a 2xx answer, or the error with the
    /// server's `Retry-After`.
    async fn attempt(
        &self,
        body: &str,
        attempts: u32,
    ) -> Result<String, (ModelError, Option<Duration>)> {
        let mut req = self
            .client
            .post(&self.url)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body.to_owned());
        if let Some(key) = &self.config.api_key {
            req = req.bearer_auth(key);
        }
        let timeout = |after| ModelError::Timeout {
            provider: self.config.name.clone(),
            url: self.url.clone(),
            after,
            attempts,
        };
        let first = self.config.timeout;
        let mut response = match tokio::time::timeout(first, req.send()).await {
            Err(_) => return Err((timeout(first), None)),
            Ok(sent) => sent.map_err(|e| (self.transport_error(&e, attempts), None))?,
        };
        let status = response.status();
        let retry_after = response
            .headers()
            .get(reqwest::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(parse_retry_after);
        let streamed = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.trim_start().starts_with("text/event-stream"));
        if status.is_success() && streamed {
            let mut assembler = Assembler::default();
            loop {
                // Until the first chunk the server has `timeout`; then `idle_timeout`
                // between chunks.
                let wait = if assembler.chunks() == 0 { first } else { self.config.idle_timeout };
                let chunk = match tokio::time::timeout(wait, response.chunk()).await {
                    Err(_) => return Err((timeout(wait), None)),
                    Ok(chunk) => {
                        chunk.map_err(|e| (self.transport_error(&e, attempts), retry_after))?
                    }
                };
                let Some(bytes) = chunk else { break };
                assembler.push(&bytes).map_err(|problem| (self.malformed(problem, ""), None))?;
                if assembler.is_done() {
                    break;
                }
            }
            let completion =
                assembler.finish().map_err(|problem| (self.malformed(problem, ""), None))?;
            return Ok(completion.to_string());
        }
        let text = match tokio::time::timeout(first, response.text()).await {
            Err(_) => return Err((timeout(first), retry_after)),
            Ok(text) => text.map_err(|e| (self.transport_error(&e, attempts), retry_after))?,
        };
        if status.is_success() {
            Ok(text)
        } else {
            Err((
                ModelError::Status {
                    provider: self.config.name.clone(),
                    url: self.url.clone(),
                    status: status.as_u16(),
                    body: excerpt(text.trim(), BODY_EXCERPT),
                    attempts,
                },
                retry_after,
            ))
        }
    }

    fn malformed(&self, problem: String, body: &str) -> ModelError {
        ModelError::MalformedResponse {
            provider: self.config.name.clone(),
            url: self.url.clone(),
            problem,
            body: excerpt(body.trim(), BODY_EXCERPT),
        }
    }

    fn transport_error(&self, err: &reqwest::Error, attempts: u32) -> ModelError {
        if err.is_timeout() {
            let after =
                if err.is_connect() { self.config.connect_timeout } else { self.config.timeout };
            ModelError::Timeout {
                provider: self.config.name.clone(),
                url: self.url.clone(),
                after,
                attempts,
            }
        } else {
            ModelError::Connect {
                provider: self.config.name.clone(),
                url: self.url.clone(),
                message: error_chain(err),
                attempts,
            }
        }
    }

    fn parse(
        &self,
        model: &ModelInfo,
        request: &ModelRequest,
        text: &str,
    ) -> Result<ModelResponse, ModelError> {
        let malformed = |problem: String| ModelError::MalformedResponse {
            provider: self.config.name.clone(),
            url: self.url.clone(),
            problem,
            body: excerpt(text.trim(), BODY_EXCERPT),
        };
        let completion: Completion = serde_json::from_str(text)
            .map_err(|e| malformed(format!("not a chat completion: {e}")))?;
        let choice = completion
            .choices
            .into_iter()
            .next()
            .ok_or_else(|| malformed("the completion has no choices".into()))?;
        let content = content_text(choice.message.content.as_ref())
            .ok_or_else(|| malformed("the message content is neither text nor parts".into()))?;
        let tool_calls: Vec<ToolCall> = choice
            .message
            .tool_calls
            .unwrap_or_default()
            .into_iter()
            .enumerate()
            .map(|(i, call)| ToolCall {
                id: call
                    .id
                    .filter(|id| !id.is_empty())
                    .unwrap_or_else(|| format!("call_{}", i + 1)),
                name: call.function.name,
                arguments: parse_arguments(call.function.arguments),
            })
            .collect();
        let finish = match choice.finish_reason.as_deref() {
            Some(reason) => FinishReason::from_provider(reason),
            None if tool_calls.is_empty() => FinishReason::Stop,
            None => FinishReason::ToolCalls,
        };
        // A server that reports no usage is charged an estimate, so that budgets still
        // count the call.
        let usage = match completion.usage {
            Some(ApiUsage { prompt_tokens: Some(input), completion_tokens: Some(output) }) => {
                Usage { input_tokens: input, output_tokens: output }
            }
            _ => Usage::estimate(request, &content, &tool_calls),
        };
        Ok(ModelResponse {
            model: model.name(),
            provider: self.config.name.clone(),
            text: content,
            tool_calls,
            finish,
            usage,
        })
    }
}

impl ModelProvider for OpenAiProvider {
    fn name(&self) -> &str {
        &self.config.name
    }

    fn complete<'a>(&'a self, model: &'a ModelInfo, request: &'a ModelRequest) -> ModelFuture<'a> {
        Box::pin(self.send(model, request))
    }
}

/// Reads a `Retry-After` value given in seconds; an HTTP date is not honoured and falls
/// back to the backoff.
fn parse_retry_after(value: &str) -> Option<Duration> {
    let secs: f64 = value.trim().parse().ok()?;
    (secs.is_finite() && secs >= 0.0).then(|| Duration::from_secs_f64(secs.min(86_400.0)))
}

fn error_chain(err: &(dyn std::error::Error + 'static)) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(s) = source {
        let next = s.to_string();
        if !text.contains(&next) {
            text.push_str(": ");
            text.push_str(&next);
        }
        source = s.source();
    }
    text
}

fn request_body(model: &ModelInfo, request: &ModelRequest, stream: bool) -> Value {
    let messages: Vec<Value> = request.messages.iter().map(message_json).collect();
    let mut body = json!({ "model": model.api_model(), "messages": messages, "stream": stream });
    if stream {
        // The token counts come in a last chunk only when asked for.
        body["stream_options"] = json!({ "include_usage": true });
    }
    if !request.tools.is_empty() {
        body["tools"] = request
            .tools
            .iter()
            .map(|t| {
                json!({
                    "type": "function",
                    "function": {
                        "name": t.name,
                        "description": t.description,
                        "parameters": t.parameters,
                    }
                })
            })
            .collect();
    }
    if request.max_output_tokens > 0 {
        body["max_tokens"] = json!(request.max_output_tokens);
    }
    if let Some(t) = request.temperature {
        body["temperature"] = json!(t);
    }
    if let Some(seed) = request.seed {
        body["seed"] = json!(seed);
    }
    if let Some(choice) = &request.tool_choice
        && !request.tools.is_empty()
    {
        body["tool_choice"] = json!(choice);
    }
    if !request.effort.is_empty() {
        body["reasoning_effort"] = json!(request.effort);
    }
    body
}

fn message_json(message: &Message) -> Value {
    match message {
        Message::User { content, images } if !images.is_empty() => {
            let mut parts = vec![json!({ "type": "text", "text": content })];
            parts.extend(
                images
                    .iter()
                    .map(|url| json!({ "type": "image_url", "image_url": { "url": url } })),
            );
            json!({ "role": "user", "content": parts })
        }
        Message::System { content } | Message::User { content, .. } => {
            json!({ "role": message.role(), "content": content })
        }
        Message::Assistant { content, tool_calls } if !tool_calls.is_empty() => {
            let calls: Vec<Value> = tool_calls
                .iter()
                .map(|c| {
                    // Arguments that were not a JSON object were never run (the react loop
                    // answered with an error): an empty object goes back, as a server may
                    // refuse a conversation holding text that does not parse.
                    let arguments = match &c.arguments {
                        Value::Object(_) => c.arguments.to_string(),
                        _ => "{}".to_owned(),
                    };
                    json!({
                        "id": c.id,
                        "type": "function",
                        "function": { "name": c.name, "arguments": arguments },
                    })
                })
                .collect();
            let content = if content.is_empty() { Value::Null } else { json!(content) };
            json!({ "role": "assistant", "content": content, "tool_calls": calls })
        }
        Message::Assistant { content, .. } => json!({ "role": "assistant", "content": content }),
        Message::Tool { tool_call_id, content } => {
            json!({ "role": "tool", "tool_call_id": tool_call_id, "content": content })
        }
    }
}

/// Returns the text of a message's `content`: a string, `null`, or a list of parts whose
/// `text` fields are joined.
fn content_text(content: Option<&Value>) -> Option<String> {
    match content {
        None | Some(Value::Null) => Some(String::new()),
        Some(Value::String(s)) => Some(s.clone()),
        Some(Value::Array(parts)) => {
            Some(parts.iter().filter_map(|p| p.get("text").and_then(Value::as_str)).collect())
        }
        Some(_) => None,
    }
}

/// Returns tool-call arguments as JSON: a string is parsed, and kept as a string when it
/// is not JSON; an empty string is an empty object.
fn parse_arguments(arguments: Option<Value>) -> Value {
    match arguments {
        None | Some(Value::Null) => json!({}),
        Some(Value::String(raw)) if raw.trim().is_empty() => json!({}),
        Some(Value::String(raw)) => serde_json::from_str(&raw).unwrap_or(Value::String(raw)),
        Some(other) => other,
    }
}

#[derive(Deserialize)]
struct Completion {
    #[serde(default)]
    choices: Vec<Choice>,
    #[serde(default)]
    usage: Option<ApiUsage>,
}

#[derive(Deserialize)]
struct Choice {
    message: ApiMessage,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct ApiMessage {
    #[serde(default)]
    content: Option<Value>,
    #[serde(default)]
    tool_calls: Option<Vec<ApiToolCall>>,
}

#[derive(Deserialize)]
struct ApiToolCall {
    #[serde(default)]
    id: Option<String>,
    function: ApiFunction,
}

#[derive(Deserialize)]
struct ApiFunction {
    name: String,
    #[serde(default)]
    arguments: Option<Value>,
}

#[derive(Deserialize)]
struct ApiUsage {
    #[serde(default)]
    prompt_tokens: Option<u64>,
    #[serde(default)]
    completion_tokens: Option<u64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_up_to_the_cap_and_retry_after_wins() {
        let p = RetryPolicy {
            max_attempts: 5,
            initial_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_millis(350),
            max_retry_after: Duration::from_secs(2),
            deadline: Duration::from_secs(60),
        };
        assert_eq!(p.wait(1, None), Duration::from_millis(100));
        assert_eq!(p.wait(2, None), Duration::from_millis(200));
        assert_eq!(p.wait(3, None), Duration::from_millis(350));
        assert_eq!(p.wait(40, None), Duration::from_millis(350));
        assert_eq!(p.wait(1, Some(Duration::from_secs(1))), Duration::from_secs(1));
        assert_eq!(p.wait(1, Some(Duration::from_secs(90))), Duration::from_secs(2));
        assert_eq!(parse_retry_after(" 3 "), Some(Duration::from_secs(3)));
        assert_eq!(parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT"), None);
        assert_eq!(parse_retry_after("-1"), None);
    }

    #[test]
    fn jitter_adds_at_most_a_quarter_and_never_to_an_asked_wait() {
        let p = RetryPolicy::default();
        for attempt in 1..12 {
            let base = p.wait(attempt, None);
            for _ in 0..20 {
                let jittered = p.jittered_wait(attempt, None);
                assert!(jittered >= base && jittered <= base + base / 4, "{jittered:?} {base:?}");
            }
        }
        let asked = Some(Duration::from_secs(3));
        assert_eq!(p.jittered_wait(2, asked), Duration::from_secs(3));
        // The default rides out an outage of minutes, not seconds.
        assert!(p.deadline >= Duration::from_secs(300));
    }

    #[test]
    fn endpoint_appends_chat_completions_once() {
        let c = OpenAiConfig::new("local", "http://127.0.0.1:8080/v1/");
        assert_eq!(c.endpoint(), "http://127.0.0.1:8080/v1/chat/completions");
        let c = OpenAiConfig::new("local", "http://h/v1/chat/completions");
        assert_eq!(c.endpoint(), "http://h/v1/chat/completions");
    }

    #[test]
    fn the_key_is_never_in_debug_output() {
        let c = OpenAiConfig {
            api_key: Some("sk-secret".into()),
            ..OpenAiConfig::new("x", "http://h")
        };
        assert!(!format!("{c:?}").contains("sk-secret"));
    }

    #[test]
    fn arguments_that_are_not_json_are_kept_as_text() {
        assert_eq!(parse_arguments(Some(json!("{\"a\":1}"))), json!({"a": 1}));
        assert_eq!(parse_arguments(Some(json!("{oops"))), json!("{oops"));
        assert_eq!(parse_arguments(Some(json!(""))), json!({}));
        assert_eq!(parse_arguments(Some(json!({"b": 2}))), json!({"b": 2}));
    }

    #[test]
    fn images_are_sent_as_content_parts() {
        let m =
            Message::user_with_images("What is this?", vec!["data:image/png;base64,AA==".into()]);
        assert_eq!(
            message_json(&m),
            json!({"role": "user", "content": [
                {"type": "text", "text": "What is this?"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA=="}}
            ]})
        );
        assert_eq!(message_json(&Message::user("hi")), json!({"role": "user", "content": "hi"}));
    }

    #[test]
    fn assistant_tool_calls_are_sent_with_string_arguments() {
        let m = Message::Assistant {
            content: String::new(),
            tool_calls: vec![ToolCall {
                id: "c1".into(),
                name: "f".into(),
                arguments: json!({"x": 1}),
            }],
        };
        assert_eq!(
            message_json(&m),
            json!({"role": "assistant", "content": null, "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{\"x\":1}"}}
            ]})
        );
    }

    #[test]
    fn arguments_that_were_not_an_object_are_sent_back_as_an_empty_object() {
        let message = Message::Assistant {
            content: String::new(),
            tool_calls: vec![ToolCall {
                id: "c1".into(),
                name: "f".into(),
                arguments: json!("{\"path\": \"data/fat"),
            }],
        };
        let sent = message_json(&message);
        assert_eq!(sent["tool_calls"][0]["function"]["arguments"], "{}");
    }
}
