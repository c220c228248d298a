"""Merge-on-read tables written by Spark with Iceberg's runtime: position deletes (v2), deletion
vectors (v3) and equality deletes (Iceberg's Java writer, as Flink uses it). After every sync the
index equals the table as Spark reads it — an oracle independent of our pyiceberg reading."""

from __future__ import annotations

import random

import pytest
from pyiceberg.manifest import DataFileContent, FileFormat

from icecdc.documents import DocumentMapper, encode_document
from icecdc.sync import SyncResult, sync
from tests.support.pipeline import ENGINES, Pipeline
from tests.support.spark_sql import SparkSql, write_equality_deletes

# Every test here runs on both engines: the same Spark-written commits, the same oracle.
pytestmark = [pytest.mark.parametrize("engine", ENGINES), pytest.mark.drawn_destination]

TABLE = "db.t"
COLUMNS = "id BIGINT, region STRING, status STRING, amount DOUBLE"


def create(ss: SparkSql, version: int, mode: str = "merge-on-read", partitioned: bool = True) -> None:
    modes = ", ".join(f"'write.{op}.mode'='{mode}'" for op in ("delete", "update", "merge"))
    ss.sql(
        f"CREATE TABLE {ss.name(TABLE)} ({COLUMNS}) USING iceberg {'PARTITIONED BY (region)' if partitioned else ''} "
        f"TBLPROPERTIES ('format-version'='{version}', {modes})"
    )


def insert(ss: SparkSql, *rows: tuple[int, str, str]) -> None:
    values = ", ".join(f"({i}, '{region}', '{status}', {i * 1.5})" for i, region, status in rows)
    ss.sql(f"INSERT INTO {ss.name(TABLE)} VALUES {values}")


def synced(pipeline: Pipeline, ss: SparkSql) -> SyncResult:
    config = pipeline.config({"name": TABLE, "index": "t", "identifier_columns": ["id"]})
    (result,) = sync(config, pipeline.spark, [TABLE])
    assert result.engine in (None, pipeline.engine)  # None: nothing to apply
    table = pipeline.catalog.load_table(TABLE)
    mapper = DocumentMapper(table.schema(), ("id",))
    expected = {
        str(r["id"]): encode_document(mapper.document(r.asDict(recursive=True)))
        for r in ss.sql(f"SELECT * FROM {ss.name(TABLE)}").collect()
    }
    assert pipeline.documents("t") == expected
    return result


def delete_contents(pipeline: Pipeline) -> list[tuple[DataFileContent, FileFormat]]:
    """Content and format of the delete files the current snapshot added."""
    table = pipeline.catalog.load_table(TABLE)
    snapshot = table.current_snapshot()
    return [
        (e.data_file.content, e.data_file.file_format)
        for m in snapshot.manifests(table.io)
        if m.added_snapshot_id == snapshot.snapshot_id
        for e in m.fetch_manifest_entry(table.io)
        if e.data_file.content != DataFileContent.DATA
    ]


@pytest.mark.parametrize(("version", "delete_format"), [(2, FileFormat.PARQUET), (3, FileFormat.PUFFIN)])
def test_position_deletes_and_deletion_vectors(
    pipeline: Pipeline, spark_sql: SparkSql, version: int, delete_format: FileFormat
) -> None:
    create(spark_sql, version)
    insert(spark_sql, (1, "us", "new"), (2, "us", "new"), (3, "us", "new"), (4, "eu", "new"))
    synced(pipeline, spark_sql)

    spark_sql.sql(f"DELETE FROM {spark_sql.name(TABLE)} WHERE id = 2")
    assert delete_contents(pipeline) == [(DataFileContent.POSITION_DELETES, delete_format)]
    result = synced(pipeline, spark_sql)
    assert (result.writes.deleted, result.writes.indexed, result.changes.rows) == (1, 0, 1)

    # a second delete in the same data file: only the newly deleted position counts
    spark_sql.sql(f"DELETE FROM {spark_sql.name(TABLE)} WHERE id = 3")
    result = synced(pipeline, spark_sql)
    assert (result.writes.deleted, result.changes.rows) == (1, 1)

    spark_sql.sql(f"UPDATE {spark_sql.name(TABLE)} SET status = 'paid' WHERE id = 1")
    assert synced(pipeline, spark_sql).writes.indexed == 1
    spark_sql.sql(f"UPDATE {spark_sql.name(TABLE)} SET region = 'eu' WHERE id = 1")  # a partition move, merge-on-read
    result = synced(pipeline, spark_sql)
    assert (result.writes.indexed, result.writes.deleted) == (1, 0)


