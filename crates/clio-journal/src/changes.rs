//! [`Changes`]: a reader's notice that the journal has committed something new, so that a
//! view of a run (the CLI's progress) reads it again when it changed instead of at a fixed
//! interval.
//!
//! The writer counts its commits and wakes every waiting reader after each one, once the
//! batch's callers have their replies (a read then sees what was committed: see
//! [`Commits::applying`] for a batch durable in the write-ahead log and answered before
//! redb holds it). A reader keeps
//! the count it has seen: [`Changes::changed`] resolves at once when the journal has
//! committed since, so no commit between two awaits is missed, and many commits while a
//! reader was busy are one change. Plain `std` (a mutex and wakers), like [`crate::Pending`],
//! so it works on any executor.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll, Waker};

/// The writer's side: the count of commits, the readers waiting for the next one, and
/// whether a batch already answered is still being committed to redb.
#[derive(Default)]
pub(crate) struct Commits {
    state: Mutex<State>,
    /// Signalled when the batch being applied is in redb ([`Applying`] dropped).
    applied: Condvar,
}

#[derive(Default)]
struct State {
    count: u64,
    waiting: Vec<Waker>,
    /// A batch is durable in the write-ahead log and answered, and not yet in redb.
    applying: bool,
    /// Why what redb holds lacks an answered batch (its commit failed after its record was
    /// on disk): every later read is refused with this until the journal is reopened.
    broken: Option<String>,
}

impl Commits {
    /// Counts a commit and wakes every reader waiting for one.
    pub(crate) fn bump(&self) {
        let waiting = {
            let mut state = lock(&self.state);
            state.count += 1;
            std::mem::take(&mut state.waiting)
        };
        for waker in waiting {
            waker.wake();
        }
    }

    pub(crate) fn count(&self) -> u64 {
        lock(&self.state).count
    }

    /// Marks a batch durable in the write-ahead log as being applied: the writer answers
    /// its callers first and commits it to redb (in memory, no flush) while they go on,
    /// which takes that commit out of the time between two flushes of a chain of steps.
    /// Until the returned mark is dropped, [`Commits::wait_applied`] waits, so a caller
    /// that reads right after its answer still reads its own write.
    pub(crate) fn applying(&self) -> Applying<'_> {
        lock(&self.state).applying = true;
        Applying { commits: self, failed: None }
    }

    /// Waits until no answered batch is missing from redb; fails with the reason when one
    /// never reached it (see [`Applying::failed`]).
    pub(crate) fn wait_applied(&self) -> Result<(), String> {
        let mut state = lock(&self.state);
        while state.applying {
            state = self.applied.wait(state).unwrap_or_else(PoisonError::into_inner);
        }
        match &state.broken {
            Some(reason) => Err(reason.clone()),
            None => Ok(()),
        }
    }
}

/// A batch being applied to redb after its callers were answered ([`Commits::applying`]);
/// dropping it lets readers in again, also when the commit panicked.
pub(crate) struct Applying<'a> {
    commits: &'a Commits,
    failed: Option<String>,
}

impl Applying<'_> {
    /// Records that the commit failed: redb lacks a batch its callers were told is
    /// durable (the next open applies it from the log), so reads are refused with
    /// `reason` from now on rather than answer without it.
    pub(crate) fn failed(&mut self, reason: String) {
        self.failed = Some(reason);
    }
}

impl Drop for Applying<'_> {
    fn drop(&mut self) {
        let failed = self.failed.take().or_else(|| {
            std::thread::panicking().then(|| {
                "the storage engine failed while committing a batch whose write-ahead record \
                 is on disk: the batch is applied when the journal is reopened; reopen the \
                 journal"
                    .to_owned()
            })
        });
        let mut state = lock(&self.commits.state);
        state.applying = false;
        if failed.is_some() {
            state.broken = failed;
        }
        drop(state);
        self.commits.applied.notify_all();
    }
}

/// Notices of the journal's commits, from the moment it was made ([`crate::Journal::changes`]).
///
/// A journal opened read-only never commits: its changes never come.
pub struct Changes {
    commits: Arc<Commits>,
    seen: u64,
}

