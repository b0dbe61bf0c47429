//! The journal's operations on an in-memory journal: runs, entries and identities, tasks,
//! sessions, reconcile, prune, export and concurrent appends.

use std::collections::BTreeSet;
use std::sync::Arc;

use clio_journal::{
    Durability, EntryKind, ExportLine, Journal, JournalConfig, JournalError, NewEntry, NewSession,
    RunFilter, RunStatus, RunUpdate, SessionId, SessionStatus, SessionUpdate, TaskStatus,
    TaskUpdate,
};
use serde_json::json;

use crate::support::{TestResult, journal_with_run, new_run, new_task, step};

#[test]
fn appends_are_read_back_in_order_with_dense_sequence_numbers() -> TestResult {
    let (journal, run) = journal_with_run()?;
    for n in 0..10 {
        assert_eq!(journal.append(run, step(n))?, n);
    }
    let seqs = journal.append_batch(run, vec![step(10), step(11)])?;
    assert_eq!(seqs, vec![10, 11]);
    let entries = journal.entries(run)?;
    assert_eq!(entries.len(), 12);
    for (idx, entry) in entries.iter().enumerate() {
        assert_eq!(entry.seq, idx as u64);
        assert_eq!(entry.run, run);
        assert_eq!(entry.payload, json!({"n": idx}));
    }
    assert_eq!(journal.entry_count(run)?, 12);
    assert_eq!(journal.entries_from(run, 10)?.len(), 2);
    assert_eq!(journal.entry(run, 3)?.map(|e| e.seq), Some(3));
    assert_eq!(journal.entry(run, 12)?, None);
    Ok(())
}

#[test]
fn identity_finds_its_entry_and_is_unique_per_run() -> TestResult {
    let (journal, run) = journal_with_run()?;
    let other = journal.create_run(new_run("count", "proc-a"))?;
    journal.append(run, step(0))?;
    journal.append(run, NewEntry::new(EntryKind::Event, json!("no identity")))?;
    journal.append(run, step(1))?;
    // The same identity in another run is another call.
    journal.append(other, step(1))?;

    let found = journal.entry_by_identity(run, "step-1")?.ok_or("step-1 not found")?;
    assert_eq!((found.seq, found.payload), (2, json!({"n": 1})));
    assert_eq!(journal.entry_by_identity(run, "step-9")?, None);

    let err = journal.append(run, step(1)).err().ok_or("duplicate accepted")?;
    assert!(matches!(err, JournalError::DuplicateIdentity { seq: 2, .. }), "{err}");
    // A batch repeating an identity within itself is refused whole.
    let err = journal.append_batch(run, vec![step(7), step(7)]).err().ok_or("accepted")?;
    assert!(matches!(err, JournalError::DuplicateIdentity { seq: 3, .. }), "{err}");
    assert_eq!(journal.entry_count(run)?, 3);
    assert_eq!(journal.entry_by_identity(run, "step-7")?, None);
    Ok(())
}

#[test]
fn unknown_records_are_typed_errors() -> TestResult {
    let (journal, run) = journal_with_run()?;
    let missing = clio_journal::RunId(run.0 + 100);
    assert!(matches!(journal.append(missing, step(0)), Err(JournalError::RunNotFound { .. })));
    assert!(matches!(journal.entries(missing), Err(JournalError::RunNotFound { .. })));
    assert_eq!(journal.run(missing)?, None);
    let task = clio_journal::TaskId(77);
    let err = journal.update_task(task, TaskUpdate::default()).err().ok_or("accepted")?;
    assert_eq!(err.to_string(), "task 77 not found");
    let err = journal.claim_iteration(&SessionId("nobody".into())).err().ok_or("accepted")?;
    assert_eq!(err.to_string(), "session nobody not found");
    // A failed operation does not disturb the journal.
    assert_eq!(journal.append(run, step(0))?, 0);
    Ok(())
}

