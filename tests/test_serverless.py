"""End to end on an OpenSearch Serverless collection: no versions, no refresh, no scroll.

Every test writes through the Serverless stand-in (tests/support/serverless.py), which refuses what
Serverless does not document and shows writes to searches only after a delay. After every sync the
index equals the table (Pipeline.sync asserts it, reading as `icecdc verify` does: a wait for
visibility, then `search_after`)."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from pyiceberg.expressions import EqualTo, In
from pyiceberg.types import StringType

from icecdc.audit import RepairScope, audit, repair
from icecdc.config import parse_config
from icecdc.destination.index import IndexAlias
from icecdc.errors import OperationError
from icecdc.model import EngineKind, PassPoint
from icecdc.replay import replay_table
from icecdc.sync import sync
from icecdc.testing.commits import update
from tests.support.cli import icecdc
from tests.support.pipeline import ENGINES, Pipeline, on_serverless
from tests.support.probes import Crash, crash_at
from tests.support.serverless import CREDENTIALS, ServerlessStandIn
from tests.support.spark_sql import SparkSql, spark_catalog
from tests.support.tables import orders, rows

TABLE = "db.orders"


@pytest.fixture
def collection(
    tmp_path: Path, serverless: ServerlessStandIn, spark: Any, engine: Any, monkeypatch: pytest.MonkeyPatch
) -> Pipeline:
    """A pipeline writing to the Serverless stand-in, whose searches lag the writes."""
    return on_serverless(tmp_path, serverless, spark, engine, monkeypatch)


def refused(serverless: ServerlessStandIn) -> dict[str, int]:
    """What the stand-in refused: an operation Serverless lacks, or a parameter it does not take."""
    return serverless.refused()


@pytest.mark.parametrize("engine", ENGINES)
def test_export_then_updates_and_deletes_without_versions(collection: Pipeline, serverless: ServerlessStandIn) -> None:
    config = collection.config({"name": TABLE})
    table = orders(collection)
    table.append(rows(1, 2, 3))
    collection.sync(config, TABLE)

    update(table, EqualTo("id", 2), lambda r: {**r, "status": "paid"})
    table.delete(In("id", [3]))
    table.append(rows(4, region="eu"))
    result = collection.sync(config, TABLE)
    assert (result.writes.indexed, result.writes.deleted) == (2, 1)
    assert sorted(collection.documents("orders")) == ["1", "2", "4"]
    assert refused(serverless) == {}


@pytest.mark.parametrize("engine", ENGINES)
def test_merge_on_read_commits(collection: Pipeline, serverless: ServerlessStandIn) -> None:
    ss: SparkSql = spark_catalog(collection.spark, collection.workdir)
    try:
        modes = ", ".join(f"'write.{op}.mode'='merge-on-read'" for op in ("delete", "update", "merge"))
        ss.sql(
            f"CREATE TABLE {ss.name('db.t')} (id BIGINT, region STRING, status STRING) USING iceberg "
            f"PARTITIONED BY (region) TBLPROPERTIES ('format-version'='2', {modes})"
        )
        ss.sql(f"INSERT INTO {ss.name('db.t')} VALUES (1, 'us', 'new'), (2, 'eu', 'new'), (3, 'us', 'new')")
        config = collection.config({"name": "db.t", "index": "t", "identifier_columns": ["id"]})
        collection.sync(config, "db.t")
        ss.sql(f"UPDATE {ss.name('db.t')} SET status = 'paid', region = 'eu' WHERE id = 1")
        ss.sql(f"DELETE FROM {ss.name('db.t')} WHERE id = 3")
    finally:
        ss.close()
    result = collection.sync(config, "db.t")
    assert (result.writes.indexed, result.writes.deleted) == (1, 1)
    assert refused(serverless) == {}


@pytest.mark.parametrize("engine", [EngineKind.IN_PROCESS])
def test_a_schema_change_is_a_new_generation_and_a_swap(collection: Pipeline, serverless: ServerlessStandIn) -> None:
    """A domain rewrites in place and deletes what is older by version; a collection cannot."""
    config = collection.config({"name": TABLE})
    table = orders(collection)
    table.append(rows(1, 2, 3))
    collection.sync(config, TABLE)
    with table.update_schema() as schema:
        schema.add_column("note", StringType())
    table = collection.catalog.load_table(TABLE)
    table.delete(In("id", [2]))
    collection.sync(config, TABLE)
    assert IndexAlias(collection.client, "orders").current() == "orders-2"
    assert refused(serverless) == {}


@pytest.mark.parametrize("engine", [EngineKind.IN_PROCESS])
def test_a_table_dropped_and_created_again(collection: Pipeline, serverless: ServerlessStandIn) -> None:
    config = collection.config({"name": TABLE})
    orders(collection).append(rows(1, 2, 3))
    collection.sync(config, TABLE)
    collection.catalog.drop_table(TABLE)
    orders(collection).append(rows(7))
    collection.sync(config, TABLE)
    assert sorted(collection.documents("orders")) == ["7"]
    assert refused(serverless) == {}


@pytest.mark.parametrize("engine", [EngineKind.IN_PROCESS])
@pytest.mark.parametrize("point", [PassPoint.WRITTEN, PassPoint.CHECKPOINTED, PassPoint.SWAPPED])
def test_a_crash_then_a_rerun_converges(collection: Pipeline, point: PassPoint, serverless: ServerlessStandIn) -> None:
    config = collection.config({"name": TABLE})
    table = orders(collection)
    table.append(rows(1, 2, 3))
    collection.sync(config, TABLE)
    with table.update_schema() as schema:  # a rebuild: every point of a pass is reached
        schema.add_column("note", StringType())
    table = collection.catalog.load_table(TABLE)
    update(table, EqualTo("id", 1), lambda r: {**r, "status": "paid"})
    with pytest.raises(Crash):
        sync(config, None, [TABLE], probe=crash_at(point))
    table.append(rows(9))
    collection.sync(config, TABLE)
    assert refused(serverless) == {}


@pytest.mark.parametrize("engine", [EngineKind.IN_PROCESS])
def test_every_operators_command(collection: Pipeline, serverless: ServerlessStandIn) -> None:
    """check, status, dry-run, verify, audit, repair and replay, on a collection as on a domain."""
    raw = collection.config_dict([{"name": TABLE, "index": "orders", "identifier_columns": ["id"]}])
    raw["dead_letter"] = {"path": str(collection.workdir / "dead-letters")}
    path = collection.workdir / "icecdc.yaml"
    path.write_text(yaml.safe_dump(raw))
    config = collection.config(*raw["tables"]).with_dead_letter(raw["dead_letter"]["path"])
    table = orders(collection)
    table.append(rows(1, 2, 3))
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), **CREDENTIALS}
    checked = icecdc("check", "--config", str(path), env=environment)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "an OpenSearch Serverless collection" in checked.stdout
    collection.sync(config, TABLE)
    for command in (["status"], ["sync", "--dry-run"], ["verify"]):
        ran = icecdc(*command, "--config", str(path), env=environment)
        assert ran.returncode == 0, f"{command}: {ran.stdout}{ran.stderr}"
        assert "Traceback" not in ran.stderr

    serverless.client().delete(index="orders-1", id="2")  # drift behind icecdc's back
    (report,) = audit(config, [TABLE], sample=100, seed=1)
    assert {d.doc_id for d in report.drift} == {None, "2"}, [d.describe() for d in report.drift]
    repaired = repair(config, TABLE, RepairScope(ids=("2",)))
    assert repaired.indexed == 1
    collection.assert_index_equals_table(config, TABLE)
    replayed = icecdc("dead-letters", "replay", "--config", str(path), "--table", TABLE, env=environment)
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    assert refused(serverless) == {}


@pytest.mark.parametrize("engine", [EngineKind.IN_PROCESS])
@pytest.mark.parametrize("kind", ["TIMESERIES", "VECTORSEARCH"])
def test_a_collection_that_assigns_the_ids_fails_the_pass_in_one_line(
    collection: Pipeline, serverless: ServerlessStandIn, kind: str
) -> None:
    """Every document is refused for the same reason: the collection's, never a dead letter."""
    serverless.collection_type = kind
    raw = collection.config_dict([{"name": TABLE, "index": "orders", "identifier_columns": ["id"]}])
    raw["dead_letter"] = {"path": str(collection.workdir / "dead-letters")}
    path = collection.workdir / "icecdc.yaml"
    path.write_text(yaml.safe_dump(raw))
    orders(collection).append(rows(1, 2))
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), **CREDENTIALS}
    synced = icecdc("sync", "--config", str(path), env=environment)
    assert synced.returncode == 2, synced.stdout + synced.stderr
    (line,) = [line for line in synced.stderr.splitlines() if line.startswith("icecdc: error")]
    assert "a collection that assigns the ids itself" in line and "needs a search collection" in line
    assert "Traceback" not in synced.stderr
    assert collection.store().get_checkpoint(TABLE) is None
    assert not (collection.workdir / "dead-letters").exists() or not any((collection.workdir / "dead-letters").rglob("*.*"))


