"""The in-process engine: a pass read, grouped and written without a JVM.

The calling process and its workers do the work: the CLI's small syncs, the planner Lambda. The
reader, changelog and sink are the same as on Spark. The tasks are read in parallel, one worker
process per usable core (`engines.workers`). A dict by document id stands for the shuffle, so a
pass's changed rows are held in memory; the engine configuration's limits keep such passes small. An
export's workers write the rows they read and hand back only compact keys (`engines.export`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import TypeVar

import pyarrow as pa

from icecdc.changelog import ChangeStats
from icecdc.deadletters import LetterTally
from icecdc.destination.sink import SinkStats, delete_older
from icecdc.engines.export import (
    KEY_SCHEMA,
    CarriedKeys,
    ExportTally,
    export_rows,
    settle_in_one_place,
)
from icecdc.engines.progress import Done, PassMeter
from icecdc.engines.slices import balanced_slices, numbered_slices
from icecdc.engines.target import Target, Targets, write_keyed_changes
from icecdc.engines.workers import run_parallel
from icecdc.model import Change, ChangeRow, EngineKind, PassStage
from icecdc.reading.reader import TableReader
from icecdc.reading.tasks import ExportTasks, FileTask, Task, files_read_by

log = logging.getLogger(__name__)

T = TypeVar("T", Task, tuple[int, FileTask])
R = TypeVar("R")

# Rows a pass reads below which it stays in this one process: on a small pass, starting workers
# and pickling their answers back costs about what they save.
PARALLEL_MIN_ROWS = 100_000


@dataclass
class Tally:
    """A counter the reader adds to, as it adds to a Spark accumulator on an executor."""

    value: int = 0

    def add(self, n: int) -> None:
        self.value += n


@dataclass(frozen=True)
class InProcessEngine:
    workers: int = 1  # processes that read at once (`EngineConfig.in_process_workers`)
    # the keys an export's passes in this run wrote, for the pass that finishes it (`Engines`')
    carried: CarriedKeys = field(default_factory=CarriedKeys)

    @property
    def kind(self) -> EngineKind:
        return EngineKind.IN_PROCESS

    def apply(
        self, reader: TableReader, tasks: list[Task], target: Target | Targets
    ) -> tuple[ChangeStats, SinkStats]:
        by_key: dict[str, list[ChangeRow]] = {}
        # carryover pairs and unreadable rows the readers dropped
        carried, unreadable = Tally(), LetterTally()
        workers, meter = (
            self._workers(tasks),
            PassMeter(reader.table_name, PassStage.CHANGES, tasks),
        )
        parts: list[tuple[Iterable[Change], int, LetterTally]]
        if workers == 1:  # streamed: no list of the changes beside the dict
            parts = [(reader.read(meter.counting(tasks), carried, unreadable), 0, LetterTally())]
        else:
            parts = _run(
                partial(_read_part, reader), balanced_slices(tasks, workers), workers, meter
            )
        for changes, pairs, bad in parts:
            for doc_id, change in changes:
                by_key.setdefault(doc_id, []).append(change)
            carried.add(pairs)
            unreadable.add(bad)
        indexes = 1 if isinstance(target, Target) else len(target.each)
        total = Done(0, len(by_key) * indexes)
        writes = PassMeter(reader.table_name, PassStage.WRITES, (), total=total)
        change_stats, sink_stats = write_keyed_changes(target, by_key.items(), writes.written)
        writes.end()
        # the rows that could not become documents were read too
        read = 2 * carried.value + unreadable.total
        change_stats.add(ChangeStats(rows=read, carryovers=carried.value))
        sink_stats.lettered(unreadable)
        return change_stats, sink_stats

    def export(
        self, reader: TableReader, tasks: ExportTasks, target: Target
    ) -> tuple[ChangeStats, SinkStats]:
        written = tasks.written
        tally, batches, workers = ExportTally(), [], self._workers(written)
        meter = PassMeter(reader.table_name, PassStage.EXPORT, written)
        for keys, part_tally in _run(
            partial(_export_part, reader, target), numbered_slices(written, workers), workers, meter
        ):
            batches.append(keys)
            tally.add(part_tally)
        if reader.identifier_columns and tasks.earlier is not None:
            settled = settle_in_one_place(reader, target, tasks, batches, self.carried)
            tally.writes.add(settled)
        elif reader.identifier_columns:  # a pass inside the export: its keys for the last one
            self.carried.keep(target, written, batches)
        return tally.changes, tally.writes

    def delete_older(self, target: Target, version: int) -> int:
        return delete_older(target.client(), target.opensearch, target.index, version, 0, 1)

    def _workers(self, tasks: Sequence[Task]) -> int:
        """Processes for a pass of these tasks.

        One below PARALLEL_MIN_ROWS rows read, or for a single task.
        """
        rows = sum(f.record_count for task in tasks for f in files_read_by(task))
        return self.workers if rows >= PARALLEL_MIN_ROWS and len(tasks) > 1 else 1


def _run(
    function: Callable[[Iterable[T]], R], parts: Sequence[list[T]], workers: int, meter: PassMeter
) -> list[R]:
    """`function` of each part, in `workers` processes, each reported to `meter` as it ends.

    With one worker it runs in this process, and the meter hears of each task.
    The meter is not the workers' to log.
    """
    if workers == 1:
        return [function(meter.counting(part)) for part in parts]
    results = run_parallel(
        function, parts, workers, lambda number: meter.add(Done.of(parts[number]))
    )
    if workers > 1:
        peaks = ", ".join(f"{peak / 2**20:.0f}" for _, peak in results)
        log.info(
            "%d parts in %d worker processes; their peak RSS, MiB: %s", len(parts), workers, peaks
        )
    return [result for result, _ in results]


def _read_part(
    reader: TableReader,
    tasks: Iterable[Task],
) -> tuple[Iterable[Change], int, LetterTally]:
    """A worker's part of a pass: its tasks' changes.

    Also the carryover pairs and the unreadable rows it dropped.
    """
    carried, unreadable = Tally(), LetterTally()
    return list(reader.read(tasks, carried, unreadable)), carried.value, unreadable


def _export_part(
    reader: TableReader, target: Target, tasks: Iterable[tuple[int, FileTask]]
) -> tuple[pa.Table, ExportTally]:
    """A worker's part of an export: its rows written; their compact keys and what it did."""
    tally, unreadable = ExportTally(), LetterTally()
    keys = pa.Table.from_batches(
        list(export_rows(reader, target, tasks, tally, unreadable)), KEY_SCHEMA
    )
    tally.changes.rows += unreadable.total  # read, though no document
    tally.writes.lettered(unreadable)
    return keys, tally
