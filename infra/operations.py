"""What tells an operator something is wrong: the alarm topic, alarms on job runs, the planner,
lag and dead letters, and the lag dashboard."""

from __future__ import annotations

from aws_cdk import CfnResource, Duration, Stack
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as cloudwatch_actions
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from constructs import Construct

from icecdc.aws.contract import METRIC_NAMESPACE
from icecdc.config import Config
from infra.common import audited, keep_logical_id
from infra.jobs import Jobs
from infra.planner import Planner


class Operations(Construct):
    """`topic`: where every alarm goes (subscribed by `aws.alarm_email`)."""

    def __init__(self, scope: Construct, construct_id: str, *, config: Config, jobs: Jobs, planner: Planner) -> None:
        super().__init__(scope, construct_id)
        assert config.aws is not None
        aws = config.aws
        self.topic = self._topic(aws.alarm_email)
        action = cloudwatch_actions.SnsAction(self.topic)
        job_failed = events.Rule(
            self,
            "JobFailed",
            description="a run of an icecdc Glue job failed, timed out or errored",
            event_pattern=events.EventPattern(
                source=["aws.glue"],
                detail_type=["Glue Job State Change"],
                detail={"jobName": jobs.names, "state": ["FAILED", "TIMEOUT", "ERROR"]},
            ),
            targets=[targets.SnsTopic(self.topic)],
        )
        only_from(self.topic, job_failed.rule_arn)
        cloudwatch.Alarm(
            self,
            "PlannerErrors",
            metric=planner.function.metric_errors(period=Duration.minutes(5)),
            threshold=1,
            evaluation_periods=1,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
            alarm_description="the planner failed (bad event handling, a planning error, or no access)",
        ).add_alarm_action(action)
        # Tables the planner could not plan: a batch from the queue reports them to SQS (its messages
        # come again) and so succeeds as an invocation, which Errors above does not count.
        cloudwatch.Alarm(
            self,
            "PlanningErrors",
            metric=cloudwatch.Metric(
                namespace=METRIC_NAMESPACE, metric_name="PlanningErrors", statistic="Sum", period=Duration.minutes(5)
            ),
            threshold=1,
            evaluation_periods=1,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,  # published only when a table fails
            alarm_description="the planner could not plan a table (throttled, denied, a planning error); the logs name it",
        ).add_alarm_action(action)
        cloudwatch.Alarm(
            self,
            "PlannerFailed",
            metric=planner.failures.metric_approximate_number_of_messages_visible(period=Duration.minutes(5)),
            threshold=0,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
            evaluation_periods=1,
            alarm_description="planner events failed for good (5 deliveries, or 2 retries of a direct invocation): they are in the planner's Failures queue",
        ).add_alarm_action(action)
        names = [t.name for t in config.tables]
        for position, table in enumerate(config.tables):
            name = table.name
            # Seconds behind: the planner publishes it on every sweep, so an hour means the job keeps failing.
            cloudwatch.Alarm(
                self,
                f"Lag{position}",
                metric=_per_table("LagSeconds", name, "Maximum"),
                threshold=3600,
                evaluation_periods=3,
                treat_missing_data=cloudwatch.TreatMissingData.BREACHING,  # no metric: the planner stopped
                alarm_description=f"{name}: the index is more than an hour behind the table",
            ).add_alarm_action(action)
            # The Glue job publishes how many documents each run sent to the dead letters: any is worth a look.
            self._any_alarm(  # no run, no new dead letters
                f"DeadLetters{position}",
                _per_table("DeadLetters", name, "Sum", period=Duration.minutes(5)),
                f"{name}: OpenSearch refused documents for good; they are in the dead letters",
            ).add_alarm_action(action)
            if audited(aws, table):
                # The scheduled audit publishes the documents it found differing from the table.
                self._any_alarm(  # no audit ran that day: nothing found
                    f"Drift{position}",
                    _per_table("Drift", name, "Maximum", period=Duration.days(1)),
                    f"{name}: the scheduled audit found the index differing from the table",
                ).add_alarm_action(action)
        dashboard = cloudwatch.Dashboard(
            self,
            "Dashboard",
            dashboard_name=f"{aws.stack_name}-lag",
            widgets=[
                [
                    cloudwatch.GraphWidget(title="Seconds behind", left=_each_table("LagSeconds", names), width=12),
                    cloudwatch.GraphWidget(title="Snapshots behind", left=_each_table("LagSnapshots", names), width=12),
                ],
                [
                    cloudwatch.GraphWidget(title="Rows applied", left=_each_table("RowsApplied", names, "Sum"), width=8),
                    cloudwatch.GraphWidget(title="Files read", left=_each_table("FilesRead", names, "Sum"), width=8),
                    cloudwatch.GraphWidget(title="Dead letters", left=_each_table("DeadLetters", names, "Sum"), width=8),
                ],
                [
                    cloudwatch.GraphWidget(title="Drift (scheduled audits)", left=_each_table("Drift", names), width=12),
                    cloudwatch.GraphWidget(
                        title="Job runs failed",
                        # the failure rule's matches: one per failed, timed-out or errored run
                        left=[
                            cloudwatch.Metric(
                                namespace="AWS/Events",
                                metric_name="TriggeredRules",
                                dimensions_map={"RuleName": job_failed.rule_name},
                                statistic="Sum",
                                label="failed runs",
                            )
                        ],
                        width=12,
                    ),
                ],
                [
                    cloudwatch.GraphWidget(title="Pending work items", left=_each_table("PendingItems", names), width=12),
                    cloudwatch.GraphWidget(
                        title="Planner",
                        left=[
                            planner.function.metric_invocations(),
                            planner.function.metric_errors(),
                            cloudwatch.Metric(namespace=METRIC_NAMESPACE, metric_name="PlanningErrors", statistic="Sum"),
                        ],
                        right=[planner.function.metric_duration(), planner.buffer.metric_approximate_age_of_oldest_message()],
                        width=12,
                    ),
                ],
            ],
        )
        keep_logical_id(dashboard, "Dashboard9E4231ED")

    def _any_alarm(self, construct_id: str, metric: cloudwatch.IMetric, description: str) -> cloudwatch.Alarm:
        """An alarm on any value above 0 in a period; a period without the metric is no alarm."""
        return cloudwatch.Alarm(
            self,
            construct_id,
            metric=metric,
            threshold=0,
            evaluation_periods=1,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
            alarm_description=description,
        )

    def _topic(self, email: str | None) -> sns.Topic:
        # A key of our own: EventBridge and CloudWatch cannot publish to a topic under the AWS-managed SNS key.
        key = kms.Key(self, "AlarmKey", enable_key_rotation=True, description="icecdc alarm topic")
        keep_logical_id(key, "AlarmKeyE05DE300")
        for service in ("events.amazonaws.com", "cloudwatch.amazonaws.com"):
            key.add_to_resource_policy(
                iam.PolicyStatement(
                    actions=["kms:Decrypt", "kms:GenerateDataKey"], principals=[iam.ServicePrincipal(service)], resources=["*"]
                )
            )
        topic = sns.Topic(self, "Alarms", master_key=key, enforce_ssl=True, display_name="icecdc alarms")
        if email:
            topic.add_subscription(subscriptions.EmailSubscription(email))
        return topic


