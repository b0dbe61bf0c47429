"""The embedded runtime (``clio_agent.runtime.Clio``): a Python program drives CLIO's Rust
runtime in its own process, on the journal a ``clio`` command uses, and a run its process
was driving when it was killed is resumed by ``clio runs resume`` with each effect once."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from clio_agent.runtime import Clio, ClioError

REPO = Path(__file__).resolve().parents[2]
WRITING = REPO / "examples" / "marketplace" / "plugins" / "writing"
MODELS = REPO / "examples" / "models" / "models.toml"
CLIO_BIN = os.environ.get("CLIO_BIN", str(REPO / "target" / "debug" / "clio"))

PLUGIN_PY = '''
import os

from clio_agent.sdk import Plugin, tool


@tool(permission="allow")
def record(workspace: str, n: int) -> int:
    """Appends one line to the workspace's ledger (a side effect)."""
    with open(os.path.join(workspace, "ledger.txt"), "a") as f:
        f.write(f"{n}\\n")
    return n


class SideEffects(Plugin):
    id = "sidefx"
    version = "0.1.0"
'''

SLOW_FLOW = """
import time

from clio_agent.sdk import Flow


class Slow(Flow):
    id = "slow-effects"

    async def forward(self, task, ctx):
        total = 0
        for n in range(4):
            total += (await ctx.call("record", {"workspace": task, "n": n})).value
            await ctx.step(lambda: time.sleep(0.6))
        return str(total)
"""


def clio_cli(home: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([CLIO_BIN, *args, "--home", str(home)], capture_output=True, text=True, timeout=120)


@pytest.fixture
def sidefx(tmp_path: Path) -> Path:
    plugin = tmp_path / "sidefx" / "ai.iowarp.clio"
    (plugin / "flows").mkdir(parents=True)
    (plugin / "plugin.py").write_text(PLUGIN_PY)
    (plugin / "flows" / "slow.py").write_text(SLOW_FLOW)
    return tmp_path / "sidefx"


def test_a_python_flow_runs_in_process_and_clio_sees_the_run(tmp_path: Path):
    home = tmp_path / "home"
    clio = Clio(home, plugins=[WRITING], models=MODELS)
    report = asyncio.run(clio.run("review", "a short poem about the sea", trust=True))
    assert report.status == "succeeded", report.raw
    assert report.answer
    listed = json.loads(clio_cli(home, "runs", "list", "--json").stdout)
    runs = listed["runs"] if isinstance(listed, dict) else listed
    assert [r["id"] for r in runs] == [report.run]
    assert [r["id"] for r in clio.runs()] == [report.run]


def test_questions_are_answered_in_process(tmp_path: Path):
    clio = Clio(tmp_path / "home", plugins=[WRITING], models=MODELS)

    async def decide():
        report = await clio.run("draft-and-review", "a short poem about the sea", trust=True)
        seen = []
        while report.status == "awaiting_input":
            seen.append(report.status)
            report = await clio.answer(report.run, "revise" if len(seen) == 1 else "accept")
        return seen, report

    seen, report = asyncio.run(decide())
    assert seen == ["awaiting_input", "awaiting_input"]
    assert report.status == "succeeded", report.raw


def test_an_unknown_flow_raises_the_commands_error(tmp_path: Path):
    clio = Clio(tmp_path / "home", models=MODELS)
    with pytest.raises(ClioError) as raised:
        asyncio.run(clio.run("no-such-flow", "x"))
    assert "no-such-flow" in str(raised.value)


def test_a_killed_embedding_process_is_resumed_by_clio_with_each_effect_once(tmp_path: Path, sidefx: Path):
    home = tmp_path / "home"
    workspace = tmp_path / "work"
    workspace.mkdir()
    program = tmp_path / "embed.py"
    program.write_text(
        textwrap.dedent(
            f"""
            import asyncio
            from clio_agent.runtime import Clio

            clio = Clio({str(home)!r}, plugins=[{str(sidefx)!r}], workspace={str(workspace)!r}, models={str(MODELS)!r})
            print(asyncio.run(clio.run("slow-effects", {str(workspace)!r}, trust=True)).status)
            """
        )
    )
    child = subprocess.Popen([sys.executable, str(program)], cwd=tmp_path, start_new_session=True)
    ledger = workspace / "ledger.txt"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if ledger.exists() and len(ledger.read_text().split()) >= 2:
            break
        time.sleep(0.05)
    assert ledger.exists(), "the flow never ran"
    os.killpg(child.pid, signal.SIGKILL)
    child.wait(timeout=30)
    before = ledger.read_text().split()
    assert 1 <= len(before) < 4, before
    resumed = clio_cli(home, "runs", "resume", "1", "--json")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert json.loads(resumed.stdout)["status"] == "succeeded"
    assert ledger.read_text().split() == ["0", "1", "2", "3"], "each effect once"
