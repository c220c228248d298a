"""One pass over a table's pending work, for 1..N of its indexes: read, shuffle, write.

A pass caps the batch it is given (`icecdc.batching`), finds where each index writes (the alias, or
a rebuild's generation: `icecdc.destination.index`), resolves the items to file tasks (metadata
only), picks its engine from what they read (`icecdc.engines`: Spark, or in-process for small
passes), prepares the indexes, applies the tasks (read the files once, bring every change of a key
together, write each key's net change to every index, versioned), completes the items with the
checkpoint, and finishes a rebuild. The checkpoint advances only after every write of the pass
succeeded.

A pass plans nothing: the run (`icecdc.sync.run`) checks each index, plans its work, selects
its batch and hands the batches over; `tests/test_layers.py` keeps `icecdc.planning` out.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace

from pyiceberg.table import Table

from icecdc.batching import HeadSizes, cap_batch, collapses_runs
from icecdc.changelog import ChangeStats
from icecdc.config import BatchConfig, DeadLetterConfig, OpenSearchConfig, TableIndexConfig
from icecdc.deadletters import systemic
from icecdc.destination.client import OpenSearch, capabilities_of, is_dev_server
from icecdc.destination.facts import IndexQuery, Question
from icecdc.destination.index import IndexSpec, check_pipeline, index_uuid
from icecdc.destination.port import Destination
from icecdc.destination.sink import SinkStats
from icecdc.devlimits import DEV_SERVER_LIMITS, DEV_SERVER_ROWS
from icecdc.documents import Shape
from icecdc.engines import Engine, Engines, Target, Targets
from icecdc.errors import FilesGone, NothingApplied, ProcessingError, SystemicDeadLetters
from icecdc.logs import SUMMARY_LOGGER
from icecdc.manifests import ChangedEntries, SnapshotSizes
from icecdc.model import (
    NO_SNAPSHOT,
    Checkpoint,
    EngineKind,
    ItemHead,
    ItemKind,
    ItemStatus,
    PassPoint,
    Probe,
    ResyncKind,
    VersionType,
    WorkSize,
)
from icecdc.protection import keep_unapplied
from icecdc.reading.driver import pass_tasks
from icecdc.reading.reader import TableReader
from icecdc.reading.tasks import ExportTasks, FileTask, PassTasks, held_by_shape, pass_reads
from icecdc.state import ItemBodies, Lease, StateStore
from icecdc.state.lease import LeaseFence
from icecdc.sync.indexes import alias_of, applied_indexes, applied_mark, spec_of
from icecdc.verdict import Copy, copy_to_write, empty_verdict
from icecdc.words import counted

log = logging.getLogger(__name__)
summary_log = logging.getLogger(SUMMARY_LOGGER)  # a pass's summary: the CLI prints its own


@dataclass
class PassResult:
    """What one pass over a table's pending items did."""

    table: str
    snapshots: int = 0
    files: int = 0
    changes: ChangeStats = field(default_factory=ChangeStats)
    writes: SinkStats = field(default_factory=SinkStats)
    checkpoint: Checkpoint | None = None
    seconds: float = 0.0
    engine: EngineKind | None = None  # where the pass ran
    reads: WorkSize = WorkSize(0, 0, 0)  # what the engine was chosen by: files, rows, bytes read
    partial: bool = False  # the caps ended this pass inside an export; the next pass goes on

    def add_read(self, changes: ChangeStats, writes: SinkStats) -> None:
        """Count what one read of the pass found and wrote."""
        self.changes.add(changes)
        self.writes.add(writes)


