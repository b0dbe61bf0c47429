//! What a [`Scheduler`](crate::Scheduler) asks the runtime to do: [`Action`]s, decided only
//! from the events it was told, so a replay decides the same.

use serde_json::{Map, Value};

use crate::event::EditorCall;
use crate::step::Step;

/// One thing the runtime should do now.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Start a step's task, then report [`Event::Started`](crate::Event::Started).
    Start(StartStep),
    /// Ask the person to approve a proposed step, then report
    /// [`Event::Decision`](crate::Event::Decision).
    AskDecision(DecisionRequest),
    /// Offer a failed step to an editor (call the editor's target with `input` and the
    /// editing tools), then report [`Event::RepairEnded`](crate::Event::RepairEnded).
    OfferRepair(RepairOffer),
}

/// A step to start, with its input resolved.
#[derive(Debug, Clone, PartialEq)]
pub struct StartStep {
    /// The step id.
    pub step: String,
    /// Who runs it.
    pub target: String,
    /// What it receives, references resolved.
    pub input: Value,
    /// Options for a flow target.
    pub options: Option<Map<String, Value>>,
    /// The model it runs on, if the step names one.
    pub model: Option<String>,
    /// Whether it is an editor's step, which gets `workflow_add_step` and
    /// `workflow_cancel_step` while it runs.
    pub editor: bool,
}

/// A proposed step waiting for the person's yes or no.
#[derive(Debug, Clone, PartialEq)]
pub struct DecisionRequest {
    /// The proposal's number, to answer with.
    pub proposal: u32,
    /// The editor call that proposed it.
    pub from: EditorCall,
    /// The step as it would be added.
    pub step: Step,
    /// The editor's reason.
    pub reason: String,
    /// The question to show the person.
    pub question: String,
}

/// A failed step offered to one editor.
#[derive(Debug, Clone, PartialEq)]
pub struct RepairOffer {
    /// The failed step.
    pub step: String,
    /// The editor, by target name: the runtime calls this target.
    pub editor: String,
    /// What failed and why.
    pub error: String,
    /// The editor call's input: the task, instructions, the failed step and the workflow.
    pub input: Value,
}
