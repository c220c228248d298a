"""What the driver hands the executors: which file to read, what its rows mean, at which version."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from pyiceberg.expressions import (
    AlwaysTrue,
    And,
    BooleanExpression,
    GreaterThanOrEqual,
    IsNull,
    LessThan,
    Or,
    Reference,
)
from pyiceberg.manifest import DataFile
from pyiceberg.schema import Schema

from icecdc.compat import metrics_evaluator
from icecdc.documents import Shape
from icecdc.model import ChangeType, WorkSize


@dataclass(frozen=True)
class FileTask:
    """One data file to read, and what its rows mean."""

    data_file: DataFile
    change: ChangeType
    sequence_number: int
    snapshot_id: int
    deletes: tuple[DataFile, ...] = ()  # delete files in force: the rows they remove are not read
    # a delete diff: read only rows these remove and `deletes` keep
    deletes_after: tuple[DataFile, ...] | None = None


@dataclass(frozen=True)
class KeyDeleteTask:
    """An equality-delete file on the identifier columns: each of its rows deletes one key."""

    delete_file: DataFile
    sequence_number: int
    snapshot_id: int


@dataclass(frozen=True)
class KeyRange:
    """The rows whose identifier column `column` is in [lower, upper): one bucket of a rewrite.

    A rewrite too large for one task is cut into such buckets. None is unbounded;
    nulls go with the range unbounded below.
    """

    # the full name: `info.id` for a nested column (a leaf name would bind to a top-level `id`)
    column: str
    lower: Any | None
    upper: Any | None

    def row_filter(self) -> BooleanExpression:
        column = Reference(self.column)
        lower: BooleanExpression = (
            AlwaysTrue()
            if self.lower is None
            else GreaterThanOrEqual(term=column, value=self.lower)
        )
        upper: BooleanExpression = (
            AlwaysTrue() if self.upper is None else LessThan(term=column, value=self.upper)
        )
        in_range = And(lower, upper)
        return Or(in_range, IsNull(term=column)) if self.lower is None else in_range


@dataclass(frozen=True)
class RewriteTask:
    """The files one snapshot removed from and added to one partition: a copy-on-write rewrite.

    No deletes are in force. The files are read together so that unchanged
    rows cancel in Arrow, before Python.

    A rewrite larger than the memory budget is cut into tasks by ranges of an identifier column
    (`key_range`). Each task reads every file of the rewrite but keeps only its range's rows. A row
    and its unchanged copy have one identifier, so they always fall into the same range.
    """

    removed: tuple[FileTask, ...]
    added: tuple[FileTask, ...]
    key_range: KeyRange | None = None


@dataclass(frozen=True)
class DealtRewrite:
    """A rewrite cut into key ranges, each file read once and its rows dealt to the ranges.

    This is for files that each span many of the ranges, as files written hash-distributed or after
    many MERGEs do. Read as range tasks, every task would decode every file, and the decoding would
    grow with the ranges times the rewrite. Instead each file is read once and its rows go to the
    ranges through a shuffle; each range's rows then cancel as a `RewriteTask`'s do. An engine
    without a shuffle reads it as its `range_tasks`.
    """

    removed: tuple[FileTask, ...]
    added: tuple[FileTask, ...]
    ranges: tuple[KeyRange, ...]

    def range_tasks(self) -> list[RewriteTask]:
        return [RewriteTask(self.removed, self.added, key_range) for key_range in self.ranges]


Task = FileTask | KeyDeleteTask | RewriteTask | DealtRewrite


@dataclass(frozen=True)
class ExportTasks:
    """The export's tasks a pass writes, and the rows it settles duplicate identifiers among.

    `earlier` holds the files earlier passes of the export wrote, read again for their keys only. It
    is None in a pass that ends inside the export: the pass that finishes it settles them all.
    `carried`: the earlier files (snapshot, path) whose keys this run's passes kept, so their tasks
    were not made; `resolve` makes the tasks of those of them that hold candidates.
    """

    written: list[FileTask]
    earlier: list[FileTask] | None = field(default_factory=list)
    carried: frozenset[tuple[int, str]] = frozenset()
    resolve: Callable[[set[tuple[int, str]]], list[FileTask]] | None = None

    @property
    def every(self) -> list[FileTask]:
        """The tasks by their numbers, the written ones first.

        An export's rows say where they are by these numbers.
        """
        return [*self.written, *(self.earlier or [])]


@dataclass(frozen=True)
class PassTasks:
    """A pass's tasks: an export's and the changes'.

    An export's tasks are the inserts of one snapshot, written where they are read. The changes' are
    brought together by key first. `earlier` is set in the pass that finishes an export cut into
    passes: the export's files earlier passes wrote, read again for their keys only, so that
    duplicate identifiers are found across all of the export's files, as in one pass.
    """

    export: list[FileTask]
    changes: list[Task]
    earlier: list[FileTask] = field(default_factory=list)
    # earlier files (snapshot, path) whose keys this run's passes kept: no task is made for them
    carried: frozenset[tuple[int, str]] = frozenset()

    @property
    def all(self) -> list[Task]:
        return [*self.export, *self.changes]


def files_read_by(task: Task) -> list[DataFile]:
    """Every data and delete file a task reads."""
    if isinstance(task, KeyDeleteTask):
        return [task.delete_file]
    if isinstance(task, RewriteTask | DealtRewrite):
        return [f for t in task.removed + task.added for f in files_read_by(t)]
    return [task.data_file, *task.deletes, *(task.deletes_after or ())]


def held_by_shape(export: list[FileTask], schema: Schema, shape: Shape) -> list[FileTask]:
    """The export's tasks whose files the index's filter (`where`) may hold rows of.

    By their column bounds, not pyiceberg's scan planning: that refuses a snapshot with equality
    deletes, and the reader applies every delete file itself. A pass (`icecdc.sync.passes`) and
    its dry run (`icecdc.dryrun`) alike: the files a pass reads choose its engine.
    """
    if shape.where is None or not export:
        return export
    may_hold = metrics_evaluator(schema, shape.row_filter)
    return [task for task in export if may_hold(task.data_file)]


def pass_reads(tasks: PassTasks) -> WorkSize:
    """What a pass over `tasks` reads, the earlier passes' export files included.

    A pass's engine (`Engines.kind_for`) is chosen by it, in a sync and in its dry run alike.
    """
    return WorkSize.of(file_reads([*tasks.all, *tasks.earlier]))


def file_reads(tasks: Iterable[Task]) -> list[DataFile]:
    """Every file the tasks read, once per read, as the in-process engine reads them.

    A key range task reads all its rewrite's files, and a dealt rewrite counts as its range tasks.
    An engine is chosen by the most a pass may read.
    """
    return [
        f
        for task in tasks
        for read in (task.range_tasks() if isinstance(task, DealtRewrite) else [task])
        for f in files_read_by(read)
    ]
