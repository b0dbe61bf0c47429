//! Subagent sessions fenced as runs are: a worker whose run was claimed by another spends
//! none of the run's sessions' budgets, whatever the order of the two workers' claims; one
//! budget claimed from many handles at once is spent once; a session of no run is
//! written as before; a database of the first schema gains the sessions' run column; a
//! reconcile spares the sessions of a run a worker holds.
//! (The contract's own cases, `sessions_belong_to_their_run` and
//! `sessions_of_a_claimed_run_pass_to_its_new_worker`, run in `conformance.rs`.)

use std::collections::BTreeSet;
use std::thread;
use std::time::Duration;

use clio_journal::{
    Journal, JournalError, Lease, NewRun, NewSession, RunId, SessionId, SessionStatus,
    SessionUpdate,
};
use serde_json::json;

use crate::support::{fresh_database, open};

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

fn session(id: &str, run: Option<RunId>, owner: &str, budget: Option<u64>) -> NewSession {
    NewSession {
        id: SessionId(id.into()),
        leader: None,
        parent: None,
        team: None,
        managed: false,
        enabled: None,
        status: SessionStatus::Running,
        iteration_budget: budget,
        router_allowlist: None,
        owner: owner.into(),
        run,
    }
}

/// A run that `stale` claimed (for `w1`), froze past its lease, and `holder` then claimed
/// (for `w2`): the two leases, in that order.
fn taken_over(submitter: &Journal, stale: &Journal, holder: &Journal) -> (RunId, Lease, Lease) {
    let run = submitter.create_run(new_run("submitter")).expect("create");
    submitter.release_run(run).expect("release");
    let first = stale
        .claim_this_run(run, "w1", Duration::from_millis(150))
        .expect("claim")
        .expect("a released run is runnable");
    (run, first, take(stale, holder, run))
}

/// Freezes `stale`'s lease of `run` past its end and has `holder` claim the run.
fn take(stale: &Journal, holder: &Journal, run: RunId) -> Lease {
    stale.stop_renewing(run);
    let end = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(lease) =
            holder.claim_this_run(run, "w2", Duration::from_secs(60)).expect("claim")
        {
            return lease;
        }
        assert!(std::time::Instant::now() < end, "the frozen lease of run {run} never lapses");
        thread::sleep(Duration::from_millis(50));
    }
}

/// The update a worker makes to lead a session again: running, and its own.
fn lead_again() -> SessionUpdate {
    SessionUpdate {
        status: Some(SessionStatus::Running),
        owner: Some("w2".into()),
        ..SessionUpdate::default()
    }
}

fn is_fenced(res: &Result<Option<u64>, JournalError>, run: RunId, id: &SessionId) -> bool {
    matches!(res, Err(JournalError::Fenced { run: r, session: Some(s), .. }) if *r == run && s == id)
}

