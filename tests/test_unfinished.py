"""No crash and no operation leaves a table wedged or its index silently different from it: a
rebuild resumed across a schema change, unfinished index states seen as work, an engine sized from
every file it reads, a dropped table's items retired, another index never taken for a generation,
a template's aliases refused, the swap made only over searchable copies, and fences everywhere."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyiceberg.types import IntegerType, LongType, StringType

from icecdc.catalog import identifier_columns
from icecdc.config import Config, parse_config
from icecdc.deadletters import DeadLetters
from icecdc.destination.index import IndexAlias
from icecdc.errors import IndexNotOwned, LeaseLost, ProcessingError, SinkError
from icecdc.model import EngineKind, ItemStatus, PassPoint
from icecdc.planning import plan_table
from icecdc.state import Lease, SqliteStateStore
from icecdc.status import has_work, table_status
from icecdc.sync import sync
from tests.support.faults import FaultProxy
from tests.support.pipeline import Pipeline
from tests.support.probes import Crash, crash_at
from tests.support.tables import orders, rows

pytestmark = pytest.mark.drawn_destination  # the pipeline writes to a domain or a Serverless collection

NAME = "db.orders"
INDEX = "orders"


def capped(pipeline: Pipeline, **batch: Any) -> Config:
    return parse_config({**pipeline.config_dict([{"name": NAME}]), "batch": {"max_files": 1, **batch}})


def recreate(pipeline: Pipeline, files: int) -> None:
    """Drop the table and create it again (a RESET rebuild), with `files` files of 3 rows."""
    pipeline.catalog.drop_table(NAME)
    table = orders(pipeline)
    for f in range(files):
        table.append(rows(*range(100 + 3 * f, 103 + 3 * f)))


def work_of(pipeline: Pipeline, config: Config) -> tuple[bool, str]:
    """What the planner's sweep sees: has_work, and status's unfinished state."""
    table = pipeline.catalog.load_table(NAME)
    alias = IndexAlias(pipeline.client, INDEX)
    store = pipeline.store()
    status = table_status(table, config.table(NAME), store, 0.0, index=alias)
    return has_work(table, config.table(NAME), store, identifier_columns(table, config.table(NAME)), alias), status.unfinished


def aliased(pipeline: Pipeline) -> list[str]:
    return sorted(pipeline.client.indices.get_alias(name=INDEX))


# -- a schema change during a capped rebuild --------------------------------------------------------


def test_a_column_added_during_a_capped_rebuild_reaches_the_resumed_generation(pipeline: Pipeline, tmp_path: Path) -> None:
    orders(pipeline).append(rows(1, 2))
    # two files a pass: the export's last file and the next commit share the pass that resumes the generation
    config = capped(pipeline, max_files=2).with_dead_letter(str(tmp_path / "dead"))  # the AWS default: dead letters on
    pipeline.sync(config, NAME)
    recreate(pipeline, files=3)
    assert pipeline.one_pass(config, NAME).partial  # generation 2 is being built from the old schema

    table = pipeline.catalog.load_table(NAME)
    with table.update_schema() as change:
        change.add_column("note", StringType())
    table = pipeline.catalog.load_table(NAME)
    table.append(pa.Table.from_pylist([{**rows(200).to_pylist()[0], "note": "added"}], schema=table.schema().as_arrow()))
    result = pipeline.sync(config, NAME)  # index == table: the new column's documents are all there

    assert result.writes.dead_lettered == 0 and DeadLetters(config.dead_letter or "").count(NAME) == 0
    assert '"note":"added"' in pipeline.documents(INDEX)["200"]


def test_a_type_change_during_a_capped_rebuild_restarts_it_in_a_new_generation(pipeline: Pipeline) -> None:
    orders(pipeline).append(rows(1, 2))
    config = capped(pipeline)
    pipeline.sync(config, NAME)
    recreate(pipeline, files=2)
    table = pipeline.catalog.load_table(NAME)
    with table.update_schema() as change:
        change.add_column("n", IntegerType())
    assert pipeline.one_pass(config, NAME).partial  # generation 2 maps n as an integer
    table = pipeline.catalog.load_table(NAME)
    with table.update_schema() as change:
        change.update_column("n", LongType())  # OpenSearch cannot widen it in place
    table = pipeline.catalog.load_table(NAME)
    table.append(pa.Table.from_pylist([{**rows(300).to_pylist()[0], "n": 2**40}], schema=table.schema().as_arrow()))

    pipeline.sync(config, NAME)
    (current,) = aliased(pipeline)
    assert pipeline.client.indices.get_mapping(index=current)[current]["mappings"]["properties"]["n"] == {"type": "long"}


# -- unfinished states are work ---------------------------------------------------------------------


def test_a_swap_not_made_is_work_until_a_sync_makes_it(pipeline: Pipeline) -> None:
    orders(pipeline).append(rows(1, 2))
    config = capped(pipeline)
    pipeline.sync(config, NAME)
    recreate(pipeline, files=1)
    with pytest.raises(Crash):
        sync(config, pipeline.spark, [NAME], probe=crash_at(PassPoint.CHECKPOINTED))
    assert aliased(pipeline) == ["orders-1"]  # the index serves rows the table no longer has

    work, unfinished = work_of(pipeline, config)
    assert work and "was not swapped to the rebuilt generation 'orders-2'" in unfinished
    assert pipeline.sync(config, NAME).writes.indexed == 0  # the swap, nothing exported again
    assert aliased(pipeline) == ["orders-2"] and work_of(pipeline, config) == (False, "")


def test_a_generation_a_swap_did_not_delete_is_work_until_a_sync_deletes_it(pipeline: Pipeline) -> None:
    orders(pipeline).append(rows(1, 2))
    config = capped(pipeline)
    pipeline.sync(config, NAME)
    recreate(pipeline, files=1)
    with pytest.raises(Crash):
        sync(config, pipeline.spark, [NAME], probe=crash_at(PassPoint.SWAPPED))
    assert aliased(pipeline) == ["orders-2"] and sorted(IndexAlias(pipeline.client, INDEX).generations()) == [
        "orders-1",
        "orders-2",
    ]

    work, unfinished = work_of(pipeline, config)
    assert work and "orders-1 of index 'orders' are left over" in unfinished
    pipeline.sync(config, NAME)
    assert sorted(IndexAlias(pipeline.client, INDEX).generations()) == ["orders-2"] and work_of(pipeline, config) == (False, "")


def test_a_deleted_index_is_work_before_the_next_commit(pipeline: Pipeline) -> None:
    orders(pipeline).append(rows(1, 2))
    config = pipeline.config({"name": NAME})
    pipeline.sync(config, NAME)
    pipeline.client.indices.delete(index="orders-1")
    assert work_of(pipeline, config) == (True, "index 'orders' was deleted")
    pipeline.sync(config, NAME)
    assert work_of(pipeline, config) == (False, "")


def test_a_reshaped_index_is_work_before_the_next_commit(pipeline: Pipeline) -> None:
    """Found by the model (tests/test_model.py): an operator changed the index's shape and no commit
    followed; has_work said there was nothing to do, so the planner started no job and the index
    kept the old shape until the table's next commit."""
    orders(pipeline).append(rows(1, 2))
    config = pipeline.config({"name": NAME})
    pipeline.sync(config, NAME)
    reshaped = pipeline.config({"name": NAME, "exclude_columns": ["amount"]})
    assert work_of(pipeline, reshaped) == (
        True,
        """index 'orders' holds another shape of the table (every column and row → {"exclude_columns":["amount"]})""",
    )
    assert work_of(pipeline, config) == (False, "")
    pipeline.sync(reshaped, NAME)
    assert work_of(pipeline, reshaped) == (False, "")


