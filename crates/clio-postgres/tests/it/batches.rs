//! The writes into one run that wait together for a connection are written as one batch:
//! checked write by write as each would be alone (one refused, by a taken identity or a
//! missing parent, leaves the others), and sent to the server in a few round trips
//! whatever the batch's size.
//!
//! A batch is made deterministic by holding the run's row locked from another connection:
//! the first write waits on the lock on the handle's only connection, and every write
//! sent meanwhile queues behind it, to be taken up as one batch.

use std::thread;
use std::time::{Duration, Instant};

use clio_journal::{
    EntryKind, Journal, JournalError, NewEntry, NewRun, NewTask, RunId, RunUpdate, TaskId,
    TaskKind, TaskStatus, TaskUpdate,
};
use clio_postgres::{PostgresConfig, Traffic};
use serde_json::json;

use crate::support::fresh_database;

fn new_run(owner: &str) -> NewRun {
    NewRun {
        flow: "f".into(),
        input: json!({"task": "t"}),
        input_digest: "d".into(),
        fingerprint: "x".into(),
        owner: owner.into(),
        launch: None,
    }
}

fn new_task(run: RunId, parent: Option<TaskId>, call: &str) -> NewTask {
    NewTask {
        run,
        parent,
        kind: TaskKind::Tool,
        target: "noop".into(),
        label: "noop".into(),
        status: TaskStatus::Running,
        model: None,
        owner: "me".into(),
        call: Some(call.into()),
    }
}

fn event(n: u64) -> NewEntry {
    NewEntry::new(EntryKind::Event, json!({ "n": n }))
}

fn succeeded(_: TaskId) -> TaskUpdate {
    TaskUpdate { status: Some(TaskStatus::Succeeded), ..TaskUpdate::default() }
}

/// A handle with one connection, writes grouped or not, and its traffic.
fn open_one(url: &str, group_writes: bool) -> (Journal, Traffic) {
    let config = PostgresConfig { connections: 1, group_writes, ..PostgresConfig::new(url) };
    clio_postgres::open_counted(&config).expect("the journal opens")
}

/// Holds run `run`'s row locked from a connection of its own until dropped.
struct RowLock {
    client: postgres::Client,
}

impl RowLock {
    fn take(url: &str, run: RunId) -> RowLock {
        let mut client = postgres::Client::connect(url, postgres::NoTls).expect("a connection");
        client.batch_execute("BEGIN").expect("begin");
        client
            .execute("SELECT 1 FROM clio_runs WHERE id = $1 FOR UPDATE", &[&(run.0 as i64)])
            .expect("lock the run's row");
        RowLock { client }
    }

    /// Waits until another connection waits on a lock (the handle's first write).
    fn wait_for_a_waiter(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let row = self
                .client
                .query_one(
                    "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() \
                     AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()",
                    &[],
                )
                .expect("pg_stat_activity");
            if row.get::<_, i64>(0) > 0 {
                return;
            }
            assert!(Instant::now() < deadline, "the first write never waited on the lock");
            thread::sleep(Duration::from_millis(10));
        }
    }

    fn release(mut self) {
        self.client.batch_execute("COMMIT").expect("commit");
    }
}

#[test]
fn each_write_of_a_batch_is_checked_as_alone_and_one_refused_leaves_the_others() {
    // The same answers and the same journal whether the writes are grouped or each is
    // written on its own in a savepoint.
    checked_as_alone(true);
    checked_as_alone(false);
}

