//! Subagent teams (SPEC §8): one named test per rule of the seed's `council` namespace —
//! ownership and control, enabled inheritance, durable budgets across a journal reopen,
//! orphan reconciliation, cancellation of subtrees with queued work, `ask` timeouts,
//! queueing past 16 tasks, timeouts then `wait_agents`, lost children, wake rules, the
//! router allowlist on fallbacks — and the same functions as tools; a team's sessions
//! belong to its run, and on a shared journal are fenced by the run's lease (`fenced`).
//!
//! Time is tokio's paused clock: a subagent that "works for 300 s" costs nothing.

mod crash;
mod fenced;
mod props;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use clio_flow::{
    AgentContext, AgentEnv, AskOptions, LeaderSettings, Message, ReplyOutcome, RouteIssuer,
    RunOptions, SessionAllowlist, StopReason, SubagentJob, SubagentOutcome, TaskSpec, Team,
    TeamConfig, TeamError, ToolCall, WaitOptions,
};
use clio_journal::{Journal, JournalConfig, NewSession, SessionId, SessionStatus};
use serde_json::{Value, json};

type TestResult = Result<(), Box<dyn std::error::Error>>;

fn sid(s: &str) -> SessionId {
    SessionId(s.to_owned())
}

/// Each started task with the messages its job was given.
type Chats = Arc<Mutex<Vec<(String, Vec<Message>)>>>;

/// What the scripted runner saw: tasks started, peak concurrency, jobs' messages.
#[derive(Clone, Default)]
struct Seen {
    started: Arc<Mutex<Vec<String>>>,
    running: Arc<AtomicUsize>,
    peak: Arc<AtomicUsize>,
    messages: Chats,
}

impl Seen {
    fn started(&self) -> Vec<String> {
        self.started.lock().map(|v| v.clone()).unwrap_or_default()
    }
}

/// A runner scripted by the task's text: `answer X`, `sleep N X`, `hang`, `stop`, `empty`,
/// `crash`, `fail X`, `ask Q`, `question Q`, `claim N`, `spawn T`.
async fn script(job: SubagentJob, seen: Seen) -> SubagentOutcome {
    if let Ok(mut s) = seen.started.lock() {
        s.push(job.task.clone());
    }
    if let Ok(mut m) = seen.messages.lock() {
        m.push((job.task.clone(), job.messages.clone()));
    }
    let now = seen.running.fetch_add(1, Ordering::SeqCst) + 1;
    seen.peak.fetch_max(now, Ordering::SeqCst);
    let out = act(&job).await;
    seen.running.fetch_sub(1, Ordering::SeqCst);
    out
}

async fn act(job: &SubagentJob) -> SubagentOutcome {
    if let Some(reply) = &job.reply {
        let claimed = job.env.claim_iteration().await.unwrap_or(false);
        return SubagentOutcome::Answer(format!("after reply: {reply} (claimed {claimed})"));
    }
    let (verb, rest) = job.task.split_once(' ').unwrap_or((job.task.as_str(), ""));
    match verb {
        "answer" => SubagentOutcome::Answer(rest.to_owned()),
        "sleep" => {
            let (secs, text) = rest.split_once(' ').unwrap_or((rest, "slept"));
            tokio::time::sleep(Duration::from_secs(secs.parse().unwrap_or(1))).await;
            SubagentOutcome::Answer(text.to_owned())
        }
        "hang" => std::future::pending().await,
        "stop" => SubagentOutcome::Stopped,
        "empty" => SubagentOutcome::Answer(String::new()),
        "crash" => std::panic::panic_any("the runner crashed"),
        "fail" => SubagentOutcome::Failed(rest.to_owned()),
        "question" => SubagentOutcome::Question(rest.to_owned()),
        "ask" => match job.env.ask(rest, AskOptions::default()).await {
            Ok(Some(reply)) => SubagentOutcome::Answer(format!("told: {reply}")),
            Ok(None) => SubagentOutcome::Answer("no reply: chose the safest option".into()),
            Err(err) => SubagentOutcome::Failed(err.to_string()),
        },
        "claim" => {
            let n: u64 = rest.parse().unwrap_or(1);
            let mut got = 0;
            for _ in 0..n {
                if job.env.claim_iteration().await.unwrap_or(false) {
                    got += 1;
                }
            }
            SubagentOutcome::Answer(format!("claimed {got}"))
        }
        "spawn" => match job.env.run(vec![TaskSpec::from(rest)], RunOptions::default()).await {
            Ok(recs) => SubagentOutcome::Answer(format!("child {}", recs[0].status)),
            Err(err) => SubagentOutcome::Failed(err.to_string()),
        },
        _ => SubagentOutcome::Failed(format!("unknown script {verb:?}")),
    }
}

fn team_with(journal: Journal, config: TeamConfig) -> (Team, Seen) {
    let seen = Seen::default();
    let s = seen.clone();
    let team = Team::new(journal, move |job| script(job, s.clone()), config);
    (team, seen)
}

