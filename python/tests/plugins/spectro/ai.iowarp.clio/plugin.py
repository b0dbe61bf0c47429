"""A plugin declared in Python, as the seeds write one: a Plugin subclass, a tool with every
option, a plain tool, a claimed native tool, a hook that denies, a subagent with a prompt
file, and a script binding's host call."""

from typing import Literal

from clio_agent.sdk import (
    Flow,
    Plugin,
    Prefers,
    PromptFile,
    Requires,
    Subagent,
    hook,
    host_call,
    native_tool,
    tool,
)

DEFAULT_THRESHOLD = 0.5


@tool(
    name="find_peaks",
    description="Find the peaks of a spectrum",
    read_only=True,
    defer=True,
    callers="both",
    permission="allow",
)
def peaks(
    path: str, threshold: float = 0.5, mode: Literal["fast", "exact"] = "fast", channels: list[int] | None = None
) -> list:
    return [path, threshold, mode]


@tool
def calibrate(reference: str, *, passes: int = 2):
    """Calibrates the instrument against a reference sample."""
    return {"reference": reference, "passes": passes}


shell_bash = native_tool("shell_bash", permission="deny")


@hook("tool_call", id="no-shell", tools="shell_*|run_*", fail_closed=True)
def no_shell(ev):
    if ev.tool_name.startswith("shell_"):
        return {"decision": "deny", "reason": "spectroscopy runs no shell"}
    return None


@hook("tool_result", after=["no-shell"])
def audit(ev):
    return None


@host_call("__spectro_plot__")
def plot(args):
    return {"plotted": args.get("series", [])}


reader = Subagent(
    "reader",
    prompt=PromptFile("prompts/reader.md"),
    plugins=["pdf"],
    description="Reads papers",
    tools=["find_peaks"],
    prefers=Prefers(effort="high"),
    flow=Flow("council", models=["a", "b"]),
    max_iters=8,
)


class Spectroscopy(Plugin):
    """Spectra: peaks, calibration and a reader of papers."""

    id = "spectroscopy"
    version = "0.1.0"
    requires = ["workspace"]
    model = Requires(context_tokens=64_000)  # optional
    prefers = Prefers(provider="ollama")  # optional
    bindings = {"spectro": [plot]}
