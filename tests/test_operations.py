"""What operators do to tables and indices between the planner and the job: rollbacks, moved and
cherry-picked branches, snapshot expiration, deleted indices, stale views of the table and runs
that lose their lease. After each, the next sync leaves the index equal to the table.

The table operations are Iceberg's own Spark procedures, on the test's catalog (tests/spark_sql.py).
"""

from __future__ import annotations

import pytest
from pyiceberg.expressions import EqualTo
from pyiceberg.table import Table

from icecdc.config import Config
from icecdc.engines import Engines
from icecdc.errors import IndexNotOwned, LeaseLost
from icecdc.planning import plan_table
from icecdc.protection import protected_snapshots
from icecdc.state import Lease
from icecdc.sync import PassOptions, process_table
from icecdc.testing.commits import update
from tests.support.pipeline import ENGINES, Pipeline
from tests.support.spark_sql import run_sql
from tests.support.tables import orders, rows

# Operators' actions between the planner and the pass hold on both engines.
pytestmark = [pytest.mark.parametrize("engine", ENGINES), pytest.mark.drawn_destination]

NAME = "db.orders"


def synced_orders(pipeline: Pipeline, *ids: int) -> tuple[Table, Config]:
    table = orders(pipeline)
    table.append(rows(*ids))
    config = pipeline.config({"name": NAME})
    pipeline.sync(config, NAME)
    return table, config


def plan(pipeline: Pipeline, config: Config, table: Table | None = None) -> None:
    """What the planner Lambda does on a commit event: plan, and leave the work to the job."""
    table = table or pipeline.catalog.load_table(NAME)
    plan_table(table, config.table(NAME), pipeline.store(), ("id",))


def operate(pipeline: Pipeline, *statements: str) -> None:
    run_sql(pipeline.spark, pipeline.workdir, *statements)


def current_id(pipeline: Pipeline) -> int:
    snapshot = pipeline.catalog.load_table(NAME).current_snapshot()
    assert snapshot is not None
    return snapshot.snapshot_id


def test_a_commit_rolled_back_after_it_was_planned_is_never_applied(pipeline: Pipeline) -> None:
    table, config = synced_orders(pipeline, 1, 2, 3)
    synced = current_id(pipeline)
    table.delete(EqualTo("id", 2))
    plan(pipeline, config)
    operate(pipeline, f"CALL lake.system.rollback_to_snapshot('{NAME}', {synced})")
    pipeline.catalog.load_table(NAME).append(rows(4))

    pipeline.sync(config, NAME)  # 2 is still in the table, so it is in the index
    assert sorted(pipeline.documents("orders")) == ["1", "2", "3", "4"]
    assert pipeline.store().pending_items(NAME) == []


def test_main_fast_forwarded_to_a_branch_leaves_the_planned_commits_of_main_behind(pipeline: Pipeline) -> None:
    _, config = synced_orders(pipeline, 1, 2, 3)
    synced = current_id(pipeline)
    operate(pipeline, f"ALTER TABLE lake.{NAME} CREATE BRANCH audit")
    pipeline.catalog.load_table(NAME).delete(EqualTo("id", 3))  # on main, planned, then abandoned when main moves
    plan(pipeline, config)
    operate(
        pipeline,
        f"CALL lake.system.rollback_to_snapshot('{NAME}', {synced})",
        f"INSERT INTO lake.{NAME}.branch_audit VALUES (7, 'eu', 'audited', 10.5)",
        f"UPDATE lake.{NAME}.branch_audit SET status = 'audited' WHERE id = 1",
        f"CALL lake.system.fast_forward('{NAME}', 'main', 'audit')",
    )

    pipeline.sync(config, NAME)
    documents = pipeline.documents("orders")
    assert sorted(documents) == ["1", "2", "3", "7"]
    assert '"status":"audited"' in documents["1"]


def test_a_cherry_picked_commit_is_applied_and_the_commits_left_behind_are_not(pipeline: Pipeline) -> None:
    table, config = synced_orders(pipeline, 1, 2, 3)
    synced = current_id(pipeline)
    table.append(rows(5))
    picked = current_id(pipeline)
    pipeline.catalog.load_table(NAME).delete(EqualTo("id", 2))
    plan(pipeline, config)  # both planned
    operate(pipeline, f"CALL lake.system.rollback_to_snapshot('{NAME}', {synced})")
    pipeline.catalog.load_table(NAME).append(rows(6))
    operate(pipeline, f"CALL lake.system.cherrypick_snapshot('{NAME}', {picked})")
    assert current_id(pipeline) != picked  # a new commit re-applies the append on top of 6

    pipeline.sync(config, NAME)
    assert sorted(pipeline.documents("orders")) == ["1", "2", "3", "5", "6"]


# recreated: the takeover copies the index by _reindex, which a collection lacks (the config refuses it)
@pytest.mark.parametrize("recreate", [False, pytest.param(True, marks=pytest.mark.domain_only)], ids=["deleted", "recreated"])
def test_an_index_deleted_behind_icecdcs_back_is_exported_again(pipeline: Pipeline, recreate: bool) -> None:
    table, config = synced_orders(pipeline, 1, 2, 3)
    pipeline.client.indices.delete(index="orders-1")  # the generation the alias `orders` names; the alias goes with it
    table.append(rows(4))
    if recreate:  # e.g. a write to `orders` meanwhile: OpenSearch auto-creates a concrete index by that name
        pipeline.client.indices.create(index="orders")
        with pytest.raises(IndexNotOwned, match="index_takeover"):  # icecdc cannot tell it from a user's
            pipeline.sync(config, NAME)
        config = pipeline.config({"name": NAME, "index_takeover": True})  # the operator's opt-in

    result = pipeline.sync(config, NAME)  # not just 4: every row of the table
    assert sorted(pipeline.documents("orders")) == ["1", "2", "3", "4"]
    assert result.writes.indexed == 4
    pipeline.catalog.load_table(NAME).append(rows(5))
    assert pipeline.sync(config, NAME).writes.indexed == 1  # and then commit by commit again


