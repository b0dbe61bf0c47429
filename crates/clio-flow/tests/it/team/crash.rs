//! Team state across a real process death: a child process (this test binary, re-executed
//! with `--exact team::crash::team_child`) starts subagents on a journal file and is killed
//! with SIGKILL while one of them works. The parent reopens the journal: the orphan is
//! failed (`lost`) exactly once, and the finished child's iteration budget goes on from
//! where the dead process left it.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use clio_flow::{LeaderSettings, ReplyOutcome, RunOptions, TaskSpec, TeamConfig, WaitOptions};
use clio_journal::{Journal, JournalConfig, SessionStatus};

use super::{TestResult, sid, statuses, team_with};

const DIR: &str = "CLIO_FLOW_TEAM_CRASH_DIR";

async fn child(dir: &Path) -> TestResult {
    let journal = Journal::open(dir.join("journal.redb"), JournalConfig::default())?;
    let config = TeamConfig { owner: "doomed-process".into(), ..TeamConfig::default() };
    let (team, _seen) = team_with(journal, config);
    team.create_leader(sid("lead"), LeaderSettings::default()).await?;
    let specs = vec![
        TaskSpec { iteration_budget: Some(3), ..TaskSpec::from("claim 2") },
        TaskSpec::from("hang"),
    ];
    let opts = RunOptions { timeout_secs: Some(1), ..RunOptions::default() };
    let recs = team.env(sid("lead")).run(specs, opts).await?;
    // Written whole, then renamed: the parent reads it as soon as it exists.
    std::fs::write(dir.join("ready.tmp"), statuses(&recs).join(","))?;
    std::fs::rename(dir.join("ready.tmp"), dir.join("ready"))?;
    std::future::pending::<()>().await;
    Ok(())
}

#[test]
fn team_child() -> TestResult {
    let Ok(dir) = std::env::var(DIR) else { return Ok(()) };
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    rt.block_on(child(Path::new(&dir)))
}

#[test]
fn orphans_and_budgets_after_sigkill() -> TestResult {
    let dir = tempfile::tempdir()?;
    let mut process = Command::new(std::env::current_exe()?)
        .args(["--exact", "team::crash::team_child", "--nocapture", "--test-threads", "1"])
        .env(DIR, dir.path())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()?;
    let ready = dir.path().join("ready");
    for _ in 0..3000 {
        if ready.exists() || process.try_wait()?.is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    process.kill()?;
    process.wait()?;
    assert_eq!(std::fs::read_to_string(&ready)?, "done,running");

    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    rt.block_on(async {
        let journal = Journal::open(dir.path().join("journal.redb"), JournalConfig::default())?;
        let (team, _seen) = team_with(journal, TeamConfig::default());
        assert_eq!(team.session(&sid("lead.2")).await?.status, SessionStatus::Running);
        assert_eq!(team.reconcile_orphans::<&str>(&[]).await?, 1);
        assert_eq!(team.reconcile_orphans::<&str>(&[]).await?, 0);
        let env = team.env(sid("lead"));
        let recs = env.wait_agents(None, WaitOptions::default()).await?;
        assert_eq!(statuses(&recs), ["done", "lost"]);

        assert_eq!(team.session(&sid("lead.1")).await?.iterations_used, 2);
        assert_eq!(env.reply(&sid("lead.1"), "one more").await?, ReplyOutcome::Woken);
        let recs = env.wait_agents(Some(vec![sid("lead.1")]), WaitOptions::default()).await?;
        assert_eq!(recs[0].answer.as_deref(), Some("after reply: one more (claimed true)"));
        assert!(!team.env(sid("lead.1")).claim_iteration().await?, "3 of 3 across the crash");
        Ok(())
    })
}
