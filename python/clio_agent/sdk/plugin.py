"""Plugins declared in Python: ``Plugin``, ``Pack``, ``PluginRef``, ``@tool``,
``native_tool``, ``@host_call``, ``@hook``, ``HookEvent``, ``HOOK_EVENTS``, ``Subagent`` and
``PromptFile``, as the seeds' SDK reference spells them.

A declaration is data: ``describe()`` hands it to clio-plugins (the crate that reads
``plugin.toml``), which checks it — ids, versions, references, option values, hook events,
ordering cycles — and describes it, so a Python plugin and a TOML one describe alike.
Declaring needs no native module (the decorators only record); ``describe()``,
``PluginRef.parse`` and ``accepts`` do.
"""

from __future__ import annotations

import ast
import inspect
import json
import sys
import textwrap
from collections.abc import Callable
from typing import Any, ClassVar

from clio_agent.sdk import _bridge
from clio_agent.sdk.agent import Prefers, Requires

__all__ = [
    "HOOK_EVENTS",
    "HookEvent",
    "HostCall",
    "NativeTool",
    "Pack",
    "Plugin",
    "PluginDeclarationError",
    "PluginRef",
    "PromptFile",
    "Subagent",
    "Tool",
    "Hook",
    "host_call",
    "hook",
    "native_tool",
    "tool",
]

#: Each SDK event key and CLIO's event name (SPEC §11). The table is clio-plugins'
#: ``HOOK_EVENTS``; a test checks this copy against it, key by key and in order.
HOOK_EVENTS: dict[str, str] = {
    "tool_call": "PreToolUse",
    "tool_result": "PostToolUse",
    "tool_batch": "PostToolBatch",
    "prompt_submit": "UserPromptSubmit",
    "stop": "Stop",
    "session_start": "SessionStart",
    "session_end": "SessionEnd",
    "subagent_start": "SubagentStart",
    "subagent_stop": "SubagentStop",
    "pre_compact": "PreCompact",
    "model_request": "BeforeModel",
    "model_response": "AfterModel",
    "event": "SemanticEvent",
}


class PluginDeclarationError(ValueError):
    """A plugin declaration clio-plugins refuses; ``problems`` lists each as
    ``{"code", "field", "message", …}``."""

    def __init__(self, message: str, *, problems: list | None = None):
        super().__init__(message)
        self.message = message
        self.problems = list(problems or [])


# References ------------------------------------------------------------------------------


class PluginRef:
    """A plugin reference, ``[marketplace/]id[@range]``, parsed by clio-spec."""

    __slots__ = ("id", "range", "marketplace", "text")

    def __init__(self, id: str, range: str | None = None, marketplace: str | None = None):  # noqa: A002
        self.id = id
        self.range = range
        self.marketplace = marketplace
        text = f"{marketplace}/{id}" if marketplace else id
        self.text = f"{text}@{range}" if range is not None else text

    @classmethod
    def parse(cls, text: str) -> PluginRef:
        """``PluginRef.parse("clio/pdf@^1.2")``; raises ``VersionRangeError``."""
        if not isinstance(text, str):
            raise TypeError(f"a plugin reference is text, not {type(text).__name__}")
        parsed = json.loads(_bridge.call("plugin_ref", text))
        ref = cls(parsed["id"], parsed["range"], parsed["marketplace"])
        ref.text = text
        return ref

    def accepts(self, version: str) -> bool:
        """Whether ``version`` satisfies the reference's range (any release without one)."""
        return bool(_bridge.call("plugin_ref_accepts", self.text, version))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, PluginRef) and (other.id, other.range, other.marketplace) == (
            self.id,
            self.range,
            self.marketplace,
        )

    def __hash__(self) -> int:
        return hash((self.id, self.range, self.marketplace))

    def __str__(self) -> str:
        return self.text

    def __repr__(self) -> str:
        def q(v: str | None) -> str:
            return "None" if v is None else json.dumps(v)

        return f"PluginRef(id={q(self.id)}, range={q(self.range)}, marketplace={q(self.marketplace)})"


