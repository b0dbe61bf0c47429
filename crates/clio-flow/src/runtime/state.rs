//! [`RunState`]: what one drive of a run shares between its contexts — the run's records
//! loaded for replay, its counters (entries, model calls, tokens), its cancellation tokens,
//! its background work, and the activity count that tells a run waiting only on questions.

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use clio_journal::{EntryKind, JournalError, RawEntry, RunId, TaskId, TaskRecord};
use serde_json::Value;
use sha2::{Digest, Sha256};
use tokio::sync::{Notify, Semaphore};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::history::{self, Admission, History};
use super::{Question, RunOutcome, RuntimeInner};
use crate::error::{FlowError, RecordedCommand};
use crate::flow::Limits;
use crate::result::FlowOutput;

/// Runs journal work `f` on the blocking pool and maps its error.
pub(crate) async fn blocking<T, F>(f: F) -> Result<T, FlowError>
where
    T: Send + 'static,
    F: FnOnce() -> Result<T, JournalError> + Send + 'static,
{
    match tokio::task::spawn_blocking(f).await {
        Ok(res) => res.map_err(FlowError::from),
        Err(err) => Err(FlowError::CallInterrupted {
            handle: None,
            message: format!("journal worker: {err}"),
        }),
    }
}

/// Returns a short hex digest of `value`'s JSON text.
pub(crate) fn digest(value: &Value) -> String {
    /// Feeds the JSON text straight into the hash, without building the string first.
    struct Hashing(Sha256);
    impl std::io::Write for Hashing {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.update(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut h = Hashing(Sha256::new());
    // Writing a `Value` into a sink that never fails cannot fail.
    let _ = serde_json::to_writer(&mut h, value);
    let out = h.0.finalize();
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut text = String::with_capacity(16);
    for b in out.iter().take(8) {
        text.push(char::from(HEX[usize::from(b >> 4)]));
        text.push(char::from(HEX[usize::from(b & 0xf)]));
    }
    text
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Counts live work, so the driver can tell a run that waits only on questions.
///
/// Live work is counted `busy`: a call or step running (a [`Busy`]), a piece of the run's
/// work that has been woken and not polled since ([`Tracked`]: from its wake to the end of
/// its next poll), and a journal write one of those pieces awaits (from its first poll to
/// its delivery, after its waiter was woken: [`clio_journal::watching_writes`]). A piece
/// that waits on a person counts `waiting`. So a run whose count of busy work is 0 while
/// something waits can make no progress without an answer: every hand-off between two
/// pieces (a wake, a write's delivery) is counted on the receiving side before the giving
/// side stops counting.
#[derive(Default)]
pub(crate) struct Activity(Arc<Counts>);

#[derive(Default)]
pub(crate) struct Counts {
    busy: AtomicUsize,
    waiting: AtomicUsize,
    /// Bumped at every change of the counts: a check that saw the same value twice saw
    /// nothing move in between.
    epoch: AtomicU64,
    changed: Notify,
}

impl Counts {
    fn hold(&self) {
        self.busy.fetch_add(1, Ordering::SeqCst);
        self.epoch.fetch_add(1, Ordering::SeqCst);
    }

    fn release(&self) {
        self.busy.fetch_sub(1, Ordering::SeqCst);
        self.epoch.fetch_add(1, Ordering::SeqCst);
        self.changed.notify_waiters();
        self.changed.notify_one();
    }
}

impl clio_journal::AwaitHook for Counts {
    fn began(&self) {
        self.hold();
    }

    fn ended(&self) {
        self.release();
    }
}

/// Holds one unit of live work until dropped.
pub(crate) struct Busy<'a>(&'a Activity);

impl Drop for Busy<'_> {
    fn drop(&mut self) {
        self.0.0.release();
    }
}

impl Activity {
    pub(crate) fn busy(&self) -> Busy<'_> {
        self.0.hold();
        Busy(self)
    }

    fn waiting(&self, delta: isize) {
        if delta > 0 {
            self.0.waiting.fetch_add(1, Ordering::SeqCst);
        } else {
            self.0.waiting.fetch_sub(1, Ordering::SeqCst);
        }
        self.0.epoch.fetch_add(1, Ordering::SeqCst);
        self.0.changed.notify_waiters();
        self.0.changed.notify_one();
    }

    fn suspended(&self) -> bool {
        self.0.waiting.load(Ordering::SeqCst) > 0 && self.0.busy.load(Ordering::SeqCst) == 0
    }

    fn epoch(&self) -> u64 {
        self.0.epoch.load(Ordering::SeqCst)
    }

    /// Returns `work` counted as live work of this run while it is woken ([`Tracked`]),
    /// starting woken (it has not run yet).
    pub(crate) fn track<F: Future>(&self, work: F) -> Tracked<F> {
        Tracked::new(Arc::clone(&self.0), work)
    }
}

/// What a [`Tracked`] piece of work's wakers share: whether it was woken and not polled
/// since (then it counts one unit of busy work), and the waker of the task that polls it.
struct WakeFlag {
    counts: Arc<Counts>,
    /// [`AWAKE`], [`ASLEEP`] or [`GONE`] (dropped: a late wake counts nothing).
    state: std::sync::atomic::AtomicU8,
    waker: futures::task::AtomicWaker,
}

