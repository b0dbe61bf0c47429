//! [`Journal`]: opening a journal file, the write operations (sent to the writer thread) and
//! the read operations (served from redb snapshots on the caller's thread).

use std::collections::HashSet;
use std::fmt;
use std::fs;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::mpsc::{self, Sender};
use std::thread::JoinHandle;

use redb::backends::InMemoryBackend;
use redb::{Builder, Database, ReadableDatabase, ReadableTable, StorageBackend, TableError};

use crate::error::{JournalError, Result};
use crate::format::{
    ExportLine, FORMAT_VERSION, JournalEntry, RawEntry, RunId, RunRecord, SessionId, SessionRecord,
    TaskId, TaskRecord,
};
use crate::input::{
    JournalConfig, NewEntry, NewRun, NewSession, NewTask, Pruned, Reconciled, RunFilter, RunUpdate,
    SessionUpdate, TaskUpdate, encoded,
};
use crate::pending::{self, Pending};
use crate::store::{
    self, AtPath, ENTRIES, IDENTITIES, META, RUN_HEADS, RUN_TASKS, RUNS, SESSIONS, TASKS, Tx,
    decode,
};
use crate::wal::{self, Wal};
use crate::writer::{self, Completion, Op, Request};

/// The first bytes of every redb file; a non-empty file without them is not a journal.
const REDB_MAGIC: [u8; 9] = [b'r', b'e', b'd', b'b', 0x1A, 0x0A, 0xA9, 0x0D, 0x0A];

/// A handle on an open journal.
///
/// Cheap to clone (an `Arc` inside) and `Send + Sync`: async code awaits the writes of
/// [`Journal::nonblocking`] and runs the rest through `spawn_blocking`. Writes go to one writer thread that group-commits them; reads run on the
/// calling thread against a snapshot and never block the writer. The writer stops, after
/// making everything durable, when the last handle is dropped.
#[derive(Clone)]
pub struct Journal {
    inner: Arc<Inner>,
}

struct Inner {
    /// The database reads run on: the writer's, or a read-only one.
    db: Arc<dyn ReadableDatabase + Send + Sync>,
    path: PathBuf,
    // Invariant: `Some` until drop, which takes it to stop the writer.
    sender: Option<Sender<Request>>,
    writer: Option<JoinHandle<()>>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.sender.take();
        if let Some(handle) = self.writer.take() {
            // A panicked writer has already failed its callers; there is nothing left to report.
            let _ = handle.join();
        }
    }
}

impl fmt::Debug for Journal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Journal").field("path", &self.inner.path).finish()
    }
}

impl Journal {
    /// Opens the journal at `path`, creating it (not its folder) if it does not exist.
    ///
    /// A file left by a crash is recovered to its last durable commit. A file written by a
    /// newer format is refused with [`JournalError::UpgradeRequired`] and not modified; a
    /// file that is not a journal gets [`JournalError::NotAJournal`].
    pub fn open(path: impl AsRef<Path>, config: JournalConfig) -> Result<Self> {
        let path = path.as_ref().to_path_buf();
        let io_err = |source| JournalError::Io { path: path.clone(), source };
        let wal = wal::path_for(&path);
        match fs::File::open(&path) {
            Ok(mut file) => {
                let len = file.metadata().map_err(io_err)?.len();
                if len > 0 {
                    let mut magic = [0u8; REDB_MAGIC.len()];
                    let head = file.read_exact(&mut magic);
                    if head.is_err() || magic != REDB_MAGIC {
                        return Err(JournalError::NotAJournal { path });
                    }
                    preflight(&path, &wal)?;
                } else {
                    refuse_orphan_log(&path, &wal, "is empty")?;
                }
            }
            Err(err) if err.kind() == io::ErrorKind::NotFound => {
                refuse_orphan_log(&path, &wal, "is missing")?;
                create_atomically(&path)?;
            }
            Err(err) => return Err(io_err(err)),
        }
        let db = Builder::new().set_cache_size(config.cache_size).create(&path).at(&path)?;
        let wal = (config.write_ahead_log || wal.exists()).then_some(LogSource::Path(wal));
        Self::start(db, path, config, wal)
    }

