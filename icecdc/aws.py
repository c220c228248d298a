"""What the AWS entries share: the planner Lambda (lambdas/planner) and the Glue job (glue_jobs/).

Both are thin: they turn their environment or arguments into a `Config` with `runtime_config`
and call into the library. The YAML is the same file as for local runs; the stack only overrides
what exists once deployed (the DynamoDB state table, the endpoint of a domain it created) and may
add catalog properties (the Lambda reads files with fsspec, pyarrow's S3 filesystem left out).

This module imports no Spark: the Lambda package has none. The planner applies a small batch
itself on the in-process engine (`apply_here`) and starts the table's Glue job for the rest.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any, ClassVar

import boto3
import yaml
from botocore.exceptions import ClientError
from pyiceberg.catalog import Catalog
from pyiceberg.table import Table

from icecdc.catalog import glue_name, identifier_columns, load_table, open_catalog
from icecdc.config import Config, OpenSearchConfig, parse_config
from icecdc.errors import IcecdcError, SparkRequired
from icecdc.index import IndexAlias
from icecdc.model import EngineKind, StateStoreType, WorkSize
from icecdc.opensearch import open_client
from icecdc.state import StateStore, index_stores
from icecdc.status import has_work, table_status, work_size

if TYPE_CHECKING:
    from icecdc.processing import BatchResult

log = logging.getLogger(__name__)

GLUE_EVENT_SOURCE = "aws.glue"
GLUE_EVENT_TYPE = "Glue Data Catalog Table State Change"
SCHEDULE_EVENT_SOURCE = "aws.events"
SCHEDULE_EVENT_TYPE = "Scheduled Event"
SQS_EVENT_SOURCE = "aws:sqs"  # a batch of buffered events, as Lambda's SQS event source delivers it
METRIC_NAMESPACE = "icecdc"

# Glue job arguments (without their leading "--", as getResolvedOptions names them).
ARG_CONFIG = "icecdc_config"
ARG_TABLE = "icecdc_table"
ARG_STATE_TABLE = "icecdc_state_table"
ARG_REGION = "icecdc_region"
ARG_OPENSEARCH_URL = "icecdc_opensearch_url"
ARG_DEAD_LETTER = "icecdc_dead_letter"
ARG_MODE = "icecdc_mode"  # what a job run does (JobMode); absent: a sync


class JobMode(StrEnum):
    """What a run of a table's Glue job does: catch the index up, or audit it (the scheduled trigger)."""

    SYNC = "sync"
    AUDIT = "audit"
    AUDIT_AND_REPAIR = "audit-and-repair"


# Where the scheduled audits keep their findings: beside the dead letters (the job may write there).
AUDITS_FOLDER = "_audits"


@dataclass(frozen=True)
class AuditOutcome:
    """What a scheduled audit of one table found, and what its repair wrote."""

    table: str
    drift: int  # findings dead letters do not explain: the metric Drift
    repaired: int = 0  # documents a repair wrote or deleted


def audits_location(dead_letter: str) -> str:
    """Where the job keeps each table's last audit (`icecdc status --json`, `repair --from-audit --findings`)."""
    return f"{dead_letter.rstrip('/')}/{AUDITS_FOLDER}"


def scheduled_audit(config: Config, name: str, mode: JobMode, findings: str, cloudwatch: Any) -> AuditOutcome:
    """Audit one table's index, publish its Drift, and with AUDIT_AND_REPAIR repair what was found."""
    from icecdc.audit.repair import repair  # the audit's modules load only in an audit run
    from icecdc.audit.run import audit

    (report,) = audit(config, [name], findings=findings)
    drift = sum(not d.known for d in report.drift)
    metric = {"MetricName": "Drift", "Dimensions": _dimensions(name), "Value": drift, "Unit": "Count"}
    cloudwatch.put_metric_data(Namespace=METRIC_NAMESPACE, MetricData=[metric])
    log.info("%s: audit found %d drifted documents (%s)", name, drift, report.compared)
    if not drift or mode != JobMode.AUDIT_AND_REPAIR:
        return AuditOutcome(name, drift)
    repaired = repair(config, name, report.scope())
    log.info("%s: repair wrote %d and deleted %d documents", name, repaired.indexed, repaired.deleted)
    return AuditOutcome(name, drift, repaired.indexed + repaired.deleted)