@dataclass(frozen=True)
class TableRun:
    """What passes over one table work with, but the table's metadata (which a pass may reload).

    `changed`: the snapshots' manifest entries, shared with planning in this process.
    `lease`: the table's lease this run holds; the checkpoint advances only while it is held.
    `limits`: how much one pass may read. `probe`: called at each `PassPoint` (tests crash there).
    `letter_limits`: the share of a pass's rows its dead letters may be before the pass fails."""

    engines: Engines
    config: TableIndexConfig
    store: StateStore
    opensearch: OpenSearchConfig
    identifiers: tuple[str, ...]
    dead_letter: str | None = None
    changed: ChangedEntries = field(default_factory=ChangedEntries)
    lease: Lease | None = None
    limits: BatchConfig = field(default_factory=BatchConfig)
    probe: Probe | None = None
    letter_limits: DeadLetterConfig = field(default_factory=DeadLetterConfig)
    # the index's destination for the whole run: opened from `opensearch` when not given
    destination: Destination = None  # type: ignore[assignment]

    def __post_init__(self) -> None:
        if self.destination is None:
            opened = Destination.open(self.opensearch, self.dead_letter)
            object.__setattr__(self, "destination", opened)
        # the pass's dead letters are the destination's sink
        assert self.destination.dead_letter == self.dead_letter

    @property
    def name(self) -> str:
        return self.config.name

    @property
    def client(self) -> OpenSearch:
        """The run's client of the index's destination, opened once."""
        return self.destination.client

    def reached(self, point: PassPoint) -> None:
        if self.probe is not None:
            self.probe(point)

    def empty(self, table: Table, checkpoint: Checkpoint | None, rebuild: str) -> PassResult:
        """A table with no snapshot: its index holds nothing.

        Some tables get an empty generation, swapped in as a rebuild's, and a NO_SNAPSHOT
        checkpoint. That is one whose index held another table's documents, as it was dropped and
        created again empty, or one whose empty index is to be rebuilt. `rebuild` says why: the
        index was deleted or replaced since, is of another shape than the configuration's, or holds
        documents no checkpoint accounts for. The old table's items are retired unread.
        """
        uuid = str(table.metadata.table_uuid)
        # a run of the old table that died, or its first export
        pending = self.store.pending_heads(self.name)
        decided = empty_verdict(uuid, checkpoint, rebuild)
        if not pending and decided.follows:
            return PassResult(self.name)
        reason = decided.reason or "created again, empty"  # pending items of a table caught up
        log.warning("%s: the table has no snapshot now: emptying its index (%s)", self.name, reason)
        client = self.client
        alias, spec = alias_of(client, self.config, table), spec_of(table, self.config)
        generation = alias.start_rebuild(spec, set())
        empty = Checkpoint(
            uuid,
            NO_SNAPSHOT,
            0,
            table.metadata.current_schema_id,
            self.identifiers,
            index_uuid(client, generation) or "",
        )
        if self.lease is not None:
            self.lease.check()
        fence = self.lease.owner if self.lease else None
        self.store.complete(self.name, empty, pending, replace=True, fence=fence)
        self.reached(PassPoint.CHECKPOINTED)
        alias.finish(generation, spec, self.probe)
        return PassResult(self.name, checkpoint=empty)


@contextmanager
def _manifests_of(table_name: str) -> Iterator[None]:
    """Reading the batch's manifests, where one deleted meanwhile is `FilesGone`.

    A manifest is deleted when its snapshot expired.
    """
    try:
        yield
    except FileNotFoundError as exc:
        raise FilesGone(
            f"table {table_name!r}: a manifest of the batch is missing: {exc}"
        ) from None


@dataclass(frozen=True)
class _Destination:
    """Where a pass writes, found before anything is written.

    It is the index, the alias or a rebuild's generation, and its uuid. The uuid is "" when the
    pass creates the index.
    """

    index: str
    uuid: str
    rebuild: bool  # a generation swapped in when the pass completes the rebuild
    resumable: frozenset[str] = frozenset()  # a rebuild's: the uuids its earlier passes wrote to


