"""What the stack (infra/) creates, as the doctor finds it in an account.

That is the names it gives its resources, the logical IDs of the others, and the
deployed stack read through CloudFormation.

icecdc cannot import infra/, as the planner Lambda and the Glue job ship icecdc without the CDK. So
the few facts the doctor needs are written here once. tests/aws/test_doctor.py checks each of them
against the synthesized template, so a change in infra/ that they no longer describe fails there.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from botocore.exceptions import ClientError

from icecdc.aws.contract import job_name, planner_log_group
from icecdc.config import Config

GLUE_VERSION = "5.1"  # infra.jobs.GLUE_VERSION
# The template's CheckBootstrapVersion rule refuses an environment bootstrapped below this version,
# read from this SSM parameter (the default qualifier: cdk.json sets none).
BOOTSTRAP_VERSION = 6
BOOTSTRAP_QUALIFIER = "hnb659fds"
BOOTSTRAP_STACK = "CDKToolkit"
# A domain in a VPC needs this role in the account before CloudFormation can create it; AWS creates
# it with the first VPC domain made in the console, never through CloudFormation.
OPENSEARCH_SERVICE_LINKED_ROLE = "AWSServiceRoleForAmazonOpenSearchService"
OPENSEARCH_SERVICE = "opensearchservice.amazonaws.com"


def bootstrap_parameter(qualifier: str = BOOTSTRAP_QUALIFIER) -> str:
    return f"/cdk-bootstrap/{qualifier}/version"


def state_table_name(stack: str) -> str:
    """infra.state.State: the DynamoDB table, retained when the stack is deleted."""
    return f"{stack}-state"


def log_group_names(stack: str) -> list[str]:
    """infra.jobs.Jobs: the jobs' log groups (Glue's `--custom-logGroup-prefix`); the planner's."""
    return [f"/aws-glue/jobs/{stack}/{kind}" for kind in ("output", "error")] + [
        planner_log_group(stack)
    ]


class Kind(StrEnum):
    """Resources the stack names itself: CloudFormation cannot create one whose name is taken."""

    STATE_TABLE = "DynamoDB table"
    GLUE_JOB = "Glue job"
    SECURITY_CONFIGURATION = "Glue security configuration"
    GLUE_CONNECTION = "Glue connection"
    LOG_GROUP = "log group"
    DASHBOARD = "CloudWatch dashboard"
    COLLECTION = "Serverless collection"
    ENCRYPTION_POLICY = "Serverless encryption policy"
    NETWORK_POLICY = "Serverless network policy"


@dataclass(frozen=True)
class Named:
    kind: Kind
    name: str


def named_resources(config: Config) -> list[Named]:
    """Every name the stack gives a resource, for this configuration.

    The other resources (the dead-letter and artifact buckets, the planner, its
    queues and rules, the roles, a created domain) are named by CloudFormation,
    unique per stack: they cannot collide."""
    assert config.aws is not None
    stack = config.aws.stack_name
    names = [Named(Kind.STATE_TABLE, state_table_name(stack))]
    names += [Named(Kind.GLUE_JOB, job_name(stack, t.name)) for t in config.tables]
    names.append(Named(Kind.SECURITY_CONFIGURATION, f"{stack}-jobs"))
    if config.aws.vpc is not None:
        names.append(Named(Kind.GLUE_CONNECTION, f"{stack}-vpc"))
    names += [Named(Kind.LOG_GROUP, name) for name in log_group_names(stack)]
    names.append(Named(Kind.DASHBOARD, f"{stack}-lag"))
    if config.aws.create_collection:  # infra.collection: the collection and its security policies
        collection = config.aws.target_collection_name
        kinds = (Kind.COLLECTION, Kind.ENCRYPTION_POLICY, Kind.NETWORK_POLICY)
        names += [Named(kind, collection) for kind in kinds]
    return names


def name_taken(clients: Callable[[str], Any], named: Named) -> bool:
    """Whether a resource of that kind and name exists in the account and region."""
    kind, name = named.kind, named.name
    try:
        if kind == Kind.STATE_TABLE:
            clients("dynamodb").describe_table(TableName=name)
        elif kind == Kind.GLUE_JOB:
            clients("glue").get_job(JobName=name)
        elif kind == Kind.SECURITY_CONFIGURATION:
            clients("glue").get_security_configuration(Name=name)
        elif kind == Kind.GLUE_CONNECTION:
            clients("glue").get_connection(Name=name)
        elif kind == Kind.LOG_GROUP:
            found = clients("logs").describe_log_groups(logGroupNamePrefix=name)["logGroups"]
            return any(g["logGroupName"] == name for g in found)
        elif kind == Kind.COLLECTION:
            return bool(
                clients("opensearchserverless").batch_get_collection(names=[name])[
                    "collectionDetails"
                ]
            )
        elif kind in (Kind.ENCRYPTION_POLICY, Kind.NETWORK_POLICY):
            policy = "encryption" if kind == Kind.ENCRYPTION_POLICY else "network"
            clients("opensearchserverless").get_security_policy(name=name, type=policy)
        else:
            clients("cloudwatch").get_dashboard(DashboardName=name)
    except ClientError as exc:
        if error_code(exc) in NOT_FOUND:
            return False
        raise
    return True


