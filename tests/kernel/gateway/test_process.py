"""The shared gateway process: started on demand, reused, restarted, stopped."""

from __future__ import annotations

import json
import os
import signal
import time

import psutil
from support.gateway_harness import Gateway

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
