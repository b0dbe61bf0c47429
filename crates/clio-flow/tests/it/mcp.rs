//! MCP servers a plugin declares, run for real: the server in `mcp/server.rs` is this test
//! binary re-run as an rmcp stdio server. A server starts on first use, lists its tools
//! and answers calls; an error result, an unknown tool, a missing command, a program that
//! is not an MCP server and a slow tool are errors naming the plugin, the server and the
//! cause; a crashed server restarts, and a call its crash cut short is sent again only
//! when the tool is read-only. A plugin folder's `[[mcp_servers]]` reach the registry.

pub(crate) mod server;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use clio_flow::{
    Access, FlowError, McpConfig, McpError, McpServers, Registry, Sandbox, Workspace,
    register_plugin,
};
use clio_plugins::McpServer;
use serde_json::{Value, json};

use self::server::{SERVER_ENV, server_args};

fn declaration(name: &str, command: &str, dir: &Path) -> McpServer {
    McpServer {
        name: name.to_owned(),
        command: command.to_owned(),
        args: server_args(),
        env: BTreeMap::from([(SERVER_ENV.to_owned(), dir.display().to_string())]),
        network: false,
    }
}

/// These tests are about the protocol, so the servers run unconfined; the sandbox's own
/// tests start a plugin's MCP server confined.
fn unconfined() -> Sandbox {
    Sandbox::off()
}

fn test_exe() -> String {
    std::env::current_exe().unwrap().display().to_string()
}

/// Returns servers with the test server declared as `calc` of plugin `demo`.
fn calc(dir: &Path, config: McpConfig) -> McpServers {
    let servers = McpServers::new(config);
    servers
        .declare(
            "demo",
            None,
            &declaration("calc", &test_exe(), dir),
            &unconfined(),
            &Access::default(),
        )
        .unwrap();
    servers
}

fn lines(dir: &Path, name: &str) -> Vec<String> {
    std::fs::read_to_string(dir.join(name))
        .map(|text| text.lines().map(str::to_owned).collect())
        .unwrap_or_default()
}

#[tokio::test]
async fn a_server_starts_on_first_use_lists_its_tools_and_answers() {
    let dir = tempfile::tempdir().unwrap();
    let servers = calc(dir.path(), McpConfig::default());
    assert!(lines(dir.path(), "starts").is_empty(), "declaring does not start it");

    let tools = servers.tools("demo", "calc").await.unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "add",
            "greet",
            "stats",
            "append_line",
            "fail",
            "crash",
            "append_then_crash",
            "crash_once",
            "hang"
        ]
    );
    assert_eq!(tools[0].description, "Add two numbers.");
    assert_eq!(tools[0].input_schema["properties"]["a"], json!({"type": "number"}));

    let sum = servers.call("demo", "calc", "add", json!({"a": 2, "b": 3.5}), true).await.unwrap();
    assert_eq!(sum, json!(5.5));
    let greeting =
        servers.call("demo", "calc", "greet", json!({"name": "ada"}), true).await.unwrap();
    assert_eq!(greeting, json!("hello, ada"));
    let stats = servers.call("demo", "calc", "stats", Value::Null, true).await.unwrap();
    assert_eq!(stats, json!({"count": 2, "mean": 1.5}));
    servers.call("demo", "calc", "append_line", json!({"line": "one"}), false).await.unwrap();
    assert_eq!(lines(dir.path(), "lines"), ["one"]);
    assert_eq!(lines(dir.path(), "starts").len(), 1, "one server answered every call");
}

#[tokio::test]
async fn concurrent_first_calls_start_one_server() {
    let dir = tempfile::tempdir().unwrap();
    let servers = calc(dir.path(), McpConfig::default());
    let calls = (0..4).map(|n| {
        let servers = servers.clone();
        async move { servers.call("demo", "calc", "add", json!({"a": n, "b": 1}), true).await }
    });
    let sums: Vec<Value> =
        futures::future::join_all(calls).await.into_iter().map(Result::unwrap).collect();
    assert_eq!(sums, [json!(1.0), json!(2.0), json!(3.0), json!(4.0)]);
    assert_eq!(lines(dir.path(), "starts").len(), 1);
}

#[tokio::test]
async fn an_error_result_names_the_plugin_server_tool_and_message() {
    let dir = tempfile::tempdir().unwrap();
    let servers = calc(dir.path(), McpConfig::default());
    let err = servers.call("demo", "calc", "fail", json!({}), true).await.unwrap_err();
    assert!(matches!(&err, McpError::ToolFailed { tool, .. } if tool == "fail"), "{err:?}");
    assert_eq!(err.to_string(), "plugin demo: mcp server calc: tool fail failed: disk on fire");
    let flow: FlowError = err.into();
    assert!(matches!(&flow, FlowError::CallFailed { .. }), "{flow:?}");
}

