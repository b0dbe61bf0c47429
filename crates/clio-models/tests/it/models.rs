//! Models: the scripted provider read from files, the choice and refusal of models
//! through [`Models`], fallbacks under the router allowlist, and the OpenAI-compatible
//! provider against a real HTTP/1.1 server on 127.0.0.1 started inside each test (text,
//! tool call, 429 then success, 500 until retries run out, timeout, malformed JSON,
//! connection refused).

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use clio_models::{
    FinishReason, Message, ModelCapabilities, ModelCatalog, ModelError, ModelInfo, ModelRequest,
    Models, ModelsConfig, OpenAiConfig, OpenAiProvider, RetryPolicy, RouterAllowlist,
    ScriptedProvider, ToolSpec, Usage,
};
use clio_spec::Requires;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

type TestResult = Result<(), Box<dyn std::error::Error>>;

const SCRIPT: &str = r#"
[[script]]
agent = "researcher"
prompt = "solar * cells"

[[script.turn]]
text = "Let me search."
tool_calls = [{ name = "search", arguments = { query = "perovskite" } }]
usage = { input_tokens = 120, output_tokens = 15 }

[[script.turn]]
text = "Perovskite cells reach 26 %."
usage = { input_tokens = 180, output_tokens = 9 }

[[script]]
agent = "researcher"
prompt = "fail"

[[script.turn]]
error = "the model is overloaded"

[[script]]
prompt = "hello"

[[script.turn]]
text = "Hello from any agent."
"#;

fn scripted() -> Result<ScriptedProvider, ModelError> {
    ScriptedProvider::from_toml(SCRIPT, Path::new("script.toml"))
}

pub(crate) fn tools_model(account: &str, id: &str, provider: &str) -> ModelInfo {
    ModelInfo::new(account, id, provider).with_capabilities(ModelCapabilities {
        tool_calling: true,
        vision: false,
        context_tokens: 32_768,
        output_tokens: 4_096,
    })
}

pub(crate) fn request(agent: &str, task: &str) -> ModelRequest {
    ModelRequest::new(
        "local/scripted",
        agent,
        vec![Message::system("You research."), Message::user(task)],
    )
}

#[tokio::test]
async fn scripted_turns_follow_the_chat() -> TestResult {
    let models =
        Models::new(ModelCatalog::new(vec![tools_model("local", "scripted", "scripted")])?)
            .with_provider(Arc::new(scripted()?));
    let needs = Requires { tool_calling: true, ..Requires::default() };
    let all = RouterAllowlist::unrestricted();
    let mut req = request("researcher", "Summarise  solar\nperovskite cells");
    let first = models.complete(&req, &needs, &all).await?;
    assert_eq!(first.finish, FinishReason::ToolCalls);
    assert_eq!(first.tool_calls.len(), 1);
    assert_eq!(first.tool_calls[0].id, "call_1_1");
    assert_eq!(first.tool_calls[0].arguments, json!({"query": "perovskite"}));
    assert_eq!(first.usage, Usage { input_tokens: 120, output_tokens: 15 });
    assert_eq!((first.model.as_str(), first.provider.as_str()), ("local/scripted", "scripted"));

    // The same request gets the same answer: the provider keeps no state.
    assert_eq!(models.complete(&req, &needs, &all).await?, first);

    req.messages.push(Message::from_response(&first));
    req.messages.push(Message::tool_result("call_1_1", "26.1 % (2025)"));
    let second = models.complete(&req, &needs, &all).await?;
    assert_eq!(second.text, "Perovskite cells reach 26 %.");
    assert_eq!(second.finish, FinishReason::Stop);
    assert_eq!(second.usage.total(), 189);

    // A response survives the journal's JSON unchanged.
    let back: clio_models::ModelResponse = serde_json::from_str(&serde_json::to_string(&second)?)?;
    assert_eq!(back, second);

    req.messages.push(Message::from_response(&second));
    req.messages.push(Message::user("Summarise solar cells again"));
    let err = models.complete(&req, &needs, &all).await.err().ok_or("no error")?;
    assert_eq!(
        err.to_string(),
        "script.toml: script 1 (line 2): agent `researcher` has 2 scripted turn(s); the chat asks for turn 3"
    );
    Ok(())
}

