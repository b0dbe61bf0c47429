//! The built-in flows — `workflow`, `react`, `council` — and the react loop that runs
//! react workers, registered with a [`Registry`] by this module, the layer that owns them.
//!
//! The registry and `ctx` know them only through the [`Flow`](crate::Flow) trait and the
//! registry's [`WorkerLoop`]: the core does not import its features. [`Registry::new`] is
//! [`builtin_flows`] on an empty registry.

use std::sync::Arc;

use crate::council::CouncilFlow;
use crate::react::ReactFlow;
use crate::registry::{Registry, WorkerFuture, WorkerLoop, WorkerRequest};
use crate::workflow_flow::WorkflowFlow;

impl Registry {
    /// Returns a registry holding the built-in flows (`workflow`, `react`, `council`) and
    /// the react loop that runs react workers ([`builtin_flows`]).
    pub fn new() -> Registry {
        builtin_flows(Registry::default())
    }
}

/// Adds the built-in flows (`workflow`, `react`, `council`) and the react loop that runs
/// react workers to `registry`.
pub fn builtin_flows(registry: Registry) -> Registry {
    // Background work (`run_flow`, `run_workflow`) a restart cut off starts again as the
    // run is driven, not when its agent next asks.
    let reattach: crate::registry::DriveStart =
        Arc::new(|ctx| Box::pin(async move { crate::orchestration::reattach_cut_off(&ctx).await }));
    registry
        .flow(WorkflowFlow)
        .flow(ReactFlow)
        .flow(CouncilFlow)
        .flow(crate::react::CompactFlow)
        .worker_loop(Arc::new(React))
        .on_drive_start(reattach)
}

/// The react loop, as the registry's [`WorkerLoop`].
struct React;

impl WorkerLoop for React {
    fn run(&self, req: WorkerRequest) -> WorkerFuture {
        Box::pin(crate::react::run_worker(req))
    }
}