async fn setup(
    settings: LeaderSettings,
) -> Result<(Team, Seen, AgentEnv), Box<dyn std::error::Error>> {
    let (team, seen) = team_with(Journal::open_in_memory()?, TeamConfig::default());
    team.create_leader(sid("lead"), settings).await?;
    let env = team.env(sid("lead")).with_context(AgentContext {
        model: "local/qwen".into(),
        provider: "ollama".into(),
        messages: vec![
            Message::system("you lead"),
            Message::user("the big job"),
            Message::assistant("splitting it"),
        ],
    });
    Ok((team, seen, env))
}

fn tasks(items: &[&str]) -> Vec<TaskSpec> {
    items.iter().map(|t| TaskSpec::from(*t)).collect()
}

fn statuses(recs: &[clio_flow::AgentRecord]) -> Vec<&str> {
    recs.iter().map(|r| r.status.as_str()).collect()
}

fn session(id: &str, parent: Option<&str>, leader: Option<&str>, managed: bool) -> NewSession {
    NewSession {
        id: sid(id),
        leader: leader.map(sid),
        parent: parent.map(sid),
        team: None,
        managed,
        enabled: None,
        status: SessionStatus::Running,
        iteration_budget: None,
        router_allowlist: None,
        owner: "dead-process".into(),
        run: None,
    }
}

