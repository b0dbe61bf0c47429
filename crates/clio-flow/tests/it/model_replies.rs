//! What a react loop does with what real models send back: an answer cut off at the
//! output-token limit (recorded, continued or failed by the model's policy), tool-call
//! arguments that do not fit the tool's schema (never run; the model is told), tool calls
//! written as text (read for models that opt in), the declared output limit sent as
//! `max_tokens`, every built-in tool offered with a real schema, and a provider that stays
//! unreachable past its retries (the run is left interrupted, and resumes once it is back,
//! without running a finished tool twice).

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use clio_flow::{
    CutOffPolicy, FlowOutput, FnFlow, ModelCapabilities, ModelCatalog, ModelInfo, Models,
    OpenAiConfig, OpenAiProvider, Registry, RetryPolicy, RunOutcome, Runtime, RuntimeConfig,
    ScriptedProvider, Tool, Worker, Workspace, register_basic_tools, schema_problems,
};
use clio_journal::{EntryKind, Journal, RunStatus};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use crate::support::{Counter, answer, error, registry, sel};

const SCRIPT: &str = r#"
[[script]]
agent = "long"

[[script.turn]]
text = "The fatigue limit is"
finish = "length"

[[script.turn]]
text = " 240 MPa."

[[script]]
agent = "strict"

[[script.turn]]
tool_calls = [{ name = "measure", arguments = { sample = 7 } }]

[[script.turn]]
tool_calls = [{ name = "measure", arguments = { sample = "s7", unit = "MPa" } }]

[[script.turn]]
tool_calls = [{ name = "measure", arguments = { sample = "s7" } }]

[[script.turn]]
text = "Measured."

[[script]]
agent = "texty"

[[script.turn]]
text = "I will measure.\n<tool_call>{\"name\": \"measure\", \"arguments\": {\"sample\": \"s1\"}}</tool_call>"

[[script.turn]]
text = "Measured s1."
"#;

fn scripted() -> ScriptedProvider {
    ScriptedProvider::from_toml(SCRIPT, Path::new("script.toml")).unwrap()
}

/// The offline model, with `edit` applied to its catalog entry.
fn models(edit: impl FnOnce(&mut ModelInfo)) -> Models {
    let provider = scripted();
    let mut model =
        ModelInfo::new("offline", "scripted", clio_flow::ModelProvider::name(&provider))
            .with_capabilities(ModelCapabilities {
                tool_calling: true,
                vision: false,
                context_tokens: 32_000,
                output_tokens: 512,
            });
    edit(&mut model);
    Models::new(ModelCatalog::new(vec![model]).unwrap()).with_provider(Arc::new(provider))
}

fn runtime(journal: &Journal, reg: Registry, models: Models) -> Runtime {
    let config =
        RuntimeConfig { model: "offline/scripted".into(), models, ..RuntimeConfig::default() };
    Runtime::new(journal.clone(), reg, config)
}

fn flow(target: &'static str) -> FnFlow {
    FnFlow::new("ask", move |task: Value, ctx| async move {
        Ok(FlowOutput::from(ctx.call(target, task).await?))
    })
}

/// A registry with `measure {sample: string}` (no other field), counting its runs.
fn with_measure(counter: &Counter, worker: &str) -> Registry {
    let c = counter.clone();
    registry(counter)
        .tool(
            Tool::new("measure", move |args: Value| {
                let c = c.clone();
                async move {
                    c.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    Ok(json!({ "sample": args["sample"], "mpa": 240 }))
                }
            })
            .with_schema(json!({
                "type": "object",
                "properties": { "sample": { "type": "string" } },
                "required": ["sample"],
                "additionalProperties": false
            })),
        )
        .subagent(Worker::react(worker, "You measure samples.").with_tools(&["measure"]))
}