#[tokio::test]
async fn an_unknown_tool_lists_the_known_ones() {
    let dir = tempfile::tempdir().unwrap();
    let servers = calc(dir.path(), McpConfig::default());
    let err = servers.call("demo", "calc", "divide", json!({}), true).await.unwrap_err();
    let message = err.to_string();
    assert!(message.starts_with("plugin demo: mcp server calc ("), "{message}");
    assert!(
        message.ends_with(
            "has no tool divide (its tools: add, greet, stats, append_line, fail, crash, \
             append_then_crash, crash_once, hang)"
        ),
        "{message}"
    );
    let err = servers.call("demo", "calc", "add", json!([1, 2]), true).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "plugin demo: mcp server calc: tool add: arguments must be a JSON object, not an array"
    );
    let err = servers.call("demo", "nope", "add", json!({}), true).await.unwrap_err();
    assert_eq!(err.to_string(), "plugin demo: no mcp server nope is declared (declared: calc)");
}

#[tokio::test]
async fn a_read_only_call_cut_short_by_a_crash_runs_again_on_a_restarted_server() {
    let dir = tempfile::tempdir().unwrap();
    let servers = calc(dir.path(), McpConfig::default());
    let value = servers.call("demo", "calc", "crash_once", json!({}), true).await.unwrap();
    assert_eq!(value, json!("recovered"));
    assert_eq!(lines(dir.path(), "starts").len(), 2);
}

#[tokio::test]
async fn a_side_effecting_call_cut_short_by_a_crash_is_not_run_again() {
    let dir = tempfile::tempdir().unwrap();
    let servers = calc(dir.path(), McpConfig::default());
    let err = servers
        .call("demo", "calc", "append_then_crash", json!({"line": "once"}), false)
        .await
        .unwrap_err();
    assert!(matches!(&err, McpError::Crashed { retried: false, .. }), "{err:?}");
    let message = err.to_string();
    assert!(message.contains("exited during a call of tool append_then_crash"), "{message}");
    assert!(message.contains("has side effects and was not run again"), "{message}");
    assert!(message.contains("exited with code 3"), "{message}");
    assert!(message.contains("crashing after the append"), "{message}");
    assert_eq!(lines(dir.path(), "lines"), ["once"], "the side effect happened once");
    assert_eq!(lines(dir.path(), "starts").len(), 1, "nothing restarted the server yet");

    // The next use starts the server again.
    let sum = servers.call("demo", "calc", "add", json!({"a": 1, "b": 1}), false).await.unwrap();
    assert_eq!(sum, json!(2.0));
    assert_eq!(lines(dir.path(), "starts").len(), 2);
}

#[tokio::test]
async fn a_read_only_call_that_crashes_twice_fails_after_one_restart() {
    let dir = tempfile::tempdir().unwrap();
    let servers = calc(dir.path(), McpConfig::default());
    let err = servers.call("demo", "calc", "crash", json!({}), true).await.unwrap_err();
    assert!(matches!(&err, McpError::Crashed { retried: true, .. }), "{err:?}");
    assert!(err.to_string().contains("and again when the read-only call was retried"), "{err}");
    assert_eq!(lines(dir.path(), "starts").len(), 2);
}

#[tokio::test]
async fn a_missing_command_cannot_start() {
    let dir = tempfile::tempdir().unwrap();
    let servers = McpServers::default();
    let missing = dir.path().join("ai.iowarp.clio/bin/missing");
    let folder = dir.path().join("ai.iowarp.clio");
    let decl = declaration("gone", "bin/missing", dir.path());
    servers.declare("demo", Some(&folder), &decl, &unconfined(), &Access::default()).unwrap();
    let err = servers.call("demo", "gone", "add", json!({}), true).await.unwrap_err();
    assert!(matches!(&err, McpError::Start { .. }), "{err:?}");
    let message = err.to_string();
    let expected = format!("plugin demo: mcp server gone: cannot start {}: ", missing.display());
    assert!(message.starts_with(&expected), "{message}");

    let decl = declaration("nameless", "clio-no-such-mcp-server", dir.path());
    servers.declare("demo", None, &decl, &unconfined(), &Access::default()).unwrap();
    let err = servers.tools("demo", "nameless").await.unwrap_err();
    assert!(
        err.to_string().starts_with(
            "plugin demo: mcp server nameless: cannot start clio-no-such-mcp-server: "
        ),
        "{err}"
    );
}

#[tokio::test]
async fn a_program_that_is_not_an_mcp_server_fails_the_handshake() {
    let dir = tempfile::tempdir().unwrap();
    let servers = McpServers::default();
    let decl = McpServer {
        name: "shell".to_owned(),
        command: "/bin/sh".to_owned(),
        args: vec!["-c".to_owned(), "echo not a server >&2; exit 4".to_owned()],
        env: BTreeMap::new(),
        network: false,
    };
    servers.declare("demo", Some(dir.path()), &decl, &unconfined(), &Access::default()).unwrap();
    let err = servers.call("demo", "shell", "add", json!({}), true).await.unwrap_err();
    assert!(matches!(&err, McpError::Handshake { .. }), "{err:?}");
    let message = err.to_string();
    assert!(message.starts_with("plugin demo: mcp server shell: handshake with /bin/sh failed: "));
    assert!(message.contains("exited with code 4"), "{message}");
    assert!(message.contains("not a server"), "{message}");
}

