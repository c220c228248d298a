"""The bench's moving parts: one local Spark with Iceberg's runtime, one osmem server, one catalog.

Everything the bench creates lives under `.build/bench/suite/` (gitignored) and is wiped at the start
of a run, so every run starts from the same empty catalog and state.
"""

from __future__ import annotations

import importlib.util
import os
import platform
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import psutil

from bench import sparklog
from icecdc.config import Config, parse_config

REPO = Path(__file__).resolve().parents[1]
WORK = REPO / ".build" / "bench"
RESULTS = REPO / "docs" / "bench"
CATALOG = "lake"  # pyiceberg's SqlCatalog name and Spark's catalog name must match (see tests/support/spark_sql.py)
CORES = 2  # the reference machine; both tools get the same local[2]


def _spark_sql_module() -> ModuleType:
    # tests/support/spark_sql.py is the one place that knows where the Iceberg jars come from; loaded by
    # path so that the bench runs from any directory.
    spec = importlib.util.spec_from_file_location("icecdc_tests_spark_sql", REPO / "tests" / "support" / "spark_sql.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def spark_settings() -> dict[str, str]:
    """The one set of Spark settings both tools run under (a dict so the report can print it)."""
    return {
        "spark.master": f"local[{CORES}]",
        "spark.driver.memory": "6g",  # local mode: driver and executor are one JVM
        "spark.sql.shuffle.partitions": str(CORES),
        "spark.default.parallelism": str(CORES),
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
    }


def start_spark(workdir: Path, iceberg: bool = True, extra: dict[str, str] | None = None) -> Any:
    """A SparkSession under `spark_settings()`; with `iceberg`, Iceberg's runtime and the catalog `lake`
    (the bench's SQLite catalog, for Spark SQL's writes and the peer) and an event log per measured
    phase. Without: what icecdc alone needs (it reads with pyiceberg), as in `bench.isolated`'s runs."""
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # loopback only
    settings = {**spark_settings(), **(extra or {})}
    if iceberg:
        runtime = _spark_sql_module().iceberg_spark_conf()
        if not runtime:
            raise SystemExit("bench: Iceberg's Spark runtime is unavailable; run `make iceberg-jars`")
        events = workdir / sparklog.EVENTS
        events.mkdir()
        settings = {
            **runtime,
            **settings,
            "spark.eventLog.enabled": "true",  # read per measured phase by bench/sparklog.py
            "spark.eventLog.dir": events.as_uri(),
            f"spark.sql.catalog.{CATALOG}.uri": f"jdbc:sqlite:{workdir / 'catalog.db'}",
            f"spark.sql.catalog.{CATALOG}.warehouse": (workdir / "warehouse").as_uri(),
        }
    builder = SparkSession.builder.appName("icecdc-bench")
    for key, value in settings.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    if iceberg:
        session.sql(f"CREATE NAMESPACE IF NOT EXISTS {CATALOG}.db")
    return session


def fresh_workdir() -> Path:
    """The suite's own directory under `.build/bench/`, emptied (other tools' directories beside it are left alone)."""
    workdir = WORK / "suite"
    shutil.rmtree(workdir, ignore_errors=True)
    workdir.mkdir(parents=True)
    return workdir


def icecdc_config(
    workdir: Path, opensearch_url: str, table: str, index: str, state: str, export: bool = True, **sections: Any
) -> Config:
    """A config for one table of the bench catalog, with its own state store (so syncs do not share checkpoints)."""
    return parse_config(config_dict(workdir, opensearch_url, table, index, state, export, **sections))


def config_dict(
    workdir: Path, opensearch_url: str, table: str, index: str, state: str, export: bool = True, **sections: Any
) -> dict[str, Any]:
    """`icecdc_config`'s YAML as a dict; `sections` adds or replaces top-level sections (`batch`, `engine`)."""
    return {
        "catalog": {
            "name": CATALOG,
            "type": "sql",
            "uri": f"sqlite:///{workdir / 'catalog.db'}",
            "warehouse": (workdir / "warehouse").as_uri(),
        },
        "state": {"type": "sqlite", "path": str(workdir / f"state-{state}.db")},
        "opensearch": {"url": opensearch_url},
        "spark": {"master": f"local[{CORES}]"},
        "tables": [{"name": table, "index": index, "export": export}],
        **sections,
    }


def on_spark() -> dict[str, Any]:
    """The config sections that make every pass run on Spark, where icecdc can choose (an `engine`
    section, when this icecdc has one: small passes may otherwise run in-process, without Spark)."""
    return {"engine": {"use": "spark"}} if "engine" in Config.model_fields else {}


@dataclass
class MemoryPeaks:
    """Peak resident memory (MiB) of each part during one phase."""

    driver_python: float = 0.0  # this process: planning, the driver side of icecdc
    jvm: float = 0.0  # Spark's JVM: driver and executor in one (local mode)
    jvm_heap: float = 0.0  # that JVM's heap in use at its peak within the phase (garbage included)
    python_workers: float = 0.0  # PySpark's executor-side Python processes (daemon + workers), summed
    python_worker_largest: float = 0.0  # the largest of them
    largest_process: float = 0.0  # the largest single process of the sampled tree, the server excluded
    opensearch: float = 0.0  # the osmem server
    bench_sink: float = 0.0  # the bench's in-memory sink (bench/sink_server.py)

    def update(self, sample: dict[str, float]) -> None:
        for name, value in sample.items():
            setattr(self, name, max(getattr(self, name), value))


class MemorySampler:
    """Samples RSS of this process tree every `interval` seconds; `phase()` reports the peaks within it.

    A JVM rarely returns memory to the OS, so its RSS is the peak so far, an upper bound. Its heap
    figure is per phase: the JVM's own peak usage of each heap pool, reset when a phase starts.
    Each phase also names the Spark jobs it runs (`sparklog.PHASE`), so Spark's event log can be
    read per phase afterwards."""

    def __init__(
        self, opensearch_pid: int, spark: Any = None, interval: float = 0.2, root_pid: int | None = None, sink_pid: int = -1
    ) -> None:
        self._me = psutil.Process(root_pid)  # the tree sampled: this process, or another one (`bench.isolated`)
        self._servers = {opensearch_pid: "opensearch", sink_pid: "bench_sink"}
        self._spark = spark
        self._heap_pools = _heap_pools(spark._jvm) if spark is not None else []
        self._phases = 0
        self._run_id = time.strftime("%Y%m%dT%H%M%S")  # phase names stay unique across partial runs
        self._interval = interval
        self._current: MemoryPeaks | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _sample(self) -> dict[str, float]:
        try:
            root = self._me.memory_info().rss
            children = self._me.children(recursive=True)
        except psutil.Error:  # the sampled process has exited
            return {}
        sample = {"driver_python": root, "jvm": 0.0, "python_workers": 0.0, "opensearch": 0.0, "bench_sink": 0.0}
        largest = {"python_worker_largest": 0.0, "largest_process": root}
        for child in children:
            try:
                rss, name = child.memory_info().rss, child.name()
            except psutil.Error:  # a worker that exited between listing and reading
                continue
            kind = "jvm" if name == "java" else "python_workers" if "python" in name else None
            part = self._servers.get(child.pid, kind)
            if part:
                sample[part] += rss
            if part == "python_workers":
                largest["python_worker_largest"] = max(largest["python_worker_largest"], rss)
            if part not in self._servers.values():
                largest["largest_process"] = max(largest["largest_process"], rss)
        return {k: v / 2**20 for k, v in {**sample, **largest}.items()}

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            current = self._current
            if current is not None:
                current.update(self._sample())

    @contextmanager
    def phase(self) -> Iterator[tuple[MemoryPeaks, str]]:
        """(the phase's memory peaks, filled in when it ends; the description its Spark jobs carry)."""
        self._phases += 1
        name = f"{sparklog.PHASE}{self._run_id}-{self._phases}"
        peaks = MemoryPeaks()
        peaks.update(self._sample())
        for pool in self._heap_pools:
            pool.resetPeakUsage()
        if self._spark is not None:
            self._spark.sparkContext.setJobDescription(name)
        self._current = peaks
        try:
            yield peaks, name
        finally:
            peaks.update(self._sample())
            # Each pool's peak, summed: pools peak at different moments, so this bounds the heap's peak from above.
            peaks.jvm_heap = sum(pool.getPeakUsage().getUsed() for pool in self._heap_pools) / 2**20
            if self._spark is not None:
                self._spark.sparkContext.setJobDescription(None)
            self._current = None

    def close(self) -> None:
        self._stop.set()
        self._thread.join()


def _heap_pools(jvm: Any) -> list[Any]:
    """The JVM's heap memory pools (eden, survivor, old generation), through py4j."""
    heap = jvm.java.lang.management.MemoryType.HEAP
    return [pool for pool in jvm.java.lang.management.ManagementFactory.getMemoryPoolMXBeans() if pool.getType() == heap]


@dataclass
class Measure:
    """Wall time and memory peaks of one measured step."""

    seconds: float = 0.0
    memory: MemoryPeaks = field(default_factory=MemoryPeaks)
    spark_phase: str = ""  # the description of its Spark jobs in the event log


@contextmanager
def measured(sampler: MemorySampler) -> Iterator[Measure]:
    result = Measure()
    with sampler.phase() as (peaks, result.spark_phase):
        started = time.perf_counter()
        try:
            yield result
        finally:
            result.seconds = time.perf_counter() - started
    result.memory = peaks


def machine() -> dict[str, Any]:
    """What the figures were measured on: the report prints it beside them."""
    import opensearchpy
    import pyiceberg
    import pyspark

    cpu = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ),
        platform.processor(),
    )
    java = subprocess.run(["java", "-version"], check=False, capture_output=True, text=True).stderr.splitlines()[0]
    jars = sorted(p.name for p in (REPO / ".build" / "iceberg-jars").glob("iceberg-spark-runtime*.jar"))
    return {
        "cpu": cpu,
        "cores": psutil.cpu_count(),
        "memory_gib": round(psutil.virtual_memory().total / 2**30, 1),
        "os": platform.platform(),
        "python": platform.python_version(),
        "java": java,
        "pyspark": pyspark.__version__,
        "pyiceberg": pyiceberg.__version__,
        "iceberg_spark_runtime": jars[0] if jars else "from ICECDC_SPARK_PACKAGES / ICECDC_ICEBERG_JARS",
        "opensearch_py": opensearchpy.__versionstr__,
        "osmem_server": _version("osmem-server"),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
    }


def _version(distribution: str) -> str:
    from importlib.metadata import version

    return version(distribution)
