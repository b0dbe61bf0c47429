//! The connections: a fixed number of threads, each holding one client and running the
//! jobs sent to it in turn. A caller never blocks on the database on its own thread unless
//! it waits for an answer, and the synchronous client never runs inside a caller's async
//! executor (which it would refuse).
//!
//! A connection is made when its thread first has work (a command that reads one list uses
//! one), and made again when it was lost: a server that restarts or fails over is waited
//! for, with backoff, for the handle's reconnect window ([`crate::PostgresConfig::reconnect`])
//! before an operation gives up with an error [`crate::is_unavailable`] recognises.

use std::cell::RefCell;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

use clio_journal::{JournalError, Result};
use postgres::error::SqlState;
use postgres::{Client, NoTls, Statement};

/// How an error that the database could not be reached starts its detail.
pub(crate) const UNREACHABLE: &str = "cannot connect: the server cannot be reached";
/// How an error that the connection was lost during an operation starts its detail.
pub(crate) const LOST: &str = "lost the connection to the server";

/// One unit of work for a connection.
pub(crate) type Job = Box<dyn FnOnce(&mut Link) + Send>;

/// The connection threads; dropping the last handle stops them once their jobs are done.
///
/// One thread runs at first, on the connection the handle opened; another is started (and
/// connects) only when a job comes while every thread is busy, up to the pool's size, so
/// that a command that runs one query at a time uses one connection.
pub(crate) struct Pool {
    sender: Mutex<Option<Sender<Job>>>,
    threads: Mutex<Vec<thread::JoinHandle<()>>>,
    receiver: Arc<Mutex<Receiver<Job>>>,
    target: Target,
    size: usize,
    /// How many threads wait for a job, and how many jobs wait for a thread.
    counts: Arc<Counts>,
}

/// The pool's counts, by which it decides to start another thread.
#[derive(Default)]
struct Counts {
    idle: AtomicUsize,
    queued: AtomicUsize,
}

/// Where a connection thread connects, and how long it waits for a server that is gone.
#[derive(Clone)]
pub(crate) struct Target {
    pub(crate) url: Arc<str>,
    pub(crate) location: PathBuf,
    pub(crate) reconnect: Duration,
    /// What this handle's connections asked of the server.
    pub(crate) traffic: Traffic,
    /// How long the server lets a transaction of these connections wait on its client
    /// (`idle_in_transaction_session_timeout`) before it ends the session: a process frozen
    /// inside a transaction (stopped, swapped out) would otherwise hold its run's row, and
    /// no other worker could claim the run once its lease lapsed. The handle's lease.
    pub(crate) idle_in_transaction: Duration,
}

/// What a journal handle's connection threads asked of the server: round trips and
/// commits.
///
/// A round trip is a statement (or a string of statements sent together) sent and waited
/// for, `BEGIN`, `COMMIT`, savepoints and rollbacks included; a statement's preparation
/// (once per connection) counts one more. Not counted: making a connection, and the lease
/// renewer's and the listener's connections. A commit is a transaction of the handle's
/// that committed (a write, a claim; reads commit nothing). A bench or a test reads them
/// to see what a write costs ([`crate::open_counted`]).
#[derive(Clone, Default, Debug)]
pub struct Traffic(Arc<Tally>);

#[derive(Default, Debug)]
struct Tally {
    round_trips: AtomicU64,
    commits: AtomicU64,
}

impl Traffic {
    /// The round trips made so far.
    pub fn round_trips(&self) -> u64 {
        self.0.round_trips.load(Ordering::Relaxed)
    }

    /// The transactions committed so far.
    pub fn commits(&self) -> u64 {
        self.0.commits.load(Ordering::Relaxed)
    }

    /// Counts one round trip.
    pub(crate) fn add(&self) {
        self.0.round_trips.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts one commit.
    pub(crate) fn committed(&self) {
        self.0.commits.fetch_add(1, Ordering::Relaxed);
    }
}

/// A connection thread's client, made when first needed and made again once lost.
pub(crate) struct Link {
    client: Option<Client>,
    target: Target,
}

impl Link {
    /// The reconnect window: how long an operation waits for the server.
    pub(crate) fn window(&self) -> Duration {
        self.target.reconnect
    }

