"""What EventBridge and SQS deliver to the planner, read into the tables to plan.

A Glue table change names one table, the schedule means all of them, and a batch of buffered events
names each table once, with the messages that asked for it.

Nothing here raises on a malformed event: it is ignored with the reason, as a retry cannot help.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from icecdc.aws.catalogs import S3TABLES_EVENT_SOURCE, s3tables_event_table
from icecdc.aws.contract import (
    GLUE_EVENT_SOURCE,
    GLUE_EVENT_TYPE,
    SCHEDULE_EVENT_SOURCE,
    SCHEDULE_EVENT_TYPE,
    SQS_EVENT_SOURCE,
)
from icecdc.aws.outcome import TableOutcome
from icecdc.catalog import glue_name
from icecdc.config import Config


@dataclass(frozen=True)
class EventTables:
    """The configured tables an event asks to plan, or why it asks for none."""

    tables: tuple[str, ...]
    ignored: str | None = None


def event_tables(event: Any, config: Config) -> EventTables:
    """A Glue table-change event names one table; the schedule means all of them."""
    if not isinstance(event, dict):
        got = type(event).__name__
        return EventTables((), f"malformed event: expected a JSON object, got {got}")
    source, kind = event.get("source"), event.get("detail-type")
    if source == SCHEDULE_EVENT_SOURCE and kind == SCHEDULE_EVENT_TYPE:
        return EventTables(tuple(t.name for t in config.tables))
    if source == S3TABLES_EVENT_SOURCE:
        return _s3tables_tables(event, config)
    if source != GLUE_EVENT_SOURCE or kind != GLUE_EVENT_TYPE:
        unexpected = f"unexpected source {source!r} / detail-type {kind!r}"
        return EventTables((), f"malformed event: {unexpected}")
    detail = event.get("detail")
    if not isinstance(detail, dict):
        return EventTables((), "malformed event: no detail object")
    database, table = detail.get("databaseName"), detail.get("tableName")
    if not isinstance(database, str) or not isinstance(table, str) or not database or not table:
        return EventTables((), f"malformed event: detail lacks databaseName/tableName: {detail!r}")
    if detail.get("typeOfChange") != "UpdateTable":
        change = detail.get("typeOfChange")
        return EventTables((), f"event for {database}.{table} is a {change!r}, not an UpdateTable")
    name = f"{database}.{table}"
    # matched as Glue names it; planned under the configured name (its job, its checkpoint)
    configured = {glue_name(t.name): t.name for t in config.tables}
    if glue_name(name) not in configured:
        return EventTables((), f"table {name} is not configured")
    return EventTables((configured[glue_name(name)],))


def _s3tables_tables(event: dict[str, Any], config: Config) -> EventTables:
    """An S3 Tables commit CloudTrail recorded names its table by bucket, namespace and name."""
    warehouse = config.catalog.properties.get("warehouse", "")
    name = s3tables_event_table(event, warehouse)
    if name is None:
        return EventTables(
            (), f"not a commit to a table of {warehouse!r}: {event.get('detail-type')!r}"
        )
    configured = {t.name for t in config.tables}
    if name not in configured:
        return EventTables((), f"table {name} is not configured")
    return EventTables((name,))


@dataclass(frozen=True)
class BatchTables:
    """The tables a batch of buffered events asks to plan, each once however many events named it.

    It keeps the messages that asked for each table: they are redelivered if that table fails.
    """

    tables: tuple[str, ...]
    messages: dict[str, tuple[str, ...]]
    # why some messages asked for nothing (never redelivered: a retry cannot help)
    ignored: tuple[str, ...] = ()

    def failed_messages(self, outcomes: Iterable[TableOutcome]) -> list[str]:
        """The messages that named a table whose planning failed."""
        failed = {o.table for o in outcomes if o.error}
        return sorted({m for table in failed for m in self.messages.get(table, ())})


def is_batch(event: Any) -> bool:
    """Whether `event` is a batch of buffered events rather than one event.

    Lambda's SQS event source delivers such a batch.
    """
    records = event.get("Records") if isinstance(event, dict) else None
    if not isinstance(records, list):
        return False
    return all(isinstance(r, dict) and r.get("eventSource") == SQS_EVENT_SOURCE for r in records)


def batch_tables(event: dict[str, Any], config: Config) -> BatchTables:
    """Coalesce a batch, so that a burst of commits of one table becomes one planning pass.

    Every message's body is an EventBridge event: a table change or the sweep. The burst is the
    commits within the batching window.
    """
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
    messages = {table: tuple(asked_by) for table, asked_by in asked.items()}
    return BatchTables(tuple(asked), messages, tuple(ignored))
