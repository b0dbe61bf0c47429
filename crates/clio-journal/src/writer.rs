//! The one writer thread: it owns every write transaction and group-commits what callers send
//! it over a std channel.
//!
//! Each loop takes the first waiting request, then everything else already queued (up to
//! `max_batch`), applies them in order in one transaction and commits once. Callers block on
//! their own reply channel, which is answered only once the batch is durable, so with
//! [`Durability::Immediate`] a reply means the write is on disk, and N writers that finish
//! together pay for one commit.
//!
//! A journal file with a write-ahead log (see `wal`) makes a batch durable by flushing its
//! redo record to the log, answers its callers, and only then commits it to redb without a
//! flush: that commit (tens of microseconds of the CPU) runs while a chain's caller prepares
//! its next step, instead of between two flushes. Until it is done, reads wait
//! (`Commits::applying`), so a caller reads its own write and nobody reads a batch before
//! it is durable; a commit that fails there refuses every later read and write until the
//! journal is reopened, which applies the batch from the log. A checkpoint (a durable
//! redb commit) comes when the log is long, when a batch holds an unlogged write, on
//! [`Request::Flush`], for the first batch while the file does not yet say its log is live
//! (see [`Log::live`]), and when the writer stops, if anything was written.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::mpsc::Receiver;

use redb::Database;

use crate::changes::Commits;
use crate::error::{JournalError, Result};
use crate::input::{Durability, JournalConfig};
use crate::pending::Reply;
use crate::store::{AtPath, Tx, now_ms};
use crate::wal::{self, Wal};

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
    /// Make everything committed so far durable in the file (a checkpoint), then answer.
    /// With `retire_log`, the checkpoint also leaves the log not live, as a close does: the
    /// writer then has nothing left to write when it stops, and the next batch, if one
    /// comes, is a checkpoint that makes the log live again.
    Flush { reply: Reply<()>, retire_log: bool },
}

impl Request {
    fn is_flush(&self) -> bool {
        matches!(self, Request::Flush { .. })
    }

    fn retires_log(&self) -> bool {
        matches!(self, Request::Flush { retire_log: true, .. })
    }
}

/// The write-ahead log of the writer, and whether it failed.
struct Log {
    wal: Wal,
    /// Whether the file says this log is live (may hold records the file lacks). An open
    /// with nothing to recover leaves it as the last close did, not live; the first batch is
    /// then a checkpoint that marks it live, so the log never holds a record the file does
    /// not know to look for, and a journal only read is never written.
    live: bool,
    /// Set when a write to the log failed: what is on disk is then unknown, so every later
    /// batch is refused with this message until the journal is reopened.
    failed: Option<String>,
}

/// Returns the next request, or `None` once every sender is gone. A caller that waited for
/// the last commit usually sends its next request within a few tens of microseconds (a
/// chain's next step): the writer looks for it for `spin` before it sleeps, since waking a
/// sleeping thread costs about as much again on a virtual machine
/// ([`JournalConfig::writer_spin`]).
fn next_request(rx: &Receiver<Request>, spin: std::time::Duration) -> Option<Request> {
    if !spin.is_zero() {
        let start = std::time::Instant::now();
        loop {
            match rx.try_recv() {
                Ok(req) => return Some(req),
                Err(std::sync::mpsc::TryRecvError::Disconnected) => return None,
                Err(std::sync::mpsc::TryRecvError::Empty) => {}
            }
            if start.elapsed() >= spin {
                break;
            }
            std::thread::yield_now();
        }
    }
    rx.recv().ok()
}

/// Runs the writer loop until every sender is gone, then makes the tail durable.
///
/// The next batch's transaction is begun and its tables opened while the writer waits for
/// the batch's first request (a chain's caller takes tens of microseconds to send its
/// next write; opening the ten tables takes 12-17 of them), so a batch that comes starts
/// with its operations. The transaction is begun without a flush and given one when the
/// batch is known to need it; its clock is set when the batch comes.
pub(crate) fn run(
    db: Arc<Database>,
    path: PathBuf,
    config: JournalConfig,
    rx: Receiver<Request>,
    wal: Option<(Wal, bool)>,
    commits: &Commits,
) {
    let mut log = wal.map(|(wal, live)| Log { wal, live, failed: None });
    let mut dirty = false;
    loop {
        // A failure here is the database's own (it refuses every write transaction from
        // then on), so the batch that comes is answered with it.
        let txn = begin(&db, &path);
        let tx = match &txn {
            Ok(txn) => Tx::open(txn, &path, 0),
            Err(err) => Err(echo(&path, err)),
        };
        let Some(first) = next_request(&rx, config.writer_spin) else {
            break;
        };
        let mut batch = vec![first];
        while batch.len() < config.max_batch.max(1) {
            match rx.try_recv() {
                Ok(req) => batch.push(req),
                Err(_) => break,
            }
        }
        let durable =
            config.durability == Durability::Immediate || batch.iter().any(Request::is_flush);
        let planned = plan_batch(tx, &path, &config, batch, durable, log.as_ref());
        let outcome = commit_batch(txn, &path, &config, planned, durable, log.as_mut(), commits);
        dirty = if durable { false } else { dirty || outcome };
    }
    // After a failed write to the log, what it holds is unknown: the next open applies it.
    if log.as_ref().is_some_and(|l| l.failed.is_some()) {
        return;
    }
    let logged = log.as_ref().is_some_and(|l| !l.wal.is_empty());
    if dirty || logged || log.as_ref().is_some_and(|l| l.live) {
        // Nobody is left to hear about a failure here; the next open recovers the last
        // durable commit, which is a prefix, and applies the log again. The file then holds
        // every record: its log is no longer live, and may be cleared or lost.
        let lsn = log.as_ref().map(|l| (l.wal.next_lsn() - 1, l.wal.generation()));
        if flush(&db, &path, config.quick_repair, lsn).is_err() {
            return;
        }
    }
    // The file now holds every record of the log.
    if let Some(log) = &mut log {
        let _ = log.wal.clear();
    }
}

