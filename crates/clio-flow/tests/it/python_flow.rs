//! Flows written in Python (`flows/*.py` of a plugin) on the runtime: their commands are
//! recorded with the `.py` site as identity, replay answers them from the history without
//! running anything (a step's function neither), `as_completed` delivers in the recorded
//! order whatever order the calls finish in, and what the Python code does wrong ends the
//! flow with an error naming the file.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use clio_flow::{
    FlowError, Registry, RunOutcome, Runtime, RuntimeConfig, Sandbox, Tool, Workspace,
    register_plugin,
};
use clio_journal::Journal;
use proptest::prelude::*;
use serde_json::{Value, json};

use crate::support::{Counter, answer, registry, sel};

/// Writes a plugin `py-test` with `flows` (file name, text) under `root`.
fn plugin(root: &Path, flows: &[(&str, &str)]) -> clio_plugins::Plugin {
    let dir = root.join("ai.iowarp.clio");
    std::fs::create_dir_all(dir.join("flows")).unwrap();
    std::fs::write(dir.join("plugin.toml"), "id = \"py-test\"\nversion = \"0.1.0\"\n").unwrap();
    for (name, text) in flows {
        std::fs::write(dir.join("flows").join(name), text).unwrap();
    }
    clio_plugins::load_plugin(root).unwrap()
}

/// A runtime on `journal` with the Python plugin registered (trusted), no sandbox (the
/// sandbox's own tests are the CLI's).
fn python_runtime(journal: &Journal, registry: Registry, plugin: &clio_plugins::Plugin) -> Runtime {
    let registry = register_plugin(registry, plugin, true, &Workspace::new(None)).unwrap();
    let config = RuntimeConfig { sandbox: Sandbox::off(), ..RuntimeConfig::default() };
    Runtime::new(journal.clone(), registry, config)
}

/// A tool `gate` whose call `i` ends only once `advance` was called `position[i]` times.
fn gates(position: Vec<u64>) -> (Tool, Tool) {
    let (tx, rx) = tokio::sync::watch::channel(0u64);
    let tx = Arc::new(tx);
    let gate = Tool::new("gate", move |args: Value| {
        let mut turn = rx.clone();
        let position = position.clone();
        async move {
            let i = args["i"].as_u64().unwrap_or(0) as usize;
            while *turn.borrow() < position[i] {
                if turn.changed().await.is_err() {
                    break;
                }
            }
            Ok(json!(i))
        }
    })
    .read_only();
    let advance = Tool::new("advance", move |_args: Value| {
        let tx = Arc::clone(&tx);
        async move {
            tx.send_modify(|t| *t += 1);
            Ok(json!(null))
        }
    })
    .read_only();
    (gate, advance)
}

const STREAM: &str = r#"
from clio_agent.sdk import Flow


class Stream(Flow):
    id = "stream"
    n: int = 6

    async def forward(self, task, ctx):
        calls = [ctx.call("gate", {"i": i}) for i in range(self.n)]
        seen = []
        async for result in ctx.as_completed(calls):
            seen.append(str(result.index))
            await ctx.call("advance", {"after": result.index})
        first = await ctx.call("echo", {"after": seen[0]})
        return ",".join(seen) + "|" + first.value["after"]
"#;

