"""The seeds' test helper: ``plugin_check`` (``clio_agent.plugins.pytest_plugin``) and the
``clio-agent plugin check`` command, on the example marketplace and a broken copy."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from clio_agent.plugins import check

REPO = Path(__file__).resolve().parents[2]
MARKETPLACE = REPO / "examples" / "marketplace"

# The seeds' test, unchanged.
SEED_TEST = """from pathlib import Path

pytest_plugins = ["clio_agent.plugins.pytest_plugin"]


def test_marketplace_resolves(plugin_check):
    report = plugin_check(Path(__file__).parents[1])
    assert report.ok, report.render()
"""


@pytest.fixture
def marketplace(tmp_path: Path) -> Path:
    copy = tmp_path / "marketplace"
    shutil.copytree(MARKETPLACE, copy, symlinks=True)
    (copy / "tests").mkdir()
    (copy / "tests" / "test_marketplace.py").write_text(SEED_TEST)
    return copy


def _pytest(folder: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(folder / "tests")],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_the_example_marketplace_checks_ok():
    report = check(MARKETPLACE)
    assert report.ok, report.render()
    assert report.render().endswith("warning(s))\n")


def test_the_seeds_test_passes_unchanged_on_the_example_marketplace(marketplace: Path):
    ran = _pytest(marketplace)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "1 passed" in ran.stdout


def test_the_seeds_test_fails_with_the_report_on_a_broken_marketplace(marketplace: Path):
    manifest = marketplace / "plugins" / "materials" / "ai.iowarp.clio" / "plugin.toml"
    manifest.write_text(manifest.read_text().replace('version = "0.1.0"', 'version = "one"', 1))
    ran = _pytest(marketplace)
    assert ran.returncode != 0
    # The assertion message is the rendered report: code, file and line.
    assert "error[invalid_version] plugins/materials/ai.iowarp.clio/plugin.toml:4" in ran.stdout, ran.stdout


def test_a_broken_plugin_reports_each_problem_with_its_file(tmp_path: Path):
    plugin = tmp_path / "bad" / "ai.iowarp.clio"
    (plugin / "flows").mkdir(parents=True)
    (plugin / "plugin.toml").write_text('id = "bad"\nversion = "0.1.0"\n')
    (plugin / "flows" / "broken.py").write_text("class Broken(Flow)\n    id = 'x'\n")
    report = check(tmp_path / "bad")
    assert not report.ok
    assert [p.code for p in report.errors] == ["python_flow_invalid"]
    assert report.errors[0].file == "ai.iowarp.clio/flows/broken.py"
    assert report.errors[0].line == 1
    assert "not ok: 1 error(s)" in report.render()


def _clio_agent() -> list[str]:
    """The installed ``clio-agent`` script, else the module (run outside the clone)."""
    script = Path(sys.executable).parent / "clio-agent"
    return [str(script)] if script.exists() else [sys.executable, "-m", "clio_agent.cli"]


def test_the_clio_agent_command_checks_and_exits_1_on_errors(marketplace: Path, tmp_path: Path):
    ok = subprocess.run(
        [*_clio_agent(), "plugin", "check", str(marketplace)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert ok.stdout.startswith("flow ") or "ok (" in ok.stdout
    missing = subprocess.run(
        [*_clio_agent(), "plugin", "check", str(tmp_path / "nowhere")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert missing.returncode == 1
    assert "not_a_plugin" in missing.stdout
    usage = subprocess.run(_clio_agent(), cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert usage.returncode == 2
