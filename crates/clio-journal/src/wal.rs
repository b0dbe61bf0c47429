//! The write-ahead log beside a journal file (`<journal>-wal`): what makes a batch durable
//! with one small flush instead of redb's two-phase commit.
//!
//! Each durable batch is written here as one record and flushed; the batch is then
//! committed to redb without a flush. Every so often (a checkpoint) the writer commits to
//! redb durably and starts a new *generation* of the log, overwriting it from its first
//! byte. Opening a journal applies again the records a crash kept out of redb.
//!
//! A log knows its own end. It starts with a header `CLWP, journal id, generation, first
//! lsn, crc32` naming the journal and generation it belongs to; then records `CLW3, payload
//! length, lsn, crc, chain, payload`, where `crc` covers the journal id, the generation, the
//! lsn and the payload (so a record can be recognised on its own), and `chain` covers the
//! previous record's chain (the header's crc for the first), so a record is whole only if
//! every record before it is. The redb file holds the last lsn it contains (`wal_lsn`), the
//! generation of the log that may hold records after it (`wal_gen`) and whether that log is
//! live (`wal_live`: it may hold acknowledged records the file lacks), all committed
//! durably at each checkpoint and at open.
//!
//! The log is *paged*: each batch (its record, after the header for a generation's first)
//! starts on a [`PAGE`] boundary and is written twice, the second copy on the pages after
//! the first, in one write and one flush. A write torn by a crash reaches only the pages of
//! the batch being written, so damage to any earlier batch is never taken for a torn tail;
//! one damaged copy of the last batch is read past from the other ([`Mended`]).
//!
//! Reading (see [`read`]) follows the chain from the header and stops at the first batch
//! that does not continue it in both copies. A batch whole in one copy is the last one
//! (read from that copy) and a batch whole in neither is a *torn tail* (dropped) — only if
//! no valid record of the same generation with a later lsn follows it at any page, and it
//! does not run past the end of the file (the file is grown with zeros before any record is
//! written into it, and keeps a page of zeros after the last batch). Anything else is
//! damage: a bad copy followed by a valid record, a record cut by the end of the file, a
//! missing, emptied or foreign log while the redb file says a live one is due, a log of
//! another generation. Damage is refused, naming the file, the offset and what was
//! expected, and nothing is modified.
//!
//! Logs of the chained layout that came first (`CLWG` header, `CLW2` records one after the
//! other, written once) are still read, as they were: a torn tail there is wherever the
//! chain stops with no later record.
//!
//! Logs written before generations (format 1 records, `CLWR`, no header) are read by
//! [`read_legacy`] once, when a journal that has no `wal_gen` yet opens.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use crate::error::{JournalError, Result};
use crate::flushes::Flushes;

/// Marks the start of every record of format 1 (no header, no chain).
const MAGIC: [u8; 4] = *b"CLWR";
/// Magic, payload length (u32), lsn (u64), crc32 (u32): a record of format 1.
const HEADER: usize = 4 + 4 + 8 + 4;

/// Marks the header of a log generation.
const GEN_MAGIC: [u8; 4] = *b"CLWG";
/// Magic, journal id (u64), generation (u64), first lsn (u64), crc32 (u32).
pub(crate) const GEN_HEADER: usize = 4 + 8 + 8 + 8 + 4;
/// Marks the start of every chained record.
const REC_MAGIC: [u8; 4] = *b"CLW2";
/// Marks the header of a paged log generation (format 3): every batch starts on a page of
/// its own and is written twice.
const PAGED_GEN_MAGIC: [u8; 4] = *b"CLWP";
/// Marks the start of every record of a paged log (laid out as `CLW2`).
const FRAME_MAGIC: [u8; 4] = *b"CLW3";
/// The page every batch of a paged log starts on: a write torn by a crash reaches only the
/// pages of the batch being written, never one written and flushed before it.
pub(crate) const PAGE: u64 = 4096;
/// Magic, payload length (u32), lsn (u64), crc32 (u32), chain (u32).
const REC_HEADER: usize = 4 + 4 + 8 + 4 + 4;

/// One record read back from the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Record {
    pub(crate) lsn: u64,
    pub(crate) payload: Vec<u8>,
}

/// A record of a log's last batch read from one of its two copies because the other is
/// damaged, or was torn by a power cut while the batch was written (the two cannot be told
/// apart: see `docs/journal-format.md`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Mended {
    /// The record's lsn.
    pub(crate) lsn: u64,
    /// Where the copy that does not read starts.
    pub(crate) damaged_at: u64,
    /// Where the copy that was read starts.
    pub(crate) read_at: u64,
}

/// What reading a log found: the records past what the file holds, in order, and the
/// copies of its last batch found damaged beside a whole one.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct LogRead {
    pub(crate) records: Vec<Record>,
    pub(crate) mended: Vec<Mended>,
}

/// How much the log file grows at a time, written as zeros ahead of the records.
const GROW_BY: u64 = 1 << 20;
/// The zeros are written in chunks of this size, so a log's length is always a multiple
/// of it, even when a crash cuts a growth short.
const GROW_CHUNK: u64 = 64 << 10;

/// The file a log lives in, as the log uses it: the real file, or (in tests) a simulated
/// disk that loses unsynced writes in a power cut.
pub(crate) trait LogFile: Send + std::fmt::Debug {
    /// Its length in bytes.
    fn len(&self) -> io::Result<u64>;
    /// Fills `buf` from `at`; `Ok(false)` when the file ends first.
    fn read_at(&self, buf: &mut [u8], at: u64) -> io::Result<bool>;
    /// Writes `data` at `at`.
    fn write_at(&mut self, data: &[u8], at: u64) -> io::Result<()>;
    /// Makes the data written so far durable.
    fn sync_data(&mut self) -> io::Result<()>;
    /// Makes the data and the length durable.
    fn sync_all(&mut self) -> io::Result<()>;
}

impl LogFile for File {
    fn len(&self) -> io::Result<u64> {
        Ok(self.metadata()?.len())
    }

    fn read_at(&self, buf: &mut [u8], at: u64) -> io::Result<bool> {
        match self.read_exact_at(buf, at) {
            Ok(()) => Ok(true),
            Err(err) if err.kind() == io::ErrorKind::UnexpectedEof => Ok(false),
            Err(err) => Err(err),
        }
    }

    fn write_at(&mut self, data: &[u8], at: u64) -> io::Result<()> {
        self.write_all_at(data, at)
    }

    fn sync_data(&mut self) -> io::Result<()> {
        File::sync_data(self)
    }

    fn sync_all(&mut self) -> io::Result<()> {
        File::sync_all(self)
    }
}

/// A log's file, counting its `sync_data` and `sync_all` calls.
#[derive(Debug)]
pub(crate) struct CountedLog {
    file: Box<dyn LogFile>,
    flushes: Flushes,
}

impl CountedLog {
    /// Wraps `file`, noting each of its flushes in `flushes`.
    pub(crate) fn new(file: Box<dyn LogFile>, flushes: Flushes) -> CountedLog {
        CountedLog { file, flushes }
    }
}

impl LogFile for CountedLog {
    fn len(&self) -> io::Result<u64> {
        self.file.len()
    }

    fn read_at(&self, buf: &mut [u8], at: u64) -> io::Result<bool> {
        self.file.read_at(buf, at)
    }

    fn write_at(&mut self, data: &[u8], at: u64) -> io::Result<()> {
        self.file.write_at(data, at)
    }

    fn sync_data(&mut self) -> io::Result<()> {
        self.flushes.note();
        self.file.sync_data()
    }

    fn sync_all(&mut self) -> io::Result<()> {
        self.flushes.note();
        self.file.sync_all()
    }
}