def test_a_planner_holding_metadata_older_than_the_checkpoint_reloads_instead_of_resetting(pipeline: Pipeline) -> None:
    table, config = synced_orders(pipeline, 1, 2, 3)
    stale = pipeline.catalog.load_table(NAME)  # e.g. a planner invocation that loaded the table a moment ago
    update(table, EqualTo("id", 1), lambda r: {**r, "status": "paid"})
    pipeline.sync(config, NAME)  # meanwhile a job run applies the update and advances the checkpoint

    plan(pipeline, config, stale)
    assert pipeline.store().pending_items(NAME) == []  # no resync planned: it was not a rollback
    assert '"status":"paid"' in pipeline.documents("orders")["1"]


def test_a_run_that_lost_its_lease_advances_nothing(pipeline: Pipeline) -> None:
    table, config = synced_orders(pipeline, 1, 2, 3)
    before = pipeline.store().get_checkpoint(NAME)
    table.append(rows(4))
    store = pipeline.store()
    with Lease(store, NAME, 60) as lease:
        plan(pipeline, config)
        # the run stalls past its lease (a long pause) and another run takes the table over
        store.release_lease(NAME, lease.owner)
        assert store.acquire_lease(NAME, "another run", 60)
        with pytest.raises(LeaseLost, match="db.orders"):
            process_table(
                Engines(config.engine, spark=pipeline.spark),
                table,
                config.table(NAME),
                store,
                config.opensearch,
                ("id",),
                PassOptions(lease=lease),
            )
    assert pipeline.store().get_checkpoint(NAME) == before
    store.release_lease(NAME, "another run")
    pipeline.sync(config, NAME)


def test_snapshots_expired_between_planning_and_reading_resync_the_table(pipeline: Pipeline) -> None:
    table, config = synced_orders(pipeline, 1, 2, 3)
    synced = current_id(pipeline)
    update(table, EqualTo("id", 2), lambda r: {**r, "status": "paid"})
    middle = current_id(pipeline)
    update(pipeline.catalog.load_table(NAME), EqualTo("id", 2), lambda r: {**r, "status": "shipped"})
    view = pipeline.catalog.load_table(NAME)  # the job loaded the table, then planned
    plan(pipeline, config, view)
    # Glue's optimizer or an operator expires the checkpoint's snapshot and the one after it, and
    # deletes the files only they referenced, while the job runs
    operate(pipeline, f"CALL lake.system.expire_snapshots(table => '{NAME}', snapshot_ids => array({synced}, {middle}))")

    store = pipeline.store()
    result = process_table(
        Engines(config.engine, spark=pipeline.spark), view, config.table(NAME), store, config.opensearch, ("id",)
    )
    assert result.checkpoint is not None and result.checkpoint.snapshot_id == current_id(pipeline)
    pipeline.assert_index_equals_table(config, NAME)
    assert '"status":"shipped"' in pipeline.documents("orders")["2"]
    assert store.pending_items(NAME) == []


def test_protect_checkpoint_keeps_what_is_not_applied_yet_through_snapshot_expiration(pipeline: Pipeline) -> None:
    table, _ = synced_orders(pipeline, 1, 2, 3)
    config = pipeline.config({"name": NAME, "protect_checkpoint": True})
    pipeline.sync(config, NAME)
    checkpoint = current_id(pipeline)
    assert protected_snapshots(pipeline.catalog.load_table(NAME), "orders") == {f"icecdc-orders-{checkpoint}": checkpoint}

    update(table, EqualTo("id", 2), lambda r: {**r, "status": "paid"})
    update(pipeline.catalog.load_table(NAME), EqualTo("id", 2), lambda r: {**r, "status": "shipped"})
    plan(pipeline, config)  # the planner tags the commits it planned
    unapplied = {s.snapshot_id for s in pipeline.catalog.load_table(NAME).snapshots()}
    assert set(protected_snapshots(pipeline.catalog.load_table(NAME), "orders").values()) == unapplied
    # expire every snapshot but the current one, deleting the files only they reference
    operate(
        pipeline, f"CALL lake.system.expire_snapshots(table => '{NAME}', older_than => TIMESTAMP '2999-01-01', retain_last => 1)"
    )
    kept = pipeline.catalog.load_table(NAME)
    assert all(kept.snapshot_by_id(s) is not None for s in unapplied)

    result = pipeline.sync(config, NAME)
    assert (result.writes.indexed, result.files) != (3, 1)  # applied commit by commit, not exported again
    assert result.writes.indexed == 1
    now = current_id(pipeline)
    assert protected_snapshots(pipeline.catalog.load_table(NAME), "orders") == {f"icecdc-orders-{now}": now}

    pipeline.sync(pipeline.config({"name": NAME}), NAME)  # turned off: the tags go
    assert protected_snapshots(pipeline.catalog.load_table(NAME), "orders") == {}