const ASLEEP: u8 = 0;
const AWAKE: u8 = 1;
const GONE: u8 = 2;

impl std::task::Wake for WakeFlag {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        if self.state.load(Ordering::SeqCst) == ASLEEP {
            // Counted before it is marked: a poll that clears the mark finds it counted.
            self.counts.hold();
            if self
                .state
                .compare_exchange(ASLEEP, AWAKE, Ordering::SeqCst, Ordering::SeqCst)
                .is_err()
            {
                self.counts.release();
            }
        }
        self.waker.wake();
    }
}

/// A piece of a run's work counted busy from each of its wakes to the end of the poll that
/// follows, and whose journal writes count busy until they are delivered; made with
/// [`Activity::track`]. Its output comes with a [`Finished`] that keeps counting until
/// whoever reads the output drops it (the hand-off of a result to the work waiting on it).
pub(crate) struct Tracked<F> {
    work: std::pin::Pin<Box<F>>,
    flag: Arc<WakeFlag>,
    waker: std::task::Waker,
    hook: Arc<dyn clio_journal::AwaitHook>,
}

impl<F: Future> Tracked<F> {
    fn new(counts: Arc<Counts>, work: F) -> Tracked<F> {
        counts.hold();
        Tracked::adopt(counts, work)
    }

    /// As [`Tracked::new`], taking over a unit of busy work already counted.
    fn adopt(counts: Arc<Counts>, work: F) -> Tracked<F> {
        let flag = Arc::new(WakeFlag {
            counts: Arc::clone(&counts),
            state: std::sync::atomic::AtomicU8::new(AWAKE),
            waker: futures::task::AtomicWaker::new(),
        });
        let waker = std::task::Waker::from(Arc::clone(&flag));
        Tracked { work: Box::pin(work), flag, waker, hook: counts }
    }
}

impl<F: Future> Future for Tracked<F> {
    type Output = (F::Output, Finished);

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        let this = &mut *self;
        this.flag.waker.register(cx.waker());
        let was = this.flag.state.swap(ASLEEP, Ordering::SeqCst);
        let mut inner = std::task::Context::from_waker(&this.waker);
        let work = &mut this.work;
        let polled = clio_journal::watching_writes(&this.hook, || work.as_mut().poll(&mut inner));
        let out = match polled {
            std::task::Poll::Ready(out) => {
                // Counted on until the reader of the output has it.
                this.flag.counts.hold();
                std::task::Poll::Ready((out, Finished(Some(Arc::clone(&this.flag.counts)))))
            }
            std::task::Poll::Pending => std::task::Poll::Pending,
        };
        if was == AWAKE {
            this.flag.counts.release();
        }
        out
    }
}

impl<F> Drop for Tracked<F> {
    fn drop(&mut self) {
        if self.flag.state.swap(GONE, Ordering::SeqCst) == AWAKE {
            self.flag.counts.release();
        }
    }
}

/// The hand-off of a [`Tracked`] piece's output: one unit of live work until dropped (by
/// the work that reads the output, which was woken and counts itself by then).
pub(crate) struct Finished(Option<Arc<Counts>>);

impl Drop for Finished {
    fn drop(&mut self) {
        if let Some(counts) = self.0.take() {
            counts.release();
        }
    }
}

/// One unit of live work owned by a task that has been spawned and not yet run: the run
/// does not look idle between a spawn and the task's first step.
pub(crate) struct Starting {
    counts: Arc<Counts>,
    /// False once a [`Tracked`] took the unit over.
    owned: bool,
}

impl Starting {
    pub(crate) fn new(run: &Arc<RunState>) -> Starting {
        run.activity.0.hold();
        Starting { counts: Arc::clone(&run.activity.0), owned: true }
    }

    /// Runs `work` as tracked live work of the run ([`Tracked`]), which takes over this
    /// unit: counted busy from the spawn through its first poll, from each wake to the poll
    /// after it, while a journal write it awaits is not delivered, and from its end until
    /// its output's [`Finished`] is dropped (by whoever reads the output, once woken).
    pub(crate) fn handing_over<F: Future>(mut self, work: F) -> Tracked<F> {
        self.owned = false;
        Tracked::adopt(Arc::clone(&self.counts), work)
    }
}

impl Drop for Starting {
    fn drop(&mut self) {
        if self.owned {
            self.counts.release();
        }
    }
}

/// The run's background work, and whether the run still admits more.
#[derive(Default)]
struct Background {
    handles: Vec<JoinHandle<()>>,
    ended: bool,
}

