//! [`Journal`]: opening a journal file, the write operations (sent to the writer thread) and
//! the read operations (served from redb snapshots on the caller's thread).

use std::collections::HashSet;
use std::fmt;
use std::fs;
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, Sender};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;

use redb::backends::{FileBackend, InMemoryBackend};
use redb::{
    Builder, Database, ReadableDatabase, ReadableTable, ReadableTableMetadata, StorageBackend,
    TableError,
};

use crate::changes::{Changes, Commits};
use crate::checksum::{self, Place, decode};
use crate::error::{JournalError, Result};
use crate::flushes::{CountedBackend, Flushes};
use crate::format::{
    EntryKind, FORMAT_VERSION, JournalEntry, RawEntry, RawRunRecord, RunId, RunRecord, SessionId,
    SessionRecord, TaskId, TaskRecord, TaskWithoutResult,
};
use crate::guard::{self, Held};
use crate::input::{
    JournalConfig, NewEntry, NewRun, NewSession, NewTask, Pruned, Reconciled, RunFilter, RunUpdate,
    SessionUpdate, TaskUpdate, encoded,
};
use crate::pending::{self, Pending};
use crate::store::{
    self, AtPath, ENTRIES, IDENTITIES, META, RUN_HEADS, RUN_TASKS, RUNS, SESSIONS, TASKS, Tx,
};
use crate::upgrade;
use crate::wal::{self, Wal};
use crate::writer::{self, Completion, Op, Request};

/// The first bytes of every redb file; a non-empty file without them is not a journal.
pub(crate) const REDB_MAGIC: [u8; 9] = [b'r', b'e', b'd', b'b', 0x1A, 0x0A, 0xA9, 0x0D, 0x0A];

/// A handle on an open journal.
///
/// Cheap to clone (an `Arc` inside) and `Send + Sync`: async code awaits the writes of
/// [`Journal::nonblocking`] and runs the rest through `spawn_blocking`. Writes go to one writer thread that group-commits them; reads run on the
/// calling thread against a snapshot and never block the writer. The writer stops, after
/// making everything durable, when the last handle is dropped.
#[derive(Clone)]
pub(crate) struct Embedded {
    inner: Arc<Inner>,
}

struct Inner {
    /// The database reads run on: the writer's, or a read-only one.
    // Invariant: `Some` until drop, which closes it catching a panic (see `guard`).
    db: Option<Arc<dyn ReadableDatabase + Send + Sync>>,
    path: PathBuf,
    // Invariant: `Some` until drop, which takes it to stop the writer.
    sender: Option<Sender<Request>>,
    writer: Option<JoinHandle<()>>,
    /// The message of a panic that stopped the writer thread, if one did.
    writer_panic: Arc<Mutex<Option<String>>>,
    /// The writer's commits, which [`Journal::changes`] notices.
    commits: Arc<Commits>,
    /// The flushes of the file and its log since the open.
    flushes: Flushes,
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.sender.take();
        if let Some(handle) = self.writer.take() {
            // A panicked writer has already failed its callers; there is nothing left to report.
            let _ = handle.join();
        }
        // Closing a damaged file can panic inside redb; a destructor has no one to tell.
        if let Some(db) = self.db.take() {
            guard::drop_quietly(db);
        }
    }
}

impl fmt::Debug for Embedded {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Journal").field("path", &self.inner.path).finish()
    }
}

/// How long a writable open waits for readers that hold the journal to let it go.
pub(crate) const READERS_WAIT: std::time::Duration = std::time::Duration::from_secs(3);

/// Says whether `holder` (as [`JournalError::AlreadyOpen`] names it) lists only readers.
fn held_by_readers_only(holder: &str) -> bool {
    holder.split("; ").all(|one| one.ends_with(", reading"))
}

impl Embedded {
    /// Opens the journal at `path`, creating it (not its folder) if it does not exist.
    ///
    /// A file left by a crash is recovered to its last durable commit. A file written by a
    /// newer format is refused with [`JournalError::UpgradeRequired`] and not modified; a
    /// file that is not a journal gets [`JournalError::NotAJournal`]. A file of an older
    /// format is upgraded: every record gets its checksum, in one transaction. A panic of
    /// the storage engine on a damaged file is [`JournalError::Damaged`].
    ///
    /// A journal held only by readers (commands that list or show, which hold it for
    /// moments) is waited for, up to [`READERS_WAIT`]; one a writer holds is refused at once
    /// with [`JournalError::AlreadyOpen`], naming who holds it.
    pub(crate) fn open(path: impl AsRef<Path>, config: JournalConfig) -> Result<Self> {
        let path = path.as_ref();
        let start = std::time::Instant::now();
        let mut pause = std::time::Duration::from_millis(5);
        loop {
            let opened =
                guard::catching(path, "opening it", || Self::open_unguarded(path, config.clone()));
            match &opened {
                Err(JournalError::AlreadyOpen { holder: Some(holder), .. })
                    if held_by_readers_only(holder) && start.elapsed() < READERS_WAIT =>
                {
                    std::thread::sleep(pause);
                    pause = (pause * 2).min(std::time::Duration::from_millis(100));
                }
                _ => return opened,
            }
        }
    }