    /// Opens the journal at `path` for reading only, modifying neither it nor its log: the
    /// way to list and show runs. A journal that a crash left with work to recover (its log
    /// holds records the file lacks, or redb must repair the file) is opened for writing
    /// instead, as [`Journal::open`] does, since reading it means recovering it first; its
    /// records are then unchanged but the files are not. Writes to a journal opened
    /// read-only fail with [`JournalError::ReadOnly`]. A missing file is an `Io` error of kind
    /// `NotFound`: nothing is created.
    pub fn open_read_only(path: impl AsRef<Path>, config: JournalConfig) -> Result<Self> {
        let path = path.as_ref().to_path_buf();
        let io_err = |source| JournalError::Io { path: path.clone(), source };
        let wal = wal::path_for(&path);
        let mut file = match fs::File::open(&path) {
            Ok(file) => file,
            Err(err) if err.kind() == io::ErrorKind::NotFound => {
                refuse_orphan_log(&path, &wal, "is missing")?;
                return Err(io_err(err));
            }
            Err(err) => return Err(io_err(err)),
        };
        let mut magic = [0u8; REDB_MAGIC.len()];
        if file.read_exact(&mut magic).is_err() || magic != REDB_MAGIC {
            let empty = file.metadata().map_err(io_err)?.len() == 0;
            refuse_orphan_log(&path, &wal, if empty { "is empty" } else { "is not a journal" })?;
            return Err(JournalError::NotAJournal { path });
        }
        let db = match Builder::new().set_cache_size(config.cache_size).open_read_only(&path) {
            Ok(db) => db,
            Err(redb::DatabaseError::RepairAborted) => return Self::open(&path, config),
            Err(err) => return Err(JournalError::from_redb(&path, err)),
        };
        let txn = db.begin_read().at(&path)?;
        if check_version(&txn, &path)?.is_none() {
            return Err(JournalError::NotAJournal { path });
        }
        let expected = expected_log(&txn, &path)?;
        drop(txn);
        let pending = match expected {
            Some(expected) => !wal::read(&wal::path_for(&path), &expected)?.is_empty(),
            None => false,
        };
        if pending {
            drop(db);
            return Self::open(&path, config);
        }
        Ok(Self { inner: Arc::new(Inner { db: Arc::new(db), path, sender: None, writer: None }) })
    }

    /// Opens a fresh journal held in memory, for tests of the crates above.
    pub fn open_in_memory() -> Result<Self> {
        Self::open_in_memory_with(JournalConfig::default())
    }

    /// Opens a fresh journal held in memory with `config`.
    pub fn open_in_memory_with(config: JournalConfig) -> Result<Self> {
        Self::open_backend(InMemoryBackend::new(), PathBuf::from(":memory:"), config)
    }

    /// Opens a journal on any redb storage backend; `label` names it in errors.
    pub(crate) fn open_backend(
        backend: impl StorageBackend,
        label: PathBuf,
        config: JournalConfig,
    ) -> Result<Self> {
        let db = Builder::new()
            .set_cache_size(config.cache_size)
            .create_with_backend(backend)
            .at(&label)?;
        Self::start(db, label, config, None)
    }

    /// Opens a journal on a redb storage backend with its write-ahead log in `log`: the
    /// shipped configuration on simulated disks, for the fault tests.
    #[cfg(test)]
    pub(crate) fn open_backend_with_log(
        backend: impl StorageBackend,
        log: Box<dyn wal::LogFile>,
        label: PathBuf,
        config: JournalConfig,
    ) -> Result<Self> {
        let db = Builder::new()
            .set_cache_size(config.cache_size)
            .create_with_backend(backend)
            .at(&label)?;
        Self::start(db, label, config, Some(LogSource::File(log)))
    }

