//! [`RunState`]: what one drive of a run shares between its contexts — the run's records
//! loaded for replay, its counters (entries, model calls, tokens), its cancellation tokens,
//! its background work, and the activity count that tells a run waiting only on questions.

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use clio_journal::{EntryKind, JournalError, RawEntry, RunId, TaskId, TaskRecord};
use serde_json::Value;
use sha2::{Digest, Sha256};
use tokio::sync::{Notify, Semaphore};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::{Question, RunOutcome, RuntimeInner};
use crate::error::FlowError;
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
#[derive(Default)]
pub(crate) struct Activity {
    busy: AtomicUsize,
    waiting: AtomicUsize,
    changed: Notify,
}

/// Holds one unit of live work until dropped.
pub(crate) struct Busy<'a>(&'a Activity);

impl Drop for Busy<'_> {
    fn drop(&mut self) {
        self.0.busy.fetch_sub(1, Ordering::SeqCst);
        self.0.changed.notify_waiters();
        self.0.changed.notify_one();
    }
}

impl Activity {
    pub(crate) fn busy(&self) -> Busy<'_> {
        self.busy.fetch_add(1, Ordering::SeqCst);
        Busy(self)
    }

    fn waiting(&self, delta: isize) {
        if delta > 0 {
            self.waiting.fetch_add(1, Ordering::SeqCst);
        } else {
            self.waiting.fetch_sub(1, Ordering::SeqCst);
        }
        self.changed.notify_waiters();
        self.changed.notify_one();
    }

    fn suspended(&self) -> bool {
        self.waiting.load(Ordering::SeqCst) > 0 && self.busy.load(Ordering::SeqCst) == 0
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
    pub(crate) limits: Limits,
    recorded: HashMap<String, RawEntry>,
    /// The loaded tasks by the identity of the call that made them (a call recorded once it
    /// had ended has no acceptance entry: its task names it).
    calls: HashMap<String, TaskId>,
    tasks: Mutex<HashMap<TaskId, TaskRecord>>,
    entries: AtomicU64,
    model_calls: AtomicU64,
    tokens: AtomicU64,
    submitted: AtomicU64,
    steps_run: AtomicU64,
    pub(crate) activity: Activity,
    pub(crate) concurrency: Option<Arc<Semaphore>>,
    pub(crate) cancel: CancellationToken,
    cancelled: AtomicBool,
    task_tokens: Mutex<HashMap<TaskId, CancellationToken>>,
    stop_tokens: Mutex<HashMap<TaskId, CancellationToken>>,
    answers: Mutex<HashMap<String, Value>>,
    answer_added: Notify,
    pending: Mutex<Vec<Question>>,
    background: Mutex<Background>,
    /// The team the run's agents' team tools act on, once one has been used.
    pub(crate) team: std::sync::OnceLock<crate::team::Team>,
}

