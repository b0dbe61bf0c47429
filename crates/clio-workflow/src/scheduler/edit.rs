//! The editor proposal engine: proposals are recorded while an editor's call runs and
//! applied, as one editing round, when it ends, within the limits in force.

use serde_json::Value;

use super::{Node, Scheduler};
use crate::action::{Action, DecisionRequest};
use crate::event::{EditorCall, Proposal};
use crate::id::check_step_id;
use crate::reference::references;
use crate::report::{EditRecord, EditStatus, EventError, StepStatus};
use crate::step::Step;
use crate::workflow::TargetKind;

/// Where a round of proposals comes from.
#[derive(Debug, Clone, Copy)]
pub(super) enum Round {
    /// An editor's step (its index).
    Step(usize),
    /// A repair offer of a failed step (its index).
    Repair(usize),
}

impl Scheduler {
    /// Records a proposal; it is applied when the editor's call ends.
    pub(super) fn receive_proposal(
        &mut self,
        from: EditorCall,
        proposal: Proposal,
    ) -> Result<(), EventError> {
        let id = u32::try_from(self.edits.len()).unwrap_or(u32::MAX);
        match &from {
            EditorCall::Step { step } => {
                let idx = *self
                    .index
                    .get(step)
                    .ok_or_else(|| EventError::UnknownStep { step: step.clone() })?;
                let node = &self.nodes[idx];
                if !node.editor
                    || !matches!(node.status, StepStatus::Starting | StepStatus::Running)
                {
                    return Err(EventError::NotEditing { step: step.clone() });
                }
                self.nodes[idx].open.push(id);
            }
            EditorCall::Repair { step, editor } => {
                let open = self.open_repair(step, editor)?;
                self.repair_mut(open).proposals.push(id);
            }
        }
        self.edits.push(EditRecord { id, from, proposal, status: EditStatus::Proposed });
        Ok(())
    }

    /// Ends an editor step's window: applies its proposals, or refuses them with `refuse`.
    pub(super) fn close_edit_window(&mut self, idx: usize, refuse: Option<&str>) {
        let ids = std::mem::take(&mut self.nodes[idx].open);
        if ids.is_empty() {
            return;
        }
        match refuse {
            Some(reason) => ids.into_iter().for_each(|id| self.refuse(id, reason.to_owned())),
            None => self.apply_round(ids, Round::Step(idx)),
        }
    }

    /// Applies the proposals of one editor call, in order, as one editing round.
    pub(super) fn apply_round(&mut self, ids: Vec<u32>, round: Round) {
        let refusal = if self.run_cancelled {
            Some("the run was cancelled".to_owned())
        } else {
            match self.limits.max_edit_rounds {
                Some(max) if self.rounds >= max => Some(format!("max_edit_rounds reached ({max})")),
                _ => None,
            }
        };
        if let Some(reason) = refusal {
            ids.into_iter().for_each(|id| self.refuse(id, reason.clone()));
            return;
        }
        self.rounds += 1;
        for id in ids {
            if let Err(reason) = self.apply_one(id, round) {
                self.refuse(id, reason);
            }
        }
    }

    fn apply_one(&mut self, id: u32, round: Round) -> Result<(), String> {
        match self.edits[id as usize].proposal.clone() {
            Proposal::CancelStep { step_id, reason } => {
                let idx =
                    *self.index.get(&step_id).ok_or_else(|| format!("no step `{step_id}`"))?;
                let status = self.nodes[idx].status;
                if !matches!(status, StepStatus::Pending | StepStatus::Queued) {
                    return Err(format!(
                        "step `{step_id}` is {}: only a step that has not started can be cancelled",
                        status.name()
                    ));
                }
                let note = match reason.is_empty() {
                    true => "cancelled by an editor".to_owned(),
                    false => format!("cancelled by an editor: {reason}"),
                };
                self.cancel_node(idx, note);
                self.edits[id as usize].status = EditStatus::Applied;
                Ok(())
            }
            Proposal::AddStep { step_id, target, input, after, options, target_kind, .. } => {
                let step = self.check_added(
                    id,
                    round,
                    step_id,
                    target,
                    input,
                    after,
                    options,
                    target_kind,
                )?;
                self.added += 1;
                if self.limits.approve_edits {
                    self.ask_decision(id, step);
                    if let Round::Repair(failed) = round {
                        self.repair_mut(failed).awaiting = Some(id);
                    }
                } else {
                    self.add_step(id, step, round);
                }
                Ok(())
            }
        }
    }

