//! [`Overlay`]: a redb storage backend that reads a journal file and keeps every write in
//! memory. It lets an open look inside a file that a crash left needing repair — redb
//! repairs it on open — without changing a byte on disk, so that a damaged journal is
//! refused with both of its files exactly as they were.

use std::collections::BTreeMap;
use std::fs::File;
use std::io;
use std::ops::Bound;
use std::os::unix::fs::FileExt;
use std::sync::{Mutex, MutexGuard, PoisonError};

use redb::backends::FileBackend;
use redb::{BackendError, StorageBackend};

/// The page size of the overlay (redb's own is 4 KiB).
const PAGE: u64 = 4096;

/// A file seen through writes kept in memory. Locks go to the file itself (through redb's
/// own file backend), so an overlay cannot open a journal another process holds.
#[derive(Debug)]
pub(crate) struct Overlay {
    file: File,
    locks: FileBackend,
    /// Every lock is taken shared ([`Overlay::shared`]): the overlay writes nothing to the
    /// file, so it need exclude only writers, as a read-only open does.
    shared: bool,
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    /// The length redb sees.
    len: u64,
    /// The file's bytes below this offset show through where no page was written; above
    /// it the storage reads as zeros (redb shortened it at some point).
    visible: u64,
    /// Pages written, by offset.
    pages: BTreeMap<u64, Box<[u8]>>,
}

impl Overlay {
    /// Returns an overlay over `file`, as long as the file; `locking` is the same file
    /// opened for writing (an exclusive lock needs it), which the overlay never writes to.
    pub(crate) fn new(file: File, locking: File) -> io::Result<Overlay> {
        let len = file.metadata()?.len();
        let locks = FileBackend::new(locking).map_err(io::Error::other)?;
        let state = Mutex::new(State { len, visible: len, pages: BTreeMap::new() });
        Ok(Overlay { file, locks, shared: false, state })
    }

    /// Returns an overlay over `file` that takes every lock shared, through `locking` (the
    /// same file, opened for reading): it shares the file with read-only opens and with
    /// other shared overlays, and excludes writers, which exclude it. For a reader that
    /// recovers a journal in memory (a crash left it needing repair or holding records
    /// in its log) without writing to it, so readers never lock each other out.
    pub(crate) fn shared(file: File, locking: File) -> io::Result<Overlay> {
        let mut overlay = Overlay::new(file, locking)?;
        overlay.shared = true;
        Ok(overlay)
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Reads page `page` as redb last saw it into `buf` (one page long).
    fn page(&self, state: &State, page: u64, buf: &mut [u8]) -> io::Result<()> {
        if let Some(written) = state.pages.get(&page) {
            buf.copy_from_slice(written);
            return Ok(());
        }
        buf.fill(0);
        let end = (page + PAGE).min(state.visible);
        if end > page {
            let n = (end - page) as usize;
            self.file.read_exact_at(&mut buf[..n], page)?;
        }
        Ok(())
    }
}

impl StorageBackend for Overlay {
    fn len(&self) -> Result<u64, io::Error> {
        Ok(self.state().len)
    }

    fn read(&self, offset: u64, out: &mut [u8]) -> Result<(), io::Error> {
        let state = self.state();
        if offset + out.len() as u64 > state.len {
            return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "read past the end"));
        }
        let mut buf = vec![0u8; PAGE as usize];
        let mut done = 0usize;
        while done < out.len() {
            let at = offset + done as u64;
            let page = at - at % PAGE;
            self.page(&state, page, &mut buf)?;
            let from = (at - page) as usize;
            let n = (PAGE as usize - from).min(out.len() - done);
            out[done..done + n].copy_from_slice(&buf[from..from + n]);
            done += n;
        }
        Ok(())
    }

    fn set_len(&self, len: u64) -> Result<(), io::Error> {
        let mut state = self.state();
        if len < state.len {
            state.visible = state.visible.min(len);
            let first_gone = len.next_multiple_of(PAGE);
            state.pages.retain(|page, _| *page < first_gone);
            // The part of the last page past the new end reads as zeros if it grows again.
            let last = len - len % PAGE;
            if !len.is_multiple_of(PAGE)
                && let Some(page) = state.pages.get_mut(&last)
            {
                page[(len % PAGE) as usize..].fill(0);
            }
        }
        state.len = len;
        Ok(())
    }

    fn sync_data(&self) -> Result<(), io::Error> {
        Ok(())
    }

    fn close(&self) -> Result<(), io::Error> {
        self.locks.close()
    }

    fn try_lock_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<bool, BackendError> {
        if self.shared {
            return self.locks.try_lock_shared_range(start, end);
        }
        self.locks.try_lock_range(start, end)
    }

    fn try_lock_shared_range(
        &self,
        start: Bound<u64>,
        end: Bound<u64>,
    ) -> Result<bool, BackendError> {
        self.locks.try_lock_shared_range(start, end)
    }

    fn lock_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<(), BackendError> {
        if self.shared {
            return self.locks.lock_shared_range(start, end);
        }
        self.locks.lock_range(start, end)
    }

    fn lock_shared_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<(), BackendError> {
        self.locks.lock_shared_range(start, end)
    }

    fn unlock_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<(), BackendError> {
        self.locks.unlock_range(start, end)
    }

    fn query_lock_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<bool, BackendError> {
        self.locks.query_lock_range(start, end)
    }

    fn write(&self, offset: u64, data: &[u8]) -> Result<(), io::Error> {
        let mut state = self.state();
        let mut done = 0usize;
        while done < data.len() {
            let at = offset + done as u64;
            let page = at - at % PAGE;
            if !state.pages.contains_key(&page) {
                let mut buf = vec![0u8; PAGE as usize].into_boxed_slice();
                self.page(&state, page, &mut buf)?;
                state.pages.insert(page, buf);
            }
            let from = (at - page) as usize;
            let n = (PAGE as usize - from).min(data.len() - done);
            if let Some(buf) = state.pages.get_mut(&page) {
                buf[from..from + n].copy_from_slice(&data[done..done + n]);
            }
            done += n;
        }
        let end = offset + data.len() as u64;
        if end > state.len {
            state.len = end;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn writes_stay_in_memory_and_read_back_over_the_file() {
        let mut file = tempfile::NamedTempFile::new().unwrap();
        let bytes: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8).collect();
        file.write_all(&bytes).unwrap();
        let locking = std::fs::OpenOptions::new().read(true).write(true).open(file.path()).unwrap();
        let overlay = Overlay::new(File::open(file.path()).unwrap(), locking).unwrap();
        overlay.write(4090, &[7; 20]).unwrap();
        let mut out = vec![0u8; 40];
        overlay.read(4080, &mut out).unwrap();
        assert_eq!(&out[..10], &bytes[4080..4090]);
        assert_eq!(&out[10..30], &[7; 20]);
        assert_eq!(&out[30..], &bytes[4110..4120]);
        overlay.set_len(5000).unwrap();
        overlay.set_len(9000).unwrap();
        let mut tail = vec![1u8; 100];
        overlay.read(8000, &mut tail).unwrap();
        assert!(tail.iter().all(|b| *b == 0), "shortened then grown: zeros");
        overlay.write(12_000, &[9]).unwrap();
        assert_eq!(overlay.len().unwrap(), 12_001);
        assert_eq!(std::fs::read(file.path()).unwrap(), bytes, "the file is unchanged");
    }
}
