//! The journal contract's test suite: every backend must pass it unchanged (feature
//! `conformance`). The embedded redb journal runs it in this crate's tests, the PostgreSQL
//! backend in its own.
//!
//! Each case is a function given a way to open a fresh, empty journal; it panics (an
//! assertion) when the backend breaks the contract. [`journal_conformance!`](crate::journal_conformance)
//! turns every case into a `#[test]` of the calling crate:
//!
//! ```ignore
//! clio_journal::journal_conformance!(my_backend::open_fresh, |j: &Journal| my_backend::reopen(j));
//! ```

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use crate::{
    EntryKind, ExportLine, Journal, JournalError, NewEntry, NewRun, NewSession, NewTask, RunFilter,
    RunId, RunStatus, RunUpdate, SessionId, SessionStatus, SessionUpdate, TaskId, TaskKind,
    TaskRecord, TaskStatus, TaskUpdate,
};

/// How the suite opens journals of the backend under test.
pub struct Harness<'a> {
    /// Opens a fresh, empty journal.
    pub fresh: &'a dyn Fn() -> Journal,
    /// Opens another handle on the same journal as the one given, as a second process
    /// would (for a store that one process locks, a clone of the handle).
    pub another: &'a dyn Fn(&Journal) -> Journal,
}

impl Harness<'_> {
    fn open(&self) -> Journal {
        (self.fresh)()
    }

    fn another(&self, journal: &Journal) -> Journal {
        (self.another)(journal)
    }
}

/// The suite's view of a harness, as each case takes it.
pub type Open<'a> = &'a Harness<'a>;

/// Turns every case of the suite into a `#[test]`, each opening fresh journals with
/// `$fresh` (an `impl Fn() -> Journal`) and more handles on one with `$another` (an
/// `impl Fn(&Journal) -> Journal`).
#[macro_export]
macro_rules! journal_conformance {
    ($fresh:expr, $another:expr) => {
        $crate::journal_conformance!(@cases $fresh, $another;
            runs_are_created_read_and_listed_newest_first
            a_run_update_changes_only_what_it_sets
            entries_get_dense_sequence_numbers_from_zero
            an_identity_names_at_most_one_entry_of_a_run
            a_batch_is_written_whole_or_not_at_all
            payload_text_is_kept_as_given
            writes_to_a_missing_run_or_task_are_refused
            tasks_are_created_updated_and_then_final
            a_task_and_its_entries_are_one_write
            an_ended_task_is_recorded_once_with_its_entries
            sessions_keep_their_budget_durably
            reconcile_marks_only_what_gone_owners_left
            prune_removes_only_runs_finished_before_the_cut
            export_writes_the_run_its_tasks_and_its_entries
            a_commit_is_noticed_by_changes
            concurrent_appends_get_distinct_dense_numbers
            nonblocking_writes_are_durable_when_ready
            leases_fence_a_worker_whose_run_was_claimed
            sessions_belong_to_their_run
            sessions_of_a_claimed_run_pass_to_its_new_worker
        );
    };
    (@cases $fresh:expr, $another:expr; $($case:ident)*) => {
        $(
            #[test]
            fn $case() {
                let fresh = $fresh;
                let another = $another;
                let harness = $crate::conformance::Harness { fresh: &fresh, another: &another };
                $crate::conformance::$case(&harness);
            }
        )*
    };
}

fn new_run(flow: &str, owner: &str) -> NewRun {
    NewRun {
        flow: flow.to_owned(),
        input: json!({"task": flow, "n": 3}),
        input_digest: "sha256:00".to_owned(),
        fingerprint: "flow@1+plugins:none".to_owned(),
        owner: owner.to_owned(),
        launch: None,
    }
}

fn new_task(run: RunId, owner: &str) -> NewTask {
    NewTask {
        run,
        parent: None,
        kind: TaskKind::Tool,
        target: "echo".to_owned(),
        label: "echo".to_owned(),
        status: TaskStatus::Running,
        model: None,
        owner: owner.to_owned(),
        call: Some("call:1".to_owned()),
    }
}

fn new_session(id: &str, owner: &str, budget: Option<u64>) -> NewSession {
    NewSession {
        id: SessionId(id.to_owned()),
        leader: None,
        parent: None,
        team: Some("team".to_owned()),
        managed: false,
        enabled: None,
        status: SessionStatus::Running,
        iteration_budget: budget,
        router_allowlist: None,
        owner: owner.to_owned(),
        run: None,
    }
}

fn event(n: u64) -> NewEntry {
    NewEntry::new(EntryKind::Event, json!({ "n": n }))
}

fn ok<T>(what: &str, res: Result<T, JournalError>) -> T {
    res.unwrap_or_else(|err| panic!("{what}: {err}"))
}

