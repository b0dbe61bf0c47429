//! The durable journal of CLIO runs on one redb file (SPEC §5): runs, tasks, per-run
//! entries, subagent sessions and the format version. A file journal keeps a write-ahead
//! log beside it (`<file>-wal`), through which a durable batch costs one small flush; the
//! two files are one journal.
//!
//! [`Journal`] is the handle. Writes ([`Journal::append`], [`Journal::create_task`], ...) go
//! to one writer thread that group-commits whatever is waiting into one transaction, so N
//! appends that arrive together cost one fsync; with [`Durability::Immediate`] (the default)
//! a write returns only once it is on disk. Reads ([`Journal::entries`],
//! [`Journal::entry_by_identity`], ...) run on the caller's thread against a snapshot and
//! never block the writer. The stored records ([`JournalEntry`], [`RunRecord`],
//! [`TaskRecord`], [`SessionRecord`]) are the on-disk format, described in
//! `docs/journal-format.md`; [`FORMAT_VERSION`] guards it.
//!
//! Invariants:
//! - a process killed at any moment leaves a file that opens and holds a prefix of the
//!   writes, including every acknowledged one;
//! - a run's entries have dense sequence numbers from 0, and an identity names at most one
//!   entry of a run;
//! - a file of a newer format is refused and never modified;
//! - a record changed on disk is refused with [`JournalError::Damaged`] naming its table and
//!   key, never read back changed (each carries a checksum of its table, key and JSON), and
//!   no panic of the storage engine crosses the API.
//!
//! [`Journal::check`] and [`Journal::salvage`] read a damaged file without writing to it:
//! the first lists every problem, the second copies the runs that still read whole into a new
//! journal.
//!
//! What it deliberately does not do: it depends on no async runtime (the hot writes have a
//! [`Journal::nonblocking`] form whose [`Pending`] an async caller awaits on any executor;
//! reads are sync and async callers run them with `spawn_blocking`), it knows nothing of
//! flows or replay rules, it reads no environment or home folder, and no
//! redb type appears in its API, so that a second backend can come later.

mod backend;
mod changes;
mod check;
mod checksum;
#[cfg(feature = "conformance")]
pub mod conformance;
mod error;
mod flushes;
mod format;
mod guard;
mod handle;
mod input;
mod journal;
mod overlay;
mod pending;
mod redo;
mod salvage;
mod source;
mod store;
mod upgrade;
mod wal;
mod writer;

#[cfg(test)]
mod fault;

pub use crate::backend::{
    CommitNotices, EndedTaskUpdate, JournalBackend, Lease, PendingReply, pending_ready,
    pending_reply, records,
};
pub use crate::changes::{Changed, Changes};
pub use crate::check::{CheckReport, Problem, RecordCounts, StorageCheck};
pub use crate::error::{JournalError, Result};
pub use crate::format::{
    EntryKind, ExportLine, FORMAT_VERSION, JournalEntry, RawEntry, RunId, RunRecord, RunStatus,
    SessionId, SessionRecord, SessionStatus, TaskId, TaskKind, TaskRecord, TaskStatus,
};
pub use crate::handle::{Journal, NonBlocking};
pub use crate::input::{
    Durability, JournalConfig, NewEntry, NewRun, NewSession, NewTask, Pruned, Reconciled,
    RunFilter, RunUpdate, SessionUpdate, TaskUpdate,
};
pub use crate::pending::{AwaitHook, Pending, spin_for_awaited_write, watching_writes};
pub use crate::salvage::{LeftRun, LeftSession, LostTask, SalvageReport, SalvagedRun};

/// The crate README's example, run as a doctest so that it cannot go stale.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
