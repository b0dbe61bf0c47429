//! A journal file opened for reading only, for [`crate::Journal::check`] and
//! [`crate::Journal::salvage`]: neither may write to a file that may be damaged (a writable
//! open recovers, applies the log and upgrades, all of which write), and both must survive
//! the storage engine panicking on it.
//!
//! When the file needs crash recovery, which redb does only in a writable open, the records
//! are read from a private copy of the file that is recovered instead ([`Scratch`]).

use std::fs::{self, OpenOptions};
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use redb::{Builder, Database, DatabaseError, ReadOnlyDatabase, ReadTransaction, ReadableDatabase};

use crate::checksum::Sealing;
use crate::error::{JournalError, Result};
use crate::guard;
use crate::journal::{REDB_MAGIC, check_version};
use crate::store::AtPath;

/// The page cache of a read-only open: enough for a scan, without the writer's appetite.
const CACHE_BYTES: usize = 16 << 20;

/// A journal file open for reading, with one snapshot of it.
pub(crate) struct Source {
    /// The journal file (also when the records come from a copy of it).
    pub(crate) path: PathBuf,
    /// The snapshot every read goes through. Declared before the database, so dropped first.
    pub(crate) txn: ReadTransaction,
    /// The file's format version.
    pub(crate) version: u64,
    /// How its values are stored.
    pub(crate) sealing: Sealing,
    _db: Db,
}

/// Keeps the database of a [`Source`] open as long as its snapshot.
enum Db {
    ReadOnly(ReadOnlyDatabase),
    Copy(Database),
}

/// What opening a file for reading gave.
pub(crate) enum Opening {
    /// Open, with its format version checked.
    Open(Source),
    /// The file was not closed cleanly: only a writable open (or a copy) can recover it.
    NeedsRecovery,
    /// The file does not open: what redb said, or the panic it raised.
    Unreadable(String),
}

/// Checks that `path` exists and starts like a redb file, before redb opens it.
pub(crate) fn preflight(path: &Path) -> Result<()> {
    let io_err = |source| JournalError::Io { path: path.to_path_buf(), source };
    let mut file = fs::File::open(path).map_err(io_err)?;
    let mut magic = [0u8; REDB_MAGIC.len()];
    match file.read_exact(&mut magic) {
        Ok(()) if magic == REDB_MAGIC => Ok(()),
        Ok(()) => Err(JournalError::NotAJournal { path: path.to_path_buf() }),
        Err(err) if err.kind() == io::ErrorKind::UnexpectedEof => {
            Err(JournalError::NotAJournal { path: path.to_path_buf() })
        }
        Err(err) => Err(io_err(err)),
    }
}

/// Opens `path` read-only. A file in use elsewhere, of a newer format or not a journal is an
/// error; damage that keeps it from opening is [`Opening::Unreadable`].
pub(crate) fn open_read_only(path: &Path) -> Result<Opening> {
    let opened = guard::catching(path, "opening it read-only", || {
        Ok(Builder::new().set_cache_size(CACHE_BYTES).open_read_only(path))
    });
    match opened {
        Ok(Ok(db)) => with_snapshot(path, Db::ReadOnly(db)),
        Ok(Err(DatabaseError::RepairAborted)) => Ok(Opening::NeedsRecovery),
        Ok(Err(err)) => Ok(Opening::Unreadable(damage_of(JournalError::from_redb(path, err))?)),
        Err(err) => Ok(Opening::Unreadable(damage_of(err)?)),
    }
}

/// Opens the private copy `scratch` of `path` for writing, which recovers it if a crash
/// left it so; `Ok(Err(why))` when it does not open. Errors name the file.
pub(crate) fn open_copy(path: &Path, scratch: &Scratch) -> Result<Result<Database, String>> {
    let opened = guard::catching(path, "opening a copy of it", || {
        Builder::new().set_cache_size(CACHE_BYTES).open(&scratch.path).at(path)
    });
    match opened {
        Ok(db) => Ok(Ok(db)),
        Err(err) => Ok(Err(damage_of(err)?)),
    }
}

/// Reads the records of `path` from `db`, a private copy of it.
pub(crate) fn from_copy(path: &Path, db: Database) -> Result<Opening> {
    with_snapshot(path, Db::Copy(db))
}

/// Classifies an error of opening: damage (returned as what it says) is something to
/// report, the rest (in use, missing, not a journal, newer) is an error.
fn damage_of(err: JournalError) -> Result<String> {
    match err {
        JournalError::Corrupted { detail, .. } | JournalError::Damaged { detail, .. } => Ok(detail),
        JournalError::Storage { source, .. } => Ok(source.to_string()),
        other => Err(other),
    }
}

fn with_snapshot(path: &Path, db: Db) -> Result<Opening> {
    let res = guard::catching(path, "reading its format version", || {
        let txn = match &db {
            Db::ReadOnly(db) => db.begin_read(),
            Db::Copy(db) => db.begin_read(),
        }
        .at(path)?;
        let version = check_version(&txn, path)?
            .ok_or_else(|| JournalError::NotAJournal { path: path.to_path_buf() })?;
        Ok((txn, version))
    });
    match res {
        Ok((txn, version)) => Ok(Opening::Open(Source {
            path: path.to_path_buf(),
            txn,
            version,
            sealing: Sealing::of_version(version),
            _db: db,
        })),
        Err(err) => Ok(Opening::Unreadable(damage_of(err)?)),
    }
}

/// A private copy of a journal file in the temporary folder, removed when dropped.
pub(crate) struct Scratch {
    pub(crate) path: PathBuf,
}

impl Scratch {
    /// Copies `path` to a new file of the temporary folder.
    pub(crate) fn copy_of(path: &Path) -> io::Result<Scratch> {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let name = format!(
            "clio-journal-copy-{}-{}-{}.redb",
            std::process::id(),
            crate::store::now_ms(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        );
        let scratch = Scratch { path: std::env::temp_dir().join(name) };
        // Created here, so that the copy never lands on a file someone else made.
        std::os::unix::fs::OpenOptionsExt::mode(
            OpenOptions::new().write(true).create_new(true),
            0o600,
        )
        .open(&scratch.path)?;
        fs::copy(path, &scratch.path)?;
        Ok(scratch)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        // A copy left behind only costs space in the temporary folder.
        let _ = fs::remove_file(&self.path);
    }
}
