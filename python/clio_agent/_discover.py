"""Reads the flows a plugin's ``flows/*.py`` declare, from the syntax tree alone.

``python3 -m clio_agent._discover [--root DIR] FILE...`` parses each file with ``ast``
and never imports or runs it, so ``plugin check`` can list an untrusted plugin's flows.
For every ``class X(Flow)`` (or a subclass of one in the same file) it reads ``id``,
``description`` (else the docstring), ``shape``, ``model``, the four limits and the
typed options with their defaults, and prints one JSON document on stdout::

    {"flows": [{"id", "class", "file", "line", "description", "shape", "model",
                "limits": {...}, "options": [{"name", "type", "default", "line"}]}],
     "errors": [{"file", "line", "column", "message"}]}

A syntax error, a missing ``id``, a duplicate id across the files, an option whose
default does not fit its annotation (or is not a literal), and an annotation no option
type matches are reported with file and line. Exit status: 0 without errors, 1 with
errors, 2 for a usage error.
"""

from __future__ import annotations

import ast
import json
import math
import os
import sys
from typing import Any

if __package__ in (None, ""):  # run as a file: import the package it sits in
    _here = os.path.dirname(os.path.abspath(__file__))
    if sys.path and os.path.abspath(sys.path[0]) == _here:
        sys.path.pop(0)
    sys.path.insert(0, os.path.dirname(_here))

from clio_agent.sdk import _options  # noqa: E402

LIMIT_NAMES = ("max_depth", "max_concurrency", "max_model_calls", "budget_tokens")
TEXT_FIELDS = ("id", "description", "shape", "model")

_SKIPPED_CALLS = {"staticmethod", "classmethod", "property"}


class _Bad(Exception):
    """A problem in a declaration, at ``node``."""

    def __init__(self, message: str, node: ast.AST | None = None):
        super().__init__(message)
        self.node = node


# Annotations -----------------------------------------------------------------------------


def _name(node: ast.AST) -> str:
    """The last name of ``X``, ``typing.X`` or ``t.X``."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return ""


def _items(node: ast.AST) -> list[ast.AST]:
    return list(node.elts) if isinstance(node, ast.Tuple) else [node]


def spec_of(node: ast.AST) -> dict:
    """The option type spec of an annotation's syntax tree; raises :class:`_Bad`."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        try:
            inner = ast.parse(node.value, mode="eval").body
        except SyntaxError as e:
            raise _Bad(f"the annotation {node.value!r} does not parse", node) from e
        return spec_of(inner)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        parts = _union_parts(node)
        rest = [p for p in parts if not _is_none(p)]
        if len(rest) == 1 and len(rest) < len(parts):
            return {"type": "optional", "inner": spec_of(rest[0])}
        raise _Bad("a union other than X | None is no option type", node)
    name = _name(node)
    if isinstance(node, (ast.Name, ast.Attribute)):
        simple = {
            "int": {"type": "int", "min": None, "max": None},
            "float": {"type": "float"},
            "str": {"type": "str"},
            "bool": {"type": "bool"},
            "dict": {"type": "map"},
            "Dict": {"type": "map"},
            "Mapping": {"type": "map"},
            "list": {"type": "list", "items": dict(_options.ANY), "tuple": False},
            "List": {"type": "list", "items": dict(_options.ANY), "tuple": False},
            "Sequence": {"type": "list", "items": dict(_options.ANY), "tuple": False},
            "tuple": {"type": "list", "items": dict(_options.ANY), "tuple": True},
            "Tuple": {"type": "list", "items": dict(_options.ANY), "tuple": True},
            "Any": dict(_options.ANY),
            "object": dict(_options.ANY),
        }
        if name in simple:
            return simple[name]
        raise _Bad(f"the annotation {ast.unparse(node)} is no option type", node)
    if isinstance(node, ast.Subscript):
        outer = _name(node.value)
        args = _items(node.slice)
        if outer in ("list", "List", "Sequence"):
            return {"type": "list", "items": spec_of(args[0]), "tuple": False}
        if outer in ("tuple", "Tuple"):
            if len(args) == 2 and isinstance(args[1], ast.Constant) and args[1].value is Ellipsis:
                return {"type": "list", "items": spec_of(args[0]), "tuple": True}
            raise _Bad(f"the fixed-length tuple {ast.unparse(node)} is no option type; use tuple[X, ...]", node)
        if outer in ("dict", "Dict", "Mapping"):
            return {"type": "map"}
        if outer == "Optional":
            return {"type": "optional", "inner": spec_of(args[0])}
        if outer == "Union":
            rest = [a for a in args if not _is_none(a)]
            if len(rest) == 1 and len(rest) < len(args):
                return {"type": "optional", "inner": spec_of(rest[0])}
            raise _Bad("a union other than Optional[X] is no option type", node)
        if outer == "Literal":
            values = []
            for a in args:
                if not (isinstance(a, ast.Constant) and isinstance(a.value, str)):
                    raise _Bad("a Literal option takes text values only", a)
                values.append(a.value)
            return {"type": "one_of", "values": values}
        if outer == "Annotated":
            spec = spec_of(args[0])
            if spec["type"] == "int":
                for meta in args[1:]:
                    _bounds(spec, meta)
            return spec
    raise _Bad(f"the annotation {ast.unparse(node)} is no option type", node)


