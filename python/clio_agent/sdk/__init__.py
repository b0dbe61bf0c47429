"""CLIO's Python SDK, as the seeds' SDK reference spells it.

```python
from clio_agent.sdk import (Agent, AgentSpec, AgentDefinitionError, Flow, Workflow, Step,
    WorkflowError, Plugin, Pack, PluginRef, Requires, Prefers, Subagent, PromptFile, tool,
    native_tool, host_call, hook, HookEvent, HOOK_EVENTS)
```

``Flow`` declares a flow (``class Review(Flow)``) or selects one (``Flow("council",
models=[...])``); ``Workflow`` and ``Step`` write a workflow as data; ``Agent`` classes
freeze into an ``AgentSpec``; ``Plugin``, ``Pack``, ``@tool``, ``@hook`` and the rest declare
a plugin in ``ai.iowarp.clio/plugin.py``. Every rule is the Rust crates', through the
native module ``clio_agent._native`` (imported on first use: the flow runner the ``clio``
binary starts carries the pure-Python files alone and never needs it). The outcome classes
live in ``clio_agent.flows.outcomes`` and are re-exported here.
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
from clio_agent.sdk.agent import Agent, AgentDefinitionError, AgentSpec, Prefers, Requires
from clio_agent.sdk.context import AsCompleted, Call, Ctx, Gather, TaskHandle, Workspace
from clio_agent.sdk.flow import CallResult, Flow, FlowOptionsInvalid
from clio_agent.sdk.plugin import (
    HOOK_EVENTS,
    HookEvent,
    Pack,
    Plugin,
    PluginDeclarationError,
    PluginRef,
    PromptFile,
    Subagent,
    hook,
    host_call,
    native_tool,
    tool,
)
from clio_agent.sdk.versions import VersionRangeError
from clio_agent.sdk.workflow import Step, Workflow, WorkflowError

__all__ = [
    "HOOK_EVENTS",
    "Agent",
    "AgentDefinitionError",
    "AgentSpec",
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
    "HookEvent",
    "Pack",
    "Plugin",
    "PluginDeclarationError",
    "PluginRef",
    "Prefers",
    "PromptFile",
    "Requires",
    "Step",
    "StepFailed",
    "Subagent",
    "TaskHandle",
    "TaskStateUncertain",
    "VersionRangeError",
    "Workflow",
    "WorkflowError",
    "Workspace",
    "hook",
    "host_call",
    "native_tool",
    "tool",
]