# How the services say "no such resource" (DynamoDB, Glue, CloudWatch,
# CloudFormation, IAM, SSM, Lambda).
NOT_FOUND = {
    "ResourceNotFoundException",
    "EntityNotFoundException",
    "ResourceNotFound",
    "NoSuchEntity",
    "ParameterNotFound",
    "ValidationError",  # CloudFormation: "Stack with id X does not exist"
}


def error_code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


class Logical(StrEnum):
    """The resources the doctor reads that CloudFormation names, and their type.

    They are found by the logical ID CDK gives them: the construct's path, then a hash of it.
    """

    PLANNER = "PlannerFunction"
    PLANNER_LOGS = "PlannerLogs"
    PLANNER_ROLE = "PlannerRole"
    TABLE_CHANGED = "PlannerTableChanged"
    SWEEP = "PlannerSweep"
    BUFFER = "PlannerBuffer"
    FAILURES = "PlannerFailures"
    JOB_ROLE = "JobRole"
    DOMAIN = "Domain66AC69E0"  # pinned by infra.domain (keep_logical_id)

    @property
    def resource_type(self) -> str:
        return _TYPES[self]


_TYPES = {
    Logical.PLANNER: "AWS::Lambda::Function",
    Logical.PLANNER_LOGS: "AWS::Logs::LogGroup",
    Logical.PLANNER_ROLE: "AWS::IAM::Role",
    Logical.TABLE_CHANGED: "AWS::Events::Rule",
    Logical.SWEEP: "AWS::Events::Rule",
    Logical.BUFFER: "AWS::SQS::Queue",
    Logical.FAILURES: "AWS::SQS::Queue",
    Logical.JOB_ROLE: "AWS::IAM::Role",
    Logical.DOMAIN: "AWS::OpenSearchService::Domain",
}


def expected(config: Config) -> list[Logical]:
    """The looked-up resources this configuration's stack has: a domain only when it creates one."""
    assert config.aws is not None
    return [r for r in Logical if r != Logical.DOMAIN or config.aws.create_domain]


def logical_match(resource: Logical, logical_id: str, resource_type: str) -> bool:
    """Whether `logical_id` is the ID CloudFormation has for `resource`, of `resource_type`.

    CDK appends an 8-character hash to the path; a pinned ID is the whole ID. The type tells the
    function from its event source mapping, a role from its policy, a queue from its queue policy.
    """
    if resource_type != resource.resource_type or not logical_id.startswith(resource.value):
        return False
    rest = logical_id[len(resource.value) :]
    return rest == "" or (len(rest) == 8 and rest.isalnum() and rest.upper() == rest)


@dataclass(frozen=True)
class DeployedStack:
    """The stack as CloudFormation describes it: its status and its resources' physical IDs."""

    name: str
    status: str
    reason: str
    resources: dict[str, tuple[str, str]]  # logical ID → (type, physical ID)

    @classmethod
    def read(cls, cloudformation: Any, name: str) -> DeployedStack | None:
        """None when there is no such stack (never deployed, or deleted)."""
        try:
            [stack] = cloudformation.describe_stacks(StackName=name)["Stacks"]
        except ClientError as exc:
            if error_code(exc) in NOT_FOUND:
                return None
            raise
        resources: dict[str, tuple[str, str]] = {}
        for page in cloudformation.get_paginator("list_stack_resources").paginate(StackName=name):
            for r in page["StackResourceSummaries"]:
                resources[r["LogicalResourceId"]] = (
                    r["ResourceType"],
                    r.get("PhysicalResourceId", ""),
                )
        return cls(name, stack["StackStatus"], stack.get("StackStatusReason", ""), resources)

    def physical(self, resource: Logical) -> str | None:
        """The physical ID (a name, a URL for a queue) of a looked-up resource; None when absent."""
        found = [
            physical
            for logical, (kind, physical) in self.resources.items()
            if logical_match(resource, logical, kind)
        ]
        return found[0] if len(found) == 1 else None

    def owns(self, physical_id: str) -> bool:
        return any(physical == physical_id for _, physical in self.resources.values())

    @property
    def usable(self) -> bool:
        """Whether the stack's resources are in place: created or updated.

        An update rolled back to the previous, complete state counts too.
        """
        return self.status in {
            "CREATE_COMPLETE",
            "UPDATE_COMPLETE",
            "UPDATE_ROLLBACK_COMPLETE",
            "IMPORT_COMPLETE",
        }
