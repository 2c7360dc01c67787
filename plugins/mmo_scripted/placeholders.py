"""``{{ref.path}}`` substitution of earlier step results into later steps.

A placeholder that is a whole JSON string value is replaced by the value
itself (so ``"{{last.job_ids}}"`` becomes a list); inside longer text it is
replaced by the value's text (strings as is, anything else as compact JSON).
``{{!ref}}`` is escaped: it loses one ``!`` and stays a placeholder, so a root
can hand a worker a script whose placeholders are the worker's own.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

_PLACEHOLDER = re.compile(
    r"\{\{\s*(?P<bang>!?)(?P<more>!*)(?P<ref>[A-Za-z_][A-Za-z0-9_]*)"
    r"(?P<path>(?:\.[A-Za-z0-9_-]+)*)\s*\}\}")


class PlaceholderError(ValueError):
    """A placeholder names a step that has no result yet or a path its result lacks."""


class Results:
    """Completed step results, reachable as ``stepN``, ``<name>`` and ``last``."""

    def __init__(self) -> None:
        self._by_ref: dict[str, tuple[str, Any]] = {}

    def add(self, number: int, name: str | None, text: str, value: Any) -> None:
        entry = (text, value)
        self._by_ref[f"step{number}"] = entry
        if name:
            self._by_ref[name] = entry
        self._by_ref["last"] = entry

    def lookup(self, ref: str, path: str) -> Any:
        if ref not in self._by_ref:
            known = ", ".join(sorted(self._by_ref)) or "none yet"
            raise PlaceholderError(f"{{{{{ref}{path}}}}}: no result named {ref!r} (known: {known})")
        text, value = self._by_ref[ref]
        if not path:
            return text
        current = value
        walked = ref
        for key in path.lstrip(".").split("."):
            current = _step_into(current, key, walked, ref)
            walked += f".{key}"
        return current


def _step_into(current: Any, key: str, walked: str, ref: str) -> Any:
    if isinstance(current, Mapping):
        if key in current:
            return current[key]
        raise PlaceholderError(
            f"{walked} has no key {key!r} (keys: {', '.join(sorted(map(str, current)))})"
        )
    if isinstance(current, list):
        if key.lstrip("-").isdigit() and -len(current) <= int(key) < len(current):
            return current[int(key)]
        raise PlaceholderError(f"{walked} has no index {key} (length {len(current)})")
    if walked == ref:
        raise PlaceholderError(f"the result of {ref} is not JSON, so it has no .{key}")
    raise PlaceholderError(f"{walked} is {type(current).__name__}, so it has no .{key}")


def as_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))


def _replace(match: re.Match[str], results: Results) -> str:
    if match["bang"]:
        return "{{" + match["more"] + match["ref"] + match["path"] + "}}"
    return as_text(results.lookup(match["ref"], match["path"]))


def substitute_text(text: str, results: Results) -> str:
    """Replace every placeholder in ``text`` by its value's text."""
    return _PLACEHOLDER.sub(lambda m: _replace(m, results), text)


def substitute_json(value: Any, results: Results) -> Any:
    """Substitute inside a parsed JSON value; a whole-string placeholder keeps its type."""
    if isinstance(value, str):
        whole = _PLACEHOLDER.fullmatch(value.strip())
        if whole and not whole["bang"]:
            return results.lookup(whole["ref"], whole["path"])
        return substitute_text(value, results)
    if isinstance(value, list):
        return [substitute_json(v, results) for v in value]
    if isinstance(value, dict):
        return {k: substitute_json(v, results) for k, v in value.items()}
    return value
