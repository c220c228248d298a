"""The index's mapping is derived from the Iceberg schema (docs/documents.md), merged with the
table's overrides or replaced by its index template, kept through a reset, and extended when a
schema change adds columns. On osmem over HTTP."""

from __future__ import annotations

import copy
import datetime as dt
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from opensearchpy import helpers
from opensearchpy.exceptions import RequestError
from pyiceberg.schema import Schema
from pyiceberg.types import DecimalType, DoubleType, LongType, NestedField, StructType, TimestampType

from icecdc.config import parse_config
from icecdc.errors import ConfigError, SinkError
from icecdc.sync import sync
from tests.support.all_types import DERIVED, ROW, SCHEMA
from tests.support.pipeline import Pipeline, config_dict
from tests.support.tables import orders, rows

pytestmark = pytest.mark.drawn_destination  # the pipeline writes to a domain or a Serverless collection


def _row(n: int, price: str, ts: dt.datetime) -> dict[str, Any]:
    """tests.support.all_types's row, as row `n`, with this price and this time in every temporal column."""
    tstz = ts.replace(tzinfo=dt.timezone(dt.timedelta(hours=2)))
    return {
        **ROW,
        "n": n,
        "price": Decimal(price),
        "day": ts.date(),
        "at": ts.time(),
        "ts": ts,
        "tstz": tstz,
        "attrs": [("k", n), ("other", 0)],
    }


def _id(n: int) -> str:
    return f'["acme","{n}"]'


def _mapping(pipeline: Pipeline, index: str) -> dict[str, Any]:
    """The index's mapping but icecdc's marker (`_meta.icecdc`: whose generation it is), checked apart."""
    (found,) = pipeline.client.indices.get_mapping(index=index).values()
    mappings: dict[str, Any] = dict(found["mappings"])
    marker = mappings.pop("_meta", {}).get("icecdc", {})
    assert marker.get("index") == index, f"index {index!r} lacks icecdc's marker: {marker}"
    return mappings


def _settings(pipeline: Pipeline, index: str) -> dict[str, Any]:
    (found,) = pipeline.client.indices.get_settings(index=index).values()
    settings: dict[str, Any] = found["settings"]["index"]
    return settings


def _hits(pipeline: Pipeline, index: str, query: dict[str, Any]) -> list[str]:
    pipeline.visible(index)
    found = pipeline.client.search(index=index, body={"query": query, "_source": False, "size": 100})
    return sorted(h["_id"] for h in found["hits"]["hits"])


def test_every_type_gets_the_derived_mapping_and_decimals_and_timestamps_range_and_aggregate(pipeline: Pipeline) -> None:
    table = pipeline.catalog.create_table("db.all_types", schema=SCHEMA)
    table.append(
        pa.Table.from_pylist(
            [
                _row(1, "10.500", dt.datetime(2026, 11, 21, 9, 30, 0, 250)),
                _row(2, "3.250", dt.datetime(2026, 11, 22, 10, 0)),
                _row(3, "99.999", dt.datetime(2026, 12, 1, 0, 0)),
            ],
            schema=table.schema().as_arrow(),
        )
    )
    config = pipeline.config({"name": "db.all_types", "index": "all-types"})
    pipeline.sync(config, "db.all_types")
    assert _mapping(pipeline, "all-types") == DERIVED

    # decimals (strings in the documents) are numbers: ranges and aggregations work on them
    assert _hits(pipeline, "all-types", {"range": {"price": {"gte": 5, "lt": 99.999}}}) == [_id(1)]
    totals = pipeline.client.search(
        index="all-types",
        body={"size": 0, "aggs": {"sum": {"sum": {"field": "price"}}, "max": {"max": {"field": "price"}}}},
    )["aggregations"]
    assert (totals["sum"]["value"], totals["max"]["value"]) == pytest.approx((113.749, 99.999))
    # timestamps are dates: ranges (in the documents' text or OpenSearch's default forms) and date aggregations
    assert _hits(pipeline, "all-types", {"range": {"ts": {"gte": "2026-11-22T00:00:00.000000"}}}) == [_id(2), _id(3)]
    assert _hits(pipeline, "all-types", {"range": {"ts": {"lt": "2026-11-22"}}}) == [_id(1)]
    assert _hits(pipeline, "all-types", {"range": {"tstz": {"lte": "2026-11-22T08:00:00.000000+00:00"}}}) == [_id(1), _id(2)]
    assert _hits(pipeline, "all-types", {"range": {"at": {"gte": "09:00:00"}}}) == [_id(1), _id(2)]
    dates = pipeline.client.search(
        index="all-types",
        body={
            "size": 0,
            "aggs": {
                "first": {"min": {"field": "ts"}},
                "months": {"date_histogram": {"field": "day", "calendar_interval": "month"}},
            },
        },
    )["aggregations"]
    assert dates["first"]["value_as_string"] == "2026-11-21T09:30:00.000000"  # printed as the documents write it (ms precision)
    assert [b["doc_count"] for b in dates["months"]["buckets"]] == [2, 1]
    # a map's pairs are nested: a key and a value match only within one pair
    pair = {"bool": {"must": [{"term": {"attrs.key.keyword": "other"}}, {"term": {"attrs.value": 1}}]}}
    assert _hits(pipeline, "all-types", {"nested": {"path": "attrs", "query": pair}}) == []

    # the documents' text matches each date field's first format alone, exactly (the others are for queries)
    exact = copy.deepcopy(DERIVED)
    for field in exact["properties"].values():
        if field.get("type") == "date":
            field["format"] = field["format"].split("||")[0]
    pipeline.client.indices.create(index="exact-formats", body={"mappings": exact})
    sources = pipeline.client.search(index="all-types", body={"size": 100})["hits"]["hits"]
    actions = [{"_index": "exact-formats", "_id": h["_id"], "_source": h["_source"]} for h in sources]
    assert helpers.bulk(pipeline.client, actions, raise_on_error=True) == (3, [])


