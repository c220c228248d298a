"""icecdc.destination.index.mappings: the index's mapping derived from the Iceberg schema, the overrides merged
over it, and what an index's mapping lacks or maps otherwise."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from pyiceberg.types import (
    BinaryType,
    DecimalType,
    IcebergType,
    IntegerType,
    ListType,
    LongType,
    MapType,
    NestedField,
    StringType,
    StructType,
    TimestamptzNanoType,
    UnknownType,
    UUIDType,
)

from icecdc.config import IndexConfig, StringMapping
from icecdc.destination.index import field_mapping, merge_mappings
from icecdc.destination.index.mappings import field_paths, index_spec, mappings_for, missing
from tests.support.all_types import DERIVED, SCHEMA

TEXT = DERIVED["properties"]["tenant"]
KEYWORD = {"type": "keyword", "ignore_above": 8191}  # the longest that fits Lucene's term in UTF-8


def test_every_type_gets_the_readme_mapping() -> None:
    assert mappings_for(SCHEMA) == DERIVED


@pytest.mark.parametrize(
    ("field_type", "strings", "mapping"),
    [
        (StringType(), "text", TEXT),
        (StringType(), "keyword", KEYWORD),
        (DecimalType(18, 4), "text", {"type": "scaled_float", "scaling_factor": 10000.0}),
        (DecimalType(19, 4), "text", {"type": "double"}),  # its unscaled values do not fit a long
        (ListType(1, IntegerType()), "text", {"type": "integer"}),  # every field takes an array
        (
            ListType(1, StructType(NestedField(2, "x", LongType()))),
            "text",
            {"properties": {"x": {"type": "long"}}},
        ),
        (StructType(), "text", {"type": "object"}),  # as OpenSearch answers an empty object
        (
            MapType(1, StringType(), 2, UUIDType()),
            "keyword",
            {"type": "nested", "properties": {"key": KEYWORD, "value": {"type": "keyword"}}},
        ),
        (BinaryType(), "text", {"type": "binary"}),
        (TimestamptzNanoType(), "text", DERIVED["properties"]["tstz"]),
        (
            UnknownType(),
            "text",
            {"type": "object", "enabled": False},
        ),  # kept in _source, not indexed
    ],
    ids=repr,
)
def test_field_mapping(
    field_type: IcebergType,
    strings: StringMapping,
    mapping: dict[str, Any],
) -> None:
    assert field_mapping(field_type, strings) == mapping


def test_merging_overrides_over_the_derived_mapping() -> None:
    derived = {"dynamic": "strict", "properties": copy.deepcopy(DERIVED["properties"])}
    merged = merge_mappings(
        derived,
        {
            "dynamic": False,
            "properties": {
                # another type: the derived parameters (scaling_factor) go
                "price": {"type": "keyword"},
                "tenant": {
                    "analyzer": "english",
                    "fields": {"raw": {"type": "keyword"}},
                },  # parameters add up
                "attrs": {"type": "object"},  # an object keeps the derived properties
                "point": {"properties": {"label": {"type": "keyword"}}},
            },
        },
    )
    assert merged["dynamic"] is False
    properties = merged["properties"]
    assert properties["price"] == {"type": "keyword"}
    assert properties["tenant"] == {
        "type": "text",
        "analyzer": "english",
        "fields": {"keyword": {"type": "keyword", "ignore_above": 256}, "raw": {"type": "keyword"}},
    }
    assert properties["attrs"] == {
        "type": "object",
        "properties": DERIVED["properties"]["attrs"]["properties"],
    }
    assert properties["point"] == {"properties": {"x": DOUBLE, "label": {"type": "keyword"}}}
    # the derived mapping is not changed
    assert derived["properties"]["price"]["type"] == "scaled_float"


LONG, DOUBLE = {"type": "long"}, {"type": "double"}


@pytest.mark.parametrize(
    ("mapped", "wanted", "additions", "conflicts"),
    [
        ({}, {"a": LONG}, {"a": LONG}, []),  # a new column
        ({"a": LONG}, {"a": LONG}, {}, []),
        ({"a": LONG}, {"a": DOUBLE}, {}, ["a (long, the schema's double)"]),
        ({"a": TEXT}, {"a": KEYWORD}, {}, ["a (text, the schema's keyword)"]),
        (  # the same type, other parameters: what the field accepts differs
            {"p": {"type": "scaled_float", "scaling_factor": 100.0}},
            {"p": {"type": "scaled_float", "scaling_factor": 1000.0}},
            {},
            ["p (scaled_float, the schema's scaled_float)"],
        ),
        (  # OpenSearch answers numbers as it stores them: 100 and 100.0 are one factor
            {"p": {"type": "scaled_float", "scaling_factor": 100}},
            {"p": {"type": "scaled_float", "scaling_factor": 100.0}},
            {},
            [],
        ),
        (  # a field added inside an object, whose own parameters are restated (nested stays nested)
            {"m": {"type": "nested", "properties": {"key": TEXT}}},
            {"m": {"type": "nested", "properties": {"key": TEXT, "value": LONG}}},
            {"m": {"type": "nested", "properties": {"value": LONG}}},
            [],
        ),
        (
            {"o": {"properties": {"x": LONG}}},
            {"o": {"properties": {"x": DOUBLE, "y": LONG}}},
            {"o": {"properties": {"y": LONG}}},
            ["o.x (long, the schema's double)"],
        ),
        ({"o": LONG}, {"o": {"properties": {"x": LONG}}}, {}, ["o (long, the schema's object)"]),
    ],
)
def test_what_a_mapping_lacks_and_maps_otherwise(
    mapped: dict[str, Any], wanted: dict[str, Any], additions: dict[str, Any], conflicts: list[str]
) -> None:
    assert missing(mapped, wanted) == (additions, conflicts)


def test_field_paths() -> None:
    assert field_paths(DERIVED["properties"])[-5:] == [
        "point.x",
        "point.label",
        "tags",
        "attrs.key",
        "attrs.value",
    ]


@pytest.mark.parametrize(
    ("config", "mappings", "settings", "template"),
    [
        ({}, DERIVED, {}, None),
        ({"strings": "keyword"}, mappings_for(SCHEMA, "keyword"), {}, None),
        (
            {
                "columns": ["tenant", "n"],
                "mappings": {"dynamic": False},
                "settings": {"number_of_shards": 2},
            },
            {"dynamic": False, "properties": {"tenant": TEXT, "n": {"type": "integer"}}},
            {"number_of_shards": 2},
            None,
        ),
        (
            {"index_template": "orders-template"},
            None,
            {},
            "orders-template",
        ),  # the template's body applies
    ],
    ids=["derived", "keyword strings", "projected with overrides", "a template"],
)
def test_the_index_as_configured(
    config: dict[str, Any],
    mappings: dict[str, Any] | None,
    settings: dict[str, Any],
    template: str | None,
) -> None:
    index = IndexConfig.model_validate({"index": "orders", **config})
    spec = index_spec(SCHEMA, index, "uuid-1")
    assert (spec.mappings, spec.settings, spec.template) == (mappings, settings, template)
    assert (spec.table_uuid, spec.shape) == ("uuid-1", index.shape.fingerprint)
    assert (spec.body() is None) == (template is not None)  # a template: no body of its own
