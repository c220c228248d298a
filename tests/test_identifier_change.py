"""Identifier columns are part of the index's identity: any change of them (none → some, some →
other, some → none) rebuilds the index into a new generation, and `has_work` and `status` see it
before a sync does. In process: no JVM."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from pyiceberg.expressions import EqualTo
from pyiceberg.schema import Schema

from icecdc.catalog import identifier_columns
from icecdc.cli import main
from icecdc.config import Config
from icecdc.destination.index import IndexAlias
from icecdc.errors import IcecdcError
from icecdc.model import EngineKind
from icecdc.status import has_work
from icecdc.sync import sync
from tests.support.pipeline import Pipeline
from tests.support.tables import SCHEMA, rows

pytestmark = pytest.mark.drawn_destination  # the pipeline writes to a domain or a Serverless collection

NAME = "db.orders"
NO_IDENTIFIER = Schema(*SCHEMA.fields)  # the orders table, without identifier fields


@pytest.fixture
def local(tmp_path: Path, osmem_clone: Any) -> Pipeline:
    return Pipeline(tmp_path, osmem_clone.url, spark=None, engine=EngineKind.IN_PROCESS)


def table_dict(columns: list[str] | None) -> dict[str, Any]:
    """The table's entry in the config: `columns` its identifier columns (None: the schema's)."""
    return {"name": NAME} if columns is None else {"name": NAME, "identifier_columns": columns}


def config(pipeline: Pipeline, columns: list[str] | None) -> Config:
    return pipeline.config(table_dict(columns))


def work_seen(
    pipeline: Pipeline,
    columns: list[str] | None,
    capsys: pytest.CaptureFixture[str],
) -> tuple[bool, str | None]:
    """What the planner's `has_work` and `icecdc status --json` (its `unfinished`) say of the
    table with identifier `columns`."""
    table = pipeline.catalog.load_table(NAME)
    table_config = config(pipeline, columns).table(NAME)
    work = has_work(table, table_config, pipeline.store(), identifier_columns(table, table_config))
    path = pipeline.workdir / "icecdc.yaml"
    path.write_text(yaml.safe_dump(pipeline.config_dict([table_dict(columns)])))
    capsys.readouterr()
    assert main(["status", "--config", str(path), "--json"]) == 0
    (status,) = json.loads(capsys.readouterr().out)
    return work, status["unfinished"]


def test_identifier_columns_set_later_rebuild_the_position_ids(
    local: Pipeline,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A table first synced without identifier columns (ids from row positions, so a delete is
    refused), then given them: its index is rebuilt with ids from the columns."""
    table = local.catalog.create_table(NAME, schema=NO_IDENTIFIER)
    table.append(rows(1, 2, 3))
    positions, by_id = config(local, None), config(local, ["id"])
    local.sync(positions, NAME)
    before = IndexAlias(local.client, "orders").current()
    assert not {"1", "2", "3"} & set(local.documents("orders"))  # the ids name positions
    assert work_seen(local, None, capsys) == (False, None)
    work, unfinished = work_seen(local, ["id"], capsys)
    assert work and "identifier columns changed (none → ['id'])" in (unfinished or "")

    table.delete(EqualTo("id", 2))
    with pytest.raises(IcecdcError, match=r"identifier_columns"):
        sync(positions, None, [NAME])
    local.sync(by_id, NAME)  # asserts the index equals the table
    assert sorted(local.documents("orders")) == ["1", "3"]
    after = IndexAlias(local.client, "orders").current()
    assert after not in (before, None)  # a new generation, swapped in
    assert local.store().get_checkpoint(NAME).identifier_columns == ("id",)
    assert work_seen(local, ["id"], capsys) == (False, None)

    table.delete(EqualTo("id", 3))  # deletes follow by key now
    local.sync(by_id, NAME)
    assert sorted(local.documents("orders")) == ["1"]


@pytest.mark.parametrize(
    ("old", "new", "ids"),
    [
        (["id"], ["id", "status"], ['["1","new"]', '["2","new"]']),
        (["id", "status"], ["id"], ["1", "2"]),
        (None, None, None),  # the schema's: "id", then none (the table drops its identifier field)
    ],
)
def test_any_change_of_identifier_columns_rebuilds_into_a_new_generation(
    local: Pipeline,
    capsys: pytest.CaptureFixture[str],
    old: list[str] | None,
    new: list[str] | None,
    ids: list[str] | None,
) -> None:
    table = local.catalog.create_table(NAME, schema=SCHEMA)
    table.append(rows(1, 2))
    before_config, after_config = config(local, old), config(local, new)
    local.sync(before_config, NAME)
    before = IndexAlias(local.client, "orders").current()
    if new is None:
        with table.update_schema() as change:
            change.set_identifier_fields()
    work, unfinished = work_seen(local, new, capsys)
    assert work and "identifier columns changed" in (unfinished or "")

    local.sync(after_config, NAME)  # asserts the index equals the table
    documents = sorted(local.documents("orders"))
    if ids is None:  # ids name the rows' positions
        assert len(documents) == 2 and not {"1", "2"} & set(documents)
    else:
        assert documents == ids
    assert IndexAlias(local.client, "orders").current() not in (before, None)
    assert work_seen(local, new, capsys) == (False, None)


def test_a_checkpoint_no_pass_wrote_has_no_identifier_columns_to_change(local: Pipeline) -> None:
    """`export: false` starts at a checkpoint planning records, with no schema and no identifier
    columns (as state from before either was recorded): unknown, not none, so no rebuild."""
    table = local.catalog.create_table(NAME, schema=SCHEMA)
    table.append(rows(1, 2))
    cfg = local.config({"name": NAME, "export": False})
    sync(cfg, None, [NAME])
    checkpoint = local.store().get_checkpoint(NAME)
    assert (checkpoint.schema_id, checkpoint.identifier_columns) == (-1, ())
    assert checkpoint.recorded_identifiers is None
    assert not has_work(table, cfg.table(NAME), local.store(), ("id",))
    table.append(rows(3))
    (result,) = sync(cfg, None, [NAME])
    assert sorted(local.documents("orders")) == ["3"] and result.writes.indexed == 1


def test_an_index_renamed_away_and_back_keeps_no_id_of_other_identifier_columns(local: Pipeline) -> None:
    """The index renamed to `other`, its identifier columns changed there, then renamed back: the
    index `orders` still held documents under the old ids at the current snapshot's version, which a
    rewrite in place keeps (it deletes only older versions). It is exported into a new generation."""
    table = local.catalog.create_table(NAME, schema=SCHEMA)
    table.append(rows(1, 2))

    def named(index: str, columns: list[str]) -> Config:
        return local.config({**table_dict(columns), "index": index})

    local.sync(named("orders", ["id", "region"]), NAME)
    local.sync(named("other", ["id", "region"]), NAME)
    local.sync(named("other", ["id"]), NAME)
    local.sync(named("orders", ["id"]), NAME)  # asserts the index equals the table
    assert sorted(local.documents("orders")) == ["1", "2"]
