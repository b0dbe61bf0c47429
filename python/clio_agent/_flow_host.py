"""The child side of CLIO's Python flows: runs flow instances for the runtime.

Run as ``python3 -m clio_agent._flow_host`` (or as this file, which the ``clio`` binary
carries with the rest of the package). It speaks the line protocol of
``docs/python-flows.md`` on its stdin and stdout — one JSON object a line — and keeps
stderr for Python's own output: ``print`` in a flow goes to stderr, and the flow's code
cannot read the protocol's stdin. One process may run many flow instances at once (each
addressed by its ``instance`` id in every message), as asyncio tasks.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import inspect
import json
import os
import platform
import sys
import threading
import traceback
from collections.abc import Callable
from typing import Any

if __package__ in (None, ""):  # run as a file: import the package it sits in
    _here = os.path.dirname(os.path.abspath(__file__))
    if sys.path and os.path.abspath(sys.path[0]) == _here:
        sys.path.pop(0)
    sys.path.insert(0, os.path.dirname(_here))

from clio_agent.flows.outcomes import FlowOutcome, FlowProtocolError  # noqa: E402
from clio_agent.sdk.context import Ctx, dumps  # noqa: E402
from clio_agent.sdk.flow import CallResult, Flow  # noqa: E402

#: The protocol version this runner speaks.
PROTOCOL = 1

#: The longest line either side accepts (a large result travels in one line).
MAX_LINE = 1 << 30

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))

#: Reply types the runtime sends to a request.
_REPLIES = ("result", "run", "settled", "update")


class _Fatal(Exception):
    """A line from the runtime this process cannot act on: it reports it and exits."""


class _LoadError(Exception):
    """A flow file or class that could not be loaded; ``error`` is its error form."""

    def __init__(self, error: dict):
        super().__init__(error.get("message", ""))
        self.error = error


def _snippet(line: Any, limit: int = 200) -> str:
    text = line.decode("utf-8", "replace") if isinstance(line, bytes) else str(line)
    text = text.rstrip("\n")
    return text if len(text) <= limit else text[:limit] + "…"


def _user_traceback(tb: Any) -> Any:
    """Skips the runner's own frames at the top of a traceback."""
    while tb is not None and os.path.abspath(tb.tb_frame.f_code.co_filename).startswith(_PACKAGE_DIR + os.sep):
        if tb.tb_next is None:
            break
        tb = tb.tb_next
    return tb


def _where(exc: BaseException, root: str) -> tuple[str, int]:
    """The innermost place in the plugin's code (else anywhere) an exception passed."""
    file, line = "", 0
    inside = ""
    tb = exc.__traceback__
    while tb is not None:
        name = os.path.abspath(tb.tb_frame.f_code.co_filename)
        file, line = name, tb.tb_lineno
        if root and name.startswith(root + os.sep):
            inside = os.path.relpath(name, root).replace(os.sep, "/")
            in_line = tb.tb_lineno
        tb = tb.tb_next
    if inside:
        return inside, in_line
    if isinstance(exc, SyntaxError) and exc.filename:
        name = os.path.abspath(exc.filename)
        rel = os.path.relpath(name, root).replace(os.sep, "/") if root and name.startswith(root + os.sep) else name
        return rel, exc.lineno or 0
    return file, line


def python_error(exc: BaseException, *, flow: str, file: str, root: str, phase: str) -> dict:
    """Returns an exception as the runtime's error form. An outcome keeps its own form;
    any other exception is ``flow_exception``. Both carry ``python``: the exception's
    type, message, the file (relative to the plugin folder) and line where it was raised
    in the plugin's code, and the whole traceback."""
    where_file, where_line = _where(exc, root)
    tb = _user_traceback(exc.__traceback__)
    text = "".join(traceback.format_exception(type(exc), exc, tb))
    info = {
        "type": type(exc).__name__,
        "message": str(exc),
        "file": where_file,
        "line": where_line,
        "traceback": text,
    }
    if isinstance(exc, FlowOutcome):
        error = exc.to_dict()
    else:
        at = f" at {where_file}:{where_line}" if where_file else ""
        what = {"import": "loading", "options": "reading options of", "forward": "", "return": "returning from"}
        doing = what.get(phase, "")
        if phase == "call":  # a plugin's function: ``flow`` names it (``tool summarize``)
            head = f"{flow} raised {type(exc).__name__}"
        elif not doing:
            head = f"flow {flow} raised {type(exc).__name__}"
        else:
            head = f"{doing} flow {flow} raised {type(exc).__name__}"

        message = f"{head}{at}: {exc}" if str(exc) else f"{head}{at}"
        error = {
            "reason": "flow_exception",
            "handle": None,
            "message": message,
            "details": dict(info, flow=flow, phase=phase, flow_file=file),
        }
    error["python"] = info
    return error