#[tokio::test]
async fn scripts_match_agent_then_prompt_in_file_order() -> TestResult {
    let p = scripted()?;
    let model = tools_model("local", "scripted", "scripted");
    let any = p.answer(&model, &request("writer", "well hello there"))?;
    assert_eq!(any.text, "Hello from any agent.");
    // Without usage in the script, the usage is the documented estimate.
    assert_eq!(any.usage, Usage { input_tokens: 8, output_tokens: 6 });

    let err = p.answer(&model, &request("writer", "solar cells")).err().ok_or("no error")?;
    assert_eq!(err.reason(), "script_no_match");
    assert_eq!(
        err.to_string(),
        r#"script.toml: no script matches agent `writer` and prompt "solar cells""#
    );
    let err = p.answer(&model, &request("researcher", "please fail")).err().ok_or("no error")?;
    assert_eq!(
        err.to_string(),
        "script.toml: script 2 (line 15): scripted failure: the model is overloaded"
    );
    // Matching is case-sensitive and needs the pieces in order.
    assert!(p.answer(&model, &request("researcher", "cells, solar")).is_err());
    assert!(p.answer(&model, &request("researcher", "Solar cells")).is_err());
    Ok(())
}

#[test]
fn script_files_in_json_and_errors_with_lines() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("script.json");
    std::fs::write(
        &path,
        r#"{"script": [{"agent": "a", "turn": [{"text": "hi", "finish": "length",
            "tool_calls": [{"id": "x", "name": "t", "arguments": {"n": 1}}]}]}]}"#,
    )?;
    let p = ScriptedProvider::from_file(&path)?;
    let r = p.answer(&tools_model("l", "m", "scripted"), &request("a", "anything"))?;
    assert_eq!(
        (r.text.as_str(), r.finish, r.tool_calls[0].id.as_str()),
        ("hi", FinishReason::Length, "x")
    );

    let err =
        ScriptedProvider::from_toml("[[script]]\nagent = \"a\"\nprompt = 3\n", Path::new("s.toml"))
            .err()
            .ok_or("no error")?;
    assert!(err.to_string().starts_with("s.toml:3:10: "), "{err}");
    let err = ScriptedProvider::from_toml("[[script]]\nagnet = \"a\"\n", Path::new("s.toml"))
        .err()
        .ok_or("no error")?;
    assert!(err.to_string().contains("unknown field `agnet`"), "{err}");
    let missing = dir.path().join("missing.toml");
    let err = ScriptedProvider::from_file(&missing).err().ok_or("no error")?;
    assert!(err.to_string().starts_with(&format!("cannot read {}: ", missing.display())), "{err}");
    Ok(())
}

/// Returns the first TOML code block of a document, or an error naming the document.
fn first_toml_block<'a>(doc: &'a str, name: &str) -> Result<&'a str, String> {
    doc.split("```toml\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .ok_or_else(|| format!("no toml block in {name}"))
}

#[test]
fn the_documented_example_script_parses() -> TestResult {
    let example = first_toml_block(
        include_str!("../../../../docs/scripted-models.md"),
        "docs/scripted-models.md",
    )?;
    let p = ScriptedProvider::from_toml(example, Path::new("docs/scripted-models.md"))?;
    let r = p.answer(
        &tools_model("l", "m", "scripted"),
        &request("researcher", "Summarise the paper on solar cells"),
    )?;
    assert_eq!(r.tool_calls[0].name, "read_file");
    Ok(())
}

#[test]
fn the_documented_models_file_builds() -> TestResult {
    let example = first_toml_block(include_str!("../../../../docs/models.md"), "docs/models.md")?;
    let config = ModelsConfig::from_toml(example, Path::new("docs/models.md"))?;
    assert_eq!(config.env_names(), ["HOSTED_API_KEY"]);
    let dir = tempfile::tempdir()?;
    std::fs::create_dir(dir.path().join("scripts"))?;
    std::fs::write(dir.path().join("scripts/demo.toml"), SCRIPT)?;
    let models = config.build(dir.path(), |_| Some("sk-demo".to_owned()))?;
    let chosen = models.catalog().choose_model(
        "",
        "",
        &clio_spec::Prefers::default(),
        "qwen",
        &Requires { tool_calling: true, ..Requires::default() },
        &RouterAllowlist::unrestricted(),
    )?;
    assert_eq!(
        (chosen.model.name().as_str(), chosen.model.api_model()),
        ("local/qwen", "qwen2.5:7b")
    );
    Ok(())
}

#[tokio::test]
async fn the_example_models_file_runs_offline() -> TestResult {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/models");
    let file = dir.join("models.toml");
    let config = ModelsConfig::from_toml(&std::fs::read_to_string(&file)?, &file)?;
    assert!(config.env_names().is_empty());
    let models = config.build(&dir, |_| None)?;
    let needs = Requires { tool_calling: true, context_tokens: 64_000, ..Requires::default() };
    let all = RouterAllowlist::unrestricted();
    let mut req = request("helper", "Please add 2 and 3");
    req.model = "offline/demo".into();
    let first = models.complete(&req, &needs, &all).await?;
    assert_eq!(first.tool_calls[0].arguments, json!({"a": 2, "b": 3}));
    req.messages.push(Message::from_response(&first));
    req.messages.push(Message::tool_result(first.tool_calls[0].id.clone(), "5"));
    assert_eq!(models.complete(&req, &needs, &all).await?.text, "2 + 3 = 5.");
    let mut other = request("writer", "hi");
    other.model = "demo".into();
    assert!(models.complete(&other, &needs, &all).await?.text.starts_with("Hello!"));
    Ok(())
}

