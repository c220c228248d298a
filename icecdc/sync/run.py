"""The run: a table's indexes synced, pass after pass, until caught up with its snapshot.

This is the Glue job's work, the planner Lambda's for small batches, and `icecdc sync`'s second
step. The run holds each index's lease, plans each round (`icecdc.planning`), acts on each
index's verdict before a pass, as planning a resync, selects each index's batch, stops at its
deadline, logs its progress, and hands each pass (`icecdc.sync.passes`) its batches.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping
from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from typing import Any

from pyiceberg.catalog import Catalog
from pyiceberg.table import Table

from icecdc.batching import select_batch
from icecdc.catalog import Lineage, identifier_columns, load_table, open_catalog
from icecdc.config import BatchConfig, Config, OpenSearchConfig, TableConfig, TableIndexConfig
from icecdc.destination.client import check_reachable
from icecdc.destination.facts import IndexQuery, Question
from icecdc.destination.index import IndexAlias
from icecdc.destination.port import Destination
from icecdc.engines import Engines
from icecdc.errors import FilesGone, ProcessingError
from icecdc.manifests import ChangedEntries, lists_file
from icecdc.model import (
    Checkpoint,
    ItemHead,
    ItemKind,
    ItemStatus,
    PassPoint,
    Probe,
    Progress,
    ResyncKind,
)
from icecdc.planning import current_view, plan_table
from icecdc.state import Lease, PendingOnce, StateStore, index_stores, open_state_store
from icecdc.sync.indexes import applied_indexes, claim_index, spec_of
from icecdc.sync.passes import PassResult, TableRun, process_batch
from icecdc.verdict import Fate, Verdict, files_gone_verdict, pass_verdict, tidies

log = logging.getLogger(__name__)
# One line per pass: how far a sync is (the CLI renders it as a bar on a terminal).
progress_log = logging.getLogger("icecdc.progress")

# Rounds of plan-then-process in one sync before giving up on catching a table that keeps moving.
MAX_SYNC_ROUNDS = 100


@dataclass
class SyncResult(PassResult):
    """What a table's sync did: its passes summed, and how the run ended."""

    skipped: bool = False  # another run held the table's lease
    unfinished: bool = False  # a deadline or a stop came before the table was caught up

    def add(self, other: PassResult) -> None:
        """Count one more pass: its checkpoint and engine are the sync's latest."""
        self.snapshots += other.snapshots
        self.files += other.files
        self.reads += other.reads
        self.changes.add(other.changes)
        self.writes.add(other.writes)
        self.checkpoint = other.checkpoint or self.checkpoint
        self.engine = other.engine or self.engine
        self.seconds += other.seconds


@dataclass(frozen=True)
class PassOptions:
    """What `process_table` may be given beyond where and what it writes.

    That is the dead-letter index `dead_letter`, the manifest entries planning read as `changed`,
    the run's `lease`, the pass's `limits`, and a test's `probe`.
    """

    dead_letter: str | None = None
    changed: ChangedEntries | None = None
    lease: Lease | None = None
    limits: BatchConfig | None = None
    probe: Probe | None = None


def process_table(
    engines: Engines,
    table: Table,
    config: TableIndexConfig,
    store: StateStore,
    opensearch: OpenSearchConfig,
    identifiers: tuple[str, ...],
    options: PassOptions | None = None,
) -> PassResult:
    """`_process` with one index: one pass over the table's pending work (see `TableRun`)."""
    options = options or PassOptions()
    run = TableRun(
        engines,
        config,
        PendingOnce(store),
        opensearch,
        identifiers,
        options.dead_letter,
        options.changed or ChangedEntries(),
        options.lease,
        options.limits or BatchConfig(),
        options.probe,
    )
    return _process([run], table)[0]


def _process(runs: list[TableRun], table: Table) -> list[PassResult]:
    """One pass over the pending work of a table's indexes `runs`, in step when there are several.

    Each index is checked first. Indexes that turn out not to be in step after all, as one was
    replaced meanwhile, are processed one by one.
    """
    checkpoints = [run.store.get_checkpoint(run.name) for run in runs]
    view = current_view(table, runs[0].name, checkpoints[0])  # in step: the same checkpoint
    decided = [_check_index(run, view, c) for run, c in zip(runs, checkpoints, strict=True)]
    if view.current_snapshot() is None:
        return [
            r.empty(view, c, d.reason) for r, c, d in zip(runs, checkpoints, decided, strict=True)
        ]
    # With no checkpoint, an index is rebuilt only for documents none accounts for: the first
    # export makes a new generation.
    anew = [d.fate == Fate.NEW_GENERATION for d in decided]
    batches = [_select(run, view) for run in runs]
    if _apart(batches):
        return [result for run in runs for result in _process([run], table)]
    try:
        return process_batch(runs, view, batches, anew)
    except FilesGone as exc:
        view = view.refresh()
        rewrite = files_gone_verdict(str(exc), bool(exc.path) and lists_file(view, exc.path))
        if rewrite is None:
            raise ProcessingError(
                f"{exc}, though the table's current snapshot lists it: restore the file, or "
                "remove it from the table; nothing was planned or advanced"
            ) from None
        for run in runs:
            log.warning("%s: %s; resyncing from the current snapshot", run.name, exc)
            _plan(run, view, resync=(rewrite.fate.resync, rewrite.reason))
        batches = [_select(run, view) for run in runs]
        if _apart(batches):
            return [result for run in runs for result in _process([run], view)]
        return process_batch(runs, view, batches, anew)


