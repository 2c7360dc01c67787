"""Fixtures for the tool-bridge tests: the fixture MCP server as a declared tool server."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kernel.tools.bridges.helpers import FIXTURE_SERVER, FIXTURE_TOOLS

from mmo_kernel.tools.servers import ToolServer


@pytest.fixture(autouse=True)
def _private(mmo_env: Any, mmo_process_guard: Any) -> Iterator[Any]:
    yield mmo_env


@pytest.fixture
def stdio_server(tmp_path: Path) -> Callable[..., ToolServer]:
    """A stdio ``ToolServer`` running the fixture; ``log=True`` records its requests."""

    def make(name: str = "fixture", *extra: str, log: bool = False, **fields: Any
             ) -> ToolServer:
        args = [str(FIXTURE_SERVER), *extra]
        if log:
            args += ["--log", str(tmp_path / f"{name}.requests.jsonl")]
        body = {"name": name, "transport": "stdio", "command": sys.executable, "args": args,
                "enabled_tools": FIXTURE_TOOLS, **fields}
        return ToolServer.model_validate(body)

    return make


@pytest.fixture
def http_server(tmp_path: Path) -> Iterator[Callable[..., str]]:
    """Start the fixture in HTTP mode; returns its ``/mcp`` URL. Stopped at teardown."""
    started: list[subprocess.Popen[bytes]] = []

    def start(answer: str = "json", bearer: str | None = None) -> str:
        env = dict(os.environ)
        env.pop("FIXTURE_BEARER", None)
        if bearer is not None:
            env["FIXTURE_BEARER"] = bearer
        proc = subprocess.Popen([sys.executable, str(FIXTURE_SERVER), "--http", "--answer", answer],
                                stdout=subprocess.PIPE, env=env, start_new_session=True)
        started.append(proc)
        assert proc.stdout is not None
        line = proc.stdout.readline().decode()
        assert line.startswith("PORT "), line
        return f"http://127.0.0.1:{int(line.split()[1])}/mcp"

    yield start
    for proc in started:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