/// What the redb file says about its log, read at open.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Expected {
    /// The journal's id (every checksum of its log is salted with it).
    pub(crate) journal_id: u64,
    /// The last lsn the file holds.
    pub(crate) held: u64,
    /// The generation of the log that may hold records after `held`; `None` for a file
    /// from before generations, whose log has format 1.
    pub(crate) generation: Option<u64>,
    /// Whether that log is live: it may hold acknowledged records the file lacks, so it
    /// must be there, whole.
    pub(crate) live: bool,
}

/// The log of an open journal; only its writer thread touches it.
#[derive(Debug)]
pub(crate) struct Wal {
    file: Box<dyn LogFile>,
    path: PathBuf,
    /// Where the next record goes: the bytes written since the last checkpoint (0: the
    /// generation's header has not been written yet).
    offset: u64,
    /// The file's length: written (zeros past the records) and flushed, so that flushing a
    /// record inside it changes no file metadata, which would cost a second write per flush.
    allocated: u64,
    /// The lsn of the next record.
    next_lsn: u64,
    /// The id of the journal the log belongs to, which seeds every checksum.
    journal_id: u64,
    /// The generation being written.
    generation: u64,
    /// The chain value of the last record written (the header's crc before the first).
    chain: u32,
    /// Reusable buffer for one record.
    buf: Vec<u8>,
}

/// Returns the log's path for the journal at `journal`.
pub(crate) fn path_for(journal: &Path) -> PathBuf {
    let mut name = journal.as_os_str().to_os_string();
    name.push("-wal");
    PathBuf::from(name)
}

fn damaged(path: &Path, detail: String) -> JournalError {
    JournalError::Corrupted {
        path: path.to_path_buf(),
        detail: format!(
            "{detail}; nothing was changed. Restore the journal and its log from a copy taken \
             together, or run `clio journal check` to see what still reads"
        ),
    }
}

/// Reads the log at `path` as the redb file `expected` describes it, without writing
/// anything, and returns the records it holds past `expected.held`, in order. Refuses
/// damage (see the module's documentation).
pub(crate) fn read(path: &Path, expected: &Expected) -> Result<Vec<Record>> {
    read_all(path, expected).map(|read| read.records)
}

/// As [`read`], with the copies of the last batch found damaged beside a whole one.
pub(crate) fn read_all(path: &Path, expected: &Expected) -> Result<LogRead> {
    let io_err = |source| JournalError::Io { path: path.to_path_buf(), source };
    let file = match File::open(path) {
        Ok(file) => Some(file),
        Err(err) if err.kind() == io::ErrorKind::NotFound => None,
        Err(err) => return Err(io_err(err)),
    };
    let Some(file) = file else {
        if expected.live {
            return Err(damaged(
                path,
                format!(
                    "the log is missing, but the journal expects its generation {} to hold \
                     any records written after record {}",
                    expected.generation.unwrap_or(0),
                    expected.held
                ),
            ));
        }
        return Ok(LogRead::default());
    };
    read_all_from(&file, path, expected)
}

/// Reads the log held in `file` (named `path` in errors), as [`read`] does.
#[cfg(test)]
pub(crate) fn read_from(
    file: &dyn LogFile,
    path: &Path,
    expected: &Expected,
) -> Result<Vec<Record>> {
    read_all_from(file, path, expected).map(|read| read.records)
}

/// As [`read_from`], with the copies of the last batch found damaged beside a whole one.
pub(crate) fn read_all_from(
    file: &dyn LogFile,
    path: &Path,
    expected: &Expected,
) -> Result<LogRead> {
    let io_err = |source| JournalError::Io { path: path.to_path_buf(), source };
    let len = file.len().map_err(io_err)?;
    let read_at = |at: u64, buf: &mut [u8]| file.read_at(buf, at);
    let Some(generation) = expected.generation else {
        // A log of format 1: its records as they read, past what the file holds.
        let records = read_legacy(len, read_at, expected.journal_id).map_err(io_err)?;
        let records = records.into_iter().filter(|r| r.lsn > expected.held).collect();
        return Ok(LogRead { records, mended: Vec::new() });
    };
    let mut mended = Vec::new();
    let records = read_generation(path, len, read_at, expected, generation, &mut mended)?;
    Ok(LogRead { records, mended })
}

/// Returns whether the log at `path` starts with the header of the generation `expected`
/// names, of its journal: whether anything was written in that generation (a header is
/// written with its generation's first record). A missing log holds none.
pub(crate) fn holds_generation_at(path: &Path, expected: &Expected) -> Result<bool> {
    let io_err = |source| JournalError::Io { path: path.to_path_buf(), source };
    match File::open(path) {
        Ok(file) => holds_generation(&file, expected).map_err(io_err),
        Err(err) if err.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(err) => Err(io_err(err)),
    }
}

/// As [`holds_generation_at`], for the log held in `file`.
pub(crate) fn holds_generation(file: &dyn LogFile, expected: &Expected) -> io::Result<bool> {
    let Some(generation) = expected.generation else { return Ok(false) };
    let mut header = [0u8; GEN_HEADER];
    if !file.read_at(&mut header, 0)? {
        return Ok(false);
    }
    Ok([GEN_MAGIC, PAGED_GEN_MAGIC].iter().any(|magic| {
        parse_header(&header, *magic)
            .is_some_and(|h| h.id == expected.journal_id && h.generation == generation)
    }))
}

/// Reads a log of generation `generation` (see [`read`]): of the chained format (`CLWG`)
/// that generations were first written in, or paged (`CLWP`, see [`read_paged`]).
fn read_generation(
    path: &Path,
    len: u64,
    read_at: impl Fn(u64, &mut [u8]) -> io::Result<bool>,
    expected: &Expected,
    generation: u64,
    mended: &mut Vec<Mended>,
) -> Result<Vec<Record>> {
    let io_err = |source| JournalError::Io { path: path.to_path_buf(), source };
    let id = expected.journal_id;
    let mut header = [0u8; GEN_HEADER];
    let mut whole_header = read_at(0, &mut header).map_err(io_err)?;
    if !whole_header {
        // A file shorter than a header: what it holds, to tell zeros from written bytes.
        let n = usize::try_from(len).unwrap_or(GEN_HEADER).min(GEN_HEADER);
        whole_header = read_at(0, &mut header[..n]).map_err(io_err)? && n == GEN_HEADER;
    }
    let parsed = whole_header.then(|| parse_header(&header, GEN_MAGIC)).flatten();
    let Some(Header { id: log_id, generation: log_gen, first_lsn, crc: chain }) = parsed else {
        // Not a chained log's header: a paged log's, or none.
        return read_paged(path, len, &read_at, expected, generation, &header, mended);
    };
    if header_is_stale(path, (log_id, id), (log_gen, generation), expected)? {
        return Ok(Vec::new());
    }
    // A log grows by whole chunks of zeros, flushed before records are written into them:
    // a live log of another length was cut.
    if expected.live && !len.is_multiple_of(GROW_CHUNK) {
        return Err(short(path, GEN_HEADER as u64, len));
    }
    if first_lsn > expected.held + 1 {
        return Err(damaged(
            path,
            format!(
                "the log starts at record {first_lsn}, but the journal holds records up to {} \
                 only: records {}..{first_lsn} are missing",
                expected.held,
                expected.held + 1
            ),
        ));
    }
    let mut records = Vec::new();
    let mut at = GEN_HEADER as u64;
    let mut chain = chain;
    let mut next = first_lsn;
    loop {
        let mut head = [0u8; REC_HEADER];
        if !read_at(at, &mut head).map_err(io_err)? {
            // The file ends inside a record header: only damage cuts a log there, as the
            // file is grown with zeros before records are written into it.
            if read_magic(&read_at, at).map_err(io_err)? == Some(REC_MAGIC) {
                return Err(short(path, at, len));
            }
            break;
        }
        let Some(RecordHeader { size, lsn, crc, link }) = RecordHeader::parse(&head, REC_MAGIC)
        else {
            break;
        };
        let start = at + REC_HEADER as u64;
        if size > len.saturating_sub(start) {
            return Err(short(path, at, len));
        }
        let mut payload = vec![0u8; size as usize];
        let whole = read_at(start, &mut payload).map_err(io_err)?
            && lsn == next
            && record_crc(id, generation, lsn, &payload) == crc
            && chained(chain, crc) == link;
        if !whole {
            break;
        }
        chain = link;
        next += 1;
        if lsn > expected.held {
            records.push(Record { lsn, payload });
        }
        at = start + size;
    }
    // `at` is where the chain stops: a torn tail, unless a later record of this generation
    // follows.
    let last = next.saturating_sub(1).max(expected.held);
    if let Some((found, lsn)) =
        later_record(len, &read_at, id, generation, at, last).map_err(io_err)?
    {
        return Err(damaged(
            path,
            format!(
                "the record at offset {at} (record {next}) is damaged, but a valid record {lsn} \
                 follows at offset {found}: the log is not whole"
            ),
        ));
    }
    Ok(records)
}

