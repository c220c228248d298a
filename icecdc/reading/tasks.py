"""What the driver hands the executors: which file to read, what its rows mean, at which version."""

from __future__ import annotations

from dataclasses import dataclass

from pyiceberg.manifest import DataFile

from icecdc.model import ChangeType


@dataclass(frozen=True)
class FileTask:
    """One data file to read, and what its rows mean."""

    data_file: DataFile
    change: ChangeType
    sequence_number: int
    snapshot_id: int
    deletes: tuple[DataFile, ...] = ()  # delete files in force: the rows they remove are not read
    deletes_after: tuple[DataFile, ...] | None = None  # a delete diff: read only rows these remove and `deletes` keep


@dataclass(frozen=True)
class KeyDeleteTask:
    """An equality-delete file on the identifier columns: each of its rows deletes one key."""

    delete_file: DataFile
    sequence_number: int
    snapshot_id: int


@dataclass(frozen=True)
class RewriteTask:
    """The files one snapshot removed from and added to one partition, with no deletes in force:
    a copy-on-write rewrite. Read together so that unchanged rows cancel in Arrow, before Python."""

    removed: tuple[FileTask, ...]
    added: tuple[FileTask, ...]


Task = FileTask | KeyDeleteTask | RewriteTask


def files_read_by(task: Task) -> list[DataFile]:
    """Every data and delete file a task reads."""
    if isinstance(task, KeyDeleteTask):
        return [task.delete_file]
    if isinstance(task, RewriteTask):
        return [f for t in task.removed + task.added for f in files_read_by(t)]
    return [task.data_file, *task.deletes, *(task.deletes_after or ())]
