"""``finish_coding_task``, runner side (spec 12 "Review, finish and work results").

The runner verifies the outputs (hashed now, streamed, in request order, no
timestamps), judges the outcome from the session's latest validation run and its
still-running process jobs, and reports a short git status; the server records the
work result from this output.
"""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path
from typing import Any

from mmo_kernel.project_tools.envelope import ToolFailure
from mmo_kernel.project_tools.paths import leaf_stat, open_parent, shown, split_relative
from mmo_kernel.runner.context import CallContext, Project
from mmo_kernel.runner.review import git_status
from mmo_kernel.runner.sessions import require_session

CHUNK = 1024 * 1024
CHANGES_MAX = 200
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0) | getattr(
    os, "O_NONBLOCK", 0)


def _unavailable(path: str, reason: str) -> dict[str, Any]:
    return {"path": path, "status": "unavailable", "reason": reason}


def _missing(path: str, reason: str = "no such file") -> dict[str, Any]:
    return {"path": path, "status": "missing", "reason": reason}


def _hash_fd(fd: int) -> tuple[str, int]:
    digest = hashlib.sha256()
    size = 0
    with os.fdopen(fd, "rb", closefd=True) as handle:
        while chunk := handle.read(CHUNK):
            digest.update(chunk)
            size += len(chunk)
    return digest.hexdigest(), size


def verify_output(root: Path, rel: Any) -> dict[str, Any]:
    """One ``task_outputs`` item; never raises for a bad path (it is the item's verdict)."""
    path = shown(rel) if isinstance(rel, str) else "<path>"
    try:
        parts = split_relative(rel)
    except ToolFailure as exc:
        reason = ("outside the project" if exc.kind == "path_outside_project"
                  else "not a valid project-relative path")
        return _unavailable(path, reason)
    if not parts:
        return _unavailable(path, "the project root is a directory, not a regular file")
    canonical = "/".join(parts)
    try:
        dir_fd, _ = open_parent(root, parts, canonical)
    except ToolFailure as exc:
        if exc.kind == "file_not_found":
            return _missing(path)
        return _unavailable(path, "goes through a symlink" if exc.kind == "path_outside_project"
                            else "not reachable inside the project")
    try:
        info = leaf_stat(dir_fd, parts[-1])
        if info is None:
            return _missing(path)
        if stat.S_ISLNK(info.st_mode):
            return _unavailable(path, "a symlink")
        if stat.S_ISDIR(info.st_mode):
            return _unavailable(path, "a directory, not a regular file")
        if not stat.S_ISREG(info.st_mode):
            return _unavailable(path, "a special file, not a regular file")
        try:
            fd = os.open(parts[-1], _READ_FLAGS, dir_fd=dir_fd)
        except FileNotFoundError:
            return _missing(path)
        except OSError as exc:
            return _unavailable(path, f"unreadable: {exc.strerror or 'cannot open'}")
    finally:
        os.close(dir_fd)
    if not stat.S_ISREG(os.fstat(fd).st_mode):  # swapped after the check
        os.close(fd)
        return _unavailable(path, "not a regular file")
    try:
        sha256, size = _hash_fd(fd)
    except OSError as exc:
        return _unavailable(path, f"unreadable: {exc.strerror or 'read failed'}")
    return {"path": path, "status": "verified", "sha256": sha256, "file_bytes": size}


def task_outputs(root: Path, outputs: list[Any]) -> dict[str, Any]:
    items = [verify_output(root, rel) for rel in outputs]
    counts = {status: sum(i["status"] == status for i in items)
              for status in ("verified", "missing", "unavailable")}
    return {"requested_count": len(items), "verified_count": counts["verified"],
            "missing_count": counts["missing"], "unavailable_count": counts["unavailable"],
            "items": items}


def task_outcome(validation: str, outputs: dict[str, Any] | None,
                 running: list[str]) -> dict[str, Any]:
    reasons = []
    if outputs is not None and outputs["verified_count"] != outputs["requested_count"]:
        reasons.append("task_outputs_unverified")
    if validation == "failed":
        reasons.append("validation_failed")
    if running:
        reasons.append("jobs_still_running")
    return {"status": "fail" if reasons else "pass", "blocking": bool(reasons),
            "blocking_reasons": reasons, "validation": validation}


def changes(project: Project) -> dict[str, Any]:
    """A short git status: ``{"vcs", "files": [{"path", "status"}], "total_count",
    "truncated"}`` (porcelain XY codes, project-relative paths, <= 200 files)."""
    if project.vcs != "git":
        return {"vcs": "none", "files": [], "total_count": 0, "truncated": False}
    files = git_status(project.root)
    if files is None:
        return {"vcs": "git", "files": [], "total_count": 0, "truncated": False,
                "error": "git status failed"}
    return {"vcs": "git", "files": files[:CHANGES_MAX], "total_count": len(files),
            "truncated": len(files) > CHANGES_MAX}


def _validation(ctx: CallContext, session_id: str) -> str:
    value = ctx.jobs.latest_validation(session_id)
    return value if value in ("passed", "failed", "not_run") else "not_run"


def finish_coding_task(arguments: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
    if ctx.project is None:
        raise ToolFailure("invalid_arguments", "project is required")
    record = require_session(ctx, arguments.get("session_id"))
    sid = record["session_id"]
    outputs = arguments.get("outputs")
    if outputs is not None and not isinstance(outputs, list):
        raise ToolFailure("invalid_arguments", "outputs must be a list of paths")
    verified = task_outputs(ctx.project.root, outputs) if outputs is not None else None
    running = list(ctx.jobs.running_jobs(sid))
    result: dict[str, Any] = {"session_id": sid,
                              "task_outcome": task_outcome(_validation(ctx, sid), verified,
                                                           running)}
    if verified is not None:
        result["task_outputs"] = verified
    if not arguments.get("summary_only"):
        result["changes"] = changes(ctx.project)
    return result


EXECUTORS = {"finish_coding_task": finish_coding_task}
