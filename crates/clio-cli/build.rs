//! Build script of the `clio` binary: puts the commit it is built from into
//! `CLIO_COMMIT`, which `clio --version` prints after the version.
//!
//! The commit comes from `git rev-parse --short HEAD`. Without git, outside a work tree
//! (a source archive) or on any failure, `CLIO_COMMIT` is left unset and `--version`
//! prints the version alone: the build never fails for want of it.

use std::process::Command;

fn main() {
    let commit = git(&["rev-parse", "--short", "HEAD"])
        .filter(|commit| !commit.is_empty() && commit.chars().all(|c| c.is_ascii_hexdigit()));
    if let Some(commit) = commit {
        println!("cargo:rustc-env=CLIO_COMMIT={commit}");
    }
    // A new commit changes HEAD (or the branch it points at); rebuild then, and only then.
    for path in git_paths() {
        println!("cargo:rerun-if-changed={path}");
    }
}

/// Returns the git files whose change means a new commit: HEAD, the ref it names (or the
/// packed refs holding it), each only if it exists, since a missing one would make cargo
/// run this script on every build.
fn git_paths() -> Vec<String> {
    let mut paths = Vec::new();
    let head = git(&["rev-parse", "--git-path", "HEAD"]);
    let reference = git(&["rev-parse", "--symbolic-full-name", "HEAD"])
        .filter(|r| r.starts_with("refs/"))
        .and_then(|r| git(&["rev-parse", "--git-path", &r]));
    let packed = git(&["rev-parse", "--git-path", "packed-refs"]);
    for path in [head, reference, packed].into_iter().flatten() {
        if std::path::Path::new(&path).exists() {
            paths.push(path);
        }
    }
    if paths.is_empty() {
        paths.push("build.rs".to_owned());
    }
    paths
}

/// Runs git with `args` and returns its trimmed output, or `None` if it fails.
fn git(args: &[&str]) -> Option<String> {
    Command::new("git")
        .args(args)
        .output()
        .ok()
        .filter(|out| out.status.success())
        .and_then(|out| String::from_utf8(out.stdout).ok())
        .map(|text| text.trim().to_owned())
}
