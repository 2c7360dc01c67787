"""``<session>/capabilities.json``: the one file that holds a session's MCP capabilities.

Schema (``0600``, written atomically, removed when the session terminates)::

    {
      "schema_version": 1,
      "root_mcp_token": "<token>",
      "native_agent_tokens": {"<parent agent>": {"<native agent>": "<token>"}}
    }

The root token is kept in clear because the session must hand it to every
resumed root; ``session.json`` and ``run.json`` carry only its hash. Native
agent tokens are also written into the native agent's own config ``env``
(and nowhere else). Worker tokens are never stored: a job record keeps only
``mcp_caller_token_hash``.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, StrictInt, StrictStr, ValidationError

from mmo_kernel.state.files import MMO_SCHEMA_VERSION, atomic_write_json

CAPABILITIES_FILE = "capabilities.json"


class Capabilities(BaseModel):
    """The validated content of ``capabilities.json``."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    schema_version: StrictInt
    root_mcp_token: StrictStr = Field(min_length=16)
    native_agent_tokens: dict[StrictStr, dict[StrictStr, StrictStr]] = Field(default_factory=dict)


class CapabilityUnavailable(RuntimeError):
    """The capabilities file is missing, unsafe or invalid (e.g. the session has terminated)."""


def write_capabilities(
    session_dir: Path,
    *,
    root_mcp_token: str,
    native_agent_tokens: dict[str, dict[str, str]] | None = None,
) -> Path:
    """Write the session's capabilities file (``0600``) and return its path."""
    document = Capabilities(
        schema_version=MMO_SCHEMA_VERSION,
        root_mcp_token=root_mcp_token,
        native_agent_tokens=native_agent_tokens or {},
    )
    path = Path(session_dir) / CAPABILITIES_FILE
    atomic_write_json(path, document.model_dump(), mode=0o600)
    return path


def read_capabilities(session_dir: Path) -> Capabilities:
    """Read and validate the file; refuse a symlink, a group/world-readable file, bad content."""
    path = Path(session_dir) / CAPABILITIES_FILE
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except FileNotFoundError as exc:
        raise CapabilityUnavailable("capability is unavailable (no capabilities file)") from exc
    except OSError as exc:
        raise CapabilityUnavailable(f"capability is unavailable ({exc.strerror})") from exc
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode) or info.st_mode & 0o077:
            raise CapabilityUnavailable(
                "capability is unavailable (capabilities file is not private)"
            )
        raw = handle.read()
    try:
        document = Capabilities.model_validate(json.loads(raw))
    except (ValueError, ValidationError) as exc:
        raise CapabilityUnavailable(
            "capability is unavailable (invalid capabilities file)"
        ) from exc
    if document.schema_version != MMO_SCHEMA_VERSION:
        raise CapabilityUnavailable("capability is unavailable (unsupported capabilities schema)")
    return document
