"""Credential values never reach a file MMO writes (issue 13, "no credentials in evidence").

One process-wide redactor replaces every known credential value with
``[redacted:<NAME>]`` at the write choke points (``atomic_write_*``,
``append_jsonl``, the gateway's request log, the stdio of MMO's detached
processes and app-servers' stderr pumps). It knows:

- every value a higher layer registered (``register_values``; the config
  layer registers what it resolves) and every source it registered
  (``register_source``; ``credentials.env`` is one, re-read when it changes);
- the values, in this process's environment, of every name registered with
  ``register_names`` (the catalog's ``credential_env`` / ``env_http_headers``
  names, tool servers' env names, a session's credential names);
- the value of every environment variable whose name looks like a secret
  (``*KEY*``, ``*TOKEN*``, ``*SECRET*``, ``*PASSWORD*``, ``*PASSWD*``,
  ``*CREDENTIAL*``, any case), whatever the rest of the name.

The state layer cannot import the config layer, hence registration.

Values shorter than ``MIN_SECRET_LENGTH`` are left alone (redacting ``1`` or
``true`` everywhere would destroy records, and such a value is no secret).
A heuristic name's value that is an existing path (``GNOME_KEYRING_CONTROL``)
is left alone too: rewriting a path MMO records would corrupt the record.
MMO's own capability variables (``MMO_CALLER_TOKEN``, ``MMO_NATIVE_CALLER_TOKEN``)
are not credentials: MMO reads them back from its own records, so they are
kept out of agents' shells instead (spec 07).

JSON is never corrupted: objects are redacted string by string before they
are serialized (``redact_value``), and JSON text is redacted literal by literal
(each string literal is decoded, redacted and encoded again; numbers,
punctuation and the layout are left as they were). Other text is redacted as
text. Bytes that are not UTF-8 (images, databases) are written unchanged.
"""

from __future__ import annotations

import json
import os
import re
import sys
import threading
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import IO, Any

MIN_SECRET_LENGTH = 8
SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL", re.IGNORECASE)
"""Environment variable names whose values count as credentials whatever the rest says."""
CAPABILITY_NAMES = frozenset({"MMO_CALLER_TOKEN", "MMO_NATIVE_CALLER_TOKEN"})
"""MMO's own mesh capabilities (spec 07), never redacted: see the module docstring."""
_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)

Source = Callable[[], Mapping[str, str]]

_lock = threading.RLock()
_names: set[str] = set()
_values: dict[str, str] = {}
_sources: list[Source] = []
_cache: tuple[Any, Redactor] | None = None


def marker(name: str) -> str:
    """What a value of ``name`` becomes in a file."""
    return f"[redacted:{name}]"


def looks_secret(name: str) -> bool:
    """True for a variable name that looks like it holds a credential."""
    return bool(SECRET_NAME.search(name)) and name not in CAPABILITY_NAMES


def register_names(names: Iterable[str]) -> None:
    """Redact the values these environment variables have (now or later) in this process."""
    fresh = {n for n in names if isinstance(n, str) and n and n not in CAPABILITY_NAMES}
    with _lock:
        _names.update(fresh)


def register_values(values: Mapping[str, str]) -> None:
    """Redact these credential values (``name -> value``) from now on."""
    with _lock:
        for name, value in values.items():
            if isinstance(value, str) and name not in CAPABILITY_NAMES:
                _values[name] = value


def register_source(source: Source) -> None:
    """Call ``source()`` (cheap, never raising) whenever the redactor is needed."""
    with _lock:
        if source not in _sources:
            _sources.append(source)


def _pieces(value: str) -> list[str]:
    """The value, and each line of a multi-line value (a PEM key, say)."""
    pieces = [value]
    if "\n" in value or "\r" in value:
        pieces += [line.strip() for line in value.splitlines()]
    return [p for p in pieces if len(p) >= MIN_SECRET_LENGTH]


def _is_path(value: str) -> bool:
    try:
        return value.startswith(("/", "~", ".")) and os.path.exists(os.path.expanduser(value))
    except (OSError, ValueError):
        return False


