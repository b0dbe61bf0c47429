"""The flow context ``ctx``: every operation a Python flow asks of CLIO.

Each method builds a command (data) at once, where it is written, and sends it to the
CLIO runtime over the line protocol when it is awaited (``docs/python-flows.md``). A
command's identity is its site — the Python file (relative to the plugin folder), line
and column of the expression that built it — with how many times the same command was
built at that site before (its occurrence), counted when it is built; or its ``key``.
The runtime adds the digest of target and input and answers recorded commands from the
run's history, so a resumed flow re-executes ``forward`` from the top and nothing
recorded runs twice.
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import json
import os
import sys
import traceback
from typing import Any

from clio_agent.flows.outcomes import (
    CallRefused,
    FlowOutcome,
    GatherFailed,
    outcome_from_dict,
)
from clio_agent.sdk.flow import CallResult, Flow, settled_from_dict

__all__ = ["AsCompleted", "Call", "Ctx", "Gather", "TaskHandle", "Workspace"]

_SEP = (",", ":")

#: The step whose function the current task is running, if any: a ctx command made there
#: would not be made again on replay (the function does not run then), so it is refused.
_IN_STEP: contextvars.ContextVar[str] = contextvars.ContextVar("clio_in_step", default="")


def _not_in_step(what: str) -> None:
    step = _IN_STEP.get()
    if step:
        raise RuntimeError(
            f"ctx.{what} inside the function of ctx.step({step}): a step's function runs once and is "
            "not run again on replay, so ctx commands belong in forward"
        )


def _default(value: Any) -> Any:
    """How values that are not JSON travel: a result nested in data becomes its repr (the
    seed: the child sees ``CallResult(target=..., handle=...)``), a handle its number."""
    if isinstance(value, CallResult):
        return repr(value)
    if isinstance(value, TaskHandle):
        return value.handle
    if isinstance(value, FlowOutcome):
        return value.to_dict()
    if isinstance(value, (set, frozenset)):
        raise TypeError(f"a {type(value).__name__} is not JSON (use a list)")
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


# One encoder for every message (building one per call cost a few µs a command).
_ENCODER = json.JSONEncoder(default=_default, ensure_ascii=False, allow_nan=False, separators=_SEP)


def dumps(value: Any) -> str:
    """Returns ``value`` as compact JSON text, as the protocol carries it."""
    return _ENCODER.encode(value)


class Workspace:
    """The conversation's workspace folder: ``read``, ``write``, ``append`` and ``root``.

    Writes are side effects: run them through ``ctx.step``. With no workspace ``root`` is
    ``None`` and every use raises :class:`CallRefused` (``no_workspace``).
    """

    def __init__(self, root: str | None):
        self.root = root

    def _path(self, path: str) -> str:
        if self.root is None:
            raise CallRefused(
                "the conversation has no workspace folder",
                details={"refusal": "no_workspace", "message": "the conversation has no workspace folder"},
            )
        if not isinstance(path, str) or not path:
            raise ValueError("a workspace path must be non-empty text")
        root = os.path.realpath(self.root)
        full = os.path.realpath(os.path.join(root, path))
        if full != root and not full.startswith(root + os.sep):
            raise CallRefused(
                f"{path} is outside the workspace",
                details={"refusal": "outside_workspace", "message": f"{path} is outside the workspace"},
            )
        return full

    def read(self, path: str) -> str:
        """Returns the text of file ``path``."""
        with open(self._path(path), encoding="utf-8") as f:
            return f.read()

    def write(self, path: str, text: str) -> str:
        """Writes ``text`` to file ``path``, creating its folders, and returns ``path``."""
        full = self._path(path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "w", encoding="utf-8") as f:
            f.write(text)
        return path

    def append(self, path: str, value: Any) -> str:
        """Appends one line to file ``path``: ``value`` itself when it is text, else its
        JSON. Returns ``path``."""
        full = self._path(path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        line = value if isinstance(value, str) else dumps(value)
        with open(full, "a", encoding="utf-8") as f:
            f.write(line.rstrip("\n") + "\n")
        return path

    def __repr__(self) -> str:
        return f"Workspace({self.root!r})"


# Sites ---------------------------------------------------------------------------------

_POSITIONS: dict[Any, list] = {}


def _column(frame: Any) -> int:
    """The 1-based column where the expression running in ``frame`` starts (0 on Python
    3.10, which keeps no columns)."""
    code = frame.f_code
    positions = _POSITIONS.get(code)
    if positions is None:
        get = getattr(code, "co_positions", None)
        if get is None:
            return 0
        positions = list(get())
        if len(_POSITIONS) > 4096:
            _POSITIONS.clear()
        _POSITIONS[code] = positions
    index = frame.f_lasti // 2
    if 0 <= index < len(positions):
        col = positions[index][2]
        if col is not None:
            return col + 1
    return 0


class Ctx:
    """The flow's context: calls, steps, questions, events and views of one flow's run."""

    def __init__(
        self,
        channel: Any,
        *,
        task: Any = None,
        run_id: Any = None,
        depth: int = 0,
        workspace: str | None = None,
        root: str = "",
    ):
        self._channel = channel
        self._task = task
        self._run_id = run_id
        self._depth = depth
        self._workspace = Workspace(workspace)
        self._root = os.path.normpath(os.path.abspath(root)) if root else ""
        self._files: dict[str, str] = {}
        self._occurrences: dict[Any, int] = {}

    # Plain members -------------------------------------------------------------------

    @property
    def run_id(self) -> Any:
        """The run's id."""
        return self._run_id

    @property
    def depth(self) -> int:
        """How many flows this run is nested in (0 for the run's own flow)."""
        return self._depth

    @property
    def workspace(self) -> Workspace:
        """The conversation's workspace."""
        return self._workspace

    @property
    def task(self) -> Any:
        """The task this flow was given."""
        return self._task

    # Identity ------------------------------------------------------------------------

    def _file(self, filename: str) -> str:
        rel = self._files.get(filename)
        if rel is None:
            full = os.path.normpath(os.path.abspath(filename))
            if self._root and (full == self._root or full.startswith(self._root + os.sep)):
                rel = os.path.relpath(full, self._root).replace(os.sep, "/")
            else:
                rel = filename
            self._files[filename] = rel
        return rel

    def _site(self, depth: int) -> dict:
        """The site of the code ``depth`` frames above the ctx method that asks."""
        if _IN_STEP.get():
            _not_in_step(sys._getframe(1).f_code.co_name)
        frame = sys._getframe(depth + 1)
        return {"file": self._file(frame.f_code.co_filename), "line": frame.f_lineno, "column": _column(frame)}

    def _occurrence(self, site: dict, what: str) -> int:
        """Counts one more command built at ``site`` about ``what`` (JSON text of what the
        runtime digests) and returns how many were built before it."""
        k = (site["file"], site["line"], site["column"], what)
        n = self._occurrences.get(k, 0)
        self._occurrences[k] = n + 1
        return n

    # Calls ---------------------------------------------------------------------------

    def _target(self, target: Any) -> Any:
        if isinstance(target, type) and issubclass(target, Flow):
            if not target.id:
                raise TypeError(f"flow class {target.__name__} has no id")
            return {"id": target.id, "options": {}}
        if isinstance(target, Flow):
            return target.reference()
        if isinstance(target, str) and target:
            return target
        raise TypeError(f"a call target is a Flow class, a Flow(id, ...) selection or a name, not {target!r}")

    def _input(self, value: Any) -> Any:
        if value is None:
            return self._task
        if isinstance(value, CallResult):
            return value.public_text()
        return value

    def _evidence(self, evidence: Any) -> list:
        if evidence is None:
            return []
        if isinstance(evidence, (CallResult, TaskHandle, int)):
            evidence = [evidence]
        out = []
        for item in evidence:
            handle = item.handle if isinstance(item, (CallResult, TaskHandle)) else item
            if isinstance(handle, bool) or not isinstance(handle, int):
                raise TypeError(f"evidence is task handles (or results), not {item!r}")
            out.append(handle)
        return out

    def _build_call(
        self, site: dict, target: Any, input: Any, evidence: Any, key: str, model: str, label: str, wait: bool
    ) -> Call:  # noqa: A002
        for name, value in (("key", key), ("model", model), ("label", label)):
            if not isinstance(value, str):
                raise TypeError(f"{name} must be text")
        t = dumps(self._target(target))
        i = dumps(self._input(input))
        occurrence = self._occurrence(site, '{"target":' + t + ',"input":' + i + "}")
        body = (
            '{"site":'
            + dumps(site)
            + ',"occurrence":'
            + str(occurrence)
            + ',"target":'
            + t
            + ',"input":'
            + i
            + ',"evidence":'
            + dumps(self._evidence(evidence))
            + ',"key":'
            + dumps(key)
            + ',"model":'
            + dumps(model)
            + ',"label":'
            + dumps(label)
            + ',"wait":'
            + ("true" if wait else "false")
            + "}"
        )
        return Call(self, body, site)

    def call(
        self, target: Any, input: Any = None, *, evidence: Any = None, key: str = "", model: str = "", label: str = ""
    ) -> Call:  # noqa: A002
        """Returns a call of ``target`` on ``input`` (``None``: the flow's own task); it
        starts when awaited, or when passed to ``gather`` or ``as_completed``."""
        return self._build_call(self._site(1), target, input, evidence, key, model, label, True)

    def react(self, task: Any = None) -> Call:
        """This agent's own react loop run on ``task`` (a call of ``"self"``)."""
        return self._build_call(self._site(1), "self", task, None, "", "", "", True)

    def start(
        self, target: Any, input: Any = None, *, evidence: Any = None, key: str = "", model: str = "", label: str = ""
    ) -> _Started:  # noqa: A002
        """Starts ``target`` and returns (awaited) its task handle once accepted, without
        waiting for its result. Not for tools."""
        call = self._build_call(self._site(1), target, input, evidence, key, model, label, False)
        return _Started(call)

    def gather(
        self, calls: Any, *, limit: int | None = None, return_when: str = "all", return_exceptions: bool = False
    ) -> Gather:
        """Runs ``calls`` together, at most ``limit`` at a time; returns (awaited) their
        results in call order."""
        site = self._site(1)
        return Gather(
            self,
            site,
            self._occurrence(site, '"select"'),
            _calls(calls, "gather"),
            limit,
            return_when,
            return_exceptions,
        )

    def as_completed(self, calls: Any, *, limit: int | None = None) -> AsCompleted:
        """An async iterator of results (or errors), in finishing order, each with its
        index. The order is recorded, so a resumed run sees the same order."""
        site = self._site(1)
        return AsCompleted(self, site, self._occurrence(site, '"select"'), _calls(calls, "as_completed"), limit)

    # Other commands ------------------------------------------------------------------

    def step(self, fn: Any, *args: Any, **kwargs: Any) -> _Step:
        """Runs ``fn(*args, **kwargs)`` once and records its result; a restart returns the
        record without running it."""
        if not callable(fn):
            raise TypeError(f"ctx.step runs a function, not {fn!r}")
        name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or type(fn).__name__
        site = self._site(1)
        occurrence = self._occurrence(site, dumps({"command": "step", "name": name}))
        return _Step(self, site, occurrence, name, fn, args, kwargs)

    def ask(self, question: str, schema: Any = str, *, options: Any = None, reason: str = "", key: str = "") -> _Simple:
        """Asks the person; returns text, a bool with ``schema=bool``, or the chosen
        option's lowercase value with ``options``."""
        if not isinstance(question, str):
            raise TypeError("ctx.ask: the question must be text")
        if options is not None:
            if isinstance(options, str) or not all(isinstance(o, str) for o in options) or not options:
                raise TypeError("ctx.ask: options must be a non-empty list of text")
            if schema not in (str, None):
                raise TypeError("ctx.ask: options take no schema")
            kind, opts = "options", [o.lower() for o in options]
        elif schema is bool:
            kind, opts = "bool", []
        elif schema in (str, None):
            kind, opts = "text", []
        else:
            raise TypeError(f"ctx.ask: schema is str or bool, not {schema!r}")
        command = {"command": "ask", "question": question, "schema": kind, "options": opts, "reason": str(reason)}
        site = self._site(1)
        occurrence = self._occurrence(site, dumps(command))
        body = {
            "site": site,
            "occurrence": occurrence,
            "question": question,
            "schema": kind,
            "options": opts,
            "reason": str(reason),
            "key": str(key),
        }

        def convert(value: Any) -> Any:
            if kind == "bool":
                return value if isinstance(value, bool) else str(value).strip().lower() in ("yes", "y", "true")
            if kind == "options":
                return str(value).lower()
            return "" if value is None else str(value)

        return _Simple(self, "ask", body, convert)

    def record_event(self, event: Any) -> _Simple:
        """Records ``event``, a mapping, in the run."""
        if not isinstance(event, dict):
            raise TypeError("ctx.record_event: the event must be a mapping")
        text = dumps({"command": "event", "event": event})
        site = self._site(1)
        occurrence = self._occurrence(site, text)
        return _Simple(
            self, "event", {"site": site, "occurrence": occurrence, "event": json.loads(text)["event"]}, lambda v: None
        )

    def publish(self, view: Any) -> _Simple:
        """Replaces the run's live view. (Its identity digests nothing of the view.)"""
        site = self._site(1)
        occurrence = self._occurrence(site, '{"command":"publish"}')
        dumps(view)
        return _Simple(self, "publish", {"site": site, "occurrence": occurrence, "view": view}, lambda v: None)

    def permission_receipts(self, *, refresh: bool = False) -> _Simple:
        """A recorded snapshot of the run's tool-permission history; ``refresh=True``
        takes a new one."""
        site = self._site(1)
        name = f"permission_receipts:{'true' if refresh else 'false'}"
        occurrence = self._occurrence(site, dumps({"command": "step", "name": name}))
        return _Simple(
            self, "permission_receipts", {"site": site, "occurrence": occurrence, "refresh": bool(refresh)}, _listed
        )

    def tool_results(self, handle: Any) -> _Simple:
        """The finished tool results of a child the flow called."""
        _not_in_step("tool_results")
        return _Simple(self, "tool_results", {"handle": self._evidence(handle)[0]}, _listed)

    def patched(self, patch: str) -> _Simple:
        """Whether this run takes the code path added by patch ``patch``: ``True`` for a run
        that reaches this point past its recorded history, ``False`` for one recorded by
        the code from before the patch. Recorded, so it stays the same for the run."""
        _not_in_step("patched")
        if not isinstance(patch, str) or not patch:
            raise TypeError("ctx.patched: the patch id must be non-empty text")
        return _Simple(self, "patched", {"patch": patch}, bool)


