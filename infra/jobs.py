"""One Glue 5.1 job per table, the role they share, their code and configuration assets, their
security configuration and their log groups."""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import CustomResource, RemovalPolicy, Stack
from aws_cdk import aws_glue as glue
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_s3_assets as s3_assets
from constructs import Construct

from icecdc.aws.contract import (
    ARG_CONFIG,
    ARG_DEAD_LETTER,
    ARG_MODE,
    ARG_OPENSEARCH_URL,
    ARG_REGION,
    ARG_STATE_TABLE,
    ARG_TABLE,
    METRIC_NAMESPACE,
    JobMode,
    job_name,
)
from icecdc.config import Config
from icecdc.config.deploy import AwsConfig
from infra.bundling import JOB_INSTALLER_OPTIONS, Bundles
from infra.common import (
    allow,
    allow_metrics,
    allow_password_secret,
    audited,
    custom_resource,
    glue_log_groups,
    keep_logical_id,
    log_group,
    object_arn,
    read_catalog_and_warehouse,
    tag_protected_tables,
)
from infra.network import Network
from infra.state import State

GLUE_VERSION = "5.1"
DYNAMODB_ACTIONS = [  # what DynamoDbStateStore calls (transactions need the actions of their parts)
    "dynamodb:GetItem",
    "dynamodb:PutItem",
    "dynamodb:DeleteItem",
    "dynamodb:Query",
    "dynamodb:ConditionCheckItem",
    "dynamodb:BatchWriteItem",
]


@dataclass(frozen=True)
class Published:
    url: str  # s3://bucket/key
    arn: str
    published: CustomResource  # what creates it


