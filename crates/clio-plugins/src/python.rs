//! The Python side of flows written in Python (`ai.iowarp.clio/flows/*.py`): the
//! `clio_agent` package this crate carries, written out once per process so that
//! `python3` can run it, and [`discover`], which reads the flows a set of files declares
//! from their syntax trees without running them.
//!
//! Why the syntax tree: `plugin check` must list an untrusted plugin's flows and report
//! their errors without running the plugin's code (`docs/decisions.md`); the declaration
//! the seeds define — class attributes with literal values and annotations — is fully
//! readable from it. The protocol the runtime speaks with the package's runner is in
//! `docs/python-flows.md`.

use std::io::Write as _;
use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use serde::Deserialize;
use serde_json::Value as Json;
use sha2::{Digest as _, Sha256};

/// Every `.py` file of the `clio_agent` package, as its path under `clio_agent/` and its
/// text (listed by the build script from `python/clio_agent/`).
pub const PACKAGE: &[(&str, &str)] = include!(concat!(env!("OUT_DIR"), "/python_package.rs"));

/// The environment variable naming the Python interpreter for flows (default `python3`).
pub const PYTHON_VAR: &str = "CLIO_PYTHON";

/// What went wrong preparing or running the Python side.
#[derive(Debug, thiserror::Error)]
pub enum PythonError {
    /// This build carries no Python package (it was built outside the repository).
    #[error(
        "this build of clio carries no clio_agent package, so it cannot read or run Python \
         flows; build clio from the repository (python/clio_agent/ is embedded at build time)"
    )]
    PackageMissing,
    /// The package could not be written to its folder.
    #[error("cannot write the clio_agent package to {path}: {source}")]
    Write {
        /// The file or folder.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The interpreter did not start.
    #[error(
        "cannot start the Python interpreter {interpreter:?} to read Python flows: {source} \
         (install python3 3.10 or newer, or name one with {PYTHON_VAR})"
    )]
    Start {
        /// The interpreter.
        interpreter: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The reader ran past its time (an interpreter that never exits).
    #[error(
        "reading Python flows with {interpreter:?} did not finish within {secs} s; it was stopped"
    )]
    TimedOut {
        /// The interpreter.
        interpreter: PathBuf,
        /// The limit.
        secs: u64,
    },
    /// The reader failed without a report.
    #[error("reading Python flows with {interpreter:?} failed ({status}): {stderr}")]
    Failed {
        /// The interpreter.
        interpreter: PathBuf,
        /// How it ended.
        status: String,
        /// The end of what it printed on standard error.
        stderr: String,
    },
}

/// Returns the interpreter Python flows run on: `$CLIO_PYTHON`, else `python3` on `PATH`.
pub fn interpreter() -> PathBuf {
    std::env::var_os(PYTHON_VAR)
        .filter(|v| !v.is_empty())
        .map_or_else(|| PathBuf::from("python3"), PathBuf::from)
}

/// Returns the folder holding `clio_agent/` (the package written out), writing it the first
/// time this process asks. The folder is `clio-python-<digest>` in the system's temporary
/// folder, shared by this user's processes that carry the same package, readable by its
/// owner only; a folder of that name that is not this user's, or not complete, is not
/// trusted and a folder of this process's own is written instead.
pub fn package_dir() -> Result<&'static Path, PythonError> {
    static DIR: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    let dir = DIR.get_or_init(|| write_package(&std::env::temp_dir()).map_err(|e| e.to_string()));
    match dir {
        Ok(dir) => Ok(dir.as_path()),
        Err(message) if PACKAGE.is_empty() => {
            let _ = message;
            Err(PythonError::PackageMissing)
        }
        Err(message) => Err(PythonError::Write {
            path: std::env::temp_dir(),
            source: std::io::Error::other(message.clone()),
        }),
    }
}

