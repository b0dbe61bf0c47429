//! A team on a shared PostgreSQL journal: a `clio worker` SIGKILLed while a subagent of
//! its run works leaves the run to the next worker, which treats the subagent as the
//! embedded journal's resume does (`team_crash.rs`): the dead worker's subagent is failed
//! or lost, not left `running`, its side effect done before the kill stays done once, and
//! the lead goes on to its answer.
//!
//! The agent and tools are `team_crash.rs`'s: `tally_lead.toml` and the `counter` plugin,
//! whose `checkpoint` tool kills the process that runs it (here the worker) at
//! `kill-at-<label>`.

use crate::support::{FleetCase, wait_exit};

const LEAD: &str = "crates/clio-cli/tests/data/team-crash/tally_lead.toml";
const COUNTER: &str = "crates/clio-cli/tests/data/side-effects/counter";
const MODELS: &str = "crates/clio-cli/tests/data/team-crash/models.toml";

#[test]
fn a_worker_killed_while_its_subagent_works_leaves_the_subagent_failed_and_the_lead_goes_on() {
    let case = FleetCase::new("team-fleet", COUNTER);
    case.arm("kill-at-sub-mid");
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
    let shown = case.show(1);
    assert_eq!(shown["run"]["status"], "succeeded", "{shown:#}\n{}", case.log(1));
    assert_eq!(case.tallies(), ["sub-1", "lead-after"], "sub-1 once, sub-2 never");
    let tree = case.clio(&["runs", "tree", "1", "--json"]);
    assert_eq!(tree.code, 0, "{}", tree.render());
    let tree: serde_json::Value = serde_json::from_str(&tree.stdout).unwrap();
    let team = &tree["team"];
    let status = team[1]["status"].as_str().unwrap_or_default();
    assert!(matches!(status, "failed" | "lost"), "the dead worker's subagent: {team:#}");
}