/// Reads a paged log (format 3: every batch on its own pages, written twice) of generation
/// `generation` (see [`read`]), noting in `mended` each copy found damaged beside a whole
/// one in the log's last batch.
fn read_paged(
    path: &Path,
    len: u64,
    read_at: &impl Fn(u64, &mut [u8]) -> io::Result<bool>,
    expected: &Expected,
    generation: u64,
    head: &[u8; GEN_HEADER],
    mended: &mut Vec<Mended>,
) -> Result<Vec<Record>> {
    let io_err = |source| JournalError::Io { path: path.to_path_buf(), source };
    let id = expected.journal_id;
    let header = match parse_header(head, PAGED_GEN_MAGIC) {
        Some(h) => Some(h),
        // The first copy of the header is unreadable: its second copy, found where the
        // first batch's second copy starts, if the log is due to hold records.
        None if expected.live => {
            second_header(len, read_at, id, generation, expected.held).map_err(io_err)?
        }
        None => None,
    };
    let Some(Header { id: log_id, generation: log_gen, first_lsn, crc: start }) = header else {
        return no_header(path, len, read_at, expected, generation, head);
    };
    if header_is_stale(path, (log_id, id), (log_gen, generation), expected)? {
        return Ok(Vec::new());
    }
    if expected.live && !len.is_multiple_of(GROW_CHUNK) {
        return Err(short(path, 0, len));
    }
    if first_lsn > expected.held + 1 {
        return Err(damaged(
            path,
            format!(
                "the log starts at record {first_lsn}, but the journal holds records up to {} \
                 only: records {}..{first_lsn} are missing",
                expected.held,
                expected.held + 1
            ),
        ));
    }
    let header = Header { id, generation, first_lsn, crc: start };
    let mut records = Vec::new();
    let mut at = 0u64;
    let mut chain = start;
    let mut next = first_lsn;
    let keep = |records: &mut Vec<Record>, unit: Unit| {
        if unit.lsn > expected.held {
            records.push(Record { lsn: unit.lsn, payload: unit.payload });
        }
    };
    loop {
        let first = at == 0;
        // The writer keeps at least one page of zeros past its last batch: a log that ends
        // sooner was cut.
        if at.saturating_add(PAGE) > len {
            if expected.live {
                return Err(short(path, at, len));
            }
            break;
        }
        let want = Want { id, generation, header: first.then_some(&header), lsn: next, chain };
        let unit = read_unit(len, read_at, at, &want).map_err(io_err)?;
        if let Some(unit) = unit {
            let span = unit.len.next_multiple_of(PAGE);
            let copy = at + span;
            if copy.saturating_add(span) > len {
                return Err(short(path, copy, len));
            }
            let second = read_unit(len, read_at, copy, &want).map_err(io_err)?;
            let (lsn, link) = (unit.lsn, unit.link);
            keep(&mut records, unit);
            if second.is_none() {
                // The second copy is damaged or was torn: its batch must be the last.
                if let Some((found, later)) =
                    later_paged(len, read_at, id, generation, copy + span, lsn).map_err(io_err)?
                {
                    return Err(damaged(
                        path,
                        format!(
                            "the second copy of record {lsn} at offset {copy} is damaged, and \
                             record {later} follows at offset {found}: the log is not whole"
                        ),
                    ));
                }
                mended.push(Mended { lsn, damaged_at: copy, read_at: at });
                break;
            }
            chain = link;
            next += 1;
            at = copy + span;
            continue;
        }
        // The first copy is damaged or torn: the second, if whole, starts one span later.
        let last = next.saturating_sub(1).max(expected.held);
        if let Some((copy, unit)) = second_copy(len, read_at, at, &want).map_err(io_err)? {
            let (lsn, span) = (unit.lsn, unit.len.next_multiple_of(PAGE));
            if let Some((found, later)) =
                later_paged(len, read_at, id, generation, copy + span, lsn).map_err(io_err)?
            {
                return Err(damaged(
                    path,
                    format!(
                        "the record at offset {at} (record {next}) is damaged (its second copy \
                         at offset {copy} is whole), and record {later} follows at offset \
                         {found}: the log is not whole"
                    ),
                ));
            }
            keep(&mut records, unit);
            mended.push(Mended { lsn, damaged_at: at, read_at: copy });
            break;
        }
        // Neither copy is whole: a torn tail, unless a later record follows.
        if let Some((found, later)) =
            later_paged(len, read_at, id, generation, at + PAGE, last).map_err(io_err)?
        {
            return Err(damaged(
                path,
                format!(
                    "the record at offset {at} (record {next}) is damaged, in both its copies, \
                     but a valid record {later} follows at offset {found}: the log is not whole"
                ),
            ));
        }
        break;
    }
    Ok(records)
}

/// What a log with no readable header may hold: nothing of its generation (zeros, a cleared
/// log, an empty file, or a first write a crash cut short), or else it is damaged.
fn no_header(
    path: &Path,
    len: u64,
    read_at: &impl Fn(u64, &mut [u8]) -> io::Result<bool>,
    expected: &Expected,
    generation: u64,
    header: &[u8; GEN_HEADER],
) -> Result<Vec<Record>> {
    let io_err = |source| JournalError::Io { path: path.to_path_buf(), source };
    let id = expected.journal_id;
    let later =
        match later_record(len, read_at, id, generation, 0, expected.held).map_err(io_err)? {
            Some(found) => Some(found),
            None => later_paged(len, read_at, id, generation, 0, expected.held).map_err(io_err)?,
        };
    if let Some((at, lsn)) = later {
        return Err(damaged(
            path,
            format!(
                "the log's header at offset 0 is unreadable (in both its copies, for a paged \
                 log), but a valid record {lsn} of generation {generation} follows at offset \
                 {at}"
            ),
        ));
    }
    let written = header.iter().any(|b| *b != 0);
    if expected.live && written && !len.is_multiple_of(GROW_CHUNK) {
        return Err(short(path, 0, len));
    }
    if expected.live && len == 0 {
        return Err(damaged(
            path,
            format!(
                "the log is empty, but the journal expects its generation {generation} to hold \
                 any records written after record {}",
                expected.held
            ),
        ));
    }
    Ok(Vec::new())
}

