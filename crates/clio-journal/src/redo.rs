//! The redo record of one batch: every table write the batch made, in order, as bytes the
//! write-ahead log stores and a recovery applies again.
//!
//! A write is logged physically (the key and the stored bytes), not as the operation that
//! made it, so that replaying a batch reproduces the records exactly, timestamps and ids
//! included, without running any operation twice. `Tx` (in `store`) is the only producer
//! and the only consumer.

use std::path::Path;

use crate::error::{JournalError, Result};

/// One table write, borrowed from the batch that made it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Write<'a> {
    /// `clio_meta[key] = value`.
    Meta { key: &'a str, value: u64 },
    /// `clio_runs[run] = record`.
    Run { run: u64, record: &'a [u8] },
    /// `clio_run_heads[run] = next`.
    RunHead { run: u64, next: u64 },
    /// `clio_entries[(run, seq)] = entry`.
    Entry { run: u64, seq: u64, entry: &'a [u8] },
    /// `clio_identities[(run, identity)] = seq`.
    Identity { run: u64, identity: &'a str, seq: u64 },
    /// `clio_tasks[task] = record`.
    Task { task: u64, record: &'a [u8] },
    /// `clio_run_tasks[(run, task)] = ()`.
    RunTask { run: u64, task: u64 },
    /// `clio_live_tasks[task]` inserted (`live`) or removed.
    LiveTask { task: u64, live: bool },
    /// `clio_sessions[session] = record`.
    Session { session: &'a str, record: &'a [u8] },
    /// `clio_live_sessions[session]` inserted (`live`) or removed.
    LiveSession { session: &'a str, live: bool },
}

const META: u8 = 1;
const RUN: u8 = 2;
const RUN_HEAD: u8 = 3;
const ENTRY: u8 = 4;
const IDENTITY: u8 = 5;
const TASK: u8 = 6;
const RUN_TASK: u8 = 7;
const LIVE_TASK: u8 = 8;
const SESSION: u8 = 9;
const LIVE_SESSION: u8 = 10;

/// The writes of one batch, encoded as they are made.
#[derive(Debug, Default)]
pub(crate) struct RedoLog {
    bytes: Vec<u8>,
    /// Set by a write that is not logged (a prune): the batch must then be committed to the
    /// redb file itself, durably, instead of through the log.
    pub(crate) unlogged: bool,
}

impl RedoLog {
    /// Adds `write` to the record.
    pub(crate) fn push(&mut self, write: Write<'_>) {
        let b = &mut self.bytes;
        match write {
            Write::Meta { key, value } => {
                b.push(META);
                put_bytes(b, key.as_bytes());
                put_u64(b, value);
            }
            Write::Run { run, record } => {
                b.push(RUN);
                put_u64(b, run);
                put_bytes(b, record);
            }
            Write::RunHead { run, next } => {
                b.push(RUN_HEAD);
                put_u64(b, run);
                put_u64(b, next);
            }
            Write::Entry { run, seq, entry } => {
                b.push(ENTRY);
                put_u64(b, run);
                put_u64(b, seq);
                put_bytes(b, entry);
            }
            Write::Identity { run, identity, seq } => {
                b.push(IDENTITY);
                put_u64(b, run);
                put_bytes(b, identity.as_bytes());
                put_u64(b, seq);
            }
            Write::Task { task, record } => {
                b.push(TASK);
                put_u64(b, task);
                put_bytes(b, record);
            }
            Write::RunTask { run, task } => {
                b.push(RUN_TASK);
                put_u64(b, run);
                put_u64(b, task);
            }
            Write::LiveTask { task, live } => {
                b.push(LIVE_TASK);
                put_u64(b, task);
                b.push(u8::from(live));
            }
            Write::Session { session, record } => {
                b.push(SESSION);
                put_bytes(b, session.as_bytes());
                put_bytes(b, record);
            }
            Write::LiveSession { session, live } => {
                b.push(LIVE_SESSION);
                put_bytes(b, session.as_bytes());
                b.push(u8::from(live));
            }
        }
    }

    /// The encoded writes.
    pub(crate) fn bytes(&self) -> &[u8] {
        &self.bytes
    }
}

fn put_u64(b: &mut Vec<u8>, v: u64) {
    b.extend_from_slice(&v.to_le_bytes());
}

fn put_bytes(b: &mut Vec<u8>, bytes: &[u8]) {
    // A record larger than 4 GiB cannot reach here: redb refuses values that large.
    b.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
    b.extend_from_slice(bytes);
}

/// Reads the writes back from `bytes`, in order; `wal` and `lsn` name the log record in
/// errors.
pub(crate) struct Reader<'a> {
    bytes: &'a [u8],
    wal: &'a Path,
    lsn: u64,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(bytes: &'a [u8], wal: &'a Path, lsn: u64) -> Self {
        Self { bytes, wal, lsn }
    }

    fn damaged(&self, what: &str) -> JournalError {
        JournalError::Corrupted {
            path: self.wal.to_path_buf(),
            detail: format!("write-ahead record {}: {what}", self.lsn),
        }
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        if self.bytes.len() < n {
            return Err(self.damaged("ends inside a write"));
        }
        let (head, rest) = self.bytes.split_at(n);
        self.bytes = rest;
        Ok(head)
    }

    fn u8(&mut self) -> Result<u8> {
        Ok(self.take(1)?[0])
    }

    fn u64(&mut self) -> Result<u64> {
        let mut buf = [0u8; 8];
        buf.copy_from_slice(self.take(8)?);
        Ok(u64::from_le_bytes(buf))
    }

    fn bytes(&mut self) -> Result<&'a [u8]> {
        let mut buf = [0u8; 4];
        buf.copy_from_slice(self.take(4)?);
        self.take(u32::from_le_bytes(buf) as usize)
    }

    fn str(&mut self) -> Result<&'a str> {
        let bytes = self.bytes()?;
        std::str::from_utf8(bytes).map_err(|_| self.damaged("a key is not UTF-8"))
    }

    fn flag(&mut self) -> Result<bool> {
        match self.u8()? {
            0 => Ok(false),
            1 => Ok(true),
            other => Err(self.damaged(&format!("flag {other} is neither 0 nor 1"))),
        }
    }

    /// Returns the next write, or `None` at the end of the record.
    pub(crate) fn next_write(&mut self) -> Result<Option<Write<'a>>> {
        if self.bytes.is_empty() {
            return Ok(None);
        }
        let write = match self.u8()? {
            META => Write::Meta { key: self.str()?, value: self.u64()? },
            RUN => Write::Run { run: self.u64()?, record: self.bytes()? },
            RUN_HEAD => Write::RunHead { run: self.u64()?, next: self.u64()? },
            ENTRY => Write::Entry { run: self.u64()?, seq: self.u64()?, entry: self.bytes()? },
            IDENTITY => {
                Write::Identity { run: self.u64()?, identity: self.str()?, seq: self.u64()? }
            }
            TASK => Write::Task { task: self.u64()?, record: self.bytes()? },
            RUN_TASK => Write::RunTask { run: self.u64()?, task: self.u64()? },
            LIVE_TASK => Write::LiveTask { task: self.u64()?, live: self.flag()? },
            SESSION => Write::Session { session: self.str()?, record: self.bytes()? },
            LIVE_SESSION => Write::LiveSession { session: self.str()?, live: self.flag()? },
            other => return Err(self.damaged(&format!("unknown write kind {other}"))),
        };
        Ok(Some(write))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn write_strategy() -> impl Strategy<Value = (u8, u64, u64, String, Vec<u8>, bool)> {
        (
            1u8..=10,
            any::<u64>(),
            any::<u64>(),
            ".{0,12}",
            proptest::collection::vec(any::<u8>(), 0..40),
            any::<bool>(),
        )
    }

    fn build<'a>(kind: u8, a: u64, b: u64, s: &'a str, bytes: &'a [u8], flag: bool) -> Write<'a> {
        match kind {
            1 => Write::Meta { key: s, value: a },
            2 => Write::Run { run: a, record: bytes },
            3 => Write::RunHead { run: a, next: b },
            4 => Write::Entry { run: a, seq: b, entry: bytes },
            5 => Write::Identity { run: a, identity: s, seq: b },
            6 => Write::Task { task: a, record: bytes },
            7 => Write::RunTask { run: a, task: b },
            8 => Write::LiveTask { task: a, live: flag },
            9 => Write::Session { session: s, record: bytes },
            _ => Write::LiveSession { session: s, live: flag },
        }
    }

    proptest! {
        /// Every write reads back as written, in order; a record cut anywhere inside a
        /// write is an error naming the log, never a different write.
        #[test]
        fn writes_read_back_in_order_and_a_cut_record_is_refused(
            writes in proptest::collection::vec(write_strategy(), 0..20),
            cut in any::<prop::sample::Index>(),
        ) {
            let built: Vec<Write<'_>> =
                writes.iter().map(|(k, a, b, s, bytes, f)| build(*k, *a, *b, s, bytes, *f)).collect();
            let mut log = RedoLog::default();
            let mut ends = Vec::new();
            for w in &built {
                log.push(*w);
                ends.push(log.bytes().len());
            }
            let wal = Path::new("j.redb-wal");
            let mut reader = Reader::new(log.bytes(), wal, 7);
            let mut read = Vec::new();
            while let Some(w) = reader.next_write().expect("reads") {
                read.push(w);
            }
            prop_assert_eq!(&read, &built);

            if !log.bytes().is_empty() {
                let at = cut.index(log.bytes().len());
                let mut reader = Reader::new(&log.bytes()[..at], wal, 7);
                let mut n = 0;
                let outcome = loop {
                    match reader.next_write() {
                        Ok(Some(w)) => { prop_assert_eq!(w, built[n]); n += 1; }
                        Ok(None) => break Ok(()),
                        Err(err) => break Err(err),
                    }
                };
                if ends.contains(&at) || at == 0 {
                    prop_assert!(outcome.is_ok());
                } else {
                    let err = outcome.expect_err("a cut write is refused");
                    prop_assert!(err.to_string().contains("j.redb-wal"), "{}", err);
                }
            }
        }
    }
}