def _listed(value: Any) -> list:
    return list(value) if isinstance(value, list) else []


def _calls(calls: Any, what: str) -> list:
    out = list(calls)
    for i, call in enumerate(out):
        if not isinstance(call, Call):
            raise TypeError(f"ctx.{what} takes calls made with ctx.call; item {i} is {call!r}")
        if call._sent:
            raise RuntimeError(f"ctx.{what}: call {i} was already started")
    if len({id(c) for c in out}) != len(out):
        raise RuntimeError(f"ctx.{what}: the same call is listed twice")
    return out


def _result(reply: dict, index: int | None = None) -> Any:
    """Returns a reply's value, or raises its error."""
    if "error" in reply:
        raise outcome_from_dict(reply["error"])
    return reply.get("ok")


class Call:
    """One call; await it, or pass it to ``ctx.gather`` or ``ctx.as_completed``."""

    __slots__ = ("_ctx", "_body", "site", "_sent", "_future")

    def __init__(self, ctx: Ctx, body: str, site: dict):
        self._ctx = ctx
        self._body = body
        self.site = site
        self._sent = False
        self._future: asyncio.Future | None = None

    def _mark(self) -> str:
        if self._sent:
            raise RuntimeError("this call was already started")
        self._sent = True
        return self._body

    def __await__(self):
        return self._run().__await__()

    async def _run(self) -> CallResult:
        if self._future is None:
            self._future = self._ctx._channel.request_raw("call", self._mark())
        reply = await asyncio.shield(self._future)
        return CallResult.from_dict(_result(reply) or {})

    def __repr__(self) -> str:
        return f"<ctx.call at {self.site['file']}:{self.site['line']}>"