    /// The handle's count of round trips and commits.
    pub(crate) fn traffic(&self) -> Traffic {
        self.target.traffic.clone()
    }

    /// Returns the client, connecting first when there is none or it was closed; a server
    /// that cannot be reached is tried again with `backoff` until its window is spent.
    pub(crate) fn connect(&mut self, backoff: &mut Option<Backoff>) -> Result<&mut Client> {
        let client = match self.client.take() {
            Some(client) if !client.is_closed() => client,
            _ => {
                // Statements belong to the connection that prepared them.
                PREPARED.with(|p| p.borrow_mut().clear());
                connect_within(&self.target, backoff)?
            }
        };
        Ok(self.client.insert(client))
    }

    /// Forgets the client, whose connection was found lost: the next use connects again.
    pub(crate) fn reset(&mut self) {
        self.client = None;
        PREPARED.with(|p| p.borrow_mut().clear());
    }
}

/// Pauses between tries to reach the server, doubling from 50 ms up to 1 s, until the
/// window that started at the first failure is spent.
pub(crate) struct Backoff {
    until: Instant,
    pause: Duration,
}

impl Backoff {
    fn start(window: Duration) -> Backoff {
        Backoff { until: Instant::now() + window, pause: Duration::from_millis(50) }
    }

    /// Waits before the next try; `false` (at once) when the window is spent.
    fn wait(&mut self) -> bool {
        let now = Instant::now();
        if now >= self.until {
            return false;
        }
        thread::sleep(self.pause.min(self.until - now));
        self.pause = (self.pause * 2).min(Duration::from_secs(1));
        true
    }
}

/// Waits before trying again, the window starting now if this is the first failure;
/// `false` when the window is spent.
pub(crate) fn retry(backoff: &mut Option<Backoff>, window: Duration) -> bool {
    backoff.get_or_insert_with(|| Backoff::start(window)).wait()
}

impl Pool {
    /// Starts `n` connection threads (at least one) for `target`; the first uses `first`,
    /// an open client, the others connect when they first have work.
    pub(crate) fn start(target: &Target, n: usize, first: Client) -> Result<Pool> {
        let (sender, receiver) = mpsc::channel::<Job>();
        let pool = Pool {
            sender: Mutex::new(Some(sender)),
            threads: Mutex::new(Vec::new()),
            receiver: Arc::new(Mutex::new(receiver)),
            target: target.clone(),
            size: n.max(1),
            counts: Arc::default(),
        };
        let mut threads = pool.threads.lock().unwrap_or_else(PoisonError::into_inner);
        pool.spawn(&mut threads, Some(first))?;
        drop(threads);
        Ok(pool)
    }

    /// Starts one more connection thread, on `client` if given.
    fn spawn(
        &self,
        threads: &mut Vec<thread::JoinHandle<()>>,
        client: Option<Client>,
    ) -> Result<()> {
        let receiver = Arc::clone(&self.receiver);
        let counts = Arc::clone(&self.counts);
        let link = Link { client, target: self.target.clone() };
        // Counted idle from now: a job sent before the thread runs is its own.
        self.counts.idle.fetch_add(1, Ordering::SeqCst);
        let spawned = thread::Builder::new()
            .name(format!("clio-postgres-{}", threads.len()))
            .spawn(move || serve(link, &receiver, &counts));
        match spawned {
            Ok(handle) => {
                threads.push(handle);
                Ok(())
            }
            Err(err) => {
                self.counts.idle.fetch_sub(1, Ordering::SeqCst);
                Err(backend(
                    &self.target.location,
                    format!("cannot start a connection thread: {err}"),
                ))
            }
        }
    }

