//! Scheduling as the seed describes it: ready steps start at once, never waiting for
//! unrelated steps; the concurrency limit; replay; the assembled result.

use clio_workflow::{Action, Event, EventError, RunConfig, Scheduler, StepStatus};
use serde_json::json;

use crate::support::{Driver, config, workflow};

const BATCH7: &str = include_str!("../data/valid/batch7.json");

#[test]
fn batch7_starts_relate_before_survey_finishes() {
    let mut run = Driver::new(&workflow(BATCH7), config(&[]));
    assert_eq!(run.started_ids(), ["survey", "images", "tests"]);
    run.start("survey");
    run.finish("images");
    assert_eq!(run.started_ids(), ["survey", "images", "tests"], "relate waits for tests");
    run.finish("tests");
    assert_eq!(
        run.started_ids(),
        ["survey", "images", "tests", "relate"],
        "relate does not wait for survey"
    );
    run.finish("relate");
    assert_eq!(run.started_ids().len(), 4, "review waits for survey");
    run.apply(Event::Finished {
        step: "survey".into(),
        answer: json!("answer of survey"),
        model: Some("local/m".into()),
        state: None,
    });
    assert_eq!(run.started_ids().last().map(String::as_str), Some("review"));
    run.finish("review");
    assert!(run.sched.is_done());
    insta::assert_snapshot!(run.summary());
}

#[test]
fn batch7_result_puts_final_answers_first() {
    let mut run = Driver::new(&workflow(BATCH7), config(&[]));
    for step in ["survey", "images", "tests", "relate"] {
        run.finish(step);
    }
    run.start("review");
    run.apply(Event::Finished {
        step: "review".into(),
        answer: json!("looks sound"),
        model: Some("openai/gpt-5".into()),
        state: Some(json!({"findings": {"grain": "fine"}, "score": 1})),
    });
    let Some(result) = run.sched.result() else { panic!("the run should be done") };
    assert!(result.answer.starts_with("## review (openai/gpt-5)\n\nlooks sound\n\n## survey"));
    insta::assert_json_snapshot!(result.to_json());
}

#[test]
fn workflow_state_merges_in_dependency_order() {
    let wf =
        workflow(r#"[{"id": "b", "target": "t", "after": ["a"]}, {"id": "a", "target": "t"}]"#);
    let mut run = Driver::new(&wf, config(&[]));
    for (step, state) in
        [("a", json!({"s": {"x": 1, "y": 1}, "k": "a"})), ("b", json!({"s": {"y": 2}, "k": "b"}))]
    {
        run.start(step);
        run.apply(Event::Finished {
            step: step.into(),
            answer: json!("ok"),
            model: None,
            state: Some(state),
        });
    }
    let state = run.sched.result().and_then(|result| result.workflow_state);
    assert_eq!(state, Some(json!({"s": {"x": 1, "y": 2}, "k": "b"})));
}

#[test]
fn concurrency_limit_holds_ready_steps_in_order() {
    let wf = workflow(
        r#"[{"id": "a", "target": "t"}, {"id": "b", "target": "t"}, {"id": "c", "target": "t"}, {"id": "d", "target": "t", "after": ["a"]}]"#,
    );
    let mut run = Driver::new(&wf, RunConfig { max_concurrency: 2, ..config(&[]) });
    assert_eq!(run.started_ids(), ["a", "b"]);
    run.finish("a");
    assert_eq!(run.started_ids(), ["a", "b", "c"], "c was ready before d");
    run.finish("b");
    assert_eq!(run.started_ids(), ["a", "b", "c", "d"]);
}

#[test]
fn replay_gives_the_same_decisions_and_outstanding_actions() {
    let wf = workflow(BATCH7);
    let mut run = Driver::new(&wf, RunConfig { max_concurrency: 2, ..config(&[]) });
    run.finish("survey");
    run.start("images");
    let mut fresh = Scheduler::new(wf, RunConfig { max_concurrency: 2, ..config(&[]) });
    let mut replayed: Vec<Action> = fresh.take_actions();
    for event in &run.events {
        fresh.apply(event.clone()).unwrap();
        replayed.extend(fresh.take_actions());
    }
    assert_eq!(replayed, run.actions);
    let outstanding: Vec<String> = fresh
        .outstanding()
        .into_iter()
        .filter_map(|action| match action {
            Action::Start(start) => Some(start.step),
            _ => None,
        })
        .collect();
    assert_eq!(outstanding, ["tests"], "images has started; tests was asked to start and has not");
}

#[test]
fn events_that_do_not_fit_are_refused() {
    let mut sched = Scheduler::new(workflow(BATCH7), config(&[]));
    let finished = |step: &str| Event::Finished {
        step: step.into(),
        answer: json!("x"),
        model: None,
        state: None,
    };
    assert_eq!(
        sched.apply(finished("relate")),
        Err(EventError::Unexpected { step: "relate".into(), event: "finished", status: "pending" })
    );
    assert_eq!(
        sched.apply(finished("ghost")),
        Err(EventError::UnknownStep { step: "ghost".into() })
    );
    assert_eq!(
        sched.apply(Event::Decision { proposal: 0, approve: true }),
        Err(EventError::NotAwaitingDecision { proposal: 0 })
    );
    assert_eq!(sched.snapshot()[3].status, StepStatus::Pending);
}

#[test]
fn run_cancelled_cancels_what_has_not_started() {
    let mut run = Driver::new(&workflow(BATCH7), config(&[]));
    run.finish("images");
    run.apply(Event::RunCancelled);
    run.apply(Event::Cancelled { step: "survey".into() });
    run.finish("tests");
    assert!(run.sched.is_done());
    insta::assert_snapshot!(run.summary());
}

#[test]
fn events_round_trip_through_json() {
    let events = vec![
        Event::Started { step: "a".into(), handle: "h1".into() },
        Event::Finished {
            step: "a".into(),
            answer: json!("x"),
            model: Some("m".into()),
            state: None,
        },
        Event::Failed { step: "b".into(), error: "boom".into() },
        Event::Cancelled { step: "c".into() },
        Event::Decision { proposal: 3, approve: false },
        Event::RepairEnded { step: "b".into(), editor: "critic".into(), error: None },
        Event::RunCancelled,
    ];
    let text = serde_json::to_string(&events).unwrap();
    insta::assert_snapshot!(text);
    let back: Vec<Event> = serde_json::from_str(&text).unwrap();
    assert_eq!(back, events);
}