def test_export_of_a_merge_on_read_table_applies_its_deletes(pipeline: Pipeline, spark_sql: SparkSql) -> None:
    create(spark_sql, 2)
    insert(spark_sql, *[(i, ("us", "eu")[i % 2], "new") for i in range(1, 9)])
    spark_sql.sql(f"DELETE FROM {spark_sql.name(TABLE)} WHERE id IN (1, 2)")
    spark_sql.sql(f"UPDATE {spark_sql.name(TABLE)} SET status = 'paid' WHERE id = 3")
    write_equality_deletes(spark_sql, TABLE, [{"id": 5, "region": "eu"}, {"id": 6, "region": "us"}])
    result = synced(pipeline, spark_sql)
    assert result.writes.indexed == 4


def test_a_capped_export_of_a_table_with_equality_deletes(pipeline: Pipeline, spark_sql: SparkSql) -> None:
    """The pass that ends a capped export reads the earlier passes' keys again, as the files
    the export planned with their deletes; pyiceberg's own scan refuses equality deletes."""
    create(spark_sql, 2)
    insert(spark_sql, *[(i, ("us", "eu")[i % 2], "new") for i in range(1, 5)])
    insert(spark_sql, *[(i, ("us", "eu")[i % 2], "new") for i in range(5, 9)])
    write_equality_deletes(spark_sql, TABLE, [{"id": 5, "region": "eu"}, {"id": 2, "region": "us"}])
    config = pipeline.config({"name": TABLE, "index": "t", "identifier_columns": ["id"]})
    capped = config.model_copy(update={"batch": config.batch.model_copy(update={"max_files": 1})})
    while True:
        (result,) = sync(capped, pipeline.spark, [TABLE])
        if not result.partial:
            break
    assert sorted(pipeline.documents("t"), key=int) == ["1", "3", "4", "6", "7", "8"]


def test_verify_reads_a_shaped_table_with_equality_deletes(pipeline: Pipeline, spark_sql: SparkSql) -> None:
    """pyiceberg's own scan refuses equality deletes: verify reads such a table as a sync does,
    with the index's rows and columns, and still finds what differs."""
    create(spark_sql, 2)
    insert(spark_sql, *[(i, ("us", "eu")[i % 2], "new") for i in range(1, 8)])
    write_equality_deletes(spark_sql, TABLE, [{"id": 5, "region": "eu"}, {"id": 2, "region": "us"}])
    shaped = {"where": "region = 'eu'", "exclude_columns": ["amount"]}
    config = pipeline.config({"name": TABLE, "index": "t", "identifier_columns": ["id"], **shaped})
    sync(config, pipeline.spark, [TABLE])
    assert sorted(pipeline.documents("t"), key=int) == ["1", "3", "7"]
    pipeline.assert_index_equals_table(config, TABLE)

    pipeline.client.delete(index="t", id="3")  # seen once the check makes writes visible
    with pytest.raises(AssertionError, match="missing"):
        pipeline.assert_index_equals_table(config, TABLE)


def test_equality_deletes_on_the_identifier_columns(pipeline: Pipeline, spark_sql: SparkSql) -> None:
    create(spark_sql, 2, partitioned=False)
    insert(spark_sql, (1, "us", "new"), (2, "us", "new"), (3, "eu", "new"))
    synced(pipeline, spark_sql)

    write_equality_deletes(spark_sql, TABLE, [{"id": 2}, {"id": 3}])
    assert delete_contents(pipeline) == [(DataFileContent.EQUALITY_DELETES, FileFormat.PARQUET)]
    result = synced(pipeline, spark_sql)
    assert result.writes.deleted == 2

    # an upsert as Flink writes it: delete the key, insert its new row
    write_equality_deletes(spark_sql, TABLE, [{"id": 1}])
    insert(spark_sql, (1, "eu", "moved"))
    result = synced(pipeline, spark_sql)
    assert result.writes.indexed == 1 and result.writes.deleted == 0

    # later copy-on-write rewrites must not resurrect rows equality deletes removed
    spark_sql.sql(f"ALTER TABLE {spark_sql.name(TABLE)} SET TBLPROPERTIES ('write.delete.mode'='copy-on-write')")
    spark_sql.sql(f"DELETE FROM {spark_sql.name(TABLE)} WHERE status = 'nothing matches' OR id = 1")
    synced(pipeline, spark_sql)


def test_equality_deletes_on_other_columns_are_resolved_against_the_rows(pipeline: Pipeline, spark_sql: SparkSql) -> None:
    create(spark_sql, 2, partitioned=False)
    insert(spark_sql, (1, "us", "new"), (2, "us", "paid"), (3, "eu", "new"))
    synced(pipeline, spark_sql)
    write_equality_deletes(spark_sql, TABLE, [{"status": "new"}])  # not a key: it deletes rows 1 and 3
    result = synced(pipeline, spark_sql)
    assert (result.writes.deleted, result.changes.rows) == (2, 2)


