"""Reads an agent defined as a Python class, from the syntax tree alone.

``python3 -m clio_agent._agent_decl FILE CLASS`` parses ``FILE`` with ``ast`` (never
imports or runs it) and prints the agent as clio-spec's ``AgentDef`` JSON — the most derived
class's layer with the layers it extends under ``layer`` — which is what
``CLASS.definition()`` gives for the same file imported (a test checks both agree)::

    {"agent": {"id", "version", …, "extends", "layer": [...]} | null,
     "errors": [{"file", "line", "column", "message"}]}

so that ``clio agent spec agents/reviewer.py:Reviewer`` freezes it with the same checksum as
``Reviewer.spec()`` and as the agent written in TOML. The class chain must be in the file:
``class X(Agent)``, or a subclass of such a class of the same file. Each class is a layer
(its ``id``, or its name in kebab case for a class in the middle that sets none); values are
literals, ``Requires(...)``, ``Prefers(...)``, ``Flow(id, **options)`` or a ``Flow`` class
of the same file. Exit status: 0, 1 with errors, 2 for a usage error.
"""

from __future__ import annotations

import ast
import contextlib
import json
import os
import re
import sys
from typing import Any

if __package__ in (None, ""):  # run as a file: import the package it sits in
    _here = os.path.dirname(os.path.abspath(__file__))
    if sys.path and os.path.abspath(sys.path[0]) == _here:
        sys.path.pop(0)
    sys.path.insert(0, os.path.dirname(_here))

from clio_agent._plugin_decl import MAX_BYTES, _Bad, _Reader  # noqa: E402

__all__ = ["read_agent", "main"]

_LAYER_FIELDS = ("version", "name", "role", "description", "flow", "plugins", "requires", "prefers")


def _kebab(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "-", name).lower()


class _AgentReader(_Reader):
    def classes(self) -> dict[str, ast.ClassDef]:
        return {s.name: s for s in self.tree.body if isinstance(s, ast.ClassDef)}

    def chain(self, name: str, node: ast.AST | None) -> list[ast.ClassDef]:
        """The Agent classes from the base down to ``name``."""
        classes = self.classes()
        if name not in classes:
            raise _Bad(f"no class {name} at the top level of the file (classes: {', '.join(classes) or 'none'})", node)
        chain = []
        current: ast.ClassDef | None = classes[name]
        seen = set()
        while current is not None:
            if current.name in seen:
                raise _Bad(f"class {current.name} extends itself", current)
            seen.add(current.name)
            chain.append(current)
            parent = None
            for base in current.bases:
                if self.sdk(base) == "Agent":
                    parent = None
                    break
                if isinstance(base, ast.Name) and base.id in classes:
                    parent = classes[base.id]
                    break
            else:
                raise _Bad(
                    f"class {current.name} is no Agent: its bases are neither Agent nor an Agent class of this file",
                    current,
                )
            current = parent
        return list(reversed(chain))

    def flow(self, node: ast.AST) -> Any:
        if isinstance(node, ast.Name) and node.id in self.classes():
            fields = self.own(self.classes()[node.id])
            if not isinstance(fields.get("id"), str):
                raise _Bad(f"flow class {node.id} has no literal id", node)
            return {"id": fields["id"], "options": {}}
        value = self.value(node)
        return {"id": value, "options": {}} if isinstance(value, str) else value

    def own(self, cls: ast.ClassDef) -> dict[str, Any]:
        fields: dict[str, Any] = {}
        for stmt in cls.body:
            if isinstance(stmt, ast.Assign):
                targets, value = stmt.targets, stmt.value
            elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
                targets, value = [stmt.target], stmt.value
            else:
                continue
            for target in targets:
                if isinstance(target, ast.Name) and target.id == "flow":
                    fields["flow"] = self.flow(value)
                elif isinstance(target, ast.Name) and (target.id in _LAYER_FIELDS or target.id == "id"):
                    fields[target.id] = self.value(value)
        return fields

    def definition(self, name: str) -> dict:
        for stmt in self.tree.body:
            self.imports(stmt)
            if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
                # Only what the agent's classes use must be readable.
                with contextlib.suppress(_Bad):
                    self.assignment(stmt.targets[0].id, stmt.value, stmt)
        chain = self.chain(name, None)
        layers = []
        for cls in chain:
            own = self.own(cls)
            if "id" in own:
                layer_id = own["id"]
            elif cls is chain[-1]:
                raise _Bad(
                    f"class {cls.name} sets no id of its own: each class of an agent's chain is a layer and needs its own id",
                    cls,
                )
            else:
                layer_id = _kebab(cls.name)
            layer: dict[str, Any] = {"id": layer_id}
            for field in _LAYER_FIELDS:
                if field in own:
                    layer[field] = own[field]
            doc = ast.get_docstring(cls)
            if "description" not in own and doc:
                layer["description"] = doc
            layers.append(layer)
        for parent, child in zip(layers, layers[1:], strict=False):
            child["extends"] = parent["id"]
        top = layers[-1]
        if len(layers) > 1:
            top["layer"] = list(reversed(layers[:-1]))
        return top


def read_agent(path: str, name: str, root: str | None = None) -> dict:
    """Reads class ``name`` of ``path`` without running the file."""
    shown = os.path.relpath(path, root) if root else path
    errors: list[dict] = []

    def error(message: str, node: ast.AST | None) -> None:
        line = getattr(node, "lineno", None) or 1
        column = (getattr(node, "col_offset", 0) or 0) + 1
        errors.append({"file": shown, "line": line, "column": column, "message": f"{shown}:{line}: {message}"})

    try:
        size = os.path.getsize(path)
        if size > MAX_BYTES:
            error(f"the file is {size} bytes; an agent file may have at most {MAX_BYTES}", None)
            return {"agent": None, "errors": errors}
        with open(path, "rb") as f:
            text = f.read().decode("utf-8")
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
        return {"agent": None, "errors": errors}
    except (OSError, UnicodeDecodeError, ValueError, RecursionError, MemoryError) as e:
        error(f"cannot be read: {e}", None)
        return {"agent": None, "errors": errors}
    try:
        agent = _AgentReader(tree).definition(name)
    except _Bad as bad:
        error(str(bad), bad.node)
        return {"agent": None, "errors": errors}
    return {"agent": agent, "errors": []}


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    root = None
    if args[:1] == ["--root"] and len(args) >= 2:
        root, args = args[1], args[2:]
    if len(args) != 2:
        print("usage: python3 -m clio_agent._agent_decl [--root DIR] FILE CLASS", file=sys.stderr)
        return 2
    out = read_agent(args[0], args[1], root)
    sys.stdout.write(json.dumps(out, ensure_ascii=False) + "\n")
    return 1 if out["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
