//! Plain-data arguments of the journal's operations: what a caller gives to create or change
//! a record, and the small reports some operations return. None of these is stored as is.

use serde_json::Value;
use serde_json::value::RawValue;

use crate::format::{
    EntryKind, RunId, RunStatus, SessionId, SessionStatus, TaskId, TaskKind, TaskStatus,
};

/// When an append counts as done.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Durability {
    /// An append returns once its entry is on disk (the default).
    #[default]
    Immediate,
    /// An append returns once its entry is visible to readers; entries reach the disk at the
    /// next [`crate::Journal::flush`] or when the journal closes. For throw-away runs: a crash
    /// loses the unflushed tail (still leaving a prefix).
    Eventual,
}

/// How a journal is opened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JournalConfig {
    /// When writes count as done.
    pub durability: Durability,
    /// Whether each durable commit to the redb file also records the allocator state, so
    /// that reopening after a crash does not walk the whole file. It makes such a commit a
    /// two-phase one (two flushes); with the write-ahead log those commits are only the
    /// occasional checkpoints. On by default.
    pub quick_repair: bool,
    /// Whether a file journal makes each durable batch durable through its write-ahead log
    /// (`<file>-wal`: one flush of a small append) and checkpoints into the redb file from
    /// time to time, instead of a durable redb commit per batch. On by default; a log left
    /// by a crash is applied at open either way. In-memory journals have none.
    pub write_ahead_log: bool,
    /// The write-ahead log length, in bytes, after which the writer checkpoints into the
    /// redb file and starts the log over. Larger means fewer two-phase commits and a longer
    /// log to apply after a crash.
    pub checkpoint_bytes: u64,
    /// The most write requests the writer folds into one commit.
    pub max_batch: usize,
    /// The page cache, in bytes: redb's read cache and its buffer of pages written since
    /// the last checkpoint. It is held for as long as the journal is open and fills up
    /// as the file grows, so it is most of what a long run's journal costs in memory;
    /// reads beyond it come from the operating system's cache of the file.
    pub cache_size: usize,
    /// How long the writer thread, done with a commit, looks for the next request before
    /// it sleeps. A sequence of writes that each wait for the last (a chain of steps) then
    /// finds the writer awake: waking a sleeping thread cost about a tenth of a step on the
    /// development machine. The writer yields its core while it looks. Zero sleeps at once.
    pub writer_spin: std::time::Duration,
}

impl Default for JournalConfig {
    fn default() -> Self {
        Self {
            durability: Durability::Immediate,
            quick_repair: true,
            write_ahead_log: true,
            checkpoint_bytes: 16 << 20,
            max_batch: 4096,
            cache_size: 4 * 1024 * 1024,
            writer_spin: std::time::Duration::from_micros(200),
        }
    }
}

/// A run to create.
#[derive(Debug, Clone, PartialEq)]
pub struct NewRun {
    /// The flow selection it runs.
    pub flow: String,
    /// Its input.
    pub input: Value,
    /// A digest of the input.
    pub input_digest: String,
    /// The flow version and plugin set.
    pub fingerprint: String,
    /// The process that runs it.
    pub owner: String,
    /// What the starting program put around the run (see [`crate::RunRecord::launch`]),
    /// stored with it in the same transaction.
    pub launch: Option<Value>,
}

/// A change to a run; `None` fields stay as they are.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RunUpdate {
    /// The new status; a finished status also stamps `finished_at_ms`.
    pub status: Option<RunStatus>,
    /// The final answer.
    pub answer: Option<Value>,
    /// The error.
    pub error: Option<String>,
    /// A new owner (a process that resumes the run).
    pub owner: Option<String>,
    /// A new launch record, replacing the one stored (see [`crate::RunRecord::launch`]).
    pub launch: Option<Value>,
}

