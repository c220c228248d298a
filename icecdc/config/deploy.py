"""The deploy-only configuration, section `aws:`: a run reads none of it.

The CDK stack (`infra/`) and the checks of a deployment (`icecdc doctor`) read it.
"""

from __future__ import annotations

import re
from typing import Any, ClassVar, Self

from pydantic import Field, field_validator, model_validator

from icecdc.config.loader import AT, Section, Text, quoted

# The retention periods CloudWatch Logs accepts, in days (aws.log_retention_days).
LOG_RETENTION_DAYS = (
    1,
    3,
    5,
    7,
    14,
    30,
    60,
    90,
    120,
    150,
    180,
    365,
    400,
    545,
    731,
    1096,
    1827,
    2192,
    2557,
    2922,
    3288,
    3653,
)


class SubnetConfig(Section):
    id: Text
    availability_zone: Text
    # the subnet's route table: where aws.vpc.create_endpoints adds S3 and DynamoDB
    route_table_id: Text | None = None


class VpcConfig(Section):
    """An existing VPC, section `aws.vpc`: the Glue jobs and a domain the stack creates run in it.

    The Glue jobs run through a Glue network connection in the first subnet. A domain the stack
    creates is placed in the VPC, with security groups the stack creates.
    """

    vpc_id: Text
    # Private subnets, one per availability zone; a created domain spans the first two or three.
    subnets: tuple[SubnetConfig, ...] = Field(strict=False, min_length=1)
    # The stack creates the VPC endpoints its parts need (for subnets without a NAT gateway):
    # gateway endpoints for S3 and DynamoDB on the subnets' route tables, interface endpoints for
    # the rest (docs/deploy.md). False: the VPC must reach those services already.
    create_endpoints: bool = False

    @field_validator("subnets")
    @classmethod
    def _one_per_zone(cls, subnets: tuple[SubnetConfig, ...]) -> tuple[SubnetConfig, ...]:
        zones = [s.availability_zone for s in subnets]
        if len(set(zones)) != len(zones):
            raise ValueError(f"{AT} must be in different availability zones, got {quoted(zones)}")
        return subnets

    @model_validator(mode="after")
    def _routes_for_gateways(self) -> Self:
        missing = [s.id for s in self.subnets if s.route_table_id is None]
        if self.create_endpoints and missing:
            raise ValueError(
                f"{AT}.create_endpoints needs each subnet's route_table_id (the S3 and "
                "DynamoDB gateway endpoints are "
                f"routes): missing for {', '.join(missing)}"
            )
        return self


class CatalogGrantConfig(Section):
    """One statement of `aws.catalog_grants`, what the roles may call on the catalog's service.

    For a REST catalog signed with SigV4 for a service the stack does not know
    (`rest.signing-name`, e.g. `execute-api`)."""

    actions: tuple[Text, ...] = Field(strict=False, min_length=1)  # e.g. execute-api:Invoke
    resources: tuple[Text, ...] = Field(strict=False, min_length=1)  # ARNs, wildcards allowed

    @field_validator("actions")
    @classmethod
    def _named_actions(cls, actions: tuple[str, ...]) -> tuple[str, ...]:
        for action in actions:
            if not re.fullmatch(r"[a-z0-9-]+:[A-Za-z0-9]+", action):
                raise ValueError(
                    f"{AT} must name each action as '<service>:<Action>', no wildcard, "
                    f"got {action!r}"
                )
        return actions

    @field_validator("resources")
    @classmethod
    def _arns(cls, resources: tuple[str, ...]) -> tuple[str, ...]:
        for resource in resources:
            if not resource.startswith("arn:"):
                raise ValueError(f"{AT} must be ARNs (arn:aws:<service>:...), got {resource!r}")
        return resources


