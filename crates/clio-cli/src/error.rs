//! [`CliError`]: one error type for every command, classified so that the exit code and
//! the hints follow from what went wrong.
//!
//! Library errors become CLI errors through `From` impls, the one place each family is
//! classified: [`FlowError`], [`JournalError`] and the plugin store's errors. The library
//! error is kept as the source of the chain (never flattened into a string), so `render`
//! prints every cause as a `caused by:` line. Exit codes: 0 ok, 1 bad input or a failed
//! run, 2 usage, 130 interrupted, 255 internal only.
//!
//! Journal errors are classified in one place, [`JournalTrouble::of`]: what a person can
//! deal with (a damaged or foreign file, permissions, a full disk, a journal in use) exits
//! 1 with a message naming the file and hints saying what to do; only faults inside CLIO
//! or a failing machine exit 255.

use std::io::{self, Write};
use std::path::{Path, PathBuf};

use clio_flow::FlowError;
use clio_journal::JournalError;
use clio_plugins::{LoadError, StoreError};

/// Who is at fault, which decides the exit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// The input is bad (a file, a spec, a run): exit 1.
    User,
    /// The command line is wrong: exit 2.
    Usage,
    /// The person interrupted the command (Ctrl-C): exit 130, as shells expect.
    Interrupted,
    /// Something inside CLIO or the machine failed: exit 255.
    Internal,
}

/// An error from a `clio` command: what went wrong, its kind, and what to try next.
#[derive(Debug)]
pub struct CliError {
    /// Who is at fault.
    pub kind: ErrorKind,
    /// The error and its source chain.
    pub error: anyhow::Error,
    /// Suggestions printed after the error, such as the next command to run.
    pub hints: Vec<String>,
}

impl CliError {
    /// An error in the user's input.
    pub fn user(error: impl Into<anyhow::Error>) -> CliError {
        CliError { kind: ErrorKind::User, error: error.into(), hints: Vec::new() }
    }

    /// A mistake on the command line.
    pub fn usage(error: impl Into<anyhow::Error>) -> CliError {
        CliError { kind: ErrorKind::Usage, error: error.into(), hints: Vec::new() }
    }

    /// The command was interrupted by the person (Ctrl-C).
    pub fn interrupted(error: impl Into<anyhow::Error>) -> CliError {
        CliError { kind: ErrorKind::Interrupted, error: error.into(), hints: Vec::new() }
    }

    /// An internal error, such as a failed write to the terminal.
    pub fn internal(error: impl Into<anyhow::Error>) -> CliError {
        CliError { kind: ErrorKind::Internal, error: error.into(), hints: Vec::new() }
    }

    /// Wraps the error in `message`, keeping it as the cause: the message is printed
    /// first, the error under it as `caused by:`.
    pub fn context(mut self, message: impl std::fmt::Display + Send + Sync + 'static) -> CliError {
        self.error = self.error.context(message);
        self
    }

    /// Adds a hint printed after the error.
    pub fn hint(mut self, hint: impl Into<String>) -> CliError {
        self.hints.push(hint.into());
        self
    }

    /// Returns the process exit code for this error.
    pub fn exit_code(&self) -> u8 {
        match self.kind {
            ErrorKind::User => 1,
            ErrorKind::Usage => 2,
            ErrorKind::Interrupted => 130,
            ErrorKind::Internal => 255,
        }
    }

    /// Returns true when the error is a closed stdout, which is not worth reporting.
    pub fn is_broken_pipe(&self) -> bool {
        self.error.chain().any(|cause| {
            cause
                .downcast_ref::<std::io::Error>()
                .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
        })
    }

    /// Returns true when the error is a journal held by another process.
    pub(crate) fn is_journal_in_use(&self) -> bool {
        self.error.chain().any(|cause| {
            matches!(cause.downcast_ref::<JournalError>(), Some(JournalError::AlreadyOpen { .. }))
        })
    }

    /// Returns the error as JSON, as `--json` prints it on stdout when a command fails:
    /// `{"ok": false, "error": {"message", "causes", "hints", "exit_code"}}`.
    pub fn to_json(&self) -> serde_json::Value {
        let causes: Vec<String> = self.error.chain().skip(1).map(ToString::to_string).collect();
        serde_json::json!({
            "ok": false,
            "error": {
                "message": self.error.to_string(),
                "causes": causes,
                "hints": self.hints,
                "exit_code": self.exit_code(),
            }
        })
    }

