"""A table with every Iceberg type, a row of it, its document and its index mapping: the document
mapping's and the index mapping's tests."""

from __future__ import annotations

import datetime as dt
import uuid
from decimal import Decimal

from pyiceberg.schema import Schema
from pyiceberg.types import (
    BinaryType,
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    FixedType,
    FloatType,
    IntegerType,
    ListType,
    LongType,
    MapType,
    NestedField,
    StringType,
    StructType,
    TimestampType,
    TimestamptzType,
    TimeType,
    UUIDType,
)

SCHEMA = Schema(
    NestedField(1, "tenant", StringType(), required=True),
    NestedField(2, "n", IntegerType(), required=True),
    NestedField(3, "flag", BooleanType()),
    NestedField(4, "big", LongType()),
    NestedField(5, "f", FloatType()),
    NestedField(6, "d", DoubleType()),
    NestedField(7, "price", DecimalType(12, 3)),
    NestedField(8, "day", DateType()),
    NestedField(9, "at", TimeType()),
    NestedField(10, "ts", TimestampType()),
    NestedField(11, "tstz", TimestamptzType()),
    NestedField(12, "uid", UUIDType()),
    NestedField(13, "raw", BinaryType()),
    NestedField(14, "fix", FixedType(3)),
    NestedField(15, "point", StructType(NestedField(16, "x", DoubleType()), NestedField(17, "label", StringType()))),
    NestedField(18, "tags", ListType(19, StringType())),
    NestedField(20, "attrs", MapType(21, StringType(), 22, LongType())),
    identifier_field_ids=[1, 2],
)
UID = uuid.UUID("12345678-1234-5678-1234-567812345678")
ROW = {
    "tenant": "acme",
    "n": 7,
    "flag": True,
    "big": 2**40,
    "f": 1.5,
    "d": float("nan"),
    "price": Decimal("10.500"),
    "day": dt.date(2026, 11, 21),
    "at": dt.time(9, 30, 5, 120000),
    "ts": dt.datetime(2026, 11, 21, 9, 30),
    "tstz": dt.datetime(2026, 11, 21, 9, 30, tzinfo=dt.timezone(dt.timedelta(hours=2))),
    "uid": UID.bytes,
    "raw": b"\x00\xff",
    "fix": b"abc",
    "point": {"x": -0.25, "label": "p"},
    "tags": ["a", "b"],
    "attrs": [("k", 1)],
}

# ROW's document, as docs/documents.md's table of types says each type maps.
DOCUMENT = {
    "tenant": "acme",
    "n": 7,
    "flag": True,
    "big": 2**40,
    "f": 1.5,
    "d": None,
    "price": "10.500",
    "day": "2026-11-21",
    "at": "09:30:05.120000",
    "ts": "2026-11-21T09:30:00.000000",
    "tstz": "2026-11-21T07:30:00.000000+00:00",
    "uid": "12345678-1234-5678-1234-567812345678",
    "raw": "AP8=",
    "fix": "YWJj",
    "point": {"x": -0.25, "label": "p"},
    "tags": ["a", "b"],
    "attrs": [{"key": "k", "value": 1}],
}

TEXT = {"type": "text", "fields": {"keyword": {"type": "keyword", "ignore_above": 256}}}
ANY_DATE = "strict_date_optional_time||epoch_millis"
# SCHEMA's index mapping, docs/documents.md's table of types written out: the test of `mappings_for`,
# not a copy of it.
DERIVED = {
    "dynamic": "strict",
    "properties": {
        "tenant": TEXT,
        "n": {"type": "integer"},
        "flag": {"type": "boolean"},
        "big": {"type": "long"},
        "f": {"type": "float"},
        "d": {"type": "double"},
        "price": {"type": "scaled_float", "scaling_factor": 1000.0},
        "day": {"type": "date", "format": f"uuuu-MM-dd||{ANY_DATE}"},
        "at": {"type": "date", "format": "HH:mm:ss.SSSSSS||strict_hour_minute_second||epoch_millis"},
        "ts": {"type": "date", "format": f"uuuu-MM-dd'T'HH:mm:ss.SSSSSS||{ANY_DATE}"},
        "tstz": {"type": "date", "format": f"uuuu-MM-dd'T'HH:mm:ss.SSSSSSxxx||{ANY_DATE}"},
        "uid": {"type": "keyword"},
        "raw": {"type": "binary"},
        "fix": {"type": "binary"},
        "point": {"properties": {"x": {"type": "double"}, "label": TEXT}},
        "tags": TEXT,
        "attrs": {"type": "nested", "properties": {"key": TEXT, "value": {"type": "long"}}},
    },
}
