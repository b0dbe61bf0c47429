//! [`Journal`]: the handle every caller holds, whichever store is behind it. The embedded
//! redb file is the default; any other store comes in through
//! [`Journal::from_backend`]. Each operation goes to the store as it is, so that the rules of
//! the journal (dense sequence numbers, one entry per identity, atomic batches, the update
//! rules of `backend::records`) hold the same way on each, as `crate::conformance` checks.

use std::collections::HashSet;
use std::fmt;
use std::io::{self, Write};
use std::path::Path;
#[cfg(test)]
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::backend::{JournalBackend, Lease};
use crate::changes::Changes;
use crate::error::{JournalError, Result};
use crate::format::{
    EntryKind, ExportLine, JournalEntry, RawEntry, RunId, RunRecord, SessionId, SessionRecord,
    TaskId, TaskRecord,
};
use crate::input::{
    JournalConfig, NewEntry, NewRun, NewSession, NewTask, Pruned, Reconciled, RunFilter, RunUpdate,
    SessionUpdate, TaskUpdate,
};
use crate::journal::Embedded;
use crate::pending::Pending;

/// A handle on an open journal.
///
/// Cheap to clone (an `Arc` inside) and `Send + Sync`: async code awaits the writes of
/// [`Journal::nonblocking`] and runs the rest through `spawn_blocking`. On the embedded
/// file, writes go to one writer thread that group-commits them; reads run on the calling
/// thread against a snapshot and never block the writer. The writer stops, after making
/// everything durable, when the last handle is dropped.
#[derive(Clone)]
pub struct Journal {
    store: Store,
}

#[derive(Clone)]
enum Store {
    Embedded(Embedded),
    Backend(Arc<dyn JournalBackend>),
}

impl fmt::Debug for Journal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Journal").field("location", &self.path()).finish()
    }
}

/// Decodes a raw entry's payload.
fn decoded(location: &Path, raw: RawEntry) -> Result<JournalEntry> {
    let payload = serde_json::from_str(raw.payload.get())
        .map_err(|err| JournalError::bad_record(location, "an entry payload", err))?;
    Ok(JournalEntry {
        run: raw.run,
        seq: raw.seq,
        kind: raw.kind,
        identity: raw.identity,
        task: raw.task,
        at_ms: raw.at_ms,
        payload,
    })
}

impl Journal {
    /// Opens the journal at `path`, creating it (not its folder) if it does not exist.
    ///
    /// A file left by a crash is recovered to its last durable commit. A file written by a
    /// newer format is refused with [`JournalError::UpgradeRequired`] and not modified; a
    /// file that is not a journal gets [`JournalError::NotAJournal`]. A file of an older
    /// format is upgraded: every record gets its checksum, in one transaction. A panic of
    /// the storage engine on a damaged file is [`JournalError::Damaged`].
    pub fn open(path: impl AsRef<Path>, config: JournalConfig) -> Result<Self> {
        Embedded::open(path, config).map(Self::embedded)
    }

    /// Opens the journal at `path` for reading only: nothing is written, not even crash
    /// recovery (a file left by a crash is read as of its last durable commit).
    pub fn open_read_only(path: impl AsRef<Path>, config: JournalConfig) -> Result<Self> {
        Embedded::open_read_only(path, config).map(Self::embedded)
    }

    /// Opens an empty journal in memory (tests, throwaway runs).
    pub fn open_in_memory() -> Result<Self> {
        Embedded::open_in_memory().map(Self::embedded)
    }

    /// Opens an empty journal in memory with `config`.
    pub fn open_in_memory_with(config: JournalConfig) -> Result<Self> {
        Embedded::open_in_memory_with(config).map(Self::embedded)
    }

    /// Wraps a store other than the embedded file (a PostgreSQL database, say).
    pub fn from_backend(backend: Arc<dyn JournalBackend>) -> Self {
        Self { store: Store::Backend(backend) }
    }

    fn embedded(e: Embedded) -> Self {
        Self { store: Store::Embedded(e) }
    }

    #[cfg(test)]
    pub(crate) fn open_backend(
        backend: impl redb::StorageBackend,
        label: PathBuf,
        config: JournalConfig,
    ) -> Result<Self> {
        Embedded::open_backend(backend, label, config).map(Self::embedded)
    }