/// Runs are created running, read back as created, and listed newest first, with filters.
pub fn runs_are_created_read_and_listed_newest_first(open: Open<'_>) {
    let j = open.open();
    let a = ok("create a", j.create_run(new_run("alpha", "p1")));
    let b = ok(
        "create b",
        j.create_run(NewRun { launch: Some(json!({"k": 1})), ..new_run("beta", "p1") }),
    );
    assert!(b.0 > a.0, "run ids grow: {a} then {b}");
    let rec = ok("read b", j.run(b)).expect("run b exists");
    assert_eq!(rec.id, b);
    assert_eq!(rec.flow, "beta");
    assert_eq!(rec.status, RunStatus::Running);
    assert_eq!(rec.input, json!({"task": "beta", "n": 3}));
    assert_eq!(rec.launch, Some(json!({"k": 1})));
    assert_eq!(rec.finished_at_ms, None);
    assert!(ok("missing", j.run(RunId(b.0 + 1000))).is_none());
    let all = ok("list", j.runs(&RunFilter::default()));
    assert_eq!(all.iter().map(|r| r.id).collect::<Vec<_>>(), vec![b, a]);
    let alpha =
        ok("by flow", j.runs(&RunFilter { flow: Some("alpha".into()), ..RunFilter::default() }));
    assert_eq!(alpha.iter().map(|r| r.id).collect::<Vec<_>>(), vec![a]);
    let one = ok("limit", j.runs(&RunFilter { limit: Some(1), ..RunFilter::default() }));
    assert_eq!(one.len(), 1);
    assert_eq!(one[0].id, b);
    ok(
        "finish a",
        j.update_run(a, RunUpdate { status: Some(RunStatus::Succeeded), ..RunUpdate::default() }),
    );
    let done = ok(
        "by status",
        j.runs(&RunFilter { statuses: vec![RunStatus::Succeeded], ..RunFilter::default() }),
    );
    assert_eq!(done.iter().map(|r| r.id).collect::<Vec<_>>(), vec![a]);
    assert_eq!(ok("no entries", j.entry_count(a)), 0);
}

/// An update sets what it names and keeps the rest; a finished status stamps the end.
pub fn a_run_update_changes_only_what_it_sets(open: Open<'_>) {
    let j = open.open();
    let run = ok("create", j.create_run(new_run("f", "p1")));
    let rec = ok(
        "answer",
        j.update_run(
            run,
            RunUpdate {
                status: Some(RunStatus::Succeeded),
                answer: Some(json!({"out": [1, 2]})),
                ..RunUpdate::default()
            },
        ),
    );
    assert_eq!(rec.status, RunStatus::Succeeded);
    assert!(rec.finished_at_ms.is_some(), "a finished run has its end");
    assert_eq!(rec.answer, Some(json!({"out": [1, 2]})));
    assert_eq!(rec.owner, "p1");
    let rec = ok(
        "owner",
        j.update_run(
            run,
            RunUpdate {
                status: Some(RunStatus::Interrupted),
                owner: Some("p2".into()),
                error: Some("stopped".into()),
                ..RunUpdate::default()
            },
        ),
    );
    assert_eq!(rec.finished_at_ms, None, "an unfinished status clears the end");
    assert_eq!(rec.answer, Some(json!({"out": [1, 2]})), "the answer stays");
    assert_eq!(rec.owner, "p2");
    assert_eq!(rec.error.as_deref(), Some("stopped"));
    assert_eq!(ok("read", j.run(run)).expect("exists"), rec);
    let missing = j.update_run(RunId(run.0 + 99), RunUpdate::default());
    assert!(matches!(missing, Err(JournalError::RunNotFound { .. })), "{missing:?}");
}

/// Each run numbers its own entries 0, 1, 2, ...; reads by number, range and count agree.
pub fn entries_get_dense_sequence_numbers_from_zero(open: Open<'_>) {
    let j = open.open();
    let a = ok("create a", j.create_run(new_run("a", "p")));
    let b = ok("create b", j.create_run(new_run("b", "p")));
    for n in 0..5 {
        assert_eq!(ok("append a", j.append(a, event(n))), n);
    }
    assert_eq!(ok("append b", j.append(b, event(0))), 0, "each run counts its own");
    assert_eq!(ok("batch", j.append_batch(a, vec![event(5), event(6)])), vec![5, 6]);
    assert_eq!(ok("count", j.entry_count(a)), 7);
    let all = ok("entries", j.entries(a));
    assert_eq!(all.iter().map(|e| e.seq).collect::<Vec<_>>(), (0..7).collect::<Vec<_>>());
    assert!(all.iter().all(|e| e.run == a && e.kind == EntryKind::Event));
    assert_eq!(all[3].payload, json!({"n": 3}));
    let from = ok("from", j.entries_from(a, 5));
    assert_eq!(from.iter().map(|e| e.seq).collect::<Vec<_>>(), vec![5, 6]);
    assert_eq!(ok("entry", j.entry(a, 2)).expect("entry 2").payload, json!({"n": 2}));
    assert!(ok("past the end", j.entry(a, 7)).is_none());
    let raw = ok("raw", j.raw_entries(a));
    assert_eq!(raw.len(), 7);
    let missing = j.entry_count(RunId(b.0 + 50));
    assert!(matches!(missing, Err(JournalError::RunNotFound { .. })), "{missing:?}");
}