    /// Sends `job` to the next free connection, starting another when every one is busy
    /// and the pool is not full; `false` when the pool has stopped.
    pub(crate) fn send(&self, job: Job) -> bool {
        {
            let mut threads = self.threads.lock().unwrap_or_else(PoisonError::into_inner);
            let queued = self.counts.queued.fetch_add(1, Ordering::SeqCst) + 1;
            if queued > self.counts.idle.load(Ordering::SeqCst) && threads.len() < self.size {
                // A thread that cannot start leaves the job to the ones there are.
                if let Err(err) = self.spawn(&mut threads, None) {
                    tracing::warn!(%err, "cannot start another connection thread");
                }
            }
        }
        let sender = self.sender.lock().unwrap_or_else(PoisonError::into_inner);
        sender.as_ref().is_some_and(|s| s.send(job).is_ok())
    }

    /// Runs `f` on a connection and waits for its answer.
    pub(crate) fn run<T: Send + 'static>(
        &self,
        location: &Path,
        f: impl FnOnce(&mut Link) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        let (tx, rx) = mpsc::sync_channel(1);
        let job: Job = Box::new(move |link| {
            let _ = tx.send(f(link));
        });
        if !self.send(job) {
            return Err(stopped(location));
        }
        rx.recv().unwrap_or_else(|_| Err(stopped(location)))
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        self.sender.lock().unwrap_or_else(PoisonError::into_inner).take();
        let threads =
            std::mem::take(&mut *self.threads.lock().unwrap_or_else(PoisonError::into_inner));
        for handle in threads {
            let _ = handle.join();
        }
    }
}

/// Runs jobs until the pool is dropped, counted idle while it waits for one.
fn serve(mut link: Link, receiver: &Mutex<Receiver<Job>>, counts: &Counts) {
    loop {
        let job = {
            let receiver = receiver.lock().unwrap_or_else(PoisonError::into_inner);
            receiver.recv()
        };
        let Ok(job) = job else { return };
        counts.queued.fetch_sub(1, Ordering::SeqCst);
        counts.idle.fetch_sub(1, Ordering::SeqCst);
        job(&mut link);
        counts.idle.fetch_add(1, Ordering::SeqCst);
    }
}

thread_local! {
    /// The statements prepared on this connection thread's client, by their text.
    static PREPARED: RefCell<HashMap<&'static str, Statement>> = RefCell::new(HashMap::new());
}

/// Returns the statement `sql` prepared on this thread's connection, if it was.
pub(crate) fn prepared(sql: &'static str) -> Option<Statement> {
    PREPARED.with(|p| p.borrow().get(sql).cloned())
}

/// Keeps `statement`, prepared on this thread's connection, for the next use of `sql`.
pub(crate) fn remember(sql: &'static str, statement: Statement) {
    PREPARED.with(|p| p.borrow_mut().insert(sql, statement));
}

/// Opens one connection, once.
pub(crate) fn connect(url: &str, location: &Path) -> Result<Client> {
    Client::connect(url, NoTls).map_err(|err| connect_error(location, &err))
}

/// Opens one connection, trying again with backoff for `target`'s window while the server
/// cannot be reached (it refuses connections, or says it is starting or shutting down).
pub(crate) fn connect_within(target: &Target, backoff: &mut Option<Backoff>) -> Result<Client> {
    let config = client_config(&target.url, target.idle_in_transaction)
        .map_err(|err| connect_error(&target.location, &err))?;
    loop {
        match config.connect(NoTls) {
            Ok(client) => return Ok(client),
            Err(err) if is_lost(&err) => {
                if !retry(backoff, target.reconnect) {
                    return Err(backend(
                        &target.location,
                        format!(
                            "{UNREACHABLE} (tried for {} s): {}",
                            target.reconnect.as_secs_f64(),
                            describe(&err)
                        ),
                    ));
                }
            }
            Err(err) => return Err(connect_error(&target.location, &err)),
        }
    }
}

/// The client configuration of `url`, with the server told to end a session whose
/// transaction waits on its client longer than `idle` (at least 1 s), besides the options
/// the URL gives.
pub(crate) fn client_config(
    url: &str,
    idle: Duration,
) -> std::result::Result<postgres::Config, postgres::Error> {
    let mut config: postgres::Config = url.parse()?;
    let ms = idle.as_millis().max(1_000);
    let option = format!("-c idle_in_transaction_session_timeout={ms}");
    let options = match config.get_options() {
        Some(given) if !given.trim().is_empty() => format!("{given} {option}"),
        _ => option,
    };
    config.options(&options);
    Ok(config)
}

