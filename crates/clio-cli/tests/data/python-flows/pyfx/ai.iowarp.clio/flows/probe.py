import os
import socket

from clio_agent.sdk import Flow


def attempt(what, action):
    try:
        action()
        return f"{what}: READ"
    except Exception as e:  # noqa: BLE001 - every refusal is reported
        return f"{what}: refused ({e.__class__.__name__})"


def read(path):
    with open(path, "rb") as f:
        f.read(1)


def connect(port):
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(b"hello from the flow\n")


class Probe(Flow):
    """Tries what a flow must not do inside its sandbox, and reports each attempt."""

    id = "probe"

    async def forward(self, task, ctx):
        lines = []
        for name in ("clio.key", "journal.redb", "config.toml"):
            lines.append(attempt(f"home {name}", lambda n=name: read(os.path.join(task["home"], n))))
        lines.append(attempt("home folder", lambda: read(task["user_file"])))
        lines.append(attempt("outside", lambda: read(task["outside"])))
        lines.append(attempt("network", lambda: connect(task["port"])))
        lines.append(attempt("workspace", lambda: read(os.path.join(task["workspace"], "inside.txt"))))
        return "\n".join(lines)
