"""The icecdc stack: EventBridge → planner Lambda → DynamoDB work queue → one Glue 5.1 job per table → OpenSearch.

Everything is named from `aws.stack_name`, so the planner finds each table's job by name
(`icecdc.aws.job_name`). IAM is least privilege: listed actions only, resources scoped to the
configured tables, the warehouse buckets, the state table, the assets, the dead-letter prefix and
the domain; the few statements that need `Resource: *` are the APIs without resource-level
permissions, each narrowed by a condition and justified in `NAG_SUPPRESSIONS`.
"""

from __future__ import annotations

import json

from aws_cdk import ArnFormat, Duration, RemovalPolicy, Stack
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as cloudwatch_actions
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_glue as glue
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_destinations as lambda_destinations
from aws_cdk import aws_logs as logs
from aws_cdk import aws_opensearchservice as opensearch
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_s3_assets as s3_assets
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from aws_cdk import aws_sqs as sqs
from cdk_nag import NagPackSuppression, NagSuppressions
from constructs import Construct

from icecdc.aws import (
    ARG_CONFIG,
    ARG_DEAD_LETTER,
    ARG_OPENSEARCH_URL,
    ARG_REGION,
    ARG_STATE_TABLE,
    ARG_TABLE,
    GLUE_EVENT_SOURCE,
    GLUE_EVENT_TYPE,
    METRIC_NAMESPACE,
    job_name,
)
from icecdc.config import AwsConfig, Config
from icecdc.state.dynamodb import PARTITION_KEY, SORT_KEY, TTL_ATTRIBUTE
from infra.bundling import GLUE_PYTHON_MODULES, LAMBDA_CATALOG_PROPERTIES, Bundles

GLUE_VERSION = "5.1"
DYNAMODB_ACTIONS = [  # what DynamoDbStateStore calls (transactions need the actions of their parts)
    "dynamodb:GetItem",
    "dynamodb:PutItem",
    "dynamodb:DeleteItem",
    "dynamodb:Query",
    "dynamodb:ConditionCheckItem",
    "dynamodb:BatchWriteItem",
]
# The planner only reads state (the checkpoint; a count of pending items): the job plans and writes.
PLANNER_DYNAMODB_ACTIONS = ["dynamodb:GetItem", "dynamodb:Query"]
# Planner invocations at once: each is O(1) per table, so a burst of commit events queues briefly
# (EventBridge retries throttled invocations) instead of taking the account's Lambda concurrency.
PLANNER_CONCURRENCY = 2
GLUE_READ_ACTIONS = ["glue:GetTable", "glue:GetDatabase"]  # what pyiceberg's GlueCatalog.load_table calls
ES_WRITE_ACTIONS = ["es:ESHttpGet", "es:ESHttpHead", "es:ESHttpPut", "es:ESHttpPost", "es:ESHttpDelete"]


