//! `$CLIO_HOME`: where the journal, the plugin store, the trust list and `config.toml`
//! live. Chosen by `--home`, else the `CLIO_HOME` variable, else `~/.clio`.
//!
//! A command the journal's owner serves for another process (`crate::serve`) runs with a
//! home that holds the owner's open journal and runtime ([`Held`]): it opens nothing, and
//! what the journal records running is live in the owner, not interrupted.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::anyhow;
use clio_journal::{Journal, JournalConfig, JournalError};

use crate::error::{CliError, ErrorKind, journal_error};

/// The CLIO home folder of this invocation.
#[derive(Debug, Clone)]
pub(crate) struct Home {
    root: PathBuf,
    /// The owner's open journal and runtime, when the command is served (`crate::serve`).
    held: Option<Arc<Held>>,
    /// The shared journal this home uses instead of its file (`--journal URL`, else
    /// `journal = "postgres://…"` in config.toml): a PostgreSQL database many processes
    /// open at once, whose running work is live in some worker.
    shared: Option<String>,
}

/// What the process that holds the journal lends to the commands it serves.
#[derive(Debug)]
pub(crate) struct Held {
    /// The journal this process holds.
    pub(crate) journal: Journal,
    /// The runtime that drives this process's run: answers and cancellations go through
    /// it, so that the live run hears of them at once.
    pub(crate) runtime: clio_flow::Runtime,
    /// The run this process drives; none for `clio serve`.
    pub(crate) run: Option<clio_journal::RunId>,
    /// The runs `clio serve` drives, each on the runtime it was launched with; none in a
    /// process that drives its own run.
    pub(crate) drivers: Option<Arc<crate::drivers::Drivers>>,
}

impl Held {
    /// Returns the runtime that drives run `run` in this process, if one does: an answer
    /// or a cancel given to it reaches the live run at once.
    pub(crate) fn runtime_of(&self, run: clio_journal::RunId) -> Option<clio_flow::Runtime> {
        if self.run == Some(run) {
            return Some(self.runtime.clone());
        }
        self.drivers.as_ref().and_then(|d| d.runtime_of(run))
    }
}

impl Home {
    /// Finds the home folder from the flag, the environment or the user's home, and the
    /// journal it uses: `journal` (the `--journal` flag) when given, else config.toml's
    /// `journal`, else its own file.
    pub(crate) fn locate(flag: Option<&Path>, journal: Option<&str>) -> Result<Home, CliError> {
        if let Some(path) = flag {
            return Home { root: path.to_path_buf(), held: None, shared: None }.sharing(journal);
        }
        if let Some(path) = std::env::var_os("CLIO_HOME").filter(|v| !v.is_empty()) {
            return Home { root: PathBuf::from(path), held: None, shared: None }.sharing(journal);
        }
        match std::env::var_os("HOME").filter(|v| !v.is_empty()) {
            Some(home) => {
                Home { root: PathBuf::from(home).join(".clio"), held: None, shared: None }
                    .sharing(journal)
            }
            None => Err(CliError::usage(anyhow!("cannot find a home folder: HOME is not set"))
                .hint("pass --home DIR or set CLIO_HOME")),
        }
    }

    /// Returns this home using the shared journal `flag` names, else the one its
    /// config.toml names, else its file.
    ///
    /// The URL is checked before anything connects: one that is not a PostgreSQL URL, does
    /// not parse or names no host is refused at once, as a usage error for `--journal` and
    /// as the person's error naming config.toml and its `journal` field (exit 1).
    fn sharing(mut self, flag: Option<&str>) -> Result<Home, CliError> {
        if let Some(url) = flag {
            if let Err(problem) = check_journal_url(url) {
                return Err(CliError::usage(anyhow!(
                    "journal {:?} {problem}: a shared journal is postgres://USER@HOST:PORT/DB",
                    clio_postgres::redacted(url)
                ))
                .hint("leave --journal out to use the journal file of the home folder"));
            }
            self.shared = Some(url.to_owned());
            return Ok(self);
        }
        let Some((url, path)) = journal_setting(&self.root)? else { return Ok(self) };
        if let Err(problem) = check_journal_url(&url) {
            return Err(CliError::user(anyhow!(
                "{}: journal = {:?} {problem}: a shared journal is postgres://USER@HOST:PORT/DB",
                path.display(),
                clio_postgres::redacted(&url)
            ))
            .hint(format!(
                "fix `journal` in {}, or remove it to use the journal file of the home folder",
                path.display()
            )));
        }
        self.shared = Some(url);
        Ok(self)
    }