class _Started:
    """``ctx.start``'s awaitable: the handle once the child is accepted."""

    def __init__(self, call: Call):
        self._call = call

    def __await__(self):
        return self._run().__await__()

    async def _run(self) -> TaskHandle:
        reply = await self._call._ctx._channel.request_raw("call", self._call._mark())
        value = _result(reply)
        handle = value.get("handle") if isinstance(value, dict) else value
        target = value.get("target", "") if isinstance(value, dict) else ""
        return TaskHandle(self._call._ctx, handle, target)


class TaskHandle:
    """A started child's task handle: await it for its result, ``follow()`` it, or
    ``cancel()`` it. It is also its handle's number (``int(handle)``), for ``evidence``."""

    def __init__(self, ctx: Ctx, handle: int, target: str = ""):
        self._ctx = ctx
        self.handle = handle
        self.target = target

    def __await__(self):
        return self._wait().__await__()

    async def _wait(self) -> CallResult:
        reply = await self._ctx._channel.request("wait", {"handle": self.handle})
        return CallResult.from_dict(_result(reply) or {})

    async def cancel(self) -> None:
        """Cancels the child and everything it started."""
        _result(await self._ctx._channel.request("cancel_task", {"handle": self.handle}))

    async def follow(self):
        """Yields the child's state as it changes (mappings with ``status``), until it
        ends. What it shows is not recorded: do not decide on it."""
        queue = self._ctx._channel.stream("follow", {"handle": self.handle})
        while True:
            reply = await queue.get()
            if reply.get("type") == "update":
                yield reply.get("ok")
                continue
            _result(reply)
            return

    def __int__(self) -> int:
        return int(self.handle)

    __index__ = __int__

    def __eq__(self, other: object) -> bool:
        if isinstance(other, TaskHandle):
            return self.handle == other.handle
        return self.handle == other

    def __hash__(self) -> int:
        return hash(self.handle)

    def __repr__(self) -> str:
        return f"TaskHandle({self.handle!r}, target={self.target!r})"


