"""Strict reading of user-edited TOML documents (catalog fragments, profiles).

Every problem is reported as ``<file>: <key>: <message>`` so a user can go
straight to the line to fix; a document with several problems reports all of
them at once instead of one per attempt.
"""

from __future__ import annotations

import tomllib
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from mmo_kernel.state.files import MMO_SCHEMA_VERSION

DOCUMENT_KEY = "(document)"
"""The ``<key>`` part of a problem that concerns the whole file (e.g. TOML syntax)."""


class DocumentError(ValueError):
    """One or more problems in user documents; ``problems`` keeps them one per line."""

    def __init__(self, problems: Iterable[str]) -> None:
        self.problems = list(problems)
        super().__init__("\n".join(self.problems))


def problem(file: Path | str, key: str, message: str) -> str:
    """The one problem format used everywhere: ``<file>: <key>: <message>``."""
    return f"{file}: {key or DOCUMENT_KEY}: {message}"


def read_toml(path: Path) -> dict[str, Any]:
    """Parse ``path``; a syntax error names the file and the line (from tomllib)."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise DocumentError(
            [problem(path, DOCUMENT_KEY, f"not UTF-8 text ({exc.reason})")]
        ) from None
    except OSError as exc:
        raise DocumentError(
            [problem(path, DOCUMENT_KEY, f"cannot be read: {exc.strerror}")]
        ) from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise DocumentError([problem(path, DOCUMENT_KEY, f"invalid TOML: {exc}")]) from None


def schema_version_problem(data: dict[str, Any], file: Path | str, kind: str) -> str | None:
    """``schema_version`` must be exactly the int ``MMO_SCHEMA_VERSION`` (never a bool)."""
    if "schema_version" not in data:
        return problem(
            file, "schema_version", f"required key is missing (use {MMO_SCHEMA_VERSION})"
        )
    value = data["schema_version"]
    if type(value) is not int or value != MMO_SCHEMA_VERSION:
        return problem(
            file,
            "schema_version",
            f"unsupported {kind} schema version {value!r} (expected {MMO_SCHEMA_VERSION})",
        )
    return None


_MESSAGES = {
    "extra_forbidden": "unknown key",
    "missing": "required key is missing",
}


def validation_problems(exc: ValidationError, file: Path | str, prefix: str = "") -> list[str]:
    """Pydantic errors as problems, keyed by the dotted TOML key path."""
    out = []
    for err in exc.errors():
        parts = [str(p) for p in err["loc"] if not str(p).startswith("function-")]
        key = ".".join(([prefix] if prefix else []) + parts)
        message = _MESSAGES.get(err["type"], err["msg"])
        if err["type"].startswith("value_error"):
            message = err["msg"].removeprefix("Value error, ")
        out.append(problem(file, key, message))
    return out
