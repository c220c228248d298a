"""Index shaping on Spark-written tables, on both engines: projections, row filters, routing and
ingest pipelines. After every sync the index equals the table as the index's shape holds it (its
columns, its rows, its routing): `Pipeline.sync` asserts it."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from icecdc.audit import rebuild_index
from icecdc.config import parse_config
from icecdc.documents import DocumentMapper, encode_document
from icecdc.errors import IndexStateError, PlanningError
from icecdc.model import EngineKind
from icecdc.sync import SyncResult, sync
from icecdc.verify import index_documents
from tests.support.faults import FaultProxy
from tests.support.pipeline import ENGINES, Pipeline
from tests.support.spark_sql import SparkSql, write_equality_deletes

pytestmark = [pytest.mark.parametrize("engine", ENGINES), pytest.mark.drawn_destination]

TABLE = "db.wide"
COLUMNS = "id BIGINT, region STRING, status STRING, amount DOUBLE, info STRUCT<name: STRING, note: STRING>"


def create(ss: SparkSql, partitioned: bool = True, mode: str = "copy-on-write") -> None:
    modes = ", ".join(f"'write.{op}.mode'='{mode}'" for op in ("delete", "update", "merge"))
    ss.sql(
        f"CREATE TABLE {ss.name(TABLE)} ({COLUMNS}) USING iceberg {'PARTITIONED BY (region)' if partitioned else ''} "
        f"TBLPROPERTIES ('format-version'='2', {modes})"
    )


def insert(ss: SparkSql, ids: range, region: str = "us") -> None:
    values = ", ".join(f"({i}, '{region}', 'new', {i * 1.5}, named_struct('name', 'n{i}', 'note', 'x'))" for i in ids)
    ss.sql(f"INSERT INTO {ss.name(TABLE)} VALUES {values}")


def two_regions(ss: SparkSql, mode: str = "copy-on-write", partitioned: bool = True) -> None:
    """A table (partitioned by region unless told) with ids 0-9 in `us`, 10-19 in `eu`."""
    create(ss, partitioned, mode)
    insert(ss, range(10))
    insert(ss, range(10, 20), region="eu")


def config(of: Pipeline, /, **index: Any) -> Any:
    """The table's config; on a collection, which sizes its indexes itself, without shard settings."""
    if not of.capabilities.managed_settings:
        index = {k: v for k, v in index.items() if k != "settings"}
        if "indexes" in index:
            index["indexes"] = [{k: v for k, v in i.items() if k != "settings"} for i in index["indexes"]]
    return of.config({"name": TABLE, "index": "wide", "identifier_columns": ["id"], **index})


def synced(pipeline: Pipeline, cfg: Any) -> SyncResult:
    result = pipeline.sync(cfg, TABLE)
    assert result.engine in (None, pipeline.engine)
    return result


def test_update_of_an_excluded_column_over_a_whole_file_writes_nothing(pipeline: Pipeline, spark_sql: SparkSql) -> None:
    create(spark_sql, partitioned=False)
    insert(spark_sql, range(40))
    cfg = config(pipeline, columns=["id", "status", "info.name"])
    assert synced(pipeline, cfg).writes.indexed == 40
    mapping = pipeline.client.indices.get_mapping(index="wide")
    (properties,) = [m["mappings"]["properties"] for m in mapping.values()]
    assert set(properties) == {"id", "status", "info"} and set(properties["info"]["properties"]) == {"name"}

    spark_sql.sql(f"UPDATE {spark_sql.name(TABLE)} SET amount = amount + 1, info.note = 'y'")  # rewrites the one file
    result = synced(pipeline, cfg)
    assert result.changes.rows == 80 and result.writes.indexed + result.writes.deleted == 0

    spark_sql.sql(f"UPDATE {spark_sql.name(TABLE)} SET status = 'paid' WHERE id < 5")
    result = synced(pipeline, cfg)
    assert (result.writes.indexed, result.writes.deleted) == (5, 0)


