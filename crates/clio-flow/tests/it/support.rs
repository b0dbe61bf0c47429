//! Shared helpers: registries with counting tools and echoing subagents, and the harness
//! that runs a scenario fresh and then replays it from the journal the first run wrote.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use clio_flow::{
    FlowError, FlowOutput, FlowSelection, FnFlow, Registry, RunOutcome, RunReport, Runtime,
    RuntimeConfig, Tool, Worker, WorkerReply, selection,
};
use clio_journal::Journal;
use serde_json::{Value, json};

/// Counts how many times tools and workers really ran.
#[derive(Clone, Default)]
pub(crate) struct Counter(pub Arc<AtomicU64>);

impl Counter {
    pub(crate) fn get(&self) -> u64 {
        self.0.load(Ordering::SeqCst)
    }
}

/// A registry with `echo` (read-only tool), `effect` (side-effecting tool counting runs),
/// `fail` (a tool that fails), and the subagents `writer`, `critic`, `fact-checker`.
pub(crate) fn registry(counter: &Counter) -> Registry {
    let c = counter.clone();
    let w = counter.clone();
    let mut reg = Registry::new()
        .tool(Tool::new("echo", |args: Value| async move { Ok(args) }).read_only())
        .tool(Tool::new("effect", move |args: Value| {
            let c = c.clone();
            async move {
                c.0.fetch_add(1, Ordering::SeqCst);
                Ok(json!({ "done": args }))
            }
        }))
        .tool(Tool::new("fail", |_args: Value| async move {
            Err(clio_flow::FlowError::CallFailed {
                handle: None,
                message: "the tool failed".into(),
            })
        }))
        .agent(Worker::handler("clio/standard", |req| async move {
            Ok(WorkerReply::text(format!("standard: {}", req.text)))
        }));
    for id in ["writer", "critic", "fact-checker", "reviewer"] {
        let w = w.clone();
        reg = reg.subagent(Worker::handler(id, move |req| {
            let w = w.clone();
            let id = req.id.clone();
            async move {
                w.0.fetch_add(1, Ordering::SeqCst);
                let mut reply = WorkerReply::text(format!("{id}({})", req.text));
                reply.input_tokens = 10;
                reply.output_tokens = 5;
                reply.model = "local/test".into();
                Ok(reply)
            }
        }));
    }
    reg
}

pub(crate) fn runtime(journal: &Journal, registry: Registry) -> Runtime {
    Runtime::new(journal.clone(), registry, RuntimeConfig::default())
}

pub(crate) fn sel(id: &str) -> FlowSelection {
    selection(id, json!({}))
}

pub(crate) fn answer(report: &RunReport) -> String {
    match &report.outcome {
        RunOutcome::Succeeded(out) => out.answer.clone(),
        other => panic!("run did not succeed: {other:?}"),
    }
}

pub(crate) fn error(report: &RunReport) -> clio_flow::FlowError {
    match &report.outcome {
        RunOutcome::Failed(err) => err.clone(),
        other => panic!("run did not fail: {other:?}"),
    }
}

/// Runs `id` on `input` fresh, then replays it from the journal in a new runtime: both
/// must end the same, and the replay must submit nothing and run no step.
pub(crate) async fn fresh_then_replay(
    registry: Registry,
    id: &str,
    input: Value,
) -> (RunReport, Journal) {
    let journal = Journal::open_in_memory().unwrap();
    let fresh = runtime(&journal, registry.clone()).run(sel(id), input).await.unwrap();
    let replay = runtime(&journal, registry).replay(fresh.run).await.unwrap();
    assert_eq!(format!("{:?}", fresh.outcome), format!("{:?}", replay.outcome), "replay differs");
    assert_eq!(replay.submitted, 0, "the replay submitted work");
    assert_eq!(replay.steps_run, 0, "the replay ran steps");
    (fresh, journal)
}

/// Calls tool `name` of `registry` with `args` as a flow's code does, in a run of its own:
/// through the gate, the only way a tool runs. Returns the tool's value or the call's error
/// (a run that waits on a question is an error naming it).
pub(crate) async fn call_tool(
    registry: Registry,
    name: &str,
    args: Value,
) -> Result<Value, FlowError> {
    let target = name.to_owned();
    let probe = FnFlow::new("call-tool", move |_task: Value, ctx| {
        let (target, args) = (target.clone(), args.clone());
        async move {
            let r = ctx.call(target, args).await?;
            Ok(FlowOutput::text(r.value.to_string()))
        }
    });
    let journal = Journal::open_in_memory().unwrap();
    let report = runtime(&journal, registry.flow(probe)).run(sel("call-tool"), json!("")).await?;
    match report.outcome {
        RunOutcome::Succeeded(out) => Ok(serde_json::from_str(&out.answer).unwrap()),
        RunOutcome::Failed(err) => Err(err),
        other => Err(FlowError::CallFailed { handle: None, message: format!("{other:?}") }),
    }
}
