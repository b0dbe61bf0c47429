//! `$CLIO_HOME`: where the journal, the plugin store, the trust list and `config.toml`
//! live. Chosen by `--home`, else the `CLIO_HOME` variable, else `~/.clio`.

use std::path::{Path, PathBuf};

use anyhow::anyhow;
use clio_journal::{Journal, JournalConfig, JournalError};

use crate::error::{CliError, journal_error};

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
        let Some(path) = self.recorded_journal()? else { return Ok(None) };
        let journal = Journal::open(&path, JournalConfig::default()).map_err(journal_error)?;
        journal.reconcile::<&str>(&[]).map_err(journal_error)?;
        Ok(Some(journal))
    }
}

impl Home {
    /// Returns the journal's path when a journal exists there; a home this user may not
    /// look into is an error to report, not "no runs".
    fn recorded_journal(&self) -> Result<Option<std::path::PathBuf>, CliError> {
        let path = self.journal_path();
        let exists = path
            .try_exists()
            .map_err(|source| journal_error(JournalError::Io { path: path.clone(), source }))?;
        Ok(exists.then_some(path))
    }

    /// Opens the journal for reading only, modifying neither it nor its log (`runs list`,
    /// `show`, `tree`, `events`, `export`); `None` when no run was ever recorded. A journal
    /// a crash left with work to recover is recovered first (that is a write, of records
    /// already acknowledged). Nothing is reconciled: with the journal open here, work left
    /// running belongs to a process that is gone, and readers show it as interrupted
    /// ([`as_seen`]).
    pub(crate) fn reading_journal(&self) -> Result<Option<Journal>, CliError> {
        let Some(path) = self.recorded_journal()? else { return Ok(None) };
        let journal =
            Journal::open_read_only(&path, JournalConfig::default()).map_err(journal_error)?;
        Ok(Some(journal))
    }
}

/// Returns a run as a reader sees it: a run recorded running, whose process is gone (the
/// journal could be opened, so no process holds it), is interrupted.
pub(crate) fn as_seen(mut run: clio_journal::RunRecord) -> clio_journal::RunRecord {
    if run.status == clio_journal::RunStatus::Running {
        run.status = clio_journal::RunStatus::Interrupted;
    }
    run
}

/// Returns a task as a reader sees it (see [`as_seen`]): active work is interrupted.
pub(crate) fn task_as_seen(mut task: clio_journal::TaskRecord) -> clio_journal::TaskRecord {
    if task.status.is_active() {
        task.status = clio_journal::TaskStatus::Interrupted;
    }
    task
}
