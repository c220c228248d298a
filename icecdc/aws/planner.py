"""The planner Lambda's work per table: find the work, publish the lag, apply or start the job.

Whether there is work is read from the metadata and the checkpoint only, in O(1). A small batch is
applied here on the in-process engine by `apply_here`. The table's Glue job is started for anything
larger, or when the table's lease is held.

Imports no Spark: the Lambda package has none.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError
from pyiceberg.catalog import Catalog
from pyiceberg.table import Table

from icecdc.aws.contract import ARG_TABLE, PASS_RESERVE_SECONDS, job_name
from icecdc.aws.metrics import put_lag, put_planning_errors, put_run_metrics
from icecdc.aws.outcome import TableOutcome
from icecdc.catalog import RunCredentials, identifier_columns, load_table, open_catalog
from icecdc.config import Config, OpenSearchConfig
from icecdc.destination.index import IndexAlias
from icecdc.destination.port import Destinations
from icecdc.errors import IcecdcError, SparkRequired, access_denied
from icecdc.model import EngineKind, WorkSize
from icecdc.state import StateStore, index_stores
from icecdc.status import has_work, table_status, work_size
from icecdc.words import counted

if TYPE_CHECKING:
    from icecdc.sync import SyncResult

log = logging.getLogger(__name__)

# Tables `plan_and_start_each` decides at once. Deciding is I/O: Glue's GetTable, the metadata file,
# the state's reads, the index's aliases, CloudWatch. 8 threads halve a 500-table sweep locally
# (docs/scale.md).
SWEEP_WORKERS = 8


@dataclass(frozen=True)
class Sweep:
    """What every table of one planner invocation shares: the config, the stores and the clients.

    `deadline` (a time.monotonic()) is when no pass starts any more; `one_pass` is held by a pass
    applied here, so that a sweep's threads apply one table at a time.
    """

    config: Config
    store: StateStore
    glue: Any
    cloudwatch: Any
    deadline: float | None = None
    one_pass: AbstractContextManager[Any] | None = None
    # the catalog's OAuth2 client credentials, read once for the sweep's tables
    credentials: RunCredentials = field(default_factory=RunCredentials)
    # the OpenSearch client, its password's secret read once for the sweep's tables
    destinations: Destinations = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "destinations", Destinations(self.config.dead_letter))


def bulk_retry_seconds(opensearch: OpenSearchConfig) -> float:
    """The longest a pass's bulk writes may sleep between retries of one request.

    It is the sum of the backoff ceilings of every retry in `icecdc.destination.sink`. A pass
    started in the planner keeps it on top of PASS_RESERVE_SECONDS, so that an overloaded domain
    cannot push it past the Lambda's timeout.
    """
    return sum(
        min(opensearch.max_backoff_seconds, opensearch.initial_backoff_seconds * 2.0**attempt)
        for attempt in range(opensearch.max_retries)
    )


def planner_deadline(context: Any) -> float | None:
    """The time.monotonic() after which the planner starts no pass.

    It comes from the remaining time in the Lambda's context. Without a context, as in an invocation
    by hand or a test, it is None.
    """
    remaining = getattr(context, "get_remaining_time_in_millis", None)
    if remaining is None:
        return None
    seconds: float = remaining() / 1000
    return time.monotonic() + seconds - PASS_RESERVE_SECONDS


def apply_here(
    sweep: Sweep, catalog: Catalog, name: str, table: Table, identifiers: tuple[str, ...]
) -> SyncResult | None:
    """Apply the table's work here when it is small enough for the in-process engine.

    It returns None when the work is not small enough, or not all of it was applied, and the Glue
    job must run.

    `work_size` estimates the size from snapshot summaries, so a large export or backlog is never
    listed here. A pass that turns out larger, from commits made meanwhile, raises `SparkRequired`
    before it writes anything. The table's lease is taken without waiting. A run that holds it, a
    Glue run or another planner, goes on, and the job is started anyway to cover the commit that run
    may have finished before.

    The pass runs holding the sweep's `one_pass`: its threads apply one table at a time, as the
    Lambda's memory is sized for one pass.
    """
    from icecdc.engines import Engines  # the in-process engine: pyarrow, loaded only when applying
    from icecdc.sync import SyncRun, sync_table

    config, store, deadline = sweep.config, sweep.store, sweep.deadline

    engines = Engines(config.engine, spark_config=None)  # no Spark here
    stores = index_stores(config.table(name), store)
    sizes = [work_size(table, name, scoped, identifiers) for _, _, scoped in stores]
    if any(s is None for s in sizes):
        return None
    known = [s for s in sizes if s is not None]
    size = WorkSize(*(sum(getattr(s, f) for s in known) for f in ("files", "rows", "bytes")))
    if engines.kind_for(size) != EngineKind.IN_PROCESS:
        return None
    log.info(
        "%s: %d files, %d rows, %d bytes to read: applying them here",
        name,
        size.files,
        size.rows,
        size.bytes,
    )
    if deadline is not None:
        deadline -= bulk_retry_seconds(config.opensearch)
    # each index's destination on the sweep's one client
    opened = sweep.destinations.of(config.opensearch)
    destinations = {key: opened.another() for _, key, _ in stores}
    try:
        with sweep.one_pass or nullcontext():
            result = sync_table(
                config,
                catalog,
                config.table(name),
                table,
                identifiers,
                store,
                SyncRun(engines, wait=False, deadline=deadline, destinations=destinations),
            )
    except SparkRequired as exc:
        log.info("%s: %s; the Glue job applies it", name, exc)
        return None
    return None if result.skipped or result.unfinished else result


def plan_and_start(sweep: Sweep, name: str, job: str) -> TableOutcome:
    """Decide whether one table has work, publish its lag, and apply it here or start its job.

    A small batch is applied here; the table's Glue job is started for anything larger.

    Deciding reads only the table's metadata and its checkpoint, so an invocation takes the same
    time for a table of ten files as for one of a million. The job, which has no 15-minute limit,
    plans and applies: it lists an export's files and walks a backlog's manifests.

    No pass starts here after the sweep's `deadline`; a pass holds its `one_pass` (`apply_here`).
    """
    config, store, cloudwatch = sweep.config, sweep.store, sweep.cloudwatch
    table_config = config.table(name)
    try:
        # once per table: a Glue catalog is a client to create
        catalog = open_catalog(config.catalog, credentials=sweep.credentials)
        table = load_table(catalog, name)
        # The index's unfinished states (a swap a crashed run did not make) are work too; a planner
        # that does not apply may have no route to the domain, and leaves them to the next commit.
        applies = config.aws is None or config.aws.planner_applies
        client = sweep.destinations.of(config.opensearch).client if applies else None
        identifiers = identifier_columns(table, table_config)
        statuses, work = [], False
        # each index the table writes
        for index_config, _, scoped in index_stores(table_config, store):
            index = IndexAlias(client, index_config.index) if client is not None else None
            statuses.append(table_status(table, index_config, scoped, time.time(), index=index))
            work |= has_work(table, index_config, scoped, identifiers, index)
        # the index furthest behind
        status = max(statuses, key=lambda s: (s.lag_seconds, s.pending_items))
    except IcecdcError as exc:
        log.error("%s: planning failed: %s", name, exc)
        return TableOutcome(name, error=str(exc))
    put_lag(cloudwatch, name, status.pending_items, status.lag_snapshots, status.lag_seconds)
    if not work:
        log.info("%s: caught up, no job started", name)
        return TableOutcome(name, False, 0)
    if status.unfinished:
        log.warning("%s: %s; a pass finishes it", name, status.unfinished)
    applied = None
    if applies:
        applied = apply_here(sweep, catalog, name, table, identifiers)
    if applied is not None:
        checkpoint = applied.checkpoint.snapshot_id if applied.checkpoint else None
        here = counted(applied.snapshots, "snapshot")
        log.info("%s: applied %s here, no job started", name, here)
        # as a Glue run does: the alarm sees the dead letters, the dashboard the rows
        writes = applied.writes
        put_run_metrics(cloudwatch, name, writes.dead_lettered, applied.changes.rows, applied.files)
        return TableOutcome(
            name,
            True,
            0,
            applied_snapshots=applied.snapshots,
            checkpoint=checkpoint,
            dead_lettered=writes.dead_lettered,
        )
    try:
        run_id = sweep.glue.start_job_run(JobName=job, Arguments={f"--{ARG_TABLE}": name})[
            "JobRunId"
        ]
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") != "ConcurrentRunsExceededException":
            raise
        # Normal: the running job plans and processes until the table is caught up before it exits.
        log.info(
            "%s: job %s is already running; it catches up with the table before it exits",
            name,
            job,
        )
        return TableOutcome(name, True, status.pending_items, job_running=True)
    log.info("%s: started job %s run %s", name, job, run_id)
    return TableOutcome(name, True, status.pending_items, job_run_id=run_id)


def plan_and_start_each(
    sweep: Sweep, names: Iterable[str], stack_name: str, workers: int = SWEEP_WORKERS
) -> list[TableOutcome]:
    """`plan_and_start` for every table on its own, `workers` tables at a time.

    A table that fails, throttled, denied or dropped, delays no other and hides no other's outcome.
    The outcomes are in the order of `names`; with one worker the tables are decided in that order.

    Each table's decision and job run are its own thread's, and a pass applied here holds a lock:
    one table at a time. The threads share `store` (SQLite: one connection behind a lock; DynamoDB:
    a boto3 client), the Glue and CloudWatch clients, boto3 clients being thread-safe, and the
    OpenSearch client (`Sweep.destinations`). Each table opens its own catalog (a Glue catalog makes
    its own boto3 session).
    """
    sweep = replace(sweep, one_pass=threading.Lock())

    def plan(name: str) -> TableOutcome:
        try:
            return plan_and_start(sweep, name, job_name(stack_name, name))
        except Exception as exc:  # noqa: BLE001 - this table's outcome, once the others ran
            denied = access_denied(exc)
            if denied is not None:  # the role's rights: one line, no traceback
                log.error("%s: %s", name, denied)
                return TableOutcome(name, error=denied)
            log.exception("%s: failed", name)
            return TableOutcome(name, error=f"{type(exc).__name__}: {exc}")

    if workers <= 1:
        outcomes = [plan(name) for name in names]
    else:
        with ThreadPoolExecutor(workers, thread_name_prefix="icecdc-sweep") as pool:
            outcomes = list(pool.map(plan, names))
    put_planning_errors(sweep.cloudwatch, [o for o in outcomes if o.error])
    return outcomes
