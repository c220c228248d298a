"""How a pass's tasks are dealt out to parallel workers (Spark partitions, in-process processes)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TypeVar

from icecdc.reading.tasks import Task, files_read_by

T = TypeVar("T", bound=Task)

# compressed Parquet; a slice's rows stream through, so this bounds time, not memory
BYTES_PER_SLICE = 32 * 2**20


def balanced_slices(tasks: Sequence[T], cores: int) -> list[list[T]]:
    """The tasks in slices of about equal bytes to read.

    One slice per core for a small batch, up to four per core as the bytes grow, so that a slow
    slice can be balanced by the others.

    Spark's own `parallelize` splits by count, and one rewrite of a large file can
    outweigh a hundred small ones. Every Spark task also costs a fixed ~50 ms in
    PySpark, more than a small slice takes to read. Largest first into the lightest
    slice (LPT) comes within 4/3 of the best split.
    """
    sizes = {
        id(task): max(sum(f.file_size_in_bytes for f in files_read_by(task)), 1) for task in tasks
    }
    wanted = math.ceil(sum(sizes.values()) / BYTES_PER_SLICE)
    count = min(len(tasks), max(cores, min(4 * cores, wanted)))
    slices: list[list[T]] = [[] for _ in range(count)]
    loads = [0] * count
    for task in sorted(tasks, key=lambda t: sizes[id(t)], reverse=True):
        lightest = loads.index(min(loads))
        slices[lightest].append(task)
        loads[lightest] += sizes[id(task)]
    return slices


def numbered_slices(tasks: Sequence[T], cores: int) -> list[list[tuple[int, T]]]:
    """`balanced_slices`, each task with its number in `tasks`.

    An export's rows say where they are by that number.
    """
    number = {id(task): n for n, task in enumerate(tasks)}
    return [[(number[id(task)], task) for task in part] for part in balanced_slices(tasks, cores)]
