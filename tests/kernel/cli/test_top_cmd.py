"""``mmo top --once``: the table at 80 and 160 columns, JSON for scripts, no terminal, bad input."""

from __future__ import annotations

import json

from .conftest import TURN_PROFILE, mmo


def _finished_session(live) -> str:
    out = mmo("run", TURN_PROFILE, "Summarize the repo", "--offline", "--cwd", str(live))
    assert out.returncode == 0, out.stderr
    return out.stderr.splitlines()[0].split()[1]


def test_the_table_adapts_from_80_to_160_columns_and_json_carries_the_same_team(live):
    sid = _finished_session(live)
    narrow = mmo("top", "--once", "--finished", "1", "--width", "80")
    wide = mmo("top", "--once", "--finished", "1", "--width", "160")
    assert narrow.returncode == wide.returncode == 0, (narrow.stderr, wide.stderr)
    for out, width in ((narrow, 80), (wide, 160)):
        lines = out.stdout.splitlines()
        assert all(len(line) <= width for line in lines), out.stdout
        assert lines[0].startswith("mmo top") and "0 live" in lines[0] and "1 sess" in lines[0]
        assert any(sid in line for line in lines)
        assert any(line.startswith("escalation_lead") and "completed" in line for line in lines)
        assert "▸ 1 finished sessions (1 completed)" in out.stdout
    assert "ROUTE / MODEL" not in narrow.stdout and "TOKENS" in narrow.stdout
    assert "ROUTE / MODEL" in wide.stdout and "local_scripted / scripted" in wide.stdout
    assert "COST" in wide.stdout and "n/a" in wide.stdout

    snap = json.loads(mmo("top", "--json", "--finished", "1").stdout)
    assert (snap["sessions_live"], snap["finished"]) == (0, {"completed": 1})
    [view] = snap["sessions"]
    assert view["session_id"] == sid and view["agents"][0]["key"] == "root"
    assert view["agents"][0]["input_tokens"] > 0 and view["agents"][0]["cost_usd"] is None


def test_without_a_terminal_top_prints_one_snapshot_and_exits(live):
    _finished_session(live)
    out = mmo("top")  # stdout is a pipe here
    assert out.returncode == 0 and out.stdout.startswith("mmo top"), out.stderr
    assert "\x1b[" not in out.stdout


def test_an_empty_state_dir_is_an_empty_view_and_bad_arguments_are_one_line():
    empty = json.loads(mmo("top", "--json").stdout)
    assert (empty["sessions_total"], empty["sessions"], empty["agents"]) == (0, [], {})
    bad = mmo("top", "--interval", "0")
    assert bad.returncode == 2 and "--interval must be between 0.2 and 60 seconds" in bad.stderr
    assert "Traceback" not in bad.stderr
