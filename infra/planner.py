"""The planner Lambda and what triggers it: a Glue Data Catalog change of a configured table, and a
sweep on a schedule (Glue's events are best-effort), both through a queue that buffers them.

With `aws.planner_applies` (the default) the planner applies a small batch itself on the in-process
engine (icecdc.aws.planner.apply_here) and starts the table's Glue job only for larger work: it then
writes the state as the job does, writes to OpenSearch as a second writer of the domain
(`Search.add_writer`) and dead letters to the stack's location, and with `aws.vpc` runs in the VPC's
subnets with a security group of its own (the domain must be reachable). Without it the planner only
reads state and starts jobs."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from aws_cdk import Duration
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_destinations as lambda_destinations
from aws_cdk import aws_lambda_event_sources as event_sources
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from icecdc.aws.contract import (
    METRIC_NAMESPACE,
    PlannerEnvironment,
    planner_log_group,
)
from icecdc.config import Config
from infra.bundling import LAMBDA_CATALOG_PROPERTIES, LAMBDA_PYTHON, Bundles
from infra.collection import Collection
from infra.common import (
    allow,
    allow_metrics,
    allow_password_secret,
    aws_catalog,
    cdk_orders_after_its_policy,
    log_group,
    read_catalog_and_warehouse,
    suppress,
    table_parts,
    tag_protected_tables,
)
from infra.domain import Search
from infra.jobs import DYNAMODB_ACTIONS, Jobs
from infra.network import Network
from infra.state import State

# A planner that starts jobs only reads state (the checkpoint; a count of pending items); one that
# applies small batches plans and writes like the job (infra.jobs.DYNAMODB_ACTIONS).
PLANNER_DYNAMODB_ACTIONS = ["dynamodb:GetItem", "dynamodb:Query"]
# The most planner invocations the queue's event source starts at once (its MaximumConcurrency;
# Lambda's minimum): each is O(1) per table, so events wait in the queue instead of taking the
# account's Lambda concurrency. Every trigger goes through the queue, so this bounds the planner;
# concurrency is reserved for it only with aws.planner_reserved_concurrency (at least this, so
# that the event source is never throttled, which would count against a message's receives):
# reserving fails in accounts whose concurrency quota is low ("decreases account's
# UnreservedConcurrentExecution below its minimum value": Lambda keeps 100 unreserved).
PLANNER_CONCURRENCY = 2
# The planner starts no pass with less than PASS_RESERVE_SECONDS (120 s) left
# (icecdc.aws.planner.planner_deadline): the longest pass the default engine limits allow (500,000
# rows read at the 9,000-19,000 rows/s of one core measured by bench.crossover, bulk writes
# included: 26-56 s) ends within that reserve, and the rest of the 5 minutes is for deciding and
# applying the batch's tables one after another.
# infra.stack.check_deployable refuses engine limits whose pass would not fit the reserve, at the
# slowest rate bench.crossover measured in-process (a 10^6-row append: 110 s for the whole command).
PLANNER_TIMEOUT = Duration.minutes(5)
IN_PROCESS_ROWS_PER_SECOND = 9_000
# Lambda gives a function CPU in proportion to its memory (one full vCPU at 1,769 MB): 2,048 MB is
# more than a whole core for the in-process engine (Arrow decoding, the changelog in Python), and
# about 3x the memory of the largest default pass (500,000 rows at ~0.7 KiB a row held by key,
# ~350 MiB, plus ~150 MiB of interpreter and libraries and the Arrow batches being read). A
# planner that only starts jobs (aws.planner_applies: false) keeps 1,024 MB.
PLANNER_MEMORY_MB = 2048
PLANNER_MEMORY_MB_STARTING_JOBS = 1024
# Events per invocation at most: Glue's table events are about 1 KB, so a batch stays far below
# Lambda's 6 MB payload; a burst of a streaming writer's commits is one batch, one pass per table.
PLANNER_BATCH_SIZE = 1000
# Receives of a message (its tables failed each time) before it moves to the failure queue.
PLANNER_MAX_RECEIVES = 5
# The planner's runtime: python3.13 runs on Amazon Linux 2023 (glibc 2.34; python3.11's Amazon Linux 2
# is being deprecated), the interpreter the layer is locked and tested for (infra.bundling.LAMBDA_PYTHON).
PLANNER_RUNTIME = lambda_.Runtime.PYTHON_3_13
assert PLANNER_RUNTIME.name == f"python{LAMBDA_PYTHON}"


class Planner(Construct):
    """`function`: the planner; `failures`: the queue of invocations that failed for good."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: Config,
        bundles: Bundles,
        state: State,
        jobs: Jobs,
        search: Search | Collection,
        network: Network | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        assert config.aws is not None
        aws = config.aws
        applies = aws.planner_applies
        name = planner_log_group(aws.stack_name)
        self.log_group = log_group(self, "Logs", aws, name=name, key=state.data_key)
        role = iam.Role(self, "Role", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"), description="icecdc planner")
        allow(
            role,
            iam.PolicyStatement(actions=["logs:CreateLogStream", "logs:PutLogEvents"], resources=[self.log_group.log_group_arn]),
        )
        read_catalog_and_warehouse(role, config)
        tag_protected_tables(role, config)
        dynamodb_actions = DYNAMODB_ACTIONS if applies else PLANNER_DYNAMODB_ACTIONS
        allow(role, iam.PolicyStatement(actions=dynamodb_actions, resources=[state.table.table_arn]))
        allow(role, iam.PolicyStatement(actions=["glue:StartJobRun"], resources=jobs.arns()))
        allow_metrics(role, METRIC_NAMESPACE)
        self.role = role
        environment = PlannerEnvironment(
            config="icecdc.yaml",
            state_table=state.table.table_name,
            stack_name=aws.stack_name,
            catalog_properties=json.dumps(LAMBDA_CATALOG_PROPERTIES, sort_keys=True),
        )
        placement: dict[str, Any] = {}
        self.security_group: ec2.SecurityGroup | None = None
        if applies:
            environment = self._allow_applying(config, role, state, search, environment)
            if network is not None:  # the domain is reached in the VPC: the planner runs there too
                self.security_group = network.security_group("Planner", "icecdc planner Lambda")
                search.admit(self.security_group, "the planner Lambda")
                network.allow_lambda(role)
                placement = {
                    "vpc": network.vpc,
                    "vpc_subnets": ec2.SubnetSelection(subnets=network.subnets),
                    "security_groups": [self.security_group],
                }
        layer = lambda_.LayerVersion(
            self,
            "Dependencies",
            code=lambda_.Code.from_asset(str(bundles.lambda_layer)),
            compatible_runtimes=[PLANNER_RUNTIME],
            compatible_architectures=[lambda_.Architecture.X86_64],
            description="icecdc planner: the locked manylinux wheels (pyiceberg, pyarrow, opensearch-py, ...), trimmed",
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
            runtime=PLANNER_RUNTIME,
            architecture=lambda_.Architecture.X86_64,
            handler="handler.handler",
            code=lambda_.Code.from_asset(str(bundles.lambda_code)),
            layers=[layer],
            role=role,
            log_group=self.log_group,
            memory_size=PLANNER_MEMORY_MB if applies else PLANNER_MEMORY_MB_STARTING_JOBS,
            timeout=PLANNER_TIMEOUT,
            reserved_concurrent_executions=aws.planner_reserved_concurrency,
            retry_attempts=2,  # direct asynchronous invocations (an operator's test); the rules go through the buffer
            on_failure=lambda_destinations.SqsDestination(self.failures),
            environment=environment.variables(),
            description="icecdc planner: Glue table change or schedule → has the table work? → applied here if small, else its Glue job",
            **placement,
        )
        cdk_orders_after_its_policy(self.function)
        self.function.add_event_source(
            event_sources.SqsEventSource(
                self.buffer,
                batch_size=PLANNER_BATCH_SIZE,
                max_batching_window=window,
                report_batch_item_failures=True,  # the handler names the messages of the tables that failed
                max_concurrency=PLANNER_CONCURRENCY,
            )
        )
        if applies and search.access is not None:
            # the created domain's mapping (the custom resource) is in place before a batch is applied
            self.function.node.add_dependency(search.access)
        suppress(
            self.function,
            "AwsSolutions-L1",
            "python3.13 on purpose: the layer's wheels are locked for it (infra/locks/lambda.txt) and the bundle test "
            "runs it on CPython 3.13; move both together (infra.bundling.LAMBDA_PYTHON)",
        )

        # the events that announce a commit, as the catalog's kind has them (hints: the sweep stays)
        for n, pattern in enumerate(aws_catalog(config).commit_events(table_parts(config))):
            events.Rule(
                self,
                "TableChanged" if n == 0 else f"TableChanged{n}",
                description=pattern.description,
                event_pattern=events.EventPattern(
                    source=list(pattern.source), detail_type=list(pattern.detail_type), detail=dict(pattern.detail)
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

    def _allow_applying(
        self, config: Config, role: iam.Role, state: State, search: Search | Collection, environment: PlannerEnvironment
    ) -> PlannerEnvironment:
        """What applying a batch needs beyond starting jobs, as the job has it: OpenSearch (a writer
        of the domain; with basic auth, the password's secret), dead letters under the stack's prefix
        (SSE-KMS under the data key). `environment` with the variables that go with it."""
        search.add_writer(role)
        if search.url is None:  # a created domain is SigV4 only
            allow_password_secret(role, config)
        state.allow_dead_letters(role)
        return dataclasses.replace(environment, dead_letter=state.dead_letter_url, opensearch_url=search.url)