@dataclass(frozen=True)
class PlannerEnvironment:
    """The planner Lambda's environment: what the stack (infra/planner.py) sets and the handler
    (lambdas/planner/handler.py) reads, under the names `VARIABLES` gives, their one source."""

    config: str  # the configuration's path or URI (the YAML bundled with the code)
    state_table: str  # the stack's DynamoDB state table
    stack_name: str  # the prefix of the per-table Glue job names
    catalog_properties: str = "{}"  # JSON merged into `catalog:` (how the Lambda reads files)
    # Where the planner applies batches itself (`aws.planner_applies`): the endpoint of a domain the
    # stack created (signed with SigV4), and the stack's dead-letter location, as the job's.
    opensearch_url: str | None = None
    dead_letter: str | None = None

    VARIABLES: ClassVar[dict[str, str]] = {
        "config": "ICECDC_CONFIG",
        "state_table": "ICECDC_STATE_TABLE",
        "stack_name": "ICECDC_STACK_NAME",
        "catalog_properties": "ICECDC_CATALOG_PROPERTIES",
        "opensearch_url": "ICECDC_OPENSEARCH_URL",
        "dead_letter": "ICECDC_DEAD_LETTER",
    }

    def variables(self) -> dict[str, str]:
        """The environment variables, as the stack sets them: those without a value left out."""
        values = {name: getattr(self, field) for field, name in self.VARIABLES.items()}
        return {name: value for name, value in values.items() if value is not None}

    @classmethod
    def read(cls, environ: Mapping[str, str]) -> PlannerEnvironment:
        """From the Lambda's environment; an empty optional variable counts as unset."""
        names = cls.VARIABLES
        return cls(
            environ[names["config"]],
            environ[names["state_table"]],
            environ[names["stack_name"]],
            environ.get(names["catalog_properties"], "{}"),
            environ.get(names["opensearch_url"]) or None,
            environ.get(names["dead_letter"]) or None,
        )


def job_name(stack_name: str, table: str) -> str:
    """The Glue job of one table: one job per table, so that one table's run never blocks another's."""
    return f"{stack_name}-{table}"


def read_text(uri: str) -> str:
    """A file's text from `s3://bucket/key` or a local path."""
    if uri.startswith("s3://"):
        bucket, _, key = uri[len("s3://") :].partition("/")
        body: bytes = boto3.client("s3").get_object(Bucket=bucket, Key=key)["Body"].read()
        return body.decode()
    with open(uri, encoding="utf-8") as file:
        return file.read()


def runtime_config(
    text: str,
    state_table: str,
    region: str | None = None,
    opensearch_url: str | None = None,
    catalog_properties: dict[str, str] | None = None,
) -> Config:
    """The configuration as deployed: the YAML's, validated, then revised (and validated again) with
    the stack's state table (keeping the file's `lease_seconds` and, from a dynamodb state,
    `done_ttl_days`), no Spark master (a local one would keep Glue's work on the driver) and, when
    the stack created the OpenSearch domain, its endpoint signed with SigV4."""
    config = parse_config(yaml.safe_load(text))
    kept = config.state.model_dump(include={"lease_seconds", "done_ttl_days"})
    changes: dict[str, Any] = {
        "state": {**kept, "type": StateStoreType.DYNAMODB, "table": state_table, "region": region},
        "spark": config.spark.revised(master=None),  # Glue provides the cluster
    }
    if opensearch_url:
        signed = {
            "url": opensearch_url,
            "aws_region": region,
            "aws_service": "es",
            "username": None,
            "password": None,
            "password_secret_arn": None,
        }
        changes["opensearch"] = {**config.opensearch.as_mapping(), **signed}
    if catalog_properties:
        changes["catalog"] = {**config.catalog.as_mapping(), **catalog_properties}
    return config.revised(**changes)


@dataclass(frozen=True)
class EventTables:
    """The configured tables an event asks to plan, or why it asks for none."""

    tables: tuple[str, ...]
    ignored: str | None = None


