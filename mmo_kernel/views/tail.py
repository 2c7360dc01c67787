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

    __slots__ = ("path", "offset", "bytes_read", "restarted", "_file", "_ino", "_partial")

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._file = os.fspath(path)  # a str for the system calls: read every second
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
        chunk = self.read_chunk(max_bytes)
        return [line for line in chunk.split(b"\n") if line and not line.isspace()] \
            if chunk else []

    def read_chunk(self, max_bytes: int | None = None) -> bytes:
        """``read`` as one run of bytes: the new complete lines joined by their newlines
        (no trailing one), for a reader that finds the few lines it wants without
        splitting out every line."""
        self.restarted = False
        try:
            st = os.stat(self._file)
        except (FileNotFoundError, NotADirectoryError):
            return b""
        if st.st_ino != self._ino or st.st_size < self.offset:
            self.restarted = self._ino is not None
            self._ino, self.offset, self._partial = st.st_ino, 0, b""
        if st.st_size == self.offset:
            return b""
        try:
            fd = os.open(self._file, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            return b""
        try:
            want = st.st_size - self.offset
            data = os.pread(fd, want if max_bytes is None else min(want, max_bytes), self.offset)
        finally:
            os.close(fd)
        self.offset += len(data)
        self.bytes_read += len(data)
        data = self._partial + data if self._partial else data
        cut = data.rfind(b"\n")
        if cut < 0:
            self._partial = data
            return b""
        self._partial = data[cut + 1:]
        return data[:cut]