class IcecdcStack(Stack):
    def __init__(self, scope: Construct, construct_id: str, *, config: Config, bundles: Bundles, **kwargs: object) -> None:
        super().__init__(scope, construct_id, **kwargs)
        if config.aws is None:
            raise SystemExit("the configuration has no `aws:` section: the stack needs at least aws.warehouse_buckets")
        if config.catalog.properties.get("type") != "glue":
            raise SystemExit(
                f"the stack plans from the Glue Data Catalog: catalog.type must be 'glue', not {config.catalog.properties.get('type')!r}"
            )
        if config.opensearch.password is not None:
            raise SystemExit(
                "opensearch.password would be uploaded with the configuration asset: keep the password in AWS "
                "Secrets Manager and set opensearch.password_secret_arn"
            )
        aws = config.aws
        self.aws = aws
        self.config = config
        names = [t.name for t in config.tables]

        state = self._state_table(aws)
        data_key = self._data_key()
        logs_bucket, dead_letters = self._buckets(aws, data_key)
        alarm_topic = self._alarm_topic(aws)

        # --- the Glue job, one per table ---------------------------------------------------------
        job_role = iam.Role(self, "JobRole", assumed_by=iam.ServicePrincipal("glue.amazonaws.com"), description="icecdc Glue job")
        script = s3_assets.Asset(self, "JobScript", path=str(bundles.glue_script))
        library = s3_assets.Asset(self, "JobLibrary", path=str(bundles.glue_library))
        config_asset = s3_assets.Asset(self, "Config", path=str(bundles.config))
        self._read_catalog_and_warehouse(job_role, aws, names)
        self._tag_protected_tables(job_role, aws, config)
        job_role.add_to_policy(
            iam.PolicyStatement(
                actions=["s3:GetObject"], resources=[self._object_arn(a) for a in (script, library, config_asset)]
            )
        )
        job_role.add_to_policy(iam.PolicyStatement(actions=DYNAMODB_ACTIONS, resources=[state.table_arn]))
        job_role.add_to_policy(
            iam.PolicyStatement(actions=["s3:PutObject"], resources=[dead_letters.arn_for_objects(f"{aws.dead_letter_prefix}*")])
        )
        job_role.add_to_policy(
            iam.PolicyStatement(
                actions=["logs:CreateLogGroup", "logs:CreateLogStream", "logs:PutLogEvents"],
                resources=[self._glue_log_groups()],
            )
        )
        job_role.add_to_policy(_put_metrics_statement("Glue"))
        job_role.add_to_policy(_put_metrics_statement(METRIC_NAMESPACE))  # the job's DeadLetters per table

        opensearch_url = self._opensearch(aws, job_role)
        if opensearch_url is None and config.opensearch.password_secret_arn:  # basic auth: that secret, nothing else
            job_role.add_to_policy(
                iam.PolicyStatement(actions=["secretsmanager:GetSecretValue"], resources=[config.opensearch.password_secret_arn])
            )
        arguments = {
            "--job-language": "python",
            "--enable-auto-scaling": "true",  # workers grow with the batch, up to glue_max_workers
            "--enable-metrics": "true",
            "--enable-observability-metrics": "true",
            "--enable-continuous-cloudwatch-log": "true",
            "--extra-py-files": library.s3_object_url,
            "--additional-python-modules": ",".join(GLUE_PYTHON_MODULES),
            f"--{ARG_CONFIG}": config_asset.s3_object_url,
            f"--{ARG_STATE_TABLE}": state.table_name,
            f"--{ARG_REGION}": self.region,
            f"--{ARG_DEAD_LETTER}": dead_letters.s3_url_for_object(aws.dead_letter_prefix),
        }
        if opensearch_url is not None:
            arguments[f"--{ARG_OPENSEARCH_URL}"] = opensearch_url
        security = self._glue_security(aws, data_key, job_role)
        jobs = []
        for position, name in enumerate(names):
            job = glue.CfnJob(
                self,
                f"Job{position}",
                name=job_name(aws.stack_name, name),
                description=f"icecdc: apply the changes of {name} to OpenSearch",
                role=job_role.role_arn,
                glue_version=GLUE_VERSION,
                command=glue.CfnJob.JobCommandProperty(name="glueetl", python_version="3", script_location=script.s3_object_url),
                default_arguments={**arguments, f"--{ARG_TABLE}": name},
                worker_type=aws.glue_worker_type,
                number_of_workers=aws.glue_max_workers,  # with auto scaling: the maximum
                # One run per table: a second start fails with ConcurrentRunsExceeded while the
                # running one drains the queue; other tables have their own jobs and never wait.
                execution_property=glue.CfnJob.ExecutionPropertyProperty(max_concurrent_runs=1),
                timeout=aws.glue_timeout_minutes,
                max_retries=0,  # the schedule re-plans and restarts; a retry would only race it
                security_configuration=security.name,
            )
            jobs.append(job)

        # --- the planner Lambda ----------------------------------------------------------------
        planner_logs = logs.LogGroup(
            self, "PlannerLogs", retention=logs.RetentionDays.ONE_MONTH, removal_policy=RemovalPolicy.DESTROY
        )
        planner_role = iam.Role(
            self, "PlannerRole", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"), description="icecdc planner"
        )
        planner_role.add_to_policy(
            iam.PolicyStatement(actions=["logs:CreateLogStream", "logs:PutLogEvents"], resources=[planner_logs.log_group_arn])
        )
        self._read_catalog_and_warehouse(planner_role, aws, names)
        self._tag_protected_tables(planner_role, aws, config)
        planner_role.add_to_policy(iam.PolicyStatement(actions=PLANNER_DYNAMODB_ACTIONS, resources=[state.table_arn]))
        planner_role.add_to_policy(
            iam.PolicyStatement(
                actions=["glue:StartJobRun"],
                resources=[self.format_arn(service="glue", resource="job", resource_name=job.name) for job in jobs],
            )
        )
        planner_role.add_to_policy(_put_metrics_statement(METRIC_NAMESPACE))
        layer = lambda_.LayerVersion(
            self,
            "PlannerDependencies",
            code=lambda_.Code.from_asset(str(bundles.lambda_layer)),
            compatible_runtimes=[lambda_.Runtime.PYTHON_3_11],
            compatible_architectures=[lambda_.Architecture.X86_64],
            description="pyiceberg (glue, s3fs) and pyyaml, manylinux wheels",
        )
        # Invocations that failed after Lambda's own retries (EventBridge invokes asynchronously) land
        # here, with the event, instead of being dropped; an alarm says so.
        failures = sqs.Queue(
            self,
            "PlannerFailures",
            encryption=sqs.QueueEncryption.KMS_MANAGED,
            enforce_ssl=True,
            retention_period=Duration.days(14),
        )
        NagSuppressions.add_resource_suppressions(
            failures, [NagPackSuppression(id="AwsSolutions-SQS3", reason="this queue is the planner's failure destination")]
        )
        planner = lambda_.Function(
            self,
            "Planner",
            runtime=lambda_.Runtime.PYTHON_3_11,
            architecture=lambda_.Architecture.X86_64,
            handler="handler.handler",
            code=lambda_.Code.from_asset(str(bundles.lambda_code)),
            layers=[layer],
            role=planner_role,
            log_group=planner_logs,
            memory_size=1024,
            timeout=Duration.minutes(5),
            reserved_concurrent_executions=PLANNER_CONCURRENCY,
            retry_attempts=2,
            on_failure=lambda_destinations.SqsDestination(failures),
            environment={
                "ICECDC_CONFIG": "icecdc.yaml",
                "ICECDC_STATE_TABLE": state.table_name,
                "ICECDC_STACK_NAME": aws.stack_name,
                "ICECDC_CATALOG_PROPERTIES": json.dumps(LAMBDA_CATALOG_PROPERTIES, sort_keys=True),
            },
            description="icecdc planner: Glue table change or schedule → has the table work? → its Glue job",
        )
        planner.node.add_dependency(planner_role)
        cloudwatch.Alarm(
            self,
            "PlannerFailed",
            metric=failures.metric_approximate_number_of_messages_visible(period=Duration.minutes(5)),
            threshold=0,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
            evaluation_periods=1,
            alarm_description="planner invocations failed after retries: their events are in the PlannerFailures queue",
        ).add_alarm_action(cloudwatch_actions.SnsAction(alarm_topic))

        # --- triggers ----------------------------------------------------------------------------
        databases = sorted({n.split(".", 1)[0] for n in names})
        tables = sorted({n.split(".", 1)[1] for n in names})
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
            targets=[targets.LambdaFunction(planner, retry_attempts=2, max_event_age=Duration.hours(1))],
        )
        events.Rule(
            self,
            "Sweep",
            description="Glue's events are best-effort: plan every table on a schedule too",
            schedule=events.Schedule.rate(Duration.minutes(aws.schedule_minutes)),
            targets=[targets.LambdaFunction(planner, retry_attempts=0)],  # the next sweep is the retry
        )

        # --- operations --------------------------------------------------------------------------
        self._job_failures(aws, jobs, alarm_topic)
        alarm_action = cloudwatch_actions.SnsAction(alarm_topic)
        planner_errors = cloudwatch.Alarm(
            self,
            "PlannerErrors",
            metric=planner.metric_errors(period=Duration.minutes(5)),
            threshold=1,
            evaluation_periods=1,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
            alarm_description="the planner failed (bad event handling, a planning error, or no access)",
        )
        planner_errors.add_alarm_action(alarm_action)
        self._dashboard(names, planner, alarm_action)
        self._suppressions(logs_bucket, job_role, planner_role, planner)

    # -----------------------------------------------------------------------------------------------
    def _state_table(self, aws: AwsConfig) -> dynamodb.TableV2:
        return dynamodb.TableV2(
            self,
            "State",
            table_name=f"{aws.stack_name}-state",
            partition_key=dynamodb.Attribute(name=PARTITION_KEY, type=dynamodb.AttributeType.STRING),
            sort_key=dynamodb.Attribute(name=SORT_KEY, type=dynamodb.AttributeType.STRING),
            billing=dynamodb.Billing.on_demand(),  # no cost while idle
            point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(point_in_time_recovery_enabled=True),
            encryption=dynamodb.TableEncryptionV2.aws_managed_key(),
            time_to_live_attribute=TTL_ATTRIBUTE,  # finished work items (see icecdc.state.dynamodb)
            removal_policy=RemovalPolicy.RETAIN,  # checkpoints outlive the stack: a redeploy resumes
        )

    def _glue_log_groups(self) -> str:
        """Glue's own log groups, where the jobs log (and the data key may encrypt)."""
        return self.format_arn(
            service="logs", resource="log-group", resource_name="/aws-glue/*", arn_format=ArnFormat.COLON_RESOURCE_NAME
        )

    def _data_key(self) -> kms.Key:
        """The customer-managed key of what holds row data or job output: dead letters (whole
        documents), and the Glue jobs' S3 output, CloudWatch logs and bookmarks."""
        key = kms.Key(
            self,
            "DataKey",
            enable_key_rotation=True,
            removal_policy=RemovalPolicy.RETAIN,
            description="icecdc dead letters and Glue output",
        )
        # CloudWatch Logs encrypts the Glue jobs' log groups with it (Glue's security configuration)
        key.add_to_resource_policy(
            iam.PolicyStatement(
                actions=["kms:Encrypt*", "kms:Decrypt*", "kms:ReEncrypt*", "kms:GenerateDataKey*", "kms:Describe*"],
                principals=[iam.ServicePrincipal(f"logs.{self.region}.amazonaws.com")],
                resources=["*"],
                conditions={"ArnLike": {"kms:EncryptionContext:aws:logs:arn": self._glue_log_groups()}},
            )
        )
        return key

    def _glue_security(self, aws: AwsConfig, key: kms.Key, job_role: iam.Role) -> glue.CfnSecurityConfiguration:
        """The jobs' S3 output, CloudWatch logs and bookmarks under the data key."""
        # Explicit actions (the L2 grant would add kms:ReEncrypt* and kms:GenerateDataKey*)
        job_role.add_to_policy(
            iam.PolicyStatement(actions=["kms:Encrypt", "kms:Decrypt", "kms:GenerateDataKey"], resources=[key.key_arn])
        )
        job_role.add_to_policy(
            iam.PolicyStatement(
                actions=["logs:AssociateKmsKey"],
                resources=[self._glue_log_groups()],
            )
        )
        configuration = glue.CfnSecurityConfiguration.EncryptionConfigurationProperty(
            s3_encryptions=[
                glue.CfnSecurityConfiguration.S3EncryptionProperty(s3_encryption_mode="SSE-KMS", kms_key_arn=key.key_arn)
            ],
            cloud_watch_encryption=glue.CfnSecurityConfiguration.CloudWatchEncryptionProperty(
                cloud_watch_encryption_mode="SSE-KMS", kms_key_arn=key.key_arn
            ),
            job_bookmarks_encryption=glue.CfnSecurityConfiguration.JobBookmarksEncryptionProperty(
                job_bookmarks_encryption_mode="CSE-KMS", kms_key_arn=key.key_arn
            ),
        )
        return glue.CfnSecurityConfiguration(
            self, "JobSecurity", name=f"{aws.stack_name}-jobs", encryption_configuration=configuration
        )

    def _buckets(self, aws: AwsConfig, key: kms.Key) -> tuple[s3.Bucket, s3.Bucket]:
        common = {
            "block_public_access": s3.BlockPublicAccess.BLOCK_ALL,
            "enforce_ssl": True,
            "removal_policy": RemovalPolicy.RETAIN,
        }
        access_logs = s3.Bucket(
            self,
            "AccessLogs",
            encryption=s3.BucketEncryption.S3_MANAGED,  # S3 server access logging cannot write under a KMS key
            lifecycle_rules=[s3.LifecycleRule(expiration=Duration.days(90))],
            **common,
        )
        dead_letters = s3.Bucket(
            self,
            "DeadLetters",
            encryption=s3.BucketEncryption.KMS,
            encryption_key=key,
            bucket_key_enabled=True,
            lifecycle_rules=[s3.LifecycleRule(expiration=Duration.days(aws.dead_letter_retention_days))],
            server_access_logs_bucket=access_logs,
            server_access_logs_prefix="dead-letters/",
            **common,
        )
        return access_logs, dead_letters

    def _alarm_topic(self, aws: AwsConfig) -> sns.Topic:
        # A key of our own: EventBridge and CloudWatch cannot publish to a topic under the AWS-managed SNS key.
        key = kms.Key(self, "AlarmKey", enable_key_rotation=True, description="icecdc alarm topic")
        for service in ("events.amazonaws.com", "cloudwatch.amazonaws.com"):
            key.add_to_resource_policy(
                iam.PolicyStatement(
                    actions=["kms:Decrypt", "kms:GenerateDataKey"], principals=[iam.ServicePrincipal(service)], resources=["*"]
                )
            )
        topic = sns.Topic(self, "Alarms", master_key=key, enforce_ssl=True, display_name="icecdc alarms")
        if aws.alarm_email:
            topic.add_subscription(subscriptions.EmailSubscription(aws.alarm_email))
        return topic

    def _read_catalog_and_warehouse(self, role: iam.Role, aws: AwsConfig, names: list[str]) -> None:
        resources = [self.format_arn(service="glue", resource="catalog")]
        for name in names:
            database, table = name.split(".", 1)
            resources.append(self.format_arn(service="glue", resource="database", resource_name=database))
            resources.append(self.format_arn(service="glue", resource="table", resource_name=f"{database}/{table}"))
        role.add_to_policy(iam.PolicyStatement(actions=GLUE_READ_ACTIONS, resources=sorted(set(resources))))
        role.add_to_policy(
            iam.PolicyStatement(
                actions=["s3:GetObject"], resources=[f"arn:{self.partition}:s3:::{b}/*" for b in aws.warehouse_buckets]
            )
        )

    def _tag_protected_tables(self, role: iam.Role, aws: AwsConfig, config: Config) -> None:
        """`protect_checkpoint` tables: icecdc commits tags to their metadata (icecdc.protection),
        so the role may update those tables, and write metadata files (never data) in the warehouse."""
        protected = [t.name.split(".", 1) for t in config.tables if t.protect_checkpoint]
        if not protected:
            return
        resources = [self.format_arn(service="glue", resource="catalog")]
        for database, table in protected:
            resources.append(self.format_arn(service="glue", resource="database", resource_name=database))
            resources.append(self.format_arn(service="glue", resource="table", resource_name=f"{database}/{table}"))
        role.add_to_policy(iam.PolicyStatement(actions=["glue:UpdateTable"], resources=sorted(set(resources))))
        role.add_to_policy(
            iam.PolicyStatement(
                actions=["s3:PutObject"], resources=[f"arn:{self.partition}:s3:::{b}/*/metadata/*" for b in aws.warehouse_buckets]
            )
        )

    def _object_arn(self, asset: s3_assets.Asset) -> str:
        return f"arn:{self.partition}:s3:::{asset.s3_bucket_name}/{asset.s3_object_key}"

    def _opensearch(self, aws: AwsConfig, job_role: iam.Role) -> str | None:
        """The endpoint the job must use instead of the configured one (a domain of this stack), or None."""
        if not aws.create_domain:
            if aws.opensearch_domain_arn:
                job_role.add_to_policy(
                    iam.PolicyStatement(actions=ES_WRITE_ACTIONS, resources=[f"{aws.opensearch_domain_arn}/*"])
                )
            return None
        slow_logs = logs.LogGroup(
            self, "DomainLogs", retention=logs.RetentionDays.ONE_MONTH, removal_policy=RemovalPolicy.DESTROY
        )
        domain = opensearch.Domain(
            self,
            "Domain",
            version=opensearch.EngineVersion.OPENSEARCH_2_19,
            capacity=opensearch.CapacityConfig(
                data_nodes=aws.domain_instance_count,
                data_node_instance_type=aws.domain_instance_type,
                multi_az_with_standby_enabled=False,
            ),
            ebs=opensearch.EbsOptions(volume_size=aws.domain_volume_gb, volume_type=ec2.EbsDeviceVolumeType.GP3),
            zone_awareness=opensearch.ZoneAwarenessConfig(enabled=aws.domain_instance_count > 1),
            enforce_https=True,
            node_to_node_encryption=True,
            encryption_at_rest=opensearch.EncryptionAtRestOptions(enabled=True),
            # Fine-grained access control with the job role as master user: the job is the only writer.
            fine_grained_access_control=opensearch.AdvancedSecurityOptions(master_user_arn=job_role.role_arn),
            logging=opensearch.LoggingOptions(
                slow_search_log_enabled=True,
                slow_search_log_group=slow_logs,
                slow_index_log_enabled=True,
                slow_index_log_group=slow_logs,
                app_log_enabled=True,
                app_log_group=slow_logs,
            ),
            # CDK would write the log group's resource policy through a custom-resource Lambda with
            # logs:PutResourcePolicy on *; a native AWS::Logs::ResourcePolicy does it scoped.
            suppress_logs_resource_policy=True,
            removal_policy=RemovalPolicy.RETAIN,
        )
        logs.ResourcePolicy(
            self,
            "DomainLogsPolicy",
            policy_statements=[
                iam.PolicyStatement(
                    principals=[iam.ServicePrincipal("es.amazonaws.com")],
                    actions=["logs:CreateLogStream", "logs:PutLogEvents"],
                    resources=[slow_logs.log_group_arn],
                )
            ],
        )
        # No domain access policy: CDK would apply one through a custom-resource Lambda; the job role's
        # identity policy below is enough within the account, and fine-grained access admits only it.
        job_role.add_to_policy(iam.PolicyStatement(actions=ES_WRITE_ACTIONS, resources=[domain.domain_arn + "/*"]))
        self.domain = domain
        return "https://" + domain.domain_endpoint

    def _job_failures(self, aws: AwsConfig, jobs: list[glue.CfnJob], topic: sns.Topic) -> None:
        events.Rule(
            self,
            "JobFailed",
            description="a run of an icecdc Glue job failed, timed out or errored",
            event_pattern=events.EventPattern(
                source=["aws.glue"],
                detail_type=["Glue Job State Change"],
                detail={"jobName": [job.name for job in jobs], "state": ["FAILED", "TIMEOUT", "ERROR"]},
            ),
            targets=[targets.SnsTopic(topic)],
        )

    def _dashboard(self, names: list[str], planner: lambda_.Function, alarm_action: cloudwatch.IAlarmAction) -> None:
        def per_table(metric: str, statistic: str) -> list[cloudwatch.IMetric]:
            return [
                cloudwatch.Metric(
                    namespace=METRIC_NAMESPACE, metric_name=metric, dimensions_map={"Table": n}, statistic=statistic, label=n
                )
                for n in names
            ]

        for position, name in enumerate(names):
            # Seconds behind: the planner publishes it on every sweep, so an hour means the job keeps failing.
            cloudwatch.Alarm(
                self,
                f"Lag{position}",
                metric=cloudwatch.Metric(
                    namespace=METRIC_NAMESPACE, metric_name="LagSeconds", dimensions_map={"Table": name}, statistic="Maximum"
                ),
                threshold=3600,
                evaluation_periods=3,
                treat_missing_data=cloudwatch.TreatMissingData.BREACHING,  # no metric: the planner stopped
                alarm_description=f"{name}: the index is more than an hour behind the table",
            ).add_alarm_action(alarm_action)
            # The Glue job publishes how many documents each run sent to the dead letters: any is worth a look.
            cloudwatch.Alarm(
                self,
                f"DeadLetters{position}",
                metric=cloudwatch.Metric(
                    namespace=METRIC_NAMESPACE,
                    metric_name="DeadLetters",
                    dimensions_map={"Table": name},
                    statistic="Sum",
                    period=Duration.minutes(5),
                ),
                threshold=0,
                evaluation_periods=1,
                comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
                treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,  # no run, no new dead letters
                alarm_description=f"{name}: OpenSearch refused documents for good; they are in the dead letters",
            ).add_alarm_action(alarm_action)
        cloudwatch.Dashboard(
            self,
            "Dashboard",
            dashboard_name=f"{self.aws.stack_name}-lag",
            widgets=[
                [
                    cloudwatch.GraphWidget(title="Seconds behind", left=per_table("LagSeconds", "Maximum"), width=12),
                    cloudwatch.GraphWidget(title="Snapshots behind", left=per_table("LagSnapshots", "Maximum"), width=12),
                ],
                [
                    cloudwatch.GraphWidget(title="Pending work items", left=per_table("PendingItems", "Maximum"), width=12),
                    cloudwatch.GraphWidget(
                        title="Planner",
                        left=[planner.metric_invocations(), planner.metric_errors()],
                        right=[planner.metric_duration()],
                        width=12,
                    ),
                ],
            ],
        )

    def _suppressions(
        self, logs_bucket: s3.Bucket, job_role: iam.Role, planner_role: iam.Role, planner: lambda_.Function
    ) -> None:
        """cdk-nag findings accepted on purpose, each with its reason."""
        NagSuppressions.add_resource_suppressions(
            logs_bucket,
            [NagPackSuppression(id="AwsSolutions-S1", reason="this is the access-log bucket; logging it to itself would loop")],
        )
        wildcards = NagPackSuppression(
            id="AwsSolutions-IAM5",
            reason=(
                "resource wildcards only where the resource cannot be named at synth time, never in actions: objects "
                "under the warehouse buckets (table files), objects under the dead-letter prefix, Glue's own log "
                "groups /aws-glue/*, index paths under the domain, and cloudwatch:PutMetricData, which has no "
                "resource-level permissions and is limited to one namespace by condition"
            ),
        )
        NagSuppressions.add_resource_suppressions(job_role, [wildcards], apply_to_children=True)
        NagSuppressions.add_resource_suppressions(planner_role, [wildcards], apply_to_children=True)
        NagSuppressions.add_resource_suppressions(
            planner,
            [
                NagPackSuppression(
                    id="AwsSolutions-L1",
                    reason="Python 3.11 on purpose: the same interpreter as Glue 5.1, which runs the same icecdc library",
                )
            ],
        )
        if getattr(self, "domain", None) is not None:
            NagSuppressions.add_resource_suppressions(
                self.domain,
                [
                    NagPackSuppression(
                        id="AwsSolutions-OS1",
                        reason="a public endpoint so that Glue needs no VPC connection; every request is SigV4-signed and fine-grained access control admits only the job role",
                    ),
                    NagPackSuppression(
                        id="AwsSolutions-OS5",
                        reason="no resource policy on purpose (CDK would set one through a custom-resource Lambda): unsigned requests are anonymous, which fine-grained access control refuses; the job role is its only user",
                    ),
                    NagPackSuppression(
                        id="AwsSolutions-OS3",
                        reason="access is by IAM identity (SigV4), not by IP: Glue workers have no fixed addresses",
                    ),
                    NagPackSuppression(
                        id="AwsSolutions-OS4",
                        reason="dedicated master nodes are worth their cost above ~10 data nodes; set them up for large domains",
                    ),
                ],
            )


def _put_metrics_statement(namespace: str) -> iam.PolicyStatement:
    return iam.PolicyStatement(
        actions=["cloudwatch:PutMetricData"],
        resources=["*"],  # PutMetricData has no resource-level permissions
        conditions={"StringEquals": {"cloudwatch:namespace": namespace}},
    )
