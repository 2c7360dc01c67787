"""Reading an append-only log from where the last read stopped."""

from __future__ import annotations

import os
from pathlib import Path


class LogTail:
    """The complete lines appended to one log since the previous ``read``.

    A line still being written (no newline yet) is held back until it is
    complete. A log replaced by another file (new inode) or cut shorter than what
    was read is read again from its start, and ``restarted`` says so: whatever
    was folded from the old content no longer holds.
    """

    __slots__ = ("path", "offset", "bytes_read", "restarted", "_ino", "_partial")

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.offset = 0
        self.bytes_read = 0
        self.restarted = False
        self._ino: int | None = None
        self._partial = b""

    def read(self, max_bytes: int | None = None) -> list[bytes]:
        """New complete lines (without their newline); ``[]`` when nothing was added.

        ``max_bytes`` bounds one read (the rest comes next time), so a viewer that
        opens a huge log catches up over a few refreshes instead of stalling one.
        """
        self.restarted = False
        try:
            st = os.stat(self.path)
        except (FileNotFoundError, NotADirectoryError):
            return []
        if st.st_ino != self._ino or st.st_size < self.offset:
            self.restarted = self._ino is not None
            self._ino, self.offset, self._partial = st.st_ino, 0, b""
        if st.st_size == self.offset:
            return []
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            return []
        try:
            want = st.st_size - self.offset
            data = os.pread(fd, want if max_bytes is None else min(want, max_bytes), self.offset)
        finally:
            os.close(fd)
        self.offset += len(data)
        self.bytes_read += len(data)
        *lines, self._partial = (self._partial + data).split(b"\n")
        return [line for line in lines if line.strip()]
