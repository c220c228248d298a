"""The Spark writer fixture: Iceberg's Spark runtime writes into the test's own SQLite catalog,
and pyiceberg (what icecdc reads with) sees the same tables, snapshots and delete files."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.manifest import DataFileContent, FileFormat, ManifestEntryStatus
from pyiceberg.table import Table

from tests.support.pipeline import Pipeline
from tests.support.spark_sql import SparkSql, write_equality_deletes

pytestmark = pytest.mark.drawn_destination  # the pipeline writes to a domain or a Serverless collection

MOR = "'write.delete.mode'='merge-on-read', 'write.update.mode'='merge-on-read', 'write.merge.mode'='merge-on-read'"


def pyiceberg_catalog(workdir: Path) -> SqlCatalog:
    # The same catalog Pipeline.__post_init__ opens, without needing an OpenSearch for it.
    return SqlCatalog("lake", uri=f"sqlite:///{workdir / 'catalog.db'}", warehouse=(workdir / "warehouse").as_uri())


def added_files(table: Table) -> list[tuple[str, list[tuple[DataFileContent, FileFormat]]]]:
    """Per snapshot, oldest first: its operation and the (content, format) of files it added."""
    result = []
    for snapshot in table.snapshots():
        added = [
            (entry.data_file.content, entry.data_file.file_format)
            for manifest in snapshot.manifests(table.io)
            for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=False)
            if entry.snapshot_id == snapshot.snapshot_id and entry.status == ManifestEntryStatus.ADDED
        ]
        assert snapshot.summary is not None
        result.append((snapshot.summary.operation.value, added))
    return result


def spark_rows(ss: SparkSql, table: str) -> list[tuple[Any, ...]]:
    return [tuple(r) for r in ss.sql(f"SELECT * FROM {ss.name(table)} ORDER BY id").collect()]


@pytest.mark.parametrize("format_version", [2, 3])
def test_merge_on_read_writes_delete_files_pyiceberg_sees(spark_sql: SparkSql, tmp_path: Path, format_version: int) -> None:
    t = spark_sql.name("db.mor")
    spark_sql.sql(
        f"CREATE TABLE {t} (id bigint, v string) USING iceberg TBLPROPERTIES ('format-version'='{format_version}', {MOR})"
    )
    spark_sql.sql(f"INSERT INTO {t} VALUES (1, 'a'), (2, 'b'), (3, 'c'), (4, 'd')")
    spark_sql.sql(f"UPDATE {t} SET v = 'bb' WHERE id = 2")
    spark_sql.sql(f"DELETE FROM {t} WHERE id = 3")
    spark_sql.sql(
        f"MERGE INTO {t} t USING (SELECT 1 AS id, 'aa' AS v UNION ALL SELECT 5, 'e') s ON t.id = s.id "
        "WHEN MATCHED THEN UPDATE SET v = s.v WHEN NOT MATCHED THEN INSERT *"
    )
    expected = [(1, "aa"), (2, "bb"), (4, "d"), (5, "e")]
    assert spark_rows(spark_sql, "db.mor") == expected

    table = pyiceberg_catalog(tmp_path).load_table("db.mor")
    assert table.metadata.format_version == format_version
    # v2 writes position-delete Parquet files; v3 writes deletion vectors in Puffin files.
    delete_format = FileFormat.PARQUET if format_version == 2 else FileFormat.PUFFIN
    snapshots = added_files(table)
    assert [op for op, _ in snapshots] == ["append", "overwrite", "delete", "overwrite"]
    for op, files in snapshots[1:]:
        assert (DataFileContent.POSITION_DELETES, delete_format) in files, (op, files)
    assert sorted(tuple(r.values()) for r in table.scan().to_arrow().to_pylist()) == expected

    # Compaction: a `replace` snapshot that also drops the delete files it applied.
    spark_sql.sql(f"CALL {spark_sql.catalog}.system.rewrite_data_files(table => 'db.mor', options => map('rewrite-all', 'true'))")
    table = pyiceberg_catalog(tmp_path).load_table("db.mor")
    assert table.current_snapshot() is not None and table.current_snapshot().summary.operation.value == "replace"  # type: ignore[union-attr]
    assert sorted(tuple(r.values()) for r in table.scan().to_arrow().to_pylist()) == expected
    assert spark_rows(spark_sql, "db.mor") == expected


def test_equality_deletes_through_iceberg_java_writer(spark_sql: SparkSql, tmp_path: Path) -> None:
    t = spark_sql.name("db.eq")
    spark_sql.sql(
        f"CREATE TABLE {t} (id bigint, part string, v int) USING iceberg PARTITIONED BY (part) TBLPROPERTIES ('format-version'='2', {MOR})"
    )
    spark_sql.sql(f"INSERT INTO {t} VALUES (1, 'x', 10), (2, 'x', 20), (3, 'y', 30), (4, 'y', 40)")
    # Flink's upsert deletes by key: id plus the partition column, one file per partition.
    deletes = write_equality_deletes(spark_sql, "db.eq", [{"id": 2, "part": "x"}, {"id": 3, "part": "y"}, {"id": 4, "part": "x"}])
    assert len(deletes) == 2
    assert spark_rows(spark_sql, "db.eq") == [(1, "x", 10), (4, "y", 40)]  # (4, 'x') matched no row

    table = pyiceberg_catalog(tmp_path).load_table("db.eq")
    snapshot = table.current_snapshot()
    # A RowDelta that only adds deletes is a `delete` snapshot (Flink's upserts, adding data too, are `overwrite`).
    assert snapshot is not None and snapshot.summary is not None and snapshot.summary.operation.value == "delete"
    entries = [
        e for m in snapshot.manifests(table.io) for e in m.fetch_manifest_entry(table.io) if e.snapshot_id == snapshot.snapshot_id
    ]
    field_ids = sorted(table.schema().find_field(c).field_id for c in ("id", "part"))
    assert sorted(e.data_file.partition[0] for e in entries) == ["x", "y"]
    for entry in entries:
        assert entry.data_file.content == DataFileContent.EQUALITY_DELETES
        assert sorted(entry.data_file.equality_ids or []) == field_ids
        assert entry.sequence_number == snapshot.sequence_number

    # An upsert as Flink writes it: delete by key and the new row, one commit; the new row has the
    # delete's sequence number, so the delete does not apply to it.
    upsert = write_equality_deletes(spark_sql, "db.eq", [{"id": 1, "part": "x"}], inserts=[{"id": 1, "part": "x", "v": 11}])
    assert len(upsert) == 2
    assert spark_rows(spark_sql, "db.eq") == [(1, "x", 11), (4, "y", 40)]
    table = pyiceberg_catalog(tmp_path).load_table("db.eq")
    assert added_files(table)[-1] == (
        "overwrite",
        [(DataFileContent.DATA, FileFormat.PARQUET), (DataFileContent.EQUALITY_DELETES, FileFormat.PARQUET)],
    )


def test_spark_table_in_pipeline_catalog_syncs(spark_sql: SparkSql, pipeline: Pipeline) -> None:
    """Pipeline's catalog and the Spark catalog are one: a copy-on-write table written by Spark
    SQL (update, delete) syncs, and the index equals the table."""
    t = spark_sql.name("db.cow")
    spark_sql.sql(f"CREATE TABLE {t} (id bigint NOT NULL, v string) USING iceberg TBLPROPERTIES ('format-version'='2')")
    spark_sql.sql(f"ALTER TABLE {t} SET IDENTIFIER FIELDS id")
    spark_sql.sql(f"INSERT INTO {t} VALUES (1, 'a'), (2, 'b'), (3, 'c')")
    config = pipeline.config({"name": "db.cow"})
    pipeline.sync(config, "db.cow")
    spark_sql.sql(f"UPDATE {t} SET v = 'bb' WHERE id = 2")
    spark_sql.sql(f"DELETE FROM {t} WHERE id = 3")
    pipeline.sync(config, "db.cow")
    assert pipeline.documents("cow").keys() == {"1", "2"}
