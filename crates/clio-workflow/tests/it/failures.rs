//! When a step fails, one named test per rule of the seed: offered to each editor in turn; a
//! repair takes the failed step's place; unrepaired, dependents are skipped and the run ends
//! `step_failed`; a cancelled step is not offered and the run ends cancelled.

use clio_workflow::{
    Action, Bounds, EditStatus, EditorCall, Event, Outcome, Proposal, RunConfig, TargetKind,
};
use serde_json::json;

use crate::support::{Driver, add, config, workflow};

const BATCH7: &str = include_str!("../data/valid/batch7.json");

fn offers(run: &Driver) -> Vec<(String, String)> {
    run.actions
        .iter()
        .filter_map(|action| match action {
            Action::OfferRepair(offer) => Some((offer.step.clone(), offer.editor.clone())),
            _ => None,
        })
        .collect()
}

fn repair_proposal(run: &mut Driver, failed: &str, editor: &str, proposal: Proposal) {
    run.apply(Event::Proposal {
        from: EditorCall::Repair { step: failed.into(), editor: editor.into() },
        proposal,
    });
}

fn end_offer(run: &mut Driver, failed: &str, editor: &str) {
    run.apply(Event::RepairEnded { step: failed.into(), editor: editor.into(), error: None });
}

#[test]
fn unrepaired_failure_skips_dependents_and_ends_step_failed() {
    let mut run = Driver::new(&workflow(BATCH7), config(&[]));
    run.fail("images", "micrographs missing");
    run.finish("survey");
    run.finish("tests");
    assert!(run.sched.is_done());
    let result = run.sched.result().unwrap();
    assert_eq!(
        result.outcome,
        Outcome::StepFailed { step: "images".into(), error: "micrographs missing".into() }
    );
    insta::assert_snapshot!(run.summary());
}

#[test]
fn unrelated_steps_go_on_after_a_failure() {
    let mut run = Driver::new(&workflow(BATCH7), config(&[]));
    run.fail("survey", "no sources");
    run.finish("images");
    run.finish("tests");
    assert!(run.started_ids().contains(&"relate".to_owned()), "relate does not depend on survey");
}

#[test]
fn failed_step_is_offered_to_each_editor_in_turn() {
    let mut run = Driver::new(&workflow(BATCH7), config(&["independent_reviewer", "critic"]));
    run.fail("tests", "fatigue.csv has no header");
    assert_eq!(offers(&run), [("tests".to_owned(), "independent_reviewer".to_owned())]);
    let Some(Action::OfferRepair(offer)) = run.actions.last() else { panic!("an offer") };
    assert_eq!(offer.input["failed"]["error"], json!("fatigue.csv has no header"));
    assert_eq!(offer.input["failed"]["input"], json!("Fit S-N curves to data/batch7/fatigue.csv"));
    end_offer(&mut run, "tests", "independent_reviewer");
    assert_eq!(offers(&run).last().map(|o| o.1.as_str()), Some("critic"));
    end_offer(&mut run, "tests", "critic");
    for step in ["survey", "images"] {
        run.finish(step);
    }
    assert!(run.sched.is_done());
    insta::assert_snapshot!(run.summary());
}

#[test]
fn repair_step_takes_the_failed_steps_place() {
    let wf = workflow(
        r#"[{"id": "fetch", "target": "t"}, {"id": "parse", "target": "t", "after": ["fetch"]},
            {"id": "report", "target": "t", "after": ["parse"], "input": "Report on $parse"}]"#,
    );
    let mut run = Driver::new(&wf, config(&["critic"]));
    run.finish("fetch");
    run.fail("parse", "bad encoding");
    repair_proposal(&mut run, "parse", "critic", add("parse-latin1", "t", None));
    end_offer(&mut run, "parse", "critic");
    assert_eq!(
        run.start_of("parse-latin1").input,
        json!({"task": "study batch7", "inputs": {"fetch": "answer of fetch"}}),
        "a repair waits on what the failed step waited on"
    );
    run.finish("parse-latin1");
    assert_eq!(
        run.start_of("report").input,
        json!("Report on answer of parse-latin1"),
        "$parse now means the repair"
    );
    run.finish("report");
    assert_eq!(run.sched.result().map(|r| r.outcome), Some(Outcome::Completed));
    insta::assert_snapshot!(run.summary());
}

