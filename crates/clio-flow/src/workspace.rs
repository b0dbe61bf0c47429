//! [`Workspace`]: the conversation's workspace folder. Paths are relative and stay inside
//! its root; without a root every use is refused with `CallRefused(no_workspace)`. Writes
//! are side effects: run them through [`crate::Ctx::step`].

use std::fs;
use std::io::Write;
use std::path::{Component, Path, PathBuf};

use serde_json::Value;

use crate::error::FlowError;

/// The conversation's workspace folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Workspace {
    root: Option<PathBuf>,
}

fn refused(refusal: &str, message: String) -> FlowError {
    FlowError::CallRefused { handle: None, refusal: refusal.to_owned(), message }
}

impl Workspace {
    /// Returns the workspace rooted at `root` (`None`: the conversation has none).
    pub fn new(root: Option<PathBuf>) -> Workspace {
        Workspace { root }
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
        Ok(root.join(rel))
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
