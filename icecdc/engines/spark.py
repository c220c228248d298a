"""The Spark engine: executors read the tasks' files, ONE shuffle by document id brings every
change of a key together, and executors write each key's net change in bulk. The driver holds
the task list and counters only. Exports, backlogs and wide rewrites run here."""

from __future__ import annotations

import math
import os
import re
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import partial
from typing import Any

from py4j.protocol import Py4JJavaError
from pyspark.sql import SparkSession

from icecdc import errors
from icecdc.changelog import ChangeStats
from icecdc.config import SparkConfig
from icecdc.engines.target import Target, Targets, write_keyed_changes
from icecdc.model import Change, ChangeRow, EngineKind
from icecdc.opensearch import open_client
from icecdc.reading.reader import TableReader
from icecdc.reading.tasks import Task, files_read_by
from icecdc.sink import SinkStats, delete_older

BYTES_PER_SLICE = 32 * 2**20  # compressed Parquet; a slice's rows stream through, so this bounds time, not memory


def spark_session(config: SparkConfig) -> SparkSession:
    """A SparkSession with the configured master and settings (Glue supplies its own master)."""
    # Executors must run the interpreter that has icecdc and its dependencies installed.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.appName("icecdc")
    if config.master:
        builder = builder.master(config.master)
    for key, value in config.conf.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


@dataclass(frozen=True)
class SparkEngine:
    spark: SparkSession

    @property
    def kind(self) -> EngineKind:
        return EngineKind.SPARK

    def apply(self, reader: TableReader, tasks: list[Task], target: Target | Targets) -> tuple[ChangeStats, SinkStats]:
        context = self.spark.sparkContext
        carried = context.accumulator(0)  # carryover pairs the readers dropped before the shuffle
        unreadable = context.accumulator(0)  # rows the readers sent to the dead letters
        slices = balanced_slices(tasks, max(context.defaultParallelism, 1))
        changes = context.parallelize(slices, len(slices)).mapPartitions(partial(_read_slices, reader, carried, unreadable))
        by_key = changes.groupByKey(numPartitions=max(context.defaultParallelism, 1))  # the one shuffle
        try:
            per_partition = by_key.mapPartitions(partial(_write_partition, target)).collect()
        except Py4JJavaError as exc:
            raise _executor_error(exc) from exc
        change_stats, sink_stats = (
            ChangeStats(rows=2 * carried.value, carryovers=carried.value),
            SinkStats(dead_lettered=unreadable.value),
        )
        for changes_done, writes_done in per_partition:
            change_stats.add(changes_done)
            sink_stats.add(writes_done)
        return change_stats, sink_stats

    def delete_older(self, target: Target, version: int) -> int:
        """Scan the index in slices on the executors, deleting what is older than `version`."""
        slices = max(self.spark.sparkContext.defaultParallelism, 1)
        deleted = (
            self.spark.sparkContext.parallelize(range(slices), slices)
            .map(lambda i: delete_older(open_client(target.opensearch), target.opensearch, target.index, version, i, slices))
            .sum()
        )
        return int(deleted)


def balanced_slices(tasks: list[Task], cores: int) -> list[list[Task]]:
    """The tasks in Spark partitions of about equal bytes to read: one per core for a small batch,
    up to four per core as the bytes grow (so a slow slice can be balanced by the others).

    Spark's own `parallelize` splits by count, and one rewrite of a large file can outweigh a
    hundred small ones; every Spark task also costs a fixed ~50 ms in PySpark, more than a small
    slice takes to read. Largest first into the lightest slice (LPT): within 4/3 of the best split.
    """
    sizes = {id(task): max(sum(f.file_size_in_bytes for f in files_read_by(task)), 1) for task in tasks}
    wanted = math.ceil(sum(sizes.values()) / BYTES_PER_SLICE)
    count = min(len(tasks), max(cores, min(4 * cores, wanted)))
    slices: list[list[Task]] = [[] for _ in range(count)]
    loads = [0] * count
    for task in sorted(tasks, key=lambda t: sizes[id(t)], reverse=True):
        lightest = loads.index(min(loads))
        slices[lightest].append(task)
        loads[lightest] += sizes[id(task)]
    return slices


def _read_slices(reader: TableReader, carried: Any, unreadable: Any, slices: Iterable[list[Task]]) -> Iterator[Change]:
    return reader.read((task for tasks in slices for task in tasks), carried, unreadable)


def _write_partition(
    target: Target | Targets, keyed_changes: Iterable[tuple[str, Iterable[ChangeRow]]]
) -> Iterator[tuple[ChangeStats, SinkStats]]:
    """Executor side: this partition's keys written; one pair of counters back to the driver."""
    yield write_keyed_changes(target, keyed_changes)


def _executor_error(exc: Py4JJavaError) -> Exception:
    """The IcecdcError an executor raised, rebuilt from the text Spark carried back; else the Spark error."""
    # Executors' exceptions reach the driver only as the text of a Python traceback inside a Java one.
    found = re.findall(r"^icecdc\.errors\.(\w+): (.*)$", str(exc.java_exception), flags=re.MULTILINE)
    if found:
        name, message = found[-1]
        error_class = getattr(errors, name, None)
        if isinstance(error_class, type) and issubclass(error_class, errors.IcecdcError):
            rebuilt: Exception = error_class(message)
            return rebuilt
    spark_error: Exception = exc
    return spark_error
