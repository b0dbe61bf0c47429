"""The embedded runtime: a Python program drives CLIO's Rust runtime in its own process.

::

    import asyncio
    from clio_agent.runtime import Clio

    async def main():
        clio = Clio(home="~/.clio", plugins=["plugins/writing"], models="models.toml")
        report = await clio.run("draft-and-review", "a poem", trust=True)
        while report.status == "awaiting_input":
            report = await clio.answer(report.run, "accept")
        print(report.answer)

    asyncio.run(main())

Every call runs the ``clio`` command's own code in this process (clio-cli's library, through
the native module), on a worker thread so that the event loop goes on: the same journal, the
same runs a ``clio`` command sees (``clio runs list``, ``clio runs resume N``), the same
sandbox, trust and gate. A Python flow's code runs in the plugin's sandboxed child, as under
``clio``. A run this process was driving when it died is taken up by ``resume``, here or by a
``clio`` command: what finished is replayed from the journal, not done again.
"""

from __future__ import annotations

import asyncio
import json
import os
from dataclasses import dataclass, field
from typing import Any

from clio_agent.sdk import _bridge

__all__ = ["Clio", "ClioError", "RunReport"]


class ClioError(RuntimeError):
    """A ``clio`` command failed: ``message``, its ``causes`` and ``hints``, and the exit code
    the command would have had (``exit_code``: 1 for a failure, 2 for a usage error)."""

    def __init__(
        self, message: str, *, causes: list[str] | None = None, hints: list[str] | None = None, exit_code: int = 1
    ):
        super().__init__(message)
        self.message = message
        self.causes = causes or []
        self.hints = hints or []
        self.exit_code = exit_code

    def __str__(self) -> str:
        lines = [self.message, *(f"  caused by: {c}" for c in self.causes), *(f"hint: {h}" for h in self.hints)]
        return "\n".join(lines)


@dataclass(frozen=True)
class RunReport:
    """How a drive of a run ended: its ``run`` id, ``status`` (``succeeded``,
    ``awaiting_input``, ``failed``, ``cancelled``, ``interrupted``), its ``answer`` and
    ``outputs`` when it succeeded, its open ``questions`` when it waits, its ``error`` (the
    runtime's error form) when it failed, and the whole JSON in ``raw``."""

    run: int
    status: str
    answer: Any = None
    outputs: dict = field(default_factory=dict)
    questions: list = field(default_factory=list)
    error: dict | None = None
    raw: dict = field(default_factory=dict)

    @classmethod
    def from_json(cls, data: dict) -> RunReport:
        return cls(
            run=int(data.get("run") or 0),
            status=str(data.get("status") or ""),
            answer=data.get("answer"),
            outputs=data.get("outputs") or {},
            questions=data.get("questions") or [],
            error=data.get("error"),
            raw=data,
        )


