"""A process job's logs: written redacted, read for a reply (spec 12 "Process
execution", "Limits", "Security rules").

A job's stdout and stderr are pipes; one ``LogPump`` thread per pipe copies what the
child writes into ``stdout.log`` / ``stderr.log`` in the job dir with every credential
value the kernel's redactor knows replaced by ``[redacted:<NAME>]`` (spec 12: no
credential in any log). The copy is byte for byte otherwise: binary data, partial
lines and a value split across two writes are handled (``StreamRedactor``), and the
pump reads as fast as the child writes (a 1 MiB pipe, never waiting on anything but
the pipe), so a chatty child is never stalled by the runner. The pump counts the
bytes the child wrote (``stdout_bytes`` / ``stderr_bytes``); the log holds them
redacted.

A reply carries the head 8 KiB and the tail 24 KiB of the log with one ``[... N bytes
omitted ...]`` line between (N counts log bytes), cut at line boundaries when there
are any, so the last lines always reach the host; ``observe_jobs`` reads the last
lines within 32 KiB.
"""

from __future__ import annotations

import fcntl
import logging
import os
import re
import select
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from mmo_kernel.state import redaction

LOG = logging.getLogger("mmo.runner.jobs")

HEAD_BYTES = 8 * 1024
TAIL_BYTES = 24 * 1024
OBSERVE_TAIL_BYTES = 32 * 1024


@dataclass(frozen=True)
class Excerpt:
    """What a reply says about one stream."""

    text: str
    total_bytes: int
    truncated: bool


def log_size(path: Path) -> int:
    """Bytes written so far (0 when the file does not exist yet)."""
    try:
        return os.stat(path).st_size
    except OSError:
        return 0


def _read_range(path: Path, start: int, length: int) -> bytes:
    try:
        with open(path, "rb") as handle:
            handle.seek(start)
            return handle.read(length)
    except OSError:
        return b""


