"""Rows to OpenSearch documents: the Iceberg to JSON mapping, the `_id` format, an index's shape.

The shape says which columns and rows of the table an index holds, and how its documents are routed.

The mapping is driven by the Iceberg schema, not by Python types, so that a uuid and a fixed(16)
both arriving as bytes still map differently. The type table of docs/documents.md documents every
rule here; keep the two in step.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import math
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from functools import cached_property
from typing import Any

from pyiceberg.expressions import AlwaysTrue, BooleanExpression
from pyiceberg.expressions.parser import parse
from pyiceberg.expressions.visitors import bind
from pyiceberg.schema import Schema, index_by_id, prune_columns
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
    NestedField,
    PrimitiveType,
    StructType,
    TimestampNanoType,
    TimestampType,
    TimestamptzNanoType,
    TimestamptzType,
    TimeType,
    UUIDType,
)

Converter = Callable[[Any], Any]

# The longest `_id` OpenSearch takes, in bytes of UTF-8: a longer one fails its whole bulk request.
MAX_ID_BYTES = 512


class BadIdentifier(ValueError):
    """A row whose identifier cannot be an `_id`: the row's own fault.

    An identifier that is null, empty or over MAX_ID_BYTES cannot. `cause` says which without the
    row's values, so that letters of one cause group.
    """

    def __init__(self, cause: str, detail: str = "") -> None:
        super().__init__(f"{cause}: {detail}" if detail else cause)
        self.cause = cause
        self.detail = detail

    def __reduce__(self) -> tuple[object, ...]:  # picklable with its fields, as Spark ships errors
        return (type(self), (self.cause, self.detail))


def refused_id(doc_id: str) -> bool:
    """Whether OpenSearch refuses `doc_id` as an `_id`: empty, or over MAX_ID_BYTES of UTF-8."""
    # four bytes a character at most: a shorter id needs no encoding
    return not doc_id or (len(doc_id) * 4 > MAX_ID_BYTES and len(doc_id.encode()) > MAX_ID_BYTES)


def _identity(value: Any) -> Any:
    return value


def _float(value: float) -> float | None:
    # JSON has no NaN or infinity, and OpenSearch rejects them in numeric fields.
    return value if math.isfinite(value) else None


def _decimal(value: Decimal | str) -> str:
    if isinstance(value, str):  # written by Arrow already (`reading.reader.text_in_arrow`)
        return value
    # A string keeps every digit; OpenSearch coerces it into numeric field types. str() is 3x faster
    # than format(); it is plain positional notation except for tiny or exponent-form values.
    text = str(value)
    return format(value, "f") if "E" in text else text


def _temporal(value: dt.date | dt.time | dt.datetime | str) -> str:
    if isinstance(value, str):  # written by Arrow already (`reading.reader.text_in_arrow`)
        return value
    if isinstance(value, dt.date) and not isinstance(value, dt.datetime):
        return value.isoformat()
    return value.isoformat(timespec="microseconds")


def _timestamptz(value: dt.datetime | str) -> str:
    if isinstance(value, str):  # written by Arrow already (`reading.reader.text_in_arrow`)
        return value
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
        # An array of pairs, not an object: keys of any type, and no
        # mapping explosion in OpenSearch.
        key, value = converter_for(field_type.key_type), converter_for(field_type.value_type)
        return lambda pairs: [
            {"key": _convert(key, k), "value": _convert(value, v)} for k, v in pairs
        ]
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


@dataclass(frozen=True)
class Shape:
    """What of a table one index holds: its columns, its rows, and the column that routes documents.

    The columns are `columns`, or every column but `exclude_columns`; a dotted path names a field of
    a struct. The rows are those `where` keeps, in Iceberg's expression syntax. `routing` names the
    column whose value routes each document. The default shape is the whole table, unrouted. Small
    and picklable: executors get it with the reader.
    """

    columns: tuple[str, ...] | None = None
    exclude_columns: tuple[str, ...] = ()
    where: str | None = None
    routing: str | None = None

    def routing_of(self, document: dict[str, Any]) -> str | None:
        """A document's routing value, as text like an `_id`'s, or None.

        None without `routing`, or when the document's value is null: OpenSearch routes by `_id`.
        """
        if self.routing is None:
            return None
        value = _value_at(document, self.routing.split("."))
        return None if value is None else _id_text(value)

    @property
    def fingerprint(self) -> str:
        """The shape as text: what an index records it was built with.

        "" stands for the whole table, unrouted.
        """
        keys = {
            "columns": self.columns,
            "exclude_columns": self.exclude_columns,
            "where": self.where,
            "routing": self.routing,
        }
        kept = {k: list(v) if isinstance(v, tuple) else v for k, v in keys.items() if v}
        return json.dumps(kept, sort_keys=True, separators=(",", ":")) if kept else ""

    @property
    def projects(self) -> bool:
        return self.columns is not None or bool(self.exclude_columns)

    @cached_property
    def row_filter(self) -> BooleanExpression:
        """The rows the index holds, unbound; AlwaysTrue without `where`."""
        return AlwaysTrue() if self.where is None else parse(self.where)

    def project(self, schema: Schema) -> Schema:
        """The schema of the index's documents: the selected columns, in the table's order."""
        if self.columns is not None:
            return schema.select(*self.columns)
        if not self.exclude_columns:
            return schema
        dropped = {i for path in self.exclude_columns for i in _ids_within(schema.find_field(path))}
        return prune_columns(schema, set(index_by_id(schema)) - dropped, select_full_types=False)

    def read_schema(self, schema: Schema, identifier_columns: tuple[str, ...]) -> Schema:
        """What a reader needs of each row: the document's columns and the identifier columns."""
        if not self.projects:
            return schema
        wanted = set(index_by_id(self.project(schema))) | {
            schema.find_field(name).field_id for name in identifier_columns
        }
        return prune_columns(schema, wanted, select_full_types=False)

    def check(self, schema: Schema) -> None:
        """ValueError naming the key and the column when the shape does not fit `schema`."""
        for key, paths in (
            ("columns", self.columns or ()),
            ("exclude_columns", self.exclude_columns),
        ):
            for path in paths:
                _find(schema, path, key)
        if self.where is not None:
            try:
                bind(schema, self.row_filter, case_sensitive=True)
            # TypeError: a literal of another type than its column
            except (ValueError, TypeError) as exc:
                raise ValueError(f"where {self.where!r}: {exc}") from None
        if self.routing is not None:
            field = _find(schema, self.routing, "routing")
            if not isinstance(field.field_type, PrimitiveType):
                raise ValueError(
                    f"routing column {self.routing!r} has type {field.field_type}; it must "
                    "be a primitive type"
                )
            try:
                self.project(schema).find_field(self.routing)
            except ValueError:
                # carryover removal compares documents: a routing value
                # outside them would change unseen
                raise ValueError(
                    f"routing column {self.routing!r} must be one of the index's columns"
                ) from None
        if not self.project(schema).fields:
            raise ValueError("the projection leaves no column")


