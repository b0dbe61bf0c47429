"""The SDK reference's names on the Rust crates (clio_agent._native): the seeds' snippets
as written, agreement with the Rust side and the CLI, and refusals."""

import importlib.util
import inspect
import json
import os
import re
import shutil
import subprocess
import sys

import pytest

from clio_agent.sdk import (
    HOOK_EVENTS,
    Agent,
    AgentDefinitionError,
    AgentSpec,
    Flow,
    HookEvent,
    Pack,
    Plugin,
    PluginRef,
    Prefers,
    PromptFile,
    Requires,
    Step,
    Subagent,
    Workflow,
    WorkflowError,
    hook,
    host_call,
    native_tool,
    tool,
)
from clio_agent.sdk.plugin import PluginDeclarationError
from clio_agent.sdk.versions import VersionRange, VersionRangeError, check_id, parse_version

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def _clio():
    """The clio binary: $CLIO_BIN (the test tier sets it), else the workspace's debug build."""
    found = os.environ.get("CLIO_BIN") or os.path.join(
        os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target")), "debug", "clio"
    )
    if not os.path.isfile(found):
        pytest.skip("no clio binary (cargo build -p clio-cli; `cargo xtask test python` sets CLIO_BIN)")
    return found


def _run_clio(*args, home):
    return subprocess.run([_clio(), *args], capture_output=True, text=True, env=dict(os.environ, CLIO_HOME=str(home)))


def _load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def test_the_reference_import_is_native_backed():
    from clio_agent import _native

    assert _native.__version__
    for name in ("Agent", "AgentSpec", "Workflow", "Plugin", "PluginRef", "hook", "tool"):
        assert name in __import__("clio_agent.sdk", fromlist=["x"]).__all__


# The seeds' SDK reference snippets, as written ---------------------------------------------


class Spectroscopy(Plugin):
    id = "spectroscopy"
    version = "0.1.0"
    requires = ["workspace"]
    model = Requires(context_tokens=64_000)  # optional
    prefers = Prefers(provider="ollama")  # optional


def test_seed_plugin_subclass_describes_as_clio_plugins():
    d = Spectroscopy.describe()
    assert d["id"] == "spectroscopy" and d["version"] == "0.1.0"
    assert d["requires"] == ["workspace"]
    assert d["model"]["requires"]["context_tokens"] == 64_000
    assert d["model"]["prefers"]["provider"] == "ollama"
    assert Spectroscopy().describe() == d


def test_seed_plugin_and_pack_instances():
    pdf = Plugin("pdf", version="1.0.0", requires=["document-runtime"])
    documents = Pack("documents", ["pdf", "docx", "xlsx", "pptx"], version="1.0.0")
    assert pdf.describe()["requires"] == ["document-runtime"]
    assert pdf.describe()["version"] == "1.0.0"
    described = documents.describe()
    assert described["members"] == ["pdf", "docx", "xlsx", "pptx"]
    assert described["id"] == "documents"


def test_seed_plugin_ref():
    ref = PluginRef.parse("clio/pdf@^1.2")
    assert repr(ref) == 'PluginRef(id="pdf", range="^1.2", marketplace="clio")'
    assert ref.accepts("1.4.0") is True
    assert ref.accepts("2.0.0") is False
    assert PluginRef.parse("pdf").range is None and PluginRef.parse("pdf").marketplace is None
    with pytest.raises(VersionRangeError) as info:
        PluginRef.parse("clio/pdf@latest")
    assert info.value.kind == "tag" and info.value.input == "clio/pdf@latest" and info.value.position == 9


def test_seed_tool_with_every_option():
    @tool(
        name="find_peaks",
        description="Find the peaks of a spectrum",
        read_only=True,
        defer=True,
        callers="code",
        permission="ask",
    )
    def peaks(path: str, threshold: float = 0.5, channels: list[int] | None = None) -> list:
        return [path, threshold]

    assert peaks("a.csv") == ["a.csv", 0.5]
    assert peaks.name == "find_peaks" and peaks.read_only and peaks.defer is True
    assert peaks.input_schema["required"] == ["path"]
    assert peaks.input_schema["properties"]["threshold"] == {"type": "number", "default": 0.5}

    @tool
    def plain(x: int):
        """Doubles x."""
        return 2 * x

    assert plain.name == "plain" and plain.description == "Doubles x." and plain(2) == 4
    shell_bash = native_tool("shell_bash", defer=None, callers=None, permission="deny")
    d = Plugin("lab", version="1.0.0", tools=[peaks, plain], native_tools=[shell_bash]).describe()
    by_name = {t["name"]: t for t in d["tools"]}
    assert by_name["find_peaks"]["callers"] == "code" and by_name["find_peaks"]["permission"] == "ask"
    assert by_name["find_peaks"]["defer"] is True and by_name["find_peaks"]["read_only"] is True
    assert d["native_tools"][0]["name"] == "shell_bash" and d["native_tools"][0]["permission"] == "deny"


