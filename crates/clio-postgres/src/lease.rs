//! What a handle's threads share: its table of the leases it holds, the thread that renews
//! them, and the thread that hears other processes' commits. Claims and the fencing of
//! writes are in each transaction (`PgStore::claim`, `Conn::fence` in `store.rs`).
//!
//! Both threads start only when needed (the renewer with the handle's first lease, the
//! listener when someone watches for changes), so that a command that only reads or
//! submits starts neither; the renewer sleeps on a condition variable that the handle's
//! close rings, so that no close waits out a renewal period.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use clio_journal::{CommitNotices, RunId};
use postgres::Client;
use postgres::fallible_iterator::FallibleIterator;

use crate::pool::{self, describe};

/// The channel every commit is announced on.
pub(crate) const CHANNEL: &str = "clio_changes";

/// The database's clock in ms since the Unix epoch: leases are timed by one clock for all
/// machines.
const DB_NOW: &str = "(extract(epoch from clock_timestamp()) * 1000)::bigint";

/// A lease this handle holds: the handle's writes into the run carry its epoch until it
/// gives the lease up, so that once another worker claims the run they are refused,
/// whatever this handle believes (a stalled or lost lease still fences).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Held {
    pub(crate) epoch: i64,
    pub(crate) state: HeldState,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HeldState {
    /// Renewed by the handle's renewal thread.
    Live,
    /// No longer renewed (`stop_renewing`): it lapses when its time is up.
    Stalled,
    /// A renewal found the run claimed by another worker.
    Lost,
}

impl Held {
    pub(crate) fn live(epoch: i64) -> Held {
        Held { epoch, state: HeldState::Live }
    }

    /// Whether this handle still owns the run as far as it knows.
    pub(crate) fn owned(&self) -> bool {
        matches!(self.state, HeldState::Live | HeldState::Stalled)
    }
}

/// The leases of one handle, shared with its renewal thread and its jobs.
#[derive(Default)]
pub(crate) struct Leases {
    held: std::sync::Mutex<HashMap<u64, Held>>,
}

impl Leases {
    pub(crate) fn lock(&self) -> MutexGuard<'_, HashMap<u64, Held>> {
        self.held.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The epoch a write into `run` must carry, if this handle holds (or held) its lease.
    pub(crate) fn fence(&self, run: RunId) -> Option<i64> {
        self.lock().get(&run.0).map(|h| h.epoch)
    }
}

/// What the threads of a handle share.
pub(crate) struct Shared {
    pub(crate) location: PathBuf,
    pub(crate) commits: CommitNotices,
    pub(crate) leases: Leases,
    pub(crate) lease_ms: i64,
    pub(crate) stop: AtomicBool,
    /// Rung at the handle's close, to wake the renewer from its pause at once.
    pub(crate) bell: (Mutex<()>, Condvar),
}

impl Shared {
    /// Pauses for `pause`, or until the handle closes; `false` once it has.
    fn pause(&self, pause: Duration) -> bool {
        let (lock, bell) = &self.bell;
        let guard = lock.lock().unwrap_or_else(PoisonError::into_inner);
        if self.stop.load(Ordering::SeqCst) {
            return false;
        }
        let _ = bell
            .wait_timeout_while(guard, pause, |()| !self.stop.load(Ordering::SeqCst))
            .unwrap_or_else(PoisonError::into_inner);
        !self.stop.load(Ordering::SeqCst)
    }

    /// Stops the handle's threads: the renewer wakes at once, the listener within its
    /// 200 ms wait.
    pub(crate) fn close(&self) {
        let (lock, bell) = &self.bell;
        let _guard = lock.lock().unwrap_or_else(PoisonError::into_inner);
        self.stop.store(true, Ordering::SeqCst);
        bell.notify_all();
    }
}