def encode_output(value: Any) -> dict:
    """Returns what ``forward`` returned in the final message's form."""
    if isinstance(value, CallResult):
        return {"form": "result", "result": json.loads(dumps(value.to_dict()))}
    if value is None:
        return {"form": "text", "value": ""}
    if isinstance(value, str):
        return {"form": "text", "value": value}
    plain = json.loads(dumps(value))
    if isinstance(plain, dict):
        return {"form": "mapping", "value": plain}
    return {"form": "value", "value": plain}


class Instance:
    """One running flow: its requests in flight and its ``forward`` task. It is the
    channel its ``ctx`` sends through."""

    def __init__(self, host: Host, msg: dict):
        self.host = host
        self.id = msg["instance"]
        self.file = msg["file"]
        self.root = os.path.normpath(os.path.abspath(msg["root"]))
        self.class_name = msg.get("class") or ""
        self.flow_id = msg.get("flow") or self.class_name or self.file
        self.task_value = msg.get("task")
        self.options = msg.get("options") or {}
        self.run_id = msg.get("run_id")
        self.depth = msg.get("depth") or 0
        self.workspace = msg.get("workspace")
        self._prefix_instance = dumps(self.id)
        self._next = 0
        self._pending: dict[int, asyncio.Future] = {}
        self._streams: dict[int, asyncio.Queue] = {}
        self._dropped: set[int] = set()
        self._asking: set[int] = set()
        self.failure: FlowOutcome | None = None
        self.task: asyncio.Task | None = None
        # Past the recorded history: steps run at once and report with their request.
        self.frontier = msg.get("history") is False
        # A plugin's function (a tool, a hook, a host call) instead of a flow: its name in
        # the file, and how the task is passed (``kwargs``: a mapping as keyword
        # arguments; ``arg``: the task as one argument).
        self.function = msg.get("function") or ""
        self.convention = msg.get("convention") or "kwargs"

    def name(self) -> str:
        return f"{self.flow_id} ({self.file})"

    # The channel ctx uses --------------------------------------------------------------

    def _line(self, kind: str, rid: int, body: str) -> str:
        head = '{"type":"' + kind + '","instance":' + self._prefix_instance + ',"id":' + str(rid)
        return head + ("}" if body == "{}" else "," + body[1:])

    def _new(self) -> tuple[int, asyncio.Future]:
        self._next += 1
        fut = asyncio.get_running_loop().create_future()
        self._pending[self._next] = fut
        return self._next, fut

    def request_raw(self, kind: str, body: str) -> asyncio.Future:
        rid, fut = self._new()
        self.host.send_text(self._line(kind, rid, body))
        return fut

    def request(self, kind: str, body: dict) -> asyncio.Future:
        return self.request_raw(kind, dumps(body))

    def request_with_id_raw(self, kind: str, body: str) -> tuple[int, asyncio.Future]:
        """Sends a step that asks first: the only request a ``run`` may answer."""
        rid, fut = self._new()
        self._asking.add(rid)
        self.host.send_text(self._line(kind, rid, body))
        return rid, fut

    def reply_raw(self, kind: str, rid: int, body: str) -> asyncio.Future:
        fut = asyncio.get_running_loop().create_future()
        self._pending[rid] = fut
        self.host.send_text(self._line(kind, rid, body))
        return fut

    def reply(self, kind: str, rid: int, body: dict) -> asyncio.Future:
        return self.reply_raw(kind, rid, dumps(body))

    def stream_raw(self, kind: str, body: str) -> tuple[int, asyncio.Queue]:
        self._next += 1
        queue: asyncio.Queue = asyncio.Queue()
        self._streams[self._next] = queue
        self.host.send_text(self._line(kind, self._next, body))
        return self._next, queue

    def stream(self, kind: str, body: dict) -> asyncio.Queue:
        return self.stream_raw(kind, dumps(body))[1]

    def drop(self, rid: int) -> None:
        if self._streams.pop(rid, None) is not None:
            self._dropped.add(rid)
            self.host.send_text(self._line("drop", rid, "{}"))

    # Replies ---------------------------------------------------------------------------

    def deliver(self, msg: dict) -> None:
        rid = msg.get("id")
        kind = msg.get("type")
        problem = _reply_problem(msg)
        if problem:
            self.fail_protocol(f"a {kind} message for request {rid} {problem}: {_snippet(json.dumps(msg))}")
            return
        queue = self._streams.get(rid) if isinstance(rid, int) else None
        if queue is not None:
            if kind == "result":
                del self._streams[rid]
            queue.put_nowait(msg)
            return
        if kind == "run" and rid not in self._asking:
            self.fail_protocol(f"a run message answers request {rid!r}, which is no step asking whether to run")
            return
        self._asking.discard(rid)
        fut = self._pending.pop(rid, None) if isinstance(rid, int) and kind in ("result", "run") else None
        if fut is None:
            if isinstance(rid, int) and rid in self._dropped:
                return
            self.fail_protocol(f"a {kind} message answers request {rid!r}, which is not waiting for one")
            return
        if not fut.done():
            fut.set_result(msg)

    def fail_protocol(self, problem: str) -> None:
        """Ends this instance with a protocol error naming the flow."""
        if self.failure is None:
            self.failure = FlowProtocolError(
                f"protocol error in flow {self.name()}: {problem}",
                details={"flow": self.flow_id, "file": self.file, "problem": problem},
            )
        if self.task is not None:
            self.task.cancel()

    # Running ---------------------------------------------------------------------------

    def end(self, body: dict) -> None:
        self.host.send({"type": "end", "instance": self.id, **body})

    async def run(self) -> None:
        try:
            await self._run()
        finally:
            for fut in self._pending.values():
                fut.cancel()
            self._pending.clear()
            self.host.finished(self)

    async def _call_function(self) -> None:
        """Runs a plugin's function (a ``@tool``, a ``@hook``, a ``@host_call``) on the
        task and ends with what it returned; it gets no ``ctx``."""
        try:
            module = self.host.module(self)
        except _LoadError as e:
            self.end({"error": e.error})
            return
        fn: Any = module
        for part in self.function.split("."):
            fn = getattr(fn, part, None)
        fn = getattr(fn, "__wrapped__", fn) if not callable(fn) else fn
        if not callable(fn):
            err = FlowProtocolError(
                f"{self.file} has no function {self.function!r}",
                details={"flow": self.flow_id, "file": self.file, "problem": f"no function {self.function!r}"},
            )
            self.end({"error": err.to_dict()})
            return
        try:
            if self.convention == "kwargs" and isinstance(self.task_value, dict):
                value = fn(**self.task_value)
            elif self.convention == "hook":
                from clio_agent.sdk.plugin import HookEvent

                event = self.task_value if isinstance(self.task_value, dict) else {}
                value = fn(HookEvent.from_dict(event))
            elif self.convention == "none":
                value = fn()
            else:
                value = fn(self.task_value)
            if inspect.isawaitable(value):
                value = await value
        except asyncio.CancelledError:
            self.end({"cancelled": True})
            return
        except BaseException as e:  # noqa: BLE001 - every way a function ends is reported
            self.end({"error": python_error(e, flow=self.flow_id, file=self.file, root=self.root, phase="call")})
            return
        if hasattr(value, "to_dict") and callable(value.to_dict):
            value = value.to_dict()
        try:
            output = {"form": "value", "value": json.loads(dumps(value))}
        except (TypeError, ValueError) as e:
            err = TypeError(f"{self.function} returned a value that is not JSON: {e}")
            self.end({"error": python_error(err, flow=self.flow_id, file=self.file, root=self.root, phase="return")})
            return
        self.end({"ok": output})

    async def _run(self) -> None:
        if self.function:
            await self._call_function()
            return
        try:
            cls = self.host.load(self)
        except _LoadError as e:
            self.end({"error": e.error})
            return
        self.flow_id = cls.id or self.flow_id
        try:
            flow = cls(**self.options)
        except Exception as e:  # noqa: BLE001 - options refused, or the class's __init__ raised
            self.end({"error": python_error(e, flow=self.flow_id, file=self.file, root=self.root, phase="options")})
            return
        ctx = Ctx(
            self,
            task=self.task_value,
            run_id=self.run_id,
            depth=self.depth,
            workspace=self.workspace,
            root=self.root,
        )
        try:
            value = flow.forward(self.task_value, ctx)
            if inspect.isawaitable(value):
                value = await value
        except asyncio.CancelledError:
            if self.failure is not None:
                self.end({"error": self.failure.to_dict()})
            else:
                self.end({"cancelled": True})
            return
        except BaseException as e:  # noqa: BLE001 - every way forward ends is reported
            if self.failure is not None:
                self.end({"error": self.failure.to_dict()})
                return
            self.end({"error": python_error(e, flow=self.flow_id, file=self.file, root=self.root, phase="forward")})
            return
        try:
            output = encode_output(value)
        except (TypeError, ValueError) as e:
            err = TypeError(f"forward returned a value that is not JSON: {e}")
            err.__traceback__ = e.__traceback__
            self.end({"error": python_error(err, flow=self.flow_id, file=self.file, root=self.root, phase="return")})
            return
        self.end({"ok": output})


