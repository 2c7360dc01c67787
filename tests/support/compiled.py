"""A profile compiled once per test run, outside every test's state dir, for fixtures
that copy its snapshot into each test's state instead of compiling it again."""

from __future__ import annotations

import os
from pathlib import Path


def compile_once(root: Path, profile: str) -> Path:
    """Compile ``profile`` offline with ``root`` as its state and config dirs; the snapshot
    directory. The caller's ``MMO_STATE_DIR``/``MMO_CONFIG_DIR`` are restored afterwards."""
    from mmo_kernel.profiles.snapshots import compile_profile

    saved = {k: os.environ.get(k) for k in ("MMO_STATE_DIR", "MMO_CONFIG_DIR")}
    os.environ["MMO_STATE_DIR"] = str(root / "state")
    os.environ["MMO_CONFIG_DIR"] = str(root / "config")
    try:
        return Path(compile_profile(profile)["directory"])
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
