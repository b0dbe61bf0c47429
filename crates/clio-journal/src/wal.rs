//! The write-ahead log beside a journal file (`<journal>-wal`): what makes a batch durable
//! with one small flush instead of redb's two-phase commit.
//!
//! Each durable batch is written here as one record and flushed; the batch is then
//! committed to redb without a flush. Every so often (a checkpoint) the writer commits to
//! redb durably, with quick repair, and starts the log over from its first byte. Opening a
//! journal applies again the records a crash kept out of redb.
//!
//! A record is `magic, payload length, lsn, crc32(journal id, lsn, payload), payload`: the
//! journal id (random, in `clio_meta`) ties a log to its file, so that a log left by another
//! journal at the same path fails its checksums and is never applied. Log sequence
//! numbers (lsn) grow by one per record for the life of the journal, and the redb file
//! holds the last one it contains (`wal_lsn` in `clio_meta`), committed with it. The log is
//! overwritten in place from the start after each checkpoint, so it reads as: the records
//! of the current cycle, then leftovers of earlier ones. Reading stops at the first record
//! that is torn, fails its checksum or does not follow its predecessor's lsn; leftovers
//! always carry smaller lsns than the current cycle, so they are never taken for new ones.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use crate::error::{JournalError, Result};

/// Marks the start of every record.
const MAGIC: [u8; 4] = *b"CLWR";
/// Magic, payload length (u32), lsn (u64), crc32 (u32).
const HEADER: usize = 4 + 4 + 8 + 4;

/// One record read back from the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Record {
    pub(crate) lsn: u64,
    pub(crate) payload: Vec<u8>,
}

/// How much the log file grows at a time, written as zeros ahead of the records.
const GROW_BY: u64 = 1 << 20;

/// The log of an open journal; only its writer thread touches it.
#[derive(Debug)]
pub(crate) struct Wal {
    file: File,
    path: PathBuf,
    /// Where the next record goes: the bytes written since the last checkpoint.
    offset: u64,
    /// The file's length: written (zeros past the records) and flushed, so that flushing a
    /// record inside it changes no file metadata, which would cost a second write per flush.
    allocated: u64,
    /// The lsn of the next record.
    next_lsn: u64,
    /// The id of the journal the log belongs to, which seeds every checksum.
    journal_id: u64,
    /// Reusable buffer for one record.
    buf: Vec<u8>,
}

/// Returns the log's path for the journal at `journal`.
pub(crate) fn path_for(journal: &Path) -> PathBuf {
    let mut name = journal.as_os_str().to_os_string();
    name.push("-wal");
    PathBuf::from(name)
}

impl Wal {
    /// Opens (or creates) the log at `path` of the journal `journal_id` and returns it with
    /// the records it holds, in order: the contiguous run of valid records from its start.
    pub(crate) fn open(path: PathBuf, journal_id: u64) -> Result<(Self, Vec<Record>)> {
        let io_err = |source| JournalError::Io { path: path.clone(), source };
        let existed = path.exists();
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(io_err)?;
        if !existed {
            // The log's name must survive a crash before any record relies on it.
            sync_parent(&path).map_err(io_err)?;
        }
        let allocated = file.metadata().map_err(io_err)?.len();
        // Read record by record: the file is mostly zeros and leftovers, up to the
        // checkpoint size, which a journal opened for one command need not read.
        let read_at = |at: u64, buf: &mut [u8]| match file.read_exact_at(buf, at) {
            Ok(()) => Ok(true),
            Err(err) if err.kind() == io::ErrorKind::UnexpectedEof => Ok(false),
            Err(err) => Err(err),
        };
        let records = read_records(allocated, read_at, journal_id).map_err(io_err)?;
        let wal =
            Self { file, path, offset: 0, allocated, next_lsn: 1, journal_id, buf: Vec::new() };
        Ok((wal, records))
    }

    /// Returns the log's file.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Sets the lsn the next record gets.
    pub(crate) fn set_next_lsn(&mut self, lsn: u64) {
        self.next_lsn = lsn;
    }

    /// The lsn the next record gets.
    pub(crate) fn next_lsn(&self) -> u64 {
        self.next_lsn
    }

    /// Whether nothing was written to the log since it was opened or last started over.
    pub(crate) fn is_empty(&self) -> bool {
        self.offset == 0
    }