def _reply_problem(msg: dict) -> str:
    kind = msg.get("type")
    if not isinstance(msg.get("id"), int) or isinstance(msg.get("id"), bool):
        return "has no integer id"
    if kind in ("result", "settled"):
        if ("ok" in msg) == ("error" in msg):
            return "must hold exactly one of ok and error"
        if "error" in msg and not isinstance(msg["error"], dict):
            return "has an error that is not a mapping"
    if kind == "settled" and not isinstance(msg.get("index"), int):
        return "has no integer index"
    return ""


class Host:
    """The runner: reads the runtime's lines, starts and cancels instances, routes replies."""

    def __init__(self, write: Callable[[bytes], Any]):
        self._write = write
        self.instances: dict[Any, Instance] = {}
        self._ended: set = set()
        self._modules: dict[str, Any] = {}
        self._lines = 0
        self._idle = asyncio.Event()

    def send_text(self, text: str) -> None:
        self._write(text.encode("utf-8") + b"\n")

    def send(self, msg: dict) -> None:
        self.send_text(dumps(msg))

    def finished(self, instance: Instance) -> None:
        self.instances.pop(instance.id, None)
        self._ended.add(instance.id)
        if not self.instances:
            self._idle.set()

    def hosted(self) -> str:
        names = [i.name() for i in self.instances.values()]
        return ", ".join(names) if names else "none yet"

    # Loading flows ---------------------------------------------------------------------

    def load(self, inst: Instance) -> type:
        return _find_class(inst, self.module(inst))

    def module(self, inst: Instance) -> Any:
        """The module of ``inst``'s file, imported once per process."""
        path = inst.file if os.path.isabs(inst.file) else os.path.join(inst.root, inst.file)
        path = os.path.normpath(path)
        module = self._modules.get(path)
        if module is None:
            module = self._import(inst, path)
            self._modules[path] = module
        return module

    def _import(self, inst: Instance, path: str) -> Any:
        name = "_clio_flow_" + "".join(c if c.isalnum() else "_" for c in os.path.relpath(path, inst.root))
        try:
            spec = importlib.util.spec_from_file_location(name, path)
            if spec is None or spec.loader is None:
                raise ImportError(f"cannot load {path}")
            module = importlib.util.module_from_spec(spec)
            folder = os.path.dirname(path)
            if folder not in sys.path:
                sys.path.append(folder)
            sys.modules[name] = module
            spec.loader.exec_module(module)
            return module
        except BaseException as e:  # noqa: BLE001 - any failure of the import is the flow's error
            sys.modules.pop(name, None)
            if isinstance(e, FileNotFoundError) and getattr(e, "filename", None) == path:
                e = FileNotFoundError(f"cannot read flow file {inst.file}: no such file")
            raise _LoadError(python_error(e, flow=inst.flow_id, file=inst.file, root=inst.root, phase="import")) from e

    # Serving ---------------------------------------------------------------------------

    async def serve(self, reader: asyncio.StreamReader) -> int:
        """Serves until the runtime closes stdin, sends ``shutdown``, or sends a line this
        process cannot act on (exit status 3)."""
        self.send({"type": "ready", "protocol": PROTOCOL, "pid": os.getpid(), "python": platform.python_version()})
        status = 0
        try:
            while True:
                try:
                    line = await reader.readline()
                except (ValueError, asyncio.LimitOverrunError) as e:
                    raise _Fatal(f"line {self._lines + 1} from CLIO is longer than {MAX_LINE} bytes ({e})") from e
                if not line:
                    break
                self._lines += 1
                if not line.strip():
                    continue
                if not line.endswith(b"\n"):
                    raise _Fatal(f"line {self._lines} from CLIO ends without a newline: {_snippet(line)!r}")
                if self.dispatch(line) == "shutdown":
                    break
        except _Fatal as e:
            message = f"protocol error: {e}; flows in this process: {self.hosted()}"
            self.send({"type": "protocol_error", "message": message, "instances": list(self.instances)})
            print(f"clio_agent._flow_host: {message}", file=sys.stderr)
            status = 3
        for inst in list(self.instances.values()):
            if inst.task is not None:
                inst.task.cancel()
        if self.instances:
            await asyncio.wait([i.task for i in self.instances.values() if i.task is not None], timeout=5)
        return status

    def dispatch(self, line: bytes) -> str:
        try:
            msg = json.loads(line)
        except ValueError as e:
            raise _Fatal(f"line {self._lines} from CLIO is not JSON ({e}): {_snippet(line)!r}") from e
        if not isinstance(msg, dict) or not isinstance(msg.get("type"), str):
            raise _Fatal(f"line {self._lines} from CLIO is not a message (an object with a type): {_snippet(line)!r}")
        kind = msg["type"]
        if kind in _REPLIES:
            inst = self.instances.get(_key(msg.get("instance")))
            if inst is None:
                if _key(msg.get("instance")) in self._ended:
                    return kind  # a reply that crossed the instance's end
                raise _Fatal(
                    f"a {kind} message names flow instance {msg.get('instance')!r}, which this process never ran"
                )
            inst.deliver(msg)
            return kind
        if kind == "start":
            self.start(msg)
            return kind
        if kind == "frontier":
            inst = self.instances.get(_key(msg.get("instance")))
            if inst is not None:
                inst.frontier = True
            return kind
        if kind == "cancel":
            inst = self.instances.get(_key(msg.get("instance")))
            if inst is not None and inst.task is not None:
                inst.task.cancel()
            return kind
        if kind == "shutdown":
            return kind
        raise _Fatal(f"line {self._lines} from CLIO has unknown type {kind!r}: {_snippet(line)!r}")

    def start(self, msg: dict) -> None:
        key = _key(msg.get("instance"))
        if key is None:
            raise _Fatal(f"a start message has no instance id (text or integer): {_snippet(json.dumps(msg))!r}")
        if key in self.instances or key in self._ended:
            raise _Fatal(f"a start message reuses flow instance {key!r}")
        missing = [f for f in ("file", "root") if not isinstance(msg.get(f), str) or not msg.get(f)]
        problem = ""
        if missing:
            problem = "its start message lacks " + " and ".join(missing)
        elif msg.get("protocol") != PROTOCOL:
            problem = f"its start message speaks protocol {msg.get('protocol')!r}; this runner speaks {PROTOCOL}"
        elif not isinstance(msg.get("options", {}), dict):
            problem = "its start message's options are not a mapping"
        elif "task" not in msg:
            problem = "its start message has no task"
        if problem:
            name = f"{msg.get('flow') or msg.get('class') or '?'} ({msg.get('file') or '?'})"
            err = FlowProtocolError(
                f"protocol error in flow {name}: {problem}",
                details={"flow": msg.get("flow") or "", "file": msg.get("file") or "", "problem": problem},
            )
            self._ended.add(key)
            self.send({"type": "end", "instance": msg.get("instance"), "error": err.to_dict()})
            return
        inst = Instance(self, msg)
        self.instances[key] = inst
        self._idle.clear()
        inst.task = asyncio.get_running_loop().create_task(inst.run())


