//! Tidy: the project rules the compiler does not check, run by `cargo xtask tidy` and by
//! plain `cargo test` (the test at the bottom).
//!
//! - Internal dependencies point down the layer stack only (SPEC §2, STYLE §A.1),
//!   dev-dependencies included; the layer table lists each crate after every crate it may
//!   depend on, so no circle of crates can pass it.
//! - Each third-party dependency has its owners (STYLE §A.2), and the pure and sync
//!   crates do not reach tokio even transitively (STYLE §C).
//! - Inside each crate, the top-level modules form layers: no circle of modules, but for
//!   clio-flow's engine, which counts as one module (`crate::modules`).
//! - Every `.rs` file starts with a `//!` paragraph (STYLE §E).
//! - No debugging or unfinished markers in the code (STYLE §D.10).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

/// The clio crates each crate may depend on (normal and dev dependencies alike), bottom up:
/// a crate may depend only on crates listed before it (`check_layer_order`).
const ALLOWED_INTERNAL: &[(&str, &[&str])] = &[
    ("clio-spec", &[]),
    ("clio-plugins", &["clio-spec"]),
    ("clio-journal", &["clio-spec"]),
    ("clio-postgres", &["clio-spec", "clio-journal"]),
    ("clio-workflow", &["clio-spec"]),
    ("clio-models", &["clio-spec"]),
    ("clio-tools", &["clio-spec", "clio-plugins"]),
    ("clio-team", &["clio-spec", "clio-journal", "clio-models"]),
    (
        "clio-flow",
        &[
            "clio-spec",
            "clio-plugins",
            "clio-journal",
            "clio-workflow",
            "clio-models",
            "clio-tools",
            "clio-team",
            // A dev-dependency only: the PostgreSQL bench (benches/postgres.rs).
            "clio-postgres",
        ],
    ),
    (
        "clio-cli",
        &[
            "clio-spec",
            "clio-plugins",
            "clio-journal",
            "clio-workflow",
            "clio-models",
            "clio-tools",
            "clio-team",
            "clio-flow",
            "clio-postgres",
        ],
    ),
    // The Python package's native module: the rules of the crates below, for Python, and
    // the `clio` command's library, which the embedded runtime (`clio_agent.runtime`) drives
    // in-process: the top of the stack, so nothing depends on it.
    ("clio-py", &["clio-spec", "clio-plugins", "clio-workflow", "clio-cli"]),
    ("xtask", &[]),
];

/// Third-party crates that only the listed packages may name directly.
const OWNED_DEPENDENCIES: &[(&str, &[&str])] = &[
    ("redb", &["clio-journal"]),
    // The PostgreSQL journal's driver (docs/decisions.md, "The PostgreSQL journal"); the
    // CLI's worker tests read the database they ran on with it.
    ("postgres", &["clio-postgres", "clio-cli"]),
    ("petgraph", &["clio-workflow", "clio-plugins"]),
    // The clio-agent Python package's native module (docs/decisions.md, "The Python package is a
    // PyO3 crate").
    ("pyo3", &["clio-py"]),
    ("tokio", &["clio-models", "clio-tools", "clio-flow", "clio-cli"]),
    ("clap", &["clio-cli", "xtask"]),
    ("clap_complete", &["clio-cli"]),
    ("clap_mangen", &["clio-cli"]),
    ("anyhow", &["clio-cli", "xtask"]),
    ("semver", &["clio-spec", "clio-plugins"]),
    ("rmcp", &["clio-tools", "clio-flow"]),
    ("reqwest", &["clio-models"]),
    ("indicatif", &["clio-cli"]),
    // The HTTP API and viewer of `clio serve` (docs/decisions.md, "clio serve's HTTP API").
    ("axum", &["clio-cli"]),
    ("landlock", &["clio-tools"]),
    // `tracing` is a facade any crate may emit through (no row); what prints the events
    // is the CLI's alone (docs/decisions.md, "Logging through tracing").
    ("tracing-subscriber", &["clio-cli"]),
    // The binary's allocator, and the flow bench's (docs/decisions.md, "The clio binary
    // allocates with jemalloc"): a library leaves the allocator to the program.
    ("tikv-jemallocator", &["clio-cli", "clio-flow"]),
];

/// Crates that must not reach tokio through their normal dependencies.
const NO_TOKIO: &[&str] = &["clio-spec", "clio-plugins", "clio-journal", "clio-workflow"];

