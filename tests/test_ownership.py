"""An index is icecdc's only when icecdc made it for this table: a user's
index or alias under the configured name, or another deployment's generation, is refused before
anything is written or planned, and taken over only on the user's opt-in (`index_takeover`),
which keeps the user's index under another name or leaves it where it is, and says which. A
generation's marker names its owner (catalog, table identifier, table UUID): a table dropped and
created again under its name is still a reset; a marker of an older version, without owner, is
adopted when its table UUID matches."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
import yaml

from icecdc.catalog import identifier_columns
from icecdc.config import Config, parse_config
from icecdc.destination.index import IndexAlias
from icecdc.errors import IndexNotOwned
from icecdc.model import EngineKind
from icecdc.state import SqliteStateStore
from icecdc.status import has_work, table_status
from icecdc.sync import sync
from tests.support.cli import icecdc
from tests.support.pipeline import Pipeline
from tests.support.tables import SCHEMA, orders, rows

pytestmark = pytest.mark.drawn_destination  # the pipeline writes to a domain or a Serverless collection

NAME = "db.orders"
INDEX = "precious"
# A user's index: its own mapping, whose types conflict with icecdc's (id long, amount double).
USERS = {
    "properties": {
        "id": {"type": "keyword"},
        "amount": {"type": "text"},
        "note": {"type": "keyword"},
    }
}


@pytest.fixture
def engine() -> EngineKind:
    return EngineKind.IN_PROCESS


def users_index(pipeline: Pipeline, name: str = INDEX) -> None:
    """A hand-made index of 3 documents with its own mapping."""
    body: dict[str, Any] = {"mappings": USERS}
    if pipeline.capabilities.managed_settings:  # a collection sizes its indexes itself
        body["settings"] = {"number_of_shards": 2}
    pipeline.client.indices.create(index=name, body=body)
    for i in range(3):
        pipeline.client.index(index=name, id=f"u{i}", body={"id": f"u{i}", "amount": "a lot", "note": "mine"})
    pipeline.visible(name)


def as_found(pipeline: Pipeline, name: str) -> tuple[Any, Any, dict[str, str]]:
    """An index's mapping, aliases and documents: what must not change."""
    body = pipeline.client.indices.get(index=name)[name]
    return body["mappings"], body["aliases"], pipeline.documents(name)


def configured(pipeline: Pipeline, **table: Any) -> Config:
    return pipeline.config({"name": NAME, "index": INDEX, **table})


def config_file(pipeline: Pipeline, path: Path) -> Path:
    path.write_text(yaml.safe_dump(pipeline.config_dict([{"name": NAME, "index": INDEX}])))
    return path


def assert_nothing_planned(pipeline: Pipeline, name: str = NAME) -> None:
    store = pipeline.store()
    assert store.get_checkpoint(name) is None and store.pending_items(name) == []


def test_a_users_index_is_refused_by_sync_with_exit_2_and_left_as_it_was(
    pipeline: Pipeline,
    tmp_path: Path,
) -> None:
    users_index(pipeline)
    before = as_found(pipeline, INDEX)
    orders(pipeline).append(rows(1, 2))
    path = config_file(pipeline, tmp_path / "icecdc.yaml")

    ran = icecdc("sync", "--config", str(path))

    assert ran.returncode == 2, ran.stderr
    (line,) = [x for x in ran.stderr.splitlines() if x.startswith("icecdc: error:")]
    assert "index 'precious' is not icecdc's" in line and "index_takeover: true" in line
    assert as_found(pipeline, INDEX) == before  # documents, mapping (no field added), aliases
    assert pipeline.client.indices.get(index="precious*").keys() == {INDEX}  # no generation
    assert_nothing_planned(pipeline)


def test_a_users_index_with_conflicting_types_is_not_remapped(pipeline: Pipeline) -> None:
    users_index(pipeline)
    before = as_found(pipeline, INDEX)
    orders(pipeline).append(rows(1, 2))
    with pytest.raises(IndexNotOwned, match=r"'precious' carries no icecdc marker"):
        sync(configured(pipeline), pipeline.spark, [NAME])
    assert as_found(pipeline, INDEX) == before
    assert pipeline.client.indices.get_mapping(index=INDEX)[INDEX]["mappings"] == USERS
    assert_nothing_planned(pipeline)


@pytest.mark.domain_only  # a takeover copies the index by _reindex: refused on a collection
def test_taking_a_users_index_over_keeps_it_under_another_name_and_says_so(
    pipeline: Pipeline, caplog: pytest.LogCaptureFixture
) -> None:
    users_index(pipeline)
    mapping, _, documents = as_found(pipeline, INDEX)
    orders(pipeline).append(rows(1, 2))
    config = configured(pipeline, index_takeover=True)

    with caplog.at_level(logging.WARNING, logger="icecdc"):
        pipeline.sync(config, NAME)  # index == table

    (kept,) = list(pipeline.client.indices.get(index="precious-preicecdc-*"))
    kept_as = f"its old index is kept as '{kept}' (3 documents)"
    said = [r.getMessage() for r in caplog.records if "taken over" in r.getMessage()]
    assert said == [f"index 'precious': taken over (index_takeover); {kept_as}"]
    assert pipeline.client.indices.get(index=kept)[kept]["mappings"] == mapping
    assert pipeline.documents(kept) == documents
    assert sorted(pipeline.client.indices.get_alias(name=INDEX)) == ["precious-1"]
    orders_table = pipeline.catalog.load_table(NAME)
    orders_table.append(rows(3))
    pipeline.sync(config, NAME)  # the taken name is icecdc's from now on
    assert pipeline.documents(kept) == documents


