"""`icecdc audit` finds drift at a fraction of verify's cost; `icecdc repair` fixes exactly the
drifted scope, under the table's lease, and a rebuild what cannot be fixed in place."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from icecdc.audit import (
    AuditReport,
    DriftKind,
    RepairScope,
    audit,
    findings_location,
    load_findings,
    parse_partition,
    rebuild_index,
    repair,
    repair_scope,
)
from icecdc.config import Config
from icecdc.destination.index import IndexAlias
from icecdc.errors import OperationError
from icecdc.model import EngineKind
from icecdc.planning import plan_table
from icecdc.state import Lease
from icecdc.sync import sync
from icecdc.testing.commits import update
from tests.support.cli import icecdc
from tests.support.pipeline import ENGINES, Pipeline
from tests.support.spark_sql import SparkSql, write_equality_deletes
from tests.support.tables import orders, rows

pytestmark = pytest.mark.drawn_destination  # the pipeline writes to a domain or a Serverless collection

# In-process: the audit and the repair do not depend on the engine; the rebuild, a sync, runs on both.
in_process = pytest.mark.parametrize("engine", [EngineKind.IN_PROCESS])

US, EU, AP = range(1, 41), range(41, 71), range(71, 81)


def synced_orders(pipeline: Pipeline, partitioned: bool = True) -> Config:
    """80 orders in three regions, one data file each, synced."""
    table = orders(pipeline, partitioned)
    for ids, region in ((US, "us"), (EU, "eu"), (AP, "ap")):
        table.append(rows(*ids, region=region))
    config = pipeline.config({"name": "db.orders"})
    pipeline.sync(config, "db.orders")
    return config


def delete(pipeline: Pipeline, doc_id: str) -> None:
    """Delete a document as a careless writer would, at the version icecdc wrote (a delete with
    OpenSearch's own versioning leaves a tombstone above it: see the foreign test)."""
    pipeline.delete("orders", doc_id, pipeline.store().get_checkpoint("db.orders").sequence_number)


def corrupt(pipeline: Pipeline, doc_id: str, version: int, **changes: Any) -> None:
    """Write a document as a careless writer would, at a version icecdc could have written."""
    document = json.loads(pipeline.documents("orders")[doc_id]) if doc_id in pipeline.documents("orders") else {}
    body = {**document, **changes}
    pipeline.write("orders", doc_id, body, version)


def audited(config: Config, sample: int = 1000) -> AuditReport:
    (report,) = audit(config, ["db.orders"], sample=sample, seed=7)
    return report


@in_process
def test_audit_finds_drift_by_partition_and_id_and_repair_rewrites_only_that_scope(pipeline: Pipeline) -> None:
    config = synced_orders(pipeline)
    version = pipeline.store().get_checkpoint("db.orders").sequence_number
    assert not audited(config).drifted

    # us: 3 and 4 deleted, 900 added, 10 moved to eu in the index; eu: 45 deleted, 50 changed, 901 and 902 added
    for doc_id in ("3", "4", "45"):
        delete(pipeline, doc_id)
    corrupt(pipeline, "7", version, status="lost")
    corrupt(pipeline, "50", version, amount=0.5)
    corrupt(pipeline, "10", version, region="eu")
    for doc_id, region in (("900", "us"), ("901", "eu"), ("902", "eu")):
        corrupt(pipeline, doc_id, version, id=int(doc_id), region=region, status="ghost", amount=1.0)

    before = pipeline.writes_seen("orders")  # after the corruption: what the repair writes moves on from here
    report = audited(config)
    assert report.grouped_by == ("region",) and report.compared == "partitions by region"
    assert (report.partitions, report.rows, report.documents, report.sampled) == (3, 80, 80, 80)
    counted = {(d.kind, d.partition["region"], d.count) for d in report.drift if d.doc_id is None and d.partition}
    assert counted == {(DriftKind.MISSING, "us", 2), (DriftKind.EXTRA, "eu", 2)}
    by_id = {(d.kind, d.doc_id, d.fields) for d in report.drift if d.doc_id is not None}
    assert by_id == {
        (DriftKind.EXTRA, "901", ()),  # eu's index holds more than its rows: its ids less eu's rows
        (DriftKind.EXTRA, "902", ()),
        (DriftKind.EXTRA, "10", ()),  # its row is us's: the index has it in eu, the table does not
        (DriftKind.MISSING, "3", ()),
        (DriftKind.MISSING, "4", ()),
        (DriftKind.MISSING, "45", ()),
        (DriftKind.STALE, "7", ("status",)),
        (DriftKind.STALE, "10", ("region",)),
        (DriftKind.STALE, "50", ("amount",)),
    }
    # the counts came from the manifests; the sample's files were read, each whole once, and eu's again for its ids
    assert (report.cost.table.data_files, report.cost.table.delete_files) == (4, 0)
    # exists, refresh, mapping, aggregation, eu's ids (search, clear scroll), mget; on a collection
    # eu's ids are one page of search_after, with no scroll to clear
    assert report.cost.table.manifests >= 1 and report.cost.requests == (7 if pipeline.versioned else 6)

    # the findings are kept for --from-audit; the repair writes exactly the drifted documents
    kept = load_findings(findings_location(config), "db.orders")
    assert kept.drift == report.drift
    scope = repair_scope(config, "db.orders", from_audit=True)
    assert scope.partitions == ({"region": "eu"}, {"region": "us"}) and set(scope.ids) == {"3", "4", "45", "7", "10", "50"}
    repaired = repair(config, "db.orders", scope)
    assert (repaired.indexed, repaired.deleted, repaired.foreign, repaired.superseded) == (6, 3, {}, 0)
    assert repaired.compared == 73  # us and eu: 70 rows, and the 3 documents added
    pipeline.assert_index_equals_table(config, "db.orders")

    # Seen from the index, not from the repair's own counts: every write bumps a document's
    # _seq_no, also one at the version it holds (external_gte), so an unchanged _seq_no is no write.
    after = pipeline.writes_seen("orders")
    rewritten = {i for i in after if after[i] != before.get(i)}
    assert rewritten == {"3", "4", "45", "7", "10", "50"}  # 900, 901, 902 deleted; the other 71 untouched
    assert set(before) - set(after) == {"900", "901", "902"} and set(after) == {str(i) for i in range(1, 81)}
    if pipeline.versioned:  # at the checkpoint's version; a collection has none
        assert {i: v for i, v in pipeline.versions("orders").items() if i in rewritten} == dict.fromkeys(rewritten, version)
    assert not audited(config).drifted


@in_process
def test_a_missing_row_the_counts_miss_is_repaired_with_its_partition(pipeline: Pipeline) -> None:
    """A document with no row offsets a row with no document in the counts; the sample finds the
    row, and the repair takes in its partition, where the other one is."""
    config = synced_orders(pipeline)
    delete(pipeline, "3")
    corrupt(pipeline, "900", pipeline.store().get_checkpoint("db.orders").sequence_number, id=900, region="us", status="x")
    report = audited(config)
    assert [(d.kind, d.doc_id, d.partition) for d in report.drift] == [(DriftKind.MISSING, "3", {"region": "us"})]
    assert report.scope() == RepairScope(({"region": "us"},), ("3",))
    repaired = repair(config, "db.orders", report.scope())
    assert (repaired.indexed, repaired.deleted) == (1, 1)
    pipeline.assert_index_equals_table(config, "db.orders")


@in_process
def test_extra_documents_are_named_by_id_reading_only_their_partitions_files(pipeline: Pipeline) -> None:
    """Documents the table lacks, added in one partition: named by id and partition, from that
    partition's data file and ids alone; the clean partitions are neither read nor listed."""
    config = synced_orders(pipeline)
    version = pipeline.store().get_checkpoint("db.orders").sequence_number
    for doc_id in ("900", "901", "902"):
        corrupt(pipeline, doc_id, version, id=int(doc_id), region="ap", status="ghost", amount=1.0)
    ap_file = next(t.file for t in pipeline.catalog.load_table("db.orders").scan(row_filter="region == 'ap'").plan_files())

    report = audited(config, sample=0)
    assert [(d.kind, d.partition, d.doc_id, d.count) for d in report.drift] == [
        (DriftKind.EXTRA, {"region": "ap"}, None, 3),
        (DriftKind.EXTRA, {"region": "ap"}, "900", 1),
        (DriftKind.EXTRA, {"region": "ap"}, "901", 1),
        (DriftKind.EXTRA, {"region": "ap"}, "902", 1),
    ]
    assert report.drift[1].describe() == "extra: id '900' (region='ap'): no row in this partition"
    # ap's one data file, whole; us's and eu's none; exists, refresh, mapping, aggregation, ap's ids
    # (search, clear scroll; on a collection one page of search_after, with no scroll to clear)
    assert (report.cost.table.data_files, report.cost.table.data_bytes) == (1, ap_file.file_size_in_bytes)
    assert report.cost.requests == (6 if pipeline.versioned else 5)
    assert AuditReport.from_json(report.to_json()) == report
    assert report.scope() == RepairScope(({"region": "ap"},))  # the ids are the partition's: looked up in it

    capped = audit(config, ["db.orders"], sample=0, max_ids=2)[0]
    assert [d.doc_id for d in capped.drift if d.doc_id] == ["900", "901"]
    assert "1 more extra documents not named by id (at most 2 are: --max-ids)" in capped.notes

    # ap holds 10 rows and 13 documents: above a bound of 20, it is not listed, and says so
    bounded = audit(config, ["db.orders"], sample=0, list_limit=20)[0]
    assert [d.doc_id for d in bounded.drift] == [None] and bounded.cost.table.data_files == 0
    assert any("extra documents in region='ap' not named by id: listing its 10 rows and 13 documents" in n for n in bounded.notes)

    repaired = repair(config, "db.orders", report.scope())
    assert (repaired.indexed, repaired.deleted) == (0, 3)
    assert not audited(config).drifted


@in_process
def test_counts_alone_read_no_data_file_and_a_sample_reads_only_its_files(pipeline: Pipeline) -> None:
    config = synced_orders(pipeline)
    delete(pipeline, "75")

    counts_only = audited(config, sample=0)
    assert [(d.kind, d.partition, d.count) for d in counts_only.drift] == [(DriftKind.MISSING, {"region": "ap"}, 1)]
    assert (counts_only.sampled, counts_only.cost.table.data_files, counts_only.cost.table.data_bytes) == (0, 0, 0)

    small = audited(config, sample=5)
    assert small.sampled == 5 and small.cost.table.data_files == 1  # one file holds the five rows
    assert (
        0
        < small.cost.table.data_bytes
        < sum(t.file.file_size_in_bytes for t in pipeline.catalog.load_table("db.orders").scan().plan_files())
    )


@in_process
def test_a_partition_value_longer_than_its_keyword_field_keeps_is_counted_as_the_index_counts_it(pipeline: Pipeline) -> None:
    table = orders(pipeline)
    table.append(rows(1, 2, region="faraway"))
    table.append(rows(3, region="us"))
    config = pipeline.config(
        {"name": "db.orders", "mappings": {"properties": {"region": {"type": "keyword", "ignore_above": 5}}}}
    )
    pipeline.sync(config, "db.orders")
    report = audited(config, sample=0)
    assert (report.drift, report.partitions, report.rows, report.documents) == ([], 2, 3, 3)


@in_process
def test_an_unpartitioned_table_is_counted_in_total_and_repaired_whole(pipeline: Pipeline) -> None:
    config = synced_orders(pipeline, partitioned=False)
    delete(pipeline, "12")
    report = audited(config, sample=0)
    assert report.compared == "the total" and report.grouped_by == ()
    assert [(d.kind, d.partition, d.count) for d in report.drift] == [(DriftKind.MISSING, {}, 1)]
    corrupt(pipeline, "12", pipeline.store().get_checkpoint("db.orders").sequence_number, id=12, region="us")
    corrupt(pipeline, "903", pipeline.store().get_checkpoint("db.orders").sequence_number, id=903, region="us")
    # the whole table is the one partition: its ids are listed when its counts differ, within the bound
    extra = audited(config, sample=0)
    assert [(d.kind, d.partition, d.doc_id) for d in extra.drift] == [(DriftKind.EXTRA, {}, None), (DriftKind.EXTRA, {}, "903")]
    assert extra.drift[1].describe() == "extra: id '903' (the whole table): no row"
    assert extra.cost.table.data_files == 3
    skipped = audit(config, ["db.orders"], sample=0, list_limit=100)[0]
    assert skipped.cost.table.data_files == 0
    assert any("extra documents in the whole table not named by id" in n and "--list-limit" in n for n in skipped.notes)
    delete(pipeline, "903")
    delete(pipeline, "12")

    scope = report.scope()
    assert scope == RepairScope(whole_table=True)
    repaired = repair(config, "db.orders", scope)
    assert (repaired.compared, repaired.indexed, repaired.deleted) == (80, 1, 0)
    pipeline.assert_index_equals_table(config, "db.orders")


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.domain_only  # another writer's external version and a tombstone: a collection has neither
def test_a_document_another_writer_versioned_is_reported_and_a_rebuild_fixes_it(pipeline: Pipeline) -> None:
    config = synced_orders(pipeline)
    version = pipeline.store().get_checkpoint("db.orders").sequence_number
    pipeline.client.index(index="orders", id="5", body={"id": 5, "status": "foreign"}, version=99, version_type="external")
    pipeline.client.delete(index="orders", id="6")  # OpenSearch's own versioning: a tombstone above the checkpoint's
    pipeline.client.indices.refresh(index="orders")

    report = audited(config)
    assert [(d.kind, d.doc_id, d.version) for d in report.drift if d.doc_id] == [
        (DriftKind.EXTRA, "5", None),  # without a region: the index holds it in the null partition, the table has none
        (DriftKind.FOREIGN_VERSION, "5", 99),
        (DriftKind.MISSING, "6", None),
    ]
    repaired = repair(config, "db.orders", report.scope())
    assert repaired.foreign == {"5": 99} and (repaired.indexed, repaired.superseded) == (0, 1) and not repaired.complete
    assert "--rebuild" in repaired.notes[0] and "tombstone" in repaired.notes[1]
    assert pipeline.versions("orders")["5"] == 99  # never skipped silently, never overwritten in place

    generation = IndexAlias(pipeline.client, "orders").current()
    rebuilt = rebuild_index(config, "db.orders", "a test's foreign document", pipeline.spark)
    assert rebuilt.writes.indexed == 80
    assert IndexAlias(pipeline.client, "orders").current() != generation  # a new generation, swapped in
    pipeline.assert_index_equals_table(config, "db.orders")
    assert set(pipeline.versions("orders").values()) == {version}
    assert not audited(config).drifted


@in_process
def test_repair_by_partition_and_ids_names_bad_input_and_writes_nothing(pipeline: Pipeline) -> None:
    config = synced_orders(pipeline)
    table = pipeline.catalog.load_table("db.orders")
    delete(pipeline, "2")
    delete(pipeline, "72")

    with pytest.raises(OperationError, match=r"'db.orders': no rows can have nowhere='x'"):
        repair(config, "db.orders", RepairScope(({"nowhere": "x"},)))
    with pytest.raises(OperationError, match=r"'db.orders': 'two' is not a document id of column 'id'"):
        repair(config, "db.orders", RepairScope(ids=("2", "two")))
    with pytest.raises(OperationError, match=r"partition 'region': write each column as column=value"):
        parse_partition("region")
    assert "2" not in pipeline.documents("orders")

    by_ids = repair(config, "db.orders", repair_scope(config, "db.orders", ids=["2", "3", "4"]))
    assert (by_ids.compared, by_ids.indexed, by_ids.deleted) == (3, 1, 0)
    by_partition = repair(config, "db.orders", RepairScope((parse_partition("region=ap"),)))
    assert (by_partition.compared, by_partition.indexed) == (10, 1)
    pipeline.assert_index_equals_table(config, "db.orders")

    # work pending: a pass may have written versions above the checkpoint; the repair refuses
    update(table, "id == 1", lambda r: {**r, "status": "paid"})
    plan_table(pipeline.catalog.load_table("db.orders"), config.table("db.orders"), pipeline.store(), ("id",))
    with pytest.raises(OperationError, match=r"'db.orders' has \d+ work items pending: sync first"):
        repair(config, "db.orders", RepairScope(ids=("1",)))


@in_process
def test_a_repair_waits_for_no_sync_and_writes_nothing_while_another_run_holds_the_lease(pipeline: Pipeline) -> None:
    """A sync holds the table's lease while it writes: a repair then would race it (either could
    overwrite the other's documents), so it refuses, having written nothing, and repairs once the
    lease is free."""
    config = synced_orders(pipeline)
    delete(pipeline, "3")
    before = pipeline.writes_seen("orders")
    scope = RepairScope(ids=("3", "4"))
    with Lease(pipeline.store(), "db.orders", config.state.lease_seconds) as running_sync:
        assert running_sync.held
        with pytest.raises(OperationError, match=r"'db.orders': another run holds its lease; repair when it has finished"):
            repair(config, "db.orders", scope)
        assert pipeline.writes_seen("orders") == before
    repaired = repair(config, "db.orders", scope)
    assert (repaired.compared, repaired.indexed) == (2, 1)
    assert {i for i, seen in pipeline.writes_seen("orders").items() if seen != before.get(i)} == {"3"}
    pipeline.assert_index_equals_table(config, "db.orders")


@in_process
def test_audit_and_repair_commands(pipeline: Pipeline, tmp_path: Path) -> None:
    config = synced_orders(pipeline)
    path = tmp_path / "icecdc.yaml"
    path.write_text(yaml.safe_dump(pipeline.config_dict([{"name": "db.orders"}])))
    delete(pipeline, "44")

    found = icecdc("audit", "--config", str(path), "--json", "--seed", "1")
    assert found.returncode == 1, found.stderr
    (report,) = json.loads(found.stdout)
    assert {(d["kind"], d["doc_id"]) for d in report["drift"]} == {("missing", None), ("missing", "44")}

    repaired = icecdc("repair", "--config", str(path), "--table", "db.orders", "--from-audit")
    assert repaired.returncode == 0, repaired.stderr
    assert "wrote 1 document of region='eu'; 1 ids ('44') at version" in repaired.stdout
    assert "1 indexed, 0 deleted" in repaired.stdout
    clean = icecdc("audit", "--config", str(path))
    assert clean.returncode == 0 and "db.orders → orders: no drift" in clean.stdout
    pipeline.assert_index_equals_table(config, "db.orders")


@in_process
@pytest.mark.parametrize(
    ("version", "granularity", "delete_files_read"),
    [
        (2, "file", 1),  # us's position-delete file names its data file: subtracted from the count unread
        (2, "partition", 3),  # us's two partition-scoped position-delete files: read for their positions
        (3, None, 2),  # us's deletion vector: pyiceberg 0.12 drops its referenced file, so it is read
    ],
)
def test_merge_on_read_counts_come_from_metadata_but_for_equality_deletes(
    pipeline: Pipeline, spark_sql: SparkSql, version: int, granularity: str | None, delete_files_read: int
) -> None:
    """Live rows are counted exactly from record counts and delete files; only the data file
    equality deletes apply to is read (with those deletes) to count it."""
    name = spark_sql.name("db.t")
    modes = ", ".join(f"'write.{op}.mode'='merge-on-read'" for op in ("delete", "update", "merge"))
    if granularity is not None:
        modes += f", 'write.delete.granularity'='{granularity}'"
    spark_sql.sql(
        f"CREATE TABLE {name} (id BIGINT, region STRING, status STRING, amount DOUBLE) USING iceberg "
        f"PARTITIONED BY (region) TBLPROPERTIES ('format-version'='{version}', {modes})"
    )
    values = ", ".join(f"({i}, '{'us' if i <= 6 else 'eu'}', 'new', {i}.5)" for i in range(1, 11))
    spark_sql.sql(f"INSERT INTO {name} VALUES {values}")
    spark_sql.sql(f"DELETE FROM {name} WHERE id = 2")
    spark_sql.sql(f"DELETE FROM {name} WHERE id IN (3, 4)")  # a second delete of us's data file
    write_equality_deletes(spark_sql, "db.t", [{"id": 8, "region": "eu"}])
    config = pipeline.config({"name": "db.t", "index": "t", "identifier_columns": ["id"]})
    sync(config, pipeline.spark, ["db.t"])  # pyiceberg's scans, which Pipeline.sync checks with, refuse equality deletes
    live = {str(r["id"]) for r in spark_sql.sql(f"SELECT id FROM {name}").collect()}
    assert set(pipeline.documents("t")) == live == {"1", "5", "6", "7", "9", "10"}

    (report,) = audit(config, ["db.t"], sample=0)
    assert (report.drift, report.rows, report.documents) == ([], 6, 6)
    assert report.cost.table.data_files == 1  # eu's file, which the equality delete applies to, read with it
    assert report.cost.table.delete_files == delete_files_read

    pipeline.delete("t", "5", report.sequence_number)
    (drifted,) = audit(config, ["db.t"], sample=0)
    assert [(d.kind, d.partition, d.count) for d in drifted.drift] == [(DriftKind.MISSING, {"region": "us"}, 1)]


def test_audit_repair_and_replay_refuse_shaped_indexes_by_name() -> None:
    from icecdc.config import TableConfig
    from icecdc.lookup import whole_rows_only

    plain = TableConfig(name="db.t", index="t")
    assert whole_rows_only(plain, "audit") == plain.each_index()[0].config  # its one index
    for shaped in ({"columns": ("id",)}, {"where": "id > 1"}, {"pipeline": "p"}, {"indexes": ({"index": "a"},)}):
        with pytest.raises(OperationError, match=r"table 'db.t': audit compares the index with whole rows"):
            whole_rows_only(TableConfig.model_validate({"name": "db.t", **shaped}), "audit")