def test_exclude_columns_nested_and_merge_on_read(pipeline: Pipeline, spark_sql: SparkSql) -> None:
    two_regions(spark_sql, mode="merge-on-read")
    cfg = config(pipeline, exclude_columns=["amount", "info.note"])
    synced(pipeline, cfg)
    spark_sql.sql(f"UPDATE {spark_sql.name(TABLE)} SET info.note = 'z', amount = 0 WHERE id % 2 = 0")
    assert synced(pipeline, cfg).writes.indexed == 0  # a position delete and an equal projected row cancel
    spark_sql.sql(f"UPDATE {spark_sql.name(TABLE)} SET info.name = 'renamed' WHERE id < 3")
    spark_sql.sql(f"DELETE FROM {spark_sql.name(TABLE)} WHERE id = 19")
    result = synced(pipeline, cfg)
    assert (result.writes.indexed, result.writes.deleted) == (3, 1)


def test_rows_enter_and_leave_the_filter(pipeline: Pipeline, spark_sql: SparkSql) -> None:
    two_regions(spark_sql)
    cfg = config(pipeline, where="region = 'eu' and amount >= 3")
    result = synced(pipeline, cfg)
    assert (result.writes.indexed, result.files) == (10, 1)  # the us partition is pruned from the export

    spark_sql.sql(f"UPDATE {spark_sql.name(TABLE)} SET region = 'eu' WHERE id IN (1, 5)")  # 1 stays out (amount), 5 enters
    spark_sql.sql(f"UPDATE {spark_sql.name(TABLE)} SET region = 'us' WHERE id = 11")  # leaves
    spark_sql.sql(f"UPDATE {spark_sql.name(TABLE)} SET status = 'paid' WHERE id IN (12, 6)")  # changes inside; outside
    result = synced(pipeline, cfg)
    assert (result.writes.indexed, result.writes.deleted) == (2, 1)


def test_export_reads_only_the_files_the_filter_may_match(pipeline: Pipeline, spark_sql: SparkSql) -> None:
    two_regions(spark_sql)
    insert(spark_sql, range(20, 30), region="ap")
    result = synced(pipeline, config(pipeline, where="region in ('eu', 'ap') and id >= 25"))
    assert result.files == 1  # the eu file's ids are all below 25; the us file is another partition


def test_a_filter_changed_again_while_its_capped_rebuild_is_under_way(pipeline: Pipeline, spark_sql: SparkSql) -> None:
    """Found by the model (tests/test_model.py): a rebuild's export planned for one filter, then
    applied for another. Its files are pruned by the shape each pass writes, and a generation an
    earlier pass built for another shape is not resumed: its applied files were pruned otherwise."""
    two_regions(spark_sql)
    insert(spark_sql, range(20, 30), region="ap")
    synced(pipeline, config(pipeline))

    def capped(**index: Any) -> Any:
        entry = {"name": TABLE, "index": "wide", "identifier_columns": ["id"], **index}
        return parse_config({**pipeline.config_dict([entry]), "batch": {"max_files": 1}})

    assert pipeline.one_pass(capped(where="region = 'eu'"), TABLE).partial  # the ap file, pruned, is applied
    result = synced(pipeline, capped(where="region != 'us'"))  # index == table: the ap rows too
    assert result.writes.indexed == 20  # once each: no generation of the old filter was swapped in first


def test_an_export_of_a_filtered_index_of_a_table_with_equality_deletes(pipeline: Pipeline, spark_sql: SparkSql) -> None:
    """Found by the model (tests/test_model.py): the export planner pruned files with pyiceberg's
    scan planning, which refuses a snapshot with equality deletes, so such a table's filtered
    index could not be exported, nor rebuilt."""
    two_regions(spark_sql, mode="merge-on-read", partitioned=False)
    insert(spark_sql, range(20, 30), region="ap")
    write_equality_deletes(spark_sql, TABLE, [{"id": i} for i in (3, 12, 25)])  # as Flink's upserts write them
    cfg = config(pipeline, where="region in ('eu', 'ap') and id >= 12")
    (result,) = sync(cfg, pipeline.spark, [TABLE])  # not `synced`: its oracle is pyiceberg's scan
    assert result.files == 4  # the eu and ap files, each with the delete file; the us file pruned by its bounds
    rows = [r.asDict(recursive=True) for r in spark_sql.sql(f"SELECT * FROM {spark_sql.name(TABLE)}").collect()]
    mapper = DocumentMapper(pipeline.catalog.load_table(TABLE).schema(), ("id",))
    held = [r for r in rows if r["region"] in ("eu", "ap") and r["id"] >= 12]
    assert index_documents(pipeline.client, "wide") == {
        mapper.document_id(mapper.document(r)): encode_document(mapper.document(r)) for r in held
    }
    assert len(held) == 16  # 13-19 and 20-29 but 25


