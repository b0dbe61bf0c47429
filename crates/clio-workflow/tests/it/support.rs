//! Test helpers: a tiny driver that plays the runtime's part (feeding events to a
//! `Scheduler` and keeping the event log) and a readable summary of a run for snapshots.

use std::fmt::Write as _;

use clio_workflow::{
    Action, EditStatus, EditorCall, Event, Proposal, RunConfig, Scheduler, StartStep, TargetKind,
    Workflow,
};
use serde_json::{Value, json};

/// Reads a workflow that must be valid.
pub(crate) fn workflow(text: &str) -> Workflow {
    match Workflow::from_json(text) {
        Ok(workflow) => workflow,
        Err(err) => panic!("workflow should be valid: {err}"),
    }
}

/// Plays the runtime: applies events, keeps them in order and collects every action.
pub(crate) struct Driver {
    pub(crate) sched: Scheduler,
    pub(crate) events: Vec<Event>,
    pub(crate) actions: Vec<Action>,
}

impl Driver {
    pub(crate) fn new(workflow: &Workflow, config: RunConfig) -> Driver {
        let mut sched = Scheduler::new(workflow.clone(), config);
        let actions = sched.take_actions();
        Driver { sched, events: Vec::new(), actions }
    }

    pub(crate) fn apply(&mut self, event: Event) {
        if let Err(err) = self.sched.apply(event.clone()) {
            panic!("event {event:?} refused: {err}");
        }
        self.events.push(event);
        self.actions.extend(self.sched.take_actions());
    }

    /// Returns the start actions so far, by step id.
    pub(crate) fn starts(&self) -> Vec<&StartStep> {
        self.actions
            .iter()
            .filter_map(|action| match action {
                Action::Start(start) => Some(start),
                _ => None,
            })
            .collect()
    }

    pub(crate) fn start_of(&self, step: &str) -> &StartStep {
        match self.starts().into_iter().find(|start| start.step == step) {
            Some(start) => start,
            None => panic!("step {step} was never started"),
        }
    }

    pub(crate) fn started_ids(&self) -> Vec<String> {
        self.starts().iter().map(|start| start.step.clone()).collect()
    }

    pub(crate) fn start(&mut self, step: &str) {
        self.apply(Event::Started { step: step.into(), handle: format!("h-{step}") });
    }

    pub(crate) fn finish(&mut self, step: &str) {
        self.start(step);
        self.apply(Event::Finished {
            step: step.into(),
            answer: Value::String(format!("answer of {step}")),
            model: Some("local/m".into()),
            state: None,
        });
    }

    pub(crate) fn finish_started(&mut self, step: &str) {
        self.apply(Event::Finished {
            step: step.into(),
            answer: Value::String(format!("answer of {step}")),
            model: Some("local/m".into()),
            state: None,
        });
    }

    pub(crate) fn fail(&mut self, step: &str, error: &str) {
        self.start(step);
        self.apply(Event::Failed { step: step.into(), error: error.into() });
    }

    pub(crate) fn propose_add(
        &mut self,
        editor_step: &str,
        step_id: &str,
        target: &str,
        after: Option<&[&str]>,
    ) {
        self.apply(Event::Proposal {
            from: EditorCall::Step { step: editor_step.into() },
            proposal: add(step_id, target, after),
        });
    }

    pub(crate) fn summary(&self) -> String {
        summary(&self.sched)
    }
}

/// Returns an add-step proposal for a known non-flow target.
pub(crate) fn add(step_id: &str, target: &str, after: Option<&[&str]>) -> Proposal {
    Proposal::AddStep {
        step_id: step_id.into(),
        target: target.into(),
        input: None,
        after: after.map(|after| after.iter().map(|s| s.to_string()).collect()),
        reason: format!("add {step_id}"),
        options: None,
        target_kind: TargetKind::Other,
    }
}

/// Returns a run configuration with `task`, `editors` and default bounds.
pub(crate) fn config(editors: &[&str]) -> RunConfig {
    RunConfig {
        task: json!("study batch7"),
        editors: editors.iter().map(|s| s.to_string()).collect(),
        ..RunConfig::default()
    }
}

/// Describes a run for snapshots: each step's status, the edits and, when done, the outcome.
pub(crate) fn summary(sched: &Scheduler) -> String {
    let mut out = String::new();
    for step in sched.snapshot() {
        let _ = write!(out, "{} [{}] {}", step.id, step.target, step.status.name());
        if !step.after.is_empty() {
            let _ = write!(out, " after {}", step.after.join(","));
        }
        if let Some(note) = &step.note {
            let _ = write!(out, " — {note}");
        }
        if let Some(repairs) = &step.repairs {
            let _ = write!(out, " (repairs {repairs})");
        }
        let _ = writeln!(out);
    }
    for edit in sched.edits() {
        let from = match &edit.from {
            EditorCall::Step { step } => format!("step {step}"),
            EditorCall::Repair { step, editor } => format!("{editor} repairing {step}"),
        };
        let what = match &edit.proposal {
            Proposal::AddStep { step_id, .. } => format!("add {step_id}"),
            Proposal::CancelStep { step_id, .. } => format!("cancel {step_id}"),
        };
        let status = match &edit.status {
            EditStatus::Refused(reason) => format!("refused: {reason}"),
            other => format!("{other:?}").to_lowercase(),
        };
        let _ = writeln!(out, "edit {} from {from}: {what} → {status}", edit.id);
    }
    // Taking the result out of the scheduler gives what copying it gives, or nothing (and
    // the scheduler back) while the run goes on.
    let taken = sched.clone().into_result();
    assert_eq!(taken.as_ref().ok(), sched.result().as_ref(), "into_result differs from result");
    assert_eq!(taken.is_err(), !sched.is_done());
    if let Some(result) = sched.result() {
        let _ = writeln!(
            out,
            "outcome: {}",
            serde_json::to_string(&result.outcome).unwrap_or_default()
        );
    } else {
        let _ = writeln!(out, "running");
    }
    out
}
