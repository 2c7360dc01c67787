"""The directory watch that ends a waiter's sleep when a record is published."""

from __future__ import annotations

import threading

from mmo_kernel.state import changes
from mmo_kernel.state.changes import RenameWatch
from mmo_kernel.state.files import atomic_write_json


def _publish(path) -> threading.Thread:
    """Another thread publishes the record (events queue from the watch's creation on, so
    whether it runs before or during the wait does not matter)."""
    thread = threading.Thread(target=atomic_write_json, args=(path, {"status": "completed"}))
    thread.start()
    return thread


def test_an_atomic_write_into_a_watched_directory_wakes_the_wait(tmp_path):
    watched = tmp_path / "job"
    watched.mkdir()
    with RenameWatch([watched, tmp_path / "gone"]) as watch:  # a missing dir is skipped
        assert watch.active
        thread = _publish(watched / "metadata.json")
        woke = watch.wait(60)  # a wait that times out would return False, and late
        thread.join()
    assert woke and (watched / "metadata.json").exists()
    assert watch.fd == -1  # closed with the block


def test_appends_and_writes_elsewhere_do_not_wake_it(tmp_path):
    watched, other = tmp_path / "job", tmp_path / "other"
    watched.mkdir()
    other.mkdir()
    with RenameWatch([watched]) as watch:
        with open(watched / "events.jsonl", "a") as log:  # a log line is not a record write
            log.write("{}\n")
        atomic_write_json(other / "metadata.json", {"status": "running"})
        assert watch.wait(0.2) is False
        atomic_write_json(watched / "metadata.json", {"status": "running"})
        assert watch.wait(0) is True
        assert watch.wait(0) is False  # the events were drained


def test_without_inotify_it_sleeps_its_timeout_as_the_poll_did(tmp_path, monkeypatch):
    # the only way to get a kernel without inotify here: the library lookup fails
    monkeypatch.setattr(changes, "_libc", lambda: None)
    with RenameWatch([tmp_path]) as watch:
        assert not watch.active
        atomic_write_json(tmp_path / "metadata.json", {"status": "running"})
        assert watch.wait(0.05) is False
