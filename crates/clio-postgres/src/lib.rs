//! The PostgreSQL journal of CLIO runs: the second backend of the journal's contract
//! ([`clio_journal::JournalBackend`]), for a team whose runs outgrow one machine. Any number
//! of processes, on any machines, open one database; workers claim runnable runs with a
//! lease, renew it while they work and give it up when the run ends or waits on a person.
//!
//! [`open`] connects, creates or migrates the schema (a newer schema is refused with
//! [`JournalError::UpgradeRequired`], as a newer redb file is) and returns a
//! [`clio_journal::Journal`], so that everything above the journal runs on it unchanged.
//!
//! Invariants, beside the contract's (which `clio_journal::conformance` checks):
//! - every write into a run this handle holds a lease on checks, in its own transaction,
//!   that the lease's epoch is still the run's: a worker that stalled past its lease and
//!   woke up after another worker claimed the run is refused with
//!   [`JournalError::Fenced`] and writes nothing; so is every write of a subagent session
//!   of that run ([`clio_journal::SessionRecord::run`]: its creation, a change, a claimed
//!   iteration), the error naming the session, and a claim gives the run's sessions to
//!   the worker that claimed it;
//! - a run's entries are numbered under a lock on the run's row, so writers on many
//!   machines still get dense numbers and one entry per identity;
//! - each commit is announced (`NOTIFY clio_changes`), so a view or a waiting run in any
//!   process reads again when something changed;
//! - the writes into one run that wait together for a connection (a gather's calls) are
//!   one transaction, each write checked as it would be alone (one refused leaves the
//!   others), and the entries and tasks among them reach the server in a few statements
//!   whatever their number ([`PostgresConfig::group_writes`]; [`open_counted`] counts the
//!   round trips).
//!
//! What it deliberately does not do: it exposes no async API (its connections live on
//! threads of its own, so a caller on any executor, or none, can use it), and it leaves
//! a session of no run (a team no run leads) unfenced.

mod lease;
mod pool;
mod schema;
mod store;
#[cfg(feature = "test-server")]
pub mod test_server;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

pub use clio_journal::{Journal, JournalError, Result};

pub use crate::pool::Traffic;
pub use crate::schema::SCHEMA_VERSION;

/// How a PostgreSQL journal is opened.
#[derive(Debug, Clone)]
pub struct PostgresConfig {
    /// The connection string: a URL (`postgres://user:password@host:port/db`) or
    /// `key=value` pairs, as libpq takes them.
    pub url: String,
    /// How many connections run the journal's operations at once (each on its own thread).
    pub connections: usize,
    /// How long a lease lasts before another worker may claim its run, unless renewed.
    pub lease: Duration,
    /// How long an operation waits for a server it cannot reach (one restarting or
    /// failing over), trying again with backoff, before it fails with an error
    /// [`is_unavailable`] recognises. Zero tries once.
    pub reconnect: Duration,
    /// Whether the writes into a run that wait together for a connection are written
    /// together, in a few statements whatever their number, and the updates of the tasks
    /// this handle made join their run's batch (the default). Off, each write of a batch
    /// is written on its own in a savepoint of the batch's transaction, a round trip per
    /// statement, and each task's update in a transaction of its own, as before: for
    /// measuring what grouping saves (`docs/performance.md`).
    pub group_writes: bool,
}

/// The reconnect window of [`PostgresConfig::new`]: long enough to ride out a restart or a
/// failover of the server, short enough that a person waiting on a command is told.
pub const DEFAULT_RECONNECT: Duration = Duration::from_secs(30);

impl PostgresConfig {
    /// A configuration for `url` with the defaults: 4 connections, a 10 s lease, a
    /// server that cannot be reached waited for up to [`DEFAULT_RECONNECT`], and writes
    /// grouped.
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            connections: 4,
            lease: Duration::from_secs(10),
            reconnect: DEFAULT_RECONNECT,
            group_writes: true,
        }
    }
}

/// Returns whether `error` says the journal's database could not be reached, or the
/// connection to it was lost, after its reconnect window: trouble of the server (down,
/// restarting, failing over, unreachable), not of the journal or of CLIO.
pub fn is_unavailable(error: &JournalError) -> bool {
    match error {
        JournalError::Backend { detail, .. } => {
            detail.starts_with(pool::UNREACHABLE) || detail.starts_with(pool::LOST)
        }
        _ => false,
    }
}

/// Returns whether `text` names a PostgreSQL journal (a `postgres://` or `postgresql://`
/// URL) rather than a journal file.
pub fn is_postgres_url(text: &str) -> bool {
    text.starts_with("postgres://") || text.starts_with("postgresql://")
}

/// Returns `url` without its password, for messages and logs.
pub fn redacted(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else { return url.to_owned() };
    let Some((userinfo, host)) = rest.split_once('@') else { return url.to_owned() };
    match userinfo.split_once(':') {
        Some((user, _)) => format!("{scheme}://{user}:***@{host}"),
        None => url.to_owned(),
    }
}

/// Connects to the database `config` names, creates or migrates the journal's schema, and
/// returns the journal.
///
/// A database whose schema is newer than this build's is refused with
/// [`JournalError::UpgradeRequired`] and left as it is; a server that cannot be reached is
/// [`JournalError::Backend`] naming the URL (without its password).
pub fn open(config: &PostgresConfig) -> Result<Journal> {
    let location = PathBuf::from(redacted(&config.url));
    let store = store::PgStore::connect(config, location)?;
    Ok(Journal::from_backend(Arc::new(store)))
}

/// Opens the journal as [`open`] does, with the count of the round trips its connections
/// make to the server and of their commits ([`Traffic`]): a bench or a test reads what a
/// write costs.
pub fn open_counted(config: &PostgresConfig) -> Result<(Journal, Traffic)> {
    let location = PathBuf::from(redacted(&config.url));
    let store = store::PgStore::connect(config, location)?;
    let traffic = store.traffic();
    Ok((Journal::from_backend(Arc::new(store)), traffic))
}

/// Opens the journal at `url` with the default configuration.
pub fn open_url(url: &str) -> Result<Journal> {
    open(&PostgresConfig::new(url))
}

/// The crate README's example, run as a doctest so that it cannot go stale.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_url_loses_its_password_and_nothing_else() {
        assert_eq!(
            redacted("postgres://ann:s3cret@db:5432/clio"),
            "postgres://ann:***@db:5432/clio"
        );
        assert_eq!(redacted("postgres://ann@db/clio"), "postgres://ann@db/clio");
        assert_eq!(redacted("host=db user=ann"), "host=db user=ann");
    }

    #[test]
    fn only_postgres_urls_name_a_database() {
        assert!(is_postgres_url("postgres://db/clio"));
        assert!(is_postgres_url("postgresql://db/clio"));
        assert!(!is_postgres_url("/home/ann/.clio/journal.redb"));
        assert!(!is_postgres_url("journal.redb"));
    }
}
