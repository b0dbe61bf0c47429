//! The journal contract's suite, unchanged, on PostgreSQL: a second handle is a second
//! connection pool on the same database, as another process would open.

use clio_journal::Journal;

fn another(journal: &Journal) -> Journal {
    crate::support::open(&journal.path().to_string_lossy())
}

clio_journal::journal_conformance!(crate::support::fresh_journal, another);
