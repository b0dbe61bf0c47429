//! Python flows on a shared PostgreSQL journal, driven by `clio worker`s: a flow submitted
//! with `--detach` runs in a worker's own Python child, and a worker SIGKILLed inside a
//! side-effecting call of the flow's gather leaves the run to the next worker, which
//! replays the flow's history in a new child: every effect once, the uninterrupted answer.
//!
//! The kills come from the test plugin's own tool (`bin/tally` of pyfx), which kills the
//! process that runs it at an exact point: here that process is the worker.

use crate::support::{FleetCase, wait_exit};

const PYFX: &str = "crates/clio-cli/tests/data/python-flows/pyfx";

/// Submits flow `flow` of pyfx on input "go" to the workers; returns the run's id.
fn submit(case: &FleetCase, flow: &str) -> u64 {
    let ws = case.ws.to_str().unwrap();
    let out = case.clio(&[
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

/// Fails when a label of `tallies` was done more than once.
fn assert_once_each(tallies: &[String]) {
    for label in tallies {
        let n = tallies.iter().filter(|t| *t == label).count();
        assert_eq!(n, 1, "{label} tallied {n} times: {tallies:?}");
    }
}

#[test]
fn a_worker_killed_in_a_python_gather_leaves_the_run_to_the_next_worker_each_effect_once() {
    let case = FleetCase::new("pyfleet-gather", PYFX);
    // `g09` does its effect, then kills the process that runs it: the first worker.
    case.arm("kill-after-g09");
    let run = submit(&case, "gather20");

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
    let case = FleetCase::new("pyfleet-child", PYFX);
    // `two` does its effect, then kills only the worker's Python child.
    case.arm("killchild-after-two");
    let run = submit(&case, "effects");

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
