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
    /// run: the write was refused and nothing of it was stored. A write of a subagent
    /// session of the run (its creation, a change, a claimed iteration) is fenced the same
    /// way, and names the session.
    #[error(
        "run {run} was claimed by another worker (lease epoch {current}, this worker held \
         {epoch}); the write{} was refused",
        fenced_session(.session.as_ref())
    )]
    Fenced {
        /// The run.
        run: RunId,
        /// The epoch this handle's lease had.
        epoch: u64,
        /// The run's epoch now.
        current: u64,
        /// The session of the run the refused write was to, if it was a session's.
        session: Option<SessionId>,
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
    #[error(
        "journal {} is already open in another process{}",
        path.display(),
        holder.as_deref().map(|h| format!(": {h}")).unwrap_or_default()
    )]
    AlreadyOpen {
        /// The journal file.
        path: PathBuf,
        /// Who holds it, when this process may see it: each process with the file open, by
        /// pid and command line, and whether it reads or writes it
        /// (`pid 41 (clio run agent.toml), writing`).
        holder: Option<String>,
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
                let holder = holders_of(&path);
                Self::AlreadyOpen { path, holder }
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

/// Returns the other processes that have `path` open, as far as this process may see them
/// (`/proc/<pid>/fd` of its own user's processes, or of all for root): each by pid, command
/// line (its first 100 characters) and whether it opened the file for writing or reading;
/// `None` when none is seen (another user's process, or a system without `/proc`).
pub(crate) fn holders_of(path: &Path) -> Option<String> {
    use std::fs;
    use std::os::unix::fs::MetadataExt;
    // By its device and inode: a journal its creator made under another name and linked
    // into place is open under that name (since removed) in the creator.
    let meta = fs::metadata(path).ok()?;
    let target = (meta.dev(), meta.ino());
    let me = std::process::id();
    let mut found = Vec::new();
    for proc_entry in fs::read_dir("/proc").ok()?.flatten() {
        let Some(pid) = proc_entry.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        if pid == me {
            continue;
        }
        let Ok(fds) = fs::read_dir(proc_entry.path().join("fd")) else { continue };
        let mut writes = None;
        for fd in fds.flatten() {
            if fs::metadata(fd.path()).is_ok_and(|m| (m.dev(), m.ino()) == target) {
                let info =
                    fs::read_to_string(proc_entry.path().join("fdinfo").join(fd.file_name()))
                        .unwrap_or_default();
                // `flags:` is octal; the low two bits are the access mode (1 write, 2 both).
                let mode = info
                    .lines()
                    .find_map(|l| l.strip_prefix("flags:"))
                    .and_then(|f| u32::from_str_radix(f.trim(), 8).ok())
                    .map_or(0, |f| f & 3);
                writes = Some(writes.unwrap_or(false) || mode != 0);
            }
        }
        let Some(writes) = writes else { continue };
        let cmdline = fs::read(proc_entry.path().join("cmdline")).unwrap_or_default();
        let text = String::from_utf8_lossy(&cmdline);
        let mut args = text.split('\0').filter(|a| !a.is_empty());
        // The program by its name, its arguments as given.
        let program = args.next().map(|p| p.rsplit('/').next().unwrap_or(p)).unwrap_or("?");
        let mut command = std::iter::once(program).chain(args).collect::<Vec<_>>().join(" ");
        if command.chars().count() > 100 {
            command = command.chars().take(99).collect::<String>() + "…";
        }
        let doing = if writes { "writing" } else { "reading" };
        found.push(format!("pid {pid} ({command}), {doing}"));
    }
    (!found.is_empty()).then(|| found.join("; "))
}

/// The words naming the session of a fenced write, if it was one's.
fn fenced_session(session: Option<&SessionId>) -> String {
    session.map(|s| format!(" to its session {s}")).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_processes_holding_a_journal_are_named_with_what_they_do() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("journal.redb");
        std::fs::write(&path, b"x").expect("file");
        assert_eq!(holders_of(&path), None, "nobody else has it open");
        let reader = std::fs::File::open(&path).expect("open");
        let mut child =
            std::process::Command::new("sleep").arg("30").stdin(reader).spawn().expect("sleep");
        let named = holders_of(&path);
        let _ = child.kill();
        let _ = child.wait();
        let named = named.expect("the child is named");
        assert_eq!(named, format!("pid {} (sleep 30), reading", child.id()));
        let err = JournalError::AlreadyOpen { path: path.clone(), holder: Some(named) };
        assert!(err.to_string().contains("already open in another process: pid "), "{err}");
    }
}