def event_tables(event: Any, config: Config) -> EventTables:
    """A Glue table-change event names one table; the schedule means all of them."""
    if not isinstance(event, dict):
        return EventTables((), f"malformed event: expected a JSON object, got {type(event).__name__}")
    source, kind = event.get("source"), event.get("detail-type")
    if source == SCHEDULE_EVENT_SOURCE and kind == SCHEDULE_EVENT_TYPE:
        return EventTables(tuple(t.name for t in config.tables))
    if source != GLUE_EVENT_SOURCE or kind != GLUE_EVENT_TYPE:
        return EventTables((), f"malformed event: unexpected source {source!r} / detail-type {kind!r}")
    detail = event.get("detail")
    if not isinstance(detail, dict):
        return EventTables((), "malformed event: no detail object")
    database, table = detail.get("databaseName"), detail.get("tableName")
    if not isinstance(database, str) or not isinstance(table, str) or not database or not table:
        return EventTables((), f"malformed event: detail lacks databaseName/tableName: {detail!r}")
    if detail.get("typeOfChange") != "UpdateTable":
        return EventTables((), f"event for {database}.{table} is a {detail.get('typeOfChange')!r}, not an UpdateTable")
    name = f"{database}.{table}"
    # matched as Glue names it; planned under the configured name (its job, its checkpoint)
    configured = {glue_name(t.name): t.name for t in config.tables}
    if glue_name(name) not in configured:
        return EventTables((), f"table {name} is not configured")
    return EventTables((configured[glue_name(name)],))


@dataclass(frozen=True)
class BatchTables:
    """The tables a batch of buffered events asks to plan, each once however many events named it,
    with the messages that asked for each (they are redelivered if that table fails)."""

    tables: tuple[str, ...]
    messages: dict[str, tuple[str, ...]]
    ignored: tuple[str, ...] = ()  # why some messages asked for nothing (never redelivered: a retry cannot help)

    def failed_messages(self, outcomes: Iterable[TableOutcome]) -> list[str]:
        """The messages that named a table whose planning failed."""
        failed = {o.table for o in outcomes if o.error}
        return sorted({m for table in failed for m in self.messages.get(table, ())})


def is_batch(event: Any) -> bool:
    """Whether `event` is a batch of buffered events (Lambda's SQS event source) rather than one event."""
    records = event.get("Records") if isinstance(event, dict) else None
    return isinstance(records, list) and all(isinstance(r, dict) and r.get("eventSource") == SQS_EVENT_SOURCE for r in records)


def batch_tables(event: dict[str, Any], config: Config) -> BatchTables:
    """Coalesce a batch: every message's body is an EventBridge event (a table change or the sweep);
    a burst of commits of one table within the batching window becomes one planning pass."""
    asked: dict[str, list[str]] = {}
    ignored: list[str] = []
    for record in event["Records"]:
        message = str(record.get("messageId"))
        try:
            body = json.loads(record.get("body") or "")
        except ValueError:
            ignored.append(f"message {message}: malformed event: the body is not JSON")
            continue
        selected = event_tables(body, config)
        if selected.ignored:
            ignored.append(f"message {message}: {selected.ignored}")
        for table in selected.tables:
            asked.setdefault(table, []).append(message)
    return BatchTables(tuple(asked), {table: tuple(messages) for table, messages in asked.items()}, tuple(ignored))


@dataclass(frozen=True)
class TableOutcome:
    table: str
    has_work: bool = False  # the table is behind its checkpoint, or has items not done
    pending: int = 0
    job_run_id: str | None = None  # the run this call started
    job_running: bool = False  # a run of the table's job was already on (it drains the queue)
    error: str | None = None
    applied_snapshots: int = 0  # snapshots this call applied itself (a small batch, no Glue run)
    checkpoint: int | None = None  # the snapshot the index is at after them
    dead_lettered: int = 0  # documents of those snapshots sent to the dead letters


# No pass starts in the planner with less than this left before the Lambda's timeout: a pass the
# in-process engine takes (engine.in_process_max_bytes) ends well within it.
PASS_RESERVE_SECONDS = 120.0


def bulk_retry_seconds(opensearch: OpenSearchConfig) -> float:
    """The longest a pass's bulk writes may sleep between retries of one request (the backoff
    ceilings of every retry, `icecdc.sink`): a pass started in the planner keeps it on top of
    PASS_RESERVE_SECONDS, so that an overloaded domain cannot push it past the Lambda's timeout."""
    return sum(
        min(opensearch.max_backoff_seconds, opensearch.initial_backoff_seconds * 2.0**attempt)
        for attempt in range(opensearch.max_retries)
    )


