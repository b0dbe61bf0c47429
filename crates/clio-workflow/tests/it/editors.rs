//! Editors, one named test per rule of the seed: proposals apply after the editor's step
//! finishes, within `max_added_steps`, `max_edit_rounds`, `allowed_targets`,
//! `approve_edits` and the person's settings; refusals are recorded with their reason.

use clio_workflow::{
    Action, Bounds, EditStatus, EditorCall, Event, Proposal, RunConfig, Scheduler, Settings,
    StepStatus, TargetKind,
};
use serde_json::json;

use crate::support::{Driver, add, config, workflow};

/// The seed's flow example: survey → relate → review, with review's target as editor.
const FLOW: &str = include_str!("../data/valid/batch7_flow.json");

fn editor_run(bounds: Bounds) -> Driver {
    let cfg = RunConfig { bounds, ..config(&["independent_reviewer"]) };
    let mut run = Driver::new(&workflow(FLOW), cfg);
    run.finish("survey");
    run.finish("relate");
    run.start("review");
    run
}

fn finish_review(run: &mut Driver) {
    run.apply(Event::Finished {
        step: "review".into(),
        answer: json!("needs a check"),
        model: None,
        state: None,
    });
}

#[test]
fn editor_steps_are_marked_and_others_are_not() {
    let run = editor_run(Bounds::default());
    assert!(run.start_of("review").editor);
    assert!(!run.start_of("relate").editor);
}

#[test]
fn added_step_waits_on_the_editors_step_and_applies_after_it_finishes() {
    let mut run = editor_run(Bounds::default());
    run.propose_add("review", "recheck", "data_analysis_expert", None);
    assert_eq!(run.started_ids(), ["survey", "relate", "review"], "a proposal only proposes");
    finish_review(&mut run);
    let start = run.start_of("recheck");
    assert_eq!(start.input, json!({"task": "study batch7", "inputs": {"review": "needs a check"}}));
    run.finish("recheck");
    insta::assert_snapshot!(run.summary());
    let result = run.sched.result().unwrap();
    assert!(result.answer.starts_with("## recheck"), "the added step is now the final step");
}

#[test]
fn added_step_after_says_otherwise() {
    let mut run = editor_run(Bounds::default());
    run.propose_add("review", "side", "data_analysis_expert", Some(&["survey"]));
    finish_review(&mut run);
    let steps = run.sched.steps();
    assert_eq!(steps.last().map(|s| s.after.clone()), Some(vec!["survey".to_owned()]));
}

#[test]
fn editor_cancels_a_step_that_has_not_started() {
    let wf = workflow(
        r#"[{"id": "review", "target": "critic"}, {"id": "publish", "target": "t", "after": ["review"]},
            {"id": "announce", "target": "t", "after": ["publish"]}, {"id": "archive", "target": "t", "after": ["review"]}]"#,
    );
    let mut run = Driver::new(&wf, config(&["critic"]));
    run.start("review");
    run.apply(Event::Proposal {
        from: EditorCall::Step { step: "review".into() },
        proposal: Proposal::CancelStep { step_id: "publish".into(), reason: "not ready".into() },
    });
    run.apply(Event::Finished {
        step: "review".into(),
        answer: json!("no"),
        model: None,
        state: None,
    });
    assert_eq!(run.started_ids(), ["review", "archive"]);
    run.finish("archive");
    insta::assert_snapshot!(run.summary());
}

