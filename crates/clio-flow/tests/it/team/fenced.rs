//! A team's sessions belong to the run that leads it: a leader made for a run
//! ([`Team::begin_leading_in`]) and every subagent it starts name that run, while a team
//! of no run names none. On a shared (PostgreSQL) journal a worker whose run was claimed
//! by another can no longer start subagents of it, spend their iterations or change them,
//! and the worker that claimed the run goes on with the same team.

use std::time::Duration;

use clio_flow::{RunOptions, TaskSpec, Team, TeamConfig, TeamError, run_leader};
use clio_journal::{Journal, JournalError, NewRun, RunId, SessionStatus};
use clio_postgres::PostgresConfig;

use super::{TestResult, sid, statuses, team_with};

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

fn shared(url: &str) -> Journal {
    let config = PostgresConfig { connections: 2, ..PostgresConfig::new(url) };
    clio_postgres::open(&config).unwrap_or_else(|err| panic!("cannot open {url}: {err}"))
}

fn worker_team(journal: Journal, owner: &str) -> Team {
    team_with(journal, TeamConfig { owner: owner.into(), ..TeamConfig::default() }).0
}

fn fenced_session(err: &TeamError, run: RunId) -> Option<String> {
    let TeamError::Journal(cause) = err else { return None };
    match cause.as_ref() {
        JournalError::Fenced { run: r, session: Some(s), .. } if *r == run => Some(s.0.clone()),
        _ => None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_teams_sessions_belong_to_the_run_that_leads_it() -> TestResult {
    let journal = Journal::open_in_memory()?;
    let run = journal.create_run(new_run("p"))?;
    let (team, _seen) = team_with(journal.clone(), TeamConfig::default());
    let leader = run_leader(run);
    let rec = team.begin_leading_in(&leader, Some(run)).await?;
    assert_eq!(rec.run, Some(run));
    let recs = team
        .env(leader.clone())
        .run(vec![TaskSpec::from("spawn answer deep")], RunOptions::default())
        .await?;
    assert_eq!(statuses(&recs), ["done"]);
    team.end_leading(&leader).await?;
    let members: Vec<_> = journal.sessions()?.into_iter().filter(|s| s.id != leader).collect();
    assert_eq!(members.len(), 2, "a child and its own child: {members:?}");
    for member in &members {
        assert_eq!(member.run, Some(run), "session {} belongs to the run", member.id);
    }
    // A team of no run: its sessions name none, as before.
    team.begin_leading(&sid("solo")).await?;
    let recs = team
        .env(sid("solo"))
        .run(vec![TaskSpec::from("answer alone")], RunOptions::default())
        .await?;
    assert_eq!(statuses(&recs), ["done"]);
    team.end_leading(&sid("solo")).await?;
    let solo: Vec<_> =
        journal.sessions()?.into_iter().filter(|s| s.id.0.starts_with("solo")).collect();
    assert_eq!(solo.len(), 2);
    assert!(solo.iter().all(|s| s.run.is_none()), "{solo:?}");
    Ok(())
}

#[test]
fn a_worker_whose_run_was_claimed_cannot_drive_its_team_and_the_new_holder_can() -> TestResult {
    // The journals connect before the runtime starts: their client blocks as it connects.
    let url = clio_postgres::test_server::fresh_database();
    let (submitter, stale, holder) = (shared(&url), shared(&url), shared(&url));
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    rt.block_on(stale_and_new_holder(submitter, stale, holder))
}

async fn stale_and_new_holder(submitter: Journal, stale: Journal, holder: Journal) -> TestResult {
    let run = submitter.create_run(new_run("submitter"))?;
    submitter.release_run(run)?;
    stale.claim_this_run(run, "w1", Duration::from_millis(200))?.expect("runnable");
    let leader = run_leader(run);
    let old = worker_team(stale.clone(), "w1");
    old.begin_leading_in(&leader, Some(run)).await?;
    let budget = TaskSpec { iteration_budget: Some(3), ..TaskSpec::from("question more?") };
    let recs = old.env(leader.clone()).run(vec![budget], RunOptions::default()).await?;
    assert_eq!(statuses(&recs), ["idle"]);
    let child = recs[0].session_id.clone();
    let child_env = old.env(child.clone());
    assert!(child_env.claim_iteration().await?, "the holder spends the child's budget");
    // The worker freezes past its lease; another claims the run.
    stale.stop_renewing(run);
    let taken = loop {
        if let Some(lease) = holder.claim_this_run(run, "w2", Duration::from_secs(60))? {
            break lease;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(taken.run, run);
    // The leader was working when its worker froze: lost with its turn. The child waits
    // for a reply (idle): it passes to w2.
    assert_eq!(holder.session(&leader)?.expect("exists").status, SessionStatus::Lost);
    assert_eq!(holder.session(&child)?.expect("exists").owner, "w2", "{child} passed to w2");
    // The stale worker's team: no iteration, no new subagent, no change.
    let err = child_env.claim_iteration().await.expect_err("fenced");
    assert_eq!(fenced_session(&err, run).as_deref(), Some(child.0.as_str()), "{err:?}");
    let err = old
        .env(leader.clone())
        .run(vec![TaskSpec::from("answer late")], RunOptions::default())
        .await
        .expect_err("fenced");
    assert!(fenced_session(&err, run).is_some(), "{err:?}");
    let err = old.set_enabled(&child, Some(false)).await.expect_err("fenced");
    assert_eq!(fenced_session(&err, run).as_deref(), Some(child.0.as_str()), "{err:?}");
    let rec = holder.session(&child)?.expect("exists");
    assert_eq!((rec.iterations_used, rec.enabled), (1, None), "the fenced writes left nothing");
    // The worker that claimed the run goes on with the same team.
    let new = worker_team(holder.clone(), "w2");
    new.begin_leading_in(&leader, Some(run)).await?;
    let new_child = new.env(child.clone());
    assert!(new_child.claim_iteration().await?);
    assert!(new_child.claim_iteration().await?);
    assert!(!new_child.claim_iteration().await?, "the budget of 3 is spent, once");
    let recs = new
        .env(leader.clone())
        .run(vec![TaskSpec::from("answer on w2")], RunOptions::default())
        .await?;
    assert_eq!(statuses(&recs), ["done"]);
    let rec = holder.session(&recs[0].session_id)?.expect("exists");
    assert_eq!((rec.run, rec.owner.as_str()), (Some(run), "w2"));
    new.end_leading(&leader).await?;
    Ok(())
}