def test_where_naming_an_unknown_column_is_refused_before_anything_is_written(pipeline: Pipeline, spark_sql: SparkSql) -> None:
    create(spark_sql)
    insert(spark_sql, range(3))
    with pytest.raises(PlanningError, match=r"'db.wide', index 'wide': where \"regoin = 'eu'\": .*regoin"):
        pipeline.sync(config(pipeline, where="regoin = 'eu'"), TABLE)
    assert not pipeline.client.indices.exists(index="wide")


def test_rows_move_between_routing_values(pipeline: Pipeline, spark_sql: SparkSql) -> None:
    two_regions(spark_sql)
    cfg = config(pipeline, routing="region", settings={"number_of_shards": 3})
    synced(pipeline, cfg)
    spark_sql.sql(f"UPDATE {spark_sql.name(TABLE)} SET region = 'eu' WHERE id < 4")
    spark_sql.sql(f"UPDATE {spark_sql.name(TABLE)} SET region = 'ap' WHERE id IN (12, 13)")
    result = synced(pipeline, cfg)
    # each moved row: an index under its new routing value, then a delete under the old one
    assert result.writes.indexed == 6
    spark_sql.sql(f"UPDATE {spark_sql.name(TABLE)} SET region = 'us' WHERE id = 12")
    spark_sql.sql(f"UPDATE {spark_sql.name(TABLE)} SET region = 'eu' WHERE id = 12")
    spark_sql.sql(f"DELETE FROM {spark_sql.name(TABLE)} WHERE id = 13")
    synced(pipeline, cfg)
    for doc_id, region in (("0", "eu"), ("12", "eu"), ("5", "us")):
        assert pipeline.client.get(index="wide", id=doc_id, routing=region)["_routing"] == region


def test_a_rebuild_routes_as_the_writes_do(pipeline: Pipeline, spark_sql: SparkSql) -> None:
    create(spark_sql)
    insert(spark_sql, range(10))
    cfg = config(pipeline, routing="region")
    synced(pipeline, cfg)
    spark_sql.sql(f"ALTER TABLE {spark_sql.name(TABLE)} ADD COLUMN extra STRING")  # a new schema: the index is rewritten
    spark_sql.sql(f"UPDATE {spark_sql.name(TABLE)} SET region = 'eu', extra = 'e' WHERE id < 3")
    spark_sql.sql(f"DELETE FROM {spark_sql.name(TABLE)} WHERE id = 9")
    synced(pipeline, cfg)


@pytest.mark.domain_only  # a write block, and external_gte's order on one shard
def test_rows_moved_to_another_routing_value_after_a_rewrite_a_write_block_held_up(
    pipeline: Pipeline, spark_sql: SparkSql
) -> None:
    """A schema change plans a rewrite of the index from the current snapshot; a write block (a
    disk's flood stage) refuses its pass; rows then move to another routing value. The pass after
    the block writes the export and the move together, with external_gte: on one shard both values
    name one document, and the move's delete under the old value, sent after the index, took it."""
    create(spark_sql)
    insert(spark_sql, range(6))
    cfg = config(pipeline, routing="region")  # one shard: every routing value of a key names one document
    synced(pipeline, cfg)
    spark_sql.sql(f"ALTER TABLE {spark_sql.name(TABLE)} ADD COLUMN extra STRING")
    pipeline.client.indices.put_settings(index="wide", body={"index.blocks.write": True})
    with pytest.raises(IndexStateError, match="does not accept writes"):
        sync(cfg, pipeline.spark, [TABLE])  # the rewrite is planned: its export snapshot is claimed
    spark_sql.sql(f"UPDATE {spark_sql.name(TABLE)} SET region = 'eu', extra = 'e' WHERE id < 3")
    pipeline.client.indices.put_settings(index="wide", body={"index.blocks.write": None})
    result = synced(pipeline, cfg)  # the export of the claimed snapshot, then the update: index == table
    assert result.writes.deleted == 3  # each moved row under its old routing value, before its index


@pytest.fixture
def proxied(tmp_path: Path, fault_proxy: FaultProxy, spark: Any, engine: EngineKind) -> Pipeline:
    """A pipeline whose OpenSearch is the proxy in front of osmem, which stands in for ingest pipelines."""
    return Pipeline(tmp_path, fault_proxy.url, spark, engine)


