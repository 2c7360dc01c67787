"""Deterministic JSON values that satisfy (or violate) a JSON Schema.

The Codex stand-in and the offline scripted model both need a "model answer"
that a contract accepts without calling a model; the same schema must always
give the same value so tests can assert on it. Every value is checked with
jsonschema before it is returned, so a schema nobody can satisfy is reported
instead of producing a silently invalid result.
"""

from __future__ import annotations

import copy
import math
import re
from re import _parser as sre_parse  # type: ignore[attr-defined]
from typing import Any

import jsonschema

_MISSING = object()
_FORMATS = {
    "date-time": "2026-01-01T00:00:00Z",
    "date": "2026-01-01",
    "time": "00:00:00Z",
    "email": "agent@example.com",
    "idn-email": "agent@example.com",
    "hostname": "example.com",
    "idn-hostname": "example.com",
    "ipv4": "127.0.0.1",
    "ipv6": "::1",
    "uri": "https://example.com/",
    "iri": "https://example.com/",
    "uri-reference": "https://example.com/",
    "iri-reference": "https://example.com/",
    "url": "https://example.com/",
    "uuid": "00000000-0000-4000-8000-000000000000",
    "duration": "PT1S",
    "json-pointer": "/a",
    "relative-json-pointer": "0",
    "regex": ".*",
}
_MAX_DEPTH = 24


class SchemaInstanceError(ValueError):
    """No value could be produced for the schema (it may accept nothing)."""


def _validator(root: dict | bool, *, formats: bool = True) -> jsonschema.protocols.Validator:
    cls = jsonschema.validators.validator_for(root, default=jsonschema.Draft202012Validator)
    return cls(root, format_checker=cls.FORMAT_CHECKER if formats else None)


