"""icecdc's rows per second per core, export and carryover-heavy update of one table, beside the
peer's, on the bench sink so that the figures are icecdc's own (results key `throughput`)."""

from __future__ import annotations

from typing import Any

import psutil

from bench.harness import peer
from bench.harness.environment import CORES, icecdc_config, on_spark
from bench.harness.sampling import measured
from bench.harness.session import Bench, check_indexes, counters, data_files, measure_fields
from bench.harness.tables import create_table, update_every_file


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
    """The export (icecdc's first sync, the peer's initial load), then one UPDATE rewriting every
    file, synced by both; every icecdc sync on Spark, so per core means per core of `local[2]`."""
    scale, spark, name = bench.scale, bench.spark, "db.throughput"
    rows = scale.throughput_rows
    create_table(spark, name, rows, scale.throughput_rows_per_file)
    config = icecdc_config(bench.workdir, bench.sink_url, name, "tp-ice", state="tp-ice", **on_spark())
    files = data_files(bench.table(name))
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
        counted = counters(result) if result is not None else {}
        per_core = rows_done / measure.seconds / CORES
        return {**measure_fields(measure), **counted, "rows_per_second_per_core": per_core, "sink_cpu_seconds": sink.seconds}

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