def _decode(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")


def head_and_tail(path: Path, head: int = HEAD_BYTES, tail: int = TAIL_BYTES) -> Excerpt:
    """The whole log when it fits in ``head + tail`` bytes, else head, marker line, tail.

    The head ends after its last newline and the tail starts at a line start (when the
    window holds a newline), and the marker counts exactly the bytes left out.
    """
    size = log_size(path)
    if size <= head + tail:
        return Excerpt(_decode(_read_range(path, 0, size)), size, False)
    first = _read_range(path, 0, head)
    cut = first.rfind(b"\n")
    if cut != -1:
        first = first[: cut + 1]
    start = size - tail
    last = _read_range(path, start, tail)
    if _read_range(path, start - 1, 1) != b"\n":
        newline = last.find(b"\n")
        if newline != -1 and newline < len(last) - 1:
            last = last[newline + 1:]
    omitted = size - len(first) - len(last)
    text = _decode(first)
    if text and not text.endswith("\n"):
        text += "\n"
    text += f"[... {omitted} bytes omitted ...]\n" + _decode(last)
    return Excerpt(text, size, True)


def tail_lines(path: Path, lines: int, limit: int = OBSERVE_TAIL_BYTES) -> str:
    """The last ``lines`` lines of the log, within the last ``limit`` bytes (a partial
    first line of that window is dropped when the window does not start the file)."""
    if lines <= 0:
        return ""
    size = log_size(path)
    start = max(size - limit, 0)
    data = _read_range(path, start, size - start)
    if start > 0 and _read_range(path, start - 1, 1) != b"\n":
        newline = data.find(b"\n")
        data = data[newline + 1:] if newline != -1 else b""
    kept = data.splitlines(keepends=True)[-lines:]
    return _decode(b"".join(kept))


def scrubber(replacements: list[tuple[Path | str, str]]):  # type: ignore[no-untyped-def]
    """A function replacing the runner's absolute paths in process output (spec 12: no
    absolute path of the runner's machine in any output): each ``(path, placeholder)``
    pair, longest path first; ``path/`` + rest becomes the rest (project-relative) when
    the placeholder is empty."""
    pairs = sorted(((str(p), r) for p, r in replacements if str(p) not in ("", "/")),
                   key=lambda pair: -len(pair[0]))
    if not pairs:
        return lambda text: text
    pattern = re.compile("|".join(
        re.escape(p) + r"(?:/|(?![\w.-]))" for p, _ in pairs))
    table = dict(pairs)

    def replace(match: re.Match[str]) -> str:
        found = match.group(0)
        path = found[:-1] if found.endswith("/") and found[:-1] in table else found
        placeholder = table[path]
        if found.endswith("/") and path != found:
            return placeholder + "/" if placeholder else ""
        return placeholder or "."

    return lambda text: pattern.sub(replace, text) if text else text


# ------------------------------------------------------------------- writing --

PIPE_BYTES = 1024 * 1024
"""Pipe capacity asked for (Linux' unprivileged maximum): slack while the pump works."""
READ_BYTES = 256 * 1024
SETTLE_QUIET_SECS = 0.2
"""How long a pipe still held by a process outside the job must stay drained before the
job may end without its end of file."""
SETTLE_CAP_SECS = 5.0
"""How long a job's end waits at most for its pipes (a writer outside the job streaming
forever)."""


class StreamRedactor:
    """Redacts a byte stream fed in arbitrary pieces exactly as if it came in one piece.

    Every form of a known value (``Redactor.forms``: the value, its lines, its JSON
    escapes), UTF-8 encoded, is replaced by its marker wherever it occurs in the
    bytes, binary or not. The end of a piece that could be the start of a value is
    held back until the next piece (or ``flush``) shows whether it is one; nothing
    else is held, so a prompt without a newline reaches the log at once. The known
    values are looked up at each piece (``credentials.env`` may change meanwhile).
    """

    def __init__(self) -> None:
        self._carry = b""
        self._basis: object = None
        self._forms: dict[bytes, bytes] = {}
        self._pattern: re.Pattern[bytes] | None = None
        self._prefixes: frozenset[bytes] = frozenset()
        self._starts: frozenset[int] = frozenset()
        self._longest = 0

    def _refresh(self) -> None:
        current = redaction.redactor()
        if current is self._basis:
            return
        self._basis = current
        forms: dict[bytes, bytes] = {}
        for text, name in current.forms.items():
            try:
                raw = text.encode("utf-8", "surrogateescape")
            except UnicodeEncodeError:
                raw = text.encode("utf-8", "surrogatepass")
            if raw:
                forms.setdefault(raw, redaction.marker(name).encode("utf-8", "replace"))
        self._forms = forms
        ordered = sorted(forms, key=lambda v: (-len(v), v))  # the longest value wins
        self._pattern = re.compile(b"|".join(map(re.escape, ordered))) if ordered else None
        self._prefixes = frozenset(f[:i] for f in forms for i in range(1, len(f)))
        self._starts = frozenset(f[0] for f in forms)
        self._longest = max(map(len, forms), default=0)

    def _held_from(self, data: bytes, start: int) -> int:
        """The first position from ``start`` whose rest could begin a longer value."""
        for index in range(max(start, len(data) - self._longest + 1), len(data)):
            if data[index] in self._starts and data[index:] in self._prefixes:
                return index
        return len(data)

    def feed(self, data: bytes) -> bytes:
        """The redacted bytes that are final after ``data``."""
        self._refresh()
        data, self._carry = self._carry + data, b""
        if self._pattern is None:
            return data
        held = self._held_from(data, 0)
        if not any(form in data for form in self._forms):
            self._carry = data[held:]
            return data[:held]
        out: list[bytes] = []
        position = 0
        for match in self._pattern.finditer(data):
            if match.start() >= held:
                break
            out += [data[position:match.start()], self._forms[match.group(0)]]
            position = match.end()
        if position > held:
            held = self._held_from(data, position)
        out.append(data[position:held])
        self._carry = data[held:]
        return b"".join(out)

    def flush(self) -> bytes:
        """The end of the stream: what was held, redacted (a shorter value may end it)."""
        rest, self._carry = self._carry, b""
        if self._pattern is None or not rest:
            return rest
        return self._pattern.sub(lambda match: self._forms[match.group(0)], rest)


def _open_log(path: Path) -> int:
    return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o600)


