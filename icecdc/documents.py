"""Rows to OpenSearch documents: the Iceberg → JSON mapping and the `_id` format.

The mapping is driven by the Iceberg schema, not by Python types, so that a uuid and a
fixed(16) both arriving as bytes still map differently. The README's "Document mapping" table
documents every rule here; keep the two in step.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import math
import uuid
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from pyiceberg.schema import Schema
from pyiceberg.types import (
    BinaryType,
    DateType,
    DecimalType,
    DoubleType,
    FixedType,
    FloatType,
    IcebergType,
    ListType,
    MapType,
    StructType,
    TimestampNanoType,
    TimestampType,
    TimestamptzNanoType,
    TimestamptzType,
    TimeType,
    UUIDType,
)

Converter = Callable[[Any], Any]


def _identity(value: Any) -> Any:
    return value


def _float(value: float) -> float | None:
    # JSON has no NaN or infinity, and OpenSearch rejects them in numeric fields.
    return value if math.isfinite(value) else None


def _decimal(value: Decimal) -> str:
    # A string keeps every digit; OpenSearch coerces it into numeric field types. str() is 3x faster
    # than format(); it is plain positional notation except for tiny or exponent-form values.
    text = str(value)
    return format(value, "f") if "E" in text else text


def _temporal(value: dt.date | dt.time | dt.datetime) -> str:
    if isinstance(value, dt.date) and not isinstance(value, dt.datetime):
        return value.isoformat()
    return value.isoformat(timespec="microseconds")


def _timestamptz(value: dt.datetime) -> str:
    return value.astimezone(dt.UTC).isoformat(timespec="microseconds")


def _uuid(value: bytes | uuid.UUID) -> str:
    return str(value if isinstance(value, uuid.UUID) else uuid.UUID(bytes=value))


def _binary(value: bytes) -> str:
    return base64.b64encode(value).decode("ascii")


def converter_for(field_type: IcebergType) -> Converter:
    """How a non-null value of this Iceberg type becomes JSON."""
    if isinstance(field_type, StructType):
        fields = [(f.name, converter_for(f.field_type)) for f in field_type.fields]
        return lambda row: {name: _convert(convert, row.get(name)) for name, convert in fields}
    if isinstance(field_type, ListType):
        element = converter_for(field_type.element_type)
        return lambda values: [_convert(element, v) for v in values]
    if isinstance(field_type, MapType):
        # An array of pairs, not an object: keys of any type, and no mapping explosion in OpenSearch.
        key, value = converter_for(field_type.key_type), converter_for(field_type.value_type)
        return lambda pairs: [{"key": _convert(key, k), "value": _convert(value, v)} for k, v in pairs]
    if isinstance(field_type, (FloatType, DoubleType)):
        return _float
    if isinstance(field_type, DecimalType):
        return _decimal
    if isinstance(field_type, (TimestamptzType, TimestamptzNanoType)):
        return _timestamptz
    if isinstance(field_type, UUIDType):
        return _uuid
    if isinstance(field_type, (BinaryType, FixedType)):
        return _binary
    if isinstance(field_type, (DateType, TimeType, TimestampType, TimestampNanoType)):
        return _temporal
    return _identity  # boolean, int, long, string: JSON as they are


def _convert(convert: Converter, value: Any) -> Any:
    return None if value is None else convert(value)


class DocumentMapper:
    """Builds documents and their ids for one schema."""

    def __init__(self, schema: Schema, identifier_columns: tuple[str, ...]) -> None:
        self._to_document = converter_for(schema.as_struct())
        # A row of exactly the schema's columns is copied and only its columns that need it
        # converted: the same document as `_to_document`'s, at a third of its cost.
        self._columns = {f.name for f in schema.fields}
        converters = [(f.name, converter_for(f.field_type)) for f in schema.fields]
        self._converted = [(name, convert) for name, convert in converters if convert is not _identity]
        self._identifier_paths = [name.split(".") for name in identifier_columns]
        self._identifier_columns = identifier_columns

    def document(self, row: dict[str, Any]) -> dict[str, Any]:
        """Every column of the schema, mapped to JSON (a new dict; `row` is left as it is)."""
        if row.keys() != self._columns:
            document: dict[str, Any] = self._to_document(row)
            return document
        document = dict(row)
        for name, convert in self._converted:
            value = document[name]
            if value is not None:
                document[name] = convert(value)
        return document

    def document_id(self, document: dict[str, Any]) -> str:
        """The `_id`: the identifier value as text; for several columns, a JSON array of their texts.

        Text of a value: strings as they are, integers in decimal, booleans `true`/`false`, and every
        other type as in the document (ISO dates and times, decimal strings, canonical UUIDs, base64).
        The same value gives the same `_id` whatever its integer width, so widening int → long keeps ids.
        """
        texts = []
        for name, path in zip(self._identifier_columns, self._identifier_paths, strict=True):
            value: Any = document
            for part in path:
                value = value.get(part) if isinstance(value, dict) else None
            if value is None:
                raise ValueError(f"identifier column {name!r} is null")
            texts.append(_id_text(value))
        if len(texts) == 1:
            return texts[0]
        return json.dumps(texts, separators=(",", ":"), ensure_ascii=False)


def _id_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


# One encoder for every document: json.dumps with options builds a new encoder per call, a third of its time.
_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def encode_document(document: dict[str, Any]) -> str:
    """Canonical JSON: equal documents give equal text, which carryover removal relies on."""
    return _CANONICAL.encode(document)