/// A second entry with a taken identity is refused, naming the entry that holds it.
pub fn an_identity_names_at_most_one_entry_of_a_run(open: Open<'_>) {
    let j = open.open();
    let a = ok("create a", j.create_run(new_run("a", "p")));
    let b = ok("create b", j.create_run(new_run("b", "p")));
    ok("first", j.append(a, event(0)));
    ok("named", j.append(a, event(1).with_identity("call:x")));
    let again = j.append(a, event(2).with_identity("call:x"));
    match again {
        Err(JournalError::DuplicateIdentity { run, identity, seq }) => {
            assert_eq!((run, identity.as_str(), seq), (a, "call:x", 1));
        }
        other => panic!("a taken identity must be refused, got {other:?}"),
    }
    assert_eq!(ok("count", j.entry_count(a)), 2, "the refused entry is not written");
    assert_eq!(ok("other run", j.append(b, event(0).with_identity("call:x"))), 0);
    let found = ok("by identity", j.entry_by_identity(a, "call:x")).expect("found");
    assert_eq!((found.seq, found.payload), (1, json!({"n": 1})));
    assert!(ok("absent", j.entry_by_identity(a, "call:y")).is_none());
}

/// A batch that fails (a taken identity, or one named twice) leaves nothing behind.
pub fn a_batch_is_written_whole_or_not_at_all(open: Open<'_>) {
    let j = open.open();
    let run = ok("create", j.create_run(new_run("a", "p")));
    ok("seed", j.append(run, event(0).with_identity("taken")));
    let res =
        j.append_batch(run, vec![event(1).with_identity("new"), event(2).with_identity("taken")]);
    assert!(matches!(res, Err(JournalError::DuplicateIdentity { .. })), "{res:?}");
    let res =
        j.append_batch(run, vec![event(1).with_identity("twice"), event(2).with_identity("twice")]);
    match res {
        Err(JournalError::DuplicateIdentity { identity, seq, .. }) => {
            assert_eq!((identity.as_str(), seq), ("twice", 1));
        }
        other => panic!("an identity named twice in a batch must be refused, got {other:?}"),
    }
    assert_eq!(ok("count", j.entry_count(run)), 1);
    assert!(ok("new", j.entry_by_identity(run, "new")).is_none(), "nothing of the batch stayed");
    assert_eq!(ok("next", j.append(run, event(3))), 1, "numbers stay dense after a refusal");
}

/// A payload given as JSON text reads back as that text, byte for byte.
pub fn payload_text_is_kept_as_given(open: Open<'_>) {
    let j = open.open();
    let run = ok("create", j.create_run(new_run("a", "p")));
    let text = r#"{"z":1,"a":[1.5,"é\n"],"m":{"y":null,"b":true}}"#;
    let raw = serde_json::value::RawValue::from_string(text.to_owned()).expect("valid JSON");
    ok("append", j.append(run, NewEntry::from_text(EntryKind::Step, raw)));
    let stored = ok("raw", j.raw_entries(run));
    assert_eq!(stored[0].payload.get(), text);
    assert_eq!(stored[0].kind, EntryKind::Step);
    let decoded = ok("entries", j.entries(run));
    let expected: Value = serde_json::from_str(text).expect("valid");
    assert_eq!(decoded[0].payload, expected);
}

/// Writes naming a run or task that does not exist are refused and change nothing.
pub fn writes_to_a_missing_run_or_task_are_refused(open: Open<'_>) {
    let j = open.open();
    let run = ok("create", j.create_run(new_run("a", "p")));
    let ghost = RunId(run.0 + 77);
    let res = j.append(ghost, event(0));
    assert!(matches!(res, Err(JournalError::RunNotFound { run }) if run == ghost), "{res:?}");
    let res = j.create_task(new_task(ghost, "p"));
    assert!(matches!(res, Err(JournalError::RunNotFound { .. })), "{res:?}");
    let res = j.create_task(NewTask { parent: Some(TaskId(9_999)), ..new_task(run, "p") });
    assert!(matches!(res, Err(JournalError::TaskNotFound { .. })), "{res:?}");
    let res = j.update_task(TaskId(9_999), TaskUpdate::default());
    assert!(matches!(res, Err(JournalError::TaskNotFound { .. })), "{res:?}");
    let res = j.update_session(&SessionId("nobody".into()), SessionUpdate::default());
    assert!(matches!(res, Err(JournalError::SessionNotFound { .. })), "{res:?}");
    assert!(ok("no tasks", j.tasks(run)).is_empty());
    assert!(ok("no task", j.task(TaskId(9_999))).is_none());
}

