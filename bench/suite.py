"""The five measurements of issue 6, each returning plain dicts for results JSON.

Every comparison runs both sides in one process, on one Spark, one catalog and one OpenSearch,
back to back, so the ratios hold even where absolute times drift.
"""

from __future__ import annotations

import statistics
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from opensearchpy import OpenSearch, helpers
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.table import Table
from pyinstrument import Profiler

from bench import peer, sparklog
from bench.env import CATALOG, REPO, RESULTS, Measure, MemorySampler, icecdc_config, measured
from bench.tables import Mutator, create_table
from icecdc.catalog import identifier_columns
from icecdc.changelog import ChangeStats, net_write
from icecdc.config import Config
from icecdc.index import index_spec
from icecdc.model import Change, ChangeRow, Write
from icecdc.planning import plan_table
from icecdc.processing import BatchResult, sync
from icecdc.reading.planner import file_tasks
from icecdc.reading.reader import TableReader
from icecdc.reading.tasks import Task, files_read_by
from icecdc.sink import ensure_index, write_documents
from icecdc.state import open_state_store
from icecdc.verify import index_documents, table_documents


@dataclass(frozen=True)
class Scale:
    """How big each measurement is; `default` keeps `make bench` well under 30 minutes on 2 cores."""

    name: str
    compare_rows: int  # issue: 1,000,000
    rows_per_file: int
    rounds: int  # syncs of `snapshots` snapshots each
    snapshots: int
    changes: int  # changed keys per snapshot
    scaling_rows: tuple[int, ...]  # issue: 10^5, 10^6, 10^7
    scaling_repeats: int
    batch_rows: int
    batch_snapshots: int  # issue: 50
    batch_changes: int
    sink_rows: int  # osmem indexes ~2,000 documents/s on 2 cores: this sets the sink measurement's length
    hot: float  # share of changed keys among the newest tenth of ids; the rest anywhere (rewriting more files)
    # On the bench sink (bench/throughput.py): the export and carryover-heavy update of one table,
    throughput_rows: int
    throughput_rows_per_file: int
    # and the memory probe's two sizes (issue: 1M and 4M rows, in files of one size).
    probe_rows: tuple[int, int]
    probe_rows_per_file: int


SCALES = {
    "smoke": Scale(
        "smoke", 20_000, 2_000, 1, 5, 20, (10_000, 40_000), 2, 10_000, 5, 10, 5_000, 1.0, 50_000, 5_000, (50_000, 200_000), 5_000
    ),
    "default": Scale(
        "default",
        200_000,
        10_000,
        2,
        20,
        100,
        (100_000, 1_000_000),
        3,
        100_000,
        50,
        20,
        30_000,
        1.0,
        1_000_000,
        100_000,
        (1_000_000, 4_000_000),
        100_000,
    ),
    "full": Scale(
        "full",
        1_000_000,
        10_000,
        3,
        20,
        500,
        (100_000, 1_000_000, 10_000_000),
        3,
        100_000,
        50,
        20,
        200_000,
        0.8,
        2_000_000,
        100_000,
        (1_000_000, 4_000_000),
        100_000,
    ),
}


@dataclass
class Bench:
    """The shared parts every measurement uses."""

    workdir: Path
    spark: Any
    opensearch_url: str
    sampler: MemorySampler
    scale: Scale
    sink_url: str = ""  # the bench sink (bench/sink_server.py), for the measurements of bench/throughput.py
    sink_pid: int = -1

    def __post_init__(self) -> None:
        self.catalog = SqlCatalog(
            CATALOG, uri=f"sqlite:///{self.workdir / 'catalog.db'}", warehouse=(self.workdir / "warehouse").as_uri()
        )
        self.client = OpenSearch(hosts=[self.opensearch_url], timeout=120)
        self.sink_client = OpenSearch(hosts=[self.sink_url], timeout=120) if self.sink_url else None

    def config(self, table: str, index: str, export: bool = True) -> Config:
        return icecdc_config(self.workdir, self.opensearch_url, table, index, state=index, export=export)

    def sync(self, config: Config) -> tuple[Measure, BatchResult]:
        with measured(self.sampler) as measure:
            (result,) = sync(config, self.spark, [config.tables[0].name])
        return measure, result

    def table(self, name: str) -> Table:
        return self.catalog.load_table(name)

    def snapshot_id(self, name: str) -> int:
        snapshot = self.table(name).current_snapshot()
        assert snapshot is not None
        return snapshot.snapshot_id

    def count(self, index: str) -> int:
        self.client.indices.refresh(index=index)
        return int(self.client.count(index=index)["count"])

    def drop_index(self, index: str, sink: bool = False) -> None:
        """Delete `index` from osmem, or from the bench sink (with the generations the alias `index` names)."""
        if not sink:
            self.client.indices.delete(index=index, ignore_unavailable=True)
            return
        assert self.sink_client is not None
        named = self.sink_client.indices.get_alias(name=index, ignore=404)
        for concrete in [*(k for k in named if k not in ("error", "status")), index]:
            self.sink_client.indices.delete(index=concrete, ignore_unavailable=True)


