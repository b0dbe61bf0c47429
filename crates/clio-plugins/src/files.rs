//! The files of a plugin folder besides its manifest: paths that must stay inside
//! `ai.iowarp.clio/`, command files, the `prompts/` folder, and the `flows/*.json`
//! workflow files that become flows.
//!
//! Workflow files are checked for structure only — an object with a `steps` list or a
//! bare list of steps, each an object with a non-empty string `id` and `target`, and
//! `after` a list of strings when present. The full workflow validation (id grammar,
//! unknown dependencies, cycles, input references) lives in clio-workflow, which this
//! crate may not depend on; the runtime runs it when the flow starts.

use std::path::{Component, Path, PathBuf};

use serde_json::Value as Json;

use crate::decl::{FlowDecl, FlowSource};
use crate::problem::{ProblemCode, Sink};
use crate::tree::parse_json;

/// Checks that `path` is relative and stays inside its folder; reports `path_outside`.
pub(crate) fn inside(sink: &mut Sink<'_>, field: &str, line: Option<u32>, path: &str) -> bool {
    let p = Path::new(path);
    let escapes = p.is_absolute()
        || p.components()
            .any(|c| matches!(c, Component::ParentDir | Component::RootDir | Component::Prefix(_)))
        || path.is_empty();
    if escapes {
        sink.push(
            ProblemCode::PathOutside,
            field,
            line,
            format!("{path:?} must be a relative path inside ai.iowarp.clio/"),
        );
    }
    !escapes
}

/// Checks that command `path` (relative to `base`) exists and, on Unix, is executable.
pub(crate) fn check_command(
    sink: &mut Sink<'_>,
    base: &Path,
    field: &str,
    line: Option<u32>,
    path: &str,
) {
    if !inside(sink, field, line, path) {
        return;
    }
    let full = base.join(path);
    match std::fs::metadata(&full) {
        Ok(meta) if meta.is_file() => {
            if !is_executable(&meta) {
                sink.push(
                    ProblemCode::ExecutableMissing,
                    field,
                    line,
                    format!("{path:?} is not executable"),
                );
            }
        }
        _ => sink.push(
            ProblemCode::ExecutableMissing,
            field,
            line,
            format!("{path:?} does not exist"),
        ),
    }
}

#[cfg(unix)]
pub(crate) fn is_executable(meta: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::PermissionsExt;
    meta.permissions().mode() & 0o111 != 0
}

#[cfg(not(unix))]
pub(crate) fn is_executable(_meta: &std::fs::Metadata) -> bool {
    true
}

/// Lists every file under `dir`, as paths relative to `base`, sorted; a missing `dir` is
/// empty. Unreadable entries are reported as `io_error`.
pub(crate) fn list_files(sink: &mut Sink<'_>, base: &Path, dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(current) = stack.pop() {
        let entries = match std::fs::read_dir(&current) {
            Ok(entries) => entries,
            Err(_) if !current.exists() => continue,
            Err(err) => {
                sink.push(
                    ProblemCode::IoError,
                    "",
                    None,
                    format!("cannot read {}: {err}", current.display()),
                );
                continue;
            }
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if let Ok(rel) = path.strip_prefix(base) {
                out.push(rel.to_path_buf());
            }
        }
    }
    out.sort();
    out
}

/// Reads the `flows/*.json` workflow files of `clio_dir` into flow declarations.
///
/// `prefix` is the folder's display path (`plugins/pdf/ai.iowarp.clio/`); problems name
/// each flow file.
pub(crate) fn read_flows(
    problems: &mut Vec<crate::problem::Problem>,
    prefix: &str,
    clio_dir: &Path,
) -> Vec<FlowDecl> {
    let flows_dir = clio_dir.join("flows");
    let mut entries: Vec<PathBuf> = match std::fs::read_dir(&flows_dir) {
        Ok(entries) => entries.flatten().map(|e| e.path()).collect(),
        Err(_) => return Vec::new(),
    };
    entries.sort();
    let mut flows = Vec::new();
    for path in entries {
        if path.extension().is_none_or(|ext| ext != "json") {
            continue;
        }
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let mut sink = Sink { file: format!("{prefix}flows/{name}"), problems };
        let id = name.trim_end_matches(".json").to_owned();
        crate::plugin::id_problem(&mut sink, "", &id);
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(err) => {
                sink.push(
                    ProblemCode::IoError,
                    "",
                    None,
                    format!("cannot read the workflow file: {err}"),
                );
                continue;
            }
        };
        let json = match parse_json(&text) {
            Ok((_, json)) => json,
            Err(err) => {
                sink.push(ProblemCode::ParseError, "", err.line, err.message);
                continue;
            }
        };
        let description = check_workflow(&mut sink, &json);
        flows.push(FlowDecl {
            id,
            description,
            source: FlowSource::Workflow {
                path: PathBuf::from("flows").join(&name),
                workflow: json,
            },
        });
    }
    flows
}

/// Checks a workflow's structure and returns its `description`, if it has one.
fn check_workflow(sink: &mut Sink<'_>, json: &Json) -> String {
    let mut bad = |field: String, message: &str| {
        sink.push(ProblemCode::WorkflowInvalid, field, None, message)
    };
    let (steps, description) = match json {
        Json::Array(steps) => (steps, String::new()),
        Json::Object(map) => {
            for key in map.keys() {
                if key != "steps" && key != "description" {
                    bad(key.clone(), "unknown field, expected one of: description, steps");
                }
            }
            let description =
                map.get("description").and_then(Json::as_str).unwrap_or_default().to_owned();
            match map.get("steps") {
                Some(Json::Array(steps)) => (steps, description),
                Some(_) => {
                    bad("steps".to_owned(), "expected a list of steps");
                    return description;
                }
                None => {
                    bad("steps".to_owned(), "a workflow object needs a `steps` list");
                    return description;
                }
            }
        }
        _ => {
            bad(String::new(), "a workflow is an object with `steps` or a list of steps");
            return String::new();
        }
    };
    if steps.is_empty() {
        bad("steps".to_owned(), "a workflow needs at least one step");
    }
    for (idx, step) in steps.iter().enumerate() {
        let Json::Object(step) = step else {
            bad(format!("steps[{idx}]"), "a step is an object");
            continue;
        };
        for key in ["id", "target"] {
            match step.get(key) {
                Some(Json::String(s)) if !s.trim().is_empty() => {}
                Some(Json::String(_)) => bad(format!("steps[{idx}].{key}"), "must not be empty"),
                Some(_) => bad(format!("steps[{idx}].{key}"), "expected a string"),
                None => bad(format!("steps[{idx}].{key}"), "required field"),
            }
        }
        if let Some(after) = step.get("after")
            && !after.as_array().is_some_and(|a| a.iter().all(Json::is_string))
        {
            bad(format!("steps[{idx}].after"), "expected a list of step ids");
        }
    }
    description
}
