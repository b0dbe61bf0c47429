//! Failure handling: a failed step is offered to each editor in turn; a repair step takes
//! its place, and without one the steps that wait on it are skipped and the run ends
//! `step_failed`.

use serde_json::{Map, Value};

use super::Scheduler;
use super::edit::Round;
use crate::action::{Action, RepairOffer};
use crate::report::{EventError, Outcome};

/// The offers of one failed step.
#[derive(Debug, Clone)]
pub(super) struct Repair {
    /// The editor offered it now, by position in the editors list.
    editor: usize,
    /// Whether the editor's call is running (and may still propose).
    pub(super) open: bool,
    /// The proposals of the running call.
    pub(super) proposals: Vec<u32>,
    /// The repair step proposed and waiting for the person's decision.
    pub(super) awaiting: Option<u32>,
    seq: u64,
}

impl Scheduler {
    /// Starts offering a failed step to the editors, or gives it up when none can repair it.
    pub(super) fn begin_repair(&mut self, failed: usize) {
        if self.can_offer() {
            let seq = self.next_seq();
            self.repairs.insert(
                failed,
                Repair { editor: 0, open: true, proposals: Vec::new(), awaiting: None, seq },
            );
            let offer = self.offer(failed, 0);
            self.outbox.push(Action::OfferRepair(offer));
        } else {
            self.unrepaired(failed);
        }
    }

    /// Returns whether an editor could still add a step: there are editors, the run goes on,
    /// and neither the added-step nor the round limit is reached.
    fn can_offer(&self) -> bool {
        let steps_left = self.limits.max_added_steps.is_none_or(|max| self.added < max);
        let rounds_left = self.limits.max_edit_rounds.is_none_or(|max| self.rounds < max);
        let targets_left =
            self.limits.allowed_targets.as_ref().is_none_or(|targets| !targets.is_empty());
        !self.editors.is_empty() && !self.run_cancelled && steps_left && rounds_left && targets_left
    }

    fn offer(&self, failed: usize, editor: usize) -> RepairOffer {
        let node = &self.nodes[failed];
        let error = node.note.clone().unwrap_or_default();
        let id = &node.step.id;
        let mut failed_map = Map::new();
        failed_map.insert("step".into(), Value::String(id.clone()));
        failed_map.insert("target".into(), Value::String(node.step.target.clone()));
        failed_map.insert("input".into(), self.input_of(failed));
        failed_map.insert("error".into(), Value::String(error.clone()));
        let workflow: Vec<Value> = self
            .snapshot()
            .iter()
            .map(|report| serde_json::to_value(report).unwrap_or(Value::Null))
            .collect();
        let mut input = Map::new();
        input.insert("task".into(), self.task.clone());
        input.insert(
            "instructions".into(),
            Value::String(format!(
                "Step `{id}` failed: {error}. You may propose one repair step with workflow_add_step; \
                 it takes `{id}`'s place, and the steps that waited on `{id}` wait on it instead. \
                 Propose nothing to leave `{id}` unrepaired."
            )),
        );
        input.insert("failed".into(), Value::Object(failed_map));
        input.insert("workflow".into(), Value::Array(workflow));
        RepairOffer {
            step: id.clone(),
            editor: self.editors.get(editor).cloned().unwrap_or_default(),
            error,
            input: Value::Object(input),
        }
    }

    pub(super) fn repair_mut(&mut self, failed: usize) -> &mut Repair {
        self.repairs.entry(failed).or_insert_with(|| {
            debug_assert!(false, "no repair state for a step under repair");
            Repair { editor: 0, open: false, proposals: Vec::new(), awaiting: None, seq: 0 }
        })
    }

    /// Returns the failed step whose offer to `editor` is open.
    pub(super) fn open_repair(&self, step: &str, editor: &str) -> Result<usize, EventError> {
        let no_offer =
            || EventError::NoRepairOffer { step: step.to_owned(), editor: editor.to_owned() };
        let failed = *self.index.get(step).ok_or_else(no_offer)?;
        let repair = self.repairs.get(&failed).ok_or_else(no_offer)?;
        if !repair.open || self.editors.get(repair.editor).is_none_or(|name| name != editor) {
            return Err(no_offer());
        }
        Ok(failed)
    }

    /// Applies the end of an editor's call about a failed step.
    pub(super) fn repair_ended(
        &mut self,
        step: &str,
        editor: &str,
        error: Option<String>,
    ) -> Result<(), EventError> {
        let failed = self.open_repair(step, editor)?;
        let repair = self.repair_mut(failed);
        repair.open = false;
        let ids = std::mem::take(&mut repair.proposals);
        match error {
            Some(error) => {
                let reason = format!("the editor's call failed: {error}");
                ids.into_iter().for_each(|id| self.refuse(id, reason.clone()));
            }
            None if !ids.is_empty() => self.apply_round(ids, Round::Repair(failed)),
            None => {}
        }
        if self.repairs.get(&failed).is_some_and(|repair| repair.awaiting.is_none()) {
            self.next_editor(failed);
        }
        Ok(())
    }

    /// Offers a failed step to the next editor, or gives it up after the last one.
    pub(super) fn next_editor(&mut self, failed: usize) {
        let next = self.repairs.get(&failed).map_or(usize::MAX, |repair| repair.editor + 1);
        if next < self.editors.len() && self.can_offer() {
            let seq = self.next_seq();
            let repair = self.repair_mut(failed);
            repair.editor = next;
            repair.open = true;
            repair.seq = seq;
            let offer = self.offer(failed, next);
            self.outbox.push(Action::OfferRepair(offer));
        } else {
            self.repairs.remove(&failed);
            self.unrepaired(failed);
        }
    }

    /// Gives a failed step up: the steps that wait on it are skipped.
    fn unrepaired(&mut self, failed: usize) {
        let node = &self.nodes[failed];
        let step = node.step.id.clone();
        let error = node.note.clone().unwrap_or_default();
        self.skip_dependents(failed, &format!("`{step}` failed"));
        self.problem.get_or_insert(Outcome::StepFailed { step, error });
    }

    /// Closes the repair offers that wait for nothing any more, after the run is cancelled.
    pub(super) fn end_idle_repairs(&mut self) {
        let idle: Vec<usize> = self
            .repairs
            .iter()
            .filter(|(_, repair)| !repair.open && repair.awaiting.is_none())
            .map(|(&idx, _)| idx)
            .collect();
        for failed in idle {
            self.repairs.remove(&failed);
            self.unrepaired(failed);
        }
    }

    /// Returns the open repair offers, each with the sequence number it was decided at.
    pub(super) fn outstanding_repairs(&self) -> Vec<(u64, Action)> {
        self.repairs
            .iter()
            .filter(|(_, repair)| repair.open)
            .map(|(&failed, repair)| {
                (repair.seq, Action::OfferRepair(self.offer(failed, repair.editor)))
            })
            .collect()
    }
}
