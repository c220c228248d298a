"""The index's mapping, derived from the Iceberg schema: pure, no OpenSearch request.

`mappings_for` derives an explicit mapping from the table's schema, so that the type of a field
never depends on the first documents OpenSearch sees. Each Iceberg type maps to the field type that
keeps its meaning for the JSON `icecdc.documents` writes for it. docs/documents.md documents both
tables; keep the three in step. The root is `dynamic: strict`: a field not in the schema is refused.

`index_spec` merges a table's `mappings` and `settings` overrides over it with
`merge_mappings`, or names the index template that applies instead. `missing` compares a
mapping an index has with the one it should have.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from pyiceberg.schema import Schema
from pyiceberg.types import (
    BinaryType,
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    FixedType,
    FloatType,
    IcebergType,
    IntegerType,
    ListType,
    LongType,
    MapType,
    StringType,
    StructType,
    TimestampNanoType,
    TimestampType,
    TimestamptzNanoType,
    TimestamptzType,
    TimeType,
    UUIDType,
)

from icecdc.config import IndexConfig, StringMapping

# Mapping = OpenSearch's JSON: a field's parameters, `properties` of an object, a whole mapping.
Mapping = dict[str, Any]

# What queries may also say for a date field, after the documents' own exact format (which
# OpenSearch also prints values in): OpenSearch's default, so `"gte": "2026-11-21"` works.
QUERY_DATE_FORMATS = "strict_date_optional_time||epoch_millis"
# The documents' text of each temporal type, as java.time patterns (icecdc.documents: isoformat
# with microseconds; timestamptz always in UTC as +00:00). `uuuu`: the proleptic year (a `yyyy`
# year-of-era needs an era under a strict resolver).
DATE_FORMAT = "uuuu-MM-dd"
TIME_FORMAT = "HH:mm:ss.SSSSSS"
TIMESTAMP_FORMAT = "uuuu-MM-dd'T'HH:mm:ss.SSSSSS"
TIMESTAMPTZ_FORMAT = "uuuu-MM-dd'T'HH:mm:ss.SSSSSSxxx"
# A decimal's unscaled value is stored as a long in a `scaled_float`: up
# to 18 digits fit (10^18 < 2^63).
SCALED_FLOAT_MAX_PRECISION = 18
# OpenSearch's dynamic mapping keeps strings up to 256 characters in the keyword sub-field; a
# keyword-only string keeps up to 8191, the most whose UTF-8 always fits Lucene's 32766-byte term.
KEYWORD_SUBFIELD_IGNORE_ABOVE = 256
KEYWORD_IGNORE_ABOVE = 8191

_FIXED_TYPES: dict[type[IcebergType], Mapping] = {
    BooleanType: {"type": "boolean"},
    IntegerType: {"type": "integer"},
    LongType: {"type": "long"},
    FloatType: {"type": "float"},
    DoubleType: {"type": "double"},
    DateType: {"type": "date", "format": f"{DATE_FORMAT}||{QUERY_DATE_FORMATS}"},
    TimeType: {"type": "date", "format": f"{TIME_FORMAT}||strict_hour_minute_second||epoch_millis"},
    TimestampType: {"type": "date", "format": f"{TIMESTAMP_FORMAT}||{QUERY_DATE_FORMATS}"},
    TimestampNanoType: {"type": "date", "format": f"{TIMESTAMP_FORMAT}||{QUERY_DATE_FORMATS}"},
    TimestamptzType: {"type": "date", "format": f"{TIMESTAMPTZ_FORMAT}||{QUERY_DATE_FORMATS}"},
    TimestamptzNanoType: {"type": "date", "format": f"{TIMESTAMPTZ_FORMAT}||{QUERY_DATE_FORMATS}"},
    UUIDType: {"type": "keyword"},
    BinaryType: {"type": "binary"},
    FixedType: {"type": "binary"},
}
_STRINGS: dict[StringMapping, Mapping] = {
    "text": {
        "type": "text",
        "fields": {"keyword": {"type": "keyword", "ignore_above": KEYWORD_SUBFIELD_IGNORE_ABOVE}},
    },
    "keyword": {"type": "keyword", "ignore_above": KEYWORD_IGNORE_ABOVE},
}
# Types icecdc has no field type for (Iceberg v3's unknown, geometry, geography): kept in `_source`,
# not indexed, so that their documents are still accepted by the strict mapping.
_NOT_INDEXED: Mapping = {"type": "object", "enabled": False}


def mappings_for(schema: Schema, strings: StringMapping = "text") -> Mapping:
    """The mapping of the documents of `schema`: every column, `dynamic: strict` at the root."""
    return {"dynamic": "strict", "properties": _properties(schema.as_struct(), strings)}


def _properties(struct: StructType, strings: StringMapping) -> Mapping:
    return {f.name: field_mapping(f.field_type, strings) for f in struct.fields}


def field_mapping(field_type: IcebergType, strings: StringMapping = "text") -> Mapping:
    """The OpenSearch field of one Iceberg type.

    It fits the JSON `icecdc.documents.converter_for` writes.
    """
    if isinstance(field_type, StructType):
        # OpenSearch answers an object without `type` (object is the default); so does this
        return (
            {"properties": _properties(field_type, strings)}
            if field_type.fields
            else {"type": "object"}
        )
    if isinstance(field_type, ListType):
        # every OpenSearch field takes an array
        return field_mapping(field_type.element_type, strings)
    if isinstance(field_type, MapType):
        # nested: a query for a key and a value matches them in the same pair
        pair = {
            "key": field_mapping(field_type.key_type, strings),
            "value": field_mapping(field_type.value_type, strings),
        }
        return {"type": "nested", "properties": pair}
    if isinstance(field_type, DecimalType):
        # documents carry the exact digits as a string; OpenSearch coerces it into a numeric field
        if field_type.precision <= SCALED_FLOAT_MAX_PRECISION:
            return {"type": "scaled_float", "scaling_factor": float(10**field_type.scale)}
        return {"type": "double"}
    if isinstance(field_type, StringType):
        return copy.deepcopy(_STRINGS[strings])
    for iceberg_type, mapping in _FIXED_TYPES.items():
        if isinstance(field_type, iceberg_type):
            return dict(mapping)
    return dict(_NOT_INDEXED)


def merge_mappings(derived: Mapping, overrides: Mapping) -> Mapping:
    """`overrides` over `derived`, deeply: mappings merge level by level, other values replace.

    In `properties`, a field whose override sets a different `type` starts over from the override,
    as the derived field's parameters would not fit that type. It keeps the derived `properties` of
    an object, though. An override without `type` adds its parameters to the field.
    """
    merged = copy.deepcopy(derived)
    for key, value in overrides.items():
        if key == "properties" and isinstance(value, dict):
            merged[key] = _merge_properties(merged.get(key, {}), value)
        elif isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = merge_mappings(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def _merge_properties(derived: Mapping, overrides: Mapping) -> Mapping:
    merged = dict(derived)
    for name, override in overrides.items():
        base = derived.get(name)
        if not isinstance(base, dict) or not isinstance(override, dict):
            merged[name] = copy.deepcopy(override)
            continue
        if "type" in override and override["type"] != _type_of(base):
            base = {"properties": base["properties"]} if "properties" in base else {}
        merged[name] = merge_mappings(base, override)
    return merged


def _type_of(field_mapping: Mapping) -> str:
    return str(field_mapping.get("type", "object"))


@dataclass(frozen=True)
class IndexSpec:
    """How icecdc creates a table's index: with this mapping and settings, or from a template.

    When `template` names an index template, the index is created with no body of
    its own, so that the template applies.
    """

    mappings: Mapping | None = None
    settings: Mapping = field(default_factory=dict)
    template: str | None = None
    table_uuid: str = ""  # the table whose documents it holds: recorded in each generation's marker
    shape: str = ""  # what of the table it holds (`Shape.fingerprint`): recorded in the marker too

    def body(self) -> Mapping | None:
        """The body of the create-index request."""
        body = {k: v for k, v in (("mappings", self.mappings), ("settings", self.settings)) if v}
        return body or None


def index_spec(schema: Schema, config: IndexConfig, table_uuid: str = "") -> IndexSpec:
    """The table's index as configured: its mapping, with the table's overrides, and its settings.

    The mapping is derived from the columns the index holds.
    """
    shape = config.shape.fingerprint
    if config.index_template is not None:
        return IndexSpec(template=config.index_template, table_uuid=table_uuid, shape=shape)
    mappings = merge_mappings(
        mappings_for(config.shape.project(schema), config.strings), config.mappings or {}
    )
    return IndexSpec(
        mappings, copy.deepcopy(config.settings or {}), table_uuid=table_uuid, shape=shape
    )


def missing(mapped: Mapping, wanted: Mapping, prefix: str = "") -> tuple[Mapping, list[str]]:
    """The part of the `wanted` properties absent from `mapped`, and the paths mapped otherwise."""
    additions: Mapping = {}
    conflicts: list[str] = []
    for name, want in wanted.items():
        have = mapped.get(name)
        path = f"{prefix}{name}"
        if have is None:
            additions[name] = want
        elif _type_of(have) != _type_of(want) or (
            "properties" not in want and _parameters(have) != _parameters(want)
        ):
            conflicts.append(f"{path} ({_type_of(have)}, the schema's {_type_of(want)})")
        elif "properties" in want:
            inner, inner_conflicts = missing(
                have.get("properties", {}), want["properties"], f"{path}."
            )
            conflicts += inner_conflicts
            if inner:  # restate the object's own parameters (a nested object must stay nested)
                additions[name] = {
                    **{k: v for k, v in want.items() if k != "properties"},
                    "properties": inner,
                }
    return additions, conflicts


def _parameters(field_mapping: Mapping) -> Mapping:
    # the parameters that decide what a field accepts (OpenSearch answers numbers as it stores them)
    return {
        k: float(v) if isinstance(v, int | float) and not isinstance(v, bool) else v
        for k, v in field_mapping.items()
    }


def field_paths(properties: Mapping, prefix: str = "") -> list[str]:
    """The dotted path of every leaf field of `properties`."""
    paths: list[str] = []
    for name, mapping in properties.items():
        paths += (
            field_paths(mapping["properties"], f"{prefix}{name}.")
            if "properties" in mapping
            else [f"{prefix}{name}"]
        )
    return paths
