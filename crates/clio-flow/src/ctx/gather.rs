//! Running calls together: [`Gather`] (`limit`, `return_when` all/any,
//! `return_exceptions`) and `as_completed` (a stream in finishing order, each item with its
//! index). Each call runs as its own task, so one failing never cancels the others, and with
//! `return_when = any` the others keep running after the gather returns (the run waits for
//! them before it ends).
//!
//! The order in which results reach the flow is part of the run's history: each result a
//! stream or an `any` gather delivers is recorded (`<select>@delivered#<n>`: the call's
//! index and identity) before the flow sees it, and a replay delivers recorded results in
//! exactly that order, so a replayed flow takes the same branches. Results past the
//! recorded ones are delivered in finishing order and recorded in turn.

use std::collections::VecDeque;
use std::future::{Future, IntoFuture};
use std::pin::Pin;
use std::sync::Arc;

use clio_journal::{EntryKind, NewEntry};
use futures::Stream;
use serde_json::{Value, json};
use tokio::sync::{Semaphore, mpsc};

use super::Ctx;
use super::call::Call;
use crate::error::FlowError;
use crate::result::CallResult;

/// Where a gather or a stream records the order it delivers results in: its context and
/// its identity, taken when it was built.
pub(crate) struct Order {
    pub(crate) ctx: Ctx,
    pub(crate) identity: String,
}

/// When a gather returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ReturnWhen {
    /// Once every call has settled (the default).
    #[default]
    All,
    /// As soon as one call settles; the others keep running.
    Any,
}

/// One settled call of `as_completed`: its position in the calls, and its result or error.
#[derive(Debug, Clone)]
pub struct Settled {
    /// The call's position in the list given.
    pub index: usize,
    /// Its result or error.
    pub result: Result<CallResult, FlowError>,
}

/// Several calls run together; await it for their results in call order.
pub struct Gather {
    calls: Vec<Call>,
    limit: usize,
    return_when: ReturnWhen,
    order: Option<Order>,
}

/// Starts every call as its own task and returns the channel their results settle on,
/// with each call's identity.
fn launch(calls: Vec<Call>, limit: usize) -> (mpsc::UnboundedReceiver<Settled>, Vec<String>) {
    let (tx, rx) = mpsc::unbounded_channel();
    let sem = (limit > 0).then(|| Arc::new(Semaphore::new(limit)));
    let mut identities = Vec::with_capacity(calls.len());
    for (index, mut call) in calls.into_iter().enumerate() {
        identities.push(call.identity());
        call.index = Some(index);
        let tx = tx.clone();
        let sem = sem.clone();
        let run = Arc::clone(call.ctx_run());
        // Counted busy until the task has first run, so the run never looks idle in between.
        let starting = crate::runtime::Starting::new(&run);
        // The gather's limit is taken once the call may run (see `Call::limited`), so a
        // call replayed from its record needs no slot, and a new call waiting for the
        // history to be reached holds none that a recorded one needs.
        call.slots = sem.clone();
        // In the run's log span, as the call would be unspawned.
        let handle = tokio::spawn(tracing::Instrument::in_current_span(async move {
            let (result, finished) = starting.handing_over(call.run()).await;
            // The receiver may be gone (return_when any); the result is recorded anyway.
            let _ = tx.send(Settled { index, result });
            // Counted busy until the receiver was woken by the send.
            drop(finished);
        }));
        run.spawn_background(handle);
    }
    (rx, identities)
}

/// Delivers settled results in the recorded order, then in finishing order, recording each.
struct Delivery {
    rx: mpsc::UnboundedReceiver<Settled>,
    /// Settled and not delivered yet, in the order they settled.
    arrived: VecDeque<Settled>,
    identities: Vec<String>,
    order: Option<Order>,
    delivered: u64,
}

impl Delivery {
    fn new(calls: Vec<Call>, limit: usize, order: Option<Order>) -> Delivery {
        let (rx, identities) = launch(calls, limit);
        Delivery { rx, arrived: VecDeque::new(), identities, order, delivered: 0 }
    }

