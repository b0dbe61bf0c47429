//! `clio worker`: claims the runnable runs of a shared journal and drives them, as many at
//! once as `--concurrency` allows, each on the runtime it was launched with (the drivers of
//! `clio serve`). The journal's leases do the rest: a run is claimed by one worker at a
//! time, renewed while it is driven, given up when it ends or waits on a person, and lost by
//! a worker that stops renewing it, whose later writes into the run are then refused.
//!
//! A worker stops driving a run whose lease it no longer holds (another worker claimed it
//! after a stall) or that was cancelled elsewhere; it never marks others' work interrupted:
//! the worker that claims a run next does that for the run alone.
//!
//! A worker rides out its database: while the server restarts or fails over, the journal
//! waits for it (for its reconnect window, `crate::shared`), and a drive goes on where its
//! lease still holds (no other worker claimed the run meanwhile). A drive that ends without
//! stopping its run (a write refused, or a connection lost for longer than the window)
//! gives its claim up at once, so that the run goes back to being claimable, by this
//! worker too, rather than staying `running` with nobody driving it; the next claim marks
//! what it left active interrupted, and a side effect cut short is reported, never redone.
//! Trouble with the database is a warning in the worker's log, never its end.
//!
//! Other processes steer the runs a worker drives through the journal: a cancel is the
//! run's status (`supervise` stops the drive), a stop of a model's turn is a
//! `stop_requested` event appended to the run, which the worker reads when the commit's
//! notice wakes it, acts on and answers with a `stop_done` event (`super::stop`).

use std::collections::HashMap;
use std::io::Write;
use std::time::{Duration, Instant};

use anyhow::{Context, anyhow};
use clio_journal::{Journal, RunId, RunStatus};

use super::run::{Driving, driving, serve_drive, tokio_runtime};
use super::stop::StopRequests;
use crate::args::WorkerArgs;
use crate::drivers::Drivers;
use crate::error::CliError;
use crate::home::Home;
use crate::launch::open_journal;
use crate::pin::OnAgentChange;

/// How often a worker looks for runs and checks the ones it drives when nothing wakes it.
const POLL: Duration = Duration::from_millis(250);

/// The least time between two reads of the stop requests of the runs a worker drives.
const STOP_GAP: Duration = Duration::from_millis(100);

