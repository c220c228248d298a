"""`Bench`: what the measurements of one `python -m bench` run share, and the fields their results share."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from opensearchpy import OpenSearch
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.table import Table

from bench.harness import sparklog
from bench.harness.environment import CATALOG, icecdc_config
from bench.harness.sampling import Measure, MemorySampler, measured
from bench.scales import Scale
from icecdc.catalog import identifier_columns
from icecdc.config import Config
from icecdc.planning import plan_table
from icecdc.reading.tasks import Task, files_read_by
from icecdc.state import open_state_store
from icecdc.sync import SyncResult, sync
from icecdc.verify import index_documents, table_documents


@dataclass
class Bench:
    """One Spark, one catalog, osmem and the bench sink, the memory sampler and the scale."""

    workdir: Path
    spark: Any
    opensearch_url: str
    sampler: MemorySampler
    scale: Scale
    sink_url: str = ""  # the bench sink (bench/harness/sink.py)
    sink_pid: int = -1

    def __post_init__(self) -> None:
        self.catalog = SqlCatalog(
            CATALOG, uri=f"sqlite:///{self.workdir / 'catalog.db'}", warehouse=(self.workdir / "warehouse").as_uri()
        )
        self.client = OpenSearch(hosts=[self.opensearch_url], timeout=120)
        self.sink_client = OpenSearch(hosts=[self.sink_url], timeout=120) if self.sink_url else None

    def config(self, table: str, index: str, export: bool = True) -> Config:
        return icecdc_config(self.workdir, self.opensearch_url, table, index, state=index, export=export)

    def sync(self, config: Config) -> tuple[Measure, SyncResult]:
        with measured(self.sampler) as measure:
            (result,) = sync(config, self.spark, [config.tables[0].name])
        return measure, result

    def plan(self, config: Config) -> tuple[Table, list[Any]]:
        """Plan the table into the config's state store (never processed by `sync`); its pending items."""
        table_config = config.tables[0]
        table = self.table(table_config.name)
        store = open_state_store(config.state)
        try:
            plan_table(table, table_config, store, identifier_columns(table, table_config))
            return table, store.pending_items(table_config.name)
        finally:
            store.close()

    def table(self, name: str) -> Table:
        return self.catalog.load_table(name)

    def snapshot_id(self, name: str) -> int:
        snapshot = self.table(name).current_snapshot()
        assert snapshot is not None
        return snapshot.snapshot_id

    def count(self, index: str) -> int:
        self.client.indices.refresh(index=index)
        return int(self.client.count(index=index)["count"])

    def drop_index(self, index: str, sink: bool = False) -> None:
        """Delete `index` from osmem, or from the bench sink (with the generations the alias `index` names)."""
        if not sink:
            self.client.indices.delete(index=index, ignore_unavailable=True)
            return
        assert self.sink_client is not None
        named = self.sink_client.indices.get_alias(name=index, ignore=404)
        for concrete in [*(k for k in named if k not in ("error", "status")), index]:
            self.sink_client.indices.delete(index=concrete, ignore_unavailable=True)


def measure_fields(measure: Measure) -> dict[str, Any]:
    """A measured step as results hold it: seconds, memory peaks, the name of its Spark phase."""
    return {
        "seconds": measure.seconds,
        "memory_mib": {k: round(v, 1) for k, v in asdict(measure.memory).items()},
        sparklog.KEY: measure.spark_phase,
    }


def counters(result: SyncResult) -> dict[str, Any]:
    """What a sync read and wrote, as results hold it."""
    return {
        "snapshots": result.snapshots,
        "files": result.files,
        "rows_read": result.changes.rows,
        "carryovers": result.changes.carryovers,
        "indexed": result.writes.indexed,
        "deleted": result.writes.deleted,
        "superseded": result.writes.superseded,
    }


def check_indexes(bench: Bench, client: OpenSearch, config: Config, name: str, ice: str, peer: str) -> dict[str, Any]:
    """icecdc's index against the table (its documents equal their rows; no row missing, no document
    more), and the peer's against icecdc's (the same ids: the peer writes documents its own way)."""
    table = bench.table(name)
    expected = dict(table_documents(table, identifier_columns(table, config.tables[0])))
    mine, theirs = index_documents(client, ice), index_documents(client, peer)
    return {
        "table_rows": len(expected),
        "icecdc_documents": len(mine),
        "peer_documents": len(theirs),
        "same_ids": set(mine) == set(theirs),
        "icecdc_documents_equal_rows": all(expected.get(i) == d for i, d in mine.items()),
        "icecdc_index_equals_table": mine == expected,
    }


def task_bytes(tasks: list[Task]) -> int:
    """Bytes of every data and delete file the tasks read: what the executors fetch."""
    seen: dict[str, int] = {}
    for task in tasks:
        for data_file in files_read_by(task):
            seen[data_file.file_path] = data_file.file_size_in_bytes
    return sum(seen.values())


def data_files(table: Table) -> int:
    return int(table.inspect.files().num_rows)