/// The shared state of one drive of a run.
pub(crate) struct RunState {
    pub(crate) rt: Arc<RuntimeInner>,
    pub(crate) run: RunId,
    pub(crate) replay_only: bool,
    /// In a replay: the run had not ended, so a command with no record is the end of its
    /// history (the work there waits for good) rather than a mismatch.
    pub(crate) frontier: bool,
    pub(crate) limits: Limits,
    recorded: HashMap<String, RawEntry>,
    /// The recorded commands the code has not reached yet, and the barrier new ones wait at.
    history: History,
    /// Set once the entry-cap warning is recorded (or found recorded).
    entries_warned: AtomicBool,
    /// The loaded tasks by the identity of the call that made them (a call recorded once it
    /// had ended has no acceptance entry: its task names it).
    calls: HashMap<String, TaskId>,
    /// The run's tasks, each boxed: a run of thousands of calls keeps every one, and the
    /// map's table, with room to spare, then holds pointers rather than records.
    tasks: Mutex<HashMap<TaskId, Box<TaskRecord>>>,
    entries: AtomicU64,
    model_calls: AtomicU64,
    tokens: AtomicU64,
    submitted: AtomicU64,
    steps_run: AtomicU64,
    pub(crate) activity: Activity,
    pub(crate) concurrency: Option<Arc<Semaphore>>,
    pub(crate) cancel: CancellationToken,
    cancelled: AtomicBool,
    /// Why the run stopped itself to be resumed later (a provider that stayed
    /// unreachable): set once, and the drive then ends with the run interrupted.
    suspended: Mutex<Option<String>>,
    task_tokens: Mutex<HashMap<TaskId, CancellationToken>>,
    stop_tokens: Mutex<HashMap<TaskId, CancellationToken>>,
    answers: Mutex<HashMap<String, Value>>,
    /// The answers `ctx.patched` gave in this drive, by marker identity.
    patches: Mutex<HashMap<String, bool>>,
    answer_added: Notify,
    pending: Mutex<Vec<Question>>,
    background: Mutex<Background>,
    /// The team the run's agents' team tools act on, once one has been used.
    pub(crate) team: std::sync::OnceLock<crate::team::Team>,
    /// The plugins a person trusted during this run, as `(plugin, digest)`: read back from
    /// the run's trust receipts when it is loaded, and added to as people say yes.
    trusted: Mutex<HashSet<(String, String)>>,
    /// One trust question at a time per plugin: calls that want the same untrusted
    /// plugin at once wait for the first one's question instead of asking again.
    trust_asks: Mutex<HashMap<String, Arc<TrustAsk>>>,
}

/// The trust question of one plugin in a run: held while it is asked, and how many times
/// the person has said no in this drive, so a call that waited for a question sees how it
/// ended ([`RunState::trust_ask`]).
#[derive(Default)]
pub(crate) struct TrustAsk {
    pub(crate) turn: tokio::sync::Mutex<()>,
    pub(crate) denials: AtomicU64,
}

/// What a run loaded for replay: every entry and task of the run, which take a while to
/// free.
pub(crate) struct Loaded {
    _recorded: HashMap<String, RawEntry>,
    _calls: HashMap<String, TaskId>,
    _tasks: HashMap<TaskId, Box<TaskRecord>>,
}

impl RunState {
    /// Returns what the run loaded for replay and drops the rest of its state, which holds
    /// the journal, here; `None` (and nothing dropped yet) while the state is shared.
    pub(crate) fn into_loaded(self: Arc<Self>) -> Option<Loaded> {
        let state = Arc::try_unwrap(self).ok()?;
        Some(Loaded {
            _recorded: state.recorded,
            _calls: state.calls,
            _tasks: state.tasks.into_inner().unwrap_or_else(std::sync::PoisonError::into_inner),
        })
    }

    pub(crate) async fn load(
        rt: Arc<RuntimeInner>,
        run: RunId,
        limits: Limits,
        replay_only: bool,
        frontier: bool,
    ) -> Result<Arc<RunState>, FlowError> {
        let journal = rt.journal.clone();
        let (entries, tasks) =
            super::blocking(move || Ok((journal.raw_entries(run)?, journal.tasks(run)?))).await?;
        let counted = entries.iter().filter(|e| counts(e)).count() as u64;
        let mut recorded = HashMap::with_capacity(entries.len());
        for mut e in entries {
            // The identity moves into the key: nothing reads it from a recorded entry.
            if let Some(id) = e.identity.take() {
                recorded.insert(id, e);
            }
        }
        let answers = recorded
            .iter()
            .filter(|(_, e)| e.kind == EntryKind::Answer)
            .map(|(id, e)| (id.clone(), e.payload_as::<Answer>().map_or(Value::Null, |a| a.value)))
            .collect();
        // What people trusted earlier in the run: its trust receipts (`<question>@trust`).
        let trusted = recorded
            .iter()
            .filter(|(id, e)| e.kind == EntryKind::PermissionReceipt && id.ends_with("@trust"))
            .filter_map(|(_, e)| {
                let p = e.payload_value().ok()?;
                let text = |k: &str| p.get(k).and_then(Value::as_str).map(str::to_owned);
                (text("decision")? == "trust").then_some((text("plugin")?, text("digest")?))
            })
            .collect();
        let history = History::new(&recorded);
        let entries_warned = recorded.contains_key(ENTRIES_WARNING);
        let concurrency = (limits.max_concurrency > 0)
            .then(|| Arc::new(Semaphore::new(limits.max_concurrency as usize)));
        Ok(Arc::new(RunState {
            rt,
            run,
            replay_only,
            frontier,
            limits,
            recorded,
            history,
            entries_warned: AtomicBool::new(entries_warned),
            calls: tasks.iter().filter_map(|t| Some((t.call.clone()?, t.id))).collect(),
            tasks: Mutex::new(tasks.into_iter().map(|t| (t.id, Box::new(t))).collect()),
            entries: AtomicU64::new(counted),
            model_calls: AtomicU64::new(0),
            tokens: AtomicU64::new(0),
            submitted: AtomicU64::new(0),
            steps_run: AtomicU64::new(0),
            activity: Activity::default(),
            concurrency,
            cancel: CancellationToken::new(),
            cancelled: AtomicBool::new(false),
            suspended: Mutex::new(None),
            task_tokens: Mutex::new(HashMap::new()),
            stop_tokens: Mutex::new(HashMap::new()),
            answers: Mutex::new(answers),
            patches: Mutex::new(HashMap::new()),
            answer_added: Notify::new(),
            pending: Mutex::new(Vec::new()),
            background: Mutex::new(Background::default()),
            team: std::sync::OnceLock::new(),
            trusted: Mutex::new(trusted),
            trust_asks: Mutex::new(HashMap::new()),
        }))
    }

