"""MCP caller capability tokens: minted once, stored as sha256 hashes, compared in constant time."""

from __future__ import annotations

import hashlib
import hmac
import secrets

TOKEN_BYTES = 32


def token_hash(token: str) -> str:
    """The hex sha256 recorded in place of a token (``*_token_hash`` fields)."""
    if not isinstance(token, str) or not token:
        raise ValueError("an MCP caller token must be a non-empty string")
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def mint_token() -> tuple[str, str]:
    """A fresh capability and its hash: ``(token, sha256_hex)``. Only the hash goes into records."""
    token = secrets.token_urlsafe(TOKEN_BYTES)
    return token, token_hash(token)


def hash_matches(token: str, expected_hash: str) -> bool:
    """Compare a presented token with a recorded hash without leaking timing."""
    if not token or not isinstance(expected_hash, str):
        return False
    presented = hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()
    return hmac.compare_digest(presented.encode("ascii"), expected_hash.encode("ascii", "replace"))
