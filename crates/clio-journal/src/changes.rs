//! [`Changes`]: a reader's notice that the journal has committed something new, so that a
//! view of a run (the CLI's progress) reads it again when it changed instead of at a fixed
//! interval.
//!
//! The writer counts its commits and wakes every waiting reader after each one, once the
//! batch's callers have their replies (a read then sees what was committed). A reader keeps
//! the count it has seen: [`Changes::changed`] resolves at once when the journal has
//! committed since, so no commit between two awaits is missed, and many commits while a
//! reader was busy are one change. Plain `std` (a mutex and wakers), like [`crate::Pending`],
//! so it works on any executor.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll, Waker};

/// The writer's side: the count of commits, and the readers waiting for the next one.
#[derive(Default)]
pub(crate) struct Commits {
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    count: u64,
    waiting: Vec<Waker>,
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
}
