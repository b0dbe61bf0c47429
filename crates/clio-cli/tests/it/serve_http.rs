//! `clio serve`'s HTTP API (docs/http-api.md) and the runs it drives: a write needs the token
//! (401) and is refused from another site (403), every route answers JSON, the event
//! stream of a live run delivers its entries in order, an answer given through the API
//! continues a waiting run, `--detach` submits runs, and a run a crash left interrupted is
//! resumed when serve starts.
//!
//! The client is a few lines of HTTP/1.0 over a TCP stream (the response ends when the
//! connection closes, so no chunked decoding is needed, even for the event stream).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use serde_json::Value;

use crate::serve::{Owner, PLUGIN, case, clio_at, status, wait_for};
use crate::support::Sandbox;

/// A `clio serve --port 0` in the background, with its address and token.
struct Server {
    owner: Owner,
    /// `127.0.0.1:PORT`.
    addr: String,
    token: String,
}

impl Server {
    fn start(case: &Sandbox) -> Server {
        let mut owner = Owner::spawn(&["--home", case.h(), "serve", "--port", "0"]);
        let stdout = owner.child.as_mut().unwrap().stdout.take().unwrap();
        let mut line = String::new();
        BufReader::new(stdout).read_line(&mut line).unwrap();
        let url = line.trim();
        let rest = url.strip_prefix("http://").unwrap_or_else(|| panic!("no address: {url}"));
        let (addr, token) = rest.split_once("/#token=").unwrap();
        let kept = std::fs::read_to_string(case.home.join("serve.token")).unwrap();
        assert_eq!(kept.trim(), token, "the printed token is the kept one");
        Server { owner, addr: addr.to_owned(), token: token.to_owned() }
    }

    /// Sends one request; returns the status and the body.
    fn send(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &str,
    ) -> (u16, String) {
        let mut stream = TcpStream::connect(&self.addr).unwrap();
        let mut request = format!("{method} {path} HTTP/1.0\r\nHost: {}\r\n", self.addr);
        for (name, value) in headers {
            request.push_str(&format!("{name}: {value}\r\n"));
        }
        request.push_str(&format!("Content-Length: {}\r\n\r\n{body}", body.len()));
        stream.write_all(request.as_bytes()).unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).unwrap();
        let (head, body) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
        let code = head.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
        (code, body.to_owned())
    }

    /// A GET that must answer `code` with JSON; returns the JSON.
    fn get(&self, path: &str, code: u16) -> Value {
        let (got, body) = self.send("GET", path, &[], "");
        assert_eq!(got, code, "GET {path}: {body}");
        serde_json::from_str(&body).unwrap_or_else(|e| panic!("GET {path}: {e}: {body}"))
    }

    /// A POST with the token that must answer `code` with JSON; returns the JSON.
    fn post(&self, path: &str, body: &str, code: u16) -> Value {
        let bearer = format!("Bearer {}", self.token);
        let (got, text) = self.send("POST", path, &[("Authorization", &bearer)], body);
        assert_eq!(got, code, "POST {path}: {text}");
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("POST {path}: {e}: {text}"))
    }
}

/// A home for the README's main job, with its plugin trusted.
fn main_job(name: &str) -> Sandbox {
    let plugin = "examples/marketplace/plugins/materials";
    Sandbox::new(&format!("http-{name}"), &["workflow", "run", "x", "--plugin", plugin])
}

/// Submits the main job with `--approve-edits` to the serve of `case`; returns its id.
fn submit_main_job(case: &Sandbox) -> u64 {
    let submitted = clio_at(
        case,
        &[
            "workflow",
            "run",
            "examples/workflows/batch7.json",
            "--task",
            "Review batch 7",
            "--plugin",
            "examples/marketplace/plugins/materials",
            "--workspace",
            "examples/workspace",
            "--models",
            "examples/models/models.toml",
            "--editor",
            "independent_reviewer",
            "--approve-edits",
            "--detach",
        ],
    );
    assert_eq!(submitted.code, 0, "{}", submitted.render());
    submitted.stdout.trim().parse().unwrap_or_else(|_| panic!("{}", submitted.render()))
}

