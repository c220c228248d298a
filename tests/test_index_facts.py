"""The index's facts are read in one place, in one order (icecdc/destination/facts.py): `status`
and a pass read the same facts of the same index, so they reach the same verdict, and a fact the
earlier facts settle is never asked of OpenSearch. Real osmem behind the fault proxy, whose log
tells which requests each question made; no Spark."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from icecdc.config import Config
from icecdc.destination.facts import IndexQuery, Question, read_facts
from icecdc.destination.index import IndexAlias, Owner
from icecdc.destination.port import Destination
from icecdc.model import EngineKind, ResyncKind
from icecdc.status import has_work, index_work
from icecdc.sync.indexes import claim_index, spec_of
from icecdc.verdict import Copy, Fate, copy_to_write, pass_verdict
from tests.support.faults import FaultProxy
from tests.support.pipeline import Pipeline
from tests.support.tables import orders, rows

NAME = "db.orders"
INDEX = "orders"
RESHAPED = """index 'orders' holds another shape of the table (every column and row → {"exclude_columns":["amount"]})"""


@pytest.fixture
def synced(tmp_path: Path, fault_proxy: FaultProxy) -> Pipeline:
    """A table of two rows synced in process into the index `orders`, through the proxy."""
    pipeline = Pipeline(tmp_path, fault_proxy.url, None, EngineKind.IN_PROCESS)
    orders(pipeline).append(rows(1, 2))
    pipeline.sync(pipeline.config({"name": NAME}), NAME)
    return pipeline


def status_says(pipeline: Pipeline, config: Config) -> str:
    """What `status` and the planner say the index needs (`index_work`)."""
    table = pipeline.catalog.load_table(NAME)
    checkpoint = pipeline.store().get_checkpoint(NAME)
    return index_work(IndexAlias(pipeline.client, INDEX), checkpoint, config.table(NAME).shape, Owner.of(table))


def pass_says(pipeline: Pipeline, config: Config, rebuilding: bool = False) -> tuple[Fate, str]:
    """What a pass makes of its index before its batch: the run's CHECK question, then `pass_verdict`."""
    table, store = pipeline.catalog.load_table(NAME), pipeline.store()
    destination = Destination(pipeline.client)
    destination.claimed(lambda client: claim_index(client, config.table(NAME), store, table))
    checkpoint = store.get_checkpoint(NAME)
    query = IndexQuery(Question.CHECK, checkpoint, spec_of(table, config.table(NAME)), rebuilding=rebuilding)
    decided = pass_verdict(destination.facts(query).index, synced=checkpoint is not None)
    return decided.fate, decided.reason


def requests(proxy: FaultProxy, ask: Callable[[], object]) -> list[str]:
    """The requests `ask` made, in order, as 'METHOD /path'."""
    before = len(proxy.seen())
    ask()
    return [f"{s.method} {s.path}" for s in proxy.seen()[before:]]


def delete_generation(pipeline: Pipeline) -> None:
    pipeline.client.indices.delete(index="orders-1")


@pytest.mark.parametrize(
    ("change", "reshape", "said", "fate"),
    [
        pytest.param(None, False, "", Fate.FOLLOW, id="caught up"),
        pytest.param(delete_generation, False, "index 'orders' was deleted", Fate.RESET, id="deleted"),
        pytest.param(None, True, RESHAPED, Fate.RESET, id="reshaped"),
    ],
)
def test_status_and_a_pass_give_the_same_reason_for_the_same_index(
    synced: Pipeline, change: Callable[[Pipeline], None] | None, reshape: bool, said: str, fate: Fate
) -> None:
    if change is not None:
        change(synced)
    config = synced.config({"name": NAME, **({"exclude_columns": ["amount"]} if reshape else {})})
    assert status_says(synced, config) == said
    assert pass_says(synced, config) == (fate, said)


