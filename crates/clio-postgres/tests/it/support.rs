//! Journals on the test server, each test on a database of its own.

use clio_journal::Journal;
use clio_postgres::PostgresConfig;
pub(crate) use clio_postgres::test_server::fresh_database;

/// Opens a journal on a fresh database.
pub(crate) fn fresh_journal() -> Journal {
    open(&fresh_database())
}

/// Opens the journal at `url` (a second handle on the same database, say).
pub(crate) fn open(url: &str) -> Journal {
    let config = PostgresConfig { connections: 2, ..PostgresConfig::new(url) };
    clio_postgres::open(&config).unwrap_or_else(|err| panic!("cannot open {url}: {err}"))
}
