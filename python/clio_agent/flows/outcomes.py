"""The typed outcomes a flow's calls raise, and a flow may raise itself.

Each is a :class:`FlowOutcome` with ``reason`` (a stable code), ``handle`` (the task
handle of the child it concerns, or ``None``), ``details`` (a mapping) and
``to_dict()``. The reasons are the Rust runtime's (``FlowError::reason``), and
:func:`outcome_from_dict` reads the runtime's error form ``{reason, handle, message,
details}`` back into the class of its reason.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "CallAwaitingInput",
    "CallCancelled",
    "CallFailed",
    "CallInterrupted",
    "CallRefused",
    "CallStopped",
    "FlowCheckpointLimit",
    "FlowException",
    "FlowLimitExceeded",
    "FlowNotTrusted",
    "FlowOutcome",
    "FlowProtocolError",
    "FlowReplayMismatch",
    "FlowStall",
    "FlowTargetUnknown",
    "GatherFailed",
    "StepFailed",
    "TaskStateUncertain",
    "outcome_from_dict",
]


class FlowOutcome(Exception):
    """How a call, or a flow, ended other than with a result."""

    reason = "flow_outcome"

    def __init__(
        self,
        message: str = "",
        *,
        handle: Any = None,
        details: dict | None = None,
        reason: str | None = None,
    ):
        super().__init__(message)
        self.message = message
        self.handle = handle if handle not in ("", None) else None
        self.details = dict(details or {})
        if reason is not None:
            # An instance may carry a reason its class does not name (a runtime's own code).
            self.reason = reason

    def to_dict(self) -> dict:
        """Returns the outcome as the runtime's error form."""
        return {
            "reason": self.reason,
            "handle": self.handle,
            "message": self.message or str(self),
            "details": _plain(self.details),
        }

    def __repr__(self) -> str:
        return f"{type(self).__name__}(reason={self.reason!r}, message={self.message!r})"


class CallFailed(FlowOutcome):
    """The child failed."""

    reason = "call_failed"


class CallAwaitingInput(CallFailed):
    """The child ended its turn waiting for input; ``answer`` is its last answer."""

    reason = "call_awaiting_input"

    @property
    def answer(self) -> str:
        return str(self.details.get("answer", ""))


class CallStopped(CallFailed):
    """The child's turn stopped, by Stop or by an error such as a provider timeout."""

    reason = "call_stopped"


class CallCancelled(FlowOutcome):
    """The child was cancelled."""

    reason = "call_cancelled"


class CallInterrupted(FlowOutcome):
    """The child stopped without a result, or never started."""

    reason = "call_interrupted"


class TaskStateUncertain(FlowOutcome):
    """CLIO cannot confirm whether the child was accepted; it is never submitted again."""

    reason = "task_state_uncertain"


class CallRefused(FlowOutcome):
    """The call was not accepted; ``details["refusal"]`` is a stable code."""

    reason = "call_refused"

    @property
    def refusal(self) -> str:
        return str(self.details.get("refusal", ""))


class FlowTargetUnknown(FlowOutcome):
    """The target names nothing this agent can reach."""

    reason = "flow_target_unknown"


class FlowNotTrusted(FlowOutcome):
    """The target is a flow from a plugin that is not trusted."""

    reason = "flow_not_trusted"


class FlowLimitExceeded(FlowOutcome):
    """A limit refused the call; ``details["limit"]`` names it."""

    reason = "flow_limit_exceeded"


class FlowCheckpointLimit(FlowOutcome):
    """The run recorded 10,000 entries and cannot record more."""

    reason = "flow_checkpoint_limit"


class FlowReplayMismatch(FlowOutcome):
    """A resumed run met different code or input than it recorded."""

    reason = "flow_replay_mismatch"


class FlowStall(FlowOutcome):
    """A flow raised it because work cannot proceed."""

    reason = "flow_stall"

    def __init__(
        self,
        stall: str,
        message: str = "",
        *,
        step: str = "",
        predicate: Any = None,
        observed: Any = None,
        handle: Any = "",
    ):
        details = {
            "stall": stall,
            "message": message,
            "step": step,
            "predicate": predicate,
            "observed": observed,
        }
        super().__init__(message or stall, handle=handle, details=details)
        self.stall = stall
        self.step = step
        self.predicate = predicate
        self.observed = observed

    def __str__(self) -> str:
        return f"flow stalled ({self.stall}): {self.message}"


