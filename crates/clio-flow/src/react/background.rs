//! Background work a react loop started with `run_flow` or `run_workflow`, delivered into
//! its conversation when it ends (the seed: "the model gets its handle at once and keeps
//! working, and the result arrives when the flow ends").
//!
//! At each turn boundary the loop delivers the work it started that has ended since, one
//! user message per result (naming the handle, the tool, the flow and its answer or
//! error); when the model answers while such work still runs, the loop waits for the next
//! to end, delivers it and goes on. Which results a boundary delivers is decided once and
//! recorded: a step keyed `background:<iteration>` (or `background:<iteration>:end` for a
//! wait after an answer) whose result is the list delivered, possibly empty. A resumed or
//! replayed loop reads that list back, so it delivers the same results at the same turns;
//! only a boundary the history does not hold looks at (or waits for) the work itself.
//! Boundaries are recorded only while the loop has work it has not delivered, so a loop
//! that starts none records nothing more.

use std::time::Duration;

use clio_journal::TaskId;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::ctx::Ctx;
use crate::error::FlowError;

/// The tools whose handle a loop waits for.
const STARTERS: [&str; 2] = ["run_flow", "run_workflow"];

/// How often a loop that waits looks at the work it waits for.
const POLL: Duration = Duration::from_millis(10);

/// Work started and not delivered yet.
#[derive(Debug, Clone)]
struct Started {
    handle: u64,
    tool: String,
    target: String,
}

/// One delivered result, as its boundary's step records it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct Delivered {
    /// The task handle the starting tool returned.
    pub(super) handle: u64,
    /// `run_flow` or `run_workflow`.
    pub(super) tool: String,
    /// The flow that ran (`workflow` for `run_workflow`).
    pub(super) target: String,
    /// `succeeded`, `failed` or `cancelled`.
    pub(super) status: String,
    /// The answer, once it succeeded.
    #[serde(default)]
    pub(super) answer: Option<String>,
    /// The error, once it failed: `{reason, message, ...}`.
    #[serde(default)]
    pub(super) error: Option<Value>,
}

impl Delivered {
    /// Returns the message the model reads.
    pub(super) fn message(&self) -> String {
        let head = format!(
            "Background work {} ({} of {}) has ended: {}.",
            self.handle, self.tool, self.target, self.status
        );
        match (&self.answer, &self.error) {
            (Some(answer), _) => format!("{head}\n\nIts answer:\n{answer}"),
            (None, Some(error)) => {
                let message = error.get("message").and_then(Value::as_str).map_or_else(
                    || error.to_string(),
                    |m| format!("{} ({})", m, error["reason"].as_str().unwrap_or("error")),
                );
                format!("{head}\n\nIts error: {message}")
            }
            (None, None) => head,
        }
    }
}

/// The background work of one react loop.
#[derive(Debug, Default)]
pub(super) struct Background {
    pending: Vec<Started>,
}

impl Background {
    /// Says whether every piece of work the loop started has been delivered.
    pub(super) fn is_empty(&self) -> bool {
        self.pending.is_empty()
    }

    /// Notes the work a successful call of tool `tool` that returned `value` started.
    pub(super) fn note(&mut self, tool: &str, value: &Value) {
        if !STARTERS.contains(&tool) {
            return;
        }
        let Some(handle) = value.get("handle").and_then(Value::as_u64) else { return };
        let target = value.get("target").and_then(Value::as_str).unwrap_or_default().to_owned();
        if !self.pending.iter().any(|s| s.handle == handle) {
            self.pending.push(Started { handle, tool: tool.to_owned(), target });
        }
    }

    /// Returns the pending work that has ended, in the order it was started.
    fn ended(&self, ctx: &Ctx) -> Vec<Delivered> {
        self.pending
            .iter()
            .filter_map(|s| {
                let rec = ctx.run.task(TaskId(s.handle)).filter(|r| r.status.is_terminal())?;
                let status = match rec.status {
                    clio_journal::TaskStatus::Succeeded => "succeeded",
                    clio_journal::TaskStatus::Cancelled => "cancelled",
                    _ => "failed",
                };
                let answer = rec
                    .result
                    .as_ref()
                    .and_then(|r| r.get("answer"))
                    .and_then(Value::as_str)
                    .map(str::to_owned);
                let error = rec.error.as_deref().map(|e| FlowError::from_record(e).to_json());
                Some(Delivered {
                    handle: s.handle,
                    tool: s.tool.clone(),
                    target: s.target.clone(),
                    status: status.to_owned(),
                    answer: if status == "succeeded" {
                        answer.or(Some(String::new()))
                    } else {
                        None
                    },
                    error,
                })
            })
            .collect()
    }

    /// Delivers the pending work that has ended at the boundary `key`, recorded as a step
    /// under that key; with `wait`, first waits until one piece has ended (unless the
    /// history holds the boundary already). Returns the messages to add, in order.
    pub(super) async fn deliver(
        &mut self,
        ctx: &Ctx,
        key: &str,
        wait: bool,
    ) -> Result<Vec<String>, FlowError> {
        if self.pending.is_empty() {
            return Ok(Vec::new());
        }
        if wait && !ctx.has_step(key) && !ctx.run.replay_only {
            // Not counted as busy: a piece of work that waits on a question leaves the
            // run waiting for input, as it would without this loop.
            while self.ended(ctx).is_empty() {
                if ctx.scope.cancel.is_cancelled() {
                    return Err(FlowError::CallCancelled { handle: None });
                }
                tokio::time::sleep(POLL).await;
            }
        }
        let now = self.ended(ctx);
        let delivered: Vec<Delivered> = ctx.keyed_step(key, || async move { Ok(now) }).await?;
        self.pending.retain(|s| !delivered.iter().any(|d| d.handle == s.handle));
        Ok(delivered.iter().map(Delivered::message).collect())
    }
}