def compare(bench: Bench) -> dict[str, Any]:
    """1: icecdc vs the create_changelog_view peer, syncing the same snapshots of one table into two indexes.

    Neither side exports the table first (icecdc `export: false`; the peer starts at the same
    snapshot): the initial load is measured in `sink_efficiency`, and it would only fill OpenSearch."""
    scale, spark, name = bench.scale, bench.spark, "db.compare"
    create_table(spark, name, scale.compare_rows, scale.rows_per_file)
    config = bench.config(name, "ice", export=False)
    bench.sync(config)  # the checkpoint: the current snapshot, where the peer starts too
    ensure_index(bench.client, "peer")
    mutator = Mutator(spark, name, scale.compare_rows, hot=scale.hot)
    start = bench.snapshot_id(name)
    # An unmeasured round first: both tools start their Python workers and import their libraries once.
    mutator.commit(scale.changes)
    _compare_round(bench, config, name, start, bench.snapshot_id(name), icecdc_first=True)
    start = bench.snapshot_id(name)
    rounds = []
    profile_config = bench.config(name, "profile", export=False)
    for number in range(scale.rounds):
        if number == scale.rounds - 1:
            _plan(bench, profile_config)  # the profiled batch is the last round's snapshots
        for _ in range(scale.snapshots):
            mutator.commit(scale.changes)
        end = bench.snapshot_id(name)
        rounds.append(_compare_round(bench, config, name, start, end, icecdc_first=number % 2 == 0))
        start = end
    ice_seconds = sum(r["icecdc"]["seconds"] for r in rounds)
    peer_seconds = sum(r["peer"]["seconds"] for r in rounds)
    return {
        "table": {"rows": scale.compare_rows, "rows_per_file": scale.rows_per_file, "data_files": _data_files(bench.table(name))},
        "snapshots_per_sync": scale.snapshots,
        "changes_per_snapshot": scale.changes,
        "hot": scale.hot,
        "rounds": rounds,
        "icecdc_seconds": ice_seconds,
        "peer_seconds": peer_seconds,
        "ratio_icecdc_to_peer": ice_seconds / peer_seconds,
        "executor_profile": profile_executor_path(bench, profile_config),
        "check": _check_compare(bench, config, name),
    }


def _compare_round(bench: Bench, config: Config, name: str, start: int, end: int, icecdc_first: bool) -> dict[str, Any]:
    """One sync of the same snapshots by each tool; which goes first alternates to cancel warm-up effects."""

    def run_peer() -> Measure:
        with measured(bench.sampler) as measure:
            peer.sync(bench.spark, name, "peer", bench.opensearch_url, start, end)
        return measure

    def run_icecdc() -> tuple[Measure, BatchResult]:
        return bench.sync(config)

    if icecdc_first:
        (ice, result), theirs = run_icecdc(), run_peer()
    else:
        theirs = run_peer()
        ice, result = run_icecdc()
    return {
        "icecdc": {**_measure(ice), **_counters(result)},
        "peer": _measure(theirs),
        "ratio": ice.seconds / theirs.seconds,
        "icecdc_first": icecdc_first,
    }