/// Hears the commits of other processes and bumps the handle's notices for each.
pub(crate) fn listen(url: &str, shared: &Shared) {
    let mut client: Option<Client> = None;
    while !shared.stop.load(Ordering::SeqCst) {
        let Some(c) = client.as_mut() else {
            match pool::connect(url, &shared.location) {
                Ok(mut fresh) => match fresh.batch_execute(&format!("LISTEN {CHANNEL}")) {
                    Ok(()) => {
                        client = Some(fresh);
                        // Whatever was committed while no one listened counts as a change.
                        shared.commits.bump();
                    }
                    Err(err) => tracing::warn!(error = %describe(&err), "cannot listen"),
                },
                Err(err) => {
                    tracing::warn!(%err, "cannot connect to listen for changes");
                    if !shared.pause(Duration::from_millis(500)) {
                        return;
                    }
                }
            }
            continue;
        };
        let mut heard = false;
        let mut failed = false;
        {
            let mut notes = c.notifications();
            let mut iter = notes.timeout_iter(Duration::from_millis(200));
            loop {
                match iter.next() {
                    Ok(Some(_)) => heard = true,
                    Ok(None) => break,
                    Err(err) => {
                        tracing::warn!(error = %describe(&err), "lost the connection listening for changes");
                        failed = true;
                        break;
                    }
                }
            }
        }
        if heard {
            shared.commits.bump();
        }
        if failed || c.is_closed() {
            client = None;
        }
    }
}

/// Renews the handle's leases a few times per lease period; a lease found taken is marked
/// lost (its run's writes stay fenced).
///
/// While the server cannot be reached it tries again every 200 ms, and renews as soon as
/// it is back: a lease whose epoch is still the run's was claimed by no one meanwhile,
/// even if its time ran out during the outage, so the run stays this handle's and its
/// drive goes on; a lease another worker claimed is marked lost.
pub(crate) fn renew(url: &str, shared: &Shared) {
    let period = Duration::from_millis((shared.lease_ms as u64 / 4).clamp(20, 2_000));
    let again = period.min(Duration::from_millis(200));
    let mut client: Option<Client> = None;
    let mut pause = period;
    while shared.pause(pause) {
        pause = period;
        let due: Vec<(i64, i64)> = shared
            .leases
            .lock()
            .iter()
            .filter(|(_, h)| h.state == HeldState::Live)
            .map(|(run, h)| (*run as i64, h.epoch))
            .collect();
        if due.is_empty() {
            continue;
        }
        if client.as_ref().is_none_or(Client::is_closed) {
            match pool::connect(url, &shared.location) {
                Ok(fresh) => client = Some(fresh),
                Err(err) => {
                    tracing::warn!(%err, "cannot connect to renew leases");
                    pause = again;
                    continue;
                }
            }
        }
        let Some(c) = client.as_mut() else { continue };
        let runs: Vec<i64> = due.iter().map(|d| d.0).collect();
        let epochs: Vec<i64> = due.iter().map(|d| d.1).collect();
        let res = c.query(
            &format!(
                "UPDATE clio_leases SET expires_at_ms = {DB_NOW} + $3 \
                 FROM unnest($1::bigint[], $2::bigint[]) AS h(run, epoch) \
                 WHERE clio_leases.run = h.run AND clio_leases.epoch = h.epoch \
                 AND clio_leases.expires_at_ms > 0 RETURNING clio_leases.run"
            ),
            &[&runs, &epochs, &shared.lease_ms],
        );
        match res {
            Ok(rows) => {
                let renewed: HashSet<i64> = rows.iter().map(|r| r.get(0)).collect();
                let mut held = shared.leases.lock();
                for (run, epoch) in due {
                    if renewed.contains(&run) {
                        continue;
                    }
                    if let Some(h) = held.get_mut(&(run as u64)).filter(|h| h.epoch == epoch) {
                        tracing::warn!(
                            run,
                            epoch,
                            "lost the lease on a run: another worker claimed it"
                        );
                        h.state = HeldState::Lost;
                    }
                }
            }
            Err(err) => {
                tracing::warn!(error = %describe(&err), "cannot renew leases");
                client = None;
                pause = again;
            }
        }
    }
}
