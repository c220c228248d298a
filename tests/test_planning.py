"""Planning against real tables, and the inputs it must refuse: each refusal names its culprit
and leaves nothing written or advanced."""

from __future__ import annotations

import threading
import tracemalloc
from dataclasses import replace
from pathlib import Path

import pyarrow as pa
import pytest
from pyiceberg.expressions import EqualTo
from pyiceberg.table import Table

from bench.plan_memory import register_files
from icecdc import manifests
from icecdc.catalog import identifier_columns
from icecdc.config import BatchConfig, parse_config
from icecdc.errors import ConfigError, PlanningError, SinkError
from icecdc.manifests import ChangedEntries, LiveFiles
from icecdc.model import ItemKind, WorkItem
from icecdc.planning import export_groups, plan_table
from icecdc.state import SqliteStateStore
from icecdc.status import table_status
from icecdc.sync import sync
from tests.support.faults import FaultProxy
from tests.support.pipeline import Pipeline
from tests.support.tables import SCHEMA, manifests_read, orders, rows

pytestmark = pytest.mark.drawn_destination  # the pipeline writes to a domain or a Serverless collection


def assert_nothing_written(pipeline: Pipeline, name: str, index: str) -> None:
    store = pipeline.store()
    assert store.get_checkpoint(name) is None
    assert store.pending_items(name) == []
    assert not pipeline.client.indices.exists(index=index)


def test_planning_twice_is_a_no_op(pipeline: Pipeline) -> None:
    table = orders(pipeline)
    table.append(rows(1, 2))
    table.append(rows(3))
    table.delete(EqualTo("id", 1))
    config = pipeline.config({"name": "db.orders"}).table("db.orders")
    store = pipeline.store()
    first = plan_table(table, config, store, ("id",))
    again = plan_table(table, config, store, ("id",))
    assert (first.items, first.written) == (1, 1)  # export of the current snapshot: its 2 files in one item
    assert (again.items, again.written) == (0, 0)  # an export whose items are all pending is not listed again
    assert [(i.kind, len(i.added_data_files)) for i in store.pending_items("db.orders")] == [(ItemKind.EXPORT, 2)]


def test_an_export_groups_its_files_in_manifest_order_into_items_no_larger_than_a_pass(
    pipeline: Pipeline, tmp_path: Path
) -> None:
    """Up to 100 files an item (`max_files` fewer): an export of N files costs ~N/100 state writes.
    Cut in manifest order (fixed for a snapshot), streamed: planning never lists every file at once.
    A planner that stopped part way under another `max_files` is gone on with its cut."""
    table = orders(pipeline)
    for i in range(5):
        table.append(rows(i))  # one file each
    config = pipeline.config({"name": "db.orders"}).table("db.orders")
    whole = plan_table(table, config, SqliteStateStore(tmp_path / "whole.db"), ("id",))
    assert whole.items == 1
    cut = SqliteStateStore(tmp_path / "cut.db")
    plan_table(table, config, cut, ("id",), limits=BatchConfig(max_files=2))
    items = cut.pending_items("db.orders")
    paths = manifest_order(table)
    assert paths != sorted(paths)  # newest manifest first: the cut is not the sorted one
    assert [i.added_data_files for i in sorted(items, key=lambda i: i.group)] == [
        tuple(sorted(paths[0:2])),
        tuple(sorted(paths[2:4])),
        (paths[4],),
    ]
    assert {i.groups for i in items} == {3}
    stopped = pipeline.store()
    stopped.put_items([i for i in items if i.group == 2])  # a planner died after its first write
    result = plan_table(table, config, stopped, ("id",), limits=BatchConfig(max_files=3))
    assert (result.items, result.written) == (3, 2)
    assert cut_of(stopped.pending_items("db.orders")) == cut_of(items)


