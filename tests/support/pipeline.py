"""The pipeline under test: a catalog, a state store and an OpenSearch, wired by one config; its
`sync` asserts the invariant: after a sync the index equals the table."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from opensearchpy import OpenSearch
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.table import Table

from icecdc.catalog import identifier_columns
from icecdc.config import Config, parse_config
from icecdc.destination.capabilities import Capabilities, capabilities_of
from icecdc.destination.client import open_client
from icecdc.destination.scan import make_visible
from icecdc.engines import Engines
from icecdc.model import Checkpoint, EngineKind, Probe
from icecdc.planning import plan_table
from icecdc.state import Lease, SqliteStateStore
from icecdc.sync import PassOptions, PassResult, SyncResult, process_table, sync
from icecdc.verify import diff_index, index_documents
from tests.support.serverless import CREDENTIALS, ServerlessStandIn

# Every engine, for the tests that run on both: `@pytest.mark.parametrize("engine", ENGINES)`.
ENGINES = [EngineKind.SPARK, EngineKind.IN_PROCESS]

# A Serverless collection's section, on top of its url: signed for aoss, seen by search after
# `visibility_seconds`, each write landing within `landing_seconds` (the tests' lease is 5 s)
SERVERLESS: dict[str, Any] = {
    "aws_service": "aoss",
    "aws_region": "us-east-1",
    "visibility_seconds": 0.15,
    "landing_seconds": 1.0,
}
# How long the stand-in's searches lag its writes in the tests: under `visibility_seconds`, so that
# a check which waits as icecdc does sees every write, and one which does not wait misses them.
SEARCH_DELAY = 0.1


def on_serverless(
    workdir: Path, standin: ServerlessStandIn, spark: Any, engine: EngineKind, monkeypatch: pytest.MonkeyPatch
) -> Pipeline:
    """A pipeline writing to the Serverless stand-in, whose searches lag the writes by SEARCH_DELAY.

    The writers' credentials are set in the driver and in Spark's Python workers, as Glue's have them.
    """
    standin.search_delay = SEARCH_DELAY
    for name, value in CREDENTIALS.items():
        monkeypatch.setenv(name, value)
        monkeypatch.setitem(spark.sparkContext.environment, name, value)
    return Pipeline(workdir, standin.url, spark, engine, SERVERLESS)


def config_dict(
    workdir: Path,
    opensearch_url: str,
    tables: list[dict[str, Any]],
    engine: EngineKind = EngineKind.SPARK,
    opensearch: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """`opensearch`: more of the section, e.g. a Serverless collection's (`SERVERLESS`)."""
    return {
        "catalog": {
            "name": "lake",
            "type": "sql",
            "uri": f"sqlite:///{workdir / 'catalog.db'}",
            "warehouse": (workdir / "warehouse").as_uri(),
        },
        # a short lease: a test that kills a sync reruns without waiting long for the dead run's lease
        "state": {"type": "sqlite", "path": str(workdir / "state.db"), "lease_seconds": 5},
        "opensearch": {"url": opensearch_url, **(opensearch or {})},
        "spark": {"master": "local[2]"},
        "engine": {"use": str(engine)},  # forced: a test runs where it says, whatever its size
        "tables": tables,
    }