    /// Says whether a person trusted plugin `plugin` at `digest` during this run.
    pub(crate) fn trusted_in_run(&self, plugin: &str, digest: &str) -> bool {
        lock(&self.trusted).contains(&(plugin.to_owned(), digest.to_owned()))
    }

    /// Records that a person trusted plugin `plugin` at `digest` during this run.
    pub(crate) fn trust_in_run(&self, plugin: &str, digest: &str) {
        lock(&self.trusted).insert((plugin.to_owned(), digest.to_owned()));
    }

    /// Returns the trust question of plugin `plugin` in this run, shared by every call
    /// that wants it.
    pub(crate) fn trust_ask(&self, plugin: &str) -> Arc<TrustAsk> {
        Arc::clone(lock(&self.trust_asks).entry(plugin.to_owned()).or_default())
    }

    /// Says whether the answer `identity` (`<question>@answer`) is known to this drive.
    pub(crate) fn has_answer(&self, identity: &str) -> bool {
        lock(&self.answers).contains_key(identity)
    }

    /// Drives `forward` until it returns, or until every piece of live work waits on a
    /// question (the run is then left awaiting input).
    pub(crate) async fn drive(
        &self,
        forward: impl Future<Output = Result<FlowOutput, FlowError>>,
    ) -> RunOutcome {
        let mut forward = std::pin::pin!(self.activity.track(forward));
        let res = match self.until_waiting(&mut forward).await {
            Ok((res, _finished)) => res,
            Err(questions) => return RunOutcome::AwaitingInput(questions),
        };
        // Work started with `ctx.start` belongs to the run: wait for it before the run ends,
        // and for work it starts meanwhile; then no more is admitted. Such work may wait on
        // a person too (a question of a background workflow's gate), once the flow itself
        // has returned: then the run waits on people as well.
        loop {
            let handles: Vec<_> = {
                let mut background = lock(&self.background);
                if background.handles.is_empty() {
                    background.ended = true;
                    break;
                }
                background.handles.drain(..).collect()
            };
            for mut handle in handles {
                if let Err(questions) = self.until_waiting(&mut handle).await {
                    return RunOutcome::AwaitingInput(questions);
                }
            }
        }
        if let Some(err) = self.history.first_divergence() {
            return RunOutcome::Failed(err);
        }
        if let Some(why) = self.suspension() {
            return RunOutcome::Failed(FlowError::CallInterrupted { handle: None, message: why });
        }
        if self.is_cancelled() {
            self.record_unfinished_as_cancelled().await;
        }
        match res {
            Ok(out) => RunOutcome::Succeeded(out),
            Err(_) if self.is_cancelled() => RunOutcome::Cancelled,
            Err(err) => RunOutcome::Failed(err),
        }
    }

    /// Records every task of a cancelled run that its work left unfinished as cancelled.
    /// Work stopped by the cancel records nothing (a call cut short is not its own
    /// failure), and a cancel records as cancelled only the tasks unfinished when it came:
    /// a call accepted in between was left `running`, read as interrupted once the process
    /// was gone, and counted running by the live summary. By now every piece of the run's
    /// work has ended, and what ended well has recorded its result.
    async fn record_unfinished_as_cancelled(&self) {
        if self.replay_only {
            return;
        }
        let (journal, run) = (self.rt.journal.clone(), self.run);
        let recorded = blocking(move || {
            for task in journal.tasks(run)? {
                if task.status.is_terminal() {
                    continue;
                }
                let update = clio_journal::TaskUpdate {
                    status: Some(clio_journal::TaskStatus::Cancelled),
                    ..clio_journal::TaskUpdate::default()
                };
                match journal.update_task(task.id, update) {
                    Ok(_) | Err(JournalError::TaskFinished { .. }) => {}
                    Err(err) => return Err(err),
                }
            }
            Ok(())
        })
        .await;
        if let Err(error) = recorded {
            tracing::warn!(run = run.0, %error, "the cancelled run's unfinished tasks were not recorded cancelled");
        }
    }

