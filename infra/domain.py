"""The OpenSearch side: SigV4 rights on an existing domain, or a domain the stack creates.

A created domain has fine-grained access control with three principals:
- its master user, the stack's `Provisioner` role: only the custom resource below runs as it, at
  deploy time, to map the two others through the security plugin's REST API;
- the configured admin (`aws.domain_admin_arn`), mapped to `all_access` and `security_manager`;
- the writers: the jobs' role and, when it applies small batches itself (`aws.planner_applies`),
  the planner's, mapped to one role that may write only the configured indexes, their generations
  (`<index>-<n>`) and aliases (`<index>`), and read the cluster's state (see `writer_role`).
Their IAM rights follow the same lines: PUT and DELETE only on those indexes' paths.
"""

from __future__ import annotations

import json
from typing import Any

import jsii
from aws_cdk import CustomResource, IStableListProducer, Lazy, RemovalPolicy, Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from aws_cdk import aws_opensearchservice as opensearch
from constructs import Construct

from icecdc.config import Config
from icecdc.config.deploy import AwsConfig
from infra.bundling import Bundles
from infra.common import allow, custom_resource, keep_logical_id, log_group, suppress
from infra.network import Network

ON_INDEXES = "HTTP paths under the one domain (indexes, _bulk, _aliases): fine-grained access control narrows them"
# The writers' rights on a domain: reads anywhere (GET / and cluster settings, alias lookups);
# PUT, POST and DELETE on the configured indexes' paths; POST on the few cluster APIs icecdc calls
# (_bulk, the _aliases swap, _mget, scroll pages), DELETE of a scroll.
ES_READ_ACTIONS = ["es:ESHttpGet", "es:ESHttpHead"]
ES_INDEX_ACTIONS = ["es:ESHttpPut", "es:ESHttpPost", "es:ESHttpDelete"]
ES_WRITE_APIS = ["_bulk", "_aliases", "_mget", "_search/scroll"]
# The security plugin's REST API, all the provisioner calls.
ES_SECURITY_ACTIONS = ["es:ESHttpGet", "es:ESHttpPut", "es:ESHttpDelete"]
# How long a created domain waits after its log groups' resource policy is created (see Search._domain):
# a minute, against the few seconds of delay that were enough in cloudformation-coverage-roadmap#1769;
# nothing next to the 15-30 minutes a domain takes to create.
LOGS_POLICY_SETTLE_SECONDS = 60
# OpenSearch's service-linked role (it manages a VPC domain's network interfaces), by its fixed name.
OPENSEARCH_SERVICE = "opensearchservice.amazonaws.com"
OPENSEARCH_LINKED_ROLE = "AWSServiceRoleForAmazonOpenSearchService"


def writer_role(config: Config) -> dict[str, Any]:
    """The OpenSearch role of the jobs: the configured indexes as icecdc names them (icecdc.destination.index:
    the alias `<index>`, its generations `<index>-<n>`), what a sync does to them (documents, create,
    mappings, settings, alias swap, delete of an old generation), and the cluster's state it reads
    (GET /, cluster settings for write blocks, templates, scroll; the ingest pipelines an index
    writes through, which a sync checks exist)."""
    patterns = sorted({pattern for index in config.index_names for pattern in (index, f"{index}-*")})
    pipelines = any(configured.config.pipeline for table in config.tables for configured in table.each_index())
    return {
        "description": "icecdc: the Glue jobs write the configured indexes, their generations and aliases",
        "cluster_permissions": [
            "cluster_monitor",
            "cluster_composite_ops",
            "indices:admin/template/get",
            "indices:admin/index_template/get",
            *(["cluster:admin/ingest/pipeline/get"] if pipelines else []),
        ],
        "index_permissions": [{"index_patterns": patterns, "allowed_actions": ["crud", "manage"]}],
    }


