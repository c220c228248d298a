"""Bounded memory: a large export and a batch of 200 snapshots finish on 2 cores, and the driver's
memory does not grow with the data (rows are never collected on the driver).

The suite exports 200,000 rows: osmem, the embedded test server, indexes about 2,000 documents a
second here, so the issue's 2 million take ~20 minutes. `ICECDC_SCALE_ROWS=2000000 make test
PYTEST_ARGS=tests/test_scale.py` runs the full size."""

from __future__ import annotations

import os
import resource

import pyarrow as pa
import pyarrow.compute as pc
from pyiceberg.expressions import EqualTo

from icecdc.processing import sync
from tests.conftest import Pipeline
from tests.test_sync import ARROW, orders, rows

EXPORT_ROWS = int(os.environ.get("ICECDC_SCALE_ROWS", "200000"))
FILES = 20


def driver_peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def test_large_export_and_a_200_snapshot_batch(pipeline: Pipeline) -> None:
    table = orders(pipeline, partitioned=False)
    per_file = EXPORT_ROWS // FILES
    for f in range(FILES):
        ids = pa.array(range(f * per_file, (f + 1) * per_file), pa.int64())
        table.append(
            pa.table(
                {
                    "id": ids,
                    "region": pa.array(["us"] * per_file),
                    "status": pa.array(["new"] * per_file),
                    "amount": pc.multiply(ids.cast(pa.float64()), 0.5),
                },
                schema=ARROW,
            )
        )
    config = pipeline.config({"name": "db.orders"})
    before = driver_peak_rss_mb()
    (export,) = sync(config, pipeline.spark, ["db.orders"])
    grown = driver_peak_rss_mb() - before
    assert export.writes.indexed == EXPORT_ROWS
    assert pipeline.client.count(index="orders")["count"] == EXPORT_ROWS
    # 200,000 documents are ~15 MB of JSON, 2 million ~150 MB; the driver holds file lists only.
    print(f"driver peak RSS grew by {grown:.0f} MB during the export of {EXPORT_ROWS:,} rows")
    assert grown < 150, f"driver peak RSS grew by {grown:.0f} MB during the export"

    # 100 inserts, then 100 deletes of them: 200 snapshots in one batch, each cheap to commit
    for i in range(100):
        table.append(rows(EXPORT_ROWS + i))
    for i in range(100):
        table.delete(EqualTo("id", EXPORT_ROWS + i))
    (batch,) = sync(config, pipeline.spark, ["db.orders"])
    assert (batch.snapshots, batch.writes.indexed, batch.writes.deleted) == (200, 0, 100)
    assert pipeline.client.count(index="orders")["count"] == EXPORT_ROWS
