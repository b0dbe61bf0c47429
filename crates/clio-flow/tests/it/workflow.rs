//! The built-in `workflow` flow: the seed's DAG runs and replays; an editor's proposals
//! are applied after its step, approved through `ask` across a suspension; an unrepaired
//! failure ends in `FlowStall(step_failed)`.

use clio_flow::{FlowError, RunOutcome, Worker, WorkerReply};
use clio_journal::Journal;
use serde_json::{Value, json};

use crate::scale::chain;
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
    let views: Vec<_> = journal
        .entries(fresh.run)
        .unwrap()
        .into_iter()
        .filter(|e| e.kind == clio_journal::EntryKind::View)
        .collect();
    // Fast steps: the live view is published at the end (and, on a clock, in between).
    let last = views.last().expect("the live view is published");
    let steps = last.payload["command"]["view"]["workflow"].as_array().cloned().unwrap_or_default();
    assert_eq!(steps.len(), 5, "{:?}", last.payload);
    assert!(steps.iter().all(|s| s["status"] == "finished"), "{steps:?}");
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_setting_of_the_wrong_type_is_refused_naming_it() {
    let c = Counter::default();
    let journal = Journal::open_in_memory().unwrap();
    let rt = runtime(&journal, registry(&c));
    for (field, value) in
        [("max_added_steps", json!("two")), ("editors", json!(["a", 1])), ("model", json!(7))]
    {
        let mut input = json!({ "workflow": seed_workflow(), "task": "t" });
        input[field] = value;
        let report = rt.run(sel("workflow"), input).await.unwrap();
        let err = error(&report);
        assert_eq!(err.details()["stall"], "workflow_invalid", "{field}");
        assert!(err.to_string().contains(&format!("`{field}`")), "{field}: {err}");
    }
    assert_eq!(c.get(), 0, "no step ran");
}