@pytest.mark.parametrize("engine", [EngineKind.IN_PROCESS])
def test_a_replay_waits_for_an_unfinished_pass_on_a_collection(collection: Pipeline, serverless: ServerlessStandIn) -> None:
    """Without versions a replay at the checkpoint would overwrite what the unfinished pass wrote
    above it, which the pass, resumed, might not write again: the replay says to sync first."""
    config = collection.config({"name": TABLE}).with_dead_letter(str(collection.workdir / "dead-letters"))
    table = orders(collection)
    table.append(rows(1, 2, 3))
    collection.sync(config, TABLE)
    update(table, EqualTo("id", 1), lambda r: {**r, "status": "paid"})
    with pytest.raises(Crash):
        sync(config, None, [TABLE], probe=crash_at(PassPoint.WRITTEN))
    assert config.dead_letter is not None
    with pytest.raises(OperationError, match="a pass is unfinished, and a Serverless collection has no versions"):
        replay_table(config, TABLE, config.dead_letter)
    collection.sync(config, TABLE)
    replay_table(config, TABLE, config.dead_letter)  # once the pass is done


@pytest.mark.parametrize("engine", [EngineKind.IN_PROCESS])
def test_a_replay_is_not_kept_off_by_how_often_a_document_was_written(collection: Pipeline) -> None:
    """A collection's `_version` counts a document's writes, not a change's sequence number, and
    no pass is unfinished when a replay runs there: a document written more often than the
    checkpoint's number is no later change, so the replay writes the checkpoint's row."""
    large = "x" * 400
    table = orders(collection)
    table.append(rows(1, status="1"))
    table.append(rows(2, status=large))
    raw = {**collection.config_dict([{"name": TABLE}]), "dead_letter": {"path": str(collection.workdir / "dead")}}
    config = parse_config(raw)
    tight = parse_config({**raw, "opensearch": {**raw["opensearch"], "max_chunk_bytes": 300}})
    (result,) = sync(tight, None, [TABLE])
    assert result.writes.dead_lettered == 1
    for _ in range(3):  # another writer's, three times: _version 3, above the checkpoint's 2
        collection.write("orders", "2", {"id": 2, "status": "stale"})
    assert config.dead_letter is not None
    report = replay_table(config, TABLE, config.dead_letter)
    assert (report.replayed, report.indexed) == (1, 1)
    assert '"status":"' + large in collection.documents("orders")["2"]
