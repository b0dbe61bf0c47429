"""The ``plugin_check`` fixture for a plugin's own tests, as the seeds write them::

from pathlib import Path

pytest_plugins = ["clio_agent.plugins.pytest_plugin"]

def test_marketplace_resolves(plugin_check):
    report = plugin_check(Path(__file__).parents[1])
    assert report.ok, report.render()
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from clio_agent.plugins import CheckReport, check


@pytest.fixture
def plugin_check() -> Callable[..., CheckReport]:
    """Checks a plugin folder or marketplace the way an install does and returns its
    :class:`~clio_agent.plugins.CheckReport` (``ok``, ``problems``, ``render()``)."""
    return check
