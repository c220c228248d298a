"""Planning's peak RSS and time against a table's size: `plan_table` of an export of N data files,
registered as metadata only (fast appends of `DataFile`s that name files never written: planning
reads manifests, never data), on SQLite, each size in a process of its own.

    python -m bench.plan_memory [--files 10000 50000] [--per-commit 10000]
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from pyiceberg.manifest import DataFile, DataFileContent, FileFormat
from pyiceberg.table import Table
from pyiceberg.typedef import Record

from bench.backlog import SCHEMA, catalog

NAME = "db.wide"


def register_files(table: Table, files: int, per_commit: int, prefix: str) -> None:
    """Fast-append `files` data files of one row each, `per_commit` a commit (metadata only).

    Each carries column statistics for every column, as a writer records them: most of what a
    manifest entry weighs."""
    columns = [field.field_id for field in table.schema().fields]
    stats = {
        "column_sizes": dict.fromkeys(columns, 100),
        "value_counts": dict.fromkeys(columns, 1),
        "null_value_counts": dict.fromkeys(columns, 0),
        "lower_bounds": dict.fromkeys(columns, b"lower bound"),
        "upper_bounds": dict.fromkeys(columns, b"upper bound"),
    }
    for start in range(0, files, per_commit):
        with table.transaction() as tx, tx.update_snapshot().fast_append() as append:
            for i in range(start, min(files, start + per_commit)):
                append.append_data_file(
                    DataFile.from_args(
                        content=DataFileContent.DATA,
                        file_path=f"{prefix}/data/f{i:09d}.parquet",
                        file_format=FileFormat.PARQUET,
                        partition=Record(),
                        record_count=1,
                        file_size_in_bytes=1000,
                        **stats,
                    )
                )


def plan_in_this_process(workdir: Path) -> dict[str, Any]:
    from icecdc.config import parse_config
    from icecdc.planning import plan_table
    from icecdc.state import SqliteStateStore

    table = catalog(workdir).load_table(NAME)
    config = parse_config(
        {
            "catalog": {"name": "lake", "type": "sql", "uri": "sqlite://", "warehouse": "file:///tmp"},
            "state": {"type": "sqlite", "path": str(workdir / "state.db")},
            "opensearch": {"url": "http://localhost:9200"},
            "tables": [{"name": NAME}],
        }
    )
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    started = time.monotonic()
    result = plan_table(table, config.tables[0], SqliteStateStore(workdir / "state.db"), ("id",))
    seconds = time.monotonic() - started
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"items": result.items, "seconds": round(seconds, 2), "rss_before_mib": round(before), "peak_rss_mib": round(peak)}


def measure(files: int, per_commit: int) -> dict[str, Any]:
    workdir = Path(tempfile.mkdtemp(prefix="plan-memory-"))
    try:
        lake = catalog(workdir)
        lake.create_namespace("db")
        register_files(lake.create_table(NAME, SCHEMA), files, per_commit, workdir.as_uri())
        child = subprocess.run(
            [sys.executable, "-m", "bench.plan_memory", "--plan", str(workdir)], capture_output=True, text=True, check=True
        )
        return {"files": files, **json.loads(child.stdout.strip().splitlines()[-1])}
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, nargs="+", default=[10_000, 50_000])
    parser.add_argument("--per-commit", type=int, default=10_000, help="files a fast append registers")
    parser.add_argument("--plan", type=Path, help=argparse.SUPPRESS)  # the child: plan the table in workdir
    args = parser.parse_args()
    if args.plan:
        print(json.dumps(plan_in_this_process(args.plan)))
        return
    results = [measure(files, args.per_commit) for files in args.files]
    if len(results) > 1:
        first, last = results[0], results[-1]
        ratio = (last["peak_rss_mib"] - first["rss_before_mib"]) / max(1, first["peak_rss_mib"] - first["rss_before_mib"])
        print(
            json.dumps(
                {"peak_rss_ratio": round(last["peak_rss_mib"] / first["peak_rss_mib"], 3), "growth_ratio": round(ratio, 2)}
            )
        )
    for result in results:
        print(json.dumps(result))


if __name__ == "__main__":
    main()
