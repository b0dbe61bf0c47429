//! The journal contract's suite (`clio_journal::conformance`) on the embedded redb journal:
//! each case on a fresh file in a temporary folder.

use clio_journal::{Journal, JournalConfig};

fn fresh() -> Journal {
    let dir = tempfile::tempdir().expect("a temporary folder");
    // The folder is left behind (each case is small) so the journal outlives this call.
    let path = dir.keep().join("journal.redb");
    Journal::open(&path, JournalConfig::default()).expect("a fresh journal opens")
}

clio_journal::journal_conformance!(fresh, Journal::clone);
