//! The runs `clio serve` drives: each on the runtime it was launched with (its plugins,
//! models and workspace, rebuilt from its launch record), on the serve process's tokio
//! runtime, until it ends or waits on people. A run that waits on a question is not
//! driven while it waits; an answer given through serve (the socket or the HTTP API)
//! drives it again at once. An answer that comes while the run is still being driven
//! reaches its live state, and if the drive ends waiting anyway (the answer came as it
//! stopped), it is driven once more.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use clio_flow::{RunOutcome, Runtime};
use clio_journal::RunId;

/// The runs this process drives, by id.
pub(crate) struct Drivers {
    handle: tokio::runtime::Handle,
    /// What the drives report, for serve's stderr: the thread that prints there holds it
    /// locked, so no other thread writes to it.
    log: tokio::sync::mpsc::UnboundedSender<String>,
    // Invariant: a run is here exactly while a drive of it is under way.
    live: Mutex<HashMap<RunId, Live>>,
}

impl std::fmt::Debug for Drivers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let live: Vec<u64> = self.lock().keys().map(|r| r.0).collect();
        f.debug_struct("Drivers").field("live", &live).finish()
    }
}

/// A run being driven.
struct Live {
    runtime: Runtime,
    /// An answer came during this drive: a drive that ends waiting goes again.
    again: bool,
    /// Stops the drive where it is (a worker whose lease is gone).
    abort: Option<tokio::task::AbortHandle>,
}

impl Drivers {
    /// Returns drivers that spawn on `handle`, and the receiver of what they report.
    pub(crate) fn new(
        handle: tokio::runtime::Handle,
    ) -> (Arc<Drivers>, tokio::sync::mpsc::UnboundedReceiver<String>) {
        let (log, reports) = tokio::sync::mpsc::unbounded_channel();
        (Arc::new(Drivers { handle, log, live: Mutex::new(HashMap::new()) }), reports)
    }

    /// Sends `text` to serve's stderr.
    pub(crate) fn log(&self, text: String) {
        // Once serve has stopped reading, there is nobody to tell.
        let _ = self.log.send(text);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<RunId, Live>> {
        self.live.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Returns the runtime driving `run`, while a drive of it is under way.
    pub(crate) fn runtime_of(&self, run: RunId) -> Option<Runtime> {
        self.lock().get(&run).map(|live| live.runtime.clone())
    }

    /// Returns whether `run` is being driven now.
    pub(crate) fn is_live(&self, run: RunId) -> bool {
        self.lock().contains_key(&run)
    }

    /// Returns the number of runs being driven now.
    pub(crate) fn n_live(&self) -> usize {
        self.lock().len()
    }

    /// Drives `run` on `runtime` until it ends or waits, then calls `ended` with the
    /// outcome (on a blocking thread). Returns `false`, starting nothing, when `run` is
    /// driven already: it is then marked to go again if it stops waiting (see the module
    /// doc).
    pub(crate) fn drive(
        self: &Arc<Self>,
        run: RunId,
        runtime: Runtime,
        ended: impl FnOnce(&Runtime, Result<clio_flow::RunReport, clio_flow::FlowError>)
        + Send
        + 'static,
    ) -> bool {
        {
            let mut live = self.lock();
            if let Some(driving) = live.get_mut(&run) {
                driving.again = true;
                return false;
            }
            live.insert(run, Live { runtime: runtime.clone(), again: false, abort: None });
        }
        let drivers = Arc::clone(self);
        let task = self.handle.spawn(async move {
            let report = loop {
                let report = runtime.resume(run).await;
                let waiting =
                    matches!(&report, Ok(r) if matches!(r.outcome, RunOutcome::AwaitingInput(_)));
                let mut live = drivers.lock();
                match live.get_mut(&run) {
                    Some(driving) if waiting && driving.again => driving.again = false,
                    _ => {
                        live.remove(&run);
                        break report;
                    }
                }
            };
            let _ = tokio::task::spawn_blocking(move || ended(&runtime, report)).await;
        });
        if let Some(driving) = self.lock().get_mut(&run) {
            driving.abort = Some(task.abort_handle());
        }
        true
    }

    /// Returns the runs being driven now.
    pub(crate) fn live_runs(&self) -> Vec<RunId> {
        self.lock().keys().copied().collect()
    }

    /// Stops the drive of `run` where it is, without recording anything more: for a worker
    /// that lost its lease on the run (another worker drives it now) or whose run was
    /// cancelled elsewhere. Returns whether it was being driven.
    pub(crate) fn abort(&self, run: RunId) -> bool {
        match self.lock().remove(&run) {
            Some(live) => {
                if let Some(abort) = live.abort {
                    abort.abort();
                }
                true
            }
            None => false,
        }
    }

    /// Marks `run`, if it is being driven, to go again should its drive end waiting:
    /// an answer reached it. Returns whether it is being driven.
    pub(crate) fn answered(&self, run: RunId) -> bool {
        match self.lock().get_mut(&run) {
            Some(driving) => {
                driving.again = true;
                true
            }
            None => false,
        }
    }
}