    /// Starts the writer on `db`, after applying the write-ahead log at `wal` (if any) that
    /// a crash left unapplied.
    fn start(
        db: Database,
        path: PathBuf,
        config: JournalConfig,
        wal: Option<LogSource>,
    ) -> Result<Self> {
        check_or_initialise(&db, &path)?;
        let wal = match wal {
            Some(source) => recover(&db, &path, &config, source)?,
            None => None,
        };
        let db = Arc::new(db);
        let (sender, rx) = mpsc::channel();
        let writer = {
            let (db, writer_path) = (Arc::clone(&db), path.clone());
            std::thread::Builder::new()
                .name("clio-journal-writer".into())
                .spawn(move || writer::run(db, writer_path, config, rx, wal))
                .map_err(|source| JournalError::Io { path: path.clone(), source })?
        };
        let db: Arc<dyn ReadableDatabase + Send + Sync> = db;
        Ok(Self { inner: Arc::new(Inner { db, path, sender: Some(sender), writer: Some(writer) }) })
    }

    /// Returns the file this journal lives in (`:memory:` for an in-memory one).
    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// Makes everything written so far durable, then closes this handle.
    ///
    /// Other clones stay usable; the writer stops when the last one goes.
    pub fn close(self) -> Result<()> {
        self.flush()
    }

    fn stopped(&self) -> JournalError {
        JournalError::WriterStopped { path: self.inner.path.clone() }
    }

    fn send(&self, req: Request) -> Result<()> {
        if self.inner.writer.is_none() {
            return Err(JournalError::ReadOnly { path: self.inner.path.clone() });
        }
        let sender = self.inner.sender.as_ref().ok_or_else(|| self.stopped())?;
        sender.send(req).map_err(|_| self.stopped())
    }

