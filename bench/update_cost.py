"""The cost of a one-row update as the table grows, in files of one size: time and bytes read
(results key `scaling`)."""

from __future__ import annotations

import statistics
from typing import Any

from bench.harness.session import Bench, counters, data_files, measure_fields, task_bytes
from bench.harness.tables import Mutator, create_table
from bench.profiles import profile_largest_sync
from icecdc.reading.driver import file_tasks


def cost_scaling(bench: Bench) -> dict[str, Any]:
    """Each of `scale.scaling_rows`, median of `scale.scaling_repeats` syncs; then the largest one's driver profiled."""
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
        tasks = file_tasks(*bench.plan(config))  # what the sync below will read (planning twice is a no-op)
        measure, result = bench.sync(config)
        samples.append({**measure_fields(measure), **counters(result), "data_bytes_read": task_bytes(tasks)})
    table = bench.table(name)
    manifests = table.current_snapshot().manifests(table.io)  # type: ignore[union-attr]
    return {
        "rows": rows,
        "data_files": data_files(table),
        "manifests": len(manifests),
        "manifest_bytes": sum(m.manifest_length for m in manifests),
        "samples": samples,
        "seconds_median": statistics.median(s["seconds"] for s in samples),
        "data_bytes_read": statistics.median(s["data_bytes_read"] for s in samples),
    }
