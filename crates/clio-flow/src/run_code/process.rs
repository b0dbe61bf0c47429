//! The script's child process: its scratch folder (the generated `clio` module, the
//! bootstrap, the script, the socket), the interpreter run in the workspace inside the
//! sandbox with a time and an output limit, the socket server that answers the script's
//! calls as JSON lines, and how the run ended.

use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use clio_tools::{Access, Confined, SandboxError, SandboxMode};
use futures::StreamExt;
use futures::stream::FuturesUnordered;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::Notify;

use super::RunCodeConfig;
use crate::ctx::Ctx;

/// The generated `clio` module a script imports.
const CLIO_MODULE: &str = include_str!("clio.py");

/// The bootstrap that runs the script and reports a syntax error or an exception.
const BOOTSTRAP: &str = include_str!("main.py");

/// How long the runtime waits, once the script ended, for its calls and output to drain.
const GRACE: Duration = Duration::from_secs(2);

/// Numbers scratch folders within this process.
static SCRATCH_SEQ: AtomicU64 = AtomicU64::new(0);

/// How a script run went wrong.
#[derive(Debug, thiserror::Error)]
pub(crate) enum RunCodeError {
    /// The scratch folder could not be made.
    #[error("cannot prepare the scratch folder {path}: {source}")]
    Scratch {
        /// The folder.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The interpreter did not start.
    #[error("cannot start the interpreter {interpreter}: {source}")]
    Start {
        /// The interpreter.
        interpreter: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The script cannot be confined (no sandbox here), or its sandbox did not start.
    #[error("{source}")]
    Sandbox {
        /// Why.
        source: SandboxError,
    },
    /// The script does not parse.
    #[error("{message} (line {line})")]
    Syntax {
        /// The line of the error (0: unknown).
        line: u64,
        /// The parser's message.
        message: String,
        /// The parser's report, pointing at the error.
        traceback: String,
    },
    /// The script raised an exception it did not catch.
    #[error("the script raised {kind} at line {line}: {message}")]
    Exception {
        /// The exception's type.
        kind: String,
        /// Its message.
        message: String,
        /// The script's line it last passed through (0: unknown).
        line: u64,
        /// The traceback.
        traceback: String,
    },
    /// The script ran out of time and was killed.
    #[error("the script ran longer than {secs} s and was killed")]
    Timeout {
        /// The limit in seconds.
        secs: u64,
    },
    /// The script printed too much and was killed.
    #[error(
        "the script printed more than {limit} bytes and was killed; print less, or write \
         large results to a workspace file"
    )]
    OutputTooLarge {
        /// The limit in bytes.
        limit: usize,
    },
    /// The script's process was killed by a signal.
    #[error("the script's process was killed by signal {signal}")]
    Crashed {
        /// The signal.
        signal: i32,
    },
    /// The script exited with a failure code without an uncaught exception.
    #[error("the script exited with code {code}")]
    Exited {
        /// The exit code.
        code: i32,
    },
    /// The runtime could not wait for the script.
    #[error("cannot wait for the script: {source}")]
    Wait {
        /// Why.
        source: std::io::Error,
    },
}

impl RunCodeError {
    /// Returns the stable name of what went wrong.
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            RunCodeError::Sandbox { source } if source.is_unavailable() => "sandbox_unavailable",
            RunCodeError::Scratch { .. }
            | RunCodeError::Start { .. }
            | RunCodeError::Sandbox { .. } => "start_failed",
            RunCodeError::Syntax { .. } => "syntax_error",
            RunCodeError::Exception { .. } => "exception",
            RunCodeError::Timeout { .. } => "timeout",
            RunCodeError::OutputTooLarge { .. } => "output_too_large",
            RunCodeError::Crashed { .. } => "crashed",
            RunCodeError::Exited { .. } => "exited",
            RunCodeError::Wait { .. } => "wait_failed",
        }
    }

    /// Returns the traceback that comes with the error, if any.
    pub(crate) fn traceback(&self) -> Option<&str> {
        match self {
            RunCodeError::Syntax { traceback, .. } | RunCodeError::Exception { traceback, .. } => {
                Some(traceback)
            }
            _ => None,
        }
    }
}

/// A script to run.
pub(crate) struct Script<'a> {
    /// Its source.
    pub(crate) code: &'a str,
    /// The folder it runs in.
    pub(crate) cwd: &'a Path,
    /// How long it may run.
    pub(crate) timeout: Duration,
}

