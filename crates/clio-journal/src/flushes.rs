//! [`Flushes`]: the count of the flushes (`fdatasync`, or `fsync` where the length
//! changes) that an open journal makes of its redb file and its write-ahead log once it is
//! open (creating a new file, and the open's own flushes before the count exists, are not
//! counted; a bench takes its count after the open), so that a
//! benchmark can report the disk's real work per step or per run rather than infer it
//! from the writer's commits: a checkpoint is one commit and several flushes, and redb
//! flushes its file whenever a commit grows it.
//!
//! The count is kept by two thin wrappers that pass every call through unchanged: one
//! around redb's file backend (here), one around the log's file (`wal::CountedLog`).

use std::fmt;
use std::io;
use std::ops::Bound;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use redb::backends::FileBackend;
use redb::{BackendError, StorageBackend};

/// A shared count of flushes; cheap to clone.
#[derive(Debug, Clone, Default)]
pub(crate) struct Flushes(Arc<AtomicU64>);

impl Flushes {
    pub(crate) fn note(&self) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }

    /// Starts the count over: the flushes of creating a new file are not counted.
    pub(crate) fn restart(&self) {
        self.0.store(0, Ordering::Relaxed);
    }

    /// Returns the flushes counted so far.
    pub(crate) fn count(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// redb's file backend, counting its `sync_data` calls.
pub(crate) struct CountedBackend {
    inner: FileBackend,
    flushes: Flushes,
}

impl CountedBackend {
    /// Wraps `inner`, noting each of its flushes in `flushes`.
    pub(crate) fn new(inner: FileBackend, flushes: Flushes) -> CountedBackend {
        CountedBackend { inner, flushes }
    }
}

impl fmt::Debug for CountedBackend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CountedBackend").field("inner", &self.inner).finish()
    }
}

impl StorageBackend for CountedBackend {
    fn len(&self) -> Result<u64, io::Error> {
        self.inner.len()
    }

    fn read(&self, offset: u64, out: &mut [u8]) -> Result<(), io::Error> {
        self.inner.read(offset, out)
    }

    fn set_len(&self, len: u64) -> Result<(), io::Error> {
        self.inner.set_len(len)
    }

    fn sync_data(&self) -> Result<(), io::Error> {
        self.flushes.note();
        self.inner.sync_data()
    }

    fn write(&self, offset: u64, data: &[u8]) -> Result<(), io::Error> {
        self.inner.write(offset, data)
    }

    fn close(&self) -> Result<(), io::Error> {
        self.inner.close()
    }

    fn try_lock_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<bool, BackendError> {
        self.inner.try_lock_range(start, end)
    }

    fn try_lock_shared_range(
        &self,
        start: Bound<u64>,
        end: Bound<u64>,
    ) -> Result<bool, BackendError> {
        self.inner.try_lock_shared_range(start, end)
    }

    fn lock_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<(), BackendError> {
        self.inner.lock_range(start, end)
    }

    fn lock_shared_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<(), BackendError> {
        self.inner.lock_shared_range(start, end)
    }

    fn unlock_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<(), BackendError> {
        self.inner.unlock_range(start, end)
    }

    fn query_lock_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<bool, BackendError> {
        self.inner.query_lock_range(start, end)
    }
}