def _apart(batches: list[list[ItemHead]]) -> bool:
    """True when the indexes' batches cannot share one pass: their items differ, or one rebuilds."""
    if len(batches) == 1:
        return False
    return len({frozenset(i.key for i in b) for b in batches}) != 1 or any(
        i.resync for i in batches[0]
    )


def _select(run: TableRun, table: Table) -> list[ItemHead]:
    """The batch to apply; stale items are retired unread."""
    batch, stale = select_batch(
        run.store.pending_heads(run.name), run.store.get_checkpoint(run.name), Lineage.of(table)
    )
    if stale:
        run.store.complete(run.name, None, stale)
    return batch


def _check_index(run: TableRun, table: Table, checkpoint: Checkpoint | None) -> Verdict:
    """Act on the index's verdict from `_index_verdict` before the pass.

    It plans an export when the index lost the checkpoint's documents, and a rebuild when it
    holds another shape of the table than the configuration's. It deletes what a finished swap
    left behind, unless a rebuild is under way or a first export is to build a new generation.
    """
    alias, decided = _index_verdict(run, table, checkpoint)
    if decided.fate.resync:
        _plan(run, table, resync=(decided.fate.resync, decided.reason))
    if tidies(decided, any(i.resync for i in run.store.pending_heads(run.name))):
        alias.delete_leftovers()
    return decided


def _index_verdict(
    run: TableRun, table: Table, checkpoint: Checkpoint | None
) -> tuple[IndexAlias, Verdict]:
    """The index, once its name is claimed and a stopped swap made, and its verdict.

    `verdict.pass_verdict` judges what the index holds, from the facts the destination reads for a
    CHECK question (`icecdc.destination.facts`): the checkpoint's documents, or with no
    checkpoint, documents the first export's own passes did not write, and the shape it was built
    for. It writes nothing else.
    """
    alias = _claimed(run, table)
    pending = run.store.pending_heads(run.name)
    written = applied_indexes(pending, run.identifiers)
    rebuilding = any(i.resync for i in pending)
    spec = spec_of(table, run.config)
    query = IndexQuery(Question.CHECK, checkpoint, spec, written=written, rebuilding=rebuilding)
    decided = pass_verdict(run.destination.facts(query).index, synced=checkpoint is not None)
    _say(run, decided, bool(written))
    return alias, decided


def _say(run: TableRun, decided: Verdict, resumed: bool) -> None:
    """Log what the pass makes of its index.

    A reset's reason is logged once, when it is planned. A new generation's reason is logged
    when its first pass starts it; `resumed` says this is a later pass of it.
    """
    if decided.fate == Fate.NEW_GENERATION:
        level = logging.DEBUG if resumed else logging.WARNING
        doing = "exporting the table into a new generation"
        log.log(level, "%s: %s; %s", run.name, decided.reason, doing)
    elif decided.fate == Fate.RESET:  # another shape, or the index deleted or replaced
        log.warning("%s: %s; rebuilding the index", run.name, decided.reason)


def _plan(run: TableRun, table: Table, resync: tuple[ResyncKind, str] | None = None) -> int:
    """Plan one index's work items: the table's new commits, or with `resync` an export.

    The answer is how many items of new commits the planning found.
    """
    return plan_table(
        table,
        run.config,
        run.store,
        run.identifiers,
        run.changed,
        resync=resync,
        limits=run.limits,
    ).items


