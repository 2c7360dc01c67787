"""``fork_job``: a new job that starts from a copy of another job's persisted thread (spec 04).

The fork is admitted like any spawn (authority, capacity, write scopes) and
consumes one control revision of the source, under the runtime lock, so a
refused fork changes nothing. The new job's host reads
``fork_from_thread_id`` and calls ``thread/fork`` on it instead of
``thread/start``; the app-server gives the fork its own new thread id.
"""

from __future__ import annotations

from typing import Any

from mmo_kernel.jobs.admission import admit, load_context
from mmo_kernel.jobs.authority import require_authority, require_session_job
from mmo_kernel.jobs.listing import load_job
from mmo_kernel.jobs.records import control_revision, public_job, read_job_record, update_job
from mmo_kernel.jobs.spawn import create_batch, launch
from mmo_kernel.mesh.arguments import SpawnRequest
from mmo_kernel.state.files import runtime_lock
from mmo_kernel.state.records import is_exact_int


def check_revision(record: dict[str, Any], expected_revision: Any) -> None:
    """``stale control revision`` unless ``expected_revision`` is the job's current one."""
    current = control_revision(record)
    if not is_exact_int(expected_revision) or expected_revision != current:
        raise RuntimeError(f"stale control revision for job {record['job_id']}: expected "
                           f"{expected_revision!r}, current {current}")


def _grants(ctx: Any, caller_agent: str, target_agent: str) -> tuple[str, ...]:
    spec = ctx.profile.agents.get(caller_agent)
    grant = spec.controls.get(target_agent) if spec else None
    return tuple(grant.actions) if grant else ()


def fork_job(source_job_id: str, session_id: str, caller_agent: str,
             caller_job_id: str | None, expected_revision: int, task_kind: str | None,
             task: str) -> dict[str, Any]:
    """Fork the source's thread into a new job; returns the new job's public record."""
    load_job(source_job_id)  # reconcile first: a lost runner is suspended, not "running"
    with runtime_lock():
        source = read_job_record(source_job_id)
        require_session_job(source, session_id)
        ctx = load_context(session_id, caller_agent, caller_job_id)
        require_authority(ctx.session, source, caller_agent, caller_job_id, "fork",
                          _grants(ctx, caller_agent, source["agent"]))
        thread = source.get("app_server_thread_id")
        if not thread:
            raise RuntimeError(f"job {source_job_id} has no persisted app-server thread to fork")
        check_revision(source, expected_revision)
        request = SpawnRequest(agent=source["agent"], task_kind=task_kind, task=task,
                               mode=source.get("mode") or "read-only",
                               write_scopes=source.get("write_scope")
                               if source.get("mode") == "workspace-write" else None)
        extra = {"fork_source_job_id": source_job_id, "fork_thread_id": thread,
                 "fork_from_thread_id": thread}
        created = create_batch(ctx, admit(ctx, [request]), [extra])
        update_job(source_job_id, control_revision=control_revision(source) + 1,
                   last_control_action="fork", last_control_status="applied")
    return public_job(launch(created[0]["job_id"]))
