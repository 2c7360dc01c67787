"""Waking on record writes: a watch on directories that fires when a file is renamed into
one of them (every record write is an atomic rename).

Waiters poll records anyway (liveness, timeouts, cancellation); this only shortens the
sleep between polls when something was published, so a terminal job is noticed in about a
millisecond instead of half a poll interval on average. On Linux it is inotify, called
through ctypes (the standard library has no binding, and the few calls needed do not
justify a dependency); elsewhere, or when the kernel refuses a watch (``max_user_watches``
reached), ``wait`` just sleeps for its timeout, which is exactly the polling it replaces.
"""

from __future__ import annotations

import ctypes
import errno
import os
import select
import sys
import threading
from collections.abc import Iterable

IN_MOVED_TO = 0x00000080
"""A file was renamed into the directory: the last step of every atomic write."""


def _libc() -> ctypes.CDLL | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.inotify_init1.argtypes = [ctypes.c_int]
        libc.inotify_add_watch.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
    except (OSError, AttributeError):
        return None
    return libc


class RenameWatch:
    """Wakes ``wait`` when a file is renamed into any of ``directories``.

    Use as a context manager (it holds a file descriptor). Directories that do not
    exist are skipped; a watch the kernel refuses degrades this to plain sleeping.
    """

    def __init__(self, directories: Iterable[str | os.PathLike[str]]) -> None:
        self.fd = -1
        libc = _libc()
        if libc is None:
            return
        fd = libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        if fd < 0:
            return
        for directory in directories:
            if libc.inotify_add_watch(fd, os.fsencode(directory), IN_MOVED_TO) < 0:
                if ctypes.get_errno() in (errno.ENOENT, errno.ENOTDIR):
                    continue  # a job directory removed meanwhile: its record is gone anyway
                os.close(fd)  # ENOSPC (watch limit), EACCES, ...: sleep instead
                return
        self.fd = fd

    @property
    def active(self) -> bool:
        return self.fd >= 0

    def wait(self, timeout: float) -> bool:
        """Sleep up to ``timeout`` seconds; True when woken by a rename (events drained)."""
        timeout = max(timeout, 0.0)
        if self.fd < 0:
            if timeout:
                select.select([], [], [], timeout)
            return False
        ready, _, _ = select.select([self.fd], [], [], timeout)
        if not ready:
            return False
        self._drain()
        return True

    def _drain(self) -> None:
        while True:
            try:
                if not os.read(self.fd, 65536):
                    return
            except BlockingIOError:
                return

    def close(self) -> None:
        """Release the watch without making the caller wait: the kernel tears an inotify
        instance down synchronously (an RCU grace period, ~9 ms measured here), which
        would otherwise delay every ``wait_for_jobs`` return by that much."""
        if self.fd >= 0:
            fd, self.fd = self.fd, -1
            threading.Thread(target=os.close, args=(fd,), name="mmo-watch-close",
                             daemon=True).start()

    def __enter__(self) -> RenameWatch:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
