"""Test support for the mesh: run the real server process, and lay out state-dir records.

The records are written by hand in the documented shapes (spec 03/04 and
``mmo_kernel.mesh.capabilities``) so the identity checks are exercised
against real files, exactly as the server reads them.
"""

from __future__ import annotations

import hashlib
import json
import os
import select
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mmo_kernel.mesh.capabilities import write_capabilities
from mmo_kernel.mesh.tokens import mint_token
from mmo_kernel.state.files import atomic_write_json

HERE = Path(__file__).resolve().parent
SERVER_ARGV = [sys.executable, "-m", "mmo_kernel.mcp"]
INIT = {
    "jsonrpc": "2.0",
    "id": "init",
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "test", "version": "0"},
    },
}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}


def line(message: Any) -> bytes:
    return message if isinstance(message, bytes) else (json.dumps(message) + "\n").encode()


@dataclass
class Run:
    """What one server process wrote, after its input ended."""

    returncode: int
    stdout: bytes
    stderr: str
    responses: list[dict[str, Any]] = field(default_factory=list)

    def by_id(self, request_id: Any) -> dict[str, Any]:
        found = [r for r in self.responses if r.get("id") == request_id]
        assert len(found) == 1, f"expected one reply with id {request_id!r}, got {found}"
        return found[0]


def run_mesh(
    messages: list[Any],
    env: dict[str, str] | None = None,
    *,
    timeout: float = 20,
) -> Run:
    """Pipe ``messages`` (dicts or raw lines) into a fresh server, close stdin, collect all."""
    proc = subprocess.run(
        SERVER_ARGV,
        input=b"".join(line(m) for m in messages),
        capture_output=True,
        env=env if env is not None else dict(os.environ),
        timeout=timeout,
    )
    responses = [json.loads(raw) for raw in proc.stdout.splitlines()]
    return Run(proc.returncode, proc.stdout, proc.stderr.decode(errors="replace"), responses)


def session_call(env: dict[str, str], *requests: dict[str, Any]) -> Run:
    """initialize + initialized + ``requests`` in one server process."""
    run = run_mesh([INIT, INITIALIZED, *requests], env)
    assert run.returncode == 0, run.stderr
    return run