def _check_compare(bench: Bench, config: Config, name: str) -> dict[str, Any]:
    return check_indexes(bench, bench.client, config, name, "ice", "peer")


def check_indexes(bench: Bench, client: OpenSearch, config: Config, name: str, ice: str, peer: str) -> dict[str, Any]:
    """icecdc's index against the table (its documents equal their rows; no row missing, no document
    more), and the peer's against icecdc's (the same ids: the peer writes documents its own way)."""
    table = bench.table(name)
    expected = dict(table_documents(table, identifier_columns(table, config.tables[0])))
    mine, theirs = index_documents(client, ice), index_documents(client, peer)
    return {
        "table_rows": len(expected),
        "icecdc_documents": len(mine),
        "peer_documents": len(theirs),
        "same_ids": set(mine) == set(theirs),
        "icecdc_documents_equal_rows": all(expected.get(i) == d for i, d in mine.items()),
        "icecdc_index_equals_table": mine == expected,
    }


def sink_efficiency(bench: Bench) -> dict[str, Any]:
    """2 (and the initial load of 1): an export's documents/second against raw opensearch-py bulk of the
    very same documents, and against the peer's initial load (Spark reads the table, executors bulk)."""
    name = "db.sink"
    create_table(bench.spark, name, bench.scale.sink_rows, bench.scale.rows_per_file)
    export, export_result = bench.sync(bench.config(name, "ice-export"))
    with measured(bench.sampler) as peer_load:
        peer.load(bench.spark, name, "peer-load", bench.opensearch_url)
    for index in ("ice-export", "peer-load"):
        bench.drop_index(index)  # osmem keeps everything in memory
    table = bench.table(name)
    sequence_number = table.current_snapshot().sequence_number  # type: ignore[union-attr]
    documents = table_documents(table, identifier_columns(table, bench.config(name, "ice-export").tables[0]))
    count = len(documents)

    def actions(index: str) -> list[dict[str, Any]]:
        # The same writes as icecdc's export: index, external version = the snapshot's sequence number.
        return [
            {"_op_type": "index", "_index": index, "_id": i, "_source": d, "version": sequence_number, "version_type": "external"}
            for i, d in documents
        ]

    # The raw writes go into an index with the same mapping icecdc's export writes into (typed, from
    # the table's schema): a dynamic mapping indexes differently, and the ratio would compare mappings.
    spec = index_spec(table.schema(), bench.config(name, "ice-export").tables[0])

    def timed(index: str, write: Callable[[list[dict[str, Any]]], None]) -> float:
        ensure_index(bench.client, index, spec)
        batch = actions(index)
        started = time.perf_counter()
        write(batch)
        seconds = time.perf_counter() - started
        assert bench.count(index) == count, f"raw bulk into {index} lost documents"
        bench.drop_index(index)
        return seconds

    raw = {
        "bulk": timed("raw-bulk", lambda a: helpers.bulk(bench.client, a, chunk_size=500)),
        "parallel_bulk_2_threads": timed(
            "raw-parallel", lambda a: _drain(helpers.parallel_bulk(bench.client, a, thread_count=2, chunk_size=500))
        ),
        "icecdc_write_documents": timed("raw-icecdc-sink", lambda a: _icecdc_sink(bench, a)),
    }
    rates = {k: count / v for k, v in raw.items()}
    ceiling = max(rates["bulk"], rates["parallel_bulk_2_threads"])
    sync_rate = export_result.writes.indexed / export.seconds
    return {
        "documents": count,
        "icecdc_export_docs_per_second": sync_rate,
        "raw_docs_per_second": rates,
        "ceiling_docs_per_second": ceiling,
        "ratio_sync_to_ceiling": sync_rate / ceiling,
        "ratio_icecdc_sink_alone_to_ceiling": rates["icecdc_write_documents"] / ceiling,
        "export": {"icecdc": {**_measure(export), **_counters(export_result)}, "peer_load": _measure(peer_load)},
        "ratio_export_icecdc_to_peer_load": export.seconds / peer_load.seconds,
    }


def _drain(results: Any) -> None:
    for ok, item in results:
        if not ok:
            raise RuntimeError(f"raw parallel_bulk failed: {item}")


