"""One icecdc sync in a process tree of its own (a fresh driver, JVM and Python workers), sampled from
outside, so each process's peak RSS belongs to that sync: the bench's own JVM keeps what it took.

    python -m bench.harness.isolated CONFIG.json TABLE [SPARK_KEY=VALUE ...]   (the child; prints its result as one JSON line)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from bench.harness.environment import REPO, WORK
from bench.harness.gclog import jvm_heap
from bench.harness.sampling import MemorySampler

RESULT = "bench-isolated-result: "  # the child's stdout line that carries its result
_JAVA_OPTIONS = "spark.driver.extraJavaOptions"


def run_sync(config: dict[str, Any], table: str, label: str, spark_conf: dict[str, str] | None = None) -> dict[str, Any]:
    """Sync `table` under `config` (a config's YAML as a dict) in a child process; its result with
    the peak RSS of each part of the child's tree, over the child's whole life (MiB). `spark_conf`:
    Spark settings over the bench's."""
    path = WORK / "isolated" / f"{label}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(config))
    settings = [f"{k}={v}" for k, v in (spark_conf or {}).items()]
    process = subprocess.Popen(
        [sys.executable, "-m", "bench.harness.isolated", str(path), table, *settings], cwd=REPO, stdout=subprocess.PIPE
    )
    sampler = MemorySampler(opensearch_pid=-1, root_pid=process.pid, interval=0.1)
    try:
        with sampler.phase() as (peaks, _):
            out, _ = process.communicate()
    finally:
        sampler.close()
    if process.returncode != 0:
        raise RuntimeError(f"bench: the isolated sync {label!r} failed (exit {process.returncode}); its stderr is above")
    lines = [line for line in out.decode().splitlines() if line.startswith(RESULT)]
    result: dict[str, Any] = json.loads(lines[-1].removeprefix(RESULT))
    memory = {k: round(v, 1) for k, v in asdict(peaks).items() if k not in ("opensearch", "jvm_heap")}
    return {
        **result,
        "memory_mib": memory,
        "wall_seconds_with_start": result["spark_start_seconds"] + result["seconds"],
        "load_average_after": [round(x, 2) for x in os.getloadavg()],  # 1, 5, 15 min: the cores are shared
    }


def main() -> None:
    """The child: the sync on a Spark of the bench's settings without Iceberg's runtime, timed without the JVM's start."""
    from bench.harness.environment import start_spark
    from bench.harness.session import counters
    from icecdc.config import parse_config
    from icecdc.sync import sync

    config_path, table = sys.argv[1], sys.argv[2]
    spark_conf = dict(setting.split("=", 1) for setting in sys.argv[3:])
    config = parse_config(json.loads(Path(config_path).read_text()))
    gc_log = Path(config_path).with_suffix(".gc.log")
    gc_log.unlink(missing_ok=True)
    spark_conf[_JAVA_OPTIONS] = f"{spark_conf.get(_JAVA_OPTIONS, '')} -Xlog:gc:file={gc_log}".strip()
    started = time.perf_counter()
    spark = start_spark(Path(config_path).parent, iceberg=False, extra=spark_conf)
    spark.sparkContext.parallelize(range(4), 2).count()  # the executors' Python workers start here, not in the sync
    spark_start = time.perf_counter() - started
    try:
        started = time.perf_counter()
        (result,) = sync(config, spark, [table])
        seconds = time.perf_counter() - started
    finally:
        spark.stop()
    heap = jvm_heap(gc_log.read_text())
    print(
        RESULT + json.dumps({"seconds": seconds, "spark_start_seconds": spark_start, "jvm_heap_mib": heap, **counters(result)}),
        flush=True,
    )


if __name__ == "__main__":
    main()
