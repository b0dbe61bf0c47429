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

/// An entry of a plugin folder that a plugin may not contain: the digest could not pin
/// what it stands for (a link points elsewhere; a pipe, socket or device has no content of
/// its own), so neither `plugin check` nor `plugin trust` accepts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refused {
    Symlink,
    Fifo,
    Socket,
    CharDevice,
    BlockDevice,
    Other,
}

impl Refused {
    /// Names the kind of entry, for messages: "a symbolic link".
    pub(crate) fn describe(self) -> &'static str {
        match self {
            Refused::Symlink => "a symbolic link",
            Refused::Fifo => "a named pipe (FIFO)",
            Refused::Socket => "a socket",
            Refused::CharDevice => "a character device",
            Refused::BlockDevice => "a block device",
            Refused::Other => "neither a regular file nor a folder",
        }
    }

    fn of(kind: &std::fs::FileType) -> Option<Refused> {
        if kind.is_symlink() {
            return Some(Refused::Symlink);
        }
        if kind.is_file() || kind.is_dir() {
            return None;
        }
        #[cfg(unix)]
        {
            use std::os::unix::fs::FileTypeExt;
            if kind.is_fifo() {
                return Some(Refused::Fifo);
            }
            if kind.is_socket() {
                return Some(Refused::Socket);
            }
            if kind.is_char_device() {
                return Some(Refused::CharDevice);
            }
            if kind.is_block_device() {
                return Some(Refused::BlockDevice);
            }
        }
        Some(Refused::Other)
    }
}

/// Every entry of a plugin folder, as [`walk_plugin`] finds it.
#[derive(Debug, Default)]
pub(crate) struct Walk {
    /// The regular files, as (`/`-separated path relative to the folder, full path),
    /// sorted by the bytes of the relative path.
    pub(crate) files: Vec<(String, PathBuf)>,
    /// The entries a plugin may not contain, in path order; nothing under a refused entry
    /// is looked at (links are not followed).
    pub(crate) refused: Vec<(PathBuf, Refused)>,
    /// Folders that could not be listed, with the error.
    pub(crate) unreadable: Vec<(PathBuf, std::io::Error)>,
}

/// Walks the whole plugin folder `root` — every file a tool, hook, MCP server or flow of
/// the plugin can run or read, `.git` included — without following links: the one walk
/// that the content digest, `plugin install`'s copy and `plugin check` share, so that
/// what the check accepts is what trust covers.
pub(crate) fn walk_plugin(root: &Path) -> Walk {
    let mut walk = Walk::default();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let entries = match std::fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(err) => {
                walk.unreadable.push((dir, err));
                continue;
            }
        };
        for entry in entries {
            let entry = match entry {
                Ok(entry) => entry,
                Err(err) => {
                    walk.unreadable.push((dir.clone(), err));
                    continue;
                }
            };
            let path = entry.path();
            let kind = match entry.file_type() {
                Ok(kind) => kind,
                Err(err) => {
                    walk.unreadable.push((path, err));
                    continue;
                }
            };
            if let Some(refused) = Refused::of(&kind) {
                walk.refused.push((path, refused));
            } else if kind.is_dir() {
                stack.push(path);
            } else if let Ok(rel) = path.strip_prefix(root) {
                walk.files.push((crate::decl::slash_path(rel), path));
            }
        }
    }
    walk.files.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
    walk.refused.sort_by(|a, b| a.0.cmp(&b.0));
    walk
}