@dataclass
class Pipeline:
    """A catalog, a state store and an OpenSearch, wired by one config, for one test."""

    workdir: Path
    opensearch_url: str
    spark: Any
    engine: EngineKind = EngineKind.SPARK
    opensearch: dict[str, Any] | None = None  # more of the config's section, as `config_dict` takes

    def __post_init__(self) -> None:
        self.catalog = SqlCatalog(
            "lake", uri=f"sqlite:///{self.workdir / 'catalog.db'}", warehouse=(self.workdir / "warehouse").as_uri()
        )
        self.catalog.create_namespace_if_not_exists("db")
        self.client: OpenSearch = open_client(parse_config(self.config_dict([{"name": "db.x"}])).opensearch)

    def config_dict(self, tables: list[dict[str, Any]]) -> dict[str, Any]:
        return config_dict(self.workdir, self.opensearch_url, tables, self.engine, self.opensearch)

    def config(self, *tables: dict[str, Any]) -> Config:
        return parse_config(self.config_dict(list(tables)))

    def store(self) -> SqliteStateStore:
        return SqliteStateStore(self.workdir / "state.db")

    def record_pass_end(self, name: str) -> None:
        """What a pass through the table's current snapshot records before it writes (`begin_pass`):
        the trace of a pass that then failed or died, for the next pass to find."""
        table = self.catalog.load_table(name)
        end = table.current_snapshot()
        assert end is not None
        self.store().begin_pass(name, Checkpoint(str(table.metadata.table_uuid), end.snapshot_id, end.sequence_number))

    def sync(self, config: Config, name: str) -> SyncResult:
        """Sync one table and assert the invariant."""
        (result,) = sync(config, self.spark, [name])
        self.assert_index_equals_table(config, name)
        return result

    def one_pass(self, config: Config, name: str, lease: Lease | None = None, probe: Probe | None = None) -> PassResult:
        """Plan, then one pass only: what a run that stops (times out, crashes) after one pass leaves
        behind. `lease`: the run's, `probe`: called at each of the pass's points."""
        table = self.catalog.load_table(name)
        store = self.store()
        plan_table(table, config.table(name), store, ("id",), limits=config.batch)
        engines = Engines(config.engine, spark=self.spark)
        return process_table(
            engines,
            table,
            config.table(name),
            store,
            config.opensearch,
            ("id",),
            PassOptions(lease=lease, limits=config.batch, probe=probe),
        )

    def assert_index_equals_table(self, config: Config, name: str) -> None:
        """Every index the table writes equals the table as its shape holds it (columns, rows, routing)."""
        table = self.catalog.load_table(name)
        for target in config.table(name).each_index():
            index = target.config
            identifiers = identifier_columns(table, index)
            diff = diff_index(table, identifiers, self.client, index.index, index.shape, index.pipeline is not None)
            assert not diff, f"{index.index}: {diff.summary()}"

    def documents(self, index: str) -> dict[str, str]:
        return index_documents(self.client, index)

    @property
    def capabilities(self) -> Capabilities:
        """What the destination offers: a domain everything, a collection no versions, refresh, scroll
        nor managed settings."""
        return capabilities_of(self.client)

    @property
    def versioned(self) -> bool:
        """Whether the destination has external versions and `_seq_no` (a domain; a collection has none)."""
        return capabilities_of(self.client).versions

    def visible(self, index: str) -> None:
        """Wait until the writes to `index` are seen by search: a refresh, or the collection's delay."""
        make_visible(self.client, index)

    def write(self, index: str, doc_id: str, body: dict[str, Any], version: int | None = None) -> None:
        """Index a document as another writer would: at `version` (`external_gte`) on a domain, plainly
        on a collection (no versions there); seen by search on return."""
        versioned = {"version": version, "version_type": "external_gte"} if version and self.versioned else {}
        self.client.index(index=index, id=doc_id, body=body, **versioned)
        self.visible(index)

    def delete(self, index: str, doc_id: str, version: int | None = None) -> None:
        """Delete a document as another writer would: at `version` (`external_gte`) on a domain, with
        OpenSearch's own versioning when None (a tombstone above it); seen by search on return."""
        versioned = {"version": version, "version_type": "external_gte"} if version and self.versioned else {}
        self.client.delete(index=index, id=doc_id, **versioned)
        self.visible(index)

    def versions(self, index: str) -> dict[str, int]:
        self.client.indices.refresh(index=index)
        hits = self.client.search(index=index, body={"query": {"match_all": {}}, "version": True, "size": 10000})["hits"]["hits"]
        return {h["_id"]: h["_version"] for h in hits}

    def writes_seen(self, index: str) -> dict[str, int | str]:
        """Each document's `_seq_no`: it grows with every write of the document, also one at an equal
        version (`external_gte`), which `versions` cannot tell from no write. A collection has no
        `_seq_no`: there each document's text stands for it, so only a write that changed it is seen."""
        if not self.versioned:
            return dict(self.documents(index))
        self.client.indices.refresh(index=index)
        body = {"query": {"match_all": {}}, "seq_no_primary_term": True, "size": 10000}
        return {h["_id"]: h["_seq_no"] for h in self.client.search(index=index, body=body)["hits"]["hits"]}


def arrow_rows(schema: pa.Schema, rows: list[dict[str, Any]]) -> pa.Table:
    return pa.Table.from_pylist(rows, schema=schema)


def reload(pipeline: Pipeline, name: str) -> Table:
    return pipeline.catalog.load_table(name)
