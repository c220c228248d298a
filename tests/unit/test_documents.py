"""icecdc.documents: a row's JSON document, its `_id` and routing, and the shape of an index."""

from __future__ import annotations

import re
import uuid
from decimal import Decimal
from typing import Any

import pytest
from pyiceberg.schema import Schema
from pyiceberg.types import (
    BooleanType,
    DecimalType,
    DoubleType,
    IcebergType,
    ListType,
    LongType,
    MapType,
    NestedField,
    StringType,
    StructType,
    UUIDType,
)

from icecdc.documents import (
    MAX_ID_BYTES,
    BadIdentifier,
    DocumentMapper,
    Shape,
    converter_for,
    encode_document,
    refused_id,
)
from tests.support.all_types import DOCUMENT, ROW, SCHEMA

INFO = StructType(NestedField(4, "name", StringType()), NestedField(5, "note", StringType()))
ROUTED = Schema(
    NestedField(1, "id", LongType(), required=True),
    NestedField(2, "region", StringType()),
    NestedField(3, "info", INFO),
)


# Each column of the all-types row with its document's value, then what that row does not show.
EVERY_TYPE = [(field.field_type, ROW[field.name], DOCUMENT[field.name]) for field in SCHEMA.fields]
EDGES = [
    (BooleanType(), False, False),
    (StringType(), "ü", "ü"),
    (DoubleType(), float("-inf"), None),  # JSON has no NaN nor infinity: OpenSearch refuses them
    (DecimalType(38, 20), Decimal("1E-20"), "0.00000000000000000001"),  # never exponent form
    (DecimalType(12, 3), "10.500", "10.500"),  # written by Arrow already
    (UUIDType(), uuid.UUID(int=1), "00000000-0000-0000-0000-000000000001"),
    (ListType(1, DoubleType()), [1.0, None, float("nan")], [1.0, None, None]),
    (INFO, {"name": "a"}, {"name": "a", "note": None}),
    (
        MapType(1, StringType(), 2, LongType()),
        [("k", 1), ("v", None)],
        [{"key": "k", "value": 1}, {"key": "v", "value": None}],  # pairs: keys of any type
    ),
]


@pytest.mark.parametrize(("field_type", "value", "json"), EVERY_TYPE + EDGES, ids=repr)
def test_each_type_converts_as_the_readme_says(
    field_type: IcebergType,
    value: Any,
    json: Any,
) -> None:
    assert converter_for(field_type)(value) == json


@pytest.mark.parametrize("extra", [False, True], ids=["the projected columns", "another column"])
def test_the_documents_of_every_type(extra: bool) -> None:
    """A row of the projected columns takes the fast path; any other row the whole converter."""
    mapper = DocumentMapper(SCHEMA, ("tenant", "n"))
    row = {**ROW, "extra": 1} if extra else dict(ROW)
    assert mapper.document(row) == DOCUMENT
    assert row["d"] != row["d"]  # the row is left as it is: NaN still
    assert mapper.document_id(mapper.document(row)) == '["acme","7"]'


