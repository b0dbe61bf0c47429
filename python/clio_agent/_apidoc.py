"""Writes the Python reference of the guide (``python-reference.md``) from the package's own
docstrings and signatures: ``python3 -I python/clio_agent/_apidoc.py`` prints it as Markdown.
``cargo xtask docs`` runs it, so the page cannot go stale. Only the standard library is
used, and the native module is never imported (the names that need it import it lazily)."""

from __future__ import annotations

import ast
import importlib
import inspect
import os
import sys

if __package__ in (None, ""):  # run as a file: import the package it sits in
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# The public modules, in the order a reader meets them.
MODULES = [
    "clio_agent.sdk",
    "clio_agent.sdk.versions",
    "clio_agent.flows.outcomes",
    "clio_agent.plugins",
    "clio_agent.plugins.pytest_plugin",
    "clio_agent.runtime",
]


def _doc(obj: object) -> str:
    return inspect.cleandoc(obj.__doc__ or "").strip()


def _signature(obj: object) -> str:
    try:
        return str(inspect.signature(obj))  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return ""


def _public(module: object) -> list[str]:
    names = getattr(module, "__all__", None)
    if names is None:
        names = [n for n in vars(module) if not n.startswith("_")]
        names = [n for n in names if getattr(getattr(module, n), "__module__", "") == module.__name__]
    return sorted(set(names), key=str.lower)


def _members(cls: type) -> list[tuple[str, object]]:
    out = []
    for name, member in vars(cls).items():
        if name.startswith("_") and name not in ("__init__", "__call__"):
            continue
        if isinstance(member, (staticmethod, classmethod)):
            member = member.__func__
        if isinstance(member, property) or inspect.isfunction(member) and _doc(member):
            out.append((name, member))
    return out


def _from_source(name: str) -> list[str]:
    path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), *name.split(".")) + ".py"
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read())
    lines = [f"## `{name}`", ""]
    if ast.get_docstring(tree):
        lines += [inspect.cleandoc(ast.get_docstring(tree) or ""), ""]
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and not node.name.startswith("_"):
            lines += [f"### `{node.name}({ast.unparse(node.args)})`", ""]
            if ast.get_docstring(node):
                lines += [inspect.cleandoc(ast.get_docstring(node) or ""), ""]
    return lines


def render() -> str:
    lines = [
        "# Python reference",
        "",
        "Generated from the docstrings and signatures of the `clio_agent` package "
        "(`python/clio_agent/`) by `cargo xtask docs`; the guide to the package is "
        "[The Python package clio-agent](python-package.md).",
        "",
    ]
    for name in MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError:
            # A module that needs what this interpreter lacks (pytest): read from its source.
            lines += _from_source(name)
            continue
        lines += [f"## `{name}`", ""]
        if _doc(module):
            lines += [_doc(module), ""]
        for attr in _public(module):
            obj = getattr(module, attr, None)
            if obj is None or inspect.ismodule(obj):
                continue
            if inspect.isclass(obj):
                lines += [f"### class `{attr}{_signature(obj)}`", ""]
                if _doc(obj):
                    lines += [_doc(obj), ""]
                for member, value in _members(obj):
                    if isinstance(value, property):
                        lines.append(f"- `{member}` (property): {_doc(value).splitlines()[0] if _doc(value) else ''}")
                    else:
                        first = _doc(value).split("\n\n")[0].replace("\n", " ")
                        lines.append(f"- `{member}{_signature(value)}`: {first}")
                lines.append("")
            elif callable(obj):
                lines += [f"### `{attr}{_signature(obj)}`", ""]
                if _doc(obj):
                    lines += [_doc(obj), ""]
            else:
                lines += [f"### `{attr}`", "", f"`{obj!r}`" if len(repr(obj)) < 200 else "", ""]
    return "\n".join(lines).rstrip() + "\n"


if __name__ == "__main__":
    sys.stdout.write(render())