fn checked_as_alone(group: bool) {
    let url = fresh_database();
    let (j, _) = open_one(&url, group);
    let run = j.create_run(new_run("me")).expect("create");
    let other_run = j.create_run(new_run("me")).expect("create another");
    let parent = j.create_task(new_task(run, None, "parent")).expect("a parent task");
    assert_eq!(j.append(run, event(0).with_identity("old")).expect("append"), 0);

    let mut lock = RowLock::take(&url, run);
    let first = j.nonblocking().append(run, event(1));
    lock.wait_for_a_waiter();
    let nb = || j.nonblocking();
    let a = nb().append(run, event(2).with_identity("x"));
    let taken_before = nb().append(run, event(3).with_identity("old"));
    let taken_in_batch = nb().append(run, event(4).with_identity("x"));
    let call = nb().record_ended_task(
        run,
        vec![event(5).with_identity("call-1")],
        new_task(run, Some(parent), "call-1"),
        vec![event(6)],
        succeeded,
    );
    let no_parent = nb().create_task_with_entries(
        run,
        vec![event(7)],
        new_task(run, Some(TaskId(999_999)), "orphan"),
        Vec::new(),
    );
    let twice =
        nb().append_batch(run, vec![event(8).with_identity("t"), event(9).with_identity("t")]);
    let wrong_run = nb().create_task_with_entries(
        run,
        vec![event(10)],
        new_task(other_run, None, "w"),
        Vec::new(),
    );
    let plain = nb().append(run, event(11));
    let started = nb().create_task_with_entries(
        run,
        vec![event(12).with_identity("call-2")],
        new_task(run, None, "call-2"),
        vec![event(13)],
    );
    // A write that is not entries (a run's update) between two groups of them.
    let update =
        nb().update_run(run, RunUpdate { owner: Some("me-too".into()), ..RunUpdate::default() });
    let after_update = nb().append(run, event(14).with_identity("y"));
    // Taken by a write of the group before the update.
    let taken_across = nb().append(run, event(15).with_identity("call-2"));
    lock.release();

    assert_eq!(first.wait().expect("first"), 1);
    assert_eq!(a.wait().expect("a"), 2);
    match taken_before.wait() {
        Err(JournalError::DuplicateIdentity { identity, seq: 0, .. }) => {
            assert_eq!(identity, "old")
        }
        other => panic!("an identity already stored is refused, got {other:?}"),
    }
    match taken_in_batch.wait() {
        Err(JournalError::DuplicateIdentity { identity, seq: 2, .. }) => assert_eq!(identity, "x"),
        other => panic!("an identity an earlier write of the batch took is refused, got {other:?}"),
    }
    let (rec, seqs) = call.wait().expect("the ended call");
    assert_eq!(seqs, vec![3, 4]);
    assert_eq!(rec.status, TaskStatus::Succeeded);
    assert_eq!(rec.parent, Some(parent));
    match no_parent.wait() {
        Err(JournalError::TaskNotFound { task: TaskId(999_999) }) => {}
        other => panic!("a missing parent is refused, got {other:?}"),
    }
    match twice.wait() {
        Err(JournalError::DuplicateIdentity { identity, .. }) => assert_eq!(identity, "t"),
        other => panic!("an identity named twice in a write is refused, got {other:?}"),
    }
    match wrong_run.wait() {
        Err(JournalError::RunNotFound { run: r }) => assert_eq!(r, other_run),
        other => panic!("a task of another run is refused, got {other:?}"),
    }
    assert_eq!(plain.wait().expect("plain"), 5);
    let (started_id, seqs) = started.wait().expect("started");
    assert_eq!(seqs, vec![6, 7]);
    update.wait().expect("the run's update");
    assert_eq!(after_update.wait().expect("after the update"), 8);
    match taken_across.wait() {
        Err(JournalError::DuplicateIdentity { identity, seq: 6, .. }) => {
            assert_eq!(identity, "call-2");
        }
        other => panic!("an identity taken before the update is refused, got {other:?}"),
    }

    // What was stored is exactly what was answered: dense numbers, tasks named.
    let entries = j.entries(run).expect("entries");
    let ns: Vec<u64> = entries.iter().map(|e| e.payload["n"].as_u64().unwrap_or(99)).collect();
    assert_eq!(ns, vec![0, 1, 2, 5, 6, 11, 12, 13, 14]);
    let seqs: Vec<u64> = entries.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, (0..9).collect::<Vec<_>>());
    assert_eq!(entries[4].task, Some(rec.id), "the ended call's entry after names it");
    assert_eq!(entries[7].task, Some(started_id), "the started call's entry after names it");
    assert_eq!(j.entry_count(run).expect("count"), 9);
    let tasks = j.tasks(run).expect("tasks");
    let ids: Vec<TaskId> = tasks.iter().map(|t| t.id).collect();
    assert_eq!(ids, vec![parent, rec.id, started_id], "only the accepted tasks are stored");
    assert_eq!(tasks[2].status, TaskStatus::Running);
    assert_eq!(j.run(run).expect("run").expect("the run").owner, "me-too");
    assert!(j.tasks(other_run).expect("tasks").is_empty());
}

