//! A team on a shared PostgreSQL journal: a `clio worker` SIGKILLed while a subagent of
//! its run works leaves the run to the next worker, which treats the subagent as the
//! embedded journal's resume does (`team_crash.rs`): the dead worker's subagent is failed
//! or lost, not left `running`, its side effect done before the kill stays done once, and
//! the lead goes on to its answer.
//!
//! The agent and tools are `team_crash.rs`'s: `tally_lead.toml` and the `counter` plugin,
//! whose `checkpoint` tool kills the process that runs it (here the worker) at
//! `kill-at-<label>`.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::{Outcome, clio, temp_home, workspace_root};

const LEAD: &str = "crates/clio-cli/tests/data/team-crash/tally_lead.toml";
const COUNTER: &str = "crates/clio-cli/tests/data/side-effects/counter";
const MODELS: &str = "crates/clio-cli/tests/data/team-crash/models.toml";

struct Case {
    url: String,
    home: PathBuf,
    ws: PathBuf,
}

impl Case {
    fn new(name: &str) -> Case {
        let url = clio_postgres::test_server::fresh_database();
        let home = temp_home(name);
        let ws = home.join("ws");
        std::fs::create_dir_all(&ws).unwrap();
        // The test tools kill the process that runs them, which the sandbox prevents.
        std::fs::write(home.join("config.toml"), "[sandbox]\nmode = \"off\"\n").unwrap();
        let case = Case { url, home, ws };
        let trusted = case.clio(&["plugin", "trust", COUNTER]);
        assert_eq!(trusted.code, 0, "{}", trusted.render());
        case
    }

    fn h(&self) -> &str {
        self.home.to_str().unwrap()
    }

    fn clio(&self, args: &[&str]) -> Outcome {
        let mut all = vec!["--home", self.h(), "--journal", &self.url];
        all.extend_from_slice(args);
        clio(&all)
    }

    fn worker(&self, n: usize) -> Child {
        let log = std::fs::File::create(self.home.join(format!("worker-{n}.log"))).unwrap();
        Command::new(env!("CARGO_BIN_EXE_clio"))
            .args(["--home", self.h(), "--journal", &self.url, "worker"])
            .args(["--lease", "2", "--exit-when-idle", "3"])
            .current_dir(workspace_root())
            .env_remove("RUST_LOG")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("a worker starts")
    }

    fn log(&self, n: usize) -> String {
        std::fs::read_to_string(self.home.join(format!("worker-{n}.log"))).unwrap_or_default()
    }

    fn tallies(&self) -> Vec<String> {
        let log = std::fs::read_to_string(self.ws.join("tally.log")).unwrap_or_default();
        log.lines().map(str::to_owned).collect()
    }
}

fn wait_exit(child: &mut Child, what: &str) -> std::process::ExitStatus {
    let end = Instant::now() + Duration::from_secs(120);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if Instant::now() > end {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what} did not exit in 120 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_worker_killed_while_its_subagent_works_leaves_the_subagent_failed_and_the_lead_goes_on() {
    let case = Case::new("team-fleet");
    std::fs::write(case.ws.join("kill-at-sub-mid"), "").unwrap();
    let ws = case.ws.to_str().unwrap().to_owned();
    let submitted = case.clio(&[
        "run",
        LEAD,
        "--input",
        "Run the team",
        "--plugin",
        COUNTER,
        "--models",
        MODELS,
        "--workspace",
        &ws,
        "--detach",
        "--quiet",
        "--no-input",
    ]);
    assert_eq!(submitted.code, 0, "{}", submitted.render());

    let mut first = case.worker(0);
    let status = wait_exit(&mut first, "the first worker");
    assert_eq!(status.code(), None, "the first worker was killed: {}", case.log(0));
    assert_eq!(case.tallies(), ["sub-1"]);

    let mut second = case.worker(1);
    let status = wait_exit(&mut second, "the second worker");
    assert!(status.success(), "{}", case.log(1));
    let shown = case.clio(&["runs", "show", "1", "--json"]);
    let shown: serde_json::Value = serde_json::from_str(&shown.stdout).unwrap();
    assert_eq!(shown["run"]["status"], "succeeded", "{shown:#}\n{}", case.log(1));
    assert_eq!(case.tallies(), ["sub-1", "lead-after"], "sub-1 once, sub-2 never");
    let tree = case.clio(&["runs", "tree", "1", "--json"]);
    assert_eq!(tree.code, 0, "{}", tree.render());
    let tree: serde_json::Value = serde_json::from_str(&tree.stdout).unwrap();
    let team = &tree["team"];
    let status = team[1]["status"].as_str().unwrap_or_default();
    assert!(matches!(status, "failed" | "lost"), "the dead worker's subagent: {team:#}");
}
