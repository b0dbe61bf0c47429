//! Result assembly: the answer (final steps first, each under its id and model, then every
//! earlier step), `results`, `workflow` and the merged `workflow_state`.

use serde_json::{Map, Value};

use super::Scheduler;
use crate::graph;
use crate::reference::text_of;
use crate::report::{Outcome, RunResult, StepStatus};

impl Scheduler {
    /// Returns what the workflow returns, once the run has ended.
    pub fn result(&self) -> Option<RunResult> {
        if !self.is_done() {
            return None;
        }
        let outcome = match (&self.problem, self.run_cancelled) {
            (_, true) => Outcome::Cancelled { step: None },
            (Some(problem), false) => problem.clone(),
            (None, false) => Outcome::Completed,
        };
        let finished = |idx: &usize| self.nodes[*idx].status == StepStatus::Finished;
        let (finals, earlier): (Vec<usize>, Vec<usize>) = (0..self.nodes.len())
            .filter(finished)
            .partition(|&idx| self.nodes[idx].dependents.is_empty());
        let answer = finals
            .iter()
            .chain(&earlier)
            .map(|&idx| self.section(idx))
            .collect::<Vec<_>>()
            .join("\n\n");
        let results: Map<String, Value> = (0..self.nodes.len())
            .filter(finished)
            .map(|idx| {
                (
                    self.nodes[idx].step.id.clone(),
                    self.nodes[idx].answer.clone().unwrap_or(Value::Null),
                )
            })
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