/// How a script run ended, with what it printed.
pub(crate) struct Outcome {
    pub(crate) result: Result<(), RunCodeError>,
    pub(crate) stdout: String,
    pub(crate) stderr: String,
}

impl Outcome {
    fn failed(err: RunCodeError) -> Outcome {
        Outcome { result: Err(err), stdout: String::new(), stderr: String::new() }
    }
}

/// A scratch folder, removed when dropped.
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        // A folder left behind is harmless; the next run with its name clears it.
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn scratch(config: &RunCodeConfig, code: &str) -> Result<Scratch, RunCodeError> {
    let n = SCRATCH_SEQ.fetch_add(1, Ordering::SeqCst);
    let path = config.scratch.join(format!("clio-run-code-{}-{n}", std::process::id()));
    let err = |source| RunCodeError::Scratch { path: path.clone(), source };
    if path.exists() {
        std::fs::remove_dir_all(&path).map_err(err)?;
    }
    std::fs::create_dir_all(&path).map_err(err)?;
    let dir = Scratch(path.clone());
    for (name, text) in [("clio.py", CLIO_MODULE), ("clio_main.py", BOOTSTRAP), ("script.py", code)]
    {
        std::fs::write(path.join(name), text).map_err(err)?;
    }
    Ok(dir)
}

/// Counts the script's calls in flight: the `run_code` task is busy except while every
/// one of its calls waits on its own work, so a question a call asks can suspend the run.
struct Gauge<B, F: Fn() -> B> {
    make: F,
    in_flight: AtomicUsize,
    busy: Mutex<Option<B>>,
}

impl<B, F: Fn() -> B> Gauge<B, F> {
    fn new(make: F) -> Self {
        let busy = Mutex::new(Some(make()));
        Gauge { make, in_flight: AtomicUsize::new(0), busy }
    }

    fn set(&self, busy: bool) {
        let mut slot = self.busy.lock().unwrap_or_else(PoisonError::into_inner);
        *slot = if busy { Some((self.make)()) } else { None };
    }

    async fn waiting<T>(&self, work: impl Future<Output = T>) -> T {
        if self.in_flight.fetch_add(1, Ordering::SeqCst) == 0 {
            self.set(false);
        }
        let _back = Leave(self);
        work.await
    }
}

struct Leave<'g, B, F: Fn() -> B>(&'g Gauge<B, F>);

impl<B, F: Fn() -> B> Drop for Leave<'_, B, F> {
    fn drop(&mut self) {
        if self.0.in_flight.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.0.set(true);
        }
    }
}