#[tokio::test]
async fn the_offline_model_answers_from_a_script() -> TestResult {
    let models = Models::offline(scripted()?);
    let needs = Requires {
        tool_calling: true,
        vision: true,
        context_tokens: 200_000,
        output_tokens: 8_000,
    };
    let mut req = request("anyone", "hello");
    req.model = "offline/scripted".into();
    let r = models.complete(&req, &needs, &RouterAllowlist::unrestricted()).await?;
    assert_eq!(r.text, "Hello from any agent.");
    Ok(())
}

#[tokio::test]
async fn requirements_and_the_allowlist_refuse_before_any_request() -> TestResult {
    let catalog = ModelCatalog::new(vec![
        ModelInfo::new("local", "tiny", "scripted"),
        tools_model("local", "scripted", "scripted"),
    ])?;
    let models = Models::new(catalog).with_provider(Arc::new(scripted()?));
    let needs = Requires { tool_calling: true, ..Requires::default() };
    let mut req = request("researcher", "hello");
    req.model = "local/tiny".into();
    let err = models
        .complete(&req, &needs, &RouterAllowlist::unrestricted())
        .await
        .err()
        .ok_or("no error")?;
    assert_eq!(err.reason(), "model_requirement_unmet");
    assert_eq!(
        err.to_string(),
        "model `local/tiny` cannot meet the requirement tool_calling = true: it offers no tool calling"
    );

    // Images need vision, even when the child did not ask for it.
    req.model = "local/scripted".into();
    req.messages
        .push(Message::user_with_images("and this?", vec!["https://x.invalid/a.png".into()]));
    let err = models
        .complete(&req, &Requires::default(), &RouterAllowlist::unrestricted())
        .await
        .err()
        .ok_or("no error")?;
    assert_eq!(
        err.to_string(),
        "model `local/scripted` cannot meet the requirement vision = true: it offers no vision"
    );
    req.messages.pop();

    req.model = "scripted".into();
    let only_vllm = RouterAllowlist::unrestricted().with_providers(["vllm"]);
    let err = models.complete(&req, &needs, &only_vllm).await.err().ok_or("no error")?;
    assert_eq!(err.reason(), "model_not_allowed");
    Ok(())
}

#[tokio::test]
async fn a_failing_provider_falls_back_within_the_allowlist() -> TestResult {
    let server = Server::start(vec![Reply::status(503, "down"); 2]).await?;
    let mut primary = tools_model("work", "big", "remote");
    primary.fallbacks = vec!["local/scripted".into()];
    let catalog = ModelCatalog::new(vec![primary, tools_model("local", "scripted", "scripted")])?;
    let models = Models::new(catalog)
        .with_provider(Arc::new(OpenAiProvider::new(OpenAiConfig {
            name: "remote".into(),
            ..fast_config(&server.url, 1)
        })?))
        .with_provider(Arc::new(scripted()?));
    let mut req = request("researcher", "hello");
    req.model = "work/big".into();
    let none = Requires::default();
    let r = models.complete(&req, &none, &RouterAllowlist::unrestricted()).await?;
    assert_eq!((r.model.as_str(), r.text.as_str()), ("local/scripted", "Hello from any agent."));

    // The allowlist also holds for the fallback: with only `remote` allowed, the first
    // error comes back.
    let only_remote = RouterAllowlist::unrestricted().with_providers(["remote"]);
    let err = models.complete(&req, &none, &only_remote).await.err().ok_or("no error")?;
    assert_eq!(err.reason(), "provider_status");
    assert_eq!(server.requests().len(), 2);
    Ok(())
}

