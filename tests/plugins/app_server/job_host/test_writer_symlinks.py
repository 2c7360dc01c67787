"""A writer on the stand-in that leaves escaping symlinks: its job fails at capture (spec 06).

The stand-in cannot make symlinks, so the test does what the writer's shell
would: while the writer's turn runs, it adds the links in the writer's own
worktree, then steers the turn to its end. The real job host captures the
patch when the turn loop ends.
"""

from __future__ import annotations

import os
from pathlib import Path

from support.waiting import wait_until

from mmo_kernel.jobs.records import job_file, read_job_record

from .conftest import finish, spawn


def test_a_writer_leaving_escaping_links_fails_naming_them(session, mmo_git_workspace):
    from mmo_kernel.jobs.controls import control_job
    from mmo_kernel.sessions.records import read_session_record

    job_id = spawn(session, "writer", "Edit the tree FAKE_SLEEP=120", mode="workspace-write",
                   write_scope_values=["."])
    working = wait_until(lambda: (lambda r: r if r.get("active_turn_id") else None)(
        read_job_record(job_id)), timeout=30, what="the writer to start its turn")
    root = Path(working["workspace"]["root"])
    (root / "sub").mkdir()
    (root / "sub/file").write_text("in tree\n")
    os.symlink("/etc/passwd", root / "x")
    os.symlink("../../outside", root / "y")
    os.symlink("sub/file", root / "z")
    control_job(job_id, "steer", session["session_id"], "lead",
                expected_revision=working.get("control_revision", 0), input="wrap up now")

    record = finish(session, job_id)

    assert record["status"] == "failed"
    assert "x -> /etc/passwd (absolute target)" in record["error"]
    assert "y -> ../../outside (leaves the workspace)" in record["error"]
    assert "z ->" not in record["error"]
    assert record["failure"]["kind"] == "unsafe_symlink"
    assert "patch" not in record and not job_file(job_id, "patch.json").exists()
    assert not os.path.lexists(mmo_git_workspace / "x")
    assert read_session_record(session["session_id"])["tainted"] is False
