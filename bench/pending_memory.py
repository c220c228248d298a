"""What a sync holds of a table's pending items: an export of N files in items of 100 files each,
put into a SQLite store, then read three ways, each one's memory traced:

- whole, with every item's files (`pending_items`), as a sync kept them before;
- as heads (`pending_heads`), as a sync keeps them now (`state.PendingOnce`);
- one pass's bodies: the files of the items a pass of `batch.max_files` takes (`state.ItemBodies`).

    python -m bench.pending_memory [--files 100000 1000000] [--pass-files 10000]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
import tracemalloc
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from icecdc.model import ItemKind, WorkItem
from icecdc.planning import EXPORT_FILES_PER_ITEM
from icecdc.state import ItemBodies
from icecdc.state.sqlite import SqliteStateStore

NAME = "db.events"
T = TypeVar("T")


def lake_path(n: int) -> str:
    """A data file's path as a partitioned Iceberg table on S3 names it (115 bytes)."""
    return f"s3://lake-bucket/warehouse/db.db/events/data/part={n}/00000-{n % 7}-{uuid.uuid4()}-00001.parquet"


def measure(files: int, pass_files: int = 10_000) -> dict[str, Any]:
    """The pending items of an export of `files` files: how long each read takes, what it holds."""
    groups = -(-files // EXPORT_FILES_PER_ITEM)
    with tempfile.TemporaryDirectory(prefix="icecdc-pending-") as workdir:
        store = SqliteStateStore(Path(workdir) / "state.db")
        for first in range(0, groups, 1000):
            store.put_items(
                WorkItem(NAME, "t-uuid", ItemKind.EXPORT, 1, 1, group, groups, _paths(group, files))
                for group in range(first, min(first + 1000, groups))
            )
        whole, pending = _traced(lambda: store.pending_items(NAME))
        heads_read, heads = _traced(lambda: store.pending_heads(NAME))
        taken = heads[: max(1, pass_files // EXPORT_FILES_PER_ITEM)]
        pass_read, _ = _traced(lambda: ItemBodies(store, NAME, heads, pass_files).of(taken))
        store.close()
    return {
        "files": sum(len(i.added_data_files) for i in pending),
        "items": len(pending),
        "head_files": sum(h.file_count for h in heads),
        "whole": {**whole, "bytes_per_file": round(whole["held_bytes"] / max(1, files))},
        "heads": heads_read,
        "one_pass_bodies": {**pass_read, "files": pass_files},
    }


def _traced(read: Callable[[], T]) -> tuple[dict[str, Any], T]:
    """`read`'s answer, and its seconds, the memory its answer holds and its peak while it read."""
    tracemalloc.start()
    started = time.perf_counter()
    answer = read()
    seconds = time.perf_counter() - started
    held, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    figures = {"read_seconds": round(seconds, 2), "held_bytes": held, "held_mib": round(held / 2**20, 1)}
    return {**figures, "peak_while_read_mib": round(peak / 2**20, 1)}, answer


def _paths(group: int, files: int) -> tuple[str, ...]:
    first = group * EXPORT_FILES_PER_ITEM
    return tuple(lake_path(n) for n in range(first, min(first + EXPORT_FILES_PER_ITEM, files)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--pass-files", type=int, default=10_000, help="files one pass takes")
    args = parser.parse_args()
    for files in args.files:
        print(json.dumps(measure(files, args.pass_files)), flush=True)


if __name__ == "__main__":
    main()