def process_batch(
    runs: list[TableRun], table: Table, batches: list[list[ItemHead]], anew: list[bool]
) -> list[PassResult]:
    """One pass over a batch, from its selection to its finish, for one or more indexes.

    The steps are: cap, destinations, tasks, engine, prepare the destinations, begin by recording
    their end, apply, complete, finish. No index's checkpoint advances before every index has its
    writes. With `anew`, an index's first export writes a new generation, as the index holds
    documents it did not write.
    """
    started = time.monotonic()
    results = [PassResult(run.name) for run in runs]
    if not batches[0]:  # stale items, retired
        return results
    steps, partial = _passes(runs, table, batches, anew, started)
    for result in results:
        result.partial = partial
    found = [step.find_destination() for step in steps]
    unread = [step.unread(f) for step, f in zip(steps, found, strict=True)]
    collapse_runs = all(step.may_collapse() for step in steps)
    tasks, engine = _tasks_and_engine(steps, found, unread[0], collapse_runs, partial)
    destinations = [step.prepare_destination(f) for step, f in zip(steps, found, strict=True)]
    _begin_and_apply(steps, engine, tasks, destinations, results, collapse_runs)
    for step, result in zip(steps, results, strict=True):  # no index advances if one fails so
        step.check_letters(result)
    lanes = list(zip(steps, unread, destinations, results, strict=True))
    if partial:  # an export goes on in the next pass; nothing is finished, nothing advances
        return [step.mark_applied(u, destination, result) for step, u, destination, result in lanes]
    for step, _, destination, result in lanes:
        step.complete(engine, destination, result)
        step.finish(destination, result)
    return results


def _tasks_and_engine(
    steps: list[_Pass],
    found: list[_Destination],
    unread: list[ItemHead],
    collapse_runs: bool,
    partial: bool,
) -> tuple[PassTasks, Engine]:
    """The first index's tasks over its `unread` items, and the engine for what they read.

    The pass that finishes an export cut into passes also reads the earlier passes' files for their
    keys, to find duplicates across them all, but for the files every index's earlier passes in
    this run kept the keys of, when the engine is one that keeps them.
    """
    first = steps[0]
    tasks = first.tasks(unread, collapse_runs)
    if partial:
        return tasks, first.engine(tasks)
    read = {i.key for i in unread}
    earlier = [i for i in first.batch if i.kind == ItemKind.EXPORT and i.key not in read]
    lanes = zip(steps, found, strict=True)
    held = frozenset.intersection(*(s.run.engines.carried(s.name, f.index) for s, f in lanes))
    tasks = first.with_earlier(tasks, earlier, held)
    engine = first.engine(tasks)
    if tasks.carried and engine.kind != EngineKind.IN_PROCESS:  # an engine that keeps no keys
        tasks = first.with_earlier(replace(tasks, carried=frozenset()), earlier, frozenset())
    return tasks, engine


def _begin_and_apply(
    steps: list[_Pass],
    engine: Engine,
    tasks: PassTasks,
    destinations: list[_Destination],
    results: list[PassResult],
    collapse_runs: bool,
) -> None:
    """Record every index's pass (`_Pass.begin`), then apply its tasks (`_apply`).

    A pass whose changes' one write, from this process, OpenSearch refused whole left the indexes
    as they were: it puts back the ends recorded before it, so that its retry reads as it did.
    """
    befores = [step.begin(collapse_runs) for step in steps]
    try:
        _apply(steps, engine, tasks, destinations, results)
    except NothingApplied:
        if engine.kind == EngineKind.IN_PROCESS and not (tasks.export or tasks.earlier):
            for step, before in zip(steps, befores, strict=True):
                step.unbegin(before)
        raise


def _passes(
    runs: list[TableRun],
    table: Table,
    batches: list[list[ItemHead]],
    anew: list[bool],
    started: float,
) -> tuple[list[_Pass], bool]:
    """Each index's pass over the items the first index's caps keep, and whether it is partial.

    The indexes' items are the same (`run._apart`): their files are fetched once, from the first
    index's store (`ItemBodies`), as the caps and the pass ask for them.
    """
    bodies = ItemBodies(runs[0].store, runs[0].name, batches[0], runs[0].limits.max_files)
    with _manifests_of(runs[0].name):
        sizes = HeadSizes(SnapshotSizes(table, runs[0].changed), bodies)
        capped, partial = cap_batch(batches[0], runs[0].limits, sizes)
    order = {item.key: n for n, item in enumerate(capped)}
    client = runs[0].client
    return [
        _Pass(
            run,
            table,
            sorted((i for i in batch if i.key in order), key=lambda i: order[i.key]),
            client,
            spec_of(table, run.config),
            started,
            bodies,
            export_anew,
        )
        for run, batch, export_anew in zip(runs, batches, anew, strict=True)
    ], partial