def _check_limit(limit: Any) -> int | None:
    if limit is None:
        return None
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise ValueError(f"limit must be None or a positive integer, not {limit!r}")
    return limit


class Gather:
    """``ctx.gather``'s awaitable."""

    def __init__(
        self, ctx: Ctx, site: dict, occurrence: int, calls: list, limit: Any, return_when: str, return_exceptions: bool
    ):
        if return_when not in ("all", "any"):
            raise ValueError(f'return_when is "all" or "any", not {return_when!r}')
        self._ctx = ctx
        self.site = site
        self._occurrence = occurrence
        self._calls = calls
        self._limit = _check_limit(limit)
        self._return_when = return_when
        self._return_exceptions = bool(return_exceptions)

    def __await__(self):
        return self._run().__await__()

    async def _run(self) -> list:
        if not self._calls:
            return []
        bodies = ",".join(c._mark() for c in self._calls)
        head = dumps(
            {
                "site": self.site,
                "occurrence": self._occurrence,
                "limit": self._limit,
                "return_when": self._return_when,
                "return_exceptions": self._return_exceptions,
            }
        )
        reply = await self._ctx._channel.request_raw("gather", head[:-1] + ',"calls":[' + bodies + "]}")
        if "error" in reply:
            err = outcome_from_dict(reply["error"])
            if isinstance(err, GatherFailed) and self._return_exceptions:
                return err.results
            raise err
        items = reply.get("ok") or []
        results = [settled_from_dict(item, i) for i, item in enumerate(items)]
        if not self._return_exceptions and any(isinstance(r, FlowOutcome) for r in results):
            raise GatherFailed(results)
        return results


