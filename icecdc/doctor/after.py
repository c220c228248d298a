"""After `cdk deploy`: the stack's resources, what they have done, and whether commits arrive.

A commit of each table reaches its index when the rule matches its event, the planner takes it, and
the writers may write. The last check is how far behind each table is.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

from botocore.exceptions import ClientError

from icecdc.aws.contract import job_name
from icecdc.aws.events import event_tables
from icecdc.catalog import glue_name, load_table
from icecdc.doctor.catalogs import check_lake_formation
from icecdc.doctor.collections import check_collection_access
from icecdc.doctor.context import Context
from icecdc.doctor.model import Check, failed, passed, skipped, warned
from icecdc.doctor.search import check_endpoint, check_mapping, check_writes
from icecdc.doctor.sources import UnsupportedPattern, glue_event, match_pattern
from icecdc.doctor.stack import (
    GLUE_VERSION,
    NOT_FOUND,
    DeployedStack,
    Logical,
    error_code,
    expected,
    state_table_name,
)
from icecdc.errors import IcecdcError
from icecdc.state import index_stores
from icecdc.status import TableStatus, table_status

# The Lag alarm's threshold (infra.operations): a table this far behind is alarming.
LAG_ALARM_SECONDS = 3600
# Errors in the planner's log this recent fail the check; older ones, within a day, are shown.
RECENT_SECONDS = 3600
LOOKBACK_SECONDS = 24 * 3600
FAILED_RUN_STATES = {"FAILED", "TIMEOUT", "ERROR"}


def check_stack(ctx: Context) -> Iterator[Check]:
    stack = ctx.stack
    if stack is None:
        yield failed(
            "stack",
            f"no stack {ctx.stack_name} in {ctx.region}",
            "deploy it (icecdc doctor before first)",
            "cdk deploy -c icecdc:config=path/to/icecdc.yaml",
        )
        return
    if not stack.usable:
        yield failed(
            "stack",
            f"{stack.name} is {stack.status}: {stack.reason or 'no reason given'}",
            "see the stack's events",
            _events(ctx),
        )
        return
    missing = [r.value for r in expected(ctx.config) if stack.physical(r) is None]
    if missing:
        yield failed(
            "stack",
            f"{stack.name} is {stack.status} but lacks {', '.join(missing)}",
            "deploy this version of the stack again (cdk deploy)",
            _events(ctx),
        )
        return
    yield passed("stack", f"{stack.name} {stack.status}, {len(stack.resources)} resources")


def _events(ctx: Context) -> str:
    return (
        f"aws cloudformation describe-stack-events --stack-name {ctx.stack_name} --region "
        f"{ctx.region} --max-items 20"
    )


def _deployed(ctx: Context) -> DeployedStack | None:
    """The stack, when it is deployed and usable (check_stack says what it is otherwise)."""
    return ctx.stack if ctx.stack is not None and ctx.stack.usable else None


def check_state_table(ctx: Context) -> Iterator[Check]:
    """The planner and the jobs keep checkpoints and work items there: it must answer."""
    name = state_table_name(ctx.stack_name)
    try:
        status = ctx.client("dynamodb").describe_table(TableName=name)["Table"]["TableStatus"]
    except ClientError as exc:
        if error_code(exc) not in NOT_FOUND:
            raise
        yield failed("state table", f"{name} does not exist", "deploy the stack again (cdk deploy)")
        return
    store = ctx.state_store
    # each index's state (icecdc.state.scoped)
    keys = [configured.key for t in ctx.config.tables for configured in t.each_index()]
    checkpoints = sum(store.get_checkpoint(key) is not None for key in keys)
    pending = sum(store.count_pending(key) for key in keys)
    yield passed(
        "state table",
        f"{name} {status}: {checkpoints} of {len(keys)} indexes checkpointed, {pending} "
        "items pending",
    )


def check_jobs(ctx: Context) -> Iterator[Check]:
    glue = ctx.client("glue")
    for table in ctx.config.tables:
        job = job_name(ctx.stack_name, table.name)
        try:
            version = glue.get_job(JobName=job)["Job"].get("GlueVersion")
        except ClientError as exc:
            if error_code(exc) not in NOT_FOUND:
                raise
            yield failed(
                "glue job",
                f"{job} does not exist",
                "deploy the stack again (cdk deploy)",
                subject=table.name,
            )
            continue
        if version != GLUE_VERSION:
            yield failed(
                "glue job",
                f"{job} runs Glue {version}, not {GLUE_VERSION}",
                "deploy this version of the stack",
                subject=table.name,
            )
            continue
        runs = glue.get_job_runs(JobName=job, MaxResults=10)["JobRuns"]
        yield last_run(ctx.stack_name, table.name, job, runs)


def last_run(stack: str, table_name: str, job: str, runs: list[dict[str, Any]]) -> Check:
    """The job's last run, as Glue's GetJobRuns lists them: a failed one, with its error, fails."""
    if not runs:
        return passed(
            "glue job",
            f"{job}: no run yet (the planner applies small work itself)",
            subject=table_name,
        )
    run = max(runs, key=lambda r: r.get("StartedOn") or datetime.min.replace(tzinfo=UTC))
    state, started = run.get("JobRunState", "?"), run.get("StartedOn")
    when = f" started {started:%Y-%m-%d %H:%M} UTC" if isinstance(started, datetime) else ""
    if state in FAILED_RUN_STATES:
        return failed(
            "glue job",
            f"{job}: the last run{when} is {state}: {run.get('ErrorMessage', 'no message')}",
            "read the run's error log; the next sweep starts the job again",
            f"aws logs tail /aws-glue/jobs/{stack}/error --log-stream-name-prefix "
            f"{run.get('Id', '')} --since 1d",
            subject=table_name,
        )
    return passed("glue job", f"{job}: the last run{when} is {state}", subject=table_name)


def check_planner(ctx: Context) -> Iterator[Check]:
    """The planner is active, has run, and logged no errors lately."""
    stack = _deployed(ctx)
    function = stack.physical(Logical.PLANNER) if stack else None
    group = stack.physical(Logical.PLANNER_LOGS) if stack else None
    if function is None or group is None:
        yield skipped("planner", "the stack is not deployed")
        return
    state = (
        ctx.client("lambda")
        .get_function(FunctionName=function)["Configuration"]
        .get("State", "Active")
    )
    if state != "Active":
        yield failed(
            "planner",
            f"{function} is {state}",
            "see the function's state reason",
            f"aws lambda get-function --function-name {function}",
        )
        return
    logs = ctx.client("logs")
    streams = logs.describe_log_streams(
        logGroupName=group, orderBy="LastEventTime", descending=True, limit=1
    )["logStreams"]
    if not streams:
        yield warned(
            "planner",
            f"{function} has not run yet",
            f"the sweep runs every {ctx.aws.schedule_minutes} minutes; or send it one",
            f'aws lambda invoke --function-name {function} --payload \'{{"source": '
            f'"aws.events", "detail-type": "Scheduled Event"}}\' '
            "--cli-binary-format raw-in-base64-out /dev/stdout",
        )
        return
    now_ms = int(ctx.clock() * 1000)
    last = _ago(now_ms - int(streams[0].get("lastEventTimestamp", now_ms)))
    errors = logs.filter_log_events(
        logGroupName=group, startTime=now_ms - LOOKBACK_SECONDS * 1000, filterPattern="ERROR"
    )["events"]
    if not errors:
        yield passed("planner", f"{function} last logged {last} ago; no errors in a day")
        return
    newest = max(errors, key=lambda e: int(e["timestamp"]))
    age = (now_ms - int(newest["timestamp"])) / 1000
    message = str(newest["message"]).strip().replace("\t", " ")
    detail = f"{len(errors)} error lines in a day, the last {_ago(int(age * 1000))} ago: {message}"
    tail = f"aws logs tail {group} --since 1d --filter-pattern ERROR --region {ctx.region}"
    if age <= RECENT_SECONDS:
        yield failed(
            "planner",
            detail,
            "read the planner's log; the table it names is retried from the queue",
            tail,
        )
    else:
        yield warned("planner", detail, "earlier errors: read the planner's log", tail)


def _ago(milliseconds: int) -> str:
    seconds = max(0, milliseconds // 1000)
    return (
        f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
        if seconds >= 3600
        else f"{seconds // 60}m{seconds % 60:02d}s"
    )


def check_failures(ctx: Context) -> Iterator[Check]:
    """Events the planner failed five times end in the Failures queue (and raise an alarm)."""
    stack = _deployed(ctx)
    url = stack.physical(Logical.FAILURES) if stack else None
    if url is None:
        yield skipped("failed events", "the stack is not deployed")
        return
    sqs = ctx.client("sqs")
    count = int(
        sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"])[
            "Attributes"
        ]["ApproximateNumberOfMessages"]
    )
    if count:
        yield failed(
            "failed events",
            f"{count} events the planner could not plan (5 deliveries each) wait in "
            f"{url.rsplit('/', 1)[-1]}",
            "read them and the planner's log; once the cause is fixed, move them back to the "
            "buffer queue",
            f"aws sqs receive-message --queue-url {url} --max-number-of-messages 10\n"
            "aws sqs start-message-move-task --source-arn <Failures queue ARN> "
            "--destination-arn <Buffer queue ARN>",
        )
        return
    yield passed("failed events", "the Failures queue is empty")


def check_rules(ctx: Context) -> Iterator[Check]:
    """A commit of each table reaches the planner.

    The rule is enabled, sends to the buffer queue, matches the table's event as Glue sends it, and
    the planner takes that event.
    """
    stack = _deployed(ctx)
    rule = stack.physical(Logical.TABLE_CHANGED) if stack else None
    buffer = stack.physical(Logical.BUFFER) if stack else None
    if rule is None or buffer is None:
        yield skipped("event rule", "the stack is not deployed")
        return
    events = ctx.client("events")
    described = events.describe_rule(Name=rule)
    if described.get("State") != "ENABLED":
        yield failed(
            "event rule",
            f"{rule} is {described.get('State')}",
            "enable it",
            f"aws events enable-rule --name {rule}",
        )
        return
    targets = [t["Arn"] for t in events.list_targets_by_rule(Rule=rule)["Targets"]]
    if not any(arn.endswith(":" + buffer.rsplit("/", 1)[-1]) for arn in targets):
        yield failed(
            "event rule",
            f"{rule} does not send to the planner's queue ({', '.join(targets) or 'no target'})",
            "deploy the stack again",
        )
        return
    for table in ctx.config.tables:
        event = glue_event(ctx.account, ctx.region, table.name)
        try:
            match = match_pattern(events, described["EventPattern"], event)
        except UnsupportedPattern as exc:
            yield warned(
                "event rule", f"cannot evaluate {rule}'s pattern here: {exc}", subject=table.name
            )
            continue
        ignored = event_tables(event, ctx.config).ignored  # the planner's own test of the event
        announced = glue_name(table.name)
        if ignored or not match.matches:
            missed = (
                f"the planner ignores it ({ignored})" if ignored else f"{rule} does not match it"
            )
            yield failed(
                "event rule",
                f"a commit of {announced} (Glue's event, {match.how}): {missed}",
                "deploy the stack again from this configuration (a stack deployed by a "
                "version that matched names as "
                "written waits for names Glue never sends)",
                "cdk deploy -c icecdc:config=path/to/icecdc.yaml",
                subject=table.name,
            )
        else:
            yield passed(
                "event rule",
                f"{rule} matches a commit of {announced} ({match.how}); the planner takes it",
                subject=table.name,
            )


def check_lag(ctx: Context) -> Iterator[Check]:
    """How far each index is behind its table, as the planner publishes it.

    The planner publishes it through icecdc.status.table_status.
    """
    now = ctx.clock()
    for table_config in ctx.config.tables:
        try:
            table = load_table(ctx.catalog, table_config.name)
            statuses = [
                (key, table_status(table, index_config, scoped, now))
                for index_config, key, scoped in index_stores(table_config, ctx.state_store)
            ]
        except (IcecdcError, ClientError) as exc:  # this table cannot tell; the others can
            yield failed(
                "lag",
                f"could not tell: {exc}",
                "see the table and state table checks",
                subject=table_config.name,
            )
            continue
        for key, status in statuses:
            yield _lag(status, ctx.aws.schedule_minutes, key)


def _lag(status: TableStatus, schedule_minutes: int, name: str) -> Check:
    snapshots = "?" if status.lag_snapshots is None else status.lag_snapshots
    behind = (
        f"{status.lag_seconds:.0f} s behind, {snapshots} snapshots, {status.pending_items} items "
        "pending"
    )
    late = status.lag_seconds >= LAG_ALARM_SECONDS
    if status.checkpoint is None and status.current_snapshot_id is not None:
        detail = f"not exported yet ({status.lag_seconds:.0f} s since the current snapshot)"
        fix = (
            f"the sweep exports it within {schedule_minutes} minutes; if not, see the planner "
            "and job checks"
        )
        return (
            failed("lag", detail, fix, subject=name)
            if late
            else warned("lag", detail, fix, subject=name)
        )
    if late:
        return failed(
            "lag",
            behind,
            "more than an hour (the Lag alarm's threshold): see the planner, job and "
            "failed-events checks",
            subject=name,
        )
    return passed("lag", behind, subject=name)


CHECKS = (
    check_stack,
    check_state_table,
    check_jobs,
    check_planner,
    check_failures,
    check_rules,
    check_writes,
    check_endpoint,
    check_mapping,
    check_lake_formation,
    check_collection_access,
    check_lag,
)
