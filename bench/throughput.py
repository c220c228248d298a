"""The measurements of issue 12 on the bench sink (bench/sink_server.py), where the server is not the
bottleneck, so the figures are icecdc's own:

- `throughput` (item 5): icecdc's rows/s per core for an export and for a carryover-heavy update
  (one copy-on-write UPDATE that rewrites every file of the table), beside the peer's
  (`bench/peer.py`: Spark read + bulk; `create_changelog_view` + bulk) on the same sink and Spark.
- `memory_probe` (item 1): an unpartitioned copy-on-write table where one UPDATE touches one row in
  every file, at two sizes 4× apart in files of one size, each synced in a process tree of its own
  (`bench/isolated.py`): the peak RSS of the largest process and the time, larger over smaller.
- `export_2m` (the issue's closing note): the export of 2,000,000 rows on 2 cores, with the peak
  RSS of each process (`make bench-export-2m`).

Every sync here runs on Spark (`engine: spark` where icecdc offers a choice): the figures are per
core of `local[2]`.
"""

from __future__ import annotations

import time
from typing import Any

import psutil
from pyiceberg.expressions import In
from pyiceberg.table import Table

from bench import isolated, peer
from bench.env import CORES, config_dict, icecdc_config, measured, on_spark
from bench.suite import Bench, _counters, _measure, _plan, check_indexes
from bench.tables import create_table, update_every_file
from icecdc.catalog import identifier_columns
from icecdc.config import Config, parse_config
from icecdc.documents import DocumentMapper, encode_document
from icecdc.reading.planner import file_tasks
from icecdc.reading.tasks import FileTask, RewriteTask
from icecdc.verify import index_documents, table_documents

EXPORT_2M_ROWS = 2_000_000
EXPORT_2M_ROWS_PER_FILE = 100_000  # 20 files, as tests/test_scale.py's 2-million-row run


def _config(bench: Bench, table: str, index: str, export: bool = True, **batch: int) -> Config:
    sections: dict[str, Any] = {**on_spark(), **({"batch": batch} if batch else {})}
    return icecdc_config(bench.workdir, bench.sink_url, table, index, state=index, export=export, **sections)


class _SinkCpu:
    """CPU seconds the bench sink spent during a phase (to show it is not what the phase waited for)."""

    def __init__(self, pid: int) -> None:
        self._process = psutil.Process(pid)
        self.seconds = 0.0

    def __enter__(self) -> _SinkCpu:
        self._start = self._cpu()
        return self

    def __exit__(self, *_: object) -> None:
        self.seconds = self._cpu() - self._start

    def _cpu(self) -> float:
        times = self._process.cpu_times()
        return float(times.user + times.system)


def throughput(bench: Bench) -> dict[str, Any]:
    """icecdc vs the peer, export and carryover-heavy update of one table, rows/s per core, on the bench sink."""
    scale, spark, name = bench.scale, bench.spark, "db.throughput"
    rows = scale.throughput_rows
    create_table(spark, name, rows, scale.throughput_rows_per_file)
    config = _config(bench, name, "tp-ice")
    files = _data_files(bench.table(name))
    # export: icecdc's first sync of the table, and the peer's initial load (Spark reads the table, executors bulk)
    with _SinkCpu(bench.sink_pid) as ice_sink:
        export, export_result = bench.sync(config)
    with _SinkCpu(bench.sink_pid) as peer_sink, measured(bench.sampler) as load:
        peer.load(spark, name, "tp-peer", bench.sink_url)
    start = bench.snapshot_id(name)
    # update: one row in every file, so every file is rewritten and all its other rows are carryovers
    before = bench.table(name)
    rewritten_rows = sum(before.inspect.files().column("record_count").to_pylist())
    changed = update_every_file(spark, name)
    end = bench.snapshot_id(name)
    with _SinkCpu(bench.sink_pid) as ice_update_sink:
        update, update_result = bench.sync(config)
    with _SinkCpu(bench.sink_pid) as peer_update_sink, measured(bench.sampler) as peer_update:
        peer.sync(spark, name, "tp-peer", bench.sink_url, start, end)
    assert bench.sink_client is not None
    check = check_indexes(bench, bench.sink_client, config, name, "tp-ice", "tp-peer")

    def side(measure: Any, rows_done: int, sink: _SinkCpu, result: Any = None) -> dict[str, Any]:
        counters = _counters(result) if result is not None else {}
        per_core = rows_done / measure.seconds / CORES
        return {**_measure(measure), **counters, "rows_per_second_per_core": per_core, "sink_cpu_seconds": sink.seconds}

    export_side = {"icecdc": side(export, rows, ice_sink, export_result), "peer": side(load, rows, peer_sink)}
    update_side = {
        "icecdc": side(update, rewritten_rows, ice_update_sink, update_result),
        "peer": side(peer_update, rewritten_rows, peer_update_sink),
    }
    for sides in (export_side, update_side):
        sides["ratio_icecdc_to_peer_rows_per_second"] = (
            sides["icecdc"]["rows_per_second_per_core"] / sides["peer"]["rows_per_second_per_core"]
        )
    for index in ("tp-ice", "tp-peer"):
        bench.drop_index(index, sink=True)  # the sink keeps everything in memory
    return {
        "table": {"rows": rows, "rows_per_file": scale.throughput_rows_per_file, "data_files": files, "partitioned": True},
        "cores": CORES,
        "export": export_side,
        "update": {**update_side, "rows_in_rewritten_files": rewritten_rows, "rows_changed": len(changed)},
        "check": check,
    }