class AsCompleted:
    """``ctx.as_completed``'s async iterator."""

    def __init__(self, ctx: Ctx, site: dict, occurrence: int, calls: list, limit: Any):
        self._ctx = ctx
        self.site = site
        self._occurrence = occurrence
        self._calls = calls
        self._limit = _check_limit(limit)
        self._queue: asyncio.Queue | None = None
        self._id: int | None = None
        self._done = False

    def __aiter__(self):
        return self

    async def __anext__(self) -> Any:
        if self._done:
            raise StopAsyncIteration
        if self._queue is None:
            if not self._calls:
                self._done = True
                raise StopAsyncIteration
            bodies = ",".join(c._mark() for c in self._calls)
            head = dumps({"site": self.site, "occurrence": self._occurrence, "limit": self._limit})
            self._id, self._queue = self._ctx._channel.stream_raw(
                "as_completed", head[:-1] + ',"calls":[' + bodies + "]}"
            )
        reply = await self._queue.get()
        if reply.get("type") == "settled":
            index = reply.get("index")
            if "error" in reply:
                err = outcome_from_dict(reply["error"])
                err.details["index"] = index
                return err
            return CallResult.from_dict(reply.get("ok") or {}, index)
        self._done = True
        _result(reply)
        raise StopAsyncIteration

    async def aclose(self) -> None:
        """Stops listening; the calls not yet delivered keep running."""
        if not self._done and self._id is not None:
            self._done = True
            self._ctx._channel.drop(self._id)


