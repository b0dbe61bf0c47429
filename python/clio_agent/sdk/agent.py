"""Agents: ``Agent`` classes, frozen into an ``AgentSpec`` by clio-spec.

``class Reviewer(Agent)`` declares an agent by class attributes; each class of the chain is
one layer (the class's ``id``, or its name in kebab case for a class in the middle that sets
none). ``Reviewer.spec()`` hands the layers to clio-spec's ``AgentDef::spec`` — the same code
``clio agent spec`` runs on an ``agent.toml`` — so the checksum is the CLI's, byte for byte.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import re
import sys
from typing import Any, ClassVar

from clio_agent.sdk import _bridge

__all__ = ["Agent", "AgentDefinitionError", "AgentSpec", "Prefers", "Requires"]


class AgentDefinitionError(ValueError):
    """An agent that cannot be frozen, or a spec that does not verify.

    ``kind`` is clio-spec's variant (``empty_id``, ``missing_core``, ``bad_reference``,
    ``duplicate_plugin``, ``checksum_mismatch`` …) and ``details`` its fields, which are
    also attributes (``layer``, ``value``, ``plugin``, ``expected``, ``actual`` …)."""

    def __init__(self, message: str, *, kind: str = "", details: dict | None = None):
        super().__init__(message)
        self.message = message
        self.kind = kind
        self.details = dict(details or {})
        for key, value in self.details.items():
            if not hasattr(self, key):
                setattr(self, key, value)


def _from_mapping(cls: type, native: str, data: Any) -> Any:
    if isinstance(data, cls):
        return data
    if not isinstance(data, dict):
        raise TypeError(f"{cls.__name__}.from_dict takes a mapping, not {type(data).__name__}")
    return cls(**_bridge.call_json(native, data))


@dataclasses.dataclass(frozen=True)
class Requires:
    """What a model must be able to do; unset fields require nothing."""

    tool_calling: bool = False
    vision: bool = False
    context_tokens: int = 0
    output_tokens: int = 0

    def union(self, other: Requires) -> Requires:
        """The stricter of both, field by field (clio-spec's ``Requires::union``)."""
        return Requires(**_bridge.call_json("requires_union", self.to_dict(), Requires._of(other).to_dict()))

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> Requires:
        """Reads a mapping; an unknown field or a wrong type raises ``ValueError``."""
        return _from_mapping(cls, "requires", data)

    @classmethod
    def _of(cls, value: Any) -> Requires:
        return value if isinstance(value, Requires) else cls.from_dict(value)

    def is_empty(self) -> bool:
        return self == Requires()


@dataclasses.dataclass(frozen=True)
class Prefers:
    """What model a layer would like; unset fields prefer nothing."""

    model: str = ""
    provider: str = ""
    effort: str = ""

    def union(self, fallback: Prefers) -> Prefers:
        """These preferences, each unset field taken from ``fallback`` (``Prefers::union``)."""
        return Prefers(**_bridge.call_json("prefers_union", self.to_dict(), Prefers._of(fallback).to_dict()))

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> Prefers:
        """Reads a mapping; an unknown field or a wrong type raises ``ValueError``."""
        return _from_mapping(cls, "prefers", data)

    @classmethod
    def _of(cls, value: Any) -> Prefers:
        return value if isinstance(value, Prefers) else cls.from_dict(value)

    def is_empty(self) -> bool:
        return self == Prefers()


class AgentSpec:
    """The frozen description of an agent, with the SHA-256 ``checksum`` of its content."""

    __slots__ = ("_data",)

    def __init__(self, data: dict):
        self._data = data

    id = property(lambda self: self._data["id"])
    version = property(lambda self: self._data["version"])
    name = property(lambda self: self._data["name"])
    role = property(lambda self: self._data["role"])
    description = property(lambda self: self._data["description"])
    #: ``{"id", "options"}``.
    flow = property(lambda self: json.loads(json.dumps(self._data["flow"])))
    #: Each ``{"reference", "layer"}``: the reference as written and the layer that added it.
    plugins = property(lambda self: [dict(p) for p in self._data["plugins"]])
    layers = property(lambda self: list(self._data["layers"]))
    requires = property(lambda self: Requires(**self._data["requires"]))
    prefers = property(lambda self: Prefers(**self._data["prefers"]))
    source = property(lambda self: self._data["source"])
    checksum = property(lambda self: self._data["checksum"])

    def to_dict(self) -> dict:
        """The spec's JSON form (as ``clio agent spec --json`` prints it), checksum included."""
        return json.loads(json.dumps(self._data))

    def to_json(self) -> str:
        return json.dumps(self._data, ensure_ascii=False)

    @classmethod
    def from_dict(cls, data: dict) -> AgentSpec:
        """Reads a spec back; raises :class:`AgentDefinitionError` when its checksum does
        not match its content, it has none, or it has unknown fields."""
        if not isinstance(data, dict):
            raise TypeError(f"AgentSpec.from_dict takes a mapping, not {type(data).__name__}")
        return cls(_bridge.call_json("spec_verify", data))

    @classmethod
    def from_json(cls, text: str) -> AgentSpec:
        """Reads a spec's JSON text (a file ``clio agent spec --json`` wrote)."""
        return cls(json.loads(_bridge.call("spec_verify", text)))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, AgentSpec) and other._data == self._data

    def __hash__(self) -> int:
        return hash(self.checksum)

    def __repr__(self) -> str:
        return f"AgentSpec(id={self.id!r}, version={self.version!r}, checksum={self.checksum[:12]!r}…)"