#[test]
fn runs_change_status_and_are_listed_by_filter() -> TestResult {
    let (journal, first) = journal_with_run()?;
    let second = journal.create_run(new_run("review", "proc-a"))?;
    let done = journal.update_run(
        first,
        RunUpdate {
            status: Some(RunStatus::Succeeded),
            answer: Some(json!("42")),
            ..RunUpdate::default()
        },
    )?;
    assert!(done.finished_at_ms.is_some());
    assert_eq!(done.answer, Some(json!("42")));

    let all: Vec<_> = journal.runs(&RunFilter::default())?.iter().map(|r| r.id).collect();
    assert_eq!(all, vec![second, first], "newest first");
    let running =
        journal.runs(&RunFilter { statuses: vec![RunStatus::Running], ..Default::default() })?;
    assert_eq!(running.iter().map(|r| r.id).collect::<Vec<_>>(), vec![second]);
    let count = journal.runs(&RunFilter { flow: Some("count".into()), ..Default::default() })?;
    assert_eq!(count.iter().map(|r| r.id).collect::<Vec<_>>(), vec![first]);
    assert_eq!(journal.runs(&RunFilter { limit: Some(1), ..Default::default() })?.len(), 1);
    Ok(())
}

/// A run's launch is written with the run and kept by every change that does not replace
/// it: a status change on the writer's undecoded path, an owner change, reconcile, a
/// reopen through the write-ahead log. A run without one stores no `launch` field.
#[test]
fn a_runs_launch_is_written_with_it_and_kept_until_replaced() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("journal.redb");
    let launch = json!({"agent": "/agents/a.toml", "plugins": [], "model": ""});
    let journal = Journal::open(&path, JournalConfig::default())?;
    let run = journal
        .create_run(clio_journal::NewRun { launch: Some(launch.clone()), ..new_run("a", "p") })?;
    let plain = journal.create_run(new_run("b", "p"))?;
    assert_eq!(journal.run(run)?.ok_or("no run")?.launch, Some(launch.clone()));
    assert_eq!(journal.run(plain)?.ok_or("no run")?.launch, None);

    let status = RunUpdate { status: Some(RunStatus::AwaitingInput), ..RunUpdate::default() };
    journal.nonblocking().update_run(run, status).wait()?;
    let owner = RunUpdate { owner: Some("q".into()), ..RunUpdate::default() };
    assert_eq!(journal.update_run(run, owner)?.launch, Some(launch.clone()));
    journal
        .update_run(run, RunUpdate { status: Some(RunStatus::Running), ..Default::default() })?;
    assert_eq!(journal.reconcile::<&str>(&[])?.runs, 2);
    assert_eq!(journal.run(run)?.ok_or("no run")?.launch, Some(launch.clone()));

    let pinned = json!({"agent": "/agents/a.toml", "agent_checksum": "sha256:1"});
    let replaced = RunUpdate { launch: Some(pinned.clone()), ..RunUpdate::default() };
    let rec = journal.update_run(run, replaced)?;
    assert_eq!((rec.launch, rec.status), (Some(pinned.clone()), RunStatus::Interrupted));
    drop(journal);

    let journal = Journal::open(&path, JournalConfig::default())?;
    assert_eq!(journal.run(run)?.ok_or("no run")?.launch, Some(pinned));
    let mut out = Vec::new();
    journal.export(plain, &mut out)?;
    let first: serde_json::Value =
        serde_json::from_str(String::from_utf8(out)?.lines().next().unwrap_or_default())?;
    assert!(first.get("launch").is_none(), "a run without a launch stores none: {first}");
    Ok(())
}

#[test]
fn tasks_record_progress_and_refuse_change_once_final() -> TestResult {
    let (journal, run) = journal_with_run()?;
    let parent = journal.create_task(new_task(run, "proc-a"))?;
    let child = journal
        .create_task(clio_journal::NewTask { parent: Some(parent), ..new_task(run, "proc-a") })?;
    let rec = journal.update_task(
        child,
        TaskUpdate {
            status: Some(TaskStatus::Succeeded),
            input_tokens: Some(12),
            output_tokens: Some(5),
            result: Some(json!({"answer": "ok"})),
            ..TaskUpdate::default()
        },
    )?;
    assert_eq!((rec.input_tokens, rec.output_tokens, rec.parent), (12, 5, Some(parent)));
    let err = journal.update_task(child, TaskUpdate::default()).err().ok_or("accepted")?;
    assert!(matches!(err, JournalError::TaskFinished { status: TaskStatus::Succeeded, .. }));
    let tasks = journal.tasks(run)?;
    assert_eq!(tasks.iter().map(|t| t.id).collect::<Vec<_>>(), vec![parent, child]);
    assert_eq!(journal.task(child)?.and_then(|t| t.result), Some(json!({"answer": "ok"})));
    Ok(())
}

