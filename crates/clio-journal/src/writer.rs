//! The one writer thread: it owns every write transaction and group-commits what callers send
//! it over a std channel.
//!
//! Each loop takes the first waiting request, then everything else already queued (up to
//! `max_batch`), applies them in order in one transaction and commits once. Callers block on
//! their own reply channel, which is answered only after the commit returns, so with
//! [`Durability::Immediate`] a reply means the write is on disk, and N writers that finish
//! together pay for one commit.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::mpsc::{Receiver, SyncSender};

use redb::Database;

use crate::error::{JournalError, Result};
use crate::input::{Durability, JournalConfig};
use crate::store::{AtPath, Tx, now_ms};

/// Delivers the outcome of the commit to the caller that sent the operation.
pub(crate) type Completion = Box<dyn FnOnce(Result<()>) + Send>;

/// An operation run inside the batch's transaction (`None` when the batch was already
/// abandoned). It returns whether it failed in a way that
/// leaves the transaction unusable, and how to answer its caller once the commit is known.
pub(crate) type Op = Box<dyn FnOnce(Option<&mut Tx<'_>>) -> (bool, Completion) + Send>;

/// What callers send to the writer.
pub(crate) enum Request {
    /// Run an operation.
    Op(Op),
    /// Make everything committed so far durable, then answer.
    Flush(SyncSender<Result<()>>),
}

/// Runs the writer loop until every sender is gone, then makes the tail durable.
pub(crate) fn run(db: Arc<Database>, path: PathBuf, config: JournalConfig, rx: Receiver<Request>) {
    let mut dirty = false;
    while let Ok(first) = rx.recv() {
        let mut batch = vec![first];
        while batch.len() < config.max_batch.max(1) {
            match rx.try_recv() {
                Ok(req) => batch.push(req),
                Err(_) => break,
            }
        }
        let durable = config.durability == Durability::Immediate
            || batch.iter().any(|r| matches!(r, Request::Flush(_)));
        let outcome = commit_batch(&db, &path, &config, batch, durable);
        dirty = if durable { false } else { dirty || outcome };
    }
    if dirty {
        // Nobody is left to hear about a failure here; the next open recovers the last
        // durable commit, which is a prefix.
        let _ = flush(&db, &path, config.quick_repair);
    }
}

/// Applies one batch and commits it; returns whether anything was committed.
fn commit_batch(
    db: &Database,
    path: &Path,
    config: &JournalConfig,
    batch: Vec<Request>,
    durable: bool,
) -> bool {
    let mut completions = Vec::with_capacity(batch.len());
    let mut flushes = Vec::new();
    let outcome = (|| -> Result<()> {
        let mut txn = db.begin_write().at(path)?;
        if durable {
            txn.set_quick_repair(config.quick_repair);
        } else {
            txn.set_durability(redb::Durability::None).at(path)?;
        }
        let mut tx = Tx::open(&txn, path, now_ms())?;
        let mut broken = false;
        for req in batch {
            match req {
                Request::Op(op) => {
                    let (fatal, done) = op((!broken).then_some(&mut tx));
                    broken |= fatal;
                    completions.push(done);
                }
                Request::Flush(reply) => flushes.push(reply),
            }
        }
        drop(tx);
        if broken {
            txn.abort().at(path)?;
            return Err(batch_aborted(path));
        }
        txn.commit().at(path)
    })();
    let committed = outcome.is_ok();
    for done in completions {
        done(match &outcome {
            Ok(()) => Ok(()),
            Err(err) => Err(echo(path, err)),
        });
    }
    for reply in flushes {
        let _ = reply.send(match &outcome {
            Ok(()) => Ok(()),
            Err(err) => Err(echo(path, err)),
        });
    }
    committed
}

/// Commits an empty durable transaction, which makes every earlier commit durable.
fn flush(db: &Database, path: &Path, quick_repair: bool) -> Result<()> {
    let mut txn = db.begin_write().at(path)?;
    txn.set_quick_repair(quick_repair);
    txn.commit().at(path)
}

fn batch_aborted(path: &Path) -> JournalError {
    JournalError::Storage {
        path: path.to_path_buf(),
        source: "the batch was abandoned after a storage failure in one of its writes".into(),
    }
}

/// Returns a copy of a commit error for each caller of the batch (errors are not `Clone`).
fn echo(path: &Path, err: &JournalError) -> JournalError {
    let path = path.to_path_buf();
    match err {
        JournalError::Io { source, .. } => {
            JournalError::Io { path, source: io::Error::new(source.kind(), source.to_string()) }
        }
        JournalError::Corrupted { detail, .. } => {
            JournalError::Corrupted { path, detail: detail.clone() }
        }
        JournalError::Storage { source, .. } => {
            JournalError::Storage { path, source: source.to_string().into() }
        }
        other => JournalError::Storage { path, source: other.to_string().into() },
    }
}
