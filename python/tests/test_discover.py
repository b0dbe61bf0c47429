"""Discovery reads declarations from the syntax tree, never running the file."""

import json
import os
import subprocess
import sys
import textwrap

from clio_agent._discover import discover

PYTHON_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return str(path)


def test_it_lists_each_flow_with_its_declaration(tmp_path):
    path = write(
        tmp_path,
        "campaign.py",
        '''
        from typing import Annotated, Literal, Optional
        from pydantic import Field
        from clio_agent.sdk import Flow

        DEFAULT_CYCLES = 3

        class Campaign(Flow):
            """Runs review cycles."""

            id = "campaign"
            shape = "sequence(terminal('plan'), oneOrMore(terminal('review')))"
            model = "acct/model"
            max_depth = 2; max_concurrency = 4
            max_cycles: Annotated[int, Field(ge=1, le=9)] = DEFAULT_CYCLES
            reviewers: tuple[str, ...] = ("independent_reviewer",)
            mode: Literal["fast", "slow"] = "fast"
            note: Optional[str] = None
            extra = {"a": [1, 2]}
            ratio: float = 1

            async def forward(self, task, ctx):
                return task
        ''',
    )
    out = discover([path], str(tmp_path))
    assert out["errors"] == []
    [flow] = out["flows"]
    assert flow["id"] == "campaign" and flow["class"] == "Campaign"
    assert flow["file"] == "campaign.py" and flow["line"] == 8
    assert flow["description"] == "Runs review cycles."
    assert flow["model"] == "acct/model" and flow["shape"].startswith("sequence(")
    assert flow["limits"] == {"max_depth": 2, "max_concurrency": 4, "max_model_calls": 0, "budget_tokens": 0}
    options = {o["name"]: o for o in flow["options"]}
    assert list(options) == ["max_cycles", "reviewers", "mode", "note", "extra", "ratio"]
    assert options["max_cycles"]["type"] == {"type": "int", "min": 1, "max": 9}
    assert options["max_cycles"]["default"] == 3
    assert options["reviewers"]["type"] == {"type": "list", "items": {"type": "str"}, "tuple": True}
    assert options["reviewers"]["default"] == ["independent_reviewer"]
    assert options["mode"]["type"] == {"type": "one_of", "values": ["fast", "slow"]}
    assert options["note"]["type"] == {"type": "optional", "inner": {"type": "str"}}
    assert options["extra"]["type"] == {"type": "any"} and options["extra"]["default"] == {"a": [1, 2]}
    assert options["ratio"]["default"] == 1.0


def test_it_never_runs_the_file(tmp_path):
    marker = tmp_path / "ran"
    path = write(
        tmp_path,
        "evil.py",
        f"""
        open({str(marker)!r}, "w").write("x")
        from clio_agent.sdk import Flow

        class Evil(Flow):
            id = "evil"
        """,
    )
    out = discover([path])
    assert [f["id"] for f in out["flows"]] == ["evil"]
    assert not marker.exists()


def test_a_syntax_error_is_reported_with_file_and_line(tmp_path):
    path = write(tmp_path, "broken.py", "from clio_agent.sdk import Flow\n\nclass X(Flow)\n    id = 'x'\n")
    out = discover([path], str(tmp_path))
    [err] = out["errors"]
    assert err["file"] == "broken.py" and err["line"] == 3
    assert "syntax error" in err["message"] and err["message"].startswith("broken.py:3:")


def test_a_missing_id_is_reported(tmp_path):
    path = write(
        tmp_path,
        "noid.py",
        """
        from clio_agent.sdk import Flow

        class Base(Flow):
            max_rounds: int = 2

        class Child(Base):
            id = "child"

        class Lost(Flow):
            description = "no id here"
        """,
    )
    out = discover([path], str(tmp_path))
    assert [f["id"] for f in out["flows"]] == ["child"]
    # A base class other flows build on needs no id; a flow of its own does.
    [err] = out["errors"]
    assert err["line"] == 10 and "Lost has no id" in err["message"]
    # The child inherits its base's options.
    assert out["flows"][0]["options"][0]["name"] == "max_rounds"


