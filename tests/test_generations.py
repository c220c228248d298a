"""Every index is an alias over a generation (`orders` → `orders-<n>`): a reset builds the next
generation while searches keep reading the current one, and swaps the alias atomically when its
export is complete; a rebuild stopped halfway resumes into the same generation; an index made by an
icecdc before generations keeps serving until the next rebuild replaces it; a generation deleted
behind icecdc's back is rebuilt."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pyarrow as pa
import pytest
from pyiceberg.schema import Schema
from pyiceberg.types import IntegerType, LongType, NestedField

from icecdc.config import Config, parse_config
from icecdc.destination.index import IndexAlias, create_index, index_spec
from icecdc.model import NO_SNAPSHOT, Checkpoint
from tests.support.pipeline import Pipeline
from tests.support.tables import orders, rows

pytestmark = pytest.mark.drawn_destination  # the pipeline writes to a domain or a Serverless collection

NAME = "db.orders"
INDEX = "orders"


def capped(pipeline: Pipeline) -> Config:
    """One file a pass: an export of several files spans several passes."""
    return parse_config({**pipeline.config_dict([{"name": NAME}]), "batch": {"max_files": 1}})


def aliased(pipeline: Pipeline) -> list[str]:
    """The indices the alias `orders` names."""
    return sorted(pipeline.client.indices.get_alias(name=INDEX))


def indices(pipeline: Pipeline) -> list[str]:
    return sorted(pipeline.client.indices.get_settings(index=f"{INDEX}*"))


def settings(pipeline: Pipeline, index: str) -> dict[str, Any]:
    found: dict[str, Any] = pipeline.client.indices.get_settings(index=index, flat_settings=True)[index]["settings"]
    return {k: found.get(f"index.{k}") for k in ("refresh_interval", "number_of_replicas")}


def uuid_of(pipeline: Pipeline, index: str) -> str:
    return str(pipeline.client.indices.get_settings(index=index)[index]["settings"]["index"]["uuid"])


@contextmanager
def polled(pipeline: Pipeline, index: str = INDEX) -> Iterator[list[int]]:
    """Count the documents a search of the alias `index` sees, over and over, until the block ends."""
    counts: list[int] = []
    errors: list[BaseException] = []
    stop = threading.Event()

    def poll() -> None:
        while not stop.is_set():
            try:
                counts.append(pipeline.client.count(index=index)["count"])
            except Exception as exc:  # noqa: BLE001 - a failed search is what the test looks for
                errors.append(exc)

    poller = threading.Thread(target=poll)
    poller.start()
    try:
        yield counts
    finally:
        stop.set()
        poller.join()
    assert not errors, errors[:3]
    assert counts


def recreate(pipeline: Pipeline, files: int) -> None:
    """Drop the table and create it again under its name (a RESET resync), with `files` files of 3 rows."""
    pipeline.catalog.drop_table(NAME)
    table = orders(pipeline)
    for f in range(files):
        table.append(rows(*range(100 + 3 * f, 103 + 3 * f)))


@pytest.mark.domain_only  # a build's refresh and replica settings: a collection sets its own
def test_a_reset_builds_the_next_generation_while_searches_read_the_current_one(pipeline: Pipeline) -> None:
    orders(pipeline).append(rows(1, 2, 3, 4, 5))
    config = capped(pipeline)
    pipeline.sync(config, NAME)
    assert aliased(pipeline) == ["orders-1"]
    built_with = settings(pipeline, "orders-1")
    recreate(pipeline, files=3)  # 9 rows, one file a pass

    with polled(pipeline) as counts:
        first = pipeline.one_pass(config, NAME)
        assert first.partial
        # the rebuild writes into generation 2, with no refreshes and no replicas; searches read generation 1
        assert aliased(pipeline) == ["orders-1"] and indices(pipeline) == ["orders-1", "orders-2"]
        assert pipeline.client.count(index=INDEX)["count"] == 5
        assert settings(pipeline, "orders-2") == {"refresh_interval": "-1", "number_of_replicas": "0"}
        assert pipeline.one_pass(config, NAME).partial
        assert aliased(pipeline) == ["orders-1"]
        assert not pipeline.one_pass(config, NAME).partial  # the last file: the export completes, the alias swaps
    assert min(counts) == 5  # never an emptier index: the 5 documents, until the swap to the new 9
    assert pipeline.client.count(index=INDEX)["count"] == 9

    pipeline.assert_index_equals_table(config, NAME)
    assert aliased(pipeline) == ["orders-2"] and indices(pipeline) == ["orders-2"]
    # restored: to the configured values, else to the defaults (OpenSearch's own answer for a setting reset
    # to its default; osmem's is no value, where a created index shows its replicas)
    restored = settings(pipeline, "orders-2")
    assert restored["refresh_interval"] == built_with["refresh_interval"] is None
    assert restored["number_of_replicas"] in (built_with["number_of_replicas"], None)
    assert pipeline.store().get_checkpoint(NAME).index_uuid == uuid_of(pipeline, "orders-2")
    orders_table = pipeline.catalog.load_table(NAME)
    orders_table.append(rows(1))
    pipeline.sync(config, NAME)  # and changes go on into generation 2
    assert aliased(pipeline) == ["orders-2"]


def test_a_rebuild_stopped_halfway_resumes_into_the_same_generation(pipeline: Pipeline) -> None:
    orders(pipeline).append(rows(1, 2))
    config = capped(pipeline)
    pipeline.sync(config, NAME)
    recreate(pipeline, files=3)

    assert pipeline.one_pass(config, NAME).partial  # the run stops here
    building = uuid_of(pipeline, "orders-2")
    result = pipeline.sync(config, NAME)  # the next run: index == table
    assert result.writes.indexed == 6  # the file the stopped run applied is not read again
    assert aliased(pipeline) == ["orders-2"] and indices(pipeline) == ["orders-2"]  # no third generation
    assert uuid_of(pipeline, "orders-2") == building


def test_a_rebuild_stopped_before_its_swap_swaps_on_the_next_run(pipeline: Pipeline, monkeypatch: pytest.MonkeyPatch) -> None:
    orders(pipeline).append(rows(1, 2))
    config = capped(pipeline)
    pipeline.sync(config, NAME)
    recreate(pipeline, files=1)

    def crash(*args: Any) -> None:
        raise SystemExit("killed between the checkpoint and the swap")

    with monkeypatch.context() as patched:
        patched.setattr(IndexAlias, "finish", crash)
        with pytest.raises(SystemExit):
            pipeline.one_pass(config, NAME)
    assert aliased(pipeline) == ["orders-1"]  # the checkpoint names generation 2 already
    result = pipeline.sync(config, NAME)
    assert result.writes.indexed == 0  # the swap is made, nothing exported again
    assert aliased(pipeline) == ["orders-2"] and indices(pipeline) == ["orders-2"]
    assert settings(pipeline, "orders-2")["refresh_interval"] is None


def test_a_pre_alias_index_keeps_serving_until_a_rebuild_replaces_it_by_a_generation(pipeline: Pipeline) -> None:
    table = orders(pipeline)
    config = capped(pipeline)
    # what an icecdc before generations made: a concrete index named like the table's index, with
    # no marker, which the table's checkpoint names (as the first sync of the empty table left it)
    create_index(pipeline.client, INDEX, index_spec(table.schema(), config.table(NAME)))
    schema = table.metadata.current_schema_id
    legacy_uuid, table_uuid = uuid_of(pipeline, INDEX), str(table.metadata.table_uuid)
    made = Checkpoint(table_uuid, NO_SNAPSHOT, 0, schema, ("id",), legacy_uuid)
    pipeline.store().complete(NAME, made, [], replace=True)
    table.append(rows(1, 2, 3, 4))
    pipeline.sync(config, NAME)
    legacy = uuid_of(pipeline, INDEX)
    assert pipeline.store().get_checkpoint(NAME).index_uuid == legacy

    table.append(rows(5))
    result = pipeline.sync(config, NAME)  # the migration costs no export: the index is written as it is
    assert result.writes.indexed == 1
    assert uuid_of(pipeline, INDEX) == legacy and aliased_or_none(pipeline) is None

    recreate(pipeline, files=2)
    with polled(pipeline) as counts:
        assert pipeline.one_pass(config, NAME).partial
        assert indices(pipeline) == ["orders", "orders-1"]  # searches still read the old index
        assert pipeline.client.count(index=INDEX)["count"] == 5
        pipeline.one_pass(config, NAME)
    assert min(counts) == 5  # one request deleted the old index and aliased the new one
    assert pipeline.client.count(index=INDEX)["count"] == 6
    pipeline.assert_index_equals_table(config, NAME)
    assert aliased(pipeline) == ["orders-1"] and indices(pipeline) == ["orders-1"]


def aliased_or_none(pipeline: Pipeline) -> list[str] | None:
    return aliased(pipeline) if pipeline.client.indices.exists_alias(name=INDEX) else None


def test_a_generation_deleted_behind_icecdcs_back_is_rebuilt(pipeline: Pipeline) -> None:
    table = orders(pipeline)
    table.append(rows(1, 2, 3))
    config = pipeline.config({"name": NAME})
    pipeline.sync(config, NAME)
    before = uuid_of(pipeline, "orders-1")

    pipeline.client.indices.delete(index="orders-1")  # the alias goes with it
    table.append(rows(4))
    result = pipeline.sync(config, NAME)  # index == table: every row, not only the new one
    assert result.writes.indexed == 4
    (current,) = aliased(pipeline)
    assert uuid_of(pipeline, current) != before
    assert pipeline.store().get_checkpoint(NAME).index_uuid == uuid_of(pipeline, current)


COUNTS = Schema(NestedField(1, "id", LongType(), required=True), NestedField(2, "n", IntegerType()), identifier_field_ids=[1])


def test_a_type_change_the_mapping_cannot_take_rebuilds_in_a_new_generation(pipeline: Pipeline) -> None:
    table = pipeline.catalog.create_table("db.counts", schema=COUNTS)
    for f in range(3):
        table.append(pa.Table.from_pylist([{"id": i, "n": i} for i in range(3 * f, 3 * f + 3)], schema=COUNTS.as_arrow()))
    config = parse_config({**pipeline.config_dict([{"name": "db.counts"}]), "batch": {"max_files": 1}})
    pipeline.sync(config, "db.counts")
    assert pipeline.client.indices.get_mapping(index="counts")["counts-1"]["mappings"]["properties"]["n"] == {"type": "integer"}

    with table.update_schema() as change:
        change.update_column("n", LongType())  # OpenSearch cannot widen an integer field in place
    table = pipeline.catalog.load_table("db.counts")
    table.append(pa.Table.from_pylist([{"id": 9, "n": 2**40}], schema=table.schema().as_arrow()))
    with polled(pipeline, "counts") as counts:
        pipeline.sync(config, "db.counts")  # a rewrite resync over four passes, into generation 2
    assert min(counts) == 9
    assert sorted(pipeline.client.indices.get_alias(name="counts")) == ["counts-2"]
    assert not pipeline.client.indices.exists(index="counts-1")
    assert pipeline.client.indices.get_mapping(index="counts")["counts-2"]["mappings"]["properties"]["n"] == {"type": "long"}
    assert pipeline.client.count(index="counts")["count"] == 10


def test_a_column_rename_rewrites_every_document_while_searches_see_them_all(pipeline: Pipeline) -> None:
    table = orders(pipeline)
    for f in range(3):
        table.append(rows(*range(3 * f, 3 * f + 3)))
    config = capped(pipeline)
    pipeline.sync(config, NAME)
    with table.update_schema() as change:
        change.rename_column("status", "state")  # a compatible change: the new name is added to the mapping

    with polled(pipeline) as counts:
        pipeline.sync(config, NAME)  # a rewrite resync over three passes, in place
    assert min(counts) == 9
    documents = pipeline.documents(INDEX)
    assert all('"state":"new"' in d and '"status"' not in d for d in documents.values())