def sync(
    config: Config,
    spark: Any = None,
    table_names: Iterable[str] | None = None,
    probe: Probe | None = None,
    engines: Engines | None = None,
    stopped: Callable[[], bool] | None = None,
    destination: Destination | None = None,
) -> list[SyncResult]:
    """Plan and process every selected table until it is caught up with its current snapshot.

    `spark`: a SparkSession to run large passes on; without one, the first pass that needs Spark
    starts a session from the configuration, stopped when the sync ends. `probe`: see
    `process_table`. `engines`: the caller's, kept open after the sync (a watch's rounds share
    them). `stopped`: see `SyncRun`. `destination`: the command's, when it opened one already."""
    selected = [config.table(name) for name in table_names] if table_names else list(config.tables)
    catalog = open_catalog(config.catalog)
    # Load every table and check its identifier columns before anything is written.
    loaded = [(t, load_table(catalog, t.name)) for t in selected]
    identifiers = {t.name: identifier_columns(table, t) for t, table in loaded}
    # the run's one client, its secret read once; each index's destination shares it
    opened = destination or Destination.open(config.opensearch, config.dead_letter)
    check_reachable(opened.client, config.opensearch.url, *config.index_names[:1])
    store = open_state_store(config.state)
    own = engines is None
    engines = Engines(config.engine, config.spark, spark) if engines is None else engines
    run = SyncRun(engines, probe=probe, stopped=stopped)
    try:
        # every index's name claimed, once for the run, before any table is written
        destinations = {
            key: _claim(opened.another(), index_config, scoped, table)
            for table_config, table in loaded
            for index_config, key, scoped in index_stores(table_config, store)
        }
        return [
            sync_table(
                config,
                catalog,
                table_config,
                table,
                identifiers[table_config.name],
                store,
                replace(run, destinations=destinations),
            )
            for table_config, table in loaded
        ]
    finally:
        store.close()
        if own:
            engines.close()


@dataclass(frozen=True)
class SyncRun:
    """How `sync_table` runs.

    `engines` says on which engines. `wait` says whether a second run waits for the lease.
    `deadline` is the time.monotonic() after which no pass starts. `stopped` is asked before
    each round of passes, and True ends the run as a deadline would: a watch's stop, which lets
    the passes done be reported. `probe` is a test's.
    """

    engines: Engines
    wait: bool = True
    deadline: float | None = None
    probe: Probe | None = None
    stopped: Callable[[], bool] | None = None
    # each index's destination by its state key, claimed already; the others are opened per table
    destinations: Mapping[str, Destination] = field(default_factory=dict)

    def over(self) -> bool:
        """Whether no pass may start: the deadline has passed, or a stop was asked."""
        late = self.deadline is not None and time.monotonic() > self.deadline
        return late or (self.stopped is not None and self.stopped())


def sync_table(
    config: Config,
    catalog: Catalog,
    table_config: TableConfig,
    table: Table,
    identifiers: tuple[str, ...],
    store: StateStore,
    run: SyncRun,
) -> SyncResult:
    """Plan and process one table, pass after pass, until it is caught up with its current snapshot.

    One run per table at a time: a second run waits for the lease when `run.wait` says so, or
    leaves the table to the run that holds it. Versioned writes make an overlap harmless anyway.
    No pass starts once the run is `over`: its deadline (the planner Lambda's time budget) has
    passed, or a watch was stopped. The result is then `unfinished`.
    """
    # planning and reading of this table share its manifest reads, across its indexes
    shared = _Shared(run.engines, identifiers, ChangedEntries(), run.probe)
    with ExitStack() as held:
        runs = []
        # each index: its own state and lease
        for index_config, key, scoped in index_stores(table_config, store):
            lease = held.enter_context(
                Lease(scoped, table_config.name, config.state.lease_seconds, run.wait, config.state)
            )
            if not lease.held:
                log.warning("%s: another run is syncing this table; leaving it to that run", key)
                return SyncResult(table_config.name, skipped=True)
            destination = run.destinations.get(key)
            runs.append(_index_run(config, shared, index_config, scoped, lease, destination))
        return catch_up(runs, catalog, table, run.over)


@dataclass(frozen=True)
class _Shared:
    """What the runs over a table's indexes share.

    They share the engines, the identifier columns, the manifest entries read, and a test's probe.
    """

    engines: Engines
    identifiers: tuple[str, ...]
    changed: ChangedEntries
    probe: Probe | None


def _index_run(
    config: Config,
    shared: _Shared,
    index_config: TableIndexConfig,
    store: StateStore,
    lease: Lease,
    destination: Destination | None = None,
) -> TableRun:
    """The run over one index of a table, under its lease.

    It has the settings `config` gives every run. It reads the index's pending items once a round,
    through `PendingOnce`.
    """
    return TableRun(
        shared.engines,
        index_config,
        PendingOnce(store),
        config.opensearch,
        shared.identifiers,
        config.dead_letter,
        shared.changed,
        lease,
        config.batch,
        shared.probe,
        config.dead_letter_section,
        destination or Destination.open(config.opensearch, config.dead_letter),
    )