def test_an_export_a_planner_began_cut_by_sorted_paths_goes_on_with_that_cut(pipeline: Pipeline) -> None:
    """Items an earlier version planned (cut from sorted paths) before it stopped part way: the
    rest are cut as they were, so that the items are one cut of the files."""
    table = orders(pipeline)
    for i in range(8):
        table.append(rows(i))
    config = pipeline.config({"name": "db.orders"}).table("db.orders")
    snapshot = table.current_snapshot()
    assert snapshot is not None
    old = [
        replace(i, table_uuid=str(table.metadata.table_uuid))
        for i in plan_items(export_groups(sorted(manifest_order(table)), 2), snapshot.snapshot_id, snapshot.sequence_number)
    ]
    # an item the manifest-order cut would not make (the paths are random: a first item of both
    # cuts can be the same, and the planner could not tell them apart by it)
    in_manifest_order = export_groups(manifest_order(table), 2)
    store = pipeline.store()
    store.put_items([next(i for i in old if i.added_data_files != in_manifest_order[i.group])])
    plan_table(table, config, store, ("id",), limits=BatchConfig(max_files=2))
    assert cut_of(store.pending_items("db.orders")) == cut_of(old)


def test_planning_an_export_reads_each_manifest_once(pipeline: Pipeline, monkeypatch: pytest.MonkeyPatch) -> None:
    """Counting the files and cutting them into items share one read of the manifests, for a first
    planner and for one that goes on with a cut begun under another `max_files`. Before, a first
    planner read every manifest twice, and one going on three times."""
    table = orders(pipeline)
    for i in range(5):
        table.append(rows(i))  # one file and one manifest each
    table = pipeline.catalog.load_table("db.orders")
    config = pipeline.config({"name": "db.orders"}).table("db.orders")
    read = manifests_read(table, monkeypatch)
    store = pipeline.store()
    plan_table(table, config, store, ("id",), limits=BatchConfig(max_files=2))
    assert sorted(read) == sorted(set(read)) and len(read) == 5
    items = store.pending_items("db.orders")
    stopped = SqliteStateStore(pipeline.workdir / "stopped.db")
    stopped.put_items([i for i in items if i.group == 1])  # a planner died after its first write
    read.clear()
    plan_table(table, config, stopped, ("id",), limits=BatchConfig(max_files=3))
    assert sorted(read) == sorted(set(read)) and len(read) == 5
    assert cut_of(stopped.pending_items("db.orders")) == cut_of(items)


