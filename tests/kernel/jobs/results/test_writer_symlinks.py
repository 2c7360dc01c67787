"""A writer's escaping symlinks through the kernel: capture fails the job, integration refuses.

``capture_job_patch`` is what the job host calls when a writer's turn loop
ends; ``integrate_patch`` is the root's integration. Both run here on a real
git worktree of a real session (spec 06).
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest
from kernel.jobs.results.conftest import ROOT, audit_events
from kernel.jobs.results.test_workspace import _accepted, _finish, _writer

from mmo_kernel.jobs import workspace as ws
from mmo_kernel.jobs.records import job_file, read_job_record
from mmo_kernel.sessions.records import read_session_record
from mmo_kernel.workspace.patches import UnsafeSymlink


def _tree(root: Path) -> dict[str, str]:
    out = {}
    for current, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d != ".git"]
        for name in dirs + files:
            path = Path(current) / name
            out[str(path.relative_to(root))] = (os.readlink(path) if path.is_symlink()
                                                else "dir" if path.is_dir() else path.read_text())
    return out


def test_capture_fails_the_writer_naming_each_escaping_link_and_stores_no_patch(session):
    job, root, _ = _writer(session)
    (root / "src/sub").mkdir(parents=True)
    (root / "src/sub/file").write_text("in tree\n")
    os.symlink("/etc/passwd", root / "src/x")
    os.symlink("../../outside", root / "src/y")
    os.symlink("sub/file", root / "src/z")

    record = ws.capture_job_patch(job["job_id"])

    assert record["status"] == "failed"
    assert "src/x -> /etc/passwd (absolute target)" in record["error"]
    assert "src/y -> ../../outside (leaves the workspace)" in record["error"]
    assert "src/z" not in record["error"]
    assert "refused at capture" in record["error"]
    assert record["failure"]["kind"] == "unsafe_symlink"
    assert record["failure"]["paths"] == ["src/x", "src/y"]
    assert "patch" not in record and "artifacts" not in record
    assert not job_file(job["job_id"], "patch.json").exists()
    assert read_session_record(session["session_id"])["tainted"] is False


def test_an_in_tree_link_is_captured_and_integrated(session):
    job, root, _ = _writer(session)
    (root / "src/sub").mkdir(parents=True)
    (root / "src/sub/file").write_text("in tree\n")
    os.symlink("sub/file", root / "src/z")
    record = ws.capture_job_patch(job["job_id"])
    assert record["status"] == "running"
    assert record["patch"]["changed_paths"] == ["src/sub/file", "src/z"]
    _finish(job["job_id"])
    _accepted(session, job["job_id"])
    ws.integrate_patch(job["job_id"], "ship it", session["session_id"], ROOT)
    assert os.readlink(Path(session["cwd"]) / "src/z") == "sub/file"


def test_a_hand_crafted_patch_file_with_an_escaping_link_is_refused_at_integration(session):
    job, root, _ = _writer(session)
    (root / "src").mkdir()
    (root / "src/ok.txt").write_text("ok\n")
    ws.capture_job_patch(job["job_id"])
    _finish(job["job_id"])
    _accepted(session, job["job_id"])
    # Someone edits the stored patch.json: the diff now also plants src/evil -> /etc/passwd.
    path = job_file(job["job_id"], "patch.json")
    patch = json.loads(path.read_text())
    patch["diff"] += ("diff --git a/src/evil b/src/evil\nnew file mode 120000\n"
                      "index 0000000..1111111\n--- /dev/null\n+++ b/src/evil\n@@ -0,0 +1 @@\n"
                      "+/etc/passwd\n\\ No newline at end of file\n")
    patch["changed_paths"] = ["src/evil", "src/ok.txt"]
    patch["artifacts"].insert(0, {"relative_path": "src/evil", "bytes": 11,
                                  "sha256": hashlib.sha256(b"/etc/passwd").hexdigest()})
    patch["preimage"].insert(0, {"relative_path": "src/evil", "kind": "absent", "sha256": None})
    path.write_text(json.dumps(patch))
    before = _tree(Path(session["cwd"]))

    with pytest.raises(UnsafeSymlink, match=r"src/evil -> /etc/passwd \(absolute target\)"):
        ws.integrate_patch(job["job_id"], "ship it", session["session_id"], ROOT)

    assert _tree(Path(session["cwd"])) == before
    assert read_job_record(job["job_id"])["result_state"] == "accepted"
    assert not [e for e in audit_events(session) if e["event"] == "agent_patch_integrated"]
    assert read_session_record(session["session_id"])["tainted"] is False
