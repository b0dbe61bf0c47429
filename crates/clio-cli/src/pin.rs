//! Runs pinned to the agent that launched them.
//!
//! The journal pins a run's flow (a changed flow version or plugin set is refused by the
//! runtime as `FlowReplayMismatch`), but not the agent around it: its role, description,
//! preferences and requirements come from the agent file, which is frozen again at every
//! resume. An edited file would change a run half-way without anyone noticing. So
//! `clio run AGENT` records the checksum of the agent's frozen spec, and the spec, in the
//! launch record (`Launch::pin`); `runs resume`, `runs answer` and `runs replay` freeze the
//! file again and, when the checksum differs, refuse, naming each top-level field that
//! changed, unless told to go on with `--accept-changed-agent`.

use std::io::Write;
use std::path::PathBuf;

use anyhow::anyhow;
use clio_journal::{EntryKind, Journal, NewEntry, RunId};
use clio_spec::AgentSpec;
use serde_json::{Value, json};

use crate::error::{CliError, journal_error};
use crate::launch::{Launch, agent_spec};

/// The spec fields that say where the spec came from and what it hashes to, not what the
/// agent is: they are not compared field by field.
const NOT_CONTENT: [&str; 2] = ["source", "checksum"];

/// What a command does when a run's agent file no longer freezes to the recorded spec.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OnAgentChange {
    /// Do not look: cancelling a run must work whatever its agent file holds now.
    Ignore,
    /// Refuse, naming what changed.
    Refuse,
    /// Go on under the changed spec: record the acceptance in the run and pin the launch
    /// record to the new checksum.
    Accept,
    /// Go on under the changed spec without writing anything (a replay check).
    CheckOnly,
}

impl OnAgentChange {
    /// Returns the policy a command with an `--accept-changed-agent` flag follows; `writes`
    /// says whether the command may record the acceptance.
    pub(crate) fn from_flag(accept: bool, writes: bool) -> OnAgentChange {
        match (accept, writes) {
            (false, _) => OnAgentChange::Refuse,
            (true, true) => OnAgentChange::Accept,
            (true, false) => OnAgentChange::CheckOnly,
        }
    }
}

/// One top-level spec field whose value differs between the recorded spec and the file.
#[derive(Debug, Clone)]
pub(crate) struct FieldChange {
    /// The field, such as `role` or `version`.
    pub(crate) field: String,
    /// Its value in the recorded spec (`null` when the field was absent).
    pub(crate) recorded: Value,
    /// Its value in the spec the file freezes to now.
    pub(crate) now: Value,
}

/// How a run's agent file changed since the run was pinned to it.
#[derive(Debug, Clone)]
pub(crate) struct AgentChange {
    /// The agent file.
    pub(crate) file: PathBuf,
    /// The checksum recorded in the launch record.
    pub(crate) recorded: String,
    /// The spec the file freezes to now.
    pub(crate) now: AgentSpec,
    /// The top-level fields that differ (empty when the launch record keeps no spec).
    pub(crate) fields: Vec<FieldChange>,
}

impl AgentChange {
    /// Returns the names of the changed fields.
    pub(crate) fn field_names(&self) -> Vec<&str> {
        self.fields.iter().map(|f| f.field.as_str()).collect()
    }

    /// Describes the changed fields with their recorded and current values, for a person.
    fn describe_fields(&self) -> String {
        if self.fields.is_empty() {
            return "the launch record keeps no spec to compare field by field".to_owned();
        }
        let parts: Vec<String> = self
            .fields
            .iter()
            .map(|f| format!("{} was {}, now {}", f.field, show(&f.recorded), show(&f.now)))
            .collect();
        parts.join("; ")
    }
}

/// Renders a field's value for a message: JSON, cut to a length a terminal line holds.
fn show(value: &Value) -> String {
    let text = value.to_string();
    if text.chars().count() <= 60 {
        return text;
    }
    let cut: String = text.chars().take(59).collect();
    format!("{cut}…")
}

/// Returns how the agent file of `launch` changed since the launch was pinned, or `None`
/// when it did not (or the run is not pinned: a flow run, or a launch record written before
/// runs were pinned, which keeps working as it did).
pub(crate) fn agent_change(launch: &Launch) -> Result<Option<AgentChange>, CliError> {
    let (Some(file), Some(recorded)) = (&launch.agent, &launch.agent_checksum) else {
        return Ok(None);
    };
    let now = agent_spec(file)?;
    if now.checksum() == recorded {
        return Ok(None);
    }
    let fields = match &launch.agent_spec {
        Some(spec) => changed_fields(spec, &now.to_json()),
        None => Vec::new(),
    };
    Ok(Some(AgentChange { file: file.clone(), recorded: recorded.clone(), now, fields }))
}

