"""A request body parsed once, remembering where each top-level member came from.

Codex resends the whole conversation on every turn, so request bodies are
often hundreds of KiB. Re-serialising such a body just to rewrite ``model``
for a pass-through route cost ~0.6 ms per 100 KiB; splicing the rewritten
members into the original text costs a string join. Values are parsed by
the stdlib's C scanner, exactly as ``json.loads`` parses them; any input this
parser does not accept is handed to ``json.loads`` itself, so results and
errors never differ from it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from json.decoder import scanstring  # type: ignore[attr-defined]
from typing import Any

_WS = re.compile(r"[ \t\n\r]*")
_DECODER = json.JSONDecoder()
SPLICE_MIN_BYTES = 8 * 1024
"""Smaller bodies are cheaper to re-serialise than to parse member by member."""


class RequestBody(dict[str, Any]):
    """The body's top-level object (a plain ``dict`` to drivers) plus member source spans."""

    text: str
    spans: dict[str, tuple[int, int]]

    def spliced(self, replace: Mapping[str, Any]) -> bytes:
        """This object's JSON with ``replace`` members first and every other member verbatim."""
        parts = [f"{json.dumps(k)}:{json.dumps(v, separators=(',', ':'))}"
                 for k, v in replace.items()]
        parts += [self.text[start:end] for key, (start, end) in self.spans.items()
                  if key not in replace]
        return ("{" + ",".join(parts) + "}").encode("utf-8")


def parse_body(data: bytes) -> Any:
    """``json.loads(data)``, as a :class:`RequestBody` when it is a large UTF-8 JSON object."""
    if len(data) < SPLICE_MIN_BYTES:
        return json.loads(data)
    try:
        return _object(data.decode("utf-8"))
    except ValueError:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        return json.loads(data)


def _object(text: str) -> RequestBody:
    pos = _WS.match(text).end()  # type: ignore[union-attr]
    if not text.startswith("{", pos):
        raise ValueError("not an object")
    body = RequestBody()
    body.text, body.spans = text, {}
    pos = _skip(text, pos + 1)
    if text.startswith("}", pos):
        return _end(body, text, pos + 1)
    while True:
        start = pos
        if not text.startswith('"', pos):
            raise ValueError("expected a member name")
        key, pos = scanstring(text, pos + 1)
        pos = _skip(text, pos)
        if not text.startswith(":", pos):
            raise ValueError("expected ':'")
        value, pos = _DECODER.raw_decode(text, _skip(text, pos + 1))
        body[key] = value
        body.spans[key] = (start, pos)
        pos = _skip(text, pos)
        if text.startswith(",", pos):
            pos = _skip(text, pos + 1)
        elif text.startswith("}", pos):
            return _end(body, text, pos + 1)
        else:
            raise ValueError("expected ',' or '}'")


def _skip(text: str, pos: int) -> int:
    return _WS.match(text, pos).end()  # type: ignore[union-attr]


def _end(body: RequestBody, text: str, pos: int) -> RequestBody:
    if _skip(text, pos) != len(text):
        raise ValueError("extra data")
    return body
