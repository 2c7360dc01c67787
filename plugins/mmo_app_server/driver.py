"""The ``app_server`` execution host driver: detached runner processes around Codex app-server."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from mmo_kernel.plugin import ExecutionHost


class AppServerOptions(BaseModel):
    """``host_options`` of an agent that runs on ``app_server``."""

    model_config = ConfigDict(extra="forbid", strict=True, defer_build=True)
    max_recoveries: int = Field(default=3, ge=0, le=20)
    """How many times a lost app-server is restarted on the same thread."""


def _spawn_runner(module: str, record_id: str, log_path: Path,
                  env: dict[str, str]) -> tuple[int, str]:
    # host_api loads on launch, not on discovery: every process that looks up a driver
    # (the gateway included) imports this module
    from mmo_kernel.host_api import spawn_module

    return spawn_module(module, [record_id], env=env, log_path=log_path)


class AppServerHost(ExecutionHost):
    """Runs an agent in a Codex app-server owned by a detached runner process."""

    name = "app_server"
    Options = AppServerOptions

    def launch_root(self, session_id: str, log_path: Path, env: dict[str, str]) -> tuple[int, str]:
        """Start the root controller for ``session_id``; returns ``(pid, start_token)``."""
        return _spawn_runner("mmo_app_server.root_host", session_id, log_path, env)

    def runtime_digest(self) -> str:
        from .runtime import runtime_digest

        return runtime_digest()

    def launch_job(self, job_id: str, log_path: Path, env: dict[str, str]) -> tuple[int, str]:
        """Start the worker runner for ``job_id``; returns ``(pid, start_token)``."""
        return _spawn_runner("mmo_app_server.job_host", job_id, log_path, env)
