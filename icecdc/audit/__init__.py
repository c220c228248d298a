"""Drift audit and targeted repair: is an index still equal to its table, at a cost far below
`icecdc verify`, and making a drifted scope equal again without a full export."""

from icecdc.audit.audit import (
    DEFAULT_LIST_LIMIT,
    DEFAULT_MAX_IDS,
    DEFAULT_SAMPLE,
    AuditOptions,
    TableAndIndex,
    audit_table,
)
from icecdc.audit.findings import findings_location, load_findings, save_findings
from icecdc.audit.repair import rebuild_index, repair, repair_table
from icecdc.audit.report import AuditCost, AuditReport, Drift, DriftKind, PartitionCount, RepairReport, RepairScope
from icecdc.audit.run import RepairIds, audit, key_ids, parse_partition, repair_named, repair_scope

__all__ = [
    "DEFAULT_LIST_LIMIT",
    "DEFAULT_MAX_IDS",
    "DEFAULT_SAMPLE",
    "AuditCost",
    "AuditOptions",
    "AuditReport",
    "Drift",
    "DriftKind",
    "PartitionCount",
    "RepairIds",
    "RepairReport",
    "RepairScope",
    "TableAndIndex",
    "audit",
    "audit_table",
    "findings_location",
    "key_ids",
    "load_findings",
    "parse_partition",
    "rebuild_index",
    "repair",
    "repair_named",
    "repair_scope",
    "repair_table",
    "save_findings",
]
