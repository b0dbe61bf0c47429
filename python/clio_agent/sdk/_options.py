"""Option types: an annotation read as a type spec, and values checked against it.

A spec is plain data, the same the Rust runtime's ``OptionType`` holds, so that
discovery (``clio_agent._discover``, which reads annotations from the syntax tree) and
``Flow.checked_options`` (which reads them from the class) agree:

``{"type": "any"}``, ``{"type": "bool"}``, ``{"type": "int", "min": 1, "max": None}``,
``{"type": "float"}``, ``{"type": "str"}``, ``{"type": "one_of", "values": [...]}``,
``{"type": "list", "items": spec, "tuple": True}``, ``{"type": "map"}``,
``{"type": "optional", "inner": spec}``.
"""

from __future__ import annotations

import collections.abc
import math
import typing
from typing import Any

ANY = {"type": "any"}

_NO = object()


class UnsupportedAnnotation(Exception):
    """An annotation no option type matches."""


def describe(spec: dict) -> str:
    """Returns what a value of ``spec`` must be, as the problems name it."""
    kind = spec.get("type")
    if kind == "any":
        return "anything"
    if kind == "bool":
        return "a bool"
    if kind == "int":
        lo, hi = spec.get("min"), spec.get("max")
        if lo is not None and hi is not None:
            return f"an integer from {lo} to {hi}"
        if lo is not None:
            return f"an integer >= {lo}"
        if hi is not None:
            return f"an integer <= {hi}"
        return "an integer"
    if kind == "float":
        return "a number"
    if kind == "str":
        return "text"
    if kind == "one_of":
        return "one of " + ", ".join(str(v) for v in spec.get("values", []))
    if kind == "list":
        return "a list of " + describe(spec.get("items", ANY))
    if kind == "map":
        return "a mapping"
    if kind == "optional":
        return describe(spec.get("inner", ANY)) + " or null"
    return str(kind)


def convert(spec: dict, value: Any) -> Any:
    """Returns ``value`` converted to ``spec``, or raises ``ValueError`` when it does not fit.

    ``True`` is never a number; a float with an integral value is an integer; a list
    becomes a tuple where the annotation says tuple.
    """
    out = _convert(spec, value)
    if out is _NO:
        raise ValueError(describe(spec))
    return out


def _convert(spec: dict, value: Any) -> Any:
    kind = spec.get("type")
    if kind == "any":
        return value
    if kind == "bool":
        return value if isinstance(value, bool) else _NO
    if kind == "int":
        if isinstance(value, bool):
            return _NO
        if isinstance(value, int):
            n = value
        elif isinstance(value, float) and math.isfinite(value) and value.is_integer():
            n = int(value)
        else:
            return _NO
        lo, hi = spec.get("min"), spec.get("max")
        if (lo is not None and n < lo) or (hi is not None and n > hi):
            return _NO
        return n
    if kind == "float":
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return _NO
        return float(value)
    if kind == "str":
        return value if isinstance(value, str) else _NO
    if kind == "one_of":
        return value if isinstance(value, str) and value in spec.get("values", []) else _NO
    if kind == "list":
        if isinstance(value, (str, bytes, dict)) or not isinstance(value, (list, tuple, collections.abc.Sequence)):
            return _NO
        items = [_convert(spec.get("items", ANY), v) for v in value]
        if any(i is _NO for i in items):
            return _NO
        return tuple(items) if spec.get("tuple") else items
    if kind == "map":
        return dict(value) if isinstance(value, collections.abc.Mapping) else _NO
    if kind == "optional":
        if value is None:
            return None
        return _convert(spec.get("inner", ANY), value)
    return _NO


def from_annotation(ann: Any) -> dict:
    """Returns the spec of a runtime annotation; raises :class:`UnsupportedAnnotation`."""
    if ann is Any or ann is object:
        return dict(ANY)
    if isinstance(ann, str):
        raise UnsupportedAnnotation(f"a string annotation {ann!r}")
    if ann is bool:
        return {"type": "bool"}
    if ann is int:
        return {"type": "int", "min": None, "max": None}
    if ann is float:
        return {"type": "float"}
    if ann is str:
        return {"type": "str"}
    if ann in (dict, collections.abc.Mapping, typing.Dict):  # noqa: UP006
        return {"type": "map"}
    if ann in (list, typing.List):  # noqa: UP006
        return {"type": "list", "items": dict(ANY), "tuple": False}
    if ann in (tuple, typing.Tuple):  # noqa: UP006
        return {"type": "list", "items": dict(ANY), "tuple": True}
    origin = typing.get_origin(ann)
    args = typing.get_args(ann)
    if origin is typing.Annotated:
        spec = from_annotation(args[0])
        if spec["type"] == "int":
            for meta in args[1:]:
                _bounds(spec, meta)
        return spec
    if origin is typing.Literal:
        if all(isinstance(a, str) for a in args):
            return {"type": "one_of", "values": list(args)}
        raise UnsupportedAnnotation("a Literal of values that are not all text")
    if origin is typing.Union or _is_union_type(ann):
        rest = [a for a in args if a is not type(None)]
        if len(rest) == 1 and len(rest) < len(args):
            return {"type": "optional", "inner": from_annotation(rest[0])}
        raise UnsupportedAnnotation("a union other than X | None")
    if origin in (list, collections.abc.Sequence, tuple):
        tup = origin is tuple
        if tup and not (len(args) == 2 and args[1] is Ellipsis) and args:
            raise UnsupportedAnnotation("a fixed-length tuple; use tuple[X, ...]")
        items = from_annotation(args[0]) if args else dict(ANY)
        return {"type": "list", "items": items, "tuple": tup}
    if origin in (dict, collections.abc.Mapping):
        return {"type": "map"}
    raise UnsupportedAnnotation(f"the annotation {ann!r}")


def _is_union_type(ann: Any) -> bool:
    union_type = getattr(__import__("types"), "UnionType", None)
    return union_type is not None and isinstance(ann, union_type)


def _bounds(spec: dict, meta: Any) -> None:
    """Reads ``ge``/``gt``/``le``/``lt`` from a constraint object (pydantic's ``Field``,
    ``annotated_types.Ge``…) into an int spec's bounds."""
    rules = (
        ("ge", "min", math.ceil),
        ("gt", "min", lambda b: math.floor(b) + 1),
        ("le", "max", math.floor),
        ("lt", "max", lambda b: math.ceil(b) - 1),
    )
    for name, key, to_int in rules:
        bound = getattr(meta, name, None)
        if isinstance(bound, (int, float)) and not isinstance(bound, bool):
            spec[key] = to_int(bound)
    for inner in getattr(meta, "metadata", None) or []:
        if inner is not meta:
            _bounds(spec, inner)
