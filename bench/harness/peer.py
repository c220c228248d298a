"""The peer: the job a Glue user would write instead of icecdc, with Iceberg's own changelog.

`create_changelog_view` (compute_updates on the identifier columns, which drops carryovers), the net
change per key as the row of the highest `_change_ordinal`, bulk from the executors' `foreachPartition`.
Unversioned index and delete actions, as such a job is usually written (this favours the peer slightly).

    python -m bench.harness.peer WORKDIR TABLE INDEX SINK_URL --load       the initial load, as its own process
    python -m bench.harness.peer WORKDIR TABLE INDEX SINK_URL START END    the changes after START up to END

As its own process it prints where its time went (imports, Spark's start, the job, Spark's stop) as one JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Iterable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

from bench.harness.environment import CATALOG, start_spark

BULK_CHUNK = 500  # opensearch-py's default, and icecdc's
META_COLUMNS = ("_change_type", "_change_ordinal", "_commit_snapshot_id", "_rank")
RESULT = "bench-peer-job-result: "  # the job's stdout line that carries its timings


def sync(spark: Any, table: str, index: str, opensearch_url: str, start_snapshot: int, end_snapshot: int) -> None:
    """Apply the changes after `start_snapshot` up to `end_snapshot` (inclusive) to `index`."""
    view = "peer_changes"
    spark.sql(
        f"""CALL {CATALOG}.system.create_changelog_view(
              table => '{table}',
              options => map('start-snapshot-id', '{start_snapshot}', 'end-snapshot-id', '{end_snapshot}'),
              compute_updates => true,
              identifier_columns => array('id'),
              changelog_view => '{view}')"""
    )
    net = spark.sql(
        f"""SELECT * FROM (
              SELECT *, row_number() OVER (
                PARTITION BY id
                ORDER BY _change_ordinal DESC, CASE WHEN _change_type IN ('INSERT', 'UPDATE_AFTER') THEN 0 ELSE 1 END
              ) AS _rank
              FROM {view})
            WHERE _rank = 1"""
    )
    net.foreachPartition(partial(_bulk_partition, opensearch_url, index))


def load(spark: Any, table: str, index: str, opensearch_url: str) -> None:
    """The peer's initial load: the whole table as index actions."""
    spark.table(f"{CATALOG}.{table}").foreachPartition(partial(_bulk_partition, opensearch_url, index))


def _bulk_partition(opensearch_url: str, index: str, rows: Iterable[Any]) -> None:
    from opensearchpy import OpenSearch, helpers  # executor side

    client = OpenSearch(hosts=[opensearch_url], timeout=60)
    _, errors = helpers.bulk(client, _actions(index, rows), chunk_size=BULK_CHUNK, raise_on_error=False)
    # A delete of a key the index never had answers 404; anything else is a failure.
    failed = [e for e in errors if next(iter(e.values())).get("status") != 404]
    if failed:
        raise RuntimeError(f"peer: {len(failed)} bulk failures, e.g. {failed[:3]}")


def _actions(index: str, rows: Iterable[Any]) -> Iterator[dict[str, Any]]:
    for row in rows:
        fields = row.asDict()
        change = fields.get("_change_type", "INSERT")
        doc_id = str(fields["id"])
        if change == "DELETE":
            yield {"_op_type": "delete", "_index": index, "_id": doc_id}
            continue
        for name in META_COLUMNS:
            fields.pop(name, None)
        yield {"_op_type": "index", "_index": index, "_id": doc_id, "_source": json.dumps(fields, default=str)}


def since_start() -> float:
    """Seconds since this process started: its start in clock ticks after boot (/proc/self/stat)
    against the uptime (psutil's create_time adds a boot time rounded to the second)."""
    ticks = int(Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[19])
    return float(Path("/proc/uptime").read_text().split()[0]) - ticks / os.sysconf("SC_CLK_TCK")


def job_directory(workdir: Path) -> Path:
    """A directory of this job's own (`start_spark` keeps an event log beside the catalog), where the
    bench's catalog and warehouse are WORKDIR's."""
    directory = workdir / "peer-jobs" / str(os.getpid())
    directory.mkdir(parents=True)
    for name in ("catalog.db", "warehouse"):
        (directory / name).symlink_to(workdir / name)
    return directory


def main() -> None:
    """The peer as a user submits it: one process, a fresh JVM with Iceberg's runtime, the job, exit."""
    imported = since_start()
    parser = argparse.ArgumentParser(prog="python -m bench.harness.peer")
    parser.add_argument("workdir", type=Path)
    parser.add_argument("table")
    parser.add_argument("index")
    parser.add_argument("sink_url")
    parser.add_argument("snapshots", nargs="*", type=int, help="START END: the changes after START up to END")
    parser.add_argument("--load", action="store_true", help="the initial load: the whole table")
    args = parser.parse_args()
    if args.load == bool(args.snapshots) or (args.snapshots and len(args.snapshots) != 2):
        parser.error("give either --load or START END")
    steps = {"imports": imported}  # the interpreter's start and the imports
    started = time.perf_counter()
    spark = start_spark(job_directory(args.workdir))
    steps["spark_start"] = time.perf_counter() - started
    started = time.perf_counter()
    try:
        if args.load:
            load(spark, args.table, args.index, args.sink_url)
        else:
            sync(spark, args.table, args.index, args.sink_url, *args.snapshots)
        steps["job"] = time.perf_counter() - started
    finally:
        started = time.perf_counter()
        spark.stop()
        steps["spark_stop"] = time.perf_counter() - started
    print(RESULT + json.dumps({k: round(v, 3) for k, v in steps.items()}), flush=True)


if __name__ == "__main__":
    # Run from the module by its name, so Spark ships `_bulk_partition` by reference, not pickled from __main__.
    from bench.harness import peer

    peer.main()
