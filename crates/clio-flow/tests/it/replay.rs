//! Fresh runs and their replays agree, and a resumed run continues from its records: the
//! seed's review flow, steps, child flows, keys, and the crash states of the call protocol.

use clio_flow::{CallInput, FlowError, FlowOutput, FnFlow, RunOutcome};
use clio_journal::{EntryKind, Journal, NewEntry, NewTask, TaskKind, TaskStatus};
use serde_json::{Value, json};

use crate::support::{Counter, answer, error, fresh_then_replay, registry, runtime, sel};

fn review() -> FnFlow {
    FnFlow::new("review", |task: Value, ctx| async move {
        let draft = ctx.call("writer", ()).await?;
        let reviews = ctx
            .gather(["critic", "fact-checker"].iter().map(|r| ctx.call(*r, &draft)).collect())
            .await?;
        let answers: Vec<String> = reviews.iter().map(|r| r.answer.clone()).collect();
        let last = ctx
            .call("writer", json!({ "task": task, "draft": draft.answer, "reviews": answers }))
            .await?;
        Ok(FlowOutput::from(last))
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_seed_review_flow_runs_and_replays_the_same() {
    let counter = Counter::default();
    let reg = registry(&counter).flow(review());
    let (fresh, journal) = fresh_then_replay(reg, "review", json!("a poem")).await;
    let text = answer(&fresh);
    assert!(text.starts_with("writer({\"task\":\"a poem\""), "{text}");
    assert!(text.contains("critic(writer(a poem))"), "{text}");
    assert_eq!(counter.get(), 4, "four subagent calls, each once");
    let tasks = journal.tasks(fresh.run).unwrap();
    assert_eq!(tasks.len(), 4);
    assert!(tasks.iter().all(|t| t.status == TaskStatus::Succeeded));
    assert_eq!(fresh.submitted, 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn steps_run_once_and_child_flows_nest_with_their_parent() {
    let counter = Counter::default();
    let child = FnFlow::new("child", |task: Value, ctx| async move {
        let n: u64 = ctx.step("double", || async { Ok(task.as_u64().unwrap_or(0) * 2) }).await?;
        let depth = ctx.depth();
        Ok(FlowOutput::text(format!("{n}@{depth}")))
    });
    let parent = FnFlow::new("parent", |_task: Value, ctx| async move {
        let mut parts = Vec::new();
        for i in 0..3u64 {
            let r = ctx.call("child", json!(i)).await?;
            parts.push(r.answer);
        }
        let t = ctx.now_ms().await?;
        ctx.record_event(json!({ "parts": parts.len() })).await?;
        ctx.publish(json!({ "view": parts })).await?;
        assert!(t > 0);
        Ok(FlowOutput::text(parts.join(",")))
    });
    let reg = registry(&counter).flow(child).flow(parent);
    let (fresh, journal) = fresh_then_replay(reg, "parent", json!(null)).await;
    assert_eq!(answer(&fresh), "0@1,2@1,4@1");
    let tasks = journal.tasks(fresh.run).unwrap();
    assert!(tasks.iter().all(|t| t.parent.is_none() && t.kind == TaskKind::Flow));
    let kinds: Vec<EntryKind> =
        journal.entries(fresh.run).unwrap().iter().map(|e| e.kind).collect();
    assert!(kinds.contains(&EntryKind::Event) && kinds.contains(&EntryKind::View));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inputs_pass_text_results_and_json() {
    let counter = Counter::default();
    let flow = FnFlow::new("inputs", |_t: Value, ctx| async move {
        let a = ctx.call("echo", json!({ "x": 1 })).await?;
        let b = ctx.call("writer", &a).await?;
        let c = ctx.call("writer", "plain").await?;
        let d = ctx.call("writer", CallInput::Json(json!([1, 2]))).await?;
        Ok(FlowOutput::text(format!("{}|{}|{}|{}", a.public_text(), b.answer, c.answer, d.answer)))
    });
    let reg = registry(&counter).flow(flow);
    let (fresh, _) = fresh_then_replay(reg, "inputs", json!("t")).await;
    assert_eq!(answer(&fresh), "{\"x\":1}|writer({\"x\":1})|writer(plain)|writer([1,2])");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resumed_run_returns_finished_calls_from_their_records() {
    let counter = Counter::default();
    let flow = FnFlow::new("twice", |_t: Value, ctx| async move {
        ctx.call("effect", json!(1)).key("first").await?;
        let go = ctx.ask_bool("continue?").await?;
        ctx.call("effect", json!(2)).key("second").await?;
        Ok(FlowOutput::text(format!("{go}")))
    });
    let reg = registry(&counter).flow(flow);
    let journal = Journal::open_in_memory().unwrap();
    let report = runtime(&journal, reg.clone()).run(sel("twice"), json!(null)).await.unwrap();
    let RunOutcome::AwaitingInput(questions) = &report.outcome else {
        panic!("{:?}", report.outcome)
    };
    assert_eq!(counter.get(), 1);
    let rt = runtime(&journal, reg);
    rt.answer(report.run, questions[0].id, "yes").await.unwrap();
    let resumed = rt.resume(report.run).await.unwrap();
    assert_eq!(answer(&resumed), "true");
    assert_eq!(counter.get(), 2, "the first effect is not run again");
    assert_eq!(resumed.submitted, 1);
}

/// Writes the records a process leaves when it dies inside the call protocol of the call
/// keyed `key`: the intent, and when `task` says so, the task and its acceptance.
fn crash_state(
    journal: &Journal,
    run: clio_journal::RunId,
    key: &str,
    target: &str,
    task: Option<TaskKind>,
) {
    let id = format!("key:{key}");
    journal
        .append(
            run,
            NewEntry::new(EntryKind::Call, json!({ "command": "call", "target": target }))
                .with_identity(id.clone()),
        )
        .unwrap();
    if let Some(kind) = task {
        let t = journal
            .create_task(NewTask {
                run,
                parent: None,
                kind,
                target: target.into(),
                label: target.into(),
                status: TaskStatus::Running,
                model: None,
                owner: "gone".into(),
                call: None,
            })
            .unwrap();
        journal
            .append(
                run,
                NewEntry::new(EntryKind::Call, json!({ "accepted": t.0 }))
                    .with_identity(format!("{id}@accepted"))
                    .with_task(t),
            )
            .unwrap();
    }
}

fn keyed(target: &'static str) -> FnFlow {
    FnFlow::new("keyed", move |_t: Value, ctx| async move {
        match ctx.call(target, json!({ "n": 1 })).key("k").await {
            Ok(r) => Ok(FlowOutput::text(format!("ok {}", r.public_text()))),
            Err(err) => Err(err),
        }
    })
}

/// A run created with a launch holds it in its record from the start, and keeps it through
/// a resume to the end; a run created without one has none.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_launch_is_recorded_with_the_run_and_kept_to_its_end() {
    let counter = Counter::default();
    let reg = registry(&counter).flow(keyed("echo"));
    let journal = Journal::open_in_memory().unwrap();
    let rt = runtime(&journal, reg);
    let launch = json!({"agent": "/agents/a.toml", "plugins": ["/plugins/p"], "model": ""});
    let run = rt.create_with_launch(sel("keyed"), json!(null), launch.clone()).await.unwrap();
    assert_eq!(journal.run(run).unwrap().unwrap().launch, Some(launch.clone()));
    let report = rt.resume(run).await.unwrap();
    assert_eq!(answer(&report), "ok {\"n\":1}");
    let done = journal.run(run).unwrap().unwrap();
    assert_eq!((done.status, done.launch), (clio_journal::RunStatus::Succeeded, Some(launch)));
    let plain = rt.create(sel("keyed"), json!(null)).await.unwrap();
    assert_eq!(journal.run(plain).unwrap().unwrap().launch, None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unconfirmed_acceptance_is_uncertain_and_never_resubmitted() {
    let counter = Counter::default();
    let reg = registry(&counter).flow(keyed("effect"));
    let journal = Journal::open_in_memory().unwrap();
    let rt = runtime(&journal, reg);
    let run = rt.create(sel("keyed"), json!(null)).await.unwrap();
    crash_state(&journal, run, "k", "effect", None);
    let report = rt.resume(run).await.unwrap();
    let err = error(&report);
    assert!(matches!(err, FlowError::TaskStateUncertain { .. }), "{err:?}");
    assert_eq!(err.reason(), "task_state_uncertain");
    assert_eq!(counter.get(), 0);
    assert!(journal.tasks(run).unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_side_effecting_tool_left_running_is_interrupted() {
    let counter = Counter::default();
    let reg = registry(&counter).flow(keyed("effect"));
    let journal = Journal::open_in_memory().unwrap();
    let rt = runtime(&journal, reg);
    let run = rt.create(sel("keyed"), json!(null)).await.unwrap();
    crash_state(&journal, run, "k", "effect", Some(TaskKind::Tool));
    let err = error(&rt.resume(run).await.unwrap());
    assert!(matches!(err, FlowError::CallInterrupted { handle: Some(_), .. }), "{err:?}");
    assert_eq!(counter.get(), 0, "never run twice");
    assert_eq!(journal.tasks(run).unwrap()[0].status, TaskStatus::Failed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_only_tool_left_running_runs_again_on_the_same_task() {
    let counter = Counter::default();
    let reg = registry(&counter).flow(keyed("echo"));
    let journal = Journal::open_in_memory().unwrap();
    let rt = runtime(&journal, reg);
    let run = rt.create(sel("keyed"), json!(null)).await.unwrap();
    crash_state(&journal, run, "k", "echo", Some(TaskKind::Tool));
    let report = rt.resume(run).await.unwrap();
    assert_eq!(answer(&report), "ok {\"n\":1}");
    let tasks = journal.tasks(run).unwrap();
    assert_eq!(tasks.len(), 1);
    assert_eq!(tasks[0].status, TaskStatus::Succeeded);
}

/// A read-only tool a flow calls is recorded once it has ended: its intent, and its task,
/// which names the call (no acceptance entry names the task), already ended with its
/// result or its error (which names the task); a replay returns both without calling the
/// tool.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_only_tool_a_flow_calls_is_recorded_once_it_has_ended() {
    let calls = Counter::default();
    let counted = calls.clone();
    let lookup = clio_flow::Tool::new("lookup", move |args: Value| {
        let counted = counted.clone();
        async move {
            counted.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            match args["n"].as_u64() {
                Some(n) => Ok(json!({ "found": n })),
                None => Err(FlowError::CallFailed { handle: None, message: "no n".into() }),
            }
        }
    })
    .read_only();
    let flow = FnFlow::new("look", |_t: Value, ctx| async move {
        let found = ctx.call("lookup", json!({ "n": 7 })).await?;
        let missing = ctx.call("lookup", json!({})).await.unwrap_err();
        Ok(FlowOutput::text(format!(
            "{} {} {:?}",
            found.value,
            found.handle.0,
            missing.handle().map(|h| h.0)
        )))
    });
    let reg = registry(&Counter::default()).tool(lookup).flow(flow);
    let (fresh, journal) = fresh_then_replay(reg, "look", json!(null)).await;
    assert_eq!(answer(&fresh), "{\"found\":7} 1 Some(2)");
    assert_eq!(calls.get(), 2, "the replay called nothing");
    let tasks = journal.tasks(fresh.run).unwrap();
    assert_eq!(tasks[0].status, TaskStatus::Succeeded);
    assert_eq!(tasks[0].result.as_ref().unwrap()["handle"], 1);
    assert_eq!(tasks[1].status, TaskStatus::Failed);
    let error: Value = serde_json::from_str(tasks[1].error.as_deref().unwrap()).unwrap();
    assert_eq!(
        (error["reason"].as_str(), error["handle"].as_u64()),
        (Some("call_failed"), Some(2))
    );
    let entries = journal.entries(fresh.run).unwrap();
    let intents: Vec<String> = entries
        .iter()
        .filter(|e| e.kind == EntryKind::Call)
        .map(|e| {
            assert_eq!(e.task, None, "an intent names the task that made the call: none here");
            e.identity.clone().unwrap()
        })
        .collect();
    assert_eq!(intents.len(), 2, "each call: its intent, and no acceptance entry: {intents:?}");
    let named: Vec<String> = tasks.iter().map(|t| t.call.clone().unwrap()).collect();
    assert_eq!(named, intents, "each task names the call that made it");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_finished_run_is_not_run_again() {
    let counter = Counter::default();
    let flow = FnFlow::new("once", |_t: Value, ctx| async move {
        ctx.call("effect", json!(1)).await?;
        Ok(FlowOutput::text("done"))
    });
    let reg = registry(&counter).flow(flow);
    let journal = Journal::open_in_memory().unwrap();
    let rt = runtime(&journal, reg);
    let first = rt.run(sel("once"), json!(null)).await.unwrap();
    let again = rt.resume(first.run).await.unwrap();
    assert_eq!(answer(&again), "done");
    assert_eq!(counter.get(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn start_evidence_tool_results_and_receipts() {
    let c = Counter::default();
    let reader = clio_flow::Worker::handler("reader", |req| async move {
        let seen: Vec<String> =
            req.evidence.iter().map(|e| e["answer"].as_str().unwrap_or("").to_owned()).collect();
        req.ctx.call("echo", json!({ "inner": 1 })).await?;
        Ok(clio_flow::WorkerReply::text(format!("read {}", seen.join("+"))))
    });
    let flow = FnFlow::new("misc", |_t: Value, ctx| async move {
        let handle = ctx.start("writer", "bg").await?;
        let draft = ctx.call("writer", "fg").label("the writer").await?;
        let read = ctx.call("reader", "go").evidence([draft.handle]).await?;
        let tools = ctx.tool_results(read.handle).await?;
        let receipts = ctx.permission_receipts(false).await?;
        Ok(FlowOutput::text(format!(
            "{} | {} tool | receipts {} | started {}",
            read.answer,
            tools.len(),
            receipts.as_array().map_or(0, Vec::len),
            handle.0 > 0
        )))
    });
    let reg = registry(&c).subagent(reader).flow(flow);
    let (fresh, journal) = fresh_then_replay(reg, "misc", json!(null)).await;
    assert_eq!(answer(&fresh), "read writer(fg) | 1 tool | receipts 0 | started true");
    let tasks = journal.tasks(fresh.run).unwrap();
    assert!(tasks.iter().any(|t| t.label == "the writer"));
    assert!(
        tasks.iter().all(|t| t.status == TaskStatus::Succeeded),
        "started work finished before the run ended"
    );
    let inner = tasks.iter().find(|t| t.target == "echo").unwrap();
    let reader = tasks.iter().find(|t| t.target == "reader").unwrap();
    assert_eq!(inner.parent, Some(reader.id), "a child's calls are tasks under it");
}

/// A flow that interprets a program given as its input: `["step", n]` doubles `n` in a
/// step, `["echo", n]` calls a read-only tool, `["effect", n]` a side-effecting one,
/// `["child", n]` a child flow, `["ask", n]` waits for a person (a process exit).
fn interpreter() -> FnFlow {
    FnFlow::new("program", |program: Value, ctx| async move {
        let mut out = Vec::new();
        for op in program.as_array().cloned().unwrap_or_default() {
            let n = op[1].as_u64().unwrap_or(0);
            let v = match op[0].as_str().unwrap_or("") {
                "step" => ctx.step("double", || async move { Ok(n * 2) }).await?,
                "echo" => {
                    ctx.call("echo", json!({ "n": n })).await?.value["n"].as_u64().unwrap_or(0)
                }
                "effect" => {
                    ctx.call("effect", json!(n)).await?.value["done"].as_u64().unwrap_or(0) + 100
                }
                "child" => {
                    ctx.call("program", json!([["step", n]])).await?.answer.parse().unwrap_or(0)
                }
                _ => ctx.ask(&format!("go on after {n}?")).await?.len() as u64,
            };
            out.push(v.to_string());
        }
        Ok(FlowOutput::text(out.join(",")))
    })
}

/// The plain model of [`interpreter`]: what its answer must be when every question is
/// answered "yes".
fn model(program: &[(u8, u64)]) -> String {
    let parts: Vec<String> = program
        .iter()
        .map(|(op, n)| match op {
            0 | 3 => n * 2,
            1 => *n,
            2 => n + 100,
            _ => 3,
        })
        .map(|v| v.to_string())
        .collect();
    parts.join(",")
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(24))]

    /// Model-based: a random program, interrupted at every question (the process exits),
    /// answered and resumed in a new runtime each time, ends with the model's answer, runs
    /// each effect exactly once, and replays without submitting anything.
    #[test]
    fn random_programs_resume_and_replay_like_the_model(
        program in proptest::collection::vec((0u8..5, 0u64..50), 1..12)
    ) {
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        rt.block_on(async {
            let c = Counter::default();
            let reg = registry(&c).flow(interpreter());
            let input = Value::Array(program.iter().map(|(op, n)| {
                let name = ["step", "echo", "effect", "child", "ask"][usize::from(*op)];
                json!([name, n])
            }).collect());
            let journal = Journal::open_in_memory().unwrap();
            let mut report = runtime(&journal, reg.clone()).run(sel("program"), input).await.unwrap();
            let mut asked = 0;
            while let RunOutcome::AwaitingInput(qs) = &report.outcome {
                let fresh = runtime(&journal, reg.clone());
                fresh.answer(report.run, qs[0].id, "yes").await.unwrap();
                asked += 1;
                report = fresh.resume(report.run).await.unwrap();
            }
            assert_eq!(asked, program.iter().filter(|(op, _)| *op == 4).count());
            assert_eq!(answer(&report), model(&program));
            let effects = program.iter().filter(|(op, _)| *op == 2).count() as u64;
            assert_eq!(c.get(), effects, "each effect exactly once");
            let replay = runtime(&journal, reg).replay(report.run).await.unwrap();
            assert_eq!(answer(&replay), answer(&report));
            assert_eq!((replay.submitted, replay.steps_run), (0, 0));
        });
    }
}

/// A run that returns has let go of its journal: the file opens again at once, every time,
/// after a fresh run and after a replay (whose loaded records are freed in the background).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_journal_opens_again_as_soon_as_a_run_returns() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("journal.redb");
    let c = Counter::default();
    for round in 0..20 {
        let journal = clio_journal::Journal::open(&path, clio_journal::JournalConfig::default())
            .unwrap_or_else(|e| panic!("round {round}: {e}"));
        let rt = runtime(&journal, registry(&c));
        let fresh = rt
            .run(
                sel("workflow"),
                json!({ "workflow": { "steps": [
            { "id": "a", "target": "writer", "input": "x" },
            { "id": "b", "target": "writer", "after": ["a"] }
        ] } }),
            )
            .await
            .unwrap();
        rt.replay(fresh.run).await.unwrap();
    }
}

/// `Runtime::start` creates the run with its launch in one transaction and hands back a
/// handle that drives it from the record as created; bad options are refused before
/// anything is recorded; a drive cut short is taken up by `resume` like any other run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn start_creates_the_run_and_its_handle_drives_it() {
    let c = Counter::default();
    let lead = FnFlow::new("lead", |_t: Value, ctx| async move {
        let r = ctx.call("effect", json!({ "n": 1 })).await?;
        Ok(FlowOutput::text(r.value.to_string()))
    });
    let journal = Journal::open_in_memory().unwrap();
    let rt = runtime(&journal, registry(&c).flow(lead));
    let handle = rt.start(sel("lead"), json!("go"), Some(json!({ "by": "test" }))).await.unwrap();
    let run = handle.id();
    let rec = journal.run(run).unwrap().unwrap();
    assert_eq!(rec.status, clio_journal::RunStatus::Running);
    assert_eq!(rec.launch, Some(json!({ "by": "test" })), "the launch is in the run's record");
    assert_eq!(c.get(), 0, "nothing runs before the handle drives it");
    let report = handle.drive().await.unwrap();
    assert_eq!(report.run, run);
    assert_eq!(answer(&report), r#"{"done":{"n":1}}"#);
    assert_eq!(c.get(), 1);
    // Driven again, the finished run returns its outcome and runs nothing.
    let again = rt.resume(run).await.unwrap();
    assert_eq!(answer(&again), r#"{"done":{"n":1}}"#);
    assert_eq!(c.get(), 1);

    let bad = clio_flow::selection("lead", json!({ "no_such_option": 1 }));
    let runs_before = journal.runs(&clio_journal::RunFilter::default()).unwrap().len();
    assert!(rt.start(bad, json!(null), None).await.is_err());
    assert_eq!(
        journal.runs(&clio_journal::RunFilter::default()).unwrap().len(),
        runs_before,
        "a refused start records nothing"
    );
}