def planner_deadline(context: Any) -> float | None:
    """The time.monotonic() after which the planner starts no pass: from the Lambda's context
    (its remaining time), None without one (an invocation by hand or a test)."""
    remaining = getattr(context, "get_remaining_time_in_millis", None)
    return None if remaining is None else time.monotonic() + remaining() / 1000 - PASS_RESERVE_SECONDS


def apply_here(
    config: Config,
    catalog: Catalog,
    store: StateStore,
    name: str,
    table: Table,
    identifiers: tuple[str, ...],
    deadline: float | None,
) -> BatchResult | None:
    """Apply the table's work in this process when it is small enough for the in-process engine;
    None when it is not (or not all of it was), and the Glue job must run.

    The size is estimated from snapshot summaries (`work_size`), so a large export or backlog is
    never listed here; a pass that turns out larger (commits made meanwhile) raises `SparkRequired`
    before it writes anything. The table's lease is taken without waiting: a run that holds it
    (a Glue run, another planner) goes on, and the job is started anyway to cover the commit it
    may have finished before."""
    from icecdc.engines import Engines  # the in-process engine: pyarrow, loaded only when applying
    from icecdc.processing import sync_table

    engines = Engines(config.engine, spark_config=None)  # no Spark here
    sizes = [work_size(table, name, scoped, identifiers) for _, _, scoped in index_stores(config.table(name), store)]
    if any(s is None for s in sizes):
        return None
    size = WorkSize(*(sum(getattr(s, f) for s in sizes if s is not None) for f in ("files", "rows", "bytes")))
    if engines.kind_for(size) != EngineKind.IN_PROCESS:
        return None
    log.info("%s: %d files, %d rows, %d bytes to read: applying them here", name, size.files, size.rows, size.bytes)
    if deadline is not None:
        deadline -= bulk_retry_seconds(config.opensearch)
    try:
        result = sync_table(
            config, catalog, config.table(name), table, identifiers, store, engines, wait=False, deadline=deadline
        )
    except SparkRequired as exc:
        log.info("%s: %s; the Glue job applies it", name, exc)
        return None
    return None if result.skipped or result.unfinished else result


def plan_and_start(
    config: Config, store: StateStore, name: str, job: str, glue: Any, cloudwatch: Any, deadline: float | None = None
) -> TableOutcome:
    """Decide whether one table has work, publish its lag, apply a small batch here, and start
    the table's Glue job for anything larger.

    Deciding reads only the table's metadata and its checkpoint, so an invocation takes the same
    time for a table of ten files as for one of a million: the job, which has no 15-minute limit,
    plans (lists an export's files, walks a backlog's manifests) and applies. `deadline`
    (time.monotonic()): no pass starts here after it."""
    table_config = config.table(name)
    try:
        catalog = open_catalog(config.catalog)  # once per table: a Glue catalog is a client to create
        table = load_table(catalog, name)
        # The index's unfinished states (a swap a crashed run did not make) are work too; a planner
        # that does not apply may have no route to the domain, and leaves them to the next commit.
        applies = config.aws is None or config.aws.planner_applies
        client = open_client(config.opensearch) if applies else None
        identifiers = identifier_columns(table, table_config)
        statuses, work = [], False
        for index_config, _, scoped in index_stores(table_config, store):  # each index the table writes
            index = IndexAlias(client, index_config.index) if client is not None else None
            statuses.append(table_status(table, index_config, scoped, time.time(), index=index))
            work |= has_work(table, index_config, scoped, identifiers, index)
        status = max(statuses, key=lambda s: (s.lag_seconds, s.pending_items))  # the index furthest behind
    except IcecdcError as exc:
        log.error("%s: planning failed: %s", name, exc)
        return TableOutcome(name, error=str(exc))
    _put_lag(cloudwatch, name, status.pending_items, status.lag_snapshots, status.lag_seconds)
    if not work:
        log.info("%s: caught up, no job started", name)
        return TableOutcome(name, False, 0)
    if status.unfinished:
        log.warning("%s: %s; a pass finishes it", name, status.unfinished)
    applied = apply_here(config, catalog, store, name, table, identifiers, deadline) if applies else None
    if applied is not None:
        checkpoint = applied.checkpoint.snapshot_id if applied.checkpoint else None
        log.info("%s: applied %d snapshots here, no job started", name, applied.snapshots)
        # as a Glue run does: the alarm sees the dead letters, the dashboard the rows
        put_run_metrics(cloudwatch, name, applied.writes.dead_lettered, applied.changes.rows, applied.files)
        return TableOutcome(
            name, True, 0, applied_snapshots=applied.snapshots, checkpoint=checkpoint, dead_lettered=applied.writes.dead_lettered
        )
    try:
        run_id = glue.start_job_run(JobName=job, Arguments={f"--{ARG_TABLE}": name})["JobRunId"]
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") != "ConcurrentRunsExceededException":
            raise
        # Normal: the running job plans and processes until the table is caught up before it exits.
        log.info("%s: job %s is already running; it catches up with the table before it exits", name, job)
        return TableOutcome(name, True, status.pending_items, job_running=True)
    log.info("%s: started job %s run %s", name, job, run_id)
    return TableOutcome(name, True, status.pending_items, job_run_id=run_id)


