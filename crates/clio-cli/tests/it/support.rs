//! Running the built `clio` binary from the workspace root and capturing what it prints,
//! and an OpenAI-compatible chat server on localhost for it to talk to.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

/// What one run of `clio` did.
pub(crate) struct Outcome {
    pub(crate) code: i32,
    pub(crate) stdout: String,
    pub(crate) stderr: String,
}

impl Outcome {
    /// Renders the outcome as one text for a snapshot.
    pub(crate) fn render(&self) -> String {
        let mut text = format!("exit: {}\n", self.code);
        if !self.stdout.is_empty() {
            text.push_str("--- stdout\n");
            text.push_str(&self.stdout);
        }
        if !self.stderr.is_empty() {
            text.push_str("--- stderr\n");
            text.push_str(&self.stderr);
        }
        text
    }
}

/// Returns the workspace root, where README commands are run from.
pub(crate) fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap()
}

/// Runs the `clio` binary with `args` in `dir`, with a home of its own.
pub(crate) fn clio_in(dir: &Path, args: &[&str]) -> Outcome {
    let home = std::env::temp_dir().join(format!("clio-cli-default-home-{}", std::process::id()));
    let output = Command::new(env!("CARGO_BIN_EXE_clio"))
        .args(args)
        .current_dir(dir)
        .env("CLIO_HOME", home)
        // A developer's RUST_LOG would add log lines to what the tests read.
        .env_remove("RUST_LOG")
        .output()
        .unwrap();
    Outcome {
        code: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8(output.stdout).unwrap(),
        stderr: String::from_utf8(output.stderr).unwrap(),
    }
}

/// Runs the `clio` binary with `args` in the workspace root.
pub(crate) fn clio(args: &[&str]) -> Outcome {
    clio_in(&workspace_root(), args)
}

