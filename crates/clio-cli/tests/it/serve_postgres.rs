//! `clio serve` steering a shared PostgreSQL journal whose runs `clio worker`s drive (issue 44
//! item 6): two workers and a serve on one database, runs submitted with `--detach`, and
//! each way the API steers a run that another process drives: an answer (the run goes back
//! to the workers, and one of them finishes it, each effect once), a cancel and a stop (they
//! reach the worker holding the run's lease through the journal), a resume of a run whose
//! worker was SIGKILLed (a worker finishes it; serve never drives it), and the event stream
//! of a run a worker writes (every entry, in order). No worker may exit non-zero. Beside
//! them: an answer given while the worker still drives the run, `runs stop` reaching a run
//! driven in the foreground, and the viewer's page itself in headless Chromium.
//!
//! The server is the test server of `clio_postgres::test_server` (`$CLIO_TEST_POSTGRES`, or
//! a throwaway cluster). The HTTP client is a few lines of HTTP/1.0 over a TCP stream.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::{ChatServer, clio, temp_home, workspace_root};

const PLUGIN: &str = "crates/clio-cli/tests/data/workers/ledger";
const WORKFLOW: &str = "crates/clio-cli/tests/data/workers/workflow.json";
const SLOW: &str = "crates/clio-cli/tests/data/workers/slow.json";
/// The longest any wait of these tests lasts: a loaded machine is slow, never wrong.
const PATIENCE: Duration = Duration::from_secs(120);

/// A home whose config.toml names a fresh database as its journal, with a workspace; its
/// workers and its serve.
struct Fleet {
    url: String,
    home: PathBuf,
    workspace: PathBuf,
    workers: Vec<Child>,
    started: usize,
    serve: Option<Serve>,
}

impl Fleet {
    /// A fresh fleet named `name`; `config` is added to its config.toml.
    fn new(name: &str, config: &str) -> Fleet {
        let url = clio_postgres::test_server::fresh_database();
        let home = temp_home(name);
        let workspace = home.join("workspace");
        std::fs::create_dir_all(&workspace).unwrap();
        std::fs::write(home.join("config.toml"), format!("journal = {url:?}\n{config}")).unwrap();
        Fleet { url, home, workspace, workers: Vec::new(), started: 0, serve: None }
    }

    fn h(&self) -> &str {
        self.home.to_str().unwrap()
    }

    fn clio(&self, args: &[&str]) -> crate::support::Outcome {
        let mut all = vec!["--home", self.h()];
        all.extend(args);
        clio(&all)
    }

    fn trust(&self, plugin: &str) {
        let out = self.clio(&["plugin", "trust", plugin]);
        assert_eq!(out.code, 0, "{}", out.render());
    }

    /// Submits `workflow` with task `label` to the workers (`--detach`); `--no-input`
    /// unless the run may ask. Returns the run's id.
    fn submit(&self, workflow: &str, label: &str, plugins: &[&str], ask: bool) -> u64 {
        let ws = self.workspace.to_str().unwrap();
        let mut args = vec!["workflow", "run", workflow, "--task", label];
        for plugin in plugins {
            args.extend(["--plugin", plugin]);
        }
        args.extend(["--workspace", ws, "--detach", "--quiet"]);
        if !ask {
            args.push("--no-input");
        }
        let out = self.clio(&args);
        assert_eq!(out.code, 0, "submitting {label}: {}", out.render());
        out.stdout.trim().parse().expect("the run's id")
    }

    /// Starts a worker with a `lease`-second lease; returns its index.
    fn start_worker(&mut self, lease: &str) -> usize {
        let log = std::fs::File::create(self.log(self.started)).unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_clio"))
            .args(["--home", self.h(), "worker", "--concurrency", "4", "--lease", lease])
            .current_dir(workspace_root())
            .env_remove("RUST_LOG")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("a worker starts");
        self.started += 1;
        self.workers.push(child);
        self.workers.len() - 1
    }

    fn log(&self, i: usize) -> PathBuf {
        self.home.join(format!("worker-{i}.log"))
    }

