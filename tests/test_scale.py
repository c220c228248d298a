"""An export of 20 files and a batch of 120 snapshots finish on 2 cores, the driver's RSS bounded.

The suite exports 50,000 rows, too few for its loose RSS bound to catch rows collected on the
driver: that every process's peak memory stays flat at 2 million rows is measured by
`make bench-export-2m` (docs/bench/README.md), with the export's speed. Forty times as many
here, `ICECDC_SCALE_ROWS=2000000 make test TEST_WORKERS=0 PYTEST_ARGS="-s tests/test_scale.py"`,
passed in 19 min 49 s on 2 cores (2026-11-21): the driver's peak RSS did not grow during the
export, and osmem, the embedded test server that holds every document in memory, peaked at
12.9 GB. osmem indexes about 2,000-4,500 documents a second here, which sets the length."""

from __future__ import annotations

import os
import resource

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from pyiceberg.expressions import EqualTo

from icecdc.sync import sync
from tests.support.pipeline import Pipeline
from tests.support.tables import ARROW, orders, rows

# 200,000 until 2026-12-03: 355 s of one worker, the suite's longest test, osmem most of it
EXPORT_ROWS = int(os.environ.get("ICECDC_SCALE_ROWS", "50000"))
DELETED = 60  # one-row files, each deleted whole by one of the batch's snapshots
FILES = 20


def driver_peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


@pytest.mark.slow
@pytest.mark.timeout(600 + EXPORT_ROWS // 500)  # the ini's 600 s fit the suite's size; 2 million rows get 75 minutes
def test_large_export_and_a_120_snapshot_batch(pipeline: Pipeline) -> None:
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
    for i in range(1, DELETED + 1):  # one-row files, for the batch below to delete whole (a rewrite costs more)
        table.append(rows(-i))
    config = pipeline.config({"name": "db.orders"})
    before = driver_peak_rss_mb()
    (export,) = sync(config, pipeline.spark, ["db.orders"])
    grown = driver_peak_rss_mb() - before
    assert export.writes.indexed == EXPORT_ROWS + DELETED
    assert pipeline.client.count(index="orders")["count"] == EXPORT_ROWS + DELETED
    # 50,000 documents are ~4 MB of JSON, 2 million ~150 MB; the driver holds file lists only.
    print(f"driver peak RSS grew by {grown:.0f} MB during the export of {EXPORT_ROWS:,} rows")
    assert grown < 150, f"driver peak RSS grew by {grown:.0f} MB during the export"

    # 60 inserts of new rows and 60 deletes of exported ones: 120 snapshots in one batch (each
    # pyiceberg commit reads every manifest: 100 + 100 cost the suite 2 more minutes of setup)
    for i in range(60):
        table.append(rows(EXPORT_ROWS + i))
    for i in range(DELETED):
        table.delete(EqualTo("id", -1 - i))
    (batch,) = sync(config, pipeline.spark, ["db.orders"])
    assert (batch.snapshots, batch.writes.indexed, batch.writes.deleted) == (120, 60, 60)
    assert pipeline.client.count(index="orders")["count"] == EXPORT_ROWS + DELETED