#[test]
fn a_batch_of_a_thousand_writes_takes_a_few_round_trips_and_one_commit() {
    let grouped = thousand_in_a_batch(true);
    // Each batch: BEGIN with the run's row locked, one check, one write, COMMIT.
    assert!(grouped <= 8, "two batches took {grouped} round trips");
    // Written one by one, each write is a savepoint and several statements.
    let one_by_one = thousand_in_a_batch(false);
    assert!(one_by_one >= 5_000, "written one by one, two batches took {one_by_one}");
}

/// Writes 1,000 calls in one batch behind a first write; returns the round trips taken.
fn thousand_in_a_batch(group: bool) -> u64 {
    let url = fresh_database();
    let (j, traffic) = open_one(&url, group);
    let run = j.create_run(new_run("me")).expect("create");
    // Every statement prepared once before counting.
    j.record_ended_task(
        run,
        vec![event(0).with_identity("warm")],
        new_task(run, None, "warm"),
        Vec::new(),
        succeeded,
    )
    .expect("warm-up");
    let mut lock = RowLock::take(&url, run);
    let (trips, commits) = (traffic.round_trips(), traffic.commits());
    let first = j.nonblocking().append(run, event(1));
    lock.wait_for_a_waiter();
    let pending: Vec<_> = (0..1_000)
        .map(|i| {
            let call = format!("call-{i}");
            j.nonblocking().record_ended_task(
                run,
                vec![event(i).with_identity(call.clone())],
                new_task(run, None, &call),
                Vec::new(),
                succeeded,
            )
        })
        .collect();
    lock.release();
    first.wait().expect("the first write");
    let answers: Vec<_> = pending.into_iter().map(|p| p.wait().expect("a call")).collect();
    let trips = traffic.round_trips() - trips;
    let commits = traffic.commits() - commits;
    assert_eq!(commits, 2, "the first write, then the thousand waiting behind it");
    let seqs: Vec<u64> = answers.iter().flat_map(|(_, s)| s.clone()).collect();
    assert_eq!(seqs, (2..1_002).collect::<Vec<_>>());
    let mut ids: Vec<TaskId> = answers.iter().map(|(rec, _)| rec.id).collect();
    ids.dedup();
    assert_eq!(ids.len(), 1_000, "every task has an id of its own");
    assert_eq!(j.tasks(run).expect("tasks").len(), 1_001);
    assert_eq!(j.entry_count(run).expect("count"), 1_002);
    trips
}

#[test]
fn a_value_the_server_refuses_fails_its_write_alone() {
    // PostgreSQL's text cannot hold a NUL: the group's statement is refused, and the batch
    // runs again with each write on its own, so only the write at fault fails.
    let url = fresh_database();
    let (j, _) = open_one(&url, true);
    let run = j.create_run(new_run("me")).expect("create");
    let mut lock = RowLock::take(&url, run);
    let first = j.nonblocking().append(run, event(0));
    lock.wait_for_a_waiter();
    let before = j.nonblocking().append(run, event(1).with_identity("a"));
    let bad = j.nonblocking().append(run, event(2).with_identity("nul\u{0}"));
    let after = j.nonblocking().append(run, event(3).with_identity("b"));
    lock.release();
    assert_eq!(first.wait().expect("first"), 0);
    assert_eq!(before.wait().expect("before"), 1);
    match bad.wait() {
        Err(JournalError::Backend { .. }) => {}
        other => panic!("a NUL in an identity is the server's refusal, got {other:?}"),
    }
    assert_eq!(after.wait().expect("after"), 2);
    let ns: Vec<u64> = j
        .entries(run)
        .expect("entries")
        .iter()
        .map(|e| e.payload["n"].as_u64().unwrap_or(99))
        .collect();
    assert_eq!(ns, vec![0, 1, 3]);
}