    /// Checks a proposed step against the limits and the run, and returns it as a step.
    #[allow(clippy::too_many_arguments)]
    fn check_added(
        &mut self,
        id: u32,
        round: Round,
        step_id: String,
        target: String,
        input: Option<Value>,
        after: Option<Vec<String>>,
        options: Option<serde_json::Map<String, Value>>,
        target_kind: TargetKind,
    ) -> Result<Step, String> {
        if let Some(max) = self.limits.max_added_steps
            && self.added >= max
        {
            return Err(format!("max_added_steps reached ({max})"));
        }
        check_step_id(&step_id).map_err(|err| err.to_string())?;
        if self.index.contains_key(&step_id) || self.reserved(&step_id, id) {
            return Err(format!("step id `{step_id}` is already in use"));
        }
        if target.trim().is_empty() {
            return Err("the target is empty".to_owned());
        }
        if let Some(control) = target.chars().find(|c| c.is_control()) {
            return Err(format!(
                "the target holds control character U+{:04X}: a target is a name without control characters",
                u32::from(control)
            ));
        }
        if let Some(allowed) = &self.limits.allowed_targets
            && !allowed.contains(&target)
        {
            return Err(format!(
                "target `{target}` is not in allowed_targets ({})",
                allowed.join(", ")
            ));
        }
        if target_kind == TargetKind::Unknown {
            return Err(format!("unknown target `{target}`"));
        }
        if options.is_some() && target_kind != TargetKind::Flow {
            return Err(format!("options on target `{target}`, which is not a flow"));
        }
        if let Some(input) = &input
            && !matches!(input, Value::String(_) | Value::Object(_))
        {
            return Err("the input must be text or a JSON object".to_owned());
        }
        if let Round::Repair(failed) = round
            && self.repair_mut(failed).awaiting.is_some()
        {
            return Err("this call already proposed a repair step".to_owned());
        }
        let after = match (after, round) {
            (Some(after), _) => after,
            (None, Round::Step(editor)) => vec![self.nodes[editor].step.id.clone()],
            (None, Round::Repair(failed)) => self.nodes[failed].step.after.clone(),
        };
        let mut deps: Vec<usize> = Vec::with_capacity(after.len());
        let mut listed = std::collections::HashSet::with_capacity(after.len());
        for name in &after {
            let mut idx =
                *self.index.get(name).ok_or_else(|| format!("waits on unknown step `{name}`"))?;
            while let Some(next) = self.nodes[idx].repaired_by {
                idx = next;
            }
            if listed.insert(idx) {
                deps.push(idx);
            }
        }
        if let Round::Repair(failed) = round {
            let below = self.descendants(failed);
            if let Some(&bad) = deps.iter().find(|&&dep| dep == failed || below[dep]) {
                return Err(format!(
                    "a repair of `{}` cannot wait on `{}`: that would make a cycle",
                    self.nodes[failed].step.id, self.nodes[bad].step.id
                ));
            }
        }
        if let Some(&dead) = deps.iter().find(|&&dep| self.is_dead(dep)) {
            let node = &self.nodes[dead];
            return Err(format!("waits on `{}`, which is {}", node.step.id, node.status.name()));
        }
        if let Some(input) = &input {
            for name in references(input) {
                if name == "task" {
                    continue;
                }
                let Some(&target) = self.index.get(name) else {
                    return Err(format!(
                        "the input references `${name}`, which is neither `$task` nor a step"
                    ));
                };
                if !self.reaches(&deps, target) {
                    return Err(format!(
                        "the input references `${name}`, which the step does not wait on"
                    ));
                }
            }
        }
        let after = deps.iter().map(|&dep| self.nodes[dep].step.id.clone()).collect();
        Ok(Step { id: step_id, target, input, after, description: None, options, model: None })
    }