# -- the engine is sized from every file the pass reads ---------------------------------------------


def test_a_rebuild_whose_generation_was_deleted_sizes_its_engine_with_the_files_read_again(pipeline: Pipeline) -> None:
    orders(pipeline).append(rows(1, 2))
    pipeline.engine = EngineKind.SPARK
    config = capped(pipeline)
    pipeline.sync(config, NAME)
    recreate(pipeline, files=2)
    assert pipeline.one_pass(config, NAME).partial  # one file applied to generation 2
    pipeline.client.indices.delete(index="orders-2")  # deleted behind icecdc's back: that file is read again

    auto = parse_config(
        {
            **pipeline.config_dict([{"name": NAME}]),
            "batch": {"max_files": 1},
            "engine": {"use": "auto", "in_process_max_files": 1},
        }
    )
    result = pipeline.one_pass(auto, NAME)
    assert result.files == 2 and result.engine == EngineKind.SPARK


# -- a dropped and re-created table ----------------------------------------------------------------


def test_the_items_of_a_dropped_table_are_retired_whatever_their_sequence_numbers(pipeline: Pipeline) -> None:
    table = orders(pipeline)
    table.append(rows(1))
    config = pipeline.config({"name": NAME})
    pipeline.sync(config, NAME)
    for i in range(2, 6):  # commits planned but not applied: sequence numbers 2 to 5
        table.append(rows(i))
    plan_table(pipeline.catalog.load_table(NAME), config.table(NAME), pipeline.store(), ("id",))
    pipeline.catalog.drop_table(NAME)
    orders(pipeline).append(rows(7))  # the new table is at sequence number 1

    pipeline.sync(config, NAME)
    assert pipeline.store().count_pending(NAME) == 0
    assert work_of(pipeline, config) == (False, "")


