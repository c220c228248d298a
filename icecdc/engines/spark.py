"""The Spark engine: executors read, ONE shuffle by document id, executors write.

Executors read the tasks' files; one shuffle by document id brings every change of a key together;
executors write each key's net change in bulk. The driver holds the task list and counters only.
Exports, backlogs and wide rewrites run here.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import partial
from itertools import accumulate
from typing import Any

import pyarrow as pa
from py4j.protocol import Py4JJavaError
from pyspark.accumulators import AccumulatorParam
from pyspark.errors import PythonException
from pyspark.sql import SparkSession

from icecdc import errors
from icecdc.changelog import ChangeStats
from icecdc.config import SparkConfig
from icecdc.deadletters import LetterTally
from icecdc.destination.sink import SinkStats, delete_older
from icecdc.engines.export import (
    KEY_SCHEMA,
    ExportTally,
    bucket_count,
    by_bucket,
    candidate_rows,
    candidates,
    export_keys,
    export_rows,
    numbered_after,
    settle_duplicates,
)
from icecdc.engines.progress import Done, PassMeter
from icecdc.engines.pyspark_compat import partition_as_sent
from icecdc.engines.slices import balanced_slices, numbered_slices
from icecdc.engines.target import Target, Targets, write_keyed_changes
from icecdc.model import Change, ChangeRow, EngineKind, PassStage
from icecdc.reading.reader import TableReader
from icecdc.reading.tasks import DealtRewrite, ExportTasks, FileTask, Task


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

    def apply(
        self, reader: TableReader, tasks: list[Task], target: Target | Targets
    ) -> tuple[ChangeStats, SinkStats]:
        context = self.spark.sparkContext
        carried = context.accumulator(0)  # carryover pairs the readers dropped before the shuffle
        # rows the readers sent to the dead letters, by cause
        unreadable = context.accumulator(LetterTally(), _LettersParam())
        # tasks read, on the driver as each slice ends
        done = context.accumulator(Done(), _DoneParam())
        dealt = [task for task in tasks if isinstance(task, DealtRewrite)]
        read = [task for task in tasks if not isinstance(task, DealtRewrite)]
        slices = balanced_slices(read, max(context.defaultParallelism, 1))
        changes = context.parallelize(slices, max(len(slices), 1)).mapPartitions(
            partial(_read_slices, reader, carried, unreadable, done)
        )
        if dealt:
            changes = changes.union(
                _dealt_changes(context, reader, dealt, carried, unreadable, done)
            )
        # the one shuffle
        by_key = changes.groupByKey(numPartitions=max(context.defaultParallelism, 1))
        try:
            with PassMeter(reader.table_name, PassStage.CHANGES, tasks).polling(lambda: done.value):
                per_partition = by_key.mapPartitions(partial(_write_partition, target)).collect()
        except (Py4JJavaError, PythonException) as exc:
            raise _executor_error(exc) from exc
        change_stats, sink_stats = (
            # the rows that could not become documents were read too
            ChangeStats(rows=2 * carried.value + unreadable.value.total, carryovers=carried.value),
            SinkStats(),
        )
        sink_stats.lettered(unreadable.value)
        for changes_done, writes_done in per_partition:
            change_stats.add(changes_done)
            sink_stats.add(writes_done)
        return change_stats, sink_stats

    def export(
        self, reader: TableReader, tasks: ExportTasks, target: Target
    ) -> tuple[ChangeStats, SinkStats]:
        """Executors write the rows they read; only compact keys are shuffled, to find duplicates.

        The keys go in Arrow batches by bucket, to find duplicate identifiers
        (`engines.export`). The candidates' rows are read again where they are, grouped by `_id`
        in a second, small shuffle, and settled there.
        """
        context = self.spark.sparkContext
        cores = max(context.defaultParallelism, 1)
        tally = context.accumulator(ExportTally(), _TallyParam())
        unreadable = context.accumulator(LetterTally(), _LettersParam())
        # tasks written, on the driver as each slice ends
        done = context.accumulator(Done(), _DoneParam())
        slices = numbered_slices(tasks.written, cores)
        buckets = bucket_count(sum(t.data_file.record_count for t in tasks.every), cores)
        # max(…, 1): the pass ending a capped export may write no file and only read keys again
        keyed = context.parallelize(slices, max(len(slices), 1)).mapPartitions(
            partial(_export_slices, reader, target, tally, unreadable, done, buckets)
        )
        again = numbered_after(tasks) if reader.identifier_columns else []
        if again:  # the keys of the earlier passes' rows, read again
            read_again = context.parallelize(again, min(len(again), cores))
            keyed = keyed.union(read_again.mapPartitions(partial(_key_slices, reader, buckets)))
        meter = PassMeter(reader.table_name, PassStage.EXPORT, tasks.written)
        try:
            with meter.polling(lambda: done.value):
                if reader.identifier_columns and tasks.earlier is not None:
                    every = tasks.every
                    settled = _settle_duplicates(context, reader, target, every, keyed, buckets)
                # ids from the rows' places: none repeats; or the pass ending the export settles
                else:
                    keyed.foreach(_nothing)
                    settled = []
        except (Py4JJavaError, PythonException) as exc:
            raise _executor_error(exc) from exc
        writes = tally.value.writes
        writes.lettered(unreadable.value)
        tally.value.changes.rows += unreadable.value.total  # read, though no document
        for stats in settled:
            writes.add(stats)
        return tally.value.changes, writes

    def delete_older(self, target: Target, version: int) -> int:
        """Scan the index in slices on the executors, deleting what is older than `version`."""
        slices = max(self.spark.sparkContext.defaultParallelism, 1)
        deleted = (
            self.spark.sparkContext.parallelize(range(slices), slices)
            .map(
                lambda i: delete_older(
                    target.client(),  # on the executor: opened from the resolved section
                    target.opensearch,
                    target.index,
                    version,
                    i,
                    slices,
                )
            )
            .sum()
        )
        return int(deleted)


def _read_slices(
    reader: TableReader, carried: Any, unreadable: Any, done: Any, slices: Iterable[list[Task]]
) -> Iterator[Change]:
    """Executor side: the slice's changes; its tasks added to `done` when they are read."""
    for tasks in slices:
        yield from reader.read(tasks, carried, unreadable)
        done.add(Done.of(tasks))


