"""Session and run records on disk: strict models, atomic writes, enumeration (spec 03).

A session directory is ``<state>/sessions/<session_id>/`` with ``session.json``
and exactly one ``runs/<run_id>/run.json``. Records are plain dicts that omit
fields not set yet; the pydantic models here only *check* them, so a reader
never accepts a record that a careless writer produced.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator

from mmo_kernel import package_version
from mmo_kernel.errors import RecordError
from mmo_kernel.sessions.index_rows import publish_session
from mmo_kernel.state.files import (
    MMO_SCHEMA_VERSION,
    atomic_write_json,
    ensure_state_layout,
    safe_path,
)
from mmo_kernel.state.paths import ensure_private_dir, state_dir
from mmo_kernel.state.records import StrictRecord, read_record, unreadable_row, validate_model

SESSION_STATUSES = ("starting", "running", "detached", "paused", "suspended", "cancelling",
                    "completed", "failed", "cancelled", "stopped")
TERMINAL_SESSION_STATUSES = frozenset({"completed", "failed", "cancelled", "stopped"})
SessionStatus = Literal["starting", "running", "detached", "paused", "suspended", "cancelling",
                        "completed", "failed", "cancelled", "stopped"]

RETIRED_SESSION_FIELDS = ("progress_interval_seconds", "timeout_seconds", "execution_policy",
                          "active_work_seconds", "active_work_cap_seconds",
                          "automatic_renewal_enabled")
CREATING_MARKER = ".creating"
"""Present in a session directory until ``create_session`` has written its record."""
_DRIVER_NAME = re.compile(r"^[a-z][a-z0-9_]{0,63}$")
_ID_PATTERN = re.compile(r"^[0-9]{8}-[0-9]{6}-[a-z0-9-]{1,40}-[0-9a-f]{6}$")


class HomeRecord(StrictRecord):
    """``homes[agent]``: one agent's private CODEX_HOME and what was generated in it."""

    home: str
    config_toml: str | None = None
    config_sha256: str | None = None
    agents_md: str | None = None
    agents_md_sha256: str | None = None
    orchestration_skill: str | None = None
    orchestration_skill_sha256: str | None = None
    native_agent_files: dict[str, str] = Field(default_factory=dict)
    model_catalog_json: str | None = None
    model_catalog_sha256: str | None = None
    direct_header_envs: list[str] = Field(default_factory=list)
    tool_mcp_envs: list[str] = Field(default_factory=list)
    tool_mcp_http_envs: list[str] = Field(default_factory=list)
    route_envs: list[str] = Field(default_factory=list)


class RouteAvailability(StrictRecord):
    available: bool
    reason: str | None = None
    fault: str | None = None


