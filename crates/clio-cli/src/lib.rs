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
mod drivers;
mod error;
mod home;
mod input;
mod launch;
mod launch_input;
mod log;
mod paint;
mod pin;
mod progress;
mod serve;
mod shared;
mod suggest;
mod tasks;

use std::ffi::OsString;
use std::io::{IsTerminal, Write};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::Parser;

pub use error::{CliError, ErrorKind};

/// Runs `clio` with the process's arguments and streams, returning its exit code.
pub fn main() -> ExitCode {
    // The streams are locked per write, not for the whole command: the log's writer, on
    // the runtime's threads, writes to stderr too.
    let code = run(std::env::args_os(), &mut std::io::stdout(), &mut std::io::stderr());
    ExitCode::from(code)
}

/// Runs `clio` with `args` (the first is the program name), writing to `out` and `err`.
///
/// Returns the exit code. Tests call this directly. A `runs` command that finds the
/// journal held by another `clio` process is run by that process (`serve.rs`).
pub fn run<I, T>(args: I, out: &mut dyn Write, err: &mut dyn Write) -> u8
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let argv: Vec<OsString> = args.into_iter().map(Into::into).collect();
    let mut cli = match parse(argv.clone(), out, err) {
        Ok(cli) => cli,
        Err(code) => return code,
    };
    if let args::Command::Runs(args::RunsCommand::Events(events)) = &cli.command
        && events.follow
        && events.from.is_none()
    {
        return follow_events(&argv, out, err);
    }
    let verbosity = log::Verbosity { verbose: cli.verbose, quiet: cli.quiet };
    let color = paint::Paint::new(cli.color, std::io::stderr().is_terminal()).enabled();
    log::init(verbosity, color, err);
    let client = Client::of(&cli, &argv);
    if let Some(client) = &client
        && let Some(code) = client.forward(out, err)
    {
        return code;
    }
    // A detached run is submitted to `clio serve`, or, on a shared journal, left to its
    // workers; else not at all.
    let shared = home::Home::locate(cli.home.as_deref(), cli.journal.as_deref())
        .is_ok_and(|h| h.shared_journal().is_some());
    if cli.detached() && !shared {
        let error = CliError::user(anyhow::anyhow!(
            "--detach submits the run to `clio serve`, and no `clio serve` holds this journal"
        ))
        .hint("start `clio serve` (in another terminal, or in the background), then submit the run again; without --detach the run is driven here");
        let json = cli.wants_json();
        let mut counted = Counted { inner: out, written: 0 };
        return outcome(Err(error), json, &mut counted, err);
    }
    let json = cli.wants_json();
    let context = suggest::Context::of(&cli);
    let mut counted = Counted { inner: out, written: 0 };
    // The journal may be held by a short command (another `runs list`) or by a process
    // not serving yet (it is starting its run): wait a little for it to let go or serve.
    let home = cli.home.clone();
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let result = commands::dispatch(cli, &mut counted, err).map_err(|e| context.improve(e));
        let in_use = matches!(&result, Err(error) if error.is_journal_in_use());
        if !in_use || counted.written > 0 || Instant::now() >= deadline {
            return outcome(result, json, &mut counted, err);
        }
        match &client {
            Some(client) => {
                if let Some(code) = client.forward(counted.inner, err) {
                    return code;
                }
            }
            // A process that serves the journal holds it for as long as its run lasts:
            // a command it does not serve fails at once, saying what works meanwhile.
            None => {
                let located = home::Home::locate(home.as_deref(), None).ok();
                if let Some(located) = located.filter(serve::is_served) {
                    // A run started here while a process serves the journal: say what works.
                    let hint = context.drives_a_run.then(|| suggest::served_run_hint(&located));
                    let result = match (result, hint.flatten()) {
                        (Err(mut error), Some(hint)) => {
                            error.hints.insert(0, hint);
                            Err(error)
                        }
                        (result, _) => result,
                    };
                    return outcome(result, json, &mut counted, err);
                }
            }
        }
        std::thread::sleep(Duration::from_millis(50));
        cli = match parse(argv.clone(), counted.inner, err) {
            Ok(cli) => cli,
            Err(code) => return code,
        };
    }
}

/// How often `runs events --follow` reads the run's new events.
const FOLLOW_EVERY: Duration = Duration::from_millis(250);

/// Runs `clio runs events N --follow`: reads the run's events from where the last read
/// ended (`--from SEQ`, each read run here or by the process that holds the journal, as
/// any `runs` command is) and prints them as they come, until the run has ended.
fn follow_events(argv: &[OsString], out: &mut dyn Write, err: &mut dyn Write) -> u8 {
    let mut from = 0u64;
    loop {
        let mut read: Vec<OsString> = argv.iter().filter(|a| *a != "--follow").cloned().collect();
        read.extend(["--from".into(), from.to_string().into()]);
        let mut text = Vec::new();
        let code = run(read, &mut text, err);
        if code != 0 {
            let _ = out.write_all(&text);
            return code;
        }
        let text = String::from_utf8_lossy(&text);
        let (header, rest) = text.split_once('\n').unwrap_or((&text, ""));
        let header: serde_json::Value = serde_json::from_str(header).unwrap_or_default();
        if out.write_all(rest.as_bytes()).and_then(|()| out.flush()).is_err() {
            // A closed stdout (the reader went away) ends the command quietly.
            return 0;
        }
        from = header["next"].as_u64().unwrap_or(from);
        if header["ended"].as_bool() != Some(false) {
            return 0;
        }
        std::thread::sleep(FOLLOW_EVERY);
    }
}