def test_only_changed_rows_go_through_the_ingest_pipeline(
    proxied: Pipeline, fault_proxy: FaultProxy, spark_sql: SparkSql
) -> None:
    proxied.client.ingest.put_pipeline(id="embed", body={"processors": [{"set": {"field": "embedded", "value": True}}]})
    create(spark_sql, partitioned=False)
    insert(spark_sql, range(30))
    cfg = config(proxied, columns=["id", "status"], pipeline="embed", mappings={"properties": {"embedded": {"type": "boolean"}}})
    synced(proxied, cfg)
    assert sorted(fault_proxy.pipelines.processed["embed"], key=int) == [str(i) for i in range(30)]
    assert all('"embedded":true' in doc for doc in proxied.documents("wide").values())

    fault_proxy.pipelines.processed.clear()
    spark_sql.sql(f"UPDATE {spark_sql.name(TABLE)} SET status = 'paid' WHERE id < 4")  # rewrites the file: 30 rows
    spark_sql.sql(f"UPDATE {spark_sql.name(TABLE)} SET amount = 0")  # no column the index holds
    spark_sql.sql(f"DELETE FROM {spark_sql.name(TABLE)} WHERE id = 29")
    result = synced(proxied, cfg)
    assert sorted(fault_proxy.pipelines.processed["embed"], key=int) == ["0", "1", "2", "3"]
    assert (result.writes.indexed, result.writes.deleted) == (4, 1)


def test_a_missing_pipeline_is_refused_before_anything_is_written(
    proxied: Pipeline, fault_proxy: FaultProxy, spark_sql: SparkSql
) -> None:
    create(spark_sql)
    insert(spark_sql, range(3))
    with pytest.raises(IndexStateError, match="ingest pipeline 'nope' .* does not exist; nothing was written"):
        proxied.sync(config(proxied, pipeline="nope"), TABLE)
    assert not proxied.client.indices.exists(index="wide")


REGIONS = [
    {"index": "wide-us", "where": "region = 'us'", "columns": ["id", "region", "status"]},
    {"index": "wide-eu", "where": "region = 'eu'", "routing": "status", "settings": {"number_of_shards": 2}},
]


def test_a_table_split_into_indexes_by_region(pipeline: Pipeline, spark_sql: SparkSql, caplog: Any) -> None:
    two_regions(spark_sql)
    cfg = config(pipeline, indexes=REGIONS)
    result = synced(pipeline, cfg)
    assert result.writes.indexed == 20
    spark_sql.sql(f"UPDATE {spark_sql.name(TABLE)} SET region = 'eu' WHERE id < 3")  # leave us, enter eu
    spark_sql.sql(f"UPDATE {spark_sql.name(TABLE)} SET status = 'paid' WHERE id IN (5, 15)")  # one in each; 15 moves routing
    spark_sql.sql(f"UPDATE {spark_sql.name(TABLE)} SET amount = 0 WHERE id = 6")  # a column wide-us does not hold
    with caplog.at_level(logging.INFO, logger="icecdc.sync"):
        result = synced(pipeline, cfg)
    # one read for both indexes of the collapsed run: the file before it and the file after it
    assert "applying 3 snapshots, 2 files to 2 indexes in one read" in caplog.text
    # wide-us: 0-2 deleted, 5 indexed; wide-eu: 0-2 and 15 indexed, then 15 deleted under its old routing
    # value (osmem keeps one document per id, and refuses that delete as superseded)
    assert (result.writes.indexed, result.writes.deleted + result.writes.superseded) == (5, 4)
    assert pipeline.store().get_checkpoint(TABLE) is None  # each index keeps its own state
    keys = [t.key for t in cfg.table(TABLE).each_index()]
    assert len({pipeline.store().get_checkpoint(k).snapshot_id for k in keys}) == 1


