//! The journal's stability boundary: the records stored in the redb file, their serde form
//! and the format version.
//!
//! Every type here is written to disk as JSON (and by [`crate::Journal::export`] as JSON
//! lines), so a change to any of them is a change to the on-disk format: update
//! `docs/journal-format.md` and, if old files would read differently, bump
//! [`FORMAT_VERSION`].

use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The journal format version this code writes and reads.
///
/// A file recording a larger version is refused with
/// [`JournalError::UpgradeRequired`](crate::JournalError::UpgradeRequired) and left untouched;
/// a smaller one is upgraded when opened for writing. Version 3 seals every stored record
/// with a checksum of its table, key and JSON.
pub const FORMAT_VERSION: u64 = 3;

/// Identifies a run; assigned by the journal, dense from 1 in creation order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct RunId(pub u64);

impl fmt::Display for RunId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// Identifies a task (the handle of a call); assigned by the journal, dense from 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct TaskId(pub u64);

impl fmt::Display for TaskId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// Identifies a subagent session (SPEC §8); chosen by the caller.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct SessionId(pub String);

impl fmt::Display for SessionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// How a run stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    /// A process is running it.
    Running,
    /// It waits for a person's answer; it can be resumed once answered.
    AwaitingInput,
    /// It ended with an answer.
    Succeeded,
    /// It ended with an error.
    Failed,
    /// It was cancelled.
    Cancelled,
    /// The process running it went away; it can be resumed.
    Interrupted,
}

impl RunStatus {
    /// Returns whether the run has ended for good (succeeded, failed or cancelled).
    pub fn is_finished(self) -> bool {
        matches!(self, Self::Succeeded | Self::Failed | Self::Cancelled)
    }
}

/// What a task runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskKind {
    /// An installed agent.
    Agent,
    /// A subagent of a plugin.
    Subagent,
    /// A flow.
    Flow,
    /// A tool.
    Tool,
    /// A `ctx.step` closure.
    Step,
}

/// How a task stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskStatus {
    /// Accepted, not started yet.
    Queued,
    /// Started by a live process.
    Running,
    /// Waiting for a person's answer.
    AwaitingInput,
    /// Ended with a result.
    Succeeded,
    /// Ended with an error.
    Failed,
    /// Cancelled.
    Cancelled,
    /// The process running it went away (set by reconcile).
    Interrupted,
}

impl TaskStatus {
    /// Returns whether the status is final: no later update may change it.
    ///
    /// `Interrupted` is not final: it marks work a dead process left unfinished, and a
    /// resumed run re-attaches it (it may then run, succeed or fail under the same handle).
    pub fn is_terminal(self) -> bool {
        matches!(self, Self::Succeeded | Self::Failed | Self::Cancelled)
    }

    /// Returns whether a live process is (or should be) working on the task: queued,
    /// running or awaiting input. `reconcile` interrupts active tasks of dead owners.
    pub fn is_active(self) -> bool {
        matches!(self, Self::Queued | Self::Running | Self::AwaitingInput)
    }
}

/// How a subagent session stands (SPEC §8).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SessionStatus {
    /// Waiting for a slot.
    Queued,
    /// Working.
    Running,
    /// Between turns; can be woken.
    Idle,
    /// Finished with an answer.
    Done,
    /// Finished with an error.
    Failed,
    /// Cancelled with its descendants.
    Cancelled,
    /// Its process stopped without an answer (set by reconcile).
    Lost,
}

impl SessionStatus {
    /// Returns whether a live process is expected to own the session.
    pub fn is_live(self) -> bool {
        matches!(self, Self::Queued | Self::Running)
    }

    /// Returns whether the status is final.
    pub fn is_terminal(self) -> bool {
        matches!(self, Self::Done | Self::Failed | Self::Cancelled | Self::Lost)
    }
}

/// The kind of a journal entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EntryKind {
    /// A call to a target (`ctx.call` / `ctx.start`); usually names its task.
    Call,
    /// A `ctx.step` and its recorded result.
    Step,
    /// A question asked by `ctx.ask`.
    Question,
    /// The answer to a question.
    Answer,
    /// An event from `ctx.record_event`.
    Event,
    /// An editor's proposal to change a workflow.
    Proposal,
    /// The decision on a proposal.
    Decision,
    /// A view published by `ctx.publish`.
    View,
    /// A permission receipt.
    PermissionReceipt,
}

