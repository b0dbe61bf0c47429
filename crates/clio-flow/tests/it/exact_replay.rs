//! Exact replay: a resumed run reproduces its history or stops before anything runs twice.
//! A moved call, an inserted one or a changed input fails with `Nondeterminism` naming the
//! new call and what the history still holds, and runs nothing; keys and `ctx.patched` are
//! the ways forward; `as_completed` and `gather(any)` deliver in the recorded order; a run
//! ended by a limit replays to the same limit; `check_replay` executes nothing.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use clio_flow::{
    FlowError, FlowOutput, FnFlow, Limits, Registry, ReplayVerdict, ReturnWhen, RunOutcome,
    RuntimeConfig, Tool, selection,
};
use clio_journal::{Journal, RunStatus};
use futures::StreamExt;
use proptest::prelude::*;
use serde_json::{Value, json};

use crate::support::{Counter, answer, error, registry, runtime, sel};

/// Counts the effects of the `tally` tool by its input `n`.
#[derive(Clone, Default)]
struct Tally(Arc<Mutex<HashMap<u64, u64>>>);

impl Tally {
    fn of(&self, n: u64) -> u64 {
        self.0.lock().unwrap().get(&n).copied().unwrap_or(0)
    }
    fn snapshot(&self) -> HashMap<u64, u64> {
        self.0.lock().unwrap().clone()
    }
    fn tool(&self) -> Tool {
        let tally = self.clone();
        Tool::new("tally", move |args: Value| {
            let tally = tally.clone();
            async move {
                let n = args["n"].as_u64().unwrap_or(0);
                if let Some(ms) = args["ms"].as_u64() {
                    tokio::time::sleep(Duration::from_millis(ms)).await;
                }
                *tally.0.lock().unwrap().entry(n).or_insert(0) += 1;
                Ok(json!(n))
            }
        })
    }
}

/// The flow as first written: a side-effecting call, then a question.
fn first_version() -> FnFlow {
    FnFlow::new("edited", |_t: Value, ctx| async move {
        let r = ctx.call("tally", json!({ "n": 1 })).await?;
        let a = ctx.ask("go on?").await?;
        Ok(FlowOutput::text(format!("{}-{a}", r.value)))
    })
}

/// The same flow after an edit that moved the call one line lower (same version).
fn moved_version() -> FnFlow {
    FnFlow::new("edited", |_t: Value, ctx| async move {
        let n = json!({ "n": 1 });
        let r = ctx.call("tally", n).await?;
        let a = ctx.ask("go on?").await?;
        Ok(FlowOutput::text(format!("{}-{a}", r.value)))
    })
}

fn registry_with(tally: &Tally, flow: FnFlow) -> Registry {
    registry(&Counter::default()).tool(tally.tool()).flow(flow)
}