/// Runs the worker until Ctrl-C or SIGTERM (or, with `--exit-when-idle`, until nothing was
/// runnable for that long).
pub(super) fn work(home: &Home, args: &WorkerArgs, err: &mut dyn Write) -> Result<(), CliError> {
    let Some(url) = home.shared_journal() else {
        return Err(CliError::usage(anyhow!(
            "a worker needs a shared journal: this home uses the journal file {}",
            home.journal_path().display()
        ))
        .hint("pass --journal postgres://USER@HOST:PORT/DB, or set journal = \"postgres://…\" in config.toml (docs/deploy.md)"));
    };
    if !(args.lease.is_finite() && args.lease >= 0.1) {
        return Err(CliError::usage(anyhow!(
            "--lease {}: a lease lasts at least 0.1 seconds",
            args.lease
        )));
    }
    let lease = Duration::from_secs_f64(args.lease);
    let name = args.name.clone().unwrap_or_else(default_name);
    let rt = tokio_runtime()?;
    let journal = open_journal(home)?;
    let Driving { served, drivers, mut reports, .. } =
        driving(home, &journal, name.clone(), rt.handle());
    writeln!(
        err,
        "worker {name} on {}: claims up to {} run(s) at a time with a {}s lease; Ctrl-C stops it",
        clio_postgres::redacted(url),
        args.concurrency,
        args.lease
    )?;
    let (mut interrupt, mut terminate) = {
        let _entered = rt.enter();
        use tokio::signal::unix::{SignalKind, signal};
        let interrupt = signal(SignalKind::interrupt()).context("cannot listen for Ctrl-C");
        let terminate = signal(SignalKind::terminate()).context("cannot listen for SIGTERM");
        (interrupt.map_err(CliError::internal)?, terminate.map_err(CliError::internal)?)
    };
    let mut changes = journal.changes();
    let mut idle_since = Instant::now();
    let mut claimed = 0u64;
    // The runs this worker claimed, and for those it could not drive, since when: their
    // claims are given up once their drives end (see `give_up_ended`).
    let mut mine: HashMap<RunId, Option<Instant>> = HashMap::new();
    // The `runs stop` requests of other processes (`clio serve`'s API, say) reach the runs
    // driven here through the journal.
    let mut stops = StopRequests::default();
    let mut last_scan = Instant::now();
    loop {
        while drivers.n_live() < args.concurrency as usize {
            let got = match journal.claim_run(&name, lease) {
                Ok(Some(got)) => got,
                Ok(None) => break,
                // The database may refuse one claim (a deadlock it broke, a connection it
                // dropped): the worker says so and looks again, rather than stopping.
                Err(error) => {
                    writeln!(err, "warning: cannot claim a run now: {error}; trying again")?;
                    break;
                }
            };
            claimed += 1;
            mine.insert(got.run, None);
            // Stop requests appended to the run from now on are this drive's.
            if let Err(error) = stops.watch(&journal, got.run) {
                let error = format!("{:#}", error.error);
                writeln!(
                    err,
                    "warning: run {}: cannot read its stop requests now: {error}",
                    got.run.0
                )?;
            }
            let mut note = Vec::new();
            match serve_drive(
                &served,
                &drivers,
                got.run,
                OnAgentChange::from_flag(false, true),
                &mut note,
            ) {
                Ok(_) => {
                    writeln!(err, "claimed run {} (lease epoch {})", got.run.0, got.epoch)?;
                    err.write_all(&note)?;
                }
                Err(error) => {
                    // Left to lapse rather than released: another worker tries it once the
                    // lease is up, not in a loop that claims it again at once.
                    journal.stop_renewing(got.run);
                    mine.insert(got.run, Some(Instant::now()));
                    writeln!(err, "warning: claimed run {} but cannot drive it:", got.run.0)?;
                    error.render(err)?;
                }
            }
        }
        supervise(&journal, &drivers, err)?;
        stops.forget(|run| drivers.is_live(run));
        // At most every `STOP_GAP`: a busy fleet's commits wake the loop far more often,
        // and the loop wakes again within `POLL` anyway.
        let scan = last_scan.elapsed() >= STOP_GAP;
        if scan {
            last_scan = Instant::now();
        }
        match if scan {
            stops.serve(&journal, |run| drivers.runtime_of(run))
        } else {
            Ok(Vec::new())
        } {
            Ok(said) => {
                for line in said {
                    writeln!(err, "{line}")?;
                }
            }
            Err(error) => writeln!(
                err,
                "warning: cannot serve stop requests now: {:#}; trying again",
                error.error
            )?,
        }
        give_up_ended(&journal, &drivers, &mut mine, lease, err)?;
        if drivers.n_live() > 0 {
            idle_since = Instant::now();
        } else if let Some(idle) = args.exit_when_idle
            && idle_since.elapsed().as_secs_f64() >= idle
        {
            break;
        }
        let stop = rt.block_on(async {
            tokio::select! {
                _ = interrupt.recv() => true,
                _ = terminate.recv() => true,
                Some(report) = reports.recv() => {
                    let _ = write!(err, "{report}");
                    false
                }
                () = changes.changed() => false,
                () = tokio::time::sleep(POLL) => false,
            }
        });
        if stop {
            break;
        }
    }
    let live = drivers.live_runs();
    // The drives in flight stop with the process; their leases go when the journal handle
    // does, and the next worker to claim each run marks what this one left interrupted.
    rt.shutdown_timeout(Duration::from_secs(5));
    // Read after the shutdown: a drive that just ended writes its report on a blocking
    // thread, which the shutdown waits for.
    while let Ok(report) = reports.try_recv() {
        write!(err, "{report}")?;
    }
    for run in &live {
        // A database that is away now would make each give-up wait its window: the
        // first failure leaves the rest to lapse after their lease.
        if let Err(error) = journal.release_run(*run) {
            writeln!(
                err,
                "warning: cannot give the claims up now ({error}); they lapse after their lease"
            )?;
            break;
        }
    }
    writeln!(
        err,
        "worker {name} stopped: it claimed {claimed} run(s); {} in progress go to the next worker",
        live.len()
    )?;
    Ok(())
}