/// What the next batch of a paged log must be: its lsn, the chain it continues and, for a
/// generation's first batch, the header it starts with.
struct Want<'a> {
    id: u64,
    generation: u64,
    header: Option<&'a Header>,
    lsn: u64,
    chain: u32,
}

/// One copy of a paged log's batch, read whole.
struct Unit {
    lsn: u64,
    link: u32,
    payload: Vec<u8>,
    /// Its bytes: the header (for a generation's first batch) and the record.
    len: u64,
}

/// Reads the copy of a batch at `at` if it is whole and is the batch `want` describes.
fn read_unit(
    len: u64,
    read_at: &impl Fn(u64, &mut [u8]) -> io::Result<bool>,
    at: u64,
    want: &Want<'_>,
) -> io::Result<Option<Unit>> {
    let mut start = at;
    if let Some(header) = want.header {
        let mut head = [0u8; GEN_HEADER];
        if !read_at(at, &mut head)? || parse_header(&head, PAGED_GEN_MAGIC) != Some(*header) {
            return Ok(None);
        }
        start += GEN_HEADER as u64;
    }
    let mut head = [0u8; REC_HEADER];
    if !read_at(start, &mut head)? {
        return Ok(None);
    }
    let Some(RecordHeader { size, lsn, crc, link }) = RecordHeader::parse(&head, FRAME_MAGIC)
    else {
        return Ok(None);
    };
    let body = start + REC_HEADER as u64;
    if lsn != want.lsn || size > len.saturating_sub(body) {
        return Ok(None);
    }
    let mut payload = vec![0u8; size as usize];
    let whole = read_at(body, &mut payload)?
        && record_crc(want.id, want.generation, lsn, &payload) == crc
        && chained(want.chain, crc) == link;
    Ok(whole.then(|| Unit { lsn, link, payload, len: body + size - at }))
}

/// Finds the second copy of the batch whose first copy at `at` does not read: a whole copy
/// of the batch `want` describes, starting exactly one span (its length in whole pages)
/// after `at`.
fn second_copy(
    len: u64,
    read_at: &impl Fn(u64, &mut [u8]) -> io::Result<bool>,
    at: u64,
    want: &Want<'_>,
) -> io::Result<Option<(u64, Unit)>> {
    let magic = if want.header.is_some() { PAGED_GEN_MAGIC } else { FRAME_MAGIC };
    find_page(len, read_at, at + PAGE, |p, found| {
        if found != magic {
            return Ok(None);
        }
        Ok(read_unit(len, read_at, p, want)?
            .filter(|unit| unit.len.next_multiple_of(PAGE) == p - at)
            .map(|unit| (p, unit)))
    })
}

/// Finds the second copy of a generation's header (with its first batch) when the first
/// does not read: the header of `generation` of journal `id`, whose first record lies past
/// `held` (an older leftover of the generation holds records the file has), at the page
/// where its batch's second copy starts.
fn second_header(
    len: u64,
    read_at: &impl Fn(u64, &mut [u8]) -> io::Result<bool>,
    id: u64,
    generation: u64,
    held: u64,
) -> io::Result<Option<Header>> {
    find_page(len, read_at, PAGE, |p, magic| {
        if magic != PAGED_GEN_MAGIC {
            return Ok(None);
        }
        let mut head = [0u8; GEN_HEADER];
        if !read_at(p, &mut head)? {
            return Ok(None);
        }
        let Some(header) = parse_header(&head, PAGED_GEN_MAGIC)
            .filter(|h| h.id == id && h.generation == generation && h.first_lsn > held)
        else {
            return Ok(None);
        };
        let want = Want {
            id,
            generation,
            header: Some(&header),
            lsn: header.first_lsn,
            chain: header.crc,
        };
        Ok(read_unit(len, read_at, p, &want)?
            .filter(|unit| unit.len.next_multiple_of(PAGE) == p)
            .map(|_| header))
    })
}

/// Returns the offset and lsn of the first copy of a batch of `generation` at a page at or
/// after `from`, whole on its own (its own checksum), whose lsn is above `after`: a record
/// that a torn tail could not precede.
fn later_paged(
    len: u64,
    read_at: &impl Fn(u64, &mut [u8]) -> io::Result<bool>,
    id: u64,
    generation: u64,
    from: u64,
    after: u64,
) -> io::Result<Option<(u64, u64)>> {
    find_page(len, read_at, from, |p, magic| {
        let start = match magic {
            FRAME_MAGIC => p,
            PAGED_GEN_MAGIC => {
                let mut head = [0u8; GEN_HEADER];
                let ours = read_at(p, &mut head)?
                    && parse_header(&head, PAGED_GEN_MAGIC)
                        .is_some_and(|h| h.id == id && h.generation == generation);
                if !ours {
                    return Ok(None);
                }
                p + GEN_HEADER as u64
            }
            _ => return Ok(None),
        };
        Ok(valid_record_at(len, read_at, FRAME_MAGIC, id, generation, start)?
            .filter(|lsn| *lsn > after)
            .map(|lsn| (p, lsn)))
    })
}

/// Calls `f` with the offset and first four bytes of each page at or after `from` (a page
/// boundary) that does not start with zeros, until it returns something.
fn find_page<T>(
    len: u64,
    read_at: &impl Fn(u64, &mut [u8]) -> io::Result<bool>,
    from: u64,
    mut f: impl FnMut(u64, [u8; 4]) -> io::Result<Option<T>>,
) -> io::Result<Option<T>> {
    const CHUNK: u64 = 1 << 16;
    let mut buf = vec![0u8; CHUNK as usize];
    let mut base = from.next_multiple_of(PAGE);
    while base < len {
        let n = (len - base).min(CHUNK) as usize;
        if !read_at(base, &mut buf[..n])? {
            break;
        }
        let mut i = 0;
        while i + 4 <= n {
            let magic = [buf[i], buf[i + 1], buf[i + 2], buf[i + 3]];
            if magic != [0; 4]
                && let Some(found) = f(base + i as u64, magic)?
            {
                return Ok(Some(found));
            }
            i += PAGE as usize;
        }
        base += CHUNK;
    }
    Ok(None)
}

/// Checks a log header's journal id and generation, `(found, expected)` each, against the
/// journal's: `Ok(true)` for the log of an earlier generation, every record of which the
/// file holds already (a crash came between the checkpoint and the new generation's first
/// record; a checkpoint with nothing written keeps its generation, so an older log than
/// that is one that lost records), `Ok(false)` for the generation expected, and an error
/// naming the mismatch for a log of another journal or of a generation it cannot be.
fn header_is_stale(
    path: &Path,
    (log_id, id): (u64, u64),
    (log_gen, generation): (u64, u64),
    expected: &Expected,
) -> Result<bool> {
    if log_id != id {
        return Err(damaged(
            path,
            format!("the log belongs to another journal (id {log_id:016x}, expected {id:016x})"),
        ));
    }
    if log_gen + 1 == generation || (log_gen < generation && !expected.live) {
        return Ok(true);
    }
    if log_gen != generation {
        return Err(damaged(
            path,
            format!(
                "the log is of generation {log_gen}, but the journal expects generation \
                 {generation}: was one of the two files replaced without the other?"
            ),
        ));
    }
    Ok(false)
}

fn short(path: &Path, at: u64, len: u64) -> JournalError {
    damaged(
        path,
        format!(
            "the log is cut short at {len} bytes (near offset {at}): a log is grown by whole \
             chunks of zeros before records are written into it, so its records never reach \
             past its end"
        ),
    )
}

fn read_magic(
    read_at: &impl Fn(u64, &mut [u8]) -> io::Result<bool>,
    at: u64,
) -> io::Result<Option<[u8; 4]>> {
    let mut magic = [0u8; 4];
    Ok(read_at(at, &mut magic)?.then_some(magic))
}