fn connect_error(location: &Path, err: &postgres::Error) -> JournalError {
    let detail = describe(err);
    if is_lost(err) {
        backend(location, format!("{UNREACHABLE}: {detail}"))
    } else {
        backend(location, format!("cannot connect: {detail}"))
    }
}

/// Whether `err` says the server is gone or going (the connection was closed or reset, the
/// server refused it, or it is shutting down, starting up or in recovery), as opposed to
/// an error of the statement itself: a statement that failed so may be tried again on a
/// new connection, once the transaction it was in is known not to have committed.
pub(crate) fn is_lost(err: &postgres::Error) -> bool {
    match err.as_db_error() {
        Some(db) => {
            let code = db.code();
            code.code().starts_with("08")
                || *code == SqlState::ADMIN_SHUTDOWN
                || *code == SqlState::CRASH_SHUTDOWN
                || *code == SqlState::CANNOT_CONNECT_NOW
                || *code == SqlState::TOO_MANY_CONNECTIONS
                // The server ended a session whose transaction waited on it too long (this
                // process was frozen): the transaction did not commit.
                || *code == SqlState::IDLE_IN_TRANSACTION_SESSION_TIMEOUT
        }
        // Not the server's answer: the socket failed, or the connection was closed.
        None => {
            err.is_closed()
                || std::error::Error::source(err).is_some_and(|s| s.is::<std::io::Error>())
        }
    }
}

/// Builds the error for a failure of the database at `location`.
pub(crate) fn backend(location: &Path, detail: impl Into<String>) -> JournalError {
    JournalError::Backend { location: location.to_path_buf(), detail: detail.into() }
}

/// The error a caller gets when the connection threads have stopped.
pub(crate) fn stopped(location: &Path) -> JournalError {
    JournalError::WriterStopped { path: PathBuf::from(location) }
}

/// Describes a client error with the server's message and hint, when there is one.
pub(crate) fn describe(err: &postgres::Error) -> String {
    match err.as_db_error() {
        Some(db) => match db.hint() {
            Some(hint) => format!("{} ({}; hint: {hint})", db.message(), db.code().code()),
            None => format!("{} ({})", db.message(), db.code().code()),
        },
        None => {
            let mut text = err.to_string();
            let mut source = std::error::Error::source(err);
            while let Some(inner) = source {
                text.push_str(": ");
                text.push_str(&inner.to_string());
                source = inner.source();
            }
            text
        }
    }
}

#[cfg(all(test, feature = "test-server"))]
mod tests {
    use super::*;

    #[test]
    fn a_transaction_left_waiting_on_a_frozen_process_is_ended_by_the_server() {
        // A process frozen inside a transaction (stopped, swapped out) would hold its run's
        // row for good; the server ends its session once the transaction has waited on it
        // for the handle's lease, and the error counts as a lost connection, so the
        // transaction is run again (and fenced, if another worker took the run meanwhile).
        let target = Target {
            url: Arc::from(crate::test_server::fresh_database().as_str()),
            location: PathBuf::from("test"),
            reconnect: Duration::ZERO,
            traffic: Traffic::default(),
            idle_in_transaction: Duration::from_secs(1),
        };
        let mut client = connect_within(&target, &mut None).expect("a connection");
        let shown = client.query_one("SHOW idle_in_transaction_session_timeout", &[]).unwrap();
        assert_eq!(shown.get::<_, String>(0), "1s");
        client.batch_execute("BEGIN; SELECT 1").expect("a transaction");
        thread::sleep(Duration::from_millis(2_500));
        let err = client.batch_execute("SELECT 1").expect_err("the session was ended");
        assert!(is_lost(&err), "not a lost connection: {}", describe(&err));
    }

    #[test]
    fn the_urls_own_options_are_kept() {
        let config = client_config(
            "postgres://u@h/db?options=-c%20search_path%3Dclio",
            Duration::from_millis(200),
        )
        .expect("a configuration");
        assert_eq!(
            config.get_options(),
            Some("-c search_path=clio -c idle_in_transaction_session_timeout=1000")
        );
    }
}
