"""create_session: snapshot choice, pinned Codex, routes, homes, capabilities, audit."""

from __future__ import annotations

import json
import os
import stat
import tomllib
from pathlib import Path

import pytest

from mmo_kernel.profiles.snapshots import compile_profile
from mmo_kernel.sessions.create import create_session
from mmo_kernel.sessions.records import iter_session_records, read_run_record, session_file

OFFLINE = {"*": "local_scripted"}
pytestmark = pytest.mark.usefixtures("gateway_stopped_after", "mmo_standin")


def test_offline_session_has_homes_run_capabilities_and_audit(mmo_workspace, mmo_env):
    record = create_session("adaptive-engineering", cwd=mmo_workspace, bindings=OFFLINE)
    sid = record["session_id"]
    assert record["status"] == "starting" and record["root_agent"] == "orchestrator"
    assert record["codex_binary"].endswith("mmo-codex-standin")
    assert record["route_availability"] == {"local_scripted": {"available": True}}
    run = read_run_record(sid, record["current_run_id"])
    assert run["sequence"] == 1 and run["kind"] == "initial"
    assert run["root_mcp_token_hash"] == record["root_mcp_token_hash"]
    caps = session_file(sid, "capabilities.json")
    assert stat.S_IMODE(caps.stat().st_mode) == 0o600
    token = json.loads(caps.read_text())["root_mcp_token"]
    session_json = session_file(sid, "session.json").read_text()
    assert token not in session_json
    assert not session_file(sid, "lifecycle.lock").exists()
    audit = [json.loads(line) for line in session_file(sid, "audit.jsonl").read_text().splitlines()]
    assert [e["event"] for e in audit] == ["run_started"]
    assert audit[0]["run_id"] == record["current_run_id"]

    home = record["homes"]["orchestrator"]
    config = tomllib.loads(Path(home["config_toml"]).read_text())
    assert config["model"] == "local_scripted__scripted"
    assert config["model_providers"]["local_scripted"]["base_url"] == (
        f"{record['gateway_url']}/routes/local_scripted/v1")
    assert "model_reasoning_effort" not in config  # the scripted model has reasoning none
    assert config["sandbox_workspace_write"] == {"network_access": False}
    assert config["features"]["multi_agent"] is True  # orchestrator has native repo_scout
    assert config["mcp_servers"]["mmo_mesh"]["env_vars"] == ["MMO_CALLER_TOKEN", "MMO_RUN_ID"]
    assert "agent_spawn" in config["mcp_servers"]["mmo_mesh"]["enabled_tools"]
    assert Path(home["model_catalog_json"]).is_file()
    for path in Path(home["home"]).rglob("*"):
        if path.is_file():
            text = path.read_text(errors="replace")
            assert token not in text or path.parent.name == "native-agents"
    worker_home = record["homes"]["implementation_specialist"]
    worker = tomllib.loads(Path(worker_home["config_toml"]).read_text())
    assert worker["mcp_servers"]["mmo_mesh"]["env_vars"] == [
        "MMO_CALLER_TOKEN", "MMO_RUN_ID", "MMO_CALLER_JOB_ID"]
    assert "agent_patch_integrate" not in worker["mcp_servers"]["mmo_mesh"]["enabled_tools"]


def test_every_agent_home_records_a_model_catalog_whatever_its_route(mmo_workspace, mmo_env):
    import hashlib

    # the lab's lead is on Codex's own login, its workers on custom providers; one scripted
    record = create_session("access-efficient-escalation-lab", cwd=mmo_workspace,
                            bindings={"literal_scout": "local_scripted"})
    for agent, home in record["homes"].items():
        assert home.get("model_catalog_json"), f"agent {agent} records no model catalog"
        path = Path(home["model_catalog_json"])
        assert hashlib.sha256(path.read_bytes()).hexdigest() == home["model_catalog_sha256"]
        (entry,) = json.loads(path.read_text())["models"]
        assert entry["slug"], agent
    builtin = record["homes"]["escalation_lead"]
    (entry,) = json.loads(Path(builtin["model_catalog_json"]).read_text())["models"]
    assert entry["slug"] == "gpt-5.1-codex-mini"
    # Codex reads the catalog only where the route asks for it (the scripted slug it
    # does not know); Codex's own models keep its bundled catalog
    configs = {a: tomllib.loads(Path(h["config_toml"]).read_text())
               for a, h in record["homes"].items()}
    assert configs["literal_scout"]["model_catalog_json"] == (
        record["homes"]["literal_scout"]["model_catalog_json"])
    assert "model_catalog_json" not in configs["escalation_lead"]


