"""The gateway's request log: ``<state>/gateway/requests.jsonl``.

One compact JSON line per request, written whole with a single ``write`` on
an ``O_APPEND`` descriptor so concurrent requests never interleave. Records
hold ids, numbers and provider routing metadata only: never a header, a
body, or a credential (secrets are also scrubbed from any text field by
value, as a second line of defence: the request's own credential and header
values, then every credential MMO knows, ``mmo_kernel.state.redaction``).
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

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


def read_log(path: Path | None = None) -> list[dict[str, Any]]:
    """Every record (a torn last line from a crash is skipped)."""
    target = path or log_path()
    try:
        lines = target.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return []
    records = []
    for line in lines:
        try:
            records.append(json.loads(line))
        except ValueError:
            continue
    return records