#[test]
fn a_batch_into_a_run_claimed_by_another_worker_is_fenced_whole() {
    fenced_whole(true);
    fenced_whole(false);
}

fn fenced_whole(group: bool) {
    let url = fresh_database();
    let (j, _) = open_one(&url, group);
    let run = j.create_run(new_run("me")).expect("create");
    j.append(run, event(0)).expect("append");
    // Another worker takes the run over (as a claim after a lapsed lease does).
    let mut admin = postgres::Client::connect(&url, postgres::NoTls).expect("a connection");
    admin
        .execute(
            "UPDATE clio_leases SET epoch = epoch + 1, worker = 'thief' WHERE run = $1",
            &[&(run.0 as i64)],
        )
        .expect("take the lease");
    let mut lock = RowLock::take(&url, run);
    let first = j.nonblocking().append(run, event(1));
    lock.wait_for_a_waiter();
    let writes: Vec<_> = (2..6)
        .map(|i| {
            j.nonblocking().record_ended_task(
                run,
                vec![event(i)],
                new_task(run, None, &format!("c{i}")),
                Vec::new(),
                succeeded,
            )
        })
        .collect();
    lock.release();
    assert!(matches!(first.wait(), Err(JournalError::Fenced { .. })), "the first write is fenced");
    for w in writes {
        match w.wait() {
            Err(JournalError::Fenced { epoch: 1, current: 2, .. }) => {}
            other => panic!("every write of the batch is fenced, got {other:?}"),
        }
    }
    assert_eq!(j.entry_count(run).expect("count"), 1, "nothing of the fenced writes is stored");
    assert!(j.tasks(run).expect("tasks").is_empty());
}

#[test]
fn batches_whose_connections_are_cut_are_run_again_and_stored_once() {
    // As `outage::writes_whose_connections_are_cut_mid_transaction_are_run_again_and_stored_once`,
    // with writes sent many at a time, so that they are written in batches: a batch cut
    // before its commit runs again whole, and one whose commit lost its answer is looked
    // up, so every write is stored once, its task once.
    use std::sync::atomic::{AtomicBool, Ordering};
    let url = fresh_database();
    let config = PostgresConfig {
        connections: 2,
        reconnect: Duration::from_secs(30),
        ..PostgresConfig::new(url.as_str())
    };
    let (j, traffic) = clio_postgres::open_counted(&config).expect("the journal opens");
    let run = j.create_run(new_run("me")).expect("create");
    let stop = AtomicBool::new(false);
    let cuts = thread::scope(|scope| {
        let cutter = scope.spawn(|| {
            let mut admin =
                postgres::Client::connect(&url, postgres::NoTls).expect("an admin connection");
            let mut cuts = 0i64;
            while !stop.load(Ordering::SeqCst) {
                let row = admin
                    .query_one(
                        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity \
                         WHERE datname = current_database() AND pid <> pg_backend_pid() \
                         AND backend_type = 'client backend'",
                        &[],
                    )
                    .expect("terminate");
                cuts += row.get::<_, i64>(0);
                thread::sleep(Duration::from_millis(40));
            }
            cuts
        });
        for wave in 0..40u64 {
            let pending: Vec<_> = (0..25u64)
                .map(|k| {
                    let call = format!("call-{wave}-{k}");
                    j.nonblocking().record_ended_task(
                        run,
                        vec![event(wave * 25 + k).with_identity(call.clone())],
                        new_task(run, None, &call),
                        Vec::new(),
                        succeeded,
                    )
                })
                .collect();
            for (k, p) in pending.into_iter().enumerate() {
                if let Err(err) = p.wait() {
                    stop.store(true, Ordering::SeqCst);
                    panic!("write {wave}-{k} failed: {err}");
                }
            }
        }
        stop.store(true, Ordering::SeqCst);
        cutter.join().expect("the cutter")
    });
    assert!(cuts > 10, "the test cut only {cuts} connections");
    let entries = j.entries(run).expect("entries");
    let mut ns: Vec<u64> =
        entries.iter().map(|e| e.payload["n"].as_u64().unwrap_or(9_999)).collect();
    ns.sort_unstable();
    assert_eq!(ns, (0..1_000).collect::<Vec<_>>(), "each write is stored once");
    assert_eq!(entries.iter().map(|e| e.seq).collect::<Vec<_>>(), (0..1_000).collect::<Vec<_>>());
    assert_eq!(j.tasks(run).expect("tasks").len(), 1_000, "each task is stored once");
    assert!(traffic.commits() < 1_000, "the writes went in batches: {} commits", traffic.commits());
}

