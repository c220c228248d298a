"""The OpenSearch Serverless side: rights on an existing collection, or a SEARCH collection the stack
creates (`aws.opensearch_collection_arn`, `aws.create_collection`; docs/deploy.md).

Serverless authorizes a request twice: IAM must allow `aoss:APIAccessAll` on the collection (the
writers get it on that one collection's ARN), and a data access policy must allow the operation
on the index. The stack's data access policy (`<stack>-writers`) gives the writers, the
jobs' role and the applying planner's, what a sync does to the configured indexes and their
generations (`index/<collection>/<index>`, `<index>-*`), and on the collection the aliases and
templates it reads and swaps. A created collection also gets its encryption policy (the stack's
data key), its network policy (public, or a VPC endpoint with `aws.vpc`) and a second, retained
data access policy for `aws.collection_admin_arn` (`<stack>-admin`).
"""

from __future__ import annotations

from typing import Any

import jsii
from aws_cdk import IStableStringProducer, Lazy, RemovalPolicy, Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_opensearchserverless as aoss
from constructs import Construct

from icecdc.aws.contract import SERVERLESS_COLLECTION_PERMISSIONS, SERVERLESS_INDEX_PERMISSIONS
from icecdc.config import Config
from icecdc.config.deploy import AwsConfig
from infra.common import allow
from infra.network import Network

INDEX_PERMISSIONS = list(SERVERLESS_INDEX_PERMISSIONS)
COLLECTION_PERMISSIONS = list(SERVERLESS_COLLECTION_PERMISSIONS)
ADMIN_COLLECTION_PERMISSIONS = [*COLLECTION_PERMISSIONS, "aoss:DeleteCollectionItems"]
# The one IAM action of Serverless's data plane: the data access policy narrows it.
DATA_PLANE_ACTION = "aoss:APIAccessAll"


def index_resources(collection: str, indexes: list[str]) -> list[str]:
    """The data access policy's index resources: each index (the alias) and its generations."""
    return sorted({f"index/{collection}/{p}" for index in indexes for p in (index, f"{index}-*")})


def writer_rules(collection: str, indexes: list[str]) -> list[dict[str, Any]]:
    """The writers' rules: the configured indexes and their generations, the collection's aliases
    and templates; never `aoss:*` nor every index."""
    return [
        {"ResourceType": "index", "Resource": index_resources(collection, indexes), "Permission": INDEX_PERMISSIONS},
        {"ResourceType": "collection", "Resource": [f"collection/{collection}"], "Permission": COLLECTION_PERMISSIONS},
    ]


def admin_rules(collection: str) -> list[dict[str, Any]]:
    """A created collection's admin: every permission on every index and item of that collection."""
    return [
        {"ResourceType": "index", "Resource": [f"index/{collection}/*"], "Permission": INDEX_PERMISSIONS},
        {"ResourceType": "collection", "Resource": [f"collection/{collection}"], "Permission": ADMIN_COLLECTION_PERMISSIONS},
    ]


@jsii.implements(IStableStringProducer)
class WritersPolicy:
    """The writers' data access policy, produced when the template is synthesized (after every
    writer was added)."""

    def __init__(self, scope: Construct, collection: str, indexes: list[str], roles: list[iam.IRole]) -> None:
        self.scope, self.collection, self.indexes, self.roles = scope, collection, indexes, roles

    def produce(self) -> str:
        policy = [
            {
                "Description": "icecdc: the jobs and the planner write the configured indexes",
                "Rules": writer_rules(self.collection, self.indexes),
                "Principal": [role.role_arn for role in self.roles],
            }
        ]
        return Stack.of(self.scope).to_json_string(policy)


