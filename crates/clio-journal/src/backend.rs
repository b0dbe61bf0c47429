//! [`JournalBackend`]: the journal's contract for a store other than the embedded redb file
//! (a PostgreSQL database shared by many workers), and what such a store needs from this
//! crate to keep the embedded journal's rules: the records' update rules ([`records`]),
//! the commit notices behind [`crate::Journal::changes`] ([`CommitNotices`]) and the reply
//! side of a [`Pending`] ([`pending_reply`]).
//!
//! The contract is the journal's operations, one for one: [`crate::Journal`] hands each call
//! to its backend and adds nothing but the conveniences every backend shares (decoding
//! payloads, `export`). `crate::conformance` (feature `conformance`) is the test suite
//! every backend must pass unchanged; the redb journal passes it too.
//!
//! Leases are the one part the embedded journal lacks: a file is locked by one process,
//! whose runs are its own. A shared store lets any number of workers claim runs; each write
//! into a run a handle holds a lease on carries the lease's epoch and is refused with
//! [`JournalError::Fenced`] once another worker has claimed the run since.

use std::collections::HashSet;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use crate::changes::Commits;
use crate::error::{JournalError, Result};
use crate::format::{RawEntry, RunId, RunRecord, SessionId, SessionRecord, TaskId, TaskRecord};
use crate::input::{
    NewEntry, NewRun, NewSession, NewTask, Pruned, Reconciled, RunFilter, RunUpdate, SessionUpdate,
    TaskUpdate,
};
use crate::pending::{self, Pending, Reply};

pub mod records;

/// A run claimed by a worker: the worker may write into the run while the lease holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lease {
    /// The run.
    pub run: RunId,
    /// Counts the claims of the run: each claim gets a greater epoch than the one before,
    /// and a write carrying an older one is refused.
    pub epoch: u64,
}

/// The update a task recorded as already ended gets, made once its id is known.
pub type EndedTaskUpdate = Box<dyn FnOnce(TaskId) -> TaskUpdate + Send>;