# The class attributes a layer may set, as the TOML form names them.
_LAYER_FIELDS = ("version", "name", "role", "description", "flow", "plugins", "requires", "prefers")


def _kebab(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "-", name).lower()


def _flow_selection(value: Any, where: str) -> Any:
    from clio_agent.sdk.flow import Flow

    if isinstance(value, str):
        return {"id": value, "options": {}}
    if isinstance(value, type) and issubclass(value, Flow):
        return {"id": value.id, "options": {}}
    if isinstance(value, Flow):
        return value.reference()
    if isinstance(value, dict):
        return value
    raise AgentDefinitionError(
        f"{where}: flow must be a flow id, a Flow class or Flow(id, **options), not {type(value).__name__}",
        kind="invalid_flow",
        details={"layer": where, "value": repr(value)},
    )


def _plain(value: Any, cls: type) -> Any:
    if isinstance(value, cls):
        return value.to_dict()
    return value


def _source(cls: type) -> str:
    module = sys.modules.get(cls.__module__)
    path = getattr(module, "__file__", None)
    return f"{path}:{cls.__qualname__}" if path else f"<code>:{cls.__qualname__}"


class Agent:
    """Base class for agents: set the class attributes, freeze with ``spec()``.

    ``id`` (required), ``version`` (``"0.0.0"``), ``name`` (the id), ``role`` (``""``),
    ``description`` (the docstring), ``flow`` (``"react"``, a Flow class or
    ``Flow(id, **options)``), ``plugins`` (``["core", "memory"]``), ``requires``
    (``Requires()``), ``prefers`` (``Prefers()``)."""

    id: ClassVar[str] = ""
    version: ClassVar[str] = "0.0.0"
    name: ClassVar[str] = ""
    role: ClassVar[str] = ""
    description: ClassVar[str] = ""
    flow: ClassVar[Any] = "react"
    plugins: ClassVar[list[str]] = ["core", "memory"]
    requires: ClassVar[Requires] = Requires()
    prefers: ClassVar[Prefers] = Prefers()

    @classmethod
    def layers(cls) -> list[dict]:
        """Each class of the chain as a layer (the TOML form's fields), base first."""
        chain = [k for k in reversed(cls.__mro__) if isinstance(k, type) and issubclass(k, Agent) and k is not Agent]
        layers = []
        for klass in chain:
            own = vars(klass)
            if "id" in own:
                layer_id = own["id"]
            elif klass is cls:
                raise AgentDefinitionError(
                    f"class {klass.__qualname__} sets no id of its own (it inherits {cls.id!r}): "
                    "each class of an agent's chain is a layer and needs its own id",
                    kind="empty_id" if not cls.id else "inherited_id",
                    details={"layer": klass.__qualname__},
                )
            else:
                layer_id = _kebab(klass.__name__)
            if not isinstance(layer_id, str):
                raise AgentDefinitionError(
                    f"class {klass.__qualname__}: id must be text, not {type(layer_id).__name__}",
                    kind="invalid_id",
                    details={"layer": klass.__qualname__},
                )
            layer: dict[str, Any] = {"id": layer_id}
            for field in _LAYER_FIELDS:
                if field in own:
                    value = own[field]
                    if field == "flow":
                        value = _flow_selection(value, layer_id)
                    elif field == "requires":
                        value = _plain(value, Requires)
                    elif field == "prefers":
                        value = _plain(value, Prefers)
                    elif field == "plugins" and isinstance(value, tuple):
                        value = list(value)
                    layer[field] = value
            if "description" not in own and own.get("__doc__"):
                layer["description"] = inspect.cleandoc(own["__doc__"])
            layers.append(layer)
        return layers

    @classmethod
    def definition(cls) -> dict:
        """The agent as clio-spec's ``AgentDef`` JSON: the most derived layer, the layers it
        extends under ``layer``."""
        layers = cls.layers()
        for parent, child in zip(layers, layers[1:], strict=False):
            child["extends"] = parent["id"]
        top = layers[-1]
        if len(layers) > 1:
            top["layer"] = list(reversed(layers[:-1]))
        return top

    @classmethod
    def spec(cls, *, source: str | None = None) -> AgentSpec:
        """Flattens the class chain into a frozen :class:`AgentSpec` through clio-spec.

        Raises :class:`AgentDefinitionError` when the id is empty, ``core`` is missing, a
        reference does not parse, or one class lists a plugin twice."""
        if cls is Agent:
            raise AgentDefinitionError("Agent itself is no agent: subclass it", kind="empty_id")
        try:
            definition = json.dumps(cls.definition(), allow_nan=False)
        except (TypeError, ValueError) as error:
            raise AgentDefinitionError(
                f"agent {cls.__qualname__}: a class attribute is not plain data: {error}", kind="parse"
            ) from None
        return AgentSpec(json.loads(_bridge.call("agent_spec", definition, source or _source(cls))))
