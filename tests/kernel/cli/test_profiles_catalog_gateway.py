"""``mmo profiles``, ``mmo catalog``, ``mmo gateway``, ``mmo smoke`` through the executable."""

from __future__ import annotations

import json
from pathlib import Path

from .conftest import TURN_PROFILE, mmo, mmo_json, one_line_error


def test_profiles_list_show_clone_and_compile(mmo_env):
    listed = mmo("profiles", "list").stdout.splitlines()
    assert listed[0].split() == ["ID", "ORIGIN", "DESCRIPTION"]
    assert any(line.startswith("adaptive-engineering ") and " builtin " in line
               for line in listed)
    team = mmo_json("profiles", "show", "adaptive-engineering")
    root = team["agents"][0]
    assert root["root"] and root["agent"] == team["root_agent"] == "orchestrator"
    assert root["route"] == "codex_chatgpt_builtin" and root["permissions"] == "workspace-write"
    shown = mmo("profiles", "show", "adaptive-engineering").stdout
    assert "orchestrator (root)" in shown and "contracts/evidence.json" in shown

    clone = mmo("profiles", "clone", "adaptive-engineering", "my-team")
    path = Path(clone.stdout.strip())
    assert clone.returncode == 0 and path == mmo_env.config_dir / "profiles" / "my-team"
    assert 'id = "my-team"' in (path / "profile.toml").read_text()
    assert any(p["id"] == "my-team" and p["origin"] == "user"
               for p in mmo_json("profiles", "list")["profiles"])
    one_line_error(mmo("profiles", "clone", "adaptive-engineering", "my-team"), "already exists")

    first = mmo("profiles", "compile", "my-team", "--offline")
    assert first.returncode == 0, first.stderr
    digest, folder = (line.split()[1] for line in first.stdout.splitlines())
    assert Path(folder).is_dir() and Path(folder).name == digest
    assert mmo_json("profiles", "compile", "my-team", "--offline")["snapshot_hash"] == digest


def test_validate_prints_problems_as_file_key_message_and_exits_1(mmo_env):
    ok = mmo("profiles", "validate", "adaptive-engineering")
    assert ok.returncode == 0 and "is valid" in ok.stdout
    mmo("profiles", "clone", TURN_PROFILE, "broken")
    toml = mmo_env.config_dir / "profiles" / "broken" / "profile.toml"
    toml.write_text(toml.read_text().replace('root_agent = "escalation_lead"',
                                             'root_agent = "nobody"'))
    bad = mmo("profiles", "validate", str(toml.parent))
    assert bad.returncode == 1
    assert bad.stdout and all(line.startswith(f"{toml}: ") and line.count(": ") >= 2
                              for line in bad.stdout.splitlines())
    assert "root_agent" in bad.stdout
    as_json = mmo("profiles", "validate", "broken", "--json")
    assert as_json.returncode == 1
    assert json.loads(as_json.stdout) == {"profile": "broken", "valid": False,
                                          "problems": bad.stdout.splitlines()}


def test_catalog_routes_say_whether_they_work_now(monkeypatch):
    routes = {r["id"]: r for r in mmo_json("catalog", "routes")["routes"]}
    assert routes["local_scripted"]["available"] is True
    assert routes["openai_responses_api"]["available"] is False
    table = mmo("catalog", "routes").stdout
    assert "no: missing credential OPENAI_API_KEY" in table
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-real-key")
    out = mmo("catalog", "routes", "--json")
    now = {r["id"]: r for r in json.loads(out.stdout)["routes"]}
    assert now["openai_responses_api"]["available"] is True
    assert "sk-test-not-a-real-key" not in out.stdout


def test_catalog_models_table_and_route_filter():
    scripted = mmo("catalog", "models", "--route", "local_scripted").stdout.splitlines()
    assert scripted[0].split()[:3] == ["MODEL", "ROUTE", "UPSTREAM"]
    assert len(scripted) == 2 and scripted[1].split()[0] == "local_scripted__scripted"
    assert scripted[1].split()[-1] == "none"
    one_line_error(mmo("catalog", "models", "--route", "nowhere"), "unknown route 'nowhere'")


def test_gateway_start_status_stop(mmo_env):
    assert mmo_json("gateway", "status")["running"] is False
    started = mmo("gateway", "start")
    assert started.returncode == 0 and started.stdout.startswith("gateway started: http://")
    try:
        status = mmo_json("gateway", "status")
        assert status["running"] and status["healthy"] and status["url"] in started.stdout
        assert "already running" in mmo("gateway", "start").stdout
    finally:
        stopped = mmo("gateway", "stop")
    assert stopped.returncode == 0 and f"pid {status['pid']}" in stopped.stdout
    assert mmo("gateway", "stop").stdout == "gateway was not running\n"


def test_smoke_exit_code_follows_the_report(live):
    """The stand-in never says a smoke marker, so its root fails the judgement: exit 1."""
    out = mmo("smoke", TURN_PROFILE, "--offline", "--root-only", "--wall", "60",
              "--cwd", str(live))
    assert out.returncode == 1, out.stderr
    rows = out.stdout.splitlines()
    assert rows[0].split()[:3] == ["AGENT", "BACKEND", "RESULT"]
    assert rows[1].split()[:3] == ["escalation_lead", "native", "FAIL"]
    assert "marker MMO_SMOKE_OK_escalation_lead_" in rows[1] and "missing" in rows[1]
    assert rows[-1] == f"smoke FAILED for {TURN_PROFILE}"