/// Writes the package under `base` (see [`package_dir`]) and returns the folder holding
/// `clio_agent/`.
pub fn write_package(base: &Path) -> Result<PathBuf, PythonError> {
    if PACKAGE.is_empty() {
        return Err(PythonError::PackageMissing);
    }
    let mut hash = Sha256::new();
    for (name, text) in PACKAGE {
        hash.update(name.as_bytes());
        hash.update([0]);
        hash.update(text.as_bytes());
        hash.update([0]);
    }
    let digest: String = hash.finalize().iter().take(8).map(|b| format!("{b:02x}")).collect();
    let uid = std::fs::metadata("/proc/self").map(|m| m.uid()).unwrap_or(u32::MAX);
    let shared = base.join(format!("clio-python-{uid}-{digest}"));
    if is_complete_and_ours(&shared, &digest, uid) {
        return Ok(shared);
    }
    let staging = base.join(format!("clio-python-{uid}-{digest}.{}", std::process::id()));
    let err = |path: &Path| {
        let path = path.to_path_buf();
        move |source| PythonError::Write { path, source }
    };
    let _ = std::fs::remove_dir_all(&staging);
    std::fs::create_dir_all(&staging).map_err(err(&staging))?;
    std::fs::set_permissions(&staging, std::fs::Permissions::from_mode(0o700))
        .map_err(err(&staging))?;
    for (name, text) in PACKAGE {
        let path = staging.join("clio_agent").join(name);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(err(parent))?;
        }
        std::fs::write(&path, text).map_err(err(&path))?;
    }
    let marker = staging.join(".complete");
    std::fs::File::create(&marker)
        .and_then(|mut f| f.write_all(digest.as_bytes()))
        .map_err(err(&marker))?;
    match std::fs::rename(&staging, &shared) {
        Ok(()) => Ok(shared),
        // Another process of this user won the race with the same package, or the name is
        // taken by something not ours: use ours, private to this process.
        Err(_) if is_complete_and_ours(&shared, &digest, uid) => {
            let _ = std::fs::remove_dir_all(&staging);
            Ok(shared)
        }
        Err(_) => Ok(staging),
    }
}

fn is_complete_and_ours(dir: &Path, digest: &str, uid: u32) -> bool {
    let Ok(meta) = std::fs::symlink_metadata(dir) else { return false };
    meta.is_dir()
        && meta.uid() == uid
        && meta.mode() & 0o077 == 0
        && std::fs::read_to_string(dir.join(".complete")).is_ok_and(|d| d == digest)
}

/// How long reading declarations may take: the reader only parses, so an interpreter that
/// has not answered by then is stuck (a `CLIO_PYTHON` that never exits), not slow.
pub const READ_WITHIN: std::time::Duration = std::time::Duration::from_secs(30);

/// Runs `command` (its stdin closed, Python's I/O in UTF-8) and returns its output, killing
/// it when it runs past `limit` (an error saying so).
pub(crate) fn output_within(
    mut command: Command,
    limit: std::time::Duration,
) -> std::io::Result<std::process::Output> {
    use std::io::Read as _;
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .env("PYTHONUTF8", "1")
        .env("PYTHONIOENCODING", "utf-8")
        .spawn()?;
    let drain = |pipe: Option<Box<dyn std::io::Read + Send>>| {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            if let Some(mut pipe) = pipe {
                let _ = pipe.read_to_end(&mut bytes);
            }
            bytes
        })
    };
    let stdout = drain(child.stdout.take().map(|p| Box::new(p) as _));
    let stderr = drain(child.stderr.take().map(|p| Box::new(p) as _));
    let started = std::time::Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break status;
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            return Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!("it did not finish within {} s and was stopped", limit.as_secs()),
            ));
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    };
    Ok(std::process::Output {
        status,
        stdout: stdout.join().unwrap_or_default(),
        stderr: stderr.join().unwrap_or_default(),
    })
}

/// A flow read from a `.py` file's syntax tree.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct PythonFlowInfo {
    /// Its id.
    pub id: String,
    /// The class that declares it.
    pub class: String,
    /// The file, relative to the root given to [`discover`].
    pub file: String,
    /// The line of its `class` statement.
    pub line: u32,
    /// What it does (its docstring when it declares none).
    #[serde(default)]
    pub description: String,
    /// Its railroad diagram.
    #[serde(default)]
    pub shape: String,
    /// Its model.
    #[serde(default)]
    pub model: String,
    /// Its limits, `{max_depth, max_concurrency, max_model_calls, budget_tokens}`.
    #[serde(default)]
    pub limits: Json,
    /// Its options, each `{name, type, default, line}` (`type` as data, see the page).
    #[serde(default)]
    pub options: Vec<Json>,
}