def _union_parts(node: ast.AST) -> list[ast.AST]:
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return _union_parts(node.left) + _union_parts(node.right)
    return [node]


def _is_none(node: ast.AST) -> bool:
    return (isinstance(node, ast.Constant) and node.value is None) or _name(node) == "NoneType"


def _bounds(spec: dict, meta: ast.AST) -> None:
    """Reads ``Field(ge=1)``, ``Ge(1)``, ``Interval(ge=1, le=9)`` into an int's bounds."""
    if not isinstance(meta, ast.Call):
        return
    found: dict[str, Any] = {}
    for kw in meta.keywords:
        if kw.arg in ("ge", "gt", "le", "lt"):
            found[kw.arg] = _literal(kw.value, {})
    callee = _name(meta.func).lower()
    if callee in ("ge", "gt", "le", "lt") and meta.args:
        found[callee] = _literal(meta.args[0], {})
    for key, value in found.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise _Bad(f"the bound {key}={value!r} is not a number", meta)
        if key == "ge":
            spec["min"] = math.ceil(value)
        elif key == "gt":
            spec["min"] = math.floor(value) + 1
        elif key == "le":
            spec["max"] = math.floor(value)
        else:
            spec["max"] = math.ceil(value) - 1


# Values ----------------------------------------------------------------------------------


def _literal(node: ast.AST, env: dict) -> Any:
    """A literal value, with the module's literal constants resolved; raises ``_Bad``."""
    if isinstance(node, ast.Name):
        if node.id in env:
            return env[node.id]
        raise _Bad(f"{node.id} is not a literal or a module constant", node)
    if isinstance(node, (ast.Tuple, ast.List)):
        items = [_literal(e, env) for e in node.elts]
        return tuple(items) if isinstance(node, ast.Tuple) else items
    if isinstance(node, ast.Dict):
        if any(k is None for k in node.keys):
            raise _Bad("a mapping with ** is not a literal", node)
        return {_literal(k, env): _literal(v, env) for k, v in zip(node.keys, node.values, strict=True)}
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError) as e:
        raise _Bad(f"{ast.unparse(node)} is not a literal", node) from e


def _plain(value: Any) -> Any:
    if isinstance(value, (tuple, list)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (set, frozenset, bytes, complex)):
        raise _Bad(f"a {type(value).__name__} default is not JSON")
    return value


# Files -----------------------------------------------------------------------------------