    /// Returns the URL of the shared journal this home uses, if it uses one.
    pub(crate) fn shared_journal(&self) -> Option<&str> {
        self.shared.as_deref()
    }

    /// Opens the shared journal this home uses, if it uses one.
    fn open_shared(&self) -> Result<Option<Journal>, CliError> {
        let Some(url) = &self.shared else { return Ok(None) };
        let config = crate::shared::config(&self.root, url)?;
        clio_postgres::open(&config).map(Some).map_err(|error| {
            journal_error(error).hint("check that the server runs and the URL names its database")
        })
    }

    /// Returns this home lending `held` to the commands run with it: the journal is not
    /// opened again, and runs recorded running are live.
    pub(crate) fn holding(&self, held: Arc<Held>) -> Home {
        Home { root: self.root.clone(), held: Some(held), shared: self.shared.clone() }
    }

    /// Returns what the owner lends, when the command is served.
    pub(crate) fn held(&self) -> Option<&Held> {
        self.held.as_deref()
    }

    /// Returns the path of the endpoint the journal's owner listens on.
    pub(crate) fn socket_path(&self) -> PathBuf {
        self.root.join("clio.sock")
    }

    /// Returns a run as this command sees it: see [`as_seen`]; in a served command the run
    /// is as recorded, since whatever is recorded running is live in this process.
    pub(crate) fn seen(&self, run: clio_journal::RunRecord) -> clio_journal::RunRecord {
        if self.held.is_some() || self.shared.is_some() { run } else { as_seen(run) }
    }

    /// Returns a task as a reader sees it (see [`Home::seen`]).
    pub(crate) fn task_seen(&self, task: clio_journal::TaskRecord) -> clio_journal::TaskRecord {
        if self.held.is_some() || self.shared.is_some() { task } else { task_as_seen(task) }
    }

    /// Returns the home folder itself.
    pub(crate) fn root(&self) -> &Path {
        &self.root
    }

    /// Returns where the journal is: its file, or the shared journal's URL without its
    /// password.
    pub(crate) fn journal_path(&self) -> PathBuf {
        match &self.shared {
            Some(url) => PathBuf::from(clio_postgres::redacted(url)),
            None => self.root.join("journal.redb"),
        }
    }

    /// Opens the journal for reading and maintenance; `None` when no run was ever recorded.
    ///
    /// Work a killed process left running is marked interrupted first, so that `runs list`
    /// and `runs show` tell the truth after a SIGKILL: the journal is locked by this
    /// process, so whoever left it running is gone.
    pub(crate) fn existing_journal(&self) -> Result<Option<Journal>, CliError> {
        // Served: the owner's work is live, nothing to reconcile.
        if let Some(held) = &self.held {
            return Ok(Some(held.journal.clone()));
        }
        // Shared: what is recorded running is live in some worker.
        if let Some(journal) = self.open_shared().map_err(|e| self.refused_setting(e))? {
            return Ok(Some(journal));
        }
        let Some(path) = self.recorded_journal()? else { return Ok(None) };
        let journal = Journal::open(&path, JournalConfig::default()).map_err(journal_error)?;
        journal.reconcile::<&str>(&[]).map_err(journal_error)?;
        Ok(Some(journal))
    }
}

impl Home {
    /// Opens the journal this home uses for a command that writes (creating the file if
    /// needed): the shared one as it is, else the file, marking what a process other than
    /// `owner` (this one) left running as interrupted (the file is locked by this process,
    /// so whoever left it running is gone).
    pub(crate) fn writable_journal(&self, owner: &str) -> Result<Journal, CliError> {
        if let Some(journal) = self.open_shared().map_err(|e| self.refused_setting(e))? {
            return Ok(journal);
        }
        if let Err(error) = std::fs::create_dir_all(&self.root) {
            let denied = error.kind() == std::io::ErrorKind::PermissionDenied;
            let cli = CliError::user(
                anyhow!(error).context(format!("cannot create {}", self.root.display())),
            );
            return Err(if denied {
                cli.hint("check the owner and permissions of its parent folder, or use --home to pick a home of your own")
            } else {
                cli
            });
        }
        let journal =
            Journal::open(self.journal_path(), JournalConfig::default()).map_err(journal_error)?;
        journal.reconcile(&[owner]).map_err(journal_error)?;
        Ok(journal)
    }

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
        if let Some(held) = &self.held {
            return Ok(Some(held.journal.clone()));
        }
        if let Some(journal) = self.open_shared().map_err(|e| self.refused_setting(e))? {
            return Ok(Some(journal));
        }
        let Some(path) = self.recorded_journal()? else { return Ok(None) };
        let journal =
            Journal::open_read_only(&path, JournalConfig::default()).map_err(journal_error)?;
        Ok(Some(journal))
    }
}

