//! Running the built `clio` binary from the workspace root and capturing what it prints.

use std::path::{Path, PathBuf};
use std::process::Command;

/// What one run of `clio` did.
pub(crate) struct Outcome {
    pub(crate) code: i32,
    pub(crate) stdout: String,
    pub(crate) stderr: String,
}

impl Outcome {
    /// Renders the outcome as one text for a snapshot.
    pub(crate) fn render(&self) -> String {
        let mut text = format!("exit: {}\n", self.code);
        if !self.stdout.is_empty() {
            text.push_str("--- stdout\n");
            text.push_str(&self.stdout);
        }
        if !self.stderr.is_empty() {
            text.push_str("--- stderr\n");
            text.push_str(&self.stderr);
        }
        text
    }
}

/// Returns the workspace root, where README commands are run from.
pub(crate) fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap()
}

/// Runs the `clio` binary with `args` in `dir`, with a home of its own.
pub(crate) fn clio_in(dir: &Path, args: &[&str]) -> Outcome {
    let home = std::env::temp_dir().join(format!("clio-cli-default-home-{}", std::process::id()));
    let output = Command::new(env!("CARGO_BIN_EXE_clio"))
        .args(args)
        .current_dir(dir)
        .env("CLIO_HOME", home)
        .output()
        .unwrap();
    Outcome {
        code: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8(output.stdout).unwrap(),
        stderr: String::from_utf8(output.stderr).unwrap(),
    }
}

/// Runs the `clio` binary with `args` in the workspace root.
pub(crate) fn clio(args: &[&str]) -> Outcome {
    clio_in(&workspace_root(), args)
}

/// Returns a fresh, empty folder to use as `--home`.
pub(crate) fn temp_home(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("clio-cli-home-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Replaces progress timestamps (`[   0.1s]`) and task durations (`in 0.0s`) so that
/// snapshots do not depend on timing.
pub(crate) fn redact_progress(text: &str) -> String {
    let mut out = String::new();
    for line in text.split_inclusive('\n') {
        let mut line = line.to_owned();
        if line.starts_with('[')
            && let Some(end) = line.find("s] ")
        {
            line = format!("[t]{}", &line[end + 2..]);
        }
        if let Some(start) = line.find(" in ") {
            let rest = &line[start + 4..];
            let len = rest.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(rest.len());
            if len > 0 && rest[len..].starts_with('s') {
                line = format!("{} in [t]{}", &line[..start], &rest[len + 1..]);
            }
        }
        out.push_str(&line);
    }
    out
}