/// Tasks are read back as created, change by update, and refuse change once final.
pub fn tasks_are_created_updated_and_then_final(open: Open<'_>) {
    let j = open.open();
    let run = ok("create", j.create_run(new_run("a", "p")));
    let parent = ok("parent", j.create_task(new_task(run, "p")));
    let child = ok("child", j.create_task(NewTask { parent: Some(parent), ..new_task(run, "p") }));
    let rec = ok("read", j.task(child)).expect("child exists");
    assert_eq!((rec.run, rec.parent, rec.status), (run, Some(parent), TaskStatus::Running));
    assert_eq!(rec.call.as_deref(), Some("call:1"));
    let rec = ok(
        "finish",
        j.update_task(
            child,
            TaskUpdate {
                status: Some(TaskStatus::Succeeded),
                result: Some(json!("done")),
                input_tokens: Some(12),
                output_tokens: Some(3),
                ..TaskUpdate::default()
            },
        ),
    );
    assert_eq!(rec.status, TaskStatus::Succeeded);
    assert_eq!((rec.input_tokens, rec.output_tokens), (12, 3));
    assert_eq!(rec.result, Some(json!("done")));
    let res = j.update_task(
        child,
        TaskUpdate { status: Some(TaskStatus::Failed), ..TaskUpdate::default() },
    );
    assert!(
        matches!(res, Err(JournalError::TaskFinished { status: TaskStatus::Succeeded, .. })),
        "{res:?}"
    );
    assert_eq!(ok("unchanged", j.task(child)).expect("exists").status, TaskStatus::Succeeded);
    let failed = ok("failed", j.create_task(new_task(run, "p")));
    let update = TaskUpdate {
        status: Some(TaskStatus::Failed),
        error: Some("it broke".into()),
        ..TaskUpdate::default()
    };
    ok("fail", j.update_task(failed, update));
    let update = TaskUpdate {
        result: Some(json!({"results": {"s0": {"i": 0}, "s1": [1, 2, {"deep": null}]}})),
        ..TaskUpdate::default()
    };
    ok("the parent's result", j.update_task(parent, update));
    let tasks = ok("tasks", j.tasks(run));
    assert_eq!(tasks.iter().map(|t| t.id).collect::<Vec<_>>(), vec![parent, child, failed]);
    // Read without their results, the same records with `result` left out.
    let cleared: Vec<TaskRecord> =
        tasks.into_iter().map(|t| TaskRecord { result: None, ..t }).collect();
    assert_eq!(ok("tasks without results", j.tasks_without_results(run)), cleared);
    assert!(ok("none", j.tasks_without_results(RunId(run.0 + 1_000))).is_empty());
}

/// A task and the entries around it are written together; the entries after it name it.
pub fn a_task_and_its_entries_are_one_write(open: Open<'_>) {
    let j = open.open();
    let run = ok("create", j.create_run(new_run("a", "p")));
    let (task, seqs) = ok(
        "together",
        j.create_task_with_entries(
            run,
            vec![NewEntry::new(EntryKind::Call, json!("i")).with_identity("call:1")],
            new_task(run, "p"),
            vec![NewEntry::new(EntryKind::Event, json!("a"))],
        ),
    );
    assert_eq!(seqs, vec![0, 1]);
    let entries = ok("entries", j.entries(run));
    assert_eq!(entries[0].task, None);
    assert_eq!(entries[1].task, Some(task));
    let res = j.create_task_with_entries(
        run,
        vec![NewEntry::new(EntryKind::Call, json!("i")).with_identity("call:1")],
        new_task(run, "p"),
        vec![],
    );
    assert!(matches!(res, Err(JournalError::DuplicateIdentity { .. })), "{res:?}");
    assert_eq!(ok("tasks", j.tasks(run)).len(), 1, "the refused write made no task");
    assert_eq!(ok("count", j.entry_count(run)), 2);
}

/// A task recorded once it ended is stored final, with its entries, in one write.
pub fn an_ended_task_is_recorded_once_with_its_entries(open: Open<'_>) {
    let j = open.open();
    let run = ok("create", j.create_run(new_run("a", "p")));
    let (rec, seqs) = ok(
        "ended",
        j.record_ended_task(
            run,
            vec![NewEntry::new(EntryKind::Call, json!("i")).with_identity("call:r")],
            new_task(run, "p"),
            vec![NewEntry::new(EntryKind::Step, json!("r"))],
            |id| TaskUpdate {
                status: Some(TaskStatus::Succeeded),
                result: Some(json!({ "task": id.0 })),
                ..TaskUpdate::default()
            },
        ),
    );
    assert_eq!(seqs, vec![0, 1]);
    assert_eq!(rec.status, TaskStatus::Succeeded);
    assert_eq!(rec.result, Some(json!({ "task": rec.id.0 })));
    assert_eq!(ok("read", j.task(rec.id)).expect("exists"), rec);
    assert_eq!(ok("entries", j.entries(run))[1].task, Some(rec.id));
    let reconciled = ok("reconcile", j.reconcile::<&str>(&[]));
    assert_eq!(reconciled.tasks, 0, "an ended task is not live");
}

