"""Result contracts: finding the schema file, checking it, and whether it can be projected.

A strict contract can go to the model as the turn's ``outputSchema`` only
when the schema fits the strict structured-output subset the Responses API
accepts (``text.format`` with ``strict: true``): :func:`projection_problem`
says why not. Which transport carries a contract is chosen from what the
installed transports declare (``mmo_kernel.plugin.transports``, spec 05).
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path, PurePosixPath
from typing import Any

from jsonschema import exceptions as jsonschema_exceptions
from jsonschema import validators

_UNPROJECTABLE_KEYWORDS = (
    "allOf",
    "oneOf",
    "not",
    "if",
    "then",
    "else",
    "patternProperties",
    "dependentSchemas",
    "dependentRequired",
    "unevaluatedProperties",
)


def shared_contracts_dir() -> Path:
    """The shared schemas shipped as package ``mmo_contracts`` (the repo's ``contracts/``)."""
    return Path(str(resources.files("mmo_contracts")))


def resolve_contract_file(profile_folder: Path, ref: str) -> Path:
    """``contracts/<name>.json`` from the profile folder, else from the shared contracts."""
    name = PurePosixPath(ref).name
    for candidate in (profile_folder / "contracts" / name, shared_contracts_dir() / name):
        if candidate.is_file():
            return candidate
    raise FileNotFoundError(
        f"{ref} not found in the profile folder or in the shared contracts "
        f"({shared_contracts_dir()})"
    )


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def load_schema(path: Path) -> dict[str, Any]:
    """Parse and check a JSON Schema file; errors say what is wrong, not just that it is."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"), parse_constant=_reject_constant)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path.name} is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path.name} must hold a JSON Schema object, not {type(data).__name__}")
    try:
        validators.validator_for(data).check_schema(data)
    except jsonschema_exceptions.SchemaError as exc:
        where = "/".join(str(p) for p in exc.path) or "(root)"
        raise ValueError(
            f"{path.name} is not a valid JSON Schema at {where}: {exc.message}"
        ) from None
    return data


def _subschemas(schema: dict[str, Any]) -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    for key, sub in (schema.get("properties") or {}).items():
        out.append((f"properties.{key}", sub))
    if isinstance(schema.get("items"), dict):
        out.append(("items", schema["items"]))
    for i, sub in enumerate(schema.get("anyOf") or []):
        out.append((f"anyOf[{i}]", sub))
    for defs in ("$defs", "definitions"):
        for key, sub in (schema.get(defs) or {}).items():
            out.append((f"{defs}.{key}", sub))
    return out


def _object_problem(schema: dict[str, Any], where: str) -> str | None:
    if schema.get("additionalProperties") is not False:
        return f"{where}: an object needs additionalProperties: false"
    props = set((schema.get("properties") or {}).keys())
    missing = sorted(props - set(schema.get("required") or []))
    if missing:
        return (
            f"{where}: every property must be required "
            f"(use a null type for optional ones): {missing}"
        )
    return None


def _walk_problem(schema: Any, where: str) -> str | None:
    if not isinstance(schema, dict):
        return None
    for keyword in _UNPROJECTABLE_KEYWORDS:
        if keyword in schema:
            return f"{where}: keyword {keyword!r} is not supported by strict structured outputs"
    types = schema.get("type")
    is_object = types == "object" or (isinstance(types, list) and "object" in types)
    if is_object:
        found = _object_problem(schema, where)
        if found:
            return found
    for key, sub in _subschemas(schema):
        found = _walk_problem(sub, f"{where}.{key}" if where != "(root)" else key)
        if found:
            return found
    return None


def projection_problem(schema: dict[str, Any]) -> str | None:
    """Why ``schema`` cannot be sent as a strict ``outputSchema``; None when it can."""
    if schema.get("type") != "object":
        return f"the top level must be type 'object' (found {schema.get('type')!r})"
    if "anyOf" in schema:
        return "the top level cannot be an anyOf"
    return _walk_problem(schema, "(root)")