    /// Whether the log has reached `limit` bytes, so that the next batch should checkpoint.
    pub(crate) fn wants_checkpoint(&self, limit: u64) -> bool {
        self.offset >= limit
    }

    /// Writes `payload` as the next record and flushes it to disk; returns its lsn.
    pub(crate) fn append(&mut self, payload: &[u8]) -> Result<u64> {
        let lsn = self.next_lsn;
        self.buf.clear();
        encode_record(&mut self.buf, self.journal_id, lsn, payload);
        let end = self.offset + self.buf.len() as u64;
        if end > self.allocated {
            let len = end.next_multiple_of(GROW_BY);
            self.grow_to(len)
                .map_err(|source| JournalError::Io { path: self.path.clone(), source })?;
        }
        let io_err = |source| JournalError::Io { path: self.path.clone(), source };
        self.file.write_all_at(&self.buf, self.offset).map_err(io_err)?;
        self.file.sync_data().map_err(io_err)?;
        self.offset += self.buf.len() as u64;
        self.next_lsn += 1;
        Ok(lsn)
    }

    /// Gives a new, empty log file its first stretch of zeros now, as the journal opens,
    /// rather than in the first durable commit.
    pub(crate) fn preallocate(&mut self) -> Result<()> {
        if self.allocated == 0 {
            self.grow_to(GROW_BY)
                .map_err(|source| JournalError::Io { path: self.path.clone(), source })?;
        }
        Ok(())
    }

    /// Extends the file to `len` bytes of zeros (which read as the end of the log) and
    /// flushes it with its new length.
    fn grow_to(&mut self, len: u64) -> io::Result<()> {
        let zeros = vec![0u8; 64 << 10];
        let mut at = self.allocated;
        while at < len {
            let n = (len - at).min(zeros.len() as u64) as usize;
            self.file.write_all_at(&zeros[..n], at)?;
            at += n as u64;
        }
        self.file.sync_all()?;
        self.allocated = len;
        Ok(())
    }

    /// Marks the log empty after the last checkpoint of a clean close, so that the next open
    /// reads one header instead of every leftover; the redb file holds every record, so a
    /// crash that loses this write loses nothing.
    pub(crate) fn clear(&mut self) -> io::Result<()> {
        self.restart();
        if self.allocated >= HEADER as u64 {
            self.file.write_all_at(&[0u8; HEADER], 0)?;
        }
        Ok(())
    }

    /// Starts the log over after a checkpoint: the redb file now holds every record.
    pub(crate) fn restart(&mut self) {
        self.offset = 0;
    }
}

/// The largest payload a record holds; the writer checkpoints a larger batch instead.
pub(crate) const MAX_PAYLOAD: usize = u32::MAX as usize;

/// Appends the encoding of one record to `out`; `payload` is at most [`MAX_PAYLOAD`] bytes.
pub(crate) fn encode_record(out: &mut Vec<u8>, journal_id: u64, lsn: u64, payload: &[u8]) {
    out.extend_from_slice(&MAGIC);
    out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    out.extend_from_slice(&lsn.to_le_bytes());
    out.extend_from_slice(&checksum(journal_id, lsn, payload).to_le_bytes());
    out.extend_from_slice(payload);
}

fn checksum(journal_id: u64, lsn: u64, payload: &[u8]) -> u32 {
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(&journal_id.to_le_bytes());
    hasher.update(&lsn.to_le_bytes());
    hasher.update(payload);
    hasher.finalize()
}

/// Returns the contiguous run of valid records of journal `journal_id` at the start of a
/// log of `len` bytes, which `read_at(offset, buf)` reads (`Ok(false)` past its end).
fn read_records(
    len: u64,
    mut read_at: impl FnMut(u64, &mut [u8]) -> io::Result<bool>,
    journal_id: u64,
) -> io::Result<Vec<Record>> {
    let mut records: Vec<Record> = Vec::new();
    let mut at = 0u64;
    let mut header = [0u8; HEADER];
    while read_at(at, &mut header)? && header[..4] == MAGIC {
        let size = u64::from(u32::from_le_bytes([header[4], header[5], header[6], header[7]]));
        let mut lsn = [0u8; 8];
        lsn.copy_from_slice(&header[8..16]);
        let lsn = u64::from_le_bytes(lsn);
        let crc = u32::from_le_bytes([header[16], header[17], header[18], header[19]]);
        let start = at + HEADER as u64;
        // A torn length may claim more than the file holds: nothing to allocate for.
        if size > len.saturating_sub(start) {
            break;
        }
        let mut payload = vec![0u8; size as usize];
        if !read_at(start, &mut payload)? || checksum(journal_id, lsn, &payload) != crc {
            break;
        }
        if records.last().is_some_and(|prev| prev.lsn.checked_add(1) != Some(lsn)) {
            break;
        }
        records.push(Record { lsn, payload });
        at = start + size;
    }
    Ok(records)
}