def known_secrets(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """Every credential value the redactor knows: ``value -> name``."""
    env = os.environ if environ is None else environ
    found: dict[str, str] = {}

    def add(name: str, value: str, heuristic: bool = False) -> None:
        if heuristic and _is_path(value):
            return
        for piece in _pieces(value):
            found.setdefault(piece, name)

    with _lock:
        for name, value in _values.items():
            add(name, value)
        for source in list(_sources):
            for name, value in source().items():
                add(name, value)
        names = set(_names)
    for name, value in env.items():
        if name in names:
            add(name, value)
        elif looks_secret(name):
            add(name, value, heuristic=True)
    for value in [v for v, n in found.items() if v in marker(n)]:
        del found[value]  # never redact inside our own marker (redacting twice is a no-op)
    return found


class Redactor:
    """Replaces known values; built by ``redactor()``, cheap to apply when nothing matches."""

    def __init__(self, secrets: Mapping[str, str]) -> None:
        self.names = dict(secrets)
        forms: dict[str, str] = {}
        for value, name in self.names.items():
            forms[value] = name
            for ascii_only in (True, False):  # how a JSON writer may have escaped it
                escaped = json.dumps(value, ensure_ascii=ascii_only)[1:-1]
                forms.setdefault(escaped, name)
        self.forms = forms
        self._raw = _alternation(self.names)
        self._any = _alternation(forms)
        self._bytes: re.Pattern[bytes] | None = None

    def __bool__(self) -> bool:
        return bool(self.names)

    def text(self, text: str) -> str:
        """Plain (decoded) text: every occurrence of a value becomes its marker."""
        if self._raw is None or not isinstance(text, str):
            return text
        return self._raw.sub(lambda m: marker(self.names[m.group(0)]), text)

    def value(self, value: Any) -> Any:
        """A copy of a JSON-like value with every string (keys too) redacted."""
        if self._raw is None:
            return value
        return self._walk(value)

    def _walk(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {self.text(k) if isinstance(k, str) else k: self._walk(v)
                    for k, v in value.items()}
        if isinstance(value, list):
            return [self._walk(v) for v in value]
        if isinstance(value, tuple):
            return tuple(self._walk(v) for v in value)
        return value

    def document(self, text: str) -> str:
        """Text of a file: JSON (or JSON lines) literal by literal, anything else as text."""
        if self._any is None or not self._any.search(text):
            return text
        if _is_json(text):
            return self._json_text(text)
        lines = text.splitlines(keepends=True)
        if lines and all(_is_json(line) for line in lines if line.strip()):
            return "".join(self._json_text(line) for line in lines)
        return self._any.sub(lambda m: marker(self.forms[m.group(0)]), text)

    def _json_text(self, text: str) -> str:
        def literal(match: re.Match[str]) -> str:
            token = match.group(0)
            decoded = json.loads(token)
            clean = self.text(decoded)
            if clean == decoded:
                return token
            return json.dumps(clean, ensure_ascii=token.isascii())
        return _JSON_STRING.sub(literal, text)

    def stream(self, data: bytes) -> bytes:
        """Bytes of a child's output (a log): every value's UTF-8 form replaced wherever it
        stands, also among bytes that are not UTF-8 text."""
        if self._raw is None:
            return data
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            if self._bytes is None:  # built once per redactor: a pump calls this per line
                self._bytes = re.compile(b"|".join(re.escape(v.encode("utf-8")) for v in sorted(
                    self.names, key=lambda v: (-len(v), v))))
            return self._bytes.sub(
                lambda m: marker(self.names[m.group(0).decode("utf-8")]).encode("utf-8"), data)
        clean = self.text(text)
        return data if clean == text else clean.encode("utf-8")

    def data(self, data: bytes) -> bytes:
        """File bytes: UTF-8 text as ``document``; anything else unchanged."""
        if self._any is None:
            return data
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            return data
        clean = self.document(text)
        return data if clean == text else clean.encode("utf-8")


def _alternation(values: Iterable[str]) -> re.Pattern[str] | None:
    ordered = sorted(set(values), key=lambda v: (-len(v), v))  # the longest value wins
    return re.compile("|".join(re.escape(v) for v in ordered)) if ordered else None


def _is_json(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


def redactor() -> Redactor:
    """The redactor for what this process knows now (rebuilt only when that changes)."""
    global _cache
    secrets = known_secrets()
    key = tuple(sorted(secrets.items()))
    with _lock:
        if _cache is None or _cache[0] != key:
            _cache = (key, Redactor(secrets))
        return _cache[1]


def redact_text(text: str) -> str:
    """``text`` with every known credential value replaced by its marker."""
    return redactor().text(text)


def redact_value(value: Any) -> Any:
    """A JSON-like value with every string redacted (structure untouched)."""
    return redactor().value(value)


def redact_document(text: str) -> str:
    """The text of a file (JSON stays valid JSON)."""
    return redactor().document(text)


def redact_bytes(data: bytes) -> bytes:
    """The bytes of a file (non-UTF-8 data is returned unchanged)."""
    return redactor().data(data)


def redact_stream_bytes(data: bytes) -> bytes:
    """Bytes of a child's output for a log: redacted even where they are not UTF-8."""
    return redactor().stream(data)


# ------------------------------------------------------------------ streams --


def _open_log(path: Path) -> int:
    return os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o600)


def pump_redacted(stream: IO[bytes], path: Path, *, name: str = "redacting-pump"
                  ) -> threading.Thread:
    """Copy ``stream`` (a child's stderr pipe) line by line, redacted, to the log ``path``.

    Runs in a daemon thread until end of file, so the child never blocks on a
    full pipe while the thread lives. Lines are whole (a secret has no newline),
    so a value is never split between two redactions.
    """
    fd = _open_log(Path(path))

    def run() -> None:
        try:
            for line in iter(stream.readline, b""):
                os.write(fd, redact_stream_bytes(line))
        except (OSError, ValueError):
            pass  # the pipe was closed under us: nothing more to copy
        finally:
            os.close(fd)
            stream.close()

    thread = threading.Thread(target=run, name=name, daemon=True)
    thread.start()
    return thread


class RedactingStream:
    """A text stream (``sys.stderr``) that writes whole lines, redacted, to another.

    A partial line waits for its newline (or the exit), so a value is never
    split between two writes. Other attributes are the target's.
    """

    def __init__(self, target: IO[str]) -> None:
        self._target = target
        self._pending = ""
        self._guard = threading.Lock()

    def write(self, text: str) -> int:
        with self._guard:
            self._pending += text
            head, newline, tail = self._pending.rpartition("\n")
            if newline:
                self._pending = tail
                self._target.write(redact_text(head + newline))
                self._target.flush()
        return len(text)

    def flush(self) -> None:
        self._target.flush()

    def drain(self) -> None:
        """Write a last partial line (at exit)."""
        with self._guard:
            pending, self._pending = self._pending, ""
        if pending:
            self._target.write(redact_text(pending))
        self._target.flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._target, name)


def install_stdio_redaction() -> None:
    """Redact everything this process prints to ``sys.stdout`` / ``sys.stderr``."""
    import atexit

    for attr in ("stdout", "stderr"):
        current = getattr(sys, attr)
        if current is None or isinstance(current, RedactingStream):
            continue
        wrapped = RedactingStream(current)
        setattr(sys, attr, wrapped)
        atexit.register(wrapped.drain)


REDACTED_MAIN = "mmo_kernel.state.redaction"
"""``python -m REDACTED_MAIN <module> [args]`` runs ``python -m <module> [args]`` with
its standard streams redacted (how ``spawn_detached`` starts MMO's own processes)."""


def run_module_redacted(argv: list[str]) -> None:
    """Entry of ``python -m mmo_kernel.state.redaction <module> [args ...]``."""
    import runpy

    if not argv:
        raise SystemExit(f"usage: python -m {REDACTED_MAIN} MODULE [ARGS ...]")
    install_stdio_redaction()
    sys.argv = list(argv)
    runpy.run_module(argv[0], run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    # run through the imported module, so registrations made by the code it runs
    # reach the same registry this process's streams use
    from mmo_kernel.state import redaction as _module

    _module.run_module_redacted(sys.argv[1:])
