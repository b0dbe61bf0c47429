//! The built-in `run_code` tool and script bindings: an agent's Python script runs in a
//! child process in the run's workspace, with a time and an output limit, and calls the
//! agent's tools through a generated `clio` module (protocol in `docs/run_code.md`).
//!
//! Each tool call a script makes is a call of the `run_code` task's context marked
//! [`from_code`](crate::Call::from_code): the gate applies callers, permissions and hooks
//! exactly as for a direct call, and the call is a child task in the journal. A reserved
//! call `__<binding>_<name>__` is answered by a [`Binding`]'s host function instead, with
//! no task of its own but an event in the run. A `run_code` task cut short by a crash runs
//! again only when every tool it called is read-only (the script's finished calls then
//! replay from the journal); otherwise it is `CallInterrupted`.
//!
//! The script runs in the sandbox of [`crate::RuntimeConfig::sandbox`]: it writes only to
//! the workspace, its scratch folder and a private temporary folder, reads those, the
//! interpreter and the system's read-only folders, and has no network; so it cannot reach
//! a plugin's executable by its path and run what the gate would refuse.
//!
//! What it does not do: keep a script alive across a restart of the process.

mod process;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clio_plugins::{Callers, ToolOptions};
use serde_json::{Value, json};

use crate::ctx::Ctx;
use crate::error::FlowError;
use crate::registry::{Registry, Tool};
use crate::result::{CallInput, CallKind};

/// How `run_code` runs scripts.
#[derive(Debug, Clone, PartialEq)]
pub struct RunCodeConfig {
    /// The Python 3 interpreter: a path, or a name found on `PATH`.
    pub interpreter: PathBuf,
    /// The folder under which each script gets its scratch folder (the generated `clio`
    /// module, the script, the socket); it must be short enough for a unix socket path.
    /// The caller chooses it (the CLI passes the system's temporary folder).
    pub scratch: PathBuf,
    /// How long a script may run when the agent does not say.
    pub timeout: Duration,
    /// The longest a script may run, whatever the agent asks.
    pub max_timeout: Duration,
    /// The most bytes a script may print, stdout and stderr together; past it the script
    /// is killed.
    pub output_limit: usize,
}

impl Default for RunCodeConfig {
    /// Returns `python3` from `PATH`, scratch folders under `/tmp`, 60 s (at most 600 s)
    /// and 256 KiB of output.
    fn default() -> Self {
        RunCodeConfig {
            interpreter: PathBuf::from("python3"),
            scratch: PathBuf::from("/tmp"),
            timeout: Duration::from_secs(60),
            max_timeout: Duration::from_secs(600),
            output_limit: 256 * 1024,
        }
    }
}

/// Adds the built-in `run_code` tool, which runs scripts as `config` says.
///
/// Its arguments are `{code, timeout_secs?, language?}` (`language` is `python`, the
/// default); its value is `{stdout, stderr}`. A script that fails (a syntax error, an
/// exception, a timeout, too much output, a crash) fails the call with a message naming
/// what happened (`run_code <kind>: …`), its traceback and what it printed.
pub fn register_run_code(registry: Registry, config: RunCodeConfig) -> Registry {
    let config = Arc::new(config);
    let tool = Tool::contextual("run_code", move |args: Value, ctx: Ctx| {
        let config = Arc::clone(&config);
        async move { run_code(&config, &args, &ctx).await }
    })
    .describe(
        "Run a Python 3 script in the workspace: {code, timeout_secs?}. The script may \
         `import clio` and call tools with `clio.call(\"tool_name\", {...})`, which returns \
         the tool's value or raises `clio.ToolError`. Returns what it printed.",
    );
    // Like the `core` plugin's declaration: a script cannot start another script.
    let direct = ToolOptions { callers: Some(Callers::Direct), ..ToolOptions::default() };
    let tool = Tool {
        options: direct,
        schema: json!({
            "type": "object",
            "properties": {
                "code": { "type": "string", "description": "The Python 3 script." },
                "timeout_secs": { "type": "integer", "minimum": 1 },
                "language": { "type": "string", "enum": ["python"] }
            },
            "required": ["code"]
        }),
        ..tool
    };
    registry.tool(tool)
}

fn failed(message: String) -> FlowError {
    FlowError::CallFailed { handle: None, message }
}

