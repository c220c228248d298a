"""What the AWS entries publish to CloudWatch, per table under the dimension `Table`.

They publish the planner's lag and planning errors, a run's counts and an audit's drift. The stack's
alarms and dashboard in infra/operations.py read them by these names.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from botocore.exceptions import ClientError

from icecdc.aws.contract import METRIC_NAMESPACE
from icecdc.aws.outcome import TableOutcome

log = logging.getLogger(__name__)


def put_run_metrics(
    cloudwatch: Any, table_name: str, dead_lettered: int, rows: int, files: int
) -> None:
    """Publish what a run did to the table: `DeadLetters`, `RowsApplied` and `FilesRead`.

    The stack alarms on any dead letter. `RowsApplied` counts the change rows read and applied.
    Zeros are published too, so that a quiet table shows as such.
    """
    metrics = [
        _metric("DeadLetters", table_name, dead_lettered),
        _metric("RowsApplied", table_name, rows),
        _metric("FilesRead", table_name, files),
    ]
    cloudwatch.put_metric_data(Namespace=METRIC_NAMESPACE, MetricData=metrics)


def put_drift(cloudwatch: Any, table_name: str, drift: int) -> None:
    """Publish `Drift`: the documents an audit of the table found that no dead letter explains."""
    metrics = [_metric("Drift", table_name, drift)]
    cloudwatch.put_metric_data(Namespace=METRIC_NAMESPACE, MetricData=metrics)


def put_lag(
    cloudwatch: Any,
    table_name: str,
    pending: int,
    lag_snapshots: int | None,
    lag_seconds: float,
) -> None:
    """Publish how far the table's index is behind.

    The metrics are `PendingItems`, `LagSeconds` and, when known, `LagSnapshots`.
    """
    metrics = [
        _metric("PendingItems", table_name, pending),
        _metric("LagSeconds", table_name, lag_seconds, "Seconds"),
    ]
    if lag_snapshots is not None:
        metrics.append(_metric("LagSnapshots", table_name, lag_snapshots))
    cloudwatch.put_metric_data(Namespace=METRIC_NAMESPACE, MetricData=metrics)


def put_planning_errors(cloudwatch: Any, failed: Sequence[TableOutcome]) -> None:
    """Publish how many tables an invocation could not plan; the stack alarms on any.

    A batch that reports its failures to SQS succeeds as an invocation, so Lambda's own Errors
    metric does not count them.
    """
    if not failed:
        return
    metric = {"MetricName": "PlanningErrors", "Value": len(failed), "Unit": "Count"}
    try:
        cloudwatch.put_metric_data(Namespace=METRIC_NAMESPACE, MetricData=[metric])
    except ClientError:
        # the failures are reported anyway (the error, or the failed messages)
        tables = ", ".join(o.table for o in failed)
        log.exception("could not publish PlanningErrors for %s", tables)


def _metric(name: str, table_name: str, value: float, unit: str = "Count") -> dict[str, Any]:
    """One metric datum of the table: under the dimension `Table`."""
    dimensions = [{"Name": "Table", "Value": table_name}]
    return {"MetricName": name, "Dimensions": dimensions, "Value": value, "Unit": unit}
