//! [`CallRunner`]: the runner of the subagents an agent's team tools start. Each turn of a
//! subagent is a call of the run that asked for it: the agent whose team tool started it,
//! run as a react loop (with that agent's tools, permissions and hooks) on the subagent's
//! task and the context it inherited, as a child of the team tool's task. So a subagent's
//! model calls and tool calls are tasks in the run's tree with their tokens, count against
//! the run's limits and budgets, and replay like any call; its iterations are claimed
//! against the session's durable budget, its input checkpointed, and its model requests
//! held to the session's allowlist (see `react::team_turn`).
//!
//! A turn's call is keyed by the session and a digest of its input, so a run that replays
//! the team tool's task finds the same turn again. The call runs on a task of its own that
//! the run waits for before it ends; cancelling the subagent cancels the call, which is
//! recorded as cancelled.

use serde_json::json;
use tokio::sync::oneshot;

use crate::ctx::Ctx;
use crate::model::Message;
use crate::registry::Target;
use crate::result::CallInput;
use crate::runtime::digest;
use crate::team::{RunnerFuture, SubagentJob, SubagentOutcome, SubagentRunner};

/// Runs team subagent turns as calls of agent `agent` made through `ctx` (the context of
/// the team tool call that started them).
#[derive(Clone)]
pub(crate) struct CallRunner {
    pub(crate) ctx: Ctx,
    pub(crate) agent: String,
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
            let (tx, rx) = oneshot::channel();
            let work = tokio::spawn(async move {
                let _ = tx.send(call.run().await);
            });
            ctx.run.spawn_background(work);
            // Dropped when the team cancels the subagent: the call is cancelled too.
            let cancel_on_drop = token.drop_guard();
            let res = rx.await;
            cancel_on_drop.disarm();
            match res {
                Ok(Ok(result)) => SubagentOutcome::Answer(result.answer),
                Ok(Err(err)) => SubagentOutcome::Failed(err.to_string()),
                Err(_) => SubagentOutcome::Failed(format!(
                    "the call running subagent {session} ended without a result"
                )),
            }
        })
    }
}
