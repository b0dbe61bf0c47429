//! Python flows on a shared PostgreSQL journal, driven by `clio worker`s: a flow submitted
//! with `--detach` runs in a worker's own Python child, and a worker SIGKILLed inside a
//! side-effecting call of the flow's gather leaves the run to the next worker, which
//! replays the flow's history in a new child: every effect once, the uninterrupted answer.
//!
//! The kills come from the test plugin's own tool (`bin/tally` of pyfx), which kills the
//! process that runs it at an exact point: here that process is the worker.

use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use crate::support::{Outcome, clio, temp_home, workspace_root};

const PYFX: &str = "crates/clio-cli/tests/data/python-flows/pyfx";

/// A home (sandbox off: the plugin's tools kill the process running them, which the
/// sandbox is there to prevent), a workspace, and a database of their own.
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
        std::fs::write(home.join("config.toml"), "[sandbox]\nmode = \"off\"\n").unwrap();
        let case = Case { url, home, ws };
        let trusted = case.clio(&["plugin", "trust", PYFX]);
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

    /// Submits flow `flow` of pyfx on input "go" to the workers; returns the run's id.
    fn submit(&self, flow: &str) -> u64 {
        let ws = self.ws.to_str().unwrap();
        let out = self.clio(&[
            "run",
            flow,
            "--plugin",
            PYFX,
            "--input",
            "go",
            "--workspace",
            ws,
            "--detach",
            "--quiet",
            "--no-input",
        ]);
        assert_eq!(out.code, 0, "{}", out.render());
        out.stdout.trim().parse().expect("the run's id")
    }

    /// Starts a worker with a 2 s lease that exits once idle for 3 s; its log goes to
    /// `worker-<n>.log` in the home.
    fn worker(&self, n: usize) -> Child {
        let log = std::fs::File::create(self.home.join(format!("worker-{n}.log"))).unwrap();
        Command::new(env!("CARGO_BIN_EXE_clio"))
            .args(["--home", self.h(), "--journal", &self.url, "worker"])
            .args(["--concurrency", "2", "--lease", "2", "--exit-when-idle", "3"])
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

    /// Leaves kill file `name` in the workspace.
    fn arm(&self, name: &str) {
        std::fs::write(self.ws.join(name), "").unwrap();
    }

    /// The lines of tally.log: one per side effect.
    fn tallies(&self) -> Vec<String> {
        let log = std::fs::read_to_string(self.ws.join("tally.log")).unwrap_or_default();
        log.lines().map(str::to_owned).collect()
    }

    fn show(&self, run: u64) -> serde_json::Value {
        let shown = self.clio(&["runs", "show", &run.to_string(), "--json"]);
        assert_eq!(shown.code, 0, "{}", shown.render());
        serde_json::from_str(&shown.stdout).unwrap()
    }
}

/// Waits up to 120 s for `child` to exit; kills it and fails when it does not.
fn wait_exit(child: &mut Child, what: &str) -> ExitStatus {
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

/// Fails when a label of `tallies` was done more than once.
fn assert_once_each(tallies: &[String]) {
    for label in tallies {
        let n = tallies.iter().filter(|t| *t == label).count();
        assert_eq!(n, 1, "{label} tallied {n} times: {tallies:?}");
    }
}

#[test]
fn a_worker_killed_in_a_python_gather_leaves_the_run_to_the_next_worker_each_effect_once() {
    let case = Case::new("pyfleet-gather");
    // `g09` does its effect, then kills the process that runs it: the first worker.
    case.arm("kill-after-g09");
    let run = case.submit("gather20");

    let mut first = case.worker(0);
    let status = wait_exit(&mut first, "the first worker");
    assert_eq!(status.code(), None, "the first worker was killed: {}", case.log(0));
    let before = case.tallies();
    assert!(before.contains(&"g09".to_owned()), "{before:?}");
    // The gather's members start in no promised order (at most one at a time here).
    assert!(before.len() < 21, "not all done: {before:?}");
    assert_eq!(case.show(run)["run"]["status"], "running", "left running by the dead worker");

    // The next worker claims the run once the dead worker's lease has lapsed, starts a
    // Python child of its own and replays the flow's history in it.
    let mut second = case.worker(1);
    let status = wait_exit(&mut second, "the second worker");
    assert!(status.success(), "{}", case.log(1));
    let log = case.log(1);
    assert!(log.contains(&format!("claimed run {run}")), "{log}");

    let shown = case.show(run);
    assert_eq!(shown["run"]["status"], "succeeded", "{shown:#}");
    assert_eq!(shown["run"]["answer"]["answer"], "go: gathered 20 calls", "{shown:#}");
    let tallies = case.tallies();
    assert_once_each(&tallies);
    assert_eq!(tallies.len(), 21, "every member and the call after, once: {tallies:?}");
    assert_eq!(&tallies[..before.len()], before.as_slice(), "nothing done before ran again");
}

#[test]
fn a_python_child_killed_under_a_worker_leaves_the_run_for_a_worker_to_finish() {
    let case = Case::new("pyfleet-child");
    // `two` does its effect, then kills only the worker's Python child.
    case.arm("killchild-after-two");
    let run = case.submit("effects");

    let mut worker = case.worker(0);
    let status = wait_exit(&mut worker, "the worker");
    assert!(status.success(), "the worker lives on: {}", case.log(0));
    let killed = std::fs::read_to_string(case.ws.join("killed-children.log")).unwrap_or_default();
    assert_eq!(killed.lines().count(), 1, "one Python child killed: {killed:?}");

    // The run is interrupted, which a worker claims: this one or the next finishes it.
    let mut next = case.worker(1);
    let status = wait_exit(&mut next, "the next worker");
    assert!(status.success(), "{}", case.log(1));
    let shown = case.show(run);
    assert_eq!(shown["run"]["status"], "succeeded", "{shown:#}\n{}\n{}", case.log(0), case.log(1));
    assert_eq!(shown["run"]["answer"]["answer"], "go: tallied one, two, three (3 calls)");
    assert_eq!(case.tallies(), ["one", "two", "three"], "each effect once");
}