def test_a_field_not_in_the_schema_is_refused_unless_configured(pipeline: Pipeline) -> None:
    orders(pipeline).append(rows(1))
    pipeline.sync(pipeline.config({"name": "db.orders"}), "db.orders")
    with pytest.raises(RequestError) as refused:
        pipeline.client.index(index="orders", id="2", body={"id": 2, "surprise": "x"})
    assert refused.value.error == "strict_dynamic_mapping_exception"

    loose = pipeline.catalog.create_table("db.loose", schema=SCHEMA)
    loose.append(pa.Table.from_pylist([ROW], schema=loose.schema().as_arrow()))
    pipeline.sync(pipeline.config({"name": "db.loose", "mappings": {"dynamic": False}}), "db.loose")
    pipeline.client.index(index="loose", id="2", body={"n": 2, "surprise": "x"})  # kept in _source, not indexed
    assert _mapping(pipeline, "loose")["dynamic"] == "false"


OVERRIDES = {
    "strings": "keyword",
    "mappings": {
        "properties": {
            "status": {"type": "text"},  # a different type: replaces the derived field
            "region": {"fields": {"text": {"type": "text"}}},  # no type: adds to the derived (keyword) field
            "copied": {"type": "keyword"},  # not in the schema: added
        },
        "_source": {"excludes": ["copied"]},
    },
    "settings": {"number_of_shards": 2, "index": {"refresh_interval": "2s"}},
}


@pytest.mark.domain_only  # shards and the refresh interval set: a collection refuses such settings
def test_overrides_are_applied_and_a_reset_recreates_the_index_from_the_configuration(pipeline: Pipeline) -> None:
    orders(pipeline).append(rows(1, 2))
    config = pipeline.config({"name": "db.orders", **OVERRIDES})
    pipeline.sync(config, "db.orders")
    expected = {
        "dynamic": "strict",
        "_source": {"excludes": ["copied"]},
        "properties": {
            "id": {"type": "long"},
            "region": {"type": "keyword", "ignore_above": 8191, "fields": {"text": {"type": "text"}}},
            "status": {"type": "text"},
            "amount": {"type": "double"},
            "copied": {"type": "keyword"},
        },
    }
    assert _mapping(pipeline, "orders") == expected
    assert (_settings(pipeline, "orders")["number_of_shards"], _settings(pipeline, "orders")["refresh_interval"]) == ("2", "2s")
    assert _hits(pipeline, "orders", {"match": {"region.text": "us"}}) == ["1", "2"]
    before = _settings(pipeline, "orders")["uuid"]

    # a dropped and recreated table resets the index: recreated from the configuration, not from the old index
    pipeline.client.indices.put_mapping(index="orders", body={"properties": {"by_hand": {"type": "keyword"}}})
    pipeline.catalog.drop_table("db.orders")
    orders(pipeline).append(rows(3))
    pipeline.sync(config, "db.orders")
    assert _settings(pipeline, "orders")["uuid"] != before
    assert _mapping(pipeline, "orders") == expected
    assert (_settings(pipeline, "orders")["number_of_shards"], _settings(pipeline, "orders")["refresh_interval"]) == ("2", "2s")

    # a changed configuration is what the next reset applies
    changed = pipeline.config(
        {"name": "db.orders", "mappings": {"properties": {"amount": {"type": "scaled_float", "scaling_factor": 100}}}}
    )
    pipeline.catalog.drop_table("db.orders")
    orders(pipeline).append(rows(4))
    pipeline.sync(changed, "db.orders")
    mapping = _mapping(pipeline, "orders")
    assert mapping["properties"]["amount"] == {"type": "scaled_float", "scaling_factor": 100.0}
    assert mapping["properties"]["region"] == {"type": "text", "fields": {"keyword": {"type": "keyword", "ignore_above": 256}}}
    assert _settings(pipeline, "orders")["number_of_shards"] == "1"