@pytest.mark.domain_only  # the opt-in, index_takeover, is refused on a collection
def test_an_alias_over_a_users_indexes_is_refused_and_taken_over_only_on_opt_in(
    pipeline: Pipeline,
) -> None:
    users_index(pipeline, "users-2024")
    pipeline.client.indices.put_alias(index="users-2024", name=INDEX)
    before = as_found(pipeline, "users-2024")
    orders(pipeline).append(rows(1, 2))
    refused = r"alias 'precious' \(over 'users-2024'\) is not icecdc's"
    with pytest.raises(IndexNotOwned, match=refused):
        sync(configured(pipeline), pipeline.spark, [NAME])
    assert as_found(pipeline, "users-2024") == before
    assert sorted(pipeline.client.indices.get_alias(name=INDEX)) == ["users-2024"]
    assert_nothing_planned(pipeline)

    pipeline.sync(configured(pipeline, index_takeover=True), NAME)  # index == table
    assert sorted(pipeline.client.indices.get_alias(name=INDEX)) == ["precious-1"]
    mapping, aliases, documents = as_found(pipeline, "users-2024")  # as it was, but the alias
    assert (mapping, documents) == before[::2] and aliases == {}


def test_has_work_and_status_report_the_refusal(pipeline: Pipeline) -> None:
    users_index(pipeline)
    orders(pipeline).append(rows(1))
    config = configured(pipeline)
    table, index_config = pipeline.catalog.load_table(NAME), config.table(NAME)
    alias, store = IndexAlias(pipeline.client, INDEX), pipeline.store()

    assert has_work(table, index_config, store, identifier_columns(table, index_config), alias)
    status = table_status(table, index_config, store, 0.0, index=alias)
    assert status.unfinished.startswith("index 'precious' is not icecdc's")


def second_deployment(pipeline: Pipeline, tmp_path: Path) -> Config:
    """Another config, with its own state, whose table `db.customers` writes the same index name."""
    pipeline.catalog.create_table("db.customers", schema=SCHEMA).append(rows(7, 8, 9))
    raw = pipeline.config_dict([{"name": "db.customers", "index": INDEX}])
    state = {"type": "sqlite", "path": str(tmp_path / "other-state.db")}
    return parse_config({**raw, "state": state})


def test_a_second_deployment_on_the_same_index_name_is_refused(
    pipeline: Pipeline,
    tmp_path: Path,
) -> None:
    orders(pipeline).append(rows(1, 2, 3))
    first = configured(pipeline)
    pipeline.sync(first, NAME)
    before = as_found(pipeline, "precious-1")
    other = second_deployment(pipeline, tmp_path)

    with pytest.raises(IndexNotOwned, match=r"'precious-1' holds table 'db.orders'"):
        sync(other, pipeline.spark, ["db.customers"])

    assert as_found(pipeline, "precious-1") == before
    pipeline.assert_index_equals_table(first, NAME)
    table = pipeline.catalog.load_table(NAME)
    alias, store = IndexAlias(pipeline.client, INDEX), pipeline.store()
    assert table_status(table, first.table(NAME), store, 0.0, index=alias).unfinished == ""
    customers = pipeline.catalog.load_table("db.customers")
    store = SqliteStateStore(tmp_path / "other-state.db")
    status = table_status(customers, other.table("db.customers"), store, 0.0, index=alias)
    assert "holds table 'db.orders'" in status.unfinished  # the second one's status tells why


def test_a_table_dropped_and_created_again_is_still_a_reset_even_without_its_state(
    pipeline: Pipeline,
) -> None:
    orders(pipeline).append(rows(1, 2, 3))
    config = configured(pipeline)
    pipeline.sync(config, NAME)

    pipeline.catalog.drop_table(NAME)
    orders(pipeline).append(rows(2, 9))  # a new UUID, the same catalog and identifier
    pipeline.sync(config, NAME)  # index == table
    assert sorted(pipeline.client.indices.get_alias(name=INDEX)) == ["precious-2"]

    pipeline.catalog.drop_table(NAME)
    orders(pipeline).append(rows(4))
    (pipeline.workdir / "state.db").unlink()  # no checkpoint names the index: its marker does
    pipeline.sync(config, NAME)  # index == table
    assert sorted(pipeline.client.indices.get_alias(name=INDEX)) == ["precious-3"]


def test_a_generation_marked_by_an_older_version_is_adopted_when_its_table_uuid_matches(
    pipeline: Pipeline,
) -> None:
    table = orders(pipeline)
    table.append(rows(1, 2))
    # what a version before owners wrote: the alias and the table UUID only
    legacy = {"icecdc": {"index": INDEX, "table_uuid": str(table.metadata.table_uuid)}}
    pipeline.client.indices.create(index="precious-1", body={"mappings": {"_meta": legacy}})
    pipeline.client.indices.put_alias(index="precious-1", name=INDEX)
    pipeline.write(INDEX, "1", {"id": 1, "status": "stale"})

    pipeline.sync(configured(pipeline), NAME)  # index == table: a new generation replaces it
    assert sorted(pipeline.client.indices.get_alias(name=INDEX)) == ["precious-2"]
