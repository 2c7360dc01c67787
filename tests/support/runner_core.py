"""Helpers for the runner-core tests: a runner.toml, its registry, and one-call dispatch."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from mmo_kernel.runner.config import load_config
from mmo_kernel.runner.context import RunnerConfig
from mmo_kernel.runner.dispatch import dispatch
from mmo_kernel.runner.registry import Registry

JOB_LAB = Path(__file__).resolve().parents[1] / "fixtures" / "profiles" / "job-lab"
RUNNER_TOKEN = "mmo_rt_" + "t0ken" * 8


def write_runner_config(directory: Path, *, server_url: str = "http://127.0.0.1:9",
                        token: str = RUNNER_TOKEN, client_id: str = "laptop",
                        owner: str = "alice", allowed_roots: list[Path] | None = None,
                        team_profile: str | None = str(JOB_LAB), offline: bool = True,
                        extra: str = "") -> Path:
    """``directory/runner.toml`` (0600) with a ``projects.d`` beside it."""
    registry = directory / "projects.d"
    registry.mkdir(parents=True, exist_ok=True)
    roots = ", ".join(f'"{p}"' for p in (allowed_roots or [directory]))
    lines = [f'server_url = "{server_url}"', f'token = "{token}"', f'client_id = "{client_id}"',
             f'owner = "{owner}"', f'project_registry_dir = "{registry}"',
             f"offline = {'true' if offline else 'false'}"]
    if team_profile is not None:
        lines.append(f'team_profile = "{team_profile}"')
    path = directory / "runner.toml"
    path.write_text("\n".join(lines) + "\n" + extra + f"[policy]\nallowed_roots = [{roots}]\n",
                    encoding="utf-8")
    os.chmod(path, 0o600)
    return path


def register_project(config_path: Path, project_id: str, root: Path, **fields: str) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    text = f'id = "{project_id}"\npath = "{root}"\n' + "".join(
        f'{key} = "{value}"\n' for key, value in fields.items())
    path = config_path.parent / "projects.d" / f"{project_id}.toml"
    path.write_text(text, encoding="utf-8")
    return path


class LocalRunner:
    """The runner's dispatch without a link: one forwarded call at a time."""

    def __init__(self, config_path: Path, jobs: Any = None, state_dir: Path | None = None):
        self.config_path = config_path
        self.config: RunnerConfig = load_config(config_path)
        self.registry = Registry(self.config)
        self.registry.rescan()
        self.jobs = jobs
        self.state_dir = state_dir or config_path.parent / "runner-state"

    def call(self, tool: str, arguments: dict[str, Any], *, user: str = "alice",
             session: str | None = None, deadline_unix_ms: int | None = None
             ) -> dict[str, Any]:
        frame = {"type": "call", "call_id": "c1", "tool": tool, "arguments": arguments,
                 "user": user, "session": session or (arguments.get("session_id")
                                                  if isinstance(arguments, dict) else None),
                 "deadline_unix_ms": deadline_unix_ms}
        return dispatch(frame, config=self.config, projects=self.registry.projects(),
                        jobs=self.jobs, state_dir=self.state_dir)

    def ok(self, tool: str, arguments: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        envelope = self.call(tool, arguments, **kwargs)
        assert envelope["success"] is True, envelope
        return envelope["output"]

    def fails(self, tool: str, arguments: dict[str, Any], kind: str,
              **kwargs: Any) -> dict[str, Any]:
        envelope = self.call(tool, arguments, **kwargs)
        assert envelope["success"] is False, envelope
        assert envelope["output"]["error_kind"] == kind, envelope
        assert "\n" not in envelope["error"] and "Traceback" not in envelope["error"]
        return envelope