def test_an_unknown_option_value_fails_when_the_plugin_loads():
    @tool(callers="sometimes")
    def t():
        return 1

    with pytest.raises(PluginDeclarationError, match=r"tools\[0\]\.callers: unknown value \"sometimes\""):
        Plugin("lab", version="1.0.0", tools=[t]).describe()
    with pytest.raises(PluginDeclarationError, match="permission"):
        Plugin("lab", version="1.0.0", native_tools=[native_tool("x", permission="maybe")]).describe()


def test_seed_hook_on_tool_call_fail_closed():
    @hook("tool_call", id="guard", tools="shell_*", fail_closed=True, after=["audit"])
    def guard(ev: HookEvent):
        if ev.tool_name.startswith("shell_"):
            return {"decision": "deny", "reason": "no shells"}
        return None

    ev = HookEvent.from_dict(
        {"schema_version": 1, "hook_id": "guard", "event": "PreToolUse", "tool_name": "shell_bash"}
    )
    assert guard(ev) == {"decision": "deny", "reason": "no shells"}
    d = Plugin("lab", version="1.0.0", hooks=[guard]).describe()
    assert d["hooks"][0]["event"] == "tool_call" and d["hooks"][0]["fail_closed"] is True
    with pytest.raises(ValueError, match="tool_call"):
        hook("tool_cal")


def test_hook_events_are_clio_plugins_table():
    from clio_agent import _native

    rust = json.loads(_native.hook_events())
    assert list(HOOK_EVENTS.items()) == [(e["key"], e["name"]) for e in rust]


def test_hook_ordering_cycle_is_refused_by_rust():
    @hook("stop", id="a", before=["b"])
    def a(ev):
        return None

    @hook("stop", id="b", before=["a"])
    def b(ev):
        return None

    with pytest.raises(PluginDeclarationError, match="cycle"):
        Plugin("lab", version="1.0.0", hooks=[a, b]).describe()


def test_seed_subagent_with_prompt_file():
    reader = Subagent(
        "reader", prompt=PromptFile("prompts/reader.md"), plugins=["pdf"], tools=["read_file"], max_iters=5
    )
    d = Plugin("lab", version="1.0.0", subagents=[reader]).describe()
    assert d["subagents"][0]["prompt"] == {"file": "prompts/reader.md"}
    assert d["subagents"][0]["tools"] == ["read_file"] and d["subagents"][0]["max_iters"] == 5
    sig = inspect.signature(Subagent)
    assert [p for p in sig.parameters] == [
        "id",
        "prompt",
        "plugins",
        "description",
        "tools",
        "prefers",
        "flow",
        "max_iters",
        "structured_outputs",
        "internal",
    ]
    assert sig.parameters["flow"].default == "react" and sig.parameters["max_iters"].default == 0


def test_host_call_is_bound_through_its_binding():
    @host_call("__stream_write__")
    def write(args):
        return {"wrote": args["text"]}

    assert write({"text": "x"}) == {"wrote": "x"}
    d = Plugin("lab", version="1.0.0", bindings={"stream": [write]}).describe()
    assert d["bindings"] == [{"name": "stream", "host_calls": ["__stream_write__"]}]
    with pytest.raises(PluginDeclarationError):
        Plugin("lab", version="1.0.0", bindings={"other": [write]}).describe()


class Base(Agent):
    """A careful assistant."""

    id = "base"
    plugins = ["core", "memory"]
    requires = Requires(tool_calling=True)


class Reviewer(Base):
    id = "reviewer"
    role = "Reviews drafts"
    plugins = ["clio/pdf@^1.2"]
    flow = Flow("council", models=["a", "b"])