class _Builder:
    """Walks one root schema; ``root`` resolves local ``$ref`` pointers."""

    def __init__(self, root: dict | bool, text: str) -> None:
        self.root = root
        self.text = text
        self.validator = _validator(root)

    # -- helpers -------------------------------------------------------
    def resolve(self, ref: str) -> Any:
        if not ref.startswith("#"):
            raise SchemaInstanceError(f"only local $ref pointers are supported, got {ref!r}")
        node: Any = self.root
        for part in filter(None, ref[1:].split("/")):
            part = part.replace("~1", "/").replace("~0", "~")
            if isinstance(node, list):
                node = node[int(part)]
            elif isinstance(node, dict) and part in node:
                node = node[part]
            else:
                raise SchemaInstanceError(f"$ref {ref!r} does not resolve")
        return node

    def accepts(self, schema: Any, value: Any) -> bool:
        if isinstance(schema, bool):
            return schema
        if schema is self.root:
            return self.validator.is_valid(value)
        wrapped = dict(schema)
        for key in ("$defs", "definitions"):
            if isinstance(self.root, dict) and key in self.root and key not in wrapped:
                wrapped[key] = self.root[key]
        try:
            return self.validator.evolve(schema=wrapped).is_valid(value)
        except jsonschema.exceptions.RefResolutionError:  # pragma: no cover - defensive
            return False
        except Exception:  # referencing errors for exotic refs
            return False

    # -- generation ----------------------------------------------------
    def build(self, schema: Any, salt: int = 0, depth: int = 0) -> Any:
        if depth > _MAX_DEPTH:
            raise SchemaInstanceError("schema recursion too deep to build a finite value")
        if schema is True or schema == {}:
            return self._string({}, salt)
        if schema is False:
            raise SchemaInstanceError("schema `false` accepts no value")
        if not isinstance(schema, dict):
            raise SchemaInstanceError(f"not a schema: {schema!r}")
        if "$ref" in schema:
            target = self.resolve(schema["$ref"])
            rest = {k: v for k, v in schema.items() if k != "$ref"}
            merged = _merge(target, rest) if rest and isinstance(target, dict) else target
            return self.build(merged, salt, depth + 1)
        if "const" in schema:
            return copy.deepcopy(schema["const"])
        if "enum" in schema:
            return self._pick(schema, [copy.deepcopy(v) for v in schema["enum"]])
        if "allOf" in schema:
            merged = {k: v for k, v in schema.items() if k != "allOf"}
            for part in schema["allOf"]:
                part = (
                    self.resolve(part["$ref"])
                    if isinstance(part, dict) and "$ref" in part
                    else part
                )
                if isinstance(part, dict):
                    merged = _merge(merged, part)
            return self.build(merged, salt, depth + 1)
        for key in ("anyOf", "oneOf"):
            if key in schema:
                base = {k: v for k, v in schema.items() if k != key}
                return self._first_alternative(schema, base, schema[key], salt, depth)
        return self._by_type(schema, salt, depth)

    def _pick(self, schema: dict, candidates: list) -> Any:
        for value in candidates:
            if self.accepts(schema, value):
                return value
        if candidates:
            return candidates[0]
        raise SchemaInstanceError("empty enum accepts no value")

    def _first_alternative(self, schema, base, alternatives, salt, depth) -> Any:
        errors = []
        for alt in alternatives:
            candidate_schema = _merge(base, alt) if isinstance(alt, dict) else alt
            if isinstance(alt, dict) and "$ref" in alt and base:
                candidate_schema = _merge(base, self.resolve(alt["$ref"]))
            try:
                value = self.build(candidate_schema, salt, depth + 1)
            except SchemaInstanceError as exc:
                errors.append(str(exc))
                continue
            if self.accepts(schema, value):
                return value
        raise SchemaInstanceError(
            "no alternative of anyOf/oneOf produced a valid value"
            + (f": {errors[0]}" if errors else "")
        )

    def _by_type(self, schema: dict, salt: int, depth: int) -> Any:
        declared = schema.get("type")
        if declared is None:
            if "properties" in schema or "required" in schema or "additionalProperties" in schema:
                types = ["object"]
            elif "items" in schema or "prefixItems" in schema or "minItems" in schema:
                types = ["array"]
            elif any(k in schema for k in ("minimum", "maximum", "exclusiveMinimum", "multipleOf")):
                types = ["number"]
            else:
                types = ["string"]
        else:
            types = [declared] if isinstance(declared, str) else list(declared)
            # prefer a value that carries information over null
            types = [t for t in types if t != "null"] + [t for t in types if t == "null"]
        last_error = "schema declares no type"
        for kind in types:
            try:
                value = self._of_kind(kind, schema, salt, depth)
            except SchemaInstanceError as exc:
                last_error = str(exc)
                continue
            if self.accepts(schema, value):
                return value
            last_error = f"could not build a {kind} that satisfies the schema"
        raise SchemaInstanceError(last_error)

    def _of_kind(self, kind: str, schema: dict, salt: int, depth: int) -> Any:
        if kind == "object":
            return self._object(schema, salt, depth)
        if kind == "array":
            return self._array(schema, salt, depth)
        if kind == "string":
            return self._string(schema, salt)
        if kind in ("integer", "number"):
            return self._number(schema, salt, integer=kind == "integer")
        if kind == "boolean":
            return self._pick(schema, [True, False] if salt % 2 == 0 else [False, True])
        if kind == "null":
            return None
        raise SchemaInstanceError(f"unknown type {kind!r}")

    def _object(self, schema: dict, salt: int, depth: int) -> dict:
        props: dict = schema.get("properties", {})
        required = list(schema.get("required", []))
        full = {}
        for name in list(required) + [p for p in props if p not in required]:
            sub = props.get(name, _extra_schema(schema))
            full[name] = self.build(sub, salt, depth + 1)
        minimal = {name: full[name] for name in required}
        for candidate in (full, minimal):
            candidate = self._pad_properties(schema, dict(candidate), salt, depth)
            if self.accepts(schema, candidate):
                return candidate
        return full

    def _pad_properties(self, schema: dict, value: dict, salt: int, depth: int) -> dict:
        index = 1
        while len(value) < schema.get("minProperties", 0):
            key = f"extra_{index}"
            index += 1
            if key not in value:
                value[key] = self.build(_extra_schema(schema), salt, depth + 1)
        return value

    def _array(self, schema: dict, salt: int, depth: int) -> list:
        prefix = schema.get("prefixItems")
        items = schema.get("items", {})
        if isinstance(items, list):  # draft 4-7 tuple form
            prefix, items = items, schema.get("additionalItems", {})
        prefix = prefix or []
        low = schema.get("minItems", 0)
        high = schema.get("maxItems", math.inf)
        count = max(low, len(prefix), 1 if high >= 1 and items is not False else 0)
        count = int(min(count, high))
        value = []
        for index in range(count):
            sub = prefix[index] if index < len(prefix) else items
            value.append(self.build(sub, salt + index, depth + 1))
        contains = schema.get("contains")
        if contains is not None and not any(self.accepts(contains, v) for v in value):
            element = self.build(contains, salt + count, depth + 1)
            value = value[: max(0, int(min(high, count + 1)) - 1)] + [element]
        return value

    def _string(self, schema: dict, salt: int) -> str:
        low = schema.get("minLength", 0)
        high = schema.get("maxLength", math.inf)
        base = self.text if salt == 0 else f"{self.text} {salt + 1}"
        candidates = []
        fmt = schema.get("format")
        if fmt in _FORMATS:
            candidates.append(_FORMATS[fmt])
        pattern = schema.get("pattern")
        if pattern is not None:
            if re.search(pattern, base):
                candidates.append(base)
            candidates.extend(_from_pattern(pattern, salt))
        else:
            candidates.append(base)
        for value in candidates:
            value = _fit_length(value, low, high)
            if (pattern is None or re.search(pattern, value)) and low <= len(value) <= high:
                if self.accepts(schema, value):
                    return value
        return _fit_length(candidates[0] if candidates else base, low, high)

    def _number(self, schema: dict, salt: int, integer: bool) -> int | float:
        low, high = _bounds(schema, integer)
        step = schema.get("multipleOf") or (1 if integer else None)
        if step:
            low = math.ceil(low / step) * step if low != -math.inf else low
            high = math.floor(high / step) * step if high != math.inf else high
        if low > high:
            raise SchemaInstanceError(f"no number lies between {low} and {high}")
        base = 0 if low <= 0 <= high else (low if low != -math.inf else high)
        unit = step or 1
        value = base + salt * unit
        if value > high:  # wrap inside the range so salted siblings stay distinct
            span = high - low
            value = low + ((salt * unit) % (span + unit) if span != math.inf else 0)
            value = min(value, high)
        if integer or (step and float(step).is_integer()):
            return int(value)
        return int(value) if float(value).is_integer() else float(value)