def _icecdc_sink(bench: Bench, actions: list[dict[str, Any]]) -> None:
    """icecdc's sink alone (sink.write_documents, one thread) on the same documents, no Spark."""
    config = bench.config("db.sink", "x").opensearch
    writes = (Write(a["_id"], a["version"], a["_source"]) for a in actions)
    write_documents(bench.client, config, actions[0]["_index"], writes)


def profile_executor_path(bench: Bench, config: Config) -> dict[str, Any]:
    """The executor side of one sync, run in this process step by step under pyinstrument: where the time goes.

    Same code as the Spark job (read → group by key → net change → bulk), without Spark, so each
    step can be timed and a Python profiler can see inside it."""
    table, items = _plan(bench, config)
    tasks = file_tasks(table, items)
    table_config = config.tables[0]
    reader = TableReader.for_table(table, table_config.name, identifier_columns(table, table_config))
    ensure_index(bench.client, table_config.index)
    steps: dict[str, float] = {}
    profiler = Profiler(interval=0.002)
    profiler.start()
    changes = _step(steps, "read_and_encode", lambda: list(reader.read(tasks)))
    grouped = _step(steps, "group_by_key", lambda: _group(changes))
    stats = ChangeStats()
    writes = _step(steps, "net_change", lambda: [w for k, v in grouped.items() if (w := net_write(k, v, stats)) is not None])
    sink = _step(steps, "bulk", lambda: write_documents(bench.client, config.opensearch, table_config.index, writes))
    profiler.stop()
    _save_profile(profiler, f"profile-executor-{bench.scale.name}.txt")
    return {
        "files": len(tasks),
        "bytes_read": _task_bytes(tasks),
        "rows": stats.rows,
        "carryovers": stats.carryovers,
        "writes": len(writes),
        "indexed": sink.indexed,
        "deleted": sink.deleted,
        "seconds": steps,
        "rows_per_second_read_and_encode": stats.rows / steps["read_and_encode"],
    }


def _step(steps: dict[str, float], name: str, run: Callable[[], Any]) -> Any:
    started = time.perf_counter()
    result = run()
    steps[name] = time.perf_counter() - started
    return result


def _group(changes: list[Change]) -> dict[str, list[ChangeRow]]:
    grouped: dict[str, list[ChangeRow]] = defaultdict(list)
    for key, change in changes:
        grouped[key].append(change)
    return grouped


def _plan(bench: Bench, config: Config) -> tuple[Table, list[Any]]:
    """Plan the table into the config's state store (never processed by `sync`); its pending items."""
    table_config = config.tables[0]
    table = bench.table(table_config.name)
    store = open_state_store(config.state)
    try:
        plan_table(table, table_config, store, identifier_columns(table, table_config))
        return table, store.pending_items(table_config.name)
    finally:
        store.close()


def cost_scaling(bench: Bench) -> dict[str, Any]:
    """3: a one-row update applied to tables of growing size, same file size: time and bytes read."""
    sizes = []
    for rows in bench.scale.scaling_rows:
        sizes.append(_scaling_point(bench, rows))
    smallest, largest = sizes[0], sizes[-1]
    profile_largest_sync(bench, f"db.scale_{largest['rows']}")
    return {
        "sizes": sizes,
        "ratio_time_largest_to_smallest": largest["seconds_median"] / smallest["seconds_median"],
        "ratio_bytes_largest_to_smallest": largest["data_bytes_read"] / smallest["data_bytes_read"],
    }


def _scaling_point(bench: Bench, rows: int) -> dict[str, Any]:
    name = f"db.scale_{rows}"
    create_table(bench.spark, name, rows, bench.scale.rows_per_file)
    config = bench.config(name, f"scale-{rows}", export=False)
    bench.sync(config)  # sets the checkpoint at the current snapshot; nothing to write
    mutator = Mutator(bench.spark, name, rows)
    samples = []
    for _ in range(bench.scale.scaling_repeats):
        mutator.update_one()
        tasks = file_tasks(*_plan(bench, config))  # what the sync below will read (planning twice is a no-op)
        measure, result = bench.sync(config)
        samples.append({**_measure(measure), **_counters(result), "data_bytes_read": _task_bytes(tasks)})
    table = bench.table(name)
    manifests = table.current_snapshot().manifests(table.io)  # type: ignore[union-attr]
    return {
        "rows": rows,
        "data_files": _data_files(table),
        "manifests": len(manifests),
        "manifest_bytes": sum(m.manifest_length for m in manifests),
        "samples": samples,
        "seconds_median": statistics.median(s["seconds"] for s in samples),
        "data_bytes_read": statistics.median(s["data_bytes_read"] for s in samples),
    }