# -- an index whose documents no checkpoint accounts for --------------------------------------------


def lose_state(pipeline: Pipeline) -> None:
    """What a state store lost, or the table's state kept under another key, leaves: no checkpoint."""
    (pipeline.workdir / "state.db").unlink()


def test_a_table_moved_into_indexes_keeping_its_index_drops_the_rows_gone_since(pipeline: Pipeline) -> None:
    """Found by the model: the index's state moves from `db.orders` to `db.orders#orders`, where no
    checkpoint is; the export into the index as it was left the document of the row deleted since."""
    table = orders(pipeline)
    table.append(rows(1, 2, 3))
    pipeline.sync(pipeline.config({"name": NAME}), NAME)
    table.delete("id = 2")
    moved = pipeline.config({"name": NAME, "index": None, "indexes": [{"index": INDEX}]})
    assert moved.table(NAME).each_index()[0].key == f"{NAME}#{INDEX}"  # the index's state is kept under another key

    pipeline.sync(moved, NAME)  # index == table: no document of row 2
    assert aliased(pipeline) == ["orders-2"] and sorted(IndexAlias(pipeline.client, INDEX).generations()) == ["orders-2"]


def test_a_capped_export_after_the_state_was_lost_serves_the_old_index_until_its_swap(pipeline: Pipeline) -> None:
    """The export builds a new generation across passes (the planner's items, a crash between
    two): searches read the old documents until the swap, and none of them is left after it."""
    table = orders(pipeline)
    for f in range(3):
        table.append(rows(3 * f, 3 * f + 1, 3 * f + 2))
    config = capped(pipeline)
    pipeline.sync(config, NAME)
    table.delete("id = 4")
    lose_state(pipeline)

    assert pipeline.one_pass(config, NAME).partial
    assert aliased(pipeline) == ["orders-1"] and "4" in pipeline.documents(INDEX)  # the old generation serves searches
    with pytest.raises(Crash):
        pipeline.one_pass(config, NAME, probe=crash_at(PassPoint.WRITTEN))
    pipeline.sync(config, NAME)  # index == table
    assert aliased(pipeline) == ["orders-2"] and sorted(IndexAlias(pipeline.client, INDEX).generations()) == ["orders-2"]


def test_an_export_after_a_lost_state_into_an_index_emptied_by_deletes_writes_rows_rolled_back(
    pipeline: Pipeline,
) -> None:
    """Found by the model: the index holds no document, but its deletes' versions would refuse the
    export's writes of the rows a rollback brought back; the export builds a new generation."""
    table = orders(pipeline)
    table.append(rows(1, 2))
    appended = table.refresh().current_snapshot().snapshot_id
    config = pipeline.config({"name": NAME})
    pipeline.sync(config, NAME)
    table.delete("id >= 1")
    pipeline.sync(config, NAME)
    assert pipeline.documents(INDEX) == {}
    table.manage_snapshots().rollback_to_snapshot(appended).commit()
    lose_state(pipeline)

    pipeline.sync(config, NAME)
    pipeline.assert_index_equals_table(config, NAME)
    assert sorted(pipeline.documents(INDEX)) == ["1", "2"]