def _per_table(metric: str, table: str, statistic: str, period: Duration | None = None) -> cloudwatch.Metric:
    return cloudwatch.Metric(
        namespace=METRIC_NAMESPACE, metric_name=metric, dimensions_map={"Table": table}, statistic=statistic, period=period
    )


def _each_table(metric: str, names: list[str], statistic: str = "Maximum") -> list[cloudwatch.IMetric]:
    return [
        cloudwatch.Metric(
            namespace=METRIC_NAMESPACE, metric_name=metric, dimensions_map={"Table": n}, statistic=statistic, label=n
        )
        for n in names
    ]


def only_from(topic: sns.Topic, rule_arn: str) -> None:
    """EventBridge may publish to `topic` for `rule_arn` of this account only (the confused-deputy
    conditions): the SnsTopic target grants `events.amazonaws.com` without them."""
    policy = topic.node.find_child("Policy")
    assert isinstance(policy, sns.TopicPolicy)
    statements = Stack.of(topic).resolve(policy.document.to_json())["Statement"]
    events_principal = {"Service": "events.amazonaws.com"}
    [index] = [i for i, s in enumerate(statements) if s.get("Principal") == events_principal]
    resource = policy.node.default_child
    assert isinstance(resource, CfnResource)
    conditions = {
        "ArnEquals": {"aws:SourceArn": rule_arn},
        "StringEquals": {"aws:SourceAccount": Stack.of(topic).account},
    }
    resource.add_property_override(f"PolicyDocument.Statement.{index}.Condition", conditions)
