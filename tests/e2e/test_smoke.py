"""`mmo smoke --offline` on the real Codex: every built-in profile passes, nothing left running."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from .conftest import PROJECT_ROOT

MMO = Path(sys.executable).parent / "mmo"
pytestmark = pytest.mark.real_codex


def test_an_offline_root_smoke_passes_on_real_codex(workspace):
    proc = subprocess.run(
        [str(MMO), "smoke", "access-efficient-escalation-lab",
         "--offline", "--root-only", "--cwd", str(workspace), "--wall", "120", "--json"],
        capture_output=True, text=True, timeout=180, env=dict(os.environ),
        stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["passed"] is True
    (root,) = report["results"]
    assert root["agent"] == "escalation_lead"
    assert root["marker_present"] is True and root["error"] is None


BUILTIN_PROFILES = sorted(p.name for p in (PROJECT_ROOT / "profiles").iterdir()
                          if (p / "profile.toml").is_file())


def _smoke(workspace: Path, profile: str, *flags: str) -> dict:
    proc = subprocess.run(
        [str(MMO), "smoke", profile, "--offline", *flags, "--cwd", str(workspace),
         "--wall", "120", "--json"],
        capture_output=True, text=True, timeout=300, env=dict(os.environ),
        stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(proc.stdout)


def _no_active_session() -> None:
    proc = subprocess.run([str(MMO), "sessions", "--json"], capture_output=True, text=True,
                          timeout=60, env=dict(os.environ), stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["sessions"] == []


def _team(profile: str) -> tuple[str, dict]:
    doc = tomllib.loads((PROJECT_ROOT / "profiles" / profile / "profile.toml").read_text())
    return doc["root_agent"], doc["agents"]


def test_the_builtin_profiles_are_the_ones_mmo_lists() -> None:
    proc = subprocess.run([str(MMO), "profiles", "list", "--json"], capture_output=True,
                          text=True, timeout=60, env=dict(os.environ), stdin=subprocess.DEVNULL)
    listed = json.loads(proc.stdout)
    listed = listed["profiles"] if isinstance(listed, dict) else listed
    assert sorted(p["id"] for p in listed if p.get("origin") == "builtin") == BUILTIN_PROFILES
    assert len(BUILTIN_PROFILES) == 7


@pytest.mark.parametrize("profile", BUILTIN_PROFILES)
def test_every_builtin_profile_passes_its_offline_smoke(workspace, profile):
    """Every agent is exercised (contracts, literal-only and native agents included) and
    each row passes on evidence; the smoke leaves no session running."""
    report = _smoke(workspace, profile)
    root, agents = _team(profile)
    rows = {r["agent"]: r for r in report["results"]}
    assert report["passed"] is True, report
    assert set(rows) == set(agents)
    natives = {n for spec in agents.values() for n in spec.get("native_agents", [])}
    for agent, row in rows.items():
        assert row["marker_present"] is True and row["error"] is None, row
        assert row["backend"] == ("native" if agent == root or agent in natives else "mcp")
    _no_active_session()


def test_workers_only_covers_the_roots_native_agents_but_not_the_root(workspace):
    report = _smoke(workspace, "adaptive-engineering", "--workers-only")
    root, agents = _team("adaptive-engineering")
    rows = {r["agent"]: r for r in report["results"]}
    assert report["passed"] is True, report
    assert set(rows) == set(agents) - {root}
    assert rows["repo_scout"]["backend"] == "native"  # the root's native agent
    _no_active_session()


def test_required_tools_are_called_by_root_native_and_worker_and_judged_per_agent(
        workspace, mmo_env, tmp_path):
    """tool-lab with a declared stdio tool server whose tools need arguments: the root,
    its native agent and the mesh worker each call their own required tools (built
    from the tools' schemas), and each row counts only that agent's calls."""
    folder = mmo_env.config_dir / "tool-mcp.d"
    folder.mkdir()
    server = PROJECT_ROOT / "tests" / "fixtures" / "tool_mcp_server.py"
    (folder / "tools.toml").write_text(
        "schema_version = 1\n\n[tool_mcp_servers.tools]\n"
        f'transport = "stdio"\ncommand = {json.dumps(sys.executable)}\n'
        f"args = [{json.dumps(str(server))}]\n"
        'enabled_tools = ["echo", "add"]\ndefault_tools_approval_mode = "approve"\n')
    profile = tmp_path / "tool-lab"
    shutil.copytree(PROJECT_ROOT / "tests" / "fixtures" / "profiles" / "tool-lab", profile)
    (profile / "agents" / "scout.md").write_text("# scout\n")
    text = (profile / "profile.toml").read_text().replace(
        'can_spawn = ["helper"]', 'can_spawn = ["helper"]\nnative_agents = ["scout"]')
    text += ('\n[agents.helper.tool_mcp_servers]\ntools = { enabled_tools = ["echo"] }\n'
             '\n[agents.scout]\nmodel = "local_scripted__scripted"\npermissions = "read-only"\n'
             'execution_mode = "turn"\n\n[agents.scout.tool_mcp_servers]\n'
             'tools = { enabled_tools = ["echo", "add"] }\n')
    (profile / "profile.toml").write_text(text)
    report = _smoke(workspace, str(profile))
    rows = {r["agent"]: r for r in report["results"]}
    assert report["passed"] is True, report
    assert {a: (r["backend"], r["successful_tools"]) for a, r in rows.items()} == {
        "lead": ("native", ["tools.add", "tools.echo"]),
        "scout": ("native", ["tools.add", "tools.echo"]),
        "helper": ("mcp", ["tools.echo"])}
    _no_active_session()