def test_an_empty_table_whose_index_holds_documents_no_checkpoint_accounts_for_is_work(pipeline: Pipeline) -> None:
    orders(pipeline).append(rows(1, 2))
    config = pipeline.config({"name": NAME})
    pipeline.sync(config, NAME)
    pipeline.catalog.drop_table(NAME)
    orders(pipeline)  # no snapshot
    lose_state(pipeline)
    assert work_of(pipeline, config)[0]

    pipeline.sync(config, NAME)  # index == table: no document
    assert work_of(pipeline, config) == (False, "")


def test_a_first_export_into_a_hand_made_empty_index_is_refused(pipeline: Pipeline) -> None:
    pipeline.client.indices.create(index=INDEX)  # made by hand, before the first sync: not icecdc's
    orders(pipeline).append(rows(1, 2))
    with pytest.raises(IndexNotOwned, match=r"index 'orders' is not icecdc's"):
        sync(pipeline.config({"name": NAME}), pipeline.spark, [NAME])
    alias = IndexAlias(pipeline.client, INDEX)
    assert alias.current() == INDEX and alias.generations() == {}  # the index as it was made


# -- generations are icecdc's and this index's ------------------------------------------------------


def test_an_index_named_like_a_generation_is_never_taken_for_one(pipeline: Pipeline) -> None:
    pipeline.client.indices.create(index="orders-2024", body={"mappings": {"properties": {"sku": {"type": "keyword"}}}})
    pipeline.write("orders-2024", "a", {"sku": "a"})
    orders(pipeline).append(rows(1, 2))
    config = capped(pipeline)
    pipeline.sync(config, NAME)
    assert aliased(pipeline) == ["orders-1"]
    recreate(pipeline, files=1)  # a rebuild deletes every generation the alias does not name
    pipeline.sync(config, NAME)

    assert aliased(pipeline) == ["orders-2"]
    assert pipeline.client.count(index="orders-2024")["count"] == 1  # another's index, untouched
    assert sorted(IndexAlias(pipeline.client, INDEX).generations()) == ["orders-2"]


def test_a_template_declaring_aliases_is_refused_before_anything_is_written(pipeline: Pipeline) -> None:
    pipeline.client.indices.put_index_template(
        name="orders-template", body={"index_patterns": ["orders*"], "template": {"aliases": {"all-orders": {}}}}
    )
    orders(pipeline).append(rows(1))
    config = pipeline.config({"name": NAME, "index_template": "orders-template"})
    with pytest.raises(SinkError, match=r"declares aliases \(all-orders\).*remove the aliases from the template"):
        sync(config, pipeline.spark, [NAME])
    assert pipeline.client.indices.get(index="orders*") == {}


# -- the swap --------------------------------------------------------------------------------------


@pytest.mark.domain_only  # refresh and cluster health: a collection has neither
def test_the_swap_refreshes_the_generation_and_waits_for_its_copies_first(pipeline: Pipeline, fault_proxy: FaultProxy) -> None:
    orders(pipeline).append(rows(1, 2))
    config = capped(pipeline)
    pipeline.sync(config, NAME)
    recreate(pipeline, files=1)
    proxied = parse_config({**pipeline.config_dict([{"name": NAME}]), "opensearch": {"url": fault_proxy.url}})
    sync(proxied, pipeline.spark, [NAME])

    order = [s.path for s in fault_proxy.seen() if s.path in ("/orders-2/_refresh", "/_cluster/health/orders-2", "/_aliases")]
    assert order == ["/orders-2/_refresh", "/_cluster/health/orders-2", "/_aliases"]


# -- fences ----------------------------------------------------------------------------------------


def _three_files_capped(pipeline: Pipeline) -> Config:
    """A table of three files, and a config whose passes each export one of them."""
    table = orders(pipeline)
    for f in range(3):
        table.append(rows(*range(3 * f, 3 * f + 3)))
    return capped(pipeline)


def test_a_partial_pass_that_lost_its_lease_marks_nothing(pipeline: Pipeline) -> None:
    config, store = _three_files_capped(pipeline), pipeline.store()
    with Lease(store, NAME, 60) as lease:
        lease.lost = True  # what the renewer sets when another run took the table
        with pytest.raises(LeaseLost):
            pipeline.one_pass(config, NAME, lease=lease)
    assert all(i.status == ItemStatus.PENDING for i in store.pending_items(NAME))