fn new_session(id: &str, leader: Option<&str>, owner: &str) -> NewSession {
    NewSession {
        id: SessionId(id.into()),
        leader: leader.map(|l| SessionId(l.into())),
        parent: leader.map(|l| SessionId(l.into())),
        team: Some("team-1".into()),
        managed: true,
        enabled: None,
        status: SessionStatus::Running,
        iteration_budget: Some(2),
        router_allowlist: Some(vec!["local/llama".into()]),
        owner: owner.into(),
        run: None,
    }
}

#[test]
fn sessions_keep_a_durable_iteration_budget() -> TestResult {
    let journal = Journal::open_in_memory()?;
    let id = SessionId("s-1".into());
    journal.create_session(new_session("s-1", Some("lead"), "proc-a"))?;
    let err = journal.create_session(new_session("s-1", None, "proc-a")).err().ok_or("accepted")?;
    assert!(matches!(err, JournalError::SessionExists { .. }));
    assert_eq!(journal.claim_iteration(&id)?, Some(1));
    assert_eq!(journal.claim_iteration(&id)?, Some(2));
    assert_eq!(journal.claim_iteration(&id)?, None, "budget spent");
    let rec = journal.update_session(
        &id,
        SessionUpdate {
            iteration_budget: Some(Some(3)),
            checkpoint: Some(json!([1])),
            ..Default::default()
        },
    )?;
    assert_eq!(rec.checkpoint, Some(json!([1])));
    assert_eq!(journal.claim_iteration(&id)?, Some(3));
    assert_eq!(journal.sessions()?.len(), 1);
    assert_eq!(journal.session(&id)?.map(|s| s.iterations_used), Some(3));
    Ok(())
}

#[test]
fn reconcile_marks_what_dead_processes_left_running_exactly_once() -> TestResult {
    let journal = Journal::open_in_memory()?;
    let dead_run = journal.create_run(new_run("count", "dead"))?;
    let live_run = journal.create_run(new_run("count", "live"))?;
    let dead_task = journal.create_task(new_task(dead_run, "dead"))?;
    let live_task = journal.create_task(new_task(live_run, "live"))?;
    let finished = journal.create_task(new_task(dead_run, "dead"))?;
    journal.update_task(
        finished,
        TaskUpdate { status: Some(TaskStatus::Failed), ..Default::default() },
    )?;
    journal.create_session(new_session("orphan", Some("gone-leader"), "dead"))?;
    journal.create_session(new_session("spared", Some("live-leader"), "dead"))?;
    journal.create_session(new_session("idle", None, "dead"))?;
    journal.update_session(
        &SessionId("idle".into()),
        SessionUpdate { status: Some(SessionStatus::Idle), ..Default::default() },
    )?;

    let done = journal.reconcile(&["live", "live-leader"])?;
    assert_eq!((done.runs, done.tasks, done.sessions, done.total()), (1, 1, 1, 3));
    assert_eq!(journal.reconcile(&["live", "live-leader"])?.total(), 0, "exactly once");

    let status = |t| journal.task(t).map(|r| r.map(|r| r.status));
    assert_eq!(status(dead_task)?, Some(TaskStatus::Interrupted));
    assert_eq!(status(live_task)?, Some(TaskStatus::Running));
    assert_eq!(status(finished)?, Some(TaskStatus::Failed));
    assert_eq!(journal.run(dead_run)?.map(|r| r.status), Some(RunStatus::Interrupted));
    assert_eq!(journal.run(live_run)?.map(|r| r.status), Some(RunStatus::Running));
    let session = |id: &str| journal.session(&SessionId(id.into())).map(|s| s.map(|s| s.status));
    assert_eq!(session("orphan")?, Some(SessionStatus::Lost));
    assert_eq!(session("spared")?, Some(SessionStatus::Running));
    assert_eq!(session("idle")?, Some(SessionStatus::Idle));
    Ok(())
}

