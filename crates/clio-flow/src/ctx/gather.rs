//! Running calls together: [`Gather`] (`limit`, `return_when` all/any,
//! `return_exceptions`) and `as_completed` (a stream in finishing order, each item with its
//! index). Each call runs as its own task, so one failing never cancels the others, and with
//! `return_when = any` the others keep running after the gather returns (the run waits for
//! them before it ends).

use std::future::{Future, IntoFuture};
use std::pin::Pin;
use std::sync::Arc;

use futures::Stream;
use tokio::sync::{Semaphore, mpsc};

use super::call::Call;
use crate::error::FlowError;
use crate::result::CallResult;

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
}

fn launch(calls: Vec<Call>, limit: usize) -> mpsc::UnboundedReceiver<Settled> {
    let (tx, rx) = mpsc::unbounded_channel();
    let sem = (limit > 0).then(|| Arc::new(Semaphore::new(limit)));
    for (index, mut call) in calls.into_iter().enumerate() {
        call.index = Some(index);
        let tx = tx.clone();
        let sem = sem.clone();
        let run = Arc::clone(call.ctx_run());
        let handle = tokio::spawn(async move {
            let _permit = match sem {
                Some(sem) => sem.acquire_owned().await.ok(),
                None => None,
            };
            let result = call.run().await;
            // The receiver may be gone (return_when any); the result is recorded anyway.
            let _ = tx.send(Settled { index, result });
        });
        run.spawn_background(handle);
    }
    rx
}

impl Gather {
    pub(crate) fn new(calls: Vec<Call>) -> Gather {
        Gather { calls, limit: 0, return_when: ReturnWhen::All }
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
        let mut rx = launch(self.calls, self.limit);
        let mut got = 0;
        while got < n {
            let Some(s) = rx.recv().await else { break };
            out[s.index] = Some(s.result);
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

/// Yields each call's result as it settles, in finishing order, at most `limit` at a time.
pub(crate) fn as_completed(
    calls: Vec<Call>,
    limit: usize,
) -> impl Stream<Item = Settled> + Send + 'static {
    let rx = launch(calls, limit);
    futures::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|s| (s, rx)) })
}