class SessionRecord(StrictRecord):
    """The contract subset of ``session.json`` (spec 03, "Session fields")."""

    schema_version: int
    package_version: str
    session_id: str
    status: SessionStatus
    profile_id: str
    snapshot_hash: str
    cwd: str
    session_kind: Literal["noninteractive", "interactive", "external"]
    root_agent: str
    created_at: str
    homes: dict[str, HomeRecord] = Field(default_factory=dict)
    codex_binary: str | None = None
    route_availability: dict[str, RouteAvailability] = Field(default_factory=dict)
    route_faults: dict[str, str] = Field(default_factory=dict)
    gateway_pid: int | None = None
    gateway_url: str | None = None
    profile_warnings: list[str] = Field(default_factory=list)
    audit_path: str | None = None
    current_run_id: str | None = None
    last_run_id: str | None = None
    run_sequence: int | None = None
    run_created_at: str | None = None
    root_mcp_token_hash: str | None = None
    root_thread_id: str | None = None
    root_pid: int | None = None
    root_pgid: int | None = None
    root_start_token: str | None = None
    root_client_pid: int | None = None
    root_client_start_token: str | None = None
    root_app_server_pid: int | None = None
    root_app_server_pgid: int | None = None
    root_app_server_start_token: str | None = None
    root_control_socket: str | None = None
    root_control_socket_ready: bool | None = None
    root_control_revision: int | None = None
    root_host_package_version: str | None = None
    root_host_runtime_digest: str | None = None
    active_root_turn_id: str | None = None
    root_last_turn_id: str | None = None
    root_execution_host: str | None = None
    """A driver name; whether a plugin provides it is checked where the host is used
    (``installed_root_host``), so reading a record never loads every plugin."""
    root_execution_mode: Literal["goal", "turn"] | None = None
    root_goal_token_budget: int | None = None
    root_goal_status: str | None = None
    root_goal_objective: str | None = None
    root_goal_bootstrap_pending: bool | None = None
    root_recovery_attempts: int | None = None
    root_completion_deferred: bool | None = None
    root_completion_deferred_jobs: list[str] | None = None
    root_compacted_at: str | None = None
    root_compaction_error: str | None = None
    root_usage: dict[str, int] | None = None
    root_images: list[str] | None = None
    root_continue_input: str | None = None
    cold_pause_pending: bool | None = None
    paused_job_ids: list[str] | None = None
    stopped_jobs: list[str] | None = None  # jobs stopped in place when the session ended
    pending_requests: list[dict[str, Any]] | None = None
    prompt: str | None = None
    sandbox_mode: str | None = None
    wall_timeout_seconds: float | None = None
    result_path: str | None = None
    partial_result_path: str | None = None
    result_kind: Literal["final", "partial"] | None = None
    error: str | None = None
    failure: dict[str, Any] | None = None
    resume_error: str | None = None
    tainted: bool | None = None
    taint_reasons: list[dict[str, Any]] | None = None
    external_client_id: str | None = None
    """``external`` sessions (spec 12): the ``mmo runner`` client id serving the session."""
    external_lead: str | None = None
    """``external`` sessions: the user whose external MCP host holds the root seat."""
    team_materialized_at: str | None = None
    """``external`` sessions: when the homes and gateway were added (first worker spawn)."""
    started_at: str | None = None
    finished_at: str | None = None
    last_active_at: str | None = None

    @field_validator("root_execution_host")
    @classmethod
    def _host_name(cls, value: str | None) -> str | None:
        if value is not None and not _DRIVER_NAME.match(value):
            raise ValueError(f"root execution host is invalid: {value!r} is not a driver name")
        return value

    @property
    def run_id(self) -> str | None:
        """The run the session's events belong to: the active run, else the last one."""
        return self.current_run_id or self.last_run_id


def session_run_id(record: Mapping[str, Any]) -> str | None:
    """``SessionRecord.run_id`` of a raw record dict, without validating all of it."""
    return SessionRecord.model_construct(current_run_id=record.get("current_run_id"),
                                         last_run_id=record.get("last_run_id")).run_id


class RunRecord(StrictRecord):
    """``runs/<run_id>/run.json``: the session's one run, kept for its whole life."""

    schema_version: int
    package_version: str
    run_id: str
    session_id: str
    sequence: int
    kind: str
    status: SessionStatus
    created_at: str
    root_mcp_token_hash: str
    finished_at: str | None = None


def utc_now() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds")


def new_record_id(label: str) -> str:
    """``YYYYMMDD-HHMMSS-<slug>-<hex6>``: ids sort by creation time."""
    slug = re.sub(r"[^a-z0-9]+", "-", label.lower()).strip("-")[:40] or "x"
    return f"{datetime.now(UTC):%Y%m%d-%H%M%S}-{slug}-{secrets.token_hex(3)}"


def check_record_id(value: str, kind: str) -> str:
    if not isinstance(value, str) or not _ID_PATTERN.match(value):
        raise FileNotFoundError(f"no {kind} {value!r}: not an MMO {kind} id")
    return value


def sessions_root() -> Path:
    return safe_path(state_dir(), "sessions", what="sessions directory")


def session_dir(session_id: str) -> Path:
    """The session's directory; never follows a symlink inside the state dir."""
    check_record_id(session_id, "session")
    return safe_path(state_dir(), "sessions", session_id, what="session directory")


def session_file(session_id: str, *parts: str) -> Path:
    return safe_path(state_dir(), "sessions", session_id, *parts, what="session file")


def installed_root_host(record: Mapping[str, Any]) -> str:
    """The session's ``root_execution_host``, refused unless an installed plugin provides it."""
    from mmo_kernel.plugin.manager import driver_names

    name = record.get("root_execution_host")
    installed = driver_names("execution_hosts")
    if name not in installed:
        raise RecordError(
            f"session {record.get('session_id')}: root execution host is invalid: {name!r} is not "
            f"an installed execution host (installed: {', '.join(installed) or 'none'}); is its "
            "plugin installed? Run `mmo plugins`.")
    return str(name)