#[tokio::test]
async fn openai_text_answer_and_the_request_it_sent() -> TestResult {
    let body = json!({
        "id": "x", "object": "chat.completion",
        "choices": [{"index": 0, "finish_reason": "stop",
                     "message": {"role": "assistant", "content": "Paris."}}],
        "usage": {"prompt_tokens": 21, "completion_tokens": 2, "total_tokens": 23}
    });
    let server = Server::start(vec![Reply::json(200, &body)]).await?;
    let mut config = fast_config(&server.url, 3);
    config.api_key = Some("sk-test".into());
    let provider = OpenAiProvider::new(config)?;
    let model =
        ModelInfo { api_model: "qwen2.5:7b".into(), ..tools_model("local", "qwen", "local") };
    let mut req = request("researcher", "Capital of France?");
    req.max_output_tokens = 64;
    req.effort = "low".into();
    req.tools = vec![ToolSpec {
        name: "search".into(),
        description: "Search the web".into(),
        parameters: json!({"type": "object", "properties": {"q": {"type": "string"}}}),
    }];
    let r = clio_models::ModelProvider::complete(&provider, &model, &req).await?;
    assert_eq!(r.text, "Paris.");
    assert_eq!(r.usage, Usage { input_tokens: 21, output_tokens: 2 });
    assert_eq!((r.model.as_str(), r.provider.as_str()), ("local/qwen", "local"));

    let sent = server.requests();
    assert_eq!(sent.len(), 1);
    assert!(sent[0].head.starts_with("POST /v1/chat/completions HTTP/1.1\r\n"), "{}", sent[0].head);
    assert!(sent[0].head.to_ascii_lowercase().contains("authorization: bearer sk-test\r\n"));
    let json: Value = serde_json::from_str(&sent[0].body)?;
    assert_eq!(json["model"], "qwen2.5:7b");
    assert_eq!(json["max_tokens"], 64);
    assert_eq!(json["reasoning_effort"], "low");
    assert!(json.get("temperature").is_none());
    assert_eq!(json["messages"][1], json!({"role": "user", "content": "Capital of France?"}));
    assert_eq!(json["tools"][0]["function"]["name"], "search");
    Ok(())
}

#[tokio::test]
async fn openai_tool_call() -> TestResult {
    let body = json!({
        "choices": [{"finish_reason": "tool_calls", "message": {"role": "assistant", "content": null,
            "tool_calls": [{"id": "call_9", "type": "function",
                            "function": {"name": "search", "arguments": "{\"q\": \"paris\"}"}}]}}],
    });
    let server = Server::start(vec![Reply::json(200, &body)]).await?;
    let provider = OpenAiProvider::new(fast_config(&server.url, 3))?;
    let req = request("researcher", "Find Paris");
    let r = clio_models::ModelProvider::complete(&provider, &tools_model("l", "m", "local"), &req)
        .await?;
    assert_eq!(r.finish, FinishReason::ToolCalls);
    assert_eq!(r.text, "");
    assert_eq!((r.tool_calls[0].id.as_str(), r.tool_calls[0].name.as_str()), ("call_9", "search"));
    assert_eq!(r.tool_calls[0].arguments, json!({"q": "paris"}));
    // No usage from the server: the estimate is charged, so budgets still count it.
    assert!(r.usage.input_tokens > 0 && r.usage.output_tokens > 0, "{:?}", r.usage);
    Ok(())
}

#[tokio::test]
async fn openai_retries_a_429_and_honours_retry_after() -> TestResult {
    let ok = json!({"choices": [{"message": {"content": "done"}}],
                    "usage": {"prompt_tokens": 1, "completion_tokens": 1}});
    let limited = Reply {
        headers: vec![("Retry-After".into(), "0".into())],
        ..Reply::status(429, "slow down")
    };
    let server = Server::start(vec![limited, Reply::json(200, &ok)]).await?;
    let mut config = fast_config(&server.url, 3);
    // Were Retry-After ignored, the backoff would wait a minute and the timeout below fail.
    config.retry.initial_backoff = Duration::from_secs(60);
    config.retry.max_backoff = Duration::from_secs(60);
    let provider = OpenAiProvider::new(config)?;
    let req = request("a", "go");
    let model = tools_model("l", "m", "local");
    let call = clio_models::ModelProvider::complete(&provider, &model, &req);
    let r = tokio::time::timeout(Duration::from_secs(10), call).await??;
    assert_eq!(r.text, "done");
    assert_eq!(server.requests().len(), 2);
    Ok(())
}

#[tokio::test]
async fn openai_500_until_the_attempts_run_out() -> TestResult {
    let server = Server::start(vec![Reply::status(500, "boom: internal error"); 3]).await?;
    let provider = OpenAiProvider::new(fast_config(&server.url, 3))?;
    let req = request("a", "go");
    let err =
        clio_models::ModelProvider::complete(&provider, &tools_model("l", "m", "local"), &req)
            .await
            .err()
            .ok_or("no error")?;
    assert_eq!(
        err.to_string(),
        format!(
            "provider `local` answered 500 for {} after 3 attempt(s): boom: internal error",
            server.url_chat()
        )
    );
    assert_eq!(server.requests().len(), 3);

    // A 400 is not retried.
    let server = Server::start(vec![Reply::status(400, "bad request")]).await?;
    let provider = OpenAiProvider::new(fast_config(&server.url, 3))?;
    let err =
        clio_models::ModelProvider::complete(&provider, &tools_model("l", "m", "local"), &req)
            .await
            .err()
            .ok_or("no error")?;
    assert!(matches!(err, ModelError::Status { status: 400, attempts: 1, .. }), "{err}");
    Ok(())
}

