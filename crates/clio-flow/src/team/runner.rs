//! [`ModelRunner`]: a [`SubagentRunner`] that runs a subagent's turn as a plain model chat
//! through the session's restricted router, claiming each iteration against the durable
//! budget and checkpointing each complete model input. It offers no tools: the
//! orchestration tools run an agent's subagents as react-loop calls of its run instead,
//! and use this runner only for team calls a flow makes.

use clio_spec::Requires;

use crate::model::{Message, ModelRequest, Models};
use crate::team::{RunnerFuture, SubagentJob, SubagentOutcome, SubagentRunner};

/// Runs subagent turns as model chats on `models`.
#[derive(Debug, Clone)]
pub struct ModelRunner {
    /// The catalog and providers; each session's allowlist restricts them.
    pub models: Models,
    /// What the model must offer.
    pub requires: Requires,
    /// The most model iterations of one turn.
    pub max_iters: u64,
}

impl ModelRunner {
    /// Returns a runner on `models` with no requirement and 20 iterations per turn.
    pub fn new(models: Models) -> ModelRunner {
        ModelRunner { models, requires: Requires::default(), max_iters: 20 }
    }
}

const NO_TOOLS: &str = "error: this subagent has no tools; answer with what you have";

impl SubagentRunner for ModelRunner {
    fn run(&self, job: SubagentJob) -> RunnerFuture {
        let (models, requires, max_iters) = (self.models.clone(), self.requires, self.max_iters);
        Box::pin(async move {
            let env = job.env.clone();
            let router = match env.restrict_router(models).await {
                Ok(router) => router,
                Err(err) => return SubagentOutcome::Failed(err.to_string()),
            };
            let mut messages = job.messages;
            for _ in 0..max_iters {
                match env.claim_iteration().await {
                    Ok(true) => {}
                    Ok(false) => {
                        let reason = env.stop_reason().await.ok().flatten();
                        let why = reason.map_or_else(|| "refused".to_owned(), |r| r.to_string());
                        return SubagentOutcome::Failed(format!("no iteration left: {why}"));
                    }
                    Err(err) => return SubagentOutcome::Failed(err.to_string()),
                }
                if let Err(err) = env.checkpoint(&messages).await {
                    return SubagentOutcome::Failed(err.to_string());
                }
                let request =
                    ModelRequest::new(job.model.clone(), env.session().0.clone(), messages.clone());
                let response = match router.complete(&request, &requires).await {
                    Ok(response) => response,
                    Err(err) => return SubagentOutcome::Failed(err.to_string()),
                };
                if response.tool_calls.is_empty() {
                    return SubagentOutcome::Answer(response.text);
                }
                messages.push(Message::from_response(&response));
                for call in &response.tool_calls {
                    messages.push(Message::tool_result(call.id.clone(), NO_TOOLS));
                }
            }
            SubagentOutcome::Stopped
        })
    }
}
