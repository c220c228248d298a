"""`icecdc demo`: everything embedded, a few commits, a sync after each, the index beside the table.

A pyiceberg SQL catalog on SQLite with files under ./.icecdc-demo, an OpenSearch-compatible
server (osmem-server from PyPI) started in-process, local Spark. The demo writes the config it
uses to ./.icecdc-demo/icecdc.yaml, so `icecdc status --config .icecdc-demo/icecdc.yaml` works
while the demo's server runs.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import yaml
from pyiceberg.catalog import Catalog
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.table import Table
from pyiceberg.transforms import IdentityTransform
from pyiceberg.types import DecimalType, LongType, NestedField, StringType, TimestamptzType

from icecdc.catalog import open_catalog
from icecdc.config import Config, parse_config
from icecdc.destination.client import OpenSearch
from icecdc.destination.port import Destination
from icecdc.sync import sync
from icecdc.testing.commits import compact, update
from icecdc.verify import diff_index, index_documents, table_documents
from icecdc.words import counted

TABLE = "shop.orders"
SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=True),
    NestedField(2, "customer", StringType(), required=True),
    NestedField(3, "region", StringType(), required=True),
    NestedField(4, "amount", DecimalType(10, 2), required=True),
    NestedField(5, "status", StringType(), required=True),
    NestedField(6, "updated_at", TimestamptzType(), required=True),
    identifier_field_ids=[1],
)
ARROW_SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("customer", pa.string(), nullable=False),
        pa.field("region", pa.string(), nullable=False),
        pa.field("amount", pa.decimal128(10, 2), nullable=False),
        pa.field("status", pa.string(), nullable=False),
        pa.field("updated_at", pa.timestamp("us", tz="UTC"), nullable=False),
    ]
)


def demo_config(workdir: Path, opensearch_url: str) -> Config:
    return parse_config(
        {
            "catalog": {
                "name": "demo",
                "type": "sql",
                "uri": f"sqlite:///{workdir / 'catalog.db'}",
                "warehouse": (workdir / "warehouse").as_uri(),
            },
            "state": {"type": "sqlite", "path": str(workdir / "icecdc-state.db")},
            "opensearch": {"url": opensearch_url},
            "spark": {
                "master": "local[2]",
                "conf": {"spark.ui.enabled": False, "spark.ui.showConsoleProgress": False},
            },
            "tables": [{"name": TABLE, "index": "orders"}],
        }
    )


def _orders(*rows: tuple[int, str, str, str, str]) -> pa.Table:
    now = dt.datetime(2026, 11, 21, 9, 0, tzinfo=dt.UTC)
    return pa.Table.from_pylist(
        [
            {
                "id": i,
                "customer": c,
                "region": r,
                "amount": Decimal(a),
                "status": s,
                "updated_at": now,
            }
            for i, c, r, a, s in rows
        ],
        schema=ARROW_SCHEMA,
    )


def _create_table(catalog: Catalog) -> Table:
    catalog.create_namespace_if_not_exists("shop")
    spec = PartitionSpec(
        PartitionField(source_id=3, field_id=1000, transform=IdentityTransform(), name="region")
    )
    return catalog.create_table(TABLE, schema=SCHEMA, partition_spec=spec)


def _commits(table: Table) -> list[tuple[str, Callable[[], object]]]:
    """The demo's story: each step is one or more commits, followed by a sync."""

    def move_region(row: dict[str, Any]) -> dict[str, Any]:
        return {**row, "region": "eu", "status": "shipped"}

    return [
        (
            "append 6 orders (first sync: export)",
            lambda: table.append(
                _orders(
                    (1, "ada", "us", "19.99", "new"),
                    (2, "bob", "us", "5.00", "new"),
                    (3, "cy", "eu", "42.10", "new"),
                    (4, "dee", "eu", "7.25", "new"),
                    (5, "eve", "apac", "99.00", "new"),
                    (6, "fay", "apac", "12.00", "new"),
                )
            ),
        ),
        (
            "append 2 more orders",
            lambda: table.append(
                _orders((7, "gus", "us", "3.50", "new"), (8, "hal", "eu", "8.80", "new"))
            ),
        ),
        (
            "update: order 2 paid",
            lambda: update(table, "id = 2", lambda r: {**r, "status": "paid"}),
        ),
        (
            "update a partition column: order 1 moves us → eu",
            lambda: update(table, "id = 1", move_region),
        ),
        ("delete orders 5 and 7", lambda: table.delete("id in (5, 7)")),
        ("compaction (replace snapshot: no document written)", lambda: compact(table)),
        (
            "upsert: order 3 changes, order 9 is new",
            lambda: table.upsert(
                _orders((3, "cy", "eu", "40.00", "refunded"), (9, "ivy", "apac", "1.00", "new")),
                join_cols=["id"],
            ),
        ),
    ]