def test_a_refused_name_is_all_status_reads(synced: Pipeline, fault_proxy: FaultProxy) -> None:
    """The first fact settles it: neither the alias against the checkpoint nor the shape is read."""
    delete_generation(synced)
    synced.client.indices.create(index=INDEX, body={"mappings": {"properties": {"id": {"type": "keyword"}}}})
    config = synced.config({"name": NAME, "exclude_columns": ["amount"]})  # reshaped, too
    said: list[str] = []
    made = requests(fault_proxy, lambda: said.append(status_says(synced, config)))
    assert said[0].startswith(f"index {INDEX!r} is not icecdc's for table {NAME!r}"), said[0]
    assert made == [f"GET /{INDEX}"]


def test_a_rebuild_under_way_leaves_the_shape_unread(synced: Pipeline, fault_proxy: FaultProxy) -> None:
    """It builds the configured shape already: the pass follows it, and never asks the mapping."""
    config = synced.config({"name": NAME, "exclude_columns": ["amount"]})
    decided: list[tuple[Fate, str]] = []
    made = requests(fault_proxy, lambda: decided.append(pass_says(synced, config, rebuilding=True)))
    assert decided == [(Fate.FOLLOW, "")]
    assert not [r for r in made if "_mapping" in r], made
    assert pass_says(synced, config) == (Fate.RESET, RESHAPED)  # without a rebuild, it is read


def test_a_write_reads_the_mapping_only_for_a_rewrite_in_place(synced: Pipeline, fault_proxy: FaultProxy) -> None:
    """WRITE: the capabilities say versions without a request; a RESET's new generation needs no mapping of the
    alias's index, only the generations a resume could take; a REWRITE in place needs the mapping."""
    table = synced.catalog.load_table(NAME)
    spec, alias = spec_of(table, synced.config({"name": NAME}).table(NAME)), IndexAlias(synced.client, INDEX)
    changes = IndexQuery(Question.WRITE, spec=spec)
    found = []
    assert requests(fault_proxy, lambda: found.append(read_facts(alias, changes))) == []
    assert copy_to_write(found[0].destination) == Copy.ALIAS and found[0].destination.versions

    reset = IndexQuery(Question.WRITE, spec=spec, resync=frozenset({ResyncKind.RESET}))
    made = requests(fault_proxy, lambda: found.append(read_facts(alias, reset)))
    assert copy_to_write(found[1].destination) == Copy.NEW and found[1].resumed is None
    assert made == [f"GET /_alias/{INDEX}", f"GET /{INDEX}-*"]  # the generations a resume could take

    rewrite = IndexQuery(Question.WRITE, spec=spec, resync=frozenset({ResyncKind.REWRITE}))
    made = requests(fault_proxy, lambda: found.append(read_facts(alias, rewrite)))
    assert copy_to_write(found[2].destination) == Copy.ALIAS and found[2].destination.takes_rewrite
    assert [r for r in made if r.endswith("/_mapping")], made  # in place: the mapping can take it


def test_status_counts_the_documents_only_of_an_empty_table_never_synced(synced: Pipeline, fault_proxy: FaultProxy) -> None:
    """With no checkpoint (the state store lost), only an empty table asks whether the index holds documents none
    accounts for: its sync empties the index into a new generation. Any other table's first export is work anyway."""
    (synced.workdir / "state.db").unlink()
    synced.catalog.drop_table(NAME)
    orders(synced)  # created again, empty
    table, config = synced.catalog.load_table(NAME), synced.config({"name": NAME})
    alias, spec = IndexAlias(synced.client, INDEX), spec_of(table, config.table(NAME))
    found = []
    for empty in (False, True):
        query = IndexQuery(Question.STATUS, None, spec, Owner.of(table), empty=empty)
        made = requests(fault_proxy, lambda query=query: found.append(read_facts(alias, query).index))
        assert bool([r for r in made if r.endswith("/_count")]) == empty, made
    assert (
        found[0].unaccounted == ""
        and found[1].unaccounted == "index 'orders' holds 2 documents no checkpoint of the table accounts for"
    )
    assert has_work(table, config.table(NAME), synced.store(), ("id",), alias)
