//! MCP servers that plugins declare (SPEC §4), spoken to over stdio with the official
//! `rmcp` crate: [`McpServers`] starts a declared server on first use, lists its tools,
//! calls them with JSON arguments, restarts a server that has crashed, and stops its
//! servers when the last handle is dropped (or at once with [`McpServers::shutdown`]).
//!
//! Restarts never run a side effect twice. A server found dead between calls is started
//! again before the call is sent, whatever the tool. A server that dies *during* a call
//! may or may not have acted: the call is sent again, once, to a fresh server only when
//! the tool is read-only; a side-effecting call fails with [`McpError::Crashed`] and the
//! server restarts on its next use.
//!
//! What it does not do: speak MCP over HTTP, pass the server's notifications (progress,
//! logging, changed tool lists) on, or answer the server's own requests (sampling, roots,
//! elicitation) beyond rmcp's defaults. A server's tool list is read once per start.

mod server;

use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use clio_plugins::McpServer;
use serde_json::{Map, Value};

use crate::exec::TOOL_TIMEOUT;
use crate::sandbox::{Access, Sandbox, SandboxError};

use self::server::{Attempt, Server};

/// How long servers may take: to start and answer the handshake, and to answer a call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpConfig {
    /// The longest a server may take to start, answer the handshake and list its tools.
    pub start_timeout: Duration,
    /// The longest one tool call may take.
    pub call_timeout: Duration,
}

impl Default for McpConfig {
    fn default() -> McpConfig {
        McpConfig { start_timeout: Duration::from_secs(30), call_timeout: TOOL_TIMEOUT }
    }
}

/// A tool an MCP server offers, as its `tools/list` answer describes it.
#[derive(Debug, Clone, PartialEq)]
pub struct McpTool {
    /// Its name on the server.
    pub name: String,
    /// What it does (empty when the server says nothing).
    pub description: String,
    /// The JSON schema of its arguments.
    pub input_schema: Value,
    /// The server's `readOnlyHint`, when it gives one; only a hint, the plugin's
    /// declaration decides.
    pub read_only_hint: Option<bool>,
}

/// What went wrong with an MCP server or one of its tools; every message names the
/// plugin and the server, and the tool or the command where there is one.
#[derive(Debug, thiserror::Error)]
pub enum McpError {
    /// No server of that name is declared for the plugin.
    #[error("plugin {plugin}: no mcp server {server} is declared (declared: {})", list(known))]
    UnknownServer {
        /// The plugin.
        plugin: String,
        /// The server asked for.
        server: String,
        /// The servers the plugin declares.
        known: Vec<String>,
    },
    /// The command is a relative path but the plugin has no folder to resolve it in.
    #[error(
        "plugin {plugin}: mcp server {server}: command {command} is a relative path but the plugin has no folder"
    )]
    NoFolder {
        /// The plugin.
        plugin: String,
        /// The server.
        server: String,
        /// The command as declared.
        command: String,
    },
    /// The server's program could not be started.
    #[error("plugin {plugin}: mcp server {server}: cannot start {command}: {source}")]
    Start {
        /// The plugin.
        plugin: String,
        /// The server.
        server: String,
        /// The program.
        command: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The server could not be started in the sandbox; when no sandbox can be had here,
    /// [`McpError::is_sandbox_unavailable`] says so, and the call is refused.
    #[error(
        "plugin {plugin}: mcp server {server}: cannot start {command} in the sandbox: {source}"
    )]
    Sandbox {
        /// The plugin.
        plugin: String,
        /// The server.
        server: String,
        /// The program.
        command: String,
        /// Why: no sandbox here, or the sandbox could not be set up (boxed: it is large,
        /// and rare).
        #[source]
        source: Box<SandboxError>,
    },
    /// The program started but did not complete the MCP handshake or list its tools.
    #[error("plugin {plugin}: mcp server {server}: handshake with {command} failed: {message}")]
    Handshake {
        /// The plugin.
        plugin: String,
        /// The server.
        server: String,
        /// The program.
        command: String,
        /// What went wrong, with the end of the server's stderr when it wrote any.
        message: String,
    },
    /// The server has no tool of that name.
    #[error(
        "plugin {plugin}: mcp server {server} ({command}) has no tool {tool} (its tools: {})",
        list(known)
    )]
    UnknownTool {
        /// The plugin.
        plugin: String,
        /// The server.
        server: String,
        /// The program.
        command: String,
        /// The tool asked for.
        tool: String,
        /// The tools the server lists.
        known: Vec<String>,
    },
    /// The arguments of a call are not a JSON object.
    #[error(
        "plugin {plugin}: mcp server {server}: tool {tool}: arguments must be a JSON object, not {found}"
    )]
    BadArguments {
        /// The plugin.
        plugin: String,
        /// The server.
        server: String,
        /// The tool.
        tool: String,
        /// The kind of JSON value given.
        found: String,
    },
    /// The tool ran and reported an error (`isError`).
    #[error("plugin {plugin}: mcp server {server}: tool {tool} failed: {message}")]
    ToolFailed {
        /// The plugin.
        plugin: String,
        /// The server.
        server: String,
        /// The tool.
        tool: String,
        /// The server's message: the text of the result's content.
        message: String,
    },
    /// The server answered the call with a protocol error or an answer that is not a
    /// tool result.
    #[error(
        "plugin {plugin}: mcp server {server}: tool {tool}: the server refused the call: {message}"
    )]
    Refused {
        /// The plugin.
        plugin: String,
        /// The server.
        server: String,
        /// The tool.
        tool: String,
        /// The server's error.
        message: String,
    },
    /// The server exited during a call.
    #[error(
        "plugin {plugin}: mcp server {server} ({command}) exited during a call of tool {tool}{}: {message}",
        if *retried {
            ", and again when the read-only call was retried on a restarted server"
        } else {
            ", which has side effects and was not run again; the server restarts on its next use"
        }
    )]
    Crashed {
        /// The plugin.
        plugin: String,
        /// The server.
        server: String,
        /// The program.
        command: String,
        /// The tool being called.
        tool: String,
        /// Whether the call was a read-only call already retried once.
        retried: bool,
        /// How the server ended, with the end of its stderr.
        message: String,
    },
    /// The server took too long to start or to answer a call.
    #[error(
        "plugin {plugin}: mcp server {server} ({command}): {} timed out after {} ms",
        match tool { Some(tool) => format!("tool {tool}"), None => "start".to_owned() },
        after.as_millis()
    )]
    Timeout {
        /// The plugin.
        plugin: String,
        /// The server.
        server: String,
        /// The program.
        command: String,
        /// The tool called; `None` when starting the server timed out.
        tool: Option<String>,
        /// The limit that passed.
        after: Duration,
    },
}

