"""Strict checks every reader of a persisted MMO document applies (spec 02, 03).

Readers are strict so that a record from another MMO version, a hand edit
or a half-migrated file fails loudly instead of being half understood:
``schema_version`` must be exactly the int ``MMO_SCHEMA_VERSION``, retired
fields are refused, and a record written by another package version is
rejected in place.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, TypeVar, cast

from pydantic import BaseModel, ConfigDict, ValidationError

from mmo_kernel import package_version
from mmo_kernel.errors import RecordError
from mmo_kernel.state.files import MMO_SCHEMA_VERSION, read_json

T = TypeVar("T")
M = TypeVar("M", bound=BaseModel)


class StrictRecord(BaseModel):
    """Base for record models: unknown fields refused, exact types (a bool is never an int)."""

    model_config = ConfigDict(extra="forbid", strict=True)


def is_exact_int(value: Any) -> bool:
    """True for an ``int`` that is not a ``bool``."""
    return isinstance(value, int) and not isinstance(value, bool)


def check_schema_version(doc: Mapping[str, Any], where: str, kind: str = "record") -> None:
    """Refuse a document whose ``schema_version`` is not exactly ``MMO_SCHEMA_VERSION``.

    ``kind`` names the document in the message (spec 02: ``unsupported session
    state schema``, ``unsupported job state schema``, ...).
    """
    if "schema_version" not in doc:
        raise RecordError(
            f"{where}: unsupported {kind} schema: schema_version is missing "
            f"(this MMO reads schema_version = {MMO_SCHEMA_VERSION})"
        )
    value = doc["schema_version"]
    if not is_exact_int(value) or value != MMO_SCHEMA_VERSION:
        raise RecordError(
            f"{where}: unsupported {kind} schema: schema_version {value!r} "
            f"(this MMO reads schema_version = {MMO_SCHEMA_VERSION}, an int)"
        )


def check_package_version(doc: Mapping[str, Any], where: str, kind: str = "session") -> None:
    """Refuse a record another MMO package version wrote: it is rejected in place."""
    current = package_version()
    found = doc.get("package_version")
    if found != current:
        raise RecordError(
            f"persistent {kind} package must be {current}; {where} was written by "
            f"package version {found!r}. Use the MMO version that created it."
        )


def reject_retired_fields(doc: Mapping[str, Any], retired: Iterable[str], where: str) -> None:
    """Refuse a document that still carries fields this MMO no longer supports."""
    present = sorted(set(doc) & set(retired))
    if present:
        raise RecordError(f"{where}: retired fields are not supported: {', '.join(present)}")


MAX_REPORTED_PROBLEMS = 5
"""A record broken in many places names this many fields, then says how many more."""


def field_problems(exc: ValidationError) -> str:
    """``field 'created_at': Input should be a valid string; ...`` on one line.

    Session, run and job records (and any other strict record) are reported
    this way, so a user sees which key of the file to fix, never a pydantic dump.
    """
    parts = []
    errors = exc.errors()
    for err in errors[:MAX_REPORTED_PROBLEMS]:
        name = ".".join(str(p) for p in err["loc"])
        if err["type"] == "extra_forbidden":
            message = "unknown field"
        else:
            message = " ".join(str(err["msg"]).removeprefix("Value error, ").split())
        parts.append(f"field '{name}': {message}" if name else message)
    if len(errors) > MAX_REPORTED_PROBLEMS:
        parts.append(f"and {len(errors) - MAX_REPORTED_PROBLEMS} more")
    return "; ".join(parts)


def validate_model(model: type[M], doc: Mapping[str, Any], where: str) -> M:
    """``model.model_validate(doc)``; a problem is one line, ``<where>: field '<key>': <why>``."""
    try:
        return model.model_validate(doc)
    except ValidationError as exc:
        raise RecordError(f"{where}: {field_problems(exc)}") from None


def _apply(validator: Callable[[dict[str, Any]], T] | type[BaseModel],
           doc: dict[str, Any], where: str) -> Any:
    if isinstance(validator, type) and issubclass(validator, BaseModel):
        return validate_model(validator, doc, where)
    try:
        return cast(Callable[[dict[str, Any]], Any], validator)(doc)
    except RecordError as exc:  # a callable validator may not know the file: name it
        if where in str(exc):
            raise
        raise RecordError(f"{where}: {exc}") from None


UNREADABLE = "unreadable"
"""The ``status`` of a listing row that stands for a record that could not be read."""


def unreadable_row(id_field: str, record_id: str, path: Path, exc: BaseException,
                   **known: Any) -> dict[str, Any]:
    """A listing row for a record that failed to read: ``{<id_field>, "status": "unreadable",
    "error", "record_path"}``, plus what is still known about it (e.g. its session).

    Listings show such a row instead of failing as a whole or skipping the record.
    """
    reason = " ".join(str(exc).split()) or exc.__class__.__name__
    if isinstance(exc, FileNotFoundError) and str(path) not in reason:
        reason = f"{path}: the record is missing"
    return {id_field: record_id, "status": UNREADABLE, "error": reason,
            "record_path": str(path), **known}


def is_unreadable(row: Mapping[str, Any]) -> bool:
    """True for a row made by ``unreadable_row``."""
    return row.get("status") == UNREADABLE and "record_path" in row


def read_record(
    path: Path,
    validator: Callable[[dict[str, Any]], T] | type[BaseModel],
    *,
    retired: Iterable[str] = (),
    check_package: bool = False,
    kind: str = "session",
    schema_kind: str = "record",
) -> Any:
    """Read, strictly check and validate one JSON record.

    ``validator`` is a pydantic model class (validated strictly) or a
    callable taking the document. Unreadable or invalid JSON, a non-object,
    a wrong schema version (``unsupported <schema_kind> schema``), retired
    fields, validation failures and a foreign package version (``persistent
    <kind> package must be ...``) raise ``ValueError`` naming ``path``; a
    missing file ``FileNotFoundError``.
    """
    where = str(path)
    doc = read_json(path)
    if not isinstance(doc, dict):
        raise RecordError(f"{where}: a record must be a JSON object, got {type(doc).__name__}")
    check_schema_version(doc, where, schema_kind)
    reject_retired_fields(doc, retired, where)
    if check_package:
        check_package_version(doc, where, kind)
    return _apply(validator, doc, where)