#[test]
fn a_repair_that_would_wait_on_a_dependent_is_refused() {
    let wf =
        workflow(r#"[{"id": "a", "target": "t"}, {"id": "b", "target": "t", "after": ["a"]}]"#);
    let mut run = Driver::new(&wf, config(&["critic"]));
    run.fail("a", "boom");
    repair_proposal(&mut run, "a", "critic", add("fix", "t", Some(&["b"])));
    end_offer(&mut run, "a", "critic");
    assert_eq!(
        run.sched.edits()[0].status,
        EditStatus::Refused("a repair of `a` cannot wait on `b`: that would make a cycle".into())
    );
    assert_eq!(
        run.sched.result().map(|r| r.outcome),
        Some(Outcome::StepFailed { step: "a".into(), error: "boom".into() })
    );
}

#[test]
fn a_repair_call_adds_one_step() {
    let wf = workflow(r#"[{"id": "a", "target": "t"}]"#);
    let cfg = RunConfig {
        bounds: Bounds { approve_edits: true, ..Bounds::default() },
        ..config(&["critic", "other"])
    };
    let mut run = Driver::new(&wf, cfg);
    run.fail("a", "boom");
    repair_proposal(&mut run, "a", "critic", add("fix1", "t", None));
    repair_proposal(&mut run, "a", "critic", add("fix2", "t", None));
    end_offer(&mut run, "a", "critic");
    assert_eq!(
        run.sched.edits()[1].status,
        EditStatus::Refused("this call already proposed a repair step".into())
    );
    run.apply(Event::Decision { proposal: 0, approve: false });
    assert_eq!(
        offers(&run).last().map(|o| o.1.as_str()),
        Some("other"),
        "declined: the next editor is offered it"
    );
    repair_proposal(&mut run, "a", "other", add("fix3", "t", None));
    end_offer(&mut run, "a", "other");
    run.apply(Event::Decision { proposal: 2, approve: true });
    run.finish("fix3");
    insta::assert_snapshot!(run.summary());
}

#[test]
fn cancelled_step_is_not_offered_for_repair() {
    let mut run = Driver::new(&workflow(BATCH7), config(&["independent_reviewer"]));
    run.start("images");
    run.apply(Event::Cancelled { step: "images".into() });
    run.finish("survey");
    run.finish("tests");
    assert!(offers(&run).is_empty());
    assert_eq!(
        run.sched.result().map(|r| r.outcome),
        Some(Outcome::Cancelled { step: Some("images".into()) })
    );
    insta::assert_snapshot!(run.summary());
}

#[test]
fn no_offer_when_editors_can_add_nothing() {
    let cfg = RunConfig {
        bounds: Bounds { max_added_steps: Some(0), ..Bounds::default() },
        ..config(&["critic"])
    };
    let mut run = Driver::new(&workflow(r#"[{"id": "a", "target": "t"}]"#), cfg);
    run.fail("a", "boom");
    assert!(offers(&run).is_empty());
    assert!(run.sched.is_done());
}

#[test]
fn a_failed_editor_calls_proposals_are_refused() {
    let mut run = Driver::new(&workflow(r#"[{"id": "a", "target": "t"}]"#), config(&["critic"]));
    run.fail("a", "boom");
    repair_proposal(&mut run, "a", "critic", add("fix", "t", None));
    run.apply(Event::RepairEnded {
        step: "a".into(),
        editor: "critic".into(),
        error: Some("model down".into()),
    });
    assert_eq!(
        run.sched.edits()[0].status,
        EditStatus::Refused("the editor's call failed: model down".into())
    );
    assert!(run.sched.is_done());
}

#[test]
fn an_editor_step_that_fails_loses_its_proposals() {
    let wf = workflow(r#"[{"id": "review", "target": "critic"}]"#);
    let mut run = Driver::new(&wf, config(&["critic"]));
    run.start("review");
    run.apply(Event::Proposal {
        from: EditorCall::Step { step: "review".into() },
        proposal: Proposal::AddStep {
            step_id: "x".into(),
            target: "t".into(),
            input: None,
            after: None,
            reason: String::new(),
            options: None,
            target_kind: TargetKind::Other,
        },
    });
    run.apply(Event::Failed { step: "review".into(), error: "timeout".into() });
    assert_eq!(run.sched.edits()[0].status, EditStatus::Refused("the editor's step failed".into()));
    assert_eq!(
        offers(&run),
        [("review".to_owned(), "critic".to_owned())],
        "the failed editor step is offered too"
    );
}