    /// Returns whether a step with `deps` would wait on `target` (or on a step `target` was
    /// repaired by), directly or transitively.
    fn reaches(&self, deps: &[usize], target: usize) -> bool {
        let mut seen = vec![false; self.nodes.len()];
        let mut stack: Vec<usize> = deps.to_vec();
        while let Some(at) = stack.pop() {
            if at == target || self.nodes[at].repairs == Some(target) {
                return true;
            }
            if !std::mem::replace(&mut seen[at], true) {
                stack.extend(self.nodes[at].deps.iter().copied());
            }
        }
        false
    }

    /// Returns, for each node, whether it waits on `idx` directly or transitively.
    fn descendants(&self, idx: usize) -> Vec<bool> {
        let mut below = vec![false; self.nodes.len()];
        let mut stack = self.nodes[idx].dependents.clone();
        while let Some(at) = stack.pop() {
            if !std::mem::replace(&mut below[at], true) {
                stack.extend(self.nodes[at].dependents.iter().copied());
            }
        }
        below
    }

    /// Returns whether a step will never finish: cancelled, skipped, or failed for good.
    fn is_dead(&self, idx: usize) -> bool {
        match self.nodes[idx].status {
            StepStatus::Cancelled | StepStatus::Skipped => true,
            StepStatus::Failed => !self.repairs.contains_key(&idx),
            _ => false,
        }
    }

    /// Returns whether a proposal other than `except` waiting for a decision holds `step_id`.
    fn reserved(&self, step_id: &str, except: u32) -> bool {
        self.edits.iter().any(|edit| {
            edit.id != except
                && edit.status == EditStatus::AwaitingDecision
                && edit.proposal.step_id() == step_id
        })
    }

    fn ask_decision(&mut self, id: u32, step: Step) {
        self.edits[id as usize].status = EditStatus::AwaitingDecision;
        self.awaiting += 1;
        let seq = self.next_seq();
        self.decision_seqs.insert(id, seq);
        let action = Action::AskDecision(self.decision_request(id, step));
        self.outbox.push(action);
    }

    fn decision_request(&self, id: u32, step: Step) -> DecisionRequest {
        let edit = &self.edits[id as usize];
        let reason = match &edit.proposal {
            Proposal::AddStep { reason, .. } => reason.clone(),
            Proposal::CancelStep { reason, .. } => reason.clone(),
        };
        let after = step.after.join(", ");
        let question = format!(
            "An editor proposes adding step `{}` (target `{}`, after {}){}. Add it?",
            step.id,
            step.target,
            if after.is_empty() { "nothing".to_owned() } else { after },
            if reason.is_empty() { String::new() } else { format!(": {reason}") },
        );
        DecisionRequest { proposal: id, from: edit.from.clone(), step, reason, question }
    }

    /// Rebuilds the proposed step of a proposal waiting for a decision.
    fn proposed_step(&self, id: u32) -> Option<Step> {
        let edit = &self.edits[id as usize];
        let Proposal::AddStep { step_id, target, input, after, options, .. } = &edit.proposal
        else {
            return None;
        };
        let after = match (after, &edit.from) {
            (Some(after), _) => after.clone(),
            (None, EditorCall::Step { step }) => vec![step.clone()],
            (None, EditorCall::Repair { step, .. }) => self
                .index
                .get(step)
                .map(|&idx| self.nodes[idx].step.after.clone())
                .unwrap_or_default(),
        };
        let after = after
            .iter()
            .filter_map(|name| self.index.get(name))
            .map(|&idx| {
                let mut idx = idx;
                while let Some(next) = self.nodes[idx].repaired_by {
                    idx = next;
                }
                self.nodes[idx].step.id.clone()
            })
            .collect();
        Some(Step {
            id: step_id.clone(),
            target: target.clone(),
            input: input.clone(),
            after,
            description: None,
            options: options.clone(),
            model: None,
        })
    }

    /// Returns the decision requests still waiting, each with the sequence number it was
    /// decided at.
    pub(super) fn outstanding_decisions(&self) -> Vec<(u64, Action)> {
        self.edits
            .iter()
            .filter(|edit| edit.status == EditStatus::AwaitingDecision)
            .filter_map(|edit| {
                let step = self.proposed_step(edit.id)?;
                let seq = self.decision_seqs.get(&edit.id).copied().unwrap_or(0);
                Some((seq, Action::AskDecision(self.decision_request(edit.id, step))))
            })
            .collect()
    }