class GatherFailed(FlowOutcome):
    """At least one gathered call failed; ``results`` holds every result or error."""

    reason = "gather_failed"

    def __init__(self, results: list, message: str = "", **kwargs: Any):
        failed = sum(1 for r in results if isinstance(r, BaseException))
        message = message or f"{failed} of {len(results)} gathered calls failed"
        super().__init__(message, **kwargs)
        self.results = list(results)

    def to_dict(self) -> dict:
        out = super().to_dict()
        out["details"]["results"] = [_plain(r) for r in self.results]
        return out


class StepFailed(FlowOutcome):
    """A ``ctx.step`` whose function raised: recorded, and raised again on replay.

    ``details`` holds the exception's ``type``, ``message`` and ``traceback``; on the run
    that ran the step, ``__cause__`` is the exception itself.
    """

    reason = "step_failed"


class FlowException(FlowOutcome):
    """A Python flow raised an exception that is no outcome (a bug, a ``ValueError``…).

    ``details`` holds ``flow``, ``type``, ``message``, ``file``, ``line`` and the whole
    ``traceback``. A flow that calls a Python flow which raised sees the child's error.
    """

    reason = "flow_exception"


class FlowProtocolError(FlowOutcome):
    """The line protocol between CLIO and a Python flow's process broke."""

    reason = "flow_protocol_error"


_CLASSES: dict[str, type[FlowOutcome]] = {
    cls.reason: cls
    for cls in (
        CallFailed,
        CallAwaitingInput,
        CallStopped,
        CallCancelled,
        CallInterrupted,
        TaskStateUncertain,
        CallRefused,
        FlowTargetUnknown,
        FlowNotTrusted,
        FlowLimitExceeded,
        FlowCheckpointLimit,
        FlowReplayMismatch,
        StepFailed,
        FlowException,
        FlowProtocolError,
    )
}


def outcome_from_dict(data: Any) -> FlowOutcome:
    """Returns the outcome the runtime's error form ``data`` describes.

    A reason no class names gives a :class:`FlowOutcome` carrying that reason (the
    runtime's own codes, such as ``flow_options_invalid``); a form that is not a mapping
    gives a :class:`CallFailed` carrying its text, so nothing is lost.
    """
    if not isinstance(data, dict):
        return CallFailed(str(data))
    reason = str(data.get("reason") or "")
    handle = data.get("handle")
    details = data.get("details")
    details = dict(details) if isinstance(details, dict) else {}
    message = data.get("message")
    if not isinstance(message, str):
        message = str(details.get("message", "")) or reason
    if reason == "flow_stall":
        return FlowStall(
            str(details.get("stall", "")),
            str(details.get("message", message)),
            step=str(details.get("step", "") or ""),
            predicate=details.get("predicate"),
            observed=details.get("observed"),
            handle=handle,
        )
    if reason == "gather_failed":
        from clio_agent.sdk.flow import settled_from_dict

        items = details.get("results")
        results = [settled_from_dict(item, i) for i, item in enumerate(items or [])]
        return GatherFailed(results, message, handle=handle)
    if reason == "flow_options_invalid":
        from clio_agent.sdk.flow import FlowOptionsInvalid

        return FlowOptionsInvalid(str(details.get("flow", "")), list(details.get("problems") or []), message=message)
    cls = _CLASSES.get(reason)
    if cls is None:
        return FlowOutcome(message, handle=handle, details=details, reason=reason or None)
    return cls(message, handle=handle, details=details)


def _plain(value: Any) -> Any:
    """Returns ``value`` as plain JSON data (outcomes and results by their dict forms)."""
    if isinstance(value, FlowOutcome):
        return value.to_dict()
    to_dict = getattr(value, "to_dict", None)
    if callable(to_dict) and not isinstance(value, type):
        return to_dict()
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value
