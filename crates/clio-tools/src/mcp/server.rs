//! One declared MCP server: its child process, the rmcp client connection over the
//! child's stdin and stdout, the tools it listed when it started, and the end of its
//! stderr for error messages; started again when it is found dead.

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use clio_plugins::McpServer;
use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientCapabilities, ClientConfig, ContentBlock,
    Implementation,
};
use rmcp::service::RunningService;
use rmcp::{Peer, RoleClient, ServiceError, ServiceExt};
use serde_json::{Map, Value};
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::process::Child;
use tokio::sync::watch;

use super::{McpConfig, McpError, McpTool};
use crate::sandbox::{Access, Confined, Sandbox, SandboxError};

/// How much of a server's stderr is kept for error messages.
const STDERR_TAIL: usize = 4 * 1024;

/// How long a server that closed its connection is given to exit before it is killed.
const EXIT_GRACE: Duration = Duration::from_secs(2);

/// A declared server and, while it runs, its connection.
pub(super) struct Server {
    pub(super) plugin: String,
    pub(super) decl: McpServer,
    pub(super) program: PathBuf,
    /// The sandbox policy the server starts under, and what it may reach: it works in
    /// `access.workspace` when there is one.
    pub(super) sandbox: Sandbox,
    pub(super) access: Access,
    // The lock is held while a server starts, so concurrent first calls start it once.
    state: tokio::sync::Mutex<State>,
}

#[derive(Default)]
struct State {
    conn: Option<Connection>,
    // Invariant: the generation of the newest connection; it grows by one per start.
    starts: u64,
}

struct Connection {
    service: RunningService<RoleClient, ClientConfig>,
    // `None` only while dropping, when a reaper task has taken it.
    child: Option<Child>,
    /// Owns the server's private temporary folder while it runs.
    _confined: Confined,
    tools: Arc<Vec<McpTool>>,
    stderr: Tail,
    generation: u64,
    dead: bool,
}

/// What a call needs of a running server.
pub(super) struct Live {
    peer: Peer<RoleClient>,
    tools: Arc<Vec<McpTool>>,
    /// The start this connection belongs to.
    pub(super) generation: u64,
}

impl Live {
    /// Returns the tools the server listed when it started.
    pub(super) fn tools(&self) -> &Arc<Vec<McpTool>> {
        &self.tools
    }
}

/// How one attempt at a call ended.
pub(super) enum Attempt {
    /// The server answered, or the call failed without harming the server.
    Done(Result<Value, McpError>),
    /// The connection closed before the answer came: the server may have acted.
    Died,
}

impl Server {
    pub(super) fn new(
        plugin: &str,
        decl: McpServer,
        program: PathBuf,
        sandbox: Sandbox,
        access: Access,
    ) -> Server {
        Server {
            plugin: plugin.to_owned(),
            decl,
            program,
            sandbox,
            access,
            state: Default::default(),
        }
    }

    fn command(&self) -> String {
        self.program.display().to_string()
    }

    /// Returns the running connection, starting the server when it is not running or
    /// was found dead.
    pub(super) async fn connect(&self, config: &McpConfig) -> Result<Live, McpError> {
        let mut state = self.state.lock().await;
        if let Some(conn) = state.conn.as_mut()
            && conn.alive()
        {
            return Ok(conn.live());
        }
        // A dead connection is dropped here; its Drop reaps the process.
        state.conn = None;
        state.starts += 1;
        let conn = self.start(config, state.starts).await?;
        let live = conn.live();
        state.conn = Some(conn);
        Ok(live)
    }

    /// Fails with [`McpError::UnknownTool`] when the server did not list `tool`.
    pub(super) fn check_tool(&self, live: &Live, tool: &str) -> Result<(), McpError> {
        if live.tools.iter().any(|t| t.name == tool) {
            return Ok(());
        }
        Err(McpError::UnknownTool {
            plugin: self.plugin.clone(),
            server: self.decl.name.clone(),
            command: self.command(),
            tool: tool.to_owned(),
            known: live.tools.iter().map(|t| t.name.clone()).collect(),
        })
    }

    /// Sends one `tools/call` and waits up to `timeout` for its answer.
    pub(super) async fn call(
        &self,
        live: &Live,
        tool: &str,
        arguments: Map<String, Value>,
        timeout: Duration,
    ) -> Attempt {
        let params = CallToolRequestParams::new(tool.to_owned()).with_arguments(arguments);
        let refused = |message: String| McpError::Refused {
            plugin: self.plugin.clone(),
            server: self.decl.name.clone(),
            tool: tool.to_owned(),
            message,
        };
        // Dropping the call on a timeout makes rmcp send `notifications/cancelled`.
        match tokio::time::timeout(timeout, live.peer.call_tool(params)).await {
            Err(_) => Attempt::Done(Err(McpError::Timeout {
                plugin: self.plugin.clone(),
                server: self.decl.name.clone(),
                command: self.command(),
                tool: Some(tool.to_owned()),
                after: timeout,
            })),
            Ok(Ok(result)) => Attempt::Done(self.result(tool, result)),
            Ok(Err(ServiceError::TransportClosed | ServiceError::TransportSend(_))) => {
                Attempt::Died
            }
            Ok(Err(ServiceError::McpError(error))) => {
                Attempt::Done(Err(refused(match error.data {
                    Some(data) => format!("{} ({data})", error.message),
                    None => error.message.into_owned(),
                })))
            }
            Ok(Err(other)) => Attempt::Done(Err(refused(other.to_string()))),
        }
    }

