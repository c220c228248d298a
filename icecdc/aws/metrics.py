"""What the AWS entries publish to CloudWatch, per table under the dimension `Table`: the
planner's lag and planning errors, a run's counts, an audit's drift. The stack's alarms and
dashboard (infra/operations.py) read them by these names."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from icecdc.aws.contract import METRIC_NAMESPACE

if TYPE_CHECKING:
    from icecdc.aws.planner import TableOutcome

log = logging.getLogger(__name__)


def put_run_metrics(cloudwatch: Any, table: str, dead_lettered: int, rows: int, files: int) -> None:
    """Publish what a run did to the table: `DeadLetters` (the stack alarms on any), `RowsApplied`
    (change rows read and applied) and `FilesRead`; zeros included, so that a quiet table shows
    as such."""
    metrics = [
        _metric("DeadLetters", table, dead_lettered),
        _metric("RowsApplied", table, rows),
        _metric("FilesRead", table, files),
    ]
    cloudwatch.put_metric_data(Namespace=METRIC_NAMESPACE, MetricData=metrics)


def put_drift(cloudwatch: Any, table: str, drift: int) -> None:
    """Publish `Drift`: the documents an audit of the table found that no dead letter explains."""
    metrics = [_metric("Drift", table, drift)]
    cloudwatch.put_metric_data(Namespace=METRIC_NAMESPACE, MetricData=metrics)


def put_lag(
    cloudwatch: Any,
    table: str,
    pending: int,
    lag_snapshots: int | None,
    lag_seconds: float,
) -> None:
    """Publish how far the table's index is behind: `PendingItems`, `LagSeconds` and, when known,
    `LagSnapshots`."""
    metrics = [
        _metric("PendingItems", table, pending),
        _metric("LagSeconds", table, lag_seconds, "Seconds"),
    ]
    if lag_snapshots is not None:
        metrics.append(_metric("LagSnapshots", table, lag_snapshots))
    cloudwatch.put_metric_data(Namespace=METRIC_NAMESPACE, MetricData=metrics)


def put_planning_errors(cloudwatch: Any, failed: Sequence[TableOutcome]) -> None:
    """How many tables an invocation could not plan (the stack alarms on any): a batch that reports
    its failures to SQS succeeds as an invocation, so Lambda's own Errors metric does not count
    them."""
    if not failed:
        return
    metric = {"MetricName": "PlanningErrors", "Value": len(failed), "Unit": "Count"}
    try:
        cloudwatch.put_metric_data(Namespace=METRIC_NAMESPACE, MetricData=[metric])
    except ClientError:  # the failures are reported anyway (the error, or the failed messages)
        tables = ", ".join(o.table for o in failed)
        log.exception("could not publish PlanningErrors for %s", tables)


def _metric(name: str, table: str, value: float, unit: str = "Count") -> dict[str, Any]:
    """One metric datum of the table: under the dimension `Table`."""
    dimensions = [{"Name": "Table", "Value": table}]
    return {"MetricName": name, "Dimensions": dimensions, "Value": value, "Unit": unit}