    /// Writes the error, its causes and the hints.
    pub fn render(&self, err: &mut dyn Write) -> std::io::Result<()> {
        writeln!(err, "error: {}", self.error)?;
        for cause in self.error.chain().skip(1) {
            writeln!(err, "  caused by: {cause}")?;
        }
        for hint in &self.hints {
            writeln!(err, "hint: {hint}")?;
        }
        Ok(())
    }
}

impl From<std::io::Error> for CliError {
    fn from(error: std::io::Error) -> CliError {
        CliError::internal(error)
    }
}

impl From<JournalError> for CliError {
    fn from(error: JournalError) -> CliError {
        journal_error(error)
    }
}

impl From<FlowError> for CliError {
    /// Classifies a runtime error: journal trouble as the journal's own errors are, a
    /// call whose record cannot be confirmed as internal, everything else (a failed or
    /// refused call, an unknown target or run, a replay mismatch, bad options or
    /// answers) as the user's, with a hint where a person can act.
    fn from(error: FlowError) -> CliError {
        let (kind, hints) = match &error {
            FlowError::Journal(journal) => journal_advice(journal),
            FlowError::TaskStateUncertain { .. } => (ErrorKind::Internal, Vec::new()),
            FlowError::FlowNotTrusted { .. } => (
                ErrorKind::User,
                vec![
                    "trust the plugin with the command above, or run without --no-input to be asked"
                        .to_owned(),
                ],
            ),
            FlowError::FlowTargetUnknown { .. } => (
                ErrorKind::User,
                vec![
                    "pass the plugin that provides it with --plugin DIR, or install it".to_owned(),
                ],
            ),
            _ => (ErrorKind::User, Vec::new()),
        };
        CliError { kind, error: anyhow::Error::new(error), hints }
    }
}

impl From<StoreError> for CliError {
    /// Classifies a plugin store error: a file the person can fix (permissions, a full
    /// disk, a damaged record, a plugin not listed or installed) is theirs; another I/O
    /// failure is the machine's.
    fn from(error: StoreError) -> CliError {
        let kind = match &error {
            StoreError::Io { source, .. } => io_kind(source),
            _ => ErrorKind::User,
        };
        CliError { kind, error: anyhow::Error::new(error), hints: Vec::new() }
    }
}

impl From<LoadError> for CliError {
    /// A plugin folder that does not load is bad input.
    fn from(error: LoadError) -> CliError {
        CliError::user(error)
    }
}

/// Returns the class of an I/O error on a file a person named or owns: access, space and
/// missing files are theirs to fix; anything else is the machine's.
fn io_kind(error: &io::Error) -> ErrorKind {
    match error.kind() {
        io::ErrorKind::PermissionDenied
        | io::ErrorKind::ReadOnlyFilesystem
        | io::ErrorKind::NotFound
        | io::ErrorKind::IsADirectory
        | io::ErrorKind::NotADirectory
        | io::ErrorKind::StorageFull
        | io::ErrorKind::QuotaExceeded
        | io::ErrorKind::InvalidData => ErrorKind::User,
        _ => ErrorKind::Internal,
    }
}

/// What kind of trouble a journal error is, which decides its exit code and its advice.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum JournalTrouble {
    /// Another process has the journal open.
    InUse,
    /// The journal was written by a newer build.
    Newer,
    /// The journal or its log is damaged (crash recovery cannot repair it).
    Damaged,
    /// What is at the journal's place is not a journal: a foreign file, a file cut short
    /// before a journal's first bytes, a folder.
    NotAJournal,
    /// The system refused access: permissions or owner, or a read-only file system.
    Access,
    /// The disk, or the user's quota, is full.
    Full,
    /// The run asked for does not exist.
    NoSuchRun,
    /// The command asked for something the journal cannot do as given.
    Usage,
    /// The journal's PostgreSQL server could not be reached, or the connection to it was
    /// lost, for longer than the reconnect window: down, restarting or failing over, which
    /// a person can see to (exit 1, not an internal fault).
    Unavailable,
    /// A fault inside CLIO or the machine (a failing device, a broken invariant).
    Internal,
}

