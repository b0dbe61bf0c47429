//! Executables as tools: [`run_executable`] runs a program under a [`Sandbox`] with its
//! JSON arguments on stdin and reads one JSON value from its stdout, within
//! [`TOOL_TIMEOUT`]-style time and [`TOOL_OUTPUT_LIMIT`] output limits.
//!
//! This is the process primitive only. Which program a tool names, whether the person
//! trusts it and whether the call may run at all is the runtime's business (clio-flow's
//! gate), which calls this from inside the tool's implementation.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::sandbox::{Access, Sandbox, SandboxError};

/// How long an executable tool may run before it is killed.
pub const TOOL_TIMEOUT: Duration = Duration::from_secs(120);

/// The most bytes an executable tool may print.
pub const TOOL_OUTPUT_LIMIT: usize = 4 * 1024 * 1024;

/// Why an executable did not answer; every message starts with the label the caller gave
/// (which names the plugin and the tool).
#[derive(Debug, thiserror::Error)]
pub enum ExecError {
    /// The program does not exist or cannot be read.
    #[error("{label}: cannot start {}: {error}", program.display())]
    Missing {
        /// What the caller calls the program.
        label: String,
        /// The program.
        program: std::path::PathBuf,
        /// Why.
        error: std::io::Error,
    },
    /// The sandbox could not be had, or the program did not start in it; see
    /// [`SandboxError::is_unavailable`].
    #[error("{label}: {error}")]
    Sandbox {
        /// What the caller calls the program.
        label: String,
        /// Why.
        error: SandboxError,
    },
    /// Its output could not be read.
    #[error("{label}: reading its output: {error}")]
    Read {
        /// What the caller calls the program.
        label: String,
        /// Why.
        error: std::io::Error,
    },
    /// Its exit could not be waited for.
    #[error("{label}: waiting for it: {error}")]
    Wait {
        /// What the caller calls the program.
        label: String,
        /// Why.
        error: std::io::Error,
    },
    /// It ran longer than its time.
    #[error("{label}: timed out after {} s", after.as_secs())]
    Timeout {
        /// What the caller calls the program.
        label: String,
        /// The limit that passed.
        after: Duration,
    },
    /// It exited unsuccessfully.
    #[error("{label}: exited with {status}: {stderr}")]
    Exited {
        /// What the caller calls the program.
        label: String,
        /// `code N`, `signal N` or `an unknown status`.
        status: String,
        /// The start of what it printed on stderr, trimmed.
        stderr: String,
    },
    /// It was stopped by one of the sandbox's limits ([`SandboxLimits`](crate::SandboxLimits)).
    #[error("{label}: stopped by {limit} (exited with {status}): {stderr}")]
    Limit {
        /// What the caller calls the program.
        label: String,
        /// The limit, as `the sandbox's memory limit (512 MiB, [sandbox] memory)`.
        limit: String,
        /// `code N`, `signal N` or `an unknown status`.
        status: String,
        /// The start of what it printed on stderr, trimmed.
        stderr: String,
    },
    /// It printed more than [`TOOL_OUTPUT_LIMIT`] bytes.
    #[error("{label}: printed more than {TOOL_OUTPUT_LIMIT} bytes")]
    TooMuchOutput {
        /// What the caller calls the program.
        label: String,
    },
    /// Its output is not one JSON value.
    #[error("{label}: its output is not JSON ({error}): {shown:?}")]
    NotJson {
        /// What the caller calls the program.
        label: String,
        /// The parser's complaint.
        error: serde_json::Error,
        /// The start of the output.
        shown: String,
    },
}

impl ExecError {
    /// Says whether no sandbox could be had: the runtime refuses such a call
    /// (`sandbox_unavailable`) rather than failing it.
    pub fn is_sandbox_unavailable(&self) -> bool {
        matches!(self, ExecError::Sandbox { error, .. } if error.is_unavailable())
    }
}

/// Runs `program` under `sandbox` with `access` (in the workspace when there is one),
/// with `args` as JSON on stdin, and reads one JSON value from its stdout; `label` names
/// it in errors. A sandbox that cannot be had is [`ExecError::Sandbox`] with an error that
/// says how to install one or turn it off.
pub async fn run_executable(
    label: &str,
    program: &Path,
    sandbox: &Sandbox,
    access: &Access,
    args: &Value,
    timeout: Duration,
) -> Result<Value, ExecError> {
    let label_owned = || label.to_owned();
    // Inside the sandbox a missing program looks like the sandbox's own failure; say it
    // plainly instead.
    if let Err(error) = std::fs::metadata(program) {
        return Err(ExecError::Missing { label: label_owned(), program: program.into(), error });
    }
    let in_sandbox = |error| ExecError::Sandbox { label: label_owned(), error };
    let mut confined = sandbox.confine(program, access).await.map_err(in_sandbox)?;
    confined
        .command()
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let mut child = confined.spawn().map_err(in_sandbox)?;
    let input = args.to_string();
    let mut stdin = child.stdin.take();
    let mut stdout = child.stdout.take();
    let mut stderr = child.stderr.take();
    let work = async {
        if let Some(stdin) = stdin.as_mut() {
            // A program that exits without reading its input is not an error here.
            let _ = stdin.write_all(input.as_bytes()).await;
        }
        drop(stdin);
        let mut out = Vec::new();
        let mut err = Vec::new();
        if let Some(stdout) = stdout.as_mut() {
            stdout
                .take(TOOL_OUTPUT_LIMIT as u64 + 1)
                .read_to_end(&mut out)
                .await
                .map_err(|error| ExecError::Read { label: label_owned(), error })?;
        }
        if let Some(stderr) = stderr.as_mut() {
            let _ = stderr.take(64 * 1024).read_to_end(&mut err).await;
        }
        let status =
            child.wait().await.map_err(|error| ExecError::Wait { label: label_owned(), error })?;
        Ok::<_, ExecError>((status, out, err))
    };
    let (status, out, err) = tokio::time::timeout(timeout, work)
        .await
        .map_err(|_| ExecError::Timeout { label: label_owned(), after: timeout })??;
    let stderr = String::from_utf8_lossy(&err).trim().to_owned();
    if !status.success() {
        // bubblewrap's own failure on a kept pass of its check: the next process checks.
        confined.ended_with(&stderr);
        let limit = confined.limit_hit(status, &stderr);
        let status = match (confined.signal(status), status.code()) {
            (Some(signal), _) => format!("signal {signal}"),
            (None, Some(code)) => format!("code {code}"),
            (None, None) => "an unknown status".to_owned(),
        };
        if let Some(limit) = limit {
            return Err(ExecError::Limit { label: label_owned(), limit, status, stderr });
        }
        return Err(ExecError::Exited { label: label_owned(), status, stderr });
    }
    if out.len() > TOOL_OUTPUT_LIMIT {
        return Err(ExecError::TooMuchOutput { label: label_owned() });
    }
    serde_json::from_slice(&out).map_err(|error| {
        let shown: String = String::from_utf8_lossy(&out).chars().take(200).collect();
        ExecError::NotJson { label: label_owned(), error, shown }
    })
}