/// A call's intent, its task and its acceptance are one write: all or nothing.
#[test]
fn a_task_and_its_entries_are_written_together_or_not_at_all() -> TestResult {
    let journal = Journal::open_in_memory()?;
    let run = journal.create_run(new_run("count", "p"))?;
    let intent = NewEntry::new(EntryKind::Call, serde_json::json!({"call": 1})).with_identity("c1");
    let accepted =
        NewEntry::new(EntryKind::Call, serde_json::json!({})).with_identity("c1@accepted");
    let (task, seqs) =
        journal.create_task_with_entries(run, vec![intent], new_task(run, "p"), vec![accepted])?;
    assert_eq!(seqs, [0, 1]);
    let entries = journal.entries(run)?;
    assert_eq!(entries[0].task, None);
    assert_eq!(entries[1].task, Some(task), "the acceptance names the new task");

    // A taken identity refuses the whole write: no task, no entry.
    let again = NewEntry::new(EntryKind::Call, serde_json::json!({})).with_identity("c1");
    let err =
        journal.create_task_with_entries(run, vec![again], new_task(run, "p"), vec![]).unwrap_err();
    assert!(matches!(err, clio_journal::JournalError::DuplicateIdentity { .. }), "{err:?}");
    assert_eq!(journal.tasks(run)?.len(), 1);
    assert_eq!(journal.entry_count(run)?, 2);
    Ok(())
}

/// A task that has already ended is recorded in one write, with its entries, its final
/// status and a result that names it; a refused write leaves nothing.
#[test]
fn an_ended_task_is_recorded_with_its_entries_in_one_write() -> TestResult {
    let journal = Journal::open_in_memory()?;
    let run = journal.create_run(new_run("count", "p"))?;
    let intent = NewEntry::new(EntryKind::Call, serde_json::json!({"call": 1})).with_identity("c1");
    let accepted =
        NewEntry::new(EntryKind::Call, serde_json::json!({})).with_identity("c1@accepted");
    let (rec, seqs) =
        journal.record_ended_task(run, vec![intent], new_task(run, "p"), vec![accepted], |id| {
            TaskUpdate {
                status: Some(TaskStatus::Succeeded),
                result: Some(serde_json::json!({ "handle": id.0 })),
                ..TaskUpdate::default()
            }
        })?;
    assert_eq!(seqs, [0, 1]);
    assert_eq!(rec.status, TaskStatus::Succeeded);
    assert_eq!(rec.result, Some(serde_json::json!({ "handle": rec.id.0 })));
    assert_eq!(journal.task(rec.id)?, Some(rec.clone()));
    assert_eq!(journal.entries(run)?[1].task, Some(rec.id), "the acceptance names the task");

    let again = NewEntry::new(EntryKind::Call, serde_json::json!({})).with_identity("c1");
    let err = journal
        .record_ended_task(run, vec![again], new_task(run, "p"), vec![], |_| TaskUpdate::default())
        .unwrap_err();
    assert!(matches!(err, clio_journal::JournalError::DuplicateIdentity { .. }), "{err:?}");
    assert_eq!(journal.tasks(run)?.len(), 1);
    assert_eq!(journal.entry_count(run)?, 2);
    Ok(())
}

/// An interrupted task is re-attached by the process that resumes its run: it may run and
/// finish under the same handle, and reconcile does not count it again meanwhile.
#[test]
fn an_interrupted_task_is_re_attached_by_a_resume() -> TestResult {
    let journal = Journal::open_in_memory()?;
    let run = journal.create_run(new_run("count", "dead"))?;
    let task = journal.create_task(new_task(run, "dead"))?;
    assert_eq!(journal.reconcile(&["new"])?.tasks, 1);
    assert_eq!(journal.reconcile(&["new"])?.tasks, 0, "an interrupted task is not active");
    let resumed = TaskUpdate {
        status: Some(TaskStatus::Running),
        owner: Some("new".into()),
        ..Default::default()
    };
    assert_eq!(journal.update_task(task, resumed)?.status, TaskStatus::Running);
    let done = TaskUpdate { status: Some(TaskStatus::Succeeded), ..Default::default() };
    journal.update_task(task, done)?;
    let again = TaskUpdate { status: Some(TaskStatus::Running), ..Default::default() };
    assert!(journal.update_task(task, again).is_err(), "a succeeded task never changes");
    assert_eq!(journal.reconcile(&["other"])?.tasks, 0);
    Ok(())
}

