//! How a run is set up: the task, the editors, their bounds and the person's settings.
//!
//! These are recorded when a run starts (a journal boundary), so they serialize.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Everything a [`Scheduler`](crate::Scheduler) needs besides the workflow.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RunConfig {
    /// The workflow's task, which `$task` references.
    pub task: Value,
    /// The editors, by target: a step whose target is listed is an editor's step, and a
    /// failed step is offered to each listed editor in turn.
    pub editors: Vec<String>,
    /// The bounds the caller set on editing.
    pub bounds: Bounds,
    /// The person's settings (Settings → Execution & history → Workflows).
    pub settings: Settings,
    /// The most steps running at once; 0 means no limit.
    pub max_concurrency: usize,
}

/// Bounds on what editors may change in one run.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Bounds {
    /// The most steps editors may add to the run; `None` leaves growth open.
    pub max_added_steps: Option<u32>,
    /// The most editing rounds in the run; `None` leaves it open.
    pub max_edit_rounds: Option<u32>,
    /// The only targets an added step may name; `None` allows any known target.
    pub allowed_targets: Option<Vec<String>>,
    /// Whether each proposed step waits for the person's yes or no before it is added.
    pub approve_edits: bool,
}

/// The person's limits for every workflow; the tighter of these and a run's bounds applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Settings {
    /// Steps editors may add.
    pub max_added_steps: Option<u32>,
    /// Editing rounds.
    pub max_edit_rounds: Option<u32>,
}

impl Bounds {
    /// Returns the bounds in force: each limit is the tighter of `self` and `settings`.
    pub fn within(&self, settings: &Settings) -> Bounds {
        Bounds {
            max_added_steps: tighter(self.max_added_steps, settings.max_added_steps),
            max_edit_rounds: tighter(self.max_edit_rounds, settings.max_edit_rounds),
            allowed_targets: self.allowed_targets.clone(),
            approve_edits: self.approve_edits,
        }
    }
}

fn tighter(a: Option<u32>, b: Option<u32>) -> Option<u32> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}