    #[cfg(test)]
    pub(crate) fn open_backend_with_log(
        backend: impl redb::StorageBackend,
        log: Box<dyn crate::wal::LogFile>,
        label: PathBuf,
        config: JournalConfig,
    ) -> Result<Self> {
        Embedded::open_backend_with_log(backend, log, label, config).map(Self::embedded)
    }

    /// Returns where this journal lives: its file (`:memory:` for an in-memory one), or the
    /// location its store gives (a URL without its password).
    pub fn path(&self) -> &Path {
        match &self.store {
            Store::Embedded(e) => e.path(),
            Store::Backend(b) => b.location(),
        }
    }

    /// Returns a short name of this journal that every process opening the same journal
    /// computes alike, and that two journals open at once do not share: a digest of its file
    /// or its store's location, or, for an in-memory journal (which no other process can
    /// open), of this instance. The runtime puts it in the marker of the processes a call
    /// starts, so that a resume of run 1 of one journal never takes another journal's run 1
    /// for its own. Costs a `canonicalize` of the file: callers keep it.
    pub fn instance_tag(&self) -> String {
        let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
        let mut feed = |bytes: &[u8]| {
            for byte in bytes {
                hash ^= u64::from(*byte);
                hash = hash.wrapping_mul(0x0100_0000_01b3);
            }
        };
        // Two processes may name one file by two paths (`--home h`, `--home ./h/`).
        let place = std::fs::canonicalize(self.path()).unwrap_or_else(|_| self.path().into());
        feed(place.as_os_str().as_encoded_bytes());
        if let Store::Embedded(e) = &self.store
            && e.is_in_memory()
        {
            feed(&e.instance_address().to_le_bytes());
        }
        format!("{hash:016x}")
    }

    /// Returns whether this journal is shared by processes that may run on other machines
    /// (a store with leases): then no process may mark another's work interrupted by
    /// itself, and workers claim runs with [`Journal::claim_run`].
    pub fn is_shared(&self) -> bool {
        matches!(&self.store, Store::Backend(b) if b.has_leases())
    }

    /// Makes everything written so far durable, then closes this handle.
    ///
    /// Other clones stay usable; the writer stops when the last one goes.
    pub fn close(self) -> Result<()> {
        self.flush()
    }

    /// Returns `res`, telling a caller whose write the embedded writer dropped while
    /// panicking why it stopped.
    fn settle<T>(&self, res: Result<T>) -> Result<T> {
        match &self.store {
            Store::Embedded(e) => e.settle(res),
            Store::Backend(_) => res,
        }
    }