    /// Sends `f` to the writer's next batch; the returned [`Pending`] holds its result once
    /// the batch committed.
    fn submit<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Tx<'_>) -> Result<T> + Send + 'static,
    ) -> Pending<T> {
        let (reply, pending) = pending::channel::<T>(self.inner.path.clone());
        let path = self.inner.path.clone();
        let op: Op = Box::new(move |tx| {
            // `None`: the batch was abandoned before this operation ran.
            let res = tx.map(f);
            let fatal = matches!(&res, Some(Err(err)) if is_fatal(err));
            let done: Completion = Box::new(move |commit| {
                reply.send(match (res, commit) {
                    (Some(Err(err)), _) | (_, Err(err)) => Err(err),
                    (Some(Ok(value)), Ok(())) => Ok(value),
                    (None, Ok(())) => Err(JournalError::WriterStopped { path }),
                });
            });
            (fatal, done)
        });
        match self.send(Request::Op(op)) {
            Ok(()) => pending,
            Err(err) => Pending::ready(Err(err)),
        }
    }

    /// Runs `f` in the writer's next batch and returns its result once the batch committed.
    fn write<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Tx<'_>) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        self.submit(f).wait()
    }

    /// Returns the writes that an async caller awaits instead of blocking a thread on.
    pub fn nonblocking(&self) -> NonBlocking<'_> {
        NonBlocking { journal: self }
    }

    /// Makes every earlier write durable (needed only with [`crate::Durability::Eventual`]).
    pub fn flush(&self) -> Result<()> {
        let (reply, answer) = mpsc::sync_channel(1);
        self.send(Request::Flush(reply))?;
        answer.recv().map_err(|_| self.stopped())?
    }

    /// Creates a run, status running, and returns its id.
    pub fn create_run(&self, new: NewRun) -> Result<RunId> {
        self.write(move |tx| tx.create_run(new))
    }

    /// Changes a run and returns the record as it now stands.
    pub fn update_run(&self, run: RunId, update: RunUpdate) -> Result<RunRecord> {
        let update = update.encoded();
        let rec = self.submit(move |tx| tx.update_run(run, update)).wait()?;
        // Decoded here, on the caller's thread, not by the writer.
        let path = &self.inner.path;
        rec.decoded().map_err(|err| JournalError::bad_record(path, "a run record", err))
    }

    /// Appends one entry to `run` and returns its sequence number, once durable.
    ///
    /// Fails with [`JournalError::DuplicateIdentity`] when its identity is already in the run.
    pub fn append(&self, run: RunId, entry: NewEntry) -> Result<u64> {
        self.nonblocking().append(run, entry).wait()
    }

    /// Appends `entries` to `run` atomically (all or none) and returns their sequence numbers.
    pub fn append_batch(&self, run: RunId, entries: Vec<NewEntry>) -> Result<Vec<u64>> {
        self.nonblocking().append_batch(run, entries).wait()
    }

    /// Creates a task and returns its handle.
    pub fn create_task(&self, new: NewTask) -> Result<TaskId> {
        self.write(move |tx| tx.create_task(new))
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
        self.nonblocking().create_task_with_entries(run, before, task, after).wait()
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
        self.nonblocking().record_ended_task(run, before, task, after, update).wait()
    }

    /// Changes a task and returns the record as it now stands.
    ///
    /// A task with a terminal status is refused with [`JournalError::TaskFinished`].
    pub fn update_task(&self, task: TaskId, update: TaskUpdate) -> Result<TaskRecord> {
        self.nonblocking().update_task(task, update).wait()
    }

    /// Creates a subagent session.
    pub fn create_session(&self, new: NewSession) -> Result<SessionRecord> {
        self.write(move |tx| tx.create_session(new))
    }

    /// Changes a session and returns the record as it now stands.
    pub fn update_session(&self, id: &SessionId, update: SessionUpdate) -> Result<SessionRecord> {
        let id = id.clone();
        self.write(move |tx| tx.update_session(&id, update))
    }

    /// Claims one model iteration of the session's durable budget.
    ///
    /// Returns the number of iterations used including this one, or `None` when the budget
    /// is spent or the session has ended.
    pub fn claim_iteration(&self, id: &SessionId) -> Result<Option<u64>> {
        let id = id.clone();
        self.write(move |tx| tx.claim_iteration(&id))
    }

    /// Marks what a gone process left running: tasks and runs become interrupted, sessions
    /// lost, unless their owner (or, for a session, itself or its leader) is in `live`.
    ///
    /// Each record changes once; a second call finds nothing to do.
    pub fn reconcile<S: AsRef<str>>(&self, live: &[S]) -> Result<Reconciled> {
        let live: HashSet<String> = live.iter().map(|s| s.as_ref().to_owned()).collect();
        self.write(move |tx| tx.reconcile(&live))
    }

    /// Removes every finished run (succeeded, failed, cancelled) that finished before
    /// `before_ms` (ms since the Unix epoch), with its entries and tasks.
    pub fn prune(&self, before_ms: u64) -> Result<Pruned> {
        self.write(move |tx| tx.prune(before_ms))
    }

    fn read(&self) -> Result<redb::ReadTransaction> {
        self.inner.db.begin_read().at(&self.inner.path)
    }

    /// Returns the run `run`, if it exists.
    pub fn run(&self, run: RunId) -> Result<Option<RunRecord>> {
        let path = &self.inner.path;
        let table = self.read()?.open_table(RUNS).at(path)?;
        let bytes = table.get(run.0).at(path)?;
        bytes.map(|b| decode(path, "a run record", b.value())).transpose()
    }

    /// Lists the runs that `filter` selects, newest first.
    pub fn runs(&self, filter: &RunFilter) -> Result<Vec<RunRecord>> {
        let path = &self.inner.path;
        let table = self.read()?.open_table(RUNS).at(path)?;
        let mut out = Vec::new();
        for item in table.iter().at(path)?.rev() {
            if filter.limit.is_some_and(|n| out.len() >= n) {
                break;
            }
            let (_, bytes) = item.at(path)?;
            let rec: RunRecord = decode(path, "a run record", bytes.value())?;
            let keep = (filter.statuses.is_empty() || filter.statuses.contains(&rec.status))
                && filter.flow.as_ref().is_none_or(|f| *f == rec.flow)
                && filter.started_after_ms.is_none_or(|t| rec.started_at_ms >= t)
                && filter.started_before_ms.is_none_or(|t| rec.started_at_ms < t);
            if keep {
                out.push(rec);
            }
        }
        Ok(out)
    }

    /// Returns how many entries `run` holds (its next sequence number).
    pub fn entry_count(&self, run: RunId) -> Result<u64> {
        let path = &self.inner.path;
        let table = self.read()?.open_table(RUN_HEADS).at(path)?;
        let head = table.get(run.0).at(path)?.ok_or(JournalError::RunNotFound { run })?;
        Ok(head.value())
    }

    /// Returns the entries of `run` in order.
    pub fn entries(&self, run: RunId) -> Result<Vec<JournalEntry>> {
        self.entries_from(run, 0)
    }

    /// Returns the entries of `run` in order with their payloads undecoded (see
    /// [`RawEntry`]): a replay's load, which decodes each payload only as far as it needs.
    pub fn raw_entries(&self, run: RunId) -> Result<Vec<RawEntry>> {
        self.read_entries(run, 0)
    }

    /// Returns the entries of `run` from sequence number `from` on, in order.
    pub fn entries_from(&self, run: RunId, from: u64) -> Result<Vec<JournalEntry>> {
        self.read_entries(run, from)
    }

    /// Reads the entries of `run` from `from` on, decoded as `T` (an entry, raw or not).
    fn read_entries<T: serde::de::DeserializeOwned>(
        &self,
        run: RunId,
        from: u64,
    ) -> Result<Vec<T>> {
        let path = &self.inner.path;
        let txn = self.read()?;
        let heads = txn.open_table(RUN_HEADS).at(path)?;
        let head = heads.get(run.0).at(path)?.ok_or(JournalError::RunNotFound { run })?.value();
        let table = txn.open_table(ENTRIES).at(path)?;
        let mut out = Vec::with_capacity(head.saturating_sub(from) as usize);
        for item in table.range((run.0, from)..(run.0, head)).at(path)? {
            let (_, bytes) = item.at(path)?;
            out.push(decode(path, "an entry", bytes.value())?);
        }
        Ok(out)
    }

    /// Returns entry `seq` of `run`, if it exists.
    pub fn entry(&self, run: RunId, seq: u64) -> Result<Option<JournalEntry>> {
        let path = &self.inner.path;
        let table = self.read()?.open_table(ENTRIES).at(path)?;
        let bytes = table.get((run.0, seq)).at(path)?;
        bytes.map(|b| decode(path, "an entry", b.value())).transpose()
    }

    /// Returns the entry of `run` that holds `identity`, in O(log n).
    pub fn entry_by_identity(&self, run: RunId, identity: &str) -> Result<Option<JournalEntry>> {
        let path = &self.inner.path;
        let txn = self.read()?;
        let index = txn.open_table(IDENTITIES).at(path)?;
        let Some(seq) = index.get((run.0, identity)).at(path)?.map(|v| v.value()) else {
            return Ok(None);
        };
        let table = txn.open_table(ENTRIES).at(path)?;
        let bytes = table.get((run.0, seq)).at(path)?.ok_or_else(|| JournalError::Corrupted {
            path: path.clone(),
            detail: format!("identity {identity:?} of run {run} points at missing entry {seq}"),
        })?;
        decode(path, "an entry", bytes.value()).map(Some)
    }

    /// Returns the task `task`, if it exists.
    pub fn task(&self, task: TaskId) -> Result<Option<TaskRecord>> {
        let path = &self.inner.path;
        let table = self.read()?.open_table(TASKS).at(path)?;
        let bytes = table.get(task.0).at(path)?;
        bytes.map(|b| decode(path, "a task record", b.value())).transpose()
    }

    /// Returns the tasks of `run` in creation order.
    pub fn tasks(&self, run: RunId) -> Result<Vec<TaskRecord>> {
        let path = &self.inner.path;
        let txn = self.read()?;
        let index = txn.open_table(RUN_TASKS).at(path)?;
        let table = txn.open_table(TASKS).at(path)?;
        let mut out = Vec::new();
        for item in index.range((run.0, 0)..=(run.0, u64::MAX)).at(path)? {
            let (key, _) = item.at(path)?;
            let task = key.value().1;
            let bytes = table.get(task).at(path)?.ok_or_else(|| JournalError::Corrupted {
                path: path.clone(),
                detail: format!("run {run} lists missing task {task}"),
            })?;
            out.push(decode(path, "a task record", bytes.value())?);
        }
        Ok(out)
    }

    /// Returns the session `id`, if it exists.
    pub fn session(&self, id: &SessionId) -> Result<Option<SessionRecord>> {
        let path = &self.inner.path;
        let table = self.read()?.open_table(SESSIONS).at(path)?;
        let bytes = table.get(id.0.as_str()).at(path)?;
        bytes.map(|b| decode(path, "a session record", b.value())).transpose()
    }

    /// Returns every session in id order.
    pub fn sessions(&self) -> Result<Vec<SessionRecord>> {
        let path = &self.inner.path;
        let table = self.read()?.open_table(SESSIONS).at(path)?;
        let mut out = Vec::new();
        for item in table.iter().at(path)? {
            let (_, bytes) = item.at(path)?;
            out.push(decode(path, "a session record", bytes.value())?);
        }
        Ok(out)
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
        let entries = encoded(vec![entry]);
        self.journal
            .submit(move |tx| Ok(tx.append(run, entries)?.first().copied().unwrap_or_default()))
    }

    /// As [`Journal::append_batch`].
    pub fn append_batch(self, run: RunId, entries: Vec<NewEntry>) -> Pending<Vec<u64>> {
        let entries = encoded(entries);
        self.journal.submit(move |tx| tx.append(run, entries))
    }

    /// As [`Journal::create_task_with_entries`].
    pub fn create_task_with_entries(
        self,
        run: RunId,
        before: Vec<NewEntry>,
        task: NewTask,
        after: Vec<NewEntry>,
    ) -> Pending<(TaskId, Vec<u64>)> {
        let (before, after) = (encoded(before), encoded(after));
        self.journal.submit(move |tx| tx.create_task_with_entries(run, before, task, after))
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
        let (before, after) = (encoded(before), encoded(after));
        self.journal.submit(move |tx| tx.record_ended_task(run, before, task, after, update))
    }

    /// As [`Journal::update_task`].
    pub fn update_task(self, task: TaskId, update: TaskUpdate) -> Pending<TaskRecord> {
        self.journal.submit(move |tx| tx.update_task(task, update))
    }

    /// As [`Journal::update_run`], without the record back: a run's record holds its
    /// whole input and answer, which the writer need not decode for a status change.
    pub fn update_run(self, run: RunId, update: RunUpdate) -> Pending<()> {
        let update = update.encoded();
        self.journal.submit(move |tx| tx.update_run(run, update).map(drop))
    }
}

