"""``Flow``: a procedure written in Python, and ``CallResult``, what a call returns.

A subclass declares a flow (``id``, ``description``, ``shape``, ``model``, the four
limits and typed options with defaults) and its ``async def forward(self, task, ctx)``;
``Flow(id, **options)`` is a selection of a flow by id, for an agent's ``flow`` or a
``ctx.call`` target.
"""

from __future__ import annotations

import json
import typing
from typing import Any

from clio_agent.flows.outcomes import FlowOutcome, _plain, outcome_from_dict
from clio_agent.sdk import _options

__all__ = ["CallResult", "Flow", "FlowOptionsInvalid", "LIMIT_NAMES", "RESERVED"]

#: The four limits, which every flow also accepts as options.
LIMIT_NAMES = ("max_depth", "max_concurrency", "max_model_calls", "budget_tokens")

#: The class attributes that declare the flow rather than an option.
RESERVED = frozenset(("id", "description", "shape", "model", "forward") + LIMIT_NAMES)

_LIMIT_SPEC = {"type": "int", "min": 0, "max": None}


class FlowOptionsInvalid(FlowOutcome, ValueError):
    """Options given to a flow were refused; ``problems`` names each bad option, as
    ``{"option", "needs", "got"}``."""

    reason = "flow_options_invalid"

    def __init__(self, flow: str, problems: list, *, message: str = ""):
        parts = []
        for p in problems:
            if p.get("needs") == "no such option":
                parts.append(f"{p.get('option')} is not one of its options (got {_show(p.get('got'))})")
            else:
                parts.append(f"{p.get('option')} needs {p.get('needs')} (got {_show(p.get('got'))})")
        message = message or f"invalid options for flow {flow}: " + "; ".join(parts)
        super().__init__(message, details={"flow": flow, "problems": list(problems)})
        self.flow = flow
        self.problems = list(problems)


def _show(value: Any) -> str:
    try:
        return json.dumps(_plain(value), ensure_ascii=False)
    except (TypeError, ValueError):
        return repr(value)


def _is_option_value(value: Any) -> bool:
    """Whether a class attribute's value is an option's default (not a method or a type)."""
    if isinstance(value, (staticmethod, classmethod, property, type)):
        return False
    return not callable(value)


class _either:  # noqa: N801 - used as a decorator
    """A method that works on a selection and on the class itself (``Review.limits()``)."""

    def __init__(self, fn: Any):
        self.fn = fn
        self.__doc__ = fn.__doc__

    def __get__(self, obj: Any, owner: Any = None) -> Any:
        target = obj if obj is not None else owner
        return lambda *args, **kwargs: self.fn(target, *args, **kwargs)


class Flow:
    """A flow: subclass it to declare one, or call ``Flow(id, **options)`` to select one."""

    id: typing.ClassVar[str] = ""
    description: typing.ClassVar[str] = ""
    shape: typing.ClassVar[str] = ""
    model: typing.ClassVar[str] = ""
    max_depth: typing.ClassVar[int] = 0
    max_concurrency: typing.ClassVar[int] = 0
    max_model_calls: typing.ClassVar[int] = 0
    budget_tokens: typing.ClassVar[int] = 0

    def __init__(self, *args: Any, **options: Any):
        cls = type(self)
        if cls is Flow:
            if len(args) != 1 or not isinstance(args[0], str) or not args[0]:
                raise TypeError("Flow(id, **options): the flow's id, as text, comes first")
            self.id = args[0]
            self._options = dict(options)
            return
        if args and (len(args) > 1 or args[0] != cls.id):
            raise TypeError(f"{cls.__name__}(**options) selects flow {cls.id!r}; give only options")
        checked = cls.checked_options(options)
        for name, value in checked.items():
            setattr(self, name, value)
        self._options = dict(options)

    # The declaration -------------------------------------------------------------------

    @classmethod
    def option_specs(cls) -> dict[str, tuple[dict, Any]]:
        """Returns each declared option's type spec and default, by name, base classes
        first. An option without an annotation takes anything."""
        if cls is Flow:
            return {}
        try:
            hints = typing.get_type_hints(cls, include_extras=True)
        except Exception:  # noqa: BLE001 - an annotation that does not evaluate
            hints = {}
            for klass in reversed(cls.__mro__):
                hints.update(getattr(klass, "__annotations__", {}) or {})
        specs: dict[str, tuple[dict, Any]] = {}
        for klass in reversed(cls.__mro__):
            if klass is Flow or not issubclass(klass, Flow):
                continue
            for name, value in vars(klass).items():
                if name.startswith("_") or name in RESERVED or not _is_option_value(value):
                    continue
                ann = hints.get(name)
                if ann is None:
                    spec = dict(_options.ANY)
                else:
                    try:
                        spec = _options.from_annotation(ann)
                    except _options.UnsupportedAnnotation:
                        spec = dict(_options.ANY)
                specs[name] = (spec, value)
        return specs

    @classmethod
    def checked_options(cls, options: dict | None = None) -> dict:
        """Checks ``options`` against the class's annotations and returns every option,
        converted, defaults filled, with any of the four limits given. Raises
        :class:`FlowOptionsInvalid` naming each bad or unknown option."""
        options = dict(options or {})
        if cls is Flow:
            return options
        specs = cls.option_specs()
        out = {name: default for name, (_spec, default) in specs.items()}
        problems = []
        for name, value in options.items():
            if name in specs:
                spec = specs[name][0]
            elif name in LIMIT_NAMES:
                spec = _LIMIT_SPEC
            else:
                problems.append({"option": name, "needs": "no such option", "got": _plain(value)})
                continue
            try:
                out[name] = _options.convert(spec, value)
            except ValueError:
                problems.append({"option": name, "needs": _options.describe(spec), "got": _plain(value)})
        if problems:
            raise FlowOptionsInvalid(cls.id, problems)
        return out

    # A selection -----------------------------------------------------------------------

    @_either
    def reference(self) -> dict:
        """Returns the selection as ``{"id", "options"}`` (on the class: no options)."""
        return {"id": self.id, "options": _plain(getattr(self, "_options", {}))}

    @_either
    def limits(self) -> dict:
        """Returns the four limits after options (on the class: as declared)."""
        options = getattr(self, "_options", {})
        out = {}
        for name in LIMIT_NAMES:
            value = options.get(name, getattr(self, name, 0))
            out[name] = int(value or 0)
        return out

    def __repr__(self) -> str:
        opts = "".join(f", {k}={v!r}" for k, v in self._options.items())
        return f"Flow({self.id!r}{opts})"

    async def forward(self, task: Any, ctx: Any) -> Any:
        """The procedure; whatever it returns is the flow's answer."""
        raise NotImplementedError(f"flow {self.id!r} does not define forward(self, task, ctx)")


