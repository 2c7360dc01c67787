"""The 1 MiB bound on an MCP response body (spec 12 "Limits").

An envelope whose JSON-RPC response would exceed the bound is cut: the biggest lists and
strings of its ``output`` are shortened until the body fits (a list keeps its first
items; a string its head and tail around a ``[... N bytes omitted ...]`` line),
``output_truncated = true`` is set and a ``suggested_call`` tells the host how to get the
rest. ``read_files`` is cut by whole items instead, so its suggested call continues
exactly where the response stopped (``mechanically_followable``: no line skipped or
repeated).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from mmo_kernel.project_tools.envelope import compact_json, suggested

MAX_RESPONSE_BYTES = 1024 * 1024
CUT_REASON = ("the output exceeded the 1 MiB MCP response bound and was cut; "
              "ask for less (fewer items, a smaller limit or tail_lines, narrower paths)")
READ_REASON = "the response bound cut this page short; this call reads on exactly where it stopped"
_KEEP = frozenset({"error_kind", "state_changed", "output_truncated", "suggested_call"})
_MAX_ROUNDS = 64

Measure = Callable[[dict[str, Any]], int]


def json_size(value: Any) -> int:
    return len(compact_json(value).encode("utf-8"))


def fit_envelope(envelope: dict[str, Any], tool: str, arguments: dict[str, Any],
                 measure: Measure, limit: int = MAX_RESPONSE_BYTES) -> dict[str, Any]:
    """``envelope`` unchanged if ``measure(envelope) <= limit``, else a cut copy that fits.

    ``tool``/``arguments`` are the called project tool (the dispatched one for
    ``call_project_tool``) and its arguments, for the ``suggested_call``.
    """
    if measure(envelope) <= limit or not isinstance(envelope.get("output"), dict):
        return envelope
    args = {k: v for k, v in arguments.items() if k != "_mmo"}
    if tool == "read_files":
        cut = _fit_read_files(envelope, args, measure, limit)
        if cut is not None:
            return cut
    return _fit_generic(envelope, tool, args, measure, limit)


def _with_output(envelope: dict[str, Any], output: dict[str, Any]) -> dict[str, Any]:
    return {**envelope, "output": output}


def _fit_read_files(envelope: dict[str, Any], args: dict[str, Any], measure: Measure,
                    limit: int) -> dict[str, Any] | None:
    """Keep the longest prefix of items that fits; suggest reading the rest."""
    output = envelope["output"]
    items, asked = output.get("items"), args.get("items")
    if not (isinstance(items, list) and isinstance(asked, list) and len(items) == len(asked)):
        return None
    base = {k: v for k, v in output.items() if k not in ("items", "suggested_call")}

    def attempt(kept: int) -> dict[str, Any]:
        rest = [_continuation(asked[i], items[i]) for i in range(kept)]
        rest = [item for item in rest if item is not None] + list(asked[kept:])
        if kept == 0 and asked:
            first = dict(asked[0])
            first["limit"] = max(1, int(first.get("limit", 400)) // 4)
            rest = [first, *asked[1:]]
        call = suggested("read_files", {**args, "items": rest}, True, READ_REASON)
        return _with_output(envelope, {**base, "items": items[:kept], "output_truncated": True,
                                       "suggested_call": call})

    low, high = 0, len(items) - 1  # the full list is known not to fit
    while low < high:
        mid = (low + high + 1) // 2
        if measure(attempt(mid)) <= limit:
            low = mid
        else:
            high = mid - 1
    result = attempt(low)
    return result if measure(result) <= limit else None


def _continuation(asked: Any, item: Any) -> dict[str, Any] | None:
    """The request item that reads on after a returned page, or None when it is done."""
    page = item.get("output") if isinstance(item, dict) else None
    if not isinstance(asked, dict) or not isinstance(page, dict) or not page.get("has_more"):
        return None
    return {**asked, "cursor": page.get("next_cursor"),
            "expected_read_revision": page.get("read_revision")}


def _fit_generic(envelope: dict[str, Any], tool: str, args: dict[str, Any],
                 measure: Measure, limit: int) -> dict[str, Any]:
    """Shorten the biggest list or string, repeatedly, until the body fits."""
    output = copy.deepcopy(envelope["output"])
    output.pop("suggested_call", None)
    output["output_truncated"] = True
    output["suggested_call"] = suggested(tool, args, False, CUT_REASON)
    for _ in range(_MAX_ROUNDS):
        candidate = _with_output(envelope, output)
        total = measure(candidate)
        if total <= limit:
            return candidate
        found = _biggest(output, top=True)
        if found is None:
            break
        parent, key, size = found
        # the text form repeats the JSON, so a byte of output costs about total/json bytes
        factor = max(1.0, total / max(1, json_size(candidate)))
        target = size - int((total - limit) / factor) - 256
        parent[key] = _shorten(parent[key], target)
    minimal = {k: output[k] for k in _KEEP if k in output}
    return _with_output(envelope, minimal)


def _biggest(node: Any, top: bool = False) -> tuple[Any, Any, int] | None:
    """(container, key, serialized size) of the list or string to shorten next: the biggest
    child of ``node``, or inside it when one element dominates (cut within, not drop it)."""
    children = (list(node.items()) if isinstance(node, dict) else list(enumerate(node))
                if isinstance(node, list) else [])
    sized = [(json_size(value), key, value) for key, value in children
             if not (top and key in _KEEP) and isinstance(value, (str, list, dict)) and value]
    for size, key, value in sorted(sized, key=lambda entry: -entry[0]):
        if isinstance(value, (dict, list)):
            inner = _biggest(value)
            if inner is not None and (isinstance(value, dict) or inner[2] * 2 > size):
                return inner
            if isinstance(value, dict):
                continue
        return (node, key, size)
    return None


def _shorten(value: Any, target: int) -> Any:
    """``value`` (list or str) cut so its JSON takes at most about ``target`` bytes."""
    if target <= (2 if isinstance(value, list) else 64):
        return [] if isinstance(value, list) else ""  # (an omission line would cost more)
    if isinstance(value, list):
        kept, used = [], 2
        for item in value:
            used += json_size(item) + 1
            if used > target:
                break
            kept.append(item)
        if len(kept) == len(value):
            kept = kept[:-1]
        return kept
    size = json_size(value)
    keep = max(0, min(len(value) - 1, int(len(value) * target / max(1, size)) - 40))
    head = keep // 4
    tail = keep - head
    middle = value[head:len(value) - tail]
    omitted = len(middle.encode("utf-8", "surrogatepass"))
    # like a job's stdout: the head and, above all, the last lines survive
    return value[:head] + f"\n[... {omitted} bytes omitted ...]\n" + (
        value[len(value) - tail:] if tail else "")
