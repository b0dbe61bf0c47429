//! `clio journal check` and `clio journal salvage OUT`: what a person does about a damaged
//! journal. Both only read the journal (`Journal::check`, `Journal::salvage`), so they work
//! on a file every other command refuses, and neither reconciles nor upgrades it.

use std::io::Write;
use std::path::Path;

use anyhow::anyhow;
use clio_journal::{CheckReport, Journal, SalvageReport, StorageCheck};
use serde_json::Value;

use super::write_json;
use crate::args::{JournalSalvageArgs, JsonArgs};
use crate::error::CliError;
use crate::error::journal_error;
use crate::home::Home;

/// Checks the journal and prints the report: exit 0 when it is whole, 1 with the list of
/// problems otherwise. `--json` prints the report with `"whole"`.
pub(super) fn check(home: &Home, args: &JsonArgs, out: &mut dyn Write) -> Result<(), CliError> {
    let path = existing(home)?;
    let report = Journal::check(&path).map_err(journal_error)?;
    if args.json {
        let mut value = serde_json::to_value(&report).map_err(CliError::internal)?;
        value["whole"] = Value::Bool(report.is_whole());
        write_json(out, &value)?;
    } else {
        write_check(&report, out)?;
    }
    if report.is_whole() {
        return Ok(());
    }
    let n = report.problems.len();
    let error = anyhow!(
        "journal {} is damaged: {n} problem{} found",
        path.display(),
        if n == 1 { "" } else { "s" }
    );
    Err(CliError::user(error)
        .hint("`clio journal salvage OUT` copies the runs that still read whole into a new journal at OUT")
        .hint("or restore a copy of the journal (journal.redb and journal.redb-wal, taken together)"))
}

fn write_check(report: &CheckReport, out: &mut dyn Write) -> Result<(), CliError> {
    let format = match report.format_version {
        Some(version) if report.checksummed => format!("format {version}, records checksummed"),
        Some(version) => format!("format {version}, records without checksums"),
        None => "format unknown".to_owned(),
    };
    writeln!(out, "journal {}: {format}", report.path.display())?;
    let c = report.counts;
    writeln!(
        out,
        "  read:    {} runs, {} entries, {} tasks, {} sessions",
        c.runs, c.entries, c.tasks, c.sessions
    )?;
    let storage = match &report.storage {
        StorageCheck::Passed => "passed".to_owned(),
        StorageCheck::Failed { detail } => format!("failed: {detail}"),
        StorageCheck::Skipped { reason } => format!("not run: {reason}"),
    };
    writeln!(out, "  storage: {storage} (redb's check, on a private copy)")?;
    if report.is_whole() {
        writeln!(out, "whole: no problem found")?;
    } else {
        let n = report.problems.len();
        writeln!(out, "{n} problem{}:", if n == 1 { "" } else { "s" })?;
        for problem in &report.problems {
            match &problem.key {
                Some(key) => writeln!(out, "  {} ({key}): {}", problem.table, problem.detail)?,
                None => writeln!(out, "  {}: {}", problem.table, problem.detail)?,
            }
        }
    }
    for note in &report.notes {
        writeln!(out, "note: {note}")?;
    }
    Ok(())
}

/// Copies what still reads whole into a new journal at `args.out` and prints what was
/// copied and what was left. Exit 0 once the new journal is written, whatever was left.
pub(super) fn salvage(
    home: &Home,
    args: &JournalSalvageArgs,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    let path = existing(home)?;
    let report = Journal::salvage(&path, &args.out).map_err(journal_error)?;
    if args.json {
        let value = serde_json::to_value(&report).map_err(CliError::internal)?;
        return write_json(out, &value);
    }
    write_salvage(&report, &path, out)
}

fn write_salvage(report: &SalvageReport, path: &Path, out: &mut dyn Write) -> Result<(), CliError> {
    writeln!(
        out,
        "salvaged {} (format {}) into {}",
        report.from.display(),
        report.format_version,
        report.to.display()
    )?;
    let n = report.copied.len();
    writeln!(out, "copied {n} run{}:", if n == 1 { "" } else { "s" })?;
    for run in &report.copied {
        writeln!(out, "  run {}: {} entries, {} tasks", run.run, run.entries, run.tasks)?;
    }
    writeln!(out, "copied {} sessions", report.sessions_copied)?;
    if !report.left.is_empty() {
        let n = report.left.len();
        writeln!(out, "left {n} run{} (not whole):", if n == 1 { "" } else { "s" })?;
        for run in &report.left {
            writeln!(out, "  run {}: {}", run.run, run.reason)?;
        }
    }
    if !report.sessions_left.is_empty() {
        writeln!(out, "left {} sessions:", report.sessions_left.len())?;
        for session in &report.sessions_left {
            writeln!(out, "  session {:?}: {}", session.session, session.reason)?;
        }
    }
    if !report.tasks_lost.is_empty() {
        writeln!(out, "damaged tasks no run claims (not copied):")?;
        for task in &report.tasks_lost {
            writeln!(out, "  task {}: {}", task.task, task.reason)?;
        }
    }
    for note in &report.notes {
        writeln!(out, "note: {note}")?;
    }
    writeln!(
        out,
        "to use it: move {} (and {}-wal) aside and keep them, then move {} to {}",
        path.display(),
        path.display(),
        report.to.display(),
        path.display()
    )?;
    Ok(())
}

/// Returns the journal's path, or explains that there is none.
fn existing(home: &Home) -> Result<std::path::PathBuf, CliError> {
    let path = home.journal_path();
    if path.exists() {
        return Ok(path);
    }
    Err(CliError::user(anyhow!("no journal at {}: nothing to check or salvage", path.display()))
        .hint("pass --home DIR (or set CLIO_HOME) if your runs live elsewhere"))
}