/// Runs every check; returns every problem found.
pub(crate) fn check(root: &Path) -> Result<(), Vec<String>> {
    let mut problems = Vec::new();
    check_layer_order(ALLOWED_INTERNAL, &mut problems);
    match metadata(root, false) {
        Ok(metadata) => {
            check_dependencies(&metadata, &mut problems);
            check_no_tokio(&metadata, &mut problems);
        }
        Err(error) => problems.push(error),
    }
    check_module_circles(root, &mut problems);
    for file in rust_files(root) {
        check_file(root, &file, &mut problems);
    }
    if problems.is_empty() { Ok(()) } else { Err(problems) }
}

/// Reports each circle of top-level modules in each crate under `crates/`
/// ([`crate::modules`]), naming the crate and the modules in it.
pub(crate) fn check_module_circles(root: &Path, problems: &mut Vec<String>) {
    let Ok(entries) = std::fs::read_dir(root.join("crates")) else {
        problems.push("crates/: cannot be read".to_owned());
        return;
    };
    let mut crates: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
    crates.sort();
    for dir in crates {
        let src = dir.join("src");
        if !src.is_dir() {
            continue;
        }
        let name = dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let knot: &[&str] =
            if name == crate::modules::ENGINE.0 { crate::modules::ENGINE.1 } else { &[] };
        match crate::modules::graph(&src) {
            Ok(graph) => {
                for circle in crate::modules::circles(&graph, knot) {
                    problems.push(format!(
                        "crates/{name}: the modules {} use each other in a circle; move what they share into a module below them",
                        circle.join(" → ")
                    ));
                }
            }
            Err(problem) => problems.push(problem),
        }
    }
}

/// Runs `cargo metadata` in `root`.
pub(crate) fn metadata(root: &Path, no_deps: bool) -> Result<Value, String> {
    let mut command = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned()));
    command.args(["metadata", "--format-version", "1"]).current_dir(root);
    if no_deps {
        command.arg("--no-deps");
    }
    let output = command.output().map_err(|e| format!("cannot run cargo metadata: {e}"))?;
    if !output.status.success() {
        return Err(format!("cargo metadata failed: {}", String::from_utf8_lossy(&output.stderr)));
    }
    serde_json::from_slice(&output.stdout).map_err(|e| format!("cargo metadata output: {e}"))
}

