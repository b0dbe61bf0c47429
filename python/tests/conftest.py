import os
import shutil
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


class Plugin:
    """A plugin folder in a temporary directory: ``ai.iowarp.clio/flows/*.py``."""

    def __init__(self, root):
        self.root = str(root)
        os.makedirs(os.path.join(self.root, "ai.iowarp.clio", "flows"), exist_ok=True)

    def copy(self, name):
        """Copies ``tests/flows/<name>`` into the plugin's flows folder; returns its path
        relative to the plugin folder."""
        shutil.copy(os.path.join(HERE, "flows", name), os.path.join(self.root, "ai.iowarp.clio", "flows", name))
        return f"ai.iowarp.clio/flows/{name}"

    def write(self, name, text):
        path = os.path.join(self.root, "ai.iowarp.clio", "flows", name)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        return f"ai.iowarp.clio/flows/{name}"

    def path(self, rel):
        return os.path.join(self.root, rel)


@pytest.fixture
def plugin(tmp_path):
    return Plugin(tmp_path / "plugin")
