//! [`Workflow`]: a checked list of steps, read from and written to its JSON form.
//!
//! Checks run in a fixed order so the error names the first problem: each step in the order
//! written (its id, a repeat of an earlier id, its target, its input, its `after`), then
//! cycles, then input references in step order.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::error::WorkflowError;
use crate::graph;
use crate::id::check_step_id;
use crate::parse::steps_from_value;
use crate::reference::references;
use crate::step::{Step, kind_of};

/// What a target turned out to be, as the runtime finds when targets are known.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TargetKind {
    /// A flow, which takes options.
    Flow,
    /// A target that exists and is not a flow (subagent, agent, tool, `self`).
    Other,
    /// A target the agent cannot reach.
    Unknown,
}

/// A checked workflow: valid unique ids, non-empty targets, known dependencies, no cycle,
/// and input references only to `$task` or to steps each step waits on.
#[derive(Debug, Clone, PartialEq)]
pub struct Workflow {
    steps: Vec<Step>,
    // Invariant: `deps[i]` are the indices of `steps[i].after`, in order, without repeats.
    deps: Vec<Vec<usize>>,
    index: HashMap<String, usize>,
}

impl Workflow {
    /// Checks `steps` and returns the workflow, or the first problem.
    pub fn new(steps: Vec<Step>) -> Result<Workflow, WorkflowError> {
        if steps.is_empty() {
            return Err(WorkflowError::NoSteps);
        }
        let mut index = HashMap::with_capacity(steps.len());
        for (idx, step) in steps.iter().enumerate() {
            index.entry(step.id.clone()).or_insert(idx);
        }
        let mut deps = Vec::with_capacity(steps.len());
        // `listed[d] == idx + 1` when step `idx` already lists step `d`: repeats are dropped
        // in one pass over the edges (a search of the list per edge was cubic in a dense
        // DAG).
        let mut listed = vec![0usize; steps.len()];
        for (idx, step) in steps.iter().enumerate() {
            check_step_id(&step.id)?;
            if index.get(&step.id) != Some(&idx) {
                return Err(WorkflowError::DuplicateId { id: step.id.clone() });
            }
            check_fields(step)?;
            let mut step_deps: Vec<usize> = Vec::with_capacity(step.after.len());
            for after in &step.after {
                let dep = *index.get(after).ok_or_else(|| WorkflowError::UnknownDependency {
                    step: step.id.clone(),
                    after: after.clone(),
                })?;
                if listed[dep] != idx + 1 {
                    listed[dep] = idx + 1;
                    step_deps.push(dep);
                }
            }
            deps.push(step_deps);
        }
        if let Some(cycle) = graph::find_cycle(&deps) {
            let steps = cycle.into_iter().map(|idx| steps[idx].id.clone()).collect();
            return Err(WorkflowError::Cycle { steps });
        }
        let mut ancestry = graph::Ancestry::new(&deps);
        for (idx, step) in steps.iter().enumerate() {
            let Some(input) = &step.input else { continue };
            for name in references(input) {
                if name == "task" {
                    continue;
                }
                let Some(&target) = index.get(name) else {
                    return Err(WorkflowError::UnknownReference {
                        step: step.id.clone(),
                        reference: name.to_owned(),
                    });
                };
                if !ancestry.waits_on(idx, target) {
                    return Err(WorkflowError::UnreachableReference {
                        step: step.id.clone(),
                        reference: name.to_owned(),
                    });
                }
            }
        }
        Ok(Workflow { steps, deps, index })
    }

    /// Reads a workflow from JSON text: an object with `steps`, or a bare list of steps.
    ///
    /// An object that names a key twice is refused with the key and its position (JSON
    /// readers differ on which value wins, so neither is taken).
    pub fn from_json(text: &str) -> Result<Workflow, WorkflowError> {
        if let Some(dup) = clio_spec::duplicate_json_key(text) {
            return Err(WorkflowError::DuplicateKey {
                key: dup.key,
                line: dup.line,
                column: dup.column,
            });
        }
        let value: Value = serde_json::from_str(text).map_err(|err| WorkflowError::Parse {
            line: err.line(),
            column: err.column(),
            message: parse_message(&err),
        })?;
        Workflow::from_value(value)
    }

