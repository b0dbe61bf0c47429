//! Runs without a launch in their journal record: runs of earlier builds, which kept it in
//! `$CLIO_HOME/runs/<run>.launch.json` (still read), and runs whose launch is lost
//! altogether (they can still be cancelled, and a resume says what is missing).

use std::path::{Path, PathBuf};

use clio_journal::{
    Journal, JournalConfig, NewRun, NewTask, RunId, RunStatus, RunUpdate, TaskKind, TaskStatus,
};
use insta::assert_snapshot;
use serde_json::json;

use crate::support::{Outcome, clio, temp_home};

/// A home whose journal holds run 1, interrupted with one unfinished task, as an earlier
/// build left it: no launch in its record.
fn home_with_a_run_of_an_earlier_build(name: &str) -> PathBuf {
    let home = temp_home(&format!("launch-{name}"));
    let journal = Journal::open(home.join("journal.redb"), JournalConfig::default()).unwrap();
    let run = journal
        .create_run(NewRun {
            flow: "{\"id\":\"workflow\"}".into(),
            input: json!({"task": "Review batch 7"}),
            input_digest: "d".into(),
            fingerprint: "f".into(),
            owner: "clio-1".into(),
            launch: None,
        })
        .unwrap();
    journal
        .create_task(NewTask {
            run,
            parent: None,
            kind: TaskKind::Step,
            target: "plan".into(),
            label: "plan".into(),
            status: TaskStatus::Running,
            model: None,
            owner: "clio-1".into(),
            call: None,
        })
        .unwrap();
    let update = RunUpdate { status: Some(RunStatus::Interrupted), ..RunUpdate::default() };
    journal.update_run(run, update).unwrap();
    journal.close().unwrap();
    home
}

fn clio_at(home: &Path, args: &[&str]) -> Outcome {
    let mut full = vec!["--home", home.to_str().unwrap()];
    full.extend(args.iter().copied());
    clio(&full)
}

/// A launch file an earlier build wrote is read for its run: `runs show` shows its agent,
/// and `runs resume` rebuilds the runtime from it (here, and so, fails on its agent file).
#[test]
fn a_launch_file_of_an_earlier_build_is_still_read() {
    let home = home_with_a_run_of_an_earlier_build("legacy");
    let agent = home.join("gone.toml");
    let launch = json!({
        "agent": agent, "plugins": [], "workspace": null, "models": null, "model": "",
        "agent_checksum": "sha256:abc",
    });
    std::fs::create_dir_all(home.join("runs")).unwrap();
    std::fs::write(home.join("runs/1.launch.json"), launch.to_string()).unwrap();

    let show = clio_at(&home, &["runs", "show", "1"]);
    assert_eq!(show.code, 0, "{}", show.render());
    let line = format!("  agent:  {} (spec checksum sha256:abc)\n", agent.display());
    assert!(show.stdout.contains(&line), "{}", show.render());
    let resume = clio_at(&home, &["runs", "resume", "1", "--quiet"]);
    assert_eq!(resume.code, 1, "{}", resume.render());
    let cannot = format!("cannot read {}", agent.display());
    assert!(resume.stderr.contains(&cannot), "{}", resume.render());
}

/// A run whose launch is lost (no record, no file) can still be given up on, and a
/// resume or an answer says what is missing and what is left to do.
#[test]
fn a_run_whose_launch_is_lost_can_be_cancelled_and_a_resume_says_what_is_missing() {
    let home = home_with_a_run_of_an_earlier_build("lost");
    let h = home.to_str().unwrap();
    let mut all = String::new();
    for args in [vec!["runs", "resume", "1"], vec!["runs", "answer", "1", "1", "yes"]] {
        let outcome = clio_at(&home, &args);
        assert_eq!(outcome.code, 1, "{}", outcome.render());
        all.push_str(&format!("## clio {}\n{}", args.join(" "), outcome.render()));
    }
    let cancel = clio_at(&home, &["runs", "cancel", "1"]);
    assert_eq!(cancel.code, 0, "{}", cancel.render());
    all.push_str(&format!("## clio runs cancel 1\n{}", cancel.render()));
    assert_snapshot!(all.replace(h, "[home]"));

    let journal = Journal::open(home.join("journal.redb"), JournalConfig::default()).unwrap();
    assert_eq!(journal.run(RunId(1)).unwrap().unwrap().status, RunStatus::Cancelled);
    assert_eq!(journal.tasks(RunId(1)).unwrap()[0].status, TaskStatus::Cancelled);
}
