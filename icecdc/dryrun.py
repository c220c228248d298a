"""`icecdc sync --dry-run`: what a sync would plan and which engine each of its passes would take.

Nothing is written: no state, no index, no lease, no tag on the table.

Planning, batch selection and capping, what a pass reads and the engine's rule are a sync's own:
`plan_table`, `select_batch`, `cap_batch`, `collapses_runs`, `pass_reads`, `Engines.kind_for`. They
run against a scratch copy of the state (`icecdc.state.scratch`) that is thrown away. The index is
not read. A sync that finds it deleted, replaced or of another shape rebuilds it, which this plan
does not show. An export reads the files an index's `where` may hold rows of, as a pass does
(`held_by_shape`).
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path

from pyiceberg.table import Table

from icecdc.batching import HeadSizes, cap_batch, collapses_runs, select_batch
from icecdc.catalog import Lineage, identifier_columns, load_table, open_catalog
from icecdc.config import Config, TableIndexConfig
from icecdc.engines import Engines
from icecdc.manifests import ChangedEntries, SnapshotSizes
from icecdc.model import Checkpoint, EngineKind, ItemHead, ItemKind, ItemStatus, WorkSize
from icecdc.planning import plan_table
from icecdc.reading.driver import pass_tasks
from icecdc.reading.tasks import held_by_shape, pass_reads
from icecdc.state import ItemBodies, StateStore, index_stores
from icecdc.state.scratch import scratch_copy
from icecdc.words import counted

# Passes simulated per index at most: each takes at least one item, so a plan ends well before.
MAX_PASSES = 10_000
DRY_RUN_INDEX = "dry-run"  # the index uuid an export's simulated passes mark their items applied to


@dataclass(frozen=True)
class PlannedPass:
    """One pass a sync would make: what it applies, what it reads, and its engine."""

    export: bool
    snapshots: int
    items: int
    size: WorkSize
    engine: EngineKind
    partial: bool  # ends inside an export cut into passes (`batch.max_files`, `max_bytes`)
    resync: str  # a rebuild's kind ("": none)

    def describe(self) -> str:
        what = "export" if self.export else f"{counted(self.snapshots, 'snapshot')} of changes"
        what += f" ({self.resync})" if self.resync else ""
        what += ", part of an export cut into passes" if self.partial else ""
        size = self.size
        return (
            f"{what}: {counted(self.items, 'work item')}, {counted(size.files, 'file')}, "
            f"{counted(size.rows, 'row')}, "
            f"{counted(size.bytes, 'byte')} "
            f"→ {self.engine} engine"
        )


@dataclass(frozen=True)
class IndexPlan:
    """What a sync would do for one index of a table."""

    table: str  # the state's key: the table's name, `<table>#<index>` under `indexes`
    index: str
    checkpoint: Checkpoint | None
    current_snapshot_id: int | None
    items: int  # work items pending once planned
    planned: int  # of which the sync's planning would write (the others are in the state already)
    passes: tuple[PlannedPass, ...]

    @property
    def snapshots(self) -> int:
        return sum(p.snapshots for p in self.passes)

    def lines(self) -> list[str]:
        """The plan as `icecdc sync --dry-run` prints it: a line for the index, one per pass."""
        at = "no checkpoint yet (first sync)"
        if self.checkpoint is not None:
            at = f"checkpoint {self.checkpoint.snapshot_id}"
        current = self.current_snapshot_id
        now = f"current snapshot {current}" if current is not None else "no snapshot yet"
        head = f"{self.table} → {self.index}: {at}, {now}"
        if not self.passes:
            return [f"{head}: caught up, nothing to apply"]
        items = f"{counted(self.items, 'work item')} ({self.planned} to plan)"
        head += f": {counted(self.snapshots, 'snapshot')} to apply, {items}"
        return [head, *(f"  pass {n}: {p.describe()}" for n, p in enumerate(self.passes, start=1))]


def dry_run(config: Config, table_names: Iterable[str] | None = None) -> list[IndexPlan]:
    """What `sync(config, table_names)` would plan and apply, pass by pass, writing nothing."""
    selected = [config.table(n) for n in table_names] if table_names else list(config.tables)
    catalog = open_catalog(config.catalog)
    loaded = [(t, load_table(catalog, t.name)) for t in selected]
    identifiers = {t.name: identifier_columns(table, t) for t, table in loaded}
    engines = Engines(config.engine, spark_config=None)  # only its rule: no Spark is started
    keys = [configured.key for t in selected for configured in t.each_index()]
    with tempfile.TemporaryDirectory(prefix="icecdc-dry-run-") as scratch_dir:
        store = scratch_copy(config.state, keys, Path(scratch_dir))
        try:
            return [
                _index_plan(
                    config,
                    engines,
                    index_config,
                    key,
                    scoped,
                    table,
                    identifiers[table_config.name],
                )
                for table_config, table in loaded
                for index_config, key, scoped in index_stores(table_config, store)
            ]
        finally:
            store.close()


def _index_plan(
    config: Config,
    engines: Engines,
    index_config: TableIndexConfig,
    key: str,
    store: StateStore,
    table: Table,
    identifiers: tuple[str, ...],
) -> IndexPlan:
    name = index_config.name
    checkpoint = store.get_checkpoint(name)
    changed = ChangedEntries()
    # protect_checkpoint tags the table's snapshots: a write
    unprotected = index_config.revised(protect_checkpoint=False)
    before = store.count_pending(name)
    plan = plan_table(table, unprotected, store, identifiers, changed, limits=config.batch)
    passes = tuple(_passes(config, engines, index_config, store, table, identifiers, changed))
    current = table.current_snapshot()
    current_id = current.snapshot_id if current is not None else None
    items = before + plan.written
    return IndexPlan(key, index_config.index, checkpoint, current_id, items, plan.written, passes)


def _passes(
    config: Config,
    engines: Engines,
    index_config: TableIndexConfig,
    store: StateStore,
    table: Table,
    identifiers: tuple[str, ...],
    changed: ChangedEntries,
) -> Iterator[PlannedPass]:
    """The passes a sync would make over the planned items.

    Each is recorded in the scratch `store` as a pass records it, applied or done with the
    checkpoint advanced, so that the next is selected.
    """
    lineage = Lineage.of(table)
    name, schema, shape = index_config.name, table.schema(), index_config.shape
    for _ in range(MAX_PASSES):
        batch, stale = select_batch(store.pending_heads(name), store.get_checkpoint(name), lineage)
        if stale:
            store.complete(name, None, stale)
        if not batch:
            return
        bodies = ItemBodies(store, name, batch, config.batch.max_files)
        sizes = HeadSizes(SnapshotSizes(table, changed), bodies)
        batch, partial = cap_batch(batch, config.batch, sizes)
        unread = [i for i in batch if i.status != ItemStatus.APPLIED]
        end = _end(batch, table, identifiers)
        # as the pass: commit by commit after a pass that may have written past the checkpoint
        collapse = collapses_runs(store.pass_end(name), store.get_checkpoint(name), end)
        tasks = pass_tasks(
            table, bodies.of(unread), identifiers, changed, config.batch.max_rewrite_bytes, collapse
        )
        tasks = replace(tasks, export=held_by_shape(tasks.export, schema, shape))
        earlier = [i for i in batch if i.kind == ItemKind.EXPORT and i.status == ItemStatus.APPLIED]
        # the export's last pass reads the keys of the files its earlier passes wrote
        if not partial and earlier and identifiers:
            earlier_tasks = pass_tasks(table, bodies.of(earlier), identifiers, changed).export
            tasks = replace(tasks, earlier=held_by_shape(earlier_tasks, schema, shape))
        size = pass_reads(tasks)
        resync = ", ".join(sorted({str(i.resync) for i in batch if i.resync}))
        export = any(i.kind == ItemKind.EXPORT for i in batch)
        snapshots = len({i.snapshot_id for i in batch})
        engine = engines.kind_for(size)
        yield PlannedPass(export, snapshots, len(unread), size, engine, partial, resync)
        store.begin_pass(name, end)
        if partial:
            store.mark_applied(name, unread, DRY_RUN_INDEX)
        else:
            store.complete(name, end, batch, replace=bool(resync))


def _end(batch: list[ItemHead], table: Table, identifiers: tuple[str, ...]) -> Checkpoint:
    """The checkpoint a pass over `batch` would leave."""
    last = max(batch, key=lambda i: i.sequence_number)
    schema_id = int(table.metadata.current_schema_id)
    end = (last.table_uuid, last.snapshot_id, last.sequence_number)
    return Checkpoint(*end, schema_id, identifiers)
