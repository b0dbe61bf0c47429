//! Issue 44 item 3: a pending question never stalls independent work. Every branch that can
//! run, runs, until every piece of live work waits: in workflows (a step that asks beside an
//! independent chain; random DAGs with questions on random steps) and in flows (an `ask`
//! beside calls made alongside it). The run is recorded awaiting input only then.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use clio_flow::{FlowOutput, FnFlow, Registry, RunOutcome, RunReport, Runtime, Tool};
use clio_journal::{Journal, RunStatus};
use proptest::prelude::*;
use serde_json::{Value, json};

use crate::scale::chain;
use crate::support::{Counter, registry, runtime, sel};

fn asker() -> FnFlow {
    FnFlow::new("asker", |_t: Value, ctx| async move {
        let a = ctx.ask("go on?").await?;
        Ok(FlowOutput::text(a))
    })
}

/// Answers every question the run waits on with "yes" and resumes it, until it ends;
/// returns how many times it waited.
async fn answer_to_the_end(journal: &Journal, reg: &Registry, mut report: RunReport) -> usize {
    let mut rounds = 0;
    while let RunOutcome::AwaitingInput(qs) = &report.outcome {
        rounds += 1;
        assert!(rounds < 50, "the run keeps waiting");
        let rt = Runtime::new(journal.clone(), reg.clone(), Default::default());
        for q in qs {
            rt.answer(report.run, q.id, "yes").await.unwrap();
        }
        report = rt.resume(report.run).await.unwrap();
    }
    assert!(report.output().is_some(), "{:?}", report.outcome);
    rounds
}

/// A step that asks beside an independent 10-step chain: the whole chain runs before the
/// run is recorded awaiting input (it used to wait after one chain step, and each resume
/// moved the chain one step on).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_question_beside_a_chain_lets_the_whole_chain_run() {
    let c = Counter::default();
    let reg = registry(&c).flow(asker());
    let mut wf = chain(10, "effect");
    wf["steps"].as_array_mut().unwrap().push(json!({"id": "q", "target": "asker"}));
    let journal = Journal::open_in_memory().unwrap();
    let report = runtime(&journal, reg.clone())
        .run(sel("workflow"), json!({ "workflow": wf }))
        .await
        .unwrap();
    assert!(matches!(report.outcome, RunOutcome::AwaitingInput(_)), "{:?}", report.outcome);
    assert_eq!(c.get(), 10, "every chain step ran before the run waits");
    let status = journal.run(report.run).unwrap().unwrap().status;
    assert_eq!(status, RunStatus::AwaitingInput);
    assert_eq!(answer_to_the_end(&journal, &reg, report).await, 1);
    assert_eq!(c.get(), 10, "no step ran twice");
}

/// In a flow: calls made one after another beside an `ask` all run before the run waits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_question_in_a_flow_lets_the_calls_beside_it_run() {
    let c = Counter::default();
    let flow = FnFlow::new("beside", |_t: Value, ctx| async move {
        let chain = async {
            for i in 0..10 {
                ctx.call("effect", json!({ "i": i })).await?;
            }
            Ok::<_, clio_flow::FlowError>(())
        };
        let (answer, chained) = tokio::join!(ctx.ask("go on?"), chain);
        chained?;
        Ok(FlowOutput::text(answer?))
    });
    let reg = registry(&c).flow(flow);
    let journal = Journal::open_in_memory().unwrap();
    let report = runtime(&journal, reg.clone()).run(sel("beside"), json!({})).await.unwrap();
    assert!(matches!(report.outcome, RunOutcome::AwaitingInput(_)), "{:?}", report.outcome);
    assert_eq!(c.get(), 10, "every call beside the question ran before the run waits");
    assert_eq!(answer_to_the_end(&journal, &reg, report).await, 1);
    assert_eq!(c.get(), 10, "no call ran twice");
}