class Discovery:
    """The flows and errors found in a set of files."""

    def __init__(self, root: str = ""):
        self.root = root
        self.flows: list[dict] = []
        self.errors: list[dict] = []
        self._ids: dict[str, dict] = {}

    def _display(self, path: str) -> str:
        if self.root:
            full = os.path.abspath(path)
            root = os.path.abspath(self.root)
            if full.startswith(root + os.sep):
                return os.path.relpath(full, root).replace(os.sep, "/")
        return path

    def error(self, file: str, node: Any, message: str, line: int = 0, column: int = 0) -> None:
        if node is not None and hasattr(node, "lineno"):
            line, column = node.lineno, node.col_offset + 1
        self.errors.append({"file": file, "line": line, "column": column, "message": f"{file}:{line}: {message}"})

    def read(self, path: str) -> None:
        file = self._display(path)
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError as e:
            self.error(file, None, f"cannot read the file: {e.strerror or e}")
            return
        try:
            tree = ast.parse(data, filename=file)
        except SyntaxError as e:
            msg = e.msg or "invalid syntax"
            self.error(file, None, f"syntax error: {msg}", e.lineno or 0, e.offset or 0)
            return
        except ValueError as e:  # null bytes, undecodable text
            self.error(file, None, f"cannot parse the file: {e}")
            return
        self._module(file, tree)

    def _module(self, file: str, tree: ast.Module) -> None:
        env: dict[str, Any] = {}
        flow_refs = {"Flow"}
        for stmt in tree.body:
            if isinstance(stmt, ast.ImportFrom):
                for alias in stmt.names:
                    if alias.name == "Flow" and alias.asname:
                        flow_refs.add(alias.asname)
            elif isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
                try:
                    env[stmt.targets[0].id] = _literal(stmt.value, env)
                except _Bad:
                    env.pop(stmt.targets[0].id, None)
        classes: dict[str, dict] = {}
        bases_used: set[str] = set()
        order: list[tuple[ast.ClassDef, dict]] = []
        for stmt in tree.body:
            if not isinstance(stmt, ast.ClassDef):
                continue
            parent = None
            is_flow = False
            for base in stmt.bases:
                name = _name(base)
                if (isinstance(base, ast.Name) and name in flow_refs) or (
                    isinstance(base, ast.Attribute) and name == "Flow"
                ):
                    is_flow = True
                elif isinstance(base, ast.Name) and name in classes:
                    is_flow = True
                    parent = classes[name]
                    bases_used.add(name)
            if not is_flow:
                continue
            decl = self._class(file, stmt, env, parent)
            classes[stmt.name] = decl
            order.append((stmt, decl))
        for stmt, decl in order:
            if not decl["id"]:
                if stmt.name in bases_used and not decl["_own_id"]:
                    continue  # a base class other flows of the file build on
                self.error(file, stmt, f'flow class {stmt.name} has no id (set id = "...")')
                continue
            seen = self._ids.get(decl["id"])
            if seen is not None:
                self.error(
                    file,
                    stmt,
                    f"flow id {decl['id']!r} is declared twice: {seen['file']}:{seen['line']} and {file}:{stmt.lineno}",
                )
                continue
            self._ids[decl["id"]] = decl
            self.flows.append({k: v for k, v in decl.items() if not k.startswith("_")})

    def _class(self, file: str, node: ast.ClassDef, env: dict, parent: dict | None) -> dict:
        decl: dict[str, Any] = {
            "id": "",
            "class": node.name,
            "file": file,
            "line": node.lineno,
            "description": "",
            "shape": "",
            "model": "",
            "limits": {n: 0 for n in LIMIT_NAMES},
            "options": [],
            "_own_id": False,
        }
        if parent is not None:
            for key in ("id", "description", "shape", "model"):
                decl[key] = parent[key]
            decl["limits"] = dict(parent["limits"])
            decl["options"] = [dict(o) for o in parent["options"]]
        doc = ast.get_docstring(node)
        described = False
        for stmt in node.body:
            if isinstance(stmt, ast.Assign):
                targets = [t for t in stmt.targets if isinstance(t, ast.Name)]
                for target in targets:
                    described |= self._field(file, decl, target.id, None, stmt.value, stmt, env)
            elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
                described |= self._field(file, decl, stmt.target.id, stmt.annotation, stmt.value, stmt, env)
        if not described and not decl["description"] and doc:
            decl["description"] = doc
        return decl

    def _field(self, file: str, decl: dict, name: str, ann: Any, value: Any, stmt: ast.AST, env: dict) -> bool:
        """Reads one class attribute; returns whether it was the description."""
        if name.startswith("_"):
            return False
        if ann is not None and _name(ann.value if isinstance(ann, ast.Subscript) else ann) == "ClassVar":
            return False
        if name in TEXT_FIELDS or name in LIMIT_NAMES:
            if value is None:
                self.error(file, stmt, f"{name} is declared without a value")
                return False
            try:
                v = _literal(value, env)
            except _Bad as e:
                self.error(file, stmt, f"{name}: {e}")
                return False
            if name in TEXT_FIELDS:
                if not isinstance(v, str):
                    self.error(file, stmt, f"{name} must be text, not {type(v).__name__} {v!r}")
                    return False
                if name == "id":
                    if not v.strip():
                        self.error(file, stmt, "id is empty")
                        return False
                    decl["_own_id"] = True
                decl[name] = v
                return name == "description"
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                self.error(file, stmt, f"{name} must be an integer >= 0, not {v!r}")
                return False
            decl["limits"][name] = v
            return False
        if isinstance(value, ast.Lambda) or (isinstance(value, ast.Call) and _name(value.func) in _SKIPPED_CALLS):
            return False  # a function, not an option
        if value is None:
            self.error(file, stmt, f"option {name} has no default (give it one: {name}: ... = value)")
            return False
        try:
            spec = spec_of(ann) if ann is not None else dict(_options.ANY)
        except _Bad as e:
            self.error(file, e.node or stmt, f"option {name}: {e}")
            return False
        try:
            default = _literal(value, env)
        except _Bad as e:
            self.error(file, stmt, f"option {name}: its default must be a literal: {e}")
            return False
        try:
            converted = _options.convert(spec, default)
            plain = _plain(converted)
        except ValueError:
            self.error(file, stmt, f"option {name}: its default {default!r} is not {_options.describe(spec)}")
            return False
        except _Bad as e:
            self.error(file, stmt, f"option {name}: {e}")
            return False
        option = {"name": name, "type": spec, "default": plain, "line": stmt.lineno}
        decl["options"] = [o for o in decl["options"] if o["name"] != name] + [option]
        return False


def discover(paths: list[str], root: str = "") -> dict:
    """Returns ``{"flows": [...], "errors": [...]}`` for ``paths``."""
    d = Discovery(root)
    for path in paths:
        d.read(path)
    return {"flows": d.flows, "errors": d.errors}


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    root = ""
    if args[:1] == ["--root"]:
        if len(args) < 2:
            print("usage: python3 -m clio_agent._discover [--root DIR] FILE...", file=sys.stderr)
            return 2
        root, args = args[1], args[2:]
    if not args:
        print("usage: python3 -m clio_agent._discover [--root DIR] FILE...", file=sys.stderr)
        return 2
    out = discover(args, root)
    sys.stdout.write(json.dumps(out, ensure_ascii=False) + "\n")
    return 1 if out["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
