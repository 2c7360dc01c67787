"""Exception types shared by the kernel and its plugins.

The spec fixes which builtin type each refusal uses (ValueError for bad
input, RuntimeError for refused operations, PermissionError for authority,
FileNotFoundError for unknown ids); these subclasses keep that contract while
carrying the details a user needs to fix the problem.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pydantic import ValidationError


def format_validation_error(exc: ValidationError) -> str:
    """One readable line per pydantic error: ``key.path: message``.

    Every strict reader (records, TOML documents, driver options) reports
    pydantic failures this way, so a user sees the key to fix, not a traceback.
    """
    parts = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"]) or "(document)"
        parts.append(f"{loc}: {err['msg']}")
    return "; ".join(parts)


class UnknownDriverError(ValueError):
    """A TOML document names a driver that no installed plugin provides."""

    def __init__(self, concern: str, name: str, installed: Iterable[str], where: str = "") -> None:
        self.concern = concern
        self.name = name
        self.installed = sorted(installed)
        location = f" ({where})" if where else ""
        choices = ", ".join(self.installed) or "none"
        super().__init__(
            f"unknown {concern.replace('_', ' ')} driver {name!r}{location}; "
            f"installed: {choices}. Is its plugin installed? Run `mmo plugins`."
        )


class DuplicateDriverError(RuntimeError):
    """Two plugins register the same driver name for one concern."""


class DriverConfigError(ValueError):
    """A driver rejected its TOML options; ``where`` names the file and key."""

    def __init__(self, where: str, message: str) -> None:
        self.where = where
        super().__init__(f"{where}: {message}")


class DriverNotAvailable(RuntimeError):
    """A registered driver whose behaviour is not built in this version was used."""

    def __init__(self, concern: str, name: str, operation: str) -> None:
        super().__init__(
            f"{concern.replace('_', ' ')} driver {name!r}: {operation} is not available "
            "in this version"
        )


class PluginLoadError(RuntimeError):
    """An entry point in ``mmo.plugins`` could not be imported or validated."""


class AdmissionError(RuntimeError):
    """A spawn or re-admission was refused; ``reason`` is machine-readable."""

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


class ControlDeliveryUnknown(RuntimeError):
    """A control request was sent but its reply was lost: it may have been applied."""


class StateError(RuntimeError):
    """A persisted record or path in the state dir is invalid or unsafe."""


class RecordError(ValueError):
    """A persisted document failed strict validation."""


STORAGE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EIO})
"""The disk, not the caller, is at fault: no space, quota exceeded, I/O error."""


class StorageError(OSError):
    """Writing a file failed for lack of space or an I/O error.

    Still an ``OSError`` (with the original ``errno``), so code that handles a
    failed write keeps working; its text is the one line a user needs:
    ``cannot write <path>: no space left on device``.
    """

    def __init__(self, operation: str, path: object, code: int) -> None:
        reason = os.strerror(code)
        super().__init__(code, reason, str(path))
        self.message = f"cannot {operation} {path}: {reason[:1].lower()}{reason[1:]}"

    def __str__(self) -> str:
        return self.message

    @classmethod
    def wrap(cls, exc: OSError, operation: str, path: object) -> OSError:
        """``exc`` as a ``StorageError`` when the disk is at fault, else ``exc`` itself."""
        if isinstance(exc, StorageError) or exc.errno not in STORAGE_ERRNOS:
            return exc
        return cls(operation, path, exc.errno)