def test_a_partial_pass_whose_index_was_replaced_marks_nothing(pipeline: Pipeline) -> None:
    """A capped export's pass checks, before recording its files as applied, that the index it wrote
    is the one it began with, as a full pass does before its checkpoint."""
    config, store = _three_files_capped(pipeline), pipeline.store()

    def replace_the_index(point: PassPoint) -> None:
        if point == PassPoint.WRITTEN:  # the pass's writes are done, nothing recorded yet
            generations = list(pipeline.client.indices.get_alias(name="orders"))
            pipeline.client.indices.delete(index=generations)
            pipeline.client.indices.create(index="orders")

    with pytest.raises(ProcessingError, match="deleted or replaced during the pass"):
        pipeline.one_pass(config, NAME, probe=replace_the_index)
    assert all(i.status == ItemStatus.PENDING for i in store.pending_items(NAME))


class _RenewalFails(SqliteStateStore):
    """The real store, whose lease renewals raise after the first acquisition (a throttled DynamoDB)."""

    acquisitions = 0

    def acquire_lease(self, table_name: str, owner: str, seconds: float) -> bool:
        self.acquisitions += 1
        if self.acquisitions > 1:
            raise ConnectionError("the state store is unreachable")
        return super().acquire_lease(table_name, owner, seconds)


def test_a_lease_renewal_that_raises_marks_the_lease_lost(tmp_path: Path) -> None:
    store = _RenewalFails(tmp_path / "state.db")
    with Lease(store, NAME, 0.3) as lease:
        assert lease.held
        for _ in range(50):
            if lease.lost:
                break
            time.sleep(0.05)
        assert lease.lost


def test_a_table_created_again_empty_empties_its_index_and_follows_its_first_commits(pipeline: Pipeline) -> None:
    """Found by the model-based test: a table dropped and created again with no snapshot kept the
    old table's documents, since a table without a snapshot had nothing to plan."""
    orders(pipeline).append(rows(1, 2, 3))
    config = pipeline.config({"name": NAME})
    pipeline.sync(config, NAME)
    pipeline.catalog.drop_table(NAME)
    orders(pipeline)  # no snapshot
    assert work_of(pipeline, config)[0]

    pipeline.sync(config, NAME)  # index == table: no document
    assert pipeline.client.count(index=INDEX)["count"] == 0 and work_of(pipeline, config) == (False, "")
    assert sorted(IndexAlias(pipeline.client, INDEX).generations()) == ["orders-2"]
    pipeline.catalog.load_table(NAME).append(rows(7))
    pipeline.catalog.load_table(NAME).append(rows(8))
    assert pipeline.sync(config, NAME).writes.indexed == 2  # the first commits, as changes


def test_a_first_export_replayed_after_a_schema_change_rewrites_what_the_dead_run_wrote(pipeline: Pipeline) -> None:
    """Found by the fuzzer: a first export that died after writing left documents of the old schema
    at the export's version; after a column was added, its replay at that same version was refused
    (409) with `external`, and the documents lacked the new column for good."""
    orders(pipeline).append(rows(1, 2, 3))
    config = pipeline.config({"name": NAME})
    with pytest.raises(Crash):
        sync(config, pipeline.spark, [NAME], probe=crash_at(PassPoint.WRITTEN))  # no checkpoint: no resync follows
    table = pipeline.catalog.load_table(NAME)
    with table.update_schema() as change:
        change.add_column("note", StringType())
    pipeline.sync(config, NAME)  # index == table: every document has "note": null
    assert all('"note":null' in d for d in pipeline.documents(INDEX).values())


def test_a_table_created_again_empty_after_a_dead_first_export_is_emptied(pipeline: Pipeline) -> None:
    """Found by the fuzzer: no checkpoint yet, the first export's items pending and some of its
    documents written, then the table dropped and created empty: the items stayed pending for good."""
    orders(pipeline).append(rows(1, 2, 3))
    config = pipeline.config({"name": NAME})
    with pytest.raises(Crash):
        sync(config, pipeline.spark, [NAME], probe=crash_at(PassPoint.WRITTEN))
    pipeline.catalog.drop_table(NAME)
    orders(pipeline)  # no snapshot
    pipeline.sync(config, NAME)
    assert pipeline.client.count(index=INDEX)["count"] == 0
    assert pipeline.store().count_pending(NAME) == 0 and work_of(pipeline, config) == (False, "")
