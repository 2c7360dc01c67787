"""Job traces: filtered, bounded pages of a job's ``events.jsonl`` (spec 04, "Controls").

A trace record is one line of the job's app-server event log with private
reasoning removed. Pages stay under ``TRACE_BOUND_BYTES`` so a reader (an
agent's MCP tool call) never receives an unbounded blob; a record too large
for a page is shortened (``trace_record_truncated``) and can be read in full,
losslessly, with ``read_agent_trace_record``.

``agent_run_ref`` names one agent run whose trace can be paged: for a worker
it is the job id (a job keeps one thread, hence one run, for life).

Only the job's own ``events.jsonl`` is read, never through a symlink: like
``read_result``, a symlinked log is refused (``unsafe trace path``).
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import stat
from pathlib import Path
from typing import Any

from mmo_kernel.jobs.records import TERMINAL_JOB_STATUSES, job_dir, read_job_record

TRACE_BOUND_BYTES = 512 * 1024
"""A page (and any record in it) stays under this many UTF-8 bytes of compact JSON."""
RECORD_LIMIT_BYTES = TRACE_BOUND_BYTES - 8 * 1024
"""A record whose encoding exceeds this is shortened in ``read_trace`` pages."""
TRUNCATED_PREVIEW_CHARS = 4000
MALFORMED_PREVIEW_CHARS = 2000
MAX_TRACE_LIMIT = 500
PRIVATE_REASONING_KEYS = ("content", "encrypted_content", "encryptedContent")
REASONING_DELTA_METHODS = frozenset({"item/reasoning/textDelta"})


def encode(value: Any) -> str:
    """The compact JSON text every size and digest in a trace refers to."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, sort_keys=True)