    /// Applies the person's answer to a proposal.
    pub(super) fn decide(&mut self, id: u32, approve: bool) -> Result<(), EventError> {
        let waiting = self
            .edits
            .get(id as usize)
            .is_some_and(|edit| edit.status == EditStatus::AwaitingDecision);
        if !waiting {
            return Err(EventError::NotAwaitingDecision { proposal: id });
        }
        self.awaiting -= 1;
        self.decision_seqs.remove(&id);
        let round = match &self.edits[id as usize].from {
            EditorCall::Step { step } => self.index.get(step).map(|&idx| Round::Step(idx)),
            EditorCall::Repair { step, .. } => self.index.get(step).map(|&idx| Round::Repair(idx)),
        };
        if let Some(Round::Repair(failed)) = round
            && let Some(repair) = self.repairs.get_mut(&failed)
        {
            repair.awaiting = None;
        }
        let step = self.proposed_step(id);
        let dead = step.as_ref().and_then(|step| {
            step.after
                .iter()
                .filter_map(|name| self.index.get(name))
                .find(|&&dep| self.is_dead(dep))
                .copied()
        });
        match (approve, step, round, dead) {
            (true, Some(step), Some(round), None) => self.add_step(id, step, round),
            (true, _, _, Some(dead)) => {
                self.added -= 1;
                let node = &self.nodes[dead];
                let reason =
                    format!("waits on `{}`, which is {}", node.step.id, node.status.name());
                self.refuse(id, reason);
            }
            (true, _, _, None) => {
                self.added -= 1;
                self.refuse(id, "the proposal no longer fits the run".to_owned());
            }
            (false, ..) => {
                self.added -= 1;
                self.edits[id as usize].status = EditStatus::Declined;
            }
        }
        if let Some(Round::Repair(failed)) = round
            && self
                .repairs
                .get(&failed)
                .is_some_and(|repair| !repair.open && repair.awaiting.is_none())
        {
            self.next_editor(failed);
        }
        Ok(())
    }

    /// Adds an accepted step to the run; a repair takes the failed step's place.
    fn add_step(&mut self, id: u32, step: Step, round: Round) {
        let deps: Vec<usize> =
            step.after.iter().filter_map(|name| self.index.get(name).copied()).collect();
        let idx = self.push_node(step, deps, Some(id));
        self.edits[id as usize].status = EditStatus::Applied;
        if let Round::Repair(failed) = round {
            self.replace(failed, idx);
        }
        if self.nodes[idx].waiting == 0 {
            self.make_ready(idx);
        }
    }

    /// Makes `repair` take `failed`'s place: the steps that waited on `failed` wait on it.
    fn replace(&mut self, failed: usize, repair: usize) {
        self.repairs.remove(&failed);
        self.nodes[failed].repaired_by = Some(repair);
        self.nodes[repair].repairs = Some(failed);
        let failed_id = self.nodes[failed].step.id.clone();
        let repair_id = self.nodes[repair].step.id.clone();
        for dependent in std::mem::take(&mut self.nodes[failed].dependents) {
            let node: &mut Node = &mut self.nodes[dependent];
            node.deps.iter_mut().filter(|dep| **dep == failed).for_each(|dep| *dep = repair);
            node.step
                .after
                .iter_mut()
                .filter(|after| **after == failed_id)
                .for_each(|after| after.clone_from(&repair_id));
            self.nodes[repair].dependents.push(dependent);
        }
    }

    /// Records a proposal as refused with `reason`, releasing a reservation it held.
    pub(super) fn refuse(&mut self, id: u32, reason: String) {
        self.edits[id as usize].status = EditStatus::Refused(reason);
    }

    /// Refuses every proposal waiting for a decision.
    pub(super) fn refuse_awaiting(&mut self, reason: &str) {
        let ids: Vec<u32> = self
            .edits
            .iter()
            .filter(|edit| edit.status == EditStatus::AwaitingDecision)
            .map(|edit| edit.id)
            .collect();
        for id in ids {
            self.awaiting -= 1;
            self.added -= 1;
            self.decision_seqs.remove(&id);
            self.refuse(id, reason.to_owned());
        }
        for repair in self.repairs.values_mut() {
            repair.awaiting = None;
        }
    }
}