    /// Opens the journal at `path` as [`Journal::open`] does, without catching panics.
    fn open_unguarded(path: impl AsRef<Path>, config: JournalConfig) -> Result<Self> {
        let path = path.as_ref().to_path_buf();
        let io_err = |source| JournalError::Io { path: path.clone(), source };
        let wal = wal::path_for(&path);
        // Opened for writing from the start: a user who may read the file but not write it
        // (another user's journal) is told so, not that it is open elsewhere when its owner
        // happens to hold it.
        match fs::OpenOptions::new().read(true).write(true).open(&path) {
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
                let flushes = Flushes::default();
                // The journal this process created is kept open, not closed and opened
                // again (a close alone is four flushes of the file).
                if let Some(db) = create_atomically(&path, &config, &flushes)? {
                    flushes.restart();
                    let wal = config.write_ahead_log.then_some(LogSource::Path(wal));
                    return Self::start(db, path, config, wal, flushes);
                }
            }
            Err(err) => return Err(io_err(err)),
        }
        let flushes = Flushes::default();
        let db = open_counted(&path, &path, &config, &flushes)?;
        keep_private(&path);
        keep_private(&wal);
        let wal = (config.write_ahead_log || wal.exists()).then_some(LogSource::Path(wal));
        Self::start(db, path, config, wal, flushes)
    }

    /// Opens the journal at `path` for reading only, modifying neither it nor its log: the
    /// way to list and show runs. A journal that a crash left with work to recover (its log
    /// holds records the file lacks, or redb must repair the file) is recovered in memory,
    /// under a shared lock: readers share the journal with each other in every case, and
    /// exclude only writers. Writes to a journal opened
    /// read-only fail with [`JournalError::ReadOnly`]. A missing file is an `Io` error of kind
    /// `NotFound`: nothing is created.
    pub(crate) fn open_read_only(path: impl AsRef<Path>, config: JournalConfig) -> Result<Self> {
        let path = path.as_ref();
        guard::catching(path, "opening it to read", || Self::open_read_only_unguarded(path, config))
    }

    fn open_read_only_unguarded(path: &Path, config: JournalConfig) -> Result<Self> {
        let path = path.to_path_buf();
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
            // Needs repair; or held, perhaps by readers recovering it in memory (which take
            // a writer's ranges, shared), whom the overlay shares it with: a writer it
            // refuses as well.
            Err(redb::DatabaseError::RepairAborted | redb::DatabaseError::DatabaseAlreadyOpen) => {
                return Self::open_recovered_in_memory(&path, &config);
            }
            Err(err) => return Err(JournalError::from_redb(&path, err)),
        };
        let txn = db.begin_read().at(&path)?;
        if check_version(&txn, &path)?.is_none() {
            return Err(JournalError::NotAJournal { path });
        }
        let expected = expected_log(&txn, &path)?;
        drop(txn);
        // A log that is not live holds nothing the file lacks (a writer makes it live,
        // durably, before it appends a record): a reader need not read it, which for a
        // long run's log is most of the open's cost (issue 44 item 4).
        let pending = match expected {
            Some(expected) if expected.live || expected.generation.is_none() => {
                !wal::read(&wal::path_for(&path), &expected)?.is_empty()
            }
            Some(_) | None => false,
        };
        if pending {
            drop(db);
            return Self::open_recovered_in_memory(&path, &config);
        }
        let db: Arc<dyn ReadableDatabase + Send + Sync> = Arc::new(db);
        let inner = Inner {
            db: Some(db),
            path,
            sender: None,
            writer: None,
            writer_panic: Arc::new(Mutex::new(None)),
            commits: Arc::default(),
            flushes: Flushes::default(),
        };
        Ok(Self { inner: Arc::new(inner) })
    }

    /// Opens for reading only a journal that a crash left with work to recover (redb must
    /// repair the file, or its log holds records the file lacks): the recovery is made in
    /// memory, over the file ([`crate::overlay::Overlay::shared`]), under a shared lock, so
    /// that neither file changes and readers never exclude each other (the first writer to
    /// open it recovers it for good). It reads what a writable open would, after
    /// recovering.
    fn open_recovered_in_memory(path: &Path, config: &JournalConfig) -> Result<Self> {
        let io_err = |source| JournalError::Io { path: path.to_path_buf(), source };
        let wal_path = wal::path_for(path);
        let file = fs::File::open(path).map_err(io_err)?;
        let locking = fs::File::open(path).map_err(io_err)?;
        let overlay = crate::overlay::Overlay::shared(file, locking).map_err(io_err)?;
        let db = Held::new(
            Builder::new()
                .set_cache_size(config.cache_size)
                .create_with_backend(overlay)
                .at(path)?,
        );
        let expected = {
            let txn = db.begin_read().at(path)?;
            if check_version(&txn, path)?.is_none() {
                return Err(JournalError::NotAJournal { path: path.to_path_buf() });
            }
            expected_log(&txn, path)?
        };
        let records = match &expected {
            Some(expected) => wal::read(&wal_path, expected)?,
            None => Vec::new(),
        };
        if let (Some(expected), Some(first)) = (&expected, records.first())
            && Some(first.lsn) != expected.held.checked_add(1)
        {
            return Err(JournalError::Corrupted {
                path: wal_path,
                detail: format!(
                    "the log continues from record {} but {} holds records up to {} only; \
                     was one of the two files replaced without the other?",
                    first.lsn,
                    path.display(),
                    expected.held
                ),
            });
        }
        if let Some(last) = records.last() {
            let txn = Held::new(db.begin_write().at(path)?);
            let mut tx = Tx::open(&txn, path, store::now_ms())?;
            for record in &records {
                tx.apply_redo(&record.payload, &wal_path, record.lsn)?;
            }
            tx.set_wal_lsn(last.lsn)?;
            drop(tx);
            txn.into_inner().commit().at(path)?;
        }
        let db: Arc<dyn ReadableDatabase + Send + Sync> = Arc::new(db.into_inner());
        let inner = Inner {
            db: Some(db),
            path: path.to_path_buf(),
            sender: None,
            writer: None,
            writer_panic: Arc::new(Mutex::new(None)),
            commits: Arc::default(),
            flushes: Flushes::default(),
        };
        Ok(Self { inner: Arc::new(inner) })
    }

    /// Opens a fresh journal held in memory, for tests of the crates above.
    pub(crate) fn open_in_memory() -> Result<Self> {
        Self::open_in_memory_with(JournalConfig::default())
    }

    /// Opens a fresh journal held in memory with `config`.
    pub(crate) fn open_in_memory_with(config: JournalConfig) -> Result<Self> {
        Self::open_backend(InMemoryBackend::new(), PathBuf::from(":memory:"), config)
    }

    /// Opens a journal on any redb storage backend; `label` names it in errors.
    pub(crate) fn open_backend(
        backend: impl StorageBackend,
        label: PathBuf,
        config: JournalConfig,
    ) -> Result<Self> {
        let db = backend_database(backend, &label, &config)?;
        Self::start(db, label, config, None, Flushes::default())
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
        let db = backend_database(backend, &label, &config)?;
        Self::start(db, label, config, Some(LogSource::File(log)), Flushes::default())
    }

    /// Starts the writer on `db`, after applying the write-ahead log at `wal` (if any) that
    /// a crash left unapplied.
    fn start(
        db: Database,
        path: PathBuf,
        config: JournalConfig,
        wal: Option<LogSource>,
        flushes: Flushes,
    ) -> Result<Self> {
        // Leaked, not closed, if the storage engine panics on a damaged file below.
        let db = Held::new(db);
        let version = check_or_initialise(&db, &path)?;
        let wal = match wal {
            Some(source) => recover(&db, &path, &config, source, &flushes)?,
            None => None,
        };
        // After the log: its records were written in the file's format, so they are applied
        // before the records are sealed. A durable commit, before any write goes through
        // the log (which applies sealed values to whatever the file holds).
        if version < FORMAT_VERSION {
            tracing::info!(path = %path.display(), from = version, to = FORMAT_VERSION, "journal format upgraded");
            upgrade::seal_records(&db, &path, version, config.quick_repair)?;
        }
        tracing::debug!(path = %path.display(), format = FORMAT_VERSION, "journal opened");
        let db = Arc::new(db.into_inner());
        let (sender, rx) = mpsc::channel();
        let writer_panic = Arc::new(Mutex::new(None));
        let commits = Arc::new(Commits::default());
        let writer = {
            let (db, writer_path) = (Arc::clone(&db), path.clone());
            let panic_slot = Arc::clone(&writer_panic);
            let counted = Arc::clone(&commits);
            std::thread::Builder::new()
                .name("clio-journal-writer".into())
                .spawn(move || {
                    // A panic of the storage engine in a commit stops the writer; the callers
                    // it dropped, and every later one, are told why (see `stopped`).
                    let run = || writer::run(db, writer_path, config, rx, wal, &counted);
                    if let Err(payload) = guard::quietly(run) {
                        *lock(&panic_slot) = Some(guard::message(payload.as_ref()));
                    }
                })
                .map_err(|source| JournalError::Io { path: path.clone(), source })?
        };
        let db: Arc<dyn ReadableDatabase + Send + Sync> = db;
        let inner = Inner {
            db: Some(db),
            path,
            sender: Some(sender),
            writer: Some(writer),
            writer_panic,
            commits,
            flushes,
        };
        Ok(Self { inner: Arc::new(inner) })
    }

    /// Returns the file this journal lives in (`:memory:` for an in-memory one).
    pub(crate) fn path(&self) -> &Path {
        &self.inner.path
    }

    /// Returns whether this journal lives in memory only.
    pub(crate) fn is_in_memory(&self) -> bool {
        self.inner.path.as_os_str() == ":memory:"
    }

    /// Returns a number that tells this journal's instance from every other one alive.
    pub(crate) fn instance_address(&self) -> usize {
        Arc::as_ptr(&self.inner) as usize
    }

    fn stopped(&self) -> JournalError {
        let path = self.inner.path.clone();
        match lock(&self.inner.writer_panic).as_deref() {
            Some(message) => JournalError::Damaged {
                path,
                detail: format!(
                    "the storage engine failed in the writer ({message}), which has stopped; \
                     a write not acknowledged before then may or may not be in the journal"
                ),
            },
            None => JournalError::WriterStopped { path },
        }
    }

    /// Returns `res`, telling a caller whose write the writer dropped while panicking why it
    /// stopped.
    pub(crate) fn settle<T>(&self, res: Result<T>) -> Result<T> {
        match res {
            Err(JournalError::WriterStopped { .. }) => Err(self.stopped()),
            other => other,
        }
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
            // `None`: the batch was abandoned before this operation ran. A panic of the
            // storage engine leaves the transaction in an unknown state: the batch goes.
            let mut panicked = false;
            let res = tx.map(|tx| {
                guard::quietly(|| f(tx)).unwrap_or_else(|payload| {
                    panicked = true;
                    Err(guard::panicked(&path, "applying a write", payload.as_ref()))
                })
            });
            let fatal = panicked || matches!(&res, Some(Err(err)) if is_fatal(err));
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
        self.settle(self.submit(f).wait())
    }

    /// Returns notices of this journal's commits from now on: a view of a run awaits
    /// [`Changes::changed`] to read the journal again when something was written (by any
    /// handle of this journal) instead of at a fixed interval.
    pub(crate) fn changes(&self) -> Changes {
        Changes::new(Arc::clone(&self.inner.commits))
    }

    /// Returns how many batches the writer has committed since the journal was opened (a
    /// benchmark's count of durable commits: in `immediate` mode each is one flush of the
    /// write-ahead log, a checkpoint a few more).
    pub(crate) fn commits(&self) -> u64 {
        self.inner.commits.count()
    }

    /// Returns how many flushes (`fdatasync` or `fsync`) of its file and its log this
    /// journal has made since it was opened.
    pub(crate) fn flushes(&self) -> u64 {
        self.inner.flushes.count()
    }

    /// Makes every earlier write durable (needed only with [`crate::Durability::Eventual`]).
    pub(crate) fn flush(&self) -> Result<()> {
        self.settle(self.flush_pending(false).wait())
    }

    /// Sends the writer a checkpoint, leaving the log not live when `retire_log`; returns
    /// its outcome to wait on.
    pub(crate) fn flush_pending(&self, retire_log: bool) -> Pending<()> {
        let (reply, answer) = pending::channel(self.inner.path.clone());
        match self.send(Request::Flush { reply, retire_log }) {
            Ok(()) => answer,
            Err(err) => Pending::ready(Err(err)),
        }
    }

    /// Creates a run, status running, and returns its id.
    pub(crate) fn create_run(&self, new: NewRun) -> Result<RunRecord> {
        self.write(move |tx| tx.create_run(new))
    }

    /// Changes a run and returns the record as it now stands.
    pub(crate) fn update_run(&self, run: RunId, update: RunUpdate) -> Result<RunRecord> {
        let update = update.encoded();
        let rec = self.settle(self.submit(move |tx| tx.update_run(run, update)).wait())?;
        // Decoded here, on the caller's thread, not by the writer.
        let path = &self.inner.path;
        rec.decoded().map_err(|err| JournalError::bad_record(path, "a run record", err))
    }

    /// Creates a task and returns its handle.
    pub(crate) fn create_task(&self, new: NewTask) -> Result<TaskId> {
        self.write(move |tx| tx.create_task(new))
    }

    /// Creates a subagent session.
    pub(crate) fn create_session(&self, new: NewSession) -> Result<SessionRecord> {
        self.write(move |tx| tx.create_session(new))
    }

    /// Changes a session and returns the record as it now stands.
    pub(crate) fn update_session(
        &self,
        id: &SessionId,
        update: SessionUpdate,
    ) -> Result<SessionRecord> {
        let id = id.clone();
        self.write(move |tx| tx.update_session(&id, update))
    }

    /// Claims one model iteration of the session's durable budget.
    ///
    /// Returns the number of iterations used including this one, or `None` when the budget
    /// is spent or the session has ended.
    pub(crate) fn claim_iteration(&self, id: &SessionId) -> Result<Option<u64>> {
        let id = id.clone();
        self.write(move |tx| tx.claim_iteration(&id))
    }

    /// Marks what a gone process left running: tasks and runs become interrupted, sessions
    /// lost, unless their owner (or, for a session, itself or its leader) is in `live`.
    ///
    /// Each record changes once; a second call finds nothing to do.
    pub(crate) fn reconcile(&self, live: HashSet<String>) -> Result<Reconciled> {
        self.write(move |tx| tx.reconcile(&live))
    }

    pub(crate) fn prune(&self, before_ms: u64) -> Result<Pruned> {
        self.write(move |tx| tx.prune(before_ms))
    }

    /// Returns a snapshot holding every write answered so far: a batch the writer has
    /// answered and is still committing to redb is waited for (see `Commits::applying`).
    fn read(&self) -> Result<redb::ReadTransaction> {
        let db = self.inner.db.as_ref().ok_or_else(|| self.stopped())?;
        self.inner.commits.wait_applied().map_err(|reason| JournalError::Storage {
            path: self.inner.path.clone(),
            source: reason.into(),
        })?;
        db.begin_read().at(&self.inner.path)
    }

    /// Runs the read `f` on a fresh snapshot; a panic of the storage engine inside it
    /// becomes [`JournalError::Damaged`] saying it happened while `doing` (see `guard`).
    fn reading<T>(
        &self,
        doing: fmt::Arguments<'_>,
        f: impl FnOnce(&Path, redb::ReadTransaction) -> Result<T>,
    ) -> Result<T> {
        let path = &self.inner.path;
        guard::catching(path, doing, || f(path, self.read()?))
    }

    /// As [`crate::Journal::append_batch`], returning the write to await.
    pub(crate) fn append_pending(&self, run: RunId, entries: Vec<NewEntry>) -> Pending<Vec<u64>> {
        let entries = encoded(entries);
        self.submit(move |tx| tx.append(run, entries))
    }

    /// As [`crate::Journal::create_task_with_entries`], returning the write to await.
    pub(crate) fn create_task_with_entries_pending(
        &self,
        run: RunId,
        before: Vec<NewEntry>,
        task: NewTask,
        after: Vec<NewEntry>,
    ) -> Pending<(TaskId, Vec<u64>)> {
        let (before, after) = (encoded(before), encoded(after));
        self.submit(move |tx| tx.create_task_with_entries(run, before, task, after))
    }

    /// As [`crate::Journal::record_ended_task`], returning the write to await.
    pub(crate) fn record_ended_task_pending(
        &self,
        run: RunId,
        before: Vec<NewEntry>,
        task: NewTask,
        after: Vec<NewEntry>,
        update: impl FnOnce(TaskId) -> TaskUpdate + Send + 'static,
    ) -> Pending<(TaskRecord, Vec<u64>)> {
        let (before, after) = (encoded(before), encoded(after));
        self.submit(move |tx| tx.record_ended_task(run, before, task, after, update))
    }

    /// As [`crate::Journal::update_task`], returning the write to await.
    pub(crate) fn update_task_pending(
        &self,
        task: TaskId,
        update: TaskUpdate,
    ) -> Pending<TaskRecord> {
        self.submit(move |tx| tx.update_task(task, update))
    }

    /// As [`crate::Journal::update_run`] without the record back: a run's record holds its
    /// whole input and answer, which the writer need not decode for a status change.
    pub(crate) fn update_run_pending(&self, run: RunId, update: RunUpdate) -> Pending<()> {
        let update = update.encoded();
        self.submit(move |tx| tx.update_run(run, update).map(drop))
    }

    /// Returns the run `run`, if it exists.
    pub(crate) fn run(&self, run: RunId) -> Result<Option<RunRecord>> {
        self.run_as(run)
    }

    /// Returns the run `run` with its input, answer and launch as JSON text, if it exists.
    pub(crate) fn raw_run(&self, run: RunId) -> Result<Option<RawRunRecord>> {
        self.run_as(run)
    }

    /// Returns the run `run`, its input, answer and launch decoded as `P`.
    fn run_as<P: serde::de::DeserializeOwned + Default>(
        &self,
        run: RunId,
    ) -> Result<Option<RunRecord<P>>> {
        self.reading(format_args!("reading run {run}"), |path, txn| {
            let table = txn.open_table(RUNS).at(path)?;
            if let Some(bytes) = table.get(run.0).at(path)? {
                return decode(path, Place::Run(run.0), bytes.value()).map(Some);
            }
            // A run has its record and its head or neither (invariant 2): a head alone is a
            // record lost to damage, not a run that does not exist.
            let heads = txn.open_table(RUN_HEADS).at(path)?;
            match heads.get(run.0).at(path)? {
                Some(_) => Err(JournalError::damaged(
                    path,
                    format!(
                        "clio_runs (run {run}): no record, though clio_run_heads holds the run"
                    ),
                )),
                None => Ok(None),
            }
        })
    }

    /// Lists the runs that `filter` selects, newest first.
    pub(crate) fn runs(&self, filter: &RunFilter) -> Result<Vec<RunRecord>> {
        self.reading(format_args!("listing runs"), |path, txn| {
            let table = txn.open_table(RUNS).at(path)?;
            let mut out = Vec::new();
            let mut read = 0u64;
            for item in table.iter().at(path)?.rev() {
                if filter.limit.is_some_and(|n| out.len() >= n) {
                    return Ok(out);
                }
                let (key, bytes) = item.at(path)?;
                read += 1;
                let rec: RunRecord = decode(path, Place::Run(key.value()), bytes.value())?;
                let keep = (filter.statuses.is_empty() || filter.statuses.contains(&rec.status))
                    && filter.flow.as_ref().is_none_or(|f| *f == rec.flow)
                    && filter.started_after_ms.is_none_or(|t| rec.started_at_ms >= t)
                    && filter.started_before_ms.is_none_or(|t| rec.started_at_ms < t);
                if keep {
                    out.push(rec);
                }
            }
            whole_scan(path, "clio_runs", read, table.len().at(path)?)?;
            Ok(out)
        })
    }

    /// Returns how many entries `run` holds (its next sequence number).
    pub(crate) fn entry_count(&self, run: RunId) -> Result<u64> {
        self.reading(format_args!("counting the entries of run {run}"), |path, txn| {
            let heads = txn.open_table(RUN_HEADS).at(path)?;
            let head = heads.get(run.0).at(path)?.ok_or(JournalError::RunNotFound { run })?.value();
            // Two look-ups confirm the head: its last entry exists and none lies past it.
            let table = txn.open_table(ENTRIES).at(path)?;
            let last_missing = head > 0 && table.get((run.0, head - 1)).at(path)?.is_none();
            if last_missing || table.get((run.0, head)).at(path)?.is_some() {
                return Err(head_mismatch(path, run, head));
            }
            Ok(head)
        })
    }

    /// Returns the entries of `run` in order with their payloads undecoded (see
    /// [`RawEntry`]): a replay's load, which decodes each payload only as far as it needs.
    pub(crate) fn raw_entries(&self, run: RunId) -> Result<Vec<RawEntry>> {
        self.read_entries(run, 0)
    }

    /// Returns the entries of `run` from sequence number `from` on, in order.
    pub(crate) fn entries_from(&self, run: RunId, from: u64) -> Result<Vec<JournalEntry>> {
        self.read_entries(run, from)
    }

    /// Returns at most `limit` entries of `run` from sequence number `from` on, in order,
    /// reading only those (a page of a large run costs the page, not the run).
    pub(crate) fn entries_page(
        &self,
        run: RunId,
        from: u64,
        limit: usize,
    ) -> Result<Vec<JournalEntry>> {
        self.reading(format_args!("reading a page of the entries of run {run}"), |path, txn| {
            let heads = txn.open_table(RUN_HEADS).at(path)?;
            let head = heads.get(run.0).at(path)?.ok_or(JournalError::RunNotFound { run })?.value();
            let end = head.min(from.saturating_add(limit as u64));
            let table = txn.open_table(ENTRIES).at(path)?;
            let mut out = Vec::with_capacity(end.saturating_sub(from).min(1024) as usize);
            let mut next = from;
            if from < end {
                for item in table.range((run.0, from)..(run.0, end)).at(path)? {
                    let (key, bytes) = item.at(path)?;
                    let (_, seq) = key.value();
                    if seq != next {
                        return Err(head_mismatch(path, run, head));
                    }
                    out.push(read_entry(path, run, seq, bytes.value())?);
                    next += 1;
                }
            }
            if next < end {
                return Err(head_mismatch(path, run, head));
            }
            Ok(out)
        })
    }

    /// Calls `visit` with each entry of `run` in order, its payload as the JSON text it was
    /// stored with, borrowed from the read: the text is found after the entry's head (the
    /// payload is the last field serde writes), so it is neither copied nor scanned here,
    /// and a reader that words it scans it once. The record's checksum is verified first,
    /// and an entry whose text is not in that form is decoded whole instead. The sequence
    /// numbers are checked to be dense up to the run's head, as a whole read checks them.
    pub(crate) fn visit_entry_texts(
        &self,
        run: RunId,
        visit: &mut dyn FnMut(&JournalEntry<&str>),
    ) -> Result<()> {
        self.reading(format_args!("reading the entries of run {run}"), |path, txn| {
            each_stored_entry(path, &txn, run, 0, |seq, bytes| {
                let place = Place::Entry { run: run.0, seq };
                let json = checksum::unseal(place, bytes)
                    .map_err(|why| checksum::damage(path, place, why))?;
                let Some((head, payload)) = split_entry_text(json) else {
                    // Not in the form serde writes: decoded whole.
                    let whole: RawEntry = read_entry(path, run, seq, bytes)?;
                    let JournalEntry { run, seq, kind, identity, task, at_ms, payload } = whole;
                    let payload = payload.get();
                    visit(&JournalEntry { run, seq, kind, identity, task, at_ms, payload });
                    return Ok(());
                };
                // The head has no payload: read as a missing (`None`) one.
                let head: JournalEntry<Option<serde::de::IgnoredAny>> =
                    checksum::decode_json(path, place, &head)?;
                if head.run != run || head.seq != seq {
                    let holds = format!("it holds entry {} of run {}", head.seq, head.run);
                    return Err(checksum::damage(path, place, holds));
                }
                let JournalEntry { run, seq, kind, identity, task, at_ms, .. } = head;
                visit(&JournalEntry { run, seq, kind, identity, task, at_ms, payload });
                Ok(())
            })
        })
    }

    /// Returns the entries of `run` whose kind is one of `kinds`, in order, decoding only
    /// those: an entry's kind is read from the head of its stored text, so the others (a
    /// long run's calls and views, whose payloads are the bulk of its bytes) are never
    /// decoded. An entry whose head is not in the form this crate writes is decoded whole
    /// to learn its kind. The run's sequence numbers are still checked to be dense.
    pub(crate) fn entries_of_kinds(
        &self,
        run: RunId,
        kinds: &[EntryKind],
    ) -> Result<Vec<JournalEntry>> {
        self.reading(format_args!("reading the entries of run {run} by kind"), |path, txn| {
            let mut out = Vec::new();
            each_stored_entry(path, &txn, run, 0, |seq, bytes| {
                match peek_kind(bytes) {
                    Some(kind) if !kinds.contains(&kind) => {}
                    _ => {
                        let entry: JournalEntry = read_entry(path, run, seq, bytes)?;
                        if kinds.contains(&entry.kind) {
                            out.push(entry);
                        }
                    }
                }
                Ok(())
            })?;
            Ok(out)
        })
    }

    /// Reads the entries of `run` from `from` on, with payloads decoded as `P`.
    ///
    /// Besides each entry's checksum, the read confirms that the sequence numbers are dense
    /// up to the run's head and that nothing lies past it, so that a damaged head or a lost
    /// key is refused instead of answered with fewer entries.
    fn read_entries<P: serde::de::DeserializeOwned>(
        &self,
        run: RunId,
        from: u64,
    ) -> Result<Vec<JournalEntry<P>>> {
        self.reading(format_args!("reading the entries of run {run}"), |path, txn| {
            // Grown as read: a damaged head must not size an allocation (failing to
            // allocate aborts the process).
            let mut out = Vec::new();
            each_stored_entry(path, &txn, run, from, |seq, bytes| {
                out.push(read_entry(path, run, seq, bytes)?);
                Ok(())
            })?;
            Ok(out)
        })
    }

    /// Returns entry `seq` of `run`, if it exists.
    pub(crate) fn entry(&self, run: RunId, seq: u64) -> Result<Option<JournalEntry>> {
        self.reading(format_args!("reading entry {seq} of run {run}"), |path, txn| {
            let table = txn.open_table(ENTRIES).at(path)?;
            if let Some(bytes) = table.get((run.0, seq)).at(path)? {
                return read_entry(path, run, seq, bytes.value()).map(Some);
            }
            // Below the run's head the entry must exist.
            let heads = txn.open_table(RUN_HEADS).at(path)?;
            match heads.get(run.0).at(path)?.map(|h| h.value()) {
                Some(head) if seq < head => Err(head_mismatch(path, run, head)),
                _ => Ok(None),
            }
        })
    }

    /// Returns the entry of `run` that holds `identity`, in O(log n).
    ///
    /// An entry found is checked to hold `identity`. That no entry holds it is answered from
    /// the identity index alone: damage that removed a key from the index is found by
    /// [`Journal::check`], which compares the index with the entries.
    pub(crate) fn entry_by_identity(
        &self,
        run: RunId,
        identity: &str,
    ) -> Result<Option<JournalEntry>> {
        self.reading(format_args!("looking up identity {identity:?} of run {run}"), |path, txn| {
            let index = txn.open_table(IDENTITIES).at(path)?;
            let Some(seq) = index.get((run.0, identity)).at(path)?.map(|v| v.value()) else {
                return Ok(None);
            };
            let table = txn.open_table(ENTRIES).at(path)?;
            let bytes = table.get((run.0, seq)).at(path)?.ok_or_else(|| {
                JournalError::damaged(
                    path,
                    format!(
                        "clio_identities (run {run}, {identity:?}): points at entry {seq}, \
                         which does not exist"
                    ),
                )
            })?;
            let entry: JournalEntry = read_entry(path, run, seq, bytes.value())?;
            if entry.identity.as_deref() != Some(identity) {
                return Err(JournalError::damaged(
                    path,
                    format!(
                        "clio_identities (run {run}, {identity:?}): points at entry {seq}, \
                         whose identity is {:?}",
                        entry.identity
                    ),
                ));
            }
            Ok(Some(entry))
        })
    }

    /// Returns the task `task`, if it exists.
    pub(crate) fn task(&self, task: TaskId) -> Result<Option<TaskRecord>> {
        self.reading(format_args!("reading task {task}"), |path, txn| {
            let table = txn.open_table(TASKS).at(path)?;
            let bytes = table.get(task.0).at(path)?;
            bytes.map(|b| decode(path, Place::Task(task.0), b.value())).transpose()
        })
    }

    /// Returns the tasks of `run` in creation order.
    pub(crate) fn tasks(&self, run: RunId) -> Result<Vec<TaskRecord>> {
        self.read_tasks::<TaskRecord>(run, |t| t.run)
    }

    /// Returns the tasks of `run` in creation order, each without its result (`None`).
    pub(crate) fn tasks_without_results(&self, run: RunId) -> Result<Vec<TaskRecord>> {
        let heads = self.read_tasks::<TaskWithoutResult>(run, TaskWithoutResult::run)?;
        Ok(heads.into_iter().map(TaskRecord::from).collect())
    }

    /// Returns the ids of the tasks of `run` in creation order, from its index alone.
    pub(crate) fn task_ids(&self, run: RunId) -> Result<Vec<TaskId>> {
        self.reading(format_args!("reading the task ids of run {run}"), |path, txn| {
            let index = txn.open_table(RUN_TASKS).at(path)?;
            let mut out = Vec::new();
            for item in index.range((run.0, 0)..=(run.0, u64::MAX)).at(path)? {
                let (key, _) = item.at(path)?;
                out.push(TaskId(key.value().1));
            }
            Ok(out)
        })
    }

    /// Reads the tasks of `run` through its index, each decoded as a `T`, whose run
    /// (`run_of`) must be `run`.
    fn read_tasks<T: serde::de::DeserializeOwned>(
        &self,
        run: RunId,
        run_of: fn(&T) -> RunId,
    ) -> Result<Vec<T>> {
        self.reading(format_args!("reading the tasks of run {run}"), |path, txn| {
            let index = txn.open_table(RUN_TASKS).at(path)?;
            let table = txn.open_table(TASKS).at(path)?;
            let mut out = Vec::new();
            for item in index.range((run.0, 0)..=(run.0, u64::MAX)).at(path)? {
                let (key, _) = item.at(path)?;
                let task = key.value().1;
                let bytes = table.get(task).at(path)?.ok_or_else(|| {
                    JournalError::damaged(
                        path,
                        format!("clio_run_tasks (run {run}, task {task}): the task does not exist"),
                    )
                })?;
                let rec: T = decode(path, Place::Task(task), bytes.value())?;
                if run_of(&rec) != run {
                    return Err(JournalError::damaged(
                        path,
                        format!(
                            "clio_run_tasks (run {run}, task {task}): the task belongs to run {}",
                            run_of(&rec)
                        ),
                    ));
                }
                out.push(rec);
            }
            Ok(out)
        })
    }

    /// Returns the session `id`, if it exists.
    pub(crate) fn session(&self, id: &SessionId) -> Result<Option<SessionRecord>> {
        self.reading(format_args!("reading session {:?}", id.0), |path, txn| {
            let table = txn.open_table(SESSIONS).at(path)?;
            let bytes = table.get(id.0.as_str()).at(path)?;
            bytes.map(|b| decode(path, Place::Session(&id.0), b.value())).transpose()
        })
    }

    /// Returns every session in id order.
    pub(crate) fn sessions(&self) -> Result<Vec<SessionRecord>> {
        self.reading(format_args!("listing sessions"), |path, txn| {
            let table = txn.open_table(SESSIONS).at(path)?;
            let mut out = Vec::new();
            for item in table.iter().at(path)? {
                let (key, bytes) = item.at(path)?;
                out.push(decode(path, Place::Session(key.value()), bytes.value())?);
            }
            whole_scan(path, "clio_sessions", out.len() as u64, table.len().at(path)?)?;
            Ok(out)
        })
    }
}