/// Returns a fresh, empty folder to use as `--home`.
pub(crate) fn temp_home(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("clio-cli-home-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A home with a workspace folder in it, for the crash tests whose test tools write
/// `tally.log` in the workspace and are killed by kill files left there.
pub(crate) struct Sandbox {
    pub(crate) home: PathBuf,
    pub(crate) workspace: PathBuf,
    // The clio arguments that start its run, without the home and the workspace.
    command: Vec<String>,
}

impl Sandbox {
    /// Returns a sandbox whose run is `command`; the plugin folders it passes with
    /// `--plugin` are trusted in its home first, as a person would before an unattended
    /// run (an untrusted plugin's code would wait for the person's answer).
    pub(crate) fn new(name: &str, command: &[&str]) -> Sandbox {
        let home = temp_home(name);
        let workspace = home.join("workspace");
        std::fs::create_dir_all(&workspace).unwrap();
        // The test tools kill the clio process that runs them, which is what the code
        // sandbox is there to prevent (a pid namespace, or Landlock's signal scope): these
        // crash tests run their tools unconfined.
        std::fs::write(home.join("config.toml"), "[sandbox]\nmode = \"off\"\n").unwrap();
        let h = home.to_str().unwrap();
        for pair in command.windows(2).filter(|pair| pair[0] == "--plugin") {
            let trusted = clio(&["--home", h, "plugin", "trust", pair[1]]);
            assert_eq!(trusted.code, 0, "{}", trusted.render());
        }
        let command = command.iter().map(|a| (*a).to_owned()).collect();
        Sandbox { home, workspace, command }
    }

    /// Starts its run (run 1) quietly in its home and workspace; `kill` names a kill file
    /// to leave in the workspace first.
    pub(crate) fn run(&self, kill: Option<&str>) -> Outcome {
        if let Some(kill) = kill {
            self.arm(kill);
        }
        let mut args = vec!["--home", self.h()];
        args.extend(self.command.iter().map(String::as_str));
        args.extend(["--workspace", self.ws(), "--quiet"]);
        clio(&args)
    }

    pub(crate) fn h(&self) -> &str {
        self.home.to_str().unwrap()
    }

    pub(crate) fn ws(&self) -> &str {
        self.workspace.to_str().unwrap()
    }

    /// Leaves kill file `kill` in the workspace.
    pub(crate) fn arm(&self, kill: &str) {
        std::fs::write(self.workspace.join(kill), "").unwrap();
    }

    /// Resumes run 1 quietly.
    pub(crate) fn resume(&self) -> Outcome {
        clio(&["--home", self.h(), "runs", "resume", "1", "--quiet"])
    }

    /// Returns the lines of tally.log: one per side effect.
    pub(crate) fn tallies(&self) -> Vec<String> {
        let log = std::fs::read_to_string(self.workspace.join("tally.log")).unwrap_or_default();
        log.lines().map(str::to_owned).collect()
    }
}

/// Replaces progress timestamps (`[   0.1s]`), task durations (`in 0.0s`) and the time of
/// a run's closing summary (`after 0.3s`) so that snapshots do not depend on timing.
pub(crate) fn redact_progress(text: &str) -> String {
    let mut out = String::new();
    for line in text.split_inclusive('\n') {
        let mut line = line.to_owned();
        if line.starts_with('[')
            && let Some(end) = line.find("s] ")
        {
            line = format!("[t]{}", &line[end + 2..]);
        }
        for word in [" in ", " after "] {
            if let Some(start) = line.find(word) {
                let rest = &line[start + word.len()..];
                let len =
                    rest.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(rest.len());
                if len > 0 && rest[len..].starts_with('s') {
                    line = format!("{}{word}[t]{}", &line[..start], &rest[len + 1..]);
                }
            }
        }
        out.push_str(&line);
    }
    out
}

/// Decides the assistant message a [`ChatServer`] answers a chat-completions request with.
type Responder = dyn Fn(&Value) -> Value + Send + Sync;

/// An OpenAI-compatible chat-completions server on localhost: each request is answered
/// with the message its responder returns, and every request body is kept.
pub(crate) struct ChatServer {
    pub(crate) url: String,
    requests: Arc<Mutex<Vec<Value>>>,
}

impl ChatServer {
    /// Starts a server whose answers `respond` decides from each request body.
    pub(crate) fn start(respond: impl Fn(&Value) -> Value + Send + Sync + 'static) -> ChatServer {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/v1", listener.local_addr().unwrap());
        let requests = Arc::new(Mutex::new(Vec::new()));
        let kept = Arc::clone(&requests);
        let respond: Arc<Responder> = Arc::new(respond);
        // The thread ends with the test binary.
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                let (kept, respond) = (Arc::clone(&kept), Arc::clone(&respond));
                std::thread::spawn(move || serve(stream, &kept, &*respond));
            }
        });
        ChatServer { url, requests }
    }

    /// Returns an assistant message with `text` and no tool call.
    pub(crate) fn answer(text: &str) -> Value {
        json!({"role": "assistant", "content": text})
    }

    /// Returns an assistant message that calls tool `name` with `arguments`.
    pub(crate) fn tool_call(id: &str, name: &str, arguments: &Value) -> Value {
        json!({"role": "assistant", "content": null, "tool_calls": [{
            "id": id, "type": "function",
            "function": {"name": name, "arguments": arguments.to_string()}
        }]})
    }

    /// Returns the request bodies received so far, in order.
    pub(crate) fn requests(&self) -> Vec<Value> {
        self.requests.lock().unwrap().clone()
    }
}

