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
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll, Waker};

use crate::error::{JournalError, Result};

/// The async waits on writes of this process, for [`spin_for_awaited_write`].
static WAITS: Waits = Waits::new();

/// How many async callers wait on a write now (a `Pending` polled and not yet delivered),
/// how many such waits have been delivered so far, and whether a thread spins for one.
struct Waits {
    awaited: AtomicU64,
    delivered: AtomicU64,
    /// One thread spins at a time, so that the idle workers of a many-threaded runtime do
    /// not all take a core from the writer.
    spinning: AtomicBool,
}

impl Waits {
    const fn new() -> Waits {
        Waits {
            awaited: AtomicU64::new(0),
            delivered: AtomicU64::new(0),
            spinning: AtomicBool::new(false),
        }
    }

    fn began(&self) {
        self.awaited.fetch_add(1, Ordering::AcqRel);
    }

    fn ended(&self) {
        self.awaited.fetch_sub(1, Ordering::AcqRel);
        self.delivered.fetch_add(1, Ordering::AcqRel);
    }

    /// Spins until a wait that was on when it began is delivered, or for `max`; returns at
    /// once when no wait is on or another thread spins.
    fn spin(&self, max: std::time::Duration) {
        if self.awaited.load(Ordering::Acquire) == 0 || self.spinning.swap(true, Ordering::AcqRel) {
            return;
        }
        let delivered = self.delivered.load(Ordering::Acquire);
        let start = std::time::Instant::now();
        while self.delivered.load(Ordering::Acquire) == delivered
            && self.awaited.load(Ordering::Acquire) > 0
            && start.elapsed() < max
        {
            std::hint::spin_loop();
        }
        self.spinning.store(false, Ordering::Release);
    }
}

/// When an async caller of this process waits on a journal write, waits for one such write
/// to be delivered, spinning for at most `max`; returns at once otherwise.
///
/// For an async runtime's hook before a worker thread sleeps (tokio's `on_thread_park`):
/// a worker that only waits for the journal's flush would sleep and then be woken, which
/// costs tens of microseconds on some machines, more than the wait left after the flush.
/// Spinning keeps it awake for the delivery; the write's task is then ready before the
/// worker would have slept.
///
/// One thread spins at a time; another that calls it meanwhile returns at once.
pub fn spin_for_awaited_write(max: std::time::Duration) {
    WAITS.spin(max);
}

/// Told when a piece of async work starts and stops waiting on a journal write: installed
/// for the duration of a poll with [`watching_writes`], it is given every write first
/// awaited in that poll ([`AwaitHook::began`]), and told once the write is delivered and its
/// waiter woken ([`AwaitHook::ended`]), even if the waiter dropped the write meanwhile.
///
/// For a runtime that must know whether its work is waiting on the journal (then it is not
/// idle: the write's delivery wakes it) rather than on something outside it.
pub trait AwaitHook: Send + Sync {
    /// A write awaited in a poll under this hook has not been delivered yet.
    fn began(&self);
    /// That write has been delivered, after its waiter was woken.
    fn ended(&self);
}

thread_local! {
    static HOOK: std::cell::RefCell<Option<Arc<dyn AwaitHook>>> =
        const { std::cell::RefCell::new(None) };
}

/// Runs `f` (one poll of a piece of async work) with `hook` told of each journal write that
/// `f` starts to await ([`AwaitHook`]); the hook in place before is back afterwards.
pub fn watching_writes<R>(hook: &Arc<dyn AwaitHook>, f: impl FnOnce() -> R) -> R {
    struct Restore(Option<Arc<dyn AwaitHook>>);
    impl Drop for Restore {
        fn drop(&mut self) {
            let before = self.0.take();
            HOOK.with(|h| *h.borrow_mut() = before);
        }
    }
    let before = HOOK.with(|h| h.borrow_mut().replace(Arc::clone(hook)));
    let _restore = Restore(before);
    f()
}

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
    /// The hook of the work that first awaited this write ([`watching_writes`]).
    hook: Option<Arc<dyn AwaitHook>>,
}

/// Returns a connected pair: the writer delivers through the [`Reply`], the caller reads the
/// [`Pending`].
pub(crate) fn channel<T>(path: PathBuf) -> (Reply<T>, Pending<T>) {
    let slot = Arc::new(Slot {
        state: Mutex::new(State { outcome: None, waker: None, hook: None }),
        ready: Condvar::new(),
    });
    (Reply { slot: Some(Arc::clone(&slot)), path }, Pending { source: Source::Slot(slot) })
}