#[test]
fn updates_of_the_tasks_a_handle_made_join_their_runs_batch() {
    // A side-effecting gather's calls end together: their tasks' updates are written in
    // the run's batch, one commit for them all, each checked alone (a finished task's
    // update refused, the others stored). A task another handle made is updated in a
    // transaction of its own.
    let url = fresh_database();
    let (j, traffic) = open_one(&url, true);
    let run = j.create_run(new_run("me")).expect("create");
    let made: Vec<TaskId> = (0..50)
        .map(|i| {
            let call = format!("call-{i}");
            j.create_task_with_entries(
                run,
                vec![event(i).with_identity(call.clone())],
                new_task(run, None, &call),
                Vec::new(),
            )
            .expect("a started call")
            .0
        })
        .collect();
    j.update_task(made[7], succeeded(made[7])).expect("one ends early");
    let other = crate::support::open(&url);
    let theirs = other.create_task(new_task(run, None, "theirs")).expect("another's task");
    drop(other);

    let mut lock = RowLock::take(&url, run);
    let commits = traffic.commits();
    let first = j.nonblocking().append(run, event(100));
    lock.wait_for_a_waiter();
    // An update of a task the batch updates again later: each sees the ones before it.
    let trips = traffic.round_trips();
    let modelled = j
        .nonblocking()
        .update_task(made[0], TaskUpdate { model: Some("m".into()), ..TaskUpdate::default() });
    let updates: Vec<_> =
        made.iter().map(|id| j.nonblocking().update_task(*id, succeeded(*id))).collect();
    let again = j.nonblocking().update_task(made[0], succeeded(made[0]));
    let their_update = j.nonblocking().update_task(theirs, succeeded(theirs));
    lock.release();
    assert_eq!(modelled.wait().expect("the model's update").model.as_deref(), Some("m"));
    match again.wait() {
        Err(JournalError::TaskFinished { task, .. }) => assert_eq!(task, made[0]),
        other => panic!("an update after the batch's own end of the task, got {other:?}"),
    }
    first.wait().expect("the first write");
    for (i, update) in updates.into_iter().enumerate() {
        match update.wait() {
            Ok(rec) => assert_eq!(rec.status, TaskStatus::Succeeded),
            Err(JournalError::TaskFinished { task, .. }) if i == 7 => assert_eq!(task, made[7]),
            other => panic!("update {i}: {other:?}"),
        }
    }
    assert_eq!(their_update.wait().expect("their task's update").status, TaskStatus::Succeeded);
    assert_eq!(
        traffic.commits() - commits,
        3,
        "the first write, the run's batch of 52 updates, the other handle's task alone"
    );
    // The first write and the batch, 4 round trips each, and the other's task on its own
    // (its statements prepared on first use): 52 updates each on their own would take
    // more than 250.
    let trips = traffic.round_trips() - trips;
    assert!(trips <= 30, "the updates took {trips} round trips");
    let tasks = j.tasks(run).expect("tasks");
    assert!(tasks.iter().all(|t| t.status == TaskStatus::Succeeded), "{tasks:?}");
    let first_task = tasks.iter().find(|t| t.id == made[0]).expect("the first task");
    assert_eq!(first_task.model.as_deref(), Some("m"), "both updates of a batch stand");
}