/// A streamed answer: text and a tool call in pieces, the finish reason, the usage.
const SSE: &str = concat!(
    "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"Reading \"}}]}\n\n",
    "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"it.\"}}]}\n\n",
    "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"call_7\",\"function\":{\"name\":\"read_file\",\"arguments\":\"{\\\"path\\\":\"}}]}}]}\n\n",
    "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\" \\\"a.txt\\\"}\"}}]}}]}\n\n",
    "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\n",
    "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":30,\"completion_tokens\":11}}\n\n",
    "data: [DONE]\n\n",
);

pub(crate) fn sse(body: &str) -> Reply {
    Reply {
        headers: vec![("Content-Type".into(), "text/event-stream".into())],
        ..Reply::status(200, body)
    }
}

#[tokio::test]
async fn openai_streams_and_reassembles_the_answer() -> TestResult {
    let server = Server::start(vec![sse(SSE)]).await?;
    let provider = OpenAiProvider::new(fast_config(&server.url, 1))?;
    let model = tools_model("l", "m", "local");
    let r = clio_models::ModelProvider::complete(&provider, &model, &request("a", "read a.txt"))
        .await?;
    assert_eq!(r.text, "Reading it.");
    assert_eq!(r.finish, FinishReason::ToolCalls);
    assert_eq!(r.tool_calls[0].id, "call_7");
    assert_eq!(r.tool_calls[0].name, "read_file");
    assert_eq!(r.tool_calls[0].arguments, json!({ "path": "a.txt" }));
    assert_eq!(r.usage, Usage { input_tokens: 30, output_tokens: 11 });
    let sent: Value = serde_json::from_str(&server.requests()[0].body)?;
    assert_eq!(sent["stream"], true);
    assert_eq!(sent["stream_options"], json!({ "include_usage": true }));
    Ok(())
}

#[tokio::test]
async fn a_stream_that_goes_quiet_ends_at_the_idle_timeout_and_is_retried() -> TestResult {
    // The first answer starts, then stops mid-way with the connection open; the retry
    // gets a whole one.
    let first_chunk = SSE.split_inclusive("\n\n").next().unwrap_or_default();
    let quiet = Reply { hold: Duration::from_secs(30), ..sse(first_chunk) };
    let server = Server::start(vec![quiet, sse(SSE)]).await?;
    let mut config = fast_config(&server.url, 2);
    config.idle_timeout = Duration::from_millis(300);
    let provider = OpenAiProvider::new(config)?;
    let model = tools_model("l", "m", "local");
    let req = request("a", "go");
    let call = clio_models::ModelProvider::complete(&provider, &model, &req);
    let r = tokio::time::timeout(Duration::from_secs(10), call).await??;
    assert_eq!(r.text, "Reading it.");
    assert_eq!(server.requests().len(), 2, "the quiet attempt was retried");

    // With no attempt left, the quiet server is a timeout naming the idle limit.
    let server =
        Server::start(vec![Reply { hold: Duration::from_secs(30), ..sse(first_chunk) }]).await?;
    let mut config = fast_config(&server.url, 1);
    config.idle_timeout = Duration::from_millis(300);
    let provider = OpenAiProvider::new(config)?;
    let err = clio_models::ModelProvider::complete(&provider, &model, &request("a", "go"))
        .await
        .err()
        .ok_or("a quiet stream must fail")?;
    assert!(
        matches!(err, ModelError::Timeout { after, .. } if after == Duration::from_millis(300)),
        "{err:?}"
    );
    Ok(())
}

#[tokio::test]
async fn a_broken_stream_is_a_malformed_response() -> TestResult {
    let server = Server::start(vec![sse("data: {\"choices\": [\n\n")]).await?;
    let provider = OpenAiProvider::new(fast_config(&server.url, 3))?;
    let err = clio_models::ModelProvider::complete(
        &provider,
        &tools_model("l", "m", "local"),
        &request("a", "go"),
    )
    .await
    .err()
    .ok_or("must fail")?;
    assert!(matches!(err, ModelError::MalformedResponse { .. }), "{err:?}");
    assert!(err.to_string().contains("stream chunk 1 is not JSON"), "{err}");
    assert_eq!(server.requests().len(), 1, "a malformed answer is not retried");
    Ok(())
}