    /// Polls `work` to its end (`Ok`), unless first every piece of the run's live work
    /// waits on a person: then returns the questions it waits on (`Err`), with its
    /// background work stopped (a resume takes it up again).
    ///
    /// The run is idle when nothing counts busy ([`Activity`]) while something waits, and
    /// nothing moved while `work` was polled again and other tasks had their turn; held
    /// commands and patch questions are settled first (a stall may let them move).
    async fn until_waiting<F: Future + Unpin>(
        &self,
        work: &mut F,
    ) -> Result<F::Output, Vec<Question>> {
        loop {
            // Made before the counts are read: a change after the read wakes it.
            let changed = self.activity.0.changed.notified();
            if !self.activity.suspended() {
                tokio::select! {
                    out = &mut *work => return Ok(out),
                    () = changed => continue,
                }
            }
            let epoch = self.activity.epoch();
            // Work between two of its steps on another thread takes its next step; `work`
            // is polled meanwhile, so what it was woken for moves too.
            let settle = async {
                for _ in 0..4 {
                    tokio::task::yield_now().await;
                }
            };
            tokio::select! {
                biased;
                out = &mut *work => return Ok(out),
                () = changed => continue,
                () = settle => {}
            }
            if self.activity.suspended() && self.activity.epoch() == epoch && !self.history.stall()
            {
                self.abort_background();
                return Err(lock(&self.pending).clone());
            }
        }
    }

    fn abort_background(&self) {
        let mut background = lock(&self.background);
        // Suspended: nothing more may start on this state (a queued subagent turn would
        // write into a run awaiting input); a resume drives a new one.
        background.ended = true;
        for handle in background.handles.drain(..) {
            handle.abort();
        }
    }

    pub(crate) fn spawn_background(&self, handle: JoinHandle<()>) {
        lock(&self.background).handles.push(handle);
    }

    /// Spawns `work` as background work of the run, unless the run has ended (its drive
    /// has waited for all of its work): then returns false and spawns nothing.
    pub(crate) fn spawn_background_unless_ended(
        &self,
        work: impl Future<Output = ()> + Send + 'static,
    ) -> bool {
        let mut background = lock(&self.background);
        if background.ended {
            return false;
        }
        let work = self.activity.track(work);
        background.handles.push(tokio::spawn(tracing::Instrument::in_current_span(async move {
            drop(work.await);
        })));
        true
    }

    /// Returns whether scope `scope` (an identity prefix) has recorded commands the code
    /// has not reached yet: a new command there would be held.
    pub(crate) fn scope_behind(&self, scope: &str) -> bool {
        self.history.behind(scope)
    }

    /// Returns whether the history holds an entry with `identity`, without reaching it.
    pub(crate) fn is_recorded(&self, identity: &str) -> bool {
        self.recorded.contains_key(identity)
    }

    /// Returns the entry recorded under `identity`, and counts the command as reached by
    /// the code. (The entry's own `identity` field is left empty: the key holds it.)
    pub(crate) fn recorded(&self, identity: &str) -> Option<&RawEntry> {
        let entry = self.recorded.get(identity)?;
        self.history.reach(identity, entry);
        Some(entry)
    }

    /// Lets a command with no record (`identity`, described as `requested`) be issued: at
    /// once when its scope has reached every recorded command; else once it has, or
    /// `Nondeterminism` naming what the history still holds if the run can make no other
    /// progress first. `hold` is false for commands that run nothing (events, views): they
    /// never wait. In a replay nothing new is issued: a strict replay fails, and a replay of
    /// a run that had not ended waits here for good (the end of its history).
    pub(crate) async fn admit(
        &self,
        identity: &str,
        requested: &str,
        hold: bool,
    ) -> Result<(), FlowError> {
        // A run suspended to be resumed records nothing more: what its flow would write
        // now (a step's failure, say) is decided again by the resume.
        if let Some(why) = self.suspension() {
            return Err(FlowError::CallInterrupted { handle: None, message: why });
        }
        let scope = history::scope_of(identity);
        if self.history.diverged() && hold {
            return Err(self.divergence(scope, identity, requested));
        }
        if hold && self.history.behind(scope) {
            let waiting = |d: isize| self.activity.waiting(d);
            if self.history.hold(scope, false, waiting).await == Admission::Stalled {
                let err = self.divergence(scope, identity, requested);
                return Err(self.history.diverge(err));
            }
        }
        if self.replay_only {
            if self.frontier {
                // An event or view runs nothing: a replay goes past it without recording
                // it, to the first command that would run something.
                if !hold {
                    return Ok(());
                }
                self.wait_at_frontier().await;
            }
            return Err(FlowError::Nondeterminism {
                identity: identity.to_owned(),
                journaled: "nothing".into(),
                requested: requested.into(),
                unreached: Vec::new(),
            });
        }
        Ok(())
    }

    /// Waits for good: in a replay of a run that had not ended, the work here has reached
    /// the end of the history (the drive ends once nothing else can move).
    pub(crate) async fn wait_at_frontier(&self) {
        self.activity.waiting(1);
        std::future::pending::<()>().await;
    }

    /// Counts the recorded work of finished task `task` and of every task under it as
    /// reached: a call that replays from its record does not run that work again.
    pub(crate) fn settle_subtree(&self, task: TaskId) {
        let tasks = lock(&self.tasks);
        let mut stack = vec![task];
        while let Some(t) = stack.pop() {
            self.history.settle(&format!("t{}/", t.0));
            self.history.settle(&format!("w{}/", t.0));
            stack.extend(tasks.values().filter(|c| c.parent == Some(t)).map(|c| c.id));
        }
    }