/// A journal store other than the embedded redb file.
///
/// Every method has the meaning of the [`crate::Journal`] method of the same name; the
/// conformance suite pins it down. Writes that return a [`Pending`] must not block the
/// calling thread (an async caller awaits them on its executor): a backend hands them to
/// threads of its own and answers through [`pending_reply`]. The rest may block.
pub trait JournalBackend: Send + Sync + 'static {
    /// Where the journal is, for messages: a URL without its password, say.
    fn location(&self) -> &Path;
    /// The notices [`crate::Journal::changes`] hands out: bumped after each commit of this
    /// handle and, for a store many processes share, after each commit another process
    /// announces.
    fn commits(&self) -> &CommitNotices;
    /// Creates a run, status running. A backend with leases gives the creating handle the
    /// run's first lease.
    fn create_run(&self, new: NewRun) -> Result<RunId>;
    /// Changes a run and returns its record as it now stands.
    fn update_run(&self, run: RunId, update: RunUpdate) -> Pending<RunRecord>;
    /// Appends `entries` to `run` atomically and returns their sequence numbers.
    fn append(&self, run: RunId, entries: Vec<NewEntry>) -> Pending<Vec<u64>>;
    /// Creates a task.
    fn create_task(&self, new: NewTask) -> Result<TaskId>;
    /// Creates `task` and appends `before`, then `after` (naming the task), atomically.
    fn create_task_with_entries(
        &self,
        run: RunId,
        before: Vec<NewEntry>,
        task: NewTask,
        after: Vec<NewEntry>,
    ) -> Pending<(TaskId, Vec<u64>)>;
    /// Records a task that has already ended, atomically, with its entries.
    fn record_ended_task(
        &self,
        run: RunId,
        before: Vec<NewEntry>,
        task: NewTask,
        after: Vec<NewEntry>,
        update: EndedTaskUpdate,
    ) -> Pending<(TaskRecord, Vec<u64>)>;
    /// Changes a task; a finished one is refused.
    fn update_task(&self, task: TaskId, update: TaskUpdate) -> Pending<TaskRecord>;
    /// Creates a subagent session.
    fn create_session(&self, new: NewSession) -> Result<SessionRecord>;
    /// Changes a session.
    fn update_session(&self, id: &SessionId, update: SessionUpdate) -> Result<SessionRecord>;
    /// Claims one model iteration of a session's budget.
    fn claim_iteration(&self, id: &SessionId) -> Result<Option<u64>>;
    /// Marks what owners not in `live` left running as interrupted (sessions lost).
    fn reconcile(&self, live: &HashSet<String>) -> Result<Reconciled>;
    /// Removes the runs finished before `before_ms`, with their entries and tasks.
    fn prune(&self, before_ms: u64) -> Result<Pruned>;
    /// Makes every earlier write durable.
    fn flush(&self) -> Result<()>;
    /// Returns a run.
    fn run(&self, run: RunId) -> Result<Option<RunRecord>>;
    /// Lists runs, newest first.
    fn runs(&self, filter: &RunFilter) -> Result<Vec<RunRecord>>;
    /// Returns how many entries a run holds.
    fn entry_count(&self, run: RunId) -> Result<u64>;
    /// Returns a run's entries from `from` on, payloads undecoded.
    fn raw_entries(&self, run: RunId, from: u64) -> Result<Vec<RawEntry>>;
    /// Returns one entry.
    fn raw_entry(&self, run: RunId, seq: u64) -> Result<Option<RawEntry>>;
    /// Returns the entry holding `identity`.
    fn raw_entry_by_identity(&self, run: RunId, identity: &str) -> Result<Option<RawEntry>>;
    /// Returns a task.
    fn task(&self, task: TaskId) -> Result<Option<TaskRecord>>;
    /// Returns a run's tasks in creation order.
    fn tasks(&self, run: RunId) -> Result<Vec<TaskRecord>>;
    /// Returns a run's tasks in creation order, each without its result (`None`), for a
    /// report that does not read results. A backend that can skip decoding them does.
    fn tasks_without_results(&self, run: RunId) -> Result<Vec<TaskRecord>> {
        let mut tasks = self.tasks(run)?;
        for task in &mut tasks {
            task.result = None;
        }
        Ok(tasks)
    }
    /// Returns a session.
    fn session(&self, id: &SessionId) -> Result<Option<SessionRecord>>;
    /// Returns every session in id order.
    fn sessions(&self) -> Result<Vec<SessionRecord>>;

    /// Whether this store lets workers claim runs ([`JournalBackend::claim_run`]).
    fn has_leases(&self) -> bool {
        false
    }
    /// Claims one runnable run (running or interrupted, with no live lease) for `worker`,
    /// for `lease`; the handle keeps the lease alive until it releases it or the process
    /// stops. `None` when no run is runnable.
    fn claim_run(&self, worker: &str, lease: Duration) -> Result<Option<Lease>> {
        let _ = (worker, lease);
        Err(JournalError::NoLeases { location: self.location().to_path_buf() })
    }
    /// Claims run `run` for `worker` if it is runnable (see [`JournalBackend::claim_run`]);
    /// `None` when it is not (another worker holds it, or it has ended or waits).
    fn claim_this_run(&self, run: RunId, worker: &str, lease: Duration) -> Result<Option<Lease>> {
        let _ = (run, worker, lease);
        Err(JournalError::NoLeases { location: self.location().to_path_buf() })
    }
    /// Gives up this handle's lease on `run`; returns whether it held one.
    fn release_run(&self, run: RunId) -> Result<bool> {
        let _ = run;
        Ok(false)
    }
    /// Returns the lease this handle holds on `run`, if any.
    fn lease(&self, run: RunId) -> Option<Lease> {
        let _ = run;
        None
    }
    /// Stops renewing this handle's lease on `run` without giving it up, as a process that
    /// stalls does: the lease lapses when its time is up.
    fn stop_renewing(&self, run: RunId) {
        let _ = run;
    }
}

/// The counter of a journal's commits that [`crate::Journal::changes`] watches.
#[derive(Default)]
pub struct CommitNotices {
    pub(crate) commits: Arc<Commits>,
}

impl CommitNotices {
    /// Counts a commit and wakes every reader waiting for one.
    pub fn bump(&self) {
        self.commits.bump();
    }
}

/// The side of a [`Pending`] a backend answers through, once its write has committed.
pub struct PendingReply<T> {
    reply: Reply<T>,
}

impl<T> PendingReply<T> {
    /// Delivers the write's outcome and wakes whoever waits on it.
    pub fn send(self, outcome: Result<T>) {
        self.reply.send(outcome);
    }
}

/// Returns a connected pair for one write of a backend at `location`. A reply dropped
/// without an answer tells the waiting caller that the writer stopped.
pub fn pending_reply<T>(location: &Path) -> (PendingReply<T>, Pending<T>) {
    let (reply, pending) = pending::channel(location.to_path_buf());
    (PendingReply { reply }, pending)
}

/// Returns a write that has already ended with `outcome`.
pub fn pending_ready<T>(outcome: Result<T>) -> Pending<T> {
    Pending::ready(outcome)
}