#[tokio::test]
async fn openai_timeout() -> TestResult {
    let slow = Reply { delay: Duration::from_secs(5), ..Reply::status(200, "{}") };
    let server = Server::start(vec![slow.clone(), slow]).await?;
    let mut config = fast_config(&server.url, 2);
    config.timeout = Duration::from_millis(200);
    let provider = OpenAiProvider::new(config)?;
    let req = request("a", "go");
    let err =
        clio_models::ModelProvider::complete(&provider, &tools_model("l", "m", "local"), &req)
            .await
            .err()
            .ok_or("no error")?;
    assert_eq!(
        err.to_string(),
        format!(
            "provider `local` did not answer {} within 200ms after 2 attempt(s)",
            server.url_chat()
        )
    );
    Ok(())
}

#[tokio::test]
async fn openai_malformed_json_is_not_retried() -> TestResult {
    let server = Server::start(vec![Reply::status(200, "{\"choices\": [oops")]).await?;
    let provider = OpenAiProvider::new(fast_config(&server.url, 3))?;
    let req = request("a", "go");
    let err =
        clio_models::ModelProvider::complete(&provider, &tools_model("l", "m", "local"), &req)
            .await
            .err()
            .ok_or("no error")?;
    assert_eq!(err.reason(), "provider_malformed_response");
    let text = err.to_string();
    assert!(
        text.contains(&server.url_chat()) && text.ends_with("body: {\"choices\": [oops"),
        "{text}"
    );
    assert_eq!(server.requests().len(), 1);

    let server = Server::start(vec![Reply::status(200, "{\"choices\": []}")]).await?;
    let provider = OpenAiProvider::new(fast_config(&server.url, 3))?;
    let err =
        clio_models::ModelProvider::complete(&provider, &tools_model("l", "m", "local"), &req)
            .await
            .err()
            .ok_or("no error")?;
    assert!(err.to_string().contains("the completion has no choices"), "{err}");
    Ok(())
}

#[tokio::test]
async fn openai_connection_refused_and_bad_config() -> TestResult {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}/v1", listener.local_addr()?);
    drop(listener);
    let provider = OpenAiProvider::new(fast_config(&url, 2))?;
    let req = request("a", "go");
    let err =
        clio_models::ModelProvider::complete(&provider, &tools_model("l", "m", "local"), &req)
            .await
            .err()
            .ok_or("no error")?;
    assert!(matches!(err, ModelError::Connect { attempts: 2, .. }), "{err}");
    assert!(
        err.to_string()
            .starts_with(&format!("cannot reach provider `local` at {url}/chat/completions"))
    );

    let err =
        OpenAiProvider::new(OpenAiConfig::new("x", "ftp://host/v1")).err().ok_or("no error")?;
    assert_eq!(
        err.to_string(),
        "provider `x` is misconfigured: base URL `ftp://host/v1` must start with http:// or https://"
    );
    Ok(())
}

proptest::proptest! {
    /// Whatever the text, reading a script, catalog or models file returns a value or an
    /// error; it never panics.
    #[test]
    fn files_never_panic(text in "\\PC{0,200}") {
        let _ = ScriptedProvider::from_toml(&text, Path::new("s.toml"));
        let _ = ScriptedProvider::from_json(&text, Path::new("s.json"));
        let _ = ModelCatalog::from_toml(&text, Path::new("c.toml"));
        let _ = ModelsConfig::from_toml(&text, Path::new("m.toml"));
    }

    /// A pattern made of runs of the prompt's words, in order and joined by `*`, always
    /// matches, whatever the whitespace; one with a word the prompt lacks never does.
    #[test]
    fn ordered_pieces_of_the_prompt_match(
        words in proptest::collection::vec("[a-z]{1,6}", 1..12),
        cuts in proptest::collection::vec(proptest::bool::ANY, 12),
        keep in proptest::collection::vec(proptest::bool::ANY, 12),
        spaces in proptest::collection::vec("[ \t\n]{1,3}", 12),
    ) {
        let prompt: String = words.iter().zip(&spaces).map(|(w, s)| format!("{w}{s}")).collect();
        let mut pattern = String::new();
        for (i, word) in words.iter().enumerate() {
            if keep[i] {
                pattern.push_str(word);
                pattern.push_str(if cuts[i] { " * " } else { " " });
            } else {
                pattern.push_str(" * ");
            }
        }
        let script = |pattern: &str| -> Result<ScriptedProvider, ModelError> {
            let text = format!("[[script]]\nprompt = {}\n[[script.turn]]\ntext = \"ok\"\n", toml_string(pattern));
            ScriptedProvider::from_toml(&text, Path::new("p.toml"))
        };
        let model = tools_model("l", "m", "scripted");
        let req = request("a", &prompt);
        let hit = script(&pattern).and_then(|p| p.answer(&model, &req));
        proptest::prop_assert!(hit.is_ok(), "{pattern:?} should match {prompt:?}: {hit:?}");
        let miss = script(&format!("{pattern} NOPE")).and_then(|p| p.answer(&model, &req));
        proptest::prop_assert!(miss.is_err(), "{pattern:?} NOPE should not match {prompt:?}");
    }

    /// An inherited allowlist allows exactly what both the leader's and the child's
    /// allow: restricting never widens.
    #[test]
    fn restricting_an_allowlist_is_an_intersection(
        leader in allowlist(),
        child in allowlist(),
        provider in "[abc]",
        id in "[xyz]",
    ) {
        let model = ModelInfo::new("acct", id, provider);
        let both = leader.restrict(&child);
        proptest::prop_assert_eq!(both.allows(&model), leader.allows(&model) && child.allows(&model));
        proptest::prop_assert_eq!(both.check(&model).is_ok(), both.allows(&model));
    }

    /// A response read back from its JSON (the journal's form) is the same response.
    #[test]
    fn responses_round_trip_through_json(
        text in "\\PC{0,50}",
        name in "[a-z_]{1,10}",
        arg in proptest::num::i64::ANY,
        input_tokens in proptest::num::u64::ANY,
        output_tokens in proptest::num::u64::ANY,
    ) {
        let response = clio_models::ModelResponse {
            model: "a/b".into(),
            provider: "p".into(),
            text,
            tool_calls: vec![clio_models::ToolCall { id: "c".into(), name, arguments: json!({"n": arg}) }],
            finish: FinishReason::ToolCalls,
            usage: Usage { input_tokens, output_tokens },
        };
        let json = serde_json::to_string(&response).map_err(|e| proptest::test_runner::TestCaseError::fail(e.to_string()))?;
        let back: clio_models::ModelResponse = serde_json::from_str(&json).map_err(|e| proptest::test_runner::TestCaseError::fail(e.to_string()))?;
        proptest::prop_assert_eq!(back, response);
    }
}