/// One entry of a run's journal, as stored and as exported.
///
/// `P` is the form of its payload: decoded (the default), or its JSON text ([`RawEntry`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JournalEntry<P = Value> {
    /// The run it belongs to.
    pub run: RunId,
    /// Its place in the run; dense from 0.
    pub seq: u64,
    /// What it records.
    pub kind: EntryKind,
    /// The replay identity (call site, target+input digest and occurrence, or key), unique
    /// within the run when present.
    pub identity: Option<String>,
    /// The task it concerns, if any.
    pub task: Option<TaskId>,
    /// When it was appended, in milliseconds since the Unix epoch.
    pub at_ms: u64,
    /// The kind-specific content.
    pub payload: P,
}

/// An entry as stored, its payload kept as JSON text: what a replay loads, so that each
/// payload is decoded only when, and only as far as, it is used.
pub type RawEntry = JournalEntry<Box<serde_json::value::RawValue>>;

impl RawEntry {
    /// Decodes the whole payload.
    pub fn payload_value(&self) -> serde_json::Result<Value> {
        serde_json::from_str(self.payload.get())
    }

    /// Decodes the payload as `T`, which may read only the fields it names.
    pub fn payload_as<T: serde::de::DeserializeOwned>(&self) -> serde_json::Result<T> {
        serde_json::from_str(self.payload.get())
    }
}

/// A run, as stored and as exported.
///
/// `P` is the form of its input, answer and launch: decoded (the default), or their JSON
/// text (the writer's form, which a status change leaves undecoded).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunRecord<P = Value> {
    /// Its id.
    pub id: RunId,
    /// The flow selection it runs.
    pub flow: String,
    /// The input it was started with.
    pub input: P,
    /// A digest of the input.
    pub input_digest: String,
    /// The flow version and plugin set it started with.
    pub fingerprint: String,
    /// The process (or session) that runs it; reconcile spares live owners.
    pub owner: String,
    /// How it stands.
    pub status: RunStatus,
    /// When it was created, in milliseconds since the Unix epoch.
    pub started_at_ms: u64,
    /// When it last changed.
    pub updated_at_ms: u64,
    /// When it finished, if it has.
    pub finished_at_ms: Option<u64>,
    /// Its final answer, if it succeeded.
    pub answer: Option<P>,
    /// Its error, if it failed.
    pub error: Option<String>,
    /// What the program that started the run put around it (for the CLI: the agent file,
    /// plugin folders, workspace and models it was launched with), so that another process
    /// can rebuild the same runtime. Written with the run in one transaction, so that no
    /// crash leaves a run without it; its shape belongs to that program. Absent when none
    /// was given, and in records written before runs kept it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub launch: Option<P>,
}

/// A run record with its input, answer and launch kept as JSON text: what the writer
/// changes, so that a status update does not decode and encode again a run's whole input
/// and answer.
pub(crate) type RawRunRecord = RunRecord<Box<serde_json::value::RawValue>>;

impl RawRunRecord {
    /// Decodes the input, the answer and the launch.
    pub(crate) fn decoded(self) -> serde_json::Result<RunRecord> {
        Ok(RunRecord {
            id: self.id,
            flow: self.flow,
            input: serde_json::from_str(self.input.get())?,
            input_digest: self.input_digest,
            fingerprint: self.fingerprint,
            owner: self.owner,
            status: self.status,
            started_at_ms: self.started_at_ms,
            updated_at_ms: self.updated_at_ms,
            finished_at_ms: self.finished_at_ms,
            // As a stored record reads back: an answer of `null` is no answer.
            answer: self
                .answer
                .filter(|a| a.get() != "null")
                .map(|a| serde_json::from_str(a.get()))
                .transpose()?,
            error: self.error,
            launch: self
                .launch
                .filter(|l| l.get() != "null")
                .map(|l| serde_json::from_str(l.get()))
                .transpose()?,
        })
    }
}