/// Every order of the two workers' claims: the stale worker claims `k` iterations while it
/// holds the run, then the run is taken over, then the two take turns (the stale one first
/// or the new holder first) until the budget is spent. The stale worker's claims after the
/// takeover are all refused; the budget is spent exactly once, each count given once.
#[test]
fn a_stale_worker_spends_no_iteration_of_a_run_it_lost_whatever_the_interleaving() {
    let url = fresh_database();
    let (submitter, stale, holder) = (open(&url), open(&url), open(&url));
    let mut cases = 0;
    for budget in [1u64, 3] {
        for k in 0..=budget + 1 {
            for stale_first in [true, false] {
                cases += 1;
                let run = submitter.create_run(new_run("submitter")).expect("create");
                submitter.release_run(run).expect("release");
                stale
                    .claim_this_run(run, "w1", Duration::from_millis(150))
                    .expect("claim")
                    .expect("runnable");
                let id = SessionId(format!("run-{}", run.0));
                stale
                    .create_session(session(&id.0, Some(run), "w1", Some(budget)))
                    .expect("create");
                let mut counts = Vec::new();
                for _ in 0..k {
                    if let Some(n) = stale.claim_iteration(&id).expect("the holder claims") {
                        counts.push(n);
                    }
                }
                take(&stale, &holder, run);
                // The claim marked the session the stale worker left running lost; the new
                // holder leads it again, as a resumed leader does.
                let status = holder.session(&id).expect("read").expect("exists").status;
                assert_eq!(status, SessionStatus::Lost);
                holder.update_session(&id, lead_again()).expect("the new holder leads");
                let mut turns = 0;
                loop {
                    turns += 1;
                    assert!(turns < 20, "case budget {budget} k {k}: no end");
                    let stale_turn = (turns % 2 == 1) == stale_first;
                    if stale_turn {
                        let res = stale.claim_iteration(&id);
                        assert!(is_fenced(&res, run, &id), "budget {budget} k {k}: {res:?}");
                        continue;
                    }
                    match holder.claim_iteration(&id).expect("the new holder claims") {
                        Some(n) => counts.push(n),
                        None => break,
                    }
                }
                let expected: Vec<u64> = (1..=budget).collect();
                assert_eq!(counts, expected, "budget {budget}, {k} before the takeover");
                let rec = holder.session(&id).expect("read").expect("exists");
                assert_eq!((rec.iterations_used, rec.owner.as_str()), (budget, "w2"));
            }
        }
    }
    assert_eq!(cases, 16);
}

/// One budget claimed from three handles at once (the run's holder, a handle holding no
/// lease, and the worker whose lease was taken): every count from 1 to the budget is given
/// once, and the stale worker gets none.
#[test]
fn concurrent_claims_of_one_budget_never_spend_an_iteration_twice() {
    let url = fresh_database();
    let (submitter, stale, holder) = (open(&url), open(&url), open(&url));
    let (run, _, _) = taken_over(&submitter, &stale, &holder);
    let id = SessionId(format!("run-{}", run.0));
    let budget = 40;
    holder.create_session(session(&id.0, Some(run), "w2", Some(budget))).expect("create");
    let claims: Vec<_> =
        [("holder", holder.clone()), ("bystander", submitter.clone()), ("stale", stale)]
            .into_iter()
            .flat_map(|(who, j)| (0..2).map(move |_| (who, j.clone())))
            .map(|(who, j)| {
                let id = id.clone();
                thread::spawn(move || {
                    let mut got = Vec::new();
                    loop {
                        match j.claim_iteration(&id) {
                            Ok(Some(n)) => got.push(n),
                            Ok(None) => return (who, got, None),
                            Err(err) => return (who, got, Some(err)),
                        }
                    }
                })
            })
            .collect();
    let mut all = Vec::new();
    for handle in claims {
        let (who, got, err) = handle.join().expect("a claiming thread");
        if who == "stale" {
            assert!(got.is_empty(), "the stale worker spent {got:?}");
            assert!(
                matches!(err, Some(JournalError::Fenced { session: Some(ref s), .. }) if *s == id),
                "{err:?}"
            );
        } else {
            assert!(err.is_none(), "{who}: {err:?}");
        }
        all.extend(got);
    }
    let n = all.len();
    let distinct: BTreeSet<u64> = all.into_iter().collect();
    assert_eq!(n as u64, budget, "every iteration spent once");
    assert_eq!(distinct, (1..=budget).collect::<BTreeSet<_>>());
    assert_eq!(holder.session(&id).expect("read").expect("exists").iterations_used, budget);
}

/// A session of no run (a team that no run drives) is written by any handle, as before,
/// and claims of runs leave it and its owner alone.
#[test]
fn a_session_of_no_run_is_not_fenced_and_keeps_its_owner() {
    let url = fresh_database();
    let (submitter, stale, holder) = (open(&url), open(&url), open(&url));
    let solo = SessionId("solo".into());
    stale.create_session(session("solo", None, "w1", Some(3))).expect("create");
    let (run, _, _) = taken_over(&submitter, &stale, &holder);
    assert_eq!(stale.claim_iteration(&solo).expect("not fenced"), Some(1));
    assert_eq!(holder.claim_iteration(&solo).expect("not fenced"), Some(2));
    let rec = stale
        .update_session(
            &solo,
            SessionUpdate { checkpoint: Some(json!({"turn": 1})), ..SessionUpdate::default() },
        )
        .expect("not fenced");
    assert_eq!((rec.owner.as_str(), rec.run, rec.iterations_used), ("w1", None, 2));
    // The stale worker's writes into the run itself are fenced all the same.
    let res = stale.create_session(session("late", Some(run), "w1", None));
    assert!(
        matches!(&res, Err(JournalError::Fenced { session: Some(s), .. }) if s.0 == "late"),
        "{res:?}"
    );
}