def _utf8_size(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


def strip_reasoning(value: Any) -> tuple[Any, bool]:
    """``value`` without raw reasoning text; returns ``(filtered, anything_removed)``.

    Reasoning items keep their id and ``summary`` (what the user may see);
    their ``content`` and any encrypted reasoning are dropped, as is the
    ``delta`` of raw-reasoning streaming notifications.
    """
    if isinstance(value, list):
        items = [strip_reasoning(v) for v in value]
        return [v for v, _ in items], any(r for _, r in items)
    if not isinstance(value, dict):
        return value, False
    removed = False
    out: dict[str, Any] = {}
    is_reasoning = value.get("type") == "reasoning"
    for key, item in value.items():
        if key in ("encrypted_content", "encryptedContent") or (
                is_reasoning and key in PRIVATE_REASONING_KEYS):
            removed = True
            continue
        out[key], inner = strip_reasoning(item)
        removed = removed or inner
    if value.get("method") in REASONING_DELTA_METHODS and isinstance(out.get("params"), dict):
        if "delta" in out["params"]:
            out["params"] = {k: v for k, v in out["params"].items() if k != "delta"}
            removed = True
    return out, removed


def filter_line(line: bytes, line_number: int, agent_run_ref: str) -> dict[str, Any]:
    """One events.jsonl line as a full (unbounded) filtered trace record."""
    text = line.decode("utf-8", "replace")
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        value = None
    base = {"record_cursor": line_number, "agent_run_ref": agent_run_ref}
    if not isinstance(value, dict):
        return {**base, "malformed_event": text[:MALFORMED_PREVIEW_CHARS]}
    filtered, removed = strip_reasoning(value)
    record = {**base, **{k: v for k, v in filtered.items() if k not in base}}
    if removed:
        record["private_reasoning_removed"] = True
    return record


def _shortened(record: dict[str, Any], text: str) -> dict[str, Any]:
    raw = record.get("message")
    message: dict[str, Any] = raw if isinstance(raw, dict) else {}
    short = {
        "record_cursor": record["record_cursor"],
        "agent_run_ref": record["agent_run_ref"],
        "trace_record_truncated": True,
        "total_chars": len(text),
        "filtered_sha256": hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest(),
        "preview": text[:TRUNCATED_PREVIEW_CHARS],
        "read_full_record_with": "read_agent_trace_record(agent_run_ref, record_cursor)",
    }
    for key in ("recorded_at", "direction"):
        if isinstance(record.get(key), str):
            short[key] = record[key]
    for key in ("method", "id"):
        if isinstance(message.get(key), (str, int)) and not isinstance(message.get(key), bool):
            short[key] = message[key]
    return short


def bounded(record: dict[str, Any]) -> dict[str, Any]:
    """The record as it appears in a page: itself, or shortened when too large."""
    text = encode(record)
    if _utf8_size(text) <= RECORD_LIMIT_BYTES:
        return record
    return _shortened(record, text)


UNSAFE_TRACE_PHRASE = "unsafe trace path"


def _read_log(path: Path) -> bytes:
    """The log's bytes, opened itself with ``O_NOFOLLOW``: a symlinked or special
    ``events.jsonl`` is refused (``unsafe trace path``), never followed out of the job dir."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        return b""
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise RuntimeError(f"{UNSAFE_TRACE_PHRASE}: {path.name} of job {path.parent.name} "
                               "is a symlink") from None
        raise
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise RuntimeError(f"{UNSAFE_TRACE_PHRASE}: {path.name} of job {path.parent.name} "
                           "is not a regular file")
    with os.fdopen(fd, "rb") as handle:
        return handle.read()


def _lines(path: Path, final: bool) -> list[bytes]:
    """Complete lines of the log; the unterminated tail counts only once the job is final."""
    raw = _read_log(path)
    if not raw:
        return []
    lines = raw.split(b"\n")
    tail = lines.pop()
    if tail and final:
        lines.append(tail)
    return lines


def events_log(job_id: str) -> Path:
    """The job's own ``events.jsonl`` (never a path from the record: it could point anywhere)."""
    return job_dir(job_id) / "events.jsonl"


def trace_page(job_id: str, record: dict[str, Any], cursor: int, limit: int) -> dict[str, Any]:
    """Build one page of filtered records starting at line ``cursor``."""
    if not isinstance(cursor, int) or isinstance(cursor, bool) or cursor < 0:
        raise ValueError(f"cursor must be a non-negative integer line number, got {cursor!r}")
    if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= MAX_TRACE_LIMIT:
        raise ValueError(f"limit must be an integer from 1 to {MAX_TRACE_LIMIT}, got {limit!r}")
    lines = _lines(events_log(job_id), record["status"] in TERMINAL_JOB_STATUSES)
    if cursor > len(lines):
        raise ValueError(f"cursor {cursor} exceeds the trace length ({len(lines)} lines)")
    records: list[dict[str, Any]] = []
    used = _utf8_size(encode({"job_id": job_id, "records": [], "next_cursor": 0}))
    index = cursor
    while index < len(lines) and len(records) < limit:
        if not lines[index].strip():
            index += 1
            continue
        item = bounded(filter_line(lines[index], index, job_id))
        size = _utf8_size(encode(item)) + 1
        if records and used + size > TRACE_BOUND_BYTES - 1024:
            break
        records.append(item)
        used += size
        index += 1
    return {
        "job_id": job_id,
        "agent_run_ref": job_id,
        "status": record["status"],
        "records": records,
        "cursor": cursor,
        "next_cursor": records[-1]["record_cursor"] + 1 if records else cursor,
        "has_more": index < len(lines),
        "private_reasoning_included": False,
        "trace_bound_bytes": TRACE_BOUND_BYTES,
    }


def resolve_agent_run_ref(agent_run_ref: Any) -> str:
    """The job id an ``agent_run_ref`` names (the job id itself, or the record's own ref)."""
    if not isinstance(agent_run_ref, str) or not agent_run_ref.strip():
        raise ValueError("agent_run_ref must be a non-empty string (a job id)")
    job_id = agent_run_ref.strip()
    read_job_record(job_id)  # unknown refs are FileNotFoundError
    return job_id


def record_page(job_id: str, record: dict[str, Any], record_cursor: int, cursor: int,
                max_chars: int) -> dict[str, Any]:
    """One character slice of one full filtered record; every page carries the same digest."""
    for name, value, low in (("record_cursor", record_cursor, 0), ("cursor", cursor, 0),
                             ("max_chars", max_chars, 1)):
        if not isinstance(value, int) or isinstance(value, bool) or value < low:
            raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
    if max_chars > TRACE_BOUND_BYTES // 4:
        raise ValueError(f"max_chars must be at most {TRACE_BOUND_BYTES // 4}")
    lines = _lines(events_log(job_id), record["status"] in TERMINAL_JOB_STATUSES)
    if record_cursor >= len(lines) or not lines[record_cursor].strip():
        raise ValueError(f"record_cursor {record_cursor} names no trace record of {job_id} "
                         f"({len(lines)} lines)")
    full = filter_line(lines[record_cursor], record_cursor, job_id)
    malformed = "malformed_event" in full
    text = encode({"malformed_event": full["malformed_event"]} if malformed else full)
    if cursor > len(text) or (cursor == len(text) and cursor > 0):
        raise ValueError(f"cursor {cursor} exceeds the record length ({len(text)} chars)")
    end = len(text) if malformed else min(len(text), cursor + max_chars)
    content = text[cursor:end]
    return {
        "agent_run_ref": job_id,
        "record_cursor": record_cursor,
        "content": content,
        "cursor": cursor,
        "next_cursor": end if end < len(text) else None,
        "total_chars": len(text),
        "filtered_sha256": hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest(),
        "malformed": malformed,
        "private_reasoning_included": False,
    }


def _authorized(job_id: str, session_id: str, caller_agent: str | None,
                caller_job_id: str | None) -> dict[str, Any]:
    from mmo_kernel.jobs.authority import load_session_job
    from mmo_kernel.jobs.controls import require_control
    from mmo_kernel.sessions.records import read_session_record

    session = read_session_record(session_id)
    record = load_session_job(job_id, session_id)
    require_control(record, session, caller_agent, caller_job_id, "trace")
    return record


def read_trace(job_id: str, session_id: str, caller_agent: str | None = None, cursor: int = 0,
               limit: int = 50, caller_job_id: str | None = None) -> dict[str, Any]:
    """A page of the job's filtered event records from line ``cursor`` (root, ancestors or
    a sibling granted ``trace``); ``next_cursor`` is the line after the last record returned
    (the same cursor when none was), so a live log is tailed by calling again with it."""
    record = _authorized(job_id, session_id, caller_agent, caller_job_id)
    return trace_page(job_id, record, cursor, limit)


def read_agent_trace_record(agent_run_ref: str, session_id: str,
                            caller_agent: str | None = None, record_cursor: int = 0,
                            cursor: int = 0, max_chars: int = 20000,
                            caller_job_id: str | None = None) -> dict[str, Any]:
    """One character page of one full filtered record (for records a trace page shortened)."""
    job_id = resolve_agent_run_ref(agent_run_ref)
    record = _authorized(job_id, session_id, caller_agent, caller_job_id)
    return record_page(job_id, record, record_cursor, cursor, max_chars)


__all__ = ["TRACE_BOUND_BYTES", "bounded", "encode", "filter_line", "read_agent_trace_record",
           "read_trace", "record_page", "resolve_agent_run_ref", "strip_reasoning", "trace_page"]
