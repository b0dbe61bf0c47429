//! The scheduling state machine: the runtime tells a [`Scheduler`] [`Event`]s and carries
//! out the [`Action`]s it decides.
//!
//! Every decision is made while an event is applied and depends only on the events so far,
//! so replaying a journaled event sequence into a fresh scheduler gives the same decisions.
//! Ready steps start at once, in the order they became ready (step order within one event),
//! up to the concurrency limit; no step waits for an unrelated one.

mod edit;
mod repair;
mod result;

use std::collections::{BTreeMap, HashMap, VecDeque};

use serde_json::{Map, Value};

use crate::action::{Action, StartStep};
use crate::config::{Bounds, RunConfig};
use crate::event::Event;
use crate::reference::resolve;
use crate::report::{EditRecord, EventError, Outcome, StepReport, StepStatus};
use crate::step::Step;
use crate::workflow::Workflow;

/// Drives one run of a workflow: told events, it decides what starts next.
#[derive(Debug, Clone)]
pub struct Scheduler {
    task: Value,
    editors: Vec<String>,
    limits: Bounds,
    max_concurrency: usize,
    nodes: Vec<Node>,
    index: HashMap<String, usize>,
    queue: VecDeque<usize>,
    // Invariant: the number of nodes that are starting or running.
    active: usize,
    // Invariant: the number of nodes that are pending, queued, starting or running.
    unsettled: usize,
    outbox: Vec<Action>,
    edits: Vec<EditRecord>,
    // Invariant: steps added plus proposals waiting for a decision.
    added: u32,
    rounds: u32,
    awaiting: usize,
    // The sequence number of each proposal's decision request.
    decision_seqs: BTreeMap<u32, u64>,
    repairs: BTreeMap<usize, repair::Repair>,
    problem: Option<Outcome>,
    run_cancelled: bool,
    seq: u64,
}

/// One step as [`Scheduler::statuses`] shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StepStatusView<'a> {
    /// The step id.
    pub id: &'a str,
    /// Who runs it.
    pub target: &'a str,
    /// Its status.
    pub status: StepStatus,
    /// Its task handle, once started.
    pub handle: Option<&'a str>,
}

#[derive(Debug, Clone)]
struct Node {
    step: Step,
    deps: Vec<usize>,
    dependents: Vec<usize>,
    // Invariant: for a pending node, the number of its deps that have not finished.
    waiting: usize,
    status: StepStatus,
    handle: Option<String>,
    answer: Option<Value>,
    model: Option<String>,
    state: Option<Value>,
    note: Option<String>,
    editor: bool,
    added_by: Option<u32>,
    repairs: Option<usize>,
    repaired_by: Option<usize>,
    // Proposals this editor's step made while running, applied when it finishes.
    open: Vec<u32>,
    seq: u64,
}

impl Node {
    fn new(step: Step, deps: Vec<usize>, editor: bool, added_by: Option<u32>) -> Node {
        Node {
            step,
            deps,
            dependents: Vec::new(),
            waiting: 0,
            status: StepStatus::Pending,
            handle: None,
            answer: None,
            model: None,
            state: None,
            note: None,
            editor,
            added_by,
            repairs: None,
            repaired_by: None,
            open: Vec::new(),
            seq: 0,
        }
    }
}

