//! Logging: the `tracing` spans and events of the clio crates, written to stderr by
//! `tracing-subscriber`.
//!
//! Off by default except warnings of the clio crates. `-v` adds their info (a run's
//! start, resume and end), `-vv` their debug (each call's start and end), `-vvv` their
//! trace; `-q` leaves only errors. `RUST_LOG`, when set, is read as `EnvFilter`
//! directives in place of that default (`RUST_LOG=clio_flow=debug`, `RUST_LOG=debug` for
//! every crate), and `-v` adds its level for the clio crates on top. Only this crate
//! installs a subscriber; the libraries only emit.

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};

use tracing_subscriber::EnvFilter;
use tracing_subscriber::filter::LevelFilter;

/// The crates whose spans and events `-v` and `-q` govern, as `tracing` names targets.
const CLIO_CRATES: [&str; 9] = [
    "clio_cli",
    "clio_flow",
    "clio_journal",
    "clio_models",
    "clio_tools",
    "clio_team",
    "clio_plugins",
    "clio_workflow",
    "clio_spec",
];

/// Whether more than the default is logged (`-v`, or `RUST_LOG` set): progress on a
/// terminal is then drawn as plain lines, which log lines can come between, not as bars
/// that they would tear.
static ACTIVE: AtomicBool = AtomicBool::new(false);

/// Returns whether more than the default is logged.
pub(crate) fn active() -> bool {
    ACTIVE.load(Ordering::Relaxed)
}

/// How much the person asked to see: the count of `-v`, and `-q`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Verbosity {
    pub(crate) verbose: u8,
    pub(crate) quiet: bool,
}

impl Verbosity {
    /// Returns the level of the clio crates' events shown.
    fn level(self) -> LevelFilter {
        match (self.quiet, self.verbose) {
            (true, _) => LevelFilter::ERROR,
            (false, 0) => LevelFilter::WARN,
            (false, 1) => LevelFilter::INFO,
            (false, 2) => LevelFilter::DEBUG,
            (false, _) => LevelFilter::TRACE,
        }
    }
}

/// Installs the process's subscriber, writing to stderr, coloured when `color`; once per
/// process (a second call changes nothing). A `RUST_LOG` that does not parse is named in a
/// warning on `err` and left out.
pub(crate) fn init(verbosity: Verbosity, color: bool, err: &mut dyn Write) {
    let rust_log = std::env::var("RUST_LOG").ok().filter(|v| !v.trim().is_empty());
    ACTIVE.store(verbosity.verbose > 0 || rust_log.is_some(), Ordering::Relaxed);
    let filter = match rust_log.as_deref().map(EnvFilter::try_new) {
        Some(Ok(filter)) => {
            if verbosity.verbose > 0 || verbosity.quiet {
                with_clio_level(filter, verbosity.level())
            } else {
                filter
            }
        }
        Some(Err(error)) => {
            let _ = writeln!(
                err,
                "warning: RUST_LOG={}: {error}; it is ignored (write directives such as clio_flow=debug)",
                rust_log.unwrap_or_default()
            );
            default_filter(verbosity)
        }
        None => default_filter(verbosity),
    };
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(color)
        .try_init();
}

/// Returns the filter without `RUST_LOG`: the clio crates at the level asked, the rest off.
fn default_filter(verbosity: Verbosity) -> EnvFilter {
    with_clio_level(EnvFilter::new("off"), verbosity.level())
}

/// Returns `filter` with a directive for each clio crate at `level`.
fn with_clio_level(mut filter: EnvFilter, level: LevelFilter) -> EnvFilter {
    for krate in CLIO_CRATES {
        if let Ok(directive) = format!("{krate}={level}").parse() {
            filter = filter.add_directive(directive);
        }
    }
    filter
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_flag_sets_one_level() {
        let level = |verbose, quiet| Verbosity { verbose, quiet }.level();
        assert_eq!(level(0, false), LevelFilter::WARN);
        assert_eq!(level(1, false), LevelFilter::INFO);
        assert_eq!(level(2, false), LevelFilter::DEBUG);
        assert_eq!(level(5, false), LevelFilter::TRACE);
        assert_eq!(level(0, true), LevelFilter::ERROR);
        let filter = default_filter(Verbosity { verbose: 1, quiet: false }).to_string();
        assert!(filter.contains("clio_flow=info"), "{filter}");
        assert!(filter.contains("off"), "{filter}");
    }
}
