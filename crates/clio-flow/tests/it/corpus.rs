//! Canned journals: recorded runs, one per feature (a gather, a question, a workflow with
//! an approved edit, a team, a run ended by a limit), committed under
//! `tests/data/journals/` as the redb files a real run left. Each test copies
//! its journal, rebuilds the code that recorded it, and checks that the current code
//! replays the history exactly, running nothing, to the recorded outcome; the trace of the
//! history is an insta snapshot a person reads. A change of the record format or of the
//! replay rules therefore shows up here as a failing corpus, before it meets a user's
//! journal.
//!
//! `CLIO_WRITE_CORPUS=1 cargo test -p clio-flow --test it corpus::` records the journals
//! anew (after a deliberate format change; say so in the commit).

use std::path::{Path, PathBuf};

use clio_flow::{
    AskSchema, FlowOutput, FnFlow, Limits, Registry, ReplayVerdict, RunOutcome, RunReport, Runtime,
    RuntimeConfig, SubagentOutcome, Team, TeamConfig, Worker, WorkerReply, register_team_tools,
    selection,
};
use clio_journal::{Journal, JournalConfig, RunId};
use serde_json::{Value, json};

use crate::support::{Counter, registry};

/// Where the canned journals are.
fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/journals")
}

/// The file of the journal named `name` in `dir`. A journal closed cleanly holds all of
/// its records in its file (its log holds none that the file lacks), so the log is not
/// kept.
fn file(dir: &Path, name: &str) -> PathBuf {
    dir.join(format!("{name}.redb"))
}

/// One canned run: the code that records it and how it is driven to its end.
struct Case {
    name: &'static str,
    /// The registry of the code (built on `journal`, which a team needs).
    code: fn(&Counter, &Journal) -> Registry,
    config: fn() -> RuntimeConfig,
    flow: &'static str,
    options: Value,
    input: Value,
    /// The answers to the run's questions, in the order it asks them.
    answers: &'static [&'static str],
}

impl Case {
    fn runtime(&self, counter: &Counter, journal: &Journal) -> Runtime {
        Runtime::new(journal.clone(), (self.code)(counter, journal), (self.config)())
    }

    /// Records the run in a new journal at `path`, answering its questions; returns it.
    async fn record(&self, path: &Path) -> RunId {
        let journal = Journal::open(path, JournalConfig::default()).unwrap();
        let counter = Counter::default();
        let rt = self.runtime(&counter, &journal);
        let mut report =
            rt.run(selection(self.flow, self.options.clone()), self.input.clone()).await.unwrap();
        let mut answers = self.answers.iter();
        while let RunOutcome::AwaitingInput(questions) = &report.outcome {
            let answer = answers.next().unwrap_or_else(|| panic!("{}: no answer left", self.name));
            rt.answer(report.run, questions[0].id, answer).await.unwrap();
            report = rt.resume(report.run).await.unwrap();
        }
        report.run
    }
}

/// What a drive ended with, as the corpus compares it.
fn outcome(outcome: &RunOutcome) -> String {
    match outcome {
        RunOutcome::Succeeded(out) => format!("succeeded: {}", out.answer),
        RunOutcome::Failed(err) => format!("failed: {}", err.reason()),
        RunOutcome::Cancelled => "cancelled".to_owned(),
        RunOutcome::AwaitingInput(qs) => format!("awaiting {} answer(s)", qs.len()),
    }
}

/// The history of run `run` as a person reads it: each entry's kind and identity.
fn trace(journal: &Journal, run: RunId) -> String {
    let mut out = String::new();
    for e in journal.entries(run).unwrap() {
        let identity = e.identity.as_deref().unwrap_or("-");
        out.push_str(&format!("{:>3} {:?} {identity}\n", e.seq, e.kind));
    }
    for t in journal.tasks(run).unwrap() {
        out.push_str(&format!("task {} {:?} {} {:?}\n", t.id.0, t.kind, t.target, t.status));
    }
    out
}

/// Checks the canned journal of `case` (recording it first with `CLIO_WRITE_CORPUS=1`).
async fn check(case: &Case) {
    let corpus = corpus_dir();
    if std::env::var_os("CLIO_WRITE_CORPUS").is_some() {
        std::fs::create_dir_all(&corpus).unwrap();
        let scratch = tempfile::tempdir().unwrap();
        let path = scratch.path().join(format!("{}.redb", case.name));
        case.record(&path).await;
        // Every handle is gone once the runtime's background work has let go of it: the
        // journal is closed cleanly, and what the log held is in the file.
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        std::fs::copy(file(scratch.path(), case.name), file(&corpus, case.name)).unwrap();
    }
    // A copy: opening a journal to write may upgrade it, and the corpus stays as recorded.
    let scratch = tempfile::tempdir().unwrap();
    let canned = file(&corpus, case.name);
    assert!(
        canned.exists(),
        "{}: the canned journal {} is missing; record it with CLIO_WRITE_CORPUS=1",
        case.name,
        canned.display()
    );
    let redb = file(scratch.path(), case.name);
    std::fs::copy(&canned, &redb).unwrap();
    let journal = Journal::open(&redb, JournalConfig::default()).unwrap();
    let runs = journal.runs(&clio_journal::RunFilter::default()).unwrap();
    assert_eq!(runs.len(), 1, "{}: one run per canned journal", case.name);
    let run = runs[0].id;
    let counter = Counter::default();
    let rt = case.runtime(&counter, &journal);

    // The current code reaches every recorded command and nothing else.
    let check = rt.check_replay(run).await.unwrap();
    let ReplayVerdict::Clean { outcome: replayed } = &check.verdict else {
        panic!("{}: the corpus no longer replays: {:?}", case.name, check.verdict);
    };
    assert_eq!(check.reached, check.commands, "{}: {check:?}", case.name);
    assert!(check.commands > 0, "{}: an empty history proves nothing", case.name);
    // A full replay returns what the run returned, submitting nothing.
    let report: RunReport = rt.replay(run).await.unwrap();
    assert_eq!(outcome(&report.outcome), outcome(replayed), "{}", case.name);
    assert_eq!(report.submitted, 0, "{}: a replay submits nothing", case.name);
    assert_eq!(counter.get(), 0, "{}: a replay runs no tool or subagent", case.name);

    let shown = format!(
        "run {} ({:?}), {} commands, replays to: {}\n\n{}",
        run.0,
        runs[0].status,
        check.commands,
        outcome(&report.outcome),
        trace(&journal, run)
    );
    insta::assert_snapshot!(case.name, shown);
}