def _find(schema: Schema, path: str, key: str) -> NestedField:
    try:
        return schema.find_field(path)
    except ValueError:
        columns = ", ".join(schema.column_names)
        raise ValueError(
            f"{key}: {path!r} is not a column of the current schema (columns: {columns})"
        ) from None


def _has(schema: Schema, path: str) -> bool:
    try:
        schema.find_field(path)
    except ValueError:
        return False
    return True


def _value_at(document: dict[str, Any], path: list[str]) -> Any:
    value: Any = document
    for part in path:
        value = value.get(part) if isinstance(value, dict) else None
    return value


def _ids_within(field: NestedField) -> set[int]:
    """The field's id and those of every field inside it."""
    return {field.field_id, *index_by_id(field.field_type)}


class DocumentMapper:
    """Builds documents, their ids and their routing for one schema and one index's shape."""

    def __init__(
        self, schema: Schema, identifier_columns: tuple[str, ...], shape: Shape | None = None
    ) -> None:
        shape = shape or Shape()
        projected = shape.project(schema)
        self._to_document = converter_for(projected.as_struct())
        # A row of exactly the projected schema's columns is copied and only its columns that need
        # it converted: the same document as `_to_document`'s, at a third of its cost.
        self._columns = {f.name for f in projected.fields}
        converters = [(f.name, converter_for(f.field_type)) for f in projected.fields]
        self._converted = [
            (name, convert) for name, convert in converters if convert is not _identity
        ]
        self._identifier_paths = [name.split(".") for name in identifier_columns]
        self._identifier_columns = identifier_columns
        # The one top-level identifier column of most tables, read without the loop over paths.
        self._single_column = (
            identifier_columns[0]
            if len(identifier_columns) == 1 and "." not in identifier_columns[0]
            else None
        )
        # An id made of columns the document does not hold comes from the row instead.
        outside = [name for name in identifier_columns if not _has(projected, name)]
        self._to_key = (
            converter_for(schema.select(*identifier_columns).as_struct()) if outside else None
        )

    def document(self, row: dict[str, Any]) -> dict[str, Any]:
        """The columns of the index's shape, mapped to JSON (a new dict; `row` is left as it is)."""
        if row.keys() != self._columns:
            document: dict[str, Any] = self._to_document(row)
            return document
        document = dict(row)
        for name, convert in self._converted:
            value = document[name]
            if value is not None:
                document[name] = convert(value)
        return document

    def key_fields(self, row: dict[str, Any], document: dict[str, Any]) -> dict[str, Any]:
        """What `document_id` reads for this row.

        That is the document, unless it lacks identifier columns.
        """
        if self._to_key is None:
            return document
        fields: dict[str, Any] = self._to_key(row)
        return fields

    def document_id(self, document: dict[str, Any]) -> str:
        """The `_id`: the identifier value as text, or for several columns a JSON array of texts.

        Text of a value: strings as they are, integers in decimal, booleans `true`/`false`.
        Every other type is as in the document: ISO dates and times, decimal strings, canonical
        UUIDs, base64. The same value gives the same `_id` whatever its integer width, so
        widening int to long keeps ids. BadIdentifier for a null identifier value, and for an
        `_id` OpenSearch refuses (`refused_id`).
        """
        if self._single_column is not None:
            value = document.get(self._single_column)
            if value is None:
                raise BadIdentifier(f"identifier column {self._single_column!r} is null")
            return _checked(_id_text(value), self._identifier_columns)
        texts = []
        for name, path in zip(self._identifier_columns, self._identifier_paths, strict=True):
            # top-level: most keys
            value = document.get(name) if len(path) == 1 else _value_at(document, path)
            if value is None:
                raise BadIdentifier(f"identifier column {name!r} is null")
            texts.append(_id_text(value))
        if len(texts) == 1:
            return _checked(texts[0], self._identifier_columns)
        doc_id = json.dumps(texts, separators=(",", ":"), ensure_ascii=False)
        return _checked(doc_id, self._identifier_columns)


def _checked(doc_id: str, columns: tuple[str, ...]) -> str:
    """`doc_id`, or BadIdentifier when OpenSearch would refuse it (`refused_id`)."""
    if not refused_id(doc_id):
        return doc_id
    named = ", ".join(columns)
    if not doc_id:
        raise BadIdentifier(f"the `_id` is empty (identifier columns {named})")
    cause = f"the `_id` is over OpenSearch's {MAX_ID_BYTES} bytes (identifier columns {named})"
    raise BadIdentifier(cause, f"{len(doc_id.encode())} bytes, {doc_id[:40]!r}…")


def _id_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


# One encoder for every document: json.dumps with options builds a new
# encoder per call, a third of its time.
_CANONICAL = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
)


def encode_document(document: dict[str, Any]) -> str:
    """Canonical JSON: equal documents give equal text, which carryover removal relies on."""
    return _CANONICAL.encode(document)