#[test]
fn prune_removes_finished_runs_with_their_entries_and_tasks() -> TestResult {
    let (journal, old) = journal_with_run()?;
    let kept = journal.create_run(new_run("count", "proc-a"))?;
    let unfinished = journal.create_run(new_run("count", "proc-a"))?;
    for run in [old, kept, unfinished] {
        journal.append_batch(run, (0..5).map(step).collect())?;
        journal.create_task(new_task(run, "proc-a"))?;
    }
    journal.update_run(old, RunUpdate { status: Some(RunStatus::Failed), ..Default::default() })?;

    assert_eq!(journal.prune(0)?, clio_journal::Pruned::default(), "nothing finished before 0");
    let pruned = journal.prune(u64::MAX)?;
    assert_eq!((pruned.runs, pruned.entries, pruned.tasks), (1, 5, 1));
    assert_eq!(journal.run(old)?, None);
    assert!(matches!(journal.entries(old), Err(JournalError::RunNotFound { .. })));
    assert_eq!(journal.entry_by_identity(old, "step-1")?, None);
    assert_eq!(journal.tasks(old)?, vec![]);
    for run in [kept, unfinished] {
        assert_eq!(journal.entries(run)?.len(), 5);
        assert_eq!(journal.tasks(run)?.len(), 1);
        assert!(journal.entry_by_identity(run, "step-4")?.is_some());
    }
    Ok(())
}

#[test]
fn export_writes_the_run_its_tasks_and_its_entries_as_json_lines() -> TestResult {
    let (journal, run) = journal_with_run()?;
    let task = journal.create_task(new_task(run, "proc-a"))?;
    journal
        .append(run, NewEntry::new(EntryKind::Call, json!({"target": "echo"})).with_task(task))?;
    journal.append(run, step(1))?;
    let mut out = Vec::new();
    assert_eq!(journal.export(run, &mut out)?, 4);
    let text = String::from_utf8(out)?;
    let lines: Vec<ExportLine> =
        text.lines().map(serde_json::from_str).collect::<Result<_, _>>()?;
    assert!(matches!(&lines[0], ExportLine::Run(r) if r.id == run));
    assert!(matches!(&lines[1], ExportLine::Task(t) if t.id == task));
    assert!(matches!(&lines[2], ExportLine::Entry(e) if e.seq == 0 && e.task == Some(task)));
    let first: serde_json::Value = serde_json::from_str(text.lines().next().unwrap_or_default())?;
    assert_eq!(first["record"], "run");
    Ok(())
}

#[test]
fn concurrent_appenders_get_distinct_dense_sequence_numbers() -> TestResult {
    let (journal, run) = journal_with_run()?;
    let journal = Arc::new(journal);
    let threads: Vec<_> = (0..16u64)
        .map(|t| {
            let journal = Arc::clone(&journal);
            std::thread::spawn(move || -> Result<Vec<u64>, JournalError> {
                (0..25).map(|i| journal.append(run, step(t * 1000 + i))).collect()
            })
        })
        .collect();
    let mut seqs = BTreeSet::new();
    for handle in threads {
        let got = handle.join().map_err(|_| "appender panicked")??;
        seqs.extend(got);
    }
    assert_eq!(seqs, (0..400).collect::<BTreeSet<u64>>());
    assert_eq!(journal.entries(run)?.len(), 400);
    Ok(())
}

#[test]
fn eventual_durability_is_visible_at_once_and_durable_after_flush() -> TestResult {
    let config = JournalConfig { durability: Durability::Eventual, ..JournalConfig::default() };
    let journal = Journal::open_in_memory_with(config)?;
    let run = journal.create_run(new_run("scratch", "proc-a"))?;
    journal.append(run, step(0))?;
    assert_eq!(journal.entries(run)?.len(), 1);
    journal.flush()?;
    let clone = journal.clone();
    journal.close()?;
    assert_eq!(clone.entry_count(run)?, 1, "a clone outlives close of another handle");
    Ok(())
}

