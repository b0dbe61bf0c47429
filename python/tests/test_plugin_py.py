"""Plugins declared in Python (``ai.iowarp.clio/plugin.py``), read from the syntax tree as
clio reads them — never run — and agreeing with the same file imported."""

import importlib.util
import json
import os
import subprocess
import sys

import pytest

from clio_agent import _native
from clio_agent._plugin_decl import read_plugin

HERE = os.path.dirname(os.path.abspath(__file__))
SPECTRO = os.path.join(HERE, "plugins", "spectro")
SPECTRO_PY = os.path.join(SPECTRO, "ai.iowarp.clio", "plugin.py")


def _import(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _without_lines(decl):
    decl = {k: v for k, v in decl.items() if k not in ("file", "kind", "class", "line")}
    for key in ("tools", "native_tools", "hooks", "subagents"):
        decl[key] = [{k: v for k, v in item.items() if k != "line"} for item in decl.get(key, [])]
    return decl


def _write(tmp_path, text):
    folder = tmp_path / "ai.iowarp.clio"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "plugin.py"
    path.write_text(text)
    return str(path)


def test_the_syntax_tree_reads_what_the_import_declares():
    read = read_plugin(SPECTRO_PY, SPECTRO)
    assert read["errors"] == []
    module = _import(SPECTRO_PY, "spectro_plugin")
    imported = module.Spectroscopy.declaration()
    assert _without_lines(read["plugin"]) == _without_lines(imported)
    # Both describe alike through clio-plugins.
    described = json.loads(_native.plugin_describe(json.dumps(read["plugin"])))
    assert described == module.Spectroscopy.describe()
    assert [t["name"] for t in described["tools"]] == ["find_peaks", "calibrate"]
    assert described["hooks"][0]["event"] == "tool_call" and described["hooks"][0]["fail_closed"] is True
    assert described["bindings"] == [{"name": "spectro", "host_calls": ["__spectro_plot__"]}]
    assert read["plugin"]["tools"][0]["line"] == 31 and read["plugin"]["line"] == 75
    assert read["host_calls"] == [{"name": "__spectro_plot__", "function": "plot", "line": 59}]


def test_the_seed_hook_denies_a_shell_tool_when_imported():
    from clio_agent.sdk import HookEvent

    module = _import(SPECTRO_PY, "spectro_plugin_hooks")
    ev = HookEvent.from_dict({"event": "PreToolUse", "tool_name": "shell_bash", "hook_id": "no-shell"})
    assert module.no_shell(ev) == {"decision": "deny", "reason": "spectroscopy runs no shell"}
    assert module.no_shell(HookEvent(tool_name="find_peaks")) is None
    # The runner passes the event's JSON as it came: the hook still gets a HookEvent.
    assert (
        module.no_shell({"schema_version": 1, "event": "PreToolUse", "tool_name": "shell_bash"})["decision"] == "deny"
    )
    assert module.peaks(path="a.csv") == ["a.csv", 0.5, "fast"]
    assert module.plot({"series": [1]}) == {"plotted": [1]}


def test_reading_never_runs_the_file(tmp_path):
    marker = tmp_path / "ran"
    path = _write(
        tmp_path,
        f"""from clio_agent.sdk import Plugin
open({str(marker)!r}, "w").write("ran")
raise SystemExit("raised at import")
while True:
    pass
pdf = Plugin("pdf", version="1.0.0", requires=["document-runtime"])
""",
    )
    read = read_plugin(path, str(tmp_path))
    assert read["errors"] == []
    assert read["plugin"]["id"] == "pdf" and read["plugin"]["requires"] == ["document-runtime"]
    assert not marker.exists()


def test_a_pack_instance(tmp_path):
    path = _write(
        tmp_path, 'from clio_agent.sdk import Pack\ndocuments = Pack("documents", ["pdf", "docx"], version="1.0.0")\n'
    )
    read = read_plugin(path)
    assert read["plugin"]["kind"] == "pack" and read["plugin"]["members"] == ["pdf", "docx"]
    described = json.loads(_native.plugin_describe(json.dumps(read["plugin"])))
    assert described["members"] == ["pdf", "docx"]


def test_errors_name_the_file_and_line(tmp_path):
    cases = [
        (
            "from clio_agent.sdk import Plugin\nimport os\np = Plugin(os.environ['X'], version='1.0.0')\n",
            3,
            "not a literal",
        ),
        (
            "from clio_agent.sdk import Plugin, hook\n\n@hook('tool_cal')\ndef h(ev):\n    return None\n\np = Plugin('x')\n",
            3,
            "unknown hook event 'tool_cal'",
        ),
        ("from clio_agent.sdk import Plugin\nclass P(Plugin:\n    id = 'x'\n", 2, "syntax error"),
        ("x = 1\n", 1, "declares no plugin"),
        ("from clio_agent.sdk import Plugin\na = Plugin('a')\nb = Plugin('b')\n", 1, "declares 2 plugins"),
        (
            "from clio_agent.sdk import Plugin, tool\n@tool('positional')\ndef t():\n    return 1\np = Plugin('x')\n",
            2,
            "keyword arguments only",
        ),
    ]
    for text, line, words in cases:
        path = _write(tmp_path, text)
        read = read_plugin(path, str(tmp_path))
        assert read["plugin"] is None, text
        assert read["errors"], text
        first = read["errors"][0]
        assert first["file"] == "ai.iowarp.clio/plugin.py" and first["line"] == line, (text, first)
        assert words in first["message"], (text, first)
        assert first["message"].startswith(f"ai.iowarp.clio/plugin.py:{line}: ")


def test_an_unknown_option_value_is_refused_by_clio_plugins_at_its_line(tmp_path):
    path = _write(
        tmp_path,
        "from clio_agent.sdk import Plugin, tool\n\n\n@tool(callers='sometimes')\ndef t():\n    return 1\n\n\np = Plugin('x', version='1.0.0')\n",
    )
    read = read_plugin(path, str(tmp_path))
    assert read["errors"] == []
    assert read["plugin"]["tools"][0]["line"] == 5
    with pytest.raises(_native.Refusal) as info:
        _native.plugin_describe(json.dumps(read["plugin"]))
    refusal = json.loads(info.value.args[0])
    assert refusal["details"]["problems"][0]["field"] == "tools[0].callers"
    assert refusal["message"].startswith("ai.iowarp.clio/plugin.py:5: tools[0].callers: unknown value")
    assert "direct, code, both" in refusal["message"]


def test_the_command_line(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "clio_agent._plugin_decl", "--root", SPECTRO, SPECTRO_PY], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["plugin"]["id"] == "spectroscopy"
    bad = _write(tmp_path, "x = 1\n")
    done = subprocess.run([sys.executable, "-m", "clio_agent._plugin_decl", bad], capture_output=True, text=True)
    assert done.returncode == 1 and json.loads(done.stdout)["errors"]
    done = subprocess.run([sys.executable, "-m", "clio_agent._plugin_decl"], capture_output=True, text=True)
    assert done.returncode == 2