/// In a flow: calls started in the background and a chain of calls after a gather, beside
/// a question asked by a child flow.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_question_in_a_child_flow_lets_the_parents_other_work_run() {
    let c = Counter::default();
    let flow = FnFlow::new("parent", |_t: Value, ctx| async move {
        let asked = ctx.call("asker", json!({}));
        let chain = async {
            for i in 0..6 {
                ctx.call("effect", json!({ "i": i })).await?;
            }
            Ok::<_, clio_flow::FlowError>(())
        };
        let (answer, chained) = tokio::join!(asked, chain);
        chained?;
        answer?;
        Ok(FlowOutput::text("done"))
    });
    let reg = registry(&c).flow(flow).flow(asker());
    let journal = Journal::open_in_memory().unwrap();
    let report = runtime(&journal, reg.clone()).run(sel("parent"), json!({})).await.unwrap();
    assert!(matches!(report.outcome, RunOutcome::AwaitingInput(_)), "{:?}", report.outcome);
    assert_eq!(c.get(), 6);
    answer_to_the_end(&journal, &reg, report).await;
    assert_eq!(c.get(), 6);
}

/// A registry whose `mark` tool records the step (`i` of its input) it ran for, each time.
fn marking(marks: &Arc<Mutex<Vec<u64>>>) -> Registry {
    let m = Arc::clone(marks);
    registry(&Counter::default()).flow(asker()).tool(Tool::new("mark", move |args: Value| {
        let m = Arc::clone(&m);
        async move {
            m.lock().unwrap().push(args["i"].as_u64().unwrap_or(u64::MAX));
            Ok(json!({ "marked": args["i"] }))
        }
    }))
}

/// A random DAG: step `i` depends on the earlier steps in `deps[i]`, and asks a question
/// (instead of marking) when `asks[i]`.
fn dag() -> impl Strategy<Value = (Vec<Vec<usize>>, Vec<bool>)> {
    (1usize..12).prop_flat_map(|n| {
        let deps = (0..n)
            .map(|i| proptest::sample::subsequence((0..i).collect::<Vec<_>>(), 0..=i.min(3)))
            .collect::<Vec<_>>();
        (deps, proptest::collection::vec(proptest::bool::weighted(0.3), n))
    })
}

/// The steps that run before any answer: those with no question among themselves and
/// their ancestors.
fn reachable_without_an_answer(deps: &[Vec<usize>], asks: &[bool]) -> BTreeSet<u64> {
    let mut blocked = vec![false; deps.len()];
    for i in 0..deps.len() {
        blocked[i] = asks[i] || deps[i].iter().any(|d| blocked[*d]);
    }
    (0..deps.len()).filter(|i| !blocked[*i]).map(|i| i as u64).collect()
}

async fn run_dag(deps: &[Vec<usize>], asks: &[bool]) -> Result<(), TestCaseError> {
    let marks = Arc::new(Mutex::new(Vec::new()));
    let reg = marking(&marks);
    let steps: Vec<Value> = deps
        .iter()
        .enumerate()
        .map(|(i, after)| {
            let after: Vec<String> = after.iter().map(|d| format!("s{d}")).collect();
            let target = if asks[i] { "asker" } else { "mark" };
            json!({ "id": format!("s{i}"), "target": target, "input": { "i": i }, "after": after })
        })
        .collect();
    let journal = Journal::open_in_memory().unwrap();
    let report = runtime(&journal, reg.clone())
        .run(sel("workflow"), json!({ "workflow": { "steps": steps } }))
        .await
        .unwrap();
    let ran: BTreeSet<u64> = marks.lock().unwrap().iter().copied().collect();
    let expected = reachable_without_an_answer(deps, asks);
    prop_assert_eq!(&ran, &expected, "the steps that ran before the run waits");
    prop_assert_eq!(marks.lock().unwrap().len(), ran.len(), "a step ran twice");
    if asks.iter().any(|a| *a) {
        prop_assert!(
            matches!(report.outcome, RunOutcome::AwaitingInput(_)),
            "{:?}",
            report.outcome
        );
        let status = journal.run(report.run).unwrap().unwrap().status;
        prop_assert_eq!(status, RunStatus::AwaitingInput);
    }
    answer_to_the_end(&journal, &reg, report).await;
    let all: Vec<u64> = {
        let mut m = marks.lock().unwrap().clone();
        m.sort_unstable();
        m
    };
    let markers: Vec<u64> = (0..deps.len()).filter(|i| !asks[*i]).map(|i| i as u64).collect();
    prop_assert_eq!(all, markers, "every marking step ran exactly once in the end");
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// Random DAGs with questions on random steps: the set of steps that ran before the run
    /// waits is exactly the set reachable without an answer; answered and resumed, every
    /// step has run once.
    #[test]
    fn the_steps_run_before_a_wait_are_those_reachable_without_an_answer((deps, asks) in dag()) {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(run_dag(&deps, &asks))?;
    }
}
