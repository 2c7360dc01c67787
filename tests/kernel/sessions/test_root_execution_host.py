"""``root_execution_host`` names an installed execution host, or the session record is invalid."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from support.example_host import HOST_NAME, install_example_host, with_site

from mmo_kernel.lifecycle.views import root_host_name
from mmo_kernel.sessions.records import (
    iter_session_records,
    new_record_id,
    read_session_record,
    session_file,
    utc_now,
    write_session_record,
)

INVALID = "root execution host is invalid"


def session_fields(**fields) -> dict:
    now = utc_now()
    return {"session_id": new_record_id("demo"), "status": "running", "profile_id": "demo",
            "snapshot_hash": "ab" * 32, "cwd": "/tmp", "session_kind": "noninteractive",
            "root_agent": "lead", "created_at": now, "current_run_id": new_record_id("run"),
            **fields}


def test_a_record_naming_an_installed_host_is_valid():
    record = write_session_record(session_fields(root_execution_host="app_server"))
    assert read_session_record(record["session_id"])["root_execution_host"] == "app_server"


def test_a_malformed_host_is_refused_on_write_and_on_read():
    with pytest.raises(ValueError, match=INVALID) as refused:
        write_session_record(session_fields(root_execution_host="No Such Host!"))
    assert "'No Such Host!'" in str(refused.value)
    assert "Input should" not in str(refused.value)  # one line, not a pydantic dump

    sid = write_session_record(session_fields(root_execution_host="app_server"))["session_id"]
    path = session_file(sid, "session.json")
    path.write_text(json.dumps({**json.loads(path.read_text()), "root_execution_host": ""}))
    with pytest.raises(ValueError, match=INVALID) as unreadable:
        read_session_record(sid)
    assert str(path) in str(unreadable.value)
    with pytest.raises(RuntimeError, match="invalid session state"):
        iter_session_records()


def test_a_host_no_plugin_provides_is_refused_where_the_root_host_is_used():
    """Reading stays cheap (no plugin is loaded); using the host checks it is installed."""
    record = write_session_record(session_fields(root_execution_host="no_such_host"))
    assert read_session_record(record["session_id"])["root_execution_host"] == "no_such_host"
    with pytest.raises(ValueError, match=INVALID) as refused:
        root_host_name(record)
    assert "'no_such_host'" in str(refused.value)
    assert "installed: app_server)" in str(refused.value)


def test_the_valid_hosts_are_the_installed_ones(tmp_path, mmo_env):
    """Not a fixed list: with the fixture host installed, a session naming it resolves to it."""
    site = install_example_host(tmp_path / "site", tmp_path / "build")
    record = session_fields(root_execution_host=HOST_NAME)
    script = ("import json, sys; from mmo_kernel.sessions.records import *; "
              "from mmo_kernel.lifecycle.views import root_host_name; "
              "print(root_host_name(write_session_record(json.loads(sys.argv[1]))))")
    installed = subprocess.run([sys.executable, "-c", script, json.dumps(record)],
                               capture_output=True, text=True, env=with_site(site),
                               stdin=subprocess.DEVNULL, timeout=60)
    assert installed.returncode == 0, installed.stderr
    assert installed.stdout.strip() == HOST_NAME
    # the same record, used where the plugin is not installed
    with pytest.raises(ValueError, match=INVALID):
        root_host_name(read_session_record(record["session_id"]))
