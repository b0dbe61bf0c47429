//! The orchestration tools: `run_flow` and `run_workflow` return a handle at once while
//! their child keeps running, `flow_result` reads how the child stands, and bad arguments
//! are refused with a reason.

use std::sync::Arc;

use clio_flow::{CallResult, Ctx, FlowError, FlowOutput, FnFlow, register_orchestration_tools};
use clio_journal::{Journal, TaskStatus};
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
async fn the_team_tools_are_registry_tools_of_the_leader_session() {
    use clio_flow::{
        AgentContext, LeaderSettings, SubagentOutcome, Team, TeamConfig, register_team_tools,
    };
    use clio_journal::SessionId;

    let team = Team::new(
        Journal::open_in_memory().unwrap(),
        |job: clio_flow::SubagentJob| async move {
            match job.task.strip_prefix("hang") {
                Some(_) => std::future::pending().await,
                None => SubagentOutcome::Answer(format!("did {}", job.task)),
            }
        },
        TeamConfig::default(),
    );
    team.create_leader(SessionId("lead".into()), LeaderSettings::default()).await.unwrap();
    let env = team.env(SessionId("lead".into())).with_context(AgentContext {
        model: "local/qwen".into(),
        provider: "ollama".into(),
        messages: Vec::new(),
    });
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
            "{} {} | {} | {} | {}",
            ran[0]["answer"].as_str().unwrap_or(""),
            ran[1]["answer"].as_str().unwrap_or(""),
            waited[0]["status"].as_str().unwrap_or(""),
            cancelled["status"].as_str().unwrap_or(""),
            bad["error"]["reason"].as_str().unwrap_or("")
        )))
    });
    let c = Counter::default();
    let reg = register_team_tools(registry(&c).flow(lead), &env);
    for name in ["council_run", "council_wait", "council_wait_agents", "council_cancel_agent"] {
        assert!(reg.get_tool(name).is_some(), "{name} is registered");
    }
    assert!(reg.get_tool("council_controls").is_some_and(|t| t.read_only));
    let journal = Journal::open_in_memory().unwrap();
    let report = runtime(&journal, reg).run(sel("lead"), json!(null)).await.unwrap();
    assert_eq!(answer(&report), "did a did b | running | cancelled | invalid_task");
}
