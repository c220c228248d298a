"""This machine's ceiling for an export's work: Parquet decode + one JSON document per row, no
network (pyarrow reads the files, each row becomes a dict and JSON text by one reused encoder).

On one core it says how close an export's rows/s per core come to what the machine can do. Run as
one process, then as two at once on two cores, it says how much faster this machine does twice the
work on two cores than once on one: the most a 2-core in-process sync can gain over a 1-core one,
whatever icecdc does (a 2-vCPU VM shares its host; two busy vCPUs each run slower than one alone).

    python -m bench.harness.ceiling FILE...   every row of the files; prints rows and CPU seconds as JSON
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterable

import pyarrow.parquet as pq


def decode_and_serialize(paths: Iterable[str]) -> int:
    """Every row of the Parquet files at `paths` decoded and serialized; the number of rows."""
    encoder = json.JSONEncoder(default=str, separators=(",", ":"), ensure_ascii=False)
    rows = 0
    for path in paths:
        for batch in pq.ParquetFile(path.removeprefix("file:")).iter_batches():
            for row in batch.to_pylist():
                encoder.encode(row)
                rows += 1
    return rows


def main(paths: list[str]) -> None:
    started = time.process_time()
    rows = decode_and_serialize(paths)
    print(json.dumps({"rows": rows, "cpu_seconds": time.process_time() - started}))


if __name__ == "__main__":
    main(sys.argv[1:])