#[tokio::test]
async fn a_slow_tool_times_out_and_the_server_stays_up() {
    let dir = tempfile::tempdir().unwrap();
    let config = McpConfig { call_timeout: Duration::from_millis(300), ..McpConfig::default() };
    let servers = calc(dir.path(), config);
    let err = servers.call("demo", "calc", "hang", json!({}), true).await.unwrap_err();
    assert!(
        matches!(&err, McpError::Timeout { tool: Some(tool), .. } if tool == "hang"),
        "{err:?}"
    );
    assert!(err.to_string().ends_with("tool hang timed out after 300 ms"), "{err}");
    let sum = servers.call("demo", "calc", "add", json!({"a": 1, "b": 2}), true).await.unwrap();
    assert_eq!(sum, json!(3.0));
    assert_eq!(lines(dir.path(), "starts").len(), 1);
}

#[tokio::test]
async fn shutdown_stops_the_servers_and_the_next_use_starts_them_again() {
    let dir = tempfile::tempdir().unwrap();
    let servers = calc(dir.path(), McpConfig::default());
    servers.tools("demo", "calc").await.unwrap();
    servers.shutdown().await;
    servers.call("demo", "calc", "add", json!({"a": 1, "b": 2}), true).await.unwrap();
    assert_eq!(lines(dir.path(), "starts").len(), 2);
}

/// Writes a plugin folder whose `bin/server` (a script that runs this test binary) is an
/// MCP server, with one read-only tool under another name and one that fails. (A script,
/// not a link: a plugin folder's digest refuses symbolic links.)
fn mcp_plugin(root: &Path, scratch: &Path) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let clio = root.join("ai.iowarp.clio");
    std::fs::create_dir_all(clio.join("bin")).unwrap();
    let server = clio.join("bin/server");
    let exe = std::env::current_exe().unwrap();
    std::fs::write(&server, format!("#!/bin/sh\nexec {:?} \"$@\"\n", exe.display().to_string()))
        .unwrap();
    std::fs::set_permissions(&server, std::fs::Permissions::from_mode(0o755)).unwrap();
    let args: Vec<String> = server_args().iter().map(|a| format!("{a:?}")).collect();
    let manifest = format!(
        r#"id = "calculator"
version = "1.0.0"
description = "Sums on an MCP server."

[[mcp_servers]]
name = "calc"
command = "bin/server"
args = [{args}]
env = {{ {SERVER_ENV} = {scratch:?} }}

[[tools]]
name = "sum"
description = "Add two numbers."
read_only = true
mcp = "calc"
mcp_tool = "add"
input_schema = {{ type = "object", properties = {{ a = {{ type = "number" }}, b = {{ type = "number" }} }} }}

[[tools]]
name = "fail"
description = "Always fails."
mcp = "calc"
permission = "allow"
"#,
        args = args.join(", "),
        scratch = scratch.display().to_string(),
    );
    std::fs::write(clio.join("plugin.toml"), manifest).unwrap();
    root.to_path_buf()
}

#[tokio::test]
async fn a_plugin_folder_with_an_mcp_server_reaches_the_registry() {
    let root = tempfile::tempdir().unwrap();
    let scratch = tempfile::tempdir().unwrap();
    let folder = mcp_plugin(root.path(), scratch.path());
    let plugin = clio_plugins::load_plugin(&folder).unwrap();
    // The server runs in the sandbox, as a plugin's code does; the deployment lets it
    // read the test binary it is.
    let exe = std::env::current_exe().unwrap();
    let sandbox = Sandbox { read: vec![exe.parent().unwrap().to_path_buf()], ..Sandbox::default() };
    let workspace = Workspace::new(Some(scratch.path().to_path_buf())).with_sandbox(sandbox);
    let registry = register_plugin(Registry::new(), &plugin, true, &workspace).unwrap();
    assert!(lines(scratch.path(), "starts").is_empty(), "registering starts nothing");

    let sum = registry.get_tool("sum").unwrap();
    assert!(sum.read_only);
    assert_eq!(sum.schema["properties"]["b"], json!({"type": "number"}));
    let call =
        |name: &'static str, args: Value| crate::support::call_tool(registry.clone(), name, args);
    let value = call("sum", json!({"a": 20, "b": 22})).await.unwrap();
    assert_eq!(value, json!(42.0));

    let err = call("fail", json!({})).await.unwrap_err();
    assert!(matches!(&err, FlowError::CallFailed { .. }), "{err:?}");
    assert!(
        err.to_string()
            .contains("plugin calculator: mcp server calc: tool fail failed: disk on fire"),
        "{err}"
    );
    assert_eq!(lines(scratch.path(), "starts").len(), 1);
}
