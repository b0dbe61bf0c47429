"""``Workflow`` and ``Step``: a procedure written as data, for the ``workflow`` flow.

``Workflow`` checks its steps when built and raises :class:`WorkflowError` naming the
first problem: an invalid or repeated id, an empty target, an unknown dependency or a
cycle.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["Step", "Workflow", "WorkflowError"]

_STEP_ID = re.compile(r"^[a-z0-9_-]{1,64}$")


class WorkflowError(ValueError):
    """A workflow that cannot run, naming the first problem."""


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
        _check(self.steps)

    @classmethod
    def from_dict(cls, data: Any) -> Workflow:
        """Reads the JSON form: ``{"steps": [...]}`` or a list of steps."""
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


def _check(steps: list[Step]) -> None:
    seen: set[str] = set()
    for step in steps:
        if not isinstance(step.id, str) or not _STEP_ID.match(step.id):
            raise WorkflowError(
                f"step id {step.id!r} is invalid: lowercase letters, digits, - and _, up to 64 characters"
            )
        if step.id == "task":
            raise WorkflowError("step id 'task' is reserved")
        if step.id in seen:
            raise WorkflowError(f"step id {step.id!r} is used twice")
        seen.add(step.id)
        if not isinstance(step.target, str) or not step.target.strip():
            raise WorkflowError(f"step {step.id!r} has an empty target")
    for step in steps:
        for dep in step.after:
            if dep not in seen:
                raise WorkflowError(f"step {step.id!r} waits on {dep!r}, which is no step")
    # A cycle: depth-first search, reporting the first step found on one.
    after = {s.id: s.after for s in steps}
    state: dict[str, int] = {}

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for dep in after[node]:
            if state.get(dep) == 1:
                cycle = path[path.index(dep) :] + [dep] if dep in path else [node, dep]
                raise WorkflowError("the steps wait on each other in a cycle: " + " -> ".join(cycle))
            if state.get(dep) is None:
                visit(dep, path + [dep])
        state[node] = 2

    for step in steps:
        if state.get(step.id) is None:
            visit(step.id, [step.id])
