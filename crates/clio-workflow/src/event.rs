//! What the runtime tells a [`Scheduler`](crate::Scheduler): [`Event`]s, which it journals
//! and replays in the same order on restart. These types are a journal-entry stability
//! boundary: change their JSON form only with a format version.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::workflow::TargetKind;

/// Something that happened to a run, in the order the runtime saw it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case", deny_unknown_fields)]
pub enum Event {
    /// A step's task was started and has `handle`.
    Started {
        /// The step id.
        step: String,
        /// The task handle.
        handle: String,
    },
    /// A step finished with an answer.
    Finished {
        /// The step id.
        step: String,
        /// Its answer: text, or JSON for a structured answer.
        answer: Value,
        /// The model it ran on.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        model: Option<String>,
        /// The typed `workflow_state` it returned.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        state: Option<Value>,
    },
    /// A step failed.
    Failed {
        /// The step id.
        step: String,
        /// What failed and why.
        error: String,
    },
    /// A step was cancelled by the person or the runtime (not by an editor).
    Cancelled {
        /// The step id.
        step: String,
    },
    /// An editor called `workflow_add_step` or `workflow_cancel_step`.
    Proposal {
        /// The editor call that proposed it.
        from: EditorCall,
        /// What it proposed.
        proposal: Proposal,
    },
    /// The person answered a proposal that waits for approval.
    Decision {
        /// The proposal's number.
        proposal: u32,
        /// Yes (add the step) or no.
        approve: bool,
    },
    /// An editor's call about a failed step ended.
    RepairEnded {
        /// The failed step.
        step: String,
        /// The editor that was offered it.
        editor: String,
        /// Why the editor's call failed, if it did; its proposals are then refused.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<String>,
    },
    /// The whole run was cancelled: no step starts any more.
    RunCancelled,
}

/// Which editor call a proposal came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "call", rename_all = "snake_case", deny_unknown_fields)]
pub enum EditorCall {
    /// An editor's own step, while it runs.
    Step {
        /// The editor's step id.
        step: String,
    },
    /// An editor offered a failed step.
    Repair {
        /// The failed step.
        step: String,
        /// The editor (its target name).
        editor: String,
    },
}

/// What an editor proposed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Proposal {
    /// `workflow_add_step(step_id, target, input, after, reason, options)`.
    AddStep {
        /// The new step's id.
        step_id: String,
        /// Its target.
        target: String,
        /// Its input.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        input: Option<Value>,
        /// The steps it waits on; `None` means the editor's own step (or, for a repair, the
        /// steps the failed step waited on).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        after: Option<Vec<String>>,
        /// Why the editor proposes it.
        #[serde(default)]
        reason: String,
        /// Options for a flow target.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        options: Option<Map<String, Value>>,
        /// What the runtime found the target to be when the proposal arrived.
        target_kind: TargetKind,
    },
    /// `workflow_cancel_step(step_id, reason)`.
    CancelStep {
        /// The step to cancel.
        step_id: String,
        /// Why.
        #[serde(default)]
        reason: String,
    },
}

impl Proposal {
    /// Returns the step id the proposal is about.
    pub fn step_id(&self) -> &str {
        match self {
            Proposal::AddStep { step_id, .. } | Proposal::CancelStep { step_id, .. } => step_id,
        }
    }
}
