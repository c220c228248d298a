"""Where the in-process engine stops paying (what `engine.in_process_max_*` defaults rest on): whole
`icecdc sync` commands forced onto each engine, for passes of growing size. Results: docs/bench/crossover.json.

Each size is a table of N rows in files of 10,000, exported, then changed by one UPDATE of 1 % of its
rows spread over every file (the pass reads every file twice: carryover-heavy), then by an append of
N rows. Both engines sync the same commit from the same checkpoint into the bench sink.

    python -m bench.crossover [--rows 10000,50000,200000,500000]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import yaml
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.expressions import In
from pyiceberg.schema import Schema
from pyiceberg.table import Table
from pyiceberg.types import DoubleType, LongType, NestedField, StringType

from bench.harness.environment import RESULTS, WORK
from bench.harness.sampling import whole_command
from bench.harness.sink import SinkServer
from icecdc.model import EngineKind
from icecdc.testing.commits import update

ROWS_PER_FILE = 10_000
SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=True),
    NestedField(2, "customer", StringType(), required=False),
    NestedField(3, "status", StringType(), required=False),
    NestedField(4, "amount", DoubleType(), required=False),
    identifier_field_ids=[1],
)


def _rows(start: int, count: int) -> pa.Table:
    ids = range(start, start + count)
    return pa.Table.from_pydict(
        {
            "id": list(ids),
            "customer": [f"customer-{i % 9973}" for i in ids],
            "status": ["new"] * count,
            "amount": [i / 100 for i in ids],
        },
        schema=SCHEMA.as_arrow(),
    )


def _config(workdir: Path, sink_url: str, engine: EngineKind, table: str) -> Path:
    raw = {
        "catalog": {
            "name": "bench",
            "type": "sql",
            "uri": f"sqlite:///{workdir / 'catalog.db'}",
            "warehouse": (workdir / "wh").as_uri(),
        },
        "state": {"type": "sqlite", "path": str(workdir / f"state-{engine}.db")},
        "opensearch": {"url": sink_url},
        "spark": {"master": "local[2]", "conf": {"spark.ui.enabled": False, "spark.ui.showConsoleProgress": False}},
        "engine": {"use": str(engine)},
        "tables": [{"name": table, "index": f"{table.split('.')[-1]}-{engine}".replace("_", "-")}],
    }
    path = workdir / f"icecdc-{engine}.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def _sync(config: Path) -> dict[str, float]:
    """The whole command's wall time, process start to exit, and the peak RSS of its largest
    process and of its whole tree (the JVM and Spark's Python workers included), MiB."""
    run = whole_command([sys.executable, "-m", "icecdc.cli", "sync", "--config", str(config)])
    return {"seconds": round(run["seconds"], 2), "largest_process_mib": run["largest_process_mib"], "tree_mib": run["tree_mib"]}


def measure(rows: int, sink_url: str) -> dict[str, Any]:
    workdir = WORK / f"crossover-{rows}"
    shutil.rmtree(workdir, ignore_errors=True)
    (workdir / "wh").mkdir(parents=True)
    catalog = SqlCatalog("bench", uri=f"sqlite:///{workdir / 'catalog.db'}", warehouse=(workdir / "wh").as_uri())
    catalog.create_namespace("db")
    name = "db.t"
    table = catalog.create_table(name, schema=SCHEMA)
    for start in range(0, rows, ROWS_PER_FILE):
        table.append(_rows(start, min(ROWS_PER_FILE, rows - start)))
    configs = {engine: _config(workdir, sink_url, engine, name) for engine in EngineKind}
    for config in configs.values():
        _sync(config)  # the export (and every append), on each engine's own checkpoint
    table = catalog.load_table(name)
    # One UPDATE of 1 % of the rows, spread over every file, in one copy-on-write snapshot:
    # carryover-heavy, unchanged rows cancel in Arrow before Python.
    update_ = _measured(
        table, configs, lambda: update(table, In("id", set(range(0, rows, 100))), lambda r: {**r, "status": "paid"})
    )
    # An append of as many new rows as the table has: every row read becomes a document.
    append = _measured(table, configs, lambda: table.append(_rows(rows, rows)) or rows)
    return {"rows": rows, "update_1pct": update_, "append_all": append}


def _measured(table: Table, configs: dict[EngineKind, Path], commit: Callable[[], int]) -> dict[str, Any]:
    """Make the commit, then sync it on each engine: what the pass read, and each whole command."""
    before = {s.snapshot_id for s in table.snapshots()}
    changed = commit()
    table.refresh()
    # pyiceberg's overwrite commits a delete and an append: what both snapshots changed is read
    summaries = [s.summary.additional_properties for s in table.snapshots() if s.snapshot_id not in before and s.summary]
    read_bytes = sum(int(m.get(k, 0)) for m in summaries for k in ("added-files-size", "removed-files-size"))
    read_files = sum(int(m.get(k, 0)) for m in summaries for k in ("added-data-files", "deleted-data-files"))
    runs = {str(engine): _sync(config) for engine, config in configs.items()}
    return {"changed_rows": changed, "files": read_files, "bytes": read_bytes, "sync": runs}


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.crossover")
    parser.add_argument("--rows", default="10000,50000,200000,500000")
    args = parser.parse_args()
    results = []
    with SinkServer.start() as sink:
        for rows in (int(r) for r in args.rows.split(",")):
            result = measure(rows, sink.url)
            print(json.dumps(result), flush=True)
            results.append(result)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "crossover.json").write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
