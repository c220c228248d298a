"""`python -m bench`: the measurements that share one process (one Spark, osmem and the bench sink),
into docs/bench/results-<scale>.json, then the report.

    python -m bench [--scale smoke|default|full]   sizes: bench/scales.py (BENCH_SCALE sets the default)
    python -m bench --only compare probe           some measurements; the others of that scale are kept
    python -m bench --only export_2m               the 2,000,000-row export (`make bench-export-2m`; not in a plain run)
    python -m bench --only export_10m              a 10^7-row export and a 1 % update of it (in `export` at full scale)
    python -m bench --report-only                  redraw the report from the JSON already in docs/bench
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import time

from osmem_server import OsmemServer

from bench import report
from bench.batching import batching
from bench.export_2m import export_2m
from bench.export_speed import export_10m, export_speed
from bench.harness import sparklog
from bench.harness.environment import RESULTS, fresh_workdir, machine, spark_settings, start_spark
from bench.harness.sampling import MemorySampler
from bench.harness.session import Bench
from bench.harness.sink import SinkServer
from bench.memory_probe import memory_probe
from bench.projection_cost import projection_cost
from bench.scales import SCALES
from bench.sink_efficiency import sink_efficiency
from bench.sync_vs_peer import compare
from bench.throughput import throughput
from bench.update_cost import cost_scaling

# What a plain run measures, in order (results keys); osmem serves the first four, the bench sink the others.
MEASUREMENTS = {
    "compare": compare,
    "sink": sink_efficiency,
    "scaling": cost_scaling,
    "batching": batching,
    "throughput": throughput,
    "probe": memory_probe,
    "export": export_speed,
    "projection": projection_cost,
}
ON_REQUEST = {"export_2m": export_2m, "export_10m": export_10m}  # long: their own make targets


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench")
    parser.add_argument("--scale", default=os.environ.get("BENCH_SCALE", "default"), choices=sorted(SCALES))
    parser.add_argument("--only", nargs="+", choices=sorted({**MEASUREMENTS, **ON_REQUEST}), default=list(MEASUREMENTS))
    parser.add_argument("--report-only", action="store_true")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(message)s")
    logging.getLogger("opensearch").setLevel(logging.ERROR)  # a 404 icecdc expects (an alias not there yet) is no warning
    RESULTS.mkdir(parents=True, exist_ok=True)
    if not args.report_only:
        run(SCALES[args.scale].name, args.only)
    report.write_all()


def run(scale_name: str, only: list[str]) -> None:
    path = RESULTS / f"results-{scale_name}.json"
    # A partial run (--only) updates its measurements and keeps the others of the same scale.
    results = json.loads(path.read_text()) if path.exists() else {}
    earlier = results.get("machine", {}).get("cpu")  # what the measurements kept from earlier runs ran on
    for name in results.get("dates", {}):
        results.setdefault("cpus", {}).setdefault(name, earlier)
    results.update({"scale": scale_name, "machine": machine(), "spark": spark_settings()})
    workdir = fresh_workdir()
    server = OsmemServer.start(japanese=False)
    sink = SinkServer.start()
    spark = start_spark(workdir)
    sampler = MemorySampler(server.pid, spark, sink_pid=sink.pid)
    bench = Bench(workdir, spark, server.url, sampler, SCALES[scale_name], sink.url, sink.pid)
    try:
        for name in only:
            started = time.monotonic()
            print(f"bench[{scale_name}]: {name} …", flush=True)
            results[name] = {**MEASUREMENTS, **ON_REQUEST}[name](bench)
            results.setdefault("dates", {})[name] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
            # The machine of each measurement: a partial run keeps others measured elsewhere.
            results.setdefault("cpus", {})[name] = results["machine"]["cpu"]
            print(f"bench[{scale_name}]: {name} done in {time.monotonic() - started:.0f}s", flush=True)
            path.write_text(json.dumps(results, indent=1, sort_keys=True) + "\n")
    finally:
        spark.stop()  # closes the event log
        sampler.close()
        sink.close()
        server.close()
    sparklog.attach(results, sparklog.phase_metrics(workdir / sparklog.EVENTS))
    path.write_text(json.dumps(results, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
