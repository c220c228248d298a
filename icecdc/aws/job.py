"""What a run of a table's Glue job does besides a sync.

That is the scheduled audit, `JobMode.AUDIT`, and with `JobMode.AUDIT_AND_REPAIR` the repair of
what it found. The sync itself is `icecdc.sync.sync`, called by glue_jobs/icecdc_job.py.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from icecdc.aws.contract import JobMode
from icecdc.aws.metrics import put_drift
from icecdc.config import Config

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class AuditOutcome:
    """What a scheduled audit of one table found, and what its repair wrote."""

    table: str
    drift: int  # findings dead letters do not explain: the metric Drift
    repaired: int = 0  # documents a repair wrote or deleted


def scheduled_audit(
    config: Config,
    name: str,
    mode: JobMode,
    findings: str,
    cloudwatch: Any,
) -> AuditOutcome:
    """Audit one table's index, publish its Drift and, with AUDIT_AND_REPAIR, repair the drift."""
    from icecdc.audit.repair import repair  # the audit's modules load only in an audit run
    from icecdc.audit.run import audit

    (report,) = audit(config, [name], findings=findings)
    drift = sum(not d.known for d in report.drift)
    put_drift(cloudwatch, name, drift)
    log.info("%s: audit found %d drifted documents (%s)", name, drift, report.compared)
    if not drift or mode != JobMode.AUDIT_AND_REPAIR:
        return AuditOutcome(name, drift)
    repaired = repair(config, name, report.scope())
    written = repaired.indexed + repaired.deleted
    log.info(
        "%s: repair wrote %d and deleted %d documents",
        name,
        repaired.indexed,
        repaired.deleted,
    )
    return AuditOutcome(name, drift, written)
