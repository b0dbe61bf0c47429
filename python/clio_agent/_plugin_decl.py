"""Reads the plugin an ``ai.iowarp.clio/plugin.py`` declares, from the syntax tree alone.

``python3 -m clio_agent._plugin_decl [--root DIR] FILE`` parses the file with ``ast`` and
never imports or runs it, so ``clio`` can read an untrusted plugin's declaration as it reads
a ``plugin.toml``: code at the top of the file, a loop, an import that fails — none of it
runs. It prints one JSON document on stdout::

    {"plugin": {"file", "kind", "class", "line", "id", "version", "description", "requires",
                "model", "defer", "tools", "native_tools", "hooks", "subagents",
                "bindings"} | null,
     "host_calls": [{"name", "function", "line"}],
     "errors": [{"file", "line", "column", "message"}]}

``plugin`` is the declaration in the manifest's shape — what ``Plugin.declaration()`` gives
for the same file imported (a test checks both agree) and what ``Plugin.describe()`` hands
to clio-plugins — with a ``line`` on the plugin and on each tool, native tool, hook and
subagent, and each tool's and hook's Python ``function``. The seeds' forms are read: a
``Plugin`` subclass (or a subclass of one in the same file) or instance, a ``Pack``,
``@tool`` / ``@tool(...)`` functions with their schema from the annotations,
``native_tool(...)``, ``@hook(event, ...)``, ``@host_call(name)``, ``Subagent(...)`` with a
``PromptFile``, ``Requires(...)``, ``Prefers(...)`` and ``Flow(id, **options)``. Values
must be literals (or names of module-level literal constants): anything else is an error
with its file and line, not a guess. Exit status: 0 without errors, 1 with errors, 2 for a
usage error.
"""

from __future__ import annotations

import ast
import json
import os
import sys
from typing import Any

if __package__ in (None, ""):  # run as a file: import the package it sits in
    _here = os.path.dirname(os.path.abspath(__file__))
    if sys.path and os.path.abspath(sys.path[0]) == _here:
        sys.path.pop(0)
    sys.path.insert(0, os.path.dirname(_here))

__all__ = ["read_plugin", "schema_of_function", "main"]

#: The largest plugin.py read (bytes); a larger one is an error, never parsed.
MAX_BYTES = 4 * 1024 * 1024

_SDK_MODULES = ("clio_agent.sdk", "clio_agent.sdk.plugin", "clio_agent.sdk.agent", "clio_agent.sdk.flow")
_SUBAGENT_PARAMS = (
    "id",
    "prompt",
    "plugins",
    "description",
    "tools",
    "prefers",
    "flow",
    "max_iters",
    "structured_outputs",
    "internal",
)
_PLUGIN_FIELDS = (
    "id",
    "version",
    "description",
    "requires",
    "model",
    "prefers",
    "defer",
    "tools",
    "native_tools",
    "hooks",
    "subagents",
    "bindings",
)


class _Bad(Exception):
    """A problem in the declaration, at ``node``."""

    def __init__(self, message: str, node: ast.AST | None = None):
        super().__init__(message)
        self.node = node


class _Ref:
    """A name of a declaration made elsewhere in the file (a tool, hook, host call …)."""

    def __init__(self, name: str, node: ast.AST):
        self.name = name
        self.node = node


# Schemas from annotations ----------------------------------------------------------------

_SCALARS = {"str": "string", "int": "integer", "float": "number", "bool": "boolean"}
_ARRAYS = ("list", "List", "Sequence", "tuple", "Tuple")
_OBJECTS = ("dict", "Dict", "Mapping")