# Tools -----------------------------------------------------------------------------------


def input_schema(function: Callable) -> dict:
    """The JSON schema of a tool function's arguments, from its annotations: each parameter
    a property, those without a default required. Read from the function's syntax tree by
    the same code that reads an unimported ``plugin.py`` (``clio_agent._plugin_decl``), so
    an imported tool and a read one have one schema; a function without source (built at
    run time) gets its parameters without types."""
    from clio_agent._plugin_decl import schema_of_function

    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(function)))
    except (OSError, TypeError, SyntaxError):
        tree = None
    for node in ast.walk(tree) if tree is not None else ():
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == function.__name__:
            return schema_of_function(node)
    properties: dict[str, Any] = {}
    required = []
    for name, parameter in inspect.signature(function).parameters.items():
        if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
            continue
        properties[name] = {}
        if parameter.default is parameter.empty:
            required.append(name)
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    return schema


def _options(defer: Any, callers: Any, permission: Any) -> dict:
    return {"defer": defer, "callers": callers, "permission": permission}


class Tool:
    """A Python function declared as a tool; calling it calls the function."""

    def __init__(
        self,
        function: Callable,
        *,
        name: str = "",
        description: str = "",
        read_only: bool = False,
        defer: bool | None = None,
        callers: str | None = None,
        permission: str | None = None,
    ):
        self.function = function
        self.name = name or function.__name__
        self.description = description or inspect.cleandoc(function.__doc__ or "")
        self.read_only = read_only
        self.defer = defer
        self.callers = callers
        self.permission = permission
        self.input_schema = input_schema(function)
        self.__wrapped__ = function
        self.__doc__ = function.__doc__

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.function(*args, **kwargs)

    def declaration(self) -> dict:
        return {
            "name": self.name,
            "description": self.description,
            "read_only": self.read_only,
            "input_schema": self.input_schema,
            **{k: v for k, v in _options(self.defer, self.callers, self.permission).items() if v is not None},
            "function": self.function.__name__,
        }

    def __repr__(self) -> str:
        return f"<tool {self.name}>"


def tool(
    function: Callable | None = None,
    *,
    name: str = "",
    description: str = "",
    read_only: bool = False,
    defer: bool | None = None,
    callers: str | None = None,
    permission: str | None = None,
) -> Any:
    """``@tool`` or ``@tool(name="", description="", read_only=False, defer=None,
    callers=None, permission=None)``: the function becomes a tool. ``name`` and
    ``description`` default to the function's name and docstring; the schema comes from its
    annotations. An unknown ``callers``/``permission`` value fails when the plugin loads."""

    def wrap(fn: Callable) -> Tool:
        return Tool(
            fn,
            name=name,
            description=description,
            read_only=read_only,
            defer=defer,
            callers=callers,
            permission=permission,
        )

    return wrap(function) if function is not None else wrap


class NativeTool:
    """One of CLIO's built-in tools, claimed by the plugin with its own options."""

    __slots__ = ("name", "defer", "callers", "permission")

    def __init__(self, name: str, defer: bool | None = None, callers: str | None = None, permission: str | None = None):
        self.name = name
        self.defer = defer
        self.callers = callers
        self.permission = permission

    def declaration(self) -> dict:
        return {
            "name": self.name,
            **{k: v for k, v in _options(self.defer, self.callers, self.permission).items() if v is not None},
        }

    def __repr__(self) -> str:
        return f"native_tool({self.name!r})"


def native_tool(
    name: str, defer: bool | None = None, callers: str | None = None, permission: str | None = None
) -> NativeTool:
    """Claims built-in tool ``name`` (``shell_bash`` …) for the plugin."""
    return NativeTool(name, defer=defer, callers=callers, permission=permission)


class HostCall:
    """The server side of a script binding's reserved call ``__<binding>_<name>__``."""

    def __init__(self, name: str, function: Callable):
        self.name = name
        self.function = function
        self.__wrapped__ = function

    def __call__(self, args: Any) -> Any:
        return self.function(args)

    def __repr__(self) -> str:
        return f"<host_call {self.name}>"