def test_an_added_index_is_exported_alone_and_a_removed_one_left_as_it_is(pipeline: Pipeline, spark_sql: SparkSql) -> None:
    two_regions(spark_sql)
    synced(pipeline, config(pipeline, indexes=REGIONS[:1]))
    spark_sql.sql(f"UPDATE {spark_sql.name(TABLE)} SET status = 'paid' WHERE id = 1")
    seen = pipeline.writes_seen("wide-us")
    result = synced(pipeline, config(pipeline, indexes=REGIONS))
    assert result.writes.indexed == 11  # the new index's export (10), and the one change of the old one
    assert {i: v for i, v in pipeline.writes_seen("wide-us").items() if i != "1"} == {i: v for i, v in seen.items() if i != "1"}
    before = pipeline.documents("wide-us")
    spark_sql.sql(f"DELETE FROM {spark_sql.name(TABLE)} WHERE id IN (2, 12)")
    result = synced(pipeline, config(pipeline, indexes=REGIONS[1:]))
    assert result.writes.deleted == 1
    assert pipeline.documents("wide-us") == before  # removed from the configuration: left as it was


def test_a_rebuild_of_a_table_of_several_indexes_rebuilds_each(pipeline: Pipeline, spark_sql: SparkSql) -> None:
    two_regions(spark_sql)
    cfg = config(pipeline, indexes=REGIONS)
    synced(pipeline, cfg)
    spark_sql.sql(f"UPDATE {spark_sql.name(TABLE)} SET region = 'eu' WHERE id = 1")
    rebuild_index(cfg, TABLE, "asked for by the test", pipeline.spark)
    pipeline.assert_index_equals_table(cfg, TABLE)
    aliases = pipeline.client.indices.get_alias(name="wide-us,wide-eu")
    assert sorted(aliases) == ["wide-eu-2", "wide-us-2"]


def test_a_changed_shape_rebuilds_the_index_in_a_new_generation(pipeline: Pipeline, spark_sql: SparkSql) -> None:
    two_regions(spark_sql)
    slim = config(pipeline, columns=["id", "status", "amount"])
    synced(pipeline, slim)
    spark_sql.sql(f"UPDATE {spark_sql.name(TABLE)} SET status = 'paid' WHERE id = 3")
    synced(pipeline, slim)
    assert list(pipeline.client.indices.get_alias(name="wide")) == ["wide-1"]  # the same shape: no rebuild
    for reshaped in (config(pipeline, columns=["id", "status"], where="region = 'eu'"), config(pipeline, routing="region")):
        synced(pipeline, reshaped)
    assert list(pipeline.client.indices.get_alias(name="wide")) == ["wide-3"]


def assert_index_equals_spark_rows(pipeline: Pipeline, ss: SparkSql, identifiers: tuple[str, ...]) -> None:
    """The index holds each of Spark's rows once, under its routing value (`region`): pyiceberg
    cannot scan equality deletes, so Spark's rows are the oracle, as in test_merge_on_read."""
    mapper = DocumentMapper(pipeline.catalog.load_table(TABLE).schema(), identifiers)
    rows = [r.asDict(recursive=True) for r in ss.sql(f"SELECT * FROM {ss.name(TABLE)}").collect()]
    expected = {mapper.document_id(mapper.document(r)): (encode_document(mapper.document(r)), r["region"]) for r in rows}
    routings: dict[str, str | None] = {}
    documents = index_documents(pipeline.client, "wide", routings)
    assert {i: (d, routings[i]) for i, d in documents.items()} == expected
    assert pipeline.client.count(index="wide")["count"] == len(expected)  # no second copy of an `_id` on another shard


def test_equality_deletes_of_a_routed_index_whose_key_holds_the_routing(pipeline: Pipeline, spark_sql: SparkSql) -> None:
    two_regions(spark_sql, mode="merge-on-read")
    cfg = config(pipeline, identifier_columns=["id", "region"], routing="region", settings={"number_of_shards": 3})
    sync(cfg, pipeline.spark, [TABLE])
    write_equality_deletes(spark_sql, TABLE, [{"id": 5, "region": "us"}, {"id": 15, "region": "eu"}])
    (result,) = sync(cfg, pipeline.spark, [TABLE])
    assert result.writes.deleted == 2
    assert_index_equals_spark_rows(pipeline, spark_sql, ("id", "region"))
    assert pipeline.client.count(index="wide")["count"] == 18


# Routed by a column outside the key: a delete by key (an equality delete on `id`) does not say
# where its document lives, and an unrouted delete goes to the shard of the `_id`.
ROUTED_OUTSIDE_THE_KEY = {"routing": "region", "settings": {"number_of_shards": 3}}
MOVED = (1, 2, 3, 4, 11, 12)