def _bounds(schema: dict, integer: bool) -> tuple[float, float]:
    """Closed bounds; exclusive ones are nudged inward (by 1 for integers)."""
    low = schema.get("minimum", -math.inf)
    high = schema.get("maximum", math.inf)
    ex_low, ex_high = schema.get("exclusiveMinimum"), schema.get("exclusiveMaximum")
    if isinstance(ex_low, bool):  # draft 4 boolean form
        ex_low = low if ex_low and low != -math.inf else None
    if isinstance(ex_high, bool):
        ex_high = high if ex_high and high != math.inf else None
    if ex_low is not None:
        nudged = (
            math.floor(ex_low) + 1
            if integer
            else ex_low + _nudge(ex_low, high if ex_high is None else ex_high)
        )
        low = max(low, nudged)
    if ex_high is not None:
        nudged = math.ceil(ex_high) - 1 if integer else ex_high - _nudge(low, ex_high)
        high = min(high, nudged)
    return low, high


def _nudge(low: float, high: float) -> float:
    gap = high - low
    return 1.0 if gap > 2 or gap == math.inf else gap / 4


def _extra_schema(schema: dict) -> Any:
    extra = schema.get("additionalProperties", True)
    return {} if extra is True else extra


def _merge(base: dict, extra: dict) -> dict:
    merged = dict(base)
    for key, value in extra.items():
        if key == "properties" and key in merged:
            merged[key] = {**merged[key], **value}
        elif key == "required" and key in merged:
            merged[key] = list(dict.fromkeys([*merged[key], *value]))
        else:
            merged[key] = value
    return merged


def _fit_length(value: str, low: int, high: float) -> str:
    while len(value) < low:
        value = value + (value or "x")
    if len(value) > high:
        value = value[: int(high)]
    return value


def _from_pattern(pattern: str, salt: int) -> list[str]:
    try:
        parsed = sre_parse.parse(pattern)
    except re.error:
        return []
    try:
        return [_emit(parsed, salt)]
    except _Unsupported:
        return []


class _Unsupported(Exception):
    pass


_CATEGORY_CHAR = {
    "CATEGORY_DIGIT": "0",
    "CATEGORY_NOT_DIGIT": "a",
    "CATEGORY_WORD": "a",
    "CATEGORY_NOT_WORD": "-",
    "CATEGORY_SPACE": " ",
    "CATEGORY_NOT_SPACE": "a",
}