/// Returns whether an error leaves the writer's transaction unusable.
fn is_fatal(err: &JournalError) -> bool {
    matches!(
        err,
        JournalError::Io { .. } | JournalError::Storage { .. } | JournalError::Corrupted { .. }
    )
}

/// Opens (or creates) the redb file `file` as redb's own `create` would, on a backend that
/// counts its flushes in `flushes`; errors name `path`, the journal it is or will be.
fn open_counted(
    file: &Path,
    path: &Path,
    config: &JournalConfig,
    flushes: &Flushes,
) -> Result<Database> {
    let io_err = |source| JournalError::Io { path: path.to_path_buf(), source };
    let file = wal::open_read_write(file).map_err(io_err)?;
    let backend = FileBackend::new(file).at(path)?;
    Builder::new()
        .set_cache_size(config.cache_size)
        .create_with_backend(CountedBackend::new(backend, flushes.clone()))
        .at(path)
}

/// Takes the group's and others' access away from `file` (a journal or its log made by an
/// earlier build, which left them readable by all): a journal holds every run's inputs and
/// results, and is its owner's only, as the files this build makes are. Best effort: a file
/// this user does not own keeps its mode (the open goes on; the owner can change it).
fn keep_private(file: &Path) {
    use std::os::unix::fs::PermissionsExt;
    if let Ok(meta) = fs::metadata(file)
        && meta.permissions().mode() & 0o077 != 0
    {
        let mode = meta.permissions().mode() & 0o7700;
        let _ = fs::set_permissions(file, fs::Permissions::from_mode(mode));
    }
}