impl McpError {
    /// Returns whether the server did not start because no sandbox can be had on this
    /// machine: nothing ran, so its call is refused (`sandbox_unavailable`) rather than
    /// failed.
    pub fn is_sandbox_unavailable(&self) -> bool {
        matches!(self, McpError::Sandbox { source, .. } if source.is_unavailable())
    }
}

fn list(names: &[String]) -> String {
    if names.is_empty() { "none".to_owned() } else { names.join(", ") }
}

/// The MCP servers of loaded plugins: a cheap, shareable handle (`Clone`, `Send`,
/// `Sync`); servers start on first use and stop when the last handle is dropped.
#[derive(Clone, Default)]
pub struct McpServers {
    inner: Arc<Inner>,
}

#[derive(Default)]
struct Inner {
    config: McpConfig,
    // Keyed by (plugin id, server name).
    servers: Mutex<BTreeMap<(String, String), Arc<Server>>>,
}

impl std::fmt::Debug for McpServers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let servers = self.inner.servers.lock().unwrap_or_else(PoisonError::into_inner);
        f.debug_struct("McpServers")
            .field("config", &self.inner.config)
            .field("servers", &servers.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl McpServers {
    /// Returns a handle with no servers declared, using `config`'s limits.
    pub fn new(config: McpConfig) -> McpServers {
        McpServers { inner: Arc::new(Inner { config, servers: Mutex::default() }) }
    }

    /// Declares `server` for `plugin`, without starting it.
    ///
    /// `folder` is the plugin's `ai.iowarp.clio/` folder: a relative command with a slash
    /// (`bin/server`) is resolved in it, a bare name (`npx`) on the `PATH`. The server is
    /// plugin code running on the person's machine, so it starts under `sandbox` with
    /// `access` (what a plugin's executable tool gets: the workspace, which it works in,
    /// its plugin folder to read, the network only if it declares it and the sandbox
    /// allows it). Declaring a server again with the same declaration keeps the running
    /// one; a changed declaration replaces it.
    pub fn declare(
        &self,
        plugin: &str,
        folder: Option<&Path>,
        server: &McpServer,
        sandbox: &Sandbox,
        access: &Access,
    ) -> Result<(), McpError> {
        let command = Path::new(&server.command);
        let program = if command.is_absolute() || command.components().count() < 2 {
            command.to_path_buf()
        } else {
            match folder {
                Some(folder) => folder.join(command),
                None => {
                    return Err(McpError::NoFolder {
                        plugin: plugin.to_owned(),
                        server: server.name.clone(),
                        command: server.command.clone(),
                    });
                }
            }
        };
        let program = strip_cur_dir(program);
        let key = (plugin.to_owned(), server.name.clone());
        let mut servers = self.inner.servers.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(known) = servers.get(&key)
            && known.decl == *server
            && known.program == program
            && known.sandbox == *sandbox
            && known.access == *access
        {
            return Ok(());
        }
        let declared =
            Server::new(plugin, server.clone(), program, sandbox.clone(), access.clone());
        servers.insert(key, Arc::new(declared));
        Ok(())
    }

    /// Returns the tools `server` of `plugin` offers, starting it if it is not running.
    pub async fn tools(&self, plugin: &str, server: &str) -> Result<Vec<McpTool>, McpError> {
        let server = self.server(plugin, server)?;
        let live = server.connect(&self.inner.config).await?;
        Ok(live.tools().as_ref().clone())
    }

    /// Calls `tool` of `server` of `plugin` with `args` (a JSON object, or null for none)
    /// and returns its result as JSON, starting the server if it is not running.
    ///
    /// The result is the tool's structured content when it has some; otherwise its content
    /// items, each text item read as JSON when it is JSON and kept as text otherwise, one
    /// item as itself and several as an array. `read_only` (the plugin's declaration)
    /// decides whether a call cut short by the server's crash is sent again once.
    pub async fn call(
        &self,
        plugin: &str,
        server: &str,
        tool: &str,
        args: Value,
        read_only: bool,
    ) -> Result<Value, McpError> {
        let server = self.server(plugin, server)?;
        let arguments = match args {
            Value::Object(map) => map,
            Value::Null => Map::new(),
            other => {
                return Err(McpError::BadArguments {
                    plugin: plugin.to_owned(),
                    server: server.decl.name.clone(),
                    tool: tool.to_owned(),
                    found: kind(&other).to_owned(),
                });
            }
        };
        let config = &self.inner.config;
        let live = server.connect(config).await?;
        server.check_tool(&live, tool)?;
        let message = match server.call(&live, tool, arguments.clone(), config.call_timeout).await {
            Attempt::Done(res) => return res,
            Attempt::Died => server.mark_dead(live.generation).await,
        };
        if !read_only {
            return Err(server.crashed(tool, false, message));
        }
        let live = server.connect(config).await?;
        server.check_tool(&live, tool)?;
        match server.call(&live, tool, arguments, config.call_timeout).await {
            Attempt::Done(res) => res,
            Attempt::Died => {
                let message = server.mark_dead(live.generation).await;
                Err(server.crashed(tool, true, message))
            }
        }
    }

    /// Stops every running server: closes its connection, waits briefly for it to exit
    /// and kills it otherwise. Servers start again on their next use.
    pub async fn shutdown(&self) {
        let servers: Vec<Arc<Server>> = {
            let servers = self.inner.servers.lock().unwrap_or_else(PoisonError::into_inner);
            servers.values().cloned().collect()
        };
        for server in servers {
            server.stop().await;
        }
    }

    fn server(&self, plugin: &str, server: &str) -> Result<Arc<Server>, McpError> {
        let servers = self.inner.servers.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(found) = servers.get(&(plugin.to_owned(), server.to_owned())) {
            return Ok(found.clone());
        }
        Err(McpError::UnknownServer {
            plugin: plugin.to_owned(),
            server: server.to_owned(),
            known: servers.keys().filter(|(p, _)| p == plugin).map(|(_, s)| s.clone()).collect(),
        })
    }
}

fn strip_cur_dir(path: PathBuf) -> PathBuf {
    if path.components().any(|c| c == Component::CurDir) {
        path.components().filter(|c| *c != Component::CurDir).collect()
    } else {
        path
    }
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decl(command: &str) -> McpServer {
        McpServer {
            name: "s".to_owned(),
            command: command.to_owned(),
            args: Vec::new(),
            env: BTreeMap::new(),
            network: false,
        }
    }

    fn program(servers: &McpServers) -> PathBuf {
        servers.server("p", "s").map(|s| s.program.clone()).unwrap_or_default()
    }

    #[test]
    fn commands_resolve_in_the_folder_or_on_the_path() {
        let servers = McpServers::default();
        let folder = Path::new("/plugins/p/ai.iowarp.clio");
        servers
            .declare("p", Some(folder), &decl("./bin/server"), &Sandbox::off(), &Access::default())
            .unwrap();
        assert_eq!(program(&servers), folder.join("bin/server"));
        servers
            .declare("p", Some(folder), &decl("npx"), &Sandbox::off(), &Access::default())
            .unwrap();
        assert_eq!(program(&servers), PathBuf::from("npx"));
        servers
            .declare("p", Some(folder), &decl("/usr/bin/env"), &Sandbox::off(), &Access::default())
            .unwrap();
        assert_eq!(program(&servers), PathBuf::from("/usr/bin/env"));
        let err = servers
            .declare("p", None, &decl("bin/server"), &Sandbox::off(), &Access::default())
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "plugin p: mcp server s: command bin/server is a relative path but the plugin has no folder"
        );
    }

    #[test]
    fn an_undeclared_server_names_the_declared_ones() {
        let servers = McpServers::default();
        servers.declare("p", None, &decl("npx"), &Sandbox::off(), &Access::default()).unwrap();
        let err = servers.server("p", "other").map(|_| ()).unwrap_err();
        assert_eq!(err.to_string(), "plugin p: no mcp server other is declared (declared: s)");
    }
}