/// Returns allowlists over providers `a`–`c` and models `x`–`z`, each side either
/// unrestricted or a (possibly empty) set.
fn allowlist() -> impl proptest::strategy::Strategy<Value = RouterAllowlist> {
    use proptest::prelude::*;
    let side = |names: &'static str| {
        proptest::option::of(proptest::collection::btree_set(
            proptest::sample::select(names.split(' ').collect::<Vec<_>>()),
            0..3,
        ))
    };
    (side("a b c"), side("x y z acct/x acct/y")).prop_map(|(providers, models)| {
        let mut list = RouterAllowlist::unrestricted();
        if let Some(p) = providers {
            list = list.with_providers(p);
        }
        if let Some(m) = models {
            list = list.with_models(m);
        }
        list
    })
}

/// Returns `text` as a TOML basic string.
fn toml_string(text: &str) -> String {
    serde_json::to_string(text).unwrap_or_default()
}

/// Returns settings for a server on 127.0.0.1 with short timeouts and backoffs.
pub(crate) fn fast_config(base_url: &str, max_attempts: u32) -> OpenAiConfig {
    OpenAiConfig {
        timeout: Duration::from_secs(5),
        idle_timeout: Duration::from_secs(5),
        stream: true,
        connect_timeout: Duration::from_secs(1),
        retry: RetryPolicy {
            max_attempts,
            initial_backoff: Duration::from_millis(5),
            max_backoff: Duration::from_millis(20),
            max_retry_after: Duration::from_secs(1),
            deadline: Duration::from_secs(30),
        },
        ..OpenAiConfig::new("local", base_url)
    }
}

/// One canned HTTP answer.
#[derive(Clone)]
pub(crate) struct Reply {
    pub(crate) status: u16,
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) body: String,
    pub(crate) delay: Duration,
    /// After the body, the connection stays open this long, the body's declared length
    /// unmet (a server that went quiet mid-answer).
    pub(crate) hold: Duration,
}

impl Reply {
    pub(crate) fn status(status: u16, body: &str) -> Reply {
        Reply {
            status,
            headers: Vec::new(),
            body: body.to_owned(),
            delay: Duration::ZERO,
            hold: Duration::ZERO,
        }
    }

    pub(crate) fn json(status: u16, body: &Value) -> Reply {
        Reply {
            headers: vec![("Content-Type".into(), "application/json".into())],
            ..Reply::status(status, &body.to_string())
        }
    }
}

/// A request the server received.
#[derive(Clone)]
pub(crate) struct Received {
    head: String,
    pub(crate) body: String,
}

/// A tiny HTTP/1.1 server on 127.0.0.1: one canned reply per connection, in order, then
/// `Connection: close`; requests beyond the replies get a 599.
pub(crate) struct Server {
    pub(crate) url: String,
    received: Arc<Mutex<Vec<Received>>>,
}

