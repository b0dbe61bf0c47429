"""Checking plugins from Python: :func:`check` loads a plugin folder or a marketplace the way
an install does (clio-plugins' check, through the native module) and returns a
:class:`CheckReport`; :mod:`clio_agent.plugins.pytest_plugin` gives a plugin's own test suite
the ``plugin_check`` fixture."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any

from clio_agent.sdk import _bridge

__all__ = ["CheckReport", "Problem", "check"]


@dataclass(frozen=True)
class Problem:
    """One problem of a check: its stable ``code``, ``severity`` (``error`` or ``warning``),
    ``file`` (relative to the checked folder), ``line`` (or ``None``), ``field`` and
    ``message``."""

    code: str
    severity: str
    file: str
    line: int | None
    field: str
    message: str

    def __str__(self) -> str:
        where = self.file + (f":{self.line}" if self.line is not None else "")
        what = f" {self.field}" if self.field else ""
        return f"{self.severity}[{self.code}] {where}{what}: {self.message}"


@dataclass(frozen=True)
class CheckReport:
    """The result of a check: ``ok`` when no problem is an error, every ``problem``, the
    Python ``flows`` the check read, and :meth:`render`, the report as ``clio plugin check``
    prints it."""

    ok: bool
    problems: list[Problem] = field(default_factory=list)
    flows: list[dict] = field(default_factory=list)
    text: str = ""

    @property
    def errors(self) -> list[Problem]:
        """The problems that are errors."""
        return [p for p in self.problems if p.severity == "error"]

    def render(self) -> str:
        """The report as text: one line per problem, then a summary line."""
        return self.text

    def __str__(self) -> str:
        return self.text


def check(path: str | os.PathLike[str]) -> CheckReport:
    """Checks the plugin folder (with ``ai.iowarp.clio/``) or marketplace (with
    ``.claude-plugin/marketplace.json``) at ``path`` as ``clio plugin check`` does."""
    raw: dict[str, Any] = json.loads(_bridge.call("plugin_check", os.fspath(path)))
    problems = [
        Problem(
            code=p["code"],
            severity=p["severity"],
            file=p["file"],
            line=p.get("line"),
            field=p.get("field", ""),
            message=p["message"],
        )
        for p in raw.get("problems", [])
    ]
    return CheckReport(ok=bool(raw["ok"]), problems=problems, flows=raw.get("flows", []), text=raw.get("text", ""))
