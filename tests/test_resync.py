"""When the index cannot follow the table commit by commit, icecdc rebuilds it instead of skipping
silently: expired snapshots, a dropped and recreated table, a rollback, a schema change, new
identifier columns. And two syncs of one table at once do no harm."""

from __future__ import annotations

import threading
from pathlib import Path

import pyarrow as pa
import pytest
from pyiceberg.expressions import EqualTo
from pyiceberg.manifest import ManifestEntryStatus
from pyiceberg.table import Table
from pyiceberg.types import LongType, StringType

from icecdc.errors import ProcessingError
from icecdc.model import ItemKind, ResyncKind, WorkItem
from icecdc.sync import sync
from icecdc.testing.commits import update
from tests.support.pipeline import ENGINES, Pipeline
from tests.support.tables import orders, rows

# A resync deletes what the table no longer has on the engine of its pass: both engines, every test.
pytestmark = [pytest.mark.parametrize("engine", ENGINES), pytest.mark.drawn_destination]


def test_expired_checkpoint_snapshot_rewrites_and_removes_what_is_gone(pipeline: Pipeline) -> None:
    table = orders(pipeline)
    table.append(rows(1, 2, 3, 4))
    config = pipeline.config({"name": "db.orders"})
    pipeline.sync(config, "db.orders")
    synced = table.current_snapshot().snapshot_id

    table.delete(EqualTo("id", 2))
    update(table, EqualTo("id", 3), lambda r: {**r, "status": "paid"})
    table.append(rows(5))
    table.maintenance.expire_snapshots().by_id(synced).commit()
    assert table.snapshot_by_id(synced) is None

    pipeline.sync(config, "db.orders")  # asserts index == table: 2 is gone, 3 is paid, 5 is there
    assert pipeline.store().pending_items("db.orders") == []
    item_kinds = {i.resync for i in _done_export_items(pipeline)}
    assert ResyncKind.REWRITE in item_kinds
    table.append(rows(6))
    pipeline.sync(config, "db.orders")  # and it goes on commit by commit


def added_file(table: Table) -> Path:
    """The local path of the one data file the table's current snapshot added."""
    snapshot = table.current_snapshot()
    assert snapshot is not None
    (path,) = [
        e.data_file.file_path
        for m in snapshot.manifests(table.io)
        for e in m.fetch_manifest_entry(table.io)
        if e.status == ManifestEntryStatus.ADDED and e.snapshot_id == snapshot.snapshot_id
    ]
    return Path(path.removeprefix("file://"))


def damage(path: Path, how: str) -> None:
    """Make the file corrupt (its pages overwritten, the footer kept) or missing."""
    if how == "missing":
        path.unlink()
        return
    data = bytearray(path.read_bytes())
    data[4:200] = b"\x07" * 196
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("how", ["corrupt", "missing"])
@pytest.mark.parametrize("first", [True, False], ids=["export", "change"])
def test_a_corrupt_or_missing_data_file_names_the_table_and_the_file(pipeline: Pipeline, how: str, first: bool) -> None:
    """The pass fails naming the table, the file and which of the two; nothing is planned or advanced
    for it (no rewrite: one would need the file too); once the file is back the sync goes on."""
    table = orders(pipeline)
    config = pipeline.config({"name": "db.orders"})
    if not first:
        table.append(rows(1, 2))
        pipeline.sync(config, "db.orders")
    table.append(rows(3, 4))
    path = added_file(table)
    intact = path.read_bytes()
    checkpoint = pipeline.store().get_checkpoint("db.orders")
    damage(path, how)

    with pytest.raises(ProcessingError) as failed:
        sync(config, pipeline.spark, ["db.orders"])
    said = str(failed.value)
    assert f"table 'db.orders': data file file://{path} is " in said and "expired" not in said, said
    assert ("is corrupt or unreadable" in said) == (how == "corrupt"), said
    assert ("is missing, though the table's current snapshot lists it" in said) == (how == "missing"), said
    assert "\n" not in said
    assert pipeline.store().get_checkpoint("db.orders") == checkpoint
    assert all(i.resync == ResyncKind.NONE or first for i in pipeline.store().pending_items("db.orders"))

    path.write_bytes(intact)
    pipeline.sync(config, "db.orders")


def _done_export_items(pipeline: Pipeline) -> list[WorkItem]:
    """Every export item the test's SQLite store holds (read from its table: the contract has no listing of done items)."""
    db = pipeline.store()._db
    items = [WorkItem.from_json(body) for (body,) in db.execute("SELECT body FROM work_items").fetchall()]
    return [i for i in items if i.kind == ItemKind.EXPORT]


