//! The connections: a fixed number of threads, each holding one client and running the
//! jobs sent to it in turn. A caller never blocks on the database on its own thread unless
//! it waits for an answer, and the synchronous client never runs inside a caller's async
//! executor (which it would refuse).

use std::cell::RefCell;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread;

use clio_journal::{JournalError, Result};
use postgres::{Client, NoTls, Statement};

/// One unit of work for a connection.
pub(crate) type Job = Box<dyn FnOnce(&mut Client) + Send>;

/// The connection threads; dropping the last handle stops them once their jobs are done.
pub(crate) struct Pool {
    sender: Mutex<Option<Sender<Job>>>,
    threads: Mutex<Vec<thread::JoinHandle<()>>>,
}

impl Pool {
    /// Opens `n` connections to `url` (at least one), failing if the first cannot be made.
    pub(crate) fn start(url: &str, n: usize, location: &Path) -> Result<Pool> {
        let (sender, receiver) = mpsc::channel::<Job>();
        let receiver = Arc::new(Mutex::new(receiver));
        let mut threads = Vec::new();
        for i in 0..n.max(1) {
            let client = connect(url, location)?;
            let receiver = Arc::clone(&receiver);
            let url = url.to_owned();
            let place = location.to_path_buf();
            let handle = thread::Builder::new()
                .name(format!("clio-postgres-{i}"))
                .spawn(move || serve(client, &receiver, &url, &place))
                .map_err(|err| {
                    backend(location, format!("cannot start a connection thread: {err}"))
                })?;
            threads.push(handle);
        }
        Ok(Pool { sender: Mutex::new(Some(sender)), threads: Mutex::new(threads) })
    }

    /// Sends `job` to the next free connection; `false` when the pool has stopped.
    pub(crate) fn send(&self, job: Job) -> bool {
        let sender = self.sender.lock().unwrap_or_else(PoisonError::into_inner);
        sender.as_ref().is_some_and(|s| s.send(job).is_ok())
    }

    /// Runs `f` on a connection and waits for its answer.
    pub(crate) fn run<T: Send + 'static>(
        &self,
        location: &Path,
        f: impl FnOnce(&mut Client) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        let (tx, rx) = mpsc::sync_channel(1);
        let job: Job = Box::new(move |client| {
            let _ = tx.send(f(client));
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

/// Runs jobs until the pool is dropped; a connection found closed is made again before the
/// next job (the job that found it closed has already failed with the error).
fn serve(mut client: Client, receiver: &Mutex<Receiver<Job>>, url: &str, location: &Path) {
    loop {
        let job = {
            let receiver = receiver.lock().unwrap_or_else(PoisonError::into_inner);
            match receiver.recv() {
                Ok(job) => job,
                Err(_) => return,
            }
        };
        if client.is_closed() {
            match connect(url, location) {
                Ok(fresh) => {
                    // Statements belong to the connection that prepared them.
                    PREPARED.with(|p| p.borrow_mut().clear());
                    client = fresh;
                }
                Err(err) => tracing::warn!(%err, "cannot reconnect to the journal's database"),
            }
        }
        job(&mut client);
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

/// Opens one connection.
pub(crate) fn connect(url: &str, location: &Path) -> Result<Client> {
    Client::connect(url, NoTls)
        .map_err(|err| backend(location, format!("cannot connect: {}", describe(&err))))
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
