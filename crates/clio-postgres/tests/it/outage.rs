//! A server that goes away and comes back (issue 44): each test starts a cluster of its
//! own (`test_server::Cluster`), stops it with `pg_ctl stop -m immediate` (every
//! connection cut, as in a crash) and starts it again on the same port and data folder.
//! A handle waits for the server for its reconnect window, keeps the leases no one claimed
//! meanwhile, and gives up with an error `clio_postgres::is_unavailable` recognises.

use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::Duration;

use clio_journal::{EntryKind, JournalError, NewEntry, NewRun, RunFilter, RunStatus, RunUpdate};
use clio_postgres::PostgresConfig;
use clio_postgres::test_server::Cluster;
use serde_json::json;

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

fn open(url: &str, lease: Duration, reconnect: Duration) -> clio_journal::Journal {
    let config = PostgresConfig { connections: 2, lease, reconnect, ..PostgresConfig::new(url) };
    clio_postgres::open(&config).unwrap_or_else(|err| panic!("cannot open {url}: {err}"))
}

/// Restarts `cluster` after `down`, on a thread of its own.
fn start_again_after(cluster: &Cluster, down: Duration) -> impl FnOnce() + '_ {
    move || {
        thread::sleep(down);
        cluster.start_again();
    }
}

#[test]
fn reads_and_writes_during_a_restart_wait_for_the_server_and_then_succeed() {
    let cluster = Cluster::start("outage-rw");
    let url = cluster.database("clio_rw");
    let journal = open(&url, Duration::from_secs(10), Duration::from_secs(60));
    let run = journal.create_run(new_run("me")).expect("create");
    journal.append(run, NewEntry::new(EntryKind::Event, json!({"n": 0}))).expect("append");
    cluster.stop_immediate();
    thread::scope(|scope| {
        scope.spawn(start_again_after(&cluster, Duration::from_secs(3)));
        // Issued while the server is down: each waits for it, then goes through.
        let runs = journal.runs(&RunFilter::default()).expect("a read waits for the server");
        assert_eq!(runs.len(), 1);
        let seq = journal
            .append(run, NewEntry::new(EntryKind::Event, json!({"n": 1})))
            .expect("a write waits for the server");
        assert_eq!(seq, 1);
    });
    // The lease, held across the outage by no one else, is still this handle's: its
    // writes are not fenced, and the run ends as usual.
    assert!(journal.lease(run).is_some(), "the lease no one claimed is kept");
    let done = journal
        .update_run(run, RunUpdate { status: Some(RunStatus::Succeeded), ..RunUpdate::default() })
        .expect("finish");
    assert_eq!(done.status, RunStatus::Succeeded);
    assert_eq!(journal.entry_count(run).expect("count"), 2);
}

#[test]
fn a_lease_that_lapsed_during_an_outage_but_was_claimed_by_no_one_is_kept() {
    let cluster = Cluster::start("outage-lease");
    let url = cluster.database("clio_lease");
    let submitter = open(&url, Duration::from_secs(10), Duration::from_secs(60));
    let worker = open(&url, Duration::from_millis(500), Duration::from_secs(60));
    let run = submitter.create_run(new_run("s")).expect("create");
    submitter.release_run(run).expect("release");
    let lease = worker.claim_run("w", Duration::from_millis(500)).expect("claim").expect("a run");
    cluster.stop_immediate();
    // Down for eight lease periods: the lease's time runs out, but no one can claim.
    thread::sleep(Duration::from_secs(4));
    cluster.start_again();
    let appended = worker.append(run, NewEntry::new(EntryKind::Event, json!({"after": true})));
    assert!(appended.is_ok(), "the worker still owns the run: {appended:?}");
    // The renewer found the epoch still the run's and renewed it: another worker finds
    // nothing to claim.
    thread::sleep(Duration::from_millis(600));
    let other = open(&url, Duration::from_secs(10), Duration::from_secs(60));
    assert!(
        other.claim_run("w2", Duration::from_secs(10)).expect("claim").is_none(),
        "a renewed lease is not taken"
    );
    assert_eq!(worker.lease(run).map(|l| l.epoch), Some(lease.epoch));
}