    /// Reads a workflow from a JSON value: an object with `steps`, or a bare list of steps.
    pub fn from_value(value: Value) -> Result<Workflow, WorkflowError> {
        Workflow::new(steps_from_value(value)?)
    }

    /// Returns the JSON form, `{"steps": [...]}`.
    pub fn to_json(&self) -> Value {
        let mut map = Map::new();
        map.insert("steps".into(), Value::Array(self.steps.iter().map(Step::to_json).collect()));
        Value::Object(map)
    }

    /// Returns the steps in the order they were written.
    pub fn steps(&self) -> &[Step] {
        &self.steps
    }

    /// Returns the step named `id`.
    pub fn step(&self, id: &str) -> Option<&Step> {
        self.index.get(id).map(|&idx| &self.steps[idx])
    }

    /// Returns the ids of the final steps (the ones nothing waits on), in step order.
    pub fn final_steps(&self) -> Vec<&str> {
        let mut waited_on = vec![false; self.steps.len()];
        self.deps.iter().flatten().for_each(|&dep| waited_on[dep] = true);
        self.steps.iter().zip(waited_on).filter(|(_, w)| !w).map(|(s, _)| s.id.as_str()).collect()
    }

    /// Returns the steps by layer: first those that wait on nothing, then those whose
    /// deepest dependency is in the layer before, and so on; step order within a layer.
    pub fn layers(&self) -> Vec<Vec<&str>> {
        let layer = graph::layers(&self.deps);
        let mut out: Vec<Vec<&str>> = vec![Vec::new(); layer.iter().max().map_or(0, |m| m + 1)];
        for (idx, &at) in layer.iter().enumerate() {
            out[at].push(&self.steps[idx].id);
        }
        out
    }

    /// Checks the targets once they are known: the first step whose target `kind_of_target`
    /// calls unknown, or that has options on a target that is not a flow, is refused.
    pub fn check_targets(
        &self,
        mut kind_of_target: impl FnMut(&str) -> TargetKind,
    ) -> Result<(), WorkflowError> {
        for step in &self.steps {
            let kind = kind_of_target(&step.target);
            if kind == TargetKind::Unknown {
                return Err(WorkflowError::UnknownTarget {
                    step: step.id.clone(),
                    target: step.target.clone(),
                });
            }
            if step.options.is_some() && kind != TargetKind::Flow {
                return Err(WorkflowError::OptionsOnNonFlow {
                    step: step.id.clone(),
                    target: step.target.clone(),
                });
            }
        }
        Ok(())
    }

    /// Returns the steps, the indices each waits on, and the index of ids.
    pub(crate) fn into_parts(self) -> (Vec<Step>, Vec<Vec<usize>>, HashMap<String, usize>) {
        (self.steps, self.deps, self.index)
    }

    /// Returns the indices of the steps each step waits on.
    pub(crate) fn deps(&self) -> &[Vec<usize>] {
        &self.deps
    }
}

/// Checks the fields of one step other than its id and `after`.
pub(crate) fn check_fields(step: &Step) -> Result<(), WorkflowError> {
    if step.target.trim().is_empty() {
        return Err(WorkflowError::EmptyTarget { step: step.id.clone() });
    }
    check_name(step, "target", &step.target)?;
    if let Some(model) = &step.model {
        check_name(step, "model", model)?;
    }
    match &step.input {
        None | Some(Value::String(_) | Value::Object(_)) => Ok(()),
        Some(other) => Err(WorkflowError::WrongType {
            step: step.id.clone(),
            field: "input",
            expected: "text or a JSON object",
            found: kind_of(other),
        }),
    }
}

/// Refuses a name (a target, a model) with a control character in it: a NUL, a newline,
/// an escape and the like cannot be part of a name, and would hide in messages and logs.
fn check_name(step: &Step, field: &'static str, value: &str) -> Result<(), WorkflowError> {
    match value.chars().enumerate().find(|(_, c)| c.is_control()) {
        Some((at, character)) => Err(WorkflowError::ControlCharacter {
            step: step.id.clone(),
            field,
            code: u32::from(character),
            position: at + 1,
        }),
        None => Ok(()),
    }
}

fn parse_message(err: &serde_json::Error) -> String {
    // serde_json appends " at line L column C", which the error's own fields already carry.
    let text = err.to_string();
    match text.rfind(" at line ") {
        Some(at) => text[..at].to_owned(),
        None => text,
    }
}