#[test]
fn raw_entries_are_the_entries_with_their_payloads_undecoded() -> TestResult {
    let (journal, run) = journal_with_run()?;
    let task = journal.create_task(new_task(run, "proc-a"))?;
    journal.append(run, step(0))?;
    journal.append(
        run,
        NewEntry::new(
            EntryKind::Call,
            json!({"command": {"target": "echo"}, "result": [1, "two"]}),
        )
        .with_task(task),
    )?;
    journal.append(run, NewEntry::new(EntryKind::Answer, json!("plain text")))?;
    let decoded = journal.entries(run)?;
    let raw = journal.raw_entries(run)?;
    assert_eq!(raw.len(), decoded.len());
    for (r, d) in raw.iter().zip(&decoded) {
        assert_eq!(
            (r.run, r.seq, r.kind, &r.identity, r.task, r.at_ms),
            (d.run, d.seq, d.kind, &d.identity, d.task, d.at_ms)
        );
        assert_eq!(r.payload_value()?, d.payload);
    }
    #[derive(serde::Deserialize)]
    struct OnlyResult {
        result: serde_json::Value,
    }
    assert_eq!(raw[1].payload_as::<OnlyResult>()?.result, json!([1, "two"]));
    assert!(raw[2].payload_as::<OnlyResult>().is_err(), "a text payload has no result");
    assert!(matches!(
        journal.raw_entries(clio_journal::RunId(99)),
        Err(JournalError::RunNotFound { .. })
    ));
    Ok(())
}

/// Returns a strategy of JSON values, nested a few levels, with text that needs escaping.
fn json_value() -> impl proptest::strategy::Strategy<Value = serde_json::Value> {
    use proptest::prelude::*;
    let leaf = prop_oneof![
        Just(serde_json::Value::Null),
        any::<bool>().prop_map(serde_json::Value::from),
        any::<i64>().prop_map(serde_json::Value::from),
        (-1e9f64..1e9).prop_map(serde_json::Value::from),
        "[a-z\"\\\\\n é]{0,8}".prop_map(serde_json::Value::from),
    ];
    leaf.prop_recursive(3, 32, 4, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(serde_json::Value::from),
            proptest::collection::btree_map("[a-z]{1,4}", inner, 0..4)
                .prop_map(|m| serde_json::Value::Object(m.into_iter().collect())),
        ]
    })
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]

    /// A run's updates change its status, answer and owner, and leave its input exactly as
    /// it was given (the writer keeps input and answer as JSON text and never re-encodes
    /// them), whether the caller waits for the record or not.
    #[test]
    fn run_updates_keep_the_input_and_answer_exactly(
        input in json_value(),
        answer in json_value(),
        nonblocking in proptest::bool::ANY,
    ) {
        let journal = Journal::open_in_memory().expect("journal");
        let run = journal
            .create_run(clio_journal::NewRun { input: input.clone(), ..new_run("count", "proc-a") })
            .expect("run");
        let owner = RunUpdate { owner: Some("proc-b".into()), ..RunUpdate::default() };
        let done = RunUpdate {
            status: Some(RunStatus::Succeeded),
            answer: Some(answer.clone()),
            ..RunUpdate::default()
        };
        if nonblocking {
            journal.nonblocking().update_run(run, owner).wait().expect("owner");
            journal.nonblocking().update_run(run, done).wait().expect("done");
        } else {
            let rec = journal.update_run(run, owner).expect("owner");
            proptest::prop_assert_eq!(&rec.input, &input);
            let rec = journal.update_run(run, done).expect("done");
            proptest::prop_assert_eq!(rec, journal.run(run).expect("read").expect("found"));
        }
        let rec = journal.run(run).expect("read").expect("found");
        proptest::prop_assert_eq!(rec.input, input);
        // An answer of null is no answer.
        proptest::prop_assert_eq!(rec.answer, (!answer.is_null()).then_some(answer));
        proptest::prop_assert_eq!(rec.owner, "proc-b");
        proptest::prop_assert_eq!(rec.status, RunStatus::Succeeded);
        proptest::prop_assert!(rec.finished_at_ms.is_some());
    }
}