    fn result(&self, tool: &str, result: CallToolResult) -> Result<Value, McpError> {
        if result.is_error == Some(true) {
            let texts: Vec<&str> = result
                .content
                .iter()
                .filter_map(|c| c.as_text())
                .map(|t| t.text.as_str())
                .collect();
            let message = if texts.is_empty() {
                "the tool reported an error without a message".to_owned()
            } else {
                texts.join("\n")
            };
            return Err(McpError::ToolFailed {
                plugin: self.plugin.clone(),
                server: self.decl.name.clone(),
                tool: tool.to_owned(),
                message,
            });
        }
        if let Some(value) = result.structured_content {
            return Ok(value);
        }
        let mut values: Vec<Value> = result.content.iter().map(content_value).collect();
        Ok(match values.len() {
            0 => Value::Null,
            1 => values.pop().unwrap_or(Value::Null),
            _ => Value::Array(values),
        })
    }

    /// Marks the connection of `generation` dead so that the next use starts the server
    /// again, and returns how the server ended.
    pub(super) async fn mark_dead(&self, generation: u64) -> String {
        let mut state = self.state.lock().await;
        let Some(conn) = state.conn.as_mut().filter(|c| c.generation == generation) else {
            return "its connection closed".to_owned();
        };
        conn.dead = true;
        let Some(child) = conn.child.as_mut() else {
            return "its connection closed".to_owned();
        };
        ending(child, &conn.stderr, "its connection closed".to_owned()).await
    }

    /// Returns the error for a call of `tool` that the server's crash cut short.
    pub(super) fn crashed(&self, tool: &str, retried: bool, message: String) -> McpError {
        McpError::Crashed {
            plugin: self.plugin.clone(),
            server: self.decl.name.clone(),
            command: self.command(),
            tool: tool.to_owned(),
            retried,
            message,
        }
    }

    /// Stops the server if it runs: closes the connection, gives the process a moment to
    /// exit and kills it otherwise.
    pub(super) async fn stop(&self) {
        let conn = self.state.lock().await.conn.take();
        let Some(mut conn) = conn else { return };
        let _ = conn.service.close_with_timeout(EXIT_GRACE).await;
        if let Some(mut child) = conn.child.take() {
            reap(&mut child).await;
        }
    }

    async fn start(&self, config: &McpConfig, generation: u64) -> Result<Connection, McpError> {
        let in_sandbox = |source: SandboxError| McpError::Sandbox {
            plugin: self.plugin.clone(),
            server: self.decl.name.clone(),
            command: self.command(),
            source: Box::new(source),
        };
        let mut confined =
            self.sandbox.confine(&self.program, &self.access).await.map_err(in_sandbox)?;
        confined
            .command()
            .args(&self.decl.args)
            .envs(&self.decl.env)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let mut child = confined.spawn().map_err(|error| match error {
            SandboxError::Spawn { source, .. } => McpError::Start {
                plugin: self.plugin.clone(),
                server: self.decl.name.clone(),
                command: self.command(),
                source,
            },
            other => in_sandbox(other),
        })?;
        let stderr = Tail::default();
        if let Some(pipe) = child.stderr.take() {
            stderr.drain(pipe);
        }
        let handshake_failed = |message: String| McpError::Handshake {
            plugin: self.plugin.clone(),
            server: self.decl.name.clone(),
            command: self.command(),
            message,
        };
        let (Some(stdout), Some(stdin)) = (child.stdout.take(), child.stdin.take()) else {
            return Err(handshake_failed("its stdin or stdout is not a pipe".to_owned()));
        };
        let handshake = async {
            let service = client_config()
                .serve((stdout, stdin))
                .await
                .map_err(|e| format!("initialize: {e}"))?;
            let tools = service
                .peer()
                .list_all_tools()
                .await
                .map_err(|e| format!("listing its tools: {e}"))?;
            Ok::<_, String>((service, tools))
        };
        let (service, tools) = match tokio::time::timeout(config.start_timeout, handshake).await {
            Ok(Ok(started)) => started,
            Ok(Err(message)) => {
                let message = ending(&mut child, &stderr, message).await;
                reap(&mut child).await;
                // bubblewrap's own failure on a kept pass of its check: the next process
                // checks again.
                confined.ended_with(&stderr.text().await);
                return Err(handshake_failed(message));
            }
            Err(_) => {
                reap(&mut child).await;
                return Err(McpError::Timeout {
                    plugin: self.plugin.clone(),
                    server: self.decl.name.clone(),
                    command: self.command(),
                    tool: None,
                    after: config.start_timeout,
                });
            }
        };
        let tools = tools
            .into_iter()
            .map(|tool| McpTool {
                name: tool.name.into_owned(),
                description: tool.description.map(|d| d.into_owned()).unwrap_or_default(),
                input_schema: Value::Object(tool.input_schema.as_ref().clone()),
                read_only_hint: tool.annotations.and_then(|a| a.read_only_hint),
            })
            .collect();
        Ok(Connection {
            service,
            child: Some(child),
            _confined: confined,
            tools: Arc::new(tools),
            stderr,
            generation,
            dead: false,
        })
    }
}

