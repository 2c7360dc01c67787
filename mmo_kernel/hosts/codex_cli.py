"""Locating a Codex executable, resolving past the npm launcher to the native binary.

Killing the Node launcher ``node_modules/.bin/codex`` orphans the native
server (codex-app-server.md, "What this means for MMO"), so MMO always spawns
the native binary that the npm package ships.
"""

from __future__ import annotations

import os
import platform
import shutil
from pathlib import Path

PINNED_CODEX_VERSION = "0.169.0"
PROJECT_CODEX_DIR = ".codex-cli"
"""Git-ignored folder of the project where ``.ci/run`` installs the pinned CLI."""

_TRIPLES = {
    "x86_64": ("codex-linux-x64", "x86_64-unknown-linux-musl"),
    "aarch64": ("codex-linux-arm64", "aarch64-unknown-linux-musl"),
    "arm64": ("codex-linux-arm64", "aarch64-unknown-linux-musl"),
}


def native_binary_in(node_modules: Path) -> Path | None:
    """The native codex binary inside an npm ``node_modules`` folder, if present."""
    package, triple = _TRIPLES.get(platform.machine(), ("", ""))
    if not package:
        return None
    candidate = node_modules / "@openai" / package / "vendor" / triple / "bin" / "codex"
    return candidate if candidate.is_file() and os.access(candidate, os.X_OK) else None


def resolve_native(executable: str | Path) -> Path:
    """Resolve a name or path to an absolute executable, skipping an npm launcher."""
    found = shutil.which(str(executable))
    if found is None:
        raise FileNotFoundError(f"codex executable {str(executable)!r} was not found on PATH")
    path = Path(found).resolve()
    # .../node_modules/@openai/codex/bin/codex.js is the launcher a .bin/codex links to
    parts = path.parts
    if "node_modules" in parts:
        node_modules = Path(*parts[: len(parts) - parts[::-1].index("node_modules")])
        native = native_binary_in(node_modules)
        if native is not None:
            return native
    return path


def project_codex(project_root: Path) -> Path | None:
    """The pinned real Codex installed by ``.ci/run`` under ``project_root``, if any."""
    return native_binary_in(project_root / PROJECT_CODEX_DIR / "node_modules")


def thread_persisted(codex_home: Path, thread_id: str) -> bool:
    """Whether Codex saved the thread (its rollout) under ``codex_home``.

    Codex writes a thread's rollout only with its first turn; a thread that
    never ran one cannot be resumed (``no rollout found``), not even by
    another client of the app-server that still has it loaded.
    """
    return any((Path(codex_home) / "sessions").glob(f"*/*/*/rollout-*-{thread_id}.jsonl"))
