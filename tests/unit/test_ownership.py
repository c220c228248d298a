"""icecdc.destination.index.ownership: whose an index under a table's index name is, from its marker and the
table's state, and the one line that refuses it."""

from __future__ import annotations

from typing import Any

import pytest

from icecdc.destination.index.ownership import (
    Held,
    NameHolder,
    Owner,
    catalog_identity,
    foreign,
    held,
    marker,
    recorded_marker,
    refusal,
)

OWNER = Owner("lake (sqlite:///lake.db)", "db.orders", "uuid-1")
MINE = marker("orders", "uuid-1", owner=OWNER)["icecdc"]


@pytest.mark.parametrize(
    ("name", "properties", "identity"),
    [
        ("lake", {}, "lake"),
        (
            "lake",
            {"uri": "sqlite:///lake.db", "warehouse": "file:///w"},
            "lake (sqlite:///lake.db)",
        ),
        ("lake", {"warehouse": "s3://bucket/w"}, "lake (s3://bucket/w)"),
        ("glue", {"glue.id": "123456789012", "client.region": "eu-west-1"}, "glue (123456789012)"),
        ("glue", {"region_name": "eu-west-1"}, "glue (eu-west-1)"),
        (
            "rest",
            {"uri": "https://user:secret@rest.example:8181/api"},
            "rest (https://rest.example:8181/api)",
        ),
        ("rest", {"uri": ""}, "rest"),  # an empty property locates nothing
    ],
)
def test_a_catalog_is_named_with_where_it_is_and_never_a_credential(
    name: str,
    properties: dict[str, Any],
    identity: str,
) -> None:
    assert catalog_identity(name, properties) == identity


@pytest.mark.parametrize(
    ("recorded", "owns"),
    [
        (MINE, True),
        ({"table_uuid": "uuid-1"}, True),  # a marker of an older version: the UUID only
        ({**MINE, "table_uuid": "uuid-2"}, True),  # the table dropped and created again: a reset
        ({**MINE, "catalog": "other (sqlite:///other.db)", "table_uuid": "uuid-2"}, False),
        ({**MINE, "table": "db.other", "table_uuid": "uuid-2"}, False),
        ({"table_uuid": "uuid-2"}, False),
        ({"catalog": OWNER.catalog, "table": "", "table_uuid": ""}, False),  # no table named
        ({}, False),
    ],
)
def test_an_owner_owns_what_its_catalog_and_identifier_or_its_uuid_name(
    recorded: dict[str, Any],
    owns: bool,
) -> None:
    assert OWNER.owns(recorded) is owns


@pytest.mark.parametrize(
    ("body", "found"),
    [
        ({"mappings": {"_meta": {"icecdc": MINE}}}, MINE),
        ({"mappings": {"_meta": {"icecdc": "orders"}}}, None),  # not a marker icecdc writes
        ({"mappings": {"_meta": {"other": {}}}}, None),
        ({"mappings": {"_meta": ["icecdc"]}}, None),
        ({"mappings": {}}, None),
        ({}, None),
    ],
)
def test_the_marker_recorded_in_an_index(
    body: dict[str, Any],
    found: dict[str, Any] | None,
) -> None:
    assert recorded_marker(body) == found


def test_a_marker_records_the_alias_the_owner_and_the_shape() -> None:
    assert marker("orders", "uuid-1") == {"icecdc": {"index": "orders", "table_uuid": "uuid-1"}}
    assert marker("orders", "uuid-1", '{"where":"x"}', OWNER) == {
        "icecdc": {
            "index": "orders",
            "catalog": OWNER.catalog,
            "table": "db.orders",
            "table_uuid": "uuid-1",
            "shape": '{"where":"x"}',
        }
    }
    body = {
        "settings": {"index": {"uuid": "u-7"}},
        "mappings": {"_meta": marker("orders", "uuid-1")},
    }
    assert held("orders-1", body) == Held("orders-1", "u-7", marker("orders", "uuid-1")["icecdc"])


GENERATION = Held("orders-1", "u-1", MINE)
# a concrete index an older icecdc made: no marker, the state names it
STATE_ONLY = Held("orders", "u-0", None)
USERS = Held("orders", "u-9", None)
OTHER_TABLE = Held("orders-2", "u-2", {**MINE, "table": "db.other", "table_uuid": "uuid-2"})
OTHER_ALIAS = Held("items-1", "u-3", {**MINE, "index": "items"})
OLDER_MARKER = Held("orders-3", "u-4", marker("orders", "uuid-5")["icecdc"])  # no owner: a UUID


@pytest.mark.parametrize(
    ("holder", "known", "others", "why"),
    [
        (None, set(), [], ""),  # the name is free
        (NameHolder(True, (GENERATION,)), set(), [], ""),
        (NameHolder(False, (STATE_ONLY,)), {"u-0"}, [], ""),
        (
            NameHolder(False, (USERS,)),
            set(),
            [USERS],
            (
                "index 'orders' is not icecdc's for table 'db.orders' of catalog "
                "'lake (sqlite:///lake.db)' ('orders' carries no icecdc marker); nothing was "
                "written"
            ),
        ),
        (
            NameHolder(True, (GENERATION, OTHER_TABLE)),
            set(),
            [OTHER_TABLE],
            (
                "alias 'orders' (over 'orders-1', 'orders-2') is not icecdc's for table "
                "'db.orders' of catalog 'lake (sqlite:///lake.db)' ('orders-2' holds table "
                "'db.other' of catalog 'lake (sqlite:///lake.db)')"
            ),
        ),
        (
            NameHolder(True, (OTHER_ALIAS,)),
            set(),
            [OTHER_ALIAS],
            "('items-1' is icecdc's generation of index 'items')",
        ),
        (
            NameHolder(True, (OLDER_MARKER,)),
            set(),
            [OLDER_MARKER],
            "('orders-3' holds table 'uuid uuid-5')",  # an older marker names the UUID only
        ),
    ],
    ids=[
        "free",
        "a generation",
        "named by the state",
        "a user's",
        "another table's",
        "another alias's",
        "uuid",
    ],
)
def test_an_index_not_icecdcs_for_this_table_is_refused_in_one_line(
    holder: NameHolder | None, known: set[str], others: list[Held], why: str
) -> None:
    assert foreign(holder, "orders", OWNER, known) == others
    line = refusal(holder, "orders", OWNER, known)
    assert why in line and "\n" not in line
    assert bool(line) is bool(others)
    if others:
        assert line.endswith(
            "or set index_takeover: true to take the name over (an index is first kept as "
            "'orders-preicecdc-<time>', the indexes an alias names stay as they are)"
        )