/// Returns the workflow-event entries of `run`: (identity, how many events it holds).
pub(crate) fn event_batches(journal: &Journal, run: clio_journal::RunId) -> Vec<(String, usize)> {
    journal
        .entries(run)
        .unwrap()
        .into_iter()
        .filter_map(|e| {
            let id = e.identity.clone()?;
            id.contains("wf-event").then(|| {
                let n = e.payload["result"]["events"].as_array().map_or(1, Vec::len);
                (id, n)
            })
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_events_that_settle_together_are_logged_as_one_entry() {
    let c = Counter::default();
    // With an editor every batch is logged (its proposals are decisions of their own); a
    // workflow without one leaves out the batches its steps' results imply (below).
    let input = json!({ "workflow": seed_workflow(), "task": "batch7", "editors": ["critic"] });
    let (fresh, journal) = fresh_then_replay(registry(&c), "workflow", input).await;
    let batches = event_batches(&journal, fresh.run);
    // Every step started and finished: ten events, in batches numbered from 0.
    assert_eq!(batches.iter().map(|(_, n)| n).sum::<usize>(), 10, "{batches:?}");
    for (i, (id, n)) in batches.iter().enumerate() {
        assert_eq!(id, &format!("key:wf-events-{i}"));
        assert!(*n > 0, "an empty batch is not logged: {batches:?}");
    }
    // The three steps that start together finish in fewer batches than events.
    assert!(batches.len() < 10, "{batches:?}");
    // The live views are named by key, in order, not by where the code publishes them.
    let views: Vec<String> = journal
        .entries(fresh.run)
        .unwrap()
        .into_iter()
        .filter(|e| e.kind == clio_journal::EntryKind::View)
        .map(|e| e.identity.unwrap_or_default())
        .collect();
    let keyed: Vec<String> = (0..views.len()).map(|i| format!("key:wf-view-{i}")).collect();
    assert_eq!(views, keyed);
    // Without an editor, a batch is logged only when it is not every outstanding step:
    // fewer events are logged, under batch numbers that still rise.
    let input = json!({ "workflow": seed_workflow(), "task": "batch7" });
    let (fresh, journal) = fresh_then_replay(registry(&c), "workflow", input).await;
    let batches = event_batches(&journal, fresh.run);
    assert!(batches.iter().map(|(_, n)| n).sum::<usize>() < 10, "{batches:?}");
    let numbers: Vec<u64> = batches
        .iter()
        .map(|(id, _)| id.trim_start_matches("key:wf-events-").parse().unwrap())
        .collect();
    assert!(numbers.windows(2).all(|w| w[0] < w[1]), "{numbers:?}");
}

/// Copies run `run` of `from` into a new journal, each batch of workflow events written as
/// one entry per event (`wf-event-<n>`), as runs were recorded before batches.
fn with_one_entry_per_event(
    from: &Journal,
    run: clio_journal::RunId,
) -> (Journal, clio_journal::RunId) {
    use clio_journal::{NewEntry, NewRun, NewTask, RunUpdate, TaskUpdate};
    let rec = from.run(run).unwrap().unwrap();
    let to = Journal::open_in_memory().unwrap();
    let copy = to
        .create_run(NewRun {
            flow: rec.flow.clone(),
            input: rec.input.clone(),
            input_digest: rec.input_digest.clone(),
            fingerprint: rec.fingerprint.clone(),
            owner: rec.owner.clone(),
            launch: rec.launch.clone(),
        })
        .unwrap();
    for task in from.tasks(run).unwrap() {
        let id = to
            .create_task(NewTask {
                run: copy,
                parent: task.parent,
                kind: task.kind,
                target: task.target.clone(),
                label: task.label.clone(),
                status: clio_journal::TaskStatus::Running,
                model: task.model.clone(),
                owner: task.owner.clone(),
                call: task.call.clone(),
            })
            .unwrap();
        assert_eq!(id, task.id, "tasks are copied with their ids");
        let update = TaskUpdate {
            status: Some(task.status),
            result: task.result.clone(),
            error: task.error.clone(),
            ..TaskUpdate::default()
        };
        to.update_task(id, update).unwrap();
    }
    let mut n = 0;
    for e in from.entries(run).unwrap() {
        let batch = e.identity.as_deref().is_some_and(|i| i.contains("wf-events-"));
        let entries = if batch {
            let events = e.payload["result"]["events"].as_array().unwrap().clone();
            events
                .into_iter()
                .map(|event| {
                    let payload = json!({ "command": { "command": "event", "event": event }, "result": event });
                    n += 1;
                    NewEntry::new(e.kind, payload).with_identity(format!("key:wf-event-{}", n - 1))
                })
                .collect()
        } else {
            let mut copied = NewEntry::new(e.kind, e.payload.clone());
            copied.identity = e.identity.clone();
            copied.task = e.task;
            vec![copied]
        };
        to.append_batch(copy, entries).unwrap();
    }
    let update =
        RunUpdate { status: Some(rec.status), answer: rec.answer.clone(), ..RunUpdate::default() };
    to.update_run(copy, update).unwrap();
    (to, copy)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_logged_one_entry_per_event_replays() {
    let c = Counter::default();
    // An editor makes every batch logged, so that each of the ten events has its entry.
    let input = json!({ "workflow": seed_workflow(), "task": "batch7", "editors": ["critic"] });
    let (fresh, journal) = fresh_then_replay(registry(&c), "workflow", input).await;
    let (legacy, run) = with_one_entry_per_event(&journal, fresh.run);
    let per_event = event_batches(&legacy, run);
    assert_eq!(per_event.len(), 10, "{per_event:?}");
    let replay = runtime(&legacy, registry(&c)).replay(run).await.unwrap();
    assert_eq!(format!("{:?}", replay.outcome), format!("{:?}", fresh.outcome));
    assert_eq!(replay.submitted, 0, "the replay submitted work");
    assert_eq!(c.get(), 5, "no step ran again");
}

/// A chain of side-effecting steps writes no event batch either (each step's intent,
/// acceptance and result are its own), and a small workflow's views are the rest.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chain_of_side_effecting_steps_logs_no_event_batch() {
    let c = Counter::default();
    let input = json!({ "workflow": chain(20, "effect") });
    let (fresh, journal) = fresh_then_replay(registry(&c), "workflow", input).await;
    assert!(fresh.output().is_some(), "{:?}", fresh.outcome);
    assert_eq!(c.get(), 20, "each step ran once");
    assert_eq!(event_batches(&journal, fresh.run), Vec::<(String, usize)>::new());
}

/// A step that waits for a person's answer suspends the chain; the resume rebuilds the
/// steps before it from their recorded results (implicit batches), runs the rest, and the
/// finished run replays exactly.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chain_suspended_by_a_question_resumes_from_its_recorded_steps() {
    let c = Counter::default();
    let asker = clio_flow::FnFlow::new("asker", |_t: Value, ctx| async move {
        let a = ctx.ask("go on?").await?;
        Ok(clio_flow::FlowOutput::text(a))
    });
    let reg = registry(&c).flow(asker);
    let mut wf = chain(6, "effect");
    wf["steps"][3]["target"] = json!("asker");
    let journal = Journal::open_in_memory().unwrap();
    let report = runtime(&journal, reg.clone())
        .run(sel("workflow"), json!({ "workflow": wf }))
        .await
        .unwrap();
    let RunOutcome::AwaitingInput(qs) = &report.outcome else { panic!("{:?}", report.outcome) };
    assert_eq!(c.get(), 3, "the steps before the question ran");
    runtime(&journal, reg.clone()).answer(report.run, qs[0].id, "yes").await.unwrap();
    let done = runtime(&journal, reg.clone()).resume(report.run).await.unwrap();
    let out = done.output().unwrap_or_else(|| panic!("{:?}", done.outcome));
    assert_eq!(out.outputs["results"]["s3"], "yes");
    assert_eq!(c.get(), 5, "no step ran twice");
    assert!(event_batches(&journal, report.run).is_empty());
    let replay = runtime(&journal, reg).replay(report.run).await.unwrap();
    assert_eq!(format!("{:?}", replay.outcome), format!("{:?}", done.outcome));
    assert_eq!(replay.submitted, 0);
}

/// Copies run `run` of `from` into a new journal, its tasks with their ids and each of its
/// entries as `rewrite` turns it into entries.
fn copy_run(
    from: &Journal,
    run: clio_journal::RunId,
    mut rewrite: impl FnMut(&clio_journal::JournalEntry) -> Vec<clio_journal::NewEntry>,
) -> (Journal, clio_journal::RunId) {
    use clio_journal::{NewRun, NewTask, RunUpdate, TaskUpdate};
    let rec = from.run(run).unwrap().unwrap();
    let to = Journal::open_in_memory().unwrap();
    let copy = to
        .create_run(NewRun {
            flow: rec.flow.clone(),
            input: rec.input.clone(),
            input_digest: rec.input_digest.clone(),
            fingerprint: rec.fingerprint.clone(),
            owner: rec.owner.clone(),
            launch: rec.launch.clone(),
        })
        .unwrap();
    for task in from.tasks(run).unwrap() {
        let id = to
            .create_task(NewTask {
                run: copy,
                parent: task.parent,
                kind: task.kind,
                target: task.target.clone(),
                label: task.label.clone(),
                status: clio_journal::TaskStatus::Running,
                model: task.model.clone(),
                owner: task.owner.clone(),
                call: task.call.clone(),
            })
            .unwrap();
        assert_eq!(id, task.id, "tasks are copied with their ids");
        let update = TaskUpdate {
            status: Some(task.status),
            result: task.result.clone(),
            error: task.error.clone(),
            ..TaskUpdate::default()
        };
        to.update_task(id, update).unwrap();
    }
    for e in from.entries(run).unwrap() {
        to.append_batch(copy, rewrite(&e)).unwrap();
    }
    let update =
        RunUpdate { status: Some(rec.status), answer: rec.answer.clone(), ..RunUpdate::default() };
    to.update_run(copy, update).unwrap();
    (to, copy)
}

/// Runs recorded before implicit batches logged every batch, a chain's one per step
/// (`wf-events-<i>` after step `i`'s call): such a run still replays, running nothing,
/// and its workflow state reads the same.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chain_logged_a_batch_per_step_replays() {
    let c = Counter::default();
    let input = json!({ "workflow": chain(5, "echo") });
    let (fresh, journal) = fresh_then_replay(registry(&c), "workflow", input).await;
    let tasks = journal.tasks(fresh.run).unwrap();
    let (legacy, run) = copy_run(&journal, fresh.run, |e| {
        let mut copied = clio_journal::NewEntry::new(e.kind, e.payload.clone());
        copied.identity = e.identity.clone();
        copied.task = e.task;
        let mut out = vec![copied];
        let step = e.identity.as_deref().and_then(|i| i.strip_prefix("key:wf:"));
        if let Some(step) = step {
            let task = tasks.iter().find(|t| t.call == e.identity).expect("the step's task");
            let i: usize = step.trim_start_matches('s').parse().unwrap();
            let done = format!("step:{step}");
            let events = json!({ "events": [
                { "done": done, "event": { "event": "started", "step": step, "handle": task.id.0.to_string() } },
                { "done": done, "event": { "event": "finished", "step": step, "answer": task.result.as_ref().unwrap()["value"] } },
            ] });
            let payload = json!({
                "command": { "command": "event", "event": { "workflow_events": 2 } },
                "result": events,
            });
            out.push(
                clio_journal::NewEntry::new(clio_journal::EntryKind::Event, payload)
                    .with_identity(format!("key:wf-events-{i}")),
            );
        }
        out
    });
    assert_eq!(event_batches(&legacy, run).len(), 5);
    let replay = runtime(&legacy, registry(&c)).replay(run).await.unwrap();
    assert_eq!(format!("{:?}", replay.outcome), format!("{:?}", fresh.outcome));
    assert_eq!(replay.submitted, 0, "the replay submitted work");
    let state = |j: &Journal, r| clio_flow::workflow_state(j, r).unwrap().unwrap();
    assert_eq!(state(&legacy, run), state(&journal, fresh.run));
    assert_eq!(state(&journal, fresh.run)["problem"], Value::Null);
    let now = state(&journal, fresh.run);
    let statuses: Vec<&str> = now["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["status"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(statuses, ["finished"; 5]);
}

/// An editor that proposes two steps after its own.
fn greedy_editor() -> Worker {
    Worker::handler("editor", |req| async move {
        for id in ["polish", "trim"] {
            req.ctx
                .call(
                    "workflow_add_step",
                    json!({ "step_id": id, "target": "writer", "input": "$draft", "reason": "more" }),
                )
                .key(id)
                .await?;
        }
        Ok(WorkerReply::text("two more"))
    })
}

/// The result the run's `wf-limits` recorded.
fn wf_limits(journal: &Journal, run: clio_journal::RunId) -> Value {
    let entries = journal.entries(run).unwrap();
    let entry = entries.iter().find(|e| e.identity.as_deref() == Some("key:wf-limits"));
    entry.expect("wf-limits is recorded").payload["result"].clone()
}

/// The seeds: "in Settings … Workflows sets Steps editors may add and Editing rounds for
/// every workflow, and the tighter of the two limits applies. The limits in force are
/// recorded when the run starts." The person's settings come from the runtime's config
/// (config.toml's `[workflows]`); a resume and a replay apply the recorded ones.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tighter_of_the_workflows_bounds_and_the_persons_settings_applies() {
    let c = Counter::default();
    let reg = registry(&c).subagent(greedy_editor());
    let wf = json!({ "steps": [
        {"id": "draft", "target": "writer", "input": "$task"},
        {"id": "edit", "target": "editor", "after": ["draft"]}
    ]});
    let journal = Journal::open_in_memory().unwrap();
    let person = |added, rounds| clio_flow::RuntimeConfig {
        workflows: clio_workflow::Settings { max_added_steps: added, max_edit_rounds: rounds },
        ..clio_flow::RuntimeConfig::default()
    };

    // The workflow allows 3 added steps, the person 1: one step is added, one refused.
    let rt = clio_flow::Runtime::new(journal.clone(), reg.clone(), person(Some(1), Some(4)));
    let input =
        json!({ "workflow": wf, "task": "essay", "editors": ["editor"], "max_added_steps": 3 });
    let report = rt.run(sel("workflow"), input).await.unwrap();
    let out = report.output().unwrap_or_else(|| panic!("{:?}", report.outcome));
    let edits = out.outputs["edits"].as_array().unwrap();
    let statuses: Vec<&str> = edits.iter().map(|e| e["status"].as_str().unwrap()).collect();
    assert_eq!(statuses, ["applied", "refused"], "{edits:?}");
    assert!(out.outputs["results"].get("polish").is_some());
    assert!(out.outputs["results"].get("trim").is_none());
    let limits = wf_limits(&journal, report.run);
    assert_eq!(limits["limits"]["max_added_steps"], 1, "{limits}");
    assert_eq!(limits["limits"]["max_edit_rounds"], 4, "{limits}");
    assert_eq!(limits["workflow"]["max_added_steps"], 3, "{limits}");
    assert_eq!(limits["workflow"]["max_edit_rounds"], Value::Null, "{limits}");
    assert_eq!(limits["settings"], json!({"max_added_steps": 1, "max_edit_rounds": 4}));

    // A replay under other settings applies the recorded ones, and gives the same answer.
    let replay = clio_flow::Runtime::new(journal.clone(), reg.clone(), person(None, None))
        .replay(report.run)
        .await
        .unwrap();
    assert_eq!(answer(&replay), out.answer);
    assert_eq!(replay.submitted, 0);

    // The workflow's bound is the tighter one: it applies.
    let input =
        json!({ "workflow": wf, "task": "essay", "editors": ["editor"], "max_added_steps": 1 });
    let rt = clio_flow::Runtime::new(journal.clone(), reg.clone(), person(Some(5), None));
    let report = rt.run(sel("workflow"), input).await.unwrap();
    let out = report.output().unwrap();
    let statuses: Vec<&str> = out.outputs["edits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["status"].as_str().unwrap())
        .collect();
    assert_eq!(statuses, ["applied", "refused"]);
    assert_eq!(wf_limits(&journal, report.run)["limits"]["max_added_steps"], 1);

    // No edit rounds allowed by the person: nothing is added, though the workflow is open.
    let input = json!({ "workflow": wf, "task": "essay", "editors": ["editor"] });
    let rt = clio_flow::Runtime::new(journal.clone(), reg, person(None, Some(0)));
    let report = rt.run(sel("workflow"), input).await.unwrap();
    let out = report.output().unwrap();
    assert!(out.outputs["results"].get("polish").is_none(), "{:?}", out.outputs);
    assert_eq!(wf_limits(&journal, report.run)["limits"]["max_edit_rounds"], 0);
}