#[test]
fn writes_need_the_token_and_come_from_this_server_only() {
    let case = main_job("auth");
    let server = Server::start(&case);
    let run = submit_main_job(&case);
    let path = format!("/api/v1/runs/{run}/cancel");
    let (code, body) = server.send("POST", &path, &[], "");
    assert_eq!(code, 401, "{body}");
    let error: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(error["ok"], false);
    assert!(error["error"]["message"].as_str().unwrap().contains("needs the token"), "{body}");
    let (code, _) = server.send("POST", &path, &[("Authorization", "Bearer 00")], "");
    assert_eq!(code, 401, "a wrong token");
    let bearer = format!("Bearer {}", server.token);
    let auth = ("Authorization", bearer.as_str());
    for other in [("Origin", "http://evil.example"), ("Sec-Fetch-Site", "cross-site")] {
        let (code, body) = server.send("POST", &path, &[auth, other], "");
        assert_eq!(code, 403, "{other:?}: {body}");
        assert!(body.contains("another site"), "{body}");
    }
    // Another name for this address (DNS rebinding) may not even read.
    let mut stream = TcpStream::connect(&server.addr).unwrap();
    stream.write_all(b"GET /api/v1/runs HTTP/1.0\r\nHost: evil.example\r\n\r\n").unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    assert!(response.starts_with("HTTP/1.0 403"), "{response}");
    // The run is untouched by all of that: it goes on to its edit question.
    wait_for("the edit question", || status(&case, run) == "awaiting_input");
    let own = format!("http://{}", server.addr);
    let (code, body) = server.send("POST", &path, &[auth, ("Origin", &own)], "");
    assert_eq!(code, 200, "{body}");
    assert_eq!(status(&case, run), "cancelled");
    let again = server.post(&path, "", 409);
    assert_eq!(again["error"]["status"], 409);
    server.owner.signal("TERM");
}