def child_pipe() -> tuple[int, int]:
    """``(read_fd, write_fd)`` for one of a child's output streams (both close-on-exec;
    ``subprocess`` dups the write end into the child)."""
    read_fd, write_fd = os.pipe()
    try:
        fcntl.fcntl(write_fd, fcntl.F_SETPIPE_SZ, PIPE_BYTES)
    except (OSError, AttributeError):
        pass  # the default capacity only means less slack
    return read_fd, write_fd


class LogPump:
    """Copies one child pipe (``read_fd``, now owned by the pump) into the log ``path``,
    redacted, in a daemon thread until end of file; ``bytes_read`` counts what the
    child wrote. A log that cannot be written (full disk) is given up, the pipe is
    still drained: the child never blocks on the runner."""

    def __init__(self, read_fd: int, path: Path, *, name: str) -> None:
        self._fd = read_fd
        self._path = path
        self._log: int | None = None
        try:
            self._log = _open_log(path)
        except OSError as exc:
            LOG.warning("cannot open process job log %s: %s; its output is dropped",
                        path.name, exc)
        self._redactor = StreamRedactor()
        self._lock = threading.Lock()
        self._closed = False
        self.bytes_read = 0
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _write(self, data: bytes) -> None:
        log, view = self._log, memoryview(data)
        if log is None:
            return
        try:
            while view:
                view = view[os.write(log, view):]
        except OSError as exc:
            LOG.warning("cannot write process job log %s: %s; dropping the rest",
                        self._path.name, exc)
            os.close(log)
            self._log = None

    def _copy(self, data: bytes) -> None:
        try:
            clean = self._redactor.feed(data)
        except Exception:  # noqa: BLE001 - never write unredacted bytes, never stop draining
            LOG.exception("cannot redact process job output; dropping %d bytes", len(data))
            clean = b""
        self._write(clean)
        self.bytes_read += len(data)

    def _run(self) -> None:
        poller = select.poll()
        poller.register(self._fd, select.POLLIN)
        try:
            while True:
                events = poller.poll()
                if any(mask & select.POLLNVAL for _, mask in events):
                    return
                with self._lock:
                    try:
                        data = os.read(self._fd, READ_BYTES)
                    except BlockingIOError:
                        continue
                    except OSError:
                        return
                    if not data:
                        return
                    self._copy(data)
        finally:
            with self._lock:
                try:
                    self._write(self._redactor.flush())
                except Exception:  # noqa: BLE001 - the held bytes were never a value
                    pass
                if self._log is not None:
                    os.close(self._log)
                    self._log = None
                os.close(self._fd)
                self._closed = True

    def _drained(self) -> bool:
        """True when the pipe reached its end or everything written so far is logged."""
        with self._lock:
            if self._closed:
                return True
            poller = select.poll()
            poller.register(self._fd, select.POLLIN)
            return not poller.poll(0)

    def settle(self) -> None:
        """Called once every process of the job is gone: until end of file, or, when a
        process that left the job's group still holds the pipe, until what it wrote so
        far is in the log (quiet for ``SETTLE_QUIET_SECS``; ``SETTLE_CAP_SECS`` at
        most). The pump goes on copying such a writer's output."""
        deadline = time.monotonic() + SETTLE_CAP_SECS
        quiet_since: float | None = None
        while time.monotonic() < deadline:
            self._thread.join(0.02)
            if self._closed:
                return
            if not self._drained():
                quiet_since = None
                continue
            now = time.monotonic()
            quiet_since = quiet_since or now
            if now - quiet_since >= SETTLE_QUIET_SECS:
                return
