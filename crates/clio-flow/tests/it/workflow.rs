//! The built-in `workflow` flow: the seed's DAG runs and replays; an editor's proposals
//! are applied after its step, approved through `ask` across a suspension; an unrepaired
//! failure ends in `FlowStall(step_failed)`.

use clio_flow::{FlowError, RunOutcome, Worker, WorkerReply};
use clio_journal::Journal;
use serde_json::{Value, json};

use crate::support::{Counter, answer, error, fresh_then_replay, registry, runtime, sel};

fn seed_workflow() -> Value {
    json!({ "steps": [
        {"id": "survey", "target": "writer", "input": "$task"},
        {"id": "images", "target": "critic", "input": "grain size"},
        {"id": "tests", "target": "fact-checker", "input": "S-N curves"},
        {"id": "relate", "target": "writer", "after": ["images", "tests"]},
        {"id": "review", "target": "reviewer", "after": ["survey", "relate"]}
    ]})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_seed_workflow_runs_every_step_once_and_replays() {
    let c = Counter::default();
    let input = json!({ "workflow": seed_workflow(), "task": "batch7" });
    let (fresh, journal) = fresh_then_replay(registry(&c), "workflow", input).await;
    assert_eq!(c.get(), 5);
    let text = answer(&fresh);
    assert!(text.starts_with("## review (local/test)"), "{text}");
    let out = fresh.output().unwrap();
    assert_eq!(out.outputs["results"]["survey"], "writer(batch7)");
    assert_eq!(out.outputs["workflow"].as_array().map(Vec::len), Some(5));
    let views = journal
        .entries(fresh.run)
        .unwrap()
        .iter()
        .filter(|e| e.kind == clio_journal::EntryKind::View)
        .count();
    assert!(views >= 2, "the live view is published");
}

fn editor() -> Worker {
    Worker::handler("editor", |req| async move {
        req.ctx
            .call(
                "workflow_add_step",
                json!({ "step_id": "polish", "target": "writer", "input": "polish $draft", "reason": "rough" }),
            )
            .await?;
        Ok(WorkerReply::text("looks rough"))
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_editor_proposal_waits_for_approval_across_a_suspension() {
    let c = Counter::default();
    let reg = registry(&c).subagent(editor());
    let wf = json!({ "steps": [
        {"id": "draft", "target": "writer", "input": "$task"},
        {"id": "edit", "target": "editor", "after": ["draft"]}
    ]});
    let input = json!({ "workflow": wf, "task": "essay", "editors": ["editor"], "approve_edits": true, "max_added_steps": 1 });
    let journal = Journal::open_in_memory().unwrap();
    let rt = runtime(&journal, reg.clone());
    let report = rt.run(sel("workflow"), input).await.unwrap();
    let RunOutcome::AwaitingInput(qs) = &report.outcome else { panic!("{:?}", report.outcome) };
    assert_eq!(qs[0].schema, "bool");
    rt.answer(report.run, qs[0].id, "yes").await.unwrap();
    let rt2 = runtime(&journal, reg.clone());
    let done = rt2.resume(report.run).await.unwrap();
    let out = done.output().unwrap_or_else(|| panic!("{:?}", done.outcome));
    assert_eq!(out.outputs["results"]["polish"], "writer(polish writer(essay))");
    assert_eq!(out.outputs["edits"][0]["status"], "applied");
    let replay = runtime(&journal, reg).replay(report.run).await.unwrap();
    assert_eq!(answer(&replay), out.answer);
    assert_eq!(replay.submitted, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unrepaired_failure_stalls_with_step_failed() {
    let c = Counter::default();
    let wf = json!({ "steps": [
        {"id": "a", "target": "fail", "input": {"x": 1}},
        {"id": "b", "target": "writer", "after": ["a"]}
    ]});
    let journal = Journal::open_in_memory().unwrap();
    let report = runtime(&journal, registry(&c))
        .run(sel("workflow"), json!({ "workflow": wf }))
        .await
        .unwrap();
    let err = error(&report);
    let FlowError::FlowStall { stall, step, .. } = &err else { panic!("{err:?}") };
    assert_eq!((stall.as_str(), step.as_str()), ("step_failed", "a"));
    assert_eq!(c.get(), 0, "the dependent was skipped");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invalid_workflow_is_refused_naming_the_problem() {
    let c = Counter::default();
    let wf = json!({ "steps": [{"id": "a", "target": "nobody"}] });
    let journal = Journal::open_in_memory().unwrap();
    let report = runtime(&journal, registry(&c))
        .run(sel("workflow"), json!({ "workflow": wf }))
        .await
        .unwrap();
    let err = error(&report);
    assert_eq!(err.details()["stall"], "workflow_invalid");
    assert!(err.to_string().contains("nobody"), "{err}");
}
