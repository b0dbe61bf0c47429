//! The real MCP server the MCP tests talk to, built with rmcp's server side.
//!
//! It lives in this test binary: a test re-runs the binary itself
//! (`std::env::current_exe()`) with `--exact mcp::server::run_as_mcp_server` and
//! [`SERVER_ENV`] set to a scratch folder, and that one test then serves MCP on stdin and
//! stdout until stdin closes. A separate `[[bin]]` would ship with the library and an
//! example is not built by `cargo test --test it`; this way the server is always built
//! with the tests. libtest's own "running 1 test" line on stdout comes before the server
//! starts; it is not JSON, and MCP clients (rmcp's included) skip such lines. In the
//! normal test run, without [`SERVER_ENV`], the test returns at once.
//!
//! Its tools, and the files it keeps in the scratch folder:
//! - `add {a, b}` (read-only) answers the sum as JSON text; `greet {name}` plain text;
//!   `stats` structured content;
//! - `append_line {line}` appends to `lines`;
//! - `fail` answers an error result (`isError`);
//! - `crash` exits with code 3; `append_then_crash {line}` appends to `lines`, then exits;
//!   `crash_once` exits the first time (leaving `crashed`) and answers `"recovered"` after;
//! - `hang` never answers.
//!
//! Each start appends a line to `starts`.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use serde_json::{Map, Value, json};

/// The variable that turns the re-run test binary into the server: the scratch folder.
pub(crate) const SERVER_ENV: &str = "CLIO_MCP_TEST_SERVER_DIR";

/// The arguments that make the test binary run only [`run_as_mcp_server`].
pub(crate) fn server_args() -> Vec<String> {
    ["--exact", "mcp::server::run_as_mcp_server", "--nocapture", "--test-threads=1", "-q"]
        .map(str::to_owned)
        .to_vec()
}

/// Appends `line` to the file `name` in `dir`.
fn append(dir: &Path, name: &str, line: &str) {
    let mut file =
        std::fs::OpenOptions::new().create(true).append(true).open(dir.join(name)).unwrap();
    writeln!(file, "{line}").unwrap();
}

#[tokio::test]
async fn run_as_mcp_server() {
    let Some(dir) = std::env::var_os(SERVER_ENV) else { return };
    let dir = PathBuf::from(dir);
    append(&dir, "starts", "start");
    // The names of the variables it was started with, for the sandbox's tests.
    let mut names: Vec<String> =
        std::env::vars_os().map(|(name, _)| name.to_string_lossy().into_owned()).collect();
    names.sort();
    append(&dir, "env", &names.join(" "));
    let server = TestServer { dir };
    if let Ok(running) = server.serve((tokio::io::stdin(), tokio::io::stdout())).await {
        let _ = running.waiting().await;
    }
    // Exiting here keeps libtest's closing lines off the (now closed) connection.
    std::process::exit(0);
}

struct TestServer {
    dir: PathBuf,
}

fn tool(name: &'static str, description: &'static str, properties: Value) -> Tool {
    let schema = json!({ "type": "object", "properties": properties });
    Tool::new(name, description, Arc::new(schema.as_object().cloned().unwrap_or_default()))
}

fn crash(message: &str) -> ! {
    let _ = writeln!(std::io::stderr(), "{message}");
    std::process::exit(3);
}

fn text(text: impl Into<String>) -> CallToolResult {
    CallToolResult::success(vec![ContentBlock::text(text)])
}

impl TestServer {
    fn answer(&self, name: &str, args: &Map<String, Value>) -> CallToolResult {
        let number = |key: &str| args.get(key).and_then(Value::as_f64).unwrap_or(0.0);
        let string = |key: &str| args.get(key).and_then(Value::as_str).unwrap_or("").to_owned();
        match name {
            "add" => text(json!(number("a") + number("b")).to_string()),
            "greet" => text(format!("hello, {}", string("name"))),
            "stats" => CallToolResult::structured(json!({ "count": 2, "mean": 1.5 })),
            "append_line" => {
                append(&self.dir, "lines", &string("line"));
                text("ok")
            }
            "fail" => CallToolResult::error(vec![ContentBlock::text("disk on fire")]),
            "crash" => crash("crashing on purpose"),
            "append_then_crash" => {
                append(&self.dir, "lines", &string("line"));
                crash("crashing after the append")
            }
            "crash_once" => {
                let marker = self.dir.join("crashed");
                if marker.exists() {
                    return text("recovered");
                }
                append(&self.dir, "crashed", "yes");
                crash("crashing once")
            }
            other => CallToolResult::error(vec![ContentBlock::text(format!("no tool {other}"))]),
        }
    }
}

impl ServerHandler for TestServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("clio-mcp-test-server", "1.0.0"))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let number = json!({ "type": "number" });
        let string = json!({ "type": "string" });
        Ok(ListToolsResult::with_all_items(vec![
            tool("add", "Add two numbers.", json!({ "a": number, "b": number })),
            tool("greet", "Greet someone.", json!({ "name": string })),
            tool("stats", "Answer structured content.", json!({})),
            tool("append_line", "Append a line to a file.", json!({ "line": string })),
            tool("fail", "Always fail.", json!({})),
            tool("crash", "Exit the server.", json!({})),
            tool("append_then_crash", "Append, then exit.", json!({ "line": string })),
            tool("crash_once", "Exit the first time.", json!({})),
            tool("hang", "Never answer.", json!({})),
        ]))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        if request.name == "hang" {
            std::future::pending::<()>().await;
        }
        let args = request.arguments.unwrap_or_default();
        Ok(self.answer(&request.name, &args).into())
    }
}