    /// Returns the next result to deliver; `None` once every call's has been.
    async fn next(&mut self) -> Option<Settled> {
        if self.delivered as usize >= self.identities.len() {
            return None;
        }
        let Some(order) = &self.order else {
            self.delivered += 1;
            return match self.arrived.pop_front() {
                Some(s) => Some(s),
                None => self.rx.recv().await,
            };
        };
        let ctx = order.ctx.clone();
        let key = format!("{}@delivered#{}", order.identity, self.delivered);
        self.delivered += 1;
        let recorded = ctx.run.recorded(&key).map(|e| crate::runtime::outcome(e).result);
        if let Some(recorded) = recorded {
            let recorded = recorded.unwrap_or(Value::Null);
            let index = recorded.get("index").and_then(Value::as_u64).map(|i| i as usize);
            let call = recorded.get("call").and_then(Value::as_str).unwrap_or("");
            let index = match index {
                Some(i) if self.identities.get(i).is_some_and(|id| id == call) => i,
                _ => {
                    let now = index.and_then(|i| self.identities.get(i)).map_or("no call", |s| s);
                    let err = ctx.run.diverge(FlowError::Nondeterminism {
                        identity: key,
                        journaled: format!("the result of {call} delivered next"),
                        requested: format!("a delivery among other calls ({now})"),
                        unreached: Vec::new(),
                    });
                    return Some(Settled { index: index.unwrap_or(0), result: Err(err) });
                }
            };
            loop {
                if let Some(at) = self.arrived.iter().position(|s| s.index == index) {
                    return self.arrived.remove(at);
                }
                let settled = self.rx.recv().await?;
                self.arrived.push_back(settled);
            }
        }
        let settled = match self.arrived.pop_front() {
            Some(s) => s,
            None => self.rx.recv().await?,
        };
        if !ctx.run.replay_only {
            let payload = json!({
                "command": { "command": "event", "event": { "delivered": self.delivered - 1 } },
                "result": { "index": settled.index, "call": self.identities[settled.index] },
            });
            let mut entry = NewEntry::new(EntryKind::Event, payload).with_identity(key);
            entry.task = ctx.scope.parent;
            // Sent before the flow sees the result: the journal commits in the order writes
            // are sent, so anything the flow records because of this result is durable
            // only once the order is.
            drop(ctx.run.rt.journal.nonblocking().append(ctx.run.run, entry));
        }
        Some(settled)
    }
}

impl Gather {
    pub(crate) fn new(calls: Vec<Call>, order: Order) -> Gather {
        Gather { calls, limit: 0, return_when: ReturnWhen::All, order: Some(order) }
    }

    /// Returns the gather running at most `n` calls at a time (0: no limit).
    pub fn limit(mut self, n: usize) -> Gather {
        self.limit = n;
        self
    }

    /// Returns the gather returning as `when` says.
    pub fn return_when(mut self, when: ReturnWhen) -> Gather {
        self.return_when = when;
        self
    }

    /// Runs the calls and returns each one's result or error in call order
    /// (`return_exceptions=True`); with `return_when = any`, `None` for those still running.
    pub async fn settled(self) -> Vec<Option<Result<CallResult, FlowError>>> {
        let n = self.calls.len();
        let mut out: Vec<Option<Result<CallResult, FlowError>>> = vec![None; n];
        // Results in call order need no recorded order; the winner of `any` does.
        let order = match self.return_when {
            ReturnWhen::All => None,
            ReturnWhen::Any => self.order,
        };
        let mut delivery = Delivery::new(self.calls, self.limit, order);
        let mut got = 0;
        while got < n {
            let Some(s) = delivery.next().await else { break };
            if let Some(slot) = out.get_mut(s.index) {
                *slot = Some(s.result);
            }
            got += 1;
            if self.return_when == ReturnWhen::Any {
                break;
            }
        }
        out
    }

    /// Runs the calls and returns their results in call order once every one has settled,
    /// or [`FlowError::GatherFailed`] holding every result or error when one failed.
    pub async fn all(self) -> Result<Vec<CallResult>, FlowError> {
        let n = self.calls.len();
        let settled = Gather { return_when: ReturnWhen::All, ..self }.settled().await;
        let results: Vec<Result<CallResult, FlowError>> = settled
            .into_iter()
            .map(|r| {
                r.unwrap_or(Err(FlowError::CallInterrupted {
                    handle: None,
                    message: "never settled".into(),
                }))
            })
            .collect();
        if results.iter().all(Result::is_ok) {
            Ok(results.into_iter().flatten().collect())
        } else {
            debug_assert_eq!(results.len(), n);
            Err(FlowError::GatherFailed { results })
        }
    }
}

impl IntoFuture for Gather {
    type Output = Result<Vec<CallResult>, FlowError>;
    type IntoFuture = Pin<Box<dyn Future<Output = Self::Output> + Send>>;

    /// Awaiting a gather is [`Gather::all`] (with `return_when = any`, the first result
    /// settled stands alone and the others are left out).
    fn into_future(self) -> Self::IntoFuture {
        match self.return_when {
            ReturnWhen::All => Box::pin(self.all()),
            ReturnWhen::Any => Box::pin(async move {
                let settled = self.settled().await;
                let first = settled.into_iter().flatten().next();
                match first {
                    Some(Ok(r)) => Ok(vec![r]),
                    Some(Err(e)) => Err(e),
                    None => Ok(Vec::new()),
                }
            }),
        }
    }
}

/// Yields each call's result as it settles, in finishing order (on replay, in the order
/// recorded), at most `limit` at a time.
pub(crate) fn as_completed(
    calls: Vec<Call>,
    limit: usize,
    order: Order,
) -> impl Stream<Item = Settled> + Send + 'static {
    let delivery = Delivery::new(calls, limit, Some(order));
    futures::stream::unfold(delivery, |mut d| async move { d.next().await.map(|s| (s, d)) })
}
