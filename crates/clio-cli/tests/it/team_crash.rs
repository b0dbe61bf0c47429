//! SIGKILL while an agent's team works, then `clio runs resume`: a subagent runs as a
//! call of the run, so a crash never does its side effects twice.
//!
//! The agent `tests/data/team-crash/tally_lead.toml` starts one subagent with
//! `council_run` (the subagent tallies `sub-1`, passes checkpoint `sub-mid`, tallies
//! `sub-2`), then passes checkpoint `lead-mid`, tallies `lead-after` and answers. The
//! tools are the side-effect tests' `counter` plugin: a kill file in the workspace kills
//! the clio process at an exact point.
//!
//! - Killed after the team call ended (`kill-at-lead-mid`): the resumed run replays the
//!   team call from the journal, so the subagent is not run again, and every tally is
//!   done exactly once.
//! - Killed while the subagent works (`kill-at-sub-mid`): the team call was cut short.
//!   As the seed's orphan rule says, the dead process's subagent is failed rather than
//!   resumed, and the team call is not run again (its subagent had a side effect): the
//!   lead gets `CallInterrupted` as the tool's result and goes on. `sub-1` stays done
//!   once and `sub-2` is never done.

use crate::support::{Sandbox, clio};

/// A home and a workspace of their own, whose run is the lead agent's.
fn case(name: &str) -> Sandbox {
    let command = [
        "run",
        "crates/clio-cli/tests/data/team-crash/tally_lead.toml",
        "--input",
        "Run the team",
        "--plugin",
        "crates/clio-cli/tests/data/side-effects/counter",
        "--models",
        "crates/clio-cli/tests/data/team-crash/models.toml",
    ];
    Sandbox::new(&format!("team-crash-{name}"), &command)
}

/// Returns the team of run 1, as `runs tree --json` gives it.
fn team(case: &Sandbox) -> serde_json::Value {
    let tree = clio(&["--home", case.h(), "runs", "tree", "1", "--json"]);
    assert_eq!(tree.code, 0, "{}", tree.render());
    let value: serde_json::Value = serde_json::from_str(&tree.stdout).unwrap();
    value["team"].clone()
}

#[test]
fn an_uninterrupted_team_run_tallies_each_once() {
    let case = case("reference");
    let outcome = case.run(None);
    assert_eq!(outcome.code, 0, "{}", outcome.render());
    assert_eq!(outcome.stdout, "Team done.\n");
    assert_eq!(case.tallies(), ["sub-1", "sub-2", "lead-after"]);
    assert_eq!(team(&case)[1]["status"], "done");
}

#[test]
fn a_run_killed_after_its_team_call_does_not_run_the_subagent_again() {
    let case = case("lead-mid");
    let killed = case.run(Some("kill-at-lead-mid"));
    assert_eq!(killed.code, -1, "the process is killed: {}", killed.render());
    assert_eq!(case.tallies(), ["sub-1", "sub-2"]);
    let resumed = case.resume();
    assert_eq!(resumed.code, 0, "{}", resumed.render());
    assert_eq!(resumed.stdout, "Team done.\n");
    assert_eq!(resumed.stderr, "", "nothing was cut short");
    assert_eq!(case.tallies(), ["sub-1", "sub-2", "lead-after"], "every tally once");
    let team = team(&case);
    assert_eq!(team[1]["status"], "done", "{team}");
    assert_eq!(team[1]["answer"], "Tallied sub-1 and sub-2.", "{team}");
}

#[test]
fn a_run_killed_while_its_subagent_works_fails_the_subagent_and_goes_on() {
    let case = case("sub-mid");
    let killed = case.run(Some("kill-at-sub-mid"));
    assert_eq!(killed.code, -1, "the process is killed: {}", killed.render());
    assert_eq!(case.tallies(), ["sub-1"]);
    let resumed = case.resume();
    assert_eq!(resumed.code, 0, "{}", resumed.render());
    assert_eq!(resumed.stdout, "Team done.\n");
    assert!(
        resumed.stderr.contains("council_run"),
        "the cut-short team call is reported: {}",
        resumed.render()
    );
    assert_eq!(case.tallies(), ["sub-1", "lead-after"], "sub-1 once, sub-2 never");
    let team = team(&case);
    let status = team[1]["status"].as_str().unwrap_or_default();
    assert!(matches!(status, "failed" | "lost"), "the orphaned subagent: {team}");
    // A second resume changes nothing.
    let again = case.resume();
    assert_eq!(again.stdout, "Team done.\n");
    assert_eq!(case.tallies(), ["sub-1", "lead-after"]);
}
