//! Workflows as data (SPEC §6): a procedure written as a JSON list of steps, each naming who
//! runs it, what it receives and which steps it waits on.
//!
//! - [`Workflow`] is a checked list of [`Step`]s: [`Workflow::from_json`] reads the JSON
//!   form and refuses it with a [`WorkflowError`] naming the first problem (bad or repeated
//!   id, empty target, unknown dependency, cycle, unreachable input reference).
//! - [`Scheduler`] is the run as a state machine: the runtime tells it [`Event`]s (a step
//!   started, finished, failed, was cancelled; an editor proposed; the person decided) and
//!   carries out the [`Action`]s it decides (start steps with resolved inputs, ask for a
//!   decision, offer a failed step to an editor). When it [is done](Scheduler::is_done),
//!   [`Scheduler::result`] assembles the [`RunResult`].
//! - [`render_text`], [`render_mermaid`] and [`render_dot`] draw the DAG for people.
//!
//! Invariants: this crate is pure (no tokio, no I/O, no clock, no randomness) and its
//! decisions depend only on the events it was told, in order, so replaying a journaled
//! event sequence into a fresh scheduler rebuilds the same steps and decisions. Targets are
//! opaque strings here; what they are is the runtime's to say ([`TargetKind`]). petgraph
//! stays private.

mod action;
mod config;
mod error;
mod event;
mod graph;
mod id;
mod parse;
mod reference;
mod render;
mod report;
mod scheduler;
mod step;
mod workflow;

pub use crate::action::{Action, DecisionRequest, RepairOffer, StartStep};
pub use crate::config::{Bounds, RunConfig, Settings};
pub use crate::error::WorkflowError;
pub use crate::event::{EditorCall, Event, Proposal};
pub use crate::id::{MAX_ID_LEN, check_step_id};
pub use crate::reference::text_of;
pub use crate::render::{render_dot, render_mermaid, render_text};
pub use crate::report::{
    EditRecord, EditStatus, EventError, Outcome, RunResult, StepReport, StepStatus,
};
pub use crate::scheduler::{Scheduler, StepStatusView};
pub use crate::step::Step;
pub use crate::workflow::{TargetKind, Workflow};

/// The crate README's example, run as a doctest so that it cannot go stale.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