def _key(instance: Any) -> Any:
    if isinstance(instance, bool):
        return None
    if isinstance(instance, (str, int)) and instance != "":
        return instance
    return None


def _find_class(inst: Instance, module: Any) -> type:
    classes = [v for v in vars(module).values() if isinstance(v, type) and issubclass(v, Flow) and v is not Flow]
    cls = None
    if inst.class_name:
        cls = vars(module).get(inst.class_name)
        if not (isinstance(cls, type) and issubclass(cls, Flow)):
            cls = None
    else:
        own = [c for c in classes if c.id == inst.flow_id]
        cls = own[0] if own else None
    if cls is None:
        wanted = f"class {inst.class_name}" if inst.class_name else f"a Flow class with id {inst.flow_id!r}"
        found = ", ".join(f"{c.__name__} ({c.id!r})" for c in classes) or "none"
        message = f"flow {inst.flow_id}: {inst.file} has no {wanted} (its flows: {found})"
        raise _LoadError(
            {
                "reason": "flow_target_unknown",
                "handle": None,
                "message": message,
                "details": {"target": inst.flow_id, "file": inst.file},
            }
        )
    return cls


# The process ---------------------------------------------------------------------------


async def _open_streams(in_fd: int, out_fd: int) -> tuple[asyncio.StreamReader, Callable[[bytes], Any], Any]:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=MAX_LINE)
    rfile = os.fdopen(in_fd, "rb", buffering=0)
    try:
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), rfile)
    except (ValueError, OSError):
        # Not a pipe (a file, a terminal): read it on a thread.
        def pump() -> None:
            for chunk in iter(lambda: rfile.readline(), b""):
                loop.call_soon_threadsafe(reader.feed_data, chunk)
            loop.call_soon_threadsafe(reader.feed_eof)

        threading.Thread(target=pump, daemon=True).start()
    wfile = os.fdopen(out_fd, "wb", buffering=0)
    try:
        transport, _ = await loop.connect_write_pipe(asyncio.BaseProtocol, wfile)
    except (ValueError, OSError):
        transport = None

    def write(data: bytes) -> None:
        if transport is not None:
            transport.write(data)
            return
        view = memoryview(data)
        while view:
            view = view[os.write(out_fd, view) :]

    async def drain() -> None:
        for _ in range(500):
            if transport is None or transport.is_closing() or not transport.get_write_buffer_size():
                return
            await asyncio.sleep(0.01)

    return reader, write, drain


async def _amain(in_fd: int, out_fd: int) -> int:
    reader, write, drain = await _open_streams(in_fd, out_fd)
    host = Host(write)
    status = await host.serve(reader)
    await drain()
    return status


def main() -> int:
    """Keeps stdin and stdout for the protocol: the flow's code gets an empty stdin, and
    its stdout (``print``, a library's output) goes to stderr."""
    in_fd = os.dup(0)
    out_fd = os.dup(1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)
    sys.stdin = open(os.devnull, encoding="utf-8")  # noqa: SIM115 - lives as long as the process
    with contextlib.suppress(AttributeError):
        sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]
    return asyncio.run(_amain(in_fd, out_fd))


if __name__ == "__main__":
    sys.exit(main())