TEMPLATE = {
    "index_patterns": ["orders*"],
    "template": {
        "settings": {"number_of_shards": 3},
        "mappings": {
            "dynamic": "strict",
            "properties": {
                "id": {"type": "long"},
                "region": {"type": "keyword"},
                "status": {"type": "keyword"},
                "amount": {"type": "float"},
            },
        },
    },
}


def test_an_index_template_applies_and_must_exist_and_match(pipeline: Pipeline) -> None:
    orders(pipeline).append(rows(1, 2))
    missing = pipeline.config({"name": "db.orders", "index_template": "orders-template"})
    with pytest.raises(SinkError, match="index template 'orders-template' .* does not exist; nothing was written"):
        sync(missing, pipeline.spark, ["db.orders"])
    assert not pipeline.client.indices.exists(index="orders")

    sized = pipeline.capabilities.managed_settings  # a collection refuses a template's shard settings
    template = TEMPLATE if sized else {**TEMPLATE, "template": {"mappings": TEMPLATE["template"]["mappings"]}}
    pipeline.client.indices.put_index_template(name="other", body={**template, "index_patterns": ["logs-*"]})
    elsewhere = pipeline.config({"name": "db.orders", "index_template": "other"})
    with pytest.raises(SinkError, match=r"index template 'other' does not apply to index 'orders-1' \(its patterns: logs-\*\)"):
        sync(elsewhere, pipeline.spark, ["db.orders"])
    assert not pipeline.client.indices.exists(index="orders")

    pipeline.client.indices.put_index_template(name="orders-template", body=template)
    pipeline.sync(missing, "db.orders")
    assert _mapping(pipeline, "orders") == TEMPLATE["template"]["mappings"]
    assert not sized or _settings(pipeline, "orders")["number_of_shards"] == "3"
    pipeline.catalog.load_table("db.orders").append(rows(3))
    pipeline.sync(missing, "db.orders")
    assert _mapping(pipeline, "orders") == TEMPLATE["template"]["mappings"]  # icecdc leaves a template's mapping alone


def test_a_schema_change_adds_the_new_fields_to_the_mapping(pipeline: Pipeline) -> None:
    schema = Schema(
        NestedField(1, "id", LongType(), required=True),
        NestedField(2, "point", StructType(NestedField(3, "x", DoubleType()))),
        identifier_field_ids=[1],
    )
    table = pipeline.catalog.create_table("db.items", schema=schema)
    table.append(pa.Table.from_pylist([{"id": 1, "point": {"x": 1.0}}], schema=schema.as_arrow()))
    config = pipeline.config({"name": "db.items"})
    pipeline.sync(config, "db.items")

    with table.update_schema() as change:
        change.add_column("total", DecimalType(10, 2))
        change.add_column(("point", "y"), DoubleType())
        change.add_column("seen", TimestampType())
    table.append(
        pa.Table.from_pylist(
            [{"id": 2, "point": {"x": 2.0, "y": 0.5}, "total": Decimal("12.50"), "seen": dt.datetime(2026, 1, 2, 3, 4)}],
            schema=table.schema().as_arrow(),
        )
    )
    pipeline.sync(config, "db.items")  # the schema change rewrites every document, with the new fields
    mapping = _mapping(pipeline, "items")
    assert mapping["dynamic"] == "strict"
    assert mapping["properties"]["total"] == {"type": "scaled_float", "scaling_factor": 100.0}
    assert mapping["properties"]["point"] == {"properties": {"x": {"type": "double"}, "y": {"type": "double"}}}
    assert mapping["properties"]["seen"] == DERIVED["properties"]["ts"]
    assert _hits(pipeline, "items", {"range": {"total": {"gt": 10}}}) == ["2"]


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ({"mappings": ["id"]}, r"tables\[0\]\.mappings must be a mapping, got \['id'\]"),
        ({"settings": "shards=2"}, r"tables\[0\]\.settings must be a mapping, got 'shards=2'"),
        ({"mappings": {"properties": ["id"]}}, r"tables\[0\]\.mappings\.properties must be a mapping of field names"),
        ({"mappings": {"properties": {"id": "long"}}}, r"tables\[0\]\.mappings\.properties\.id must be a mapping"),
        ({"strings": "txt"}, r"tables\[0\]\.strings must be 'text' or 'keyword', got 'txt'"),
        (
            {"index_template": "t", "settings": {"number_of_shards": 1}},
            r"tables\[0\]: index_template applies the template's mappings and settings; choose it or",
        ),
    ],
)
def test_overrides_are_validated_before_anything_runs(tmp_path: Path, table: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_config(config_dict(tmp_path, "http://127.0.0.1:9200", [{"name": "db.orders", **table}]))