#[test]
fn a_lease_another_worker_claimed_after_an_outage_is_lost_and_its_writes_fenced() {
    let cluster = Cluster::start("outage-fence");
    let url = cluster.database("clio_fence");
    let submitter = open(&url, Duration::from_secs(10), Duration::from_secs(60));
    let stalled = open(&url, Duration::from_millis(500), Duration::from_secs(60));
    let run = submitter.create_run(new_run("s")).expect("create");
    submitter.release_run(run).expect("release");
    stalled.claim_run("w1", Duration::from_millis(500)).expect("claim").expect("a run");
    // The holder stops renewing (as a worker whose renewer cannot reach the server), the
    // server goes away and comes back; another worker claims the lapsed run first.
    stalled.stop_renewing(run);
    cluster.stop_immediate();
    thread::sleep(Duration::from_secs(2));
    cluster.start_again();
    let other = open(&url, Duration::from_secs(10), Duration::from_secs(60));
    // A lease that ran out while the server was down is left to its holder for a lease
    // period after the server's start (the claimer's: a minute here, which has not
    // passed), then taken (half a second).
    let held = other.claim_run("w2", Duration::from_secs(60)).expect("claim");
    assert!(held.is_none(), "a lease that ran out in the outage is its holder's for a while");
    let end = std::time::Instant::now() + Duration::from_secs(20);
    let taken = loop {
        if let Some(taken) = other.claim_run("w2", Duration::from_millis(500)).expect("claim") {
            break taken;
        }
        assert!(std::time::Instant::now() < end, "the lapsed lease is never taken");
        thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(taken.run, run);
    let refused = stalled.append(run, NewEntry::new(EntryKind::Event, json!({"late": true})));
    assert!(matches!(refused, Err(JournalError::Fenced { .. })), "{refused:?}");
}

#[test]
fn a_server_down_past_the_window_is_an_error_that_says_so() {
    let cluster = Cluster::start("outage-long");
    let url = cluster.database("clio_long");
    let journal = open(&url, Duration::from_secs(10), Duration::from_secs(1));
    journal.create_run(new_run("me")).expect("create");
    cluster.stop_immediate();
    let err = journal.runs(&RunFilter::default()).expect_err("the server stays down");
    assert!(clio_postgres::is_unavailable(&err), "{err:?}");
    let text = err.to_string();
    assert!(text.contains("127.0.0.1"), "the error names the server: {text}");
    // A handle opened while it is down gives up the same way.
    let config =
        PostgresConfig { reconnect: Duration::from_millis(300), ..PostgresConfig::new(&url) };
    let err = clio_postgres::open(&config).expect_err("down");
    assert!(clio_postgres::is_unavailable(&err), "{err:?}");
    // Back up, the same handle works again.
    cluster.start_again();
    assert_eq!(journal.runs(&RunFilter::default()).expect("read").len(), 1);
}

#[test]
fn an_error_of_the_statement_itself_is_not_unavailability() {
    let err = JournalError::Backend {
        location: "postgres://db/clio".into(),
        detail: "SELECT...: syntax error (42601)".into(),
    };
    assert!(!clio_postgres::is_unavailable(&err));
    assert!(!clio_postgres::is_unavailable(&JournalError::RunNotFound {
        run: clio_journal::RunId(1)
    }));
}

#[test]
fn writes_whose_connections_are_cut_mid_transaction_are_run_again_and_stored_once() {
    // The connections of one database are cut over and over (as a failover cuts them)
    // while a handle appends: a write cut before its commit is run again on a new
    // connection, and one whose commit lost its answer is looked up by its transaction's
    // id, so every append goes through, once.
    let url = clio_postgres::test_server::fresh_database();
    let journal = open(&url, Duration::from_secs(60), Duration::from_secs(30));
    let run = journal.create_run(new_run("me")).expect("create");
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
        for i in 0..150 {
            let entry =
                NewEntry::new(EntryKind::Event, json!({ "i": i })).with_identity(format!("e{i}"));
            if let Err(err) = journal.append(run, entry) {
                stop.store(true, Ordering::SeqCst);
                panic!("append {i} failed: {err}");
            }
        }
        stop.store(true, Ordering::SeqCst);
        cutter.join().expect("the cutter")
    });
    assert!(cuts > 10, "the test cut only {cuts} connections");
    let stored = journal.entries(run).expect("entries");
    let identities: Vec<String> = stored.iter().filter_map(|e| e.identity.clone()).collect();
    let expected: Vec<String> = (0..150).map(|i| format!("e{i}")).collect();
    assert_eq!(identities, expected, "each append is stored once, in order");
}
