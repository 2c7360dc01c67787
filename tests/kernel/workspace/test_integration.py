"""The integration transaction (spec 06): refuse, apply, persist, roll back, taint.

Faults in the persistence steps are injected by passing callables that
raise: the one place the spec's failure paths cannot be produced otherwise.
The failed-reversal path is produced for real: a concurrent writer drops a
file into a directory the patch created, so an exact reversal is impossible.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from kernel.workspace.repo_state import tree_state
from mmo_copy_workspace.driver import CopyIsolator
from mmo_git_worktree.driver import GitWorktreeIsolator

from mmo_kernel.jobs.integration import IntegrationTainted, TaintNotPersisted, integrate_transaction
from mmo_kernel.workspace.patches import PreimageMismatch


class Recorder:
    """Persistence callables for one transaction, optionally failing."""

    def __init__(self, integrated_error=None, taint_error=None, on_integrated=None):
        self.integrated_calls = 0
        self.taints: list[dict] = []
        self._integrated_error = integrated_error
        self._taint_error = taint_error
        self._on_integrated = on_integrated

    def persist_integrated(self):
        self.integrated_calls += 1
        if self._on_integrated:
            self._on_integrated()
        if self._integrated_error:
            raise self._integrated_error

    def persist_taint(self, reason):
        if self._taint_error:
            raise self._taint_error
        self.taints.append(dict(reason))


@pytest.fixture(params=["git_worktree", "copy"])
def accepted(request, tmp_path, mmo_env):
    """``(isolator, workspace, patch)``: a writer that added src/pkg/mod.py, edited src/app.py."""
    if request.param == "git_worktree":
        workspace = request.getfixturevalue("user_repo").path
        isolator = GitWorktreeIsolator()
    else:
        workspace = tmp_path / "plain"
        (workspace / "src").mkdir(parents=True)
        (workspace / "src/app.py").write_text("print('app')\n")
        isolator = CopyIsolator()
    handle = isolator.prepare(workspace, mmo_env.state_dir / "writers" / "job-7", ["src"], "job-7")
    try:
        root = Path(handle.root)
        (root / "src/pkg").mkdir()
        (root / "src/pkg/mod.py").write_text("VALUE = 42\n")
        (root / "src/app.py").write_text("print('integrated')\n")
        yield isolator, workspace, isolator.capture_patch(handle)
    finally:
        isolator.cleanup(handle)


def test_success_applies_and_persists_once(accepted):
    isolator, workspace, patch = accepted
    rec = Recorder()
    receipt = integrate_transaction(isolator, workspace, patch,
                                    persist_integrated=rec.persist_integrated,
                                    persist_taint=rec.persist_taint)
    assert (workspace / "src/pkg/mod.py").read_text() == "VALUE = 42\n"
    assert (workspace / "src/app.py").read_text() == "print('integrated')\n"
    assert receipt.created_files == ["src/pkg/mod.py"] and receipt.created_dirs == ["src/pkg"]
    assert receipt.modified_files == ["src/app.py"]
    assert rec.integrated_calls == 1 and rec.taints == []


def test_moved_workspace_is_refused_and_nothing_is_applied(accepted):
    isolator, workspace, patch = accepted
    (workspace / "src/app.py").write_text("print('user kept editing')\n")
    before = tree_state(workspace)
    rec = Recorder()
    with pytest.raises(PreimageMismatch, match="src/app.py"):
        integrate_transaction(isolator, workspace, patch, persist_integrated=rec.persist_integrated,
                              persist_taint=rec.persist_taint)
    assert tree_state(workspace) == before
    assert rec.integrated_calls == 0 and rec.taints == []


def test_failed_persist_reverses_exactly_and_reraises_the_original_error(accepted):
    isolator, workspace, patch = accepted
    before = tree_state(workspace)
    error = OSError(28, "No space left on device")
    rec = Recorder(integrated_error=error)
    with pytest.raises(OSError) as raised:
        integrate_transaction(isolator, workspace, patch, persist_integrated=rec.persist_integrated,
                              persist_taint=rec.persist_taint)
    assert raised.value is error
    assert tree_state(workspace) == before  # src/pkg/ is gone, src/app.py restored byte for byte
    assert rec.taints == []


def test_failed_reversal_durably_taints_the_session(accepted):
    isolator, workspace, patch = accepted

    def concurrent_writer():
        (workspace / "src/pkg/other.py").write_text("someone else's file\n")

    rec = Recorder(integrated_error=RuntimeError("record write failed"),
                   on_integrated=concurrent_writer)
    with pytest.raises(IntegrationTainted, match="durably tainted") as raised:
        integrate_transaction(isolator, workspace, patch, persist_integrated=rec.persist_integrated,
                              persist_taint=rec.persist_taint, job_id="job-7")
    message = str(raised.value)
    assert "manual" in message and "src/pkg/mod.py" in message and "src/app.py" in message
    assert isinstance(raised.value.__cause__, RuntimeError)
    [reason] = rec.taints
    assert reason["job_id"] == "job-7"
    assert "src/pkg/mod.py" in reason["paths"] and "record write failed" in reason["error"]
    assert (workspace / "src/pkg/mod.py").read_text() == "VALUE = 42\n"  # nothing half-reversed


def test_failed_taint_says_the_marker_could_not_be_persisted(accepted):
    isolator, workspace, patch = accepted

    def concurrent_writer():
        (workspace / "src/pkg/other.py").write_text("someone else's file\n")

    rec = Recorder(integrated_error=RuntimeError("record write failed"),
                   taint_error=OSError("session record is read-only"),
                   on_integrated=concurrent_writer)
    expected = "taint marker also could not be persisted.*keeps the applied change to src/app.py"
    with pytest.raises(TaintNotPersisted, match=expected):
        integrate_transaction(isolator, workspace, patch, persist_integrated=rec.persist_integrated,
                              persist_taint=rec.persist_taint)
    assert rec.taints == []
    assert (workspace / "src/pkg/mod.py").read_text() == "VALUE = 42\n"
    assert (workspace / "src/app.py").read_text() == "print('integrated')\n"


def test_taint_reason_defaults_to_the_patch_label(accepted):
    isolator, workspace, patch = accepted

    def concurrent_writer():
        (workspace / "src/pkg/other.py").write_text("x\n")

    rec = Recorder(integrated_error=RuntimeError("boom"), on_integrated=concurrent_writer)
    with pytest.raises(IntegrationTainted):
        integrate_transaction(isolator, workspace, patch, persist_integrated=rec.persist_integrated,
                              persist_taint=rec.persist_taint)
    assert rec.taints[0]["job_id"] == "job-7"
