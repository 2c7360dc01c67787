"""Strict record reading: exact schema version, package version, retired fields."""

import json

import pytest
from pydantic import ValidationError

from mmo_kernel import package_version
from mmo_kernel.state.files import MMO_SCHEMA_VERSION
from mmo_kernel.state.records import (
    StrictRecord,
    check_package_version,
    check_schema_version,
    read_record,
    reject_retired_fields,
)


class RunRecord(StrictRecord):
    schema_version: int
    package_version: str
    sequence: int


def write(path, doc):
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


def good_doc(**extra):
    return {"schema_version": MMO_SCHEMA_VERSION, "package_version": package_version(),
            "sequence": 1, **extra}


@pytest.mark.parametrize("value", [True, False, None, "1", 1.0, 0, MMO_SCHEMA_VERSION + 1])
def test_schema_version_must_be_exactly_the_int(value):
    with pytest.raises(ValueError, match="unsupported.*schema") as caught:
        check_schema_version({"schema_version": value}, "session.json")
    assert str(caught.value).startswith("session.json: ")


def test_missing_schema_version_is_unsupported():
    with pytest.raises(ValueError, match="unsupported run state schema: schema_version is missing"):
        check_schema_version({}, "run.json", "run state")


def test_current_schema_version_passes():
    check_schema_version({"schema_version": MMO_SCHEMA_VERSION}, "x")


@pytest.mark.parametrize("found", ["0.0.1", None, 1])
def test_foreign_package_version_is_rejected(found):
    doc = {"package_version": found} if found is not None else {}
    with pytest.raises(ValueError) as caught:
        check_package_version(doc, "session.json")
    assert str(caught.value).startswith(f"persistent session package must be {package_version()}")


def test_matching_package_version_passes():
    check_package_version({"package_version": package_version()}, "job.json", kind="job")


def test_retired_fields_are_named():
    with pytest.raises(ValueError, match="retired fields .*: old_a, old_b"):
        reject_retired_fields({"old_b": 1, "old_a": 2, "keep": 3}, {"old_a", "old_b", "x"}, "f")
    reject_retired_fields({"keep": 1}, {"old_a"}, "f")


def test_read_record_validates_a_good_record(tmp_path):
    record = read_record(write(tmp_path / "run.json", good_doc()), RunRecord, check_package=True)
    assert record.sequence == 1


def test_read_record_is_exact_about_types(tmp_path):
    path = write(tmp_path / "run.json", good_doc(sequence=True))
    with pytest.raises(ValueError,
                       match=r"run.json: field 'sequence': Input should be a valid integer"):
        read_record(path, RunRecord)


def test_read_record_refuses_unknown_fields(tmp_path):
    path = write(tmp_path / "run.json", good_doc(surprise=1))
    with pytest.raises(ValueError, match="run.json: field 'surprise': unknown field"):
        read_record(path, RunRecord)


@pytest.mark.parametrize("content", ["{not json", "[1, 2]", ""])
def test_read_record_names_the_path_of_unreadable_records(tmp_path, content):
    path = tmp_path / "session.json"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(ValueError, match="session.json"):
        read_record(path, RunRecord)


def test_read_record_checks_schema_before_the_validator(tmp_path):
    calls = []
    path = write(tmp_path / "x.json", good_doc(schema_version=True))
    with pytest.raises(ValueError, match="unsupported record schema: schema_version True"):
        read_record(path, calls.append)
    assert calls == []


def test_read_record_rejects_retired_fields_and_foreign_packages(tmp_path):
    path = write(tmp_path / "a.json", good_doc(legacy_token="t"))
    with pytest.raises(ValueError, match="retired fields .*legacy_token"):
        read_record(path, dict, retired={"legacy_token"})
    path = write(tmp_path / "b.json", good_doc(package_version="9.9.9"))
    with pytest.raises(ValueError, match="persistent job package must be"):
        read_record(path, dict, check_package=True, kind="job")
    assert read_record(path, dict)["package_version"] == "9.9.9"


def test_read_record_callable_validator_receives_the_document(tmp_path):
    path = write(tmp_path / "c.json", good_doc())
    assert read_record(path, lambda doc: doc["sequence"] + 1) == 2


def test_strict_record_never_takes_a_bool_for_an_int():
    with pytest.raises(ValidationError):
        RunRecord(schema_version=True, package_version="x", sequence=1)
