"""The one door to the native module ``clio_agent._native`` (the crate ``clio-py``).

Every rule of the SDK (a spec's checksum, a version range, a workflow's check, a plugin
declaration's check) is the Rust crates'; this module calls them and raises their refusals
again as the seeds' classes. The native module is imported lazily, on the first call that
needs it: the flow runner the ``clio`` binary starts (``_flow_host.py``) carries only the
``.py`` files of this package and never needs it.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["NativeMissing", "available", "call", "call_json"]

_native: Any = None


class NativeMissing(ImportError):
    """The package runs without its native module (the pure-Python files alone)."""


def _load() -> Any:
    global _native
    if _native is None:
        try:
            from clio_agent import _native as module  # type: ignore[attr-defined]
        except ImportError as error:
            raise NativeMissing(
                "this needs clio_agent's native module (clio_agent._native), which these files lack: "
                "install the package with `pip install ./python` from a clone of CLIO "
                "(the clio binary's flow runner carries the pure-Python files only)"
            ) from error
        _native = module
    return _native


def available() -> bool:
    """Whether the native module can be imported."""
    try:
        _load()
    except NativeMissing:
        return False
    return True


def _raise(refusal: dict) -> None:
    family = refusal.get("family")
    message = refusal.get("message", "")
    kind = refusal.get("kind", "")
    details = refusal.get("details") or {}
    if family == "agent":
        from clio_agent.sdk.agent import AgentDefinitionError

        raise AgentDefinitionError(message, kind=kind, details=details)
    if family == "range":
        from clio_agent.sdk.versions import VersionRangeError

        raise VersionRangeError(message, input=details.get("input", ""), position=details.get("position", 0), kind=kind)
    if family == "workflow":
        from clio_agent.sdk.workflow import WorkflowError

        raise WorkflowError(message, kind=kind)
    if family == "plugin":
        from clio_agent.sdk.plugin import PluginDeclarationError

        raise PluginDeclarationError(message, problems=details.get("problems", []))
    raise ValueError(message)


def call(name: str, *args: Any) -> Any:
    """Calls native function ``name``; a refusal is raised as the seeds' class."""
    native = _load()
    try:
        return getattr(native, name)(*args)
    except native.Refusal as error:
        refusal = json.loads(error.args[0])
    _raise(refusal)
    raise AssertionError("unreachable")  # pragma: no cover - _raise always raises


def call_json(name: str, *args: Any) -> Any:
    """Calls native function ``name`` with values given as JSON, and reads its JSON answer."""
    texts = [a if isinstance(a, str) else json.dumps(a, allow_nan=False) for a in args]
    return json.loads(call(name, *texts))