async fn run_code(config: &RunCodeConfig, args: &Value, ctx: &Ctx) -> Result<Value, FlowError> {
    let Some(code) = args.get("code").and_then(Value::as_str) else {
        return Err(failed("run_code: argument `code` is required and must be text".into()));
    };
    if let Some(language) = args.get("language").filter(|l| !l.is_null())
        && !matches!(language.as_str(), Some("python" | "python3"))
    {
        return Err(FlowError::CallRefused {
            handle: None,
            refusal: "language_unsupported".into(),
            message: format!("run_code runs python only, not {language}"),
        });
    }
    let timeout = match args.get("timeout_secs").filter(|t| !t.is_null()) {
        None => config.timeout,
        Some(t) => match t.as_u64().filter(|t| *t > 0) {
            Some(secs) => Duration::from_secs(secs).min(config.max_timeout),
            None => {
                return Err(failed(format!(
                    "run_code: `timeout_secs` must be a positive whole number, not {t}"
                )));
            }
        },
    };
    let workspace = ctx.workspace();
    let Some(root) = workspace.root() else {
        return Err(FlowError::CallRefused {
            handle: None,
            refusal: "no_workspace".into(),
            message: "run_code runs in the workspace folder and the conversation has none".into(),
        });
    };
    let script = process::Script { code, cwd: root, timeout };
    let outcome = process::run(config, &script, ctx).await;
    match outcome.result {
        Ok(()) => Ok(json!({ "stdout": outcome.stdout, "stderr": outcome.stderr })),
        Err(err) => {
            let mut message = format!("run_code {}: {err}", err.kind());
            if let Some(traceback) = err.traceback() {
                message.push('\n');
                message.push_str(traceback.trim_end());
            }
            for (name, text) in [("stdout", &outcome.stdout), ("stderr", &outcome.stderr)] {
                if !text.is_empty() {
                    message.push_str(&format!("\n--- {name} ---\n{}", text.trim_end()));
                }
            }
            Err(failed(message))
        }
    }
}

/// Answers one call a script made: a reserved call by its binding, anything else as a
/// tool call from code.
pub(crate) async fn answer(ctx: &Ctx, name: &str, args: Value) -> Result<Value, FlowError> {
    if is_reserved(name) {
        return host_call(ctx, name, args).await;
    }
    match ctx.registry().kind_of(name) {
        Some(CallKind::Tool) | None => {}
        Some(kind) => {
            return Err(FlowError::CallRefused {
                handle: None,
                refusal: "not_a_tool".into(),
                message: format!("{name} is a {kind:?}, and a script calls only tools"),
            });
        }
    }
    let res = ctx.call(name, CallInput::Json(args)).from_code().await?;
    Ok(res.value)
}

/// Says whether `name` is a reserved call, `__<binding>_<name>__`.
fn is_reserved(name: &str) -> bool {
    name.len() > 4 && name.starts_with("__") && name.ends_with("__")
}

async fn host_call(ctx: &Ctx, name: &str, args: Value) -> Result<Value, FlowError> {
    let registry = &ctx.registry();
    let Some((binding, plugin, handler)) = registry
        .binding_for(name)
        .and_then(|b| Some((b.name().to_owned(), b.plugin.clone(), b.handler(name)?)))
    else {
        return Err(FlowError::CallRefused {
            handle: None,
            refusal: "not_bound".into(),
            message: format!("reserved call {name} is not bound: no binding answers it"),
        });
    };
    // A plugin's binding is the plugin's code: it runs only once the plugin is trusted.
    // (A host call asks nothing: the script's trust came with its own gated call.)
    if !crate::gate::trusted(ctx, &plugin) {
        let info = registry.plugin_info(&plugin).cloned().unwrap_or_default();
        return Err(FlowError::FlowNotTrusted {
            target: name.to_owned(),
            plugin,
            version: info.version,
            digest: info.digest,
            trust_with: info.trust_with,
        });
    }
    let res = handler(args.clone()).await;
    let mut event = json!({ "event": "host_call", "binding": binding, "call": name, "args": args });
    match &res {
        Ok(value) => event["value"] = value.clone(),
        Err(err) => event["error"] = Value::String(err.to_string()),
    }
    ctx.record_event(event).await?;
    res
}