/// Runs `script` under `config`, answering its calls through `ctx`.
pub(crate) async fn run(config: &RunCodeConfig, script: &Script<'_>, ctx: &Ctx) -> Outcome {
    let dir = match scratch(config, script.code) {
        Ok(dir) => dir,
        Err(err) => return Outcome::failed(err),
    };
    let socket = dir.0.join("clio.sock");
    let listener = match UnixListener::bind(&socket) {
        Ok(listener) => listener,
        Err(source) => {
            return Outcome::failed(RunCodeError::Scratch { path: socket, source });
        }
    };
    let report = dir.0.join("report.json");
    let mut confined = match confine(config, script, ctx, &dir.0).await {
        Ok(confined) => confined,
        Err(err) => return Outcome::failed(err),
    };
    let command = confined.command();
    command
        .arg("-u")
        .arg("-B")
        .arg(dir.0.join("clio_main.py"))
        .arg(dir.0.join("script.py"))
        .arg(&report);
    // A script needs no secret of this process's environment (model keys among them): the
    // sandbox gave it its short list (`PATH` holding only what the sandbox shows, `HOME` and
    // `TMPDIR` its temporary folder, the locale); Python's settings come on top.
    command
        .env("PYTHONUTF8", "1")
        .env("PYTHONPATH", &dir.0)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env("PYTHONIOENCODING", "utf-8")
        .env("CLIO_RUN_CODE_SOCKET", &socket)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let mut child = match confined.spawn() {
        Ok(child) => child,
        Err(SandboxError::Spawn { source, .. }) => {
            return Outcome::failed(RunCodeError::Start {
                interpreter: config.interpreter.clone(),
                source,
            });
        }
        Err(source) => return Outcome::failed(RunCodeError::Sandbox { source }),
    };
    let printed = Arc::new(AtomicUsize::new(0));
    let too_much = Arc::new(Notify::new());
    let capture = |pipe: Option<Box<dyn AsyncRead + Send + Unpin>>| {
        let (printed, too_much, limit) =
            (Arc::clone(&printed), Arc::clone(&too_much), config.output_limit);
        tokio::spawn(async move {
            match pipe {
                Some(pipe) => read_capped(pipe, &printed, limit, &too_much).await,
                None => Vec::new(),
            }
        })
    };
    let stdout = capture(child.stdout.take().map(|p| Box::new(p) as _));
    let stderr = capture(child.stderr.take().map(|p| Box::new(p) as _));

    let activity = &ctx.run.activity;
    let gauge = Gauge::new(|| activity.busy());
    let stop = Notify::new();
    let server = serve(&listener, ctx, &gauge, &stop);
    tokio::pin!(server);
    let ended: Result<ExitStatus, RunCodeError> = tokio::select! {
        status = child.wait() => status.map_err(|source| RunCodeError::Wait { source }),
        () = too_much.notified() => Err(RunCodeError::OutputTooLarge { limit: config.output_limit }),
        () = tokio::time::sleep(script.timeout) => {
            Err(RunCodeError::Timeout { secs: script.timeout.as_secs() })
        }
        () = &mut server => Err(RunCodeError::Wait {
            source: std::io::Error::other("the call server stopped"),
        }),
    };
    // Past the limit, the reader stops and drops the pipe, so a script that goes on
    // printing dies of a broken pipe: that is the limit's doing, however the race between
    // its exit and the reader's notice went (it counted the output before letting go).
    let ended = match ended {
        Ok(_) if printed.load(Ordering::SeqCst) > config.output_limit => {
            Err(RunCodeError::OutputTooLarge { limit: config.output_limit })
        }
        other => other,
    };
    if ended.is_err() {
        // Killing a process that already exited is not an error worth reporting.
        let _ = child.kill().await;
    }
    // The call ends with the script: what it started (forked or `setsid` children) ends
    // now, and holds its pipes no longer.
    confined.end();
    // The script is gone: calls still in flight belong to no one, and end cancelled.
    stop.notify_one();
    ctx.scope.cancel.cancel();
    let _ = tokio::time::timeout(GRACE, &mut server).await;
    let text = |bytes: Vec<u8>| String::from_utf8_lossy(&bytes).into_owned();
    let stdout = text(
        tokio::time::timeout(GRACE, stdout).await.ok().and_then(Result::ok).unwrap_or_default(),
    );
    let stderr = text(
        tokio::time::timeout(GRACE, stderr).await.ok().and_then(Result::ok).unwrap_or_default(),
    );
    let result = ended.and_then(|status| judge(status, &report, &confined));
    if result.is_err() {
        // bubblewrap's own failure on a kept pass of its check: the next process checks.
        confined.ended_with(&stderr);
    }
    Outcome { result, stdout, stderr }
}

/// Prepares the interpreter to run in the sandbox of `ctx`'s runtime: it reads and writes
/// the workspace (`script.cwd`) and its scratch folder `scratch`, reads its own
/// installation, and has no network.
async fn confine(
    config: &RunCodeConfig,
    script: &Script<'_>,
    ctx: &Ctx,
    scratch: &Path,
) -> Result<Confined, RunCodeError> {
    let sandbox = &ctx.config().sandbox;
    // The interpreter as found outside, so the sandbox runs the same one.
    let interpreter = match sandbox.mode {
        SandboxMode::Off => config.interpreter.clone(),
        _ => clio_tools::find_program(&config.interpreter)
            .unwrap_or_else(|| config.interpreter.clone()),
    };
    let access = Access {
        workspace: Some(script.cwd.to_path_buf()),
        read: clio_tools::program_prefixes(&interpreter),
        write: vec![scratch.to_path_buf()],
        network: false,
        env: Vec::new(),
    };
    sandbox.confine(&interpreter, &access).await.map_err(|source| RunCodeError::Sandbox { source })
}

/// Reads `pipe` until its end or until everything printed passes `limit`, which it
/// signals on `too_much`.
async fn read_capped(
    mut pipe: Box<dyn AsyncRead + Send + Unpin>,
    printed: &AtomicUsize,
    limit: usize,
    too_much: &Notify,
) -> Vec<u8> {
    let mut out = Vec::new();
    let mut chunk = [0u8; 8192];
    loop {
        let n = match pipe.read(&mut chunk).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let before = printed.fetch_add(n, Ordering::SeqCst);
        if before + n > limit {
            out.extend_from_slice(&chunk[..limit.saturating_sub(before).min(n)]);
            too_much.notify_one();
            break;
        }
        out.extend_from_slice(&chunk[..n]);
    }
    out
}

