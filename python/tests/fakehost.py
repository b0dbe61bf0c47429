"""A fake CLIO runtime for the runner's tests: it starts ``python -m clio_agent._flow_host``
as the binary will, speaks the line protocol over its pipes, and answers each command
from a scripted world (targets, answers, finishing orders) and a small journal keyed by
identity, as the Rust runtime does: recorded commands are answered from the journal
without running anything, and a new command while recorded ones of the run are not
reached yet fails with ``flow_replay_mismatch`` naming both.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import sys
from collections import Counter
from collections.abc import Callable
from typing import Any

PYTHON_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class TargetError(Exception):
    """Raised by a scripted target: the call fails with this error form."""

    def __init__(self, reason: str = "call_failed", message: str = "failed", **details: Any):
        super().__init__(message)
        self.error = {"reason": reason, "handle": None, "message": message, "details": {"message": message, **details}}


def digest(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def site_text(site: dict) -> str:
    return f"{site['file']}:{site['line']}:{site['column']}"


def identity(msg: dict, what: Any, key: str = "") -> str:
    if key:
        return f"key:{key}"
    return f"{site_text(msg['site'])}:{digest(what)}#{msg['occurrence']}"


class Runtime:
    """The world and journal shared by successive runs (a run, then its resume)."""

    def __init__(
        self,
        targets: dict[str, Callable[[Any], Any]] | None = None,
        answers: list | None = None,
        order: Callable[[int], list[int]] | None = None,
    ):
        self.targets = targets or {}
        self.answers = list(answers or [])
        self.order = order
        self.journal: dict[str, dict] = {}
        self.tally: Counter = Counter()
        self.log: list[dict] = []
        self.next_handle = 100
        self.stderr = b""
        self.status: int | None = None

    # Running a target ---------------------------------------------------------------

    def _run_target(self, call: dict) -> dict:
        target = call["target"]
        name = target["id"] if isinstance(target, dict) else target
        fn = self.targets.get(name)
        self.next_handle += 1
        handle = self.next_handle
        if fn is None:
            return {
                "error": {
                    "reason": "flow_target_unknown",
                    "handle": None,
                    "message": f"unknown call target {name!r}",
                    "details": {"target": name},
                }
            }
        self.tally[name] += 1
        try:
            out = (
                fn(call["input"])
                if not isinstance(target, dict)
                else fn({"input": call["input"], "options": target.get("options")})
            )
        except TargetError as e:
            err = dict(e.error, handle=handle)
            return {"error": err}
        if isinstance(out, dict):
            result = {
                "answer": "",
                "value": out,
                "outputs": {},
                "response_text": "",
                "handle": handle,
                "target": name,
                "kind": "tool",
                "model": "",
                "index": None,
                "workflow_state": None,
            }
            result.update({k: v for k, v in out.items() if k in result})
            return {"ok": result}
        text = str(out)
        return {
            "ok": {
                "answer": text,
                "value": text,
                "outputs": {},
                "response_text": text,
                "handle": handle,
                "target": name,
                "kind": "subagent",
                "model": "scripted/one",
                "index": None,
                "workflow_state": None,
            }
        }

    # The journal --------------------------------------------------------------------

    def _new(self, ident: str, what: str) -> dict | None:
        """Checks a command with no record: an error reply when recorded commands are
        still unreached (the history was made by other code)."""
        unreached = [
            i for i in self._recorded if i not in self._reached and not i.startswith("key:patch:") and "@" not in i
        ]
        if unreached:
            return {
                "reason": "flow_replay_mismatch",
                "handle": None,
                "message": f"nondeterminism at {ident}: recorded nothing, now {what}; the history still holds, not reached: {', '.join(unreached)}",
                "details": {
                    "identity": ident,
                    "journaled": "nothing",
                    "requested": what,
                    "unreached": [{"identity": u} for u in unreached],
                },
            }
        return None

    def _lookup(self, ident: str) -> dict | None:
        entry = self.journal.get(ident)
        if entry is not None:
            self._reached.add(ident)
        return entry

    def _call(self, call: dict) -> dict:
        what = {"target": call["target"], "input": call["input"]}
        ident = identity(call, what, call.get("key", ""))
        call["_identity"] = ident
        entry = self._lookup(ident)
        if entry is not None:
            return entry["outcome"]
        refused = self._new(ident, f"call of {call['target']}")
        if refused:
            return {"error": refused}
        if not call.get("wait", True):
            self.next_handle += 1
            outcome = {"ok": {"handle": self.next_handle, "target": call["target"]}}
            self._started[self.next_handle] = call
        else:
            outcome = self._run_target(call)
        self.journal[ident] = {"kind": "call", "outcome": outcome}
        self._reached.add(ident)
        return outcome

    # One run ------------------------------------------------------------------------

    async def run(
        self,
        root: str,
        file: str,
        task: Any = "a poem",
        *,
        options: dict | None = None,
        cls: str | None = None,
        flow: str | None = None,
        instance: Any = "r1/f0",
        workspace: str | None = None,
        run_id: int = 7,
        depth: int = 0,
        script: Callable[[dict, Any], Any] | None = None,
        start: dict | None = None,
    ) -> dict:
        """Runs one flow to its end; returns the ``end`` (or ``protocol_error``) message,
        with ``awaiting_input`` set when it stopped on an unanswered question."""
        self._recorded = set(self.journal)
        self._reached: set[str] = set()
        self._started: dict[int, dict] = {}
        self._steps: dict[int, str] = {}
        env = dict(os.environ, PYTHONPATH=PYTHON_DIR)
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "clio_agent._flow_host",
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=env,
            limit=1 << 24,
        )
        self.proc = proc
        stderr_task = asyncio.ensure_future(proc.stderr.read())
        try:
            ready = json.loads(await asyncio.wait_for(proc.stdout.readline(), 20))
            assert ready["type"] == "ready" and ready["protocol"] == 1, ready
            msg = start or {
                "type": "start",
                "instance": instance,
                "protocol": 1,
                "root": root,
                "file": file,
                "class": cls,
                "flow": flow,
                "task": task,
                "options": options or {},
                "run_id": run_id,
                "depth": depth,
                "workspace": workspace,
                "history": bool(self.journal),
            }
            self.send(msg)
            end = await asyncio.wait_for(self._loop(script), 30)
        finally:
            if proc.stdin and not proc.stdin.is_closing():
                proc.stdin.close()
            try:
                self.status = await asyncio.wait_for(proc.wait(), 10)
            except asyncio.TimeoutError:
                proc.kill()
                self.status = await proc.wait()
            self.stderr = await stderr_task
        return end

    def send(self, msg: Any) -> None:
        text = msg if isinstance(msg, (bytes, str)) else json.dumps(msg)
        data = text.encode() if isinstance(text, str) else text
        if not data.endswith(b"\n"):
            data += b"\n"
        self.proc.stdin.write(data)

    def reply(self, msg: dict, outcome: dict, kind: str = "result") -> None:
        self.send({"type": kind, "instance": msg["instance"], "id": msg["id"], **outcome})

    async def _loop(self, script: Callable[[dict, Any], Any] | None) -> dict:
        awaiting = False
        while True:
            line = await self.proc.stdout.readline()
            if not line:
                return {"type": "eof"}
            msg = json.loads(line)
            self.log.append(msg)
            kind = msg["type"]
            if script is not None:
                handled = script(msg, self)
                if handled:
                    if isinstance(handled, dict) and handled.get("type") in ("end", "protocol_error"):
                        return handled
                    continue
            if kind in ("end", "protocol_error"):
                if awaiting:
                    msg["awaiting_input"] = True
                return msg
            if kind == "call":
                self.reply(msg, self._call(msg))
            elif kind == "gather":
                self.reply(msg, self._gather(msg))
            elif kind == "as_completed":
                self._as_completed(msg)
            elif kind == "step":
                ident = identity(msg, {"command": "step", "name": msg["name"]}, msg.get("key", ""))
                entry = self._lookup(ident)
                if entry is not None:
                    self.reply(msg, entry["outcome"])
                    continue
                refused = self._new(ident, f"step {msg['name']}")
                if refused:
                    self.reply(msg, {"error": refused})
                    continue
                self._steps[msg["id"]] = ident
                if msg.get("ran"):
                    self._step_done(msg)
                    continue
                self.send({"type": "run", "instance": msg["instance"], "id": msg["id"]})
            elif kind == "step_done":
                self._step_done(msg)
            elif kind == "ask":
                what = {
                    "command": "ask",
                    "question": msg["question"],
                    "schema": msg["schema"],
                    "options": msg["options"],
                    "reason": msg["reason"],
                }
                ident = identity(msg, what, msg.get("key", ""))
                entry = self._lookup(ident)
                if entry is None:
                    refused = self._new(ident, "ask")
                    if refused:
                        self.reply(msg, {"error": refused})
                        continue
                    entry = self.journal[ident] = {"kind": "ask", "outcome": None}
                    self._reached.add(ident)
                if entry["outcome"] is None and self.answers:
                    answer = self.answers.pop(0)
                    if msg["schema"] == "options":
                        answer = answer.lower()
                    entry["outcome"] = {"ok": answer}
                if entry["outcome"] is None:
                    # Nothing else can move: the run waits for input and this process ends.
                    awaiting = True
                    self.send({"type": "cancel", "instance": msg["instance"]})
                    continue
                self.reply(msg, entry["outcome"])
            elif kind in ("event", "publish"):
                what = {"command": "publish"} if kind == "publish" else {"command": "event", "event": msg["event"]}
                ident = identity(msg, what)
                if self._lookup(ident) is None:
                    self.journal[ident] = {
                        "kind": kind,
                        "outcome": {"ok": None},
                        "value": msg.get("event", msg.get("view")),
                    }
                    self._reached.add(ident)
                self.reply(msg, {"ok": None})
            elif kind == "patched":
                ident = f"key:patch:{msg['patch']}"
                if ident in self.journal:
                    self.reply(msg, {"ok": True})
                    continue
                past = all(
                    i in self._reached for i in self._recorded if not i.startswith("key:patch:") and "@" not in i
                )
                if past:
                    self.journal[ident] = {"kind": "patch", "outcome": {"ok": True}}
                self.reply(msg, {"ok": past})
            elif kind == "permission_receipts":
                ident = identity(
                    msg,
                    {"command": "step", "name": f"permission_receipts:{str(msg['refresh']).lower()}"},
                    "" if msg["refresh"] else "permission_receipts",
                )
                entry = self._lookup(ident)
                if entry is None:
                    entry = self.journal[ident] = {
                        "kind": "receipts",
                        "outcome": {"ok": [{"tool": "shell", "decision": "allow"}]},
                    }
                self.reply(msg, entry["outcome"])
            elif kind == "tool_results":
                self.reply(msg, {"ok": [{"handle": msg["handle"] + 1, "tool": "find_peaks", "value": [1, 2]}]})
            elif kind == "wait":
                call = self._started.get(msg["handle"])
                if call is None:
                    self.reply(
                        msg,
                        {
                            "error": {
                                "reason": "call_failed",
                                "handle": msg["handle"],
                                "message": "no such task",
                                "details": {},
                            }
                        },
                    )
                else:
                    self.reply(msg, self._run_target(dict(call, wait=True)))
            elif kind == "cancel_task":
                self.tally["cancelled"] += 1
                self.reply(msg, {"ok": None})
            elif kind == "follow":
                self.reply(msg, {"ok": {"handle": msg["handle"], "status": "running"}}, "update")
                self.reply(msg, {"ok": {"handle": msg["handle"], "status": "succeeded"}}, "update")
                self.reply(msg, {"ok": None})
            elif kind == "drop":
                pass
            else:
                raise AssertionError(f"unexpected message {msg}")

    def _step_done(self, msg: dict) -> None:
        ident = self._steps.pop(msg["id"])
        outcome = {"error": msg["error"]} if "error" in msg else {"ok": msg["ok"]}
        if "error" in outcome:
            outcome["error"]["details"]["identity"] = ident
        self.journal[ident] = {"kind": "step", "outcome": outcome}
        self._reached.add(ident)
        self.tally["steps"] += 1
        self.reply(msg, outcome)

    def _gather(self, msg: dict) -> dict:
        calls = msg["calls"]
        n = len(calls)
        outcomes: list[Any] = [None] * n
        order = self.order(n) if self.order else list(range(n))
        sel = identity(msg, "select")
        if msg["return_when"] == "any":
            entry = self._lookup(sel + "@delivered")
            first = entry["index"] if entry else order[0]
            if entry is None:
                self.journal[sel + "@delivered"] = {"kind": "delivery", "index": first}
                self._reached.add(sel + "@delivered")
            for i in order:
                out = self._call(calls[i])
                if i == first:
                    outcomes[i] = _member(out, i)
            return {"ok": outcomes}
        for i in order:
            outcomes[i] = _member(self._call(calls[i]), i)
        return {"ok": outcomes}

    def _as_completed(self, msg: dict) -> None:
        calls = msg["calls"]
        n = len(calls)
        sel = identity(msg, "select")
        recorded = [
            self.journal[f"{sel}@delivered#{k}"]["index"] for k in range(n) if f"{sel}@delivered#{k}" in self.journal
        ]
        for k in range(len(recorded)):
            self._reached.add(f"{sel}@delivered#{k}")
        finishing = self.order(n) if self.order else list(range(n))
        order = recorded + [i for i in finishing if i not in recorded]
        for k, i in enumerate(order):
            out = _member(self._call(calls[i]), i)
            if k >= len(recorded):
                self.journal[f"{sel}@delivered#{k}"] = {"kind": "delivery", "index": i, "outcome": None}
                self._reached.add(f"{sel}@delivered#{k}")
            body = {"error": out} if "reason" in out else {"ok": out}
            self.send({"type": "settled", "instance": msg["instance"], "id": msg["id"], "index": i, **body})
        self.reply(msg, {"ok": None})


def _member(outcome: dict, index: int) -> dict:
    if "error" in outcome:
        return outcome["error"]
    return dict(outcome["ok"], index=index)


def run(coro: Any) -> Any:
    return asyncio.run(coro)
