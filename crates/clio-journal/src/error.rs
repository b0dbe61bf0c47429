//! The one error type of the journal, [`JournalError`], and the mapping of redb's errors onto
//! it, done here so that no redb type crosses the crate's boundary.

use std::error::Error as StdError;
use std::io;
use std::path::{Path, PathBuf};

use crate::format::{RunId, SessionId, TaskId, TaskStatus};

/// The result type of the journal.
pub type Result<T, E = JournalError> = std::result::Result<T, E>;

/// Everything that can go wrong with a journal. File-level variants name the file.
#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    /// The journal is a store with no leases (the embedded file, which one process locks):
    /// workers cannot claim its runs.
    #[error(
        "journal {location} has no leases: workers share a journal only on PostgreSQL \
         (journal = \"postgres://...\")"
    )]
    NoLeases {
        /// The journal.
        location: PathBuf,
    },
    /// A write into a run this handle held a lease on, after another worker claimed the
    /// run: the write was refused and nothing of it was stored.
    #[error(
        "run {run} was claimed by another worker (lease epoch {current}, this worker held \
         {epoch}); the write was refused"
    )]
    Fenced {
        /// The run.
        run: RunId,
        /// The epoch this handle's lease had.
        epoch: u64,
        /// The run's epoch now.
        current: u64,
    },
    /// The store behind the journal (a database server) failed or refused an operation.
    #[error("journal {location}: {detail}")]
    Backend {
        /// The journal.
        location: PathBuf,
        /// What failed, as the store said it.
        detail: String,
    },
    /// The file was written by a newer journal format; it was not modified.
    #[error(
        "journal {path} has format version {found}, this build supports up to {supported}: upgrade clio"
    )]
    UpgradeRequired {
        /// The journal file.
        path: PathBuf,
        /// The version recorded in the file.
        found: u64,
        /// The newest version this build reads.
        supported: u64,
    },
    /// The file exists but is not a journal (not a redb file, or a redb file of something else).
    #[error("{path} is not a clio journal")]
    NotAJournal {
        /// The file.
        path: PathBuf,
    },
    /// The file is damaged beyond what crash recovery repairs.
    #[error("journal {path} is corrupted: {detail}")]
    Corrupted {
        /// The journal file.
        path: PathBuf,
        /// What was found wrong.
        detail: String,
    },
    /// The journal was opened read-only ([`crate::Journal::open_read_only`]) and cannot
    /// be written through this handle.
    #[error("journal {path} was opened read-only")]
    ReadOnly {
        /// The journal file.
        path: PathBuf,
    },
    /// A stored record fails its checksum or contradicts the rest of the journal, or the
    /// storage engine failed on the file: the journal refuses to answer rather than answer
    /// wrongly. `detail` names the table and key (or the operation) and what was expected.
    #[error(
        "journal {path} is damaged: {detail}. Nothing was changed; `clio journal check` lists \
         the damage, `clio journal salvage OUT` copies the runs that still read whole into a new \
         journal at OUT, or restore a copy of the journal"
    )]
    Damaged {
        /// The journal file.
        path: PathBuf,
        /// Where the damage is (table and key) and what was found instead of what.
        detail: String,
    },
    /// [`crate::Journal::salvage`] was given a destination that already exists.
    #[error("{path} already exists: a salvage writes a new journal and never overwrites a file")]
    DestinationExists {
        /// The destination given.
        path: PathBuf,
    },
    /// Another process has the journal open.
    #[error("journal {path} is already open in another process")]
    AlreadyOpen {
        /// The journal file.
        path: PathBuf,
    },
    /// Reading or writing the file failed (a missing folder, a full disk, a failing device).
    #[error("journal {path}: i/o error")]
    Io {
        /// The journal file.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// The storage engine failed for another reason.
    #[error("journal {path}: storage error")]
    Storage {
        /// The journal file.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: Box<dyn StdError + Send + Sync>,
    },
    /// The writer thread has stopped (it panicked or the journal is closing).
    #[error("journal {path}: the writer has stopped")]
    WriterStopped {
        /// The journal file.
        path: PathBuf,
    },
    /// No run has this id.
    #[error("run {run} not found")]
    RunNotFound {
        /// The id asked for.
        run: RunId,
    },
    /// No task has this id.
    #[error("task {task} not found")]
    TaskNotFound {
        /// The id asked for.
        task: TaskId,
    },
    /// No session has this id.
    #[error("session {session} not found")]
    SessionNotFound {
        /// The id asked for.
        session: SessionId,
    },
    /// A session with this id already exists.
    #[error("session {session} already exists")]
    SessionExists {
        /// The id given.
        session: SessionId,
    },
    /// An entry with this identity is already in the run.
    #[error("run {run} already has an entry with identity {identity:?} (seq {seq})")]
    DuplicateIdentity {
        /// The run.
        run: RunId,
        /// The identity given.
        identity: String,
        /// The entry that holds it.
        seq: u64,
    },
    /// The task has a final status and cannot change any more.
    #[error("task {task} is already {status:?} and cannot change")]
    TaskFinished {
        /// The task.
        task: TaskId,
        /// Its final status.
        status: TaskStatus,
    },
    /// Writing an export failed.
    #[error("cannot write the export of run {run}")]
    Export {
        /// The run exported.
        run: RunId,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
}

impl JournalError {
    /// Maps a redb error onto the journal's error, naming `path`.
    pub(crate) fn from_redb(path: &Path, err: impl Into<redb::Error>) -> Self {
        let path = path.to_path_buf();
        match err.into() {
            redb::Error::DatabaseAlreadyOpen | redb::Error::LockProtocolMismatch => {
                Self::AlreadyOpen { path }
            }
            redb::Error::Corrupted(detail) => Self::Corrupted { path, detail },
            // The file ends where redb expects its header or a page: it was cut short, which
            // is damage to the file, not a failing machine.
            redb::Error::Io(source) if source.kind() == std::io::ErrorKind::UnexpectedEof => {
                Self::Corrupted {
                    path,
                    detail: format!(
                        "the file ends before the storage engine's header or a page it names \
                         ({source}): it was cut short"
                    ),
                }
            }
            redb::Error::Io(source) => Self::Io { path, source },
            redb::Error::UpgradeRequired(found) => Self::Corrupted {
                path,
                detail: format!("the storage engine's file format {found} is not supported"),
            },
            other => Self::Storage { path, source: Box::new(other) },
        }
    }

    /// Builds the damage error for `path`.
    pub(crate) fn damaged(path: &Path, detail: impl Into<String>) -> Self {
        Self::Damaged { path: path.to_path_buf(), detail: detail.into() }
    }

    /// Builds the error for a stored record that does not decode.
    pub(crate) fn bad_record(path: &Path, what: &str, err: serde_json::Error) -> Self {
        Self::Corrupted {
            path: path.to_path_buf(),
            detail: format!("{what} does not decode: {err}"),
        }
    }
}