/// Runs `flow` until it asks, answers yes, and returns the journal and run.
async fn waiting_answered(tally: &Tally, flow: FnFlow) -> (Journal, clio_journal::RunId) {
    let journal = Journal::open_in_memory().unwrap();
    let rt = runtime(&journal, registry_with(tally, flow));
    let report = rt.run(sel("edited"), json!(null)).await.unwrap();
    let RunOutcome::AwaitingInput(qs) = &report.outcome else { panic!("{:?}", report.outcome) };
    rt.answer(report.run, qs[0].id, "yes").await.unwrap();
    (journal, report.run)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_moved_side_effecting_call_is_refused_on_resume_and_runs_nothing() {
    let tally = Tally::default();
    let (journal, run) = waiting_answered(&tally, first_version()).await;
    assert_eq!(tally.of(1), 1);
    let entries = journal.entries(run).unwrap().len();
    let edited = runtime(&journal, registry_with(&tally, moved_version()));
    let report = edited.resume(run).await.unwrap();
    let err = error(&report);
    let FlowError::Nondeterminism { identity, requested, unreached, .. } = &err else {
        panic!("{err:?}")
    };
    assert_eq!(tally.of(1), 1, "the moved call did not run a second time");
    assert!(identity.contains("exact_replay.rs:"), "names the new call's site: {identity}");
    assert!(requested.contains("tally"), "names the new call's target: {requested}");
    assert_eq!(unreached.len(), 2, "the recorded call and question: {unreached:?}");
    assert_eq!((unreached[0].kind.as_str(), unreached[0].target.as_str()), ("call", "tally"));
    assert!(unreached[0].side_effecting);
    assert_ne!(unreached[0].identity, *identity);
    assert_eq!(unreached[1].kind, "ask");
    assert!(!unreached[1].side_effecting);
    let text = err.to_string();
    assert!(text.contains("not reached") && text.contains("side-effecting"), "{text}");
    // It reads back from its record as it was.
    assert_eq!(FlowError::from_json(&err.to_json()).to_json(), err.to_json());
    // Nothing but the mismatch event was written, and the run can still be resumed.
    let after = journal.entries(run).unwrap();
    assert_eq!(after.len(), entries + 1);
    assert_eq!(after.last().unwrap().payload["event"], "replay_mismatch");
    let status = journal.run(run).unwrap().unwrap().status;
    assert!(!status.is_finished(), "{status:?}");
    // The code put back as it was resumes the run to its end, the call still done once.
    let fixed = runtime(&journal, registry_with(&tally, first_version()));
    assert_eq!(answer(&fixed.resume(run).await.unwrap()), "1-yes");
    assert_eq!(tally.of(1), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_keyed_call_survives_being_moved() {
    let keyed = |moved: bool| {
        FnFlow::new("edited", move |_t: Value, ctx| async move {
            let r = if moved {
                ctx.call("tally", json!({ "n": 1 })).key("first").await?
            } else {
                // The same call before the edit, on another line.
                ctx.call("tally", json!({ "n": 1 })).key("first").await?
            };
            let a = ctx.ask("go on?").await?;
            Ok(FlowOutput::text(format!("{}-{a}", r.value)))
        })
    };
    let tally = Tally::default();
    let (journal, run) = waiting_answered(&tally, keyed(false)).await;
    let report = runtime(&journal, registry_with(&tally, keyed(true))).resume(run).await.unwrap();
    assert_eq!(answer(&report), "1-yes");
    assert_eq!(tally.of(1), 1);
}

/// A flow written to survive edits: its call and question are keyed.
fn keyed_version() -> FnFlow {
    FnFlow::new("edited", |_t: Value, ctx| async move {
        let r = ctx.call("tally", json!({ "n": 1 })).key("one").await?;
        let a = ctx.ask_full("go on?", clio_flow::AskSchema::Text, &[], "", "go-on").await?;
        Ok(FlowOutput::text(format!("{}-{}", r.value, a.as_str().unwrap_or(""))))
    })
}

/// The keyed flow after a patch: a new call before the old one, for runs that start after
/// it. (The lines it adds move the calls below it: keys keep their identities.)
fn patched_version() -> FnFlow {
    FnFlow::new("edited", |_t: Value, ctx| async move {
        let mut extra = String::new();
        if ctx.patched("count-twice").await? {
            extra = ctx.call("tally", json!({ "n": 2 })).key("two").await?.value.to_string();
        }
        let r = ctx.call("tally", json!({ "n": 1 })).key("one").await?;
        let a = ctx.ask_full("go on?", clio_flow::AskSchema::Text, &[], "", "go-on").await?;
        Ok(FlowOutput::text(format!("{extra}{}-{}", r.value, a.as_str().unwrap_or(""))))
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_patch_marker_keeps_old_runs_on_the_old_path_and_new_runs_on_the_new() {
    let tally = Tally::default();
    let (journal, run) = waiting_answered(&tally, keyed_version()).await;
    let patched = runtime(&journal, registry_with(&tally, patched_version()));
    let report = patched.resume(run).await.unwrap();
    assert_eq!(answer(&report), "1-yes", "the run recorded before the patch took the old path");
    assert_eq!((tally.of(1), tally.of(2)), (1, 0));
    // A new run takes the new path, and its replay agrees.
    let fresh = patched.run(sel("edited"), json!(null)).await.unwrap();
    let RunOutcome::AwaitingInput(qs) = &fresh.outcome else { panic!("{:?}", fresh.outcome) };
    assert_eq!((tally.of(1), tally.of(2)), (2, 1));
    patched.answer(fresh.run, qs[0].id, "ok").await.unwrap();
    assert_eq!(answer(&patched.resume(fresh.run).await.unwrap()), "21-ok");
    assert_eq!(answer(&patched.replay(fresh.run).await.unwrap()), "21-ok");
    assert_eq!((tally.of(1), tally.of(2)), (2, 1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_inserted_call_or_a_changed_input_is_refused_before_it_runs() {
    let inserted = FnFlow::new("edited", |_t: Value, ctx| async move {
        ctx.call("tally", json!({ "n": 7 })).await?;
        let r = ctx.call("tally", json!({ "n": 1 })).await?;
        let a = ctx.ask("go on?").await?;
        Ok(FlowOutput::text(format!("{}-{a}", r.value)))
    });
    let changed = FnFlow::new("edited", |_t: Value, ctx| async move {
        let r = ctx.call("tally", json!({ "n": 8 })).await?;
        let a = ctx.ask("go on?").await?;
        Ok(FlowOutput::text(format!("{}-{a}", r.value)))
    });
    for edit in [inserted, changed] {
        let tally = Tally::default();
        let (journal, run) = waiting_answered(&tally, first_version()).await;
        let report = runtime(&journal, registry_with(&tally, edit)).resume(run).await.unwrap();
        assert!(matches!(error(&report), FlowError::Nondeterminism { .. }), "{report:?}");
        assert_eq!(tally.snapshot(), HashMap::from([(1, 1)]), "nothing new ran");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_calls_finishing_out_of_order_resume_without_a_false_mismatch() {
    // Two branches: one replays a slow child flow's records, the other makes a new call.
    let tally = Tally::default();
    let flow = |ask: bool| {
        FnFlow::new("edited", move |_t: Value, ctx| async move {
            let a = ctx.call("tally", json!({ "n": 1, "ms": 30 }));
            let b = ctx.call("tally", json!({ "n": 2 }));
            let both = ctx.gather(vec![a, b]).await?;
            if ask {
                ctx.ask("go on?").await?;
            }
            let c = ctx.call("tally", json!({ "n": 3 }));
            let d = ctx.call("tally", json!({ "n": 4, "ms": 10 }));
            let more = ctx.gather(vec![c, d]).await?;
            let all: Vec<String> = both.iter().chain(&more).map(|r| r.value.to_string()).collect();
            Ok(FlowOutput::text(all.join(",")))
        })
    };
    let journal = Journal::open_in_memory().unwrap();
    let rt = runtime(&journal, registry_with(&tally, flow(true)));
    let report = rt.run(sel("edited"), json!(null)).await.unwrap();
    let RunOutcome::AwaitingInput(qs) = &report.outcome else { panic!("{:?}", report.outcome) };
    rt.answer(report.run, qs[0].id, "y").await.unwrap();
    assert_eq!(answer(&rt.resume(report.run).await.unwrap()), "1,2,3,4");
    assert_eq!(tally.snapshot(), HashMap::from([(1, 1), (2, 1), (3, 1), (4, 1)]));
}

/// A tool `gate` whose call `i` finishes only when `turn` reaches `position[i]`.
fn ordered_gate(position: Vec<u64>, turn: tokio::sync::watch::Receiver<u64>) -> Tool {
    Tool::new("gate", move |args: Value| {
        let mut turn = turn.clone();
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
    .read_only()
}

/// A flow that streams `n` gate calls and returns the indexes in the order it got them.
fn streaming(n: u64, turn: tokio::sync::watch::Sender<u64>) -> FnFlow {
    FnFlow::new("stream", move |_t: Value, ctx| {
        let turn = turn.clone();
        async move {
            let calls = (0..n).map(|i| ctx.call("gate", json!({ "i": i }))).collect();
            let mut stream = Box::pin(ctx.as_completed(calls, 0));
            let mut seen = Vec::new();
            while let Some(settled) = stream.next().await {
                seen.push(settled.index.to_string());
                turn.send_modify(|t| *t += 1);
            }
            // A branch that depends on which result came first.
            let first = seen.first().cloned().unwrap_or_default();
            let follow = ctx.call("echo", json!({ "after": first })).await?;
            let after = follow.value["after"].as_str().unwrap_or("").to_owned();
            Ok(FlowOutput::text(format!("{}|{after}", seen.join(","))))
        }
    })
}

/// Runs the stream with calls finishing in `order`, then replays it `replays` times; returns
/// the fresh answer and the replays' answers.
async fn stream_and_replay(order: &[u64], replays: usize) -> (String, Vec<String>) {
    let n = order.len() as u64;
    let mut position = vec![0; order.len()];
    for (pos, i) in order.iter().enumerate() {
        position[*i as usize] = pos as u64;
    }
    let (tx, rx) = tokio::sync::watch::channel(0u64);
    let reg = registry(&Counter::default()).tool(ordered_gate(position, rx)).flow(streaming(n, tx));
    let journal = Journal::open_in_memory().unwrap();
    let fresh = runtime(&journal, reg.clone()).run(sel("stream"), json!(null)).await.unwrap();
    let fresh = answer(&fresh);
    let mut again = Vec::new();
    for _ in 0..replays {
        let report = runtime(&journal, reg.clone()).replay(journal_run(&journal)).await.unwrap();
        again.push(answer(&report));
    }
    (fresh, again)
}

fn journal_run(journal: &Journal) -> clio_journal::RunId {
    journal.runs(&clio_journal::RunFilter::default()).unwrap()[0].id
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn as_completed_replays_in_the_recorded_order() {
    let (fresh, replays) = stream_and_replay(&[3, 7, 2, 6, 1, 5, 0, 4], 5).await;
    assert_eq!(fresh, "3,7,2,6,1,5,0,4|3");
    for replay in replays {
        assert_eq!(replay, fresh);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gather_any_replays_the_same_winner() {
    let (tx, rx) = tokio::sync::watch::channel(0u64);
    let flow = FnFlow::new("race", move |_t: Value, ctx| {
        let tx = tx.clone();
        async move {
            let calls = (0..4).map(|i| ctx.call("gate", json!({ "i": i }))).collect();
            let won = ctx.gather(calls).return_when(ReturnWhen::Any).await?;
            // Let the others finish after the winner.
            for _ in 0..4 {
                tx.send_modify(|t| *t += 1);
            }
            Ok(FlowOutput::text(won[0].value.to_string()))
        }
    });
    let reg = registry(&Counter::default()).tool(ordered_gate(vec![3, 1, 0, 2], rx)).flow(flow);
    let journal = Journal::open_in_memory().unwrap();
    let fresh = runtime(&journal, reg.clone()).run(sel("race"), json!(null)).await.unwrap();
    assert_eq!(answer(&fresh), "2");
    for _ in 0..3 {
        let replay = runtime(&journal, reg.clone()).replay(fresh.run).await.unwrap();
        assert_eq!(answer(&replay), "2");
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]

    /// Random finishing orders: a fresh run and its replays yield the same order and answer.
    #[test]
    fn replays_yield_in_the_fresh_runs_order(order in Just((0..6u64).collect::<Vec<_>>()).prop_shuffle()) {
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        let (fresh, replays) = rt.block_on(stream_and_replay(&order, 3));
        let expected: Vec<String> = order.iter().map(u64::to_string).collect();
        prop_assert_eq!(&fresh, &format!("{}|{}", expected.join(","), order[0]));
        for replay in replays {
            prop_assert_eq!(&replay, &fresh);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_ended_by_a_limit_replays_to_the_same_limit_error() {
    let c = Counter::default();
    let spend = FnFlow::new("spend", |_t: Value, ctx| async move {
        for i in 0..10 {
            ctx.call("writer", json!(i)).await?;
        }
        Ok(FlowOutput::text("x"))
    });
    let calls = FnFlow::new("calls", |_t: Value, ctx| async move {
        for i in 0..10 {
            ctx.call("writer", json!(i)).await?;
        }
        Ok(FlowOutput::text("x"))
    })
    .limits(Limits { max_model_calls: 3, ..Limits::default() });
    let many = FnFlow::new("many", |_t: Value, ctx| async move {
        for i in 0..10u64 {
            ctx.step("n", || async move { Ok(i) }).await?;
        }
        Ok(FlowOutput::text("all"))
    });
    let reg = registry(&c).flow(spend).flow(calls).flow(many);
    let journal = Journal::open_in_memory().unwrap();
    let config = RuntimeConfig { max_entries: 5, ..RuntimeConfig::default() };
    let rt = clio_flow::Runtime::new(journal.clone(), reg, config);
    for (id, options, limit) in [
        ("spend", json!({ "budget_tokens": 30 }), "budget_tokens"),
        ("calls", json!({}), "max_model_calls"),
        ("many", json!({}), ""),
    ] {
        let fresh = rt.run(selection(id, options), json!(null)).await.unwrap();
        let err = error(&fresh);
        if limit.is_empty() {
            assert_eq!(err.reason(), "flow_checkpoint_limit");
        } else {
            assert_eq!(err.details()["limit"], limit, "{err:?}");
        }
        let ran = c.get();
        let replay = rt.replay(fresh.run).await.unwrap();
        assert_eq!(error(&replay).to_json(), err.to_json(), "{id} replays to the same limit");
        assert_eq!(replay.submitted, 0);
        assert_eq!(c.get(), ran, "the replay ran nothing");
        let check = rt.check_replay(fresh.run).await.unwrap();
        assert!(matches!(check.verdict, ReplayVerdict::Clean { .. }), "{check:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_replay_executes_nothing_and_finds_the_first_mismatch() {
    let tally = Tally::default();
    let (journal, run) = waiting_answered(&tally, first_version()).await;
    let before = journal.entries(run).unwrap();
    let status = journal.run(run).unwrap().unwrap().status;
    // The same code: clean to the end of the unfinished run's history.
    let same = runtime(&journal, registry_with(&tally, first_version()));
    let check = same.check_replay(run).await.unwrap();
    assert!(!check.finished);
    assert!(matches!(check.verdict, ReplayVerdict::Clean { .. }), "{check:?}");
    assert_eq!((check.commands, check.reached), (2, 2));
    // Moved code: the mismatch, with both places.
    let moved = runtime(&journal, registry_with(&tally, moved_version()));
    let check = moved.check_replay(run).await.unwrap();
    let ReplayVerdict::Mismatch(FlowError::Nondeterminism { identity, unreached, .. }) =
        &check.verdict
    else {
        panic!("{check:?}")
    };
    assert!(identity.contains("exact_replay.rs"));
    assert_eq!(unreached[0].target, "tally");
    assert_eq!(tally.of(1), 1, "nothing ran");
    assert_eq!(journal.entries(run).unwrap(), before, "nothing was written");
    assert_eq!(journal.run(run).unwrap().unwrap().status, status);
    // A finished run: clean with the same code.
    assert_eq!(answer(&same.resume(run).await.unwrap()), "1-yes");
    let check = same.check_replay(run).await.unwrap();
    assert!(check.finished);
    let ReplayVerdict::Clean { outcome: RunOutcome::Succeeded(out) } = &check.verdict else {
        panic!("{check:?}")
    };
    assert_eq!(out.answer, "1-yes");
    assert_eq!(journal.run(run).unwrap().unwrap().status, RunStatus::Succeeded);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_entry_cap_warning_is_recorded_once_at_80_percent() {
    let pausing = FnFlow::new("pausing", |_t: Value, ctx| async move {
        for i in 0..7u64 {
            ctx.step("n", || async move { Ok(i) }).await?;
        }
        ctx.ask("more?").await?;
        ctx.step("last", || async { Ok(0) }).await?;
        Ok(FlowOutput::text("done"))
    });
    let journal = Journal::open_in_memory().unwrap();
    let config = RuntimeConfig { max_entries: 10, ..RuntimeConfig::default() };
    let rt = clio_flow::Runtime::new(
        journal.clone(),
        registry(&Counter::default()).flow(pausing),
        config,
    );
    let report = rt.run(sel("pausing"), json!(null)).await.unwrap();
    let RunOutcome::AwaitingInput(qs) = &report.outcome else { panic!("{:?}", report.outcome) };
    let warnings = |journal: &Journal| {
        journal
            .entries(report.run)
            .unwrap()
            .into_iter()
            .filter(|e| e.payload["event"] == "entries_warning")
            .collect::<Vec<_>>()
    };
    let first = warnings(&journal);
    assert_eq!(first.len(), 1, "at 8 of 10 entries");
    assert_eq!(
        (first[0].payload["entries"].clone(), first[0].payload["max"].clone()),
        (json!(8), json!(10))
    );
    rt.answer(report.run, qs[0].id, "yes").await.unwrap();
    assert_eq!(answer(&rt.resume(report.run).await.unwrap()), "done");
    assert_eq!(warnings(&journal).len(), 1, "once per run, also across a resume");
}

/// One operation of a generated flow.
#[derive(Clone, Debug)]
enum Op {
    /// A side-effecting call, made from one of two places in the code.
    Tally { n: u64, lower: bool },
    /// A read-only call.
    Look { n: u64 },
    /// A step whose closure has an effect.
    Step { n: u64 },
    /// Side-effecting calls streamed as they finish (each sleeping `ms`).
    Fan { ns: Vec<u64>, ms: Vec<u64> },
    /// A question: where the run stops and waits, as after a crash.
    Ask,
}

/// An edit of a flow's code between the run and its resume.
#[derive(Clone, Debug)]
enum Edit {
    None,
    /// The call at this position moves to the other place in the code.
    Move(usize),
    /// A new call is inserted at this position.
    Insert(usize),
    /// The operation at this position is removed.
    Remove(usize),
    /// The call at this position gets another input.
    Change(usize),
}

async fn interpret(
    ops: Arc<Vec<Op>>,
    tally: Tally,
    ctx: clio_flow::Ctx,
) -> Result<FlowOutput, FlowError> {
    let mut out = Vec::new();
    for op in ops.iter() {
        let value = match op {
            Op::Tally { n, lower: false } => ctx.call("tally", json!({ "n": n })).await?.value,
            Op::Tally { n, lower: true } => ctx.call("tally", json!({ "n": n })).await?.value,
            Op::Look { n } => ctx.call("echo", json!({ "n": n })).await?.value["n"].clone(),
            Op::Step { n } => {
                let (tally, n) = (tally.clone(), *n);
                let v: u64 = ctx
                    // Named by its effect, as distinct steps of real code sit at distinct places.
                    .step(&format!("effect-{n}"), || async move {
                        *tally.0.lock().unwrap().entry(n).or_insert(0) += 1;
                        Ok(n)
                    })
                    .await?;
                json!(v)
            }
            Op::Fan { ns, ms } => {
                let calls = ns
                    .iter()
                    .zip(ms)
                    .map(|(n, ms)| ctx.call("tally", json!({ "n": n, "ms": ms })))
                    .collect();
                let mut stream = Box::pin(ctx.as_completed(calls, 0));
                let mut got = Vec::new();
                while let Some(settled) = stream.next().await {
                    got.push(settled.result?.value.as_u64().unwrap_or(0));
                }
                got.sort_unstable();
                json!(got)
            }
            Op::Ask => json!(ctx.ask("go on?").await?),
        };
        out.push(value.to_string());
    }
    Ok(FlowOutput::text(out.join(",")))
}

fn program_flow(ops: Vec<Op>, tally: &Tally) -> FnFlow {
    let (ops, tally) = (Arc::new(ops), tally.clone());
    FnFlow::new("model", move |_t: Value, ctx| interpret(Arc::clone(&ops), tally.clone(), ctx))
}

/// Runs `ops` until its question, answers it and returns the runtime's journal and run.
async fn until_answered(ops: Vec<Op>, tally: &Tally) -> (Journal, clio_journal::RunId) {
    let journal = Journal::open_in_memory().unwrap();
    let rt = runtime(&journal, registry_with(tally, program_flow(ops, tally)));
    let report = rt.run(sel("model"), json!(null)).await.unwrap();
    // (An edited flow may have lost its question: then it has run to its end.)
    if let RunOutcome::AwaitingInput(qs) = &report.outcome {
        rt.answer(report.run, qs[0].id, "yes").await.unwrap();
    }
    (journal, report.run)
}

/// Returns `ops` with `edit` applied, and the position the edit is at (if any).
fn edited(ops: &[Op], edit: &Edit, fresh_n: u64) -> (Vec<Op>, Option<usize>) {
    let mut ops = ops.to_vec();
    let at = match *edit {
        Edit::None => None,
        Edit::Move(i) => match ops.get_mut(i) {
            Some(Op::Tally { lower, .. }) => {
                *lower = !*lower;
                Some(i)
            }
            _ => None,
        },
        Edit::Insert(i) => {
            let i = i.min(ops.len());
            ops.insert(i, Op::Tally { n: fresh_n, lower: false });
            Some(i)
        }
        Edit::Remove(i) if i < ops.len() => {
            ops.remove(i);
            Some(i)
        }
        Edit::Remove(_) => None,
        Edit::Change(i) => match ops.get_mut(i) {
            Some(Op::Tally { n, .. }) => {
                *n = fresh_n;
                Some(i)
            }
            _ => None,
        },
    };
    (ops, at)
}

fn op_strategy() -> impl Strategy<Value = Op> {
    prop_oneof![
        any::<bool>().prop_map(|lower| Op::Tally { n: 0, lower }),
        Just(Op::Look { n: 0 }),
        Just(Op::Step { n: 0 }),
        proptest::collection::vec(0..6u64, 1..4).prop_map(|ms| Op::Fan { ns: Vec::new(), ms }),
    ]
}

/// Numbers every effect of `ops` uniquely (from 1) and puts the question at `ask`.
fn numbered(mut ops: Vec<Op>, ask: usize) -> Vec<Op> {
    let mut next = 1;
    let mut take = || {
        next += 1;
        next - 1
    };
    for op in &mut ops {
        match op {
            Op::Tally { n, .. } | Op::Look { n } | Op::Step { n } => *n = take(),
            Op::Fan { ns, ms } => *ns = ms.iter().map(|_| take()).collect(),
            Op::Ask => {}
        }
    }
    let ask = ask.min(ops.len());
    ops.insert(ask, Op::Ask);
    ops
}

fn edit_strategy() -> impl Strategy<Value = Edit> {
    prop_oneof![
        Just(Edit::None),
        (0..7usize).prop_map(Edit::Move),
        (0..7usize).prop_map(Edit::Insert),
        (0..7usize).prop_map(Edit::Remove),
        (0..7usize).prop_map(Edit::Change),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 40, ..ProptestConfig::default() })]

    /// Random flows stopped at a question, edited, and resumed: every effect happens at most
    /// once; the resume either ends with the answer an uninterrupted run of the edited code
    /// gives, or fails with `Nondeterminism` before any new effect. An edit past the stop
    /// never trips it; a moved, inserted or changed call before the stop always does.
    #[test]
    fn edited_flows_resume_exactly_or_stop_before_any_new_effect(
        ops in proptest::collection::vec(op_strategy(), 1..6),
        ask in 0..6usize,
        edit in edit_strategy(),
    ) {
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        let ops = numbered(ops, ask);
        let ask_at = ops.iter().position(|o| matches!(o, Op::Ask)).unwrap();
        let (changed, at) = edited(&ops, &edit, 100);
        rt.block_on(async {
            let tally = Tally::default();
            let (journal, run) = until_answered(ops.clone(), &tally).await;
            let before = tally.snapshot();
            let edited_rt = runtime(&journal, registry_with(&tally, program_flow(changed.clone(), &tally)));
            let report = edited_rt.resume(run).await.unwrap();
            prop_assert!(tally.snapshot().values().all(|n| *n <= 1), "an effect ran twice: {:?}", tally.snapshot());
            // What an uninterrupted run of the edited code answers.
            let reference = {
                let other = Tally::default();
                let (journal, run) = until_answered(changed.clone(), &other).await;
                let rt = runtime(&journal, registry_with(&other, program_flow(changed.clone(), &other)));
                answer(&rt.resume(run).await.unwrap())
            };
            let past_the_stop = at.is_none_or(|at| at > ask_at);
            match &report.outcome {
                RunOutcome::Failed(FlowError::Nondeterminism { .. }) => {
                    prop_assert!(!past_the_stop, "an edit past the stop tripped the check: {edit:?} on {ops:?}");
                    prop_assert_eq!(tally.snapshot(), before, "an effect ran before the mismatch");
                }
                RunOutcome::Succeeded(out) => {
                    let must_fail = !past_the_stop && !matches!(edit, Edit::Remove(_));
                    prop_assert!(!must_fail, "{edit:?} on {ops:?} was not refused");
                    prop_assert_eq!(&out.answer, &reference);
                }
                other => prop_assert!(false, "{other:?} after {edit:?} on {ops:?}"),
            }
            Ok(())
        })?;
    }
}
