"""The export of 2,000,000 rows on 2 cores (`local[2]`) into the bench sink, in a process tree of its
own: wall time, rows/s, the peak RSS of each process; then index == table (results key `export_2m`)."""

from __future__ import annotations

import time
from typing import Any

from bench.harness import isolated
from bench.harness.environment import CORES, config_dict, on_spark
from bench.harness.session import Bench, data_files
from bench.harness.tables import create_table
from icecdc.catalog import identifier_columns
from icecdc.config import parse_config
from icecdc.verify import index_documents, table_documents

EXPORT_2M_ROWS = 2_000_000
EXPORT_2M_ROWS_PER_FILE = 100_000  # 20 files, as tests/test_scale.py's 2-million-row run


def export_2m(bench: Bench) -> dict[str, Any]:
    """Create the table, export it in a child process tree (`isolated.run_sync`), check index == table."""
    name, index = "db.export_2m", "export-2m"
    started = time.perf_counter()
    create_table(bench.spark, name, EXPORT_2M_ROWS, EXPORT_2M_ROWS_PER_FILE)
    create_seconds = time.perf_counter() - started
    config = config_dict(bench.workdir, bench.sink_url, name, index, state=index, **on_spark())
    result = isolated.run_sync(config, name, "export-2m")
    table = bench.table(name)
    expected = dict(table_documents(table, identifier_columns(table, parse_config(config).tables[0])))
    documents = index_documents(bench.sink_client, index)
    bench.drop_index(index, sink=True)
    return {
        "rows": EXPORT_2M_ROWS,
        "rows_per_file": EXPORT_2M_ROWS_PER_FILE,
        "data_files": data_files(table),
        "table_bytes": sum(table.inspect.files().column("file_size_in_bytes").to_pylist()),
        "create_table_seconds": create_seconds,
        **result,
        "rows_per_second": EXPORT_2M_ROWS / result["seconds"],
        "rows_per_second_per_core": EXPORT_2M_ROWS / result["seconds"] / CORES,
        "index_equals_table": documents == expected,
    }