    /// Answers `ctx.patched`: whether the code at `identity` (a patch marker's place) runs
    /// past the end of the recorded history (`true`), or replays history recorded by code
    /// from before the patch (`false`). Waits like [`admit`](Self::admit) for its scope to
    /// catch up.
    pub(crate) async fn past_history(&self, identity: &str) -> bool {
        let scope = history::scope_of(identity);
        if !self.history.behind(scope) {
            return !self.replay_only || self.frontier;
        }
        let waiting = |d: isize| self.activity.waiting(d);
        match self.history.hold(scope, true, waiting).await {
            Admission::CaughtUp => !self.replay_only || self.frontier,
            Admission::Stalled => false,
        }
    }

    /// Returns the answer `ctx.patched` already gave for marker `identity` in this drive.
    pub(crate) fn patch_decided(&self, identity: &str) -> Option<bool> {
        lock(&self.patches).get(identity).copied()
    }

    /// Keeps the first answer for marker `identity` (`past` unless another branch decided
    /// first) and returns it.
    pub(crate) fn decide_patch(&self, identity: &str, past: bool) -> bool {
        *lock(&self.patches).entry(identity.to_owned()).or_insert(past)
    }

    /// Records divergence `err` of the run (its first one is what the drive ends with), so
    /// that nothing new runs after it; returns it.
    pub(crate) fn diverge(&self, err: FlowError) -> FlowError {
        self.history.diverge(err)
    }

    /// Returns the `Nondeterminism` of new command `identity` in `scope`, naming the
    /// recorded commands of the scope not reached.
    fn divergence(&self, scope: &str, identity: &str, requested: &str) -> FlowError {
        FlowError::Nondeterminism {
            identity: identity.to_owned(),
            journaled: "nothing".into(),
            requested: requested.into(),
            unreached: self.describe_unreached(Some(scope), 8),
        }
    }

    /// Returns the recorded commands no code reached, in recorded order, described.
    pub(crate) fn unreached(&self) -> Vec<RecordedCommand> {
        self.describe_unreached(None, usize::MAX)
    }

    /// Describes the unreached commands of `scope` (all for `None`): a call's target is
    /// side-effecting unless it is a tool declared read-only.
    fn describe_unreached(&self, scope: Option<&str>, max: usize) -> Vec<RecordedCommand> {
        let registry = &self.rt.registry;
        let side_effecting =
            |target: &str| registry.get_tool(target).is_none_or(|tool| !tool.read_only);
        let describe = |id: &str, e: &RawEntry| history::describe(id, e, side_effecting);
        self.history.unreached_in(scope, &self.recorded, describe, max)
    }

    /// Returns how many commands the history holds that the code must reach.
    pub(crate) fn recorded_commands(&self) -> usize {
        self.recorded.iter().filter(|(id, e)| history::is_tracked(id, e)).count()
    }

    /// Returns the run's tasks as loaded (and remembered since) that match `keep`.
    pub(crate) fn tasks_where(&self, keep: impl Fn(&TaskRecord) -> bool) -> Vec<TaskRecord> {
        let tasks = lock(&self.tasks);
        // Only a task remembered with its empty answer as `null` is made again to be looked at.
        let matching = |t: &TaskRecord| {
            if t.result.as_ref().is_some_and(Value::is_null) {
                Some(as_remembered(t)).filter(|t| keep(t))
            } else {
                keep(t).then(|| t.clone())
            }
        };
        tasks.values().filter_map(|t| matching(t)).collect()
    }

    pub(crate) fn task(&self, task: TaskId) -> Option<TaskRecord> {
        lock(&self.tasks).get(&task).map(|t| as_remembered(t))
    }

    /// Returns the status of task `task` as loaded (and remembered since).
    pub(crate) fn task_status(&self, task: TaskId) -> Option<clio_journal::TaskStatus> {
        lock(&self.tasks).get(&task).map(|t| t.status)
    }

    /// Returns the loaded task that the call with `identity` made, by the identity the task
    /// names.
    pub(crate) fn task_of_call(&self, identity: &str) -> Option<TaskId> {
        self.calls.get(identity).copied()
    }

    /// Remembers task `rec` as the journal now holds it (the run's tree and statuses read
    /// it).
    ///
    /// An ended task is remembered without its result beyond the `answer` (what the run
    /// reads back from memory: evidence, background deliveries); the whole result is in the
    /// journal, and a run of thousands of calls would otherwise hold every one of them.
    pub(crate) fn remember_task(&self, mut rec: TaskRecord) {
        if rec.status.is_terminal() {
            rec.result = rec.result.and_then(answer_only);
        }
        lock(&self.tasks).insert(rec.id, Box::new(rec));
    }

    /// Fails with `FlowCheckpointLimit` when the run has no room for one more entry.
    pub(crate) fn check_entry_room(&self) -> Result<(), FlowError> {
        let max = self.rt.config.max_entries;
        if self.entries.load(Ordering::SeqCst) >= max {
            return Err(FlowError::FlowCheckpointLimit { max });
        }
        Ok(())
    }