    fn logs(&self) -> String {
        (0..self.started)
            .map(|i| std::fs::read_to_string(self.log(i)).unwrap_or_default())
            .collect::<Vec<_>>()
            .join("\n----\n")
    }

    /// Starts `clio serve` on the fleet's journal.
    fn start_serve(&mut self) -> &Serve {
        let mut child = Command::new(env!("CARGO_BIN_EXE_clio"))
            .args(["--home", self.h(), "serve", "--port", "0"])
            .current_dir(workspace_root())
            .env_remove("RUST_LOG")
            // A stop waits for the worker's answer: a loaded machine is slow, never wrong.
            .env("CLIO_STOP_WAIT_SECS", "120")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(self.home.join("serve.log")).unwrap())
            .spawn()
            .expect("clio serve starts");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        let rest = line.trim().strip_prefix("http://").unwrap_or_else(|| panic!("{line}"));
        let (addr, token) = rest.split_once("/#token=").unwrap();
        let serve = Serve { child, addr: addr.to_owned(), token: token.to_owned() };
        self.serve.insert(serve)
    }

    fn serve(&self) -> &Serve {
        self.serve.as_ref().expect("serve runs")
    }

    /// The lines of the ledger: one per side effect.
    fn ledger(&self) -> Vec<String> {
        let text = std::fs::read_to_string(self.workspace.join("ledger.log")).unwrap_or_default();
        text.lines().map(str::to_owned).collect()
    }

    fn db(&self) -> postgres::Client {
        postgres::Client::connect(&self.url, postgres::NoTls).expect("the test database")
    }

    /// Waits until run `run`, as the API shows it, has one of `statuses`; returns it.
    fn wait_for(&self, run: u64, statuses: &[&str]) -> Value {
        let end = Instant::now() + PATIENCE;
        loop {
            let shown = self.serve().get(&format!("/api/v1/runs/{run}"), 200);
            let status = shown["run"]["status"].as_str().unwrap_or_default().to_owned();
            if statuses.contains(&status.as_str()) {
                return shown;
            }
            assert!(
                Instant::now() < end,
                "run {run} did not become {statuses:?} (it is {status}): {}",
                self.logs()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Waits until a task of `run` is active: a worker is inside its call.
    fn wait_for_active_task(&self, run: u64) {
        let mut db = self.db();
        let end = Instant::now() + PATIENCE;
        loop {
            let active: i64 = db
                .query_one(
                    "SELECT count(*) FROM clio_tasks WHERE active AND run = $1",
                    &[&(run as i64)],
                )
                .map_or(0, |row| row.get(0));
            if active > 0 {
                return;
            }
            assert!(Instant::now() < end, "no call of run {run} started: {}", self.logs());
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Stops every worker with SIGTERM and requires each to exit 0.
    fn stop_workers(&mut self) {
        for child in &self.workers {
            let status =
                Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap();
            assert!(status.success());
        }
        let logs = self.logs();
        for mut child in std::mem::take(&mut self.workers) {
            let status = child.wait().unwrap();
            assert_eq!(status.code(), Some(0), "a worker exited {status}: {logs}");
        }
    }

    /// Kills worker `i` with SIGKILL.
    fn kill(&mut self, i: usize) {
        let mut child = self.workers.remove(i);
        let _ = child.kill();
        let _ = child.wait();
    }
}

impl Drop for Fleet {
    fn drop(&mut self) {
        for child in &mut self.workers {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// A `clio serve --port 0` on the fleet's journal, with its address and token.
struct Serve {
    child: Child,
    addr: String,
    token: String,
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Serve {
    fn send(&self, method: &str, path: &str, body: &str) -> (u16, String) {
        let mut stream = TcpStream::connect(&self.addr).unwrap();
        let mut request = format!("{method} {path} HTTP/1.0\r\nHost: {}\r\n", self.addr);
        if method != "GET" {
            request.push_str(&format!("Authorization: Bearer {}\r\n", self.token));
        }
        request.push_str(&format!("Content-Length: {}\r\n\r\n{body}", body.len()));
        stream.write_all(request.as_bytes()).unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).unwrap();
        let (head, body) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
        let code = head.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
        (code, body.to_owned())
    }

    fn get(&self, path: &str, code: u16) -> Value {
        let (got, body) = self.send("GET", path, "");
        assert_eq!(got, code, "GET {path}: {body}");
        serde_json::from_str(&body).unwrap_or_else(|e| panic!("GET {path}: {e}: {body}"))
    }

    fn post(&self, path: &str, body: &str, code: u16) -> Value {
        let (got, text) = self.send("POST", path, body);
        assert_eq!(got, code, "POST {path}: {text}");
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("POST {path}: {e}: {text}"))
    }

    /// The process name serve's own writes would carry: serve drives no run of a shared
    /// journal, so no task may be owned by it.
    fn owner(&self) -> String {
        format!("clio-{}", self.child.id())
    }
}

/// Returns the tasks of run `run` as the API shows them.
fn tasks(serve: &Serve, run: u64) -> Vec<Value> {
    serve.get(&format!("/api/v1/runs/{run}/tasks"), 200)["tasks"].as_array().unwrap().clone()
}

/// Requires that no task of `run` was written by serve: the workers drive the runs.
fn driven_by_workers_only(fleet: &Fleet, run: u64) {
    let serve = fleet.serve();
    let mut db = fleet.db();
    let owners: Vec<String> = db
        .query("SELECT record FROM clio_tasks WHERE run = $1", &[&(run as i64)])
        .unwrap()
        .iter()
        .map(|row| {
            let record: Value = serde_json::from_str(&row.get::<_, String>(0)).unwrap();
            record["owner"].as_str().unwrap_or_default().to_owned()
        })
        .collect();
    assert!(!owners.is_empty(), "run {run} has tasks");
    assert!(!owners.contains(&serve.owner()), "serve drove run {run}: {owners:?}");
}

/// (a) Runs that ask are answered through the API: each goes back to the workers, and
/// exactly one worker finishes it with the answer: each effect once, none before the answer.
#[test]
fn an_answer_through_the_api_is_finished_by_one_worker_exactly_once() {
    // Not trusted: each run asks the person before its first side effect, and waits.
    let mut fleet = Fleet::new("serve-pg-answer", "");
    let labels = ["ask1", "ask2", "ask3", "ask4"];
    let runs: Vec<u64> =
        labels.iter().map(|l| fleet.submit(WORKFLOW, l, &[PLUGIN], true)).collect();
    fleet.start_serve();
    fleet.start_worker("5");
    fleet.start_worker("5");
    for (run, label) in runs.iter().zip(labels) {
        fleet.wait_for(*run, &["awaiting_input"]);
        let questions = fleet.serve().get(&format!("/api/v1/runs/{run}/questions"), 200);
        let list = questions["questions"].as_array().unwrap();
        assert_eq!(list.len(), 1, "{questions}");
        let question = list[0]["id"].as_u64().unwrap();
        assert!(
            !fleet.ledger().iter().any(|l| l.starts_with(&format!("{label} "))),
            "nothing of {label} ran before the answer"
        );
        let body = format!(r#"{{"question": {question}, "answer": "yes"}}"#);
        let answered = fleet.serve().post(&format!("/api/v1/runs/{run}/answer"), &body, 200);
        assert_eq!(answered["continues"], true, "{answered}");
        // The same question again is answered already.
        fleet.serve().post(&format!("/api/v1/runs/{run}/answer"), &body, 409);
    }
    for run in &runs {
        let shown = fleet.wait_for(*run, &["succeeded", "failed", "cancelled"]);
        assert_eq!(shown["run"]["status"], "succeeded", "{shown}: {}", fleet.logs());
        driven_by_workers_only(&fleet, *run);
    }
    let mut ledger = fleet.ledger();
    ledger.sort();
    let mut expected: Vec<String> =
        labels.iter().flat_map(|l| ["a", "b", "c"].map(|p| format!("{l} {p}"))).collect();
    expected.sort();
    assert_eq!(ledger, expected, "each effect exactly once");
    fleet.stop_workers();
}

/// The configuration of a model that takes its time (until `release`), for a stop.
fn slow_model(server: &ChatServer) -> String {
    format!(
        "default_model = \"slow/m\"\n\n[[provider]]\nname = \"slow\"\nkind = \"openai\"\nbase_url = \"{}\"\n\n\
         [[model]]\naccount = \"slow\"\nid = \"m\"\nprovider = \"slow\"\ncapabilities = {{ tool_calling = true }}\n",
        server.url
    )
}

/// (b) A side-effecting run cancelled through the API while a worker is inside its call,
/// and an agent's turn stopped through the API while a worker waits on its model: the
/// worker driving each hears of it through the journal. The cancelled run ends cancelled,
/// its in-flight call recorded cancelled and its effect done at most once, nothing after
/// it; the stopped turn's call fails with `call_stopped`, recorded on its task, and the
/// model is not asked again. Both workers exit 0.
#[test]
fn a_cancel_and_a_stop_through_the_api_reach_the_worker_driving_the_run() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    let release = Arc::new(AtomicBool::new(false));
    let held = Arc::clone(&release);
    let server = ChatServer::start(move |_| {
        for _ in 0..1_200 {
            if held.load(Ordering::SeqCst) {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        ChatServer::answer("too late")
    });
    let mut fleet = Fleet::new("serve-pg-steer", &slow_model(&server));
    fleet.trust(PLUGIN);
    fleet.start_serve();
    fleet.start_worker("5");
    fleet.start_worker("5");

    // The cancel: step a is a 3 s side effect.
    let run = fleet.submit(SLOW, "c1", &[PLUGIN], false);
    fleet.wait_for_active_task(run);
    let cancelled = fleet.serve().post(&format!("/api/v1/runs/{run}/cancel"), "", 200);
    assert_eq!(cancelled["run"], run, "{cancelled}");
    fleet.wait_for(run, &["cancelled"]);
    let end = Instant::now() + PATIENCE;
    let step_a = loop {
        let list = tasks(fleet.serve(), run);
        let step = list.iter().find(|t| t["target"] == "record").cloned();
        // The worker's drive stops once it hears of the cancel; its call ends recorded.
        if let Some(step) = step.filter(|t| t["status"] != "running") {
            break step;
        }
        assert!(Instant::now() < end, "the cancelled call stayed running: {list:?}");
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(step_a["status"], "cancelled", "{step_a}");
    let effects = |label: &str| fleet.ledger().iter().filter(|l| *l == label).count();
    assert!(effects("c1 a") <= 1, "{:?}", fleet.ledger());
    assert_eq!(effects("c1 b"), 0, "nothing runs after a cancel: {:?}", fleet.ledger());

    // The stop: the agent's turn waits on the slow model.
    let agent = "examples/agents/minimal.toml";
    let submitted =
        fleet.clio(&["run", agent, "--input", "Take your time", "--no-input", "--detach"]);
    assert_eq!(submitted.code, 0, "{}", submitted.render());
    let run: u64 = submitted.stdout.trim().parse().unwrap();
    let end = Instant::now() + PATIENCE;
    while server.requests().is_empty() {
        assert!(Instant::now() < end, "the model was never asked: {}", fleet.logs());
        std::thread::sleep(Duration::from_millis(50));
    }
    // A flow is never stopped, through the journal as here.
    let list = tasks(fleet.serve(), run);
    if let Some(flow) = list.iter().find(|t| t["kind"] == "flow") {
        let body = format!(r#"{{"task": {}}}"#, flow["id"]);
        let refused = fleet.serve().post(&format!("/api/v1/runs/{run}/stop"), &body, 400);
        assert!(refused.to_string().contains("never a started flow"), "{refused}");
    }
    let stopped = fleet.serve().post(&format!("/api/v1/runs/{run}/stop"), "", 200);
    let ids = stopped["stopped"].as_array().cloned().unwrap_or_default();
    assert_eq!(ids.len(), 1, "the worker stopped the live turn: {stopped}: {}", fleet.logs());
    let shown = fleet.wait_for(run, &["succeeded", "failed", "cancelled"]);
    release.store(true, Ordering::SeqCst);
    let turn = tasks(fleet.serve(), run)
        .into_iter()
        .find(|t| t["id"] == ids[0])
        .unwrap_or_else(|| panic!("{shown}"));
    assert_eq!(turn["status"], "failed", "{turn}");
    assert!(turn.to_string().contains("call_stopped"), "{turn}");
    assert_eq!(server.requests().len(), 1, "the stopped turn is not asked again");
    let events = fleet.serve().get(&format!("/api/v1/runs/{run}/events"), 200);
    let text = events.to_string();
    assert!(text.contains("stop_requested") && text.contains("stop_done"), "{events}");
    driven_by_workers_only(&fleet, run);
    // The run has ended: there is nothing to stop.
    fleet.serve().post(&format!("/api/v1/runs/{run}/stop"), "", 409);
    fleet.stop_workers();
}

/// A plugin of one read-only tool `name` that runs `script` (sh, in the workspace) and
/// answers `{}`: a call of it cut short is done again on resume.
fn waiting_plugin(home: &Path, name: &str, script: &str) -> PathBuf {
    plugin_of(home, name, "read_only = true", script)
}

/// A plugin of one tool `name` declared with `declared` (its permission) that runs `script`.
fn plugin_of(home: &Path, name: &str, declared: &str, script: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let plugin = home.join(name);
    let dir = plugin.join("ai.iowarp.clio");
    std::fs::create_dir_all(dir.join("bin")).unwrap();
    std::fs::write(
        dir.join("plugin.toml"),
        format!(
            "id = \"{name}\"\nversion = \"0.1.0\"\ndescription = \"A test tool.\"\n\n\
             [[tools]]\nname = \"{name}\"\ndescription = \"A test tool.\"\n{declared}\n\
             command = \"bin/{name}\"\n"
        ),
    )
    .unwrap();
    let program = dir.join("bin").join(name);
    std::fs::write(&program, format!("#!/bin/sh\ncat > /dev/null\n{script}\necho '{{}}'\n"))
        .unwrap();
    std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).unwrap();
    plugin
}

/// A read-only tool that takes 3 s.
fn pause_plugin(home: &Path) -> PathBuf {
    waiting_plugin(home, "pause", "sleep 3")
}

/// (c) A run whose worker is SIGKILLed mid-call is resumed through the API: refused (409)
/// while a live worker holds it, then, once its lease has lapsed, handed back to the
/// workers (serve drives nothing: the run is interrupted and claimable), and a worker
/// started later finishes it: the read-only call cut short is done again, the side effect
/// after it once.
#[test]
fn a_run_whose_worker_died_is_resumed_through_the_api_and_finished_by_a_worker() {
    let mut fleet = Fleet::new("serve-pg-resume", "");
    let pause = pause_plugin(&fleet.home);
    let pause = pause.to_str().unwrap().to_owned();
    fleet.trust(PLUGIN);
    fleet.trust(&pause);
    let workflow = fleet.home.join("wf.json");
    std::fs::write(
        &workflow,
        r#"{"steps": [
            {"id": "a", "target": "pause", "input": {}},
            {"id": "b", "target": "record", "input": {"label": "$task", "part": "b"}, "after": ["a"]}
        ]}"#,
    )
    .unwrap();
    let run = fleet.submit(workflow.to_str().unwrap(), "r1", &[PLUGIN, &pause], false);
    fleet.start_serve();
    let first = fleet.start_worker("2");
    fleet.wait_for_active_task(run);
    // A live worker drives it: a resume is refused, and changes nothing.
    let refused = fleet.serve().post(&format!("/api/v1/runs/{run}/resume"), "", 409);
    assert!(refused.to_string().contains("holds its lease"), "{refused}");
    fleet.kill(first);
    // Once the dead worker's lease lapses, the resume hands the run back to the workers.
    let end = Instant::now() + PATIENCE;
    let resumed = loop {
        let (code, body) = fleet.serve().send("POST", &format!("/api/v1/runs/{run}/resume"), "");
        if code == 200 {
            break serde_json::from_str::<Value>(&body).unwrap();
        }
        assert_eq!(code, 409, "{body}");
        assert!(Instant::now() < end, "the resume was refused past the lease: {body}");
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_eq!(resumed["status"], "resumed", "{resumed}");
    assert_eq!(resumed["continues"], "workers", "{resumed}");
    // No worker runs now and serve drives nothing: the run waits, interrupted, its cut
    // call recorded so.
    let shown = fleet.serve().get(&format!("/api/v1/runs/{run}"), 200);
    assert_eq!(shown["run"]["status"], "interrupted", "{shown}");
    let cut = tasks(fleet.serve(), run);
    assert!(cut.iter().any(|t| t["target"] == "pause" && t["status"] == "interrupted"), "{cut:?}");
    fleet.start_worker("5");
    fleet.start_worker("5");
    let shown = fleet.wait_for(run, &["succeeded", "failed", "cancelled"]);
    assert_eq!(shown["run"]["status"], "succeeded", "{shown}: {}", fleet.logs());
    assert_eq!(fleet.ledger(), ["r1 b"], "the side effect once");
    driven_by_workers_only(&fleet, run);
    // Ended, it is not resumed again.
    fleet.serve().post(&format!("/api/v1/runs/{run}/resume"), "", 409);
    fleet.stop_workers();
}

/// Opens the event stream at `path`; returns its lines once its status line came (the
/// stream has made its first read of the run by then).
fn open_stream(serve: &Serve, path: &str) -> std::io::Lines<BufReader<TcpStream>> {
    let mut stream = TcpStream::connect(&serve.addr).unwrap();
    stream.set_read_timeout(Some(PATIENCE)).unwrap();
    let request = format!("GET {path} HTTP/1.0\r\nHost: {}\r\n\r\n", serve.addr);
    stream.write_all(request.as_bytes()).unwrap();
    let mut lines = BufReader::new(stream).lines();
    let status = lines.next().unwrap().unwrap();
    assert!(status.starts_with("HTTP/1.0 200"), "{status}");
    lines
}

/// Reads an event stream until its `end` event; returns each entry's `seq` and the end.
fn read_stream(lines: std::io::Lines<BufReader<TcpStream>>) -> (Vec<u64>, Value) {
    let (mut seqs, mut kind) = (Vec::new(), String::new());
    for line in lines {
        let line = line.unwrap();
        if let Some(name) = line.strip_prefix("event: ") {
            kind = name.to_owned();
        } else if let Some(data) = line.strip_prefix("data: ") {
            let value: Value = serde_json::from_str(data).unwrap();
            match kind.as_str() {
                "entry" => seqs.push(value["seq"].as_u64().unwrap()),
                "end" => return (seqs, value),
                other => panic!("unexpected event {other}: {data}"),
            }
        }
    }
    panic!("the stream ended without an end event after {seqs:?}")
}

/// (d) The event stream of a run a worker drives, opened before any worker runs: every
/// entry the worker writes comes, once and in order, then the run's end.
#[test]
fn the_event_stream_follows_a_run_a_worker_drives() {
    let mut fleet = Fleet::new("serve-pg-stream", "");
    fleet.trust(PLUGIN);
    let run = fleet.submit(WORKFLOW, "s1", &[PLUGIN], false);
    fleet.start_serve();
    let path = format!("/api/v1/runs/{run}/events/stream");
    let lines = open_stream(fleet.serve(), &path);
    // Only now does a worker claim the run: each entry comes while the stream is open.
    fleet.start_worker("5");
    fleet.start_worker("5");
    let (seqs, end) = read_stream(lines);
    assert_eq!(end["status"], "succeeded", "{end}");
    let dense: Vec<u64> = (0..seqs.len() as u64).collect();
    assert_eq!(seqs, dense, "every entry once, in order");
    let events = fleet.serve().get(&format!("/api/v1/runs/{run}/events"), 200);
    assert_eq!(events["entries"].as_array().unwrap().len(), seqs.len(), "{events}");
    assert!(seqs.len() >= 6, "the calls of three steps: {events}");
    assert_eq!(fleet.ledger(), ["s1 a", "s1 b", "s1 c"]);
    // Opened after the end, a stream gives the same entries and the end at once.
    let (again, end) = read_stream(open_stream(fleet.serve(), &path));
    assert_eq!(again, seqs);
    assert_eq!(end["status"], "succeeded");
    // A run created through the API is submitted to the workers, and one finishes it.
    let workflow: Value =
        serde_json::from_str(&std::fs::read_to_string(workspace_root().join(WORKFLOW)).unwrap())
            .unwrap();
    let body = serde_json::json!({
        "target": "workflow",
        "input": {"workflow": workflow, "task": "s2"},
        "plugins": [workspace_root().join(PLUGIN)],
        "workspace": fleet.workspace,
    });
    let created = fleet.serve().post("/api/v1/runs", &body.to_string(), 200);
    assert_eq!(created["status"], "submitted", "{created}");
    let second = created["run"].as_u64().unwrap();
    let shown = fleet.wait_for(second, &["succeeded", "failed", "cancelled"]);
    assert_eq!(shown["run"]["status"], "succeeded", "{shown}: {}", fleet.logs());
    assert_eq!(fleet.ledger(), ["s1 a", "s1 b", "s1 c", "s2 a", "s2 b", "s2 c"]);
    driven_by_workers_only(&fleet, second);
    fleet.stop_workers();
}

/// (e) A question in one branch answered through the API while a worker still drives the
/// run's other branch (the run is `running`, not waiting): the answer reaches the journal,
/// not the worker's live run; once the other branch ends and the run waits, the worker sees
/// that its questions are answered and hands it back, and a worker finishes it with the
/// answer: the asking step's effect exactly once.
#[test]
fn an_answer_given_while_a_worker_drives_the_run_is_not_lost() {
    let mut fleet = Fleet::new("serve-pg-answer-live", "");
    // Waits for `release` in the workspace (at most two minutes).
    let hold = waiting_plugin(
        &fleet.home,
        "hold",
        "i=0; while [ ! -e release ] && [ $i -lt 1200 ]; do sleep 0.1; i=$((i+1)); done",
    );
    let hold = hold.to_str().unwrap().to_owned();
    fleet.trust(&hold);
    // A side effect that asks the person each time, from a trusted plugin.
    let asker = plugin_of(
        &fleet.home,
        "asker",
        "read_only = false\npermission = \"ask\"",
        "echo 'l1 q' >> ledger.log",
    );
    let asker = asker.to_str().unwrap().to_owned();
    fleet.trust(&asker);
    let workflow = fleet.home.join("wf.json");
    std::fs::write(
        &workflow,
        r#"{"steps": [
            {"id": "q", "target": "asker", "input": {}},
            {"id": "h1", "target": "hold", "input": {}},
            {"id": "h2", "target": "hold", "input": {"again": true}, "after": ["h1"]}
        ]}"#,
    )
    .unwrap();
    let run = fleet.submit(workflow.to_str().unwrap(), "l1", &[&asker, &hold], true);
    fleet.start_serve();
    fleet.start_worker("5");
    fleet.start_worker("5");
    let end = Instant::now() + PATIENCE;
    let question = loop {
        let questions = fleet.serve().get(&format!("/api/v1/runs/{run}/questions"), 200);
        if let Some(q) = questions["questions"].as_array().and_then(|l| l.first()) {
            break q["id"].as_u64().unwrap();
        }
        assert!(Instant::now() < end, "no question: {}", fleet.logs());
        std::thread::sleep(Duration::from_millis(100));
    };
    let shown = fleet.serve().get(&format!("/api/v1/runs/{run}"), 200);
    assert_eq!(shown["run"]["status"], "running", "the held branch keeps it running: {shown}");
    let body = format!(r#"{{"question": {question}, "answer": "yes"}}"#);
    let answered = fleet.serve().post(&format!("/api/v1/runs/{run}/answer"), &body, 200);
    assert_eq!(answered["continues"], true, "the worker driving it goes on: {answered}");
    std::fs::write(fleet.workspace.join("release"), "").unwrap();
    let shown = fleet.wait_for(run, &["succeeded", "failed", "cancelled"]);
    assert_eq!(shown["run"]["status"], "succeeded", "{shown}: {}", fleet.logs());
    assert_eq!(fleet.ledger(), ["l1 q"], "the asking step's effect once");
    driven_by_workers_only(&fleet, run);
    fleet.stop_workers();
}

/// `clio runs stop` from another terminal reaches a run that `clio run` drives in the
/// foreground on a shared journal (no socket there: each process opens the database), as
/// it reaches a worker's: the foreground drive reads the `stop_requested` event, ends the
/// turn and answers; the run ends with the turn's call `call_stopped`.
#[test]
fn runs_stop_reaches_a_run_driven_in_the_foreground_on_a_shared_journal() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    let release = Arc::new(AtomicBool::new(false));
    let held = Arc::clone(&release);
    let server = ChatServer::start(move |_| {
        for _ in 0..1_200 {
            if held.load(Ordering::SeqCst) {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        ChatServer::answer("too late")
    });
    let fleet = Fleet::new("serve-pg-stop-foreground", &slow_model(&server));
    let child = Command::new(env!("CARGO_BIN_EXE_clio"))
        .args(["--home", fleet.h(), "run", "examples/agents/minimal.toml"])
        .args(["--input", "Take your time", "--no-input", "--json"])
        .current_dir(workspace_root())
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let end = Instant::now() + PATIENCE;
    while server.requests().is_empty() {
        assert!(Instant::now() < end, "the model was never asked");
        std::thread::sleep(Duration::from_millis(50));
    }
    let stopped = Command::new(env!("CARGO_BIN_EXE_clio"))
        .args(["--home", fleet.h(), "runs", "stop", "1", "--json"])
        .current_dir(workspace_root())
        .env_remove("RUST_LOG")
        .env("CLIO_STOP_WAIT_SECS", "120")
        .output()
        .unwrap();
    release.store(true, Ordering::SeqCst);
    let stdout = String::from_utf8_lossy(&stopped.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&stopped.stderr);
    assert_eq!(stopped.status.code(), Some(0), "{stdout}{stderr}");
    let value: Value = serde_json::from_str(&stdout).unwrap();
    let ids = value["stopped"].as_array().cloned().unwrap_or_default();
    assert_eq!(ids.len(), 1, "{value}");
    let output = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains("call_stopped"), "{stdout}");
    assert_eq!(server.requests().len(), 1, "the stopped turn is not asked again");
}

/// The viewer's page on a shared journal in headless Chromium (`tests/e2e/viewer.mjs`, as
/// `viewer_e2e` runs it, given this fleet's home): the runs list, a run's page with its
/// DAG, the editor's question answered with the page's Approve button while two workers
/// drive the run, the run's end seen live, and the Cancel button of a waiting run.
#[test]
fn the_viewer_reads_and_steers_a_shared_journal_in_headless_chromium() {
    let mut fleet = Fleet::new("serve-pg-viewer", "");
    fleet.start_worker("5");
    fleet.start_worker("5");
    let dir = workspace_root().join("crates/clio-cli/tests/e2e");
    assert!(
        dir.join("node_modules/playwright-core").is_dir(),
        "playwright-core is missing: `cargo xtask test` installs it (or `npm ci` in {})",
        dir.display()
    );
    let output = Command::new("node")
        .arg("viewer.mjs")
        .current_dir(&dir)
        .env("CLIO_BIN", env!("CARGO_BIN_EXE_clio"))
        .env("CLIO_VIEWER_HOME", &fleet.home)
        .env("CLIO_SCREENSHOT", fleet.home.join("viewer.png"))
        .env_remove("RUST_LOG")
        .output()
        .unwrap_or_else(|e| panic!("cannot run node (install nodejs): {e}"));
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "viewer e2e failed:\n{stdout}\n{stderr}\n{}", fleet.logs());
    assert!(stdout.contains("viewer e2e: ok"), "{stdout}\n{stderr}");
    assert!(stdout.contains("from its page"), "the Cancel button was tried: {stdout}");
    fleet.stop_workers();
}