/// A session is unique, changes by update, and spends its iteration budget durably.
pub fn sessions_keep_their_budget_durably(open: Open<'_>) {
    let j = open.open();
    let rec = ok("create", j.create_session(new_session("s-b", "p", Some(2))));
    assert_eq!((rec.iterations_used, rec.status), (0, SessionStatus::Running));
    ok("second", j.create_session(new_session("s-a", "p", None)));
    let res = j.create_session(new_session("s-b", "p", None));
    assert!(matches!(res, Err(JournalError::SessionExists { .. })), "{res:?}");
    let id = SessionId("s-b".into());
    assert_eq!(ok("claim 1", j.claim_iteration(&id)), Some(1));
    assert_eq!(ok("claim 2", j.claim_iteration(&id)), Some(2));
    assert_eq!(ok("spent", j.claim_iteration(&id)), None);
    assert_eq!(ok("read", j.session(&id)).expect("exists").iterations_used, 2);
    let rec = ok(
        "update",
        j.update_session(
            &id,
            SessionUpdate {
                iteration_budget: Some(Some(5)),
                checkpoint: Some(json!({"turn": 2})),
                ..SessionUpdate::default()
            },
        ),
    );
    assert_eq!((rec.iteration_budget, rec.checkpoint), (Some(5), Some(json!({"turn": 2}))));
    assert_eq!(ok("claim 3", j.claim_iteration(&id)), Some(3));
    ok(
        "end",
        j.update_session(
            &id,
            SessionUpdate { status: Some(SessionStatus::Done), ..SessionUpdate::default() },
        ),
    );
    assert_eq!(ok("ended", j.claim_iteration(&id)), None);
    let ids: Vec<String> = ok("list", j.sessions()).into_iter().map(|s| s.id.0).collect();
    assert_eq!(ids, vec!["s-a".to_owned(), "s-b".to_owned()]);
}

/// A session names the run that drives it, and reads back with it; a session of a run
/// that does not exist is refused and not stored; a session of no run (a standalone team)
/// is written as before, its record without a `run` key, and a record without one reads
/// back as a session of no run.
pub fn sessions_belong_to_their_run(open: Open<'_>) {
    let j = open.open();
    let run = ok("create", j.create_run(new_run("a", "p")));
    let leader = NewSession { run: Some(run), ..new_session("run-a", "p", Some(2)) };
    let rec = ok("leader", j.create_session(leader));
    assert_eq!(rec.run, Some(run));
    let id = rec.id.clone();
    assert_eq!(ok("claim", j.claim_iteration(&id)), Some(1));
    let update = SessionUpdate { status: Some(SessionStatus::Idle), ..SessionUpdate::default() };
    let rec = ok("update", j.update_session(&id, update));
    assert_eq!((rec.run, rec.iterations_used, rec.status), (Some(run), 1, SessionStatus::Idle));
    assert_eq!(ok("read", j.session(&id)).expect("exists").run, Some(run));
    let missing = RunId(run.0 + 1000);
    let res = j.create_session(NewSession { run: Some(missing), ..new_session("s-x", "p", None) });
    assert!(matches!(res, Err(JournalError::RunNotFound { run: r }) if r == missing), "{res:?}");
    assert!(ok("refused", j.session(&SessionId("s-x".into()))).is_none(), "nothing stored");
    let solo = ok("solo", j.create_session(new_session("s-solo", "p", Some(1))));
    assert_eq!(solo.run, None);
    assert_eq!(ok("solo claim", j.claim_iteration(&solo.id)), Some(1));
    assert_eq!(ok("solo spent", j.claim_iteration(&solo.id)), None);
    let text = serde_json::to_value(&solo).expect("a session encodes");
    assert!(text.get("run").is_none(), "a session of no run has no run key: {text}");
    let mut old = serde_json::to_value(&rec).expect("a session encodes");
    old.as_object_mut().expect("an object").remove("run");
    let old: crate::SessionRecord = serde_json::from_value(old).expect("an older record reads");
    assert_eq!(old.run, None);
    // A session outlives its run's pruning, and is still written.
    let done = RunUpdate { status: Some(RunStatus::Succeeded), ..RunUpdate::default() };
    ok("finish", j.update_run(run, done));
    assert_eq!(ok("prune", j.prune(u64::MAX)).runs, 1);
    let rec = ok("after the prune", j.update_session(&id, SessionUpdate::default()));
    assert_eq!(rec.run, Some(run));
    assert_eq!(ok("claim after the prune", j.claim_iteration(&id)), Some(2));
}