def host_call(name: str) -> Callable[[Callable], HostCall]:
    """``@host_call("__stream_write__")``: the function answers that reserved call; it gets
    the call's arguments as a mapping."""
    if not isinstance(name, str) or not name:
        raise ValueError("host_call(name): the full reserved name, such as '__stream_write__'")

    def wrap(fn: Callable) -> HostCall:
        return HostCall(name, fn)

    return wrap


# Hooks -----------------------------------------------------------------------------------


class HookEvent:
    """What a hook receives: ``event``, ``session_id``, ``turn_id``, ``cwd``, ``tool_name``,
    ``tool_input``, ``prompt``, ``payload`` and ``answer`` (and ``hook_id``,
    ``schema_version`` of the JSON CLIO sends)."""

    __slots__ = (
        "event",
        "session_id",
        "turn_id",
        "cwd",
        "tool_name",
        "tool_input",
        "prompt",
        "payload",
        "answer",
        "hook_id",
        "schema_version",
    )

    def __init__(
        self,
        event: str = "",
        session_id: str = "",
        turn_id: str = "",
        cwd: str = "",
        tool_name: str = "",
        tool_input: Any = None,
        prompt: str = "",
        payload: Any = None,
        answer: str = "",
        hook_id: str = "",
        schema_version: int = 1,
    ):
        self.event = event
        self.session_id = session_id
        self.turn_id = turn_id
        self.cwd = cwd
        self.tool_name = tool_name
        self.tool_input = tool_input
        self.prompt = prompt
        self.payload = payload
        self.answer = answer
        self.hook_id = hook_id
        self.schema_version = schema_version

    @classmethod
    def from_dict(cls, data: dict) -> HookEvent:
        """Reads the ``HookEvent`` JSON CLIO sends a hook; unknown fields are ignored (a
        newer CLIO may add some)."""
        return cls(**{k: v for k, v in data.items() if k in cls.__slots__ and v is not None})

    def to_dict(self) -> dict:
        return {k: getattr(self, k) for k in self.__slots__}

    def __repr__(self) -> str:
        return f"HookEvent(event={self.event!r}, tool_name={self.tool_name!r})"


class Hook:
    """A Python function declared as a hook on one event."""

    def __init__(
        self,
        function: Callable,
        event: str,
        *,
        id: str = "",  # noqa: A002
        before: list | None = None,
        after: list | None = None,
        tools: str = "",
        fail_closed: bool = False,
    ):
        self.function = function
        self.event = event
        self.id = id or function.__name__.replace("_", "-")
        self.before = list(before or [])
        self.after = list(after or [])
        self.tools = tools
        self.fail_closed = fail_closed
        self.__wrapped__ = function

    def __call__(self, ev: Any) -> Any:
        """Calls the hook; the ``HookEvent`` JSON CLIO sends (a mapping, as the flow runner
        passes it) is given to the function as a :class:`HookEvent`."""
        if isinstance(ev, dict):
            ev = HookEvent.from_dict(ev)
        return self.function(ev)

    def declaration(self) -> dict:
        return {
            "event": self.event,
            "id": self.id,
            "before": self.before,
            "after": self.after,
            "tools": self.tools,
            "fail_closed": self.fail_closed,
            "function": self.function.__name__,
        }

    def __repr__(self) -> str:
        return f"<hook {self.id} on {self.event}>"


def hook(
    event: str,
    *,
    id: str = "",  # noqa: A002
    before: list | None = None,
    after: list | None = None,
    tools: str = "",
    fail_closed: bool = False,
) -> Callable[[Callable], Hook]:
    """``@hook(event, *, id="", before=None, after=None, tools="", fail_closed=False)``.
    ``event`` is a key of :data:`HOOK_EVENTS`; an unknown one raises ``ValueError``."""
    if event not in HOOK_EVENTS:
        raise ValueError(f"unknown hook event {event!r}; the events are {', '.join(HOOK_EVENTS)}")

    def wrap(fn: Callable) -> Hook:
        return Hook(fn, event, id=id, before=before, after=after, tools=tools, fail_closed=fail_closed)

    return wrap


