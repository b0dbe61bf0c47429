//! Leases over a worker's life: a run it finished no longer counts as its own, runs that
//! come in later are claimed, and a run it holds is not claimed twice.

use std::time::Duration;

use clio_journal::{NewRun, RunStatus, RunUpdate};

use crate::support::{fresh_database, open};

fn new_run(owner: &str) -> NewRun {
    NewRun {
        flow: "f".into(),
        input: serde_json::json!({"task": "t"}),
        input_digest: "d".into(),
        fingerprint: "x".into(),
        owner: owner.into(),
        launch: None,
    }
}

#[test]
fn a_worker_claims_the_runs_that_come_in_after_it_finished_one() {
    let url = fresh_database();
    let worker = open(&url);
    let submitter = open(&url);
    let lease = Duration::from_secs(5);
    assert!(worker.claim_run("w", lease).expect("claim").is_none(), "nothing is runnable yet");
    let first = submitter.create_run(new_run("s")).expect("create");
    submitter.release_run(first).expect("release");
    let got = worker.claim_run("w", lease).expect("claim").expect("the first run");
    assert_eq!(got.run, first);
    assert!(
        worker.claim_run("w", lease).expect("claim").is_none(),
        "a held run is not claimed twice"
    );
    worker
        .update_run(first, RunUpdate { status: Some(RunStatus::Succeeded), ..RunUpdate::default() })
        .expect("finish");
    assert!(worker.lease(first).is_none(), "a finished run's lease is given up");
    // A worker looks often while nothing is runnable (its statements' plans go generic).
    for _ in 0..20 {
        assert!(worker.claim_run("w", lease).expect("claim").is_none());
    }
    let second = submitter.create_run(new_run("s")).expect("create");
    submitter.release_run(second).expect("release");
    let got = worker.claim_run("w", lease).expect("claim").expect("the second run");
    assert_eq!(got.run, second);
}

#[test]
fn a_worker_holding_a_run_claims_another() {
    let url = fresh_database();
    let worker = open(&url);
    let submitter = open(&url);
    let lease = Duration::from_secs(5);
    let first = submitter.create_run(new_run("s")).expect("create");
    submitter.release_run(first).expect("release");
    assert_eq!(worker.claim_run("w", lease).expect("claim").expect("first").run, first);
    for _ in 0..20 {
        assert!(worker.claim_run("w", lease).expect("claim").is_none());
    }
    let second = submitter.create_run(new_run("s")).expect("create");
    submitter.release_run(second).expect("release");
    let got = worker.claim_run("w", lease).expect("claim").expect("the second run");
    assert_eq!(got.run, second);
}
