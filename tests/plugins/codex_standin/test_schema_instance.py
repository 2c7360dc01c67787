"""instance_for_schema / invalid_instance_for_schema against jsonschema."""

from __future__ import annotations

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mmo_kernel.contracts.instance import (
    SchemaInstanceError,
    instance_for_schema,
    invalid_instance_for_schema,
)

SHAPES = [
    {"type": "object", "properties": {"summary": {"type": "string"}}, "required": ["summary"]},
    {
        "type": "object",
        "additionalProperties": False,
        "properties": {"a": {"type": "integer", "minimum": 3}, "b": {"type": "boolean"}},
        "required": ["a", "b"],
    },
    {"type": "array", "items": {"type": "string"}, "minItems": 3, "uniqueItems": True},
    {
        "type": "array",
        "items": {"type": "integer", "minimum": 5, "maximum": 9},
        "minItems": 4,
        "uniqueItems": True,
    },
    {"enum": ["low", "medium", "high"]},
    {"const": {"fixed": [1, 2]}},
    {"type": "string", "format": "date-time"},
    {"type": "string", "format": "email"},
    {"type": "string", "format": "uuid"},
    {"type": "string", "pattern": "^[A-Z]{3}-[0-9]{2,4}$"},
    {"type": "string", "pattern": "^(sha|md)[0-9a-f]{8}$"},
    {"type": "string", "minLength": 40},
    {"type": "string", "maxLength": 3},
    {"type": "number", "exclusiveMinimum": 0, "maximum": 1},
    {"type": "integer", "multipleOf": 7, "minimum": 10},
    {"type": "integer", "exclusiveMaximum": -4},
    {"type": ["null", "string"]},
    {"type": "null"},
    {
        "$defs": {
            "item": {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]}
        },
        "type": "object",
        "properties": {
            "items": {"type": "array", "items": {"$ref": "#/$defs/item"}, "minItems": 2}
        },
        "required": ["items"],
    },
    {
        "definitions": {"n": {"type": "integer", "minimum": 1}},
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": "array",
        "items": [{"$ref": "#/definitions/n"}, {"type": "string"}],
        "minItems": 2,
    },
    {
        "anyOf": [
            {"type": "integer", "minimum": 10, "maximum": 5},
            {"type": "string", "enum": ["ok"]},
        ]
    },
    {"oneOf": [{"type": "string"}, {"type": "string", "minLength": 1000}]},
    {
        "allOf": [
            {"type": "object", "properties": {"x": {"type": "string"}}, "required": ["x"]},
            {"properties": {"y": {"type": "integer"}}, "required": ["y"]},
        ]
    },
    {"type": "object", "minProperties": 3, "additionalProperties": {"type": "integer"}},
    {"type": "array", "contains": {"const": "needle"}, "items": {"type": "string"}},
    {
        "type": "object",
        "properties": {
            "status": {"type": "string", "enum": ["done", "blocked"]},
            "evidence": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "path": {"type": "string"},
                        "line": {"type": "integer", "minimum": 1},
                    },
                    "required": ["path", "line"],
                },
                "minItems": 1,
            },
        },
        "required": ["status", "evidence"],
        "additionalProperties": False,
    },
    True,
    {},
]


@pytest.mark.parametrize("schema", SHAPES, ids=range(len(SHAPES)))
def test_instance_validates_and_is_deterministic(schema):
    value = instance_for_schema(schema)
    jsonschema.validate(value, schema, format_checker=jsonschema.FormatChecker())
    assert instance_for_schema(schema) == value


@pytest.mark.parametrize(
    "schema", [s for s in SHAPES if s not in (True, {})], ids=range(len(SHAPES) - 2)
)
def test_invalid_instance_is_rejected(schema):
    value = invalid_instance_for_schema(schema)
    assert not jsonschema.validators.validator_for(schema)(schema).is_valid(value)


def test_strings_carry_the_given_text():
    schema = {
        "type": "object",
        "properties": {"summary": {"type": "string"}},
        "required": ["summary"],
    }
    assert instance_for_schema(schema) == {"summary": "FAKE_CODEX_OK"}
    assert instance_for_schema(schema, text="hello") == {"summary": "hello"}


def test_near_miss_drops_a_required_property():
    schema = {
        "type": "object",
        "properties": {"a": {"type": "string"}, "b": {"type": "string"}},
        "required": ["a"],
    }
    assert invalid_instance_for_schema(schema) == {"b": "FAKE_CODEX_OK"}


def test_unsatisfiable_schema_raises_clear_error():
    with pytest.raises(SchemaInstanceError, match="no number lies between 5 and 1"):
        instance_for_schema({"type": "integer", "minimum": 5, "maximum": 1})
    with pytest.raises(SchemaInstanceError, match="accepts no value"):
        instance_for_schema(False)
    with pytest.raises(SchemaInstanceError, match="invalid JSON Schema"):
        instance_for_schema({"type": "nonsense"})
    with pytest.raises(SchemaInstanceError, match="accepts every value"):
        invalid_instance_for_schema({})


_leaf = st.one_of(
    st.just({"type": "string"}),
    st.builds(lambda lo: {"type": "string", "minLength": lo}, st.integers(0, 30)),
    st.builds(
        lambda lo, span: {"type": "integer", "minimum": lo, "maximum": lo + span},
        st.integers(-50, 50),
        st.integers(0, 20),
    ),
    st.builds(lambda lo: {"type": "number", "exclusiveMinimum": lo}, st.integers(-5, 5)),
    st.builds(
        lambda vals: {"enum": vals},
        st.lists(st.text(max_size=5), min_size=1, max_size=4, unique=True),
    ),
    st.just({"type": "boolean"}),
    st.just({"type": ["string", "null"]}),
    st.just({"type": "string", "format": "date"}),
)


def _compound(children):
    return st.one_of(
        st.builds(
            lambda props, data: {
                "type": "object",
                "properties": props,
                "required": sorted(props)[:data],
                "additionalProperties": False,
            },
            st.dictionaries(st.from_regex(r"[a-z]{1,6}", fullmatch=True), children, max_size=4),
            st.integers(0, 4),
        ),
        st.builds(
            lambda item, lo: {"type": "array", "items": item, "minItems": lo},
            children,
            st.integers(0, 3),
        ),
        st.builds(lambda alts: {"anyOf": alts}, st.lists(children, min_size=1, max_size=3)),
    )


@settings(max_examples=60, deadline=None)
@given(st.recursive(_leaf, _compound, max_leaves=12))
def test_generated_schemas_get_valid_and_invalid_instances(schema):
    value = instance_for_schema(schema)
    checker = jsonschema.Draft202012Validator(schema, format_checker=jsonschema.FormatChecker())
    assert checker.is_valid(value), list(checker.iter_errors(value))
    bad = invalid_instance_for_schema(schema)
    assert not checker.is_valid(bad)