    /// Returns the writes that an async caller awaits instead of blocking a thread on.
    pub fn nonblocking(&self) -> NonBlocking<'_> {
        NonBlocking { journal: self }
    }

    /// Returns notices of this journal's commits from now on: a view of a run awaits
    /// [`Changes::changed`] to read the journal again when something was written (by any
    /// handle of this journal, or for a shared store by any process) instead of at a fixed
    /// interval.
    pub fn changes(&self) -> Changes {
        match &self.store {
            Store::Embedded(e) => e.changes(),
            Store::Backend(b) => Changes::new(Arc::clone(&b.commits().commits)),
        }
    }

    /// Returns how many commits this handle has counted since the journal was opened (a
    /// benchmark's count of durable commits): on the embedded file, the writer's batches (in
    /// `immediate` mode each is one flush of the write-ahead log, a checkpoint a few more);
    /// on a shared store, this handle's commits that changed something and those it heard
    /// announced by other processes.
    pub fn commits(&self) -> u64 {
        match &self.store {
            Store::Embedded(e) => e.commits(),
            Store::Backend(b) => b.commits().commits.count(),
        }
    }

    /// Returns how many times this handle's journal has flushed its file or its
    /// write-ahead log to the disk (`fdatasync`, or `fsync` where a length changes), counted
    /// at each call from the open on (not those of creating a new file, nor a folder's
    /// `fsync` for a new log's name): the disk's work behind [`Journal::commits`] (a
    /// checkpoint is one commit and several flushes, and redb flushes its file when a
    /// commit grows it). `None` on a shared store, whose
    /// flushes are its server's; an in-memory journal makes none.
    pub fn flushes(&self) -> Option<u64> {
        match &self.store {
            Store::Embedded(e) => Some(e.flushes()),
            Store::Backend(_) => None,
        }
    }

    /// Makes every earlier write durable (needed only with [`crate::Durability::Eventual`]).
    pub fn flush(&self) -> Result<()> {
        match &self.store {
            Store::Embedded(e) => e.flush(),
            Store::Backend(b) => b.flush(),
        }
    }

    /// Starts the checkpoint a close would make, without waiting for it: the writer copies
    /// every write its write-ahead log holds into the journal's file durably and leaves the
    /// log not live, so that dropping the last handle later has nothing left to write.
    ///
    /// For a process whose last write is done (a `clio` command whose run ended): the
    /// checkpoint's flush of the file, most of a close's time, runs on the writer's thread
    /// while the caller reads and prints what it reports. Writes after it are allowed; the
    /// first of them makes the log live again (a checkpoint of its own). Dropping the
    /// returned [`Pending`] does not cancel the checkpoint, and its outcome is only news: the
    /// writes it covers were already durable in the log, and a failed checkpoint leaves them
    /// for the next open to apply. On a shared store it is [`Journal::flush`], done at once.
    pub fn checkpoint(&self) -> Pending<()> {
        match &self.store {
            Store::Embedded(e) => e.flush_pending(true),
            Store::Backend(b) => Pending::ready(b.flush()),
        }
    }

    /// Creates a run, status running, and returns its id. On a shared store the creating
    /// handle holds the run's first lease until it releases it ([`Journal::release_run`]).
    pub fn create_run(&self, new: NewRun) -> Result<RunId> {
        match &self.store {
            Store::Embedded(e) => e.create_run(new).map(|rec| rec.id),
            Store::Backend(b) => b.create_run(new),
        }
    }

    /// Creates a run as [`Journal::create_run`] does and returns its record as created.
    /// The embedded store hands back the record it wrote, so a caller that needs the run's
    /// input again (a runtime about to drive it) holds one copy of a large input, not two.
    pub fn create_run_record(&self, new: NewRun) -> Result<RunRecord> {
        match &self.store {
            Store::Embedded(e) => e.create_run(new),
            Store::Backend(b) => {
                let recorded = new.clone();
                let id = b.create_run(new)?;
                Ok(crate::backend::records::new_run(id, recorded, crate::store::now_ms()))
            }
        }
    }

    /// Changes a run and returns the record as it now stands.
    pub fn update_run(&self, run: RunId, update: RunUpdate) -> Result<RunRecord> {
        match &self.store {
            Store::Embedded(e) => e.update_run(run, update),
            Store::Backend(b) => b.update_run(run, update).wait(),
        }
    }

    /// Appends one entry to `run` and returns its sequence number, once durable.
    ///
    /// Fails with [`JournalError::DuplicateIdentity`] when its identity is already in the run.
    pub fn append(&self, run: RunId, entry: NewEntry) -> Result<u64> {
        self.settle(self.nonblocking().append(run, entry).wait())
    }

    /// Appends `entries` to `run` atomically (all or none) and returns their sequence numbers.
    pub fn append_batch(&self, run: RunId, entries: Vec<NewEntry>) -> Result<Vec<u64>> {
        self.settle(self.nonblocking().append_batch(run, entries).wait())
    }

    /// Creates a task and returns its handle.
    pub fn create_task(&self, new: NewTask) -> Result<TaskId> {
        match &self.store {
            Store::Embedded(e) => e.create_task(new),
            Store::Backend(b) => b.create_task(new),
        }
    }

    /// Creates `task` and appends `before`, then `after`, to `run` in one atomic write:
    /// each entry of `after` names the new task. Returns the task and the entries'
    /// sequence numbers.
    ///
    /// This is how a call becomes durable with no window between its intent and its
    /// acceptance: a crash leaves all of it or none. Every identity is checked before
    /// anything is written.
    pub fn create_task_with_entries(
        &self,
        run: RunId,
        before: Vec<NewEntry>,
        task: NewTask,
        after: Vec<NewEntry>,
    ) -> Result<(TaskId, Vec<u64>)> {
        self.settle(self.nonblocking().create_task_with_entries(run, before, task, after).wait())
    }

    /// Records a task that has already ended, in one atomic write: creates `task`, appends
    /// `before` and `after` as [`Journal::create_task_with_entries`] does, and applies the
    /// update `update` makes for the new task's id (its final status and result, which may
    /// name the task). Returns the task as recorded and the entries' sequence numbers.
    ///
    /// For work that may run again after a crash (a read-only tool): it runs first and is
    /// recorded once, with one commit instead of two.
    pub fn record_ended_task(
        &self,
        run: RunId,
        before: Vec<NewEntry>,
        task: NewTask,
        after: Vec<NewEntry>,
        update: impl FnOnce(TaskId) -> TaskUpdate + Send + 'static,
    ) -> Result<(TaskRecord, Vec<u64>)> {
        self.settle(self.nonblocking().record_ended_task(run, before, task, after, update).wait())
    }

    /// Changes a task and returns the record as it now stands.
    ///
    /// A task with a terminal status is refused with [`JournalError::TaskFinished`].
    pub fn update_task(&self, task: TaskId, update: TaskUpdate) -> Result<TaskRecord> {
        self.settle(self.nonblocking().update_task(task, update).wait())
    }

    /// Creates a subagent session.
    pub fn create_session(&self, new: NewSession) -> Result<SessionRecord> {
        match &self.store {
            Store::Embedded(e) => e.create_session(new),
            Store::Backend(b) => b.create_session(new),
        }
    }

    /// Changes a session and returns the record as it now stands.
    pub fn update_session(&self, id: &SessionId, update: SessionUpdate) -> Result<SessionRecord> {
        match &self.store {
            Store::Embedded(e) => e.update_session(id, update),
            Store::Backend(b) => b.update_session(id, update),
        }
    }

    /// Claims one model iteration of the session's durable budget.
    ///
    /// Returns the number of iterations used including this one, or `None` when the budget
    /// is spent or the session has ended.
    pub fn claim_iteration(&self, id: &SessionId) -> Result<Option<u64>> {
        match &self.store {
            Store::Embedded(e) => e.claim_iteration(id),
            Store::Backend(b) => b.claim_iteration(id),
        }
    }

    /// Marks what a gone process left running: tasks and runs become interrupted, sessions
    /// lost, unless their owner (or, for a session, itself or its leader) is in `live`.
    ///
    /// Each record changes once; a second call finds nothing to do. On a shared journal
    /// only a process that knows every live owner may call it (see [`Journal::is_shared`]).
    pub fn reconcile<S: AsRef<str>>(&self, live: &[S]) -> Result<Reconciled> {
        let live: HashSet<String> = live.iter().map(|s| s.as_ref().to_owned()).collect();
        let done = match &self.store {
            Store::Embedded(e) => e.reconcile(live)?,
            Store::Backend(b) => b.reconcile(&live)?,
        };
        if done.total() > 0 {
            tracing::info!(
                runs = done.runs,
                tasks = done.tasks,
                sessions = done.sessions,
                "work left by a stopped process marked interrupted"
            );
        }
        Ok(done)
    }

    /// Removes every finished run (succeeded, failed, cancelled) that finished before
    /// `before_ms` (ms since the Unix epoch), with its entries and tasks.
    pub fn prune(&self, before_ms: u64) -> Result<Pruned> {
        let pruned = match &self.store {
            Store::Embedded(e) => e.prune(before_ms)?,
            Store::Backend(b) => b.prune(before_ms)?,
        };
        tracing::info!(
            runs = pruned.runs,
            entries = pruned.entries,
            tasks = pruned.tasks,
            "pruned"
        );
        Ok(pruned)
    }

    /// Returns the run `run`, if it exists.
    pub fn run(&self, run: RunId) -> Result<Option<RunRecord>> {
        match &self.store {
            Store::Embedded(e) => e.run(run),
            Store::Backend(b) => b.run(run),
        }
    }

    /// Returns the run `run` with its input, answer and launch left as JSON text, if it
    /// exists: a reader that needs its status and times does not decode a long workflow's
    /// whole input (on a file; a shared store decodes the record and writes them back).
    pub fn run_raw(
        &self,
        run: RunId,
    ) -> Result<Option<RunRecord<Box<serde_json::value::RawValue>>>> {
        match &self.store {
            Store::Embedded(e) => e.raw_run(run),
            Store::Backend(b) => {
                let Some(record) = b.run(run)? else { return Ok(None) };
                let raw = |value: &serde_json::Value| {
                    serde_json::value::to_raw_value(value).map_err(|e| JournalError::Corrupted {
                        path: b.location().to_path_buf(),
                        detail: format!("run {run}: its record does not encode again: {e}"),
                    })
                };
                Ok(Some(RunRecord {
                    id: record.id,
                    flow: record.flow,
                    input: raw(&record.input)?,
                    input_digest: record.input_digest,
                    fingerprint: record.fingerprint,
                    owner: record.owner,
                    status: record.status,
                    started_at_ms: record.started_at_ms,
                    updated_at_ms: record.updated_at_ms,
                    finished_at_ms: record.finished_at_ms,
                    answer: record.answer.as_ref().map(raw).transpose()?,
                    error: record.error,
                    launch: record.launch.as_ref().map(raw).transpose()?,
                }))
            }
        }
    }

    /// Lists the runs that `filter` selects, newest first.
    pub fn runs(&self, filter: &RunFilter) -> Result<Vec<RunRecord>> {
        match &self.store {
            Store::Embedded(e) => e.runs(filter),
            Store::Backend(b) => b.runs(filter),
        }
    }

    /// Returns how many entries `run` holds (its next sequence number).
    pub fn entry_count(&self, run: RunId) -> Result<u64> {
        match &self.store {
            Store::Embedded(e) => e.entry_count(run),
            Store::Backend(b) => b.entry_count(run),
        }
    }

    /// Returns the entries of `run` in order.
    pub fn entries(&self, run: RunId) -> Result<Vec<JournalEntry>> {
        self.entries_from(run, 0)
    }

    /// Returns the entries of `run` in order with their payloads undecoded (see
    /// [`RawEntry`]): a replay's load, which decodes each payload only as far as it needs.
    pub fn raw_entries(&self, run: RunId) -> Result<Vec<RawEntry>> {
        match &self.store {
            Store::Embedded(e) => e.raw_entries(run),
            Store::Backend(b) => b.raw_entries(run, 0),
        }
    }

    /// Calls `visit` with each entry of `run` in order, its payload as the JSON text it was
    /// stored with, holding one entry at a time: a reader that words a long run line by
    /// line (`clio runs events`) scans each payload once, neither copying every payload nor
    /// holding the run in memory as [`Journal::raw_entries`] does. The entries are checked
    /// as a whole read checks them; on an error, the entries before the damaged one were
    /// visited.
    pub fn visit_entry_texts(
        &self,
        run: RunId,
        mut visit: impl FnMut(&JournalEntry<&str>),
    ) -> Result<()> {
        match &self.store {
            Store::Embedded(e) => e.visit_entry_texts(run, &mut visit),
            Store::Backend(b) => {
                for raw in b.raw_entries(run, 0)? {
                    let JournalEntry { run, seq, kind, identity, task, at_ms, payload } = raw;
                    let payload = payload.get();
                    visit(&JournalEntry { run, seq, kind, identity, task, at_ms, payload });
                }
                Ok(())
            }
        }
    }

    /// Returns the entries of `run` from sequence number `from` on, in order.
    pub fn entries_from(&self, run: RunId, from: u64) -> Result<Vec<JournalEntry>> {
        match &self.store {
            Store::Embedded(e) => e.entries_from(run, from),
            Store::Backend(b) => {
                b.raw_entries(run, from)?.into_iter().map(|r| decoded(b.location(), r)).collect()
            }
        }
    }

    /// Returns at most `limit` entries of `run` from sequence number `from` on, in order: a
    /// page of a large run, read without reading the rest of it (on a file; a shared store
    /// reads from `from` on and keeps the page).
    pub fn entries_page(&self, run: RunId, from: u64, limit: usize) -> Result<Vec<JournalEntry>> {
        match &self.store {
            Store::Embedded(e) => e.entries_page(run, from, limit),
            Store::Backend(b) => {
                let mut raw = b.raw_entries(run, from)?;
                raw.truncate(limit);
                raw.into_iter().map(|r| decoded(b.location(), r)).collect()
            }
        }
    }

    /// Returns the entries of `run` whose kind is one of `kinds`, in order. On a file only
    /// those entries are decoded (a reader that needs a run's questions, answers and events
    /// skips the bulk of a long run's calls and views); a shared store decodes the payloads
    /// of those only.
    pub fn entries_of_kinds(&self, run: RunId, kinds: &[EntryKind]) -> Result<Vec<JournalEntry>> {
        match &self.store {
            Store::Embedded(e) => e.entries_of_kinds(run, kinds),
            Store::Backend(b) => b
                .raw_entries(run, 0)?
                .into_iter()
                .filter(|r| kinds.contains(&r.kind))
                .map(|r| decoded(b.location(), r))
                .collect(),
        }
    }

    /// Returns entry `seq` of `run`, if it exists.
    pub fn entry(&self, run: RunId, seq: u64) -> Result<Option<JournalEntry>> {
        match &self.store {
            Store::Embedded(e) => e.entry(run, seq),
            Store::Backend(b) => {
                b.raw_entry(run, seq)?.map(|r| decoded(b.location(), r)).transpose()
            }
        }
    }

    /// Returns the entry of `run` that holds `identity`.
    ///
    /// On the embedded file, an entry found is checked to hold `identity`, and that no
    /// entry holds it is answered from the identity index alone: damage that removed a key
    /// from the index is found by [`Journal::check`], which compares the index with the
    /// entries.
    pub fn entry_by_identity(&self, run: RunId, identity: &str) -> Result<Option<JournalEntry>> {
        match &self.store {
            Store::Embedded(e) => e.entry_by_identity(run, identity),
            Store::Backend(b) => b
                .raw_entry_by_identity(run, identity)?
                .map(|r| decoded(b.location(), r))
                .transpose(),
        }
    }

    /// Returns the task `task`, if it exists.
    pub fn task(&self, task: TaskId) -> Result<Option<TaskRecord>> {
        match &self.store {
            Store::Embedded(e) => e.task(task),
            Store::Backend(b) => b.task(task),
        }
    }

    /// Returns the tasks of `run` in creation order.
    pub fn tasks(&self, run: RunId) -> Result<Vec<TaskRecord>> {
        match &self.store {
            Store::Embedded(e) => e.tasks(run),
            Store::Backend(b) => b.tasks(run),
        }
    }

    /// Returns the tasks of `run` as [`Journal::tasks`] does, each without its result
    /// (`None`): for reports that count and list tasks. The results are skipped rather
    /// than decoded, and a workflow's own task holds every step's result.
    pub fn tasks_without_results(&self, run: RunId) -> Result<Vec<TaskRecord>> {
        match &self.store {
            Store::Embedded(e) => e.tasks_without_results(run),
            Store::Backend(b) => b.tasks_without_results(run),
        }
    }

    /// Returns the ids of the tasks of `run` in creation order, reading only the run's
    /// index of its tasks on a file (no task is decoded).
    pub fn task_ids(&self, run: RunId) -> Result<Vec<TaskId>> {
        match &self.store {
            Store::Embedded(e) => e.task_ids(run),
            Store::Backend(b) => {
                Ok(b.tasks_without_results(run)?.into_iter().map(|t| t.id).collect())
            }
        }
    }

    /// Returns the session `id`, if it exists.
    pub fn session(&self, id: &SessionId) -> Result<Option<SessionRecord>> {
        match &self.store {
            Store::Embedded(e) => e.session(id),
            Store::Backend(b) => b.session(id),
        }
    }

    /// Returns every session in id order.
    pub fn sessions(&self) -> Result<Vec<SessionRecord>> {
        match &self.store {
            Store::Embedded(e) => e.sessions(),
            Store::Backend(b) => b.sessions(),
        }
    }

    /// Writes `run` to `out` as JSON lines ([`ExportLine`]): the run, its tasks, its entries.
    ///
    /// Returns the number of lines written.
    pub fn export(&self, run: RunId, out: &mut dyn Write) -> Result<u64> {
        let rec = self.run(run)?.ok_or(JournalError::RunNotFound { run })?;
        let mut lines = vec![ExportLine::Run(rec)];
        lines.extend(self.tasks(run)?.into_iter().map(ExportLine::Task));
        lines.extend(self.entries(run)?.into_iter().map(ExportLine::Entry));
        let export_err = |source| JournalError::Export { run, source };
        for line in &lines {
            serde_json::to_writer(&mut *out, line).map_err(|e| export_err(io::Error::from(e)))?;
            out.write_all(b"\n").map_err(export_err)?;
        }
        out.flush().map_err(export_err)?;
        Ok(lines.len() as u64)
    }

    /// Claims one runnable run (running or interrupted, with no live lease: its worker
    /// released it or stopped renewing it) for `worker`, for `lease` at a time. The handle
    /// renews the lease while it lives and every later write into the run carries its
    /// epoch. `None` when nothing is runnable; [`JournalError::NoLeases`] on a store
    /// without leases (the embedded file).
    pub fn claim_run(&self, worker: &str, lease: Duration) -> Result<Option<Lease>> {
        match &self.store {
            Store::Embedded(e) => Err(JournalError::NoLeases { location: e.path().to_path_buf() }),
            Store::Backend(b) => b.claim_run(worker, lease),
        }
    }

    /// Claims run `run` for `worker` when it is runnable, as [`Journal::claim_run`] claims
    /// any: `None` when another worker holds it or it has ended or waits on a person.
    pub fn claim_this_run(
        &self,
        run: RunId,
        worker: &str,
        lease: Duration,
    ) -> Result<Option<Lease>> {
        match &self.store {
            Store::Embedded(e) => Err(JournalError::NoLeases { location: e.path().to_path_buf() }),
            Store::Backend(b) => b.claim_this_run(run, worker, lease),
        }
    }

    /// Gives up this handle's lease on `run`, so that another worker may claim it at once;
    /// returns whether the handle held one. A lease the handle lost is forgotten (its
    /// writes into the run are no longer fenced, and it may claim the run again). Nothing
    /// to do on the embedded file.
    pub fn release_run(&self, run: RunId) -> Result<bool> {
        match &self.store {
            Store::Embedded(_) => Ok(false),
            Store::Backend(b) => b.release_run(run),
        }
    }

    /// Returns the lease this handle holds on `run`, if any.
    pub fn lease(&self, run: RunId) -> Option<Lease> {
        match &self.store {
            Store::Embedded(_) => None,
            Store::Backend(b) => b.lease(run),
        }
    }

    /// Stops renewing this handle's lease on `run` without giving it up, as a process that
    /// stalls does (a test of fencing): the lease lapses when its time is up, and this
    /// handle's later writes into the run are refused once another worker claims it.
    pub fn stop_renewing(&self, run: RunId) {
        if let Store::Backend(b) = &self.store {
            b.stop_renewing(run);
        }
    }
}