def req(request_id: Any, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        message["params"] = params
    return message


def call(request_id: Any, tool: str, arguments: Any) -> dict[str, Any]:
    return req(request_id, "tools/call", {"name": tool, "arguments": arguments})


class MeshProc:
    """A long-lived server (fuzzing): write lines, read replies with a deadline."""

    def __init__(self, env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(
            SERVER_ARGV,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
        )
        self._buffer = b""

    def send(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def read_line(self, timeout: float = 10) -> bytes:
        assert self.proc.stdout is not None
        deadline = time.monotonic() + timeout
        fd = self.proc.stdout.fileno()
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise TimeoutError("no reply from the mesh server")
            chunk = os.read(fd, 65536)
            if not chunk:
                raise EOFError(f"mesh server exited (rc={self.proc.poll()})")
            self._buffer += chunk
        raw, self._buffer = self._buffer.split(b"\n", 1)
        return raw

    def finish(self, timeout: float = 30) -> tuple[int, list[dict[str, Any]]]:
        """End input, then read every remaining reply until the server exits.

        Raises TimeoutError when the server is still running after ``timeout``
        (a call it should have stopped is still in flight); the process is
        killed then, so no server outlives the test.
        """
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        replies = []
        try:
            while True:
                replies.append(json.loads(self.read_line(timeout)))
        except EOFError:
            pass
        except TimeoutError:
            self.proc.kill()
            self.proc.wait(timeout=10)
            raise TimeoutError(
                f"the mesh server was still running {timeout} s after its input ended"
            ) from None
        finally:
            assert self.proc.stdout is not None
            self.proc.stdout.close()
        return self.proc.wait(timeout=timeout), replies

    def close(self) -> int:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.close()
        rest = self.proc.stdout.read()
        code = self.proc.wait(timeout=10)
        self.proc.stdout.close()
        self._buffer += rest
        return code


# -- state-dir layout ----------------------------------------------------------

PROFILE: dict[str, Any] = {
    "id": "mesh-team",
    "root_agent": "lead",
    "coordination": {"max_depth": 2, "max_active_agents": 4},
    "agents": {
        "lead": {
            "can_spawn": ["builder", "reviewer", "scout"],
            "native_agents": ["helper"],
            "controls": {},
        },
        "builder": {"can_spawn": ["scout"], "native_agents": ["builder_helper"]},
        "reviewer": {"can_spawn": [], "controls": {"builder": {"actions": ["inspect", "steer"]}}},
        "scout": {},
        "helper": {},
        "builder_helper": {},
    },
}


@dataclass
class SessionFixture:
    """A session laid out on disk, with the clear-text tokens the test may present."""

    state_dir: Path
    session_id: str
    run_id: str
    root_token: str
    native_tokens: dict[str, dict[str, str]]
    snapshot_hash: str = "snap-0001"

    @property
    def snapshot_dir(self) -> Path:
        return self.state_dir / "snapshots" / self.snapshot_hash

    @property
    def dir(self) -> Path:
        return self.state_dir / "sessions" / self.session_id

    def record(self) -> dict[str, Any]:
        return json.loads((self.dir / "session.json").read_text())

    def update(self, **fields: Any) -> None:
        atomic_write_json(self.dir / "session.json", {**self.record(), **fields})

    def root_env(self, **overrides: str | None) -> dict[str, str]:
        env = dict(os.environ)
        env.update(
            {
                "MMO_STATE_DIR": str(self.state_dir),
                "MMO_ROOT_SESSION_ID": self.session_id,
                "MMO_RUN_ID": self.run_id,
                "MMO_CALLER_AGENT": "lead",
                "MMO_CALLER_TOKEN": self.root_token,
            }
        )
        for key in ("MMO_CALLER_JOB_ID", "MMO_CALLER_NATIVE", "MMO_NATIVE_CALLER_TOKEN"):
            env.pop(key, None)
        for key, value in overrides.items():
            if value is None:
                env.pop(key, None)
            else:
                env[key] = value
        return env

    def add_job(
        self,
        agent: str,
        *,
        status: str = "running",
        depth: int = 1,
        job_id: str | None = None,
        session_id: str | None = None,
        run_id: str | None = None,
    ) -> tuple[str, str]:
        """Write a job record; returns ``(job_id, clear-text token)``."""
        token, digest = mint_token()
        job_id = job_id or f"20260101-000000-{agent}-{len(list(self.jobs_dir.glob('*'))):04d}"
        record = {
            "schema_version": 1,
            "package_version": "0.1.0",
            "job_id": job_id,
            "session_id": session_id or self.session_id,
            "run_id": run_id or self.run_id,
            "agent": agent,
            "status": status,
            "depth": depth,
            "created_at": "2026-01-01T00:00:00Z",
            "mcp_caller_token_hash": digest,
            "result_path": str(self.jobs_dir / job_id / "result.md"),
        }
        (self.jobs_dir / job_id).mkdir(parents=True, exist_ok=True)
        atomic_write_json(self.jobs_dir / job_id / "metadata.json", record)
        return job_id, token

    @property
    def jobs_dir(self) -> Path:
        return self.state_dir / "jobs"

    def worker_env(
        self, agent: str, job_id: str, token: str, **overrides: str | None
    ) -> dict[str, str]:
        return self.root_env(
            MMO_CALLER_AGENT=agent, MMO_CALLER_TOKEN=token, MMO_CALLER_JOB_ID=job_id, **overrides
        )


def make_session(
    state_dir: Path,
    *,
    profile: dict[str, Any] | None = None,
    tainted: bool = False,
    status: str = "running",
) -> SessionFixture:
    """Lay out session.json, run.json, capabilities.json and a snapshot profile."""
    root_token, root_hash = mint_token()
    natives = {"lead": {"helper": mint_token()[0]}, "builder": {"builder_helper": mint_token()[0]}}
    fixture = SessionFixture(
        state_dir=state_dir,
        session_id="20260101-000000-mesh-abc123",
        run_id="20260101-000000-run-def456",
        root_token=root_token,
        native_tokens=natives,
    )
    snapshot = state_dir / "snapshots" / fixture.snapshot_hash
    snapshot.mkdir(parents=True, exist_ok=True)
    atomic_write_json(snapshot / "profile.json", profile or PROFILE, mode=0o444)
    digest = hashlib.sha256((snapshot / "profile.json").read_bytes()).hexdigest()
    manifest = {"snapshot_hash": fixture.snapshot_hash, "files": {"profile.json": digest}}
    atomic_write_json(snapshot / "manifest.json", manifest, mode=0o444)
    (fixture.dir / "runs" / fixture.run_id).mkdir(parents=True, exist_ok=True)
    atomic_write_json(
        fixture.dir / "session.json",
        {
            "schema_version": 1,
            "session_id": fixture.session_id,
            "status": status,
            "root_agent": (profile or PROFILE)["root_agent"],
            "snapshot_hash": fixture.snapshot_hash,
            "current_run_id": fixture.run_id,
            "root_mcp_token_hash": root_hash,
            "tainted": tainted,
        },
    )
    atomic_write_json(
        fixture.dir / "runs" / fixture.run_id / "run.json",
        {
            "run_id": fixture.run_id,
            "sequence": 1,
            "kind": "initial",
            "root_mcp_token_hash": root_hash,
        },
    )
    write_capabilities(fixture.dir, root_mcp_token=root_token, native_agent_tokens=natives)
    return fixture
