//! The data a run reports: step statuses, edit records, the outcome and the [`RunResult`]
//! the workflow returns. These serialize because they become the flow's recorded result.

use serde::Serialize;
use serde_json::{Map, Value};
use thiserror::Error;

use crate::config::Bounds;
use crate::event::{EditorCall, Proposal};

/// Where a step is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StepStatus {
    /// Waiting on steps that have not finished.
    Pending,
    /// Ready, waiting for a free slot under the concurrency limit.
    Queued,
    /// Asked to start; its `started` event has not come yet.
    Starting,
    /// Running as a task.
    Running,
    /// Finished with an answer.
    Finished,
    /// Failed (see its error, and whether a repair replaced it).
    Failed,
    /// Cancelled by the person, the runtime or an editor.
    Cancelled,
    /// Never ran because a step it waits on failed or was cancelled.
    Skipped,
}

impl StepStatus {
    /// Returns whether the step will not change any more.
    pub fn is_settled(self) -> bool {
        matches!(
            self,
            StepStatus::Finished | StepStatus::Failed | StepStatus::Cancelled | StepStatus::Skipped
        )
    }

    /// Returns the status's name as in JSON.
    pub fn name(self) -> &'static str {
        match self {
            StepStatus::Pending => "pending",
            StepStatus::Queued => "queued",
            StepStatus::Starting => "starting",
            StepStatus::Running => "running",
            StepStatus::Finished => "finished",
            StepStatus::Failed => "failed",
            StepStatus::Cancelled => "cancelled",
            StepStatus::Skipped => "skipped",
        }
    }
}

/// One step of a run as it stands: the `workflow` entries of the result.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StepReport {
    /// The step id.
    pub id: String,
    /// Who runs it.
    pub target: String,
    /// Its status.
    pub status: StepStatus,
    /// The steps it waits on now (a repair replaces the step it repairs).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub after: Vec<String>,
    /// Its task handle, once started.
    pub handle: Option<String>,
    /// The model it ran on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The error of a failed step, or why a step was cancelled or skipped.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// Whether it is an editor's step.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub editor: bool,
    /// The proposal that added it, for a step an editor added.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub added_by: Option<u32>,
    /// The failed step it repairs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub repairs: Option<String>,
    /// The repair step that took its place.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub repaired_by: Option<String>,
}

/// What became of a proposal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "status", content = "reason", rename_all = "snake_case")]
pub enum EditStatus {
    /// Made while the editor's call runs; applied when it ends.
    Proposed,
    /// Waiting for the person's yes or no.
    AwaitingDecision,
    /// Applied.
    Applied,
    /// Refused, with the reason.
    Refused(String),
    /// The person said no.
    Declined,
}

/// A proposal and what became of it; every one is recorded.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EditRecord {
    /// The proposal's number, in order of arrival from 0.
    pub id: u32,
    /// The editor call that proposed it.
    pub from: EditorCall,
    /// What was proposed.
    pub proposal: Proposal,
    /// What became of it.
    #[serde(flatten)]
    pub status: EditStatus,
}

/// How a run ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum Outcome {
    /// Every step finished (or was cancelled by an editor's edit, with its dependents).
    Completed,
    /// A step failed and no editor repaired it: `FlowStall(step_failed)`.
    StepFailed {
        /// The failed step.
        step: String,
        /// Its error.
        error: String,
    },
    /// A step or the whole run was cancelled.
    Cancelled {
        /// The cancelled step, or `None` when the whole run was cancelled.
        step: Option<String>,
    },
}

/// What a workflow returns.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunResult {
    /// How the run ended.
    pub outcome: Outcome,
    /// The final steps' answers (each under its step id and model), then every earlier
    /// finished step's answer.
    pub answer: String,
    /// Each finished step's answer by id, in step order.
    pub results: Map<String, Value>,
    /// Every step with its status and task handle, in step order (added steps last).
    pub workflow: Vec<StepReport>,
    /// The merged typed `workflow_state` of the steps that returned one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workflow_state: Option<Value>,
    /// Every editor proposal and what became of it.
    pub edits: Vec<EditRecord>,
    /// The editing limits in force.
    pub limits: Bounds,
}

impl RunResult {
    /// Returns the result's JSON form.
    pub fn to_json(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}

/// An event that does not fit the run's state: a bug in the driver, or a journal that does
/// not belong to this workflow (a replay mismatch).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum EventError {
    /// The event names a step the run does not have.
    #[error("no step `{step}` in this run")]
    UnknownStep {
        /// The step id.
        step: String,
    },
    /// The event does not fit the step's status.
    #[error("step `{step}` cannot be {event} while it is {status}")]
    Unexpected {
        /// The step id.
        step: String,
        /// What the event would do (`started`, `finished`, …).
        event: &'static str,
        /// The step's status, by name.
        status: &'static str,
    },
    /// A proposal came from a step that is not an editor's running step.
    #[error("step `{step}` cannot propose edits: it is not a running editor's step")]
    NotEditing {
        /// The step id.
        step: String,
    },
    /// A repair event names an offer that is not open.
    #[error("no open repair offer of step `{step}` to editor `{editor}`")]
    NoRepairOffer {
        /// The failed step.
        step: String,
        /// The editor.
        editor: String,
    },
    /// A decision names a proposal that is not waiting for one.
    #[error("proposal {proposal} is not waiting for a decision")]
    NotAwaitingDecision {
        /// The proposal's number.
        proposal: u32,
    },
    /// The run has already ended.
    #[error("the run has ended")]
    RunEnded,
}