impl Connection {
    fn alive(&mut self) -> bool {
        let exited = match self.child.as_mut() {
            Some(child) => !matches!(child.try_wait(), Ok(None)),
            None => true,
        };
        !self.dead && !exited && !self.service.peer().is_transport_closed()
    }

    fn live(&self) -> Live {
        Live {
            peer: self.service.peer().clone(),
            tools: self.tools.clone(),
            generation: self.generation,
        }
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        // Dropping the service closes the server's stdin, which asks it to exit; a task
        // gives it a moment to do so before killing it. Without a runtime the child's
        // `kill_on_drop` kills it at once.
        let Some(mut child) = self.child.take() else { return };
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move { reap(&mut child).await });
        }
    }
}

/// Waits up to [`EXIT_GRACE`] for `child` to exit, then kills it.
async fn reap(child: &mut Child) {
    if tokio::time::timeout(EXIT_GRACE, child.wait()).await.is_err() {
        let _ = child.kill().await;
    }
}

/// Returns `message` completed with how `child` ended and the end of its stderr.
async fn ending(child: &mut Child, stderr: &Tail, message: String) -> String {
    let mut message = message;
    match tokio::time::timeout(EXIT_GRACE, child.wait()).await {
        Ok(Ok(status)) => match status.code() {
            Some(code) => message.push_str(&format!("; it exited with code {code}")),
            None => message.push_str("; it was ended by a signal"),
        },
        Ok(Err(e)) => message.push_str(&format!("; waiting for it failed: {e}")),
        Err(_) => message.push_str("; it is still running"),
    }
    let text = stderr.text().await;
    if !text.is_empty() {
        message.push_str(&format!("; its stderr ends with: {text}"));
    }
    message
}

fn client_config() -> ClientConfig {
    ClientConfig::new(
        ClientCapabilities::default(),
        Implementation::new("clio", env!("CARGO_PKG_VERSION")),
    )
}

/// Returns a content item as JSON: text that is JSON as that JSON, other text as a
/// string, and other kinds of content in their MCP form.
fn content_value(content: &ContentBlock) -> Value {
    match content.as_text() {
        Some(text) => {
            serde_json::from_str(&text.text).unwrap_or_else(|_| Value::String(text.text.clone()))
        }
        None => serde_json::to_value(content).unwrap_or(Value::Null),
    }
}

/// The last [`STDERR_TAIL`] bytes a server wrote to its stderr.
#[derive(Clone)]
struct Tail {
    bytes: Arc<Mutex<Vec<u8>>>,
    done: watch::Receiver<bool>,
    done_tx: Arc<watch::Sender<bool>>,
}

impl Default for Tail {
    fn default() -> Tail {
        let (done_tx, done) = watch::channel(false);
        Tail { bytes: Arc::default(), done, done_tx: Arc::new(done_tx) }
    }
}

impl Tail {
    /// Reads `pipe` to its end in a task, keeping the last bytes.
    fn drain(&self, mut pipe: impl AsyncRead + Unpin + Send + 'static) {
        let bytes = self.bytes.clone();
        let done = self.done_tx.clone();
        tokio::spawn(async move {
            let mut chunk = [0u8; 1024];
            while let Ok(n @ 1..) = pipe.read(&mut chunk).await {
                let mut kept = bytes.lock().unwrap_or_else(PoisonError::into_inner);
                kept.extend_from_slice(&chunk[..n]);
                let excess = kept.len().saturating_sub(STDERR_TAIL);
                kept.drain(..excess);
            }
            let _ = done.send(true);
        });
    }

    /// Returns the kept text, trimmed, after waiting briefly for the pipe's end.
    async fn text(&self) -> String {
        let mut done = self.done.clone();
        let _ = tokio::time::timeout(EXIT_GRACE, done.wait_for(|d| *d)).await;
        let kept = self.bytes.lock().unwrap_or_else(PoisonError::into_inner);
        String::from_utf8_lossy(&kept).trim().to_owned()
    }
}