def _apply(
    steps: list[_Pass],
    engine: Engine,
    tasks: PassTasks,
    destinations: list[_Destination],
    results: list[PassResult],
) -> None:
    """Write an export's rows into each index, then each key's net change from the changes' files.

    The changes' files are read once for every index (`Targets`); the table's totals go into the
    first index's result. Versions order the two, whichever lands first.
    """
    first, partial = steps[0], results[0].partial
    for result in results:
        result.engine, result.reads = engine.kind, pass_reads(tasks)
        result.snapshots = len({i.snapshot_id for i in first.batch})
        result.files = len(tasks.all)
    first.say_applying(engine, results[0], len(steps))
    first.say_if_dev_server(results[0].reads)
    targets = [step.target(d) for step, d in zip(steps, destinations, strict=True)]
    # the pass that finishes the export settles its duplicate identifiers, among every pass's rows
    export = (
        ExportTasks(tasks.export, None)
        if partial
        else ExportTasks(tasks.export, tasks.earlier, tasks.carried, first.carried_tasks)
    )
    exporting = bool(export.written or export.earlier)
    for step, target, result in zip(steps, targets, results, strict=True):
        if exporting:
            reader = step.reader((step.run.config.shape,))
            result.add_read(*engine.export(reader, export, target))
    if tasks.changes:
        if exporting:  # the ids the export's rows share are letters now: the changes hold them out
            targets = [
                replace(t, held_out=s.held_out()) for s, t in zip(steps, targets, strict=True)
            ]
        reader = first.reader(tuple(step.run.config.shape for step in steps))
        to = targets[0] if len(targets) == 1 else Targets(tuple(targets))
        results[0].add_read(*engine.apply(reader, tasks.changes, to))
    for step in steps:
        step.run.reached(PassPoint.WRITTEN)


