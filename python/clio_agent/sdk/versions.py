"""Plugin ids, versions and version ranges: clio-spec's rules (node-semver's grammar).

``VersionRangeError`` is what ``PluginRef.parse`` and the functions here raise for an
invalid id, version or range; it carries clio-spec's ``input``, ``position`` (a byte
offset into ``input``) and ``kind`` (``invalid_id``, ``empty_range``, ``tag``,
``wildcard_then_number`` …). The grammar is in ``docs/ranges.md``.
"""

from __future__ import annotations

import json

from clio_agent.sdk import _bridge

__all__ = ["VersionRange", "VersionRangeError", "check_id", "parse_version"]


class VersionRangeError(ValueError):
    """An invalid plugin id, version or version range, pointing into what was written."""

    def __init__(self, message: str, *, input: str = "", position: int = 0, kind: str = ""):  # noqa: A002
        super().__init__(message)
        self.message = message
        self.input = input
        self.position = position
        self.kind = kind


class VersionRange:
    """A version range (``^1.2``, ``>=1 <2 || 3.x``, ``1.2.3 - 2``), parsed by clio-spec."""

    __slots__ = ("text", "desugared")

    def __init__(self, text: str):
        if not isinstance(text, str):
            raise TypeError(f"a version range is text, not {type(text).__name__}")
        parsed = json.loads(_bridge.call("range_parse", text))
        self.text = text
        #: The comparators the range stands for (``^1.2`` → ``>=1.2.0 <2.0.0-0``).
        self.desugared: str = parsed["desugared"]

    @classmethod
    def parse(cls, text: str) -> VersionRange:
        """Parses ``text``; raises :class:`VersionRangeError`."""
        return cls(text)

    def accepts(self, version: str) -> bool:
        """Whether ``version`` (a full semver version) is in the range."""
        return bool(_bridge.call("range_accepts", self.text, version))

    def __contains__(self, version: str) -> bool:
        return self.accepts(version)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, VersionRange) and other.text == self.text

    def __hash__(self) -> int:
        return hash(self.text)

    def __str__(self) -> str:
        return self.text

    def __repr__(self) -> str:
        return f"VersionRange({self.text!r})"


def parse_version(text: str) -> str:
    """Checks a plugin's own version (full semver, no ``v``, no leading zeros); returns it."""
    return _bridge.call("version_parse", text)


def check_id(text: str) -> str:
    """Checks an id (plugin, marketplace, agent): ``[a-z0-9][a-z0-9_-]{0,63}``; returns it."""
    _bridge.call("id_check", text)
    return text