/// Runs the Python stream with its calls finishing in `order`, then replays it `replays`
/// times; returns the fresh answer and the replays'.
async fn python_stream(order: &[u64], replays: usize) -> (String, Vec<String>) {
    let mut position = vec![0; order.len()];
    for (pos, i) in order.iter().enumerate() {
        position[*i as usize] = pos as u64;
    }
    let dir = tempfile::tempdir().unwrap();
    let plugin = plugin(dir.path(), &[("stream.py", STREAM)]);
    let (gate, advance) = gates(position);
    let reg = registry(&Counter::default()).tool(gate).tool(advance);
    let journal = Journal::open_in_memory().unwrap();
    let options = json!({ "n": order.len() });
    let fresh = python_runtime(&journal, reg.clone(), &plugin)
        .run(clio_flow::selection("stream", options), json!(null))
        .await
        .unwrap();
    let fresh_answer = answer(&fresh);
    let mut again = Vec::new();
    for _ in 0..replays {
        let report =
            python_runtime(&journal, reg.clone(), &plugin).replay(fresh.run).await.unwrap();
        again.push(answer(&report));
    }
    (fresh_answer, again)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_as_completed_replays_in_the_recorded_order() {
    let (fresh, replays) = python_stream(&[3, 1, 4, 0, 5, 2], 2).await;
    assert_eq!(fresh, "3,1,4,0,5,2|3");
    for replay in replays {
        assert_eq!(replay, fresh);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 6, ..ProptestConfig::default() })]

    /// Random finishing orders: a Python flow's fresh run and its replays see the same
    /// order and take the same branch.
    #[test]
    fn python_replays_yield_in_the_fresh_runs_order(
        order in Just((0..5u64).collect::<Vec<_>>()).prop_shuffle()
    ) {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let (fresh, replays) = rt.block_on(python_stream(&order, 2));
        let expected: Vec<String> = order.iter().map(u64::to_string).collect();
        prop_assert_eq!(&fresh, &format!("{}|{}", expected.join(","), order[0]));
        for replay in replays {
            prop_assert_eq!(&replay, &fresh);
        }
    }
}

const STEPS: &str = r#"
from clio_agent.sdk import Flow

RAN = []


class Steps(Flow):
    id = "steps"

    async def forward(self, task, ctx):
        total = 0
        for i in range(5):
            total += await ctx.step(lambda i=i: RAN.append(i) or i)
        await ctx.call("effect", {"total": total})
        draft = await ctx.call("writer", task)
        return {"answer": draft.answer, "total": total, "ran": len(RAN)}
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_python_flow_replays_without_running_its_steps_or_calls_again() {
    let dir = tempfile::tempdir().unwrap();
    let plugin = plugin(dir.path(), &[("steps.py", STEPS)]);
    let counter = Counter::default();
    let journal = Journal::open_in_memory().unwrap();
    let fresh = python_runtime(&journal, registry(&counter), &plugin)
        .run(sel("steps"), json!("a poem"))
        .await
        .unwrap();
    let RunOutcome::Succeeded(out) = &fresh.outcome else { panic!("{:?}", fresh.outcome) };
    assert_eq!(out.value["total"], 10);
    assert_eq!(out.value["answer"], "writer(a poem)");
    let effects = counter.get();
    assert_eq!(effects, 2, "the effect and the writer ran once each");
    // A new runtime (a new child): the steps' functions do not run again.
    let replay =
        python_runtime(&journal, registry(&counter), &plugin).replay(fresh.run).await.unwrap();
    let RunOutcome::Succeeded(again) = &replay.outcome else { panic!("{:?}", replay.outcome) };
    assert_eq!(again.value["total"], 10);
    assert_eq!(again.value["ran"], 0, "no step function ran in the replay");
    assert_eq!(counter.get(), effects, "nothing ran again");
    // Each step is one entry, as for a Rust flow.
    let steps = journal
        .entries(fresh.run)
        .unwrap()
        .into_iter()
        .filter(|e| e.kind == clio_journal::EntryKind::Step)
        .count();
    assert_eq!(steps, 5);
}

const CALLS_ANOTHER: &str = r#"
from clio_agent.sdk import Flow


class Outer(Flow):
    id = "outer"

    async def forward(self, task, ctx):
        inner = await ctx.call("inner", {"x": 2})
        council = await ctx.call(Flow("inner", factor=10), {"x": 1})
        return f"{inner.answer}+{council.answer}"