class _Simple:
    """The awaitable of a command answered with one value (ask, event, publish, …)."""

    __slots__ = ("_ctx", "_kind", "_body", "_convert")

    def __init__(self, ctx: Ctx, kind: str, body: dict, convert: Any):
        self._ctx = ctx
        self._kind = kind
        self._body = body
        self._convert = convert

    def __await__(self):
        return self._run().__await__()

    async def _run(self) -> Any:
        reply = await self._ctx._channel.request(self._kind, self._body)
        return self._convert(_result(reply))


class _Step:
    """``ctx.step``'s awaitable: asks whether the step is recorded, runs the function
    only when the runtime says so, reports its value or exception, and returns what the
    runtime recorded."""

    __slots__ = ("_ctx", "_site", "_occurrence", "_name", "_fn", "_args", "_kwargs")

    def __init__(self, ctx: Ctx, site: dict, occurrence: int, name: str, fn: Any, args: tuple, kwargs: dict):
        self._ctx = ctx
        self._site = site
        self._occurrence = occurrence
        self._name = name
        self._fn = fn
        self._args = args
        self._kwargs = kwargs

    def __await__(self):
        return self._run().__await__()

    async def _run(self) -> Any:
        channel = self._ctx._channel
        head = dumps({"site": self._site, "occurrence": self._occurrence, "name": self._name, "key": ""})
        if channel.frontier:
            # Past the recorded history (the runtime said so): nothing of this step can be
            # recorded, so it runs at once and is reported with the request itself.
            outcome, cause = await self._body()
            final = await channel.request_raw("step", head[:-1] + ',"ran":true,' + outcome[1:])
        else:
            rid, first = channel.request_with_id_raw("step", head)
            reply = await first
            if reply.get("type") != "run":
                return _result(reply)
            outcome, cause = await self._body()
            final = await channel.reply_raw("step_done", rid, outcome)
        if "error" in final:
            raise outcome_from_dict(final["error"]) from cause
        return final.get("ok")

    async def _body(self) -> tuple[str, BaseException | None]:
        """Runs the function; returns ``{"ok": value}`` or ``{"error": …}`` as JSON text,
        with the exception it raised."""
        token = _IN_STEP.set(self._name)
        try:
            value = self._fn(*self._args, **self._kwargs)
            if inspect.isawaitable(value):
                value = await value
            return '{"ok":' + dumps(value) + "}", None
        except (KeyboardInterrupt, SystemExit, asyncio.CancelledError):
            raise
        except FlowOutcome as e:
            return dumps({"error": e.to_dict()}), e
        except BaseException as e:  # noqa: BLE001 - every failure of a step is recorded
            message = f"step {self._name} raised {type(e).__name__}: {e}"
            if isinstance(e, (TypeError, ValueError)) and "JSON" in str(e):
                message = f"step {self._name} returned a value that is not JSON: {e}"
            error = {
                "reason": "step_failed",
                "handle": None,
                "message": message,
                "details": {
                    "identity": "",
                    "message": message,
                    "type": type(e).__name__,
                    "traceback": "".join(traceback.format_exception(type(e), e, e.__traceback__)),
                },
            }
            return dumps({"error": error}), e
        finally:
            _IN_STEP.reset(token)