impl Server {
    pub(crate) async fn start(replies: Vec<Reply>) -> std::io::Result<Server> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let url = format!("http://{}/v1", listener.local_addr()?);
        let received = Arc::new(Mutex::new(Vec::new()));
        let log = Arc::clone(&received);
        tokio::spawn(async move {
            let mut replies = replies.into_iter();
            while let Ok((mut stream, _)) = listener.accept().await {
                let Some(request) = read_request(&mut stream).await else { continue };
                if let Ok(mut log) = log.lock() {
                    log.push(request);
                }
                let reply = replies.next().unwrap_or_else(|| Reply::status(599, "no reply left"));
                tokio::spawn(async move {
                    tokio::time::sleep(reply.delay).await;
                    let declared = reply.body.len() + if reply.hold.is_zero() { 0 } else { 1000 };
                    let mut head = format!(
                        "HTTP/1.1 {} X\r\nContent-Length: {declared}\r\nConnection: close\r\n",
                        reply.status,
                    );
                    for (name, value) in &reply.headers {
                        head.push_str(&format!("{name}: {value}\r\n"));
                    }
                    head.push_str("\r\n");
                    // The client may have given up (the timeout test); that is fine.
                    let _ = stream.write_all(head.as_bytes()).await;
                    let _ = stream.write_all(reply.body.as_bytes()).await;
                    tokio::time::sleep(reply.hold).await;
                    let _ = stream.shutdown().await;
                });
            }
        });
        Ok(Server { url, received })
    }

    fn url_chat(&self) -> String {
        format!("{}/chat/completions", self.url)
    }

    pub(crate) fn requests(&self) -> Vec<Received> {
        self.received.lock().map(|r| r.clone()).unwrap_or_default()
    }
}

async fn read_request(stream: &mut tokio::net::TcpStream) -> Option<Received> {
    let mut data = Vec::new();
    let mut buf = [0u8; 4096];
    let head_end = loop {
        let n = stream.read(&mut buf).await.ok()?;
        if n == 0 {
            return None;
        }
        data.extend_from_slice(&buf[..n]);
        if let Some(at) = data.windows(4).position(|w| w == b"\r\n\r\n") {
            break at + 4;
        }
    };
    let head = String::from_utf8_lossy(&data[..head_end]).into_owned();
    let length = head
        .lines()
        .find_map(|l| {
            let (name, value) = l.split_once(':')?;
            name.eq_ignore_ascii_case("content-length")
                .then(|| value.trim().parse::<usize>().ok())?
        })
        .unwrap_or(0);
    while data.len() < head_end + length {
        let n = stream.read(&mut buf).await.ok()?;
        if n == 0 {
            break;
        }
        data.extend_from_slice(&buf[..n]);
    }
    let body = String::from_utf8_lossy(&data[head_end..]).into_owned();
    Some(Received { head, body })
}

#[tokio::test]
async fn the_models_sampling_settings_and_limits_go_on_the_wire() -> TestResult {
    let ok = json!({"choices": [{"message": {"content": "done"}}],
                    "usage": {"prompt_tokens": 1, "completion_tokens": 1}});
    let server = Server::start(vec![Reply::json(200, &ok), Reply::json(200, &ok)]).await?;
    let provider = OpenAiProvider::new(fast_config(&server.url, 1))?;
    let model = ModelInfo {
        temperature: Some(0.2),
        seed: Some(7),
        ..tools_model("local", "qwen", "local")
    };
    let models = Models::new(ModelCatalog::new(vec![model])?).with_provider(Arc::new(provider));
    let allow = RouterAllowlist::unrestricted();
    // The model's settings fill an unset request; its declared output limit caps it.
    let mut req = request("a", "go");
    req.model = "local/qwen".into();
    req.tools = vec![ToolSpec {
        name: "answer".into(),
        description: "The answer".into(),
        parameters: json!({"type": "object", "properties": {}}),
    }];
    req.tool_choice = Some("required".into());
    models.complete(&req, &Requires::default(), &allow).await?;
    // A request's own settings win, and a larger limit is cut to the declared one.
    req.temperature = Some(0.9);
    req.seed = Some(1);
    req.max_output_tokens = 1_000_000;
    models.complete(&req, &Requires::default(), &allow).await?;
    let sent: Vec<Value> = server
        .requests()
        .iter()
        .map(|r| serde_json::from_str(&r.body))
        .collect::<Result<_, _>>()?;
    assert_eq!(
        (&sent[0]["temperature"], &sent[0]["seed"], &sent[0]["max_tokens"]),
        (&json!(0.2), &json!(7), &json!(4_096))
    );
    assert_eq!(sent[0]["tool_choice"], "required");
    assert_eq!(
        (&sent[1]["temperature"], &sent[1]["seed"], &sent[1]["max_tokens"]),
        (&json!(0.9), &json!(1), &json!(4_096))
    );
    Ok(())
}