/// Reports every entry of the plugin folder `root` that a plugin may not contain (links,
/// pipes, sockets, devices) as `unsupported_file`, on `file` (the folder's display path,
/// such as `plugins/pdf/`; empty for the checked folder itself).
pub(crate) fn report_refused(
    problems: &mut Vec<crate::problem::Problem>,
    prefix: &str,
    root: &Path,
) {
    let walk = walk_plugin(root);
    for (path, refused) in walk.refused {
        let rel = path.strip_prefix(root).map(crate::decl::slash_path).unwrap_or_default();
        problems.push(crate::problem::Problem {
            code: ProblemCode::UnsupportedFile,
            file: format!("{prefix}{rel}"),
            line: None,
            field: String::new(),
            message: format!(
                "{} is not allowed in a plugin folder: trust pins a plugin by the content of its regular files, and `plugin trust` refuses it",
                refused.describe()
            ),
        });
    }
    for (path, err) in walk.unreadable {
        let rel = path.strip_prefix(root).map(crate::decl::slash_path).unwrap_or_default();
        problems.push(crate::problem::Problem {
            code: ProblemCode::IoError,
            file: format!("{prefix}{rel}"),
            line: None,
            field: String::new(),
            message: format!("cannot read: {err}"),
        });
    }
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
    let python: Vec<PathBuf> =
        entries.iter().filter(|p| p.extension().is_some_and(|ext| ext == "py")).cloned().collect();
    for path in entries {
        if path.extension().is_none_or(|ext| ext != "json") {
            continue;
        }
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let mut sink = Sink { file: format!("{prefix}flows/{name}"), problems };
        let id = name.trim_end_matches(".json").to_owned();
        crate::plugin::id_problem(&mut sink, "", &id);
        let text = match clio_spec::read_input(&path) {
            Ok(text) => text,
            Err(err) => {
                let problem =
                    crate::problem::input_problem(&err, sink.file.clone(), "workflow file");
                sink.problems.push(problem);
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
    read_python_flows(problems, prefix, clio_dir, &python, &mut flows);
    flows
}

/// Reads the flows the `flows/*.py` files `files` of `clio_dir` declare, from their syntax
/// trees (no code of the plugin runs: [`crate::python::discover`]), into `flows`; each
/// problem names its file and line, and an id a workflow file of the plugin also has is
/// `duplicate_id`.
fn read_python_flows(
    problems: &mut Vec<crate::problem::Problem>,
    prefix: &str,
    clio_dir: &Path,
    files: &[PathBuf],
    flows: &mut Vec<FlowDecl>,
) {
    if files.is_empty() {
        return;
    }
    let root = clio_dir.parent().unwrap_or(clio_dir);
    // `ai.iowarp.clio`, the folder the reader's paths start with.
    let plugin_dir =
        clio_dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let plugin_dir = plugin_dir.as_str();
    // The display path of a file the reader names relative to the plugin folder.
    let shown = |file: &str| {
        let inner = file.strip_prefix(plugin_dir).unwrap_or(file);
        format!("{prefix}{}", inner.trim_start_matches('/'))
    };
    let found = match crate::python::discover(&crate::python::interpreter(), root, files) {
        Ok(found) => found,
        Err(err) => {
            let file = match files {
                [one] => format!(
                    "{prefix}flows/{}",
                    one.file_name().map(|n| n.to_string_lossy()).unwrap_or_default()
                ),
                _ => format!("{prefix}flows/"),
            };
            problems.push(crate::problem::Problem {
                code: ProblemCode::PythonFlowInvalid,
                file,
                line: None,
                field: String::new(),
                message: format!("the Python flows cannot be read: {err}"),
            });
            return;
        }
    };
    for error in found.errors {
        let file = shown(&error.file);
        // The reader's message starts with `file:line: `; the problem carries both.
        let message = match error.message.split_once(": ") {
            Some((place, rest)) if place.starts_with(&error.file) => rest.to_owned(),
            _ => error.message.clone(),
        };
        problems.push(crate::problem::Problem {
            code: ProblemCode::PythonFlowInvalid,
            file,
            line: (error.line > 0).then_some(error.line),
            field: String::new(),
            message,
        });
    }
    for flow in found.flows {
        let file = shown(&flow.file);
        let path = PathBuf::from(
            flow.file
                .strip_prefix(plugin_dir)
                .map_or(flow.file.as_str(), |inner| inner.trim_start_matches('/')),
        );
        let mut sink = Sink { file: file.clone(), problems };
        crate::plugin::id_problem(&mut sink, "id", &flow.id);
        if let Some(other) = flows.iter().find(|f| f.id == flow.id) {
            let place = match &other.source {
                FlowSource::Workflow { path, .. } | FlowSource::Python { path, .. } => {
                    path.display().to_string()
                }
                FlowSource::Host => String::new(),
            };
            sink.push(
                ProblemCode::DuplicateId,
                "id",
                Some(flow.line),
                format!("flow id {:?} is also declared by {prefix}{place}", flow.id),
            );
            continue;
        }
        flows.push(FlowDecl {
            id: flow.id,
            description: flow.description,
            source: FlowSource::Python {
                path,
                class: flow.class,
                line: flow.line,
                shape: flow.shape,
                model: flow.model,
                limits: flow.limits,
                options: flow.options,
            },
        });
    }
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
