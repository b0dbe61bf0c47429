//! A durable flow embedded in another program, with `clio-flow` and `clio-journal`: the
//! program brings its own tool and flow, its own tokio runtime and a journal file, and gets
//! runs that survive the process.
//!
//! The flow measures each specimen of a batch with a tool (`ctx.call`), then asks a person
//! whether to accept the batch (`ctx.ask_bool`). The first "process" runs it until the
//! question and exits. The second opens the same journal, answers, and resumes the run: the
//! measurements come from the journal, the tool is not called again. The finished run is
//! then replayed from its records alone, and checked against a changed flow, which is
//! refused as nondeterminism instead of being given answers recorded for other calls.
//!
//! Run it with `cargo run -p clio-flow --example embedded`.

#![allow(clippy::print_stdout, reason = "an example program: its output is the point")]

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use clio_flow::{
    FlowOutput, FnFlow, Registry, ReplayVerdict, RunOutcome, Runtime, RuntimeConfig, Tool,
    selection,
};
use clio_journal::{Journal, JournalConfig, RunId};
use serde_json::{Value, json};

type Error = Box<dyn std::error::Error>;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Error> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("journal.redb");
    let measured = Arc::new(AtomicUsize::new(0));

    let run = first_process(&path, &measured).await?;
    assert_eq!(measured.load(Ordering::SeqCst), 3, "one measurement per specimen");

    second_process(&path, &measured, run).await?;
    assert_eq!(measured.load(Ordering::SeqCst), 3, "the resume measured nothing again");

    replay(&path, &measured, run).await?;
    assert_eq!(measured.load(Ordering::SeqCst), 3, "a replay calls no tool");
    Ok(())
}

/// Returns the program's tools and flows: `measure` (counting its calls in `measured`) and
/// `review` as of `version`.
fn registry(measured: &Arc<AtomicUsize>, version: Version) -> Registry {
    let count = Arc::clone(measured);
    Registry::new()
        .tool(Tool::new("measure", move |args: Value| {
            count.fetch_add(1, Ordering::SeqCst);
            async move {
                let specimen = args["specimen"].as_str().unwrap_or_default();
                // A stand-in for a real instrument: a life that depends on the specimen.
                let cycles = 120_000 + 1_000 * (specimen.bytes().map(u64::from).sum::<u64>() % 90);
                Ok(json!({ "specimen": specimen, "cycles_to_failure": cycles }))
            }
        }))
        .flow(FnFlow::new("review", move |input: Value, ctx| async move {
            let mut specimens: Vec<String> = input["specimens"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|s| s.as_str().map(str::to_owned))
                .collect();
            if version == Version::WithControl {
                specimens.insert(0, "control".to_owned());
            }
            let mut shortest = u64::MAX;
            for specimen in &specimens {
                let result = ctx.call("measure", json!({ "specimen": specimen })).await?;
                shortest = shortest.min(result.value["cycles_to_failure"].as_u64().unwrap_or(0));
            }
            let question = format!(
                "{} specimens measured, the shortest life is {shortest} cycles: accept the batch?",
                specimens.len()
            );
            let accepted = ctx.ask_bool(&question).await?;
            let verdict = if accepted { "accepted" } else { "rejected" };
            Ok(FlowOutput::text(format!("batch {verdict} (shortest life {shortest} cycles)")))
        }))
}

/// The version of `review`: the one the run was recorded with, or a later one that
/// measures a control specimen first (a call the recorded run never made).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Version {
    Recorded,
    WithControl,
}

/// Starts a run of `review`, which stops at its question; returns the run.
async fn first_process(path: &Path, measured: &Arc<AtomicUsize>) -> Result<RunId, Error> {
    let journal = Journal::open(path, JournalConfig::default())?;
    let runtime =
        Runtime::new(journal, registry(measured, Version::Recorded), RuntimeConfig::default());
    let input = json!({ "specimens": ["T7-01", "T7-02", "T7-03"] });
    let report = runtime.run(selection("review", json!({})), input).await?;
    let RunOutcome::AwaitingInput(questions) = &report.outcome else {
        return Err(format!(
            "run {} did not stop at its question: {:?}",
            report.run, report.outcome
        )
        .into());
    };
    println!("process 1: run {} waits for an answer: {}", report.run, questions[0].text);
    println!("process 1: {} tool calls made; exiting", measured.load(Ordering::SeqCst));
    Ok(report.run)
}

/// Answers the run's question from a new runtime on the same journal file, and resumes it.
async fn second_process(path: &Path, measured: &Arc<AtomicUsize>, run: RunId) -> Result<(), Error> {
    let journal = Journal::open(path, JournalConfig::default())?;
    let runtime =
        Runtime::new(journal, registry(measured, Version::Recorded), RuntimeConfig::default());
    let question = runtime.questions(run)?.into_iter().next().ok_or("the run asks nothing")?;
    runtime.answer(run, question.id, "yes").await?;
    let report = runtime.resume(run).await?;
    let answer = report.output().ok_or_else(|| format!("run {run} ended {:?}", report.outcome))?;
    println!("process 2: answered yes; run {run}: {}", answer.answer);
    println!(
        "process 2: {} tool calls in all, {} submitted by the resume",
        measured.load(Ordering::SeqCst),
        report.submitted
    );
    Ok(())
}

/// Replays the finished run, then checks it against a changed flow.
async fn replay(path: &Path, measured: &Arc<AtomicUsize>, run: RunId) -> Result<(), Error> {
    let journal = Journal::open(path, JournalConfig::default())?;
    let runtime = Runtime::new(
        journal.clone(),
        registry(measured, Version::Recorded),
        RuntimeConfig::default(),
    );
    let report = runtime.replay(run).await?;
    let answer = report.output().ok_or_else(|| format!("replay ended {:?}", report.outcome))?;
    println!("replay: {} (submitted {})", answer.answer, report.submitted);

    let changed =
        Runtime::new(journal, registry(measured, Version::WithControl), RuntimeConfig::default());
    let check = changed.check_replay(run).await?;
    match check.verdict {
        ReplayVerdict::Mismatch(error) => println!("changed flow: refused: {error}"),
        ReplayVerdict::Clean { .. } => return Err("a changed flow replayed clean".into()),
    }
    Ok(())
}