/// Returns the offset and lsn of the first valid record of `generation` at or after byte
/// `from` whose lsn is above `after`: a record that a torn tail could not precede.
fn later_record(
    len: u64,
    read_at: &impl Fn(u64, &mut [u8]) -> io::Result<bool>,
    journal_id: u64,
    generation: u64,
    from: u64,
    after: u64,
) -> io::Result<Option<(u64, u64)>> {
    const CHUNK: usize = 1 << 16;
    let mut buf = vec![0u8; CHUNK + REC_HEADER];
    let mut base = from;
    while base < len {
        let n = ((len - base) as usize).min(buf.len());
        if !read_at(base, &mut buf[..n])? {
            break;
        }
        for i in 0..n.min(CHUNK) {
            if buf[i..].starts_with(&REC_MAGIC) {
                let at = base + i as u64;
                if let Some(lsn) =
                    valid_record_at(len, read_at, REC_MAGIC, journal_id, generation, at)?
                    && lsn > after
                {
                    return Ok(Some((at, lsn)));
                }
            }
        }
        base += CHUNK as u64;
    }
    Ok(None)
}

/// Returns the lsn of the record at `at`, starting with `magic`, if it is a whole record of
/// `generation` on its own.
fn valid_record_at(
    len: u64,
    read_at: &impl Fn(u64, &mut [u8]) -> io::Result<bool>,
    magic: [u8; 4],
    journal_id: u64,
    generation: u64,
    at: u64,
) -> io::Result<Option<u64>> {
    Ok(record_at(len, read_at, magic, journal_id, generation, at)?.map(|r| r.lsn))
}

/// Returns every record of the log at `path` past `expected.held` that is whole on its own
/// (its own checksum), in lsn order, wherever it lies: what can still be read of a log that
/// [`read`] refuses as damaged (for a salvage to name the runs it wrote). A record of the
/// chained format found at any offset, of the paged one at a page boundary.
pub(crate) fn readable_records(path: &Path, expected: &Expected) -> io::Result<Vec<Record>> {
    let file = match File::open(path) {
        Ok(file) => file,
        Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(err) => return Err(err),
    };
    let len = LogFile::len(&file)?;
    let read_at = |at: u64, buf: &mut [u8]| LogFile::read_at(&file, buf, at);
    let (id, held) = (expected.journal_id, expected.held);
    let Some(generation) = expected.generation else {
        let records = read_legacy(len, read_at, id)?;
        return Ok(records.into_iter().filter(|r| r.lsn > held).collect());
    };
    let mut found = std::collections::BTreeMap::new();
    find_page(len, &read_at, 0, |p, magic| {
        let start = match magic {
            FRAME_MAGIC => p,
            PAGED_GEN_MAGIC => p + GEN_HEADER as u64,
            _ => return Ok(None::<()>),
        };
        if let Some(r) = record_at(len, &read_at, FRAME_MAGIC, id, generation, start)?
            && r.lsn > held
        {
            found.entry(r.lsn).or_insert(r.payload);
        }
        Ok(None)
    })?;
    const CHUNK: usize = 1 << 16;
    let mut buf = vec![0u8; CHUNK + REC_HEADER];
    let mut base = 0u64;
    while base < len {
        let n = ((len - base) as usize).min(buf.len());
        if !read_at(base, &mut buf[..n])? {
            break;
        }
        for i in 0..n.min(CHUNK) {
            if buf[i..].starts_with(&REC_MAGIC)
                && let Some(r) =
                    record_at(len, &read_at, REC_MAGIC, id, generation, base + i as u64)?
                && r.lsn > held
            {
                found.entry(r.lsn).or_insert(r.payload);
            }
        }
        base += CHUNK as u64;
    }
    Ok(found.into_iter().map(|(lsn, payload)| Record { lsn, payload }).collect())
}

/// Returns the record at `at`, starting with `magic`, if it is a whole record of
/// `generation` on its own.
fn record_at(
    len: u64,
    read_at: &impl Fn(u64, &mut [u8]) -> io::Result<bool>,
    magic: [u8; 4],
    journal_id: u64,
    generation: u64,
    at: u64,
) -> io::Result<Option<Record>> {
    let mut head = [0u8; REC_HEADER];
    if !read_at(at, &mut head)? {
        return Ok(None);
    }
    let Some(RecordHeader { size, lsn, crc, .. }) = RecordHeader::parse(&head, magic) else {
        return Ok(None);
    };
    let start = at + REC_HEADER as u64;
    if size > len.saturating_sub(start) {
        return Ok(None);
    }
    let mut payload = vec![0u8; size as usize];
    let whole =
        read_at(start, &mut payload)? && record_crc(journal_id, generation, lsn, &payload) == crc;
    Ok(whole.then_some(Record { lsn, payload }))
}

/// The header of a chained record.
struct RecordHeader {
    size: u64,
    lsn: u64,
    crc: u32,
    link: u32,
}

impl RecordHeader {
    /// Parses `head`; `None` when it does not start with `magic`.
    fn parse(head: &[u8; REC_HEADER], magic: [u8; 4]) -> Option<RecordHeader> {
        if head[..4] != magic {
            return None;
        }
        let u32_at =
            |at: usize| u32::from_le_bytes([head[at], head[at + 1], head[at + 2], head[at + 3]]);
        Some(RecordHeader {
            size: u64::from(u32_at(4)),
            lsn: u64::from_le_bytes(head[8..16].try_into().unwrap_or_default()),
            crc: u32_at(16),
            link: u32_at(20),
        })
    }
}

/// A generation's header: its journal id, generation, first lsn and crc (the chain's start).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Header {
    id: u64,
    generation: u64,
    first_lsn: u64,
    crc: u32,
}

/// Parses a generation header starting with `magic`; `None` when it is not one.
fn parse_header(h: &[u8; GEN_HEADER], magic: [u8; 4]) -> Option<Header> {
    if h[..4] != magic {
        return None;
    }
    let word = |at: usize| u64::from_le_bytes(h[at..at + 8].try_into().unwrap_or_default());
    let crc = u32::from_le_bytes([h[28], h[29], h[30], h[31]]);
    (crc32(&h[..28]) == crc).then(|| Header {
        id: word(4),
        generation: word(12),
        first_lsn: word(20),
        crc,
    })
}

fn crc32(bytes: &[u8]) -> u32 {
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(bytes);
    hasher.finalize()
}

fn record_crc(journal_id: u64, generation: u64, lsn: u64, payload: &[u8]) -> u32 {
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(&journal_id.to_le_bytes());
    hasher.update(&generation.to_le_bytes());
    hasher.update(&lsn.to_le_bytes());
    hasher.update(payload);
    hasher.finalize()
}

fn chained(previous: u32, crc: u32) -> u32 {
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(&previous.to_le_bytes());
    hasher.update(&crc.to_le_bytes());
    hasher.finalize()
}

/// Appends the header of generation `generation` of journal `journal_id`, whose first record
/// is `first_lsn`, to `out`; returns its crc (the chain's start).
fn encode_gen_header(
    out: &mut Vec<u8>,
    magic: [u8; 4],
    journal_id: u64,
    generation: u64,
    first_lsn: u64,
) -> u32 {
    let start = out.len();
    out.extend_from_slice(&magic);
    out.extend_from_slice(&journal_id.to_le_bytes());
    out.extend_from_slice(&generation.to_le_bytes());
    out.extend_from_slice(&first_lsn.to_le_bytes());
    let crc = crc32(&out[start..]);
    out.extend_from_slice(&crc.to_le_bytes());
    crc
}