def test_seed_agent_chain_frozen_with_spec():
    spec = Reviewer.spec()
    assert spec.layers == ["base", "reviewer"]
    assert spec.plugins == [
        {"reference": "core", "layer": "base"},
        {"reference": "memory", "layer": "base"},
        {"reference": "clio/pdf@^1.2", "layer": "reviewer"},
    ]
    assert spec.flow == {"id": "council", "options": {"models": ["a", "b"]}}
    assert spec.description == "A careful assistant."
    assert spec.name == "reviewer" and spec.version == "0.0.0"
    assert spec.requires == Requires(tool_calling=True)
    assert re.fullmatch(r"[0-9a-f]{64}", spec.checksum)
    assert AgentSpec.from_dict(spec.to_dict()) == spec


def test_agent_definition_errors():
    class NoCore(Agent):
        id = "x"
        plugins = ["memory"]

    class Twice(Agent):
        id = "x"
        plugins = ["core", "pdf@^1", "pdf@^2"]

    class BadRef(Agent):
        id = "x"
        plugins = ["core", "Bad Ref"]

    class Empty(Agent):
        id = ""

    for agent, kind in [
        (NoCore, "missing_core"),
        (Twice, "duplicate_plugin"),
        (BadRef, "bad_reference"),
        (Empty, "empty_id"),
    ]:
        with pytest.raises(AgentDefinitionError) as info:
            agent.spec()
        assert info.value.kind == kind, (agent, info.value)
    with pytest.raises(AgentDefinitionError) as info:
        Twice.spec()
    assert info.value.layer == "x" and info.value.plugin == "pdf"


def test_requires_and_prefers():
    assert Requires(tool_calling=True, context_tokens=8000).union(
        Requires(vision=True, context_tokens=64000)
    ) == Requires(True, True, 64000, 0)
    assert Requires.from_dict({"vision": True}) == Requires(vision=True)
    with pytest.raises(ValueError, match="vison"):
        Requires.from_dict({"vison": True})
    with pytest.raises(ValueError):
        Requires.from_dict({"context_tokens": True})
    with pytest.raises(ValueError, match="modle"):
        Prefers.from_dict({"modle": "x"})
    assert Prefers(model="a").union(Prefers(model="b", effort="high")) == Prefers(model="a", effort="high")


# Agreement with the Rust crates and the CLI -----------------------------------------------


def test_the_same_agent_in_toml_and_python_freezes_alike(tmp_path):
    module = _load(os.path.join(HERE, "agents", "reviewer.py"), "agents_reviewer")
    py = module.Reviewer.spec().to_dict()
    out = _run_clio("agent", "spec", os.path.join(HERE, "agents", "reviewer.toml"), "--json", home=tmp_path)
    assert out.returncode == 0, out.stderr
    toml = json.loads(out.stdout)
    assert py["checksum"] == toml["checksum"]
    assert {k: v for k, v in py.items() if k != "source"} == {k: v for k, v in toml.items() if k != "source"}
    assert py["source"] != toml["source"]


def test_specs_verify_across_python_rust_and_the_cli(tmp_path):
    spec = Reviewer.spec()
    path = tmp_path / "reviewer.spec.json"
    path.write_text(spec.to_json())
    ok = _run_clio("agent", "verify", str(path), "--json", home=tmp_path)
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["checksum"] == spec.checksum
    tampered = spec.to_dict()
    tampered["role"] = "something else"
    path.write_text(json.dumps(tampered))
    bad = _run_clio("agent", "verify", str(path), home=tmp_path)
    assert bad.returncode != 0 and "checksum mismatch" in bad.stderr
    with pytest.raises(AgentDefinitionError) as info:
        AgentSpec.from_dict(tampered)
    assert info.value.kind == "checksum_mismatch" and info.value.expected == spec.checksum
    # A spec frozen by the CLI verifies in Python.
    out = _run_clio("agent", "spec", os.path.join(HERE, "agents", "reviewer.toml"), "--json", home=tmp_path)
    frozen = AgentSpec.from_json(out.stdout)
    assert frozen.id == "reviewer" and frozen.layers == ["base", "reviewer"]
    no_checksum = json.loads(out.stdout)
    del no_checksum["checksum"]
    with pytest.raises(AgentDefinitionError, match="no `checksum`"):
        AgentSpec.from_dict(no_checksum)
    extra = json.loads(out.stdout)
    extra["colour"] = "red"
    with pytest.raises(AgentDefinitionError, match="colour"):
        AgentSpec.from_dict(extra)