/// A problem in a `.py` flow file.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct PythonFlowError {
    /// The file, relative to the root given to [`discover`].
    pub file: String,
    /// Its line (0: the file as a whole).
    #[serde(default)]
    pub line: u32,
    /// Its column.
    #[serde(default)]
    pub column: u32,
    /// What is wrong (starting with `file:line: `).
    pub message: String,
}

/// The flows a set of `.py` files declares, and their problems.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct Discovery {
    /// The flows, in file order.
    pub flows: Vec<PythonFlowInfo>,
    /// The problems, each with its file and line.
    pub errors: Vec<PythonFlowError>,
}

/// Reads the flows that `files` declare from their syntax trees with `interpreter`,
/// without importing them: no code of theirs runs. Paths in the answer are relative to
/// `root` (a plugin folder, the one holding `ai.iowarp.clio/`).
pub fn discover(
    interpreter: &Path,
    root: &Path,
    files: &[PathBuf],
) -> Result<Discovery, PythonError> {
    if files.is_empty() {
        return Ok(Discovery::default());
    }
    let package = package_dir()?;
    let mut command = Command::new(interpreter);
    command
        .arg("-I")
        .arg("-B")
        .arg(package.join("clio_agent").join("_discover.py"))
        .arg("--root")
        .arg(root)
        .args(files);
    let output = output_within(command, READ_WITHIN).map_err(|source| {
        let interpreter = interpreter.to_path_buf();
        match source.kind() {
            std::io::ErrorKind::TimedOut => {
                PythonError::TimedOut { interpreter, secs: READ_WITHIN.as_secs() }
            }
            _ => PythonError::Start { interpreter, source },
        }
    })?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    match serde_json::from_str::<Discovery>(stdout.trim()) {
        Ok(found) if matches!(output.status.code(), Some(0 | 1)) => Ok(found),
        _ => {
            let stderr = String::from_utf8_lossy(&output.stderr);
            let tail: String = {
                let chars: Vec<char> = stderr.trim().chars().collect();
                chars[chars.len().saturating_sub(2000)..].iter().collect()
            };
            Err(PythonError::Failed {
                interpreter: interpreter.to_path_buf(),
                status: output.status.to_string(),
                stderr: tail,
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_package_is_carried_with_its_runner_and_reader() {
        let names: Vec<&str> = PACKAGE.iter().map(|(n, _)| *n).collect();
        for needed in ["__init__.py", "_flow_host.py", "_discover.py", "sdk/__init__.py"] {
            assert!(names.contains(&needed), "{needed} missing from {names:?}");
        }
    }

    #[test]
    fn the_package_is_written_once_and_reused() {
        let base = tempfile::tempdir().unwrap();
        let first = write_package(base.path()).unwrap();
        let second = write_package(base.path()).unwrap();
        assert_eq!(first, second);
        assert!(first.join("clio_agent/_flow_host.py").is_file());
        let mode = std::fs::metadata(&first).unwrap().mode();
        assert_eq!(mode & 0o077, 0, "the package folder is its owner's only");
    }

    #[test]
    fn an_interpreter_that_never_exits_is_stopped() {
        let mut command = Command::new("sh");
        command.arg("-c").arg("sleep 30");
        let err = output_within(command, std::time::Duration::from_millis(200)).unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::TimedOut);
    }

    #[test]
    fn a_folder_someone_else_made_is_not_used() {
        let base = tempfile::tempdir().unwrap();
        let first = write_package(base.path()).unwrap();
        // Opened up to others: not trusted any more.
        std::fs::set_permissions(&first, std::fs::Permissions::from_mode(0o777)).unwrap();
        let second = write_package(base.path()).unwrap();
        assert_ne!(first, second);
    }
}