def test_flink_style_upserts_on_a_partitioned_table(pipeline: Pipeline, spark_sql: SparkSql) -> None:
    """Flink's equality fields include the partition columns: (id, region), not the key alone."""
    create(spark_sql, 2)
    insert(spark_sql, (1, "us", "new"), (2, "eu", "new"))
    synced(pipeline, spark_sql)
    write_equality_deletes(
        spark_sql, TABLE, [{"id": 1, "region": "us"}], inserts=[{"id": 1, "region": "us", "status": "paid", "amount": 3.0}]
    )
    write_equality_deletes(spark_sql, TABLE, [{"id": 2, "region": "us"}])  # no such row: deletes nothing
    result = synced(pipeline, spark_sql)
    assert (result.writes.indexed, result.writes.deleted) == (1, 0)


def random_commit(rng: random.Random, ss: SparkSql, next_id: list[int]) -> str:
    name = ss.name(TABLE)
    regions = ("us", "eu", "apac")
    ids = [r["id"] for r in ss.sql(f"SELECT id FROM {name}").collect()]
    kind = rng.choice(["insert", "update", "move", "delete", "merge", "compact", "upsert"] if ids else ["insert"])
    if kind == "insert":
        rows = [(next_id[0] + i, rng.choice(regions), "new") for i in range(rng.randint(1, 4))]
        next_id[0] += len(rows)
        insert(ss, *rows)
    elif kind == "update":
        ss.sql(
            f"UPDATE {name} SET status = '{rng.choice(['paid', 'packed', 'late'])}', amount = amount + 1 WHERE id IN ({', '.join(map(str, rng.sample(ids, min(len(ids), 3))))})"
        )
    elif kind == "move":
        ss.sql(f"UPDATE {name} SET region = '{rng.choice(regions)}' WHERE id = {rng.choice(ids)}")
    elif kind == "delete":
        ss.sql(f"DELETE FROM {name} WHERE id IN ({', '.join(map(str, rng.sample(ids, min(len(ids), 2))))})")
    elif kind == "merge":
        changed, gone = rng.sample(ids, 2) if len(ids) > 1 else (ids[0], -1)  # one source row per target row
        new = next_id[0]
        next_id[0] += 1
        ss.sql(
            f"MERGE INTO {name} t USING (SELECT * FROM VALUES ({changed}, 'eu', 'merged', 1.0, 'u'), ({gone}, 'us', 'x', 0.0, 'd'), "
            f"({new}, 'apac', 'new', 2.0, 'i') AS s(id, region, status, amount, op)) s ON t.id = s.id "
            "WHEN MATCHED AND s.op = 'd' THEN DELETE WHEN MATCHED THEN UPDATE SET t.status = s.status, t.region = s.region "
            "WHEN NOT MATCHED THEN INSERT (id, region, status, amount) VALUES (s.id, s.region, s.status, s.amount)"
        )
    elif kind == "upsert":  # as Flink writes it: an equality delete of the key and its new row, one commit
        key = rng.choice(ids)
        region = ss.sql(f"SELECT region FROM {name} WHERE id = {key}").collect()[0]["region"]
        new_region = rng.choice(regions)
        write_equality_deletes(
            ss,
            TABLE,
            [{"id": key, "region": region}],
            inserts=[{"id": key, "region": new_region, "status": "upserted", "amount": 9.5}],
        )
    else:
        ss.sql(f"CALL lake.system.rewrite_data_files(table => '{TABLE}', options => map('rewrite-all', 'true'))")
    return kind


@pytest.mark.parametrize(
    ("version", "mode", "seed", "most_per_sync"),
    # the last: long runs of copy-on-write commits per sync, which collapse into one change
    [(2, "merge-on-read", 1, 3), (3, "merge-on-read", 2, 3), (2, "copy-on-write", 3, 3), (2, "copy-on-write", 4, 8)],
)
def test_random_spark_commits(
    pipeline: Pipeline, spark_sql: SparkSql, version: int, mode: str, seed: int, most_per_sync: int
) -> None:
    rng = random.Random(seed)
    create(spark_sql, version, mode)
    insert(spark_sql, *[(i, ("us", "eu", "apac")[i % 3], "new") for i in range(1, 13)])
    next_id = [13]
    done = []
    for _ in range(8):
        for _ in range(rng.randint(1, most_per_sync)):
            done.append(random_commit(rng, spark_sql, next_id))
        synced(pipeline, spark_sql)
    assert {"update", "delete"} & set(done), done