/// On a store with leases, the sessions of a run belong to the worker that holds its lease:
/// a worker that claims the run (its last holder's lease lapsed) marks lost those the last
/// holder left working (their turns died with it, as a resume's reconcile finds them on
/// the embedded journal) and owns the others; the last holder's writes of them
/// (creating one, changing one, claiming an iteration) are refused with
/// [`JournalError::Fenced`] naming the run and the session, and leave nothing; the new
/// holder writes them, and a handle holding no lease (an answer, a cancel) is not fenced.
/// A session of no run is not fenced and keeps its owner. A store without leases has no
/// claims: nothing to check.
pub fn sessions_of_a_claimed_run_pass_to_its_new_worker(open: Open<'_>) {
    let first = open.open();
    if !first.is_shared() {
        return;
    }
    let second = open.another(&first);
    let submitter = open.another(&first);
    let run = ok("create", submitter.create_run(new_run("a", "submitter")));
    ok("release", submitter.release_run(run));
    let lease = ok("claim", first.claim_run("w1", Duration::from_millis(300))).expect("runnable");
    assert_eq!(lease.run, run);
    let leader = SessionId(format!("run-{}", run.0));
    let child = SessionId(format!("run-{}.1", run.0));
    let of_run = |id: &SessionId, budget| NewSession {
        id: id.clone(),
        leader: None,
        run: Some(run),
        ..new_session("", "w1", budget)
    };
    ok("leader", first.create_session(of_run(&leader, Some(3))));
    ok("child", first.create_session(of_run(&child, None)));
    ok("solo", first.create_session(new_session("s-solo", "w1", Some(5))));
    assert_eq!(ok("holder claims", first.claim_iteration(&leader)), Some(1));
    let stalled = first;
    stalled.stop_renewing(run);
    std::thread::sleep(Duration::from_millis(600));
    let taken = ok("reclaim", second.claim_run("w2", Duration::from_secs(30))).expect("lapsed");
    assert_eq!(taken.run, run);
    // What the stalled worker left working died with its turn, as on a resume: lost.
    for id in [&leader, &child] {
        let rec = ok("read", second.session(id)).expect("exists");
        assert_eq!(rec.status, SessionStatus::Lost, "session {id} left working by w1");
    }
    let solo = SessionId("s-solo".into());
    assert_eq!(ok("solo", second.session(&solo)).expect("exists").owner, "w1");
    let fenced = |what: &str, res: Result<(), JournalError>, session: &SessionId| {
        let text = res.as_ref().err().map(ToString::to_string).unwrap_or_default();
        match res {
            Err(JournalError::Fenced { run: r, epoch, current, session: Some(s) }) => {
                assert_eq!((r, epoch, current), (run, lease.epoch, taken.epoch), "{what}");
                assert_eq!(&s, session, "{what}");
                assert!(text.contains(&format!("run {run} ")), "{what}: {text}");
                assert!(text.contains(&format!("session {session}")), "{what}: {text}");
            }
            other => panic!("{what}: a stale worker's session write must be fenced, got {other:?}"),
        }
    };
    let late = SessionId(format!("run-{}.2", run.0));
    fenced("create", stalled.create_session(of_run(&late, None)).map(drop), &late);
    assert!(ok("not created", second.session(&late)).is_none(), "the fenced create left nothing");
    let done = SessionUpdate {
        status: Some(SessionStatus::Done),
        checkpoint: Some(json!({"stale": true})),
        ..SessionUpdate::default()
    };
    fenced("update", stalled.update_session(&child, done.clone()).map(drop), &child);
    fenced("claim", stalled.claim_iteration(&leader).map(drop), &leader);
    let rec = ok("leader", second.session(&leader)).expect("exists");
    assert_eq!(rec.iterations_used, 1, "the fenced claim spent nothing");
    let rec = ok("child", second.session(&child)).expect("exists");
    assert_eq!((rec.status, rec.checkpoint), (SessionStatus::Lost, None), "nothing changed");
    // A session of no run is no run's: the stalled worker still writes it.
    assert_eq!(ok("solo claim", stalled.claim_iteration(&solo)), Some(1));
    // The new holder writes the run's sessions: it leads the team again (as a resumed
    // leader is marked running and its own), and spends the budget where it stood.
    ok(
        "new holder creates",
        second.create_session(NewSession { owner: "w2".into(), ..of_run(&late, None) }),
    );
    let lead_again = SessionUpdate {
        status: Some(SessionStatus::Running),
        owner: Some("w2".into()),
        ..SessionUpdate::default()
    };
    ok("new holder leads", second.update_session(&leader, lead_again));
    assert_eq!(ok("new holder claims", second.claim_iteration(&leader)), Some(2));
    assert_eq!(ok("new holder claims", second.claim_iteration(&leader)), Some(3));
    assert_eq!(ok("spent", second.claim_iteration(&leader)), None);
    ok("new holder updates", second.update_session(&child, done));
    // A handle holding no lease of the run (an answer, a cancel) is not fenced.
    let cancel = SessionUpdate { status: Some(SessionStatus::Cancelled), ..Default::default() };
    ok("bystander", submitter.update_session(&late, cancel));
    // A reconcile that knows the live workers spares the sessions of the run it drives.
    ok(
        "running again",
        second.update_session(
            &leader,
            SessionUpdate { status: Some(SessionStatus::Running), ..SessionUpdate::default() },
        ),
    );
    let done = ok("reconcile", second.reconcile(&["w2", "submitter"]));
    assert_eq!(done.sessions, 1, "only the session of no run, whose owner is gone: {done:?}");
    assert_eq!(
        ok("leader", second.session(&leader)).expect("exists").status,
        SessionStatus::Running
    );
    assert_eq!(ok("solo", second.session(&solo)).expect("exists").status, SessionStatus::Lost);
}