class CallResult:
    """What a call returns: the child's answer, value, outputs and where it ran."""

    __slots__ = (
        "answer",
        "value",
        "outputs",
        "response_text",
        "handle",
        "target",
        "kind",
        "model",
        "index",
        "workflow_state",
    )

    def __init__(
        self,
        answer: str = "",
        value: Any = None,
        outputs: dict | None = None,
        response_text: str = "",
        handle: Any = None,
        target: str = "",
        kind: str = "",
        model: str = "",
        index: int | None = None,
        workflow_state: Any = None,
    ):
        self.answer = answer
        self.value = value
        self.outputs = dict(outputs or {})
        self.response_text = response_text
        self.handle = handle
        self.target = target
        self.kind = kind
        self.model = model
        self.index = index
        self.workflow_state = workflow_state

    @classmethod
    def from_dict(cls, data: dict, index: int | None = None) -> CallResult:
        """Reads a result from the runtime's record form."""
        value = data.get("value")
        outputs = data.get("outputs")
        if not isinstance(outputs, dict):
            outputs = {k: v for k, v in value.items() if k != "answer"} if isinstance(value, dict) else {}
        idx = data.get("index")
        return cls(
            answer=str(data.get("answer") or ""),
            value=value,
            outputs=outputs,
            response_text=str(data.get("response_text") or ""),
            handle=data.get("handle"),
            target=str(data.get("target") or ""),
            kind=str(data.get("kind") or ""),
            model=str(data.get("model") or ""),
            index=idx if isinstance(idx, int) else index,
            workflow_state=data.get("workflow_state"),
        )

    def to_dict(self) -> dict:
        """Returns the result in the runtime's record form."""
        return {name: getattr(self, name) for name in self.__slots__}

    def public_text(self) -> str:
        """The text a subagent or agent receives when this result is its input."""
        if self.kind == "tool" and not self.answer:
            if isinstance(self.value, str):
                return self.value
            if self.value is None:
                return ""
            return json.dumps(self.value, ensure_ascii=False, separators=(",", ":"))
        return self.answer

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        outputs = object.__getattribute__(self, "outputs")
        if name in outputs:
            return outputs[name]
        state = object.__getattribute__(self, "workflow_state")
        if isinstance(state, dict) and name in state:
            return state[name]
        raise AttributeError(f"the result of {self.target!r} has no output or workflow_state section {name!r}")

    def __getitem__(self, name: str) -> Any:
        return self.outputs[name]

    def __contains__(self, name: object) -> bool:
        return name in self.outputs

    def __len__(self) -> int:
        return len(self.outputs)

    def __iter__(self):
        return iter(self.outputs)

    def keys(self):
        return self.outputs.keys()

    def __str__(self) -> str:
        return self.answer

    def __repr__(self) -> str:
        return f"CallResult(target={self.target!r}, handle={self.handle!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CallResult) and self.to_dict() == other.to_dict()

    __hash__ = None  # type: ignore[assignment]


def settled_from_dict(item: Any, index: int) -> Any:
    """Reads one member of a gather's answer: a result, an error (a mapping with a
    ``reason``), or ``None`` (a call not settled when ``return_when="any"`` returned)."""
    if item is None:
        return None
    if isinstance(item, dict) and "reason" in item:
        err = outcome_from_dict(item)
        err.details.setdefault("index", index)
        return err
    if isinstance(item, dict):
        return CallResult.from_dict(item, index)
    return CallResult(answer=str(item), value=item, index=index)
