"""What the mesh keeps out of tool results (``mesh.redact``), key by key, in process.

The mesh server applies ``redact`` to every job and session fact it returns
(spec 07); the server tests see it through the real process, these pin every
hidden key family and what is kept, so a weakened rule fails a test.
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath

import pytest

from mmo_kernel.mesh.redact import HIDDEN_KEYS, is_hidden, redact


@pytest.mark.parametrize("key", sorted(HIDDEN_KEYS) + [
    "result_path", "events_path", "full_result_path", "_path", "app_server_socket", "_socket"])
def test_supervisor_keys_are_hidden(key):
    assert is_hidden(key)
    assert redact({key: "secret-value", "status": "running"}) == {"status": "running"}


@pytest.mark.parametrize("key", ["path", "paths", "socket", "socket_name", "path_note",
                                 "homework", "status", "x_pathx", "workspaces", "sockets"])
def test_other_keys_are_kept(key):
    assert not is_hidden(key)
    assert redact({key: 1}) == {key: 1}


def test_hidden_keys_go_at_any_depth_and_paths_become_strings():
    value = {
        "job": {"job_id": "j1", "result_path": "/s/jobs/j1/result.md",
                "workspace": {"worktree": "/s/w"}, "artifacts": [
                    {"relative_path": "a.txt", "sha256": "00"}, ("x", {"home": "/h"})]},
        "where": Path("/tmp/x"), "pure": PurePosixPath("a/b"), "count": 3, "none": None,
        7: {"stderr_path": "/s/e"},
    }
    assert redact(value) == {
        "job": {"job_id": "j1", "artifacts": [{"sha256": "00"}, ["x", {}]]},
        "where": "/tmp/x", "pure": "a/b", "count": 3, "none": None, "7": {},
    }


def test_an_agents_own_content_is_kept_verbatim():
    content = {"tests_run": [{"command": "pytest -q", "result_path": "out.txt"}],
               "home": "kept"}
    value = {"content": content, "nested": [{"content": {"command": "x"}, "command": "y"}]}
    assert redact(value) == {"content": content, "nested": [{"content": {"command": "x"}}]}


def test_scalars_pass_through_and_containers_are_copies():
    for scalar in ("text", 1, 2.5, True, None):
        assert redact(scalar) == scalar
    original = {"a": [1, {"b": 2}]}
    copy = redact(original)
    assert copy == original and copy is not original and copy["a"] is not original["a"]
    assert redact((1, (2, 3))) == [1, [2, 3]]