def _dealt_changes(
    context: Any,
    reader: TableReader,
    dealt: list[DealtRewrite],
    carried: Any,
    unreadable: Any,
    done: Any,
) -> Any:
    """The changes of rewrites dealt to their key ranges, each file read once.

    A file's rows go to their ranges as compressed Arrow batches (`compressed`), through a shuffle
    with a partition per range. Each batch is sent on as it is dealt (`partition_as_sent`). Each
    range's rows are cancelled there as a range task's are. A task holds one range's rows, or one
    batch of a file; no task decodes a file twice.
    """
    # a rewrite's first range, numbered across all
    offsets = list(accumulate((len(task.ranges) for task in dealt), initial=0))
    ranges = [(n, number) for n, task in enumerate(dealt) for number in range(len(task.ranges))]
    files = [
        (n, added, file_task)
        for n, task in enumerate(dealt)
        for added, side in ((False, task.removed), (True, task.added))
        for file_task in side
    ]
    slices = min(len(files), 4 * max(context.defaultParallelism, 1))
    dealt_rows = context.parallelize(files, slices).mapPartitions(
        partial(_deal_files, reader, dealt, offsets, unreadable, done)
    )
    return partition_as_sent(dealt_rows, len(ranges)).mapPartitions(
        partial(_range_changes, reader, dealt, ranges, carried, unreadable)
    )


def _deal_files(
    reader: TableReader,
    dealt: list[DealtRewrite],
    offsets: list[int],
    unreadable: Any,
    done: Any,
    files: Iterable[tuple[int, bool, FileTask]],
) -> Iterator[tuple[int, tuple[bool, pa.RecordBatch]]]:
    """Executor side: each file's rows, dealt to their ranges.

    Each record is a range's number and a pair: whether the rows come from an added file, and the
    rows. Progress counts a dealt rewrite's rows as its files are read, and the rewrite as one task
    once its last file is.
    """
    for n, added, file_task in files:
        for number, rows in reader.deal(dealt[n], file_task, unreadable):
            yield offsets[n] + number, (added, compressed(rows))
        last = (
            file_task.data_file.file_path
            == (dealt[n].added or dealt[n].removed)[-1].data_file.file_path
        )
        done.add(Done(files=int(last), rows=file_task.data_file.record_count))


def _range_changes(
    reader: TableReader,
    dealt: list[DealtRewrite],
    ranges: list[tuple[int, int]],
    carried: Any,
    unreadable: Any,
    dealt_rows: Iterable[tuple[int, tuple[bool, pa.RecordBatch]]],
) -> Iterator[Change]:
    """Executor side: the changes of the ranges this partition was dealt (one, as partitioned)."""
    by_range: dict[int, tuple[list[pa.RecordBatch], list[pa.RecordBatch]]] = {}
    for key, (added, packed) in dealt_rows:
        by_range.setdefault(key, ([], []))[added].append(decompressed(packed))
    for key, (removed, added_rows) in by_range.items():
        n, number = ranges[key]
        yield from reader.read_range(dealt[n], number, removed, added_rows, carried, unreadable)


def compressed(rows: pa.RecordBatch) -> bytes:
    """`rows` as an Arrow IPC stream compressed with zstd, to cross the JVM as one byte string.

    Why not send the batch as it is, pickled as uncompressed IPC: each dealt batch crosses Spark's
    JVM twice as a byte array of its size, read from the Python worker and read back out of the
    shuffle. So the heap's churn is the bytes of every file a rewrite reads. zstd makes them about a
    third as many, by the JVM's peak on the spread layout in `make bench-probe`. Its CPU is under a
    tenth of a second per 10^6 rows each way.
    """
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(
        sink, rows.schema, options=pa.ipc.IpcWriteOptions(compression="zstd")
    ) as stream:
        stream.write_batch(rows)
    packed: bytes = sink.getvalue().to_pybytes()
    return packed