/// Returns whether an error leaves the writer's transaction unusable.
fn is_fatal(err: &JournalError) -> bool {
    matches!(
        err,
        JournalError::Io { .. } | JournalError::Storage { .. } | JournalError::Corrupted { .. }
    )
}

/// Creates and initialises a new journal under a temporary name, then links it into
/// place, so that a crash during creation never leaves a half-written file at `path`.
///
/// Processes started at once in an empty home all get here. Each builds its own file
/// (named by its pid and a random number, so that no creator removes or renames another's)
/// and links it to `path` with a hard link, which fails rather than replace: the first
/// creator wins, and the others drop their file and open the winner's (a clear
/// `AlreadyOpen` if the winner still holds it). A file system without hard links falls back
/// to a rename, which replaces: there two racing first starts may each create a journal,
/// and the later one is kept.
fn create_atomically(path: &Path) -> Result<()> {
    let io_err = |source| JournalError::Io { path: path.to_path_buf(), source };
    let mut name = path.file_name().map(|n| n.to_os_string()).unwrap_or_default();
    name.push(format!(".creating.{}.{:016x}", std::process::id(), random_id()));
    let tmp = path.with_file_name(name);
    let built = (|| {
        {
            let db = Builder::new().create(&tmp).at(path)?;
            check_or_initialise(&db, path)?;
        }
        fs::File::open(&tmp).and_then(|f| f.sync_all()).map_err(io_err)?;
        match fs::hard_link(&tmp, path) {
            // Linked, or another creator linked theirs first: either way `path` is whole.
            Ok(()) => {}
            Err(err) if err.kind() == io::ErrorKind::AlreadyExists => {}
            Err(_) if path.exists() => {}
            // No hard links here (some network or FAT file systems): rename instead.
            Err(_) => return fs::rename(&tmp, path).map_err(io_err),
        }
        fs::remove_file(&tmp).map_err(io_err)
    })();
    if built.is_err() {
        // The file is this creator's own; nobody else names it.
        let _ = fs::remove_file(&tmp);
    }
    built?;
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        fs::File::open(dir).and_then(|d| d.sync_all()).map_err(io_err)?;
    }
    Ok(())
}