impl JournalTrouble {
    /// Classifies `error`: the one place where a journal error is sorted into what a
    /// person can deal with and what is an internal fault.
    pub(crate) fn of(error: &JournalError) -> JournalTrouble {
        match error {
            JournalError::AlreadyOpen { .. } => JournalTrouble::InUse,
            JournalError::UpgradeRequired { .. } => JournalTrouble::Newer,
            JournalError::Corrupted { .. } | JournalError::Damaged { .. } => {
                JournalTrouble::Damaged
            }
            JournalError::NotAJournal { .. } => JournalTrouble::NotAJournal,
            // A salvage given a destination that exists, a write to a journal opened for
            // reading: the person's to fix, nothing is damaged.
            JournalError::DestinationExists { .. } | JournalError::ReadOnly { .. } => {
                JournalTrouble::Usage
            }
            JournalError::RunNotFound { .. } => JournalTrouble::NoSuchRun,
            JournalError::Backend { .. } if clio_postgres::is_unavailable(error) => {
                JournalTrouble::Unavailable
            }
            JournalError::Io { source, .. } => match source.kind() {
                io::ErrorKind::PermissionDenied | io::ErrorKind::ReadOnlyFilesystem => {
                    JournalTrouble::Access
                }
                io::ErrorKind::StorageFull
                | io::ErrorKind::QuotaExceeded
                | io::ErrorKind::FileTooLarge => JournalTrouble::Full,
                // A folder where the journal file should be.
                io::ErrorKind::IsADirectory => JournalTrouble::NotAJournal,
                _ => JournalTrouble::Internal,
            },
            _ => JournalTrouble::Internal,
        }
    }

    /// Returns the exit-code class of the trouble.
    pub(crate) fn kind(self) -> ErrorKind {
        match self {
            JournalTrouble::Internal => ErrorKind::Internal,
            _ => ErrorKind::User,
        }
    }
}

/// Turns a journal error into a CLI error: its class decides the exit code, and the hints
/// name the file and say what to do.
pub(crate) fn journal_error(error: JournalError) -> CliError {
    let (kind, hints) = journal_advice(&error);
    CliError { kind, error: error.into(), hints }
}

/// Returns the exit-code class of `error` and the hints for it.
pub(crate) fn journal_advice(error: &JournalError) -> (ErrorKind, Vec<String>) {
    let trouble = JournalTrouble::of(error);
    let hints = match (trouble, error_path(error)) {
        (JournalTrouble::InUse, _) => vec![
            "another clio process is using this journal; while it drives a run, `clio runs` commands (list, show, tree, events, answer, cancel, …) work from here, served by it; for anything else wait for it, or use --home to pick another home"
                .to_owned(),
        ],
        (JournalTrouble::Damaged, Some(path)) => {
            let (journal, wal) = journal_files(path);
            vec![
                "`clio journal check` says what is damaged and what can still be read; `clio journal salvage OUT` copies the runs that still read whole into a new journal".to_owned(),
                format!(
                    "restore {} and {} together from a copy, or move both away (keep them) and clio starts a new, empty journal",
                    journal.display(),
                    wal.display()
                ),
            ]
        }
        (JournalTrouble::NotAJournal, Some(path)) if path.is_dir() => vec![format!(
            "{} is a folder where the journal file should be: move it away and clio starts a new journal there, or use --home to pick another home",
            path.display()
        )],
        (JournalTrouble::NotAJournal, Some(path)) => {
            let (journal, wal) = journal_files(path);
            let size = std::fs::metadata(path).map(|m| format!(" ({} bytes)", m.len()));
            vec![
                format!(
                    "if {}{} should be your journal, it was overwritten or cut short: restore it and {} together from a copy (`clio journal check` says what can still be read)",
                    journal.display(),
                    size.unwrap_or_default(),
                    wal.display()
                ),
                "if it is something else, move it away and clio starts a new journal there, or use --home to pick another home"
                    .to_owned(),
            ]
        }
        (JournalTrouble::Access, Some(path)) => {
            let folder = folder_of(path);
            vec![format!(
                "check the owner and permissions of {} and of its folder {}: this user must be able to read and write both (`ls -ld {} {}`); a journal made by another user, or with sudo, is theirs: `chown` it back, or use --home to pick a home of your own",
                path.display(),
                folder.display(),
                folder.display(),
                path.display()
            )]
        }
        (JournalTrouble::Unavailable, _) => {
            let server = match error {
                JournalError::Backend { location, .. } => location.display().to_string(),
                _ => "the journal's database".to_owned(),
            };
            vec![format!(
                "the PostgreSQL server of {server} cannot be reached: it may be restarting or failing over; once it is up, run the command again (commands wait for it up to `reconnect_secs` of `[postgres]` in config.toml, or $CLIO_POSTGRES_RECONNECT_SECS; 30 s by default)"
            )]
        }
        (JournalTrouble::Full, Some(path)) => vec![format!(
            "the disk or quota holding {} is full: free some space and run the command again; what the journal acknowledged is kept",
            folder_of(path).display()
        )],
        _ => Vec::new(),
    };
    (trouble.kind(), hints)
}