/// What a run loaded for replay: every entry and task of the run, which take a while to
/// free.
pub(crate) struct Loaded {
    _recorded: HashMap<String, RawEntry>,
    _calls: HashMap<String, TaskId>,
    _tasks: HashMap<TaskId, TaskRecord>,
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
        let concurrency = (limits.max_concurrency > 0)
            .then(|| Arc::new(Semaphore::new(limits.max_concurrency as usize)));
        Ok(Arc::new(RunState {
            rt,
            run,
            replay_only,
            limits,
            recorded,
            calls: tasks.iter().filter_map(|t| Some((t.call.clone()?, t.id))).collect(),
            tasks: Mutex::new(tasks.into_iter().map(|t| (t.id, t)).collect()),
            entries: AtomicU64::new(counted),
            model_calls: AtomicU64::new(0),
            tokens: AtomicU64::new(0),
            submitted: AtomicU64::new(0),
            steps_run: AtomicU64::new(0),
            activity: Activity::default(),
            concurrency,
            cancel: CancellationToken::new(),
            cancelled: AtomicBool::new(false),
            task_tokens: Mutex::new(HashMap::new()),
            stop_tokens: Mutex::new(HashMap::new()),
            answers: Mutex::new(answers),
            answer_added: Notify::new(),
            pending: Mutex::new(Vec::new()),
            background: Mutex::new(Background::default()),
            team: std::sync::OnceLock::new(),
        }))
    }

    /// Drives `forward` until it returns, or until every piece of live work waits on a
    /// question (the run is then left awaiting input).
    pub(crate) async fn drive(
        &self,
        forward: impl Future<Output = Result<FlowOutput, FlowError>>,
    ) -> RunOutcome {
        let forward = std::pin::pin!(forward);
        let mut forward = forward;
        let res = loop {
            let changed = self.activity.changed.notified();
            tokio::select! {
                res = &mut forward => break res,
                () = changed => {
                    if self.activity.suspended() {
                        // Let any work that is between two journal writes take its next step.
                        for _ in 0..4 {
                            tokio::task::yield_now().await;
                        }
                        if self.activity.suspended() {
                            self.abort_background();
                            return RunOutcome::AwaitingInput(lock(&self.pending).clone());
                        }
                    }
                }
            }
        };
        // Work started with `ctx.start` belongs to the run: wait for it before the run ends,
        // and for work it starts meanwhile; then no more is admitted.
        loop {
            let handles: Vec<_> = {
                let mut background = lock(&self.background);
                if background.handles.is_empty() {
                    background.ended = true;
                    break;
                }
                background.handles.drain(..).collect()
            };
            for handle in handles {
                let _ = handle.await;
            }
        }
        match res {
            Ok(out) => RunOutcome::Succeeded(out),
            Err(_) if self.is_cancelled() => RunOutcome::Cancelled,
            Err(err) => RunOutcome::Failed(err),
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
        background.handles.push(tokio::spawn(work));
        true
    }

    /// (The entry's own `identity` field is left empty: the key holds it.)
    pub(crate) fn recorded(&self, identity: &str) -> Option<&RawEntry> {
        self.recorded.get(identity)
    }

    /// Returns the run's tasks as loaded (and remembered since) that match `keep`.
    pub(crate) fn tasks_where(&self, keep: impl Fn(&TaskRecord) -> bool) -> Vec<TaskRecord> {
        lock(&self.tasks).values().filter(|t| keep(t)).cloned().collect()
    }

    pub(crate) fn task(&self, task: TaskId) -> Option<TaskRecord> {
        lock(&self.tasks).get(&task).cloned()
    }

    /// Returns the loaded task that the call with `identity` made, by the identity the task
    /// names.
    pub(crate) fn task_of_call(&self, identity: &str) -> Option<TaskId> {
        self.calls.get(identity).copied()
    }

    pub(crate) fn remember_task(&self, rec: TaskRecord) {
        lock(&self.tasks).insert(rec.id, rec);
    }

    /// Reserves one counted entry, or fails with `FlowCheckpointLimit`.
    pub(crate) fn reserve_entry(&self) -> Result<(), FlowError> {
        let max = self.rt.config.max_entries;
        let n = self.entries.fetch_add(1, Ordering::SeqCst);
        if n >= max {
            self.entries.fetch_sub(1, Ordering::SeqCst);
            return Err(FlowError::FlowCheckpointLimit { max });
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
        if self.replay_only {
            return Err(FlowError::Nondeterminism {
                identity: identity.to_owned(),
                journaled: "nothing".into(),
                requested: "an answer".into(),
            });
        }
        lock(&self.pending).push(question.clone());
        self.activity.waiting(1);
        let res = loop {
            let added = self.answer_added.notified();
            if let Some(v) = lock(&self.answers).get(identity).cloned() {
                break Ok(v);
            }
            if self.is_cancelled() {
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

/// Returns whether an entry counts toward the run's entry limit: acceptances and answers
/// belong to their call and question.
fn counts(e: &RawEntry) -> bool {
    e.kind != EntryKind::Answer && !e.identity.as_deref().is_some_and(|i| i.ends_with("@accepted"))
}

#[cfg(test)]
mod tests {
    use super::digest;
    use serde_json::json;
    use sha2::{Digest, Sha256};

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
