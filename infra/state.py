"""What icecdc keeps: checkpoints and work items (DynamoDB), the data key, and the dead letters
(whole documents, so personal data) in a bucket under that key with a lifecycle."""

from __future__ import annotations

from aws_cdk import ArnFormat, Duration, RemovalPolicy, Stack
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from constructs import Construct

from icecdc.aws.contract import planner_log_group
from icecdc.config.deploy import AwsConfig
from icecdc.state.dynamodb import PARTITION_KEY, SORT_KEY, TTL_ATTRIBUTE
from infra.common import allow, glue_log_groups, keep_logical_id, suppress


class State(Construct):
    """The state table, the data key, the dead-letter bucket and its access-log bucket; all retained
    when the stack is deleted (a redeploy resumes from the checkpoints)."""

    def __init__(self, scope: Construct, construct_id: str, *, aws: AwsConfig) -> None:
        super().__init__(scope, construct_id)
        self.table = dynamodb.TableV2(
            self,
            "Table",
            table_name=f"{aws.stack_name}-state",
            partition_key=dynamodb.Attribute(name=PARTITION_KEY, type=dynamodb.AttributeType.STRING),
            sort_key=dynamodb.Attribute(name=SORT_KEY, type=dynamodb.AttributeType.STRING),
            billing=dynamodb.Billing.on_demand(),  # no cost while idle
            point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(point_in_time_recovery_enabled=True),
            encryption=dynamodb.TableEncryptionV2.aws_managed_key(),
            time_to_live_attribute=TTL_ATTRIBUTE,  # finished work items (see icecdc.state.dynamodb)
            removal_policy=RemovalPolicy.RETAIN,  # checkpoints outlive the stack: a redeploy resumes
        )
        keep_logical_id(self.table, "State1C20CC9A")
        self.stack_name = aws.stack_name
        self.data_key = self._data_key()
        self.access_logs, self.dead_letters = self._buckets(aws)
        self.dead_letter_prefix = aws.dead_letter_prefix
        # where the job and the applying planner put dead letters (`--icecdc_dead_letter`, ICECDC_DEAD_LETTER)
        self.dead_letter_url = self.dead_letters.s3_url_for_object(aws.dead_letter_prefix)

    def allow_dead_letters(self, role: iam.IRole) -> None:
        """`role` may keep dead letters: put new ones under the prefix, list the prefix and read
        them back (a pass counts a table's open letters and reads those of shared ids; the scheduled
        audit keeps its findings there), and decrypt them; nothing else of the bucket."""
        allow(
            role,
            iam.PolicyStatement(
                actions=["s3:PutObject", "s3:GetObject"],
                resources=[self.dead_letters.arn_for_objects(f"{self.dead_letter_prefix}*")],
            ),
            wildcards="dead letters are objects under the dead-letter prefix, named per run",
        )
        allow(
            role,
            iam.PolicyStatement(
                actions=["s3:ListBucket"],
                resources=[self.dead_letters.bucket_arn],
                conditions={"StringLike": {"s3:prefix": [f"{self.dead_letter_prefix}*"]}},
            ),
        )
        # the bucket's default encryption is the data key: reading needs Decrypt, writing GenerateDataKey
        allow(
            role,
            iam.PolicyStatement(
                actions=["kms:Decrypt", "kms:GenerateDataKey"],
                resources=[self.data_key.key_arn],
                conditions={"StringEquals": {"kms:ViaService": f"s3.{Stack.of(self).region}.amazonaws.com"}},
            ),
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
        keep_logical_id(key, "DataKey17AFBB84")
        # CloudWatch Logs encrypts the Glue jobs' log groups with it (Glue's security configuration),
        # and the planner's (its errors may quote sample documents)
        planner_logs = Stack.of(self).format_arn(
            service="logs",
            resource="log-group",
            resource_name=planner_log_group(self.stack_name),
            arn_format=ArnFormat.COLON_RESOURCE_NAME,
        )
        key.add_to_resource_policy(
            iam.PolicyStatement(
                actions=["kms:Encrypt*", "kms:Decrypt*", "kms:ReEncrypt*", "kms:GenerateDataKey*", "kms:Describe*"],
                principals=[iam.ServicePrincipal(f"logs.{Stack.of(self).region}.amazonaws.com")],
                resources=["*"],
                conditions={"ArnLike": {"kms:EncryptionContext:aws:logs:arn": [glue_log_groups(self), planner_logs]}},
            )
        )
        return key

    def _buckets(self, aws: AwsConfig) -> tuple[s3.Bucket, s3.Bucket]:
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
        keep_logical_id(access_logs, "AccessLogs8B620ECA")
        suppress(access_logs, "AwsSolutions-S1", "this is the access-log bucket; logging it to itself would loop")
        dead_letters = s3.Bucket(
            self,
            "DeadLetters",
            encryption=s3.BucketEncryption.KMS,
            encryption_key=self.data_key,
            bucket_key_enabled=True,
            lifecycle_rules=[s3.LifecycleRule(expiration=Duration.days(aws.dead_letter_retention_days))],
            server_access_logs_bucket=access_logs,
            server_access_logs_prefix="dead-letters/",
            **common,
        )
        keep_logical_id(dead_letters, "DeadLettersBBF8BAAB")
        return access_logs, dead_letters