fn default_config() -> RuntimeConfig {
    RuntimeConfig::default()
}

fn gather_code(counter: &Counter, _: &Journal) -> Registry {
    let fan = FnFlow::new("fan", |_t: Value, ctx| async move {
        let calls = (0..4)
            .map(|n| ctx.call("effect", json!({ "n": n })).key(format!("effect-{n}")))
            .collect();
        let all = ctx.gather(calls).limit(2).await?;
        let first = ctx.call("writer", json!("summary")).key("summary").await?;
        Ok(FlowOutput::text(format!("{} results; {}", all.len(), first.answer)))
    });
    registry(counter).flow(fan)
}

fn ask_code(counter: &Counter, _: &Journal) -> Registry {
    let asking = FnFlow::new("asking", |_t: Value, ctx| async move {
        let go = ctx.ask_full("go on?", AskSchema::Bool, &[], "", "go-on").await?;
        let note = ctx.ask_full("a note?", AskSchema::Text, &[], "", "note").await?;
        let done = ctx.call("effect", json!({ "go": go, "note": note })).key("effect").await?;
        Ok(FlowOutput::text(done.value.to_string()))
    });
    registry(counter).flow(asking)
}

fn workflow_code(counter: &Counter, _: &Journal) -> Registry {
    let editor = Worker::handler("editor", |req| async move {
        req.ctx
            .call(
                "workflow_add_step",
                json!({ "step_id": "polish", "target": "writer", "input": "polish $draft", "reason": "rough" }),
            )
            .key("add-polish")
            .await?;
        Ok(WorkerReply::text("looks rough"))
    });
    registry(counter).subagent(editor)
}

fn team_code(counter: &Counter, journal: &Journal) -> Registry {
    let ran = counter.clone();
    let team = Team::new(
        journal.clone(),
        move |job: clio_flow::SubagentJob| {
            let ran = ran.clone();
            async move {
                ran.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                SubagentOutcome::Answer(format!("did {}", job.task))
            }
        },
        TeamConfig::default(),
    );
    let lead = FnFlow::new("lead", |_t: Value, ctx| async move {
        let ran =
            ctx.call("council_run", json!({ "tasks": ["a", "b"] })).key("council").await?.value;
        let answers: Vec<&str> =
            ran.as_array().into_iter().flatten().filter_map(|r| r["answer"].as_str()).collect();
        Ok(FlowOutput::text(answers.join(", ")))
    });
    register_team_tools(registry(counter).flow(lead), &team)
}

fn limits_code(counter: &Counter, _: &Journal) -> Registry {
    let calls = FnFlow::new("calls", |_t: Value, ctx| async move {
        for i in 0..10 {
            ctx.call("writer", json!(i)).key(format!("writer-{i}")).await?;
        }
        Ok(FlowOutput::text("never"))
    })
    .limits(Limits { max_model_calls: 3, ..Limits::default() });
    registry(counter).flow(calls)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gather_replays_from_the_corpus() {
    check(&Case {
        name: "gather",
        code: gather_code,
        config: default_config,
        flow: "fan",
        options: json!({}),
        input: json!("go"),
        answers: &[],
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answered_questions_replay_from_the_corpus() {
    check(&Case {
        name: "ask",
        code: ask_code,
        config: default_config,
        flow: "asking",
        options: json!({}),
        input: json!(null),
        answers: &["yes", "keep it short"],
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workflow_with_an_approved_edit_replays_from_the_corpus() {
    check(&Case {
        name: "workflow_edit",
        code: workflow_code,
        config: default_config,
        flow: "workflow",
        options: json!({}),
        input: json!({
            "workflow": { "steps": [
                {"id": "draft", "target": "writer", "input": "$task"},
                {"id": "edit", "target": "editor", "after": ["draft"]}
            ]},
            "task": "essay",
            "editors": ["editor"],
            "approve_edits": true,
            "max_added_steps": 1
        }),
        answers: &["yes"],
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_team_run_replays_from_the_corpus() {
    check(&Case {
        name: "team",
        code: team_code,
        config: default_config,
        flow: "lead",
        options: json!({}),
        input: json!(null),
        answers: &[],
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_ended_by_a_limit_replays_from_the_corpus() {
    check(&Case {
        name: "limits",
        code: limits_code,
        config: default_config,
        flow: "calls",
        options: json!({}),
        input: json!(null),
        answers: &[],
    })
    .await;
}