impl Scheduler {
    /// Returns a scheduler for one run of `workflow`; its first actions start every step
    /// that waits on nothing (up to the concurrency limit).
    pub fn new(workflow: Workflow, config: RunConfig) -> Scheduler {
        let limits = config.bounds.within(&config.settings);
        let (steps, deps, index) = workflow.into_parts();
        let mut sched = Scheduler {
            task: config.task,
            editors: config.editors,
            limits,
            max_concurrency: config.max_concurrency,
            nodes: Vec::with_capacity(steps.len()),
            index,
            queue: VecDeque::new(),
            active: 0,
            unsettled: steps.len(),
            outbox: Vec::new(),
            edits: Vec::new(),
            added: 0,
            rounds: 0,
            awaiting: 0,
            decision_seqs: BTreeMap::new(),
            repairs: BTreeMap::new(),
            problem: None,
            run_cancelled: false,
            seq: 0,
        };
        // Steps may be written before the steps they wait on: add them all, then link.
        for (step, deps) in steps.into_iter().zip(deps) {
            let editor = sched.editors.contains(&step.target);
            sched.nodes.push(Node::new(step, deps, editor, None));
        }
        for idx in 0..sched.nodes.len() {
            sched.nodes[idx].waiting = sched.nodes[idx].deps.len();
            for at in 0..sched.nodes[idx].deps.len() {
                let dep = sched.nodes[idx].deps[at];
                sched.nodes[dep].dependents.push(idx);
            }
        }
        for idx in 0..sched.nodes.len() {
            if sched.nodes[idx].waiting == 0 {
                sched.make_ready(idx);
            }
        }
        sched.fill_slots();
        sched
    }

    /// Applies one event and decides what follows; an event that does not fit the run's
    /// state changes nothing and is returned as an error.
    pub fn apply(&mut self, event: Event) -> Result<(), EventError> {
        if self.is_done() {
            return Err(EventError::RunEnded);
        }
        match event {
            Event::Started { step, handle } => {
                let idx = self.expect(&step, "started", &[StepStatus::Starting])?;
                self.set_status(idx, StepStatus::Running);
                self.nodes[idx].handle = Some(handle);
            }
            Event::Finished { step, answer, model, state } => {
                let idx =
                    self.expect(&step, "finished", &[StepStatus::Starting, StepStatus::Running])?;
                self.active -= 1;
                self.set_status(idx, StepStatus::Finished);
                let node = &mut self.nodes[idx];
                node.answer = Some(answer);
                node.model = model;
                node.state = state.filter(|state| !state.is_null());
                // Proposals apply first (an editor may cancel its own dependents); the steps
                // they add are linked to this finished step already, so only the dependents
                // it had before count down.
                let n_dependents = node.dependents.len();
                self.close_edit_window(idx, None);
                for at in 0..n_dependents {
                    let dep = self.nodes[idx].dependents[at];
                    let node = &mut self.nodes[dep];
                    node.waiting = node.waiting.saturating_sub(1);
                    if node.waiting == 0 && node.status == StepStatus::Pending {
                        self.make_ready(dep);
                    }
                }
            }
            Event::Failed { step, error } => {
                let idx =
                    self.expect(&step, "failed", &[StepStatus::Starting, StepStatus::Running])?;
                self.active -= 1;
                self.set_status(idx, StepStatus::Failed);
                self.nodes[idx].note = Some(error);
                self.close_edit_window(idx, Some("the editor's step failed"));
                self.begin_repair(idx);
            }
            Event::Cancelled { step } => {
                let idx = self.expect(
                    &step,
                    "cancelled",
                    &[
                        StepStatus::Pending,
                        StepStatus::Queued,
                        StepStatus::Starting,
                        StepStatus::Running,
                    ],
                )?;
                self.cancel_node(idx, "cancelled".to_owned());
                self.close_edit_window(idx, Some("the editor's step was cancelled"));
                self.problem.get_or_insert(Outcome::Cancelled { step: Some(step) });
            }
            Event::Proposal { from, proposal } => self.receive_proposal(from, proposal)?,
            Event::Decision { proposal, approve } => self.decide(proposal, approve)?,
            Event::RepairEnded { step, editor, error } => {
                self.repair_ended(&step, &editor, error)?
            }
            Event::RunCancelled => self.cancel_run(),
        }
        self.fill_slots();
        Ok(())
    }

    /// Returns the actions decided since the last call, in the order they were decided.
    pub fn take_actions(&mut self) -> Vec<Action> {
        std::mem::take(&mut self.outbox)
    }

