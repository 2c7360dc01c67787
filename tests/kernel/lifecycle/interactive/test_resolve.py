"""resolve_resume_session: by session id, by root thread id, or the last one in a cwd."""

from __future__ import annotations

import pytest

from mmo_kernel.lifecycle.interactive import resolve_resume_session
from mmo_kernel.sessions.create import create_session
from mmo_kernel.sessions.records import session_dir
from mmo_kernel.sessions.state import update_session

from .conftest import OFFLINE, TURN_PROFILE

THREAD_A = "01a00000-0000-7000-8000-00000000000a"
THREAD_B = "01a00000-0000-7000-8000-00000000000b"


def _session(cwd, thread: str | None, active: str) -> str:
    record = create_session(TURN_PROFILE, cwd=cwd, bindings=OFFLINE, session_kind="interactive")
    fields = {"status": "detached", "last_active_at": active}
    if thread:
        fields["root_thread_id"] = thread
    update_session(record["session_id"], **fields)
    return record["session_id"]


def test_resolution_by_id_thread_and_last(tmp_path, workspace):
    other = tmp_path / "other"
    other.mkdir()
    older = _session(workspace, THREAD_A, "2030-01-01T00:00:00+00:00")
    newer = _session(workspace, THREAD_B, "2030-01-02T00:00:00+00:00")
    elsewhere = _session(other, THREAD_B, "2031-01-01T00:00:00+00:00")
    unbound = _session(workspace, None, "2032-01-01T00:00:00+00:00")

    assert resolve_resume_session(older) == older
    assert resolve_resume_session(THREAD_A) == older
    with pytest.raises(RuntimeError, match="identifies multiple MMO sessions"):
        resolve_resume_session(THREAD_B)  # newer and elsewhere share it
    with pytest.raises(FileNotFoundError, match="no resumable"):
        resolve_resume_session(unbound)
    with pytest.raises(FileNotFoundError, match="no resumable"):
        resolve_resume_session("01a00000-0000-7000-8000-0000000000ff")

    # last: newest *resumable* session whose cwd equals cwd exactly (unbound is newest)
    assert resolve_resume_session(last=True, cwd=workspace) == newer
    assert resolve_resume_session(last=True, cwd=workspace, all_cwds=True) == elsewhere
    with pytest.raises(FileNotFoundError, match="no resumable"):
        resolve_resume_session(last=True, cwd=workspace / ".git")
    with pytest.raises(ValueError, match="cannot be combined"):
        resolve_resume_session(older, last=True)

    update_session(newer, status="cancelling")
    from mmo_kernel.sessions.state import transition

    transition(newer, "cancelled")
    assert resolve_resume_session(last=True, cwd=workspace) == older  # terminal is skipped


    # one invalid record anywhere makes `last` fail
    broken = session_dir(older).parent / "20200101-000000-broken-abcdef"
    broken.mkdir(mode=0o700)
    (broken / "session.json").write_text("{not json")
    with pytest.raises(RuntimeError, match="invalid session state"):
        resolve_resume_session(last=True, cwd=workspace)
