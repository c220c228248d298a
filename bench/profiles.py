"""Where a sync's time goes, under pyinstrument: its executor side step by step, and its driver side.
Written to docs/bench/profile-*.txt; run from `sync_vs_peer` and `update_cost`."""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable
from typing import Any

from pyinstrument import Profiler

from bench.harness.environment import REPO, RESULTS
from bench.harness.session import Bench, task_bytes
from bench.harness.tables import Mutator
from icecdc.catalog import identifier_columns
from icecdc.changelog import ChangeStats, net_write
from icecdc.config import Config
from icecdc.destination.index import IndexAlias
from icecdc.destination.sink import write_documents
from icecdc.model import Change, ChangeRow
from icecdc.reading.driver import file_tasks
from icecdc.reading.reader import TableReader
from icecdc.sync import sync


def profile_executor_path(bench: Bench, config: Config) -> dict[str, Any]:
    """The executor side of one sync (read → group by key → net change → bulk) run in this process,
    step by step, without Spark, so each step is timed and the profiler sees inside it."""
    table, items = bench.plan(config)
    tasks = file_tasks(table, items)
    table_config = config.tables[0]
    reader = TableReader.for_table(table, table_config.name, identifier_columns(table, table_config))
    IndexAlias(bench.client, table_config.index).ensure()
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
        "bytes_read": task_bytes(tasks),
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


def profile_largest_sync(bench: Bench, name: str) -> None:
    """The driver side of a one-row sync on the largest table (planning, Spark job, waiting)."""
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