/// A [`NewEntry`] whose payload is already JSON text: encoded on the caller's thread, so
/// that the writer, which every caller waits on, only copies it.
pub(crate) struct EncodedEntry {
    pub(crate) kind: EntryKind,
    pub(crate) identity: Option<String>,
    pub(crate) task: Option<TaskId>,
    pub(crate) payload: Box<RawValue>,
}

/// Returns `entries` with their payloads encoded.
pub(crate) fn encoded(entries: Vec<NewEntry>) -> Vec<EncodedEntry> {
    entries
        .into_iter()
        .map(|e| EncodedEntry {
            kind: e.kind,
            identity: e.identity,
            task: e.task,
            payload: match e.text {
                Some(PayloadText(text)) => text,
                None => raw_json(&e.payload),
            },
        })
        .collect()
}

/// A [`RunUpdate`] whose answer and launch are already JSON text: encoded on the caller's thread, so
/// that the writer, which every caller waits on, only copies it.
pub(crate) struct RawRunUpdate {
    pub(crate) status: Option<RunStatus>,
    pub(crate) answer: Option<Box<RawValue>>,
    pub(crate) error: Option<String>,
    pub(crate) owner: Option<String>,
    pub(crate) launch: Option<Box<RawValue>>,
}

impl RunUpdate {
    /// Returns the update with its answer and launch encoded.
    pub(crate) fn encoded(self) -> RawRunUpdate {
        RawRunUpdate {
            status: self.status,
            answer: self.answer.as_ref().map(raw_json),
            error: self.error,
            owner: self.owner,
            launch: self.launch.as_ref().map(raw_json),
        }
    }
}

/// Returns `value` as JSON text.
pub(crate) fn raw_json(value: &Value) -> Box<RawValue> {
    // A `Value` always serialises: its keys are strings and its numbers finite.
    serde_json::value::to_raw_value(value).unwrap_or_else(|_| RawValue::NULL.to_owned())
}

/// Which runs [`crate::Journal::runs`] lists. The default lists all of them.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RunFilter {
    /// Only runs with one of these statuses; empty means any.
    pub statuses: Vec<RunStatus>,
    /// Only runs of this flow selection.
    pub flow: Option<String>,
    /// Only runs started at or after this time (ms since the Unix epoch).
    pub started_after_ms: Option<u64>,
    /// Only runs started before this time.
    pub started_before_ms: Option<u64>,
    /// At most this many runs, newest first.
    pub limit: Option<usize>,
}

/// An entry to append; the journal assigns its sequence number and time.
#[derive(Debug, Clone, PartialEq)]
pub struct NewEntry {
    /// What it records.
    pub kind: EntryKind,
    /// Its replay identity, unique within the run when present.
    pub identity: Option<String>,
    /// The task it concerns.
    pub task: Option<TaskId>,
    /// The kind-specific content (`Null` for an entry made with [`NewEntry::from_text`]).
    pub payload: Value,
    /// The content as JSON text, for an entry made with [`NewEntry::from_text`].
    text: Option<PayloadText>,
}

/// A payload already encoded; entries compare by its text.
#[derive(Debug, Clone)]
struct PayloadText(Box<RawValue>);

impl PartialEq for PayloadText {
    fn eq(&self, other: &Self) -> bool {
        self.0.get() == other.0.get()
    }
}

impl NewEntry {
    /// Returns the JSON text the payload is stored as: the text it was given as, or its
    /// encoding.
    pub(crate) fn payload_text(&self) -> Box<RawValue> {
        match &self.text {
            Some(PayloadText(text)) => text.clone(),
            None => raw_json(&self.payload),
        }
    }

    /// Returns an entry of `kind` with `payload` and no identity or task.
    pub fn new(kind: EntryKind, payload: Value) -> Self {
        Self { kind, identity: None, task: None, payload, text: None }
    }

    /// Returns an entry of `kind` whose content is `text`, JSON the caller encoded (from a
    /// typed value, say, without building a `Value` first); it is stored as it is.
    pub fn from_text(kind: EntryKind, text: Box<RawValue>) -> Self {
        Self {
            kind,
            identity: None,
            task: None,
            payload: Value::Null,
            text: Some(PayloadText(text)),
        }
    }