def row(i: int, region: str, status: str) -> dict[str, Any]:
    return {"id": i, "region": region, "status": status, "amount": i * 1.5, "info": {"name": f"n{i}", "note": "x"}}


def test_equality_deletes_of_an_index_routed_outside_the_key(pipeline: Pipeline, spark_sql: SparkSql) -> None:
    two_regions(spark_sql, mode="merge-on-read", partitioned=False)  # deletes by `id` alone, as Flink's upsert writes
    cfg = config(pipeline, **ROUTED_OUTSIDE_THE_KEY)
    sync(cfg, pipeline.spark, [TABLE])
    write_equality_deletes(spark_sql, TABLE, [{"id": i} for i in (*MOVED, 99)])  # 99: no such row
    (result,) = sync(cfg, pipeline.spark, [TABLE])
    assert result.writes.deleted == len(MOVED)  # each under the routing value it lives under; 99 found nowhere, not sent
    assert_index_equals_spark_rows(pipeline, spark_sql, ("id",))


def test_an_equality_delete_upsert_moving_rows_to_another_routing_value(
    proxied: Pipeline, fault_proxy: FaultProxy, spark_sql: SparkSql
) -> None:
    two_regions(spark_sql, mode="merge-on-read", partitioned=False)
    cfg = config(proxied, **ROUTED_OUTSIDE_THE_KEY)
    sync(cfg, proxied.spark, [TABLE])
    before, searches = len(fault_proxy.bulk_items()), fault_proxy.count("/wide/_search")
    old = {str(i): "us" if i < 10 else "eu" for i in MOVED}
    upserts = [row(i, "ap", "moved") for i in MOVED]
    write_equality_deletes(spark_sql, TABLE, [{"id": i} for i in MOVED], inserts=upserts)
    (result,) = sync(cfg, proxied.spark, [TABLE])
    assert result.writes.indexed == len(MOVED)
    # the routing values are looked up in batches: one search for the keys of a task, not one a key
    assert 1 <= fault_proxy.count("/wide/_search") - searches < len(MOVED)
    assert_index_equals_spark_rows(proxied, spark_sql, ("id",))
    # OpenSearch would keep the old document on its shard; osmem keeps one document per `_id`
    # whatever the shard, so what shows the old copy is gone is the delete sent under its routing.
    moves: dict[str | None, list[tuple[str, str | None]]] = {}
    for item in fault_proxy.bulk_items()[before:]:
        moves.setdefault(item.id, []).append((item.op, item.routing))
    assert moves == {i: [("index", "ap"), ("delete", region)] for i, region in old.items()}


def test_an_export_writes_the_projected_filtered_routed_table_where_it_reads(
    pipeline: Pipeline, spark_sql: SparkSql, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A first sync is an export, written where its rows are read (`Engine.export`, no shuffle of
    documents): into the index go the shape's columns of the rows its `where` holds, each under its
    routing value (`Pipeline.sync` asserts index == table as shaped, routing included)."""
    from icecdc.engines.in_process import InProcessEngine
    from icecdc.engines.spark import SparkEngine

    exported: list[tuple[str, int]] = []
    for engine_class in (InProcessEngine, SparkEngine):
        export = engine_class.export

        def spy(self: Any, reader: Any, tasks: Any, target: Any, export: Any = export) -> Any:
            exported.append((target.index, len(tasks.written)))
            return export(self, reader, tasks, target)

        monkeypatch.setattr(engine_class, "export", spy)
    two_regions(spark_sql)
    insert(spark_sql, range(20, 30), region="ap")
    cfg = config(
        pipeline,
        columns=["id", "region", "info.name"],
        where="id >= 5 and region != 'ap'",
        routing="region",
        settings={"number_of_shards": 3},
    )
    result = synced(pipeline, cfg)
    assert exported and {index for index, _ in exported} == {"wide"}
    assert (result.writes.indexed, result.writes.deleted) == (15, 0)  # ids 5-19: 5-9 in us, 10-19 in eu
    got = pipeline.client.get(index="wide", id="7", routing="us")
    assert (got["_routing"], got["_source"]) == ("us", {"id": 7, "region": "us", "info": {"name": "n7"}})
    assert set(pipeline.documents("wide")) == {str(i) for i in range(5, 20)}
