"""What every runner executor receives (spec 12 "runner.toml and the project registry").

``RunnerConfig`` / ``Policy`` are the validated ``runner.toml`` (unknown keys rejected);
``Project`` is one accepted registry entry; ``CallContext`` is handed to an executor
for one forwarded ``call`` frame. Kept free of I/O so every runner module can import it.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, StrictStr

if TYPE_CHECKING:  # the manager lives in runner/process_jobs.py (helper "processes")
    from mmo_kernel.runner.process_jobs import ProcessJobs

ID_PATTERN = r"^[a-z0-9][a-z0-9_-]{0,63}$"
"""``client_id`` and project ``id`` (spec 12)."""
USERNAME_PATTERN = r"^[a-z0-9][a-z0-9._-]{0,63}$"


class Policy(BaseModel):
    """``[policy]`` of runner.toml; defaults as the spec gives them."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    allowed_roots: tuple[Path, ...] = ()
    """Absolute directories (realpath-resolved at load); a project must resolve inside one."""
    allow_raw_shell: StrictBool = False
    allowed_executables: tuple[Path, ...] = ()
    """Absolute paths ``run_process`` may start when raw shell is off."""
    python: StrictStr = Field(default_factory=lambda: sys.executable)
    """Interpreter for python scripts; default the runner's own."""
    max_concurrent_jobs: StrictInt = Field(default=8, ge=1)


class RunnerConfig(BaseModel):
    """A loaded runner.toml. ``token`` is the runner token: never log or repr it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    server_url: StrictStr
    token: StrictStr = Field(repr=False)
    client_id: StrictStr = Field(pattern=ID_PATTERN)
    owner: StrictStr = Field(pattern=USERNAME_PATTERN)
    transport: Literal["websocket"] = "websocket"
    project_registry_dir: Path
    """Absolute; default ``$MMO_CONFIG_DIR/projects.d`` (filled in by ``config.load_config``)."""
    team_profile: StrictStr | None = None
    """Profile for worker teams; None = the settings' default profile."""
    offline: StrictBool = False
    """Bind every team agent to ``local_scripted`` (demos, CI)."""
    allow_insecure_transport: StrictBool = False
    policy: Policy = Field(default_factory=Policy)

    @property
    def runner_url(self) -> str:
        """The link URL: ``server_url`` in ``ws(s)://`` form + ``/api/runners/ws``."""
        base = self.server_url.rstrip("/")
        if base.startswith("https://"):
            base = "wss://" + base[len("https://"):]
        elif base.startswith("http://"):
            base = "ws://" + base[len("http://"):]
        return base + "/api/runners/ws"


@dataclass(frozen=True)
class Project:
    """One accepted project of the registry. ``root`` is a realpath and never leaves the runner."""

    id: str
    name: str
    description: str
    root: Path
    vcs: Literal["git", "none"]

    def wire(self) -> dict[str, Any]:
        """The form hello/projects frames carry: no path."""
        return {"id": self.id, "name": self.name, "description": self.description,
                "vcs": self.vcs}


@dataclass
class CallContext:
    """One forwarded call: the resolved project (None when the tool takes none), the
    whole registry (for transfer and resolve_project_path), the raw MMO session id, the
    calling user and the runner's config, policy, process-job manager and state dir."""

    project: Project | None
    projects: dict[str, Project]
    session_id: str | None
    user: str
    policy: Policy
    config: RunnerConfig
    jobs: ProcessJobs
    state_dir: Path
    tool: str = ""
    extra: dict[str, Any] = field(default_factory=dict)
    """Room for runner-wide services (e.g. the job_event sender); executors may ignore it."""
