"""One process runs many flow instances at once, each addressed by its instance id."""

import json
import os
import subprocess
import sys

from conftest import HERE

PYTHON_DIR = os.path.dirname(HERE)


def start(instance, plugin, file, task):
    return {
        "type": "start",
        "instance": instance,
        "protocol": 1,
        "root": plugin.root,
        "file": file,
        "flow": "review",
        "task": task,
        "options": {},
        "run_id": 1,
        "depth": 0,
        "workspace": None,
    }


def answer(msg):
    """A scripted runtime: every call's answer names its target and input."""
    if msg["type"] == "call":
        text = f"{msg['target']}({msg['input'] if isinstance(msg['input'], str) else msg['input']['draft']})"
        return {"type": "result", "instance": msg["instance"], "id": msg["id"], "ok": {"answer": text, "handle": 1}}
    if msg["type"] == "gather":
        oks = [{"answer": f"{c['target']}!", "handle": 2} for c in msg["calls"]]
        return {"type": "result", "instance": msg["instance"], "id": msg["id"], "ok": oks}
    raise AssertionError(msg)


def test_many_instances_share_one_process(plugin):
    file = plugin.copy("review.py")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    # Run as the file the binary carries, with no package installed on the path.
    proc = subprocess.Popen(
        [sys.executable, os.path.join(PYTHON_DIR, "clio_agent", "_flow_host.py")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        cwd="/",
    )

    def send(msg):
        proc.stdin.write((json.dumps(msg) + "\n").encode())
        proc.stdin.flush()

    def read():
        return json.loads(proc.stdout.readline())

    assert read()["type"] == "ready"
    n = 50
    for i in range(n):
        send(start(f"run{i}", plugin, file, f"task {i}"))
    ends = {}
    held = []
    # Hold every first request until all instances have sent theirs: all are in flight at once.
    while len(held) < n:
        msg = read()
        assert msg["type"] == "call", msg
        held.append(msg)
    for msg in reversed(held):
        send(answer(msg))
    while len(ends) < n:
        msg = read()
        if msg["type"] == "end":
            ends[msg["instance"]] = msg
        else:
            send(answer(msg))
    proc.stdin.close()
    assert proc.wait(timeout=10) == 0
    for i in range(n):
        assert ends[f"run{i}"]["ok"]["result"]["answer"] == f"writer(writer(task {i}))"