@dataclass(frozen=True)
class _Pass:
    """What the steps of one pass over a table's batch share."""

    run: TableRun
    table: Table
    batch: list[ItemHead]
    client: OpenSearch
    spec: IndexSpec  # the mapping of the documents written
    started: float
    bodies: ItemBodies  # the files of the batch's items, fetched as they are asked for
    # a first export into a new generation: the index holds documents no checkpoint accounts for
    export_anew: bool = False

    @property
    def name(self) -> str:
        return self.run.name

    @property
    def resync(self) -> set[ResyncKind]:
        return {i.resync for i in self.batch if i.resync}

    @property
    def schema_id(self) -> int:
        return int(self.table.metadata.current_schema_id)

    @property
    def fence(self) -> str | None:
        return self.run.lease.owner if self.run.lease else None

    def find_destination(self) -> _Destination:
        """Where the pass will write, reading only, so that its engine is known before any write.

        A reset, a first export into an index holding documents it did not write, and a rewrite the
        current index cannot take, as a type or the shape changed, export into a new generation
        while the alias keeps serving the current one. Their later passes, under batch caps or in a
        rerun after a crash, resume the generation their APPLIED items name. The destination reads
        the facts of a WRITE question (`icecdc.destination.facts`); `verdict.copy_to_write`
        decides. The index's ingest pipeline must exist.
        """
        alias = alias_of(self.client, self.run.config, self.table)
        if self.run.config.pipeline is not None:
            check_pipeline(self.client, self.run.config.pipeline, alias.name)
        resumable = applied_indexes(self.batch, self.run.identifiers)
        query = IndexQuery(
            Question.WRITE,
            spec=self.spec,
            written=resumable,
            resync=frozenset(self.resync),
            export_anew=self.export_anew,
        )
        found = self.run.destination.facts(query)
        copy = copy_to_write(found.destination)
        if copy == Copy.ALIAS:
            return _Destination(alias.name, alias.uuid() or "", rebuild=False)
        if copy == Copy.RESUME and found.resumed is not None:
            return _Destination(*found.resumed, rebuild=True, resumable=resumable)
        return _Destination("", "", rebuild=True, resumable=resumable)

    def unread(self, destination: _Destination) -> list[ItemHead]:
        """Every item but the export's files an earlier pass applied to this index with this schema.

        Their tasks tell exactly what the pass reads, a delete file's data files included, and so
        its engine. Rows read with an older schema, or given ids of other columns, are written
        again.
        """
        uuid, identifiers = destination.uuid, self.run.identifiers
        applied_here = applied_mark(uuid, self.schema_id, identifiers) if uuid else None
        return [
            i
            for i in self.batch
            if not (i.status == ItemStatus.APPLIED and i.applied_to == applied_here)
        ]

    @property
    def end(self) -> Checkpoint:
        """The end of the batch: what the pass may write through."""
        last = max(self.batch, key=lambda i: i.sequence_number)
        return Checkpoint(last.table_uuid, last.snapshot_id, last.sequence_number)

    def may_collapse(self, recorded: Checkpoint | None = None) -> bool:
        """True when no earlier pass may have written past the checkpoint.

        An earlier pass may have when it died or failed after writing: the end it recorded,
        `recorded` or else the store's, is past the checkpoint. When none may have, the pass may
        collapse runs of copy-on-write commits in `driver.pass_tasks`. It only reads.
        """
        store = self.run.store
        recorded = recorded or store.pass_end(self.name)
        return collapses_runs(recorded, store.get_checkpoint(self.name), self.end)

    def begin(self, collapse_runs: bool) -> Checkpoint | None:
        """Record the end of the batch right before the first write; return the end recorded before.

        That is after the engine is chosen and the destination prepared. A pass that fails before,
        with `SparkRequired` or on a write block, so leaves no end, which would make a later
        rollback reset the index and stop runs collapsing. A pass that planned to collapse stops,
        writing nothing, when another one recorded an end since.
        """
        before = self.run.store.pass_end(self.name)
        begun = self.run.store.begin_pass(self.name, self.end)
        if collapse_runs and begun is not None and not self.may_collapse(begun):
            raced = f"table {self.name!r}: another pass began meanwhile; the next pass starts over"
            raise ProcessingError(raced)
        return before

    def unbegin(self, before: Checkpoint | None) -> None:
        """Put back the end recorded `before` this pass, which failed before writing anything."""
        self.run.store.unbegin_pass(self.name, self.end, before)

    def tasks(self, unread: list[ItemHead], collapse_runs: bool) -> PassTasks:
        run = self.run
        if not collapse_runs and any(i.kind != ItemKind.EXPORT for i in unread):
            log.info(
                "%s: a pass from this checkpoint may have written its changes: "
                "read commit by commit",
                self.name,
            )
        with _manifests_of(self.name):
            tasks = pass_tasks(
                self.table,
                self.bodies.of(unread),
                run.identifiers,
                run.changed,
                run.limits.max_rewrite_bytes,
                collapse_runs,
            )
        return replace(tasks, export=self.held_by_shape(tasks.export))

    def held_by_shape(self, export: list[FileTask]) -> list[FileTask]:
        """The export's tasks whose files the index's filter (`where`) may hold rows of.

        Here, not when the export was planned: the shape may have changed in between, and the pass
        writes the shape it is configured with now.
        """
        return held_by_shape(export, self.table.schema(), self.run.config.shape)

    def with_earlier(
        self, tasks: PassTasks, earlier: list[ItemHead], held: frozenset[tuple[int, str]]
    ) -> PassTasks:
        """`tasks`, with the files of the export's items earlier passes applied.

        Those files go in `PassTasks.earlier`, but for the items whose every file is `held` (their
        keys kept by this run's passes): those go in `PassTasks.carried`, with no task made.
        """
        if not earlier or not self.run.identifiers:
            return tasks
        applied = self.bodies.of(earlier)
        kept = {
            i.key for i in applied if all((i.snapshot_id, p) in held for p in i.added_data_files)
        }
        carried = [i for i in applied if i.key in kept]
        rest = [i for i in applied if i.key not in kept]  # by key: a list would compare each pair
        files = frozenset((i.snapshot_id, p) for i in carried for p in i.added_data_files)
        if not rest:
            return replace(tasks, carried=files)
        with _manifests_of(self.name):
            reads = pass_tasks(self.table, rest, self.run.identifiers, self.run.changed).export
        return replace(tasks, earlier=self.held_by_shape(reads), carried=files)

    def carried_tasks(self, files: set[tuple[int, str]]) -> list[FileTask]:
        """The export tasks of the earlier passes' `files` (snapshot, path) no task was made for."""
        exports = self.bodies.of(i for i in self.batch if i.kind == ItemKind.EXPORT)
        items = [i for i in exports if any((i.snapshot_id, p) in files for p in i.added_data_files)]
        with _manifests_of(self.name):
            made = pass_tasks(self.table, items, self.run.identifiers, self.run.changed).export
        return [t for t in made if (t.snapshot_id, t.data_file.file_path) in files]

    def engine(self, tasks: PassTasks) -> Engine:
        return self.run.engines.for_pass(self.name, pass_reads(tasks))

    def prepare_destination(self, found: _Destination) -> _Destination:
        """Check the index accepts writes and bring it up to the spec.

        A rebuild's generation is created or resumed here.
        """
        alias = alias_of(self.client, self.run.config, self.table)
        if found.rebuild:
            index = alias.start_rebuild(self.spec, found.resumable)
        else:
            alias.ensure(self.spec)
            index = alias.name
        prepared = replace(found, index=index, uuid=index_uuid(self.client, index) or "")
        # what the pass planned to skip is not in this index
        if found.uuid and prepared.uuid != found.uuid:
            raise ProcessingError(
                f"index {index!r} was deleted or replaced while the pass began; "
                "the next pass starts over"
            )
        return prepared

    def target(self, destination: _Destination) -> Target:
        run = self.run
        snapshot_ids = {i.sequence_number: i.snapshot_id for i in self.batch}
        # An export rewrites documents of its own version: a run that died after writing some read
        # them with the schema of its time, and a replay after a schema change must replace them.
        exporting = self.resync or any(i.kind == ItemKind.EXPORT for i in self.batch)
        version_type = VersionType.EXTERNAL_GTE if exporting else VersionType.EXTERNAL
        return Target(
            self.name,
            destination.index,
            run.destination.opensearch or run.opensearch,  # its secret resolved once
            run.dead_letter,
            snapshot_ids,
            version_type,
            run.identifiers,
            run.config.shape,
            run.config.pipeline,
            self.held_out(),
            self.write_fence,
            capabilities_of(self.client).versions,
            run.destination,
        )

    def held_out(self) -> dict[str, int]:
        """The ids the table's open letters say rows share, to their rows (`Target.held_out`)."""
        letters = self.run.destination.dead_letters
        return letters.shared_rows(self.name) if letters else {}

    @property
    def write_fence(self) -> LeaseFence | None:
        """The lease's fence for the pass's writes where no version orders them (Serverless)."""
        if self.run.lease is None or capabilities_of(self.client).versions:
            return None
        return self.run.lease.fence()

    def say_applying(self, engine: Engine, result: PassResult, indexes: int) -> None:
        """Log what the pass applies, and to how many indexes when it writes several."""
        what = f"{counted(result.snapshots, 'snapshot')}, {counted(result.files, 'file')}"
        if indexes > 1:
            log.info("%s: applying %s to %d indexes in one read", self.name, what, indexes)
            return
        resync = f" ({', '.join(self.resync)})" if self.resync else ""
        log.info("%s: applying %s%s: %s engine", self.name, what, resync, engine.kind)

    def say_if_dev_server(self, reads: WorkSize) -> None:
        """Warn when a pass of more rows than the dev server is for writes to it."""
        if reads.rows > DEV_SERVER_ROWS and is_dev_server(self.client):
            log.warning(
                "%s: this pass writes from %s rows to the dev server (osmem): expect it to take a "
                "while; %s",
                self.name,
                f"{reads.rows:,}",
                DEV_SERVER_LIMITS,
            )

    def reader(self, shapes: tuple[Shape, ...]) -> TableReader:
        """The table's reader for this pass, making documents of each of `shapes`."""
        run = self.run
        return TableReader.for_table(
            self.table, self.name, run.identifiers, run.dead_letter, shapes
        )

    def check_letters(self, result: PassResult) -> None:
        """Raise SystemicDeadLetters when the pass's dead letters show a cause many rows share.

        `deadletters.systemic` tells such a cause from rows' own faults. It raises before anything
        is completed or advanced. The documents written stay, and a rerun rewrites them at their
        versions.
        """
        limits, letters, rows = self.run.letter_limits, result.writes.letters, result.changes.rows
        if systemic(letters, rows, limits.max_share, limits.min_count):
            raise SystemicDeadLetters(
                f"table {self.name!r}: {letters.total} dead letters from the pass's {rows} rows, "
                f"over dead_letter.max_share ({limits.max_share:g}) — a cause "
                f"they share, not their own faults; nothing advanced: "
                f"{letters.summary(samples=True, causes=3)}"
            )

    def check_fences(self, destination: _Destination) -> None:
        """Raise unless this run holds the table's lease and writes to the index it began with."""
        if index_uuid(self.client, destination.index) != destination.uuid:
            raise ProcessingError(
                f"table {self.name!r}: index {destination.index!r} "
                "was deleted or replaced during the pass"
            )
        if self.run.lease is not None:
            self.run.lease.check()

    def mark_applied(
        self, unread: list[ItemHead], destination: _Destination, result: PassResult
    ) -> PassResult:
        """Record the export's files this pass applied, where and with which schema.

        Nothing advances.
        """
        self.check_fences(destination)
        mark = applied_mark(destination.uuid, self.schema_id, self.run.identifiers)
        self.run.store.mark_applied(self.name, unread, mark, fence=self.fence)
        self.run.reached(PassPoint.MARKED_APPLIED)
        result.seconds = time.monotonic() - self.started
        log.info(
            "%s: applied %s of the export; the next pass goes on (batch caps)",
            self.name,
            counted(len(unread), "file"),
        )
        return result

    def complete(self, engine: Engine, destination: _Destination, result: PassResult) -> None:
        """Delete what a rewrite's export did not write, then complete the items.

        The items are completed with the checkpoint.
        """
        run, last = self.run, self.batch[-1]
        # a new generation holds only the export
        if ResyncKind.REWRITE in self.resync and not destination.rebuild:
            export_version = min(i.sequence_number for i in self.batch if i.resync)
            deleted = engine.delete_older(self.target(destination), export_version)
            older = counted(deleted, "document")
            log.info("%s: deleted %s older than the resync", self.name, older)
            result.writes.deleted += deleted
        result.writes.wait_for_landing()
        self.check_fences(destination)
        result.checkpoint = Checkpoint(
            last.table_uuid,
            last.snapshot_id,
            last.sequence_number,
            self.schema_id,
            run.identifiers,
            destination.uuid,
        )
        run.store.complete(
            self.name, result.checkpoint, self.batch, replace=bool(self.resync), fence=self.fence
        )
        run.reached(PassPoint.CHECKPOINTED)

    def finish(self, destination: _Destination, result: PassResult) -> None:
        """Swap a rebuild's generation in, keep the unapplied snapshots, and report."""
        run, last = self.run, self.batch[-1]
        # after the checkpoint names the new generation: a run stopped before the swap makes it
        if destination.rebuild:
            alias = alias_of(self.client, run.config, self.table)
            alias.finish(destination.index, self.spec, run.probe)
        keep_unapplied(self.table, run.config, last.snapshot_id)
        result.seconds = time.monotonic() - self.started
        summary_log.info(
            "%s: %d rows read, %d carryovers dropped, %d indexed, %d deleted, %d superseded; "
            "checkpoint %d (%.1fs)",
            self.name,
            result.changes.rows,
            result.changes.carryovers,
            result.writes.indexed,
            result.writes.deleted,
            result.writes.superseded,
            last.snapshot_id,
            result.seconds,
        )