/// Appends a chained record to `out` and returns its chain value.
fn encode_chained(
    out: &mut Vec<u8>,
    magic: [u8; 4],
    journal_id: u64,
    generation: u64,
    lsn: u64,
    previous: u32,
    payload: &[u8],
) -> u32 {
    let crc = record_crc(journal_id, generation, lsn, payload);
    let link = chained(previous, crc);
    out.extend_from_slice(&magic);
    out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    out.extend_from_slice(&lsn.to_le_bytes());
    out.extend_from_slice(&crc.to_le_bytes());
    out.extend_from_slice(&link.to_le_bytes());
    out.extend_from_slice(payload);
    link
}

impl Wal {
    /// Opens (or creates) the log at `path` for writing generation `generation` of journal
    /// `journal_id` from record `next_lsn`. Its old content (read and applied before) is
    /// overwritten from the first byte by the generation's first record.
    /// Its flushes are noted in `flushes`.
    pub(crate) fn create(
        path: PathBuf,
        journal_id: u64,
        generation: u64,
        next_lsn: u64,
        flushes: &Flushes,
    ) -> Result<Self> {
        let io_err = |source| JournalError::Io { path: path.clone(), source };
        let existed = path.exists();
        let file = open_read_write(&path).map_err(io_err)?;
        if !existed {
            // The log's name must survive a crash before any record relies on it.
            sync_parent(&path).map_err(io_err)?;
        }
        Self::with_file(Box::new(file), path, journal_id, generation, next_lsn, flushes)
    }

    /// As [`Wal::create`], on `file` (named `path` in errors).
    pub(crate) fn with_file(
        file: Box<dyn LogFile>,
        path: PathBuf,
        journal_id: u64,
        generation: u64,
        next_lsn: u64,
        flushes: &Flushes,
    ) -> Result<Self> {
        let allocated =
            file.len().map_err(|source| JournalError::Io { path: path.clone(), source })?;
        let file: Box<dyn LogFile> = Box::new(CountedLog::new(file, flushes.clone()));
        Ok(Self {
            file,
            path,
            offset: 0,
            allocated,
            next_lsn,
            journal_id,
            generation,
            chain: 0,
            buf: Vec::new(),
        })
    }

    /// Returns the log's file.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// The lsn the next record gets.
    pub(crate) fn next_lsn(&self) -> u64 {
        self.next_lsn
    }

    /// The generation being written.
    pub(crate) fn generation(&self) -> u64 {
        self.generation
    }

    /// Whether nothing was written to the log since it was opened or last started over.
    pub(crate) fn is_empty(&self) -> bool {
        self.offset == 0
    }

    /// Whether the log has reached `limit` bytes, so that the next batch should checkpoint.
    pub(crate) fn wants_checkpoint(&self, limit: u64) -> bool {
        self.offset >= limit
    }

    /// Writes `payload` as the next record (after the generation's header, for its first)
    /// and flushes it to disk; returns its lsn.
    ///
    /// The record starts on a page of its own and is written twice, the second copy on the
    /// pages after the first, in one write and one flush: a write torn by a crash reaches
    /// only this batch's pages, so damage to any earlier batch is told from a torn tail, and
    /// damage to one copy of the last batch is read past from the other.
    pub(crate) fn append(&mut self, payload: &[u8]) -> Result<u64> {
        let lsn = self.next_lsn;
        self.buf.clear();
        let first = self.offset == 0;
        if first {
            self.chain = encode_gen_header(
                &mut self.buf,
                PAGED_GEN_MAGIC,
                self.journal_id,
                self.generation,
                lsn,
            );
        }
        let chain = encode_chained(
            &mut self.buf,
            FRAME_MAGIC,
            self.journal_id,
            self.generation,
            lsn,
            self.chain,
            payload,
        );
        let unit = self.buf.len();
        let span = (unit as u64).next_multiple_of(PAGE);
        self.buf.resize(span as usize, 0);
        self.buf.extend_from_within(..unit);
        let end = self.offset + 2 * span;
        // A page of zeros always follows the last batch, so that a log cut at a chunk's
        // boundary right after a batch is told from a whole one.
        if end + PAGE > self.allocated {
            let len = (end + PAGE).next_multiple_of(GROW_BY);
            self.grow_to(len)
                .map_err(|source| JournalError::Io { path: self.path.clone(), source })?;
        }
        let io_err = |source| JournalError::Io { path: self.path.clone(), source };
        self.file.write_at(&self.buf, self.offset).map_err(io_err)?;
        self.file.sync_data().map_err(io_err)?;
        self.offset = end;
        self.chain = chain;
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
        let zeros = vec![0u8; GROW_CHUNK as usize];
        let mut at = self.allocated;
        while at < len {
            let n = (len - at).min(zeros.len() as u64) as usize;
            self.file.write_at(&zeros[..n], at)?;
            at += n as u64;
        }
        self.file.sync_all()?;
        self.allocated = len;
        Ok(())
    }

    /// Marks the log empty after the last checkpoint of a clean close, so that the next open
    /// reads one header instead of every leftover; the redb file holds every record and
    /// says the log is not live, so a crash that loses this write loses nothing.
    pub(crate) fn clear(&mut self) -> io::Result<()> {
        self.offset = 0;
        // The header's second copy (with the first batch's) is left: a log the file says is
        // not live is read from its first copy only.
        if self.allocated >= GEN_HEADER as u64 {
            self.file.write_at(&[0u8; GEN_HEADER], 0)?;
        }
        Ok(())
    }

    /// Starts generation `generation` after a checkpoint: the redb file now holds every
    /// record, and says so durably with the new generation.
    pub(crate) fn restart(&mut self, generation: u64) {
        self.offset = 0;
        self.generation = generation;
    }
}

/// The largest payload a record holds; the writer checkpoints a larger batch instead.
pub(crate) const MAX_PAYLOAD: usize = u32::MAX as usize - REC_HEADER - GEN_HEADER - PAGE as usize;

/// Appends the encoding of one record of format 1 to `out` (tests build old logs with it).
#[cfg(test)]
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

/// Returns the contiguous run of valid records of format 1 of journal `journal_id` at the
/// start of a log of `len` bytes, which `read_at(offset, buf)` reads (`Ok(false)` past its
/// end). Format 1 stops at the first bad record, whatever follows.
fn read_legacy(
    len: u64,
    read_at: impl Fn(u64, &mut [u8]) -> io::Result<bool>,
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

/// Reads the records of a format-1 log held in memory, as [`read_legacy`] does a file.
#[cfg(test)]
fn read_bytes(bytes: &[u8], journal_id: u64) -> Vec<Record> {
    read_legacy(bytes.len() as u64, memory(bytes), journal_id).unwrap_or_default()
}

/// Reads a log held in memory.
#[cfg(test)]
fn memory(bytes: &[u8]) -> impl Fn(u64, &mut [u8]) -> io::Result<bool> + '_ {
    |at: u64, buf: &mut [u8]| {
        let start = at as usize;
        Ok(match bytes.get(start..start + buf.len()) {
            Some(part) => {
                buf.copy_from_slice(part);
                true
            }
            None => false,
        })
    }
}