impl<T> Pending<T> {
    /// Returns a write that has already ended with `outcome` (e.g. the writer was gone).
    pub(crate) fn ready(outcome: Result<T>) -> Pending<T> {
        let slot = Arc::new(Slot {
            state: Mutex::new(State { outcome: Some(outcome), waker: None, hook: None }),
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
            Some(_) => state.waker = Some(cx.waker().clone()),
            None => {
                WAITS.began();
                state.waker = Some(cx.waker().clone());
                if state.hook.is_none() {
                    state.hook = HOOK.with(|h| h.borrow().clone());
                    if let Some(hook) = &state.hook {
                        hook.began();
                    }
                }
            }
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
    let (waker, hook) = {
        let mut state = lock(&slot.state);
        state.outcome = Some(outcome);
        (state.waker.take(), state.hook.take())
    };
    slot.ready.notify_all();
    if let Some(waker) = waker {
        waker.wake();
        WAITS.ended();
    }
    // After the wake: the waiter is runnable before its work stops counting as waiting
    // on the journal.
    if let Some(hook) = hook {
        hook.ended();
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
    fn a_spin_waits_for_the_delivery_of_an_awaited_write_and_no_longer() {
        // Waits of their own, so that other tests' writes do not move them.
        let max = std::time::Duration::from_secs(120);
        let waits = Arc::new(Waits::new());
        let started = std::time::Instant::now();
        waits.spin(max);
        assert!(started.elapsed() < max / 2, "nothing awaited: it returns at once");
        waits.began();
        let delivered = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let deliverer = {
            let (waits, delivered) = (Arc::clone(&waits), Arc::clone(&delivered));
            std::thread::spawn(move || {
                std::thread::sleep(std::time::Duration::from_millis(20));
                delivered.store(true, Ordering::Release);
                waits.ended();
            })
        };
        waits.spin(max);
        assert!(delivered.load(Ordering::Acquire), "it returned before the delivery");
        assert!(started.elapsed() < max / 2, "it spun on after the delivery");
        deliverer.join().expect("deliverer");
    }

    #[test]
    fn a_polled_write_counts_as_awaited_until_it_is_delivered() {
        let (reply, mut pending) = channel::<u32>(PathBuf::from("j.redb"));
        let count = Arc::new(Count(Mutex::new(0)));
        let waker = Waker::from(Arc::clone(&count));
        let delivered = WAITS.delivered.load(Ordering::Acquire);
        // Polled twice, counted once.
        for _ in 0..2 {
            assert!(Pin::new(&mut pending).poll(&mut Context::from_waker(&waker)).is_pending());
        }
        assert!(WAITS.awaited.load(Ordering::Acquire) >= 1);
        reply.send(Ok(3));
        assert!(WAITS.delivered.load(Ordering::Acquire) > delivered);
        assert_eq!(*lock(&count.0), 1);
    }

    #[derive(Default)]
    struct Hooked(std::sync::atomic::AtomicI64, std::sync::atomic::AtomicI64);
    impl AwaitHook for Hooked {
        fn began(&self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
        fn ended(&self) {
            self.1.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn a_write_awaited_under_a_hook_is_told_to_it_once_until_delivered_even_if_dropped() {
        let hooked = Arc::new(Hooked::default());
        let hook: Arc<dyn AwaitHook> = hooked.clone();
        let (reply, mut pending) = channel::<u32>(PathBuf::from("j.redb"));
        let count = Arc::new(Count(Mutex::new(0)));
        let waker = Waker::from(Arc::clone(&count));
        for _ in 0..2 {
            let polled = watching_writes(&hook, || {
                Pin::new(&mut pending).poll(&mut Context::from_waker(&waker))
            });
            assert!(polled.is_pending());
        }
        assert_eq!(hooked.0.load(Ordering::SeqCst), 1, "began once");
        assert_eq!(hooked.1.load(Ordering::SeqCst), 0);
        drop(pending);
        reply.send(Ok(1));
        assert_eq!(hooked.1.load(Ordering::SeqCst), 1, "ended at the delivery");
        // Outside a hook nothing is told.
        let (reply, mut pending) = channel::<u32>(PathBuf::from("j.redb"));
        assert!(Pin::new(&mut pending).poll(&mut Context::from_waker(&waker)).is_pending());
        reply.send(Ok(2));
        assert_eq!(hooked.0.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn wait_returns_a_value_delivered_from_another_thread() {
        let (reply, pending) = channel::<&str>(PathBuf::from("j.redb"));
        let sender = std::thread::spawn(move || reply.send(Ok("done")));
        assert_eq!(pending.wait().expect("delivered"), "done");
        sender.join().expect("sender");
    }
}
