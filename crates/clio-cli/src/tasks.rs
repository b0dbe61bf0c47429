//! How a person reads a task, wherever one is shown (progress, `runs tree`, `runs show`,
//! the warnings after a run): its number within its run, its kind and status in one
//! lowercase spelling, and the workflow step it runs, if it is a step.
//!
//! The journal numbers tasks across all runs (run 2's tasks may be #10–#18); people see
//! them numbered from 1 within their run, in the order they were created. JSON keeps the
//! journal's ids, which stay stable, and adds the run's own `number` beside them.

use std::collections::HashMap;

use clio_journal::{RunStatus, TaskKind, TaskRecord, TaskStatus};

/// The numbers a run's tasks are shown with: 1 for its first task, in creation order.
#[derive(Debug, Default, Clone)]
pub(crate) struct TaskNumbers {
    // The journal's task id to the run-local number.
    by_id: HashMap<u64, usize>,
}

impl TaskNumbers {
    /// Numbers `tasks`, all of one run, in the order of their journal ids (creation order).
    pub(crate) fn of(tasks: &[TaskRecord]) -> TaskNumbers {
        let mut ids: Vec<u64> = tasks.iter().map(|t| t.id.0).collect();
        ids.sort_unstable();
        ids.dedup();
        TaskNumbers { by_id: ids.into_iter().enumerate().map(|(i, id)| (id, i + 1)).collect() }
    }

    /// Numbers the tasks of one run by their journal ids (see [`TaskNumbers::of`]).
    pub(crate) fn of_ids(ids: &[clio_journal::TaskId]) -> TaskNumbers {
        let mut ids: Vec<u64> = ids.iter().map(|t| t.0).collect();
        ids.sort_unstable();
        ids.dedup();
        TaskNumbers { by_id: ids.into_iter().enumerate().map(|(i, id)| (id, i + 1)).collect() }
    }

    /// Returns the run-local number of the task with journal id `id`; a task not among
    /// the numbered ones keeps its journal id, so no number is ever lost.
    pub(crate) fn number(&self, id: u64) -> u64 {
        self.by_id.get(&id).map_or(id, |n| *n as u64)
    }
}

/// Returns a task status as every human and JSON output spells it.
pub(crate) fn status_name(status: TaskStatus) -> &'static str {
    match status {
        TaskStatus::Queued => "queued",
        TaskStatus::Running => "running",
        TaskStatus::AwaitingInput => "awaiting_input",
        TaskStatus::Succeeded => "succeeded",
        TaskStatus::Failed => "failed",
        TaskStatus::Cancelled => "cancelled",
        TaskStatus::Interrupted => "interrupted",
    }
}

/// Returns a run status as every human and JSON output spells it.
pub(crate) fn run_status_name(status: RunStatus) -> &'static str {
    match status {
        RunStatus::Running => "running",
        RunStatus::AwaitingInput => "awaiting_input",
        RunStatus::Succeeded => "succeeded",
        RunStatus::Failed => "failed",
        RunStatus::Cancelled => "cancelled",
        RunStatus::Interrupted => "interrupted",
    }
}

/// Returns a task kind in lowercase.
pub(crate) fn kind_name(kind: TaskKind) -> &'static str {
    match kind {
        TaskKind::Agent => "agent",
        TaskKind::Subagent => "subagent",
        TaskKind::Flow => "flow",
        TaskKind::Tool => "tool",
        TaskKind::Step => "step",
    }
}

/// The key the workflow flow gives each step's call (`wf:STEP`), and each repair an
/// editor makes of a failed step (`wf-repair:STEP:EDITOR`), as its replay identity ends.
const STEP_KEY: &str = "key:wf:";
const REPAIR_KEY: &str = "key:wf-repair:";

/// Returns the workflow step a task runs, read from the replay identity of its call:
/// `step NAME`, or `repair of NAME` for an editor's repair; `None` for any other task.
pub(crate) fn step_name(task: &TaskRecord) -> Option<String> {
    let call = task.call.as_deref()?;
    if let Some(at) = call.rfind(REPAIR_KEY) {
        let rest = &call[at + REPAIR_KEY.len()..];
        let step = rest.split(':').next().unwrap_or(rest);
        return Some(format!("repair of {step}"));
    }
    let at = call.rfind(STEP_KEY)?;
    Some(format!("step {}", &call[at + STEP_KEY.len()..]))
}

#[cfg(test)]
mod tests {
    use clio_journal::{RunId, TaskId};

    use super::*;

    fn task(id: u64, call: Option<&str>) -> TaskRecord {
        TaskRecord {
            id: TaskId(id),
            run: RunId(2),
            parent: None,
            kind: TaskKind::Agent,
            target: "reviewer".into(),
            label: String::new(),
            status: TaskStatus::Succeeded,
            model: None,
            input_tokens: 0,
            output_tokens: 0,
            result: None,
            error: None,
            owner: String::new(),
            call: call.map(str::to_owned),
            created_at_ms: 0,
            updated_at_ms: 0,
        }
    }

    #[test]
    fn tasks_are_numbered_from_one_within_their_run() {
        let tasks = [task(12, None), task(10, None), task(17, None)];
        let numbers = TaskNumbers::of(&tasks);
        assert_eq!([10, 12, 17, 99].map(|id| numbers.number(id)), [1, 2, 3, 99]);
    }

    #[test]
    fn a_step_is_named_from_its_call() {
        assert_eq!(step_name(&task(1, Some("key:wf:review"))).as_deref(), Some("step review"));
        assert_eq!(step_name(&task(1, Some("f3/key:wf:draft_2"))).as_deref(), Some("step draft_2"));
        assert_eq!(
            step_name(&task(1, Some("key:wf-repair:review:fixer"))).as_deref(),
            Some("repair of review")
        );
        assert_eq!(step_name(&task(1, Some("src/a.rs:3:4:ab#0"))), None);
        assert_eq!(step_name(&task(1, None)), None);
    }

    #[test]
    fn statuses_have_one_spelling() {
        assert_eq!(status_name(TaskStatus::AwaitingInput), "awaiting_input");
        assert_eq!(run_status_name(RunStatus::AwaitingInput), "awaiting_input");
        let json = serde_json::to_value(TaskStatus::AwaitingInput).unwrap_or_default();
        assert_eq!(json, "awaiting_input");
    }
}
