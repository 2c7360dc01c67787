"""The ``[mcp_servers.mmo_mesh]`` entry: shape, secrets, agreement with tools/list, real Codex."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import tomlkit
from kernel.mesh.meshkit import make_session, req, session_call
from support.real_codex import AppServer, codex_binary, write_config

from mmo_kernel.mesh.config import mesh_server_config
from mmo_kernel.mesh.surface import tools_for

LEAD_SPAWNS = ["builder", "reviewer", "scout"]


def _root_config(session, **extra):
    return mesh_server_config(
        "root",
        session_id=session.session_id,
        run_id=session.run_id,
        agent="lead",
        enabled_tools=tools_for("root", spawnable=LEAD_SPAWNS, max_depth=2),
        **extra,
    )


def _server_env(config, forwarded):
    """What Codex gives the server: its own environment's forwarded vars plus the fixed env."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MMO_")}
    env.update({name: forwarded[name] for name in config["env_vars"] if name in forwarded})
    env.update(config["env"])
    return env


def _listed(env):
    run = session_call(env, req(2, "tools/list"))
    return [t["name"] for t in run.by_id(2)["result"]["tools"]]


def test_root_entry_shape(mmo_env):
    session = make_session(mmo_env.state_dir)
    config = _root_config(session)
    assert config["command"] == str(Path(sys.executable).parent / "mmo")
    assert os.access(config["command"], os.X_OK)
    assert config["args"] == ["mcp"]
    assert config["env_vars"] == ["MMO_CALLER_TOKEN", "MMO_RUN_ID"]
    assert config["env"] == {
        "MMO_ROOT_SESSION_ID": session.session_id,
        "MMO_CALLER_AGENT": "lead",
        "MMO_STATE_DIR": str(mmo_env.state_dir),
        "MMO_CONFIG_DIR": str(mmo_env.config_dir),
    }
    assert config["tool_timeout_sec"] == 1230
    assert config["default_tools_approval_mode"] == "approve"
    assert config["required"] is True
    assert session.root_token not in json.dumps(config)


def test_worker_entry_forwards_the_job_id_and_scales_the_timeout(mmo_env):
    session = make_session(mmo_env.state_dir)
    config = mesh_server_config(
        "worker",
        session_id=session.session_id,
        run_id=session.run_id,
        agent="builder",
        job_id="20260101-000000-builder-0001",
        lifecycle_timeout_seconds=600,
        enabled_tools=tools_for("worker", spawnable=["scout"], depth=1, max_depth=2),
    )
    assert config["env_vars"] == ["MMO_CALLER_TOKEN", "MMO_RUN_ID", "MMO_CALLER_JOB_ID"]
    assert config["tool_timeout_sec"] == 630
    assert "MMO_CALLER_JOB_ID" not in config["env"] and "MMO_CALLER_TOKEN" not in config["env"]


def test_native_entry_carries_only_its_own_token(mmo_env):
    session = make_session(mmo_env.state_dir)
    native_token = session.native_tokens["lead"]["helper"]
    config = _root_config(session, native=True, native_token=native_token,
                          native_agent="helper")
    assert config["env"]["MMO_CALLER_AGENT"] == "helper"  # its own id, the parent's capability
    assert config["env_vars"] == ["MMO_CALLER_TOKEN", "MMO_RUN_ID"]
    assert config["env"]["MMO_CALLER_NATIVE"] == "1"
    assert config["env"]["MMO_NATIVE_CALLER_TOKEN"] == native_token
    assert session.root_token not in json.dumps(config)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"kind": "admin"}, "root, worker"),
        ({"session_id": "../x"}, "session_id"),
        ({"job_id": "j1"}, "no job_id"),
        ({"native": True}, "go together"),
        ({"native_token": "t" * 40}, "go together"),
        ({"native": True, "native_token": "short"}, "minted"),
        ({"native": True, "native_token": "t" * 40}, "native_agent"),
        ({"native_agent": "helper"}, "native_agent"),
        ({"native": True, "native_token": "t" * 40, "native_agent": "../x"}, "native_agent"),
        ({"enabled_tools": ["agent_spawn", "agent_teleport"]}, "agent_teleport"),
        ({"enabled_tools": ["agent_status", "agent_status"]}, "twice"),
        ({"lifecycle_timeout_seconds": 0}, "positive"),
    ],
)
def test_bad_arguments_are_refused(kwargs, message):
    base = {
        "kind": "root",
        "session_id": "s1",
        "run_id": "r1",
        "agent": "lead",
        "enabled_tools": ["agent_status"],
    }
    base.update(kwargs)
    kind = base.pop("kind")
    with pytest.raises(ValueError, match=message):
        mesh_server_config(kind, **base)