def test_dropped_and_recreated_table_resets_the_index(pipeline: Pipeline) -> None:
    table = orders(pipeline)
    table.append(rows(1, 2, 3))
    for status in ("a", "b", "c"):
        update(table, EqualTo("id", 1), lambda r, s=status: {**r, "status": s})
    config = pipeline.config({"name": "db.orders"})
    pipeline.sync(config, "db.orders")  # documents now have versions up to 7

    pipeline.catalog.drop_table("db.orders")
    orders(pipeline).append(rows(2, 9))  # the new table's sequence numbers start again at 1
    pipeline.sync(config, "db.orders")
    assert sorted(pipeline.documents("orders")) == ["2", "9"]
    assert ResyncKind.RESET in {i.resync for i in _done_export_items(pipeline)}


def test_rollback_resets_the_index(pipeline: Pipeline) -> None:
    table = orders(pipeline)
    table.append(rows(1, 2))
    config = pipeline.config({"name": "db.orders"})
    pipeline.sync(config, "db.orders")
    good = table.current_snapshot().snapshot_id
    table.delete(EqualTo("id", 1))
    table.append(rows(3))
    pipeline.sync(config, "db.orders")

    table.manage_snapshots().rollback_to_snapshot(good).commit()
    pipeline.sync(config, "db.orders")
    assert sorted(pipeline.documents("orders")) == ["1", "2"]
    table.append(rows(4))
    pipeline.sync(config, "db.orders")


def test_schema_evolution_documents_follow_the_current_schema(pipeline: Pipeline) -> None:
    schema = pa.schema(
        [
            pa.field("id", pa.int64(), nullable=False),
            pa.field("qty", pa.int32()),
            pa.field("colour", pa.string()),
            pa.field("old", pa.string()),
        ]
    )
    table = pipeline.catalog.create_table("db.items", schema=schema)
    table.append(pa.table({"id": [1, 2], "qty": [5, 6], "colour": ["red", "blue"], "old": ["x", "y"]}, schema=schema))
    config = pipeline.config({"name": "db.items", "identifier_columns": ["id"]})
    pipeline.sync(config, "db.items")

    with table.update_schema() as change:
        change.add_column("note", StringType())
        change.rename_column("colour", "color")
        change.delete_column("old")
        change.update_column("qty", LongType())
    pipeline.sync(config, "db.items")  # no new snapshot: the schema change alone rewrites the documents
    assert pipeline.documents("items")["1"] == '{"color":"red","id":1,"note":null,"qty":5}'

    with table.update_schema() as change:
        change.add_column("flag", StringType())
    new_schema = table.schema().as_arrow()
    table.append(pa.Table.from_pylist([{"id": 3, "qty": 1, "color": "green", "note": "n", "flag": "f"}], schema=new_schema))
    pipeline.sync(config, "db.items")
    assert pipeline.documents("items")["2"] == '{"color":"blue","flag":null,"id":2,"note":null,"qty":6}'


def test_new_identifier_columns_reset_the_index(pipeline: Pipeline) -> None:
    table = orders(pipeline)
    table.append(rows(1, 2))
    pipeline.sync(pipeline.config({"name": "db.orders"}), "db.orders")
    by_status = pipeline.config({"name": "db.orders", "identifier_columns": ["id", "status"]})
    pipeline.sync(by_status, "db.orders")
    assert sorted(pipeline.documents("orders")) == ['["1","new"]', '["2","new"]']


def test_two_syncs_of_one_table_at_once(pipeline: Pipeline) -> None:
    table = orders(pipeline)
    table.append(rows(*range(1, 40)))
    config = pipeline.config({"name": "db.orders"})
    pipeline.sync(config, "db.orders")
    for i in range(1, 6):
        update(table, EqualTo("id", i), lambda r: {**r, "status": "paid"})
    results: list = []
    runs = [threading.Thread(target=lambda: results.extend(sync(config, pipeline.spark, ["db.orders"]))) for _ in range(2)]
    for run in runs:
        run.start()
    for run in runs:
        run.join()
    assert len(results) == 2
    pipeline.assert_index_equals_table(config, "db.orders")
    assert sum(r.writes.indexed for r in results) == 5
    # the lease: one run applied the batch while the other waited, then found nothing left to do
    assert min(r.snapshots for r in results) == 0
    assert pipeline.store().get_checkpoint("db.orders").snapshot_id == table.current_snapshot().snapshot_id