def test_profile_and_snapshot_cannot_be_combined(mmo_workspace):
    snap = compile_profile("adaptive-engineering", bindings=OFFLINE)
    with pytest.raises(ValueError, match="cannot be combined"):
        create_session("adaptive-engineering", cwd=mmo_workspace,
                       snapshot_hash=snap["manifest"]["snapshot_hash"])
    assert iter_session_records() == []


def test_session_from_snapshot_survives_a_deleted_profile(mmo_workspace, mmo_env):
    from mmo_kernel.profiles.loading import clone_profile

    folder = clone_profile("adaptive-engineering", "my-team")
    snap = compile_profile(folder, bindings=OFFLINE)
    import shutil

    shutil.rmtree(folder)
    record = create_session(snapshot_hash=snap["manifest"]["snapshot_hash"], cwd=mmo_workspace)
    assert record["profile_id"] == "my-team"


@pytest.mark.parametrize("faults, message", [
    (["local_scripted"], "must map"),
    ({"nope": "timeout"}, "unknown route"),
    ({"local_scripted": "meteor"}, "must be one of"),
])
def test_bad_route_faults_are_refused_and_change_nothing(mmo_workspace, faults, message):
    with pytest.raises(ValueError, match=message):
        create_session("adaptive-engineering", cwd=mmo_workspace, bindings=OFFLINE,
                       route_faults=faults)
    assert iter_session_records() == []


def test_injected_fault_is_recorded_for_this_session_only(mmo_workspace):
    faulted = create_session("adaptive-engineering", cwd=mmo_workspace, bindings=OFFLINE,
                             route_faults={"local_scripted": "rate_limit"})
    assert faulted["route_availability"]["local_scripted"] == {
        "available": False, "fault": "rate_limit", "reason": "injected route fault: rate_limit"}
    config = tomllib.loads(Path(faulted["homes"]["orchestrator"]["config_toml"]).read_text())
    assert config["model_providers"]["local_scripted"]["http_headers"]
    clean = create_session("adaptive-engineering", cwd=mmo_workspace, bindings=OFFLINE)
    assert clean["route_availability"]["local_scripted"]["available"] is True
    assert clean["gateway_pid"] == faulted["gateway_pid"]


def test_missing_worker_credentials_degrade_only_that_role(mmo_workspace, monkeypatch):
    monkeypatch.delenv("OPENCODE_API_KEY", raising=False)
    record = create_session("adaptive-engineering", cwd=mmo_workspace,
                            bindings={"orchestrator": "local_scripted"})
    availability = record["route_availability"]
    assert availability["local_scripted"]["available"] is True
    unavailable = [r for r, a in availability.items() if not a["available"]]
    assert unavailable and all("missing credential" in availability[r]["reason"]
                               for r in unavailable)
    assert any("optional route" in w for w in record["profile_warnings"])


def test_a_failed_create_leaves_no_session_behind(mmo_workspace, monkeypatch):
    import mmo_kernel.sessions.homes as homes

    def broken(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(homes, "_write", broken)  # fault injection: a disk error mid-create
    with pytest.raises(OSError, match="disk full"):
        create_session("adaptive-engineering", cwd=mmo_workspace, bindings=OFFLINE)
    assert iter_session_records() == []
    assert os.listdir(Path(os.environ["MMO_STATE_DIR"]) / "sessions") == []