/// Reconcile marks what owners not live left running, spares the live, and is idempotent.
pub fn reconcile_marks_only_what_gone_owners_left(open: Open<'_>) {
    let j = open.open();
    let gone = ok("gone run", j.create_run(new_run("a", "gone")));
    let live = ok("live run", j.create_run(new_run("b", "live")));
    let gone_task = ok("gone task", j.create_task(new_task(gone, "gone")));
    let live_task = ok("live task", j.create_task(new_task(live, "live")));
    ok("gone session", j.create_session(new_session("s-gone", "gone", None)));
    ok("live session", j.create_session(new_session("s-live", "live", None)));
    let done = ok("reconcile", j.reconcile(&["live"]));
    assert_eq!((done.runs, done.tasks, done.sessions), (1, 1, 1));
    assert_eq!(ok("gone", j.run(gone)).expect("exists").status, RunStatus::Interrupted);
    assert_eq!(ok("live", j.run(live)).expect("exists").status, RunStatus::Running);
    assert_eq!(ok("gone task", j.task(gone_task)).expect("exists").status, TaskStatus::Interrupted);
    assert_eq!(ok("live task", j.task(live_task)).expect("exists").status, TaskStatus::Running);
    let lost = ok("session", j.session(&SessionId("s-gone".into()))).expect("exists");
    assert_eq!(lost.status, SessionStatus::Lost);
    let again = ok("again", j.reconcile(&["live"]));
    assert_eq!(again.total(), 0, "a second reconcile finds nothing");
}

/// Prune removes finished runs that ended before the cut, with entries and tasks, only.
pub fn prune_removes_only_runs_finished_before_the_cut(open: Open<'_>) {
    let j = open.open();
    let old = ok("old", j.create_run(new_run("a", "p")));
    let running = ok("running", j.create_run(new_run("b", "p")));
    ok("entry", j.append(old, event(0)));
    ok("entry", j.append(old, event(1)));
    let task = ok("task", j.create_task(new_task(old, "p")));
    ok(
        "end task",
        j.update_task(
            task,
            TaskUpdate { status: Some(TaskStatus::Succeeded), ..TaskUpdate::default() },
        ),
    );
    ok(
        "finish",
        j.update_run(old, RunUpdate { status: Some(RunStatus::Failed), ..RunUpdate::default() }),
    );
    let none = ok("early cut", j.prune(0));
    assert_eq!(none.runs, 0);
    std::thread::sleep(Duration::from_millis(5));
    let pruned = ok("prune", j.prune(u64::MAX));
    assert_eq!((pruned.runs, pruned.entries, pruned.tasks), (1, 2, 1));
    assert!(ok("gone", j.run(old)).is_none());
    assert!(ok("task gone", j.task(task)).is_none());
    assert!(ok("running stays", j.run(running)).is_some());
    let after = ok("new run", j.create_run(new_run("c", "p")));
    assert!(after.0 > running.0, "ids are not reused after a prune");
}

/// Export writes the run, then its tasks, then its entries, as JSON lines.
pub fn export_writes_the_run_its_tasks_and_its_entries(open: Open<'_>) {
    let j = open.open();
    let run = ok("create", j.create_run(new_run("a", "p")));
    ok("task", j.create_task(new_task(run, "p")));
    ok("entries", j.append_batch(run, vec![event(0), event(1)]));
    let mut out = Vec::new();
    assert_eq!(ok("export", j.export(run, &mut out)), 4);
    let lines: Vec<ExportLine> = String::from_utf8(out)
        .expect("utf-8")
        .lines()
        .map(|l| serde_json::from_str(l).expect("an export line"))
        .collect();
    assert!(matches!(&lines[0], ExportLine::Run(r) if r.id == run));
    assert!(matches!(&lines[1], ExportLine::Task(_)));
    assert!(matches!(&lines[3], ExportLine::Entry(e) if e.seq == 1));
    let res = j.export(RunId(run.0 + 5), &mut Vec::new());
    assert!(matches!(res, Err(JournalError::RunNotFound { .. })), "{res:?}");
}

/// A reader waiting on `changes` is woken by a commit made after it started watching.
pub fn a_commit_is_noticed_by_changes(open: Open<'_>) {
    let j = open.open();
    let run = ok("create", j.create_run(new_run("a", "p")));
    let mut changes = j.changes();
    let writer = j.clone();
    let handle = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(20));
        writer.append(run, event(0))
    });
    block_on_with_timeout(changes.changed(), Duration::from_secs(10))
        .expect("a commit must be noticed within 10 s");
    ok("append", handle.join().expect("writer thread"));
}

/// Appends from many threads at once get distinct numbers, with no gap.
pub fn concurrent_appends_get_distinct_dense_numbers(open: Open<'_>) {
    let j = open.open();
    let run = ok("create", j.create_run(new_run("a", "p")));
    let threads: Vec<_> = (0..8)
        .map(|t| {
            let j = j.clone();
            std::thread::spawn(move || {
                (0..25)
                    .map(|i| {
                        ok(
                            "append",
                            j.append(run, event(t * 100 + i).with_identity(format!("{t}:{i}"))),
                        )
                    })
                    .collect::<Vec<u64>>()
            })
        })
        .collect();
    let mut seqs: Vec<u64> = threads.into_iter().flat_map(|h| h.join().expect("thread")).collect();
    seqs.sort_unstable();
    assert_eq!(seqs, (0..200).collect::<Vec<_>>());
    assert_eq!(ok("count", j.entry_count(run)), 200);
}