fn workspace_packages(metadata: &Value) -> Vec<&Value> {
    let members: BTreeSet<&str> = metadata["workspace_members"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    metadata["packages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|p| p["id"].as_str().is_some_and(|id| members.contains(id)))
        .collect()
}

fn check_dependencies(metadata: &Value, problems: &mut Vec<String>) {
    let allowed: BTreeMap<&str, &[&str]> = ALLOWED_INTERNAL.iter().copied().collect();
    for package in workspace_packages(metadata) {
        let name = package["name"].as_str().unwrap_or_default();
        let Some(allowed_here) = allowed.get(name) else {
            problems.push(format!("{name}: not in tidy's layer table; add it to ALLOWED_INTERNAL"));
            continue;
        };
        for dep in package["dependencies"].as_array().into_iter().flatten() {
            let dep_name = dep["name"].as_str().unwrap_or_default();
            let internal = dep_name.starts_with("clio-") || dep_name == "xtask";
            // A crate's tests may take the crate itself with a feature turned on.
            let itself = dep_name == name;
            if internal && !itself && !allowed_here.contains(&dep_name) {
                problems.push(format!(
                    "{name} depends on {dep_name}, which the layering forbids (allowed: {allowed_here:?})"
                ));
            }
            if let Some((_, owners)) = OWNED_DEPENDENCIES.iter().find(|(d, _)| *d == dep_name)
                && !owners.contains(&name)
            {
                problems.push(format!(
                    "{name} depends on {dep_name}, which only {owners:?} may use (STYLE §A.2)"
                ));
            }
        }
    }
}

/// Checks that `table` is in layer order: each crate may depend only on crates listed
/// before it, which makes the allowed edges acyclic.
fn check_layer_order(table: &[(&str, &[&str])], problems: &mut Vec<String>) {
    for (index, (name, allowed)) in table.iter().enumerate() {
        for dep in *allowed {
            if !table[..index].iter().any(|(below, _)| below == dep) {
                problems.push(format!(
                    "tidy's layer table lets {name} depend on {dep}, which is not listed below it"
                ));
            }
        }
    }
}

fn check_no_tokio(metadata: &Value, problems: &mut Vec<String>) {
    let nodes: BTreeMap<&str, &Value> = metadata["resolve"]["nodes"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|node| Some((node["id"].as_str()?, node)))
        .collect();
    for package in workspace_packages(metadata) {
        let name = package["name"].as_str().unwrap_or_default();
        if !NO_TOKIO.contains(&name) {
            continue;
        }
        let Some(start) = package["id"].as_str() else { continue };
        let mut seen = BTreeSet::new();
        let mut stack = vec![start];
        while let Some(id) = stack.pop() {
            if !seen.insert(id) {
                continue;
            }
            if id != start && id.contains("#tokio@") {
                problems.push(format!("{name} reaches tokio through its dependencies ({id})"));
                break;
            }
            let Some(node) = nodes.get(id) else { continue };
            for dep in node["deps"].as_array().into_iter().flatten() {
                let normal = dep["dep_kinds"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .any(|kind| kind["kind"].is_null());
                if normal && let Some(dep_id) = dep["pkg"].as_str() {
                    stack.push(dep_id);
                }
            }
        }
    }
}

fn rust_files(root: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut dirs = vec![root.join("crates"), root.join("xtask"), root.join("examples")];
    while let Some(dir) = dirs.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                if path.file_name().is_some_and(|n| n != "target") {
                    dirs.push(path);
                }
            } else if path.extension().is_some_and(|e| e == "rs") {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

fn check_file(root: &Path, file: &Path, problems: &mut Vec<String>) {
    let shown = file.strip_prefix(root).unwrap_or(file).display().to_string();
    let Ok(text) = std::fs::read_to_string(file) else {
        problems.push(format!("{shown}: cannot be read"));
        return;
    };
    let first_code_line = text.lines().map(str::trim).find(|line| !line.is_empty());
    if !first_code_line.is_some_and(|line| line.starts_with("//!")) {
        problems.push(format!("{shown}: does not start with a `//!` doc paragraph"));
    }
    // The markers are assembled so that this file does not match itself.
    let markers = [
        ["dbg", "!("].concat(),
        ["todo", "!("].concat(),
        ["unimplemented", "!("].concat(),
        ["#[should", "_panic"].concat(),
        ["#[ig", "nore"].concat(),
    ];
    for (index, line) in text.lines().enumerate() {
        for marker in &markers {
            if line.contains(marker.as_str()) {
                problems.push(format!("{shown}:{}: `{marker}` is not allowed", index + 1));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tidy() {
        let root = crate::project_root();
        if let Err(problems) = check(&root) {
            panic!("tidy found {} problem(s):\n{}", problems.len(), problems.join("\n"));
        }
    }

    #[test]
    fn file_checks_catch_missing_docs_and_markers() {
        let dir = std::env::temp_dir().join(format!("clio-tidy-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("bad.rs");
        std::fs::write(&file, ["fn f() { ", "dbg", "!(1); }\n"].concat()).unwrap();
        let mut problems = Vec::new();
        check_file(&dir, &file, &mut problems);
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert!(problems[0].contains("does not start with a `//!`"));
        assert!(problems[1].contains("bad.rs:1"));
    }

    #[test]
    fn a_layer_table_with_a_circle_is_refused() {
        let mut problems = Vec::new();
        check_layer_order(&[("a", &["b"]), ("b", &["a"])], &mut problems);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(problems[0].contains("lets a depend on b"));
        let mut problems = Vec::new();
        check_layer_order(ALLOWED_INTERNAL, &mut problems);
        assert!(problems.is_empty(), "{problems:?}");
    }

    #[test]
    fn layering_violations_are_reported() {
        let metadata = serde_json::json!({
            "workspace_members": ["a", "b"],
            "packages": [
                {"id": "a", "name": "clio-spec", "dependencies": [{"name": "clio-flow"}]},
                {"id": "b", "name": "clio-workflow", "dependencies": [{"name": "redb"}]},
            ]
        });
        let mut problems = Vec::new();
        check_dependencies(&metadata, &mut problems);
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert!(problems[0].contains("clio-spec depends on clio-flow"));
        assert!(problems[1].contains("clio-workflow depends on redb"));
    }
}