# Subagents -------------------------------------------------------------------------------


class PromptFile:
    """A prompt file, relative to the plugin's ``ai.iowarp.clio/`` folder."""

    __slots__ = ("path",)

    def __init__(self, path: str):
        self.path = str(path)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, PromptFile) and other.path == self.path

    def __hash__(self) -> int:
        return hash(self.path)

    def __repr__(self) -> str:
        return f"PromptFile({self.path!r})"


class Subagent:
    """A subagent the plugin brings; ``prompt`` is a :class:`PromptFile` or text."""

    def __init__(
        self,
        id: str,  # noqa: A002
        prompt: Any = "",
        plugins: list = [],  # noqa: B006 - the reference's signature; copied, never changed
        description: str = "",
        tools: list | None = None,
        prefers: Prefers | None = None,
        flow: Any = "react",
        max_iters: int = 0,
        structured_outputs: dict = {},  # noqa: B006 - the reference's signature; copied
        internal: bool = False,
    ):
        self.id = id
        self.prompt = prompt
        self.plugins = list(plugins)
        self.description = description
        self.tools = list(tools) if tools is not None else None
        self.prefers = prefers
        self.flow = flow
        self.max_iters = max_iters
        self.structured_outputs = dict(structured_outputs)
        self.internal = internal

    def declaration(self) -> dict:
        from clio_agent.sdk.agent import _flow_selection

        if isinstance(self.prompt, PromptFile):
            prompt: dict = {"file": self.prompt.path}
        else:
            prompt = {"text": self.prompt}
        out: dict[str, Any] = {
            "id": self.id,
            "prompt": prompt,
            "plugins": self.plugins,
            "description": self.description,
            "flow": _flow_selection(self.flow, f"subagent {self.id}"),
            "max_iters": self.max_iters,
            "structured_outputs": self.structured_outputs,
            "internal": self.internal,
        }
        if self.tools is not None:
            out["tools"] = self.tools
        if self.prefers is not None:
            out["prefers"] = self.prefers.to_dict() if isinstance(self.prefers, Prefers) else self.prefers
        return out

    def __repr__(self) -> str:
        return f"Subagent({self.id!r})"


# Plugins ---------------------------------------------------------------------------------


class _either:  # noqa: N801 - used as a decorator
    """A method that works on an instance and on the class itself (``Spectroscopy.describe()``)."""

    def __init__(self, fn: Callable):
        self.fn = fn
        self.__doc__ = fn.__doc__

    def __get__(self, obj: Any, owner: Any = None) -> Any:
        target = obj if obj is not None else owner
        return lambda *args, **kwargs: self.fn(target, *args, **kwargs)


def _module_declarations(module_name: str | None) -> dict[str, list]:
    """The tools, native tools, hooks and subagents declared at the top level of a module."""
    found: dict[str, list] = {"tools": [], "native_tools": [], "hooks": [], "subagents": []}
    module = sys.modules.get(module_name or "")
    if module is None:
        return found
    for value in vars(module).values():
        if isinstance(value, Tool):
            found["tools"].append(value)
        elif isinstance(value, NativeTool):
            found["native_tools"].append(value)
        elif isinstance(value, Hook):
            found["hooks"].append(value)
        elif isinstance(value, Subagent):
            found["subagents"].append(value)
    return found