    /// Returns the entry with its replay identity set to `identity`.
    pub fn with_identity(mut self, identity: impl Into<String>) -> Self {
        self.identity = Some(identity.into());
        self
    }

    /// Returns the entry with its task set to `task`.
    pub fn with_task(mut self, task: TaskId) -> Self {
        self.task = Some(task);
        self
    }
}

/// A task to create.
#[derive(Debug, Clone, PartialEq)]
pub struct NewTask {
    /// The run it belongs to.
    pub run: RunId,
    /// The task that starts it.
    pub parent: Option<TaskId>,
    /// What it runs.
    pub kind: TaskKind,
    /// The target called.
    pub target: String,
    /// A label for people.
    pub label: String,
    /// Its first status (usually queued or running).
    pub status: TaskStatus,
    /// The model it runs on.
    pub model: Option<String>,
    /// The process that runs it.
    pub owner: String,
    /// The replay identity of the call that made it, if a call did: how a replay finds a
    /// task recorded together with its call's intent.
    pub call: Option<String>,
}

/// A change to a task; `None` fields stay as they are.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct TaskUpdate {
    /// The new status; once terminal, no further update is accepted.
    pub status: Option<TaskStatus>,
    /// The model.
    pub model: Option<String>,
    /// Input tokens spent so far (replaces the recorded count).
    pub input_tokens: Option<u64>,
    /// Output tokens spent so far (replaces the recorded count).
    pub output_tokens: Option<u64>,
    /// The result.
    pub result: Option<Value>,
    /// The error.
    pub error: Option<String>,
    /// A new owner (a process that re-attaches the task).
    pub owner: Option<String>,
}

/// A session to create.
#[derive(Debug, Clone, PartialEq)]
pub struct NewSession {
    /// Its id.
    pub id: SessionId,
    /// The leader of its team.
    pub leader: Option<SessionId>,
    /// The session that starts it.
    pub parent: Option<SessionId>,
    /// Its task team.
    pub team: Option<String>,
    /// Whether a leader manages it.
    pub managed: bool,
    /// Its own managed-subagents setting.
    pub enabled: Option<bool>,
    /// Its first status.
    pub status: SessionStatus,
    /// How many model iterations it may claim.
    pub iteration_budget: Option<u64>,
    /// The providers/models it may route to.
    pub router_allowlist: Option<Vec<String>>,
    /// The process that owns it.
    pub owner: String,
    /// The run whose flow drives it (see [`crate::SessionRecord::run`]); `None` for a team
    /// of no run. A run that does not exist is refused.
    pub run: Option<RunId>,
}

/// A change to a session; `None` fields stay as they are.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SessionUpdate {
    /// The new status.
    pub status: Option<SessionStatus>,
    /// The managed-subagents setting (`Some(None)` clears it).
    pub enabled: Option<Option<bool>>,
    /// The iteration budget (`Some(None)` removes the bound).
    pub iteration_budget: Option<Option<u64>>,
    /// The router allowlist (`Some(None)` removes the restriction).
    pub router_allowlist: Option<Option<Vec<String>>>,
    /// The last checkpoint.
    pub checkpoint: Option<Value>,
    /// A new owner.
    pub owner: Option<String>,
}

/// What [`crate::Journal::reconcile`] changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Reconciled {
    /// Runs marked interrupted.
    pub runs: u64,
    /// Tasks marked interrupted.
    pub tasks: u64,
    /// Sessions marked lost.
    pub sessions: u64,
}

impl Reconciled {
    /// Returns the number of records changed.
    pub fn total(&self) -> u64 {
        self.runs + self.tasks + self.sessions
    }
}

/// What [`crate::Journal::prune`] removed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Pruned {
    /// Runs removed.
    pub runs: u64,
    /// Their entries.
    pub entries: u64,
    /// Their tasks.
    pub tasks: u64,
}