impl Changes {
    pub(crate) fn new(commits: Arc<Commits>) -> Changes {
        let seen = commits.count();
        Changes { commits, seen }
    }

    /// Resolves once the journal has committed since this was made or last resolved (at
    /// once if it already has), whatever it committed: one run's entry, another run's,
    /// a task's update.
    pub fn changed(&mut self) -> Changed<'_> {
        Changed { changes: self }
    }
}

/// The future of [`Changes::changed`].
#[must_use = "a change is noticed only when awaited"]
pub struct Changed<'a> {
    changes: &'a mut Changes,
}

impl Future for Changed<'_> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let changes = &mut *self.get_mut().changes;
        let mut state = lock(&changes.commits.state);
        if state.count > changes.seen {
            changes.seen = state.count;
            return Poll::Ready(());
        }
        if !state.waiting.iter().any(|w| w.will_wake(cx.waker())) {
            state.waiting.push(cx.waker().clone());
        }
        Poll::Pending
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use std::panic::AssertUnwindSafe;
    use std::task::Wake;

    use super::*;

    struct Count(Mutex<u32>);
    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            *lock(&self.0) += 1;
        }
    }

    #[test]
    fn a_waiting_reader_is_woken_by_the_next_commit_and_commits_before_are_not_missed() {
        let commits = Arc::new(Commits::default());
        commits.bump();
        let mut changes = Changes::new(Arc::clone(&commits));
        let count = Arc::new(Count(Mutex::new(0)));
        let waker = Waker::from(Arc::clone(&count));
        let mut cx = Context::from_waker(&waker);
        // A commit before it was made is not a change of it.
        assert!(Pin::new(&mut changes.changed()).poll(&mut cx).is_pending());
        commits.bump();
        assert_eq!(*lock(&count.0), 1, "woken once");
        assert!(Pin::new(&mut changes.changed()).poll(&mut cx).is_ready());
        // Two commits while it was busy are one change, noticed at once.
        commits.bump();
        commits.bump();
        assert!(Pin::new(&mut changes.changed()).poll(&mut cx).is_ready());
        assert!(Pin::new(&mut changes.changed()).poll(&mut cx).is_pending());
        // Polled again, a reader waits once: one waker, one wake.
        assert!(Pin::new(&mut changes.changed()).poll(&mut cx).is_pending());
        commits.bump();
        assert_eq!(*lock(&count.0), 2);
    }

    #[test]
    fn a_read_waits_while_an_answered_batch_is_applied_and_goes_on_after() {
        let commits = Arc::new(Commits::default());
        assert_eq!(commits.wait_applied(), Ok(()));
        let applying = commits.applying();
        let reader = {
            let commits = Arc::clone(&commits);
            std::thread::spawn(move || {
                let waited = std::time::Instant::now();
                (commits.wait_applied(), waited.elapsed())
            })
        };
        std::thread::sleep(std::time::Duration::from_millis(50));
        drop(applying);
        let (read, waited) = reader.join().expect("the reader thread");
        assert_eq!(read, Ok(()));
        assert!(waited >= std::time::Duration::from_millis(40), "waited only {waited:?}");
    }

    #[test]
    fn a_failed_or_panicked_apply_refuses_every_later_read_with_its_reason() {
        let commits = Commits::default();
        let mut applying = commits.applying();
        applying.failed("the commit failed: disk full".to_owned());
        drop(applying);
        assert_eq!(commits.wait_applied(), Err("the commit failed: disk full".to_owned()));
        // A later batch applied well does not hide the loss.
        drop(commits.applying());
        assert_eq!(commits.wait_applied(), Err("the commit failed: disk full".to_owned()));

        let commits = Commits::default();
        let panicked = std::panic::catch_unwind(AssertUnwindSafe(|| {
            let _applying = commits.applying();
            panic!("the storage engine failed");
        }));
        assert!(panicked.is_err());
        let refused = commits.wait_applied().expect_err("refused after a panic");
        assert!(refused.contains("reopen the journal"), "{refused}");
    }
}
