//! [`Workspace`]: the conversation's workspace folder. Paths are relative and stay inside
//! its root, symbolic links followed (sandboxed code may plant a link that points out);
//! without a root every use is refused with `CallRefused(no_workspace)`. Writes
//! are side effects: run them through [`crate::Ctx::step`].
//!
//! A workspace also carries the [`Sandbox`] policy under which code runs on it, so that
//! what is registered with a workspace (a plugin's executables) runs confined to it.

use std::fs;
use std::io::Write;
use std::path::{Component, Path, PathBuf};

use clio_tools::Sandbox;
use serde_json::Value;

use crate::error::FlowError;

/// The conversation's workspace folder, and how code runs on it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Workspace {
    root: Option<PathBuf>,
    sandbox: Sandbox,
}

fn refused(refusal: &str, message: String) -> FlowError {
    FlowError::CallRefused { handle: None, refusal: refusal.to_owned(), message }
}

impl Workspace {
    /// Returns the workspace rooted at `root` (`None`: the conversation has none), on
    /// which code runs under the default sandbox policy (mode `auto`).
    pub fn new(root: Option<PathBuf>) -> Workspace {
        Workspace { root, sandbox: Sandbox::default() }
    }

    /// Returns the workspace with code running on it under `sandbox`; give it the same
    /// policy as the runtime's [`crate::RuntimeConfig::sandbox`].
    pub fn with_sandbox(mut self, sandbox: Sandbox) -> Workspace {
        self.sandbox = sandbox;
        self
    }

    /// Returns the sandbox policy code runs under on this workspace.
    pub fn sandbox(&self) -> &Sandbox {
        &self.sandbox
    }

    /// Returns the root folder, `None` when the conversation has no workspace.
    pub fn root(&self) -> Option<&Path> {
        self.root.as_deref()
    }

    fn resolve(&self, path: &str) -> Result<PathBuf, FlowError> {
        let root = self.root.as_ref().ok_or_else(|| {
            refused("no_workspace", "the conversation has no workspace folder".into())
        })?;
        let rel = Path::new(path);
        let inside = !path.is_empty()
            && rel.components().all(|c| matches!(c, Component::Normal(_) | Component::CurDir));
        if !inside {
            return Err(refused(
                "outside_workspace",
                format!("path {path:?} is not inside the workspace"),
            ));
        }
        let full = root.join(rel);
        Self::contained(root, &full, path)?;
        Ok(full)
    }

    /// Checks that `full` (`path` as the caller gave it) stays inside `root` once symbolic
    /// links are followed. Sandboxed code may leave a link in the workspace that points
    /// out of it; the basic tools run unconfined and must not follow it out.
    pub(crate) fn contained(root: &Path, full: &Path, path: &str) -> Result<(), FlowError> {
        // A root that does not exist yet holds no link.
        let Ok(real_root) = fs::canonicalize(root) else { return Ok(()) };
        // The deepest part of the path that exists, a dangling link included: whatever is
        // created below it stays below it.
        let mut existing = full.to_path_buf();
        while fs::symlink_metadata(&existing).is_err() {
            match existing.parent() {
                Some(parent) => existing = parent.to_path_buf(),
                None => break,
            }
        }
        match fs::canonicalize(&existing) {
            Ok(real) if real.starts_with(&real_root) => Ok(()),
            _ => Err(refused(
                "outside_workspace",
                format!("path {path:?} leads outside the workspace through a symbolic link"),
            )),
        }
    }

    fn io(path: &str, err: std::io::Error) -> FlowError {
        FlowError::CallFailed { handle: None, message: format!("workspace {path}: {err}") }
    }

    /// Returns the text of file `path`.
    pub fn read(&self, path: &str) -> Result<String, FlowError> {
        let full = self.resolve(path)?;
        fs::read_to_string(full).map_err(|e| Self::io(path, e))
    }

    /// Writes `text` to file `path`, creating its folders, and returns `path`.
    pub fn write(&self, path: &str, text: &str) -> Result<String, FlowError> {
        let full = self.resolve(path)?;
        if let Some(dir) = full.parent() {
            fs::create_dir_all(dir).map_err(|e| Self::io(path, e))?;
        }
        fs::write(&full, text).map_err(|e| Self::io(path, e))?;
        Ok(path.to_owned())
    }

    /// Appends one line to file `path`: `value` itself when it is text, else its JSON.
    pub fn append(&self, path: &str, value: &Value) -> Result<String, FlowError> {
        let full = self.resolve(path)?;
        if let Some(dir) = full.parent() {
            fs::create_dir_all(dir).map_err(|e| Self::io(path, e))?;
        }
        let line = match value {
            Value::String(s) => s.clone(),
            v => v.to_string(),
        };
        let mut file = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&full)
            .map_err(|e| Self::io(path, e))?;
        writeln!(file, "{line}").map_err(|e| Self::io(path, e))?;
        Ok(path.to_owned())
    }
}
