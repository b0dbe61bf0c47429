//! [`CliError`]: one error type for every command, classified so that the exit code and
//! the hints follow from what went wrong.

use std::io::Write;

/// Who is at fault, which decides the exit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// The input is bad (a file, a spec, a run): exit 1.
    User,
    /// The command line is wrong: exit 2.
    Usage,
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

    /// An internal error, such as a failed write to the terminal.
    pub fn internal(error: impl Into<anyhow::Error>) -> CliError {
        CliError { kind: ErrorKind::Internal, error: error.into(), hints: Vec::new() }
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