/// Compares two spec JSON forms top-level field by field, in the current spec's field
/// order, then any field only the recorded spec has.
fn changed_fields(recorded: &Value, now: &Value) -> Vec<FieldChange> {
    let empty = serde_json::Map::new();
    let old = recorded.as_object().unwrap_or(&empty);
    let new = now.as_object().unwrap_or(&empty);
    let names = new.keys().chain(old.keys().filter(|k| !new.contains_key(*k)));
    names
        .filter(|name| !NOT_CONTENT.contains(&name.as_str()))
        .filter(|name| old.get(*name) != new.get(*name))
        .map(|name| FieldChange {
            field: name.clone(),
            recorded: old.get(name).cloned().unwrap_or(Value::Null),
            now: new.get(name).cloned().unwrap_or(Value::Null),
        })
        .collect()
}

/// Checks the agent of run `run` as `on_change` says, before its runtime is rebuilt.
/// Returns the change it went on with (to be reported), `None` when nothing changed.
pub(crate) fn enforce(
    journal: &Journal,
    run: RunId,
    launch: &mut Launch,
    on_change: OnAgentChange,
) -> Result<Option<AgentChange>, CliError> {
    if on_change == OnAgentChange::Ignore {
        return Ok(None);
    }
    let Some(change) = agent_change(launch)? else { return Ok(None) };
    match on_change {
        OnAgentChange::Refuse => Err(refusal(run, &change)),
        OnAgentChange::Accept => {
            accept(journal, run, launch, &change)?;
            Ok(Some(change))
        }
        OnAgentChange::Ignore | OnAgentChange::CheckOnly => Ok(Some(change)),
    }
}

/// The error of a run whose agent changed: both checksums, each changed field with its
/// recorded and current values, and the flag that goes on anyway.
fn refusal(run: RunId, change: &AgentChange) -> CliError {
    CliError::user(anyhow!(
        "run {} is pinned to agent {} with spec checksum {}, but the file now freezes to {}: {}",
        run.0,
        change.file.display(),
        change.recorded,
        change.now.checksum(),
        change.describe_fields()
    ))
    .hint("pass --accept-changed-agent to continue under the changed spec")
    .hint("or restore the agent file as it was; `clio agent spec FILE` prints its checksum")
}

/// Records that run `run` goes on under the changed agent: an `agent_changed_accepted`
/// event in the run (so that its history says when and what), then the launch in the run's
/// record pinned to the new spec (so that the next resume does not ask again).
fn accept(
    journal: &Journal,
    run: RunId,
    launch: &mut Launch,
    change: &AgentChange,
) -> Result<(), CliError> {
    let payload = json!({
        "event": "agent_changed_accepted",
        "recorded": change.recorded,
        "now": change.now.checksum(),
        "fields": change.field_names(),
    });
    journal.append(run, NewEntry::new(EntryKind::Event, payload)).map_err(journal_error)?;
    launch.pin(&change.now);
    launch.save(journal, run)
}

/// Tells the person that run `run` goes on under a changed agent (`recorded`: whether the
/// acceptance was recorded in the run).
pub(crate) fn note(
    run: RunId,
    change: &AgentChange,
    recorded: bool,
    err: &mut dyn Write,
) -> Result<(), CliError> {
    let fields = change.field_names();
    let fields = if fields.is_empty() { "unknown fields".to_owned() } else { fields.join(", ") };
    let how = if recorded { "continues" } else { "is checked" };
    writeln!(
        err,
        "note: run {} {how} under agent {} as changed since it was pinned ({fields}): checksum {}",
        run.0,
        change.file.display(),
        change.now.checksum()
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_that_differ_are_named_in_the_specs_order_and_provenance_is_not() {
        let recorded = json!({"id": "a", "version": "1", "role": "x", "source": "a.toml",
                              "checksum": "c1", "gone": 1});
        let now = json!({"id": "a", "version": "2", "role": "y", "source": "b.toml",
                         "checksum": "c2"});
        let names: Vec<String> =
            changed_fields(&recorded, &now).into_iter().map(|f| f.field).collect();
        assert_eq!(names, ["version", "role", "gone"]);
    }

    #[test]
    fn long_values_are_cut() {
        let long = Value::String("r".repeat(200));
        assert_eq!(show(&long).chars().count(), 60);
        assert_eq!(show(&json!("short")), "\"short\"");
    }

    #[test]
    fn the_flag_decides_the_policy() {
        assert_eq!(OnAgentChange::from_flag(false, true), OnAgentChange::Refuse);
        assert_eq!(OnAgentChange::from_flag(true, true), OnAgentChange::Accept);
        assert_eq!(OnAgentChange::from_flag(true, false), OnAgentChange::CheckOnly);
    }
}
