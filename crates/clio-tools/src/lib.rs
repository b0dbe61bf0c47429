//! The process side of tools: what runs code on the person's machine, below the runtime.
//!
//! - [`Sandbox`] confines a program (`run_code` scripts, plugin executables, the programs
//!   of script bindings): writes to the workspace only, reads of the workspace, the code's
//!   own files and the system's read-only folders, no network unless declared and allowed;
//!   bubblewrap, else Landlock, else refused ([`SandboxError`]).
//! - [`run_executable`] runs a program as a tool: JSON arguments on stdin, one JSON value
//!   on stdout, within a time ([`TOOL_TIMEOUT`]) and an output limit
//!   ([`TOOL_OUTPUT_LIMIT`]); [`ExecError`] names what went wrong.
//! - [`McpServers`] speaks MCP over stdio (rmcp) to the servers plugins declare: starts a
//!   server on first use, lists and calls its tools, restarts one that crashed, never
//!   sends a side-effecting call twice ([`McpError`]).
//!
//! Its one job: start and talk to the programs tools are made of. It does not decide
//! whether a call may run — trust, permissions, hooks, `ask` and the journal are
//! clio-flow's, whose gate is the only caller that runs a plugin's tool with these
//! primitives (`tests/it/adversarial.rs` in clio-flow checks the sources of both crates).
//! It does not read the environment (but `PATH`, to find the program a sandbox must let
//! run, as starting it would, and the variables it passes on to a sandboxed program: the
//! locale and those the deployment allows it, `sandbox/env.rs`) or the home folder, and it
//! never depends on clio-flow.
//! Its only tasks belong to an MCP server's process: one drains its stderr, one reaps it
//! after it is stopped.

mod exec;
mod mcp;
mod sandbox;

pub use crate::exec::{ExecError, TOOL_OUTPUT_LIMIT, TOOL_TIMEOUT, run_executable};
pub use crate::mcp::{McpConfig, McpError, McpServers, McpTool};
pub use crate::sandbox::{
    Access, Confined, ETC, ETC_NETWORK, SANDBOX_PATH, Sandbox, SandboxError, SandboxMode,
    find_program, program_prefixes,
};
pub use crate::sandbox::{CALL_VAR, as_call, call_tag, kill_leftovers, run_prefix};
pub use crate::sandbox::{
    DEFAULT_CPU_SECONDS, DEFAULT_FILE_SIZE, DEFAULT_MEMORY, DEFAULT_PROCESSES, EnvRule,
    SandboxLimits, is_env_name, is_locale, parse_bytes, show_bytes,
};

/// The crate README's example, run as a doctest so that it cannot go stale.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