# an OpenSearch Serverless collection's ARN, and the names Serverless gives collections and policies
COLLECTION_ARN = r"arn:aws[\w-]*:aoss:[\w-]+:\d{12}:collection/[a-z0-9]+"
SERVERLESS_NAME = r"[a-z][a-z0-9-]{2,31}"
IAM_PRINCIPAL_ARN = r"arn:aws[\w-]*:iam::\d{12}:(role|user)/.+"


def _serverless_name(key: str, name: str, suffix: str = "") -> None:
    if not re.fullmatch(SERVERLESS_NAME, name):
        most = 32 - len(suffix)
        raise ValueError(
            f"{AT}.{key} must be 3 to {most} lower-case letters, digits and '-', starting with a "
            "letter, as Serverless names collections and policies"
            + (f" (the stack's policies are named <stack>{suffix})" if suffix else "")
            + f", got {name.removesuffix(suffix)!r}"
        )


def _admin(admin: str | None, what: str, created: bool) -> None:
    """The admin of a domain or collection the stack creates: required with it, only with it."""
    key = f"{what}_admin_arn"
    if created and admin is None:
        raise ValueError(
            f"{AT}.{key} is required with create_{what}: the IAM role that administers the "
            f"{what} (the jobs' role only writes the configured indexes)"
        )
    if admin is not None and not created:
        raise ValueError(f"{AT}.{key} is for a {what} the stack creates (create_{what}: true)")
    if admin is not None and not re.fullmatch(IAM_PRINCIPAL_ARN, admin):
        raise ValueError(f"{AT}.{key} must be an IAM role or user ARN, got {admin!r}")


def _key_arn(key: str) -> None:
    """A KMS key by its ARN (a policy's Resource: an alias or a bare ID would grant nothing)."""
    if not re.fullmatch(r"arn:aws[\w-]*:kms:[\w-]+:\d{12}:key/[\w-]+", key):
        raise ValueError(
            f"{AT} must be KMS key ARNs (arn:aws:kms:<region>:<account>:key/<id>), got {key!r}"
        )