class Plugin:
    """A plugin: subclass it (``class Spectroscopy(Plugin): id = …``) or make one
    (``Plugin("pdf", version="1.0.0", requires=["document-runtime"])``), in
    ``ai.iowarp.clio/plugin.py``. The tools, native tools, hooks and subagents declared at
    the top level of the same module are the plugin's, with those given as attributes."""

    id: ClassVar[str] = ""
    version: ClassVar[str] = "0.0.0"
    description: ClassVar[str] = ""
    requires: ClassVar[list] = []
    model: ClassVar[Requires | None] = None
    prefers: ClassVar[Prefers | None] = None
    defer: ClassVar[bool | None] = None
    tools: ClassVar[list] = []
    native_tools: ClassVar[list] = []
    hooks: ClassVar[list] = []
    subagents: ClassVar[list] = []
    #: Script bindings: each binding's name and its ``host_call`` functions (or names).
    bindings: ClassVar[dict] = {}

    def __init__(
        self,
        id: str | None = None,  # noqa: A002
        *,
        version: str | None = None,
        description: str | None = None,
        requires: list | None = None,
        model: Requires | None = None,
        prefers: Prefers | None = None,
        defer: bool | None = None,
        tools: list | None = None,
        native_tools: list | None = None,
        hooks: list | None = None,
        subagents: list | None = None,
        bindings: dict | None = None,
    ):
        given = {
            "id": id,
            "version": version,
            "description": description,
            "requires": requires,
            "model": model,
            "prefers": prefers,
            "defer": defer,
            "tools": tools,
            "native_tools": native_tools,
            "hooks": hooks,
            "subagents": subagents,
            "bindings": bindings,
        }
        for key, value in given.items():
            if value is not None:
                setattr(self, key, list(value) if isinstance(value, tuple) else value)
        frame = sys._getframe(1)
        self._module = frame.f_globals.get("__name__")

    @_either
    def declaration(self) -> dict:
        """The declaration as data in the manifest's shape (``plugin.toml``'s fields)."""
        module = getattr(self, "_module", None) if not isinstance(self, type) else self.__module__
        found = _module_declarations(module)
        description = self.description
        if not description and isinstance(self, type) and "__doc__" in vars(self) and self.__doc__:
            description = inspect.cleandoc(self.__doc__)
        out: dict[str, Any] = {
            "id": self.id,
            "version": self.version,
            "description": description,
            "requires": [str(r) for r in self.requires],
        }
        model: dict[str, Any] = {}
        if self.model is not None:
            model["requires"] = self.model.to_dict() if isinstance(self.model, Requires) else self.model
        if self.prefers is not None:
            model["prefers"] = self.prefers.to_dict() if isinstance(self.prefers, Prefers) else self.prefers
        if model:
            out["model"] = model
        if self.defer is not None:
            out["defer"] = self.defer

        def merged(explicit: list, key: str) -> list:
            items = list(explicit)
            items += [x for x in found[key] if all(x is not y for y in items)]
            return items

        out["tools"] = [t.declaration() for t in merged(self.tools, "tools")]
        out["native_tools"] = [t.declaration() for t in merged(self.native_tools, "native_tools")]
        out["hooks"] = [h.declaration() for h in merged(self.hooks, "hooks")]
        out["subagents"] = [s.declaration() for s in merged(self.subagents, "subagents")]
        out["bindings"] = [
            {"name": name, "host_calls": [c.name if isinstance(c, HostCall) else c for c in calls]}
            for name, calls in dict(self.bindings).items()
        ]
        return out

    @_either
    def describe(self) -> dict:
        """The declaration as data, checked and described by clio-plugins (as ``clio plugin
        check`` describes a ``plugin.toml``). Raises :class:`PluginDeclarationError`."""
        return _bridge.call_json("plugin_describe", self.declaration())

    def __repr__(self) -> str:
        return f"Plugin({self.id!r}, version={self.version!r})"


class Pack(Plugin):
    """A plugin that brings others: ``Pack("documents", ["pdf", "docx"], version="1.0.0")``."""

    members: ClassVar[list] = []

    def __init__(
        self,
        id: str | None = None,  # noqa: A002
        members: list | None = None,
        *,
        version: str | None = None,
        description: str | None = None,
    ):
        super().__init__(id, version=version, description=description)
        if members is not None:
            self.members = list(members)
        self._module = sys._getframe(1).f_globals.get("__name__")

    @_either
    def declaration(self) -> dict:
        return {
            "kind": "pack",
            "id": self.id,
            "version": self.version,
            "description": self.description,
            "members": [str(m) for m in self.members],
        }

    def __repr__(self) -> str:
        return f"Pack({self.id!r}, {list(self.members)!r}, version={self.version!r})"
