"""What the commands print for scripts (`--json`), and a sync's lines.

One JSON document on stdout per command; a watch prints one a round, a line each. Times
are in ISO 8601 UTC, counts are numbers.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from typing import Any

from icecdc.audit import AuditReport, RepairReport
from icecdc.status import TableStatus
from icecdc.sync import SyncResult
from icecdc.verify import IndexDiff
from icecdc.words import counted


def iso(seconds: float | None) -> str | None:
    """Seconds since the epoch as ISO 8601 UTC, e.g. `2026-11-27T21:31:29.123Z`; None stays None."""
    if seconds is None:
        return None
    moment = dt.datetime.fromtimestamp(seconds, dt.UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def dumps(document: object) -> str:
    return json.dumps(document, indent=2, ensure_ascii=False)


def sync_json(results: list[SyncResult], started: float, finished: float) -> dict[str, Any]:
    """A sync's (or a watch round's) document: when it ran, and what each table's passes did."""
    return {
        "started_at": iso(started),
        "finished_at": iso(finished),
        "tables": [_result_json(r) for r in results],
    }


def _result_json(r: SyncResult) -> dict[str, Any]:
    checkpoint = r.checkpoint
    return {
        "table": r.table,
        "snapshots": r.snapshots,
        "engine": str(r.engine) if r.engine else None,
        "files": r.files,
        "rows_read": r.changes.rows,
        "carryovers_dropped": r.changes.carryovers,
        "indexed": r.writes.indexed,
        "deleted": r.writes.deleted,
        "superseded": r.writes.superseded,
        "dead_lettered": r.writes.dead_lettered,
        "dead_letters_by_cause": dict(r.writes.letters.by_cause()),
        "checkpoint": dataclasses.asdict(checkpoint) if checkpoint else None,
        "seconds": round(r.seconds, 3),
        "skipped": r.skipped,
        "unfinished": r.unfinished,
    }


def sync_line(r: SyncResult) -> str:
    """A table's line after a sync: what it read and wrote, and where its checkpoint is."""
    checkpoint = r.checkpoint.snapshot_id if r.checkpoint else "unchanged"
    return (
        f"{r.table}: {counted(r.snapshots, 'snapshot')} ({r.engine or 'no'} engine), "
        f"{counted(r.files, 'file')}, "
        f"{counted(r.changes.rows, 'row')} read, "
        f"{counted(r.changes.carryovers, 'carryover')} dropped, "
        f"{r.writes.indexed} indexed, {r.writes.deleted} deleted, "
        f"{r.writes.superseded} superseded, "
        f"{r.writes.dead_lettered} dead-lettered, checkpoint {checkpoint}, {r.seconds:.1f}s"
    )


def verify_json(table_name: str, index: str, diff: IndexDiff) -> dict[str, Any]:
    """One index's comparison with its table: equal or not, each difference counted and listed."""
    kinds = ("missing", "unexpected", "different", "misrouted", "copies", "dead_lettered")
    return {
        "table": table_name,
        "index": index,
        "equal": not diff,
        "summary": diff.summary(),
        "counts": {kind: len(getattr(diff, kind)) for kind in kinds},
        "ids": {kind: getattr(diff, kind) for kind in kinds if getattr(diff, kind)},
    }


def status_json(s: TableStatus, audit: dict[str, Any] | None, now: float) -> dict[str, Any]:
    """A table's status: checkpoint and when it moved, lag, pending work, letters, last audit."""
    moved = s.checkpointed_at
    export = {"files": s.export_files, "applied": s.export_files_applied}
    return {
        "table": s.table,
        "checkpoint": dataclasses.asdict(s.checkpoint) if s.checkpoint else None,
        "checkpointed_at": iso(moved),
        "seconds_since_checkpoint": None if moved is None else round(now - moved, 3),
        "current_snapshot_id": s.current_snapshot_id,
        "lag_snapshots": s.lag_snapshots,
        "lag_seconds": round(s.lag_seconds, 3),
        "pending_items": s.pending_items,
        "export": export if s.export_files else None,
        "unfinished": s.unfinished or None,
        "dead_letters": s.dead_letters,
        "last_audit": audit,
    }


def audit_json(report: AuditReport) -> dict[str, Any]:
    """An audit's report as stored, its time in ISO 8601, with its verdict.

    The verdict says whether it drifted, and the ids that differ by kind (`AuditReport.differing`).
    """
    document: dict[str, Any] = json.loads(report.to_json())
    document["audited_at"] = iso(report.audited_at)
    document.update(drifted=report.drifted, differing=report.differing(), summary=report.summary())
    return document


def repair_line(r: RepairReport) -> str:
    """What a repair wrote, said as writes (never "repaired" for what it did not write)."""
    written = r.indexed + r.deleted
    compared = f"{r.compared} id{'s' if r.compared != 1 else ''} compared"
    if not written and not r.dead_lettered:
        return f"nothing written in {r.scope.describe()}: {compared}, none differs from the table"
    documents = f"{written} document{'s' if written != 1 else ''}"
    return (
        f"wrote {documents} of {r.scope.describe()} at version {r.version}: {compared}, "
        f"{r.indexed} indexed, {r.deleted} deleted, {r.dead_lettered} dead-lettered"
    )
