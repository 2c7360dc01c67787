"""The gateway's request log: ``<state>/gateway/requests.jsonl``.

One compact JSON line per request, written whole with a single ``write`` on
an ``O_APPEND`` descriptor so concurrent requests never interleave. Records
hold ids, numbers and provider routing metadata only: never a header, a
body, or a credential (secrets are also scrubbed from any text field by
value, as a second line of defence: the request's own credential and header
values, then every credential MMO knows, ``mmo_kernel.state.redaction``).
:class:`RequestRow` is the one list of a row's fields; rows are read through it.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, model_validator

from mmo_kernel.gateway.attribution import checked_id, request_attribution
from mmo_kernel.state.paths import ensure_private_dir, state_dir
from mmo_kernel.state.redaction import redact_value

LOG_NAME = "requests.jsonl"
MAX_TEXT = 500


def gateway_dir() -> Path:
    return state_dir() / "gateway"


def log_path() -> Path:
    return gateway_dir() / LOG_NAME


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class RequestRow(BaseModel):
    """One line of ``requests.jsonl``.

    ``session_id``, ``job_id`` and ``agent`` say who sent the request (from the
    ``X-MMO-*`` headers; null when absent or malformed). Rows written before
    they existed read with nulls; an old free-form ``session`` is taken as the
    session id when it has an id's shape. Unknown fields are kept.
    """

    model_config = ConfigDict(extra="allow")

    at: str | None = None
    route: str | None = None
    model: str | None = None
    status: int | None = None
    latency_ms: float | None = None
    usage: dict[str, Any] | None = None
    provider_metadata: dict[str, Any] | None = None
    session_id: str | None = None
    job_id: str | None = None
    agent: str | None = None
    ttfb_ms: float | None = None
    stream: bool | None = None
    fault: str | None = None
    error: str | None = None
    upstream_model: str | None = None
    finish_reason: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _legacy_session(cls, data: Any) -> Any:
        if isinstance(data, Mapping) and "session" in data:
            data = dict(data)
            legacy = data.pop("session")
            if data.get("session_id") is None:
                data["session_id"] = checked_id(legacy)
        return data

    def as_record(self) -> dict[str, Any]:
        """The row as written: every always-written field, the others only when set."""
        data = self.model_dump()
        return {k: v for k, v in data.items() if k in ALWAYS_WRITTEN or v is not None}


ALWAYS_WRITTEN = frozenset({"at", "route", "model", "status", "latency_ms", "usage",
                            "provider_metadata", "session_id", "job_id", "agent"})
"""The fields every new row carries (null when unknown); the others only when relevant."""


assert ALWAYS_WRITTEN <= RequestRow.model_fields.keys()


def new_record(route: str, headers: Mapping[str, str]) -> dict[str, Any]:
    """The start of a request's row: every always-written field, attributed from ``headers``.

    A plain dict (no model round trip on the request path); the fields are the model's.
    """
    record: dict[str, Any] = dict.fromkeys(ALWAYS_WRITTEN)
    record.update(request_attribution(headers), at=now_iso(), route=route)
    return record


def _scrub(value: Any, secrets: tuple[str, ...]) -> Any:
    if isinstance(value, str):
        for secret in secrets:
            value = value.replace(secret, "[redacted]")
        return value[:MAX_TEXT]
    if isinstance(value, Mapping):
        return {str(k): _scrub(v, secrets) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_scrub(v, secrets) for v in value]
    return value


class RequestLog:
    """Appends request records; ``path`` defaults to the state dir's gateway log."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path or log_path()
        self._lock = threading.Lock()
        self._fd: int | None = None

    def _descriptor(self) -> int:
        if self._fd is None:
            ensure_private_dir(self.path.parent)
            self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        return self._fd

    def write(self, record: Mapping[str, Any], secrets: Iterable[str] = ()) -> None:
        clean = _scrub(redact_value(dict(record)), tuple(s for s in secrets if s and len(s) >= 4))
        line = (json.dumps(clean, separators=(",", ":"), sort_keys=True) + "\n").encode()
        with self._lock:
            os.write(self._descriptor(), line)

    def close(self) -> None:
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None


def read_rows(path: Path | None = None, *, session_id: str | None = None,
              job_id: str | None = None) -> list[RequestRow]:
    """Every row (a torn or foreign line is skipped), optionally only one session's or job's."""
    target = path or log_path()
    try:
        lines = target.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return []
    rows = []
    for line in lines:
        try:
            data = json.loads(line)
            row = RequestRow.model_validate(data) if isinstance(data, dict) else None
        except ValueError:  # pydantic's ValidationError is a ValueError
            continue
        if row is None or (session_id is not None and row.session_id != session_id):
            continue
        if job_id is None or row.job_id == job_id:
            rows.append(row)
    return rows


def read_log(path: Path | None = None, **only: str | None) -> list[dict[str, Any]]:
    """Every row as a mapping (see :func:`read_rows`)."""
    return [row.as_record() for row in read_rows(path, **only)]