impl Home {
    /// Returns `error` as the setting's mistake when the shared journal's server refused
    /// what the URL asks for (a database or user it does not know, a password it does not
    /// take): exit 1, naming where the URL was set (config.toml's `journal`, or
    /// `--journal`), not an internal fault. Any other error is returned as it is.
    fn refused_setting(&self, error: CliError) -> CliError {
        let refused = error.error.chain().any(|cause| {
            matches!(
                cause.downcast_ref::<JournalError>(),
                Some(JournalError::Backend { detail, .. }) if detail.starts_with("cannot connect")
            )
        });
        if !refused || error.kind != ErrorKind::Internal {
            return error;
        }
        let from_config = match (journal_setting(&self.root), &self.shared) {
            (Ok(Some((url, path))), Some(used)) if url == *used => Some(path),
            _ => None,
        };
        let hint = match from_config {
            Some(path) => format!(
                "the server refused what `journal` in {} names: check its user, password and database",
                path.display()
            ),
            None => "the server refused what the --journal URL names: check its user, password and database".to_owned(),
        };
        CliError { kind: ErrorKind::User, ..error }.hint(hint)
    }
}

/// Returns a run as a reader that opened the journal itself sees it: a run recorded running, whose process is gone (the
/// journal could be opened, so no process holds it), is interrupted.
fn as_seen(mut run: clio_journal::RunRecord) -> clio_journal::RunRecord {
    if run.status == clio_journal::RunStatus::Running {
        run.status = clio_journal::RunStatus::Interrupted;
    }
    run
}

/// Returns a task as a reader sees it (see [`as_seen`]): active work is interrupted.
fn task_as_seen(mut task: clio_journal::TaskRecord) -> clio_journal::TaskRecord {
    if task.status.is_active() {
        task.status = clio_journal::TaskStatus::Interrupted;
    }
    task
}

/// Returns the shared journal `root`'s config.toml names (`journal = "postgres://…"`), if
/// it names one, with the file; the file's other settings are read, and checked, by
/// `HomeConfig::load`.
fn journal_setting(root: &Path) -> Result<Option<(String, PathBuf)>, CliError> {
    let path = root.join("config.toml");
    let Some(text) = crate::input::read_if_present(&path)? else { return Ok(None) };
    // A file that is not TOML names no journal; the command that reads the file's other
    // settings reports what is wrong with it, with its line and field.
    let Ok(table) = toml::from_str::<toml::Table>(&text) else { return Ok(None) };
    match table.get("journal") {
        None => Ok(None),
        Some(toml::Value::String(url)) => Ok(Some((url.clone(), path))),
        Some(other) => Err(CliError::user(anyhow!(
            "{}: journal: expected a string (postgres://USER@HOST:PORT/DB), found {}",
            path.display(),
            other.type_str()
        ))
        .hint(format!(
            "write `journal = \"postgres://USER@HOST:PORT/DB\"` in {}, or remove it to use the journal file of the home folder",
            path.display()
        ))),
    }
}

/// Says what makes `url` unusable as a shared journal's URL, if anything: it is not a
/// PostgreSQL URL, it does not parse as the driver reads it, or it names no host.
fn check_journal_url(url: &str) -> Result<(), String> {
    if !clio_postgres::is_postgres_url(url) {
        return Err("is not a PostgreSQL URL".to_owned());
    }
    let config: postgres::Config =
        url.parse().map_err(|error| format!("does not parse as a PostgreSQL URL ({error})"))?;
    if config.get_hosts().is_empty() && config.get_hostaddrs().is_empty() {
        return Err("names no host".to_owned());
    }
    Ok(())
}
