"""Read-side views: a named run is read on its own, whatever lies beside it."""

from __future__ import annotations

import json

import pytest

from mmo_kernel.lifecycle.views import load_session_run
from mmo_kernel.sessions.create import create_session
from mmo_kernel.sessions.records import session_file
from mmo_kernel.sessions.state import finish_session

from .conftest import OFFLINE, TURN_PROFILE

ORPHAN = "20990101-000000-run-abcdef"


def test_a_named_run_is_read_even_beside_an_orphaned_sibling(workspace):
    session = create_session(TURN_PROFILE, cwd=workspace, bindings=OFFLINE)
    sid, run_id = session["session_id"], session["current_run_id"]
    orphan = session_file(sid, "runs", ORPHAN)
    orphan.mkdir()
    (orphan / "run.json").write_text(json.dumps({"run_id": ORPHAN, "sequence": 2}))

    named = load_session_run(sid, run_id)
    assert named["run_id"] == run_id and named["sequence"] == 1
    assert load_session_run(sid)["run_id"] == run_id  # the session's own run
    with pytest.raises(FileNotFoundError, match="no run"):
        load_session_run(sid, "20990101-000000-run-000000")
    finish_session(sid, 0)
    assert load_session_run(sid, run_id)["status"] == "completed"