/// Gives up the claims of this worker's runs whose drives have ended while the run still
/// holds its lease here: a drive that stopped on an error (a write refused, the database
/// gone for longer than the reconnect window) left its run `running`, which no one would
/// drive while this worker renews the lease. Given up, the run is claimable again at once;
/// a run this worker could not drive at all lapses first (a lease period), so that a run
/// that cannot be driven here is not claimed again in a loop.
fn give_up_ended(
    journal: &Journal,
    drivers: &Drivers,
    mine: &mut HashMap<RunId, Option<Instant>>,
    lease: Duration,
    err: &mut dyn Write,
) -> Result<(), CliError> {
    let ended: Vec<(RunId, Option<Instant>)> = mine
        .iter()
        .filter(|(run, _)| !drivers.is_live(**run))
        .map(|(run, since)| (*run, *since))
        .collect();
    for (run, since) in ended {
        if since.is_some_and(|t| t.elapsed() < lease) {
            continue;
        }
        mine.remove(&run);
        // A drive that ended its run (or left it waiting) gave its lease up with the
        // run's last write: nothing is held any more.
        if since.is_none() && journal.lease(run).is_none() {
            let _ = journal.release_run(run);
            answered_meanwhile(journal, run, err)?;
            continue;
        }
        match journal.release_run(run) {
            Ok(true) => writeln!(
                err,
                "run {}: its drive here stopped before the run ended; gave its claim up, so that a worker (this one too) claims it again",
                run.0
            )?,
            Ok(false) => {}
            Err(error) => writeln!(
                err,
                "warning: run {}: cannot give its claim up now ({error}); it lapses after its lease",
                run.0
            )?,
        }
    }
    Ok(())
}

/// Hands back to the workers a run whose drive here ended waiting on questions that were
/// all answered meanwhile: an answer given by another process (`runs answer`, `clio
/// serve`'s API) while the run was still running here reaches the journal, not this
/// worker's live run, and the process that answered left the run alone since it was not
/// waiting yet. Marked interrupted, the run is claimable, and the worker that claims it
/// (this one too) replays it with the answers. One of the two always sees the other: the
/// answerer writes its answer before it reads the run's status, this worker writes the
/// status before it reads the answers.
fn answered_meanwhile(journal: &Journal, run: RunId, err: &mut dyn Write) -> Result<(), CliError> {
    let waiting = match journal.run(run) {
        Ok(record) => record.is_some_and(|r| r.status == RunStatus::AwaitingInput),
        Err(error) => {
            writeln!(err, "warning: cannot read run {} now: {error}", run.0)?;
            return Ok(());
        }
    };
    if !waiting {
        return Ok(());
    }
    let reader = clio_flow::Runtime::new(
        journal.clone(),
        clio_flow::Registry::new(),
        clio_flow::RuntimeConfig::default(),
    );
    let open = match reader.questions(run) {
        Ok(open) => open,
        Err(error) => {
            writeln!(err, "warning: cannot read the questions of run {} now: {error}", run.0)?;
            return Ok(());
        }
    };
    if !open.is_empty() {
        return Ok(());
    }
    let update = clio_journal::RunUpdate {
        status: Some(RunStatus::Interrupted),
        ..clio_journal::RunUpdate::default()
    };
    match journal.update_run(run, update) {
        Ok(_) => writeln!(
            err,
            "run {}: its questions were answered while it ran; it goes on in the next worker to claim it",
            run.0
        )?,
        Err(error) => writeln!(err, "warning: cannot hand run {} back now: {error}", run.0)?,
    }
    Ok(())
}

/// Stops driving the runs this worker no longer owns: its lease was lost (another worker
/// claimed the run after this one stalled) or the run was cancelled from elsewhere. A run
/// whose status cannot be read now (the database is away) is looked at next time.
fn supervise(journal: &Journal, drivers: &Drivers, err: &mut dyn Write) -> Result<(), CliError> {
    for run in drivers.live_runs() {
        let status = match journal.run(run) {
            Ok(record) => record.map(|r| r.status),
            Err(error) => {
                writeln!(err, "warning: cannot read run {} now: {error}; trying again", run.0)?;
                continue;
            }
        };
        // A drive that stops (it ended, waits on a person, or suspended itself) gives its
        // lease up once that is committed, a moment before the drivers forget it, and
        // leaves the run not running: a run still running without this worker's lease is
        // another worker's.
        if status == Some(RunStatus::Running) && journal.lease(run).is_none() {
            drivers.abort(run);
            // The lost lease is forgotten, so this worker may claim the run again later.
            let _ = journal.release_run(run);
            writeln!(
                err,
                "run {}: lost its lease to another worker; stopped driving it here",
                run.0
            )?;
        } else if status == Some(RunStatus::Cancelled) {
            drivers.abort(run);
            let _ = journal.release_run(run);
            writeln!(err, "run {} was cancelled: stopped driving it", run.0)?;
        }
    }
    Ok(())
}

/// The name a worker goes by: the machine's name and the process id.
fn default_name() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "worker".to_owned());
    format!("{host}-{}", std::process::id())
}
