//! [`Pending`]: the answer to one write sent to the writer thread, which a caller either
//! blocks on ([`Pending::wait`]) or awaits (it is a `Future`).
//!
//! Awaiting matters for async callers: a thousand concurrent calls that each wait for their
//! write would otherwise hold a thousand blocking threads, and creating and switching those
//! threads costs more than the group commit they share. The future is plain `std` (a mutex,
//! a condition variable and a `Waker`), so it works on any executor and this crate stays
//! free of one.

use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll, Waker};

use crate::error::{JournalError, Result};

/// The outcome of one write, available once the batch that holds it has committed.
///
/// Dropping it does not cancel the write: the writer applies and commits it anyway.
#[must_use = "a write's outcome says whether it is durable"]
pub struct Pending<T> {
    source: Source<T>,
}

enum Source<T> {
    /// Delivered through a [`Reply`].
    Slot(Arc<Slot<T>>),
    /// Another write's outcome, changed by a function once it is ready ([`Pending::map`]).
    Mapped(Box<dyn Mapped<T> + Send>),
}

/// A [`Pending`] of another type with the function that makes this one's outcome of it.
trait Mapped<T> {
    fn wait(self: Box<Self>) -> Result<T>;
    fn poll(&mut self, cx: &mut Context<'_>) -> Poll<Result<T>>;
}

struct Map<A, F> {
    from: Pending<A>,
    f: Option<F>,
}

impl<A, T, F: FnOnce(A) -> T> Mapped<T> for Map<A, F> {
    fn wait(self: Box<Self>) -> Result<T> {
        let Map { from, f } = *self;
        let f = f.expect("a mapped write is waited on once");
        from.wait().map(f)
    }

    fn poll(&mut self, cx: &mut Context<'_>) -> Poll<Result<T>> {
        match Pin::new(&mut self.from).poll(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(outcome) => {
                let f = self.f.take().expect("a mapped write is polled to its end once");
                Poll::Ready(outcome.map(f))
            }
        }
    }
}

/// What the writer side holds: it delivers the outcome once, or, if it is dropped without
/// delivering (the writer stopped), reports that the writer stopped.
pub(crate) struct Reply<T> {
    slot: Option<Arc<Slot<T>>>,
    path: PathBuf,
}

struct Slot<T> {
    state: Mutex<State<T>>,
    ready: Condvar,
}

struct State<T> {
    outcome: Option<Result<T>>,
    waker: Option<Waker>,
}

/// Returns a connected pair: the writer delivers through the [`Reply`], the caller reads the
/// [`Pending`].
pub(crate) fn channel<T>(path: PathBuf) -> (Reply<T>, Pending<T>) {
    let slot = Arc::new(Slot {
        state: Mutex::new(State { outcome: None, waker: None }),
        ready: Condvar::new(),
    });
    (Reply { slot: Some(Arc::clone(&slot)), path }, Pending { source: Source::Slot(slot) })
}

impl<T> Pending<T> {
    /// Returns a write that has already ended with `outcome` (e.g. the writer was gone).
    pub(crate) fn ready(outcome: Result<T>) -> Pending<T> {
        let slot = Arc::new(Slot {
            state: Mutex::new(State { outcome: Some(outcome), waker: None }),
            ready: Condvar::new(),
        });
        Pending { source: Source::Slot(slot) }
    }

    /// Returns the write whose outcome, once this one's is ready, is `f` of its value.
    pub fn map<U>(self, f: impl FnOnce(T) -> U + Send + 'static) -> Pending<U>
    where
        T: Send + 'static,
    {
        Pending { source: Source::Mapped(Box::new(Map { from: self, f: Some(f) })) }
    }

    /// Blocks the calling thread until the write's batch has committed.
    pub fn wait(self) -> Result<T> {
        let slot = match self.source {
            Source::Slot(slot) => slot,
            Source::Mapped(mapped) => return mapped.wait(),
        };
        let mut state = lock(&slot.state);
        loop {
            if let Some(outcome) = state.outcome.take() {
                return outcome;
            }
            state = slot.ready.wait(state).unwrap_or_else(PoisonError::into_inner);
        }
    }
}

impl<T> Future for Pending<T> {
    type Output = Result<T>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<T>> {
        let slot = match &mut self.get_mut().source {
            Source::Slot(slot) => slot,
            Source::Mapped(mapped) => return mapped.poll(cx),
        };
        let mut state = lock(&slot.state);
        if let Some(outcome) = state.outcome.take() {
            return Poll::Ready(outcome);
        }
        match &state.waker {
            Some(waker) if waker.will_wake(cx.waker()) => {}
            _ => state.waker = Some(cx.waker().clone()),
        }
        Poll::Pending
    }
}

impl<T> Reply<T> {
    /// Delivers `outcome` to the caller and wakes it.
    pub(crate) fn send(mut self, outcome: Result<T>) {
        if let Some(slot) = self.slot.take() {
            deliver(&slot, outcome);
        }
    }
}

impl<T> Drop for Reply<T> {
    fn drop(&mut self) {
        if let Some(slot) = self.slot.take() {
            deliver(&slot, Err(JournalError::WriterStopped { path: self.path.clone() }));
        }
    }
}

fn deliver<T>(slot: &Slot<T>, outcome: Result<T>) {
    let waker = {
        let mut state = lock(&slot.state);
        state.outcome = Some(outcome);
        state.waker.take()
    };
    slot.ready.notify_all();
    if let Some(waker) = waker {
        waker.wake();
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::task::Wake;

    struct Count(Mutex<u32>);
    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            *lock(&self.0) += 1;
        }
    }

    #[test]
    fn a_polled_write_is_woken_once_delivered_and_then_ready() {
        let (reply, mut pending) = channel::<u32>(PathBuf::from("j.redb"));
        let count = Arc::new(Count(Mutex::new(0)));
        let waker = Waker::from(Arc::clone(&count));
        let mut cx = Context::from_waker(&waker);
        assert!(Pin::new(&mut pending).poll(&mut cx).is_pending());
        reply.send(Ok(7));
        assert_eq!(*lock(&count.0), 1);
        assert!(matches!(Pin::new(&mut pending).poll(&mut cx), Poll::Ready(Ok(7))));
    }

    #[test]
    fn a_reply_dropped_unsent_reports_the_writer_stopped() {
        let (reply, pending) = channel::<u32>(PathBuf::from("j.redb"));
        let waiter = std::thread::spawn(move || pending.wait());
        drop(reply);
        let outcome = waiter.join().expect("waiter");
        assert!(
            matches!(&outcome, Err(JournalError::WriterStopped { path }) if path.ends_with("j.redb")),
            "{outcome:?}"
        );
    }

    #[test]
    fn wait_returns_a_value_delivered_from_another_thread() {
        let (reply, pending) = channel::<&str>(PathBuf::from("j.redb"));
        let sender = std::thread::spawn(move || reply.send(Ok("done")));
        assert_eq!(pending.wait().expect("delivered"), "done");
        sender.join().expect("sender");
    }
}