class Collection(Construct):
    """Where the jobs write, on OpenSearch Serverless. As `infra.domain.Search`: `url` is the created
    collection's endpoint (or None), `add_writer` grants a role the writers' rights, `admit` opens
    a created VPC endpoint to a security group, `access` is the writers' data access policy."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: Config,
        writer: iam.IRole,
        data_key: kms.IKey,
        network: Network | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        assert config.aws is not None
        aws = config.aws
        self.config = config
        self.url: str | None = None
        self.collection: aoss.CfnCollection | None = None
        self.security_group: ec2.SecurityGroup | None = None
        self.writers: list[iam.IRole] = []
        name = aws.target_collection_name
        self.name = name
        if aws.create_collection:
            self.collection = self._collection(aws, name, data_key, network)
            self.arn = self.collection.attr_arn
            self.url = self.collection.attr_collection_endpoint
        else:
            assert aws.opensearch_collection_arn is not None
            self.arn = aws.opensearch_collection_arn
        self.access = aoss.CfnAccessPolicy(
            self,
            "WritersPolicy",
            name=aws.data_access_policy("writers"),
            type="data",
            description="icecdc: the jobs' and the planner's rights on the configured indexes",
            policy=Lazy.string(WritersPolicy(self, name, list(config.index_names), self.writers)),
        )
        if self.collection is not None:
            self.access.node.add_dependency(self.collection)
        self.add_writer(writer)

    def add_writer(self, role: iam.IRole) -> None:
        """`role` may write the configured indexes: IAM's aoss:APIAccessAll on the one collection,
        and a principal of the writers' data access policy."""
        self.writers.append(role)
        allow(role, iam.PolicyStatement(actions=[DATA_PLANE_ACTION], resources=[self.arn]))

    def admit(self, group: ec2.ISecurityGroup, description: str) -> None:
        """HTTPS into the created collection's VPC endpoint from `group` (nothing to do otherwise)."""
        if self.security_group is not None:
            self.security_group.add_ingress_rule(group, ec2.Port.tcp(443), description)

    def _collection(self, aws: AwsConfig, name: str, key: kms.IKey, network: Network | None) -> aoss.CfnCollection:
        """The SEARCH collection (custom document ids: a time-series one assigns its own), its
        encryption and network policies, and its admin's data access policy; all retained."""
        resource = [f"collection/{name}"]
        encryption = aoss.CfnSecurityPolicy(
            self,
            "EncryptionPolicy",
            name=name,
            type="encryption",
            description="icecdc: the collection is encrypted with the stack's data key",
            policy=Stack.of(self).to_json_string(
                {"Rules": [{"ResourceType": "collection", "Resource": resource}], "AWSOwnedKey": False, "KmsARN": key.key_arn}
            ),
        )
        access: dict[str, Any] = {"AllowFromPublic": True}
        if network is not None:
            self.security_group = ec2.SecurityGroup(
                self,
                "SecurityGroup",
                vpc=network.vpc,
                description="icecdc OpenSearch Serverless endpoint",
                allow_all_outbound=False,
            )
            endpoint = aoss.CfnVpcEndpoint(
                self,
                "Endpoint",
                name=name,
                vpc_id=network.vpc.vpc_id,
                subnet_ids=[s.subnet_id for s in network.subnets],
                security_group_ids=[self.security_group.security_group_id],
            )
            self.admit(network.jobs, "the Glue jobs")
            access = {"AllowFromPublic": False, "SourceVPCEs": [endpoint.attr_id]}
        # the collection's endpoint only: no rule for its dashboards, so none reaches them
        network_policy = aoss.CfnSecurityPolicy(
            self,
            "NetworkPolicy",
            name=name,
            type="network",
            description="icecdc: who reaches the collection's endpoint",
            policy=Stack.of(self).to_json_string([{"Rules": [{"ResourceType": "collection", "Resource": resource}], **access}]),
        )
        collection = aoss.CfnCollection(
            self, "Collection", name=name, type="SEARCH", description=f"icecdc: the indexes of {aws.stack_name}"
        )
        admin = aoss.CfnAccessPolicy(
            self,
            "AdminPolicy",
            name=aws.data_access_policy("admin"),
            type="data",
            description="icecdc: the collection's admin (aws.collection_admin_arn)",
            policy=Stack.of(self).to_json_string([{"Rules": admin_rules(name), "Principal": [aws.collection_admin_arn]}]),
        )
        # a collection is created under its encryption and network policies
        collection.node.add_dependency(encryption, network_policy)
        for retained in (encryption, network_policy, collection, admin):  # the data outlives the stack, administered
            retained.apply_removal_policy(RemovalPolicy.RETAIN)
        return collection
