"""N snapshots applied by one sync against N syncs of one snapshot each, on one table into two
indexes that must end equal (results key `batching`)."""

from __future__ import annotations

import statistics
from collections import defaultdict
from dataclasses import asdict
from typing import Any

from bench.harness.sampling import Measure
from bench.harness.session import Bench, counters, measure_fields
from bench.harness.tables import Mutator, create_table
from icecdc.verify import index_documents


def batching(bench: Bench) -> dict[str, Any]:
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
        "one_sync": {**measure_fields(batched), **counters(result)},
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
