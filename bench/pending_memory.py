"""What a sync holds of a table's pending items: an export of N files in items of 100 files each,
put into a SQLite store, then read whole as a sync reads them (`pending_items`), its memory traced.

A sync keeps them for its passes (`state.PendingOnce`); this is what paging them would save.

    python -m bench.pending_memory [--files 100000 1000000]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
import tracemalloc
import uuid
from pathlib import Path
from typing import Any

from icecdc.model import ItemKind, WorkItem
from icecdc.planning import EXPORT_FILES_PER_ITEM
from icecdc.state.sqlite import SqliteStateStore

NAME = "db.events"


def lake_path(n: int) -> str:
    """A data file's path as a partitioned Iceberg table on S3 names it (115 bytes)."""
    return f"s3://lake-bucket/warehouse/db.db/events/data/part={n}/00000-{n % 7}-{uuid.uuid4()}-00001.parquet"


def measure(files: int) -> dict[str, Any]:
    """The pending items of an export of `files` files: how long they take to read, what they hold."""
    groups = -(-files // EXPORT_FILES_PER_ITEM)
    with tempfile.TemporaryDirectory(prefix="icecdc-pending-") as workdir:
        store = SqliteStateStore(Path(workdir) / "state.db")
        for first in range(0, groups, 1000):
            store.put_items(
                WorkItem(NAME, "t-uuid", ItemKind.EXPORT, 1, 1, group, groups, _paths(group, files))
                for group in range(first, min(first + 1000, groups))
            )
        tracemalloc.start()
        started = time.perf_counter()
        pending = store.pending_items(NAME)
        seconds = time.perf_counter() - started
        held, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        store.close()
    return {
        "files": sum(len(i.added_data_files) for i in pending),
        "items": len(pending),
        "read_seconds": round(seconds, 2),
        "held_mib": round(held / 2**20, 1),
        "peak_while_read_mib": round(peak / 2**20, 1),
        "bytes_per_file": round(held / max(1, files)),
    }


def _paths(group: int, files: int) -> tuple[str, ...]:
    first = group * EXPORT_FILES_PER_ITEM
    return tuple(lake_path(n) for n in range(first, min(first + EXPORT_FILES_PER_ITEM, files)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, nargs="+", default=[100_000, 1_000_000])
    for files in parser.parse_args().files:
        print(json.dumps(measure(files)), flush=True)


if __name__ == "__main__":
    main()