/// Returns the file a journal error names, if it names one.
fn error_path(error: &JournalError) -> Option<&Path> {
    match error {
        JournalError::UpgradeRequired { path, .. }
        | JournalError::NotAJournal { path }
        | JournalError::Corrupted { path, .. }
        | JournalError::Damaged { path, .. }
        | JournalError::AlreadyOpen { path, .. }
        | JournalError::Io { path, .. }
        | JournalError::Storage { path, .. }
        | JournalError::WriterStopped { path } => Some(path),
        _ => None,
    }
}

/// Returns the journal file and its write-ahead log for `path`, which names either: they
/// are one journal, restored or moved together.
fn journal_files(path: &Path) -> (PathBuf, PathBuf) {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    match name.strip_suffix("-wal") {
        Some(journal) => (path.with_file_name(journal), path.to_path_buf()),
        None => (path.to_path_buf(), path.with_file_name(format!("{name}-wal"))),
    }
}

/// Returns the folder `path` is in (`.` for a bare file name).
fn folder_of(path: &Path) -> &Path {
    path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn io(kind: io::ErrorKind) -> JournalError {
        JournalError::Io { path: PathBuf::from("/h/journal.redb"), source: io::Error::from(kind) }
    }

    #[test]
    fn each_journal_error_falls_in_its_class() {
        let path = || PathBuf::from("/h/journal.redb");
        let cases = [
            (JournalError::AlreadyOpen { path: path(), holder: None }, JournalTrouble::InUse),
            (
                JournalError::UpgradeRequired { path: path(), found: 9, supported: 2 },
                JournalTrouble::Newer,
            ),
            (JournalError::Corrupted { path: path(), detail: "x".into() }, JournalTrouble::Damaged),
            (JournalError::NotAJournal { path: path() }, JournalTrouble::NotAJournal),
            (io(io::ErrorKind::IsADirectory), JournalTrouble::NotAJournal),
            (io(io::ErrorKind::PermissionDenied), JournalTrouble::Access),
            (io(io::ErrorKind::ReadOnlyFilesystem), JournalTrouble::Access),
            (io(io::ErrorKind::StorageFull), JournalTrouble::Full),
            (io(io::ErrorKind::QuotaExceeded), JournalTrouble::Full),
            (JournalError::RunNotFound { run: clio_journal::RunId(3) }, JournalTrouble::NoSuchRun),
            (io(io::ErrorKind::Other), JournalTrouble::Internal),
            (io(io::ErrorKind::NotFound), JournalTrouble::Internal),
            (JournalError::WriterStopped { path: path() }, JournalTrouble::Internal),
            (
                JournalError::TaskNotFound { task: clio_journal::TaskId(1) },
                JournalTrouble::Internal,
            ),
            (
                JournalError::Backend {
                    location: PathBuf::from("postgres://clio@db/clio"),
                    detail: "SELECT...: syntax error (42601)".into(),
                },
                JournalTrouble::Internal,
            ),
        ];
        for (error, trouble) in cases {
            assert_eq!(JournalTrouble::of(&error), trouble, "{error:?}");
            let cli = journal_error(error);
            let code = if trouble == JournalTrouble::Internal { 255 } else { 1 };
            assert_eq!(cli.exit_code(), code, "{trouble:?}");
        }
    }

    #[test]
    fn each_flow_error_falls_in_its_class_and_keeps_its_cause() {
        use std::sync::Arc;

        let journal = |error: JournalError| FlowError::Journal(Arc::new(error));
        let cases = [
            (FlowError::CallFailed { handle: None, message: "boom".into() }, 1),
            (FlowError::RunNotFound { run: clio_journal::RunId(9) }, 1),
            (FlowError::FlowTargetUnknown { target: "nosuch".into() }, 1),
            (
                journal(JournalError::AlreadyOpen {
                    path: PathBuf::from("/h/journal.redb"),
                    holder: None,
                }),
                1,
            ),
            (journal(io(io::ErrorKind::Other)), 255),
        ];
        for (error, code) in cases {
            let text = error.to_string();
            let cli = CliError::from(error);
            assert_eq!(cli.exit_code(), code, "{text}");
            assert_eq!(cli.error.to_string(), text, "the message is the error's own");
        }
        // Journal trouble inside a flow error: the whole chain down to the I/O error is
        // kept, with the journal's hints.
        let cli = CliError::from(journal(io(io::ErrorKind::StorageFull)));
        let causes: Vec<String> = cli.error.chain().map(ToString::to_string).collect();
        assert_eq!(
            causes,
            ["journal error", "journal /h/journal.redb: i/o error", "no storage space"]
        );
        assert!(cli.hints[0].contains("is full"), "{:?}", cli.hints);
        // A failed run reads as such, over its cause.
        let failed = CliError::from(FlowError::CallFailed { handle: None, message: "boom".into() })
            .context("run 3 failed");
        let mut rendered = Vec::new();
        failed.render(&mut rendered).unwrap();
        assert_eq!(
            String::from_utf8(rendered).unwrap(),
            "error: run 3 failed\n  caused by: call failed: boom\n"
        );
    }

    #[test]
    fn what_a_person_can_fix_names_the_file_and_what_to_do() {
        let damaged = JournalError::Corrupted {
            path: PathBuf::from("/h/journal.redb-wal"),
            detail: "the log continues from record 9".into(),
        };
        let (_, hints) = journal_advice(&damaged);
        assert!(hints[0].contains("clio journal check"), "{hints:?}");
        assert!(hints[1].contains("/h/journal.redb and /h/journal.redb-wal"), "{hints:?}");

        let (_, hints) = journal_advice(&io(io::ErrorKind::PermissionDenied));
        assert!(hints[0].contains("ls -ld /h /h/journal.redb"), "{hints:?}");

        let (_, hints) = journal_advice(&io(io::ErrorKind::StorageFull));
        assert!(hints[0].contains("holding /h is full"), "{hints:?}");

        let missing = JournalError::NotAJournal { path: PathBuf::from("/nowhere/journal.redb") };
        let (kind, hints) = journal_advice(&missing);
        assert_eq!(kind, ErrorKind::User);
        assert!(hints[0].starts_with("if /nowhere/journal.redb should be your"), "{hints:?}");
        assert!(hints[1].contains("move it away"), "{hints:?}");
    }

    #[test]
    fn a_log_path_names_its_journal_and_a_journal_path_its_log() {
        let (journal, wal) = journal_files(Path::new("/h/journal.redb"));
        assert_eq!(
            (journal.to_str(), wal.to_str()),
            (Some("/h/journal.redb"), Some("/h/journal.redb-wal"))
        );
        let (journal, wal) = journal_files(Path::new("/h/journal.redb-wal"));
        assert_eq!(
            (journal.to_str(), wal.to_str()),
            (Some("/h/journal.redb"), Some("/h/journal.redb-wal"))
        );
    }

    #[test]
    fn a_database_that_cannot_be_reached_exits_1_naming_it_and_that_it_may_be_restarting() {
        let down = JournalError::Backend {
            location: PathBuf::from("postgres://clio:***@db:5432/clio"),
            detail: "cannot connect: the server cannot be reached (tried for 30 s): error connecting to server: Connection refused (os error 111)".into(),
        };
        assert_eq!(JournalTrouble::of(&down), JournalTrouble::Unavailable);
        let cli = journal_error(down);
        assert_eq!(cli.exit_code(), 1);
        assert!(cli.hints[0].contains("postgres://clio:***@db:5432/clio"), "{:?}", cli.hints);
        assert!(cli.hints[0].contains("may be restarting"), "{:?}", cli.hints);
        let lost = JournalError::Backend {
            location: PathBuf::from("postgres://db/clio"),
            detail: "lost the connection to the server (COMMIT; the write may or may not be stored): connection closed".into(),
        };
        assert_eq!(CliError::from(FlowError::Journal(std::sync::Arc::new(lost))).exit_code(), 1);
    }
}
