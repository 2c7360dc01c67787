"""Orphan watch for detached hosts: a host whose records are gone retires and exits.

A root or job host is detached (its own process group) and its root app-server
deliberately survives it, so nothing else ever stops a host whose state dir or
session was deleted: it would run, with its app-server, forever. A host starts
``watch_orphaned`` once; a daemon thread checks that the host's records still
exist and, when one has been missing twice in a row, kills the host's agent
server groups (identity-checked), removes its sockets, and ends the host's own
process group — itself and any child a tool left behind.

The check is on the files, not on their content: records are written by atomic
rename, so a record that exists is never missing for a moment, and a record
that is unreadable is not proof that the session is gone.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from mmo_kernel.state.processes import process_matches

ORPHAN_CHECK_SECONDS = 1.0
ORPHAN_MISSES = 2
"""Consecutive checks a record must be missing before the host gives up."""
EXIT_ORPHANED = 3

ProcessFields = tuple[str, str, str]
"""Record keys ``(pid, pgid, start token)`` of a process group the host started."""


def missing_record(paths: Iterable[Path]) -> Path | None:
    """The first of ``paths`` that no longer exists (a symlink counts as existing)."""
    for path in paths:
        if not os.path.lexists(path):
            return Path(path)
    return None


class OrphanWatch(threading.Thread):
    """Checks every ``interval`` seconds; calls ``on_orphan(reason)`` once, then ends."""

    def __init__(self, paths: Sequence[Path], on_orphan: Callable[[str], None],
                 interval: float = ORPHAN_CHECK_SECONDS) -> None:
        super().__init__(name="mmo-orphan-watch", daemon=True)
        self.paths = [Path(p) for p in paths]
        self.on_orphan = on_orphan
        self.interval = interval
        self.stopped = threading.Event()

    def run(self) -> None:
        misses = 0
        while not self.stopped.wait(self.interval):
            gone = missing_record(self.paths)
            misses = misses + 1 if gone is not None else 0
            if gone is not None and misses >= ORPHAN_MISSES:
                self.on_orphan(f"{gone} is gone")
                return

    def stop(self) -> None:
        self.stopped.set()


def retire_orphan(reason: str, record: Mapping[str, Any], groups: Sequence[ProcessFields],
                  files: Iterable[Path | str | None] = ()) -> None:
    """Kill the recorded agent-server groups, remove ``files``, end this host's group.

    SIGKILL, without a grace period: there is no record left to finish, and the
    host's own turn loop must not get the chance to restart an app-server it
    sees die. Never returns.
    """
    print(f"mmo host {os.getpid()}: {reason}; retiring the agent server and exiting",
          file=sys.stderr, flush=True)
    for pid_field, pgid_field, token_field in groups:
        pid, token = record.get(pid_field), record.get(token_field)
        pgid = record.get(pgid_field) or pid
        if process_matches(pid, token) and isinstance(pgid, int) and pgid > 1:
            try:
                os.killpg(pgid, signal.SIGKILL)
            except OSError:
                pass
    for path in files:
        if path:
            try:
                os.unlink(path)
            except OSError:
                pass
    if os.getpgid(0) == os.getpid():  # a detached host leads its group: end all of it
        os.killpg(os.getpid(), signal.SIGKILL)
    os._exit(EXIT_ORPHANED)


def watch_orphaned(paths: Sequence[Path], record: Callable[[], Mapping[str, Any]],
                   groups: Sequence[ProcessFields],
                   files: Callable[[], Iterable[Path | str | None]] = tuple,
                   interval: float = ORPHAN_CHECK_SECONDS) -> OrphanWatch:
    """Start the watch for a host: when one of ``paths`` (its session record, its job
    record) is gone, the groups named by ``groups`` in ``record()`` (the host's latest
    record, kept in memory) are killed, ``files()`` (its sockets) removed, and the host
    exits. Returns the started thread."""
    watch = OrphanWatch(paths, lambda reason: retire_orphan(reason, record(), groups, files()),
                        interval)
    watch.start()
    return watch


__all__ = ["ORPHAN_CHECK_SECONDS", "OrphanWatch", "missing_record", "retire_orphan",
           "watch_orphaned"]