# The probe's small budget for one task's rewrite, below the smaller table's rewrite at every scale,
# so that both sizes take the path of a rewrite too large for one task: cut into ranges of the key
# (`icecdc.reading.ranges`), or, where the manifests keep no bounds of the key, streamed file by file
# through the shuffle. The `default` variant runs with icecdc's default budget, whatever it is.
PROBE_BUDGET = 256 * 2**10

# (the tables' key bounds, the batch settings of the sync): each variant syncs the same commit of its tables.
PROBE_VARIANTS: dict[str, tuple[bool, dict[str, int]]] = {
    "default": (True, {}),
    "cut": (True, {"max_rewrite_bytes": PROBE_BUDGET}),
    "no_bounds": (False, {"max_rewrite_bytes": PROBE_BUDGET}),
}


def memory_probe(bench: Bench) -> dict[str, Any]:
    """Issue 12 item 1: one UPDATE touching one row in every file of an unpartitioned copy-on-write
    table, at two sizes in files of one size, each sync in a process tree of its own."""
    scale = bench.scale
    points = []
    for rows in scale.probe_rows:
        point: dict[str, Any] = {"rows": rows}
        for key_bounds in (True, False):
            name = f"db.probe_{rows}" + ("" if key_bounds else "_no_bounds")
            variants = {v: batch for v, (bounds, batch) in PROBE_VARIANTS.items() if bounds == key_bounds}
            create_table(bench.spark, name, rows, scale.probe_rows_per_file, partitioned=False, key_bounds=key_bounds)
            configs = {
                variant: config_dict(
                    bench.workdir,
                    bench.sink_url,
                    name,
                    f"probe-{rows}-{variant}",
                    state=f"probe-{rows}-{variant}",
                    export=False,
                    **on_spark(),
                    **({"batch": batch} if batch else {}),
                )
                for variant, batch in variants.items()
            }
            for config in configs.values():
                bench.sync(parse_config(config))  # the checkpoint: the current snapshot (nothing to write)
            files_before = _data_files(bench.table(name))
            changed = update_every_file(bench.spark, name)
            table = bench.table(name)
            for variant, config in configs.items():
                parsed = parse_config(config)
                tasks = file_tasks(*_plan(bench, parsed), ("id",), rewrite_budget=parsed.batch.max_rewrite_bytes)
                result = isolated.run_sync(config, name, f"probe-{rows}-{variant}")
                point[variant] = {
                    **result,
                    "data_files_before": files_before,
                    "data_files_after": _data_files(table),
                    "rows_changed": len(changed),
                    "max_rewrite_bytes": parsed.batch.max_rewrite_bytes,
                    "planned": _planned(tasks),
                    "index_equals_changed_rows": index_documents(bench.sink_client, f"probe-{rows}-{variant}")
                    == _documents(table, parsed, changed),
                }
                bench.drop_index(f"probe-{rows}-{variant}", sink=True)
        points.append(point)
        print(f"bench: probe {rows:,} rows: " + ", ".join(_probe_line(v, point[v]) for v in PROBE_VARIANTS), flush=True)
    small, large = points[0], points[-1]
    return {
        "sizes": points,
        "ratio_rows": large["rows"] / small["rows"],
        **{
            variant: {
                "ratio_largest_process_rss": large[variant]["memory_mib"]["largest_process"]
                / small[variant]["memory_mib"]["largest_process"],
                "ratio_seconds": large[variant]["seconds"] / small[variant]["seconds"],
            }
            for variant in PROBE_VARIANTS
        },
    }


def _probe_line(variant: str, result: dict[str, Any]) -> str:
    memory = result["memory_mib"]
    return f"{variant} {result['seconds']:.1f} s, largest process {memory['largest_process']:,.0f} MiB (jvm {memory['jvm']:,.0f}, worker {memory['python_worker_largest']:,.0f})"


def _planned(tasks: list[Any]) -> dict[str, int]:
    """How the planner cut the rewrite: whole into one task, into key ranges, or file by file (streamed through the shuffle)."""
    rewrites = [t for t in tasks if isinstance(t, RewriteTask)]
    whole = [t for t in rewrites if getattr(t, "key_range", None) is None]
    files = [t for t in tasks if isinstance(t, FileTask)]
    return {
        "whole_rewrite_tasks": len(whole),
        "key_range_tasks": len(rewrites) - len(whole),
        "rewrite_bytes": sum(
            {f.data_file.file_path: f.data_file.file_size_in_bytes for t in rewrites for f in t.removed + t.added}.values()
        ),
        "file_tasks": len(files),
        "file_task_bytes": sum(t.data_file.file_size_in_bytes for t in files),
    }


def _documents(table: Table, config: Config, ids: list[int]) -> dict[str, str]:
    """id → document text of the rows with these ids (what the index of a sync of their change holds)."""
    mapper = DocumentMapper(table.schema(), identifier_columns(table, config.tables[0]))
    documents = {}
    for batch in table.scan(row_filter=In("id", ids)).to_arrow_batch_reader():
        for row in batch.to_pylist():
            document = mapper.document(row)
            documents[mapper.document_id(document)] = encode_document(document)
    return documents


def export_2m(bench: Bench) -> dict[str, Any]:
    """The export of 2,000,000 rows on 2 cores (`local[2]`) into the bench sink, in a process tree of
    its own: wall time, rows/s, the peak RSS of each process; then index == table."""
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
        "data_files": _data_files(table),
        "table_bytes": sum(table.inspect.files().column("file_size_in_bytes").to_pylist()),
        "create_table_seconds": create_seconds,
        **result,
        "rows_per_second": EXPORT_2M_ROWS / result["seconds"],
        "rows_per_second_per_core": EXPORT_2M_ROWS / result["seconds"] / CORES,
        "index_equals_table": documents == expected,
    }


def _data_files(table: Table) -> int:
    return int(table.inspect.files().num_rows)
