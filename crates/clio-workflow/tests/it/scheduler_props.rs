//! Property tests of the scheduler on random DAGs with random finishing orders, failures
//! and concurrency limits: dependencies first, ready steps start at once up to the limit,
//! each step runs at most once (exactly once without failures), every step settles, and a
//! replay of the same events gives the same decisions.

use std::collections::{BTreeSet, HashMap};

use clio_workflow::{Action, Event, RunConfig, Scheduler, Step, StepStatus, Workflow};
use proptest::prelude::*;
use serde_json::json;

#[derive(Debug, Clone)]
struct Case {
    n: usize,
    edges: Vec<(usize, usize)>,
    limit: usize,
    // For each completion: which running step (modulo) and whether it fails.
    picks: Vec<(usize, u8)>,
}

fn case() -> impl Strategy<Value = Case> {
    (1usize..40, 0usize..4).prop_flat_map(|(n, limit)| {
        (
            prop::collection::vec((0..n, 0..n), 0..n * 3),
            prop::collection::vec((any::<usize>(), any::<u8>()), n..=n),
        )
            .prop_map(move |(edges, picks)| {
                let edges = edges.into_iter().filter(|(a, b)| a > b).collect();
                Case { n, edges, limit, picks }
            })
    })
}

fn workflow(case: &Case) -> Workflow {
    let steps = (0..case.n)
        .map(|i| {
            let after: Vec<String> =
                case.edges.iter().filter(|(s, _)| *s == i).map(|(_, d)| format!("s{d}")).collect();
            Step::new(format!("s{i}"), "t").after(after)
        })
        .collect();
    Workflow::new(steps).unwrap()
}

fn deps_of(case: &Case) -> Vec<BTreeSet<usize>> {
    let mut deps = vec![BTreeSet::new(); case.n];
    for &(step, dep) in &case.edges {
        deps[step].insert(dep);
    }
    deps
}

struct Outcome {
    events: Vec<Event>,
    actions: Vec<Action>,
}

/// Runs a case, checking the invariants after every event.
fn run(case: &Case, fail_rate: u8) -> Result<Outcome, TestCaseError> {
    let deps = deps_of(case);
    let config =
        RunConfig { task: json!("t"), max_concurrency: case.limit, ..RunConfig::default() };
    let mut sched = Scheduler::new(workflow(case), config);
    let mut events = Vec::new();
    let mut actions = Vec::new();
    let mut finished = vec![false; case.n];
    let mut failed = vec![false; case.n];
    let mut started: HashMap<usize, usize> = HashMap::new();
    let mut running: Vec<usize> = Vec::new();
    let mut picks = case.picks.iter().cycle();
    loop {
        for action in sched.take_actions() {
            let Action::Start(start) = action.clone() else {
                return Err(TestCaseError::fail(format!("no editors, so only starts: {action:?}")));
            };
            let idx: usize = start.step[1..].parse().unwrap();
            prop_assert!(
                deps[idx].iter().all(|&d| finished[d]),
                "{} started before its dependencies",
                start.step
            );
            *started.entry(idx).or_default() += 1;
            prop_assert_eq!(started[&idx], 1, "{} started twice", &start.step);
            running.push(idx);
            actions.push(action);
            let event = Event::Started { step: start.step.clone(), handle: format!("h{idx}") };
            sched.apply(event.clone()).unwrap();
            events.push(event);
            actions.extend(sched.take_actions());
        }
        if case.limit > 0 {
            prop_assert!(running.len() <= case.limit, "over the concurrency limit");
        }
        // Every step whose dependencies finished has started, unless all slots are taken.
        let idle_ready = (0..case.n).any(|i| {
            !started.contains_key(&i)
                && deps[i].iter().all(|&d| finished[d])
                && sched.snapshot()[i].status != StepStatus::Cancelled
        });
        prop_assert!(
            !idle_ready || (case.limit > 0 && running.len() == case.limit),
            "a ready step waits for nothing"
        );
        if running.is_empty() {
            break;
        }
        let (pick, roll) = picks.next().copied().unwrap_or((0, 0));
        let idx = running.remove(pick % running.len());
        let event = if roll < fail_rate {
            failed[idx] = true;
            Event::Failed { step: format!("s{idx}"), error: "boom".into() }
        } else {
            finished[idx] = true;
            Event::Finished {
                step: format!("s{idx}"),
                answer: json!(idx),
                model: None,
                state: None,
            }
        };
        sched.apply(event.clone()).unwrap();
        // The borrowed live view shows what a snapshot shows.
        let shown: Vec<_> = sched
            .statuses()
            .map(|v| (v.id.to_owned(), v.target.to_owned(), v.status, v.handle.map(str::to_owned)))
            .collect();
        let snapped: Vec<_> =
            sched.snapshot().into_iter().map(|s| (s.id, s.target, s.status, s.handle)).collect();
        prop_assert_eq!(shown, snapped);
        prop_assert_eq!(sched.len(), case.n);
        events.push(event);
    }
    prop_assert!(sched.is_done(), "nothing runs and the run is not done");
    // Taking the result out of the scheduler gives what copying it gives.
    prop_assert_eq!(sched.clone().into_result().ok(), sched.result());
    let snapshot = sched.snapshot();
    for (i, step) in snapshot.iter().enumerate() {
        prop_assert!(step.status.is_settled(), "{} ended {:?}", step.id, step.status);
        // A step is skipped exactly when something it waits on did not finish.
        let blocked = deps[i].iter().any(|&d| snapshot[d].status != StepStatus::Finished);
        prop_assert_eq!(step.status == StepStatus::Skipped, blocked, "step {}", &step.id);
    }
    if !failed.iter().any(|&f| f) {
        prop_assert_eq!(started.len(), case.n, "every step runs exactly once");
        prop_assert!(snapshot.iter().all(|s| s.status == StepStatus::Finished));
    }
    Ok(Outcome { events, actions })
}

proptest! {
    #[test]
    fn scheduler_respects_dependencies_and_limits(case in case()) {
        run(&case, 0)?;
    }

    #[test]
    fn failures_skip_exactly_the_dependents(case in case()) {
        run(&case, 40)?;
    }

    #[test]
    fn replay_gives_the_same_decisions(case in case()) {
        let first = run(&case, 30)?;
        let config = RunConfig { task: json!("t"), max_concurrency: case.limit, ..RunConfig::default() };
        let mut fresh = Scheduler::new(workflow(&case), config);
        let mut actions = fresh.take_actions();
        for event in &first.events {
            fresh.apply(event.clone()).unwrap();
            actions.extend(fresh.take_actions());
        }
        prop_assert_eq!(actions, first.actions);
        prop_assert!(fresh.is_done());
    }
}
