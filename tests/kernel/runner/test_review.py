"""review_changes on the runner against real git repositories (spec 12 "Review")."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from mmo_kernel.project_tools.envelope import ToolFailure
from mmo_kernel.runner.context import CallContext, Project, RunnerConfig
from mmo_kernel.runner.review import parse_diff, review_changes


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True,
                          stdin=subprocess.DEVNULL, text=True).stdout


def ctx_for(root: Path, session: str | None = "sess1") -> CallContext:
    project = Project(id="code", name="code", description="", root=Path(os.path.realpath(root)),
                      vcs="git" if (root / ".git").exists() else "none")
    config = RunnerConfig(server_url="http://127.0.0.1:1", token="mmo_rt_x", client_id="laptop",
                          owner="alice", project_registry_dir=root.parent / "projects.d")
    return CallContext(project=project, projects={"code": project}, session_id=session,
                       user="alice", policy=config.policy, config=config, jobs=None,
                       state_dir=root.parent / "state")


def review(root: Path, scope: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return review_changes({"project": "code", "session_id": "sess1", "scope": scope, **extra},
                          ctx_for(root))


def failure(root: Path, scope: dict[str, Any], **extra: Any) -> ToolFailure:
    with pytest.raises(ToolFailure) as caught:
        review(root, scope, **extra)
    return caught.value


@pytest.fixture
def repo(mmo_git_workspace: Path) -> Path:
    """``README.md`` plus a committed ``calc.py`` and ``old.txt``; hooks that would fail."""
    (mmo_git_workspace / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    (mmo_git_workspace / "old.txt").write_text("gone soon\n")
    git(mmo_git_workspace, "add", "-A")
    git(mmo_git_workspace, "commit", "-q", "-m", "calc")
    hooks = mmo_git_workspace / ".git" / "hooks"
    for name in ("pre-commit", "post-checkout", "post-index-change"):
        (hooks / name).write_text("#!/bin/sh\ntouch \"$(git rev-parse --git-dir)/HOOK-RAN\"\n")
        (hooks / name).chmod(0o755)
    return mmo_git_workspace


def test_workspace_review_shows_modified_deleted_and_untracked_files(repo):
    (repo / "calc.py").write_text("def add(a, b):\n    return a + b\n")
    (repo / "old.txt").unlink()
    (repo / "src").mkdir()
    (repo / "src" / "new.py").write_text("VALUE = 1\nOTHER = 2")
    (repo / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00")
    index_before = (repo / ".git" / "index").read_bytes()
    out = review(repo, {"kind": "workspace"})
    assert out["scope"] == {"kind": "workspace"}
    files = {f["path"]: f for f in out["files"]}
    assert [f["path"] for f in out["files"]] == ["calc.py", "logo.png", "old.txt", "src/new.py"]
    assert files["calc.py"] | {} == {"path": "calc.py", "status": "modified", "additions": 1,
                                     "deletions": 1, "binary": False}
    assert (files["old.txt"]["status"], files["old.txt"]["deletions"]) == ("deleted", 1)
    assert (files["src/new.py"]["status"], files["src/new.py"]["additions"]) == ("added", 2)
    assert files["logo.png"]["binary"] is True and files["logo.png"]["status"] == "added"
    assert "-    return a - b\n+    return a + b\n" in out["diff"]
    assert "+++ b/src/new.py\n@@ -0,0 +1,2 @@\n+VALUE = 1\n+OTHER = 2\n" in out["diff"]
    assert "\\ No newline at end of file" in out["diff"]
    assert out["diff_truncated"] is False
    assert str(repo) not in json.dumps(out)
    # read-only: the index is untouched and no hook ran
    assert (repo / ".git" / "index").read_bytes() == index_before
    assert not (repo / ".git" / "HOOK-RAN").exists()


def test_workspace_review_of_a_clean_tree_and_a_paths_filter(repo):
    assert review(repo, {"kind": "workspace"})["files"] == []
    (repo / "calc.py").write_text("changed\n")
    (repo / "notes").mkdir()
    (repo / "notes" / "a.md").write_text("a\n")
    (repo / "notesx.md").write_text("not under notes/\n")
    out = review(repo, {"kind": "workspace"}, paths=["notes"])
    assert [f["path"] for f in out["files"]] == ["notes/a.md"]
    assert "calc.py" not in out["diff"]
    out = review(repo, {"kind": "workspace"}, paths=["calc.py"])
    assert [f["path"] for f in out["files"]] == ["calc.py"]
    exc = failure(repo, {"kind": "workspace"}, paths=["../elsewhere"])
    assert exc.kind == "path_outside_project"


def test_workspace_review_of_a_subdirectory_project_is_relative_to_it(repo):
    (repo / "sub").mkdir()
    (repo / "sub" / "inside.txt").write_text("1\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "sub")
    (repo / "sub" / "inside.txt").write_text("2\n")
    (repo / "calc.py").write_text("outside the project\n")
    out = review(repo / "sub", {"kind": "workspace"})
    assert [f["path"] for f in out["files"]] == ["inside.txt"]
    assert "a/inside.txt" in out["diff"] and "calc.py" not in out["diff"]


def test_workspace_review_in_a_repository_without_commits(tmp_path, mmo_git_workspace):
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    git(fresh, "init", "-q")
    (fresh / "a.txt").write_text("x\n")
    out = review(fresh, {"kind": "workspace"})
    assert out["files"] == [{"path": "a.txt", "status": "added", "additions": 1,
                             "deletions": 0, "binary": False}]


def test_commit_review_diffs_against_the_first_parent_and_the_root(repo):
    first = git(repo, "rev-list", "--max-parents=0", "HEAD").strip()
    out = review(repo, {"kind": "commit", "rev": "HEAD"})
    assert out["scope"] == {"kind": "commit", "rev": "HEAD"}
    assert [(f["path"], f["status"]) for f in out["files"]] == [("calc.py", "added"),
                                                                 ("old.txt", "added")]
    root_commit = review(repo, {"kind": "commit", "rev": first})
    assert [f["path"] for f in root_commit["files"]] == ["README.md"]
    assert failure(repo, {"kind": "commit", "rev": "no-such-rev"}).kind == "invalid_arguments"
    assert failure(repo, {"kind": "commit", "rev": "--output=/tmp/x"}).kind == \
        "invalid_arguments"


def test_a_non_git_project_lists_files_for_workspace_and_refuses_commit(tmp_path):
    plain = tmp_path / "plain"
    (plain / "dir").mkdir(parents=True)
    (plain / "a.txt").write_text("a\n")
    (plain / "dir" / "b.txt").write_text("b\n")
    (plain / "link").symlink_to(plain / "a.txt")
    out = review(plain, {"kind": "workspace"})
    assert [f["path"] for f in out["files"]] == ["a.txt", "dir/b.txt"]
    assert {f["status"] for f in out["files"]} == {"untracked"}
    assert (out["diff"], out["diff_truncated"]) == ("", False)
    exc = failure(plain, {"kind": "commit", "rev": "HEAD"})
    assert exc.kind == "not_a_git_project" and exc.state_changed is False


def test_a_large_diff_is_cut_at_128_kib_on_a_line_boundary(repo):
    (repo / "big.txt").write_text("".join(f"line {i:06d} " + "x" * 80 + "\n"
                                          for i in range(3000)))
    out = review(repo, {"kind": "workspace"})
    data = out["diff"].encode()
    assert out["diff_truncated"] is True
    assert len(data) <= 128 * 1024 and data.endswith(b"\n")
    assert out["files"][0]["additions"] == 3000  # stats stay whole


def test_untracked_files_past_the_diff_limit_keep_exact_stats(repo):
    (repo / "a_big.txt").write_text("y" * 99 + "\n" * 1 + ("z" * 99 + "\n") * 1500)
    (repo / "b_small.txt").write_text("1\n2\n3")
    (repo / "c.bin").write_bytes(b"\x00\x01" * 10)
    out = review(repo, {"kind": "workspace"}, paths=["."])
    stats = {f["path"]: (f["additions"], f["binary"]) for f in out["files"]}
    assert stats == {"a_big.txt": (1501, False), "b_small.txt": (3, False), "c.bin": (0, True)}
    assert out["diff_truncated"] is True and "+1\n+2\n" not in out["diff"]


def test_scope_and_paths_are_validated(repo):
    assert failure(repo, {"kind": "branch"}).kind == "invalid_arguments"
    assert failure(repo, {"kind": "commit"}).message.startswith("scope.commit.rev")


def test_diff_parser_counts_hunks_exactly_even_with_header_like_content():
    diff = ("diff --git a/x y.txt b/x y.txt\nindex 1..2 100644\n--- a/x y.txt\n+++ b/x y.txt\n"
            "@@ -1,2 +1,2 @@\n--- not a header\n+++ also content\n context\n"
            "diff --git \"a/tab\\there\" \"b/tab\\there\"\ndeleted file mode 100644\n"
            "--- \"a/tab\\there\"\n+++ /dev/null\n@@ -1 +0,0 @@\n-bye\n")
    files = parse_diff(diff)
    assert [(f.path, f.status, f.additions, f.deletions) for f in files] == [
        ("x y.txt", "modified", 1, 1), ("tab\there", "deleted", 0, 1)]


# ---------------------------------------------------------------- job scope

def _write_job(session_id: str, patch_format: str, base: str, changed: list[str],
               diff: str) -> str:
    """A hand-written writer job record (spec 04 allows them for results) with its patch."""
    from mmo_kernel.jobs.records import job_dir, new_job_id, write_job_record
    from mmo_kernel.sessions.records import utc_now
    from mmo_kernel.workspace.patches import Patch

    job_id = new_job_id("implementation_specialist")
    patch = Patch(isolator="git_worktree" if patch_format == "git-binary-diff" else "copy",
                  format=patch_format, label=job_id, base=base, changed_paths=changed,
                  diff=diff, artifacts=[], preimage=[])
    write_job_record({"job_id": job_id, "session_id": session_id,
                      "agent": "implementation_specialist", "status": "completed",
                      "created_at": utc_now(), "mode": "workspace-write",
                      "patch": {"changed_paths": patch.changed_paths, "format": patch.format,
                                "diff_file": "patch.diff"}})
    (job_dir(job_id) / "patch.json").write_text(patch.model_dump_json())
    return job_id


def _job_with_patch(repo: Path, session_id: str) -> str:
    """A writer job whose patch is real ``git diff --binary`` output."""
    base = git(repo, "rev-parse", "HEAD").strip()
    (repo / "calc.py").write_text("def add(a, b):\n    return a + b\n")
    (repo / "img.bin").write_bytes(bytes(range(256)))
    git(repo, "add", "-A")
    raw = subprocess.run(["git", "diff", "--cached", "--binary", "--full-index", "--no-renames",
                          base], cwd=repo, check=True, capture_output=True).stdout
    git(repo, "reset", "-q", "--hard", base)
    return _write_job(session_id, "git-binary-diff", base, ["calc.py", "img.bin"], raw.decode())


def test_job_review_shows_the_captured_patch_of_a_job_of_this_session(mmo_env, repo):
    job_id = _job_with_patch(repo, "sess1")
    out = review(repo, {"kind": "job", "job_id": job_id})
    assert out["scope"] == {"kind": "job", "job_id": job_id}
    assert [(f["path"], f["status"], f["additions"], f["deletions"], f["binary"])
            for f in out["files"]] == [("calc.py", "modified", 1, 1, False),
                                       ("img.bin", "added", 0, 0, True)]
    assert "+    return a + b" in out["diff"]
    assert "Binary files /dev/null and b/img.bin differ" in out["diff"]
    assert "GIT binary patch" not in out["diff"]
    only = review(repo, {"kind": "job", "job_id": job_id}, paths=["img.bin"])
    assert [f["path"] for f in only["files"]] == ["img.bin"]


def test_job_review_never_reveals_another_sessions_or_an_unknown_job(mmo_env, repo):
    other = _job_with_patch(repo, "another-session")
    for job_id in (other, "no-such-job", "../../etc"):
        exc = failure(repo, {"kind": "job", "job_id": job_id})
        assert exc.kind == "job_not_found"
        assert "another-session" not in exc.message


def test_job_review_of_a_copy_isolator_file_set(mmo_env, tmp_path):
    import base64
    import hashlib

    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "calc.py").write_text("a = 1\nb = 2\n")
    (plain / "old.txt").write_text("bye\n")

    def entry(rel, before, after):
        doc = {"relative_path": rel, "before": before, "after": after}
        return doc

    def state(data):
        return {"kind": "file", "sha256": hashlib.sha256(data).hexdigest(), "mode": 0o644}

    new_calc = b"a = 1\nb = 3\n"
    files = [
        entry("calc.py", state(b"a = 1\nb = 2\n"),
              {**state(new_calc), "content_base64": base64.b64encode(new_calc).decode()}),
        entry("new.txt", {"kind": "absent"},
              {**state(b"n\n"), "content_base64": base64.b64encode(b"n\n").decode()}),
        entry("old.txt", state(b"bye\n"), {"kind": "absent"}),
    ]
    diff = json.dumps({"format": "mmo-file-set/1", "files": files})
    job_id = _write_job("sess1", "mmo-file-set", "manifest", ["calc.py", "new.txt", "old.txt"],
                        diff)
    out = review(plain, {"kind": "job", "job_id": job_id})
    assert [(f["path"], f["status"], f["additions"], f["deletions"]) for f in out["files"]] == [
        ("calc.py", "modified", 1, 1), ("new.txt", "added", 1, 0), ("old.txt", "deleted", 0, 1)]
    assert "-b = 2\n+b = 3\n" in out["diff"]


def test_job_review_of_a_job_without_a_captured_patch_says_so(mmo_env, repo):
    from mmo_kernel.jobs.records import new_job_id, write_job_record
    from mmo_kernel.sessions.records import utc_now

    job_id = new_job_id("repo_scout")
    write_job_record({"job_id": job_id, "session_id": "sess1", "agent": "repo_scout",
                      "status": "running", "created_at": utc_now(), "mode": "read-only"})
    exc = failure(repo, {"kind": "job", "job_id": job_id})
    assert exc.kind == "invalid_arguments" and "no captured patch" in exc.message