def test_a_duplicate_id_across_files_names_both(tmp_path):
    a = write(tmp_path, "a.py", "from clio_agent.sdk import Flow\n\nclass A(Flow):\n    id = 'same'\n")
    b = write(tmp_path, "b.py", "from clio_agent.sdk import Flow\n\n\nclass B(Flow):\n    id = 'same'\n")
    out = discover([a, b], str(tmp_path))
    assert [f["file"] for f in out["flows"]] == ["a.py"]
    [err] = out["errors"]
    assert err["file"] == "b.py" and err["line"] == 4
    assert "a.py:3 and b.py:4" in err["message"]


def test_options_of_the_wrong_type_are_reported(tmp_path):
    path = write(
        tmp_path,
        "opts.py",
        """
        from typing import Annotated
        from pydantic import Field
        from clio_agent.sdk import Flow

        def compute():
            return 3

        class O(Flow):
            id = "o"
            rounds: int = "three"
            flag: int = True
            low: Annotated[int, Field(ge=1)] = 0
            names: tuple[str, ...] = ("a", 2)
            made: int = compute()
            weird: set[int] = set()
            missing: int
            max_depth = -1
            description = 5
            fine: str = "ok"
            helper = staticmethod(compute)
        """,
    )
    out = discover([path], str(tmp_path))
    by_line = {e["line"]: e["message"] for e in out["errors"]}
    assert "option rounds: its default 'three' is not an integer" in by_line[11]
    assert "option flag: its default True is not an integer" in by_line[12]
    assert "is not an integer >= 1" in by_line[13]
    assert "is not a list of text" in by_line[14]
    assert "must be a literal" in by_line[15]
    assert "no option type" in by_line[16]
    assert "has no default" in by_line[17]
    assert "max_depth must be an integer >= 0" in by_line[18]
    assert "description must be text" in by_line[19]
    assert len(out["errors"]) == 9
    [flow] = out["flows"]
    assert [o["name"] for o in flow["options"]] == ["fine"]


def test_the_command_prints_json_and_exits_by_its_errors(tmp_path):
    good = write(tmp_path, "good.py", "from clio_agent.sdk import Flow\n\nclass G(Flow):\n    id = 'g'\n")
    bad = write(tmp_path, "bad.py", "class (\n")
    env = dict(os.environ, PYTHONPATH=PYTHON_DIR)
    cmd = [sys.executable, "-m", "clio_agent._discover", "--root", str(tmp_path)]
    ok = subprocess.run(cmd + [good], capture_output=True, text=True, env=env)
    assert ok.returncode == 0 and json.loads(ok.stdout)["flows"][0]["id"] == "g"
    failed = subprocess.run(cmd + [good, bad], capture_output=True, text=True, env=env)
    assert failed.returncode == 1
    assert json.loads(failed.stdout)["errors"][0]["file"] == "bad.py"
    usage = subprocess.run([sys.executable, "-m", "clio_agent._discover"], capture_output=True, text=True, env=env)
    assert usage.returncode == 2
    # Run as a file, as the binary may carry it.
    as_file = subprocess.run(
        [sys.executable, os.path.join(PYTHON_DIR, "clio_agent", "_discover.py"), good],
        capture_output=True,
        text=True,
        env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
    )
    assert as_file.returncode == 0, as_file.stderr


def test_discovery_and_the_class_agree_on_options(tmp_path):
    """The syntax tree and the imported class give the same option types and defaults."""
    source = textwrap.dedent(
        """
        from typing import Literal, Optional
        from clio_agent.sdk import Flow

        class Same(Flow):
            id = "same"
            a: int = 3
            b: tuple[str, ...] = ("x",)
            c: Literal["p", "q"] = "p"
            d: Optional[float] = None
            e: dict = {}
            f = [1]
        """
    )
    path = write(tmp_path, "same.py", source)
    [flow] = discover([path])["flows"]
    scope: dict = {}
    exec(compile(source, path, "exec"), scope)
    specs = scope["Same"].option_specs()
    for option in flow["options"]:
        spec, default = specs[option["name"]]
        assert option["type"] == spec
        assert option["default"] == json.loads(json.dumps(default))
