"""Gaps the mutation run found in ``state.files`` and ``state.redaction`` (docs/mutation-survivors.md).

Each test pins a behaviour no other test of the state package checked: the byte-level
path of the stream redactor (a child's output that is not UTF-8), and lock files
that outlive their holder (so every locker shares one inode).
"""

from __future__ import annotations

import os
import stat

from mmo_kernel.state.files import lifecycle_lock, runtime_lock
from mmo_kernel.state.redaction import Redactor

NOT_UTF8 = b"\xff\xfe"


def test_non_utf8_output_has_every_known_value_replaced_by_its_own_marker():
    redactor = Redactor({"sk-live-abcdef123456": "OPENAI_API_KEY",
                         "ghp_zyx987654321abc": "GH_TOKEN"})
    line = NOT_UTF8 + b" key=sk-live-abcdef123456 then ghp_zyx987654321abc " + NOT_UTF8 + b"\n"
    assert redactor.stream(line) == (NOT_UTF8 + b" key=[redacted:OPENAI_API_KEY] then "
                                     b"[redacted:GH_TOKEN] " + NOT_UTF8 + b"\n")
    again = NOT_UTF8 + b"ghp_zyx987654321abc"  # the compiled pattern is reused, not stale
    assert redactor.stream(again) == NOT_UTF8 + b"[redacted:GH_TOKEN]"


def test_in_non_utf8_output_the_longest_value_wins_over_its_prefix():
    redactor = Redactor({"abcd1234wxyz": "SHORT_TOKEN", "abcd1234wxyz5678efgh": "LONG_TOKEN"})
    assert redactor.stream(NOT_UTF8 + b" abcd1234wxyz5678efgh " + NOT_UTF8) == (
        NOT_UTF8 + b" [redacted:LONG_TOKEN] " + NOT_UTF8)
    assert redactor.stream(NOT_UTF8 + b" abcd1234wxyz-") == NOT_UTF8 + b" [redacted:SHORT_TOKEN]-"


def test_lock_files_stay_after_release_so_every_locker_shares_one_inode(mmo_env, tmp_path):
    with runtime_lock() as path:
        inode = os.stat(path).st_ino
    assert os.stat(path).st_ino == inode  # removing it would let two holders lock two files
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    session = tmp_path / "session"
    session.mkdir()
    with lifecycle_lock(session) as held:
        pass
    assert held.is_file()