/// Reads the records of a log held in memory, as [`read_records`] does a file.
#[cfg(test)]
fn read_bytes(bytes: &[u8], journal_id: u64) -> Vec<Record> {
    let read_at = |at: u64, buf: &mut [u8]| {
        let start = at as usize;
        Ok(match bytes.get(start..start + buf.len()) {
            Some(part) => {
                buf.copy_from_slice(part);
                true
            }
            None => false,
        })
    };
    read_records(bytes.len() as u64, read_at, journal_id).unwrap_or_default()
}

fn sync_parent(path: &Path) -> io::Result<()> {
    match path.parent().filter(|d| !d.as_os_str().is_empty()) {
        Some(dir) => File::open(dir)?.sync_all(),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const ID: u64 = 0x5eed;

    proptest! {
        /// The records of another journal's log (another id) are never read.
        #[test]
        fn a_log_of_another_journal_reads_as_empty(
            other in any::<u64>().prop_filter("another id", |id| *id != ID),
            payloads in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..64), 1..6),
        ) {
            let mut bytes = Vec::new();
            for (i, p) in payloads.iter().enumerate() {
                encode_record(&mut bytes, other, i as u64 + 1, p);
            }
            prop_assert_eq!(read_bytes(&bytes, other).len(), payloads.len());
            prop_assert!(read_bytes(&bytes, ID).is_empty());
        }
    }

    proptest! {
        /// A log holding a cycle of records, then leftovers of an earlier cycle, then a torn
        /// or corrupted tail, reads back as exactly the cycle's records once the leftovers
        /// (older than the checkpoint) are set aside.
        #[test]
        fn the_current_cycle_reads_back_and_nothing_after_it(
            first_lsn in 10u64..1_000,
            payloads in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..64), 0..12),
            leftovers in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..64), 0..6),
            tail in proptest::collection::vec(any::<u8>(), 0..40),
            flip in any::<Option<prop::sample::Index>>(),
        ) {
            let mut bytes = Vec::new();
            for (i, p) in payloads.iter().enumerate() {
                encode_record(&mut bytes, ID, first_lsn + i as u64, p);
            }
            let cycle_len = bytes.len();
            // Leftovers of an earlier cycle: smaller lsns.
            for (i, p) in leftovers.iter().enumerate() {
                encode_record(&mut bytes, ID, i as u64 + 1, p);
            }
            bytes.extend_from_slice(&tail);
            // What recovery takes: records newer than the checkpoint (`first_lsn - 1`).
            let fresh = |bytes: &[u8]| -> Vec<Record> {
                read_bytes(bytes, ID).into_iter().filter(|r| r.lsn >= first_lsn).collect()
            };
            let read = fresh(&bytes);
            let expected: Vec<Record> = payloads
                .iter()
                .enumerate()
                .map(|(i, p)| Record { lsn: first_lsn + i as u64, payload: p.clone() })
                .collect();
            prop_assert_eq!(&read, &expected);

            // A flipped byte inside the cycle ends the log at the record it hits.
            if let Some(flip) = flip.filter(|_| cycle_len > 0) {
                let at = flip.index(cycle_len);
                bytes[at] ^= 0x5a;
                let read = fresh(&bytes);
                prop_assert!(read.len() < expected.len().max(1));
                prop_assert_eq!(&read[..], &expected[..read.len()]);
            }

            // A record cut short is not read.
            let mut cut = Vec::new();
            for (i, p) in payloads.iter().enumerate() {
                encode_record(&mut cut, ID, first_lsn + i as u64, p);
            }
            if !cut.is_empty() {
                cut.pop();
                prop_assert_eq!(fresh(&cut).len(), expected.len() - 1);
            }
        }
    }
}