/// Checks a file's format version and its log read-only, so that a newer file is never
/// written to and a damaged journal is refused before anything is modified.
///
/// A file that needs crash recovery cannot be opened read-only; it is checked after the
/// writable open has recovered it.
fn preflight(path: &Path, wal_path: &Path) -> Result<()> {
    match Builder::new().open_read_only(path) {
        Ok(db) => {
            let txn = db.begin_read().at(path)?;
            check_version(&txn, path)?;
            if let Some(expected) = expected_log(&txn, path)? {
                wal::read(wal_path, &expected)?;
            }
            Ok(())
        }
        // A file a crash left open: redb repairs it, in memory, to read what it says of
        // its log before anything is written.
        Err(redb::DatabaseError::RepairAborted) => {
            let io_err = |source| JournalError::Io { path: path.to_path_buf(), source };
            let file = fs::File::open(path).map_err(io_err)?;
            let locking =
                fs::OpenOptions::new().read(true).write(true).open(path).map_err(io_err)?;
            let overlay = crate::overlay::Overlay::new(file, locking).map_err(io_err)?;
            let db = Builder::new().create_with_backend(overlay).at(path)?;
            let txn = db.begin_read().at(path)?;
            check_version(&txn, path)?;
            if let Some(expected) = expected_log(&txn, path)? {
                wal::read(wal_path, &expected)?;
            }
            Ok(())
        }
        Err(err) => Err(JournalError::from_redb(path, err)),
    }
}