def test_enabled_tools_equal_tools_list_for_root_worker_native_and_tainted(mmo_env):
    session = make_session(mmo_env.state_dir)
    root = _root_config(session)
    assert (
        _listed(
            _server_env(
                root, {"MMO_CALLER_TOKEN": session.root_token, "MMO_RUN_ID": session.run_id}
            )
        )
        == root["enabled_tools"]
    )

    job_id, token = session.add_job("builder", depth=1)
    worker = mesh_server_config(
        "worker",
        session_id=session.session_id,
        run_id=session.run_id,
        agent="builder",
        job_id=job_id,
        enabled_tools=tools_for("worker", spawnable=["scout"], depth=1, max_depth=2),
    )
    forwarded = {
        "MMO_CALLER_TOKEN": token,
        "MMO_RUN_ID": session.run_id,
        "MMO_CALLER_JOB_ID": job_id,
    }
    assert _listed(_server_env(worker, forwarded)) == worker["enabled_tools"]

    native = mesh_server_config(
        "worker",
        session_id=session.session_id,
        run_id=session.run_id,
        agent="builder",
        job_id=job_id,
        native=True,
        native_token=session.native_tokens["builder"]["builder_helper"],
        native_agent="builder_helper",
        enabled_tools=worker["enabled_tools"],
    )
    assert _listed(_server_env(native, forwarded)) == worker["enabled_tools"]

    session.update(tainted=True)
    tainted = mesh_server_config(
        "root",
        session_id=session.session_id,
        run_id=session.run_id,
        agent="lead",
        enabled_tools=tools_for("root", spawnable=LEAD_SPAWNS, max_depth=2, tainted=True),
    )
    assert (
        _listed(
            _server_env(
                tainted, {"MMO_CALLER_TOKEN": session.root_token, "MMO_RUN_ID": session.run_id}
            )
        )
        == tainted["enabled_tools"]
    )


def _codex_home(tmp_path: Path, config: dict) -> Path:
    home = tmp_path / "agent-home"
    home.mkdir()
    write_config(
        home,
        {
            "model": "m",
            "model_provider": "p",
            "model_providers": {
                "p": {"name": "p", "base_url": "http://127.0.0.1:9/v1", "wire_api": "responses"}
            },
            "mcp_servers": {"mmo_mesh": config},
            "features": {"shell_snapshot": False},
        },
    )
    return home


@pytest.mark.real_codex
def test_real_codex_accepts_the_entry_under_strict_config(mmo_env, tmp_path):
    session = make_session(mmo_env.state_dir)
    home = _codex_home(tmp_path, _root_config(session))
    assert "mmo_mesh" in tomlkit.parse((home / "config.toml").read_text())["mcp_servers"]
    proc = subprocess.run(
        [str(codex_binary()), "app-server", "--strict-config", "--print-startup-config"],
        env={**os.environ, "CODEX_HOME": str(home), "HOME": str(tmp_path)},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=30,
    )
    assert proc.returncode == 0, proc.stdout.decode() + proc.stderr.decode()


@pytest.mark.real_codex
def test_real_codex_starts_the_mesh_and_sees_exactly_the_enabled_tools(mmo_env, tmp_path):
    """Codex launches the server with the entry's env and forwarded env_vars and lists its tools.

    ``mmo mcp`` is wired by the CLI owner; this test runs the same server as
    ``python -m mmo_kernel.mcp`` (the entry's fallback form).
    """
    session = make_session(mmo_env.state_dir)
    config = _root_config(session)
    config["command"], config["args"] = sys.executable, ["-m", "mmo_kernel.mcp"]
    home = _codex_home(tmp_path, config)
    forwarded = {
        "MMO_CALLER_TOKEN": session.root_token,
        "MMO_RUN_ID": session.run_id,
        "HOME": str(tmp_path),
    }
    with AppServer(home, tmp_path, env=forwarded) as app:
        seen: list = []
        deadline = time.monotonic() + 60
        app.request(
            "initialize", {"clientInfo": {"name": "mesh-test", "version": "0"}}, deadline, seen
        )
        app.request("thread/start", {}, deadline, seen)
        status = app.request("mcpServerStatus/list", {}, deadline, seen)
    [mesh] = [s for s in status["data"] if s["name"] == "mmo_mesh"]
    assert mesh["serverInfo"]["name"] == "mmo_mesh"
    assert sorted(mesh["tools"]) == sorted(config["enabled_tools"])
    spawn = mesh["tools"]["agent_spawn"]["inputSchema"]
    assert spawn["properties"]["agent"]["enum"] == LEAD_SPAWNS


@pytest.mark.real_codex
def test_real_codex_refuses_a_thread_when_the_mesh_rejects_the_caller(mmo_env, tmp_path):
    session = make_session(mmo_env.state_dir)
    config = _root_config(session)
    config["command"], config["args"] = sys.executable, ["-m", "mmo_kernel.mcp"]
    home = _codex_home(tmp_path, config)
    with AppServer(
        home,
        tmp_path,
        env={"MMO_CALLER_TOKEN": "forged", "MMO_RUN_ID": session.run_id, "HOME": str(tmp_path)},
    ) as app:
        seen: list = []
        deadline = time.monotonic() + 60
        app.request(
            "initialize", {"clientInfo": {"name": "mesh-test", "version": "0"}}, deadline, seen
        )
        with pytest.raises(RuntimeError, match="thread/start failed"):
            app.request("thread/start", {}, deadline, seen)
