"""A pass records its end (`StateStore.begin_pass`) right before its first write: one that fails
before it writes (no Spark where it needs it, a write block on the index) leaves no end, so a
later rollback is followed, not reset, and later passes still collapse runs of commits. In
process: no JVM."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
from pyiceberg.expressions import EqualTo

from icecdc.config import EngineConfig, parse_config
from icecdc.destination.index import IndexAlias
from icecdc.dryrun import dry_run
from icecdc.engines import Engines
from icecdc.errors import IndexStateError, SinkError, SparkRequired
from icecdc.model import EngineChoice, EngineKind
from icecdc.planning import plan_table
from icecdc.sync import process_table, sync
from icecdc.testing.commits import update
from tests.support.faults import FaultProxy
from tests.support.pipeline import Pipeline
from tests.support.tables import orders, rows

pytestmark = pytest.mark.drawn_destination  # the pipeline writes to a domain or a Serverless collection

NAME = "db.orders"


@pytest.fixture
def local(tmp_path: Path, osmem_clone: Any) -> Pipeline:
    return Pipeline(tmp_path, osmem_clone.url, spark=None, engine=EngineKind.IN_PROCESS)


def fail_before_writing(pipeline: Pipeline, how: str) -> None:
    """Run a pass over the table's new commits that fails before it writes."""
    config = pipeline.config({"name": NAME})
    if how == "write block":
        pipeline.client.indices.put_settings(index="orders", body={"index.blocks.write": True})
        with pytest.raises(IndexStateError, match="does not accept writes"):
            sync(config, None, [NAME])
        pipeline.client.indices.put_settings(index="orders", body={"index.blocks.write": None})
        return
    # the planner Lambda's engines: no Spark, for a pass that needs it
    table, store = pipeline.catalog.load_table(NAME), pipeline.store()
    plan_table(table, config.table(NAME), store, ("id",))
    engines = Engines(EngineConfig(use=EngineChoice.SPARK), spark_config=None)
    with pytest.raises(SparkRequired):
        process_table(engines, table, config.table(NAME), store, config.opensearch, ("id",))


@pytest.mark.parametrize("how", ["write block", "spark required"])
def test_a_pass_that_fails_before_writing_records_no_end(
    local: Pipeline,
    caplog: pytest.LogCaptureFixture,
    how: str,
) -> None:
    table = orders(local)
    table.append(rows(1, 2))
    config = local.config({"name": NAME})
    local.sync(config, NAME)
    synced = table.current_snapshot().snapshot_id
    generation = IndexAlias(local.client, "orders").current()

    table.append(rows(3))
    fail_before_writing(local, how)
    checkpoint, end = local.store().get_checkpoint(NAME), local.store().pass_end(NAME)
    assert checkpoint.snapshot_id == synced
    assert end is None or end.sequence_number <= checkpoint.sequence_number  # none past it

    table.manage_snapshots().rollback_to_snapshot(synced).commit()
    table.append(rows(4))
    with caplog.at_level(logging.INFO, logger="icecdc"):
        local.sync(config, NAME)  # asserts the index equals the table
    assert sorted(local.documents("orders")) == ["1", "2", "4"]
    assert IndexAlias(local.client, "orders").current() == generation  # followed: no new generation
    said = [r.getMessage() for r in caplog.records]
    assert not [line for line in said if "resync" in line or "commit by commit" in line]


@pytest.mark.parametrize("failed", ["on an outage", "after writing"])
def test_a_retry_reads_and_takes_the_engine_its_dry_run_predicts(local: Pipeline, fault_proxy: FaultProxy, failed: str) -> None:
    """A pass OpenSearch answered 503 to its every bulk request wrote nothing: its retry collapses
    runs of commits as the first try would have, and reads what the dry run predicted before the
    outage. After a pass that may have written, the retry reads commit by commit, and the dry run
    predicts that too."""
    table = orders(local)
    table.append(rows(*range(1, 9)))
    limits = {"use": "auto", "in_process_max_files": 60}  # between the collapsed and the unrolled
    raw = {**local.config_dict([{"name": NAME}]), "engine": limits}
    config = parse_config(raw)
    local.sync(config, NAME)
    for n in range(20):  # small copy-on-write commits: each a delete snapshot and an append
        update(table, EqualTo("id", 1 + n % 8), lambda row, n=n: {**row, "status": f"s{n}"})
    (first_try,) = dry_run(config)

    if failed == "on an outage":
        fault_proxy.fail_for(600, status=503, path_contains="_bulk")
        outage = parse_config({**raw, "opensearch": {"url": fault_proxy.url, "max_retries": 1}})
        with pytest.raises(SinkError, match="503"):
            sync(outage, None, [NAME])
        fault_proxy.clear()
    else:
        local.record_pass_end(NAME)  # what a pass killed after its first write leaves
    (retry,) = dry_run(config)
    if failed == "on an outage":
        assert retry.passes == first_try.passes, retry.lines()
    else:
        assert retry.passes[0].size.files > first_try.passes[0].size.files, retry.lines()

    (synced,) = sync(config, None, [NAME])
    (planned,) = retry.passes
    assert planned.engine == EngineKind.IN_PROCESS
    assert (synced.engine, synced.reads) == (planned.engine, planned.size)
    local.assert_index_equals_table(config, NAME)


def test_the_dry_run_of_a_filtered_export_counts_the_files_its_where_may_hold(local: Pipeline) -> None:
    """An export reads only the files the index's `where` may hold rows of, by their column bounds;
    the dry run counted every file, so it predicted more than the sync read, and could predict
    Spark for an export the in-process engine takes (found by fuzz: two filtered indexes)."""
    table = orders(local)
    table.append(rows(1, 2))
    table.append(rows(6, 7))  # two files: ids 1-2, ids 6-7
    raw = {**local.config_dict([{"name": NAME, "where": "id >= 6"}]), "engine": {"use": "auto", "in_process_max_files": 1}}
    config = parse_config(raw)
    (plan,) = dry_run(config)
    (planned,) = plan.passes
    assert planned.size.files == 1, plan.lines()
    assert planned.engine == EngineKind.IN_PROCESS, plan.lines()
    synced = local.sync(config, NAME)
    assert (synced.engine, synced.reads) == (planned.engine, planned.size)