/// The nonblocking writes resolve once written, and what they wrote reads back.
pub fn nonblocking_writes_are_durable_when_ready(open: Open<'_>) {
    let j = open.open();
    let run = ok("create", j.create_run(new_run("a", "p")));
    let pending: Vec<_> = (0..10).map(|n| j.nonblocking().append(run, event(n))).collect();
    let mut seqs: Vec<u64> = pending.into_iter().map(|p| ok("await", p.wait())).collect();
    seqs.sort_unstable();
    assert_eq!(seqs, (0..10).collect::<Vec<_>>());
    let seq =
        block_on_with_timeout(j.nonblocking().append(run, event(10)), Duration::from_secs(10))
            .expect("an awaited write resolves");
    assert_eq!(ok("polled", seq), 10);
    ok(
        "status",
        j.nonblocking()
            .update_run(
                run,
                RunUpdate { status: Some(RunStatus::AwaitingInput), ..RunUpdate::default() },
            )
            .wait(),
    );
    assert_eq!(ok("read", j.run(run)).expect("exists").status, RunStatus::AwaitingInput);
}

/// On a store with leases: a claim takes one runnable run with a new epoch; once the lease
/// lapses another worker claims it with a greater epoch, and the first worker's writes into
/// the run are refused with [`JournalError::Fenced`] and leave nothing. A store without
/// leases refuses claims with [`JournalError::NoLeases`].
pub fn leases_fence_a_worker_whose_run_was_claimed(open: Open<'_>) {
    let first = open.open();
    if !first.is_shared() {
        let res = first.claim_run("w1", Duration::from_secs(1));
        assert!(matches!(res, Err(JournalError::NoLeases { .. })), "{res:?}");
        return;
    }
    let second = open.another(&first);
    let submitter = open.another(&first);
    let run = ok("create", submitter.create_run(new_run("a", "submitter")));
    assert!(submitter.lease(run).is_some(), "the creating handle holds the first lease");
    assert!(
        ok("held", first.claim_run("w1", Duration::from_secs(30))).is_none(),
        "a held run is not runnable"
    );
    ok("release", submitter.release_run(run));
    let lease = ok("claim", first.claim_run("w1", Duration::from_millis(300))).expect("runnable");
    assert_eq!(lease.run, run);
    assert!(ok("taken", second.claim_run("w2", Duration::from_secs(30))).is_none());
    ok("owner writes", first.append(run, event(0)));
    // The first worker stops renewing (a pause): its lease lapses and the second claims.
    let stalled = first;
    stalled.stop_renewing(run);
    std::thread::sleep(Duration::from_millis(600));
    let taken = ok("reclaim", second.claim_run("w2", Duration::from_secs(30))).expect("lapsed");
    assert_eq!(taken.run, run);
    assert!(taken.epoch > lease.epoch, "epochs grow: {} then {}", lease.epoch, taken.epoch);
    let res = stalled.append(run, event(1));
    match res {
        Err(JournalError::Fenced { run: r, epoch, current, session: None }) => {
            assert_eq!((r, epoch, current), (run, lease.epoch, taken.epoch));
        }
        other => panic!("a write after the run was claimed must be fenced, got {other:?}"),
    }
    let res = stalled
        .update_run(run, RunUpdate { status: Some(RunStatus::Failed), ..RunUpdate::default() });
    assert!(matches!(res, Err(JournalError::Fenced { .. })), "{res:?}");
    let res = stalled.create_task(new_task(run, "w1"));
    assert!(matches!(res, Err(JournalError::Fenced { .. })), "{res:?}");
    assert_eq!(ok("count", second.entry_count(run)), 1, "the fenced write left nothing");
    let status = ok("run", second.run(run)).expect("exists").status;
    assert_ne!(status, RunStatus::Failed, "the fenced status change was not stored");
    ok("new owner writes", second.append(run, event(2)));
    // Anyone may still answer into the run: a handle without a lease is not fenced.
    ok("answer", submitter.append(run, NewEntry::new(EntryKind::Answer, json!("yes"))));
    assert!(ok("release", second.release_run(run)));
    let again = ok("claim after release", submitter.claim_run("w3", Duration::from_secs(30)))
        .expect("a released run is runnable");
    assert!(again.epoch > taken.epoch);
}

/// Polls `fut` on this thread until it is ready or `limit` passes.
fn block_on_with_timeout<F: std::future::Future>(fut: F, limit: Duration) -> Option<F::Output> {
    use std::task::{Context, Poll, Wake, Waker};
    struct Thread(std::thread::Thread);
    impl Wake for Thread {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = Waker::from(Arc::new(Thread(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut fut = std::pin::pin!(fut);
    let end = std::time::Instant::now() + limit;
    loop {
        if let Poll::Ready(out) = fut.as_mut().poll(&mut cx) {
            return Some(out);
        }
        let now = std::time::Instant::now();
        if now >= end {
            return None;
        }
        std::thread::park_timeout((end - now).min(Duration::from_millis(50)));
    }
}
