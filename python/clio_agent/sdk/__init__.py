"""The flow API of CLIO's Python SDK, as the seeds spell it.

``from clio_agent.sdk import Flow`` declares a flow (``class Review(Flow)``) or selects
one (``Flow("council", models=[...])``); ``Workflow`` and ``Step`` write a workflow as
data for the ``workflow`` flow. The outcome classes live in ``clio_agent.flows.outcomes``
and are re-exported here.
"""

from clio_agent.flows.outcomes import (
    CallAwaitingInput,
    CallCancelled,
    CallFailed,
    CallInterrupted,
    CallRefused,
    CallStopped,
    FlowCheckpointLimit,
    FlowException,
    FlowLimitExceeded,
    FlowNotTrusted,
    FlowOutcome,
    FlowProtocolError,
    FlowReplayMismatch,
    FlowStall,
    FlowTargetUnknown,
    GatherFailed,
    StepFailed,
    TaskStateUncertain,
)
from clio_agent.sdk.context import AsCompleted, Call, Ctx, Gather, TaskHandle, Workspace
from clio_agent.sdk.flow import CallResult, Flow, FlowOptionsInvalid
from clio_agent.sdk.workflow import Step, Workflow, WorkflowError

__all__ = [
    "AsCompleted",
    "Call",
    "CallAwaitingInput",
    "CallCancelled",
    "CallFailed",
    "CallInterrupted",
    "CallRefused",
    "CallResult",
    "CallStopped",
    "Ctx",
    "Flow",
    "FlowCheckpointLimit",
    "FlowException",
    "FlowLimitExceeded",
    "FlowNotTrusted",
    "FlowOptionsInvalid",
    "FlowOutcome",
    "FlowProtocolError",
    "FlowReplayMismatch",
    "FlowStall",
    "FlowTargetUnknown",
    "Gather",
    "GatherFailed",
    "Step",
    "StepFailed",
    "TaskHandle",
    "TaskStateUncertain",
    "Workflow",
    "WorkflowError",
    "Workspace",
]
