"""The audit and the repair as the command line asks for them: configured tables, opened from the
configuration, and the scope of a repair read from its arguments or from the last audit."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from typing import Any

from icecdc.audit.audit import DEFAULT_LIST_LIMIT, DEFAULT_MAX_IDS, DEFAULT_SAMPLE, audit_table
from icecdc.audit.findings import findings_location, load_findings, save_findings
from icecdc.audit.repair import repair
from icecdc.audit.report import AuditReport, RepairReport, RepairScope
from icecdc.catalog import identifier_columns, load_table, open_catalog
from icecdc.config import Config
from icecdc.deadletters import DeadLetters
from icecdc.errors import OperationError
from icecdc.lookup import whole_rows_only
from icecdc.opensearch import check_reachable, open_client
from icecdc.state import open_state_store

log = logging.getLogger(__name__)


def audit(
    config: Config,
    table_names: Iterable[str] | None = None,
    sample: int = DEFAULT_SAMPLE,
    seed: int | None = None,
    findings: str | None = None,
    max_ids: int = DEFAULT_MAX_IDS,
    list_limit: int = DEFAULT_LIST_LIMIT,
) -> list[AuditReport]:
    """Audit the named tables (every configured one by default) and keep each report where
    `repair --from-audit` finds it (`findings_location`); `audit_table` says what the others ask."""
    chosen = [config.table(n) for n in table_names] if table_names else list(config.tables)
    selected = [whole_rows_only(t, "audit") for t in chosen]
    location = findings_location(config, findings)
    client = open_client(config.opensearch)
    check_reachable(client, config.opensearch.url)
    catalog = open_catalog(config.catalog)
    dead_letters = DeadLetters(config.dead_letter) if config.dead_letter else None
    store = open_state_store(config.state)
    reports = []
    try:
        for table_config in selected:
            table = load_table(catalog, table_config.name)
            identifiers = identifier_columns(table, table_config)
            report = audit_table(table, table_config, identifiers, store, client, sample, seed, dead_letters, max_ids, list_limit)
            save_findings(location, report)
            reports.append(report)
    finally:
        store.close()
    return reports


def repair_scope(
    config: Config,
    name: str,
    partitions: Iterable[str] = (),
    ids: Iterable[str] = (),
    from_audit: bool = False,
    findings: str | None = None,
) -> RepairScope:
    """The scope the arguments name: `partitions` as `column=value[,column=value]` (one partition
    each), `ids` as comma-separated document ids, or the findings of the table's last audit."""
    config.table(name)  # an unknown table fails first
    if from_audit:
        if list(partitions) or list(ids):
            raise OperationError("name a scope, or take the last audit's (--from-audit), not both")
        return load_findings(findings_location(config, findings), name).scope()
    parsed = tuple(parse_partition(p) for p in partitions)
    named = tuple(dict.fromkeys(i.strip() for text in ids for i in text.split(",") if i.strip()))
    return RepairScope(parsed, named)


def parse_partition(text: str) -> dict[str, Any]:
    """`region=us,day=2024-05-01` → {"region": "us", "day": "2024-05-01"}. A value that is JSON
    `null` names the null partition, a JSON string (`"null"`) its text; any other value is as written."""
    partition: dict[str, Any] = {}
    for part in text.split(","):
        column, equals, value = part.partition("=")
        if not equals or not column.strip():
            raise OperationError(f"partition {text!r}: write each column as column=value, e.g. region=us")
        partition[column.strip()] = _value(value)
    return partition


def _value(text: str) -> Any:
    try:
        value = json.loads(text)
    except ValueError:
        return text
    return value if value is None or isinstance(value, str) else text


def repair_named(config: Config, name: str, scope: RepairScope) -> RepairReport:
    """Repair the scope of a configured table; an empty scope (an audit that found nothing) writes nothing."""
    if not scope:
        log.info("%s: nothing to repair", name)
        return RepairReport(name, config.table(name).index, scope, 0, notes=["nothing to repair: the scope is empty"])
    return repair(config, name, scope)
