"""The listing index (``<state>/index.sqlite3``) is never trusted blindly (issue 15, item 1).

Real records, a real SQLite file and real processes: a writer killed with SIGKILL
between the record write and the index update, a deleted, corrupted or older-layout
index, rows built by another MMO version, hand edits, an index that cannot be written
at all, and several processes writing at once. Every listing must equal the records
on disk.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from mmo_kernel import package_version
from mmo_kernel.jobs.listing import list_jobs
from mmo_kernel.jobs.records import job_file, read_job_record, utc_now, write_job_record
from mmo_kernel.lifecycle.views import iter_sessions
from mmo_kernel.sessions.records import new_record_id, write_session_record
from mmo_kernel.state import index


def job(job_id: str, **extra) -> dict:
    return write_job_record({"job_id": job_id, "session_id": "s1", "agent": "worker",
                             "status": "completed", "created_at": utc_now(),
                             "profile_id": "demo", "result_state": "unread", **extra})


def session(status: str = "completed", **extra) -> dict:
    sid = new_record_id("demo")
    return write_session_record({
        "session_id": sid, "status": status, "profile_id": "demo", "snapshot_hash": "ab" * 32,
        "cwd": "/tmp", "session_kind": "noninteractive", "root_agent": "lead",
        "created_at": utc_now(), **extra})


def on_disk() -> dict[str, tuple[str, str | None]]:
    """``{job id: (status, result_state)}`` straight from the records, bypassing the index."""
    root = index.state_dir() / "jobs"
    out = {}
    for entry in root.iterdir():
        doc = json.loads((entry / "metadata.json").read_text())
        out[entry.name] = (doc["status"], doc.get("result_state"))
    return out


def listed() -> dict[str, tuple[str, str | None]]:
    return {j["job_id"]: (j["status"], j.get("result_state")) for j in list_jobs(summary=True)}


def indexed_rows(kind: str = "job") -> dict[str, index.IndexRow]:
    """The index as it is (unreadable records' rows too), without the refresh a listing
    makes first."""
    return {r.id: r for errors in (False, True)
            for r in index.rows(index.Query(kind, errors=errors))}


def index_file() -> Path:
    return index.index_path()


def test_every_record_write_publishes_its_row(mmo_env):
    first = job("job-1", status="running", progress_revision=3)
    rows = indexed_rows()
    assert set(rows) == {"job-1"}
    row = rows["job-1"]
    assert (row.status, row.session_id, row.agent, row.profile_id, row.progress_revision,
            row.result_state) == ("running", "s1", "worker", "demo", 3, "unread")
    assert row.identity == index.identity(job_file("job-1", "metadata.json"))
    assert row.host == {}
    assert first["status"] == "running"
    mode = os.stat(index_file()).st_mode & 0o777
    assert mode == 0o600, oct(mode)
    assert sqlite3.connect(index_file()).execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_a_writer_killed_between_the_record_and_the_index_is_noticed(mmo_env):
    """A real process writes the record, then is SIGKILLed before it updates the index."""
    job("job-1", status="completed", result_state="unread")
    script = textwrap.dedent("""
        import os, sys, time
        from mmo_kernel.state import index
        def stop_here(*args, **kwargs):  # the record is on disk; the index update is next
            print("record written", flush=True)
            time.sleep(600)
        index.publish = stop_here
        from mmo_kernel.jobs.records import update_job
        update_job("job-1", result_state="read")
    """)
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True,
                             stdin=subprocess.DEVNULL)
    try:
        assert child.stdout.readline().strip() == "record written"
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    assert child.returncode == -signal.SIGKILL
    assert read_job_record("job-1")["result_state"] == "read"
    assert indexed_rows()["job-1"].result_state == "unread"  # the crash left the index behind
    assert listed() == {"job-1": ("completed", "read")}
    assert [j["result_state"] for j in list_jobs()] == ["read"]
    assert indexed_rows()["job-1"].result_state == "read"  # repaired by that listing


def test_a_record_changed_outside_mmo_is_read_again(mmo_env):
    job("job-1", status="completed")
    job("job-2", status="completed")
    assert listed() == {"job-1": ("completed", "unread"), "job-2": ("completed", "unread")}
    path = job_file("job-1", "metadata.json")
    doc = json.loads(path.read_text())
    doc.update(status="failed", error="edited by hand")
    path.write_text(json.dumps(doc))  # in place: same inode, another size
    assert listed()["job-1"] == ("failed", "unread")
    assert [j["error"] for j in list_jobs() if j["job_id"] == "job-1"] == ["edited by hand"]


def test_a_same_size_edit_in_place_is_noticed_by_its_time(mmo_env):
    job("job-1", status="completed", result_state="unread")
    assert listed()["job-1"] == ("completed", "unread")
    path = job_file("job-1", "metadata.json")
    before = os.stat(path)
    text = path.read_text().replace('"result_state": "unread"', '"result_state": "rejected"')
    text = text.replace('"status": "completed"', '"status": "cancelled"')
    text = text.replace('"agent": "worker"', '"agent": "work"')  # the same size again
    path.write_text(text)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns + 1_000_000))
    after = os.stat(path)
    assert (after.st_ino, after.st_size) == (before.st_ino, before.st_size)
    assert listed()["job-1"] == ("cancelled", "rejected")


def test_rows_of_vanished_and_new_record_directories(mmo_env):
    job("job-1")
    job("job-2")
    assert set(listed()) == {"job-1", "job-2"}
    import shutil

    shutil.rmtree(job_file("job-1", "metadata.json").parent)
    hand = index.state_dir() / "jobs" / "job-3"
    hand.mkdir()
    (hand / "metadata.json").write_text(json.dumps({
        "schema_version": 1, "package_version": package_version(), "job_id": "job-3",
        "session_id": "s1", "agent": "worker", "status": "failed", "created_at": utc_now()}))
    assert listed() == {"job-2": ("completed", "unread"), "job-3": ("failed", None)}
    assert set(indexed_rows()) == {"job-2", "job-3"}


def test_a_deleted_index_is_rebuilt_from_the_records(mmo_env):
    for n in range(3):
        job(f"job-{n}", status="failed" if n else "completed")
    for suffix in ("", "-wal", "-shm"):
        Path(f"{index_file()}{suffix}").unlink(missing_ok=True)
    assert listed() == on_disk() and len(on_disk()) == 3
    assert index_file().exists()
    assert set(indexed_rows()) == {"job-0", "job-1", "job-2"}


def test_a_corrupted_index_is_rebuilt_from_the_records(mmo_env):
    job("job-1", status="failed")
    sid = session("completed")["session_id"]
    index.close()  # this process's connection; the file is then overwritten as a crash would
    for suffix in ("-wal", "-shm"):
        Path(f"{index_file()}{suffix}").unlink(missing_ok=True)
    index_file().write_bytes(os.urandom(8192))
    with pytest.raises(sqlite3.DatabaseError):
        sqlite3.connect(index_file()).execute("SELECT * FROM rows").fetchall()
    assert listed() == {"job-1": ("failed", "unread")}
    assert [s["session_id"] for s in iter_sessions()] == [sid]
    check = sqlite3.connect(index_file())
    assert check.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert check.execute("SELECT count(*) FROM rows").fetchone()[0] == 2


def test_a_garbage_index_does_not_fail_a_record_write(mmo_env):
    index.close()
    index_file().write_bytes(b"not a database at all" * 100)
    job("job-1", status="failed")  # the writer finds the garbage: replaced, never an error
    assert read_job_record("job-1")["status"] == "failed"
    assert listed() == {"job-1": ("failed", "unread")}


def test_an_index_of_an_older_layout_is_rebuilt(mmo_env):
    job("job-1", status="failed")
    index.close()
    for suffix in ("", "-wal", "-shm"):
        Path(f"{index_file()}{suffix}").unlink(missing_ok=True)
    old = sqlite3.connect(index_file())
    old.executescript("CREATE TABLE rows (kind TEXT, id TEXT, status TEXT);"
                      "INSERT INTO rows VALUES ('job', 'job-1', 'running');"
                      "INSERT INTO rows VALUES ('job', 'job-9', 'running');"
                      "PRAGMA user_version = 0;")
    old.close()
    assert listed() == {"job-1": ("failed", "unread")}
    check = sqlite3.connect(index_file())
    assert check.execute("PRAGMA user_version").fetchone()[0] == index.LAYOUT_VERSION
    assert [r[0] for r in check.execute("SELECT id FROM rows")] == ["job-1"]


def test_rows_built_by_another_mmo_version_are_read_again(mmo_env):
    job("job-1", status="failed")
    db = sqlite3.connect(index_file())
    with db:  # same file identity, but another version's reading of it
        db.execute("UPDATE rows SET status = 'running', reader = 'older-mmo' WHERE id = 'job-1'")
    db.close()
    assert listed() == {"job-1": ("failed", "unread")}
    assert indexed_rows()["job-1"].status == "failed"


def test_an_index_that_cannot_be_written_never_fails_a_write_nor_a_listing(mmo_env):
    job("job-1", status="completed")
    index.close()
    for suffix in ("", "-wal", "-shm"):
        Path(f"{index_file()}{suffix}").unlink(missing_ok=True)
    index_file().mkdir()  # whatever the reason, the index cannot be opened
    job("job-1", status="failed")
    job("job-2", status="completed")
    assert read_job_record("job-1")["status"] == "failed"
    markers = sorted(p.name for p in index.stale_dir().iterdir())
    assert markers and all(m.startswith("job-") for m in markers)
    assert listed() == {"job-1": ("failed", "unread"), "job-2": ("completed", "unread")}
    assert sorted(p.name for p in index.stale_dir().iterdir()) == markers  # still owed
    index_file().rmdir()
    assert listed() == {"job-1": ("failed", "unread"), "job-2": ("completed", "unread")}
    assert list(index.stale_dir().iterdir()) == []  # the rebuild consumed the markers
    assert set(indexed_rows()) == {"job-1", "job-2"}


def test_a_stale_marker_makes_the_next_listing_read_every_record(mmo_env):
    """A failed index update leaves a marker: even a row whose identity looks current is
    rebuilt (an identity can come back: inode numbers are reused)."""
    job("job-1", status="failed")
    db = sqlite3.connect(index_file())
    with db:  # a row that lies while its identity matches: only a marker can reveal it
        db.execute("UPDATE rows SET status = 'running' WHERE id = 'job-1'")
    db.close()
    index.mark_stale("job")
    assert listed() == {"job-1": ("failed", "unread")}
    assert list(index.stale_dir().iterdir()) == []


def test_unreadable_records_are_read_on_every_listing(mmo_env):
    job("job-1")
    path = job_file("job-1", "metadata.json")
    path.write_text("{ not json")
    with pytest.raises(RuntimeError, match="invalid job state in .*job-1"):
        list_jobs()
    assert [r["status"] for r in list_jobs(include_unreadable=True)] == ["unreadable"]
    assert indexed_rows()["job-1"].identity is None
    job("job-1", status="failed")  # repaired by a writer
    assert listed() == {"job-1": ("failed", "unread")}


WRITER = textwrap.dedent("""
    import sys
    from mmo_kernel.jobs.records import update_job, utc_now, write_job_record
    worker, count = sys.argv[1], int(sys.argv[2])
    for n in range(count):
        job_id = f"job-{worker}-{n:03d}"
        write_job_record({"job_id": job_id, "session_id": f"s{worker}", "agent": "worker",
                          "status": "running", "created_at": utc_now(), "profile_id": "demo"})
        update_job(job_id, result_state="unread")
        update_job(job_id, status="completed" if n % 2 else "failed")
    print("done", flush=True)
""")


def test_concurrent_writers_from_several_processes_keep_the_index_exact(mmo_env):
    """Four processes write 40 jobs each (three writes per job) while this process lists."""
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(w), "40"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              stdin=subprocess.DEVNULL) for w in range(4)]
    try:
        while any(p.poll() is None for p in procs):
            rows = list_jobs(summary=True)  # a reader racing the writers
            assert all(r["job_id"].startswith("job-") for r in rows)
        outcomes = [p.communicate(timeout=120) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    for p, (out, err) in zip(procs, outcomes, strict=True):
        assert p.returncode == 0 and out.strip() == "done", err
        assert "listing index not updated" not in err
    assert not index.stale_dir().exists() or list(index.stale_dir().iterdir()) == []
    disk = on_disk()
    assert len(disk) == 160
    rows = indexed_rows()  # as the writers left it: no listing ran after them
    assert {k: (r.status, r.result_state) for k, r in rows.items()} == disk
    assert all(r.identity == index.identity(job_file(k, "metadata.json"))
               for k, r in rows.items())
    assert listed() == disk


PUBLISHER = textwrap.dedent("""
    import sys
    from mmo_kernel.state import index
    worker, ids, rounds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    root = index.state_dir() / "jobs"
    for revision in range(rounds):
        for n in range(ids):
            job_id = f"job-{worker}-{n:03d}"
            index.publish("job", job_id, root / job_id / "metadata.json",
                          {"session_id": "s1", "agent": "worker", "status": "running",
                           "created_at": "2026-01-01T00:00:00.000000+00:00",
                           "progress_revision": revision})
    print("done", flush=True)
""")


def test_concurrent_publishers_wait_for_each_other_instead_of_losing_updates(mmo_env):
    """Four processes publish 2,000 rows each as fast as they can (no record write between
    to spread them out): every update lands, none is dropped as "database is locked"."""
    root = index.state_dir() / "jobs"
    for w in range(4):
        for n in range(50):
            (root / f"job-{w}-{n:03d}").mkdir(parents=True)
            (root / f"job-{w}-{n:03d}" / "metadata.json").write_text("{}")
    procs = [subprocess.Popen([sys.executable, "-c", PUBLISHER, str(w), "50", "40"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              stdin=subprocess.DEVNULL) for w in range(4)]
    try:
        outcomes = [p.communicate(timeout=300) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    for p, (out, err) in zip(procs, outcomes, strict=True):
        assert p.returncode == 0 and out.strip() == "done", err
        assert "listing index not updated" not in err, err
    assert not index.stale_dir().exists()
    rows = indexed_rows()
    assert len(rows) == 200
    assert {r.progress_revision for r in rows.values()} == {39}