/// Returns what the file says of its log (`None` for a file with no journal id yet, which
/// has never had one).
fn expected_log(txn: &redb::ReadTransaction, path: &Path) -> Result<Option<wal::Expected>> {
    let meta = match txn.open_table(META) {
        Ok(meta) => meta,
        Err(TableError::TableDoesNotExist(_)) => return Ok(None),
        Err(err) => return Err(JournalError::from_redb(path, err)),
    };
    let get = |key: &str| -> Result<Option<u64>> { Ok(meta.get(key).at(path)?.map(|v| v.value())) };
    let Some(journal_id) = get(store::KEY_JOURNAL_ID)? else { return Ok(None) };
    Ok(Some(wal::Expected {
        journal_id,
        held: get(store::KEY_WAL_LSN)?.unwrap_or(0),
        generation: get(store::KEY_WAL_GEN)?,
        live: get(store::KEY_WAL_LIVE)? == Some(1),
    }))
}

/// Refuses to make a new journal at `path` (which `state`: is missing, is empty, ...) while
/// a log of one lies beside it: that log may hold the only copy of acknowledged writes.
fn refuse_orphan_log(path: &Path, wal_path: &Path, state: &str) -> Result<()> {
    let len = fs::metadata(wal_path).map(|m| m.len()).unwrap_or(0);
    let mut head = [0u8; 4];
    let written = len > 0
        && fs::File::open(wal_path).and_then(|mut f| f.read_exact(&mut head)).is_ok()
        && head != [0u8; 4];
    if written {
        return Err(JournalError::Corrupted {
            path: path.to_path_buf(),
            detail: format!(
                "the journal file {state}, but its write-ahead log {} is there and may hold \
                 the only copy of recorded work; nothing was changed. Restore the journal file \
                 from a copy taken with its log, or move the log away to start a new journal",
                wal_path.display()
            ),
        });
    }
    Ok(())
}

/// Reads the format version: `Ok(None)` for a fresh redb file with no table at all.
fn check_version(txn: &redb::ReadTransaction, path: &Path) -> Result<Option<u64>> {
    match txn.open_table(META) {
        Ok(meta) => match meta.get(store::KEY_FORMAT_VERSION).at(path)? {
            Some(v) if v.value() > FORMAT_VERSION => Err(JournalError::UpgradeRequired {
                path: path.to_path_buf(),
                found: v.value(),
                supported: FORMAT_VERSION,
            }),
            Some(v) => Ok(Some(v.value())),
            None => Err(JournalError::NotAJournal { path: path.to_path_buf() }),
        },
        Err(TableError::TableDoesNotExist(_)) => {
            if txn.list_tables().at(path)?.next().is_some() {
                Err(JournalError::NotAJournal { path: path.to_path_buf() })
            } else {
                Ok(None)
            }
        }
        Err(TableError::TableTypeMismatch { .. }) => {
            Err(JournalError::NotAJournal { path: path.to_path_buf() })
        }
        Err(err) => Err(JournalError::from_redb(path, err)),
    }
}