/// A task, as stored and as exported.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskRecord {
    /// Its handle.
    pub id: TaskId,
    /// The run it belongs to.
    pub run: RunId,
    /// The task that started it, if any.
    pub parent: Option<TaskId>,
    /// What it runs.
    pub kind: TaskKind,
    /// The target called.
    pub target: String,
    /// A label for people.
    pub label: String,
    /// How it stands.
    pub status: TaskStatus,
    /// The model it runs on, if any.
    pub model: Option<String>,
    /// Input tokens spent.
    pub input_tokens: u64,
    /// Output tokens spent.
    pub output_tokens: u64,
    /// Its result, if it succeeded.
    pub result: Option<Value>,
    /// Its error, if it failed.
    pub error: Option<String>,
    /// The process that runs it; reconcile spares live owners.
    pub owner: String,
    /// The replay identity of the call that made it, if a call did (absent in records
    /// written before tasks named their calls).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call: Option<String>,
    /// When it was created.
    pub created_at_ms: u64,
    /// When it last changed.
    pub updated_at_ms: u64,
}

/// A task record read without its result: the same fields as [`TaskRecord`], its
/// `result` skipped over by the parser rather than built. A workflow's own task holds
/// every step's result, and reports that count and list tasks never read them.
#[derive(Deserialize)]
pub(crate) struct TaskWithoutResult {
    id: TaskId,
    run: RunId,
    parent: Option<TaskId>,
    kind: TaskKind,
    target: String,
    label: String,
    status: TaskStatus,
    model: Option<String>,
    input_tokens: u64,
    output_tokens: u64,
    #[serde(default)]
    #[allow(dead_code, reason = "parsed over, never read: that is the point")]
    result: serde::de::IgnoredAny,
    error: Option<String>,
    owner: String,
    #[serde(default)]
    call: Option<String>,
    created_at_ms: u64,
    updated_at_ms: u64,
}

impl TaskWithoutResult {
    /// Returns the run the task belongs to.
    pub(crate) fn run(&self) -> RunId {
        self.run
    }
}

impl From<TaskWithoutResult> for TaskRecord {
    fn from(t: TaskWithoutResult) -> TaskRecord {
        TaskRecord {
            id: t.id,
            run: t.run,
            parent: t.parent,
            kind: t.kind,
            target: t.target,
            label: t.label,
            status: t.status,
            model: t.model,
            input_tokens: t.input_tokens,
            output_tokens: t.output_tokens,
            result: None,
            error: t.error,
            owner: t.owner,
            call: t.call,
            created_at_ms: t.created_at_ms,
            updated_at_ms: t.updated_at_ms,
        }
    }
}

/// A subagent session (SPEC §8), as stored and as exported.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionRecord {
    /// Its id.
    pub id: SessionId,
    /// The leader of its team.
    pub leader: Option<SessionId>,
    /// The session that started it.
    pub parent: Option<SessionId>,
    /// Its task team.
    pub team: Option<String>,
    /// Whether a leader manages it.
    pub managed: bool,
    /// Its own managed-subagents setting; `None` defers to the leader or configuration.
    pub enabled: Option<bool>,
    /// How it stands.
    pub status: SessionStatus,
    /// How many model iterations it may claim; `None` is unbounded.
    pub iteration_budget: Option<u64>,
    /// How many it has claimed.
    pub iterations_used: u64,
    /// The providers/models it may route to; `None` is unrestricted.
    pub router_allowlist: Option<Vec<String>>,
    /// The last complete model input before an in-flight tool call.
    pub checkpoint: Option<Value>,
    /// The process that owns it; reconcile spares live owners. On a journal with leases,
    /// a worker that claims the session's run becomes its owner.
    pub owner: String,
    /// The run whose flow drives it (its team's run), if any: on a journal with leases its
    /// writes are fenced by that run's lease. Absent for a team of no run, and in records
    /// written before sessions named their run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<RunId>,
    /// When it was created.
    pub created_at_ms: u64,
    /// When it last changed.
    pub updated_at_ms: u64,
}

/// One line of [`crate::Journal::export`]: the run, then its tasks, then its entries.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "record", rename_all = "snake_case")]
pub enum ExportLine {
    /// The run record.
    Run(RunRecord),
    /// One task of the run.
    Task(TaskRecord),
    /// One entry of the run.
    Entry(JournalEntry),
}
