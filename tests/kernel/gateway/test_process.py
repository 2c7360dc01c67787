"""The shared gateway process: started on demand, reused, restarted, stopped."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
from support.gateway_harness import Gateway
from support.plugin_fixtures import ECHO_FRAGMENT, EXAMPLE_ROUTE, pip_install, with_site

from mmo_kernel.config.catalog_load import load_catalog
from mmo_kernel.gateway import ensure_gateway, gateway_status, stop_gateway
from mmo_kernel.gateway.process import record_path


def test_gateway_lifecycle(mmo_env, mmo_process_guard):
    first = ensure_gateway()
    try:
        assert first["reused"] is False and first["url"] == f"http://127.0.0.1:{first['port']}"
        assert os.getpgid(first["pid"]) == first["pid"]  # leads its own process group
        assert json.loads(record_path().read_text())["pid"] == first["pid"]
        assert (record_path().stat().st_mode & 0o777) == 0o600
        again = ensure_gateway()
        assert again["reused"] is True and again["pid"] == first["pid"]
        status = gateway_status()
        assert status["running"] and status["healthy"] and status["pid"] == first["pid"]
        client = Gateway(first["url"], mmo_env.state_dir / "gateway" / "requests.jsonl")
        models = client.request("GET", "/v1/models").json()
        assert [m["id"] for m in models["data"]] == sorted(load_catalog().models)

        os.kill(first["pid"], signal.SIGKILL)
        deadline = time.monotonic() + 5
        while psutil.pid_exists(first["pid"]) and time.monotonic() < deadline:
            try:
                if psutil.Process(first["pid"]).status() == psutil.STATUS_ZOMBIE:
                    break
            except psutil.NoSuchProcess:
                break
            time.sleep(0.02)
        assert gateway_status()["running"] is False
        restarted = ensure_gateway()
        assert restarted["reused"] is False and restarted["pid"] != first["pid"]
        assert restarted["port"] == first["port"]  # agents keep their configured url
    finally:
        stopped = stop_gateway()
    assert stopped["stopped"] is True
    assert gateway_status() == {"running": False, "healthy": False, "pid": None, "url": None}
    assert stop_gateway() == {"stopped": False, "pid": None}


def test_configured_port_in_use_fails_with_the_reason(mmo_env, mmo_process_guard):
    import socket

    import pytest

    blocker = socket.socket()
    blocker.bind(("127.0.0.1", 0))
    blocker.listen()
    port = blocker.getsockname()[1]
    settings = f"schema_version = 1\ngateway_port = {port}\n"
    (mmo_env.config_dir / "settings.toml").write_text(settings)
    try:
        with pytest.raises(RuntimeError, match=f"did not start on 127.0.0.1:{port}.*cannot listen"):
            ensure_gateway()
    finally:
        blocker.close()
    assert gateway_status()["running"] is False


MMO = Path(sys.executable).with_name("mmo")


def install_example_route(tmp_path: Path) -> Path:
    """pip-install the third-party route plugin fixture into a private target dir."""
    return pip_install(EXAMPLE_ROUTE, tmp_path / "site", tmp_path / "build")


def gateway_start(site: Path | None) -> dict:
    result = subprocess.run([str(MMO), "gateway", "start", "--json"], capture_output=True,
                            text=True, env=with_site(site), stdin=subprocess.DEVNULL, timeout=60)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_a_gateway_started_before_a_route_plugin_was_installed_is_restarted(
        mmo_env, mmo_process_guard, tmp_path):
    site = install_example_route(tmp_path)
    body = {"model": "echo__echo_small", "stream": True, "input": [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]}]}
    try:
        before = gateway_start(None)  # the plugin is not installed yet
        (mmo_env.config_dir / "catalog.d").mkdir(exist_ok=True)
        (mmo_env.config_dir / "catalog.d" / "echo.toml").write_text(ECHO_FRAGMENT)
        client = Gateway(before["url"], mmo_env.state_dir / "gateway" / "requests.jsonl")
        refused = client.responses("echo", body)
        assert refused.status == 400 and "example_echo" in refused.json()["error"]["message"]
        assert client.log()[-1]["status"] == 400  # and it is in the request log

        after = gateway_start(site)  # a caller that has the plugin
        assert after["reused"] is False and after["pid"] != before["pid"]
        assert after["port"] == before["port"]  # agents keep their configured url
        served = Gateway(after["url"], client.log_path).responses("echo", body)
        assert served.status == 200
        assert "Ahoy from the echo route" in served.body.decode()

        again = gateway_start(None)  # a caller without it: the gateway still has all it needs
        assert again["reused"] is True and again["pid"] == after["pid"]
    finally:
        stop_gateway()
