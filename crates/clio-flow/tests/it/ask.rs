//! `ask`: text, bool and options (returned lowercase), reason and key; a run waiting on a
//! question is left `awaiting_input`, the runtime that asked may be dropped, and an answer
//! recorded later lets a new runtime resume it.

use clio_flow::{FlowOutput, FnFlow, RunOutcome};
use clio_journal::{Journal, JournalConfig, RunStatus};
use serde_json::{Value, json};

use crate::support::{Counter, answer, registry, runtime, sel};

fn draft_and_review() -> FnFlow {
    FnFlow::new("draft-and-review", |task: Value, ctx| async move {
        let mut draft = ctx.call("self", ()).await?;
        for _ in 0..3 {
            let notes = ctx.call("reviewer", &draft).await?;
            let choice = ctx
                .ask_choice(
                    &format!(
                        "The reviewer's notes:\n\n{}\n\nAccept the draft, or revise it?",
                        notes.answer
                    ),
                    &["Accept", "Revise"],
                )
                .await?;
            if choice == "accept" {
                break;
            }
            draft = ctx
                .call("self", json!({ "task": task, "draft": draft.answer, "notes": notes.answer }))
                .await?;
        }
        let note = ctx
            .ask_full("Anything to add?", clio_flow::AskSchema::Text, &[], "for the report", "note")
            .await?;
        Ok(FlowOutput::text(format!("{} + {}", draft.answer, note.as_str().unwrap_or(""))))
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_question_waits_across_process_exits() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("journal.redb");
    let c = Counter::default();
    let reg = registry(&c)
        .this_agent(clio_flow::Worker::handler("self", |req| async move {
            Ok(clio_flow::WorkerReply::text(format!("draft[{}]", req.text)))
        }))
        .flow(draft_and_review());
    let run = {
        let journal = Journal::open(&path, JournalConfig::default()).unwrap();
        let report = runtime(&journal, reg.clone())
            .run(sel("draft-and-review"), json!("essay"))
            .await
            .unwrap();
        let RunOutcome::AwaitingInput(qs) = &report.outcome else { panic!("{:?}", report.outcome) };
        assert_eq!(qs.len(), 1);
        assert_eq!(qs[0].options, vec!["accept", "revise"]);
        assert_eq!(journal.run(report.run).unwrap().unwrap().status, RunStatus::AwaitingInput);
        report.run
    };
    // The "process" that asked is gone; another one answers, and a third resumes.
    {
        let journal = Journal::open(&path, JournalConfig::default()).unwrap();
        let rt = runtime(&journal, reg.clone());
        let q = rt.questions(run).unwrap();
        assert!(rt.answer(run, q[0].id, "maybe").await.is_err(), "not an option");
        rt.answer(run, q[0].id, "Revise").await.unwrap();
        assert!(rt.answer(run, q[0].id, "Accept").await.is_err(), "answered once");
    }
    let journal = Journal::open(&path, JournalConfig::default()).unwrap();
    let rt = runtime(&journal, reg.clone());
    let report = rt.resume(run).await.unwrap();
    let RunOutcome::AwaitingInput(qs) = &report.outcome else { panic!("{:?}", report.outcome) };
    rt.answer(run, qs[0].id, "ACCEPT").await.unwrap();
    let report = rt.resume(run).await.unwrap();
    let RunOutcome::AwaitingInput(qs) = &report.outcome else { panic!("{:?}", report.outcome) };
    assert_eq!(qs[0].reason, "for the report");
    rt.answer(run, qs[0].id, "thanks").await.unwrap();
    let report = rt.resume(run).await.unwrap();
    assert!(answer(&report).ends_with("+ thanks"), "{}", answer(&report));
    assert_eq!(journal.run(run).unwrap().unwrap().status, RunStatus::Succeeded);
    let replay = rt.replay(run).await.unwrap();
    assert_eq!(answer(&replay), answer(&report));
    assert_eq!(replay.submitted, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_run_continues_when_answered_in_process() {
    let c = Counter::default();
    let flow = FnFlow::new("yn", |_t: Value, ctx| async move {
        let go = ctx.ask_bool("Send it?").await?;
        Ok(FlowOutput::text(format!("{go}")))
    });
    let journal = Journal::open_in_memory().unwrap();
    let rt = runtime(&journal, registry(&c).flow(flow));
    let report = rt.run(sel("yn"), json!(null)).await.unwrap();
    let RunOutcome::AwaitingInput(qs) = &report.outcome else { panic!() };
    assert_eq!(qs[0].schema, "bool");
    assert!(rt.answer(report.run, qs[0].id, "perhaps").await.is_err());
    rt.answer(report.run, qs[0].id, "no").await.unwrap();
    assert_eq!(answer(&rt.resume(report.run).await.unwrap()), "false");
}