def plan_and_start_each(
    config: Config,
    store: StateStore,
    names: Iterable[str],
    stack_name: str,
    glue: Any,
    cloudwatch: Any,
    deadline: float | None = None,
) -> list[TableOutcome]:
    """`plan_and_start` for every table on its own: one that fails (throttled, denied, dropped)
    delays no other and hides no other's outcome."""
    outcomes = []
    for name in names:
        try:
            outcomes.append(plan_and_start(config, store, name, job_name(stack_name, name), glue, cloudwatch, deadline))
        except Exception as exc:  # noqa: BLE001 - reported as this table's outcome once the others ran
            log.exception("%s: failed", name)
            outcomes.append(TableOutcome(name, error=f"{type(exc).__name__}: {exc}"))
    _put_planning_errors(cloudwatch, [o for o in outcomes if o.error])
    return outcomes


def put_run_metrics(cloudwatch: Any, table: str, dead_lettered: int, rows: int, files: int) -> None:
    """Publish what a run did to the table: `DeadLetters` (the stack alarms on any), `RowsApplied`
    (change rows read and applied) and `FilesRead`; zeros included, so a quiet table shows as such."""
    dimensions = _dimensions(table)
    metrics = [
        {"MetricName": "DeadLetters", "Dimensions": dimensions, "Value": dead_lettered, "Unit": "Count"},
        {"MetricName": "RowsApplied", "Dimensions": dimensions, "Value": rows, "Unit": "Count"},
        {"MetricName": "FilesRead", "Dimensions": dimensions, "Value": files, "Unit": "Count"},
    ]
    cloudwatch.put_metric_data(Namespace=METRIC_NAMESPACE, MetricData=metrics)


def _dimensions(table: str) -> list[dict[str, str]]:
    return [{"Name": "Table", "Value": table}]


def _put_planning_errors(cloudwatch: Any, failed: Sequence[TableOutcome]) -> None:
    """How many tables an invocation could not plan (the stack alarms on any): a batch that reports
    its failures to SQS succeeds as an invocation, so Lambda's own Errors metric does not count them."""
    if not failed:
        return
    metric = {"MetricName": "PlanningErrors", "Value": len(failed), "Unit": "Count"}
    try:
        cloudwatch.put_metric_data(Namespace=METRIC_NAMESPACE, MetricData=[metric])
    except ClientError:  # the failures are reported anyway (the invocation's error, or the batch's failed messages)
        log.exception("could not publish PlanningErrors for %s", ", ".join(o.table for o in failed))


def _put_lag(cloudwatch: Any, table: str, pending: int, lag_snapshots: int | None, lag_seconds: float) -> None:
    dimensions = _dimensions(table)
    metrics = [
        {"MetricName": "PendingItems", "Dimensions": dimensions, "Value": pending, "Unit": "Count"},
        {"MetricName": "LagSeconds", "Dimensions": dimensions, "Value": lag_seconds, "Unit": "Seconds"},
    ]
    if lag_snapshots is not None:
        metrics.append({"MetricName": "LagSnapshots", "Dimensions": dimensions, "Value": lag_snapshots, "Unit": "Count"})
    cloudwatch.put_metric_data(Namespace=METRIC_NAMESPACE, MetricData=metrics)