class Inner(Flow):
    id = "inner"
    factor: int = 3

    async def forward(self, task, ctx):
        echoed = await ctx.call("echo", task)
        return str(echoed.value["x"] * self.factor)
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_python_flow_calls_another_with_options() {
    let dir = tempfile::tempdir().unwrap();
    let plugin = plugin(dir.path(), &[("nested.py", CALLS_ANOTHER)]);
    let journal = Journal::open_in_memory().unwrap();
    let report = python_runtime(&journal, registry(&Counter::default()), &plugin)
        .run(sel("outer"), json!(null))
        .await
        .unwrap();
    assert_eq!(answer(&report), "6+10");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exception_in_forward_names_the_file_and_line_with_the_traceback() {
    let flow = "from clio_agent.sdk import Flow\n\n\nclass Bad(Flow):\n    id = \"bad\"\n\n    async def forward(self, task, ctx):\n        await ctx.step(lambda: 1)\n        raise ValueError(f\"bad input {task}\")\n";
    let dir = tempfile::tempdir().unwrap();
    let plugin = plugin(dir.path(), &[("bad.py", flow)]);
    let journal = Journal::open_in_memory().unwrap();
    let report = python_runtime(&journal, registry(&Counter::default()), &plugin)
        .run(sel("bad"), json!("t"))
        .await
        .unwrap();
    let RunOutcome::Failed(err) = &report.outcome else { panic!("{:?}", report.outcome) };
    assert_eq!(err.reason(), "flow_exception");
    let message = err.to_string();
    assert!(message.contains("ai.iowarp.clio/flows/bad.py:9"), "{message}");
    assert!(message.contains("ValueError") && message.contains("bad input t"), "{message}");
    let details = err.details();
    assert!(details["traceback"].as_str().unwrap().contains("line 9, in forward"), "{details:?}");
    assert!(matches!(err, FlowError::FlowException { .. }));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_that_does_not_import_fails_naming_it() {
    let flow = "import no_such_module_here\nfrom clio_agent.sdk import Flow\n\n\nclass Bad(Flow):\n    id = \"bad\"\n\n    async def forward(self, task, ctx):\n        return task\n";
    let dir = tempfile::tempdir().unwrap();
    let plugin = plugin(dir.path(), &[("bad.py", flow)]);
    let journal = Journal::open_in_memory().unwrap();
    let report = python_runtime(&journal, registry(&Counter::default()), &plugin)
        .run(sel("bad"), json!("t"))
        .await
        .unwrap();
    let RunOutcome::Failed(err) = &report.outcome else { panic!("{:?}", report.outcome) };
    let message = err.to_string();
    assert!(message.contains("ai.iowarp.clio/flows/bad.py"), "{message}");
    assert!(message.contains("no_such_module_here"), "{message}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_python_flow_that_asks_waits_and_goes_on_with_the_answer() {
    let flow = r#"
from clio_agent.sdk import Flow


class Decide(Flow):
    id = "decide"

    async def forward(self, task, ctx):
        draft = await ctx.call("writer", task)
        choice = await ctx.ask("Accept the draft?", options=["Accept", "Revise"])
        return f"{choice}: {draft.answer}"
"#;
    let dir = tempfile::tempdir().unwrap();
    let plugin = plugin(dir.path(), &[("decide.py", flow)]);
    let counter = Counter::default();
    let journal = Journal::open_in_memory().unwrap();
    let rt = python_runtime(&journal, registry(&counter), &plugin);
    let first = rt.run(sel("decide"), json!("a poem")).await.unwrap();
    let RunOutcome::AwaitingInput(questions) = &first.outcome else {
        panic!("{:?}", first.outcome)
    };
    assert_eq!(questions[0].options, vec!["accept", "revise"]);
    rt.answer(first.run, questions[0].id, "Accept").await.unwrap();
    let second =
        python_runtime(&journal, registry(&counter), &plugin).resume(first.run).await.unwrap();
    assert_eq!(answer(&second), "accept: writer(a poem)");
    assert_eq!(counter.get(), 1, "the writer ran once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_that_writes_garbage_fails_the_flow_with_a_protocol_error() {
    let flow = r#"
import os
from clio_agent.sdk import Flow


class Noisy(Flow):
    id = "noisy"

    async def forward(self, task, ctx):
        # Writes straight to the protocol's descriptor, as a broken extension might.
        for fd in range(3, 20):
            try:
                os.write(fd, b"this is not a message\n")
            except OSError:
                pass
        await ctx.step(lambda: 1)
        return "never"
"#;
    let dir = tempfile::tempdir().unwrap();
    let plugin = plugin(dir.path(), &[("noisy.py", flow)]);
    let journal = Journal::open_in_memory().unwrap();
    let report = tokio::time::timeout(
        std::time::Duration::from_secs(60),
        python_runtime(&journal, registry(&Counter::default()), &plugin)
            .run(sel("noisy"), json!(null)),
    )
    .await
    .expect("a child that writes garbage never hangs the run")
    .unwrap();
    let RunOutcome::Failed(err) = &report.outcome else { panic!("{:?}", report.outcome) };
    let message = err.to_string();
    assert!(message.contains("noisy"), "{message}");
    assert!(message.contains("ai.iowarp.clio/flows/noisy.py"), "{message}");
}

const TOOLS: &str = r#"
def add(a, b):
    """Adds two numbers."""
    return {"sum": a + b}


async def slow_upper(text):
    return text.upper()


def boom(**_):
    raise KeyError("nope")
"#;

/// A tool that runs function `function` of the plugin's `tools.py` in its child.
fn python_tool(pool: &Arc<clio_flow::PythonPool>, function: &'static str) -> Tool {
    let pool = Arc::clone(pool);
    Tool::contextual(function, move |args: Value, ctx: clio_flow::Ctx| {
        let pool = Arc::clone(&pool);
        async move {
            let name = format!("tool {function}");
            pool.call_function(&ctx, "ai.iowarp.clio/tools.py", function, "kwargs", &name, args)
                .await
        }
    })
    .of_plugin("py-test")
    .read_only()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugins_python_functions_run_in_its_child() {
    let dir = tempfile::tempdir().unwrap();
    let plugin = plugin(dir.path(), &[]);
    std::fs::write(dir.path().join("ai.iowarp.clio/tools.py"), TOOLS).unwrap();
    let pool = clio_flow::PythonPool::new(
        "py-test",
        dir.path().to_path_buf(),
        clio_plugins::python::interpreter(),
    );
    let flow = clio_flow::FnFlow::new("use-tools", |_task: Value, ctx| async move {
        let sum = ctx.call("add", json!({ "a": 2, "b": 3 })).await?;
        let upper = ctx.call("slow_upper", json!({ "text": "hi" })).await?;
        let boom = ctx.call("boom", json!({})).await.unwrap_err();
        Ok(clio_flow::FlowOutput::text(format!("{} {} {}", sum.value["sum"], upper.value, boom)))
    });
    let reg = registry(&Counter::default())
        .tool(python_tool(&pool, "add"))
        .tool(python_tool(&pool, "slow_upper"))
        .tool(python_tool(&pool, "boom"))
        .flow(flow);
    let journal = Journal::open_in_memory().unwrap();
    let report =
        python_runtime(&journal, reg, &plugin).run(sel("use-tools"), json!(null)).await.unwrap();
    let text = answer(&report);
    assert!(text.starts_with("5 \"HI\" "), "{text}");
    assert!(text.contains("tool boom raised KeyError at ai.iowarp.clio/tools.py:12"), "{text}");
}

const KILLED_IN_GATHER: &str = r#"
import asyncio
import os

from clio_agent.sdk import Flow


class Killed(Flow):
    id = "killed"

    async def forward(self, task, ctx):
        async def kill_once():
            await ctx.call("wait_for", {"count": 2})
            if not os.path.exists(task):
                open(task, "w").close()
                os.kill(os.getpid(), 9)

        calls = [ctx.call("slow_effect", {"i": i}) for i in range(6)]
        gathered = ctx.gather(calls, limit=1, return_exceptions=True)
        results, _ = await asyncio.gather(gathered, kill_once())
        return ",".join(getattr(r, "reason", "ok") for r in results)
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_killed_during_a_limited_gather_loses_no_call() {
    let dir = tempfile::tempdir().unwrap();
    let plugin = plugin(dir.path(), &[("killed.py", KILLED_IN_GATHER)]);
    let marker = dir.path().join("killed-once");
    let counter = Counter::default();
    let seen = counter.clone();
    let wait_for = Tool::new("wait_for", move |args: Value| {
        let seen = seen.clone();
        async move {
            let count = args["count"].as_u64().unwrap_or(0);
            while seen.get() < count {
                tokio::time::sleep(std::time::Duration::from_millis(10)).await;
            }
            Ok(json!(count))
        }
    })
    .read_only();
    let effects = counter.clone();
    let slow_effect = Tool::new("slow_effect", move |args: Value| {
        let effects = effects.clone();
        async move {
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            effects.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            Ok(args["i"].clone())
        }
    });
    let journal = Journal::open_in_memory().unwrap();
    let input = json!(marker.to_string_lossy());
    let reg = registry(&counter).tool(wait_for).tool(slow_effect);
    let first =
        python_runtime(&journal, reg.clone(), &plugin).run(sel("killed"), input).await.unwrap();
    assert!(
        matches!(&first.outcome, RunOutcome::Failed(FlowError::CallInterrupted { .. })),
        "{:?}",
        first.outcome
    );
    assert!(counter.get() < 6, "the child died before the gather ended");
    let resumed = python_runtime(&journal, reg, &plugin).resume(first.run).await.unwrap();
    // The call running when the child died is cut short (its effect uncertain, never
    // done again); every call queued behind it runs on resume: none is lost.
    let outcomes: Vec<String> = answer(&resumed).split(',').map(str::to_owned).collect();
    assert_eq!(outcomes.len(), 6, "{outcomes:?}");
    let ok = outcomes.iter().filter(|o| *o == "ok").count();
    let cut = outcomes.iter().filter(|o| *o == "call_interrupted").count();
    assert_eq!(ok + cut, 6, "{outcomes:?}");
    assert!(cut <= 1, "only the call in flight may be cut short: {outcomes:?}");
    assert_eq!(counter.get(), ok as u64, "each effect once");
}

const KILLED_DURING_A_CALL: &str = r#"
import asyncio
import os

from clio_agent.sdk import Flow


class KilledDuringACall(Flow):
    id = "killed-during-a-call"

    async def forward(self, task, ctx):
        async def kill_once():
            await ctx.call("wait_for", {"count": 1})
            if not os.path.exists(task):
                open(task, "w").close()
                os.kill(os.getpid(), 9)

        first = await ctx.call("slow_effect", {"i": 0})
        second, _ = await asyncio.gather(ctx.call("slow_effect", {"i": 1}), kill_once())
        third = await ctx.call("slow_effect", {"i": 2})
        return f"{first.value},{second.value},{third.value}"
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_running_when_the_child_dies_finishes_and_is_replayed() {
    let dir = tempfile::tempdir().unwrap();
    let plugin = plugin(dir.path(), &[("killed_call.py", KILLED_DURING_A_CALL)]);
    let marker = dir.path().join("killed-once");
    let effects = Counter::default();
    let (started, done) = (effects.clone(), effects.clone());
    // `wait_for` waits until the second effect has started (its count is the effects done).
    let running = Arc::new(AtomicBool::new(false));
    let seen = Arc::clone(&running);
    let wait_for = Tool::new("wait_for", move |_args: Value| {
        let seen = Arc::clone(&seen);
        async move {
            while !seen.load(Ordering::SeqCst) {
                tokio::time::sleep(std::time::Duration::from_millis(5)).await;
            }
            Ok(json!(true))
        }
    })
    .read_only();
    let slow_effect = Tool::new("slow_effect", move |args: Value| {
        let (done, running) = (done.clone(), Arc::clone(&running));
        let _ = &started;
        async move {
            if args["i"] == 1 {
                running.store(true, Ordering::SeqCst);
            }
            tokio::time::sleep(std::time::Duration::from_millis(300)).await;
            done.0.fetch_add(1, Ordering::SeqCst);
            Ok(args["i"].clone())
        }
    });
    let reg = registry(&Counter::default()).tool(wait_for).tool(slow_effect);
    let journal = Journal::open_in_memory().unwrap();
    let input = json!(marker.to_string_lossy());
    let first = python_runtime(&journal, reg.clone(), &plugin)
        .run(sel("killed-during-a-call"), input)
        .await
        .unwrap();
    assert!(
        matches!(&first.outcome, RunOutcome::Failed(FlowError::CallInterrupted { .. })),
        "{:?}",
        first.outcome
    );
    assert_eq!(effects.get(), 2, "the call running when the child died finished");
    let resumed = python_runtime(&journal, reg, &plugin).resume(first.run).await.unwrap();
    assert_eq!(answer(&resumed), "0,1,2", "the same answer as an uninterrupted run");
    assert_eq!(effects.get(), 3, "each effect once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_runtime_leaves_no_python_child() {
    let dir = tempfile::tempdir().unwrap();
    // A flow that tells its own process id, so the test can look for it afterwards.
    let flow = "import os\nfrom clio_agent.sdk import Flow\n\n\nclass Pid(Flow):\n    id = \"pid\"\n\n    async def forward(self, task, ctx):\n        return str(os.getpid())\n";
    let plugin = plugin(dir.path(), &[("pid.py", flow)]);
    let journal = Journal::open_in_memory().unwrap();
    let rt = python_runtime(&journal, registry(&Counter::default()), &plugin);
    let report = rt.run(sel("pid"), json!(null)).await.unwrap();
    let pid: u32 = answer(&report).parse().unwrap();
    assert!(std::path::Path::new(&format!("/proc/{pid}")).exists(), "the child serves on");
    drop(rt);
    // The runtime's last holders (its journal's writer, work it had spawned) let go soon
    // after; on a loaded machine that may take a while.
    let alive = || {
        std::fs::read_to_string(format!("/proc/{pid}/status"))
            .is_ok_and(|status| !status.contains("State:\tZ") && status.contains("python"))
    };
    let deadline = clio_flow::instant() + std::time::Duration::from_secs(60);
    while alive() && clio_flow::instant() < deadline {
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let alive = alive();
    assert!(!alive, "the child of a dropped runtime ended");
}

const EVERY_MEMBER: &str = r#"
from clio_agent.sdk import Flow


class Every(Flow):
    id = "every"

    async def forward(self, task, ctx):
        out = {"run_id": ctx.run_id, "depth": ctx.depth}
        handle = await ctx.start("writer", "started work")
        result = await handle
        out["started"] = result.answer
        states = [u["status"] async for u in handle.follow()] if hasattr(handle, "follow") else []
        out["followed"] = bool(states) or True
        await ctx.record_event({"kind": "note", "n": 1})
        await ctx.publish({"steps": ["a"]})
        out["patched"] = await ctx.patched("new-path")
        receipts = await ctx.permission_receipts()
        out["receipts"] = isinstance(receipts, list)
        out["tool_results"] = await ctx.tool_results(result.handle)
        keyed = await ctx.call("echo", {"x": 1}, key="the-echo")
        out["keyed"] = keyed.value
        selfish = await ctx.react("think")
        out["react"] = selfish.answer
        return out
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_ctx_member_works_through_the_runtime_and_replays() {
    let dir = tempfile::tempdir().unwrap();
    let plugin = plugin(dir.path(), &[("every.py", EVERY_MEMBER)]);
    let journal = Journal::open_in_memory().unwrap();
    let counter = Counter::default();
    let reg = registry(&counter).this_agent(clio_flow::Worker::handler("me", |req| async move {
        Ok(clio_flow::WorkerReply::text(format!("me({})", req.text)))
    }));
    let report = python_runtime(&journal, reg.clone(), &plugin)
        .run(sel("every"), json!(null))
        .await
        .unwrap();
    let RunOutcome::Succeeded(out) = &report.outcome else { panic!("{:?}", report.outcome) };
    let value = &out.value;
    assert_eq!(value["run_id"], report.run.0);
    assert_eq!(value["depth"], 0);
    assert_eq!(value["started"], "writer(started work)");
    assert_eq!(value["patched"], true, "a new run takes the patched path");
    assert_eq!(value["receipts"], true);
    assert_eq!(value["keyed"], json!({ "x": 1 }));
    assert_eq!(value["react"], "me(think)");
    let entries = journal.entries(report.run).unwrap();
    assert!(
        entries.iter().any(|e| e.identity.as_deref() == Some("key:the-echo")),
        "the keyed call is named by its key"
    );
    assert!(entries.iter().any(|e| e.kind == clio_journal::EntryKind::View));
    let ran = counter.get();
    let replay = python_runtime(&journal, reg, &plugin).replay(report.run).await.unwrap();
    let RunOutcome::Succeeded(again) = &replay.outcome else { panic!("{:?}", replay.outcome) };
    assert_eq!(again.value, out.value, "the replay answers the same");
    assert_eq!(counter.get(), ran, "the replay ran nothing");
}
