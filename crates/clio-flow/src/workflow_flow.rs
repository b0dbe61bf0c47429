//! The built-in `workflow` flow.

use serde_json::Value;

use crate::ctx::Ctx;
use crate::error::FlowError;
use crate::flow::{Flow, FlowFuture};

/// The built-in `workflow` flow.
#[derive(Debug, Clone, Copy, Default)]
pub struct WorkflowFlow;

impl Flow for WorkflowFlow {
    fn id(&self) -> &str {
        "workflow"
    }

    fn forward<'a>(&'a self, _task: Value, _ctx: Ctx) -> FlowFuture<'a> {
        Box::pin(
            async move { Err(FlowError::stall("not_built", "the workflow flow is not built yet")) },
        )
    }
}