#[test]
fn cancelling_a_started_step_is_refused() {
    let wf = workflow(r#"[{"id": "review", "target": "critic"}, {"id": "busy", "target": "t"}]"#);
    let mut run = Driver::new(&wf, config(&["critic"]));
    run.start("review");
    run.start("busy");
    run.apply(Event::Proposal {
        from: EditorCall::Step { step: "review".into() },
        proposal: Proposal::CancelStep { step_id: "busy".into(), reason: String::new() },
    });
    run.apply(Event::Finished {
        step: "review".into(),
        answer: json!("x"),
        model: None,
        state: None,
    });
    assert_eq!(
        run.sched.edits()[0].status,
        EditStatus::Refused(
            "step `busy` is running: only a step that has not started can be cancelled".into()
        )
    );
}

#[test]
fn max_added_steps_refuses_past_the_bound() {
    let mut run = editor_run(Bounds { max_added_steps: Some(1), ..Bounds::default() });
    run.propose_add("review", "one", "t", None);
    run.propose_add("review", "two", "t", None);
    finish_review(&mut run);
    assert_eq!(run.sched.edits()[0].status, EditStatus::Applied);
    assert_eq!(
        run.sched.edits()[1].status,
        EditStatus::Refused("max_added_steps reached (1)".into())
    );
}

#[test]
fn max_edit_rounds_refuses_past_the_bound() {
    let wf = workflow(
        r#"[{"id": "r1", "target": "critic"}, {"id": "r2", "target": "critic", "after": ["r1"]}]"#,
    );
    let cfg = RunConfig {
        bounds: Bounds { max_edit_rounds: Some(1), ..Bounds::default() },
        ..config(&["critic"])
    };
    let mut run = Driver::new(&wf, cfg);
    run.start("r1");
    run.propose_add("r1", "first", "t", None);
    run.finish_started("r1");
    run.start("r2");
    run.propose_add("r2", "second", "t", None);
    run.finish_started("r2");
    insta::assert_snapshot!(run.summary());
}

#[test]
fn settings_limit_applies_when_tighter() {
    let cfg = RunConfig {
        bounds: Bounds { max_added_steps: Some(5), max_edit_rounds: None, ..Bounds::default() },
        settings: Settings { max_added_steps: Some(1), max_edit_rounds: Some(3) },
        ..config(&["independent_reviewer"])
    };
    let sched = Scheduler::new(workflow(FLOW), cfg);
    assert_eq!(sched.limits().max_added_steps, Some(1));
    assert_eq!(sched.limits().max_edit_rounds, Some(3));
}

#[test]
fn allowed_targets_unknown_targets_options_and_used_ids_are_refused() {
    let mut run = editor_run(Bounds {
        allowed_targets: Some(vec!["t".into(), "council".into()]),
        ..Bounds::default()
    });
    run.propose_add("review", "elsewhere", "other_expert", None);
    let unknown = |id: &str, kind: TargetKind, options: bool| Proposal::AddStep {
        step_id: id.into(),
        target: if kind == TargetKind::Flow { "council".into() } else { "t".into() },
        input: None,
        after: None,
        reason: String::new(),
        options: options
            .then(|| serde_json::Map::from_iter([("members".to_owned(), json!(["a"]))])),
        target_kind: kind,
    };
    for proposal in [
        unknown("ghost", TargetKind::Unknown, false),
        unknown("opts", TargetKind::Other, true),
        unknown("relate", TargetKind::Other, false),
        unknown("Bad Id", TargetKind::Other, false),
        unknown("council-ok", TargetKind::Flow, true),
    ] {
        run.apply(Event::Proposal { from: EditorCall::Step { step: "review".into() }, proposal });
    }
    run.apply(Event::Proposal {
        from: EditorCall::Step { step: "review".into() },
        proposal: Proposal::AddStep {
            step_id: "peek".into(),
            target: "t".into(),
            input: Some(json!("Compare $review with $ghost-step")),
            after: Some(vec!["survey".into()]),
            reason: String::new(),
            options: None,
            target_kind: TargetKind::Other,
        },
    });
    finish_review(&mut run);
    insta::assert_snapshot!(run.summary());
}

#[test]
fn approve_edits_waits_for_the_persons_yes_or_no() {
    let mut run = editor_run(Bounds { approve_edits: true, ..Bounds::default() });
    run.propose_add("review", "yes-step", "t", None);
    run.propose_add("review", "no-step", "t", None);
    finish_review(&mut run);
    let asked: Vec<u32> = run
        .actions
        .iter()
        .filter_map(|action| match action {
            Action::AskDecision(request) => Some(request.proposal),
            _ => None,
        })
        .collect();
    assert_eq!(asked, [0, 1]);
    assert!(!run.sched.is_done(), "the run waits for the decisions");
    assert_eq!(run.sched.outstanding().len(), 2);
    run.apply(Event::Decision { proposal: 0, approve: true });
    run.apply(Event::Decision { proposal: 1, approve: false });
    run.finish("yes-step");
    insta::assert_snapshot!(run.summary());
}

#[test]
fn a_proposal_from_a_step_that_is_not_an_editor_is_refused_as_an_event() {
    let mut run = editor_run(Bounds::default());
    let err = run.sched.apply(Event::Proposal {
        from: EditorCall::Step { step: "relate".into() },
        proposal: add("x", "t", None),
    });
    assert!(err.is_err());
}

#[test]
fn replaying_the_events_rebuilds_the_same_steps() {
    let mut run =
        editor_run(Bounds { approve_edits: true, max_added_steps: Some(3), ..Bounds::default() });
    run.propose_add("review", "again", "t", None);
    finish_review(&mut run);
    run.apply(Event::Decision { proposal: 0, approve: true });
    run.finish("again");
    let wf = workflow(FLOW);
    let cfg = RunConfig {
        bounds: Bounds { approve_edits: true, max_added_steps: Some(3), ..Bounds::default() },
        ..config(&["independent_reviewer"])
    };
    let mut fresh = Scheduler::new(wf, cfg);
    let mut actions = fresh.take_actions();
    for event in &run.events {
        fresh.apply(event.clone()).unwrap();
        actions.extend(fresh.take_actions());
    }
    assert_eq!(fresh.steps(), run.sched.steps());
    assert_eq!(actions, run.actions);
    assert_eq!(fresh.result(), run.sched.result());
    assert_eq!(fresh.snapshot().last().map(|s| s.status), Some(StepStatus::Finished));
}