/// Opens `path` for reading and writing, creating it if it is missing and keeping what it
/// holds (as redb's own `Builder::create` opens a database file). A file it creates (a new
/// journal, a new log) is its owner's only (mode 0600): a journal holds every run's inputs,
/// answers and tool results, and is read through `clio`, never by other users, whatever
/// the home folder's own mode.
pub(crate) fn open_read_write(path: &Path) -> io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    OpenOptions::new().read(true).write(true).create(true).truncate(false).mode(0o600).open(path)
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

    const GEN: u64 = 7;

    /// A log of generation `GEN` holding `payloads` from lsn `first`.
    fn generation_log(first: u64, payloads: &[Vec<u8>]) -> (Vec<u8>, Vec<usize>) {
        let mut bytes = Vec::new();
        let mut chain = encode_gen_header(&mut bytes, GEN_MAGIC, ID, GEN, first);
        let mut starts = Vec::new();
        for (i, p) in payloads.iter().enumerate() {
            starts.push(bytes.len());
            chain = encode_chained(&mut bytes, REC_MAGIC, ID, GEN, first + i as u64, chain, p);
        }
        (bytes, starts)
    }

    /// Pads a log with zeros to a whole chunk, as the writer grows it.
    fn padded(mut bytes: Vec<u8>) -> Vec<u8> {
        let len = (bytes.len() as u64).next_multiple_of(GROW_CHUNK);
        bytes.resize(len as usize, 0);
        bytes
    }

    fn expect(held: u64, live: bool) -> Expected {
        Expected { journal_id: ID, held, generation: Some(GEN), live }
    }

    fn read_mem(bytes: &[u8], expected: &Expected) -> Result<Vec<Record>> {
        let generation = expected.generation.unwrap_or(0);
        let mut mended = Vec::new();
        read_generation(
            Path::new("log"),
            bytes.len() as u64,
            memory(bytes),
            expected,
            generation,
            &mut mended,
        )
    }

    fn payloads() -> Vec<Vec<u8>> {
        (0..6u8).map(|i| vec![i; 40 + usize::from(i)]).collect()
    }

    #[test]
    fn a_whole_generation_reads_back_past_what_the_file_holds() {
        let (bytes, _) = generation_log(11, &payloads());
        let bytes = padded(bytes);
        let read = read_mem(&bytes, &expect(12, true)).unwrap();
        assert_eq!(read.iter().map(|r| r.lsn).collect::<Vec<_>>(), vec![13, 14, 15, 16]);
        assert_eq!(read[0].payload, payloads()[2]);
    }

    #[test]
    fn a_torn_last_record_is_dropped() {
        let (mut bytes, starts) = generation_log(1, &payloads());
        let last = *starts.last().unwrap();
        bytes.truncate(last + REC_HEADER + 5);
        let bytes = padded(bytes);
        let read = read_mem(&bytes, &expect(0, true)).unwrap();
        assert_eq!(read.len(), payloads().len() - 1);
    }

    #[test]
    fn a_bad_record_followed_by_a_valid_one_is_damage() {
        let (bytes, starts) = generation_log(1, &payloads());
        let mut bytes = padded(bytes);
        bytes[starts[2] + REC_HEADER + 3] ^= 0x10;
        let err = read_mem(&bytes, &expect(0, true)).unwrap_err().to_string();
        assert!(err.contains(&format!("offset {}", starts[2])), "{err}");
        assert!(err.contains("follows"), "{err}");
    }

    #[test]
    fn a_log_cut_short_is_damage_not_a_torn_tail() {
        let (bytes, starts) = generation_log(1, &payloads());
        for cut in [starts[3] + 2, starts[3] + REC_HEADER + 1, bytes.len() - 1] {
            let err = read_mem(&bytes[..cut], &expect(0, true)).unwrap_err().to_string();
            assert!(err.contains("cut short"), "{cut}: {err}");
        }
    }

    #[test]
    fn a_foreign_or_stale_or_missing_log_is_refused_when_one_is_due() {
        let (bytes, _) = generation_log(1, &payloads());
        let bytes = padded(bytes);
        let foreign = Expected { journal_id: ID + 1, ..expect(0, true) };
        assert!(read_mem(&bytes, &foreign).unwrap_err().to_string().contains("another journal"));
        let later = Expected { generation: Some(GEN + 2), ..expect(0, true) };
        assert!(read_mem(&bytes, &later).unwrap_err().to_string().contains("generation"));
        // The generation just before the expected one: everything it holds is in the file.
        let next = Expected { generation: Some(GEN + 1), ..expect(6, true) };
        assert!(read_mem(&bytes, &next).unwrap().is_empty());
        // Records missing between the file and the log.
        assert!(read_mem(&bytes, &Expected { held: 0, ..expect(0, true) }).is_ok());
        let (gap, _) = generation_log(5, &payloads());
        let gap = padded(gap);
        assert!(read_mem(&gap, &expect(2, true)).unwrap_err().to_string().contains("missing"));
        // An emptied log while one is due; a zeroed one after a clean close.
        assert!(read_mem(&[], &expect(0, true)).is_err());
        assert!(read_mem(&[], &expect(0, false)).unwrap().is_empty());
        assert!(read_mem(&padded(Vec::new()), &expect(0, false)).unwrap().is_empty());
        assert!(read_mem(&padded(vec![0]), &expect(0, true)).unwrap().is_empty());
    }

    proptest! {
        /// Flipped bytes and truncations anywhere in a generation: the read is refused, or it
        /// returns a prefix of the records that lacks at most the last one (a torn tail),
        /// never a changed record and never a shorter history with a valid record after it.
        #[test]
        fn damage_is_refused_or_reads_a_prefix(
            flip in any::<prop::sample::Index>(),
            bit in 0u8..8,
            cut in any::<Option<prop::sample::Index>>(),
        ) {
            let all = payloads();
            let (bytes, _) = generation_log(1, &all);
            let records = bytes.len();
            let mut bytes = padded(bytes);
            let at = flip.index(records);
            bytes[at] ^= 1 << bit;
            if let Some(cut) = cut {
                bytes.truncate(cut.index(bytes.len()));
            }
            if let Ok(read) = read_mem(&bytes, &expect(0, true)) {
                prop_assert!(read.len() + 1 >= all.len(), "{} of {} records", read.len(), all.len());
                for (i, r) in read.iter().enumerate() {
                    prop_assert_eq!(&r.payload, &all[i]);
                }
            }
        }
    }

    /// A log file in memory, shared with the test that reads it back.
    #[derive(Debug, Clone, Default)]
    struct MemLog(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

    impl MemLog {
        fn bytes(&self) -> Vec<u8> {
            self.0.lock().unwrap().clone()
        }
    }

    impl LogFile for MemLog {
        fn len(&self) -> io::Result<u64> {
            Ok(self.0.lock().unwrap().len() as u64)
        }

        fn read_at(&self, buf: &mut [u8], at: u64) -> io::Result<bool> {
            memory(&self.0.lock().unwrap())(at, buf)
        }

        fn write_at(&mut self, data: &[u8], at: u64) -> io::Result<()> {
            let mut bytes = self.0.lock().unwrap();
            let end = at as usize + data.len();
            if bytes.len() < end {
                bytes.resize(end, 0);
            }
            bytes[at as usize..end].copy_from_slice(data);
            Ok(())
        }

        fn sync_data(&mut self) -> io::Result<()> {
            Ok(())
        }

        fn sync_all(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    /// A paged log of generation `GEN` written by the writer, holding `payloads` from lsn
    /// `first`: its bytes, where each batch starts, and the flushes the writer made.
    fn paged_log(first: u64, payloads: &[Vec<u8>]) -> (Vec<u8>, Vec<u64>, u64) {
        let file = MemLog::default();
        let flushes = Flushes::default();
        let mut wal =
            Wal::with_file(Box::new(file.clone()), PathBuf::from("log"), ID, GEN, first, &flushes)
                .unwrap();
        wal.preallocate().unwrap();
        let mut starts = Vec::new();
        for p in payloads {
            starts.push(wal.offset);
            wal.append(p).unwrap();
        }
        (file.bytes(), starts, flushes.count())
    }

    fn read_log(bytes: &[u8], expected: &Expected) -> Result<LogRead> {
        read_all_from(
            &MemLog(std::sync::Arc::new(bytes.to_vec().into())),
            Path::new("log"),
            expected,
        )
    }

    fn sized_payloads(sizes: &[usize]) -> Vec<Vec<u8>> {
        sizes.iter().enumerate().map(|(i, n)| vec![i as u8 + 1; *n]).collect()
    }

    #[test]
    fn a_paged_log_puts_each_batch_on_its_own_pages_twice_with_one_flush() {
        let all = sized_payloads(&[10, 5000, 0, 300]);
        let (bytes, starts, flushes) = paged_log(1, &all);
        // One flush to grow the file, then one per batch.
        assert_eq!(flushes, 1 + all.len() as u64);
        assert_eq!(&bytes[..4], b"CLWP");
        assert!(starts.iter().all(|at| at % PAGE == 0), "{starts:?}");
        // The first batch (header and record) in one page, then its copy.
        assert_eq!(starts[1], 2 * PAGE);
        assert_eq!(bytes[..PAGE as usize / 2], bytes[PAGE as usize..PAGE as usize * 3 / 2]);
        // A 5,000-byte record takes two pages a copy.
        assert_eq!(starts[2], starts[1] + 4 * PAGE);
        let read = read_log(&bytes, &expect(0, true)).unwrap();
        assert_eq!(
            read.records.iter().map(|r| &r.payload).collect::<Vec<_>>(),
            all.iter().collect::<Vec<_>>()
        );
        assert!(read.mended.is_empty());
        // Past what the file holds.
        let read = read_log(&bytes, &expect(2, true)).unwrap();
        assert_eq!(read.records.iter().map(|r| r.lsn).collect::<Vec<_>>(), [3, 4]);
    }

    #[test]
    fn a_zeroed_page_of_an_earlier_batch_is_refused_with_its_offset() {
        let all = sized_payloads(&[100, 100, 100, 100, 100]);
        let (bytes, starts, _) = paged_log(1, &all);
        for (i, at) in starts.iter().enumerate().take(all.len() - 1) {
            for page in [*at, *at + PAGE] {
                let mut damaged = bytes.clone();
                damaged[page as usize..(page + PAGE) as usize].fill(0);
                let err = read_log(&damaged, &expect(0, true)).unwrap_err().to_string();
                assert!(err.contains(&format!("offset {page}")), "batch {i}, page {page}: {err}");
                assert!(err.contains("not whole"), "{err}");
            }
        }
    }

    #[test]
    fn one_damaged_copy_of_the_last_batch_is_read_past_and_both_are_a_torn_tail() {
        let all = sized_payloads(&[100, 100, 6000]);
        let (bytes, starts, _) = paged_log(1, &all);
        let last = starts[2];
        let second = last + 2 * PAGE;
        for (from, to, mended_at) in [(last, last + 1, last), (second + 40, second + 41, second)] {
            let mut damaged = bytes.clone();
            damaged[from as usize..to as usize].iter_mut().for_each(|b| *b ^= 0x10);
            let read = read_log(&damaged, &expect(0, true)).unwrap();
            assert_eq!(read.records.len(), 3);
            assert_eq!(read.records[2].payload, all[2]);
            assert_eq!(read.mended.len(), 1);
            assert_eq!(read.mended[0].damaged_at, mended_at);
        }
        // Both copies gone: a torn tail, the last record dropped.
        let mut torn = bytes.clone();
        torn[(last + 100) as usize..(second + 4 * PAGE) as usize].fill(0);
        let read = read_log(&torn, &expect(0, true)).unwrap();
        assert_eq!(read.records.len(), 2);
        // The first batch alone, its first copy (with the header) zeroed: read from the second.
        let (one, _, _) = paged_log(1, &all[..1]);
        let mut damaged = one.clone();
        damaged[..PAGE as usize].fill(0);
        let read = read_log(&damaged, &expect(0, true)).unwrap();
        assert_eq!(read.records.len(), 1);
        assert_eq!(read.mended[0].read_at, PAGE);
    }

    #[test]
    fn a_paged_log_cut_at_a_chunk_boundary_after_a_batch_is_refused() {
        // Batches of 8 KiB fill the first 64 KiB chunk exactly: cut there, the last batch
        // ends at the end of the file, where the writer always leaves a page of zeros.
        let all = sized_payloads(&[100; 10]);
        let (bytes, _, _) = paged_log(1, &all);
        let err = read_log(&bytes[..GROW_CHUNK as usize], &expect(0, true)).unwrap_err();
        assert!(err.to_string().contains("cut short"), "{err}");
    }

    /// A random damage to a paged log: where, and what.
    #[derive(Debug, Clone)]
    enum Damage {
        Flip { at: prop::sample::Index, bit: u8 },
        ZeroPage { page: prop::sample::Index },
        Truncate { at: prop::sample::Index },
    }

    fn damage() -> impl Strategy<Value = Damage> {
        prop_oneof![
            (any::<prop::sample::Index>(), 0u8..8).prop_map(|(at, bit)| Damage::Flip { at, bit }),
            any::<prop::sample::Index>().prop_map(|page| Damage::ZeroPage { page }),
            any::<prop::sample::Index>().prop_map(|at| Damage::Truncate { at }),
        ]
    }

    proptest! {
        /// Damage (a flipped bit, a zeroed 4 KiB page, a cut) anywhere before the log's
        /// last batch: the log reads exactly (the damage hit only padding) or is refused,
        /// never as a shorter history. The same damage inside the last batch reaches one of
        /// its copies only (or cuts the file): read exactly from the other, or refused.
        #[test]
        fn damage_before_the_last_batch_reads_exactly_or_is_refused(
            sizes in proptest::collection::vec(0usize..9000, 2..8),
            damage in damage(),
            in_last in any::<bool>(),
        ) {
            let all = sized_payloads(&sizes);
            let (bytes, starts, _) = paged_log(1, &all);
            let last = *starts.last().unwrap();
            let end = read_log(&bytes, &expect(0, true)).unwrap();
            prop_assert_eq!(end.records.len(), all.len());
            let span_end = last + 2 * ((if starts.len() == 1 { GEN_HEADER as u64 } else { 0 })
                + REC_HEADER as u64 + sizes[sizes.len() - 1] as u64).next_multiple_of(PAGE);
            let (from, to) = if in_last { (last, span_end) } else { (0, last) };
            let mut damaged = bytes.clone();
            match &damage {
                Damage::Flip { at, bit } => {
                    damaged[(from + at.index((to - from) as usize) as u64) as usize] ^= 1 << bit;
                }
                Damage::ZeroPage { page } => {
                    let p = from + page.index(((to - from) / PAGE) as usize) as u64 * PAGE;
                    damaged[p as usize..(p + PAGE) as usize].fill(0);
                }
                Damage::Truncate { at } => {
                    damaged.truncate((from + at.index((to - from) as usize) as u64) as usize);
                }
            }
            match read_log(&damaged, &expect(0, true)) {
                Ok(read) => {
                    // One bit or one page reaches one copy of one batch only: even in the
                    // last batch, the other copy is read.
                    prop_assert!(
                        read.records.len() == all.len(),
                        "{} of {} records after {damage:?}", read.records.len(), all.len()
                    );
                    for (r, p) in read.records.iter().zip(&all) {
                        prop_assert_eq!(&r.payload, p);
                    }
                }
                Err(err) => {
                    let text = err.to_string();
                    prop_assert!(matches!(err, JournalError::Corrupted { .. }), "{}", text);
                }
            }
        }
    }
}