def _last(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return ""


def _is_none(node: ast.AST) -> bool:
    return (isinstance(node, ast.Constant) and node.value is None) or _last(node) == "NoneType"


def _union(node: ast.AST) -> list[ast.AST]:
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return _union(node.left) + _union(node.right)
    return [node]


def _union_schema(parts: list[ast.AST]) -> dict:
    members = [p for p in parts if not _is_none(p)]
    inner = schema_of(members[0]) if len(members) == 1 else {"anyOf": [schema_of(m) for m in members]}
    return {"anyOf": [inner, {"type": "null"}]} if len(members) < len(parts) else inner


def schema_of(node: ast.AST | None) -> dict:
    """The JSON schema of one parameter's annotation (``{}`` for anything it cannot say)."""
    if node is None:
        return {}
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        try:
            return schema_of(ast.parse(node.value, mode="eval").body)
        except SyntaxError:
            return {}
    if _is_none(node):
        return {"type": "null"}
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return _union_schema(_union(node))
    name = _last(node)
    if isinstance(node, (ast.Name, ast.Attribute)):
        if name in _SCALARS:
            return {"type": _SCALARS[name]}
        if name in _ARRAYS:
            return {"type": "array"}
        if name in _OBJECTS:
            return {"type": "object"}
        return {}
    if isinstance(node, ast.Subscript):
        outer = _last(node.value)
        args = list(node.slice.elts) if isinstance(node.slice, ast.Tuple) else [node.slice]
        if outer == "Annotated":
            return schema_of(args[0])
        if outer == "Literal":
            values = []
            for a in args:
                if not isinstance(a, ast.Constant):
                    return {}
                values.append(a.value)
            return {"enum": values}
        if outer == "Optional":
            return _union_schema([args[0], ast.Constant(None)])
        if outer == "Union":
            return _union_schema(args)
        if outer in _ARRAYS:
            items = [a for a in args if not (isinstance(a, ast.Constant) and a.value is Ellipsis)]
            return {"type": "array", "items": schema_of(items[0])} if items else {"type": "array"}
        if outer in _OBJECTS:
            return {"type": "object"}
    return {}


def _literal(node: ast.AST) -> tuple[bool, Any]:
    try:
        value = ast.literal_eval(node)
        json.dumps(value, allow_nan=False)
    except (ValueError, TypeError, SyntaxError, RecursionError):
        return False, None
    return True, (list(value) if isinstance(value, tuple) else value)


def schema_of_function(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> dict:
    """The JSON schema of a tool function's arguments: each parameter a property (its
    annotation's schema, with its default when that is a literal), those without a default
    required. The same function serves the reader and ``@tool`` on an imported function."""
    args = fn.args
    positional = list(args.posonlyargs) + list(args.args)
    defaults: list[ast.AST | None] = [None] * (len(positional) - len(args.defaults)) + list(args.defaults)
    params = list(zip(positional, defaults, strict=True)) + list(zip(args.kwonlyargs, args.kw_defaults, strict=True))
    properties: dict[str, Any] = {}
    required = []
    for arg, default in params:
        schema = schema_of(arg.annotation)
        if default is None:
            required.append(arg.arg)
        else:
            ok, value = _literal(default)
            if ok:
                schema = {**schema, "default": value}
        properties[arg.arg] = schema
    out: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        out["required"] = required
    return out


# The reader ------------------------------------------------------------------------------


class _Reader:
    def __init__(self, tree: ast.Module):
        self.tree = tree
        self.aliases: dict[str, str] = {}  # local name -> SDK name
        self.modules: set[str] = set()  # local names of the SDK modules
        self.consts: dict[str, ast.AST] = {}
        self.decls: dict[str, tuple[str, Any, ast.AST]] = {}  # name -> (kind, declaration, node)
        self.order: list[str] = []
        self.plugin_classes: dict[str, ast.ClassDef] = {}
        self.errors: list[tuple[str, ast.AST | None]] = []

    # Names ---------------------------------------------------------------------------------

    def sdk(self, node: ast.AST) -> str:
        """The SDK name ``node`` refers to (``Plugin``, ``tool`` …), or ``""``."""
        if isinstance(node, ast.Name):
            return self.aliases.get(node.id, node.id if node.id not in self.consts else "")
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in self.modules:
            return node.attr
        return ""

    def imports(self, stmt: ast.stmt) -> None:
        if isinstance(stmt, ast.ImportFrom) and stmt.module in _SDK_MODULES:
            for alias in stmt.names:
                self.aliases[alias.asname or alias.name] = alias.name
        elif isinstance(stmt, ast.ImportFrom) and stmt.module == "clio_agent":
            for alias in stmt.names:
                if alias.name == "sdk":
                    self.modules.add(alias.asname or "sdk")
        elif isinstance(stmt, ast.Import):
            for alias in stmt.names:
                if alias.name in _SDK_MODULES and alias.asname:
                    self.modules.add(alias.asname)

    # Values ----------------------------------------------------------------------------------

    def value(self, node: ast.AST) -> Any:
        """A literal, a constant's value, an SDK call's data, or a reference."""
        if isinstance(node, ast.Constant):
            if isinstance(node.value, (str, int, float, bool)) or node.value is None:
                return node.value
            raise _Bad(f"{ast.unparse(node)} is not plain data", node)
        if isinstance(node, (ast.List, ast.Tuple)):
            return [self.value(e) for e in node.elts]
        if isinstance(node, ast.Dict):
            out = {}
            for k, v in zip(node.keys, node.values, strict=True):
                if k is None:
                    raise _Bad("a ** entry in a mapping is not plain data", node)
                key = self.value(k)
                if not isinstance(key, str):
                    raise _Bad("a mapping's keys must be text", k)
                out[key] = self.value(v)
            return out
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            ok, value = _literal(node)
            if ok:
                return value
        if isinstance(node, ast.Name):
            if node.id in self.consts:
                return self.value(self.consts[node.id])
            if node.id in self.decls:
                return _Ref(node.id, node)
        if isinstance(node, ast.Call):
            return self.call(node)
        raise _Bad(
            f"{ast.unparse(node)} is not a literal (nor a module-level constant): it cannot be read without running the file",
            node,
        )

    def call(self, node: ast.Call) -> Any:
        name = self.sdk(node.func)
        if name in ("Requires", "Prefers"):
            # The dataclasses' defaults, as ``to_dict()`` gives them.
            defaults: dict[str, Any] = (
                {"tool_calling": False, "vision": False, "context_tokens": 0, "output_tokens": 0}
                if name == "Requires"
                else {"model": "", "provider": "", "effort": ""}
            )
            return defaults | self.bind(node, tuple(defaults), name)
        if name == "PromptFile":
            args = self.bind(node, ("path",), name)
            return {"file": args.get("path", "")}
        if name == "Flow":
            if not node.args:
                raise _Bad("Flow(id, **options): the flow's id comes first", node)
            options = {}
            for kw in node.keywords:
                if kw.arg is None:
                    raise _Bad("Flow(**options) with ** cannot be read", node)
                options[kw.arg] = self.value(kw.value)
            return {"id": self.value(node.args[0]), "options": options}
        raise _Bad(f"the call {ast.unparse(node.func)}(...) cannot be read without running the file", node)

    def bind(self, node: ast.Call, params: tuple[str, ...], what: str) -> dict:
        """The arguments of a call, by parameter name."""
        if len(node.args) > len(params):
            raise _Bad(f"{what} takes at most {len(params)} positional arguments", node)
        out = {params[i]: self.value(a) for i, a in enumerate(node.args)}
        for kw in node.keywords:
            if kw.arg is None:
                raise _Bad(f"{what}(**...) cannot be read without running the file", node)
            if kw.arg not in params:
                raise _Bad(f"{what} has no argument {kw.arg!r}; its arguments are {', '.join(params)}", kw.value)
            if kw.arg in out:
                raise _Bad(f"{what} got {kw.arg!r} twice", kw.value)
            out[kw.arg] = self.value(kw.value)
        return out

    # Declarations ----------------------------------------------------------------------------

    def function(self, fn: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        for deco in fn.decorator_list:
            call = deco if isinstance(deco, ast.Call) else None
            name = self.sdk(call.func if call else deco)
            if name == "tool":
                args: dict = {}
                if call is not None:
                    if call.args:
                        raise _Bad("@tool(...) takes keyword arguments only", call)
                    options = ("name", "description", "read_only", "defer", "callers", "permission")
                    args = self._keywords(call, options, "tool")
                decl = {
                    "name": args.get("name") or fn.name,
                    "description": args.get("description") or ast.get_docstring(fn) or "",
                    "read_only": bool(args.get("read_only", False)),
                    "input_schema": schema_of_function(fn),
                }
                for option in ("defer", "callers", "permission"):
                    if args.get(option) is not None:
                        decl[option] = args[option]
                decl["function"] = fn.name
                decl["line"] = fn.lineno
                self.declare(fn.name, "tools", decl, fn)
            elif name == "hook":
                if call is None or not call.args:
                    raise _Bad("@hook(event, ...): the event comes first", deco)
                from clio_agent.sdk.plugin import HOOK_EVENTS

                event = self.value(call.args[0])
                if event not in HOOK_EVENTS:
                    raise _Bad(f"unknown hook event {event!r}; the events are {', '.join(HOOK_EVENTS)}", call.args[0])
                args = self._keywords(call, ("id", "before", "after", "tools", "fail_closed"), "hook")
                decl = {
                    "event": event,
                    "id": args.get("id") or fn.name.replace("_", "-"),
                    "before": list(args.get("before") or []),
                    "after": list(args.get("after") or []),
                    "tools": args.get("tools", ""),
                    "fail_closed": bool(args.get("fail_closed", False)),
                    "function": fn.name,
                    "line": fn.lineno,
                }
                self.declare(fn.name, "hooks", decl, fn)
            elif name == "host_call":
                if call is None or len(call.args) != 1:
                    raise _Bad("@host_call(name): the full reserved name, such as '__stream_write__'", deco)
                reserved = self.value(call.args[0])
                self.declare(fn.name, "host_calls", {"name": reserved, "function": fn.name, "line": fn.lineno}, fn)

    def _keywords(self, call: ast.Call, params: tuple[str, ...], what: str) -> dict:
        stripped = ast.Call(func=call.func, args=[], keywords=call.keywords)
        ast.copy_location(stripped, call)
        return self.bind(stripped, params, what)

    def declare(self, name: str, kind: str, decl: Any, node: ast.AST) -> None:
        if name not in self.decls:
            self.order.append(name)
        self.decls[name] = (kind, decl, node)

    def assignment(self, target: str, node: ast.AST, stmt: ast.stmt) -> None:
        if isinstance(node, ast.Call):
            name = self.sdk(node.func)
            if name == "native_tool":
                args = self.bind(node, ("name", "defer", "callers", "permission"), "native_tool")
                decl = {"name": args.get("name")} | {
                    k: args[k] for k in ("defer", "callers", "permission") if args.get(k) is not None
                }
                decl["line"] = stmt.lineno
                self.declare(target, "native_tools", decl, stmt)
                return
            if name == "Subagent":
                self.declare(target, "subagents", self.subagent(node, stmt), stmt)
                return
            if name in ("Plugin", "Pack"):
                self.declare(target, "plugin", self.instance(node, name, stmt), stmt)
                return
        ok, _ = _literal(node)
        if ok:
            self.consts[target] = node

    def subagent(self, node: ast.Call, stmt: ast.stmt) -> dict:
        args = self.bind(node, _SUBAGENT_PARAMS, "Subagent")
        if "id" not in args:
            raise _Bad("Subagent(id, ...): the subagent's id comes first", node)
        prompt = args.get("prompt", "")
        flow = args.get("flow", "react")
        out: dict[str, Any] = {
            "id": args["id"],
            "prompt": prompt if isinstance(prompt, dict) else {"text": prompt},
            "plugins": list(args.get("plugins") or []),
            "description": args.get("description", ""),
            "flow": {"id": flow, "options": {}} if isinstance(flow, str) else flow,
            "max_iters": args.get("max_iters", 0),
            "structured_outputs": dict(args.get("structured_outputs") or {}),
            "internal": bool(args.get("internal", False)),
        }
        if args.get("tools") is not None:
            out["tools"] = list(args["tools"])
        if args.get("prefers") is not None:
            out["prefers"] = args["prefers"]
        out["line"] = stmt.lineno
        return out

    def instance(self, node: ast.Call, kind: str, stmt: ast.stmt) -> dict:
        if kind == "Pack":
            args = self.bind(node, ("id", "members", "version", "description"), "Pack")
        else:
            args = self.bind(node, _PLUGIN_FIELDS, "Plugin")
        return {"kind": kind.lower(), "class": None, "line": stmt.lineno, "fields": args}

    def plugin_class(self, cls: ast.ClassDef) -> dict:
        kind = "plugin"
        fields: dict[str, Any] = {}
        for base in cls.bases:
            name = self.sdk(base)
            if isinstance(base, ast.Name) and base.id in self.plugin_classes:
                inherited = self.plugin_class(self.plugin_classes[base.id])
                kind = inherited["kind"]
                fields.update(inherited["fields"])
            elif name == "Pack":
                kind = "pack"
        doc = ast.get_docstring(cls)
        for stmt in cls.body:
            targets: list[ast.AST] = []
            if isinstance(stmt, ast.Assign):
                targets, value = stmt.targets, stmt.value
            elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
                targets, value = [stmt.target], stmt.value
            for target in targets:
                if isinstance(target, ast.Name) and (target.id in _PLUGIN_FIELDS or target.id == "members"):
                    fields[target.id] = self.value(value)
        if "description" not in fields and doc:
            fields["description"] = doc
        return {"kind": kind, "class": cls.name, "line": cls.lineno, "fields": fields}

    def is_plugin_class(self, cls: ast.ClassDef) -> bool:
        return any(self.sdk(b) in ("Plugin", "Pack") or (_last(b) in self.plugin_classes) for b in cls.bases)

    # The whole file --------------------------------------------------------------------------

    def read(self) -> dict | None:
        for stmt in self.tree.body:
            self.imports(stmt)
        classes: list[ast.ClassDef] = []
        for stmt in self.tree.body:
            try:
                if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    self.function(stmt)
                elif isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
                    self.assignment(stmt.targets[0].id, stmt.value, stmt)
                elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None and isinstance(stmt.target, ast.Name):
                    self.assignment(stmt.target.id, stmt.value, stmt)
                elif isinstance(stmt, ast.ClassDef) and self.is_plugin_class(stmt):
                    self.plugin_classes[stmt.name] = stmt
                    classes.append(stmt)
            except _Bad as bad:
                self.errors.append((str(bad), bad.node or stmt))
        bases = {_last(b) for c in classes for b in c.bases}
        found: list[dict] = []
        for cls in classes:
            if cls.name in bases:
                continue
            try:
                found.append(self.plugin_class(cls))
            except _Bad as bad:
                self.errors.append((str(bad), bad.node or cls))
        found += [decl for kind, decl, _node in self.decls.values() if kind == "plugin"]
        if not found:
            if not self.errors:
                self.errors.append(("plugin.py declares no plugin: a Plugin (or Pack) subclass or instance", None))
            return None
        if len(found) > 1:
            lines = ", ".join(str(f["line"]) for f in found)
            self.errors.append((f"plugin.py declares {len(found)} plugins (lines {lines}); declare one", None))
            return None
        try:
            return self.declaration(found[0])
        except _Bad as bad:
            self.errors.append((str(bad), bad.node))
            return None

    def resolve(self, items: Any, kind: str, field: str) -> list:
        out = []
        for item in items or []:
            if isinstance(item, _Ref):
                k, decl, _node = self.decls[item.name]
                if k != kind:
                    raise _Bad(f"{field}: {item.name} is no {kind[:-1].replace('_', ' ')}", item.node)
                out.append(item.name)
            else:
                raise _Bad(f"{field}: each entry names a {kind[:-1].replace('_', ' ')} declared in this file", None)
        return out

    def declaration(self, found: dict) -> dict:
        fields = found["fields"]
        if found["kind"] == "pack":
            return {
                "kind": "pack",
                "class": found["class"],
                "line": found["line"],
                "id": fields.get("id", ""),
                "version": fields.get("version", "0.0.0"),
                "description": fields.get("description", ""),
                "members": [str(m) for m in fields.get("members") or []],
            }
        out: dict[str, Any] = {
            "kind": "plugin",
            "class": found["class"],
            "line": found["line"],
            "id": fields.get("id", ""),
            "version": fields.get("version", "0.0.0"),
            "description": fields.get("description", ""),
            "requires": [str(r) for r in fields.get("requires") or []],
        }
        model = {}
        if fields.get("model") is not None:
            model["requires"] = fields["model"]
        if fields.get("prefers") is not None:
            model["prefers"] = fields["prefers"]
        if model:
            out["model"] = model
        if fields.get("defer") is not None:
            out["defer"] = fields["defer"]
        for key in ("tools", "native_tools", "hooks", "subagents"):
            names = self.resolve(fields.get(key), key, key)
            names += [n for n in self.order if self.decls[n][0] == key and n not in names]
            out[key] = [self.decls[n][1] for n in names]
        bindings = fields.get("bindings") or {}
        if not isinstance(bindings, dict):
            raise _Bad("bindings: a mapping of each binding's name to its host_call functions", None)
        out["bindings"] = []
        for name, calls in bindings.items():
            reserved = []
            for call in calls or []:
                if isinstance(call, _Ref):
                    kind, decl, _node = self.decls[call.name]
                    if kind != "host_calls":
                        raise _Bad(f"bindings.{name}: {call.name} is no host_call", call.node)
                    reserved.append(decl["name"])
                else:
                    reserved.append(call)
            out["bindings"].append({"name": name, "host_calls": reserved})
        return out


def read_plugin(path: str, root: str | None = None) -> dict:
    """Reads ``path`` (a plugin.py) without running it; returns the JSON document of the
    module's docstring. ``root`` makes the file names in errors relative to it."""
    shown = os.path.relpath(path, root) if root else path
    errors = []

    def error(message: str, node: ast.AST | None) -> None:
        line = getattr(node, "lineno", None) or 1
        column = (getattr(node, "col_offset", 0) or 0) + 1
        errors.append({"file": shown, "line": line, "column": column, "message": f"{shown}:{line}: {message}"})

    try:
        size = os.path.getsize(path)
        if size > MAX_BYTES:
            error(f"the file is {size} bytes; a plugin.py may have at most {MAX_BYTES}", None)
            return {"plugin": None, "host_calls": [], "errors": errors}
        with open(path, "rb") as f:
            text = f.read().decode("utf-8")
    except (OSError, UnicodeDecodeError) as e:
        error(f"cannot be read: {e}", None)
        return {"plugin": None, "host_calls": [], "errors": errors}
    try:
        tree = ast.parse(text, filename=shown)
    except SyntaxError as e:
        errors.append(
            {
                "file": shown,
                "line": e.lineno or 1,
                "column": e.offset or 1,
                "message": f"{shown}:{e.lineno or 1}: syntax error: {e.msg}",
            }
        )
        return {"plugin": None, "host_calls": [], "errors": errors}
    except (ValueError, RecursionError, MemoryError) as e:
        error(f"cannot be parsed: {e}", None)
        return {"plugin": None, "host_calls": [], "errors": errors}
    reader = _Reader(tree)
    plugin = reader.read()
    for message, node in reader.errors:
        error(message, node)
    host_calls = [decl for kind, decl, _node in reader.decls.values() if kind == "host_calls"]
    if plugin is not None:
        plugin = {"file": shown.replace(os.sep, "/"), **plugin}
    return {"plugin": plugin if not errors else None, "host_calls": host_calls, "errors": errors}


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    root = None
    if args[:1] == ["--root"]:
        if len(args) < 2:
            print("usage: python3 -m clio_agent._plugin_decl [--root DIR] FILE", file=sys.stderr)
            return 2
        root, args = args[1], args[2:]
    if len(args) != 1:
        print("usage: python3 -m clio_agent._plugin_decl [--root DIR] FILE", file=sys.stderr)
        return 2
    out = read_plugin(args[0], root)
    sys.stdout.write(json.dumps(out, ensure_ascii=False) + "\n")
    return 1 if out["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