def _check_session(doc: dict[str, Any], where: str = "session record") -> dict[str, Any]:
    """Validate through the model; a problem is one readable line, never a pydantic dump."""
    validate_model(SessionRecord, doc, where)
    return doc


def _check_run(doc: dict[str, Any]) -> dict[str, Any]:
    sequence = doc.get("sequence")
    if not (isinstance(sequence, int) and not isinstance(sequence, bool) and sequence == 1):
        raise RecordError(f"run {doc.get('run_id')!r}: run sequence must be exactly 1, "
                          f"got {sequence!r}")
    if doc.get("kind") != "initial":
        raise RecordError(f"run {doc.get('run_id')!r}: run kind must be initial, "
                          f"got {doc.get('kind')!r}")
    validate_model(RunRecord, doc, f"run {doc.get('run_id')!r}")
    return doc


def read_session_record(session_id: str) -> dict[str, Any]:
    """The strictly checked record; raises for missing, unreadable or foreign records."""
    path = session_file(session_id, "session.json")
    if not path.exists():
        raise FileNotFoundError(f"no MMO session {session_id!r}")
    return read_record(path, _validator(SessionRecord, str(path)),
                       retired=RETIRED_SESSION_FIELDS, check_package=True, kind="session",
                       schema_kind="session state")


def _validator(model: type[StrictRecord], where: str = "session record"):
    def check(doc: dict[str, Any]) -> dict[str, Any]:
        if model is RunRecord:
            return _check_run(doc)
        return _check_session(doc, where)
    return check


def write_session_record(record: dict[str, Any]) -> dict[str, Any]:
    """Validate and atomically persist a session record."""
    ensure_state_layout()
    record = {**record, "schema_version": MMO_SCHEMA_VERSION, "package_version": package_version()}
    _check_session(record)
    directory = session_dir(record["session_id"])
    directory.mkdir(mode=0o700, exist_ok=True)
    path = session_file(record["session_id"], "session.json")
    atomic_write_json(path, record)
    publish_session(record, path)  # the listing index row; never fails the write
    return record


def read_run_record(session_id: str, run_id: str) -> dict[str, Any]:
    path = session_file(session_id, "runs", run_id, "run.json")
    return read_record(path, _validator(RunRecord), check_package=True, kind="session",
                       schema_kind="run state")


def write_run_record(record: dict[str, Any]) -> dict[str, Any]:
    record = {**record, "schema_version": MMO_SCHEMA_VERSION, "package_version": package_version()}
    _check_run(record)
    ensure_private_dir(session_file(record["session_id"], "runs"))
    ensure_private_dir(session_file(record["session_id"], "runs", record["run_id"]))
    atomic_write_json(session_file(record["session_id"], "runs", record["run_id"], "run.json"),
                      record)
    return record


def run_ids(session_id: str) -> list[str]:
    """Every run directory of the session (a healthy session has exactly one)."""
    runs = session_file(session_id, "runs")
    if not runs.exists():
        return []
    return sorted(p.name for p in runs.iterdir())


def iter_session_records(include_unreadable: bool = False) -> list[dict[str, Any]]:
    """Every session record, newest first; a pure read (no reconciliation).

    An invalid record is reported, never skipped: it raises
    ``RuntimeError("invalid session state ...")`` naming the directory, or,
    with ``include_unreadable`` (what listings for people use), it is listed as
    an ``unreadable`` row (``unreadable_row``) and the others still are.
    """
    root = sessions_root()
    if not root.exists():
        return []
    records = []
    for entry in sorted(root.iterdir(), reverse=True):
        if entry.name.startswith(".") or (entry / CREATING_MARKER).exists():
            continue  # hidden, or a session still being created
        try:
            records.append(read_session_record(entry.name))
        except (ValueError, RuntimeError, FileNotFoundError, OSError) as exc:
            if not include_unreadable:
                raise RuntimeError(f"invalid session state in {entry}: {exc}") from exc
            if entry.is_dir():  # else removed meanwhile: nothing to list
                records.append(unreadable_row("session_id", entry.name,
                                              entry / "session.json", exc))
    return records
