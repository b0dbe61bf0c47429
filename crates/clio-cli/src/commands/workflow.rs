//! `clio workflow check` and `clio workflow show`: a workflow is checked and drawn before
//! it runs.

use std::io::Write;
use std::path::Path;

use anyhow::anyhow;
use clio_workflow::{Workflow, render_dot, render_mermaid, render_text};

use super::{read_text, write_json};
use crate::args::{DrawFormat, WorkflowCheckArgs, WorkflowShowArgs};
use crate::error::CliError;

/// Reads and checks the workflow in `path`, naming the file in the error.
fn load(path: &Path) -> Result<Workflow, CliError> {
    let text = read_text(path)?;
    Workflow::from_json(&text).map_err(|error| {
        CliError::user(anyhow!("{}: {error}", path.display()))
            .hint("`clio workflow check FILE` reports the first problem; fix it and check again")
    })
}

/// Checks the workflow in `args.file` and summarises it.
/// With `--json`, a workflow that does not check prints `{"ok": false, "file", "problems"}`
/// on stdout, and exits 1 as it does without.
pub(super) fn check(args: &WorkflowCheckArgs, out: &mut dyn Write) -> Result<(), CliError> {
    let workflow = match load(&args.file) {
        Ok(workflow) => workflow,
        Err(error) if args.json => {
            let value = serde_json::json!({
                "ok": false,
                "file": args.file.display().to_string(),
                "problems": problems(&error),
            });
            write_json(out, &value)?;
            return Err(error);
        }
        Err(error) => return Err(error),
    };
    let layers = workflow.layers().len();
    let finals = workflow.final_steps();
    if args.json {
        let value = serde_json::json!({
            "ok": true,
            "file": args.file.display().to_string(),
            "steps": workflow.steps().len(),
            "layers": layers,
            "final": finals,
        });
        return write_json(out, &value);
    }
    writeln!(
        out,
        "ok: {} — {} steps in {} layers; final: {}",
        args.file.display(),
        workflow.steps().len(),
        layers,
        finals.join(", ")
    )?;
    Ok(())
}

/// Checks a workflow given as text, JSON or TOML (the HTTP API's `workflows/check`):
/// `{"ok": true, "steps", "layers", "final"}`, or `{"ok": false, "problems"}`.
pub(super) fn check_text(text: &str) -> serde_json::Value {
    let parsed = match serde_json::from_str::<serde_json::Value>(text) {
        // Read again as a workflow's JSON text, which refuses a key named twice.
        Ok(_) => Workflow::from_json(text).map_err(|e| e.to_string()),
        Err(json_error) => match toml::from_str::<serde_json::Value>(text) {
            Ok(value) => Workflow::from_value(value).map_err(|e| e.to_string()),
            Err(toml_error) => Err(format!(
                "the workflow is neither JSON ({json_error}) nor TOML ({})",
                toml_error.message()
            )),
        },
    };
    match parsed {
        Ok(workflow) => serde_json::json!({
            "ok": true,
            "steps": workflow.steps().len(),
            "layers": workflow.layers().len(),
            "final": workflow.final_steps(),
        }),
        Err(problem) => serde_json::json!({ "ok": false, "problems": [problem] }),
    }
}

/// Returns the problems an error names, for JSON: its message and each cause.
pub(super) fn problems(error: &CliError) -> Vec<String> {
    error.error.chain().map(ToString::to_string).collect()
}

/// Draws the workflow in `args.file` in the chosen format. `--json` gives the steps (as
/// their JSON form), the layers, the final steps and the drawing in `--format`.
pub(super) fn show(args: &WorkflowShowArgs, out: &mut dyn Write) -> Result<(), CliError> {
    let workflow = load(&args.file)?;
    let drawing = match args.format {
        DrawFormat::Text => render_text(&workflow),
        DrawFormat::Mermaid => render_mermaid(&workflow),
        DrawFormat::Dot => render_dot(&workflow),
    };
    if args.json {
        let value = serde_json::json!({
            "file": args.file.display().to_string(),
            "steps": workflow.steps(),
            "layers": workflow.layers(),
            "final": workflow.final_steps(),
            "format": format!("{:?}", args.format).to_lowercase(),
            "drawing": drawing,
        });
        return write_json(out, &value);
    }
    write!(out, "{drawing}")?;
    if !drawing.ends_with('\n') {
        writeln!(out)?;
    }
    Ok(())
}

/// The editing limits a workflow run recorded when it started (its `wf-limits` entry), as
/// `clio runs show` prints them: each limit in force, and the workflow's own bound and the
/// person's setting (config.toml's `[workflows]`) it is the tighter of; `None` for a run
/// that recorded none (not a workflow run), or whose limits are all open.
pub(super) fn limits_line(entries: &[clio_journal::JournalEntry]) -> Option<String> {
    let logged = entries.iter().find(|e| e.identity.as_deref() == Some("key:wf-limits"))?;
    let result = logged.payload.get("result")?;
    // A workflow without any limit, of its own or of the settings, has nothing to show.
    let set = |part: &str| {
        result.get(part).and_then(serde_json::Value::as_object).is_some_and(|limits| {
            ["max_added_steps", "max_edit_rounds"]
                .iter()
                .any(|f| limits.get(*f).is_some_and(|v| !v.is_null()))
        })
    };
    if !set("limits") && !set("workflow") && !set("settings") {
        return None;
    }
    let show = |value: Option<&serde_json::Value>| match value.and_then(serde_json::Value::as_u64) {
        Some(n) => n.to_string(),
        None => "open".to_owned(),
    };
    let limit = |field: &str, name: &str| {
        let at = |part: &str| result.get(part).and_then(|p| p.get(field));
        format!(
            "{name} {} (workflow {}, settings {})",
            show(at("limits")),
            show(at("workflow")),
            show(at("settings"))
        )
    };
    Some(format!(
        "{}; {}",
        limit("max_added_steps", "max_added_steps"),
        limit("max_edit_rounds", "max_edit_rounds")
    ))
}
