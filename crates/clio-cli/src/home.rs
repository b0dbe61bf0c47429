//! `$CLIO_HOME`: where the journal, the plugin store, the trust list and `config.toml`
//! live. Chosen by `--home`, else the `CLIO_HOME` variable, else `~/.clio`.

use std::path::{Path, PathBuf};

use anyhow::anyhow;
use clio_journal::{Journal, JournalConfig};

use crate::error::CliError;

/// The CLIO home folder of this invocation.
#[derive(Debug, Clone)]
pub(crate) struct Home {
    root: PathBuf,
}

impl Home {
    /// Finds the home folder from the flag, the environment or the user's home.
    pub(crate) fn locate(flag: Option<&Path>) -> Result<Home, CliError> {
        if let Some(path) = flag {
            return Ok(Home { root: path.to_path_buf() });
        }
        if let Some(path) = std::env::var_os("CLIO_HOME").filter(|v| !v.is_empty()) {
            return Ok(Home { root: PathBuf::from(path) });
        }
        match std::env::var_os("HOME").filter(|v| !v.is_empty()) {
            Some(home) => Ok(Home { root: PathBuf::from(home).join(".clio") }),
            None => Err(CliError::usage(anyhow!("cannot find a home folder: HOME is not set"))
                .hint("pass --home DIR or set CLIO_HOME")),
        }
    }

    /// Returns the home folder itself.
    pub(crate) fn root(&self) -> &Path {
        &self.root
    }

    /// Returns the path of the journal file.
    pub(crate) fn journal_path(&self) -> PathBuf {
        self.root.join("journal.redb")
    }

    /// Opens the journal for reading and maintenance; `None` when no run was ever recorded.
    ///
    /// Work a killed process left running is marked interrupted first, so that `runs list`
    /// and `runs show` tell the truth after a SIGKILL: the journal is locked by this
    /// process, so whoever left it running is gone.
    pub(crate) fn existing_journal(&self) -> Result<Option<Journal>, CliError> {
        let path = self.journal_path();
        if !path.exists() {
            return Ok(None);
        }
        let journal = Journal::open(&path, JournalConfig::default()).map_err(journal_error)?;
        journal.reconcile::<&str>(&[]).map_err(journal_error)?;
        Ok(Some(journal))
    }
}

/// Classifies a journal error: a file in use, not a journal, of a newer format or damaged
/// is the user's to deal with (exit 1); storage failures are internal.
pub(crate) fn journal_error(error: clio_journal::JournalError) -> CliError {
    use clio_journal::JournalError as E;
    match &error {
        E::AlreadyOpen { .. } => CliError::user(error)
            .hint("another clio process is using this journal; wait for it, or use --home to pick another"),
        E::NotAJournal { .. }
        | E::UpgradeRequired { .. }
        | E::RunNotFound { .. }
        | E::DestinationExists { .. } => CliError::user(error),
        // A damaged file is the user's to deal with: the check says what is damaged, a
        // salvage copies what still reads (the damage error itself says so).
        E::Damaged { path, .. } => {
            let hint = format!(
                "to go on with a salvaged journal: move {} (and its -wal) aside, keep them, and put the salvaged file in its place",
                path.display()
            );
            CliError::user(error).hint(hint)
        }
        E::Corrupted { path, .. } => {
            let hint = format!(
                "the journal at {} is damaged: `clio journal check` says where, `clio journal salvage OUT` copies the runs that still read whole; or move it aside to start a new one (keep the damaged copy)",
                path.display()
            );
            CliError::user(error).hint(hint)
        }
        _ => CliError::internal(error),
    }
}