/// A database of the first schema, with a session stored then, is brought to this one: the
/// session reads back as a session of no run, and is written as before.
#[test]
fn a_database_of_the_first_schema_keeps_its_sessions() {
    let url = fresh_database();
    drop(open(&url));
    let mut client = postgres::Client::connect(&url, postgres::NoTls).expect("connect");
    client
        .batch_execute(
            "DROP INDEX clio_sessions_by_run; ALTER TABLE clio_sessions DROP COLUMN run; \
             UPDATE clio_meta SET value = 1 WHERE key = 'schema_version'",
        )
        .expect("back to the first schema");
    let old = json!({
        "id": "old", "leader": null, "parent": null, "team": null, "managed": false,
        "enabled": null, "status": "running", "iteration_budget": 2, "iterations_used": 1,
        "router_allowlist": null, "checkpoint": null, "owner": "p",
        "created_at_ms": 1, "updated_at_ms": 1
    });
    client
        .execute(
            "INSERT INTO clio_sessions (id, live, record) VALUES ('old', true, $1)",
            &[&old.to_string()],
        )
        .expect("an old session");
    let journal = open(&url);
    let id = SessionId("old".into());
    let rec = journal.session(&id).expect("read").expect("exists");
    assert_eq!((rec.run, rec.iterations_used), (None, 1));
    assert_eq!(journal.claim_iteration(&id).expect("claim"), Some(2));
    assert_eq!(journal.claim_iteration(&id).expect("spent"), None);
    let version: i64 = client
        .query_one("SELECT value FROM clio_meta WHERE key = 'schema_version'", &[])
        .expect("version")
        .get(0);
    assert_eq!(version as u64, clio_postgres::SCHEMA_VERSION);
}

/// A reconcile on a fleet spares the sessions of a run whose lease a worker holds, whatever
/// their owner's name (the lease, renewed, says the worker is alive), and marks lost those
/// of a run nobody holds and those of no run whose owner is gone.
#[test]
fn a_reconcile_spares_the_sessions_of_a_run_a_worker_holds() {
    let url = fresh_database();
    let (submitter, worker, reconciler) = (open(&url), open(&url), open(&url));
    let run = submitter.create_run(new_run("submitter")).expect("create");
    submitter.release_run(run).expect("release");
    worker.claim_this_run(run, "w", Duration::from_secs(30)).expect("claim").expect("runnable");
    let held = SessionId(format!("run-{}", run.0));
    worker.create_session(session(&held.0, Some(run), "w", None)).expect("of the run");
    worker.create_session(session("solo", None, "w", None)).expect("of no run");
    let done = reconciler.reconcile(&["someone-else"]).expect("reconcile");
    assert_eq!(done.sessions, 1, "only the session of no run: {done:?}");
    let status = |id: &SessionId| reconciler.session(id).expect("read").expect("exists").status;
    assert_eq!(status(&held), SessionStatus::Running, "its run's lease is held");
    assert_eq!(status(&SessionId("solo".into())), SessionStatus::Lost);
    // Given up, the lease no longer speaks for the session: its owner's name does.
    worker.release_run(run).expect("release");
    let done = reconciler.reconcile(&["w"]).expect("reconcile");
    assert_eq!((done.sessions, status(&held)), (0, SessionStatus::Running), "w is live");
    let done = reconciler.reconcile(&["someone-else"]).expect("reconcile");
    assert_eq!((done.sessions, status(&held)), (1, SessionStatus::Lost));
}
