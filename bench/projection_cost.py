"""What a projection saves: on one table whose index holds some of its columns, a sync of an
UPDATE of every row to a column the index does not hold, against one to a column it holds, in
turn, side by side. Both rewrite every data file; the first writes no document (carryover removal
compares projected documents), the second one per row."""

from __future__ import annotations

import statistics
from typing import Any

from bench.harness.environment import CATALOG
from bench.harness.session import Bench, counters, measure_fields
from bench.harness.tables import create_table

# The index's columns; `qty` is left out (the excluded update), `status` kept (the included one).
INDEXED = ["id", "region", "customer", "amount", "status"]
EXCLUDED_UPDATE = "qty = qty + 1"
INCLUDED_UPDATE = "status = CASE status WHEN 'new' THEN 'paid' ELSE 'new' END"


def projection_cost(bench: Bench) -> dict[str, Any]:
    rows = bench.scale.scaling_rows[0]
    name = "db.projection"
    create_table(bench.spark, name, rows, bench.scale.rows_per_file)
    base = bench.config(name, "projection")
    config = base.revised(tables=[{**base.tables[0].as_mapping(), "columns": INDEXED}])
    bench.sync(config)  # the export
    samples: dict[str, list[dict[str, Any]]] = {"excluded": [], "included": []}
    for _ in range(bench.scale.scaling_repeats):
        for which, assignment in (("excluded", EXCLUDED_UPDATE), ("included", INCLUDED_UPDATE)):
            bench.spark.sql(f"UPDATE {CATALOG}.{name} SET {assignment}")
            measure, result = bench.sync(config)
            samples[which].append({**measure_fields(measure), **counters(result), "engine": str(result.engine)})
    excluded = statistics.median(s["seconds"] for s in samples["excluded"])
    included = statistics.median(s["seconds"] for s in samples["included"])
    return {
        "rows": rows,
        "indexed_columns": INDEXED,
        "updates": {"excluded": EXCLUDED_UPDATE, "included": INCLUDED_UPDATE},
        "samples": samples,
        "excluded_seconds_median": excluded,
        "included_seconds_median": included,
        "ratio_excluded_to_included": excluded / included,
    }