    /// Reserves one counted entry, or fails with `FlowCheckpointLimit`. The first time the
    /// run passes 80 % of the cap, an `entries_warning` event is recorded (once per run).
    pub(crate) fn reserve_entry(&self) -> Result<(), FlowError> {
        let max = self.rt.config.max_entries;
        let n = self.entries.fetch_add(1, Ordering::SeqCst);
        if n >= max {
            self.entries.fetch_sub(1, Ordering::SeqCst);
            return Err(FlowError::FlowCheckpointLimit { max });
        }
        let used = n + 1;
        if used.saturating_mul(5) >= max.saturating_mul(4)
            && !self.replay_only
            && !self.entries_warned.swap(true, Ordering::SeqCst)
        {
            let payload = serde_json::json!({
                "event": "entries_warning",
                "entries": used,
                "max": max,
                "message": format!(
                    "run {} has used {used} of its {max} journal entries; at {max} it fails with flow_checkpoint_limit",
                    self.run.0
                ),
            });
            let entry = clio_journal::NewEntry::new(EntryKind::Event, payload)
                .with_identity(ENTRIES_WARNING);
            // Sent now and committed in order with the writes that follow; nothing waits
            // for it, and a failure to record a warning does not fail the run.
            drop(self.rt.journal.nonblocking().append(self.run, entry));
        }
        Ok(())
    }

    pub(crate) fn count_model_call(&self) -> u64 {
        self.model_calls.fetch_add(1, Ordering::SeqCst) + 1
    }

    pub(crate) fn model_calls(&self) -> u64 {
        self.model_calls.load(Ordering::SeqCst)
    }

    pub(crate) fn add_tokens(&self, n: u64) {
        self.tokens.fetch_add(n, Ordering::SeqCst);
    }

    pub(crate) fn tokens(&self) -> u64 {
        self.tokens.load(Ordering::SeqCst)
    }

    pub(crate) fn count_submitted(&self) {
        self.submitted.fetch_add(1, Ordering::SeqCst);
    }

    pub(crate) fn submitted(&self) -> u64 {
        self.submitted.load(Ordering::SeqCst)
    }

    pub(crate) fn count_step(&self) {
        self.steps_run.fetch_add(1, Ordering::SeqCst);
    }

    pub(crate) fn steps_run(&self) -> u64 {
        self.steps_run.load(Ordering::SeqCst)
    }

    pub(crate) fn is_cancelled(&self) -> bool {
        self.cancelled.load(Ordering::SeqCst)
    }

    /// Returns whether the run is being cancelled or suspended: work stops, and what it
    /// has not finished is left unrecorded (a resume takes it up again).
    pub(crate) fn is_stopping(&self) -> bool {
        self.is_cancelled() || lock(&self.suspended).is_some()
    }

    /// Stops the drive with the run left interrupted, for `why` (the first reason is
    /// kept): every piece of live work stops as on a cancel, but nothing is recorded as
    /// cancelled or failed, so `runs resume` takes the run up where it stood.
    pub(crate) fn suspend(&self, why: String) {
        {
            let mut suspended = lock(&self.suspended);
            if suspended.is_some() {
                return;
            }
            *suspended = Some(why);
        }
        self.cancel.cancel();
        self.answer_added.notify_waiters();
    }

    /// Returns why the run suspended itself, if it did.
    pub(crate) fn suspension(&self) -> Option<String> {
        lock(&self.suspended).clone()
    }

    pub(crate) fn cancel_all(&self) {
        self.cancelled.store(true, Ordering::SeqCst);
        self.cancel.cancel();
        self.answer_added.notify_waiters();
    }

    pub(crate) fn register_token(&self, task: TaskId, token: CancellationToken) {
        lock(&self.task_tokens).insert(task, token);
    }

    pub(crate) fn register_stop(&self, task: TaskId, token: CancellationToken) {
        lock(&self.stop_tokens).insert(task, token);
    }

    /// Stops the turn of worker task `task`; returns whether one was live.
    pub(crate) fn stop(&self, task: TaskId) -> bool {
        match lock(&self.stop_tokens).get(&task) {
            Some(token) if !token.is_cancelled() => {
                token.cancel();
                true
            }
            _ => false,
        }
    }

    pub(crate) fn cancel_task(&self, task: TaskId) {
        if let Some(token) = lock(&self.task_tokens).get(&task) {
            token.cancel();
        }
    }

    pub(crate) fn answered(&self, identity: String, value: Value) {
        lock(&self.answers).insert(identity, value);
        self.answer_added.notify_waiters();
    }

    /// Waits for the answer recorded under `identity`, counting as a waiting question.
    pub(crate) async fn wait_answer(
        &self,
        identity: &str,
        question: Question,
    ) -> Result<Value, FlowError> {
        if let Some(v) = lock(&self.answers).get(identity).cloned() {
            return Ok(v);
        }
        if self.replay_only && !self.frontier {
            return Err(FlowError::Nondeterminism {
                identity: identity.to_owned(),
                journaled: "nothing".into(),
                requested: "an answer".into(),
                unreached: Vec::new(),
            });
        }
        lock(&self.pending).push(question.clone());
        self.activity.waiting(1);
        let res = loop {
            let added = self.answer_added.notified();
            if let Some(v) = lock(&self.answers).get(identity).cloned() {
                break Ok(v);
            }
            if self.is_stopping() {
                break Err(FlowError::CallCancelled { handle: None });
            }
            added.await;
        };
        lock(&self.pending).retain(|q| q.id != question.id);
        self.activity.waiting(-1);
        res
    }
}