/// Runs the command `argv` names for another process, with `home` lending this process's
/// journal and runtime (`serve.rs`), writing to `out` and `err`; returns the exit code.
pub(crate) fn run_served(
    argv: &[String],
    home: &home::Home,
    tty: bool,
    cwd: Option<&std::path::Path>,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> u8 {
    let mut cli = match parse(argv.iter().map(OsString::from).collect(), out, err) {
        Ok(cli) => cli,
        Err(code) => return code,
    };
    let submits = cli.detached() && home.held().is_some_and(|h| h.drivers.is_some());
    if !commands::servable(&cli) || (cli.detached() && !submits) {
        let error = CliError::usage(anyhow::anyhow!(
            "the process holding the journal serves only `clio runs` commands{}",
            if cli.detached() {
                ": it drives a run of its own, and only `clio serve` takes runs with --detach"
            } else {
                ""
            }
        ));
        let _ = error.render(err);
        return error.exit_code();
    }
    if let Some(cwd) = cwd {
        cli.resolve_paths(cwd);
    }
    let json = cli.wants_json();
    let paint = paint::Paint::new(cli.color, tty);
    let mut counted = Counted { inner: out, written: 0 };
    let result = commands::dispatch_in(cli, home, paint, &mut counted, err);
    outcome(result, json, &mut counted, err)
}

/// Parses the command line; `Err` holds the exit code of a help, version or usage
/// request, already printed. A usage error of a command line that asks for JSON
/// (`--json` before any `--`) is printed as JSON on stdout too, as every other failure of
/// such a command is.
fn parse(argv: Vec<OsString>, out: &mut dyn Write, err: &mut dyn Write) -> Result<args::Cli, u8> {
    let json = asks_for_json(&argv);
    match args::Cli::try_parse_from(argv) {
        Ok(cli) => Ok(cli),
        Err(clap_error) => {
            // Help and version requests are successes printed on stdout.
            let rendered = clap_error.render().to_string();
            let code = match clap_error.kind() {
                clap::error::ErrorKind::DisplayHelp | clap::error::ErrorKind::DisplayVersion => {
                    let _ = write!(out, "{rendered}");
                    0
                }
                _ => {
                    if json {
                        let _ = commands::write_json(out, &usage_json(&clap_error));
                    }
                    let _ = write!(err, "{rendered}");
                    2
                }
            };
            Err(code)
        }
    }
}

/// Whether a command line asks for JSON: `--json` among its words, before any `--`.
fn asks_for_json(argv: &[OsString]) -> bool {
    argv.iter().skip(1).take_while(|a| *a != "--").any(|a| a == "--json")
}

/// Returns a usage error of clap as `--json` prints errors: `{"ok": false, "error":
/// {"message", "causes", "hints", "exit_code": 2, "kind": "usage"}}`, the message its
/// first line, the hints its tips and usage line.
fn usage_json(error: &clap::Error) -> serde_json::Value {
    let text = error.render().to_string();
    let mut lines = text.lines().map(str::trim).filter(|l| !l.is_empty());
    let message = lines.next().unwrap_or("").trim_start_matches("error: ").to_owned();
    let hints: Vec<String> = lines
        .filter(|l| !l.starts_with("For more information"))
        .map(|l| l.trim_start_matches("tip: ").to_owned())
        .collect();
    serde_json::json!({
        "ok": false,
        "error": {
            "message": message,
            "causes": [],
            "hints": hints,
            "exit_code": 2,
            "kind": "usage",
        }
    })
}

/// Prints a command's error, if any, and returns its exit code.
fn outcome(
    result: Result<(), CliError>,
    json: bool,
    counted: &mut Counted<'_>,
    err: &mut dyn Write,
) -> u8 {
    match result {
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

/// A command that the process holding the journal would run for this one.
struct Client {
    home: home::Home,
    argv: Vec<String>,
}

impl Client {
    /// Returns the client of a servable command line; `None` for any other (or a command
    /// line that is not UTF-8, which runs here).
    fn of(cli: &args::Cli, argv: &[OsString]) -> Option<Client> {
        if !commands::servable(cli) {
            return None;
        }
        let home = home::Home::locate(cli.home.as_deref(), cli.journal.as_deref()).ok()?;
        // A shared journal is opened by every process itself: nobody serves it.
        if home.shared_journal().is_some() {
            return None;
        }
        let argv = argv.iter().map(|a| a.to_str().map(str::to_owned)).collect::<Option<_>>()?;
        Some(Client { home, argv })
    }

    /// Has the journal's owner run the command and prints what it printed; `None` when no
    /// process serves the journal.
    fn forward(&self, out: &mut dyn Write, err: &mut dyn Write) -> Option<u8> {
        let tty = std::io::stderr().is_terminal();
        let reply = serve::forward(&self.home, &self.argv, tty)?;
        let _ = out.write_all(reply.stdout.as_bytes());
        let _ = out.flush();
        let _ = err.write_all(reply.stderr.as_bytes());
        Some(reply.exit)
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