def _emit(parsed: Any, salt: int) -> str:
    out = []
    for op, arg in parsed:
        name = str(op)
        if name == "LITERAL":
            out.append(chr(arg))
        elif name == "NOT_LITERAL":
            out.append("a" if chr(arg) != "a" else "b")
        elif name == "ANY":
            out.append("a")
        elif name == "IN":
            out.append(_emit_in(arg))
        elif name in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"):
            low, _high, sub = arg
            out.append(
                "".join(_emit(sub, salt) for _ in range(max(low, 1 if salt and low == 0 else low)))
            )
        elif name == "SUBPATTERN":
            out.append(_emit(arg[-1], salt))
        elif name == "ATOMIC_GROUP":
            out.append(_emit(arg, salt))
        elif name == "BRANCH":
            out.append(_emit(arg[1][0], salt))
        elif name in ("AT", "ASSERT", "ASSERT_NOT"):
            continue
        elif name == "CATEGORY":
            out.append(_CATEGORY_CHAR.get(str(arg), "a"))
        else:
            raise _Unsupported(name)
    return "".join(out)


def _emit_in(items: list) -> str:
    negate = False
    for op, arg in items:
        name = str(op)
        if name == "NEGATE":
            negate = True
        elif not negate and name == "LITERAL":
            return chr(arg)
        elif not negate and name == "RANGE":
            return chr(arg[0])
        elif not negate and name == "CATEGORY":
            return _CATEGORY_CHAR.get(str(arg), "a")
    if negate:
        excluded = {chr(a) for o, a in items if str(o) == "LITERAL"}
        for ch in "aZ0_-x":
            if ch not in excluded:
                return ch
    raise _Unsupported("IN")


def instance_for_schema(schema: dict | bool, *, text: str = "FAKE_CODEX_OK") -> Any:
    """A deterministic value valid against ``schema``; strings carry ``text``.

    Raises :class:`SchemaInstanceError` (a ``ValueError``) naming why when no
    valid value can be built.
    """
    if not isinstance(schema, (dict, bool)):
        raise SchemaInstanceError(
            f"a JSON Schema must be an object or a boolean, got {type(schema).__name__}"
        )
    try:
        jsonschema.validators.validator_for(
            schema, default=jsonschema.Draft202012Validator
        ).check_schema(schema)
    except jsonschema.exceptions.SchemaError as exc:
        raise SchemaInstanceError(f"invalid JSON Schema: {exc.message}") from None
    builder = _Builder(schema, text)
    value = builder.build(schema)
    errors = sorted(builder.validator.iter_errors(value), key=lambda e: list(e.path))
    if errors:
        raise SchemaInstanceError(
            f"could not build a value satisfying the schema: {errors[0].message} "
            f"(at {'/'.join(map(str, errors[0].absolute_path)) or 'the top level'})"
        )
    return value


def invalid_instance_for_schema(schema: dict | bool) -> Any:
    """A deterministic value that ``schema`` rejects, preferring a near miss.

    The near miss (a valid object without its first required property) looks
    like a real model's mistake; wrong-type values are the fallback.
    """
    # rejected even by a validator that ignores "format", as most contract checks do
    validator = _validator(schema, formats=False)
    candidates: list[Any] = []
    try:
        valid = instance_for_schema(schema)
    except SchemaInstanceError:
        valid = _MISSING
    if isinstance(valid, dict) and isinstance(schema, dict):
        for key in _required_keys(schema):
            if key in valid:
                candidates.append({k: v for k, v in valid.items() if k != key})
                break
    candidates += [
        "FAKE_CODEX_INVALID",
        12345,
        None,
        [],
        {},
        True,
        0.5,
        {"unexpected": "FAKE_CODEX_INVALID"},
    ]
    for value in candidates:
        if not validator.is_valid(value):
            return value
    raise SchemaInstanceError("the schema accepts every value, so no invalid instance exists")


def _required_keys(schema: dict) -> list[str]:
    keys = list(schema.get("required", []))
    for part in schema.get("allOf", []):
        if isinstance(part, dict):
            keys += part.get("required", [])
    return keys


__all__ = ["SchemaInstanceError", "instance_for_schema", "invalid_instance_for_schema"]