/// Creates and initialises a new journal under a temporary name, then links it into
/// place, so that a crash during creation never leaves a half-written file at `path`.
/// Returns the new journal's database, still open, when it is the one at `path`, and
/// `None` when another creator's file got there first (the caller opens that one).
///
/// Processes started at once in an empty home all get here. Each builds its own file
/// (named by its pid and a random number, so that no creator removes or renames another's)
/// and links it to `path` with a hard link, which fails rather than replace: the first
/// creator wins, and the others drop their file and open the winner's (a clear
/// `AlreadyOpen` if the winner still holds it). A file system without hard links falls back
/// to a rename, which replaces: there two racing first starts may each create a journal,
/// and the later one is kept.
fn create_atomically(
    path: &Path,
    config: &JournalConfig,
    flushes: &Flushes,
) -> Result<Option<Database>> {
    let io_err = |source| JournalError::Io { path: path.to_path_buf(), source };
    let mut name = path.file_name().map(|n| n.to_os_string()).unwrap_or_default();
    name.push(format!(".creating.{}.{:016x}", std::process::id(), random_id()));
    let tmp = path.with_file_name(name);
    let built = (|| {
        // Its commit is durable: the file is whole before it has a name anyone opens.
        let db = open_counted(&tmp, path, config, flushes)?;
        check_or_initialise(&db, path)?;
        fs::File::open(&tmp).and_then(|f| f.sync_all()).map_err(io_err)?;
        let ours = match fs::hard_link(&tmp, path) {
            Ok(()) => true,
            // Another creator linked theirs first: `path` is whole, and not this one.
            Err(err) if err.kind() == io::ErrorKind::AlreadyExists => false,
            Err(_) if path.exists() => false,
            // No hard links here (some network or FAT file systems): rename instead.
            Err(_) => {
                fs::rename(&tmp, path).map_err(io_err)?;
                return Ok(Some(db));
            }
        };
        fs::remove_file(&tmp).map_err(io_err)?;
        Ok(ours.then_some(db))
    })();
    if built.is_err() {
        // The file is this creator's own; nobody else names it.
        let _ = fs::remove_file(&tmp);
    }
    let db = built?;
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        fs::File::open(dir).and_then(|d| d.sync_all()).map_err(io_err)?;
    }
    Ok(db)
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
pub(crate) fn expected_log(
    txn: &redb::ReadTransaction,
    path: &Path,
) -> Result<Option<wal::Expected>> {
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
pub(crate) fn check_version(txn: &redb::ReadTransaction, path: &Path) -> Result<Option<u64>> {
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

/// Initialises a fresh file; returns the file's format version (the current one for a
/// fresh file). An older file is upgraded later, by `Journal::start`, once its log is applied.
fn check_or_initialise(db: &Database, path: &Path) -> Result<u64> {
    let version = check_version(&db.begin_read().at(path)?, path)?;
    match version {
        None => {
            let txn = db.begin_write().at(path)?;
            store::initialise(&txn, path)?;
            txn.commit().at(path)?;
            Ok(FORMAT_VERSION)
        }
        Some(version) => Ok(version),
    }
}

/// Opens (or creates) the redb database on `backend`, named `label` in errors.
fn backend_database(
    backend: impl StorageBackend,
    label: &Path,
    config: &JournalConfig,
) -> Result<Database> {
    Builder::new().set_cache_size(config.cache_size).create_with_backend(backend).at(label)
}

/// Where a journal's write-ahead log lives.
enum LogSource {
    /// The file at this path (created if missing).
    Path(PathBuf),
    /// A file already open: a simulated disk in the fault tests.
    #[cfg(test)]
    File(Box<dyn wal::LogFile>),
}

/// Applies the records of the write-ahead log at `wal_path` that the redb file does not
/// hold yet (those a crash kept out), refusing a damaged log before anything is written,
/// and commits them durably with the next log generation, live when the journal keeps a
/// log (`config.write_ahead_log`). Returns that log, ready for the writer, and whether the
/// file says it is live. An open with nothing to apply whose file names the log's
/// generation already commits nothing: its log is made live by the writer's first batch.
fn recover(
    db: &Database,
    path: &Path,
    config: &JournalConfig,
    source: LogSource,
    flushes: &Flushes,
) -> Result<Option<(Wal, bool)>> {
    let wal_path = match &source {
        LogSource::Path(wal_path) => wal_path.clone(),
        #[cfg(test)]
        LogSource::File(_) => wal::path_for(path),
    };
    let txn = Held::new(db.begin_write().at(path)?);
    let mut tx = Tx::open(&txn, path, store::now_ms())?;
    let held = tx.wal_lsn()?;
    let (journal_id, new_id) = tx.journal_id_or(random_id())?;
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
    if !records.is_empty() {
        tracing::info!(
            path = %path.display(), records = records.len(),
            "journal recovered: writes a crash left in the log applied"
        );
    }
    for record in &records {
        tx.apply_redo(&record.payload, &wal_path, record.lsn)?;
    }
    let next = last
        .checked_add(1)
        .ok_or_else(|| damaged(format!("record number {last} leaves no room for another")))?;
    // A new generation starts only once something was written in the one the file names:
    // an open killed before its first write leaves the log of the generation before, which
    // the next open reads as such, while starting yet another generation would leave that
    // log two behind, which reads as a log replaced without its journal.
    let written = match &source {
        LogSource::Path(wal_path) => wal::holds_generation_at(wal_path, &expected)?,
        #[cfg(test)]
        LogSource::File(file) => wal::holds_generation(file.as_ref(), &expected)
            .map_err(|source| JournalError::Io { path: wal_path.clone(), source })?,
    };
    let generation = match generation {
        None => 1,
        Some(g) if written => g + 1,
        Some(g) => g,
    };
    // The log exists, grown, before the file says it is live: a crash in between must not
    // leave a live log missing or empty, which reads as damage.
    let wal = if config.write_ahead_log {
        let mut wal = match source {
            LogSource::Path(wal_path) => {
                Wal::create(wal_path, journal_id, generation, next, flushes)?
            }
            #[cfg(test)]
            LogSource::File(file) => {
                Wal::with_file(file, wal_path, journal_id, generation, next, flushes)?
            }
        };
        wal.preallocate()?;
        Some(wal)
    } else {
        None
    };
    // An open with nothing to recover, whose file already names this log's generation,
    // writes nothing: the writer marks the log live in its first batch's commit, before the
    // log holds a record (see `writer`). So opening a journal costs no commit, and a journal
    // only read is never written, which keeps a damaged list of freed pages in a file only
    // read out of redb's commit, where it panics past every catch (see `guard`).
    let changed = new_id
        || !records.is_empty()
        || expected.generation != Some(generation)
        || (expected.live && !config.write_ahead_log);
    if !changed {
        drop(tx);
        txn.into_inner().abort().at(path)?;
        return Ok(wal.map(|wal| (wal, expected.live)));
    }
    tx.set_wal_lsn(last)?;
    tx.set_wal_generation(generation, config.write_ahead_log)?;
    drop(tx);
    let mut txn = txn.into_inner();
    txn.set_quick_repair(config.quick_repair);
    txn.commit().at(path)?;
    Ok(wal.map(|wal| (wal, true)))
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

/// Calls `f` with the sequence number and stored bytes of each entry of `run` from `from`
/// up to the run's head, in order, checking that the sequence numbers are dense and that
/// nothing lies past the head, so that a damaged head or a lost key is refused instead of
/// answered with fewer entries.
fn each_stored_entry(
    path: &Path,
    txn: &redb::ReadTransaction,
    run: RunId,
    from: u64,
    mut f: impl FnMut(u64, &[u8]) -> Result<()>,
) -> Result<()> {
    let heads = txn.open_table(RUN_HEADS).at(path)?;
    let head = heads.get(run.0).at(path)?.ok_or(JournalError::RunNotFound { run })?.value();
    let table = txn.open_table(ENTRIES).at(path)?;
    let mut next = from;
    for item in table.range((run.0, from)..(run.0, head)).at(path)? {
        let (key, bytes) = item.at(path)?;
        let (_, seq) = key.value();
        if seq != next {
            return Err(head_mismatch(path, run, head));
        }
        next += 1;
        f(seq, bytes.value())?;
    }
    if next < head || table.get((run.0, head)).at(path)?.is_some() {
        return Err(head_mismatch(path, run, head));
    }
    Ok(())
}

/// Decodes entry `seq` of `run` from its stored value, checking that it says where it is.
fn read_entry<P: serde::de::DeserializeOwned>(
    path: &Path,
    run: RunId,
    seq: u64,
    bytes: &[u8],
) -> Result<JournalEntry<P>> {
    let place = Place::Entry { run: run.0, seq };
    let entry: JournalEntry<P> = decode(path, place, bytes)?;
    if entry.run != run || entry.seq != seq {
        return Err(checksum::damage(
            path,
            place,
            format!("it holds entry {} of run {}", entry.seq, entry.run),
        ));
    }
    Ok(entry)
}

/// Splits the JSON text of a stored entry into its head (every field but the payload, as
/// a JSON object of its own) and its payload's text: serde writes a [`JournalEntry`]'s
/// `payload` last, and `,"payload":` cannot occur earlier (the head holds no object, and
/// a quote inside a string is escaped). `None` when the text is not in that form.
pub(crate) fn split_entry_text(json: &[u8]) -> Option<(Vec<u8>, &str)> {
    const KEY: &[u8] = b",\"payload\":";
    let at = json.windows(KEY.len()).position(|w| w == KEY)?;
    let body = json.strip_suffix(b"}")?;
    let payload = std::str::from_utf8(body.get(at + KEY.len()..)?).ok()?;
    let mut head = json[..at].to_vec();
    head.push(b'}');
    Some((head, payload))
}

/// Returns the kind of a stored entry from the head of its text, `{"run":N,"seq":N,
/// "kind":"…",`, as serde writes a [`JournalEntry`]; `None` when the text does not start
/// so (the caller then decodes it whole).
pub(crate) fn peek_kind(bytes: &[u8]) -> Option<EntryKind> {
    fn number(rest: &[u8]) -> Option<&[u8]> {
        let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
        (digits > 0).then(|| &rest[digits..])
    }
    let rest = bytes.strip_prefix(b"{\"run\":")?;
    let rest = number(rest)?.strip_prefix(b",\"seq\":")?;
    let rest = number(rest)?.strip_prefix(b",\"kind\":\"")?;
    let len = rest.iter().take_while(|b| b.is_ascii_lowercase() || **b == b'_').count();
    if rest.get(len) != Some(&b'"') {
        return None;
    }
    Some(match &rest[..len] {
        b"call" => EntryKind::Call,
        b"step" => EntryKind::Step,
        b"question" => EntryKind::Question,
        b"answer" => EntryKind::Answer,
        b"event" => EntryKind::Event,
        b"proposal" => EntryKind::Proposal,
        b"decision" => EntryKind::Decision,
        b"view" => EntryKind::View,
        b"permission_receipt" => EntryKind::PermissionReceipt,
        _ => return None,
    })
}

/// The error for a run whose head and entries disagree (invariant 2).
fn head_mismatch(path: &Path, run: RunId, head: u64) -> JournalError {
    JournalError::damaged(
        path,
        format!(
            "clio_run_heads (run {run}): the head says the run has {head} entries, \
             but clio_entries does not hold exactly entries 0 to {head} (excluded)"
        ),
    )
}

/// Checks that a scan of a whole table read as many rows as the table records it has: a
/// damaged page can hide rows from an iteration, which every checksum would miss.
fn whole_scan(path: &Path, table: &str, read: u64, recorded: u64) -> Result<()> {
    if read == recorded {
        return Ok(());
    }
    Err(JournalError::damaged(
        path,
        format!("{table}: a scan read {read} rows, but the table records {recorded}"),
    ))
}

/// Locks `m`, whose holder cannot leave it inconsistent (a slot written once).
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An entry as serde writes it splits into its head and its payload's text, and the
    /// head reads back as the entry without its payload; text in another form does not.
    #[test]
    fn a_stored_entry_splits_into_its_head_and_its_payload() {
        let entry = JournalEntry {
            run: RunId(3),
            seq: 7,
            kind: EntryKind::Call,
            identity: Some("key:a,\"payload\":{}".to_owned()),
            task: None,
            at_ms: 12,
            payload: serde_json::json!({"command": {"target": "noop"}, "result": [1, 2]}),
        };
        let text = serde_json::to_vec(&entry).unwrap();
        let (head, payload) = split_entry_text(&text).expect("the form serde writes");
        assert_eq!(payload, r#"{"command":{"target":"noop"},"result":[1,2]}"#);
        let head: JournalEntry<Option<serde::de::IgnoredAny>> =
            serde_json::from_slice(&head).unwrap();
        assert_eq!((head.run, head.seq, head.identity), (entry.run, entry.seq, entry.identity));
        assert_eq!(split_entry_text(br#"{"payload":1,"run":3}"#), None);
        assert_eq!(split_entry_text(br#"{"run":3,"payload":1"#), None);
    }
}