def profile_largest_sync(bench: Bench, name: str) -> None:
    """The driver side of a one-row sync on the largest table, under pyinstrument (planning, Spark job, waiting)."""
    config = bench.config(name, f"scale-{name.rsplit('_', 1)[1]}", export=False)
    Mutator(bench.spark, name, bench.scale.scaling_rows[-1], seed=60).update_one()
    profiler = Profiler(interval=0.002)
    profiler.start()
    sync(config, bench.spark, [name])
    profiler.stop()
    _save_profile(profiler, f"profile-driver-one-row-{bench.scale.name}.txt")


def _save_profile(profiler: Profiler, name: str) -> None:
    # Paths relative to the checkout: the committed profile names no machine's directories.
    text = profiler.output_text(unicode=False, color=False, show_all=False)
    (RESULTS / name).write_text(text.replace(f"{REPO}/", ""))


def batching(bench: Bench) -> dict[str, Any]:
    """4: N snapshots applied by one sync against N syncs of one snapshot each (same table, two indexes)."""
    scale, name = bench.scale, "db.batch"
    create_table(bench.spark, name, scale.batch_rows, scale.rows_per_file)
    one, each = bench.config(name, "batch-one", export=False), bench.config(name, "batch-each", export=False)
    bench.sync(one)
    bench.sync(each)
    mutator = Mutator(bench.spark, name, scale.batch_rows, hot=scale.hot)
    per_snapshot: list[Measure] = []
    for _ in range(scale.batch_snapshots):
        mutator.commit(scale.batch_changes)
        per_snapshot.append(bench.sync(each)[0])
    batched, result = bench.sync(one)
    each_seconds = sum(m.seconds for m in per_snapshot)
    same = index_documents(bench.client, "batch-one") == index_documents(bench.client, "batch-each")
    return {
        "snapshots": scale.batch_snapshots,
        "changes_per_snapshot": scale.batch_changes,
        "one_sync": {**_measure(batched), **_counters(result)},
        "one_sync_per_snapshot": {
            "seconds": each_seconds,
            "median_sync_seconds": statistics.median(m.seconds for m in per_snapshot),
            "memory_mib": _peak(per_snapshot),
        },
        "ratio_batched_to_per_snapshot": batched.seconds / each_seconds,
        "indexes_equal": same,
    }


def _peak(measures: list[Measure]) -> dict[str, float]:
    peaks: dict[str, float] = defaultdict(float)
    for m in measures:
        for part, value in asdict(m.memory).items():
            peaks[part] = max(peaks[part], round(value, 1))
    return dict(peaks)


def _measure(measure: Measure) -> dict[str, Any]:
    return {
        "seconds": measure.seconds,
        "memory_mib": {k: round(v, 1) for k, v in asdict(measure.memory).items()},
        sparklog.KEY: measure.spark_phase,
    }


def _counters(result: BatchResult) -> dict[str, Any]:
    return {
        "snapshots": result.snapshots,
        "files": result.files,
        "rows_read": result.changes.rows,
        "carryovers": result.changes.carryovers,
        "indexed": result.writes.indexed,
        "deleted": result.writes.deleted,
        "superseded": result.writes.superseded,
    }


def _task_bytes(tasks: list[Task]) -> int:
    """Bytes of every data and delete file the tasks read: what the executors fetch."""
    seen: dict[str, int] = {}
    for task in tasks:
        for data_file in files_read_by(task):
            seen[data_file.file_path] = data_file.file_size_in_bytes
    return sum(seen.values())


def _data_files(table: Table) -> int:
    return len(table.inspect.files())