/// The payload of a recorded answer: its value.
#[derive(serde::Deserialize)]
struct Answer {
    #[serde(default)]
    value: Value,
}

/// The outcome a recorded step, event or call carries: its `result` or its `error` (the
/// rest of its payload is not decoded).
#[derive(serde::Deserialize, Default)]
pub(crate) struct Outcome {
    pub(crate) result: Option<Value>,
    pub(crate) error: Option<Value>,
}

/// Returns a recorded entry's `result` or `error` (neither, for a payload that is no object).
pub(crate) fn outcome(entry: &RawEntry) -> Outcome {
    entry.payload_as().unwrap_or_default()
}

/// The identity of the event recorded once a run has used 80 % of its entries.
pub(crate) const ENTRIES_WARNING: &str = "key:entries-warning";

/// The identity of the event recorded once in a run driven with the sandbox off.
pub(crate) const SANDBOX_OFF: &str = "key:sandbox-off";

/// Returns whether an entry counts toward the run's entry limit: acceptances and answers
/// belong to their call and question, the delivery order of results to its gather, and
/// the entry-cap warning to the cap; the sandbox notice is the runtime's, not the flow's.
fn counts(e: &RawEntry) -> bool {
    e.kind != EntryKind::Answer
        && !e.identity.as_deref().is_some_and(|i| {
            i.ends_with("@accepted")
                || i.contains("@delivered#")
                || i == ENTRIES_WARNING
                || i == SANDBOX_OFF
        })
}

/// Returns the part of an ended task's result kept in memory: its `answer`, if it has one.
/// An empty answer (every tool's) is kept as `null`, which holds nothing on the heap; a
/// one-key map holds about 180 bytes, a run of 9,000 tool calls 1.6 MB of them.
/// [`as_remembered`] gives the answer back.
fn answer_only(mut result: Value) -> Option<Value> {
    let answer = result.as_object_mut()?.remove("answer")?;
    if answer.as_str() == Some("") {
        return Some(Value::Null);
    }
    // A map made for one key: `json!` would leave room for four (a run keeps thousands).
    let mut kept = serde_json::Map::with_capacity(1);
    kept.insert("answer".to_owned(), answer);
    Some(Value::Object(kept))
}

/// Returns a copy of remembered task `rec` with the result it was remembered with: an empty
/// answer kept as `null` ([`answer_only`]) is `{"answer": ""}` again. A task's result in
/// the journal is its call's record, an object, so a `null` is only ever that.
fn as_remembered(rec: &TaskRecord) -> TaskRecord {
    let mut copy = rec.clone();
    if copy.result.as_ref().is_some_and(Value::is_null) {
        copy.result = Some(serde_json::json!({ "answer": "" }));
    }
    copy
}

#[cfg(test)]
mod tests {
    use super::{answer_only, as_remembered, digest};
    use serde_json::json;
    use sha2::{Digest, Sha256};

    #[test]
    fn an_ended_tasks_result_is_remembered_as_its_answer_alone() {
        let result = json!({ "answer": "done", "value": { "big": [1, 2, 3] }, "handle": 4 });
        assert_eq!(answer_only(result), Some(json!({ "answer": "done" })));
        assert_eq!(answer_only(json!({ "value": 1 })), None);
    }

    #[test]
    fn an_empty_answer_is_remembered_as_null_and_read_back_as_itself() {
        let result = json!({ "answer": "", "value": { "i": 1 }, "handle": 4 });
        assert_eq!(answer_only(result), Some(serde_json::Value::Null));
        let mut rec: clio_journal::TaskRecord = serde_json::from_value(json!({
            "id": 4, "run": 1, "parent": null, "kind": "tool", "target": "noop",
            "label": "noop", "status": "succeeded", "model": null, "input_tokens": 0,
            "output_tokens": 0, "result": null, "error": null, "owner": "",
            "created_at_ms": 0, "updated_at_ms": 0,
        }))
        .unwrap();
        rec.result = Some(serde_json::Value::Null);
        assert_eq!(as_remembered(&rec).result, Some(json!({ "answer": "" })));
        // Any other result is read back as it was remembered.
        rec.result = Some(json!({ "answer": "done" }));
        assert_eq!(as_remembered(&rec), rec);
        rec.result = None;
        assert_eq!(as_remembered(&rec), rec);
    }

    /// Identities recorded in journals hold these digests: the streamed hash must equal the
    /// hash of the JSON text, in lowercase hex, first 8 bytes.
    #[test]
    fn digest_is_the_first_8_bytes_of_sha256_of_the_json_text_in_hex() {
        for value in [
            json!(null),
            json!({ "target": "noop", "input": { "i": 1, "é": [1.5, "x\n\"y\""] } }),
            json!("a"),
        ] {
            let full = Sha256::digest(value.to_string().as_bytes());
            let expected: String = full.iter().take(8).map(|b| format!("{b:02x}")).collect();
            assert_eq!(digest(&value), expected, "{value}");
        }
        assert_eq!(digest(&json!(null)), "74234e98afe7498f");
    }
}
