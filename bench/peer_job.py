"""The peer (bench/peer.py) as a user would submit it: one process, a fresh JVM with Iceberg's Spark
runtime, the job, exit. `bench.commands` times it from the outside, process start to exit, as it
times `icecdc sync`; the job prints where its own time went (imports, Spark's start, the job,
Spark's stop) as one JSON line.

    python -m bench.peer_job WORKDIR TABLE INDEX SINK_URL --load          the initial load
    python -m bench.peer_job WORKDIR TABLE INDEX SINK_URL START END       the changes after START up to END

WORKDIR holds the bench's catalog (`catalog.db`) and warehouse. `bench.env.start_spark` keeps an
event log in a new directory beside the catalog, so each job runs in a directory of its own under
WORKDIR/peer-jobs/ that links to them.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

from bench import peer
from bench.env import start_spark

RESULT = "bench-peer-job-result: "  # the job's stdout line that carries its timings


def since_start() -> float:
    """Seconds since this process started: its start in clock ticks after boot (/proc/self/stat)
    against the uptime (psutil's create_time adds a boot time rounded to the second)."""
    ticks = int(Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[19])
    return float(Path("/proc/uptime").read_text().split()[0]) - ticks / os.sysconf("SC_CLK_TCK")


def job_directory(workdir: Path) -> Path:
    """A directory of this job's own, where the bench's catalog and warehouse are as in WORKDIR."""
    directory = workdir / "peer-jobs" / str(os.getpid())
    directory.mkdir(parents=True)
    for name in ("catalog.db", "warehouse"):
        (directory / name).symlink_to(workdir / name)
    return directory


def main() -> None:
    imported = since_start()
    parser = argparse.ArgumentParser(prog="python -m bench.peer_job")
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
            peer.load(spark, args.table, args.index, args.sink_url)
        else:
            peer.sync(spark, args.table, args.index, args.sink_url, *args.snapshots)
        steps["job"] = time.perf_counter() - started
    finally:
        started = time.perf_counter()
        spark.stop()
        steps["spark_stop"] = time.perf_counter() - started
    print(RESULT + json.dumps({k: round(v, 3) for k, v in steps.items()}), flush=True)


if __name__ == "__main__":
    main()
