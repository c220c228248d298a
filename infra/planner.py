"""The planner Lambda and what triggers it: a Glue Data Catalog change of a configured table, and a
sweep on a schedule (Glue's events are best-effort), both through a queue that buffers them."""

from __future__ import annotations

import json

from aws_cdk import Duration
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_destinations as lambda_destinations
from aws_cdk import aws_lambda_event_sources as event_sources
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from icecdc.aws import GLUE_EVENT_SOURCE, GLUE_EVENT_TYPE, METRIC_NAMESPACE
from icecdc.config import Config
from infra.bundling import LAMBDA_CATALOG_PROPERTIES, Bundles
from infra.common import allow, allow_metrics, log_group, read_catalog_and_warehouse, suppress, table_parts, tag_protected_tables
from infra.jobs import Jobs
from infra.state import State

# The planner only reads state (the checkpoint; a count of pending items): the job plans and writes.
PLANNER_DYNAMODB_ACTIONS = ["dynamodb:GetItem", "dynamodb:Query"]
# Planner invocations at once, and the most the queue's event source starts: each is O(1) per table,
# so events wait in the queue instead of taking the account's Lambda concurrency (equal, so that the
# event source is never throttled, which would count against a message's receives).
PLANNER_CONCURRENCY = 2
PLANNER_TIMEOUT = Duration.minutes(5)
# Events per invocation at most: Glue's table events are about 1 KB, so a batch stays far below
# Lambda's 6 MB payload; a burst of a streaming writer's commits is one batch, one pass per table.
PLANNER_BATCH_SIZE = 1000
# Receives of a message (its tables failed each time) before it moves to the failure queue.
PLANNER_MAX_RECEIVES = 5


class Planner(Construct):
    """`function`: the planner; `failures`: the queue of invocations that failed for good."""

    def __init__(
        self, scope: Construct, construct_id: str, *, config: Config, bundles: Bundles, state: State, jobs: Jobs
    ) -> None:
        super().__init__(scope, construct_id)
        assert config.aws is not None
        aws = config.aws
        self.log_group = log_group(self, "Logs", aws)
        role = iam.Role(self, "Role", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"), description="icecdc planner")
        allow(
            role,
            iam.PolicyStatement(actions=["logs:CreateLogStream", "logs:PutLogEvents"], resources=[self.log_group.log_group_arn]),
        )
        read_catalog_and_warehouse(role, config)
        tag_protected_tables(role, config)
        allow(role, iam.PolicyStatement(actions=PLANNER_DYNAMODB_ACTIONS, resources=[state.table.table_arn]))
        allow(role, iam.PolicyStatement(actions=["glue:StartJobRun"], resources=jobs.arns()))
        allow_metrics(role, METRIC_NAMESPACE)
        self.role = role
        layer = lambda_.LayerVersion(
            self,
            "Dependencies",
            code=lambda_.Code.from_asset(str(bundles.lambda_layer)),
            compatible_runtimes=[lambda_.Runtime.PYTHON_3_11],
            compatible_architectures=[lambda_.Architecture.X86_64],
            description="pyiceberg (glue, s3fs) and pyyaml, manylinux wheels",
        )
        # Events that could not be planned for good land here, with the event: a buffered one after
        # PLANNER_MAX_RECEIVES deliveries, one invoked directly after Lambda's 2 retries. Operations alarms on it.
        self.failures = sqs.Queue(
            self,
            "Failures",
            encryption=sqs.QueueEncryption.KMS_MANAGED,
            enforce_ssl=True,
            retention_period=Duration.days(14),
        )
        # The buffer: both rules send here (EventBridge can write to a queue under SQS's own key, not
        # under the AWS-managed KMS key); the event source hands the planner batches of up to
        # PLANNER_BATCH_SIZE events gathered for up to the batching window. A message whose tables
        # failed is delivered again after the visibility timeout (AWS's advice: six times the
        # function's timeout, plus the window), until it goes to `failures`.
        window = Duration.seconds(aws.planner_batch_window_seconds)
        self.buffer = sqs.Queue(
            self,
            "Buffer",
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
            visibility_timeout=Duration.seconds(6 * PLANNER_TIMEOUT.to_seconds() + window.to_seconds()),
            retention_period=Duration.days(1),  # an older event is stale: the sweep has planned its table since
            dead_letter_queue=sqs.DeadLetterQueue(queue=self.failures, max_receive_count=PLANNER_MAX_RECEIVES),
        )
        self.function = lambda_.Function(
            self,
            "Function",
            runtime=lambda_.Runtime.PYTHON_3_11,
            architecture=lambda_.Architecture.X86_64,
            handler="handler.handler",
            code=lambda_.Code.from_asset(str(bundles.lambda_code)),
            layers=[layer],
            role=role,
            log_group=self.log_group,
            memory_size=1024,
            timeout=PLANNER_TIMEOUT,
            reserved_concurrent_executions=PLANNER_CONCURRENCY,
            retry_attempts=2,  # direct asynchronous invocations (an operator's test); the rules go through the buffer
            on_failure=lambda_destinations.SqsDestination(self.failures),
            environment={
                "ICECDC_CONFIG": "icecdc.yaml",
                "ICECDC_STATE_TABLE": state.table.table_name,
                "ICECDC_STACK_NAME": aws.stack_name,
                "ICECDC_CATALOG_PROPERTIES": json.dumps(LAMBDA_CATALOG_PROPERTIES, sort_keys=True),
            },
            description="icecdc planner: Glue table change or schedule → has the table work? → its Glue job",
        )
        self.function.node.add_dependency(role)
        self.function.add_event_source(
            event_sources.SqsEventSource(
                self.buffer,
                batch_size=PLANNER_BATCH_SIZE,
                max_batching_window=window,
                report_batch_item_failures=True,  # the handler names the messages of the tables that failed
                max_concurrency=PLANNER_CONCURRENCY,
            )
        )
        suppress(
            self.function,
            "AwsSolutions-L1",
            "Python 3.11 on purpose: the same interpreter as Glue 5.1, which runs the same icecdc library",
        )

        databases = sorted({database for database, _ in table_parts(config)})
        tables = sorted({table for _, table in table_parts(config)})
        events.Rule(
            self,
            "TableChanged",
            description="an Iceberg commit through the Glue Data Catalog (UpdateTable) of a configured table",
            event_pattern=events.EventPattern(
                source=[GLUE_EVENT_SOURCE],
                detail_type=[GLUE_EVENT_TYPE],
                # a database × table cross product may match more than configured: the planner ignores those
                detail={"databaseName": databases, "tableName": tables, "typeOfChange": ["UpdateTable"]},
            ),
            targets=[targets.SqsQueue(self.buffer, retry_attempts=2, max_event_age=Duration.hours(1))],
        )
        events.Rule(
            self,
            "Sweep",
            description="Glue's events are best-effort: plan every table on a schedule too",
            schedule=events.Schedule.rate(Duration.minutes(aws.schedule_minutes)),
            targets=[targets.SqsQueue(self.buffer, retry_attempts=0)],  # the next sweep is the retry
        )
