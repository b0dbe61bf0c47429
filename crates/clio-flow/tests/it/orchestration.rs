//! The orchestration tools: `run_flow` and `run_workflow` return a handle at once while
//! their child keeps running, `flow_result` reads how the child stands, and bad arguments
//! are refused with a reason.

use std::sync::Arc;

use clio_flow::{
    CallResult, Ctx, FlowError, FlowOutput, FnFlow, Runtime, RuntimeConfig,
    register_orchestration_tools,
};
use clio_journal::{Journal, RunId, TaskId, TaskStatus};
use serde_json::{Value, json};
use tokio::sync::Notify;

use crate::support::{Counter, answer, error, registry, runtime, sel};

/// Calls `flow_result` until the work under `handle` is no longer running.
async fn wait_result(ctx: &Ctx, handle: &Value) -> Result<Value, FlowError> {
    for _ in 0..500 {
        let CallResult { value, .. } = ctx.call("flow_result", json!({ "handle": handle })).await?;
        if value["status"] != "running" {
            return Ok(value);
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    Err(FlowError::stall("still_running", "the background work did not end"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_flow_returns_the_handle_at_once_and_the_result_is_read_later() {
    let c = Counter::default();
    let gate = Arc::new(Notify::new());
    let held = Arc::clone(&gate);
    let slow = FnFlow::new("slow", move |task: Value, _ctx| {
        let held = Arc::clone(&held);
        async move {
            held.notified().await;
            Ok(FlowOutput::text(format!("slow({})", task.as_str().unwrap_or(""))))
        }
    });
    let opener = Arc::clone(&gate);
    let lead = FnFlow::new("lead", move |_t: Value, ctx| {
        let opener = Arc::clone(&opener);
        async move {
            let started =
                ctx.call("run_flow", json!({ "flow": "slow", "input": "x" })).await?.value;
            let before = ctx.call("flow_result", json!({ "handle": started["handle"] })).await?;
            opener.notify_one();
            let after = wait_result(&ctx, &started["handle"]).await?;
            Ok(FlowOutput::text(format!(
                "{} {} | {} | {} {}",
                started["status"].as_str().unwrap_or(""),
                started["target"].as_str().unwrap_or(""),
                before.value["status"].as_str().unwrap_or(""),
                after["status"].as_str().unwrap_or(""),
                after["answer"].as_str().unwrap_or("")
            )))
        }
    });
    let reg = register_orchestration_tools(registry(&c).flow(slow).flow(lead));
    let journal = Journal::open_in_memory().unwrap();
    let report = runtime(&journal, reg).run(sel("lead"), json!(null)).await.unwrap();
    assert_eq!(answer(&report), "running slow | running | succeeded slow(x)");
    let tasks = journal.tasks(report.run).unwrap();
    let tool = tasks.iter().find(|t| t.target == "run_flow").unwrap();
    let child = tasks.iter().find(|t| t.target == "slow").unwrap();
    assert_eq!(child.parent, Some(tool.id), "the started flow is a child of the tool's task");
    assert_eq!(tool.status, TaskStatus::Succeeded, "the tool ended before its child");
    assert_eq!(child.status, TaskStatus::Succeeded);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_flow_passes_options_to_the_flow() {
    let c = Counter::default();
    let lead = FnFlow::new("lead", |_t: Value, ctx| async move {
        let started = ctx
            .call(
                "run_flow",
                json!({
                    "flow": "council",
                    "input": "q",
                    "options": { "members": ["writer"], "synthesizer": "critic" }
                }),
            )
            .await?
            .value;
        let done = wait_result(&ctx, &started["handle"]).await?;
        Ok(FlowOutput::text(done["answer"].as_str().unwrap_or("").to_owned()))
    });
    let reg = register_orchestration_tools(registry(&c).flow(lead));
    let journal = Journal::open_in_memory().unwrap();
    let report = runtime(&journal, reg).run(sel("lead"), json!(null)).await.unwrap();
    assert!(answer(&report).starts_with("critic("), "{}", answer(&report));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_workflow_starts_the_workflow_flow_in_the_background() {
    let c = Counter::default();
    let lead = FnFlow::new("lead", |_t: Value, ctx| async move {
        let started = ctx
            .call(
                "run_workflow",
                json!({
                    "workflow": { "steps": [
                        {"id": "draft", "target": "writer", "input": "$task"},
                        {"id": "check", "target": "critic", "after": ["draft"]}
                    ]},
                    "task": "batch7",
                    "max_added_steps": 0
                }),
            )
            .await?
            .value;
        let done = wait_result(&ctx, &started["handle"]).await?;
        Ok(FlowOutput::text(format!(
            "{} {} {}",
            started["target"].as_str().unwrap_or(""),
            done["status"].as_str().unwrap_or(""),
            done["outputs"]["results"]["draft"].as_str().unwrap_or("")
        )))
    });
    let reg = register_orchestration_tools(registry(&c).flow(lead));
    let journal = Journal::open_in_memory().unwrap();
    let report = runtime(&journal, reg).run(sel("lead"), json!(null)).await.unwrap();
    assert_eq!(answer(&report), "workflow succeeded writer(batch7)");
    assert_eq!(c.get(), 2, "each step ran once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_background_flow_reports_its_error() {
    let c = Counter::default();
    let broken = FnFlow::new("broken", |_t: Value, _ctx| async move {
        Err::<FlowOutput, _>(FlowError::stall("broken", "it always fails"))
    });
    let lead = FnFlow::new("lead", |_t: Value, ctx| async move {
        let started = ctx.call("run_flow", json!({ "flow": "broken" })).await?.value;
        let done = wait_result(&ctx, &started["handle"]).await?;
        Ok(FlowOutput::text(format!(
            "{} {}",
            done["status"].as_str().unwrap_or(""),
            done["error"]["reason"].as_str().unwrap_or("")
        )))
    });
    let reg = register_orchestration_tools(registry(&c).flow(broken).flow(lead));
    let journal = Journal::open_in_memory().unwrap();
    let report = runtime(&journal, reg).run(sel("lead"), json!(null)).await.unwrap();
    assert_eq!(answer(&report), "failed flow_stall");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_arguments_are_refused_with_a_reason() {
    let cases = [
        ("run_flow", json!({ "flow": "nowhere" }), "flow_target_unknown"),
        ("run_flow", json!({ "input": "x" }), "call_refused"),
        ("run_flow", json!({ "flow": "council", "options": [1] }), "call_refused"),
        ("run_workflow", json!({ "task": "x" }), "call_refused"),
        ("run_workflow", json!({ "workflow": {"steps": []}, "extra": 1 }), "call_refused"),
        ("flow_result", json!({ "handle": 9999 }), "call_refused"),
        ("flow_result", json!({}), "call_refused"),
    ];
    for (tool, args, reason) in cases {
        let c = Counter::default();
        let call_args = args.clone();
        let lead = FnFlow::new("lead", move |_t: Value, ctx| {
            let call_args = call_args.clone();
            async move {
                ctx.call(tool, call_args).await?;
                Ok(FlowOutput::text("accepted"))
            }
        });
        let reg = register_orchestration_tools(registry(&c).flow(lead));
        let journal = Journal::open_in_memory().unwrap();
        let report = runtime(&journal, reg).run(sel("lead"), json!(null)).await.unwrap();
        assert_eq!(error(&report).reason(), reason, "{tool} {args}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_team_tools_act_as_the_leader_session_of_the_run() {
    use clio_flow::{SubagentOutcome, Team, TeamConfig, register_team_tools, run_leader, run_team};

    let journal = Journal::open_in_memory().unwrap();
    let team = Team::new(
        journal.clone(),
        |job: clio_flow::SubagentJob| async move {
            match job.task.strip_prefix("hang") {
                Some(_) => std::future::pending().await,
                None => SubagentOutcome::Answer(format!("did {}", job.task)),
            }
        },
        TeamConfig::default(),
    );
    let lead = FnFlow::new("lead", |_t: Value, ctx| async move {
        let ran = ctx.call("council_run", json!({ "tasks": ["a", "b"] })).await?.value;
        let hung =
            ctx.call("council_run", json!({ "tasks": ["hang"], "timeout_secs": 0 })).await?.value;
        let id = hung[0]["session_id"].clone();
        let waited = ctx
            .call("council_wait_agents", json!({ "session_ids": [id.clone()], "timeout_secs": 0 }))
            .await?
            .value;
        let cancelled = ctx.call("council_cancel_agent", json!({ "session_id": id })).await?.value;
        let bad = ctx.call("council_run", json!({ "tasks": [{ "colour": "red" }] })).await?.value;
        Ok(FlowOutput::text(format!(
            "{} {} | {} {} | {} | {}",
            ran[0]["answer"].as_str().unwrap_or(""),
            ran[1]["answer"].as_str().unwrap_or(""),
            id.as_str().unwrap_or(""),
            waited[0]["status"].as_str().unwrap_or(""),
            cancelled["status"].as_str().unwrap_or(""),
            bad["error"]["reason"].as_str().unwrap_or("")
        )))
    });
    let c = Counter::default();
    let reg = register_team_tools(registry(&c).flow(lead), &team);
    for name in ["council_run", "council_wait", "council_wait_agents", "council_cancel_agent"] {
        assert!(reg.get_tool(name).is_some(), "{name} is registered");
    }
    assert!(reg.get_tool("council_controls").is_some_and(|t| t.read_only));
    let report = runtime(&journal, reg).run(sel("lead"), json!(null)).await.unwrap();
    assert_eq!(answer(&report), "did a did b | run-1.3 running | cancelled | invalid_task");
    assert_eq!(run_leader(report.run).0, "run-1");
    let members: Vec<String> = run_team(&journal, report.run)
        .unwrap()
        .iter()
        .map(|m| format!("{} {} {}", m.session_id.0, m.status, m.answer.as_deref().unwrap_or("-")))
        .collect();
    assert_eq!(
        members,
        ["run-1 idle -", "run-1.1 done did a", "run-1.2 done did b", "run-1.3 cancelled -"],
        "the leader is idle once its last call ended with no child at work"
    );
    // The team's sessions belong to the run whose tools made them (fenced by its lease on
    // a shared journal).
    for s in journal.sessions().unwrap() {
        assert_eq!(s.run, Some(report.run), "session {}", s.id);
    }
}

/// Waits until run `run` has a task for `target` in `status`, and returns it.
async fn task_in(journal: &Journal, run: RunId, target: &str, status: TaskStatus) -> TaskId {
    for _ in 0..2000 {
        if let Ok(tasks) = journal.tasks(run)
            && let Some(t) = tasks.iter().find(|t| t.target == target && t.status == status)
        {
            return t.id;
        }
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    panic!("no {target} task {status:?}");
}

/// The registry of one "process": `slow` never ends in the first, and ends at once (counting
/// its runs) in the second; `lead` starts `slow` with run_flow and reads its result.
fn restart_registry(c: &Counter, first: bool) -> clio_flow::Registry {
    let runs = c.clone();
    let slow = FnFlow::new("slow", move |task: Value, _ctx| {
        let runs = runs.clone();
        async move {
            if first {
                std::future::pending::<()>().await;
            }
            runs.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            Ok(FlowOutput::text(format!("slow({})", task.as_str().unwrap_or(""))))
        }
    });
    let lead = FnFlow::new("lead", |_t: Value, ctx| async move {
        let started = ctx.call("run_flow", json!({ "flow": "slow", "input": "x" })).await?.value;
        let done = wait_result(&ctx, &started["handle"]).await?;
        Ok(FlowOutput::text(format!(
            "{} {}",
            done["status"].as_str().unwrap_or(""),
            done["answer"].as_str().unwrap_or("")
        )))
    });
    register_orchestration_tools(registry(c).flow(slow).flow(lead))
}

/// Runs flow `flow` on `rt` (owner `proc-1`) until its `slow` child runs and a
/// `flow_result` call has been recorded, then stops the process there: the run is dropped
/// mid-flight, and the next process's journal open (`proc-2`) marks what it left running
/// as interrupted. Returns the run and the `slow` task.
async fn cut_off_after_flow_result(journal: &Journal, rt: Runtime, flow: &str) -> (RunId, TaskId) {
    let run = rt.create(sel(flow), json!(null)).await.unwrap();
    let driver = tokio::spawn({
        let rt = rt.clone();
        async move { rt.resume(run).await }
    });
    let slow = task_in(journal, run, "slow", TaskStatus::Running).await;
    task_in(journal, run, "flow_result", TaskStatus::Succeeded).await;
    driver.abort();
    let _ = driver.await;
    drop(rt);
    journal.reconcile(&["proc-2"]).unwrap();
    assert_eq!(journal.task(slow).unwrap().unwrap().status, TaskStatus::Interrupted);
    (run, slow)
}

/// A run whose agent started background work with run_flow is cut off while that work
/// runs (the process stops); a new process resumes the run, which finishes the work once,
/// on its first task, and flow_result returns its answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn background_work_cut_off_by_a_restart_finishes_once_after_resume() {
    let journal = Journal::open_in_memory().unwrap();
    let first = Counter::default();
    let config = |owner: &str| RuntimeConfig { owner: owner.into(), ..RuntimeConfig::default() };
    let first_rt = Runtime::new(journal.clone(), restart_registry(&first, true), config("proc-1"));
    let (run, slow) = cut_off_after_flow_result(&journal, first_rt, "lead").await;

    let second = Counter::default();
    let rt = Runtime::new(journal.clone(), restart_registry(&second, false), config("proc-2"));
    let report = rt.resume(run).await.unwrap();
    assert_eq!(answer(&report), "succeeded slow(x)");
    assert_eq!((first.get(), second.get()), (0, 1), "the background flow finished once");
    let tasks = journal.tasks(run).unwrap();
    let slows: Vec<_> = tasks.iter().filter(|t| t.target == "slow").collect();
    assert_eq!(slows.len(), 1, "no second task: {tasks:?}");
    assert_eq!((slows[0].id, slows[0].status), (slow, TaskStatus::Succeeded));
    let replay = rt.replay(run).await.unwrap();
    assert_eq!(answer(&replay), answer(&report));
}

/// Background work cut off by a restart starts again when its run is resumed, even when
/// the agent never asks about it again: the run then waits for it, and it runs once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn background_work_cut_off_by_a_restart_resumes_without_flow_result() {
    let journal = Journal::open_in_memory().unwrap();
    let config = |owner: &str| RuntimeConfig { owner: owner.into(), ..RuntimeConfig::default() };
    // `lead` starts `slow`, asks about it once, and answers without waiting for it.
    let registry = |c: &Counter, first: bool| {
        let lead = FnFlow::new("starter", |_t: Value, ctx| async move {
            let started = ctx.call("run_flow", json!({ "flow": "slow", "input": "y" })).await?;
            let handle = started.value["handle"].clone();
            let status = ctx.call("flow_result", json!({ "handle": handle })).await?.value;
            Ok(FlowOutput::text(format!("started, {}", status["status"].as_str().unwrap_or(""))))
        });
        restart_registry(c, first).flow(lead)
    };
    let first = Counter::default();
    // The flow answers; the run waits for `slow`, which never ends in the first process.
    let first_rt = Runtime::new(journal.clone(), registry(&first, true), config("proc-1"));
    let (run, slow) = cut_off_after_flow_result(&journal, first_rt, "starter").await;

    let second = Counter::default();
    let rt = Runtime::new(journal.clone(), registry(&second, false), config("proc-2"));
    let report = rt.resume(run).await.unwrap();
    assert_eq!(answer(&report), "started, running", "the replayed answer");
    assert_eq!((first.get(), second.get()), (0, 1), "the background flow finished once");
    let slows: Vec<_> =
        journal.tasks(run).unwrap().into_iter().filter(|t| t.target == "slow").collect();
    assert_eq!(slows.len(), 1);
    assert_eq!((slows[0].id, slows[0].status), (slow, TaskStatus::Succeeded));
}

/// The built-in `orchestration` plugin declares exactly the tools the runtime gives an
/// agent for it, with the same descriptions, read-only flags and schemas, so that the
/// declaration and the runtime cannot drift apart again (they once named `run`, `ask`,
/// ... against the runtime's `council_*`).
#[test]
fn the_declaration_matches_the_runtime_tools() {
    use std::collections::BTreeSet;

    let declared = clio_plugins::orchestration();
    let provided = clio_flow::orchestration_tools();
    let declared_names: BTreeSet<&str> = declared.tools.iter().map(|t| t.name.as_str()).collect();
    let provided_names: BTreeSet<&str> = provided.iter().map(|t| t.name.as_str()).collect();
    let listed: BTreeSet<&str> = clio_flow::ORCHESTRATION_TOOLS.into_iter().collect();
    assert_eq!(declared_names, provided_names, "declared vs provided");
    assert_eq!(listed, provided_names, "ORCHESTRATION_TOOLS vs provided");
    assert_eq!(provided.len(), provided_names.len(), "a tool is provided twice");
    for tool in &provided {
        let decl = declared.tools.iter().find(|d| d.name == tool.name).unwrap();
        assert_eq!(decl.description, tool.description, "{}: description", tool.name);
        assert_eq!(decl.read_only, tool.read_only, "{}: read_only", tool.name);
        assert_eq!(decl.input_schema, tool.schema, "{}: schema", tool.name);
    }
    let reg = register_orchestration_tools(clio_flow::Registry::new());
    for name in clio_flow::ORCHESTRATION_TOOLS {
        assert!(reg.get_tool(name).is_some(), "{name} is registered");
    }
}

/// A run resumed by another process finds its leader left by the old one (`lost` after
/// reconcile): the new process's first team call makes it running again under its own
/// name, and its last call leaves it idle.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_process_takes_the_leader_of_a_resumed_run_back() {
    use clio_flow::{SubagentOutcome, Team, TeamConfig};
    use clio_journal::{SessionId, SessionStatus};

    let journal = Journal::open_in_memory().unwrap();
    let team = |owner: &str| {
        let config = TeamConfig { owner: owner.into(), ..TeamConfig::default() };
        Team::new(
            journal.clone(),
            |job: clio_flow::SubagentJob| async move { SubagentOutcome::Answer(job.task) },
            config,
        )
    };
    let leader = SessionId("run-7".into());
    let old = team("proc-1");
    old.begin_leading(&leader).await.unwrap();
    // proc-1 stops in the middle of a call; the next journal open marks its leader lost.
    journal.reconcile(&["proc-2"]).unwrap();
    assert_eq!(journal.session(&leader).unwrap().unwrap().status, SessionStatus::Lost);

    let new = team("proc-2");
    let rec = new.begin_leading(&leader).await.unwrap();
    assert_eq!((rec.status, rec.owner.as_str()), (SessionStatus::Running, "proc-2"));
    new.end_leading(&leader).await.unwrap();
    assert_eq!(journal.session(&leader).unwrap().unwrap().status, SessionStatus::Idle);
}