    /// Returns every action decided and not yet answered by an event: steps asked to start
    /// without a `started` event, proposals waiting for a decision, open repair offers. A
    /// runtime resuming from its journal carries these out after replaying the events.
    pub fn outstanding(&self) -> Vec<Action> {
        let mut out: Vec<(u64, Action)> = Vec::new();
        for (idx, node) in self.nodes.iter().enumerate() {
            if node.status == StepStatus::Starting {
                out.push((node.seq, Action::Start(self.start_action(idx))));
            }
        }
        out.extend(self.outstanding_decisions());
        out.extend(self.outstanding_repairs());
        out.sort_by_key(|(seq, _)| *seq);
        out.into_iter().map(|(_, action)| action).collect()
    }

    /// Returns whether the run has ended: no step can change and nothing waits for an answer.
    pub fn is_done(&self) -> bool {
        self.unsettled == 0 && self.awaiting == 0 && self.repairs.is_empty()
    }

    /// Returns the editing limits in force (the tighter of the bounds and the settings),
    /// which the runtime records when the run starts.
    pub fn limits(&self) -> &Bounds {
        &self.limits
    }

    /// Returns every proposal so far and what became of it.
    pub fn edits(&self) -> &[EditRecord] {
        &self.edits
    }

    /// Returns how many steps the run has, added steps included.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Returns whether the run has no steps.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// Returns each step's id, target, status and task handle, in step order (added steps
    /// last), borrowed: a live view of a large run, built often, need not copy the
    /// steps the way [`Scheduler::snapshot`] does.
    pub fn statuses(&self) -> impl Iterator<Item = StepStatusView<'_>> {
        self.nodes.iter().map(|node| StepStatusView {
            id: &node.step.id,
            target: &node.step.target,
            status: node.status,
            handle: node.handle.as_deref(),
        })
    }

    /// Returns every step as it stands, in step order (added steps last).
    pub fn snapshot(&self) -> Vec<StepReport> {
        self.nodes.iter().map(|node| self.report(node)).collect()
    }

    /// Returns the run's steps as they stand, with added steps and repairs applied.
    pub fn steps(&self) -> Vec<Step> {
        self.nodes.iter().map(|node| node.step.clone()).collect()
    }

    fn report(&self, node: &Node) -> StepReport {
        StepReport {
            id: node.step.id.clone(),
            target: node.step.target.clone(),
            status: node.status,
            after: node.step.after.clone(),
            handle: node.handle.clone(),
            model: node.model.clone().or_else(|| node.step.model.clone()),
            note: node.note.clone(),
            editor: node.editor,
            added_by: node.added_by,
            repairs: node.repairs.map(|idx| self.nodes[idx].step.id.clone()),
            repaired_by: node.repaired_by.map(|idx| self.nodes[idx].step.id.clone()),
        }
    }

    fn next_seq(&mut self) -> u64 {
        self.seq += 1;
        self.seq
    }

    /// Looks a step up and checks that the event fits its status.
    fn expect(
        &self,
        step: &str,
        event: &'static str,
        allowed: &[StepStatus],
    ) -> Result<usize, EventError> {
        let idx = *self
            .index
            .get(step)
            .ok_or_else(|| EventError::UnknownStep { step: step.to_owned() })?;
        let status = self.nodes[idx].status;
        if allowed.contains(&status) {
            Ok(idx)
        } else {
            Err(EventError::Unexpected { step: step.to_owned(), event, status: status.name() })
        }
    }

    /// Adds a node for `step` waiting on `deps`; it starts pending.
    fn push_node(&mut self, step: Step, deps: Vec<usize>, added_by: Option<u32>) -> usize {
        let idx = self.nodes.len();
        let waiting =
            deps.iter().filter(|&&dep| self.nodes[dep].status != StepStatus::Finished).count();
        for &dep in &deps {
            self.nodes[dep].dependents.push(idx);
        }
        self.index.insert(step.id.clone(), idx);
        let editor = self.editors.contains(&step.target);
        let mut node = Node::new(step, deps, editor, added_by);
        node.waiting = waiting;
        self.nodes.push(node);
        self.unsettled += 1;
        idx
    }

    fn set_status(&mut self, idx: usize, status: StepStatus) {
        let node = &mut self.nodes[idx];
        if !node.status.is_settled() && status.is_settled() {
            self.unsettled -= 1;
        }
        node.status = status;
    }

    fn make_ready(&mut self, idx: usize) {
        if self.run_cancelled {
            self.set_status(idx, StepStatus::Cancelled);
            self.nodes[idx].note = Some("the run was cancelled".to_owned());
        } else {
            self.set_status(idx, StepStatus::Queued);
            self.queue.push_back(idx);
        }
    }

    fn fill_slots(&mut self) {
        while self.max_concurrency == 0 || self.active < self.max_concurrency {
            let Some(idx) = self.queue.pop_front() else { break };
            self.active += 1;
            self.set_status(idx, StepStatus::Starting);
            self.nodes[idx].seq = self.next_seq();
            let action = Action::Start(self.start_action(idx));
            self.outbox.push(action);
        }
    }

    /// Returns the answer a reference to `name` means: the task, or the answer of the step
    /// (of its repair, when a repair took its place).
    fn lookup(&self, name: &str) -> Option<&Value> {
        if name == "task" {
            return Some(&self.task);
        }
        let mut idx = *self.index.get(name)?;
        while let Some(next) = self.nodes[idx].repaired_by {
            idx = next;
        }
        self.nodes[idx].answer.as_ref()
    }

    /// Builds the input of a step whose dependencies have finished.
    fn input_of(&self, idx: usize) -> Value {
        let node = &self.nodes[idx];
        let step = &node.step;
        if let Some(input) = &step.input {
            return resolve(input, &|name| self.lookup(name));
        }
        if step.description.is_none() && node.deps.is_empty() {
            return self.task.clone();
        }
        let mut map = Map::new();
        map.insert("task".into(), self.task.clone());
        if let Some(description) = &step.description {
            map.insert("instructions".into(), Value::String(description.clone()));
        }
        let inputs: Map<String, Value> = node
            .deps
            .iter()
            .map(|&dep| {
                let dep = &self.nodes[dep];
                (dep.step.id.clone(), dep.answer.clone().unwrap_or(Value::Null))
            })
            .collect();
        map.insert("inputs".into(), Value::Object(inputs));
        Value::Object(map)
    }

    fn start_action(&self, idx: usize) -> StartStep {
        let node = &self.nodes[idx];
        StartStep {
            step: node.step.id.clone(),
            target: node.step.target.clone(),
            input: self.input_of(idx),
            options: node.step.options.clone(),
            model: node.step.model.clone(),
            editor: node.editor,
        }
    }

    /// Cancels a step that has not settled and skips the steps that wait on it.
    fn cancel_node(&mut self, idx: usize, note: String) {
        match self.nodes[idx].status {
            StepStatus::Starting | StepStatus::Running => self.active -= 1,
            StepStatus::Queued => self.queue.retain(|&queued| queued != idx),
            _ => {}
        }
        self.set_status(idx, StepStatus::Cancelled);
        let reason = format!("`{}` was cancelled", self.nodes[idx].step.id);
        self.nodes[idx].note = Some(note);
        self.skip_dependents(idx, &reason);
    }

    /// Skips every pending step that waits on `idx`, directly or transitively.
    fn skip_dependents(&mut self, idx: usize, reason: &str) {
        let mut stack = self.nodes[idx].dependents.clone();
        while let Some(at) = stack.pop() {
            if self.nodes[at].status != StepStatus::Pending {
                continue;
            }
            self.set_status(at, StepStatus::Skipped);
            self.nodes[at].note = Some(format!("skipped because {reason}"));
            stack.extend(self.nodes[at].dependents.iter().copied());
        }
    }

    fn cancel_run(&mut self) {
        self.run_cancelled = true;
        for idx in 0..self.nodes.len() {
            if matches!(self.nodes[idx].status, StepStatus::Pending | StepStatus::Queued) {
                self.set_status(idx, StepStatus::Cancelled);
                self.nodes[idx].note = Some("the run was cancelled".to_owned());
            }
        }
        self.queue.clear();
        self.refuse_awaiting("the run was cancelled");
        self.end_idle_repairs();
    }
}
