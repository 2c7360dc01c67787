"""Finished sessions are counted from a few top-level fields, read without a full parse."""

from __future__ import annotations

import json
import os

from mmo_kernel.views.records import COUNTED_FIELDS, read_counted


def _full(doc: dict) -> dict:
    return {k: doc[k] for k in COUNTED_FIELDS if k in doc}


def test_the_fields_read_off_an_mmo_record_are_those_a_full_parse_gives(mmo_env, tmp_path):
    from mmo_kernel.state.files import atomic_write_json

    docs = [
        {"status": "completed", "created_at": "2026-12-01T10:00:00+00:00", "tainted": True,
         "failure": {"status": "nested", "tainted": False}, "homes": {"a": {"status": "x"}},
         "note": "a line\n  \"status\": \"running\", inside a string"},
        {"status": "failed", "created_at": "2026-12-01T10:00:00+00:00", "error": "é \"q\""},
        {"status": "stopped", "tainted": None, "created_at": "x\\y"},
    ]
    for n, doc in enumerate(docs):
        path = tmp_path / f"{n}.json"
        atomic_write_json(path, doc, redact=False)
        ident, counted = read_counted(str(path))
        info = os.lstat(path)
        assert ident == f"{info.st_mtime_ns}:{info.st_size}:{info.st_ino}"
        assert counted == _full(doc), path.read_text()


def test_any_other_layout_is_parsed_in_full_and_non_files_give_nothing(tmp_path):
    compact = tmp_path / "compact.json"
    compact.write_text(json.dumps({"status": "completed", "tainted": True}))
    assert read_counted(str(compact))[1] == {"status": "completed", "tainted": True}

    twice = tmp_path / "twice.json"  # a key twice: the last one holds, as in a full parse
    twice.write_text('{\n  "status": "running",\n  "status": "completed"\n}\n')
    assert read_counted(str(twice))[1] == {"status": "completed"}

    structured = tmp_path / "structured.json"
    structured.write_text('{\n  "status": {\n    "x": 1\n  }\n}\n')
    assert read_counted(str(structured))[1] == {"status": {"x": 1}}

    torn = tmp_path / "torn.json"
    torn.write_text('{\n  "status": "comp')
    assert read_counted(str(torn))[0] is not None and read_counted(str(torn))[1] is None

    link = tmp_path / "link.json"
    link.symlink_to(compact)
    assert read_counted(str(link)) == (None, None)
    assert read_counted(str(tmp_path / "missing.json")) == (None, None)
    assert read_counted(str(tmp_path)) == (None, None)
