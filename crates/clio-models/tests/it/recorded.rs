//! Real answers of llama.cpp's server, recorded under `tests/data/llama-cpp/` by its
//! `capture.sh` (the server of the real-model tier, `xtask/llama_server.py`, with the tier's
//! two models), replayed byte for byte by the HTTP server of [`crate::models`] through the
//! OpenAI-compatible provider: a plain answer, one cut off at `max_tokens`, a streamed
//! answer's SSE chunks, a tool call in `tool_calls` (whole and streamed) and a tool call
//! written as the whole answer, read only where `text_tool_calls` is set.
//! What the hand-written replies of `models.rs` assume, these show a real server sends.

use std::path::Path;

use clio_models::{
    FinishReason, ModelProvider, ModelResponse, ModelsConfig, OpenAiProvider, RouterAllowlist,
    ToolSpec, Usage,
};
use clio_spec::Requires;
use serde_json::{Value, json};

use crate::models::{Reply, Server, fast_config, request, sse, tools_model};

type TestResult = Result<(), Box<dyn std::error::Error>>;

/// Returns the recorded file `name`.
fn recorded(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/llama-cpp").join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Returns the recorded JSON answer `name`, as the server sent it.
fn json_reply(name: &str) -> Reply {
    Reply {
        headers: vec![("Content-Type".into(), "application/json; charset=utf-8".into())],
        ..Reply::status(200, &recorded(name))
    }
}

/// The tool the recorded tool calls call.
fn tally() -> ToolSpec {
    ToolSpec {
        name: "tally".into(),
        description: "Records one tally under a label".into(),
        parameters: json!({
            "type": "object",
            "properties": { "label": { "type": "string" } },
            "required": ["label"],
            "additionalProperties": false
        }),
    }
}

/// Returns what one request to a server answering `reply` gives the provider, streamed
/// when `stream`.
async fn replay(reply: Reply, stream: bool) -> Result<ModelResponse, Box<dyn std::error::Error>> {
    let server = Server::start(vec![reply]).await?;
    let mut config = fast_config(&server.url, 1);
    config.stream = stream;
    let provider = OpenAiProvider::new(config)?;
    let mut req = request("a", "go");
    req.tools = vec![tally()];
    Ok(provider.complete(&tools_model("local", "m", "local"), &req).await?)
}

/// Returns the recorded answer's content, tool calls, finish reason and usage, read with
/// serde_json: what the provider must agree with.
fn expected(name: &str) -> (String, Value, String, Usage) {
    let body: Value = serde_json::from_str(&recorded(name)).unwrap();
    let choice = &body["choices"][0];
    let usage = Usage {
        input_tokens: body["usage"]["prompt_tokens"].as_u64().unwrap(),
        output_tokens: body["usage"]["completion_tokens"].as_u64().unwrap(),
    };
    (
        choice["message"]["content"].as_str().unwrap_or_default().to_owned(),
        choice["message"]["tool_calls"].clone(),
        choice["finish_reason"].as_str().unwrap().to_owned(),
        usage,
    )
}

#[tokio::test]
async fn a_recorded_plain_answer() -> TestResult {
    let (text, _, finish, usage) = expected("plain.json");
    assert_eq!(finish, "stop");
    let r = replay(json_reply("plain.json"), false).await?;
    assert!(!r.text.is_empty());
    assert_eq!((r.text, r.finish, r.usage), (text, FinishReason::Stop, usage));
    assert!(r.tool_calls.is_empty());
    Ok(())
}

#[tokio::test]
async fn a_recorded_answer_cut_off_at_max_tokens() -> TestResult {
    let (text, _, finish, usage) = expected("length.json");
    assert_eq!((finish.as_str(), usage.output_tokens), ("length", 8));
    let r = replay(json_reply("length.json"), false).await?;
    assert_eq!((r.text, r.finish, r.usage), (text, FinishReason::Length, usage));
    Ok(())
}

/// Returns the content pieces and the usage of the recorded stream `name`, read chunk by
/// chunk with serde_json.
fn stream_pieces(name: &str) -> (String, Option<String>, Usage) {
    let (mut text, mut finish, mut usage) = (String::new(), None, Usage::default());
    for data in recorded(name).lines().filter_map(|l| l.strip_prefix("data: ")) {
        if data == "[DONE]" {
            continue;
        }
        let chunk: Value = serde_json::from_str(data).unwrap();
        if let Some(choice) = chunk["choices"].get(0) {
            text.push_str(choice["delta"]["content"].as_str().unwrap_or_default());
            if let Some(f) = choice["finish_reason"].as_str() {
                finish = Some(f.to_owned());
            }
        }
        if let Some(u) = chunk.get("usage").filter(|u| u.is_object()) {
            usage = Usage {
                input_tokens: u["prompt_tokens"].as_u64().unwrap(),
                output_tokens: u["completion_tokens"].as_u64().unwrap(),
            };
        }
    }
    (text, finish, usage)
}

#[tokio::test]
async fn a_recorded_stream_is_put_back_together() -> TestResult {
    let (text, finish, usage) = stream_pieces("stream.sse");
    assert!(recorded("stream.sse").lines().filter(|l| l.starts_with("data: ")).count() > 3);
    assert!(!text.is_empty() && usage.output_tokens > 0);
    let r = replay(sse(&recorded("stream.sse")), true).await?;
    let finish =
        if finish.as_deref() == Some("length") { FinishReason::Length } else { FinishReason::Stop };
    assert_eq!((r.text, r.finish, r.usage), (text, finish, usage));
    Ok(())
}

#[tokio::test]
async fn a_recorded_tool_call() -> TestResult {
    let (_, calls, finish, usage) = expected("tool-call.json");
    assert_eq!(finish, "tool_calls");
    let r = replay(json_reply("tool-call.json"), false).await?;
    assert_eq!((r.finish, r.usage), (FinishReason::ToolCalls, usage));
    assert_eq!(r.tool_calls.len(), 1);
    let call = &r.tool_calls[0];
    assert_eq!(call.id, calls[0]["id"].as_str().unwrap());
    assert_eq!((call.name.as_str(), &call.arguments), ("tally", &json!({ "label": "alpha" })));
    Ok(())
}

#[tokio::test]
async fn a_recorded_streamed_tool_call() -> TestResult {
    let body = recorded("tool-call.sse");
    assert!(body.contains("\"tool_calls\""), "the stream carries tool-call deltas");
    let r = replay(sse(&body), true).await?;
    assert_eq!(r.finish, FinishReason::ToolCalls);
    assert_eq!(r.tool_calls.len(), 1);
    let call = &r.tool_calls[0];
    assert!(!call.id.is_empty());
    assert_eq!((call.name.as_str(), &call.arguments), ("tally", &json!({ "label": "alpha" })));
    Ok(())
}

/// The models file of [`a_recorded_call_written_as_text_needs_text_tool_calls`]: one model
/// served at `url`, reading text-form calls when `text_calls`.
fn models_toml(url: &str, text_calls: bool) -> String {
    format!(
        r#"
[[provider]]
name = "local"
kind = "openai"
base_url = "{url}"
stream = false

[[model]]
account = "local"
id = "qwen-coder"
provider = "local"
capabilities = {{ tool_calling = true, context_tokens = 8192, output_tokens = 96 }}
text_tool_calls = {text_calls}
"#
    )
}

#[tokio::test]
async fn a_recorded_call_written_as_text_needs_text_tool_calls() -> TestResult {
    let (text, calls, finish, _) = expected("text-call.json");
    assert!(calls.is_null() && finish == "stop", "the server read no call: {text}");
    let needs = Requires { tool_calling: true, ..Requires::default() };
    let all = RouterAllowlist::unrestricted();
    for text_calls in [true, false] {
        let server = Server::start(vec![json_reply("text-call.json")]).await?;
        let file = Path::new("models.toml");
        let config = ModelsConfig::from_toml(&models_toml(&server.url, text_calls), file)?;
        let models = config.build(Path::new("."), |_| None)?;
        let mut req = request("a", "go");
        req.model = "local/qwen-coder".into();
        req.tools = vec![tally()];
        let r = models.complete(&req, &needs, &all).await?;
        if text_calls {
            assert_eq!(r.finish, FinishReason::ToolCalls);
            assert_eq!(r.tool_calls.len(), 1, "{text}");
            let call = &r.tool_calls[0];
            assert_eq!(
                (call.name.as_str(), &call.arguments),
                ("tally", &json!({ "label": "alpha" }))
            );
            assert_eq!(r.text, "");
        } else {
            assert!(r.tool_calls.is_empty());
            assert_eq!(r.text, text);
        }
        let sent: Value = serde_json::from_str(&server.requests()[0].body)?;
        assert_eq!(sent["tools"][0]["function"]["name"], "tally");
    }
    Ok(())
}
