"""The pure-Python files alone, as the clio binary carries them for its flow runner: the
runner starts, the flow API and the declarations import and work, and the native module is
never imported; what needs a Rust rule says how to get it."""

import json
import os
import shutil
import subprocess
import sys

import clio_agent

PACKAGE = os.path.dirname(os.path.abspath(clio_agent.__file__))


def _pure_copy(tmp_path):
    """Copies every .py file of the package (nothing else) into tmp_path/clio_agent."""
    dest = tmp_path / "clio_agent"
    for folder, _dirs, files in os.walk(PACKAGE):
        for name in files:
            if name.endswith(".py"):
                rel = os.path.relpath(os.path.join(folder, name), PACKAGE)
                os.makedirs(dest / os.path.dirname(rel), exist_ok=True)
                shutil.copy(os.path.join(folder, name), dest / rel)
    assert not [n for n in os.listdir(dest) if n.startswith("_native")]
    return dest


SCRIPT = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
from clio_agent.sdk import (Agent, AgentSpec, AgentDefinitionError, Flow, Workflow, Step,
    WorkflowError, Plugin, Pack, PluginRef, Requires, Prefers, Subagent, PromptFile, tool,
    native_tool, host_call, hook, HookEvent, HOOK_EVENTS)
from clio_agent.sdk._bridge import NativeMissing
out = {}
wf = Workflow(steps=[Step("survey", "r", input="$task"), Step("relate", "x", after=["survey"])])
out["workflow"] = wf.to_dict()
@tool(read_only=True)
def peaks(path: str) -> list:
    return [path]
@hook("tool_call", fail_closed=True)
def guard(ev):
    return None
out["tool"] = [peaks.name, peaks("a")]
out["hook"] = guard.event
out["requires"] = Requires(vision=True).to_dict()
out["flow"] = Flow("council", models=["a"]).reference()
class A(Agent):
    id = "a"
try:
    A.spec()
except NativeMissing as e:
    out["spec"] = str(e)
out["native_imported"] = "clio_agent._native" in sys.modules
print(json.dumps(out))
"""


def test_the_sdk_imports_and_declares_without_the_native_module(tmp_path):
    _pure_copy(tmp_path)
    done = subprocess.run([sys.executable, "-I", "-c", SCRIPT, str(tmp_path)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["native_imported"] is False
    assert out["workflow"]["steps"][1] == {"id": "relate", "target": "x", "after": ["survey"]}
    assert out["tool"] == ["peaks", ["a"]] and out["hook"] == "tool_call"
    assert out["flow"] == {"id": "council", "options": {"models": ["a"]}}
    assert "pip install ./python" in out["spec"]


def test_the_runner_starts_from_the_pure_files(tmp_path):
    dest = _pure_copy(tmp_path)
    proc = subprocess.Popen(
        [sys.executable, "-I", str(dest / "_flow_host.py")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        ready = json.loads(proc.stdout.readline())
        assert ready["type"] == "ready" and ready["protocol"] == 1
    finally:
        proc.stdin.close()
        proc.wait(timeout=20)
        proc.stdout.close()
        proc.stderr.close()


def test_the_runner_calls_a_plugin_py_tool_and_hook_without_the_native_module(tmp_path):
    """The seeds' plugin.py imported by the runner from the pure files: its @hook gets a
    HookEvent and denies, its @tool takes keyword arguments (docs/python-flows.md, the
    start of a function)."""
    dest = _pure_copy(tmp_path / "pkg")
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "plugins", "spectro")
    proc = subprocess.Popen(
        [sys.executable, "-I", str(dest / "_flow_host.py")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    starts = [
        (
            "h",
            "hook no-shell",
            "no_shell",
            "arg",
            {"schema_version": 1, "event": "PreToolUse", "tool_name": "shell_bash"},
        ),
        ("t", "tool find_peaks", "peaks", "kwargs", {"path": "a.csv", "threshold": 0.9}),
    ]
    try:
        assert json.loads(proc.stdout.readline())["type"] == "ready"
        for instance, flow, function, convention, task in starts:
            start = {
                "type": "start",
                "instance": instance,
                "protocol": 1,
                "root": root,
                "file": "ai.iowarp.clio/plugin.py",
                "flow": flow,
                "function": function,
                "convention": convention,
                "task": task,
                "history": False,
            }
            proc.stdin.write(json.dumps(start) + "\n")
            proc.stdin.flush()
        ends = {}
        while len(ends) < len(starts):
            msg = json.loads(proc.stdout.readline())
            if msg.get("type") == "end":
                ends[msg["instance"]] = msg
        assert ends["h"]["ok"]["value"] == {"decision": "deny", "reason": "spectroscopy runs no shell"}, ends["h"]
        assert ends["t"]["ok"]["value"] == ["a.csv", 0.9, "fast"], ends["t"]
    finally:
        proc.stdin.close()
        proc.wait(timeout=20)
        proc.stdout.close()
        proc.stderr.close()