fn events(journal: &Journal, run: clio_journal::RunId, name: &str) -> Vec<Value> {
    journal
        .entries(run)
        .unwrap()
        .into_iter()
        .filter(|e| e.kind == EntryKind::Event)
        .map(|e| e.payload)
        .filter_map(|p| {
            let event = p.get("command").and_then(|c| c.get("event")).cloned().unwrap_or(p);
            (event.get("event").and_then(Value::as_str) == Some(name)).then_some(event)
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cut_off_answer_is_recorded_and_continued() {
    let c = Counter::default();
    let reg = with_measure(&c, "long").flow(flow("long"));
    let journal = Journal::open_in_memory().unwrap();
    let report =
        runtime(&journal, reg, models(|_| {})).run(sel("ask"), json!("Fatigue?")).await.unwrap();
    assert_eq!(answer(&report), "The fatigue limit is 240 MPa.");
    let cut = events(&journal, report.run, "model_cut_off");
    assert_eq!(cut.len(), 1, "{cut:?}");
    assert_eq!(cut[0]["agent"], "long");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cut_off_answer_fails_by_name_when_the_model_says_so() {
    let c = Counter::default();
    let reg = with_measure(&c, "long").flow(flow("long"));
    let journal = Journal::open_in_memory().unwrap();
    let models = models(|m| m.on_cut_off = CutOffPolicy::Fail);
    let report = runtime(&journal, reg, models).run(sel("ask"), json!("Fatigue?")).await.unwrap();
    let err = error(&report).to_string();
    assert!(err.contains("output_cut_off"), "{err}");
    assert_eq!(events(&journal, report.run, "model_cut_off").len(), 1);
}

/// The scripted provider, keeping a copy of every request it is sent.
#[derive(Debug)]
struct Capturing {
    inner: ScriptedProvider,
    seen: Arc<Mutex<Vec<clio_flow::ModelRequest>>>,
}

impl clio_flow::ModelProvider for Capturing {
    fn name(&self) -> &str {
        clio_flow::ModelProvider::name(&self.inner)
    }

    fn complete<'a>(
        &'a self,
        model: &'a ModelInfo,
        request: &'a clio_flow::ModelRequest,
    ) -> clio_flow::ModelFuture<'a> {
        self.seen.lock().unwrap().push(request.clone());
        self.inner.complete(model, request)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn arguments_that_do_not_fit_the_schema_never_run() {
    let c = Counter::default();
    let reg = with_measure(&c, "strict").flow(flow("strict"));
    let journal = Journal::open_in_memory().unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let capturing = Capturing { inner: scripted(), seen: Arc::clone(&seen) };
    let models = models(|_| {}).with_provider(Arc::new(capturing));
    let report = runtime(&journal, reg, models).run(sel("ask"), json!("Measure s7")).await.unwrap();
    assert_eq!(answer(&report), "Measured.");
    assert_eq!(c.get(), 1, "only the call whose arguments fit ran");
    // The model was told each problem, with its path, in the tool's result.
    let seen = seen.lock().unwrap();
    let told = |turn: usize| match seen[turn].messages.last() {
        Some(clio_flow::Message::Tool { content, .. }) => content.clone(),
        other => panic!("turn {turn} does not end with a tool result: {other:?}"),
    };
    for (turn, problem) in
        [(1, "$.sample: expected string, got a number"), (2, "unknown field `unit`")]
    {
        let text = told(turn);
        assert!(text.contains("arguments_invalid") && text.contains(problem), "{text}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tool_calls_written_as_text_run_only_for_models_that_opt_in() {
    let c = Counter::default();
    let reg = with_measure(&c, "texty").flow(flow("texty"));
    let journal = Journal::open_in_memory().unwrap();
    let opted = models(|m| m.text_tool_calls = true);
    let report = runtime(&journal, reg.clone(), opted).run(sel("ask"), json!("s1")).await.unwrap();
    assert_eq!(answer(&report), "Measured s1.");
    assert_eq!(c.get(), 1);

    // Without the opt-in the text is the answer, and nothing runs.
    let journal = Journal::open_in_memory().unwrap();
    let report = runtime(&journal, reg, models(|_| {})).run(sel("ask"), json!("s1")).await.unwrap();
    assert!(answer(&report).contains("<tool_call>"));
    assert_eq!(c.get(), 1);
}

#[test]
fn every_built_in_tool_offers_a_real_schema() {
    let dir = tempfile::tempdir().unwrap();
    let reg = register_basic_tools(Registry::new(), Workspace::new(Some(dir.path().into())));
    let reg = clio_flow::register_orchestration_tools(reg);
    let offered = ["read_file", "write_file", "list_files", "read_notes", "write_note"]
        .into_iter()
        .chain(clio_flow::ORCHESTRATION_TOOLS.iter().copied());
    let mut names = Vec::new();
    for name in offered {
        let Some(tool) = reg.get_tool(name) else { panic!("{name} is not registered") };
        let schema = &tool.schema;
        names.push(tool.name.clone());
        assert_eq!(schema["type"], "object", "{}: {schema}", tool.name);
        assert!(schema["properties"].is_object(), "{} has no properties: {schema}", tool.name);
        // The schema is what arguments are checked against: `{"type": "object"}` (what a
        // model once sent to read_file, copying a schema with nothing in it) must not pass
        // a tool that needs a field.
        let required = schema["required"].as_array().cloned().unwrap_or_default();
        if !required.is_empty() {
            assert!(
                !schema_problems(schema, &json!({ "type": "object" })).is_empty(),
                "{}",
                tool.name
            );
        }
    }
    for expected in ["read_file", "write_file", "list_files", "read_notes", "write_note"] {
        assert!(names.iter().any(|n| n == expected), "{expected} missing from {names:?}");
    }
}

/// A server that is down (`down` true: every connection closes at once) or answers each
/// request with `reply`; counts the requests it answered.
struct Flaky {
    url: String,
    down: Arc<Mutex<bool>>,
    /// The count of answered requests after which the server goes down by itself.
    down_after: Arc<Mutex<Option<u32>>>,
    answered: Arc<Mutex<u32>>,
    bodies: Arc<Mutex<Vec<Value>>>,
}

impl Flaky {
    async fn start(replies: Vec<Value>) -> Flaky {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/v1", listener.local_addr().unwrap());
        let down = Arc::new(Mutex::new(true));
        let answered = Arc::new(Mutex::new(0u32));
        let bodies = Arc::new(Mutex::new(Vec::new()));
        let down_after = Arc::new(Mutex::new(None));
        let (d, a, b) = (Arc::clone(&down), Arc::clone(&answered), Arc::clone(&bodies));
        let da = Arc::clone(&down_after);
        tokio::spawn(async move {
            let mut replies = replies.into_iter();
            while let Ok((mut stream, _)) = listener.accept().await {
                if *d.lock().unwrap() {
                    drop(stream);
                    continue;
                }
                let Some(body) = read_body(&mut stream).await else { continue };
                b.lock().unwrap().push(body);
                let n = {
                    let mut answered = a.lock().unwrap();
                    *answered += 1;
                    *answered
                };
                // Down from now on, before this reply is sent: the next request finds it
                // down however soon it comes.
                if *da.lock().unwrap() == Some(n) {
                    *d.lock().unwrap() = true;
                }
                let reply = replies.next().unwrap_or_else(|| json!({ "error": "no reply left" }));
                let text = reply.to_string();
                let head = format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                    text.len()
                );
                let _ = stream.write_all(head.as_bytes()).await;
                let _ = stream.write_all(text.as_bytes()).await;
                let _ = stream.shutdown().await;
            }
        });
        Flaky { url, down, down_after, answered, bodies }
    }

    /// Takes the server down or up now (and forgets a `down_after`).
    fn set_down(&self, down: bool) {
        *self.down_after.lock().unwrap() = None;
        *self.down.lock().unwrap() = down;
    }

    /// Takes the server down once it has answered `n` requests in all, before the reply.
    fn down_after(&self, n: u32) {
        *self.down_after.lock().unwrap() = Some(n);
    }
}

async fn read_body(stream: &mut tokio::net::TcpStream) -> Option<Value> {
    let mut data = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        let n = stream.read(&mut buf).await.ok()?;
        if n == 0 {
            return None;
        }
        data.extend_from_slice(&buf[..n]);
        let Some(at) = data.windows(4).position(|w| w == b"\r\n\r\n") else { continue };
        let head = String::from_utf8_lossy(&data[..at]).to_ascii_lowercase();
        let length: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length:").map(|v| v.trim().parse().ok()))
            .flatten()
            .unwrap_or(0);
        if data.len() >= at + 4 + length {
            return serde_json::from_slice(&data[at + 4..at + 4 + length]).ok();
        }
    }
}

fn completion(message: Value) -> Value {
    json!({ "choices": [{ "message": message }], "usage": { "prompt_tokens": 5, "completion_tokens": 5 } })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_provider_leaves_the_run_interrupted_and_resumable() {
    outage(sel("ask"), json!("Measure s9"), "s9 holds 240 MPa.").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workflow_step_cut_off_by_an_outage_resumes_instead_of_failing() {
    // The workflow flow records each step's outcome: a step whose model stayed unreachable
    // must not be recorded as failed, or the resume would replay the failure.
    let input = json!({
        "workflow": { "steps": [{ "id": "measure", "target": "remote", "input": "$task" }] },
        "task": "Measure s9",
    });
    outage(sel("workflow"), input, "").await;
}

/// Runs `selection` on `input` against a server that answers one model turn (a call of
/// `measure`) and then goes down: the run must stop interrupted, and resume to `answer`
/// (any answer when empty) once the server is back, the tool having run once.
async fn outage(selection: clio_flow::FlowSelection, input: Value, expected: &str) {
    let c = Counter::default();
    // Turn 1 calls `measure`; turn 2 answers.
    let server = Flaky::start(vec![
        completion(json!({ "content": null, "tool_calls": [{ "id": "c1", "type": "function",
            "function": { "name": "measure", "arguments": "{\"sample\": \"s9\"}" } }] })),
        completion(json!({ "content": "s9 holds 240 MPa." })),
    ])
    .await;
    server.set_down(false);
    let config = OpenAiConfig {
        timeout: Duration::from_secs(5),
        connect_timeout: Duration::from_secs(1),
        retry: RetryPolicy {
            max_attempts: 100,
            initial_backoff: Duration::from_millis(20),
            max_backoff: Duration::from_millis(50),
            max_retry_after: Duration::from_secs(1),
            deadline: Duration::from_millis(400),
        },
        ..OpenAiConfig::new("local", &server.url)
    };
    let provider = OpenAiProvider::new(config).unwrap();
    let model = ModelInfo::new("local", "m", "local").with_capabilities(ModelCapabilities {
        tool_calling: true,
        vision: false,
        context_tokens: 8_000,
        output_tokens: 300,
    });
    let models =
        Models::new(ModelCatalog::new(vec![model]).unwrap()).with_provider(Arc::new(provider));
    let reg = with_measure(&c, "remote").flow(flow("remote"));
    let config = RuntimeConfig { model: "local/m".into(), models, ..RuntimeConfig::default() };
    let journal = Journal::open_in_memory().unwrap();
    let rt = Runtime::new(journal.clone(), reg, config);

    // The first request is answered (a tool call, which runs); then the server goes down
    // before the second.
    server.down_after(1);
    let report = rt.run(selection, input).await.unwrap();
    match &report.outcome {
        RunOutcome::Failed(err) => {
            assert!(err.to_string().contains("unreachable"), "{err}");
        }
        other => panic!("expected the run to stop interrupted, got {other:?}"),
    }
    assert_eq!(c.get(), 1, "the tool ran once");
    let record = journal.run(report.run).unwrap().unwrap();
    assert_eq!(record.status, RunStatus::Interrupted, "resumable, not failed");
    assert!(!events(&journal, report.run, "model_retry").is_empty(), "retries are events");
    assert_eq!(events(&journal, report.run, "run_suspended").len(), 1);
    // The sent request carried the model's declared output limit.
    let first = server.bodies.lock().unwrap()[0].clone();
    assert_eq!(first["max_tokens"], 300, "{first}");

    // The provider is back: the run resumes from its history and ends; the finished tool
    // call is not made again.
    server.set_down(false);
    let resumed = rt.resume(report.run).await.unwrap();
    let answered = answer(&resumed);
    assert!(expected.is_empty() || answered == expected, "{answered}");
    assert_eq!(journal.run(report.run).unwrap().unwrap().status, RunStatus::Succeeded);
    assert_eq!(c.get(), 1, "the finished tool did not run twice");
    assert_eq!(*server.answered.lock().unwrap(), 2, "one request per model turn");
}