def catch_up(
    runs: list[TableRun], catalog: Catalog, table: Table, over: Callable[[], bool]
) -> SyncResult:
    """Plan and process a table's indexes, pass after pass, until they caught up with its snapshot.

    `runs` holds one run per index; one index is the usual case. Each round plans every index, then
    `_round` processes them. When the run is `over` first (see `SyncRun`), the result is
    `unfinished`. The pending items are read afresh in a round when the table changed since the
    last: the passes of a capped export read them once (`PendingOnce`).
    """
    total = SyncResult(runs[0].name)
    started = time.monotonic()
    for run in runs:  # every index's name checked before anything is planned
        _claimed(run, table)
    for passes in range(1, MAX_SYNC_ROUNDS + 1):
        for run in runs:
            if run.lease is not None:
                run.lease.check()
        if over():
            total.unfinished = True
            break
        for run in runs:
            if not _plan(run, table) and passes == 1 and table.current_snapshot() is not None:
                log.info("%s: nothing new to plan", run.name)  # once a sync, not after each pass
            run.reached(PassPoint.PLANNED)
        results = _round(runs, table)
        for result in results:
            total.add(result)
        if all(result.snapshots == 0 for result in results):
            break
        _report(runs[0], total, passes, time.monotonic() - started, any(r.partial for r in results))
        table = _reloaded(runs, catalog, table, total.table)
    return total


def _claim(
    destination: Destination, config: TableIndexConfig, store: StateStore, table: Table
) -> Destination:
    """`destination`, its index's name claimed (`claim_index`)."""
    destination.claimed(lambda client: claim_index(client, config, store, table))
    return destination


def _claimed(run: TableRun, table: Table) -> IndexAlias:
    """The run's index, its name claimed once per run (`claim_index`)."""
    return run.destination.claimed(lambda client: claim_index(client, run.config, run.store, table))


def _reloaded(runs: list[TableRun], catalog: Catalog, table: Table, name: str) -> Table:
    """The table `name` as it is now, with commits made while the round worked.

    When it changed, the runs read their pending items afresh: another planner may have put items
    of its new commits.
    """
    now = load_table(catalog, name)
    if now.metadata_location != table.metadata_location:
        for run in runs:
            run.store.forget_pending()
    return now


def _report(
    run: TableRun, total: SyncResult, passes: int, seconds: float, inside_export: bool
) -> None:
    """Log how far the sync is, on `icecdc.progress`.

    It logs an export's files applied, or a backlog's snapshots, out of what is planned. The CLI
    draws a bar from it on a terminal.
    """
    pending = run.store.pending_heads(run.name)
    exports = [i for i in pending if i.kind == ItemKind.EXPORT] if inside_export else []
    files = sum(i.file_count for i in exports)
    applied = sum(i.file_count for i in exports if i.status == ItemStatus.APPLIED)
    backlog = len({i.snapshot_id for i in pending if i.kind == ItemKind.CHANGE})
    progress = Progress(
        run.name,
        passes,
        total.files,
        total.changes.rows,
        seconds,
        files,
        applied,
        total.snapshots,
        backlog,
    )
    progress_log.info(progress.line(), extra={"progress": progress})


def _round(runs: list[TableRun], table: Table) -> list[PassResult]:
    """One round's passes over a table's indexes.

    One pass reads the changed files once for the indexes whose pending work is the same, as
    `_in_step` finds them, and writes them all. An index whose work differs, as it has its own
    export or a rebuild, gets a pass of its own.
    """
    facts = [
        (run.store.get_checkpoint(run.name), run.store.pending_heads(run.name)) for run in runs
    ]
    together = [runs[i] for i in _in_step(facts)]
    together = together if len(together) > 1 else []
    results = _process(together, table) if together else []
    return results + [
        result for run in runs if run not in together for result in _process([run], table)
    ]


def _in_step(indexes: list[tuple[Checkpoint | None, list[ItemHead]]]) -> list[int]:
    """The largest group of a table's indexes that one pass can apply together, by position.

    Each index is given as its checkpoint and its pending items. The group's are at the same
    checkpoint, with the same pending changes and no export or rebuild under way.
    """
    groups: dict[tuple[int, frozenset[str]], list[int]] = {}
    for position, (checkpoint, pending) in enumerate(indexes):
        if (
            checkpoint is None
            or not pending
            or any(i.kind == ItemKind.EXPORT or i.resync for i in pending)
        ):
            continue
        key = (checkpoint.snapshot_id, frozenset(i.key for i in pending))
        groups.setdefault(key, []).append(position)
    return max(groups.values(), key=len, default=[])