fn check_or_initialise(db: &Database, path: &Path) -> Result<()> {
    let version = check_version(&db.begin_read().at(path)?, path)?;
    match version {
        None => {
            let txn = db.begin_write().at(path)?;
            store::initialise(&txn, path)?;
            txn.commit().at(path)?;
        }
        Some(older) if older < FORMAT_VERSION => {
            // Format 1 differs only in having no write-ahead log: from now on this file may
            // depend on one, which a reader of format 1 would not apply.
            let txn = db.begin_write().at(path)?;
            txn.open_table(META)
                .at(path)?
                .insert(store::KEY_FORMAT_VERSION, FORMAT_VERSION)
                .at(path)?;
            txn.commit().at(path)?;
        }
        Some(_) => {}
    }
    Ok(())
}

/// Applies the records of the write-ahead log at `wal_path` that the redb file does not
/// hold yet (those a crash kept out), refusing a damaged log before anything is written,
/// and commits them durably with the next log generation, live when the journal keeps a
/// log (`config.write_ahead_log`). Returns that log, ready for the writer.
/// Where a journal's write-ahead log lives.
enum LogSource {
    /// The file at this path (created if missing).
    Path(PathBuf),
    /// A file already open: a simulated disk in the fault tests.
    #[cfg(test)]
    File(Box<dyn wal::LogFile>),
}

fn recover(
    db: &Database,
    path: &Path,
    config: &JournalConfig,
    source: LogSource,
) -> Result<Option<Wal>> {
    let wal_path = match &source {
        LogSource::Path(wal_path) => wal_path.clone(),
        #[cfg(test)]
        LogSource::File(_) => wal::path_for(path),
    };
    let mut txn = db.begin_write().at(path)?;
    let mut tx = Tx::open(&txn, path, store::now_ms())?;
    let held = tx.wal_lsn()?;
    let (journal_id, _) = tx.journal_id_or(random_id())?;
    let (generation, live) = tx.wal_generation()?;
    let expected = wal::Expected { journal_id, held, generation, live };
    let records = match &source {
        LogSource::Path(wal_path) => wal::read(wal_path, &expected)?,
        #[cfg(test)]
        LogSource::File(file) => wal::read_from(file.as_ref(), &wal_path, &expected)?,
    };
    let damaged = |detail: String| JournalError::Corrupted { path: wal_path.clone(), detail };
    if let Some(first) = records.first()
        && Some(first.lsn) != held.checked_add(1)
    {
        return Err(damaged(format!(
            "the log continues from record {} but {} holds records up to {held} only; \
             was one of the two files replaced without the other?",
            first.lsn,
            path.display()
        )));
    }
    let last = records.last().map_or(held, |r| r.lsn);
    for record in &records {
        tx.apply_redo(&record.payload, &wal_path, record.lsn)?;
    }
    let next = last
        .checked_add(1)
        .ok_or_else(|| damaged(format!("record number {last} leaves no room for another")))?;
    let generation = generation.map_or(1, |g| g + 1);
    // The log exists, grown, before the file says it is live: a crash in between must not
    // leave a live log missing or empty, which reads as damage.
    let wal = if config.write_ahead_log {
        let mut wal = match source {
            LogSource::Path(wal_path) => Wal::create(wal_path, journal_id, generation, next)?,
            #[cfg(test)]
            LogSource::File(file) => Wal::with_file(file, wal_path, journal_id, generation, next)?,
        };
        wal.preallocate()?;
        Some(wal)
    } else {
        None
    };
    tx.set_wal_lsn(last)?;
    tx.set_wal_generation(generation, config.write_ahead_log)?;
    drop(tx);
    txn.set_quick_repair(config.quick_repair);
    txn.commit().at(path)?;
    Ok(wal)
}

/// Returns a random id for a new journal (std's per-process random hash keys, mixed with
/// the time: no dependency for one number).
fn random_id() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u64(store::now_ms());
    hasher.write_u32(std::process::id());
    hasher.finish()
}
