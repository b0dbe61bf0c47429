//! [`CallRunner`]: the runner of the subagents an agent's team tools start. Each turn of a
//! subagent is a call of the run that asked for it: the agent whose team tool started it,
//! run as a react loop (with that agent's tools, permissions and hooks) on the subagent's
//! task and the context it inherited, as a child of the team tool's task. So a subagent's
//! model calls and tool calls are tasks in the run's tree with their tokens, count against
//! the run's limits and budgets, and replay like any call; its iterations are claimed
//! against the session's durable budget, its input checkpointed, and its model requests
//! held to the session's allowlist (see `react::team_turn`).
//!
//! A turn's call is keyed by the session and a digest of its input (its identity does not
//! depend on the order turns start in). The call runs as background work of the run: the
//! run waits for it, and for the team to record how the turn ended, before it ends. The
//! run is held open from the moment a turn is queued (`hold`), so a turn queued behind
//! `max_parallel`, or not yet started when the flow returned, still runs; a turn queued
//! after the run ended fails instead of writing into a finished run. Cancelling the
//! subagent cancels the call, which is recorded as cancelled. A run left awaiting input
//! (a question) aborts its background work, subagent turns included: their tasks are cut
//! short, and a resumed run reports the team call that started them as interrupted.

use serde_json::json;
use tokio::sync::oneshot;

use crate::ctx::Ctx;
use crate::model::Message;
use crate::registry::Target;
use crate::result::CallInput;
use crate::runtime::digest;
use crate::team::{RunnerFuture, SubagentJob, SubagentOutcome, SubagentRunner, TurnHold};

/// Runs team subagent turns as calls of agent `agent` made through `ctx` (the context of
/// the team tool call that started them).
#[derive(Clone)]
pub(crate) struct CallRunner {
    pub(crate) ctx: Ctx,
    pub(crate) agent: String,
}

/// Cancels a turn's call when dropped armed (the team dropped the turn: the subagent was
/// cancelled): its token, and in the journal the call's task and everything under it,
/// as `Runtime::cancel_task` does, so no task of it is left running.
struct CancelOnDrop {
    ctx: Ctx,
    token: tokio_util::sync::CancellationToken,
    identity: String,
    armed: bool,
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        self.token.cancel();
        if tokio::runtime::Handle::try_current().is_err() {
            return; // No runtime left to record it on: a resume reconciles it.
        }
        let runtime = crate::runtime::Runtime { inner: std::sync::Arc::clone(&self.ctx.run.rt) };
        let (run, accepted) = (self.ctx.run_id(), format!("{}@accepted", self.identity));
        let cleanup = async move {
            let journal = runtime.inner.journal.clone();
            let found = crate::runtime::blocking(move || journal.entry_by_identity(run, &accepted));
            // Not accepted yet: the call sees its token and records its own cancellation.
            let Ok(Some(task)) = found.await.map(|e| e.and_then(|e| e.task)) else { return };
            // Once the call has recorded its own end, every write its dropped work had
            // sent is in too (the journal commits in order): then nothing it started is
            // missed. Bounded, in case the call cannot record.
            for _ in 0..400 {
                let journal = runtime.inner.journal.clone();
                match crate::runtime::blocking(move || journal.task(task)).await {
                    Ok(Some(rec)) if !rec.status.is_terminal() => {
                        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
                    }
                    _ => break,
                }
            }
            let _ = runtime.cancel_task(task).await;
        };
        // After the run ended there is nothing left running to record.
        let _ = self.ctx.run.spawn_background_unless_ended(cleanup);
    }
}

/// Splits a turn's input into the conversation before it and the prompt it ends with.
fn split_input(job: &SubagentJob) -> (Vec<Message>, String) {
    let mut history = job.messages.clone();
    match history.last() {
        Some(Message::User { content, .. }) => {
            let prompt = content.clone();
            history.pop();
            (history, prompt)
        }
        _ => (history, job.task.clone()),
    }
}

impl SubagentRunner for CallRunner {
    fn run(&self, job: SubagentJob) -> RunnerFuture {
        let (ctx, agent) = (self.ctx.clone(), self.agent.clone());
        Box::pin(async move {
            let session = job.env.session().0.clone();
            let (history, prompt) = split_input(&job);
            let input = json!({
                "session": session,
                "model": job.model,
                "messages": serde_json::to_value(&job.messages).unwrap_or_default(),
            });
            let key = format!("team:{session}:{}", &digest(&input)[..16]);
            let token = ctx.scope.cancel.child_token();
            let mut call = ctx
                .with_cancel(token.clone())
                .call(Target::Name(agent), CallInput::Text(prompt))
                .key(key)
                .label(format!("subagent {session}"))
                .team_turn(history, job.env.clone());
            if !job.model.is_empty() {
                call = call.model(job.model.clone());
            }
            let identity = call.identity();
            let (tx, rx) = oneshot::channel();
            let (team, sid) = (job.env.team().clone(), job.env.session().clone());
            let work = async move {
                let _ = tx.send(call.run().await);
                // The run ends only once the team has recorded how the turn ended.
                let _ = team.wait_settled(&sid).await;
            };
            if !ctx.run.spawn_background_unless_ended(work) {
                // Queued after its run ended (its hold came too late).
                return SubagentOutcome::Failed(format!(
                    "run {} ended before subagent {session} started",
                    ctx.run_id().0
                ));
            }
            // Dropped when the team cancels the subagent: the call is cancelled too.
            let mut cancel_on_drop =
                CancelOnDrop { ctx: ctx.clone(), token, identity, armed: true };
            let res = rx.await;
            cancel_on_drop.armed = false;
            match res {
                Ok(Ok(result)) => SubagentOutcome::Answer(result.answer),
                Ok(Err(err)) => SubagentOutcome::Failed(err.to_string()),
                Err(_) => SubagentOutcome::Failed(format!(
                    "the call running subagent {session} ended without a result"
                )),
            }
        })
    }

    /// Holds the run open from the moment a turn is queued: without it, a flow returning
    /// right after its team tool started a subagent ended the run before the turn had
    /// reached `run` (and so before its call was background work of the run), and the
    /// turn then failed as started after its run.
    fn hold(&self) -> Option<TurnHold> {
        let (held, released) = oneshot::channel::<()>();
        let waits = async move {
            let _ = released.await;
        };
        self.ctx.run.spawn_background_unless_ended(waits).then(|| Box::new(held) as TurnHold)
    }
}
