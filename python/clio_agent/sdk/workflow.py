"""``Workflow`` and ``Step``: a procedure written as data, for the ``workflow`` flow.

``Workflow`` checks its steps when built, through clio-workflow (the check ``clio workflow
check`` runs), and raises :class:`WorkflowError` naming the first problem as the CLI does:
an invalid or repeated id, an empty target, an unknown dependency, a cycle …

Where the package runs without its native module — the flow runner the ``clio`` binary
starts carries the pure-Python files only — a ``Workflow`` is built unchecked, and the
runtime's ``workflow`` flow checks it with the same code before any step runs (its refusal
comes back as the call's error). No rule of the check is written in Python.
"""

from __future__ import annotations

import json
from typing import Any

from clio_agent.sdk import _bridge

__all__ = ["Step", "Workflow", "WorkflowError"]


class WorkflowError(ValueError):
    """A workflow that cannot run, naming the first problem; ``kind`` is clio-workflow's
    variant (``cycle``, ``duplicate_id``, ``unknown_dependency`` …)."""

    def __init__(self, message: str, *, kind: str = ""):
        super().__init__(message)
        self.message = message
        self.kind = kind


class Step:
    """One step: who runs it (``target``), what it receives and what it waits on."""

    __slots__ = ("id", "target", "input", "after", "description", "options", "model")

    def __init__(
        self,
        id: str,  # noqa: A002 - the seed's name
        target: str,
        input: Any = None,  # noqa: A002 - the seed's name
        after: Any = (),
        description: str = "",
        options: dict | None = None,
        model: str = "",
    ):
        if isinstance(after, str):
            after = (after,)
        self.id = id
        self.target = target
        self.input = input
        self.after = tuple(after or ())
        self.description = description
        self.options = dict(options) if options is not None else None
        self.model = model

    @classmethod
    def from_dict(cls, data: Any) -> Step:
        if not isinstance(data, dict):
            raise WorkflowError(f"a step must be a mapping, not {type(data).__name__}")
        known = set(cls.__slots__)
        unknown = sorted(set(data) - known)
        if unknown:
            raise WorkflowError(f"step {data.get('id', '?')!r}: unknown field {unknown[0]!r}")
        return cls(
            data.get("id", ""),
            data.get("target", ""),
            input=data.get("input"),
            after=data.get("after") or (),
            description=data.get("description", "") or "",
            options=data.get("options"),
            model=data.get("model", "") or "",
        )

    def to_dict(self) -> dict:
        out: dict[str, Any] = {"id": self.id, "target": self.target}
        if self.input is not None:
            out["input"] = self.input
        if self.after:
            out["after"] = list(self.after)
        if self.description:
            out["description"] = self.description
        if self.options is not None:
            out["options"] = self.options
        if self.model:
            out["model"] = self.model
        return out

    def __repr__(self) -> str:
        return f"Step({self.id!r}, {self.target!r})"


class Workflow:
    """A list of steps, checked when built."""

    def __init__(self, steps: Any = ()):
        self.steps = [s if isinstance(s, Step) else Step.from_dict(s) for s in steps]
        if _bridge.available():
            try:
                text = json.dumps({"steps": [s.to_dict() for s in self.steps]}, allow_nan=False)
            except (TypeError, ValueError) as error:
                raise WorkflowError(f"a step's input or options are not JSON: {error}", kind="parse") from None
            _bridge.call("workflow", text)

    @classmethod
    def from_dict(cls, data: Any) -> Workflow:
        """Reads the JSON form: ``{"steps": [...]}`` or a list of steps. With the native
        module the whole document is checked by clio-workflow first, so a wrong field or
        type is named as ``clio workflow check`` names it."""
        if _bridge.available():
            try:
                text = json.dumps(data, allow_nan=False)
            except (TypeError, ValueError) as error:
                raise WorkflowError(f"a workflow is JSON data: {error}", kind="parse") from None
            data = json.loads(_bridge.call("workflow", text))
        if isinstance(data, dict):
            steps = data.get("steps")
            if not isinstance(steps, list):
                raise WorkflowError("a workflow needs a list of steps under 'steps'")
        elif isinstance(data, list):
            steps = data
        else:
            raise WorkflowError(f"a workflow is a mapping or a list, not {type(data).__name__}")
        return cls([Step.from_dict(s) for s in steps])

    def to_dict(self) -> dict:
        return {"steps": [s.to_dict() for s in self.steps]}

    def __repr__(self) -> str:
        return f"Workflow({len(self.steps)} steps)"