def decompressed(packed: bytes) -> pa.RecordBatch:
    """The batch `compressed` made."""
    return pa.ipc.open_stream(packed).read_next_batch()


def _write_partition(
    target: Target | Targets, keyed_changes: Iterable[tuple[str, Iterable[ChangeRow]]]
) -> Iterator[tuple[ChangeStats, SinkStats]]:
    """Executor side: this partition's keys written; one pair of counters back to the driver."""
    yield write_keyed_changes(target, keyed_changes)


class _DoneParam(AccumulatorParam[Done]):
    """Adds tasks done up on the driver, into a new value.

    The progress thread reads the old value meanwhile.
    """

    def zero(self, value: Done) -> Done:
        return Done()

    def addInPlace(self, value1: Done, value2: Done) -> Done:  # noqa: N802 (PySpark's name)
        return value1 + value2


class _LettersParam(AccumulatorParam[LetterTally]):
    """Adds the readers' dead letters by cause up on the driver."""

    def zero(self, value: LetterTally) -> LetterTally:
        return LetterTally()

    def addInPlace(  # noqa: N802 (PySpark's name)
        self, value1: LetterTally, value2: LetterTally
    ) -> LetterTally:
        return value1.add(value2)


class _TallyParam(AccumulatorParam[ExportTally]):
    """Adds export tasks' tallies up on the driver."""

    def zero(self, value: ExportTally) -> ExportTally:
        return ExportTally()

    # PySpark's name.
    def addInPlace(self, value1: ExportTally, value2: ExportTally) -> ExportTally:  # noqa: N802
        return value1.add(value2)


def _export_slices(
    reader: TableReader,
    target: Target,
    tally: Any,
    unreadable: Any,
    done: Any,
    buckets: int,
    slices: Iterable[list[tuple[int, FileTask]]],
) -> Iterator[tuple[int, pa.RecordBatch]]:
    """Executor side of an export: the slice's rows written, their compact keys out by bucket.

    The slice's tasks are added to `done` when they are written.
    """
    for part in slices:
        for keys in export_rows(reader, target, part, tally, unreadable):
            yield from by_bucket(keys, buckets)
        done.add(Done.of(part))


def _key_slices(
    reader: TableReader, buckets: int, tasks: Iterable[tuple[int, FileTask]]
) -> Iterator[tuple[int, pa.RecordBatch]]:
    """Executor side of reading an earlier pass's rows again: their compact keys out by bucket.

    Nothing is written.
    """
    for keys in export_keys(reader, tasks):
        yield from by_bucket(keys, buckets)


def _nothing(_: object) -> None:
    pass


def _bucket_candidates(keyed: Iterable[tuple[int, pa.RecordBatch]]) -> Iterator[tuple[int, int]]:
    """(task, position) of the rows of this bucket whose keys several rows have."""
    keys = pa.Table.from_batches([batch for _, batch in keyed], KEY_SCHEMA)
    found = candidates(keys)
    yield from zip(found["task"].to_pylist(), found["position"].to_pylist(), strict=True)


def _settle_duplicates(
    context: Any,
    reader: TableReader,
    target: Target,
    tasks: list[FileTask],
    keyed: Any,
    buckets: int,
) -> list[SinkStats]:
    """Run the export, then settle the rows of keys several rows share, on the executors.

    Those rows are read again, grouped by `_id` and settled by `export.settle_duplicates`. Only
    candidates' rows leave their bucket.
    """
    cores = max(context.defaultParallelism, 1)
    found = keyed.partitionBy(buckets, _bucket).mapPartitions(_bucket_candidates).cache()
    try:
        if found.isEmpty():  # the common case: the export done, no stage more
            return []
        numbered = context.parallelize(list(enumerate(tasks)), min(len(tasks), cores))
        settled: list[SinkStats] = (
            found.groupByKey()
            .join(numbered)
            .flatMap(lambda rows: candidate_rows(reader, [(rows[0], rows[1][1], list(rows[1][0]))]))
            .groupByKey(cores)
            .mapPartitions(lambda rows_by_id: [settle_duplicates(target, rows_by_id)])
            .collect()
        )
    finally:
        found.unpersist()
    return settled


def _bucket(bucket: int) -> int:
    return bucket


def _executor_error(exc: Py4JJavaError | PythonException) -> Exception:
    """The IcecdcError an executor raised, rebuilt from the text Spark carried back.

    Any other error is Spark's own.
    """
    # Executors' exceptions reach the driver only as the text of a
    # Python traceback inside a Java one.
    text = str(exc.java_exception) if isinstance(exc, Py4JJavaError) else str(exc)
    found = re.findall(r"^icecdc\.errors\.(\w+): (.*)$", text, flags=re.MULTILINE)
    if found:
        name, message = found[-1]
        error_class = getattr(errors, name, None)
        if isinstance(error_class, type) and issubclass(error_class, errors.IcecdcError):
            rebuilt: Exception = error_class(message)
            return rebuilt
    spark_error: Exception = exc
    return spark_error
