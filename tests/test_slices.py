"""How a batch's read tasks are cut into Spark partitions: by bytes, not by count."""

from __future__ import annotations

from pyiceberg.manifest import DataFile, DataFileContent

from icecdc.engines.slices import BYTES_PER_SLICE, balanced_slices
from icecdc.model import ChangeType
from icecdc.reading.tasks import FileTask, files_read_by

MB = 2**20


def task(name: str, size: int) -> FileTask:
    return FileTask(
        DataFile.from_args(content=DataFileContent.DATA, file_path=name, file_size_in_bytes=size), ChangeType.INSERT, 1, 1
    )


def slice_bytes(slices: list[list[FileTask]]) -> list[int]:
    return sorted(sum(f.file_size_in_bytes for t in s for f in files_read_by(t)) for s in slices)


def test_a_small_batch_gets_one_slice_per_core_and_a_large_file_its_own() -> None:
    tasks = [task(f"small-{i}", 10_000) for i in range(100)] + [task("large", 1 * MB)]
    slices = balanced_slices(tasks, cores=2)
    assert len(slices) == 2  # every Spark task costs a fixed ~50 ms: no more than the cores need
    assert [t.data_file.file_path for t in min(slices, key=len)] == ["large"]
    assert sorted(t.data_file.file_path for s in slices for t in s) == sorted(t.data_file.file_path for t in tasks)


def test_a_large_batch_gets_up_to_four_slices_per_core_of_about_equal_bytes() -> None:
    tasks = [task(f"f-{i}", size * MB) for i, size in enumerate([40, 30, 30, 20, 20, 20, 10, 10, 10, 10] * 4)]
    slices = balanced_slices(tasks, cores=2)
    assert len(slices) == 8 and sum(slice_bytes(slices)) > 8 * BYTES_PER_SLICE
    sizes = slice_bytes(slices)
    assert sizes[-1] <= sizes[0] * 4 / 3


def test_never_more_slices_than_tasks() -> None:
    assert len(balanced_slices([task("only", 500 * MB)], cores=2)) == 1