@pytest.mark.parametrize(
    ("identifiers", "fields", "doc_id"),
    [
        (("n",), {"n": 42}, "42"),
        (("tenant", "n"), {"tenant": 'a"|b', "n": 1}, '["a\\"|b","1"]'),  # no separator can collide
        (("point.label",), {"point": {"label": "p"}}, "p"),  # a struct's field
        (("flag",), {"flag": False}, "false"),
        (("big",), {"big": 2**40}, "1099511627776"),  # the same text whatever the integer width
        (("day",), {"day": "2026-11-21"}, "2026-11-21"),  # as in the document
        (("tenant",), {"tenant": "é" * (MAX_ID_BYTES // 2)}, "é" * (MAX_ID_BYTES // 2)),
    ],
)
def test_document_ids(identifiers: tuple[str, ...], fields: dict[str, Any], doc_id: str) -> None:
    assert DocumentMapper(SCHEMA, identifiers).document_id(fields) == doc_id


@pytest.mark.parametrize(
    ("identifiers", "fields", "cause"),
    [
        (("n",), {"n": None}, "identifier column 'n' is null"),
        (("tenant", "n"), {"tenant": "a"}, "identifier column 'n' is null"),
        (("point.label",), {"point": None}, "identifier column 'point.label' is null"),
        (("tenant",), {"tenant": ""}, "the `_id` is empty (identifier columns tenant)"),
        (("tenant",), {"tenant": "é" * 257}, "the `_id` is over OpenSearch's 512 bytes"),
    ],
)
def test_an_identifier_opensearch_cannot_take_is_the_rows_fault(
    identifiers: tuple[str, ...], fields: dict[str, Any], cause: str
) -> None:
    with pytest.raises(BadIdentifier, match=re.escape(cause)):
        DocumentMapper(SCHEMA, identifiers).document_id(fields)


@pytest.mark.parametrize(
    ("doc_id", "refused"),
    [
        ("", True),
        ("a", False),
        ("a" * 512, False),
        ("a" * 513, True),
        ("é" * 256, False),
        ("é" * 257, True),
    ],
    ids=["empty", "one byte", "512 bytes", "513 bytes", "512 bytes of 256 characters", "514 bytes"],
)
def test_refused_ids(doc_id: str, refused: bool) -> None:
    assert refused_id(doc_id) is refused


def test_equal_documents_encode_as_equal_text() -> None:
    """Carryover removal compares documents as text: key order must not matter."""
    one, other = {"b": 1, "a": {"y": "ü", "x": None}}, {"a": {"x": None, "y": "ü"}, "b": 1}
    assert encode_document(one) == encode_document(other) == '{"a":{"x":null,"y":"ü"},"b":1}'


@pytest.mark.parametrize(
    ("shape", "message"),
    [
        (
            Shape(columns=("id", "info.nme")),
            "columns: 'info.nme' is not a column of the current schema",
        ),
        (Shape(exclude_columns=("regoin",)), "exclude_columns: 'regoin' is not a column"),
        (
            Shape(where="regoin = 'eu'"),
            "where \"regoin = 'eu'\": Could not find field with name regoin",
        ),
        (Shape(where="region > 3"), "where 'region > 3'"),
        (Shape(routing="info"), "routing column 'info' has type struct"),
        (
            Shape(columns=("id",), routing="region"),
            "routing column 'region' must be one of the index's columns",
        ),
        (Shape(exclude_columns=("id", "region", "info")), "the projection leaves no column"),
    ],
    ids=repr,
)
def test_a_shape_that_does_not_fit_the_schema_names_the_key_and_the_column(
    shape: Shape,
    message: str,
) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        shape.check(ROUTED)


def test_a_shape_that_fits() -> None:
    shape = Shape(exclude_columns=("info.note",), where="info.name = 'a'", routing="region")
    shape.check(ROUTED)
    assert [f.name for f in shape.project(ROUTED).fields] == ["id", "region", "info"]
    mapper = DocumentMapper(ROUTED, ("id",), Shape(columns=("info.name",)))
    row = {"id": 7, "region": "eu", "info": {"name": "a", "note": "b"}}
    document = mapper.document(row)
    assert document == {"info": {"name": "a"}}
    # the id of a column the document lacks
    assert mapper.document_id(mapper.key_fields(row, document)) == "7"
    assert shape.routing_of(row) == "eu" and Shape().routing_of(row) is None


@pytest.mark.parametrize(
    ("shape", "fingerprint"),
    [
        (Shape(), ""),  # the whole table: what generations made before shapes record
        (Shape(columns=("id",)), '{"columns":["id"]}'),
        (
            Shape(exclude_columns=("info.note",), where="info.name = 'a'", routing="region"),
            '{"exclude_columns":["info.note"],"routing":"region","where":"info.name = \'a\'"}',
        ),
    ],
    ids=repr,
)
def test_a_shape_records_itself_as_its_fingerprint(shape: Shape, fingerprint: str) -> None:
    assert shape.fingerprint == fingerprint


@pytest.mark.parametrize(
    ("routing", "document", "value"),
    [
        (None, {"region": "eu"}, None),  # OpenSearch routes by `_id`
        ("region", {"region": "eu"}, "eu"),
        ("region", {"region": None}, None),
        ("id", {"id": 7}, "7"),  # text, as an `_id`'s
        ("info.name", {"info": {"name": "a"}}, "a"),
        ("info.name", {"info": None}, None),
    ],
)
def test_a_documents_routing_value(
    routing: str | None,
    document: dict[str, Any],
    value: str | None,
) -> None:
    assert Shape(routing=routing).routing_of(document) == value