/// Reads one HTTP request from `stream`, keeps its JSON body and answers it.
fn serve(mut stream: TcpStream, kept: &Mutex<Vec<Value>>, respond: &Responder) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut length = 0;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some((name, value)) = line.split_once(':')
            && name.eq_ignore_ascii_case("content-length")
        {
            length = value.trim().parse().unwrap_or(0);
        }
    }
    let mut body = vec![0; length];
    if reader.read_exact(&mut body).is_err() {
        return;
    }
    let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    kept.lock().unwrap().push(request.clone());
    let message = respond(&request);
    let finish = if message.get("tool_calls").is_some() { "tool_calls" } else { "stop" };
    let body = json!({
        "id": "chatcmpl-1", "object": "chat.completion", "model": request["model"],
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 100, "completion_tokens": 5, "total_tokens": 105}
    })
    .to_string();
    let response = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = stream.write_all(response.as_bytes());
}

/// A case for `clio worker`s on a shared PostgreSQL journal: a database of its own, a home
/// with the sandbox off (the crash tests' tools kill the process that runs them, which the
/// sandbox prevents) and a workspace `ws` in it.
pub(crate) struct FleetCase {
    pub(crate) url: String,
    pub(crate) home: PathBuf,
    pub(crate) ws: PathBuf,
}

impl FleetCase {
    /// A fresh case named `name` whose home trusts plugin folder `plugin`.
    pub(crate) fn new(name: &str, plugin: &str) -> FleetCase {
        let url = clio_postgres::test_server::fresh_database();
        let home = temp_home(name);
        let ws = home.join("ws");
        std::fs::create_dir_all(&ws).unwrap();
        std::fs::write(home.join("config.toml"), "[sandbox]\nmode = \"off\"\n").unwrap();
        let case = FleetCase { url, home, ws };
        let trusted = case.clio(&["plugin", "trust", plugin]);
        assert_eq!(trusted.code, 0, "{}", trusted.render());
        case
    }

    pub(crate) fn h(&self) -> &str {
        self.home.to_str().unwrap()
    }

    /// Runs `clio` with this case's home and journal and `args`.
    pub(crate) fn clio(&self, args: &[&str]) -> Outcome {
        let mut all = vec!["--home", self.h(), "--journal", &self.url];
        all.extend_from_slice(args);
        clio(&all)
    }

    /// Starts a worker with a 2 s lease that exits once idle for 3 s; its log goes to
    /// `worker-<n>.log` in the home.
    pub(crate) fn worker(&self, n: usize) -> std::process::Child {
        let log = std::fs::File::create(self.home.join(format!("worker-{n}.log"))).unwrap();
        Command::new(env!("CARGO_BIN_EXE_clio"))
            .args(["--home", self.h(), "--journal", &self.url, "worker"])
            .args(["--concurrency", "2", "--lease", "2", "--exit-when-idle", "3"])
            .current_dir(workspace_root())
            .env_remove("RUST_LOG")
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(log)
            .spawn()
            .expect("a worker starts")
    }

    /// What worker `n` logged.
    pub(crate) fn log(&self, n: usize) -> String {
        std::fs::read_to_string(self.home.join(format!("worker-{n}.log"))).unwrap_or_default()
    }

    /// Leaves kill file `name` in the workspace.
    pub(crate) fn arm(&self, name: &str) {
        std::fs::write(self.ws.join(name), "").unwrap();
    }

    /// The lines of tally.log in the workspace: one per side effect.
    pub(crate) fn tallies(&self) -> Vec<String> {
        let log = std::fs::read_to_string(self.ws.join("tally.log")).unwrap_or_default();
        log.lines().map(str::to_owned).collect()
    }

    /// `runs show RUN --json`.
    pub(crate) fn show(&self, run: u64) -> Value {
        let shown = self.clio(&["runs", "show", &run.to_string(), "--json"]);
        assert_eq!(shown.code, 0, "{}", shown.render());
        serde_json::from_str(&shown.stdout).unwrap()
    }
}

/// Waits up to 120 s for `child` to exit; kills it and fails when it does not.
pub(crate) fn wait_exit(child: &mut std::process::Child, what: &str) -> std::process::ExitStatus {
    let end = std::time::Instant::now() + std::time::Duration::from_secs(120);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if std::time::Instant::now() > end {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what} did not exit in 120 s");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}
