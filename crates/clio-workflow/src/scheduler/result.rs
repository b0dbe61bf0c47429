//! Result assembly: the answer (final steps first, each under its id and model, then every
//! earlier step), `results`, `workflow` and the merged `workflow_state`.

use serde_json::{Map, Value};

use super::Scheduler;
use crate::graph;
use crate::reference::text_of;
use crate::report::{Outcome, RunResult, StepReport, StepStatus};

impl Scheduler {
    /// Returns what the workflow returns, once the run has ended.
    pub fn result(&self) -> Option<RunResult> {
        if !self.is_done() {
            return None;
        }
        let (outcome, answer) = (self.outcome(), self.answer());
        let results: Map<String, Value> = self
            .nodes
            .iter()
            .filter(|node| node.status == StepStatus::Finished)
            .map(|node| (node.step.id.clone(), node.answer.clone().unwrap_or(Value::Null)))
            .collect();
        Some(RunResult {
            outcome,
            answer,
            results,
            workflow: self.snapshot(),
            workflow_state: self.merged_state(),
            edits: self.edits.clone(),
            limits: self.limits.clone(),
        })
    }

    /// Returns what the workflow returns, as [`Scheduler::result`] does, taking the steps
    /// and their answers out of the scheduler instead of copying them (a large workflow's
    /// result is most of what it holds); gives the scheduler back while the run goes on.
    pub fn into_result(mut self) -> Result<RunResult, Box<Scheduler>> {
        if !self.is_done() {
            return Err(Box::new(self));
        }
        let (outcome, answer) = (self.outcome(), self.answer());
        let workflow_state = self.merged_state();
        // The ids a repair and its failed step name each other by, before the steps move.
        let id_of = |idx: Option<usize>| idx.map(|idx| self.nodes[idx].step.id.clone());
        let links: Vec<(Option<String>, Option<String>)> =
            self.nodes.iter().map(|node| (id_of(node.repairs), id_of(node.repaired_by))).collect();
        let mut results = Map::new();
        let mut workflow = Vec::with_capacity(self.nodes.len());
        for (node, (repairs, repaired_by)) in std::mem::take(&mut self.nodes).into_iter().zip(links)
        {
            if node.status == StepStatus::Finished {
                results.insert(node.step.id.clone(), node.answer.unwrap_or(Value::Null));
            }
            workflow.push(StepReport {
                id: node.step.id,
                target: node.step.target,
                status: node.status,
                after: node.step.after,
                handle: node.handle,
                model: node.model.or(node.step.model),
                note: node.note,
                editor: node.editor,
                added_by: node.added_by,
                repairs,
                repaired_by,
            });
        }
        Ok(RunResult {
            outcome,
            answer,
            results,
            workflow,
            workflow_state,
            edits: std::mem::take(&mut self.edits),
            limits: self.limits,
        })
    }

    /// Returns how the ended run came out.
    fn outcome(&self) -> Outcome {
        match (&self.problem, self.run_cancelled) {
            (_, true) => Outcome::Cancelled { step: None },
            (Some(problem), false) => problem.clone(),
            (None, false) => Outcome::Completed,
        }
    }

    /// Returns the answer: the final steps' parts (nothing waits on them), then every
    /// earlier finished step's.
    fn answer(&self) -> String {
        let finished = |idx: &usize| self.nodes[*idx].status == StepStatus::Finished;
        let (finals, earlier): (Vec<usize>, Vec<usize>) = (0..self.nodes.len())
            .filter(finished)
            .partition(|&idx| self.nodes[idx].dependents.is_empty());
        finals.iter().chain(&earlier).map(|&idx| self.section(idx)).collect::<Vec<_>>().join("\n\n")
    }

    /// Returns one step's part of the answer: a heading with its id and model, then its answer.
    fn section(&self, idx: usize) -> String {
        let node = &self.nodes[idx];
        let answer = node.answer.as_ref().map(text_of).unwrap_or_default();
        match node.model.as_ref().or(node.step.model.as_ref()) {
            Some(model) => format!("## {} ({model})\n\n{answer}", node.step.id),
            None => format!("## {}\n\n{answer}", node.step.id),
        }
    }

    /// Merges the finished steps' states in topological order (ties by step order): objects
    /// merge key by key, recursively; any other value replaces what was there. A state that
    /// is not an object is kept under its step id.
    fn merged_state(&self) -> Option<Value> {
        let deps: Vec<Vec<usize>> = self.nodes.iter().map(|node| node.deps.clone()).collect();
        let order = graph::topo_order(&deps).unwrap_or_else(|| (0..self.nodes.len()).collect());
        let mut merged: Option<Map<String, Value>> = None;
        for idx in order {
            let node = &self.nodes[idx];
            let (StepStatus::Finished, Some(state)) = (node.status, &node.state) else { continue };
            let target = merged.get_or_insert_with(Map::new);
            match state {
                Value::Object(map) => merge_into(target, map),
                other => {
                    target.insert(node.step.id.clone(), other.clone());
                }
            }
        }
        merged.map(Value::Object)
    }
}

fn merge_into(target: &mut Map<String, Value>, source: &Map<String, Value>) {
    for (key, value) in source {
        match (target.get_mut(key), value) {
            (Some(Value::Object(existing)), Value::Object(incoming)) => {
                merge_into(existing, incoming)
            }
            _ => {
                target.insert(key.clone(), value.clone());
            }
        }
    }
}