/// Begins a write transaction without a flush: [`commit_batch`] gives it one when its
/// batch is a checkpoint or has no log to go through.
fn begin(db: &Database, path: &Path) -> Result<redb::WriteTransaction> {
    let mut txn = db.begin_write().at(path)?;
    txn.set_durability(redb::Durability::None).at(path)?;
    Ok(txn)
}

/// How a batch whose operations ran is made durable.
enum Plan {
    /// Nothing was written (every operation was refused): committed without a flush.
    Empty,
    /// Through the write-ahead log: this record, at the log's next lsn.
    Log(crate::redo::RedoLog),
    /// A redb commit: a checkpoint when the batch is durable and the journal has a log.
    Commit,
}

/// What [`plan_batch`] hands [`commit_batch`]: the plan (or why the batch failed) and the
/// callers to answer.
struct Planned {
    plan: Result<Plan>,
    completions: Vec<Completion>,
    flushes: Vec<Reply<()>>,
    /// Whether the batch is a checkpoint that leaves the log not live.
    retire_log: bool,
}

/// Runs one batch's operations in `tx` (opened before the batch came, or why it could not
/// be) and writes what the batch's commit records in the file (the log's lsn and
/// generation), then lets go of the tables. A batch refused before it runs (its
/// transaction failed, or an earlier write to the log did) still hands over every caller,
/// so that each is told why.
fn plan_batch(
    tx: Result<Tx<'_>>,
    path: &Path,
    config: &JournalConfig,
    batch: Vec<Request>,
    durable: bool,
    log: Option<&Log>,
) -> Planned {
    let mut completions = Vec::with_capacity(batch.len());
    let mut flushes = Vec::new();
    let retire_log = batch.iter().any(Request::retires_log);
    let refused = match (log.and_then(|l| l.failed.clone()), tx) {
        (Some(failed), _) => {
            Err(JournalError::Storage { path: path.to_path_buf(), source: failed.into() })
        }
        (None, tx) => tx,
    };
    let tx = match refused {
        Ok(tx) => tx,
        Err(err) => {
            for req in batch {
                match req {
                    Request::Op(op) => completions.push(op(None).1),
                    Request::Flush { reply, .. } => flushes.push(reply),
                }
            }
            return Planned { plan: Err(err), completions, flushes, retire_log };
        }
    };
    let plan = (|| -> Result<Plan> {
        let checkpoint = batch.iter().any(Request::is_flush)
            || log.is_some_and(|l| l.wal.wants_checkpoint(config.checkpoint_bytes));
        // Through the log: durable, no checkpoint due, and a live log to write.
        let through_log = durable && !checkpoint && log.is_some_and(|l| l.live);
        let mut tx = tx;
        tx.set_now(now_ms());
        if through_log {
            tx.keep_redo();
        }
        let mut broken = false;
        for req in batch {
            match req {
                Request::Op(op) => {
                    let (fatal, done) = op((!broken).then_some(&mut tx));
                    broken |= fatal;
                    completions.push(done);
                }
                Request::Flush { reply, .. } => flushes.push(reply),
            }
        }
        if broken {
            return Err(batch_aborted(path));
        }
        tx.finish()?;
        let redo = tx.take_redo();
        match (redo, log) {
            (Some(redo), Some(_)) if redo.bytes().is_empty() && !redo.unlogged => Ok(Plan::Empty),
            // A batch too large for one record is checkpointed instead.
            (Some(redo), Some(log)) if !redo.unlogged && redo.bytes().len() <= wal::MAX_PAYLOAD => {
                tx.set_wal_lsn(log.wal.next_lsn())?;
                Ok(Plan::Log(redo))
            }
            (_, log) => {
                if let Some(log) = log {
                    tx.set_wal_lsn(log.wal.next_lsn() - 1)?;
                    if durable {
                        // A checkpoint starts the log's next generation, unless nothing was
                        // written in this one: then the log on disk is still the one before
                        // it, which the file's generation must stay right after.
                        tx.set_wal_generation(next_generation(&log.wal), !retire_log)?;
                    }
                }
                Ok(Plan::Commit)
            }
        }
    })();
    Planned { plan, completions, flushes, retire_log }
}

