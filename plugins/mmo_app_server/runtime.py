"""The host's runtime digest: which code a live host runs (``runtime_current``)."""

from __future__ import annotations

import hashlib
from functools import lru_cache
from pathlib import Path

_HOST_PACKAGE = Path(__file__).resolve().parent


@lru_cache(maxsize=1)
def runtime_digest() -> str:
    """sha256 over this package's modules; a host started from older code differs."""
    digest = hashlib.sha256()
    for path in sorted(_HOST_PACKAGE.glob("*.py")):
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()
