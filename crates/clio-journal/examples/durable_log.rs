//! A durable log of one run across two processes, with `clio-journal` alone: what another
//! runtime that embeds the journal does.
//!
//! The first "process" opens a journal file in a temporary folder, creates a run, records a
//! tool call as a task whose intent and acceptance are one write, finishes it, starts a
//! second one and stops (as if killed) with it still running. The second opens the same
//! file, marks what the first left running as interrupted, reads the run back, runs the
//! interrupted call again and ends the run. Then the closed file is checked and the run
//! exported as JSON lines.
//!
//! Run it with `cargo run -p clio-journal --example durable_log`.

#![allow(clippy::print_stdout, reason = "an example program: its output is the point")]

use std::path::Path;

use clio_journal::{
    EntryKind, Journal, JournalConfig, NewEntry, NewRun, NewTask, RunId, RunStatus, RunUpdate,
    TaskId, TaskKind, TaskStatus, TaskUpdate,
};
use serde_json::json;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("journal.redb");
    let run = first_process(&path)?;
    second_process(&path, run)?;

    let report = Journal::check(&path)?;
    println!(
        "check: {} run, {} tasks, {} entries; whole: {}",
        report.counts.runs,
        report.counts.tasks,
        report.counts.entries,
        report.is_whole()
    );
    assert!(report.is_whole(), "{:?}", report.problems);

    let journal = Journal::open_read_only(&path, JournalConfig::default())?;
    let mut lines = Vec::new();
    let n_lines = journal.export(run, &mut lines)?;
    println!(
        "export of run {run} ({n_lines} JSON lines):\n{}",
        String::from_utf8(lines)?.trim_end()
    );
    Ok(())
}

/// Creates a run, records one finished tool call and one that the process never finishes.
fn first_process(path: &Path) -> Result<RunId, Box<dyn std::error::Error>> {
    let journal = Journal::open(path, JournalConfig::default())?;
    println!("process 1: opened {}", journal.path().display());
    let run = journal.create_run(NewRun {
        flow: "fatigue-review".into(),
        input: json!({"batch": 7}),
        input_digest: "sha256:batch-7".into(),
        fingerprint: "example".into(),
        owner: "process-1".into(),
        launch: None,
    })?;
    for (seq, specimen) in ["T7-01", "T7-02"].into_iter().enumerate() {
        // The call's entry and its task are written together: a crash keeps both or neither.
        let call = NewEntry::new(EntryKind::Call, json!({"tool": "measure", "specimen": specimen}))
            .with_identity(format!("call:{seq}"));
        let (task, _) = journal.create_task_with_entries(
            run,
            Vec::new(),
            NewTask {
                run,
                parent: None,
                kind: TaskKind::Tool,
                target: "measure".into(),
                label: format!("measure {specimen}"),
                status: TaskStatus::Running,
                model: None,
                owner: "process-1".into(),
                call: Some(format!("call:{seq}")),
            },
            vec![call],
        )?;
        println!("process 1: task {task} measures {specimen}");
        if specimen == "T7-02" {
            // The process is killed here: the task stays `running` in the journal.
            break;
        }
        let result = json!({"specimen": specimen, "cycles_to_failure": 184_000});
        journal.update_task(
            task,
            TaskUpdate {
                status: Some(TaskStatus::Succeeded),
                result: Some(result),
                ..TaskUpdate::default()
            },
        )?;
    }
    // Every write above returned only once it was on disk; closing adds nothing to that.
    drop(journal);
    println!("process 1: gone, with a task still running");
    Ok(run)
}

/// Reopens the journal, settles what the first process left, and finishes the run.
fn second_process(path: &Path, run: RunId) -> Result<(), Box<dyn std::error::Error>> {
    let journal = Journal::open(path, JournalConfig::default())?;
    // Only this process is alive: whatever another owner left running was interrupted.
    let reconciled = journal.reconcile(&["process-2"])?;
    println!(
        "process 2: reconciled {} run and {} task left running",
        reconciled.runs, reconciled.tasks
    );
    assert_eq!((reconciled.runs, reconciled.tasks), (1, 1));

    for task in journal.tasks(run)? {
        let result = task.result.map_or("no result".to_owned(), |r| r.to_string());
        println!("process 2: task {} {:?}: {}", task.label, task.status, result);
    }
    for entry in journal.entries(run)? {
        println!("process 2: entry {} {:?} {}", entry.seq, entry.kind, entry.payload);
    }
    let second = journal.entry_by_identity(run, "call:1")?.ok_or("call:1 is not recorded")?;
    assert_eq!(second.payload["specimen"], "T7-02");
    assert_eq!(second.task, Some(TaskId(2)));

    // A resumed run calls the interrupted tool again, under the same task and call entry.
    let interrupted = journal
        .tasks(run)?
        .into_iter()
        .find(|task| task.status == TaskStatus::Interrupted)
        .ok_or("no interrupted task")?;
    let retry = TaskUpdate {
        status: Some(TaskStatus::Running),
        owner: Some("process-2".into()),
        ..TaskUpdate::default()
    };
    journal.update_task(interrupted.id, retry)?;
    let done = journal.update_task(
        interrupted.id,
        TaskUpdate {
            status: Some(TaskStatus::Succeeded),
            result: Some(json!({"specimen": "T7-02", "cycles_to_failure": 151_000})),
            ..TaskUpdate::default()
        },
    )?;
    println!("process 2: task {} ran again: {:?}", done.label, done.status);
    let step =
        NewEntry::new(EntryKind::Step, json!({"shortest_life": 151_000})).with_identity("summary");
    journal.append(run, step)?;
    let record = journal.update_run(
        run,
        RunUpdate {
            status: Some(RunStatus::Succeeded),
            answer: Some(json!("batch 7: 2 specimens measured")),
            owner: Some("process-2".into()),
            ..RunUpdate::default()
        },
    )?;
    println!(
        "process 2: run {} {:?}: {}",
        record.id,
        record.status,
        record.answer.unwrap_or_default()
    );
    journal.close()?;
    Ok(())
}