class Clio:
    """CLIO's runtime in this process, on the home ``home`` (``$CLIO_HOME``, else ``~/.clio``)
    or a shared ``journal`` (``postgres://…``), with the ``plugins`` folders a run may use,
    the ``models`` file, the ``workspace`` its tools read and write, and ``no_input`` (ask
    nobody: what would need an answer is refused)."""

    def __init__(
        self,
        home: str | os.PathLike[str] | None = None,
        *,
        journal: str | None = None,
        plugins: list[str | os.PathLike[str]] | tuple = (),
        models: str | os.PathLike[str] | None = None,
        workspace: str | os.PathLike[str] | None = None,
        no_input: bool = False,
    ):
        self.home = os.path.expanduser(os.fspath(home)) if home is not None else None
        self.journal = journal
        self.plugins = [os.path.abspath(os.fspath(p)) for p in plugins]
        self.models = os.path.abspath(os.fspath(models)) if models is not None else None
        self.workspace = os.path.abspath(os.fspath(workspace)) if workspace is not None else None
        self.no_input = no_input

    # The command line of each call --------------------------------------------------------

    def _where(self) -> list[str]:
        args: list[str] = []
        if self.home is not None:
            args += ["--home", self.home]
        if self.journal is not None:
            args += ["--journal", self.journal]
        return args

    def _launch(self) -> list[str]:
        args: list[str] = []
        for plugin in self.plugins:
            args += ["--plugin", plugin]
        if self.models is not None:
            args += ["--models", self.models]
        if self.workspace is not None:
            args += ["--workspace", self.workspace]
        if self.no_input:
            args.append("--no-input")
        return args

    def command(self, *args: str) -> Any:
        """Runs ``clio ARGS --json`` in this process (blocking) and returns its JSON answer;
        raises :class:`ClioError` when it fails."""
        code, out, err = _bridge.call("clio", [*args, "--json"])
        text = out.strip()
        answer: Any = None
        if text:
            try:
                answer = json.loads(text)
            except ValueError:
                answer = None
        if isinstance(answer, dict) and answer.get("ok") is False and isinstance(answer.get("error"), dict):
            e = answer["error"]
            raise ClioError(
                str(e.get("message") or "clio failed"),
                causes=list(e.get("causes") or []),
                hints=list(e.get("hints") or []),
                exit_code=int(e.get("exit_code") or code or 1),
            )
        if answer is None:
            if code != 0:
                raise ClioError(
                    (err.strip() or out.strip() or f"clio exited with {code}").splitlines()[-1], exit_code=code
                )
            return None
        return answer

    async def _report(self, *args: str) -> RunReport:
        answer = await asyncio.to_thread(self.command, *args)
        if not isinstance(answer, dict):
            raise ClioError(f"clio {args[0]} gave no report")
        return RunReport.from_json(answer)

    # Runs -----------------------------------------------------------------------------------

    async def run(
        self,
        target: str | os.PathLike[str],
        input: Any = None,
        *,
        options: dict | None = None,
        trust: bool = False,
        model: str | None = None,
    ) -> RunReport:
        """Runs ``target`` (a flow's id, or an agent file: TOML, or ``agents/x.py:Class``) on
        ``input`` (text, or any JSON value) until it ends or waits on a person. ``trust``
        vouches for the ``plugins`` folders (as ``clio run --trust``)."""
        args = ["run", os.fspath(target), *self._where(), *self._launch()]
        if input is not None:
            args += ["--input", input] if isinstance(input, str) else ["--input-json", json.dumps(input)]
        for key, value in (options or {}).items():
            args += ["--option", f"{key}={json.dumps(value)}"]
        if trust:
            args.append("--trust")
        if model is not None:
            args += ["--model", model]
        return await self._report(*args)

    async def resume(self, run: int) -> RunReport:
        """Drives run ``run`` again from the top of its flow: finished work is replayed from
        the journal, not done again (a run another process was driving when it died too)."""
        return await self._report("runs", "resume", str(run), *self._where())

    async def answer(self, run: int, answer: Any, *, question: int | None = None) -> RunReport:
        """Answers run ``run``'s open question (its number ``question`` when it has several)
        and continues the run here until it ends or waits again."""
        text = answer if isinstance(answer, str) else json.dumps(answer)
        args = ["runs", "answer", str(run)]
        if question is not None:
            args.append(str(question))
        args.append(text)
        return await self._report(*args, *self._where())

    async def cancel(self, run: int) -> Any:
        """Cancels run ``run``: its live work stops and each unfinished task is recorded
        cancelled."""
        return await asyncio.to_thread(self.command, "runs", "cancel", str(run), *self._where())

    def runs(self, *, status: str | None = None) -> list[dict]:
        """The runs of the journal, newest first (``clio runs list``)."""
        args = ["runs", "list", *self._where()]
        if status is not None:
            args += ["--status", status]
        answer = self.command(*args)
        if isinstance(answer, dict):
            answer = answer.get("runs", [])
        return list(answer or [])

    def show(self, run: int) -> dict:
        """Run ``run`` as ``clio runs show`` gives it: its record, tasks and entries."""
        return self.command("runs", "show", str(run), *self._where())