#[tokio::test(start_paused = true)]
async fn run_waits_for_every_child_and_records_answers() -> TestResult {
    let (team, _seen, env) = setup(LeaderSettings::default()).await?;
    let recs = env.run(tasks(&["answer one", "sleep 30 two"]), RunOptions::default()).await?;
    assert_eq!(statuses(&recs), ["done", "done"]);
    assert_eq!(recs[0].answer.as_deref(), Some("one"));
    assert_eq!(recs[1].answer.as_deref(), Some("two"));
    assert_eq!(recs[0].session_id, sid("lead.1"));
    let child = team.session(&sid("lead.1")).await?;
    assert_eq!(
        (child.parent, child.leader, child.managed),
        (Some(sid("lead")), Some(sid("lead")), true)
    );
    // Children of one run share a task team.
    assert_eq!(child.team, team.session(&sid("lead.2")).await?.team);
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn more_than_16_tasks_start_as_earlier_ones_finish() -> TestResult {
    let (_team, seen, env) = setup(LeaderSettings::default()).await?;
    let many: Vec<TaskSpec> = (0..20).map(|i| TaskSpec::from(format!("sleep 10 t{i}"))).collect();
    let recs = env.run(many, RunOptions::default()).await?;
    assert!(recs.iter().all(|r| r.status == "done"), "{recs:?}");
    assert_eq!(seen.peak.load(Ordering::SeqCst), 16);
    assert_eq!(seen.started().len(), 20);
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn a_timeout_leaves_running_status_then_wait_agents_collects_it() -> TestResult {
    let (_team, _seen, env) = setup(LeaderSettings::default()).await?;
    let start = tokio::time::Instant::now();
    let recs = env.run(tasks(&["sleep 300 late", "answer early"]), RunOptions::default()).await?;
    assert_eq!(statuses(&recs), ["running", "done"]);
    assert_eq!(start.elapsed(), Duration::from_secs(240), "the default timeout is 240 s");
    let again = env.wait_agents(None, WaitOptions::default()).await?;
    assert_eq!(statuses(&again), ["done", "done"]);
    assert_eq!(again[0].answer.as_deref(), Some("late"));
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn timeouts_are_cut_to_1800_seconds() -> TestResult {
    let (_team, _seen, env) = setup(LeaderSettings::default()).await?;
    let start = tokio::time::Instant::now();
    let opts = RunOptions { timeout_secs: Some(5000), ..RunOptions::default() };
    let recs = env.run(tasks(&["hang"]), opts).await?;
    assert_eq!(statuses(&recs), ["running"]);
    assert_eq!(start.elapsed(), Duration::from_secs(1800));
    Ok(())
}

// On real time: it waits on no timer, and on paused time a run's timeout could fire while
// the runtime idles on the journal's writer thread (seen once under load).
#[tokio::test]
async fn lost_means_the_child_stopped_without_an_answer() -> TestResult {
    let (_team, _seen, env) = setup(LeaderSettings::default()).await?;
    let recs =
        env.run(tasks(&["stop", "empty", "crash", "fail no disk"]), RunOptions::default()).await?;
    assert_eq!(statuses(&recs), ["lost", "lost", "lost", "failed"]);
    assert!(recs.iter().all(|r| r.answer.is_none()));
    assert_eq!(recs[3].error.as_deref(), Some("no disk"));
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn a_child_on_another_model_gets_only_the_system_prompt_and_its_task() -> TestResult {
    let (_team, seen, env) = setup(LeaderSettings::default()).await?;
    let specs = vec![
        TaskSpec::from("answer same"),
        TaskSpec { model: Some("work/big".into()), ..TaskSpec::from("answer other") },
        TaskSpec {
            model: Some("work/big".into()),
            context: Some("full".into()),
            ..TaskSpec::from("answer other full")
        },
    ];
    env.run(specs, RunOptions::default()).await?;
    let seen = seen.messages.lock().map(|m| m.clone()).unwrap_or_default();
    let of = |task: &str| seen.iter().find(|(t, _)| t == task).map(|(_, m)| m.len());
    assert_eq!(of("answer same"), Some(4), "parent's three messages and the task");
    assert_eq!(of("answer other"), Some(2), "the system prompt and the task");
    assert_eq!(of("answer other full"), Some(4));
    let bad = TaskSpec { context: Some("half".into()), ..TaskSpec::from("answer x") };
    let err = env.run(vec![bad], RunOptions::default()).await.err();
    assert!(matches!(err, Some(TeamError::InvalidTask { index: 0, .. })), "{err:?}");
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn controls_leaders_own_descendants_subagents_themselves_and_direct_children() -> TestResult {
    let (team, _seen, env) = setup(LeaderSettings::default()).await?;
    let recs = env.run(tasks(&["spawn answer deep", "answer b"]), RunOptions::default()).await?;
    assert_eq!(statuses(&recs), ["done", "done"]);
    let (lead, a, a1, b) = (sid("lead"), sid("lead.1"), sid("lead.1.1"), sid("lead.2"));
    let cases = [
        (&lead, &a, true),
        (&lead, &a1, true),
        (&lead, &lead, false),
        (&a, &a, true),
        (&a, &a1, true),
        (&a1, &a1, true),
        (&a, &b, false),
        (&a, &lead, false),
        (&a1, &a, false),
        (&b, &a1, false),
    ];
    for (actor, target, expected) in cases {
        assert_eq!(team.controls(actor, target).await?, expected, "{actor} controls {target}");
    }
    let err = team.env(b.clone()).cancel_agent(&a1).await.err();
    assert!(matches!(err, Some(TeamError::NotControlled { .. })), "{err:?}");
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn cancel_agent_cancels_the_subtree_including_queued_work() -> TestResult {
    let journal = Journal::open_in_memory()?;
    let config = TeamConfig { max_parallel: 1, ..TeamConfig::default() };
    let (team, seen) = team_with(journal, config);
    team.create_leader(sid("lead"), LeaderSettings::default()).await?;
    let env = team.env(sid("lead"));
    let opts = RunOptions { timeout_secs: Some(10), ..RunOptions::default() };
    let recs = env.run(tasks(&["spawn hang", "hang", "answer queued"]), opts).await?;
    assert_eq!(statuses(&recs), ["running", "queued", "queued"]);
    // The first child's own child is running under it.
    assert_eq!(team.session(&sid("lead.1.1")).await?.status, SessionStatus::Running);

    let rec = env.cancel_agent(&sid("lead.1")).await?;
    assert_eq!(rec.status, "cancelled");
    assert_eq!(team.session(&sid("lead.1.1")).await?.status, SessionStatus::Cancelled);
    // The slot it held goes to the next queued task.
    let rec = env.cancel_agent(&sid("lead.3")).await?;
    assert_eq!(rec.status, "cancelled");
    let after = env.wait_agents(None, WaitOptions { timeout_secs: Some(5) }).await?;
    assert_eq!(statuses(&after), ["cancelled", "running", "cancelled"]);
    assert_eq!(seen.started(), ["spawn hang", "hang", "hang"], "the queued task never started");
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert_eq!(team.session(&sid("lead.3")).await?.status, SessionStatus::Cancelled);
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn ask_returns_none_after_the_timeout_and_the_child_picks_the_safest_option() -> TestResult {
    let (_team, _seen, env) = setup(LeaderSettings::default()).await?;
    let start = tokio::time::Instant::now();
    let recs = env
        .run(
            tasks(&["ask delete the cache?"]),
            RunOptions { timeout_secs: Some(1800), ..RunOptions::default() },
        )
        .await?;
    // The wait ends early on a new question so the parent can reply.
    assert_eq!(statuses(&recs), ["running"]);
    assert_eq!(recs[0].question.as_deref(), Some("delete the cache?"));
    assert_eq!(start.elapsed(), Duration::ZERO);
    let recs = env.wait_agents(None, WaitOptions { timeout_secs: Some(1800) }).await?;
    assert_eq!(statuses(&recs), ["done"]);
    assert_eq!(recs[0].answer.as_deref(), Some("no reply: chose the safest option"));
    assert_eq!(start.elapsed(), Duration::from_secs(600), "ask waits 600 s by default");
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn ask_returns_none_at_once_when_the_parent_is_not_running() -> TestResult {
    let (team, _seen, env) = setup(LeaderSettings::default()).await?;
    let recs = env.run(tasks(&["claim 0"]), RunOptions::default()).await?;
    team.set_status(&sid("lead"), SessionStatus::Idle).await?;
    let child = team.env(recs[0].session_id.clone());
    let start = tokio::time::Instant::now();
    assert_eq!(child.ask("may I?", AskOptions::default()).await?, None);
    assert_eq!(start.elapsed(), Duration::ZERO);
    // A parent whose turn ends while the child waits will not reply either.
    team.set_status(&sid("lead"), SessionStatus::Running).await?;
    let waiting = tokio::spawn(async move { child.ask("and now?", AskOptions::default()).await });
    tokio::time::sleep(Duration::from_secs(30)).await;
    team.set_status(&sid("lead"), SessionStatus::Idle).await?;
    assert_eq!(waiting.await??, None);
    assert_eq!(start.elapsed(), Duration::from_secs(30));
    let err = env.ask("anyone?", AskOptions::default()).await.err();
    assert!(matches!(err, Some(TeamError::NoParent { .. })), "{err:?}");
    Ok(())
}

// Real time: nothing here waits for a timer, and on paused time a wait's timeout could
// fire while the runtime idles on the journal's writer thread.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parent_reply_reaches_ask_or_wakes_an_idle_child() -> TestResult {
    let (_team, _seen, env) = setup(LeaderSettings::default()).await?;
    let recs = env
        .run(tasks(&["ask which branch?", "question need a key"]), RunOptions::default())
        .await?;
    assert_eq!(recs[0].question.as_deref(), Some("which branch?"));
    assert_eq!(env.reply(&sid("lead.1"), "main").await?, ReplyOutcome::Delivered);
    let recs = env.wait_agents(None, WaitOptions::default()).await?;
    assert_eq!(statuses(&recs), ["done", "idle"]);
    assert_eq!(recs[0].answer.as_deref(), Some("told: main"));
    assert_eq!(recs[1].question.as_deref(), Some("need a key"));
    assert_eq!(env.reply(&sid("lead.2"), "use k1").await?, ReplyOutcome::Woken);
    let recs = env.wait_agents(Some(vec![sid("lead.2")]), WaitOptions::default()).await?;
    assert_eq!(recs[0].answer.as_deref(), Some("after reply: use k1 (claimed true)"));
    let err = env.reply(&sid("lead.1.1"), "again").await.err();
    assert!(matches!(err, Some(TeamError::SessionNotFound { .. })), "{err:?}");
    env.run(tasks(&["hang"]), RunOptions { timeout_secs: Some(1), ..RunOptions::default() })
        .await?;
    let err = env.reply(&sid("lead.3"), "busy?").await.err();
    assert!(matches!(err, Some(TeamError::NotWaiting { .. })), "{err:?}");
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn enabled_managed_children_read_their_leaders_setting() -> TestResult {
    let (team, _seen, env) = setup(LeaderSettings::default()).await?;
    env.run(tasks(&["answer a"]), RunOptions::default()).await?;
    let (lead, child) = (sid("lead"), sid("lead.1"));
    // No session setting: the configuration (on by default) decides.
    assert!(team.enabled(&lead).await? && team.enabled(&child).await?);
    // The child started without its source's settings and reads its leader's.
    assert_eq!(team.session(&child).await?.enabled, None);
    team.set_enabled(&lead, Some(false)).await?;
    assert!(!team.enabled(&child).await?);
    team.set_enabled(&child, Some(true)).await?;
    assert!(!team.enabled(&child).await?, "a managed child's own setting does not count");

    let journal = team.journal().clone();
    let config = TeamConfig {
        enabled: clio_flow::EnabledConfig { configured: false, invocation: None },
        ..TeamConfig::default()
    };
    let (off, _) = team_with(journal.clone(), config);
    team.set_enabled(&lead, None).await?;
    assert!(!off.enabled(&child).await?, "without a session setting the configuration decides");
    let config = TeamConfig {
        enabled: clio_flow::EnabledConfig { configured: false, invocation: Some(true) },
        ..TeamConfig::default()
    };
    let (invoked, _) = team_with(journal, config);
    team.set_enabled(&lead, Some(false)).await?;
    assert!(invoked.enabled(&lead).await?, "an invocation value lets the configuration decide");
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn require_enabled_refuses_before_bootstrapping_a_session_or_consuming_a_checkpoint()
-> TestResult {
    let (team, seen, env) =
        setup(LeaderSettings { enabled: Some(false), ..LeaderSettings::default() }).await?;
    let err = env.run(tasks(&["answer a"]), RunOptions::default()).await.err();
    assert!(matches!(err, Some(TeamError::NotEnabled { .. })), "{err:?}");
    assert_eq!(team.tree().await?.sessions().count(), 1, "no session was created");
    assert!(seen.started().is_empty());

    team.set_enabled(&sid("lead"), None).await?;
    env.run(tasks(&["question which?"]), RunOptions::default()).await?;
    team.set_enabled(&sid("lead"), Some(false)).await?;
    let err = env.reply(&sid("lead.1"), "this one").await.err();
    assert!(matches!(err, Some(TeamError::NotEnabled { .. })), "{err:?}");
    assert_eq!(team.session(&sid("lead.1")).await?.status, SessionStatus::Idle, "nothing consumed");
    Ok(())
}

#[tokio::test]
async fn a_child_budget_is_durable_across_turns_and_a_journal_reopen() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("journal.redb");
    {
        let (team, _seen) =
            team_with(Journal::open(&path, JournalConfig::default())?, TeamConfig::default());
        team.create_leader(sid("lead"), LeaderSettings::default()).await?;
        let env = team.env(sid("lead"));
        let spec = TaskSpec { iteration_budget: Some(3), ..TaskSpec::from("claim 2") };
        let recs = env.run(vec![spec], RunOptions::default()).await?;
        assert_eq!(recs[0].answer.as_deref(), Some("claimed 2"));
    }
    let (team, _seen) =
        team_with(Journal::open(&path, JournalConfig::default())?, TeamConfig::default());
    assert_eq!(team.session(&sid("lead.1")).await?.iterations_used, 2);
    let env = team.env(sid("lead"));
    // A reply starts a new turn, which claims the third and last iteration.
    assert_eq!(env.reply(&sid("lead.1"), "more").await?, ReplyOutcome::Woken);
    let recs = env.wait_agents(None, WaitOptions::default()).await?;
    assert_eq!(recs[0].answer.as_deref(), Some("after reply: more (claimed true)"));
    let child = team.env(sid("lead.1"));
    assert!(!child.claim_iteration().await?, "a reopened journal keeps the count");
    assert_eq!(
        child.stop_reason().await?,
        Some(StopReason::BudgetExhausted { used: 3, budget: 3 })
    );
    let err = env.reply(&sid("lead.1"), "even more").await.err();
    assert!(matches!(err, Some(TeamError::WakeRefused { .. })), "an exhausted subagent stays idle");
    let rec = team.session(&sid("lead.1")).await?;
    assert_eq!((rec.iterations_used, rec.iteration_budget), (3, Some(3)));
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn stop_reason_names_cancellation() -> TestResult {
    let (_team, _seen, env) = setup(LeaderSettings::default()).await?;
    env.run(tasks(&["hang"]), RunOptions { timeout_secs: Some(1), ..RunOptions::default() })
        .await?;
    env.cancel_agent(&sid("lead.1")).await?;
    let child = env.team().env(sid("lead.1"));
    assert!(!child.claim_iteration().await?);
    assert_eq!(child.stop_reason().await?, Some(StopReason::Cancelled));
    Ok(())
}

#[tokio::test]
async fn reconcile_orphans_fails_dead_children_and_spares_live_owners() -> TestResult {
    let journal = Journal::open_in_memory()?;
    for new in [
        session("a", None, None, false),
        session("a.1", Some("a"), Some("a"), true),
        session("a.1.1", Some("a.1"), Some("a"), true),
        session("b", None, None, false),
        session("b.1", Some("b"), Some("b"), true),
        NewSession { status: SessionStatus::Queued, ..session("b.2", Some("b"), Some("b"), true) },
        NewSession { status: SessionStatus::Done, ..session("b.3", Some("b"), Some("b"), true) },
        session("c", None, None, false),
        session("c.1", Some("c"), Some("c"), true),
    ] {
        journal.create_session(new)?;
    }
    let (team, _seen) = team_with(journal, TeamConfig::default());
    assert_eq!(team.reconcile_orphans(&["a", "c.1"]).await?, 2);
    let status = |id: &str| {
        let team = team.clone();
        let id = sid(id);
        async move { team.session(&id).await.map(|r| r.status) }
    };
    assert_eq!(status("a.1").await?, SessionStatus::Running, "its leader is live");
    assert_eq!(status("a.1.1").await?, SessionStatus::Running);
    assert_eq!(status("c.1").await?, SessionStatus::Running, "it is live itself");
    assert_eq!(status("b.1").await?, SessionStatus::Lost);
    assert_eq!(status("b.2").await?, SessionStatus::Lost, "queued work too");
    assert_eq!(status("b.3").await?, SessionStatus::Done);
    assert_eq!(status("b").await?, SessionStatus::Running, "leaders are not children");
    assert_eq!(team.reconcile_orphans::<&str>(&[]).await?, 3, "then the rest");
    assert_eq!(team.reconcile_orphans::<&str>(&[]).await?, 0, "each child once");
    let lost =
        team.env(sid("b")).wait_agents(Some(vec![sid("b.1")]), WaitOptions::default()).await?;
    assert_eq!(statuses(&lost), ["lost"]);
    Ok(())
}

#[tokio::test]
async fn wake_allowed_follows_the_team_rule_and_explicit_pings() -> TestResult {
    let journal = Journal::open_in_memory()?;
    let with_team = |new: NewSession, team: &str| NewSession { team: Some(team.into()), ..new };
    for new in [
        session("i1", None, None, false),
        session("i2", None, None, false),
        session("l", None, None, false),
        with_team(session("l.1", Some("l"), Some("l"), true), "t"),
        with_team(session("l.2", Some("l"), Some("l"), true), "t"),
        with_team(session("l.3", Some("l"), Some("l"), true), "u"),
        NewSession {
            status: SessionStatus::Cancelled,
            ..with_team(session("l.4", Some("l"), Some("l"), true), "t")
        },
        NewSession {
            iteration_budget: Some(0),
            ..with_team(session("l.5", Some("l"), Some("l"), true), "t")
        },
        with_team(session("l.1.1", Some("l.1"), Some("l"), true), "v"),
    ] {
        journal.create_session(new)?;
    }
    let (team, _seen) = team_with(journal, TeamConfig::default());
    let cases = [
        ("i1", "i2", true, "an explicit ping resumes an independent peer"),
        ("i1", "i1", false, "an independent session stays idle"),
        ("l", "l", false, "a leader does not wake itself"),
        ("l.1", "l.1", true, "a managed subagent wakes itself"),
        ("l.1", "l", true, "a child may return to its leader"),
        ("l.1.1", "l", true, "a grandchild returns to its leader"),
        ("l.1.1", "l.1", true, "a child returns to its parent"),
        ("l.1", "l.2", true, "siblings sharing a task team"),
        ("l.1", "l.3", false, "siblings of different task teams"),
        ("i1", "l.1", false, "a ping does not reach a managed session"),
        ("i1", "l", true, "a leader is an independent peer"),
        ("l.1", "i1", false, "a managed session's ping is not an independent ping"),
        ("l", "l.1", true, "the leader resumes its subagent"),
        ("l", "l.4", false, "a cancelled subagent stays idle"),
        ("l.4", "l.4", false, "even for itself"),
        ("l", "l.5", false, "an exhausted subagent stays idle"),
        ("l.5", "l.5", false, "an exhausted subagent does not wake itself"),
        ("l.2", "l.1.1", false, "a sibling's child is not in the task team"),
    ];
    for (author, recipient, expected, why) in cases {
        assert_eq!(
            team.wake_allowed(&sid(author), &sid(recipient)).await?,
            expected,
            "{author} → {recipient}: {why}"
        );
    }
    Ok(())
}

#[tokio::test]
async fn checkpoint_keeps_the_input_before_an_in_flight_tool_call() -> TestResult {
    let (team, _seen, env) = setup(LeaderSettings::default()).await?;
    let call = |id: &str| ToolCall { id: id.into(), name: "grep".into(), arguments: json!({}) };
    let asked =
        Message::Assistant { content: String::new(), tool_calls: vec![call("c1"), call("c2")] };
    let base = vec![Message::system("s"), Message::user("task")];
    let mut chat = base.clone();
    chat.push(asked.clone());
    chat.push(Message::tool_result("c1", "found"));
    // c2 is still running: the last complete input is the chat before the call.
    assert_eq!(env.checkpoint(&chat).await?, base);
    assert_eq!(env.last_checkpoint().await?, Some(base.clone()));
    chat.push(Message::tool_result("c2", "found too"));
    assert_eq!(env.checkpoint(&chat).await?, chat, "every call answered: all of it");
    let stored = team.session(&sid("lead")).await?.checkpoint.unwrap_or(Value::Null);
    assert_eq!(stored["messages"].as_array().map(Vec::len), Some(5));
    Ok(())
}

#[tokio::test]
async fn routing_change_reports_issued_commands_since_a_mark() -> TestResult {
    let (_team, _seen, env) = setup(LeaderSettings::default()).await?;
    let before = env.route_mark().await?;
    assert_eq!(env.routing_change(before).await?, None);
    env.issue_route(RouteIssuer::AuthRescue, "ollama", "local/qwen", "reauth").await?;
    let seq = env.issue_route(RouteIssuer::AgentRouting, "openai", "work/big", "escalate").await?;
    let change = env.routing_change(before).await?.ok_or("no change")?;
    assert_eq!(
        (change.provider.as_str(), change.model.as_str(), change.seq),
        ("openai", "work/big", seq)
    );
    assert_eq!(
        change.to_json()["preference"],
        json!({ "provider": "openai", "model": "work/big" })
    );
    assert_eq!(env.routing_change(seq).await?, None, "nothing since the latest");
    Ok(())
}

#[tokio::test]
async fn the_router_allowlist_is_inherited_and_applies_to_fallback() -> TestResult {
    use clio_flow::{ModelCatalog, ModelInfo, ModelRequest, Models, RouterAllowlist};
    let allow = SessionAllowlist {
        providers: Some(["flaky".to_owned(), "ollama".to_owned()].into()),
        models: None,
    };
    let (team, _seen, env) =
        setup(LeaderSettings { router: allow.clone(), ..LeaderSettings::default() }).await?;
    env.run(tasks(&["answer a"]), RunOptions::default()).await?;
    let child = team.env(sid("lead.1"));
    assert_eq!(child.allowlist().await?, allow, "the child inherits its leader's allowlist");

    let calls = Arc::new(Mutex::new(Vec::new()));
    let mut primary = ModelInfo::new("work", "big", "flaky");
    primary.fallbacks = vec!["cloud/huge".into(), "local/qwen".into()];
    let catalog = ModelCatalog::new(vec![
        primary,
        ModelInfo::new("cloud", "huge", "openai"),
        ModelInfo::new("local", "qwen", "ollama"),
    ])?;
    let mut models = Models::new(catalog);
    for (name, ok) in [("flaky", false), ("openai", true), ("ollama", true)] {
        models =
            models.with_provider(Arc::new(props::Provider { name, ok, calls: Arc::clone(&calls) }));
    }
    let router = child.restrict_router(models.clone()).await?;
    let request = ModelRequest::new("work/big", "lead.1", vec![Message::user("hi")]);
    let response = router.complete(&request, &Default::default()).await?;
    assert_eq!(response.model, "local/qwen");
    let seen = calls.lock().map(|c| c.clone()).unwrap_or_default();
    assert_eq!(seen, ["flaky", "ollama"], "the disallowed fallback was never asked");

    let only_flaky =
        SessionAllowlist { providers: Some(["flaky".to_owned()].into()), models: None };
    team.create_leader(
        sid("strict"),
        LeaderSettings { router: only_flaky, ..LeaderSettings::default() },
    )
    .await?;
    let router = team.env(sid("strict")).restrict_router(models.clone()).await?;
    assert!(router.complete(&request, &Default::default()).await.is_err(), "no allowed fallback");
    // Narrowing the child's router further removes the fallback it had.
    let narrowed = child
        .restrict_router(models)
        .await?
        .restrict(&RouterAllowlist::unrestricted().with_models(["work/big", "big"]));
    assert!(narrowed.complete(&request, &Default::default()).await.is_err());
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn the_functions_are_tools_with_errors_as_data() -> TestResult {
    let (_team, _seen, env) = setup(LeaderSettings::default()).await?;
    let recs = env
        .call_tool(
            "run",
            json!({
                "tasks": ["answer x", { "task": "hang", "iteration_budget": 2 }],
                "timeout_secs": 3,
            }),
        )
        .await;
    assert_eq!(recs[0]["status"], "done");
    assert_eq!(recs[0]["answer"], "x");
    assert_eq!(
        recs[1],
        json!({ "session_id": "lead.2", "status": "running", "answer": null, "question": null })
    );
    let again = env.call_tool("council.wait", json!(["lead.1"])).await;
    assert_eq!(again[0]["session_id"], "lead.1");
    assert_eq!(
        env.call_tool("controls", json!({ "actor": "lead", "target": "lead.2" })).await,
        json!(true)
    );
    assert_eq!(
        env.call_tool("wake_allowed", json!({ "author": "lead.1", "recipient": "lead" })).await,
        json!(true)
    );
    assert_eq!(env.call_tool("enabled", json!({})).await, json!(true));
    assert_eq!(env.call_tool("routing_change", json!({ "before": 0 })).await, Value::Null);
    assert_eq!(
        env.call_tool("reconcile_orphans", json!({ "live_session_ids": ["lead"] })).await,
        json!(0)
    );
    let child = env.team().env(sid("lead.2"));
    assert_eq!(child.call_tool("claim_iteration", Value::Null).await, json!({ "claimed": true }));
    child.call_tool("claim_iteration", Value::Null).await;
    let refused = child.call_tool("claim_iteration", Value::Null).await;
    assert_eq!(refused["stop_reason"]["reason"], "budget_exhausted");
    let cp = env
        .call_tool("checkpoint", json!({ "messages": [{ "role": "user", "content": "go" }] }))
        .await;
    assert_eq!(cp["messages"][0]["content"], "go");
    let ask = env.call_tool("ask", json!({ "question": "?" })).await;
    assert_eq!(ask["error"]["reason"], "no_parent");
    let bad = env.call_tool("run", json!({ "tasks": [{ "task": "x", "colour": "red" }] })).await;
    assert_eq!(bad["error"]["reason"], "invalid_task");
    assert_eq!(bad["error"]["message"], "task 0: unknown key \"colour\"");
    let bad = env.call_tool("cancel_agent", json!({ "session_id": 7 })).await;
    assert_eq!(bad["error"]["message"], "tool cancel_agent: session_id must be a string");
    assert_eq!(env.call_tool("frobnicate", json!({})).await["error"]["reason"], "unknown_tool");
    let cancelled = env.call_tool("cancel_agent", json!({ "session_id": "lead.1" })).await;
    assert_eq!(cancelled["status"], "done", "a finished child keeps its record");

    // The same tools as registry tools bound to the session.
    let tools = env.tools("council_");
    assert_eq!(tools.len(), clio_flow::TEAM_TOOLS.len());
    let controls = tools.iter().find(|t| t.name == "council_controls").ok_or("no tool")?;
    assert!(controls.read_only);
    assert_eq!(controls.schema["required"], json!(["actor", "target"]));
    let registry =
        tools.iter().cloned().fold(clio_flow::Registry::new(), clio_flow::Registry::tool);
    let call = |name: &'static str, args| crate::support::call_tool(registry.clone(), name, args);
    let res = call("council_controls", json!({ "actor": "lead", "target": "lead.1" })).await?;
    assert_eq!(res, json!(true));
    let res = call("council_wait", json!({ "session_ids": ["nobody"] })).await?;
    assert_eq!(res["error"]["reason"], "session_not_found");
    Ok(())
}

#[tokio::test]
async fn the_model_runner_claims_the_budget_checkpoints_and_keeps_to_the_allowlist() -> TestResult {
    use clio_flow::{ModelCatalog, ModelInfo, ModelRunner, Models};
    let calls = Arc::new(Mutex::new(Vec::new()));
    let catalog = ModelCatalog::new(vec![
        ModelInfo::new("local", "qwen", "ollama"),
        ModelInfo::new("cloud", "huge", "openai"),
    ])?;
    let mut models = Models::new(catalog);
    for name in ["ollama", "openai"] {
        models = models.with_provider(Arc::new(props::Provider {
            name,
            ok: true,
            calls: Arc::clone(&calls),
        }));
    }
    let team =
        Team::new(Journal::open_in_memory()?, ModelRunner::new(models), TeamConfig::default());
    let router = SessionAllowlist { providers: Some(["ollama".to_owned()].into()), models: None };
    team.create_leader(sid("lead"), LeaderSettings { router, ..LeaderSettings::default() }).await?;
    let env = team.env(sid("lead")).with_context(AgentContext {
        model: "local/qwen".into(),
        provider: "ollama".into(),
        messages: vec![Message::system("you lead")],
    });
    let specs = vec![
        TaskSpec { iteration_budget: Some(1), ..TaskSpec::from("a") },
        TaskSpec { iteration_budget: Some(0), ..TaskSpec::from("b") },
        TaskSpec { model: Some("cloud/huge".into()), ..TaskSpec::from("c") },
    ];
    let recs = env.run(specs, RunOptions::default()).await?;
    assert_eq!(statuses(&recs), ["done", "failed", "failed"]);
    assert_eq!(recs[0].answer.as_deref(), Some("ok"));
    let why = |i: usize| recs[i].error.clone().unwrap_or_default();
    assert!(why(1).contains("iteration budget exhausted (0 of 0 used)"), "{}", why(1));
    assert!(why(2).contains("not allowed by the router allowlist"), "{}", why(2));
    assert_eq!(calls.lock().map(|c| c.clone()).unwrap_or_default(), ["ollama"]);
    let child = team.env(sid("lead.1"));
    assert_eq!(team.session(&sid("lead.1")).await?.iterations_used, 1);
    let checkpoint = child.last_checkpoint().await?.unwrap_or_default();
    // The input the model last got, then what the turn answered.
    assert_eq!(
        checkpoint,
        [Message::system("you lead"), Message::user("a"), Message::assistant("ok")]
    );
    Ok(())
}

/// Logs when a turn's hold is taken, when the turn runs, and the recorded status of the
/// team's one child, `lead.1`, when the hold is let go.
struct HoldingRunner {
    journal: Journal,
    log: Arc<Mutex<Vec<String>>>,
}

struct LoggedHold(HoldingRunner);

fn push(log: &Mutex<Vec<String>>, line: String) {
    if let Ok(mut log) = log.lock() {
        log.push(line);
    }
}

impl Drop for LoggedHold {
    fn drop(&mut self) {
        let status = match self.0.journal.session(&sid("lead.1")) {
            Ok(Some(rec)) => format!("{:?}", rec.status),
            other => format!("no record: {other:?}"),
        };
        push(&self.0.log, format!("released {status}"));
    }
}

impl clio_flow::SubagentRunner for HoldingRunner {
    fn run(&self, job: SubagentJob) -> clio_flow::RunnerFuture {
        let log = Arc::clone(&self.log);
        Box::pin(async move {
            push(&log, format!("ran {}", job.task));
            tokio::time::sleep(Duration::from_secs(5)).await;
            SubagentOutcome::Answer(job.task.clone())
        })
    }

    fn hold(&self) -> Option<clio_flow::TurnHold> {
        push(&self.log, "held".into());
        let (journal, log) = (self.journal.clone(), Arc::clone(&self.log));
        Some(Box::new(LoggedHold(HoldingRunner { journal, log })))
    }
}

/// A runner's hold is taken when its turn is queued, before the turn runs, and let go only
/// once the turn's end is in the journal: what the runtime relies on to keep a run open
/// until a subagent it started has ended.
#[tokio::test(start_paused = true)]
async fn a_turn_holds_its_runner_from_queueing_until_its_end_is_recorded() -> TestResult {
    let journal = Journal::open_in_memory()?;
    let (team, _seen) = team_with(journal.clone(), TeamConfig::default());
    team.create_leader(sid("lead"), LeaderSettings::default()).await?;
    let log = Arc::new(Mutex::new(Vec::new()));
    let runner = HoldingRunner { journal, log: Arc::clone(&log) };
    let env = team.env(sid("lead")).with_runner(runner);
    let opts = RunOptions { timeout_secs: Some(0), ..RunOptions::default() };
    let recs = env.run(tasks(&["answer one"]), opts).await?;
    assert_ne!(statuses(&recs), ["done"], "the run tool returned before the turn ended");
    let done = env.wait_agents(None, WaitOptions::default()).await?;
    assert_eq!(statuses(&done), ["done"]);
    // The hold is let go right after the record is final: give that task its last step.
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
    let log = log.lock().map(|l| l.clone()).unwrap_or_default();
    assert_eq!(log, ["held", "ran answer one", "released Done"]);
    Ok(())
}
