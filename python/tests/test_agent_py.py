"""Agents defined as Python classes, read from the syntax tree (as ``clio agent spec
FILE.py:Class`` reads them) and agreeing with the classes imported and with TOML."""

import importlib.util
import json
import os
import subprocess
import sys

from clio_agent import _native
from clio_agent._agent_decl import read_agent

HERE = os.path.dirname(os.path.abspath(__file__))
REVIEWER_PY = os.path.join(HERE, "agents", "reviewer.py")


def _import(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def test_the_syntax_tree_reads_the_definition_the_import_gives():
    read = read_agent(REVIEWER_PY, "Reviewer")
    assert read["errors"] == []
    module = _import(REVIEWER_PY, "agents_reviewer_decl")
    assert read["agent"] == module.Reviewer.definition()
    spec = json.loads(_native.agent_spec(json.dumps(read["agent"]), "agents/reviewer.py:Reviewer"))
    assert spec["checksum"] == module.Reviewer.spec().checksum
    assert spec["layers"] == ["base", "reviewer"]


def test_a_middle_class_without_id_and_a_flow_class(tmp_path):
    path = tmp_path / "a.py"
    path.write_text(
        '''from clio_agent.sdk import Agent, Flow


class Review(Flow):
    id = "review"


class Careful(Agent):
    """Checks twice."""

    plugins = ["core"]


class Checker(Careful):
    id = "checker"
    flow = Review
'''
    )
    read = read_agent(str(path), "Checker")
    assert read["errors"] == [], read
    module = _import(str(path), "agents_checker_decl")
    assert read["agent"] == module.Checker.definition()
    assert read["agent"]["layer"][0]["id"] == "careful"
    assert read["agent"]["flow"] == {"id": "review", "options": {}}


def test_reading_an_agent_never_runs_the_file(tmp_path):
    marker = tmp_path / "ran"
    path = tmp_path / "a.py"
    path.write_text(
        f"from clio_agent.sdk import Agent\nopen({str(marker)!r}, 'w')\nraise SystemExit(1)\n\nclass A(Agent):\n    id = 'a'\n"
    )
    read = read_agent(str(path), "A")
    assert read["agent"] == {"id": "a"} and not marker.exists()


def test_errors_name_the_file_and_line(tmp_path):
    cases = [
        (
            "from clio_agent.sdk import Agent\nimport os\n\nclass A(Agent):\n    id = os.environ['X']\n",
            "A",
            5,
            "not a literal",
        ),
        ("from clio_agent.sdk import Agent\n\nclass A(Agent):\n    id = 'a'\n", "B", 1, "no class B"),
        ("class A(dict):\n    id = 'a'\n", "A", 1, "is no Agent"),
        (
            "from clio_agent.sdk import Agent\nclass A(Agent):\n    id = 'a'\nclass B(A):\n    role = 'x'\n",
            "B",
            4,
            "no id of its own",
        ),
        ("class A(:\n", "A", 1, "syntax error"),
    ]
    for text, name, line, words in cases:
        path = tmp_path / "a.py"
        path.write_text(text)
        read = read_agent(str(path), name, str(tmp_path))
        assert read["agent"] is None, text
        (first,) = read["errors"]
        assert first["line"] == line and words in first["message"], (text, first)
        assert first["message"].startswith(f"a.py:{line}: ")


def test_the_command_line():
    done = subprocess.run(
        [sys.executable, "-m", "clio_agent._agent_decl", REVIEWER_PY, "Reviewer"], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["agent"]["id"] == "reviewer"
    done = subprocess.run([sys.executable, "-m", "clio_agent._agent_decl", REVIEWER_PY], capture_output=True, text=True)
    assert done.returncode == 2


def test_the_cli_freezes_a_python_agent_as_python_and_toml_do(tmp_path):
    from test_native_sdk import _run_clio

    py = _run_clio("agent", "spec", f"{REVIEWER_PY}:Reviewer", "--json", home=tmp_path)
    assert py.returncode == 0, py.stderr
    toml = _run_clio("agent", "spec", os.path.join(HERE, "agents", "reviewer.toml"), "--json", home=tmp_path)
    assert toml.returncode == 0, toml.stderr
    frozen, from_toml = json.loads(py.stdout), json.loads(toml.stdout)
    module = _import(REVIEWER_PY, "agents_reviewer_cli")
    assert frozen["checksum"] == from_toml["checksum"] == module.Reviewer.spec().checksum
    assert frozen["source"] == f"{REVIEWER_PY}:Reviewer"
    bad = tmp_path / "bad.py"
    bad.write_text("from clio_agent.sdk import Agent\nimport os\n\nclass A(Agent):\n    id = os.environ['X']\n")
    refused = _run_clio("agent", "spec", f"{bad}:A", home=tmp_path)
    assert refused.returncode != 0
    assert f"{bad}:5:" in refused.stderr and "not a literal" in refused.stderr
