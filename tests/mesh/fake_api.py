"""FAKE API LAYER — a stand-in for ``mmo_kernel.api`` used only by tests/mesh/test_dispatch.py.

The jobs layer (spawn_job, wait_for_jobs, ...) does not exist yet, so these
functions record how the mesh called them (JSON lines in ``$MESH_FAKE_API_LOG``)
and answer with records shaped like spec 04's, deliberately full of
supervisor paths so redaction is tested. Job records are read from the real
state dir. The lead replaces these tests with real-jobs tests once the API
lands; nothing in the product imports this module.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from mmo_kernel.errors import AdmissionError

SUPERVISOR = {
    "result_path": "/state/jobs/j/result.md",
    "events_path": "/state/jobs/j/events.jsonl",
    "stderr_path": "/state/jobs/j/stderr.log",
    "control_socket_path": "/run/mmo/j.sock",
    "home": "/state/sessions/s/homes/builder",
    "command": ["/usr/bin/codex", "app-server"],
    "mcp_caller_token_hash": "ab" * 32,
}


def _record(function: str, *args: Any, **kwargs: Any) -> None:
    with open(os.environ["MESH_FAKE_API_LOG"], "a", encoding="utf-8") as handle:
        handle.write(
            json.dumps({"function": function, "args": list(args), "kwargs": kwargs}) + "\n"
        )


def _job(job_id: str, **extra: Any) -> dict[str, Any]:
    return {
        "job_id": job_id,
        "status": "running",
        "patch": {"changed_paths": ["src/a.py"]},
        **SUPERVISOR,
        **extra,
    }


def spawn_job(**kwargs: Any) -> dict[str, Any]:
    _record("spawn_job", **kwargs)
    if kwargs.get("task") == "refuse":
        raise AdmissionError("active-agent limit reached for builder", reason="capacity")
    return {"job": _job("job-new"), "batch_id": "b1"}


def spawn_jobs(specs: list[dict[str, Any]], **kwargs: Any) -> dict[str, Any]:
    _record("spawn_jobs", specs, **kwargs)
    return {
        "atomic": True,
        "accepted": [
            {"job_id": f"job-{i}", "batch_id": "b2", **SUPERVISOR} for i, _ in enumerate(specs)
        ],
    }


def load_job(job_id: str) -> dict[str, Any]:
    _record("load_job", job_id)
    path = Path(os.environ["MMO_STATE_DIR"]) / "jobs" / job_id / "metadata.json"
    if not path.is_file():
        raise FileNotFoundError(f"unknown job {job_id}")
    return json.loads(path.read_text())


def public_job(record: dict[str, Any]) -> dict[str, Any]:
    return {**record, "runtime_current": True}


def wait_for_jobs(job_ids: list[str], **kwargs: Any) -> dict[str, Any]:
    _record("wait_for_jobs", job_ids, **kwargs)
    return {
        "unfinished": [],
        "progress_revisions": {j: 3 for j in job_ids},
        "changed_job_ids": job_ids,
        "timed_out_waiting": False,
        "results": {
            j: {"preview": "done", "truncated": False, "full_result_path": "/x"} for j in job_ids
        },
    }


def read_result(job_id: str, **kwargs: Any) -> dict[str, Any]:
    _record("read_result", job_id, **kwargs)
    if job_id == "missing":
        raise FileNotFoundError("unknown job missing")
    return {
        "job_id": job_id,
        "content": "ok",
        "next_cursor": None,
        "result_path": "/x",
        "structured_result_path": "/y",
        "partial_result_path": "/z",
    }


def cancel_job(job_id: str, **kwargs: Any) -> dict[str, Any]:
    _record("cancel_job", job_id, **kwargs)
    if job_id == "foreign":
        raise PermissionError(f"job {job_id} is not a descendant of the caller")
    return {"jobs": [_job(job_id, status="cancelled")]}


def _disposition(function: str):
    def handler(job_id: str, **kwargs: Any) -> dict[str, Any]:
        _record(function, job_id, **kwargs)
        return _job(job_id, result_state=function)

    return handler


accept_result = _disposition("accept_result")
reject_result = _disposition("reject_result")
integrate_patch = _disposition("integrate_patch")


def control_job(job_id: str, action: str, **kwargs: Any) -> dict[str, Any]:
    _record("control_job", job_id, action, **kwargs)
    return {
        "control_revision": kwargs["expected_revision"] + 1,
        "result": {"socket_path": "/s"},
        "job": _job(job_id),
    }


def inspect_job(job_id: str, **kwargs: Any) -> dict[str, Any]:
    _record("inspect_job", job_id, **kwargs)
    return {"job": _job(job_id), "live": None}


def read_trace(job_id: str, **kwargs: Any) -> dict[str, Any]:
    _record("read_trace", job_id, **kwargs)
    return {"records": [], "next_cursor": None, "private_reasoning_included": False}


def read_agent_trace_record(agent_run_ref: str, **kwargs: Any) -> dict[str, Any]:
    _record("read_agent_trace_record", agent_run_ref, **kwargs)
    return {"content": "{}", "next_cursor": None, "total_chars": 2, "filtered_sha256": "00"}


def fork_job(**kwargs: Any) -> dict[str, Any]:
    _record("fork_job", **kwargs)
    return {"job": _job("job-fork", fork_source_job_id=kwargs["source_job_id"])}