/// Makes a planned batch durable in `txn` (its tables let go of) and answers its callers;
/// returns whether anything was committed.
fn commit_batch(
    txn: Result<redb::WriteTransaction>,
    path: &Path,
    config: &JournalConfig,
    planned: Planned,
    durable: bool,
    log: Option<&mut Log>,
    commits: &Commits,
) -> bool {
    let Planned { plan, completions, flushes, retire_log } = planned;
    let mut log = log;
    // `Ok(Some(txn))`: the batch is durable in the write-ahead log and `txn` is committed
    // to redb after the replies (see `Commits::applying`).
    let outcome = (|log: Option<&mut Log>| -> Result<Option<redb::WriteTransaction>> {
        let plan = plan?;
        let mut txn = txn?;
        match (plan, log) {
            (Plan::Empty, _) => txn.commit().at(path).map(|()| None),
            (Plan::Log(redo), log) => {
                let Some(log) = log else {
                    return Err(JournalError::Storage {
                        path: path.to_path_buf(),
                        source: "a batch was planned through a write-ahead log the journal does not have".into(),
                    });
                };
                if let Err(err) = log.wal.append(redo.bytes()) {
                    log.failed = Some(format!(
                        "writing the write-ahead log {} failed ({err}); reopen the journal",
                        log.wal.path().display()
                    ));
                    // The log's error is the one to report, whatever the abort says.
                    let _ = txn.abort();
                    return Err(err);
                }
                // Durable: the callers are answered before redb holds the batch.
                Ok(Some(txn))
            }
            (Plan::Commit, log) => {
                if durable {
                    txn.set_durability(redb::Durability::Immediate).at(path)?;
                    txn.set_quick_repair(config.quick_repair);
                }
                txn.commit().at(path)?;
                if let Some(log) = log
                    && durable
                {
                    // A checkpoint: the file now holds every record of the log.
                    log.live = !retire_log;
                    let generation = next_generation(&log.wal);
                    log.wal.restart(generation);
                }
                Ok(None)
            }
        }
    })(log.as_deref_mut());
    let committed = outcome.is_ok();
    let (outcome, deferred) = match outcome {
        Ok(deferred) => (Ok(()), deferred),
        Err(err) => (Err(err), None),
    };
    // Readers wait from before the replies until redb holds a deferred batch.
    let mut applying = deferred.as_ref().map(|_| commits.applying());
    // Counted before the replies, after the commit (or, for a batch in the log, with its
    // readers held until it is in redb): a reader woken now reads what the batch wrote,
    // and a caller that has its reply and then asks for changes does not take its own
    // commit for a later one.
    if committed {
        commits.bump();
    }
    for done in completions {
        done(match &outcome {
            Ok(()) => Ok(()),
            Err(err) => Err(echo(path, err)),
        });
    }
    for reply in flushes {
        reply.send(match &outcome {
            Ok(()) => Ok(()),
            Err(err) => Err(echo(path, err)),
        });
    }
    if let (Some(txn), Some(applying)) = (deferred, applying.as_mut())
        && let Err(err) = txn.commit().at(path)
    {
        // The log holds the batch, redb does not: only a reopen reconciles them, and it
        // applies the batch. Until then writes and reads are refused, since redb lacks
        // what the callers were told is durable.
        let reason = format!(
            "a commit failed after its write-ahead record was on disk ({err}): the batch is \
             applied when the journal is reopened; reopen the journal"
        );
        if let Some(log) = log {
            log.failed = Some(reason.clone());
        }
        applying.failed(reason);
    }
    committed
}

/// Returns the generation a checkpoint of `wal` starts: the next one, or the same when
/// nothing was written in this one.
fn next_generation(wal: &Wal) -> u64 {
    if wal.is_empty() { wal.generation() } else { wal.generation() + 1 }
}

/// Commits a durable transaction, which makes every earlier commit durable; `wal`, when
/// given (the last lsn and the generation of the log), records that the file now holds the
/// write-ahead log up to it and that the log is no longer live.
pub(crate) fn flush(
    db: &Database,
    path: &Path,
    quick_repair: bool,
    wal: Option<(u64, u64)>,
) -> Result<()> {
    let mut txn = db.begin_write().at(path)?;
    txn.set_quick_repair(quick_repair);
    if let Some((lsn, generation)) = wal {
        let mut tx = Tx::open(&txn, path, now_ms())?;
        tx.set_wal_lsn(lsn)?;
        tx.set_wal_generation(generation, false)?;
    }
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