def test_the_listed_paths_of_an_export_are_its_files_in_manifest_order_whatever_they_hold(
    pipeline: Pipeline, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`LiveFiles` spills the paths in chunks and reads them back: a newline or a quote in a path,
    a chunk boundary, and two readers at once change nothing."""
    monkeypatch.setattr(manifests, "SPILL_CHUNK", 2)
    table = orders(pipeline, partitioned=False)
    register_files(table, 5, 2, pipeline.workdir.as_uri() + '/odd\nname "quoted"')
    snapshot = table.current_snapshot()
    assert snapshot is not None
    with LiveFiles(table, snapshot) as live:
        first, second = live.paths(), live.paths()
        interleaved = [p for pair in zip(first, second, strict=True) for p in pair]
        assert (live.files, live.largest) == (5, 1000)
    assert interleaved[::2] == interleaved[1::2] == manifest_order(table)
    assert all("\nname" in p for p in interleaved)


def manifest_order(table: Table) -> list[str]:
    """The current snapshot's live data files, in the order of its manifests."""
    snapshot = table.current_snapshot()
    assert snapshot is not None
    return [
        e.data_file.file_path
        for m in snapshot.manifests(table.io)
        for e in m.fetch_manifest_entry(table.io, discard_deleted=True)
    ]


def cut_of(items: list[WorkItem]) -> list[tuple[object, ...]]:
    return sorted((i.key, i.group, i.groups, i.added_data_files) for i in items)


def test_export_groups_continue_the_cut_of_any_planned_item() -> None:
    paths = [f"f{i}" for i in range(7)]
    assert export_groups(paths, 3) == [("f0", "f1", "f2"), ("f3", "f4", "f5"), ("f6",)]
    assert export_groups([], 3) == [()]
    planned = plan_items(export_groups(paths, 2))
    for item in planned:  # whichever item of a cut in 2s is in the store, the rest are cut in 2s
        assert export_groups(paths, 5, [item]) == export_groups(paths, 2)


def plan_items(groups: list[tuple[str, ...]], snapshot_id: int = 1, sequence_number: int = 1) -> list[WorkItem]:
    return [
        WorkItem("db.orders", "u", ItemKind.EXPORT, snapshot_id, sequence_number, g, len(groups), added_data_files=files)
        for g, files in enumerate(groups)
    ]


def test_racing_planners_plan_each_item_once(pipeline: Pipeline) -> None:
    table = orders(pipeline)
    table.append(rows(1))
    config = pipeline.config({"name": "db.orders"})
    sync(config, pipeline.spark, ["db.orders"])
    for i in range(2, 12):
        table.append(rows(i))
    results = []

    def plan() -> None:
        results.append(plan_table(table, config.table("db.orders"), pipeline.store(), ("id",)))

    threads = [threading.Thread(target=plan) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(r.written for r in results) == 10
    assert [i.kind for i in pipeline.store().pending_items("db.orders")] == [ItemKind.CHANGE] * 10


def test_unknown_table(pipeline: Pipeline) -> None:
    config = pipeline.config({"name": "db.missing"})
    with pytest.raises(PlanningError, match="'db.missing' does not exist in catalog 'lake'"):
        sync(config, pipeline.spark)
    assert_nothing_written(pipeline, "db.missing", "missing")


def test_identifier_column_missing_from_schema(pipeline: Pipeline) -> None:
    orders(pipeline).append(rows(1))
    config = pipeline.config({"name": "db.orders", "identifier_columns": ["order_id"]})
    with pytest.raises(PlanningError, match=r"identifier column 'order_id' is not in the current schema \(columns: id, region"):
        sync(config, pipeline.spark)
    assert_nothing_written(pipeline, "db.orders", "orders")


def test_a_bad_table_stops_the_sync_before_any_table_is_written(pipeline: Pipeline) -> None:
    orders(pipeline).append(rows(1))
    config = pipeline.config({"name": "db.orders"}, {"name": "db.missing"})
    with pytest.raises(PlanningError, match="db.missing"):
        sync(config, pipeline.spark)
    assert_nothing_written(pipeline, "db.orders", "orders")


def test_format_v1_tables_are_refused(pipeline: Pipeline) -> None:
    table = pipeline.catalog.create_table("db.orders", schema=SCHEMA, properties={"format-version": "1"})
    table.append(rows(1))
    with pytest.raises(PlanningError, match="'db.orders' is Iceberg format v1"):
        sync(pipeline.config({"name": "db.orders"}), pipeline.spark)
    assert_nothing_written(pipeline, "db.orders", "orders")


def test_without_identifier_columns_appends_work_and_deletes_are_refused(pipeline: Pipeline) -> None:
    schema = pa.schema([("event", pa.string()), ("n", pa.int64())])
    table = pipeline.catalog.create_table("db.events", schema=schema)
    table.append(pa.table({"event": ["a", "b", "a"], "n": [1, 2, 1]}, schema=schema))  # duplicates are fine
    config = pipeline.config({"name": "db.events"})
    pipeline.sync(config, "db.events")
    table.append(pa.table({"event": ["c"], "n": [3]}, schema=schema))
    assert pipeline.sync(config, "db.events").writes.indexed == 1

    checkpoint = pipeline.store().get_checkpoint("db.events")
    table.delete(EqualTo("event", "b"))
    with pytest.raises(
        PlanningError,
        match=rf"snapshot {table.current_snapshot().snapshot_id} removes rows, but the table has no identifier columns",
    ):
        sync(config, pipeline.spark)
    assert pipeline.store().get_checkpoint("db.events") == checkpoint
    assert pipeline.store().pending_items("db.events") == []


def test_status_reports_lag(pipeline: Pipeline) -> None:
    table = orders(pipeline)
    table.append(rows(1))
    config = pipeline.config({"name": "db.orders"})
    store = SqliteStateStore(pipeline.workdir / "state.db")
    before = table_status(table, config.table("db.orders"), store, now=table.current_snapshot().timestamp_ms / 1000 + 30)
    assert (before.checkpoint, before.lag_snapshots, round(before.lag_seconds)) == (None, None, 30)
    pipeline.sync(config, "db.orders")
    table.append(rows(2))
    table.append(rows(3))
    plan_table(table, config.table("db.orders"), store, identifier_columns(table, config.table("db.orders")))
    behind = table_status(table, config.table("db.orders"), store, now=table.current_snapshot().timestamp_ms / 1000)
    assert (behind.lag_snapshots, behind.pending_items) == (2, 2)
    pipeline.sync(config, "db.orders")
    caught_up = table_status(table, config.table("db.orders"), store, now=0)
    assert (caught_up.lag_snapshots, caught_up.pending_items, caught_up.lag_seconds) == (0, 0, 0.0)


def test_unreachable_opensearch_fails_fast_and_writes_nothing(pipeline: Pipeline) -> None:
    orders(pipeline).append(rows(1))
    raw = pipeline.config_dict([{"name": "db.orders"}])
    raw["opensearch"] = {"url": "http://127.0.0.1:9"}  # the discard port: nothing listens
    with pytest.raises(SinkError, match=r"OpenSearch at http://127.0.0.1:9 is unreachable"):
        sync(parse_config(raw), pipeline.spark)
    store = pipeline.store()
    assert store.get_checkpoint("db.orders") is None and store.pending_items("db.orders") == []


def test_refused_credentials_fail_fast_and_write_nothing(pipeline: Pipeline, fault_proxy: FaultProxy) -> None:
    orders(pipeline).append(rows(1))
    raw = pipeline.config_dict([{"name": "db.orders"}])
    raw["opensearch"] = {"url": fault_proxy.url, "username": "icecdc", "password": "wrong"}
    fault_proxy.fail_for(60, status=401)
    with pytest.raises(SinkError, match=r"refused the credentials \(401\)"):
        sync(parse_config(raw), pipeline.spark)
    assert_nothing_written(pipeline, "db.orders", "orders")


def test_unreachable_catalog_fails_with_its_name(pipeline: Pipeline, tmp_path) -> None:
    raw = pipeline.config_dict([{"name": "db.orders"}])
    raw["catalog"]["uri"] = f"sqlite:///{tmp_path}/no/such/dir/catalog.db"
    with pytest.raises(ConfigError, match=r"catalog 'lake'"):
        sync(parse_config(raw), pipeline.spark)


def test_planning_an_export_never_holds_a_whole_manifest(pipeline: Pipeline) -> None:
    """Planning's memory is flat in the table's size and in its manifests' sizes.

    A manifest is streamed an entry at a time, never read into a list of ~2.8 KB a file (pyiceberg's
    `fetch_manifest_entry`): with manifests of 10^5 files, that made a 10^6-file table's peak 2.24x
    a 10^5-file table's (manifests of 10^4). What is left, ~0.4 KB a file of the manifest while it
    is read, is its bytes: pyiceberg's Avro reader reads a file whole."""
    files = 10_000
    table = orders(pipeline, partitioned=False)
    # one fast append of metadata only, with column statistics: planning never reads a data file
    register_files(table, files, files, pipeline.workdir.as_uri())
    config = pipeline.config({"name": "db.orders"}).table("db.orders")
    tracemalloc.start()
    try:
        planned = plan_table(table, config, pipeline.store(), ("id",))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert planned.items == files // 100
    assert peak / files < 1024, f"{peak / files:.0f} B held per file of the manifest at once"


def test_a_commit_that_rewrites_a_large_manifest_is_read_without_holding_it(
    pipeline: Pipeline,
) -> None:
    """Removing one file of a 10^4-file manifest rewrites it, the others listed EXISTING: the
    commit's own entries are read streamed, holding what it changed, not the rewritten manifest."""
    files = 10_000
    table = orders(pipeline, partitioned=False)
    register_files(table, files, files, pipeline.workdir.as_uri())
    gone = next(iter(table.scan().plan_files())).file
    with table.transaction() as tx, tx.update_snapshot().overwrite() as overwrite:
        overwrite.delete_data_file(gone)
    table = table.refresh()
    snapshot = table.current_snapshot()
    assert snapshot is not None
    tracemalloc.start()
    try:
        changed = ChangedEntries().of(table, snapshot)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert [e.data_file.file_path for e in changed] == [gone.file_path]
    assert peak / files < 1024, f"{peak / files:.0f} B held per file of the manifest at once"
