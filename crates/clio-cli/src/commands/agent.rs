//! `clio agent spec` and `clio agent verify`.

use std::io::Write;

use anyhow::anyhow;
use clio_spec::{AgentDefinitionError, AgentSpec};

use super::{read_text, write_json};
use crate::args::{AgentSpecArgs, AgentVerifyArgs};
use crate::error::CliError;
use crate::launch::agent_spec;

/// Freezes the definition in `args.file` and prints the spec and its checksum.
pub(super) fn spec(args: &AgentSpecArgs, out: &mut dyn Write) -> Result<(), CliError> {
    let spec = agent_spec(&args.file)?;
    if args.json { write_json(out, &spec.to_json()) } else { render_spec(&spec, out) }
}

/// Checks the checksum of the spec in `args.file`.
///
/// With `--json`, a spec that does not verify prints `{"ok": false, "file", "problems"}` on
/// stdout, and exits 1 as it does without.
pub(super) fn verify(args: &AgentVerifyArgs, out: &mut dyn Write) -> Result<(), CliError> {
    match verified(args) {
        Err(error) if args.json => {
            let value = serde_json::json!({
                "ok": false,
                "file": args.file.display().to_string(),
                "problems": super::workflow::problems(&error),
            });
            write_json(out, &value)?;
            Err(error)
        }
        Err(error) => Err(error),
        Ok(spec) => report(args, &spec, out),
    }
}

/// Reads the spec in `args.file` and checks its checksum.
fn verified(args: &AgentVerifyArgs) -> Result<AgentSpec, CliError> {
    let text = read_text(&args.file)?;
    let source = args.file.display().to_string();
    let spec = AgentSpec::from_json(&text).map_err(|error| {
        let hint = match error {
            AgentDefinitionError::ChecksumMismatch { .. } => {
                "the spec was edited after it was frozen; freeze the definition again with `clio agent spec FILE --json`"
            }
            _ => "a spec is the output of `clio agent spec FILE --json`",
        };
        CliError::user(anyhow!("{source}: {error}")).hint(hint)
    })?;
    Ok(spec)
}

/// Writes a verified spec's id, version and checksum.
fn report(args: &AgentVerifyArgs, spec: &AgentSpec, out: &mut dyn Write) -> Result<(), CliError> {
    if args.json {
        let value = serde_json::json!({
            "ok": true,
            "id": spec.id(),
            "version": spec.version(),
            "checksum": spec.checksum(),
        });
        write_json(out, &value)
    } else {
        writeln!(out, "ok: {} {} checksum {}", spec.id(), spec.version(), spec.checksum())?;
        Ok(())
    }
}

/// Writes a spec for a person to read.
fn render_spec(spec: &AgentSpec, out: &mut dyn Write) -> Result<(), CliError> {
    writeln!(out, "agent {} {}", spec.id(), spec.version())?;
    writeln!(out, "  name:        {}", spec.name())?;
    if !spec.role().is_empty() {
        writeln!(out, "  role:        {}", spec.role())?;
    }
    if !spec.description().is_empty() {
        writeln!(out, "  description: {}", spec.description())?;
    }
    let flow = spec.flow();
    if flow.options.is_empty() {
        writeln!(out, "  flow:        {}", flow.id)?;
    } else {
        let options = serde_json::Value::Object(flow.options.clone());
        writeln!(out, "  flow:        {} {options}", flow.id)?;
    }
    writeln!(out, "  layers:      {}", spec.layers().join(" -> "))?;
    writeln!(out, "  plugins:")?;
    let width = spec.plugins().iter().map(|p| p.reference.len()).max().unwrap_or(0);
    for plugin in spec.plugins() {
        writeln!(out, "    {:<width$}  from {}", plugin.reference, plugin.layer)?;
    }
    let requires = spec.requires();
    let mut needs = Vec::new();
    if requires.tool_calling {
        needs.push("tool calling".to_owned());
    }
    if requires.vision {
        needs.push("vision".to_owned());
    }
    if requires.context_tokens > 0 {
        needs.push(format!("context >= {} tokens", requires.context_tokens));
    }
    if requires.output_tokens > 0 {
        needs.push(format!("output >= {} tokens", requires.output_tokens));
    }
    if !needs.is_empty() {
        writeln!(out, "  requires:    {}", needs.join(", "))?;
    }
    let prefers = spec.prefers();
    let mut wants = Vec::new();
    for (field, value) in
        [("model", &prefers.model), ("provider", &prefers.provider), ("effort", &prefers.effort)]
    {
        if !value.is_empty() {
            wants.push(format!("{field} {value}"));
        }
    }
    if !wants.is_empty() {
        writeln!(out, "  prefers:     {}", wants.join(", "))?;
    }
    writeln!(out, "  source:      {}", spec.source())?;
    writeln!(out, "checksum {}", spec.checksum())?;
    Ok(())
}
