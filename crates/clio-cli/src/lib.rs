//! The `clio` command: a thin composition of the CLIO crates.
//!
//! This is the only crate that reads argv, the environment or a TTY, and the only one
//! that prints. Arguments are parsed in two layers: clap's raw flags (`args.rs`), then the
//! commands (`commands/`) that turn them into library calls and render the results.
//!
//! Exit codes: 0 ok; 1 the thing checked is bad or the run failed; 2 usage; 130
//! interrupted (Ctrl-C); 255 an internal error; a closed stdout (a broken pipe) ends
//! quietly with 0. A command given `--json` that fails prints the error as JSON on stdout
//! too (docs/cli.md).

mod args;
mod commands;
mod config;
mod error;
mod home;
mod launch;
mod paint;
mod pin;
mod progress;
mod tasks;

use std::ffi::OsString;
use std::io::Write;
use std::process::ExitCode;

use clap::Parser;

pub use error::{CliError, ErrorKind};

/// Runs `clio` with the process's arguments and streams, returning its exit code.
pub fn main() -> ExitCode {
    let stdout = std::io::stdout();
    let stderr = std::io::stderr();
    let code = run(std::env::args_os(), &mut stdout.lock(), &mut stderr.lock());
    ExitCode::from(code)
}

/// Runs `clio` with `args` (the first is the program name), writing to `out` and `err`.
///
/// Returns the exit code. Tests call this directly.
pub fn run<I, T>(args: I, out: &mut dyn Write, err: &mut dyn Write) -> u8
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let cli = match args::Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(clap_error) => {
            // Help and version requests are successes printed on stdout.
            let rendered = clap_error.render().to_string();
            let code = match clap_error.kind() {
                clap::error::ErrorKind::DisplayHelp | clap::error::ErrorKind::DisplayVersion => {
                    let _ = write!(out, "{rendered}");
                    0
                }
                _ => {
                    let _ = write!(err, "{rendered}");
                    2
                }
            };
            return code;
        }
    };
    let json = cli.wants_json();
    let mut counted = Counted { inner: out, written: 0 };
    match commands::dispatch(cli, &mut counted, err) {
        Ok(()) => 0,
        Err(error) if error.is_broken_pipe() => 0,
        Err(error) => {
            // A program that asked for JSON gets the error as JSON on stdout too, unless
            // the command already printed its own JSON outcome there.
            if json && counted.written == 0 {
                let _ = commands::write_json(counted.inner, &error.to_json());
            }
            let _ = error.render(err);
            error.exit_code()
        }
    }
}

/// A writer that counts what goes through it, to know whether a command printed anything.
struct Counted<'a> {
    inner: &'a mut dyn Write,
    written: usize,
}

impl Write for Counted<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.written += n;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}