class Jobs(Construct):
    """The Glue jobs, run as `role`, which the stack passes in because the OpenSearch side (a
    created domain's access, or an existing domain's rights) is granted to it as well.

    `opensearch_url`: the endpoint of a domain the stack created, which replaces the configured one;
    `network`: the VPC the jobs run in (through its Glue connection), if any."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: Config,
        bundles: Bundles,
        state: State,
        role: iam.Role,
        opensearch_url: str | None = None,
        network: Network | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        assert config.aws is not None
        aws = config.aws
        self.role = role
        script = s3_assets.Asset(self, "Script", path=str(bundles.glue_script))
        library = s3_assets.Asset(self, "Library", path=str(bundles.glue_library))
        config_asset = s3_assets.Asset(self, "Config", path=str(bundles.config))
        wheels = self._publish_wheels(aws, bundles, state)
        read_catalog_and_warehouse(role, config)
        tag_protected_tables(role, config)
        allow(
            role,
            iam.PolicyStatement(
                actions=["s3:GetObject"], resources=[*(object_arn(a) for a in (script, library, config_asset)), wheels.arn]
            ),
        )
        allow(role, iam.PolicyStatement(actions=DYNAMODB_ACTIONS, resources=[state.table.table_arn]))
        state.allow_dead_letters(role)
        allow(
            role,
            iam.PolicyStatement(
                actions=["logs:CreateLogGroup", "logs:CreateLogStream", "logs:PutLogEvents"], resources=[glue_log_groups(self)]
            ),
            wildcards="Glue's own log groups /aws-glue/*: Glue names the streams per run, and the group per security configuration",
        )
        allow_metrics(role, "Glue")
        allow_metrics(role, METRIC_NAMESPACE)  # the job's DeadLetters per table
        if opensearch_url is None:  # a created domain is SigV4 only
            allow_password_secret(role, config)
        self.security = self._security(state, aws.stack_name)
        # Glue 5 writes the driver's and executors' logs to <prefix>/output and <prefix>/error: the
        # stack creates both, with a retention and under the data key, instead of Glue's shared groups
        # /aws-glue/jobs/output and /error, which keep everything forever.
        self.log_prefix = f"/aws-glue/jobs/{aws.stack_name}"
        self.log_groups = [
            log_group(self, f"{kind.capitalize()}Logs", aws, name=f"{self.log_prefix}/{kind}", key=state.data_key)
            for kind in ("output", "error")
        ]
        arguments = {
            "--job-language": "python",
            "--enable-auto-scaling": "true",  # workers grow with the batch, up to glue_max_workers
            "--enable-metrics": "true",
            "--enable-observability-metrics": "true",
            "--enable-continuous-cloudwatch-log": "true",
            "--custom-logGroup-prefix": self.log_prefix,
            "--extra-py-files": library.s3_object_url,
            # The locked wheels, hashes checked by pip, and no package index: nothing is fetched at run time.
            "--additional-python-modules": wheels.url,
            "--python-modules-installer-option": JOB_INSTALLER_OPTIONS,
            f"--{ARG_CONFIG}": config_asset.s3_object_url,
            f"--{ARG_STATE_TABLE}": state.table.table_name,
            f"--{ARG_REGION}": Stack.of(self).region,
            f"--{ARG_DEAD_LETTER}": state.dead_letter_url,
        }
        if opensearch_url is not None:
            arguments[f"--{ARG_OPENSEARCH_URL}"] = opensearch_url
        connections = None
        if network is not None:
            network.allow_glue(role)
            connections = glue.CfnJob.ConnectionsListProperty(connections=[network.connection_name])
        self.jobs: list[glue.CfnJob] = []
        for position, table_config in enumerate(config.tables):
            table = table_config.name
            job = glue.CfnJob(
                self,
                f"Job{position}",
                name=job_name(aws.stack_name, table),
                description=f"icecdc: apply the changes of {table} to OpenSearch",
                role=role.role_arn,
                glue_version=GLUE_VERSION,
                command=glue.CfnJob.JobCommandProperty(name="glueetl", python_version="3", script_location=script.s3_object_url),
                default_arguments={**arguments, f"--{ARG_TABLE}": table},
                worker_type=aws.glue_worker_type,
                number_of_workers=aws.glue_max_workers,  # with auto scaling: the maximum
                # One run per table: a second start fails with ConcurrentRunsExceeded while the
                # running one drains the queue; other tables have their own jobs and never wait.
                execution_property=glue.CfnJob.ExecutionPropertyProperty(max_concurrent_runs=1),
                timeout=aws.glue_timeout_minutes,
                max_retries=0,  # the schedule re-plans and restarts; a retry would only race it
                # by Ref: the job then depends on the configuration (its name alone would let
                # CloudFormation create the job first, and a first run could start without it)
                security_configuration=self.security.ref,
                connections=connections,
            )
            keep_logical_id(job, f"Job{position}")
            job.node.add_dependency(*self.log_groups, wheels.published)  # a first run finds its logs and wheels
            if network is not None:
                job.node.add_dependency(network.connection)
            self.jobs.append(job)
            if audited(aws, table_config):
                self._audit_trigger(position, job, aws)

    def _audit_trigger(self, position: int, job: glue.CfnJob, aws: AwsConfig) -> None:
        """Glue's own scheduled trigger starts the table's job in audit mode (EventBridge has no Glue
        job target). A sync running then makes that day's audit fail to start (one run per table):
        the Drift alarm treats a missing point as no drift, and the next day audits again."""
        mode = JobMode.AUDIT_AND_REPAIR if aws.audit_repairs else JobMode.AUDIT
        glue.CfnTrigger(
            self,
            f"Audit{position}",
            type="SCHEDULED",
            schedule=aws.audit_schedule,
            start_on_creation=True,
            description=f"icecdc: audit the index of {job.name} against its table",
            actions=[glue.CfnTrigger.ActionProperty(job_name=job.ref, arguments={f"--{ARG_MODE}": str(mode)})],
        )

    def _publish_wheels(self, aws: AwsConfig, bundles: Bundles, state: State) -> Published:
        """The zip of wheels (infra.bundling) in a bucket of the stack under the name Glue requires.

        A CDK asset's key is its hash (`<hash>.zip`) and Glue installs a zip of wheels only if its name
        ends in `.gluewheels.zip`: a small custom resource copies the asset to `python/<name>` (S3's
        server-side copy; one object per lock, kept, since a run started before an update reads it)."""
        asset = s3_assets.Asset(self, "Wheels", path=str(bundles.glue_wheels))
        bucket = s3.Bucket(
            self,
            "Artifacts",
            encryption=s3.BucketEncryption.S3_MANAGED,  # code, not data
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            enforce_ssl=True,
            server_access_logs_bucket=state.access_logs,
            server_access_logs_prefix="artifacts/",
            removal_policy=RemovalPolicy.RETAIN,
        )
        key = f"python/{bundles.glue_wheels.name}"
        publisher = iam.Role(
            self,
            "Publisher",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description="icecdc: publishes the jobs' wheels",
        )
        allow(publisher, iam.PolicyStatement(actions=["s3:GetObject"], resources=[object_arn(asset)]))
        allow(publisher, iam.PolicyStatement(actions=["s3:PutObject"], resources=[bucket.arn_for_objects(key)]))
        published = custom_resource(
            self,
            "Published",
            aws=aws,
            code=bundles.custom_resources,
            handler="publish",
            role=publisher,
            resource_type="Custom::IcecdcPublish",
            properties={
                "SourceBucket": asset.s3_bucket_name,
                "SourceKey": asset.s3_object_key,
                "Bucket": bucket.bucket_name,
                "Key": key,
            },
            description="icecdc: copies the jobs' zip of wheels to the name Glue requires",
        )
        return Published(url=bucket.s3_url_for_object(key), arn=bucket.arn_for_objects(key), published=published)

    @property
    def names(self) -> list[str]:
        return [str(job.name) for job in self.jobs]

    def arns(self) -> list[str]:
        stack = Stack.of(self)
        return [stack.format_arn(service="glue", resource="job", resource_name=name) for name in self.names]

    def _security(self, state: State, stack_name: str) -> glue.CfnSecurityConfiguration:
        """The jobs' S3 output, CloudWatch logs and bookmarks under the data key."""
        key = state.data_key
        # Explicit actions (the L2 grant would add kms:ReEncrypt* and kms:GenerateDataKey*)
        allow(
            self.role, iam.PolicyStatement(actions=["kms:Encrypt", "kms:Decrypt", "kms:GenerateDataKey"], resources=[key.key_arn])
        )
        allow(
            self.role,
            iam.PolicyStatement(actions=["logs:AssociateKmsKey"], resources=[glue_log_groups(self)]),
            wildcards="Glue associates the data key with its log groups under /aws-glue/* (security configuration)",
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
        security = glue.CfnSecurityConfiguration(
            self, "Security", name=f"{stack_name}-jobs", encryption_configuration=configuration
        )
        keep_logical_id(security, "JobSecurity")
        return security