#[test]
fn every_route_answers_json_and_an_answer_continues_the_waiting_run() {
    let case = main_job("routes");
    let server = Server::start(&case);
    let run = submit_main_job(&case);
    // The question is in the journal a moment before the drive, now waiting on it alone,
    // records the run's status: wait for both.
    wait_for("the edit question", || {
        let questions = server.get(&format!("/api/v1/runs/{run}/questions"), 200);
        !questions["questions"].as_array().unwrap().is_empty()
            && status(&case, run) == "awaiting_input"
    });
    let list = server.get("/api/v1/runs", 200);
    let first = &list.as_array().unwrap()[0];
    assert_eq!(first["id"], run);
    assert_eq!(first["status"], "awaiting_input");
    assert_eq!(first["flow_name"], "workflow");
    assert_eq!(first["models"][0], "offline/demo");
    let shown = server.get(&format!("/api/v1/runs/{run}"), 200);
    assert_eq!(shown["run"]["status"], "awaiting_input");
    assert_eq!(shown["summary"]["task"], "Review batch 7");
    let steps = shown["workflow"]["steps"].as_array().unwrap();
    let names: Vec<&str> = steps.iter().map(|s| s["id"].as_str().unwrap()).collect();
    assert_eq!(names, ["survey", "images", "tests", "relate", "review"]);
    assert_eq!(shown["workflow"]["edits"][0]["status"], "awaiting_decision");
    let question = shown["questions"][0]["id"].as_u64().unwrap();
    assert_eq!(shown["questions"][0]["schema"], "bool");
    let tasks = server.get(&format!("/api/v1/runs/{run}/tasks"), 200);
    let tasks = tasks["tasks"].as_array().unwrap();
    assert!(tasks.iter().any(|t| t["step"] == "review" && t["model"] == "offline/demo"));
    let events = server.get(&format!("/api/v1/runs/{run}/events"), 200);
    let n = events["entries"].as_array().unwrap().len() as u64;
    assert_eq!(n, question + 1, "the question is the last entry");
    let later = server.get(&format!("/api/v1/runs/{run}/events?after=5"), 200);
    assert_eq!(later["entries"][0]["seq"], 6);
    let plugins = server.get("/api/v1/plugins", 200);
    assert!(plugins["plugins"].is_array());

    let checked =
        server.post("/api/v1/workflows/check", r#"{"steps": [{"id": "a", "target": "t"}]}"#, 200);
    assert_eq!(checked["ok"], true, "{checked}");
    let toml = "[[steps]]\nid = \"a\"\ntarget = \"t\"\n[[steps]]\nid = \"b\"\ntarget = \"t\"\nafter = [\"a\"]\n";
    let checked = server.post("/api/v1/workflows/check", toml, 200);
    assert_eq!(checked["layers"], 2, "{checked}");
    let checked = server.post(
        "/api/v1/workflows/check",
        r#"{"steps": [{"id": "a", "target": "t", "after": ["zz"]}]}"#,
        200,
    );
    assert_eq!(checked["ok"], false, "{checked}");
    assert!(checked["problems"][0].as_str().unwrap().contains("zz"), "{checked}");

    // Errors are JSON too, with the status that says why.
    let missing = server.get("/api/v1/runs/99", 404);
    assert!(missing["error"]["message"].as_str().unwrap().starts_with("run 99 not found"));
    server.get("/api/v1/runs/abc", 400);
    server.get("/api/v1/nothing", 404);
    let answer = format!("/api/v1/runs/{run}/answer");
    server.post(&answer, "not json", 400);
    server.post(&answer, r#"{"question": 1, "answer": "yes"}"#, 404);
    server.post(&answer, &format!(r#"{{"question": {question}, "answer": "perhaps"}}"#), 400);

    let answered =
        server.post(&answer, &format!(r#"{{"question": {question}, "answer": "yes"}}"#), 200);
    assert_eq!(answered["answer"], true);
    assert_eq!(answered["continues"], true);
    wait_for("the run to go on and end", || status(&case, run) == "succeeded");
    let shown = server.get(&format!("/api/v1/runs/{run}"), 200);
    let steps = shown["workflow"]["steps"].as_array().unwrap();
    let added = steps.iter().find(|s| s["id"] == "porosity_check").expect("the approved step");
    assert_eq!(added["status"], "finished");
    assert_eq!(added["after"][0], "review");
    assert_eq!(shown["workflow"]["edits"][0]["status"], "applied");
    server.post(&answer, &format!(r#"{{"question": {question}, "answer": "yes"}}"#), 409);
    server.post(&format!("/api/v1/runs/{run}/resume"), "", 409);
    server.owner.signal("TERM");
}

/// Reads an event stream until its `end` event; returns each entry's `seq` and the end.
fn read_stream(
    server: &Server,
    path: &str,
    headers: &[(&str, &str)],
    mut seen: impl FnMut(u64),
) -> (Vec<u64>, Value) {
    let mut stream = TcpStream::connect(&server.addr).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let mut request = format!("GET {path} HTTP/1.0\r\nHost: {}\r\n", server.addr);
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("\r\n");
    stream.write_all(request.as_bytes()).unwrap();
    let mut lines = BufReader::new(stream).lines();
    let status = lines.next().unwrap().unwrap();
    assert!(status.starts_with("HTTP/1.0 200"), "{status}");
    let (mut seqs, mut kind) = (Vec::new(), String::new());
    for line in lines {
        let line = line.unwrap();
        if let Some(name) = line.strip_prefix("event: ") {
            kind = name.to_owned();
        } else if let Some(data) = line.strip_prefix("data: ") {
            let value: Value = serde_json::from_str(data).unwrap();
            match kind.as_str() {
                "entry" => {
                    let seq = value["seq"].as_u64().unwrap();
                    seqs.push(seq);
                    seen(seq);
                }
                "end" => return (seqs, value),
                other => panic!("unexpected event {other}: {data}"),
            }
        }
    }
    panic!("the stream ended without an end event after {seqs:?}")
}

#[test]
fn the_event_stream_delivers_a_live_runs_entries_in_order() {
    let case = case("http-stream", "hold.json");
    let server = Server::start(&case);
    let workflow = "crates/clio-cli/tests/data/serve/hold.json";
    let args = [
        "workflow",
        "run",
        workflow,
        "--task",
        "hold on",
        "--plugin",
        PLUGIN,
        "--workspace",
        case.ws(),
        "--detach",
    ];
    let submitted = clio_at(&case, &args);
    assert_eq!(submitted.code, 0, "{}", submitted.render());
    assert_eq!(submitted.stdout, "1\n");
    wait_for("the run in progress", || status(&case, 1) == "running");
    let release = case.workspace.join("release-hold");
    let mut released = false;
    // The run is released once the stream has delivered its first entries, so the rest
    // come live.
    let (seqs, end) = read_stream(&server, "/api/v1/runs/1/events/stream", &[], |_| {
        if !released {
            std::fs::write(&release, "").unwrap();
            released = true;
        }
    });
    assert_eq!(end["status"], "succeeded", "{end}");
    let dense: Vec<u64> = (0..seqs.len() as u64).collect();
    assert_eq!(seqs, dense, "every entry once, in order");
    let events = server.get("/api/v1/runs/1/events", 200);
    assert_eq!(events["entries"].as_array().unwrap().len(), seqs.len());
    // A browser that reconnects says where it was; `?after=` does the same.
    let last = seqs.len() as u64 - 1;
    assert!(last >= 3, "{seqs:?}");
    let (again, _) =
        read_stream(&server, "/api/v1/runs/1/events/stream", &[("Last-Event-ID", "1")], |_| {});
    assert_eq!(again.first(), Some(&2));
    let query = format!("/api/v1/runs/1/events/stream?after={}", last - 1);
    let (after, _) = read_stream(&server, &query, &[], |_| {});
    assert_eq!(after, vec![last]);
    server.owner.signal("TERM");
}

#[test]
fn serve_resumes_the_runs_a_crash_left_interrupted() {
    let case = case("http-resume", "hold.json");
    let server = Server::start(&case);
    let workflow = "crates/clio-cli/tests/data/serve/hold.json";
    let args = [
        "workflow",
        "run",
        workflow,
        "--task",
        "hold on",
        "--plugin",
        PLUGIN,
        "--workspace",
        case.ws(),
        "--detach",
        "--json",
    ];
    let submitted = clio_at(&case, &args);
    assert_eq!(submitted.code, 0, "{}", submitted.render());
    let value: Value = serde_json::from_str(&submitted.stdout).unwrap();
    assert_eq!(value["status"], "submitted");
    wait_for("the run in progress", || status(&case, 1) == "running");
    server.owner.kill();
    assert_eq!(status(&case, 1), "interrupted");
    std::fs::write(case.workspace.join("release-hold"), "").unwrap();
    let server = Server::start(&case);
    wait_for("the resumed run to end", || status(&case, 1) == "succeeded");
    server.owner.signal("INT");
    let stopped = server.owner.finish();
    assert_eq!(stopped.code, 0, "{}", stopped.render());
    assert!(stopped.stderr.contains("resuming run 1 (interrupted)"), "{}", stopped.render());
    assert!(stopped.stderr.contains("run 1 succeeded"), "{}", stopped.render());
}

#[test]
fn detach_needs_a_serve() {
    let case = case("http-detach", "hold.json");
    let workflow = "crates/clio-cli/tests/data/serve/hold.json";
    let outcome = clio_at(
        &case,
        &["workflow", "run", workflow, "--task", "t", "--plugin", PLUGIN, "--detach"],
    );
    assert_eq!(outcome.code, 1, "{}", outcome.render());
    assert!(outcome.stderr.contains("no `clio serve` holds this journal"), "{}", outcome.render());
    assert_eq!(status(&case, 1), "", "no run was created");
}

/// Issue 46 item 2 over HTTP: `POST /api/v1/runs/{id}/stop` (`{"task": n}` or no body) is
/// the route of `clio runs stop`: it needs the token, refuses a body that names no task
/// id, says when no model turn runs (a run waiting on a person has none), and refuses an
/// ended run with 409.
#[test]
fn stop_is_a_route_of_the_api() {
    let case = main_job("stop");
    let server = Server::start(&case);
    let run = submit_main_job(&case);
    let path = format!("/api/v1/runs/{run}/stop");
    let (code, _) = server.send("POST", &path, &[], "");
    assert_eq!(code, 401, "a stop needs the token");
    wait_for("the edit question", || status(&case, run) == "awaiting_input");
    let bad = server.post(&path, r#"{"task": "first"}"#, 400);
    assert!(bad["error"]["message"].as_str().unwrap().contains("task"), "{bad}");
    let bearer = format!("Bearer {}", server.token);
    let (code, body) = server.send("POST", &path, &[("Authorization", &bearer)], "");
    assert_ne!(code, 200, "{body}");
    assert!(body.contains("nothing was stopped") || body.contains("no live turn"), "{body}");
    server.post(&format!("/api/v1/runs/{run}/cancel"), "", 200);
    let ended = server.post(&path, "", 409);
    assert_eq!(ended["error"]["status"], 409);
    server.owner.signal("TERM");
}

/// Issue 46 item 5 over HTTP: `POST /api/v1/runs` creates a run whose input is any JSON
/// value; here the workflow flow's own fields, as a flow calls it, and serve drives it.
#[test]
fn a_run_created_over_http_takes_structured_input() {
    let case = main_job("create");
    let server = Server::start(&case);
    let workflow: Value = serde_json::from_str(
        &std::fs::read_to_string(
            crate::support::workspace_root().join("examples/workflows/batch7.json"),
        )
        .unwrap(),
    )
    .unwrap();
    let root = crate::support::workspace_root();
    let body = serde_json::json!({
        "target": "workflow",
        "input": {
            "workflow": workflow,
            "task": "Review batch 7",
            "editors": ["independent_reviewer"],
            "approve_edits": true,
        },
        "plugins": [root.join("examples/marketplace/plugins/materials")],
        "workspace": root.join("examples/workspace"),
        "models": root.join("examples/models/models.toml"),
    });
    let created = server.post("/api/v1/runs", &body.to_string(), 200);
    assert_eq!(created["status"], "submitted", "{created}");
    let run = created["run"].as_u64().unwrap();
    wait_for("the edit question", || status(&case, run) == "awaiting_input");
    let shown = server.get(&format!("/api/v1/runs/{run}"), 200);
    assert_eq!(shown["run"]["input"]["task"], "Review batch 7", "{shown}");
    assert_eq!(shown["run"]["input"]["approve_edits"], true, "{shown}");
    let bad = server.post("/api/v1/runs", r#"{"input": "no target"}"#, 400);
    assert!(bad["error"]["message"].as_str().unwrap().contains("target"), "{bad}");
    server.post(&format!("/api/v1/runs/{run}/cancel"), "", 200);
    server.owner.signal("TERM");
}