/// A prune in the same batch as appends to the run it removes removes the run for good:
/// the batch's run heads reach the table before the prune, not after it.
#[test]
fn a_prune_batched_with_appends_to_its_run_removes_the_run_for_good() -> TestResult {
    let (journal, run) = journal_with_run()?;
    journal
        .update_run(run, RunUpdate { status: Some(RunStatus::Failed), ..RunUpdate::default() })?;
    // Sent without waiting, so the writer takes them and the prune in one batch.
    let appends: Vec<_> = (0..50).map(|i| journal.nonblocking().append(run, step(i))).collect();
    let pruned = journal.prune(u64::MAX)?;
    assert_eq!(pruned.runs, 1);
    for append in appends {
        append.wait()?;
    }
    assert!(journal.run(run)?.is_none());
    let err = journal.append(run, step(99)).err().ok_or("the pruned run took an entry")?;
    assert!(matches!(err, JournalError::RunNotFound { .. }), "{err}");
    Ok(())
}

/// An entry given as JSON text is stored as it is: it reads back as the same entry given as
/// a value would.
#[test]
fn an_entry_given_as_text_reads_back_as_its_value() -> TestResult {
    let (journal, run) = journal_with_run()?;
    let value = json!({ "command": { "command": "event" }, "result": { "events": [1, "é\n"] } });
    let text = serde_json::value::to_raw_value(&value)?;
    journal.append(run, NewEntry::new(EntryKind::Event, value.clone()).with_identity("a"))?;
    journal.append(run, NewEntry::from_text(EntryKind::Event, text).with_identity("b"))?;
    let entries = journal.entries(run)?;
    assert_eq!((entries[0].payload.clone(), entries[1].payload.clone()), (value.clone(), value));
    assert_eq!(entries[1].identity.as_deref(), Some("b"));
    Ok(())
}

/// A reader waiting on [`Journal::changes`] is woken by a write from another thread, and
/// reads what it wrote once woken; a change made before it waited is noticed at once.
#[test]
fn changes_wake_a_reader_after_each_commit() -> TestResult {
    use std::task::{Context, Poll, Wake, Waker};

    /// Wakes the thread that polls.
    struct Unpark(std::thread::Thread);
    impl Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }
    /// Polls `future` on this thread until it is ready, parking in between.
    fn block_on<F: std::future::Future>(future: F) -> F::Output {
        let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
        let mut cx = Context::from_waker(&waker);
        let mut future = std::pin::pin!(future);
        loop {
            if let Poll::Ready(out) = future.as_mut().poll(&mut cx) {
                return out;
            }
            std::thread::park();
        }
    }

    let (journal, run) = journal_with_run()?;
    let mut changes = journal.changes();
    let writer = {
        let journal = journal.clone();
        std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(20));
            journal.append(run, step(1))
        })
    };
    block_on(changes.changed());
    assert_eq!(journal.entries(run)?.len(), 1, "the commit is read once noticed");
    writer.join().map_err(|_| "writer panicked")??;
    journal.append(run, step(2))?;
    block_on(changes.changed());
    assert_eq!(journal.entries(run)?.len(), 2);
    Ok(())
}

/// The instance tag (which the runtime puts in the marker of the processes a call starts)
/// is the same for every handle of one journal, whatever path named its file, and differs
/// between two journals, in-memory ones included.
#[test]
fn an_instance_tag_names_one_journal_and_only_it() -> TestResult {
    let a = Journal::open_in_memory()?;
    let b = Journal::open_in_memory()?;
    assert_eq!(a.instance_tag(), a.clone().instance_tag());
    assert_ne!(a.instance_tag(), b.instance_tag());
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("journal.redb");
    let tag = Journal::open(&path, JournalConfig::default())?.instance_tag();
    let roundabout = dir.path().join(".").join("journal.redb");
    assert_eq!(Journal::open(&roundabout, JournalConfig::default())?.instance_tag(), tag);
    let other = dir.path().join("other.redb");
    assert_ne!(Journal::open(&other, JournalConfig::default())?.instance_tag(), tag);
    assert_ne!(a.instance_tag(), tag);
    Ok(())
}