@jsii.implements(IStableListProducer)
class Writers:
    """The writers' role ARNs, read when the template is synthesized (after every writer was added)."""

    def __init__(self, roles: list[iam.IRole]) -> None:
        self.roles = roles

    def produce(self) -> list[str]:
        return [role.role_arn for role in self.roles]


def availability_zones(aws: AwsConfig) -> int:
    """The zones a created domain spans: 2 or 3 when its nodes divide evenly among them (and, in a
    VPC, there is a subnet for each), else 1."""
    subnets = len(aws.vpc.subnets) if aws.vpc else 3
    return next((z for z in (3, 2) if z <= subnets and aws.domain_instance_count % z == 0), 1)


class Search(Construct):
    """Where the jobs write. `url` is the endpoint the jobs must use instead of the configured one
    (a domain of this stack), or None; `writer` is the jobs' role, granted its rights here, and
    `add_writer` grants the same to another role (the planner's, when it applies batches)."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: Config,
        bundles: Bundles,
        writer: iam.IRole,
        network: Network | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        assert config.aws is not None
        aws = config.aws
        self.config = config
        self.url: str | None = None
        self.domain: opensearch.Domain | None = None
        self.security_group: ec2.SecurityGroup | None = None
        self.writers: list[iam.IRole] = []
        self.access: CustomResource | None = None  # the created domain's roles and mappings
        if not aws.create_domain:
            self.add_writer(writer)
            return
        provisioner = iam.Role(
            self,
            "Provisioner",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description="icecdc: the created domain's master user; its Lambda maps roles at deploy time",
        )
        self.domain = self._domain(aws, bundles, provisioner, network)
        self.url = "https://" + self.domain.domain_endpoint
        self.add_writer(writer)
        self.access = self._access(config, bundles, provisioner, writer, network)

    def add_writer(self, role: iam.IRole) -> None:
        """`role` may write the configured indexes: its IAM rights on the domain and, on a domain
        the stack created, the mapping to `<stack>-writer` (the custom resource maps every writer)."""
        self.writers.append(role)
        aws = self.config.aws
        assert aws is not None
        # an existing domain's own access control maps the roles; its ARN scopes their IAM rights
        domain_arn = self.domain.domain_arn if self.domain is not None else aws.opensearch_domain_arn
        if domain_arn is None:
            return
        allow(role, iam.PolicyStatement(actions=ES_READ_ACTIONS, resources=[f"{domain_arn}/*"]), wildcards=ON_INDEXES)
        index_paths = sorted({f"{domain_arn}/{p}" for i in self.config.index_names for p in (i, f"{i}/*", f"{i}-*")})
        allow(
            role,
            iam.PolicyStatement(actions=ES_INDEX_ACTIONS, resources=index_paths),
            wildcards="the configured indexes' paths: their generations <index>-<n> and sub-resources (_mapping, _settings, _alias)",
        )
        # the cluster's write APIs icecdc calls, and only those: documents, the alias swap, a scan
        allow(role, iam.PolicyStatement(actions=["es:ESHttpPost"], resources=[f"{domain_arn}/{a}" for a in ES_WRITE_APIS]))
        allow(  # helpers.scan clears its scroll when a resync's cleanup is done
            role, iam.PolicyStatement(actions=["es:ESHttpDelete"], resources=[f"{domain_arn}/_search/scroll"])
        )

    def admit(self, group: ec2.ISecurityGroup, description: str) -> None:
        """HTTPS into a domain the stack created in the VPC from `group` (nothing to do otherwise)."""
        if self.security_group is not None:
            self.security_group.add_ingress_rule(group, ec2.Port.tcp(443), description)

    def _domain(self, aws: AwsConfig, bundles: Bundles, provisioner: iam.Role, network: Network | None) -> opensearch.Domain:
        domain_logs = log_group(self, "Logs", aws)
        keep_logical_id(domain_logs, "DomainLogsF512E5BA")
        audit_logs = log_group(self, "AuditLogs", aws)
        zones = availability_zones(aws)
        placement: dict[str, Any] = {}
        if network is not None:
            self.security_group = ec2.SecurityGroup(
                self, "SecurityGroup", vpc=network.vpc, description="icecdc OpenSearch domain", allow_all_outbound=False
            )
            placement = {
                "vpc": network.vpc,
                "vpc_subnets": [ec2.SubnetSelection(subnets=network.subnets[:zones])],
                "security_groups": [self.security_group],
            }
            self.admit(network.jobs, "the Glue jobs")
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
            zone_awareness=opensearch.ZoneAwarenessConfig(
                enabled=zones > 1, availability_zone_count=zones if zones > 1 else None
            ),
            enforce_https=True,
            tls_security_policy=opensearch.TLSSecurityPolicy.TLS_1_2,
            node_to_node_encryption=True,
            encryption_at_rest=opensearch.EncryptionAtRestOptions(enabled=True),
            fine_grained_access_control=opensearch.AdvancedSecurityOptions(master_user_arn=provisioner.role_arn),
            logging=opensearch.LoggingOptions(
                slow_search_log_enabled=True,
                slow_search_log_group=domain_logs,
                slow_index_log_enabled=True,
                slow_index_log_group=domain_logs,
                app_log_enabled=True,
                app_log_group=domain_logs,
                audit_log_enabled=True,
                audit_log_group=audit_logs,
            ),
            # CDK would write the log groups' resource policy through a custom-resource Lambda with
            # logs:PutResourcePolicy on *; a native AWS::Logs::ResourcePolicy does it scoped.
            suppress_logs_resource_policy=True,
            removal_policy=RemovalPolicy.RETAIN,
            **placement,
        )
        keep_logical_id(domain, "Domain66AC69E0")
        # One of the account's 10 CloudWatch Logs resource policies per region (a quota that cannot be
        # raised): a second stack in the region takes another (docs/deploy.md).
        policy = logs.ResourcePolicy(
            self,
            "LogsPolicy",
            policy_statements=[
                iam.PolicyStatement(
                    principals=[iam.ServicePrincipal("es.amazonaws.com")],
                    actions=["logs:CreateLogStream", "logs:PutLogEvents"],
                    resources=[domain_logs.log_group_arn, audit_logs.log_group_arn],
                )
            ],
        )
        # OpenSearch checks the log groups' policy when the domain is created and refuses it ("The
        # Resource Access Policy specified for the CloudWatch Logs log group ... does not grant
        # sufficient permissions") when it cannot see it yet: created at once (no dependency), or just
        # before (the policy propagates; AWS acknowledged it in cloudformation-coverage-roadmap#1769,
        # where only a delay made the domain create). So the domain waits for the policy and then
        # for LOGS_POLICY_SETTLE_SECONDS more (a custom resource that sleeps).
        cfn_policy = policy.node.default_child
        assert isinstance(cfn_policy, logs.CfnResourcePolicy)
        settled = custom_resource(
            self,
            "LogsPolicySettled",
            aws=aws,
            code=bundles.custom_resources,
            handler="settle",
            resource_type="Custom::IcecdcSettle",
            properties={"Seconds": LOGS_POLICY_SETTLE_SECONDS, "Policy": cfn_policy.ref},  # a new policy: wait again
            description="icecdc: gives the domain's CloudWatch Logs resource policy time to propagate",
        )
        domain.node.add_dependency(policy, settled)  # `settled` follows the policy: its Ref
        if network is not None:
            domain.node.add_dependency(self._service_linked_role(aws, bundles))
        reasons = {
            "AwsSolutions-OS3": "access is by IAM identity (SigV4) and fine-grained access control, not by IP: Glue workers have no fixed addresses",
            "AwsSolutions-OS4": "dedicated master nodes are worth their cost above ~10 data nodes; set them up for large domains",
            # An access policy naming the principals would have to name the domain's own ARN, a circular
            # reference CDK resolves with a custom-resource Lambda; identity policies need none.
            "AwsSolutions-OS5": "no resource policy: unsigned requests are denied, and only principals whose IAM policies grant es:ESHttp* on this domain (the jobs' role, the provisioner, the admin's own) reach fine-grained access control",
        }
        if network is None:
            reasons["AwsSolutions-OS1"] = (
                "aws.vpc is not set: a public endpoint, on purpose, so that Glue needs no VPC; every request is SigV4-signed "
                "and fine-grained access control admits only the mapped roles"
            )
        for rule, reason in reasons.items():
            suppress(domain, rule, reason)
        return domain

    def _service_linked_role(self, aws: AwsConfig, bundles: Bundles) -> CustomResource:
        """OpenSearch's service-linked role, created when the account lacks it: a domain is placed in a
        VPC only once it exists (it manages the domain's network interfaces). Not a resource of the
        template: AWS::IAM::ServiceLinkedRole fails in an account that has it already."""
        stack = Stack.of(self)
        arn = f"arn:{stack.partition}:iam::{stack.account}:role/aws-service-role/{OPENSEARCH_SERVICE}/{OPENSEARCH_LINKED_ROLE}"
        return custom_resource(
            self,
            "LinkedRole",
            aws=aws,
            code=bundles.custom_resources,
            handler="service_linked_role",
            grants=[
                iam.PolicyStatement(actions=["iam:GetRole"], resources=[arn]),
                iam.PolicyStatement(
                    actions=["iam:CreateServiceLinkedRole"],
                    resources=[arn],
                    conditions={"StringLike": {"iam:AWSServiceName": OPENSEARCH_SERVICE}},
                ),
            ],
            resource_type="Custom::IcecdcServiceLinkedRole",
            properties={"ServiceName": OPENSEARCH_SERVICE, "RoleName": OPENSEARCH_LINKED_ROLE},
            description="icecdc: creates OpenSearch's service-linked role when the account lacks it, before a domain in a VPC",
        )

    def _access(
        self, config: Config, bundles: Bundles, provisioner: iam.Role, writer: iam.IRole, network: Network | None
    ) -> CustomResource:
        """The roles and mappings, made at deploy time by the master user (see lambdas/custom_resources)."""
        assert config.aws is not None and self.domain is not None
        aws = config.aws
        allow(
            provisioner,
            iam.PolicyStatement(actions=ES_SECURITY_ACTIONS, resources=[f"{self.domain.domain_arn}/_plugins/_security/api/*"]),
            wildcards="the security plugin's REST API of this one domain (roles, role mappings, audit configuration)",
        )
        placement: dict[str, Any] = {}
        if network is not None:
            group = network.security_group("Provisioning", "icecdc domain provisioning Lambda")
            self.admit(group, "the provisioning Lambda")
            network.allow_lambda(provisioner)
            placement = {
                "vpc": network.vpc,
                "vpc_subnets": ec2.SubnetSelection(subnets=network.subnets),
                "security_groups": [group],
            }
        return custom_resource(
            self,
            "Access",
            aws=aws,
            code=bundles.custom_resources,
            handler="domain_access",
            role=provisioner,
            timeout_minutes=10,  # a new domain's security API may need minutes: the handler retries for 8 at most
            description="icecdc: roles and role mappings of the created domain (fine-grained access control)",
            resource_type="Custom::IcecdcDomainAccess",
            properties={
                "Endpoint": self.domain.domain_endpoint,
                "RoleName": f"{aws.stack_name}-writer",
                "Role": json.dumps(writer_role(config), sort_keys=True),
                "Writer": writer.role_arn,
                # every role mapped to the writer role: the jobs' and, added later, the planner's
                "Writers": Lazy.list(Writers(self.writers)),
                "Admin": aws.domain_admin_arn,
            },
            **placement,
        )
