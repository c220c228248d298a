"""Memory and time of what the bench measures: RSS of a process tree sampled in phases, and whole
commands timed from outside, process start to exit."""

from __future__ import annotations

import os
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import Any

import psutil

from bench.harness import sparklog
from bench.harness.environment import REPO, shown

POLL_SECONDS = 0.025  # how often `whole_command` asks `watch` (commit to searchable)


@dataclass
class MemoryPeaks:
    """Peak resident memory (MiB) of each part during one phase."""

    driver_python: float = 0.0  # this process: planning, the driver side of icecdc
    jvm: float = 0.0  # Spark's JVM: driver and executor in one (local mode)
    jvm_heap: float = 0.0  # that JVM's heap in use at its peak within the phase (garbage included)
    python_workers: float = 0.0  # executor-side Python processes (PySpark daemon + workers; in-process workers), summed
    python_worker_largest: float = 0.0  # the largest of them
    largest_process: float = 0.0  # the largest single process of the sampled tree, the server excluded
    opensearch: float = 0.0  # the osmem server
    bench_sink: float = 0.0  # the bench's in-memory sink (bench/harness/sink.py)

    def update(self, sample: dict[str, float]) -> None:
        for name, value in sample.items():
            setattr(self, name, max(getattr(self, name), value))


class MemorySampler:
    """Samples the RSS of a process tree every `interval` seconds; `phase()` reports the peaks within it,
    the JVM's heap peak of the phase, and names the phase's Spark jobs (`sparklog.PHASE`).

    A JVM rarely returns memory to the OS, so its RSS is the peak so far (an upper bound); see docs/bench."""

    def __init__(
        self, opensearch_pid: int, spark: Any = None, interval: float = 0.2, root_pid: int | None = None, sink_pid: int = -1
    ) -> None:
        self._me = psutil.Process(root_pid)  # the tree sampled: this process, or a child's
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
        try:
            root_name = self._me.name()  # the in-process engine's workers are forks of the root: its name
        except psutil.Error:
            root_name = "python"
        for child in children:
            try:
                rss, name = child.memory_info().rss, child.name()
            except psutil.Error:  # a worker that exited between listing and reading
                continue
            kind = "jvm" if name == "java" else "python_workers" if "python" in name or name == root_name else None
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

    def cut(self) -> MemoryPeaks:
        """The peaks since the last cut (or since now, at the first), and a new phase from now:
        phases delimited by events rather than by a block (no heap peaks, no Spark job names)."""
        done = self._current or MemoryPeaks()
        done.update(self._sample())
        self._current = MemoryPeaks()
        self._current.update(self._sample())
        return done

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
    """The block's wall time and memory peaks, as one phase of `sampler`."""
    result = Measure()
    with sampler.phase() as (peaks, result.spark_phase):
        started = time.perf_counter()
        try:
            yield result
        finally:
            result.seconds = time.perf_counter() - started
    result.memory = peaks


def whole_command(
    argv: list[str], watch: Callable[[], bool] | None = None, since: float | None = None, check: bool = True
) -> dict[str, Any]:
    """One command, process start to exit: wall time, the peak RSS of its largest process and
    the parts of its tree (MiB), the load average as it started; with `watch`, the seconds
    until `watch()` first held (asked every POLL_SECONDS while the command runs), counted from
    `since` (a time.perf_counter() before the start) or else from the start."""
    load = os.getloadavg()
    started = time.perf_counter()
    since = started if since is None else since
    process = subprocess.Popen(argv, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    sampler = MemorySampler(opensearch_pid=-1, root_pid=process.pid, interval=0.05)
    seen = None
    try:
        with sampler.phase() as (peaks, _):
            if watch is not None:
                while seen is None and process.poll() is None:
                    if watch():
                        seen = time.perf_counter() - since
                    else:
                        time.sleep(POLL_SECONDS)
            out, err = process.communicate()
    finally:
        sampler.close()
    seconds = time.perf_counter() - started
    if check and process.returncode != 0:
        raise RuntimeError(f"bench: {' '.join(argv)} failed (exit {process.returncode}): {err[-3000:]}")
    if watch is not None and seen is None:
        if not watch():
            raise RuntimeError(f"bench: {' '.join(argv)} exited without making the commit searchable")
        seen = time.perf_counter() - since
    return {
        "command": " ".join(shown(a) for a in argv),
        "seconds": round(seconds, 3),
        **({"watched_seconds": round(seen, 3), "started_after_seconds": round(started - since, 3)} if seen is not None else {}),
        "largest_process_mib": round(peaks.largest_process),
        # each part's peak, summed: the parts peak at different moments, so this bounds the tree's peak
        "tree_mib": round(peaks.driver_python + peaks.jvm + peaks.python_workers),
        "memory_mib": {k: round(v) for k, v in asdict(peaks).items() if k not in ("opensearch", "bench_sink", "jvm_heap")},
        "load_average_at_start": [round(x, 2) for x in load],
        "stdout": out,
    }