def run_demo(workdir: Path, out: Callable[[str], None] = print) -> bool:
    """Run the demo in `workdir`; True when the index equalled the table after every sync.

    `workdir` is wiped first.
    """
    from osmem_server import OsmemServer  # the demo's embedded OpenSearch; only the demo needs it

    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # everything the demo runs is on loopback
    shutil.rmtree(workdir, ignore_errors=True)
    workdir.mkdir(parents=True)
    with OsmemServer.start(japanese=False) as server:
        config = demo_config(workdir.resolve(), server.url)
        (workdir / "icecdc.yaml").write_text(
            yaml.safe_dump(_config_as_yaml(config), sort_keys=False)
        )
        out(
            f"OpenSearch-compatible server (osmem) at {server.url}; catalog and state under "
            f"{workdir}/"
        )
        table = _create_table(open_catalog(config.catalog, create=True))
        destination = Destination.open(config.opensearch, config.dead_letter)
        client = destination.client
        all_equal = True
        for step, (title, commit) in enumerate(_commits(table), start=1):
            commit()
            table.refresh()
            (result,) = sync(
                config, destination=destination
            )  # small commits: in-process, no Spark (config `engine`)
            diff = diff_index(table, ("id",), client, "orders")
            all_equal &= not diff
            out(f"\n── step {step}: {title}")
            out(
                f"   sync ({result.engine} engine): {counted(result.snapshots, 'snapshot')}, "
                f"{counted(result.files, 'file')}, "
                f"{counted(result.changes.rows, 'row')} read, "
                f"{counted(result.changes.carryovers, 'carryover')} dropped, "
                f"{result.writes.indexed} indexed, {result.writes.deleted} deleted"
            )
            out(_side_by_side(table, client))
            out(f"   {'✓' if not diff else '✗'} {diff.summary()}")
    return all_equal


def _config_as_yaml(config: Config) -> dict[str, Any]:
    return {
        "catalog": {"name": config.catalog.name, **config.catalog.properties},
        "state": config.state.model_dump(mode="json"),
        "opensearch": {"url": config.opensearch.url},
        "spark": {"master": config.spark.master, "conf": dict(config.spark.conf)},
        "tables": [{"name": t.name, "index": t.index} for t in config.tables],
    }


def _side_by_side(table: Table, client: OpenSearch) -> str:
    """Each order as the table has it and as the index has it, in the columns the story changes."""
    rows = {str(doc_id): json.loads(doc) for doc_id, doc in table_documents(table, ("id",))}
    docs = {doc_id: json.loads(doc) for doc_id, doc in index_documents(client, "orders").items()}
    shown = ("customer", "region", "amount", "status")

    def cells(document: dict[str, Any] | None) -> str:
        return " ".join(f"{document[c]!s:<9}" for c in shown) if document else f"{'—':<39}"

    header = " ".join(f"{c:<9}" for c in shown)
    lines = [f"   {'id':>3}  {'TABLE':<39}   INDEX", f"   {'':>3}  {header}   {header}"]
    for doc_id in sorted(set(rows) | set(docs), key=int):
        lines.append(f"   {doc_id:>3}  {cells(rows.get(doc_id))}   {cells(docs.get(doc_id))}")
    return "\n".join(lines)
