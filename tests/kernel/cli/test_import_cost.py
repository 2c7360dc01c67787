"""What the read commands load: listing and pricing never pull in the compile path.

``mmo jobs`` and ``mmo sessions`` are run by scripts and dashboards all the time;
most of their wall time is interpreter start and imports (issue 15). JSON Schema
validation, the profile checks and the plugin manager belong to compiling a
profile and to running jobs, so a listing of an empty state loads none of them,
and pricing a job from its snapshot loads no profile check either.
"""

from __future__ import annotations

import json
import subprocess
import sys
from decimal import Decimal

import pytest

from .test_costs import PRICED, TURN_PROFILE, _price

HEAVY = ("jsonschema", "mmo_kernel.profiles.checks", "mmo_kernel.plugin.manager", "stevedore")
"""Modules a default listing page does not need."""


def _loaded_after(code: str) -> tuple[dict, str]:
    """Run ``code`` in a fresh interpreter: ``({"loaded": the HEAVY modules it loaded,
    "result": its ``result``}, what it printed before)``."""
    probe = (f"import json, sys\nresult = None\n{code}\n"
             f"print(json.dumps({{'loaded': [m for m in {HEAVY!r} if m in sys.modules], "
             f"'result': result}}))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         stdin=subprocess.DEVNULL, timeout=60)
    assert out.returncode == 0, out.stderr
    printed, _, last = out.stdout.rstrip("\n").rpartition("\n")
    return json.loads(last), printed


@pytest.mark.parametrize("command", ["jobs", "sessions"])
def test_a_default_listing_page_loads_no_schema_checks_and_no_plugins(mmo_env, command):
    probe, listed = _loaded_after("from mmo_kernel.cli import main\n"
                                  f"result = main([{command!r}, '--json'])")
    assert probe["result"] == 0
    assert json.loads(listed) == {command: [], "has_more": False}
    assert probe["loaded"] == []


def test_pricing_a_job_from_its_snapshot_loads_no_profile_checks(mmo_env):
    from mmo_kernel.profiles.snapshots import compile_profile

    _price(mmo_env, 2.5, 10)
    snapshot = compile_profile(TURN_PROFILE, bindings={"*": PRICED})
    agent = snapshot["manifest"]["root_agent"]
    job = {"job_id": "j", "snapshot_hash": snapshot["manifest"]["snapshot_hash"],
           "agent": agent, "usage": {"input_tokens": 1200, "output_tokens": 300}}
    probe, _ = _loaded_after("from mmo_kernel.cli.costs import with_job_cost\n"
                          f"result = with_job_cost({job!r})['cost_usd']")
    assert probe["result"] == float((1200 * Decimal("2.5") + 300 * Decimal("10")) / 1_000_000)
    assert "mmo_kernel.profiles.checks" not in probe["loaded"]
    assert "jsonschema" not in probe["loaded"]


def test_loading_every_plugin_loads_no_http_stack_no_schema_validator_and_no_model():
    """Every command that looks a driver up loads all the plugins (``mmo jobs`` does, for each
    row's ``runtime_current``): what only serving a request or checking a schema needs comes
    with the first such call, not with the plugin."""
    code = ("from mmo_kernel.plugin.manager import plugin_system\n"
            "names = sorted(plugin_system().registry.names('route_drivers'))\n"
            "result = [names, [m for m in ('jsonschema', 'http.client', 'asyncio', 'ssl',\n"
            "          'urllib.request', 'mmo_codex_custom.serving', 'mmo_scripted.model',\n"
            "          'mmo_kernel.tools.mcp_client') if m in sys.modules]]")
    probe, _ = _loaded_after(code)
    names, heavy = probe["result"]
    assert {"codex_custom", "scripted"} <= set(names)
    assert heavy == []
