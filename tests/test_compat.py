"""pyiceberg's private APIs icecdc uses (icecdc/compat.py): an upgrade that moves or changes one
fails here, by name, instead of deep inside a Spark task."""

from __future__ import annotations

import gc
import inspect
import re
from collections.abc import Callable
from importlib.metadata import version
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from pyiceberg import manifest
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.expressions import EqualTo, visitors
from pyiceberg.io import pyarrow as pyiceberg_pyarrow
from pyiceberg.table import delete_file_index
from pyiceberg.table.snapshots import Operation
from pyiceberg.table.update import snapshot

from bench.plan_memory import register_files
from icecdc import compat
from tests.support.pipeline import Pipeline
from tests.support.tables import BY_REGION, SCHEMA, orders, rows

pytestmark = pytest.mark.drawn_destination  # the pipeline writes to a domain or a Serverless collection

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"


def parameters(function: object) -> list[str]:
    return list(inspect.signature(function).parameters)  # type: ignore[arg-type]


def test_the_installed_pyiceberg_is_the_pinned_one_compat_was_checked_against() -> None:
    pinned = re.search(r'"pyiceberg\[[^\]]*\]==([^"]+)"', PYPROJECT.read_text())
    assert pinned is not None
    assert version("pyiceberg") == pinned.group(1) == compat.PYICEBERG_VERSION


def test_the_private_functions_still_take_what_compat_passes() -> None:
    assert parameters(pyiceberg_pyarrow._read_deletes) == ["io", "data_file"]
    assert parameters(delete_file_index._referenced_data_file_path) == ["delete_file"]
    assert parameters(pyiceberg_pyarrow._dataframe_to_data_files)[:4] == ["table_metadata", "df", "io", "write_uuid"]
    assert parameters(visitors._InclusiveMetricsEvaluator) == ["schema", "expr", "case_sensitive", "include_empty_files"]
    assert parameters(visitors._InclusiveMetricsEvaluator.eval) == ["self", "file"]
    assert parameters(manifest._inherit_from_manifest) == ["entry", "manifest"]
    assert manifest.DEFAULT_READ_VERSION in manifest.MANIFEST_ENTRY_SCHEMAS


def test_streamed_manifest_entries_are_the_ones_pyiceberg_lists(pipeline: Pipeline) -> None:
    table = orders(pipeline)
    table.append(rows(1, 2))
    table.append(rows(3))
    table.delete(EqualTo("id", 3))  # a manifest with a DELETED entry
    snapshot = table.current_snapshot()
    assert snapshot is not None
    for listed in snapshot.manifests(table.io):
        for discard in (True, False):
            streamed = list(compat.manifest_entries(table.io, listed, discard_deleted=discard))
            assert streamed == listed.fetch_manifest_entry(table.io, discard_deleted=discard)


@pytest.mark.parametrize("files", [4, 5])
def test_manifest_entries_decoded_in_chunks_are_every_entry_once(
    pipeline: Pipeline, monkeypatch: pytest.MonkeyPatch, files: int
) -> None:
    """Chunks of two (the last one full for four entries, short for five) give pyiceberg's list,
    and leave the cyclic collector as they found it: on, or off."""
    monkeypatch.setattr(compat, "DECODED_AT_ONCE", 2)
    table = orders(pipeline, partitioned=False)
    register_files(table, files, files, pipeline.workdir.as_uri())  # one manifest
    snapshot = table.current_snapshot()
    assert snapshot is not None
    (listed,) = snapshot.manifests(table.io)
    assert list(compat.manifest_entries(table.io, listed)) == listed.fetch_manifest_entry(table.io)
    assert gc.isenabled()
    gc.disable()
    try:
        paths = [e.data_file.file_path for e in compat.manifest_entries(table.io, listed, inherit=False)]
        assert not gc.isenabled()
    finally:
        gc.enable()
    assert paths == [e.data_file.file_path for e in listed.fetch_manifest_entry(table.io)]


def test_the_overwrite_producer_still_has_the_hooks_the_test_commits_override() -> None:
    assert issubclass(compat.OverwriteFiles, snapshot._OverwriteFiles)
    assert parameters(snapshot._OverwriteFiles._summary) == ["self", "snapshot_properties"]
    assert parameters(snapshot._OverwriteFiles._build_manifest_evaluator) == ["self", "spec_id"]
    assert parameters(snapshot._OverwriteFiles._build_delete_files_partition_predicate) == ["self"]


class _Interleaved(list):  # type: ignore[type-arg]
    """A manifest's partition summaries; reading one first judges another manifest, as a second
    thread of the overwrite would between two reads of an evaluator's state."""

    def __init__(self, summaries: list[Any], judge: Callable[[], bool]) -> None:
        super().__init__(summaries)
        self.judge = judge

    def __getitem__(self, position: Any) -> Any:
        self.judge()
        return super().__getitem__(position)


def test_an_overwrite_judges_each_manifest_by_its_own_partitions(tmp_path: Path) -> None:
    """pyiceberg's evaluator kept the manifest it judged on itself, and an overwrite's threads
    shared it: the compaction of the kill -9 test failed, now and then, with "Missing required
    files to delete" (a manifest judged by another's summaries was left out)."""
    catalog = SqlCatalog("lake", uri=f"sqlite:///{tmp_path / 'catalog.db'}", warehouse=tmp_path.as_uri())
    catalog.create_namespace("db")
    table = catalog.create_table("db.orders", schema=SCHEMA, partition_spec=BY_REGION)
    for number, region in enumerate(["eu", "us", "apac"]):
        table.append(rows(number, region=region))
    table.delete(EqualTo("region", "apac"))  # its manifest now lists only apac's deleted file
    parent = table.current_snapshot()
    assert parent is not None
    by_region = {m.partitions[0].lower_bound: m for m in parent.manifests(table.io) if m.partitions}
    eu, apac = by_region[b"eu"], by_region[b"apac"]
    with table.transaction() as transaction:
        rewrite = compat.OverwriteFiles(operation=Operation.OVERWRITE, transaction=transaction, io=table.io)
        for task in table.scan().plan_files():
            rewrite.delete_data_file(task.file)  # eu's and us's: the predicate is eu or us
        rewrite._build_delete_files_partition_predicate()
        judge = rewrite._build_manifest_evaluator(eu.partition_spec_id)
        assert not judge(apac)
        interleaved = SimpleNamespace(partitions=_Interleaved(eu.partitions, lambda: judge(apac)))
        assert judge(interleaved), "the eu manifest was judged by apac's summaries"