def _doc_table(name):
    with open(os.path.join(ROOT, "docs", "version-ranges.md"), encoding="utf-8") as f:
        doc = f.read()
    marker = f"<!-- table: {name} -->"
    lines = doc[doc.index(marker) + len(marker) :].lstrip("\n").splitlines()
    rows = []
    for line in lines:
        if not line.startswith("|"):
            break
        cells = line.replace("\\|", "\x01").strip().strip("|").split("|")
        rows.append([c.replace("\x01", "|") for c in cells])
    return rows[2:]


def _spans(cell):
    return cell.split("`")[1::2]


def test_every_range_of_the_project_range_tests_agrees():
    examples = _doc_table("examples")
    assert len(examples) >= 25
    for rng, desugared, accepts, rejects in examples:
        (text,) = _spans(rng)
        r = VersionRange.parse(text)
        assert r.desugared == _spans(desugared)[0], text
        for v in _spans(accepts):
            assert r.accepts(v), (text, v)
        for v in _spans(rejects):
            assert not r.accepts(v), (text, v)
    for ref, marketplace, id_, rng, accepts, rejects in _doc_table("references"):
        parsed = PluginRef.parse(_spans(ref)[0])
        assert parsed.id == _spans(id_)[0]
        assert parsed.marketplace == (_spans(marketplace) or [None])[0]
        assert parsed.range == (_spans(rng) or [None])[0]
        for v in _spans(accepts):
            assert parsed.accepts(v), (ref, v)
        for v in _spans(rejects):
            assert not parsed.accepts(v), (ref, v)
    refusals = _doc_table("refusals")
    assert len(refusals) >= 40
    parsers = {"range": VersionRange.parse, "reference": PluginRef.parse, "version": parse_version, "id": check_id}
    for cell, as_what, kind, byte in refusals:
        (text,) = _spans(cell)
        with pytest.raises(VersionRangeError) as info:
            parsers[as_what.strip()](text)
        expected = re.sub(r"(?<!^)(?=[A-Z])", "_", _spans(kind)[0]).lower()
        assert info.value.kind == expected, (text, info.value)
        assert info.value.position == int(byte.strip()), (text, info.value)
        assert info.value.input == text


def test_workflow_errors_name_the_first_problem_as_the_cli_does(tmp_path):
    cases = [
        [{"id": "a", "target": "x", "after": ["b"]}, {"id": "b", "target": "y", "after": ["a"]}],
        [{"id": "a", "target": "x"}, {"id": "a", "target": "y"}],
        [{"id": "Bad Id", "target": "x"}],
        [{"id": "a", "target": " "}],
        [{"id": "a", "target": "x", "after": ["nope"]}],
        [{"id": "task", "target": "x"}],
        [{"id": "a", "target": "x", "colour": "red"}],
    ]
    for steps in cases:
        path = tmp_path / "wf.json"
        path.write_text(json.dumps({"steps": steps}))
        cli = _run_clio("workflow", "check", str(path), "--json", home=tmp_path)
        assert cli.returncode != 0
        (cli_problem,) = json.loads(cli.stdout)["problems"][:1]
        with pytest.raises(WorkflowError) as info:
            Workflow.from_dict({"steps": steps})
        assert cli_problem == f"{path}: {info.value}", steps
    ok = Workflow([Step("survey", "evidence_researcher", input="$task"), Step("relate", "x", after=["survey"])])
    assert Workflow.from_dict(ok.to_dict()).to_dict() == ok.to_dict()
    with pytest.raises(WorkflowError) as info:
        Workflow([Step("a", "x", after=["b"]), Step("b", "x", after=["a"])])
    assert info.value.kind == "cycle"


def test_the_wheel_carries_the_native_module_next_to_the_pure_files():
    import clio_agent

    folder = os.path.dirname(clio_agent.__file__)
    assert any(name.startswith("_native") and name.endswith((".so", ".pyd")) for name in os.listdir(folder))
    assert os.path.isfile(os.path.join(folder, "py.typed"))
    assert shutil.which(sys.executable)
