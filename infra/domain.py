"""The OpenSearch side: SigV4 rights on an existing domain, or a domain the stack creates."""

from __future__ import annotations

from aws_cdk import RemovalPolicy
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from aws_cdk import aws_opensearchservice as opensearch
from constructs import Construct

from icecdc.config import Config
from infra.common import allow, keep_logical_id, log_group, suppress

ON_INDEXES = "HTTP paths under the one domain (indexes, _bulk, _aliases): fine-grained access control narrows them"
ES_WRITE_ACTIONS = ["es:ESHttpGet", "es:ESHttpHead", "es:ESHttpPut", "es:ESHttpPost", "es:ESHttpDelete"]


class Search(Construct):
    """Where the jobs write. `url` is the endpoint the jobs must use instead of the configured one
    (a domain of this stack), or None; `writer` is the jobs' role, granted its rights here."""

    def __init__(self, scope: Construct, construct_id: str, *, config: Config, writer: iam.IRole) -> None:
        super().__init__(scope, construct_id)
        assert config.aws is not None
        aws = config.aws
        self.url: str | None = None
        self.domain: opensearch.Domain | None = None
        if not aws.create_domain:
            if aws.opensearch_domain_arn:
                allow(
                    writer,
                    iam.PolicyStatement(actions=ES_WRITE_ACTIONS, resources=[f"{aws.opensearch_domain_arn}/*"]),
                    wildcards=ON_INDEXES,
                )
            return
        domain_logs = log_group(self, "Logs", aws)
        keep_logical_id(domain_logs, "DomainLogsF512E5BA")
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
            fine_grained_access_control=opensearch.AdvancedSecurityOptions(master_user_arn=writer.role_arn),
            logging=opensearch.LoggingOptions(
                slow_search_log_enabled=True,
                slow_search_log_group=domain_logs,
                slow_index_log_enabled=True,
                slow_index_log_group=domain_logs,
                app_log_enabled=True,
                app_log_group=domain_logs,
            ),
            # CDK would write the log group's resource policy through a custom-resource Lambda with
            # logs:PutResourcePolicy on *; a native AWS::Logs::ResourcePolicy does it scoped.
            suppress_logs_resource_policy=True,
            removal_policy=RemovalPolicy.RETAIN,
        )
        keep_logical_id(domain, "Domain66AC69E0")
        logs.ResourcePolicy(
            self,
            "LogsPolicy",
            policy_statements=[
                iam.PolicyStatement(
                    principals=[iam.ServicePrincipal("es.amazonaws.com")],
                    actions=["logs:CreateLogStream", "logs:PutLogEvents"],
                    resources=[domain_logs.log_group_arn],
                )
            ],
        )
        # No domain access policy: CDK would apply one through a custom-resource Lambda; the job role's
        # identity policy below is enough within the account, and fine-grained access admits only it.
        allow(writer, iam.PolicyStatement(actions=ES_WRITE_ACTIONS, resources=[domain.domain_arn + "/*"]), wildcards=ON_INDEXES)
        for rule, reason in {
            "AwsSolutions-OS1": "a public endpoint so that Glue needs no VPC connection; every request is SigV4-signed and fine-grained access control admits only the job role",
            "AwsSolutions-OS5": "no resource policy on purpose (CDK would set one through a custom-resource Lambda): unsigned requests are anonymous, which fine-grained access control refuses; the job role is its only user",
            "AwsSolutions-OS3": "access is by IAM identity (SigV4), not by IP: Glue workers have no fixed addresses",
            "AwsSolutions-OS4": "dedicated master nodes are worth their cost above ~10 data nodes; set them up for large domains",
        }.items():
            suppress(domain, rule, reason)
        self.domain = domain
        self.url = "https://" + domain.domain_endpoint
