"""``credentials.env`` in the config dir, and how a credential is looked up (spec 02).

A non-empty process environment variable wins; an empty or unset one falls
back to the file. Errors name the file, the line number and the variable
name, never a value: a secret must not end up in a log or a traceback.

Every value this module reads (the whole file, and what it resolves from the
environment) is registered with the state layer's redactor, so no file MMO
writes ever holds one (``mmo_kernel.state.redaction``).
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterable, Mapping
from pathlib import Path

from mmo_kernel.state import redaction
from mmo_kernel.state.files import atomic_write_text
from mmo_kernel.state.paths import credentials_path, ensure_private_dir

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_QUOTES = ("'", '"')

CREDENTIALS_HEADER = (
    "# MMO credentials: one KEY=value per line (optional `export `, optional matching\n"
    "# quotes). Keep this file 0600. A non-empty environment variable of the same\n"
    "# name wins over this file.\n"
)


def valid_env_name(name: str) -> bool:
    """True for a POSIX-style environment variable name."""
    return isinstance(name, str) and bool(_NAME.match(name))


def has_control_character(value: str) -> bool:
    """True if ``value`` holds a C0 control character (newline, NUL, tab, ...) or DEL."""
    return any(ord(ch) < 32 or ord(ch) == 127 for ch in value)


def check_credential_value(name: str, value: str) -> str:
    """Return ``value`` unless it holds a control character (``RuntimeError`` naming ``name``)."""
    if has_control_character(value):
        raise RuntimeError(
            f"credential {name} contains a prohibited control character; "
            "fix the value in the environment or credentials.env"
        )
    return value


def _unquote(value: str) -> str | None:
    """Strip one pair of matching quotes; ``None`` for an unbalanced quote."""
    if value[:1] in _QUOTES:
        if len(value) >= 2 and value[-1] == value[0]:
            return value[1:-1]
        return None
    if value[-1:] in _QUOTES:
        return None
    return value


def _parse_line(line: str, path: Path, number: int) -> tuple[str, str] | None:
    stripped = line.strip()
    if not stripped or stripped.startswith("#"):
        return None
    if stripped.startswith("export "):
        stripped = stripped[len("export "):].lstrip()
    name, sep, raw = stripped.partition("=")
    name = name.strip()
    if not sep or not valid_env_name(name):
        raise ValueError(f"{path}: line {number}: malformed line; expected KEY=value")
    value = _unquote(raw.strip())
    if value is None:
        raise ValueError(f"{path}: line {number}: {name} has an unbalanced quote")
    return name, value


def _check_permissions(path: Path) -> None:
    info = path.stat()
    if info.st_uid != os.getuid():
        raise PermissionError(f"{path} is not owned by you; refusing to read credentials from it")
    if stat.S_IMODE(info.st_mode) & 0o077:
        raise PermissionError(
            f"{path} is accessible by other users (mode {stat.S_IMODE(info.st_mode):04o}); "
            f"run `chmod 600 {path}`"
        )


def parse_credentials(path: Path | None = None) -> dict[str, str]:
    """All ``KEY=value`` pairs of ``credentials.env`` (a missing file is empty).

    Refuses (``PermissionError``) a file other users can read or write, or
    that another user owns; a malformed or duplicate line raises
    ``ValueError`` naming the file and line number.
    """
    path = credentials_path() if path is None else Path(path)
    if not path.exists():
        return {}
    _check_permissions(path)
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"{path}: not UTF-8 text") from None
    values: dict[str, str] = {}
    first_line: dict[str, int] = {}
    for number, line in enumerate(text.split("\n"), start=1):
        parsed = _parse_line(line.removesuffix("\r"), path, number)
        if parsed is None:
            continue
        name, value = parsed
        if name in first_line:
            raise ValueError(
                f"{path}: line {number}: duplicate {name} (first set on line {first_line[name]})"
            )
        first_line[name] = number
        values[name] = value
    return values


def credential_values(names: Iterable[str],
                      environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """Values for ``names`` that are set: environment first (if non-empty), else the file.

    Names with no value anywhere are omitted. The file is only read when the
    environment does not provide every name. Any value with a control
    character raises ``RuntimeError`` (``prohibited control character``).
    """
    env = os.environ if environ is None else environ
    wanted = list(dict.fromkeys(names))
    for name in wanted:
        if not valid_env_name(name):
            raise ValueError(f"invalid credential name {name!r}")
    redaction.register_names(wanted)
    found = {name: env[name] for name in wanted if env.get(name)}
    if len(found) < len(wanted):
        from_file = parse_credentials()
        for name in wanted:
            if name not in found and from_file.get(name):
                found[name] = from_file[name]
    redaction.register_values(found)
    return {name: check_credential_value(name, value) for name, value in found.items()}


def credential_value(name: str, environ: Mapping[str, str] | None = None) -> str | None:
    """One credential (environment if non-empty, else ``credentials.env``), or ``None``."""
    return credential_values([name], environ).get(name)


_file_values: dict[tuple[str, int, int, int], dict[str, str]] = {}


def _values_for_redaction() -> dict[str, str]:
    """Every value in ``credentials.env``, for the redactor: read leniently (a malformed
    or duplicate line is skipped, permissions are not checked: nothing is used, only
    hidden) and again only when the file's path, inode, size or mtime change."""
    path = credentials_path()
    try:
        info = path.stat()
    except OSError:
        return {}
    key = (str(path), info.st_ino, info.st_size, info.st_mtime_ns)
    cached = _file_values.get(key)
    if cached is None:
        cached = {}
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            text = ""
        for number, line in enumerate(text.split("\n"), start=1):
            try:
                parsed = _parse_line(line.removesuffix("\r"), path, number)
            except ValueError:
                continue
            if parsed is not None and parsed[1]:
                cached.setdefault(*parsed)
        _file_values.clear()
        _file_values[key] = cached
    return cached


redaction.register_source(_values_for_redaction)


def credential_file_names() -> set[str]:
    """The names ``credentials.env`` sets (read leniently; never raises)."""
    return set(_values_for_redaction())


def ensure_credentials_file() -> Path:
    """Create an empty, commented ``credentials.env`` (``0600``) if there is none."""
    path = credentials_path()
    ensure_private_dir(path.parent)
    if not path.exists():
        atomic_write_text(path, CREDENTIALS_HEADER, mode=0o600)
    return path