/// The hot write operations of [`Journal`], each returning a [`Pending`] to await.
///
/// They are the same operations as the blocking methods of the same names (which wait on
/// them); the difference is only in how the caller waits for the commit.
#[derive(Clone, Copy)]
pub struct NonBlocking<'a> {
    journal: &'a Journal,
}

impl NonBlocking<'_> {
    /// As [`Journal::append`].
    pub fn append(self, run: RunId, entry: NewEntry) -> Pending<u64> {
        self.append_batch(run, vec![entry]).map(|seqs| seqs.first().copied().unwrap_or_default())
    }

    /// As [`Journal::append_batch`].
    pub fn append_batch(self, run: RunId, entries: Vec<NewEntry>) -> Pending<Vec<u64>> {
        match &self.journal.store {
            Store::Embedded(e) => e.append_pending(run, entries),
            Store::Backend(b) => b.append(run, entries),
        }
    }

    /// As [`Journal::create_task_with_entries`].
    pub fn create_task_with_entries(
        self,
        run: RunId,
        before: Vec<NewEntry>,
        task: NewTask,
        after: Vec<NewEntry>,
    ) -> Pending<(TaskId, Vec<u64>)> {
        match &self.journal.store {
            Store::Embedded(e) => e.create_task_with_entries_pending(run, before, task, after),
            Store::Backend(b) => b.create_task_with_entries(run, before, task, after),
        }
    }

    /// As [`Journal::record_ended_task`].
    pub fn record_ended_task(
        self,
        run: RunId,
        before: Vec<NewEntry>,
        task: NewTask,
        after: Vec<NewEntry>,
        update: impl FnOnce(TaskId) -> TaskUpdate + Send + 'static,
    ) -> Pending<(TaskRecord, Vec<u64>)> {
        match &self.journal.store {
            Store::Embedded(e) => e.record_ended_task_pending(run, before, task, after, update),
            Store::Backend(b) => b.record_ended_task(run, before, task, after, Box::new(update)),
        }
    }

    /// As [`Journal::update_task`].
    pub fn update_task(self, task: TaskId, update: TaskUpdate) -> Pending<TaskRecord> {
        match &self.journal.store {
            Store::Embedded(e) => e.update_task_pending(task, update),
            Store::Backend(b) => b.update_task(task, update),
        }
    }

    /// As [`Journal::update_run`], without the record back: a run's record holds its
    /// whole input and answer, which the writer need not decode for a status change.
    pub fn update_run(self, run: RunId, update: RunUpdate) -> Pending<()> {
        match &self.journal.store {
            Store::Embedded(e) => e.update_run_pending(run, update),
            Store::Backend(b) => b.update_run(run, update).map(drop),
        }
    }
}
