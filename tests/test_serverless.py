"""End to end on an OpenSearch Serverless collection: no versions, no refresh, no scroll.

After every sync the index equals the table (Pipeline.sync asserts it, reading as `icecdc verify`
does: a wait for visibility, then `search_after`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pyiceberg.expressions import EqualTo, In

from icecdc.testing.commits import update
from tests.support.pipeline import ENGINES, SERVERLESS, Pipeline
from tests.support.tables import orders, rows

pytestmark = pytest.mark.parametrize("engine", ENGINES)


@pytest.fixture
def collection(tmp_path: Path, osmem_clone: Any, spark: Any, engine: Any, monkeypatch: pytest.MonkeyPatch) -> Pipeline:
    # the writers' credentials, in the driver and in Spark's Python workers (as Glue's have them)
    for name, value in {"AWS_ACCESS_KEY_ID": "AKIDSERVERLESS", "AWS_SECRET_ACCESS_KEY": "secret"}.items():
        monkeypatch.setenv(name, value)
        monkeypatch.setitem(spark.sparkContext.environment, name, value)
    return Pipeline(tmp_path, osmem_clone.url, spark, engine, SERVERLESS)


def test_export_then_updates_and_deletes_without_versions(collection: Pipeline) -> None:
    config = collection.config({"name": "db.orders"})
    table = orders(collection)
    table.append(rows(1, 2, 3))
    collection.sync(config, "db.orders")

    update(table, EqualTo("id", 2), lambda r: {**r, "status": "paid"})
    table.delete(In("id", [3]))
    table.append(rows(4, region="eu"))
    result = collection.sync(config, "db.orders")
    assert (result.writes.indexed, result.writes.deleted) == (2, 1)
    assert collection.versions("orders") == dict.fromkeys(["1", "2", "4"], 1) | {"2": 2}