/// Reads how the script ended from its exit `status` and the bootstrap's `report`; the
/// report of a `sys.exit` tells an exit code from the signal that bubblewrap reports as
/// 128 + its number.
fn judge(status: ExitStatus, report: &Path, confined: &Confined) -> Result<(), RunCodeError> {
    let mut exited = false;
    if let Ok(text) = std::fs::read_to_string(report)
        && let Ok(report) = serde_json::from_str::<Value>(&text)
    {
        let s = |key: &str| report.get(key).and_then(Value::as_str).unwrap_or("").to_owned();
        let line = report.get("line").and_then(Value::as_u64).unwrap_or(0);
        match s("kind").as_str() {
            "exit" => exited = true,
            "syntax_error" => {
                return Err(RunCodeError::Syntax {
                    line,
                    message: s("message"),
                    traceback: s("traceback"),
                });
            }
            _ => {
                return Err(RunCodeError::Exception {
                    kind: s("type"),
                    message: s("message"),
                    line,
                    traceback: s("traceback"),
                });
            }
        }
    }
    let signal = if exited { status.signal() } else { confined.signal(status) };
    if let Some(signal) = signal {
        return Err(RunCodeError::Crashed { signal });
    }
    match status.code() {
        Some(0) | None => Ok(()),
        Some(code) => Err(RunCodeError::Exited { code }),
    }
}

/// Accepts the script's connections and answers their calls until `stop`, then until the
/// open connections end.
async fn serve<B, F: Fn() -> B>(
    listener: &UnixListener,
    ctx: &Ctx,
    gauge: &Gauge<B, F>,
    stop: &Notify,
) {
    let mut connections = FuturesUnordered::new();
    let mut stopping = false;
    let mut accepting = true;
    loop {
        tokio::select! {
            accepted = listener.accept(), if accepting && !stopping => match accepted {
                Ok((stream, _)) => connections.push(connection(stream, ctx, gauge)),
                // A listener that fails stays failed; the open connections go on.
                Err(_) => accepting = false,
            },
            Some(()) = connections.next(), if !connections.is_empty() => {}
            () = stop.notified(), if !stopping => stopping = true,
        }
        if stopping && connections.is_empty() {
            return;
        }
    }
}

/// Answers the calls of one connection, one JSON line each, in order.
async fn connection<B, F: Fn() -> B>(stream: UnixStream, ctx: &Ctx, gauge: &Gauge<B, F>) {
    let (read, mut write) = stream.into_split();
    let mut lines = BufReader::new(read).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        let reply = request(&line, ctx, gauge).await;
        let mut text = reply.to_string();
        text.push('\n');
        if write.write_all(text.as_bytes()).await.is_err() {
            return;
        }
    }
}

async fn request<B, F: Fn() -> B>(line: &str, ctx: &Ctx, gauge: &Gauge<B, F>) -> Value {
    let bad = |message: String| json!({ "id": Value::Null, "error": { "reason": "bad_request", "message": message } });
    let req: Value = match serde_json::from_str(line) {
        Ok(req) => req,
        Err(e) => return bad(format!("the request is not JSON: {e}")),
    };
    let id = req.get("id").cloned().unwrap_or(Value::Null);
    let Some(name) = req.get("name").and_then(Value::as_str) else {
        return bad("the request has no `name`".into());
    };
    let args = req.get("args").cloned().unwrap_or_else(|| json!({}));
    let res = if super::is_reserved(name) {
        super::answer(ctx, name, args).await
    } else {
        gauge.waiting(super::answer(ctx, name, args)).await
    };
    match res {
        Ok(value) => json!({ "id": id, "value": value }),
        Err(err) => json!({ "id": id, "error": err.to_json() }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reserved_names_are_dunder_wrapped() {
        assert!(super::super::is_reserved("__stream_write__"));
        assert!(!super::super::is_reserved("____"));
        assert!(!super::super::is_reserved("read_file"));
    }

    #[test]
    fn kinds_are_stable() {
        assert_eq!(RunCodeError::Timeout { secs: 1 }.kind(), "timeout");
        assert_eq!(RunCodeError::OutputTooLarge { limit: 1 }.kind(), "output_too_large");
    }
}