class AwsConfig(Section):
    """What the CDK stack needs beyond the pipeline settings: section `aws:`, read at synth time."""

    # The buckets holding the tables' metadata and data: the only ones the roles read. Required
    # for the Glue Data Catalog; S3 Tables and Glue's REST endpoint grant the data with the table.
    warehouse_buckets: tuple[str, ...] = Field((), strict=False)
    # Customer-managed KMS keys the warehouse buckets' objects are encrypted with
    # (SSE-KMS): the roles that read them get kms:Decrypt on these keys, through S3 only.
    # Default: none (SSE-S3, or AWS-managed keys).
    warehouse_kms_key_arns: tuple[str, ...] = Field((), strict=False)
    # The customer-managed KMS key of opensearch.password_secret_arn, if it has one:
    # kms:Decrypt through Secrets Manager for the roles that read the secret. Default:
    # none (the secret's AWS-managed key).
    password_secret_kms_key_arn: Text | None = None
    # A REST catalog signed with SigV4 for another service than s3tables or glue: what the roles
    # may call on it, as the user grants it (required then; refused for any other catalog).
    catalog_grants: tuple[CatalogGrantConfig, ...] = Field((), strict=False)
    stack_name: Text = "icecdc"  # also the prefix of every resource name
    account: Text | None = None  # default: CDK_DEFAULT_ACCOUNT (none needed to synthesize)
    region: Text | None = None  # default: CDK_DEFAULT_REGION
    # the fallback sweep over all tables (Glue's events are best-effort)
    schedule_minutes: int = Field(5, ge=1)
    # The planner's events wait in a queue up to this long (Lambda's SQS batching window, at most
    # 300 s), so that a burst of commits of one table is planned once.
    planner_batch_window_seconds: int = Field(20, ge=1, le=300)
    # The planner applies a batch the in-process engine takes (see `engine:`)
    # itself, in seconds and without a Glue run; it then reaches OpenSearch from the
    # Lambda. False: every batch starts the job.
    planner_applies: bool = True
    # Concurrency reserved for the planner, or none (the default): the queue's event source already
    # starts at most 2 planners at once, and reserving fails to deploy in accounts whose Lambda
    # concurrency quota is low (Lambda keeps 100 unreserved). At least the event source's 2, or it
    # would be throttled (docs/deploy.md).
    planner_reserved_concurrency: int | None = Field(None, ge=2)
    glue_worker_type: Text = "G.1X"
    glue_max_workers: int = 10  # auto scaling's upper bound per table's job
    glue_timeout_minutes: int = Field(120, ge=1)
    # an existing domain signed with SigV4: scopes the roles' es:ESHttp* rights
    opensearch_domain_arn: Text | None = None
    # the stack creates an OpenSearch domain; opensearch.url is then replaced by its endpoint
    create_domain: bool = False
    domain_instance_type: Text = "r7g.large.search"
    domain_instance_count: int = Field(2, ge=1)
    domain_volume_gb: int = Field(20, ge=1)
    # With create_domain: the IAM role (or user) that administers the domain
    # (all_access and security_manager); the domain's master user is a role of the
    # stack that maps roles at deploy time.
    domain_admin_arn: Text | None = None
    # An existing OpenSearch Serverless collection (opensearch.aws_service: aoss): scopes the
    # roles' aoss:APIAccessAll; the stack's data access policy names it by collection_name.
    opensearch_collection_arn: Text | None = None
    # the stack creates a SEARCH collection; opensearch.url is then replaced by its endpoint
    create_collection: bool = False
    # The collection's name: required with opensearch_collection_arn (the ARN carries its id, a
    # data access policy names collections); a created one's, default: the stack's name.
    collection_name: Text | None = None
    # With create_collection: the IAM role (or user) that administers the collection (every
    # index and collection permission of its data access policy).
    collection_admin_arn: Text | None = None
    # the jobs (and a created domain, or a created collection's endpoint) in an existing VPC;
    # default: public endpoints
    vpc: VpcConfig | None = None
    dead_letter_prefix: Text = "dead-letter/"
    # dead letters hold whole documents (personal data)
    dead_letter_retention_days: int = Field(90, ge=1)
    # When each table's job audits its index (a Glue trigger's cron, UTC; null: never): counts per
    # partition and a sample of rows (`icecdc audit`), published as the metric Drift, alarmed on.
    audit_schedule: Text | None = "cron(0 3 * * ? *)"
    null_turns_off: ClassVar[frozenset[str]] = frozenset({"audit_schedule"})
    # the scheduled audit also repairs what it found (`icecdc repair --from-audit`)
    audit_repairs: bool = False
    alarm_email: Text | None = None  # subscribed to the alarms' SNS topic
    # the jobs', the planner's and a created domain's log groups (CloudWatch's periods)
    log_retention_days: int = 30

    @model_validator(mode="before")
    @classmethod
    def _moved_keys(cls, data: Any) -> Any:
        if isinstance(data, dict) and "done_ttl_days" in data:
            raise ValueError(
                f"{AT}.done_ttl_days moved to state.done_ttl_days (with state type dynamodb; "
                "at run time the stack's "
                "state table keeps it)"
            )
        return data

    @field_validator("warehouse_buckets")
    @classmethod
    def _bucket_names(cls, buckets: tuple[str, ...]) -> tuple[str, ...]:
        if not all(b and "/" not in b and "*" not in b for b in buckets):
            raise ValueError(
                f"{AT} must list bucket names (no paths, no wildcards), got {quoted(list(buckets))}"
            )
        return buckets

    @field_validator("warehouse_kms_key_arns")
    @classmethod
    def _key_arns(cls, keys: tuple[str, ...]) -> tuple[str, ...]:
        for key in keys:
            _key_arn(key)
        return keys

    @field_validator("password_secret_kms_key_arn")
    @classmethod
    def _key_arn(cls, key: str | None) -> str | None:
        if key is not None:
            _key_arn(key)
        return key

    @field_validator("stack_name")
    @classmethod
    def _resource_prefix(cls, name: str) -> str:
        if not all(c.isalnum() or c == "-" for c in name) or not name[0].isalpha():
            raise ValueError(
                f"{AT} must be letters, digits and '-', starting with a letter, got {name!r}"
            )
        return name

    @field_validator("glue_max_workers")
    @classmethod
    def _driver_and_executor(cls, workers: int) -> int:
        if workers < 2:
            raise ValueError(f"{AT} must be at least 2 (a driver and an executor), got {workers}")
        return workers

    @field_validator("log_retention_days")
    @classmethod
    def _cloudwatch_period(cls, days: int) -> int:
        if days not in LOG_RETENTION_DAYS:
            raise ValueError(
                f"{AT} must be one of CloudWatch Logs' periods "
                f"{', '.join(map(str, LOG_RETENTION_DAYS))}, got {days}"
            )
        return days

    @field_validator("dead_letter_prefix")
    @classmethod
    def _one_trailing_slash(cls, prefix: str) -> str:
        return prefix.strip("/") + "/"

    @model_validator(mode="after")
    def _one_domain(self) -> Self:
        if self.create_domain and self.opensearch_domain_arn is not None:
            raise ValueError(f"{AT}: choose create_domain or opensearch_domain_arn, not both")
        _admin(self.domain_admin_arn, "domain", self.create_domain)
        return self

    @model_validator(mode="after")
    def _one_collection(self) -> Self:
        domain = self.create_domain or self.opensearch_domain_arn is not None
        if self.collection and domain:
            raise ValueError(
                f"{AT}: one destination only: a domain (create_domain, opensearch_domain_arn) or "
                "a collection (create_collection, opensearch_collection_arn), not both"
            )
        arn = self.opensearch_collection_arn
        if self.create_collection and arn is not None:
            raise ValueError(
                f"{AT}: choose create_collection or opensearch_collection_arn, not both"
            )
        if arn is not None and not re.fullmatch(COLLECTION_ARN, arn):
            raise ValueError(
                f"{AT}.opensearch_collection_arn must be a collection's ARN "
                f"(arn:aws:aoss:<region>:<account>:collection/<id>), got {arn!r}"
            )
        if arn is not None and self.collection_name is None:
            raise ValueError(
                f"{AT}.collection_name is required with opensearch_collection_arn: the data "
                "access policy names the collection, whose ARN carries only its id"
            )
        if self.collection_name is not None and not self.collection:
            raise ValueError(
                f"{AT}.collection_name is for a collection (create_collection or "
                "opensearch_collection_arn)"
            )
        if self.collection:
            # the stack's name is the collection's unless collection_name is set
            key = "collection_name" if self.collection_name else "stack_name"
            _serverless_name(key, self.target_collection_name)
            # with room for the policies' suffixes (data_access_policy)
            _serverless_name("stack_name", self.data_access_policy("writers"), "-writers")
        _admin(self.collection_admin_arn, "collection", self.create_collection)
        return self

    @property
    def collection(self) -> bool:
        """The destination is an OpenSearch Serverless collection, existing or created."""
        return self.create_collection or self.opensearch_collection_arn is not None

    @property
    def target_collection_name(self) -> str:
        """A created collection's name without collection_name: the stack's, in lower case."""
        return self.collection_name or self.stack_name.lower()

    def data_access_policy(self, whose: str) -> str:
        """The name of the stack's data access policy of `whose` ("writers", "admin")."""
        return f"{self.stack_name.lower()}-{whose}"

    @property
    def collection_id(self) -> str | None:
        """The existing collection's id: the last part of its ARN, its endpoint's first label."""
        arn = self.opensearch_collection_arn
        return arn.rsplit("/", 1)[-1] if arn is not None else None
