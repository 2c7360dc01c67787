"""The counts of finished sessions follow their records without walking them all each time."""

from __future__ import annotations

import os

from mmo_kernel.views import records


def _write(session_id: str, **fields) -> None:
    from mmo_kernel.sessions.records import sessions_root
    from mmo_kernel.state.files import atomic_write_json

    directory = sessions_root() / session_id
    directory.mkdir(parents=True, exist_ok=True)
    atomic_write_json(directory / "session.json",
                      {"session_id": session_id, "created_at": session_id, **fields},
                      redact=False)


def test_counts_follow_new_changed_and_removed_records_a_slice_at_a_time(mmo_env, monkeypatch):
    from mmo_kernel.sessions.records import sessions_root

    monkeypatch.setattr(records, "FINISHED_CHECKS", 2)
    names = [f"20261201-10000{n}-done" for n in range(5)]
    for n, name in enumerate(names):
        _write(name, status="completed", tainted=n == 0)
    book = records.SessionBook()
    book.scan()
    assert (dict(book.finished), book.tainted, len(book.records)) == ({"completed": 5}, 1, 5)
    assert book.live() == [] and [s for s, _ in book.newest_finished(2)] == names[:-3:-1]

    _write(names[3], status="failed", tainted=True)  # a finished record rewritten
    scans = 0
    while book.finished.get("failed") != 1:
        book.scan()
        scans += 1
        assert scans <= 3, "a change to a finished session shows within 5 / 2 refreshes"
    assert (dict(book.finished), book.tainted) == ({"completed": 4, "failed": 1}, 2)

    (sessions_root() / names[0] / "session.json").unlink()
    os.rmdir(sessions_root() / names[0])
    (sessions_root() / "20261201-100009-torn").mkdir()
    (sessions_root() / "20261201-100009-torn" / "session.json").write_text('{"status": "comp')
    book.scan()
    assert (dict(book.finished), book.tainted, len(book.records)) == (
        {"completed": 3, "failed": 1, "unreadable": 1}, 1, 5)
    assert len(book.records) == sum(book.finished.values())


def test_a_shown_finished_session_is_read_through_its_model(mmo_env):
    _write("20261201-100000-done", status="completed")  # not a valid record: only JSON
    book = records.SessionBook()
    book.scan()
    assert book.finished == {"completed": 1}
    assert set(book.records["20261201-100000-done"].record) <= set(records.COUNTED_FIELDS)
    assert book.strict("20261201-100000-done") is None  # the strict read refuses it
    assert book.finished == {"unreadable": 1}
