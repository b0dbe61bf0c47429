"""Measures the line protocol's own cost per command, with a runtime that answers at once.

    python3 python/bench/protocol.py [N]

Prints one JSON line per workload: W1 (N ``ctx.step``s of a new run: each runs at once
and is reported with its request, then its result), W1replay (the same N steps answered from a record: step, result), W2 (a gather
of N calls: one request and one reply) and calls (N awaited ``ctx.call``s, one after
the other). ``per_command_us`` is the wall time per command through a real child process
and pipes, the runtime's side being this script (no journal, no commit).
"""

import json
import os
import subprocess
import sys
import tempfile
import time

PYTHON_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

FLOW = """
from clio_agent.sdk import Flow


def noop(i):
    return i


class Bench(Flow):
    id = "bench"
    n: int = 1000
    mode: str = "w1"

    async def forward(self, task, ctx):
        if self.mode == "w1":
            for i in range(self.n):
                await ctx.step(noop, i)
        elif self.mode == "w2":
            await ctx.gather([ctx.call("noop", i) for i in range(self.n)])
        else:
            for i in range(self.n):
                await ctx.call("noop", i)
        return "done"
"""


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
    root = tempfile.mkdtemp()
    with open(os.path.join(root, "bench.py"), "w") as f:
        f.write(FLOW)
    proc = subprocess.Popen(
        [sys.executable, "-m", "clio_agent._flow_host"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=dict(os.environ, PYTHONPATH=PYTHON_DIR),
    )
    out, inp = proc.stdin, proc.stdout
    assert json.loads(inp.readline())["type"] == "ready"
    result = {"answer": "", "value": 0, "handle": 1, "kind": "tool", "target": "noop"}
    for name, mode, replay in (
        ("W1", "w1", False),
        ("W1replay", "w1", True),
        ("W2", "w2", False),
        ("calls", "calls", False),
    ):
        start = {
            "type": "start",
            "instance": name,
            "protocol": 1,
            "root": root,
            "file": "bench.py",
            "flow": "bench",
            "task": "",
            "options": {"n": n, "mode": mode},
            "history": replay,
        }
        t0 = time.perf_counter()
        out.write((json.dumps(start) + "\n").encode())
        out.flush()
        commands = 0
        while True:
            msg = json.loads(inp.readline())
            kind = msg["type"]
            if kind == "end":
                assert "ok" in msg, msg
                break
            if kind == "step" and msg.get("ran"):
                reply = {"type": "result", "instance": name, "id": msg["id"], "ok": msg["ok"]}
                commands += 1
            elif kind == "step" and not replay:
                reply = {"type": "run", "instance": name, "id": msg["id"]}
                commands += 1
            elif kind == "step":
                reply = {"type": "result", "instance": name, "id": msg["id"], "ok": msg["id"]}
                commands += 1
            elif kind == "step_done":
                reply = {"type": "result", "instance": name, "id": msg["id"], "ok": msg["ok"]}
            elif kind == "gather":
                reply = {"type": "result", "instance": name, "id": msg["id"], "ok": [result] * len(msg["calls"])}
                commands += len(msg["calls"])
            else:
                reply = {"type": "result", "instance": name, "id": msg["id"], "ok": result}
                commands += 1
            out.write((json.dumps(reply) + "\n").encode())
            out.flush()
        total = time.perf_counter() - t0
        line = {
            "bench": "python_protocol",
            "workload": name,
            "commands": commands,
            "total_ms": round(total * 1000, 2),
            "per_command_us": round(total * 1e6 / max(commands, 1), 1),
        }
        print(json.dumps(line))
    out.close()
    proc.wait()


if __name__ == "__main__":
    main()
