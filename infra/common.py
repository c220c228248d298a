"""What the constructs of the stack share: IAM statements they all build, ARNs, logical IDs, and
cdk-nag suppressions scoped to the exact findings they accept."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from aws_cdk import ArnFormat, CfnResource, CustomResource, Duration, RemovalPolicy, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3_assets as s3_assets
from cdk_nag import NagPackSuppression, NagSuppressions
from constructs import Construct, IConstruct

from icecdc.aws.catalogs import AwsCatalog, CatalogKind, Grant, Where
from icecdc.catalog import glue_name
from icecdc.config import Config, TableConfig
from icecdc.config.deploy import LOG_RETENTION_DAYS, AwsConfig, CatalogGrantConfig

GLUE_READ_ACTIONS = ["glue:GetTable", "glue:GetDatabase"]  # what pyiceberg's GlueCatalog.load_table calls
# CloudWatch Logs' retention periods (icecdc.config.LOG_RETENTION_DAYS) as CDK names them, in order.
RETENTION = dict(zip(LOG_RETENTION_DAYS, [r for r in logs.RetentionDays if r is not logs.RetentionDays.INFINITE], strict=True))


def audited(aws: AwsConfig, table: TableConfig) -> bool:
    """The table's job audits its index on `aws.audit_schedule`: a schedule is set, and the index
    holds whole rows (the audit refuses a shaped index: a scheduled run would fail every day)."""
    return aws.audit_schedule is not None and table.whole_rows


def log_group(
    scope: Construct, construct_id: str, aws: AwsConfig, name: str | None = None, key: kms.IKey | None = None
) -> logs.LogGroup:
    """A log group that keeps `aws.log_retention_days` and goes with the stack."""
    return logs.LogGroup(
        scope,
        construct_id,
        log_group_name=name,
        retention=RETENTION[aws.log_retention_days],
        encryption_key=key,
        removal_policy=RemovalPolicy.DESTROY,
    )


def keep_logical_id(construct: IConstruct, logical_id: str) -> None:
    """Pin the CloudFormation logical ID a resource had before the stack was split into constructs:
    a deployed stack must keep its table, keys, buckets, domain and named resources (a new logical
    ID would replace them: a retained one is orphaned, a named one fails to create)."""
    resource = construct.node.default_child if not isinstance(construct, CfnResource) else construct
    assert isinstance(resource, CfnResource), construct.node.path
    resource.override_logical_id(logical_id)


def suppress(construct: IConstruct, rule: str, reason: str, applies_to: Sequence[str] = ()) -> None:
    """Accept one cdk-nag finding on one resource (not its children), for exactly the listed
    resources or actions when the rule reports them (IAM4, IAM5)."""
    NagSuppressions.add_resource_suppressions(
        construct, [NagPackSuppression(id=rule, reason=reason, applies_to=list(applies_to) or None)]
    )


def custom_resource(
    scope: Construct,
    construct_id: str,
    *,
    aws: AwsConfig,
    code: Path,
    handler: str,
    resource_type: str,
    properties: dict[str, Any],
    description: str,
    role: iam.Role | None = None,
    grants: Sequence[iam.PolicyStatement] = (),
    timeout_minutes: int = 5,
    **placement: Any,
) -> CustomResource:
    """A CloudFormation custom resource served by `handler` of lambdas/custom_resources (the
    runtime's own Python and boto3; nothing of icecdc runs there), as `role`, which the caller grants
    what the handler does, or else as a role of its own granted `grants`. `placement`: a VPC's
    subnets and security groups, if it needs them."""
    if role is None:
        role = iam.Role(
            scope, f"{construct_id}Role", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"), description=description
        )
        for statement in grants:
            allow(role, statement)
    function_logs = log_group(scope, f"{construct_id}Logs", aws)
    allow(
        role, iam.PolicyStatement(actions=["logs:CreateLogStream", "logs:PutLogEvents"], resources=[function_logs.log_group_arn])
    )
    function = lambda_.Function(
        scope,
        f"{construct_id}Function",
        runtime=lambda_.Runtime.PYTHON_3_14,
        handler=f"handler.{handler}",
        code=lambda_.Code.from_asset(str(code)),
        role=role,
        log_group=function_logs,
        timeout=Duration.minutes(timeout_minutes),
        description=description,
        **placement,
    )
    cdk_orders_after_its_policy(function)
    return CustomResource(
        scope, construct_id, service_token=function.function_arn, resource_type=resource_type, properties=properties
    )


def lint_ignore(resource: CfnResource, rule: str, reason: str) -> None:
    """Accept one cfn-lint warning on one resource (the `cfn-lint` metadata cfn-lint reads), with its
    reason next to it in the template (`icecdc:lint`)."""
    ignored = (resource.get_metadata("cfn-lint") or {}).get("config", {}).get("ignore_checks", [])
    resource.add_metadata("cfn-lint", {"config": {"ignore_checks": [*ignored, rule]}})
    resource.add_metadata("icecdc:lint", {**(resource.get_metadata("icecdc:lint") or {}), rule: reason})


def cdk_orders_after_its_policy(function: lambda_.Function) -> None:
    """CDK's Function depends on its role, which CloudFormation reads as the role and its
    DefaultPolicy: so the function (and a first invocation, e.g. a custom resource's) has its rights.
    The role half repeats the GetAtt of `Role`, which cfn-lint warns about (W3005); the policy half is
    the point."""
    resource = function.node.default_child
    assert isinstance(resource, CfnResource)
    lint_ignore(resource, "W3005", "CDK's DependsOn on the role orders the function after the role's DefaultPolicy")


def allow(role: iam.IRole, statement: iam.PolicyStatement, wildcards: str | None = None) -> None:
    """Add `statement` to `role`'s policy. Resources with a wildcard (objects under a prefix, log
    groups under a path, an API without resource-level permissions) need `wildcards`, the reason they
    are accepted: cdk-nag's IAM5 is then suppressed for exactly those resources, on that policy."""
    role.add_to_principal_policy(statement)
    findings = [f"Resource::{flat}" for flat in (nag_text(role, r) for r in statement.resources) if "*" in flat]
    if not findings:
        return
    if wildcards is None:
        raise ValueError(f"{role.node.path}: resources {findings} hold a wildcard: say why it is needed")
    suppress(role.node.find_child("DefaultPolicy"), "AwsSolutions-IAM5", wildcards, findings)


def nag_text(scope: IConstruct, value: str) -> str:
    """A resource as cdk-nag's findings spell it (its flattenCfnReference): `<Logical.Arn>/prefix/*`."""

    def visit(node: object) -> str:
        if isinstance(node, str):
            return node.replace("${", "<").replace("}", ">")
        if isinstance(node, dict) and "Fn::Join" in node:
            delimiter, items = node["Fn::Join"]
            return str(delimiter).join(visit(i) for i in items)
        if isinstance(node, dict) and "Fn::GetAtt" in node:
            resource, attribute = node["Fn::GetAtt"]
            return f"<{visit(resource)}.{visit(attribute)}>"
        if isinstance(node, dict) and "Ref" in node:
            return f"<{visit(node['Ref'])}>"
        return json.dumps(node, separators=(",", ":"))

    return visit(Stack.of(scope).resolve(value))


def table_parts(config: Config, protected_only: bool = False) -> list[tuple[str, str]]:
    """The tables' (database, table) as Glue stores them and names them in events and ARNs (lower case)."""
    tables = [t for t in config.tables if t.protect_checkpoint or not protected_only]
    return [tuple(glue_name(t.name).split(".", 1)) for t in tables]  # type: ignore[misc]


def glue_table_arns(scope: Construct, tables: Iterable[tuple[str, str]]) -> list[str]:
    """The Data Catalog, the databases and the tables: what GetTable and UpdateTable are authorized on."""
    stack = Stack.of(scope)
    resources = [stack.format_arn(service="glue", resource="catalog")]
    for database, table in tables:
        resources.append(stack.format_arn(service="glue", resource="database", resource_name=database))
        resources.append(stack.format_arn(service="glue", resource="table", resource_name=f"{database}/{table}"))
    return sorted(set(resources))


def aws_catalog(config: Config) -> AwsCatalog:
    """The configured catalog as the bundle reads it (icecdc.aws.catalogs: its kind decides)."""
    protected = [t.name for t in config.tables if t.protect_checkpoint]
    names = [t.name for t in config.tables]
    grants = [user_grant(g) for g in config.aws.catalog_grants] if config.aws else []
    return AwsCatalog.of(config.catalog.properties, names, protected, config.catalog.credential_secret_arn, grants)


def user_grant(grant: CatalogGrantConfig) -> Grant:
    """A statement of aws.catalog_grants as the catalog's grants hold it."""
    wildcards = "the ARNs aws.catalog_grants lists, as the user grants them" if any("*" in r for r in grant.resources) else None
    why = "aws.catalog_grants: the REST catalog's own service, as the configuration grants it"
    return Grant(grant.actions, grant.resources, why, wildcards=wildcards)


def where(scope: IConstruct) -> Where:
    stack = Stack.of(scope)
    return Where(stack.partition, stack.region, stack.account)


def allow_grants(role: iam.IRole, grants: Sequence[Grant]) -> None:
    for grant in grants:
        conditions = {k: dict(v) for k, v in grant.conditions.items()} if grant.conditions else None
        statement = iam.PolicyStatement(actions=list(grant.actions), resources=list(grant.resources), conditions=conditions)
        allow(role, statement, wildcards=grant.wildcards)


def read_catalog_and_warehouse(role: iam.IRole, config: Config) -> None:
    """The configured tables' catalog entries (read only) and the objects of the warehouse buckets."""
    catalog = aws_catalog(config)
    allow_grants(role, catalog.read_grants(where(role)))
    if not catalog.needs_warehouse_buckets():  # the table's rights carry its data's (S3 Tables, Lake Formation)
        return
    aws = _aws(config)
    if catalog.kind == CatalogKind.GLUE:
        allow(role, iam.PolicyStatement(actions=GLUE_READ_ACTIONS, resources=glue_table_arns(role, table_parts(config))))
    allow(
        role,
        iam.PolicyStatement(actions=["s3:GetObject"], resources=[f"{_s3(role)}{b}/*" for b in aws.warehouse_buckets]),
        wildcards="the tables' metadata and data files: object keys are not known at synth time (read only)",
    )
    # Listing, too: without it S3 answers 403, not 404, for a key that is gone, and an expired
    # file would read as a denied one; pyarrow's S3 also lists a key before it writes it.
    allow(
        role,
        iam.PolicyStatement(actions=["s3:ListBucket"], resources=[f"{_s3(role)}{b}" for b in aws.warehouse_buckets]),
    )
    allow_keys(role, aws.warehouse_kms_key_arns, "s3", ["kms:Decrypt"])


def tag_protected_tables(role: iam.IRole, config: Config) -> None:
    """`protect_checkpoint` tables: icecdc commits tags to their metadata (icecdc.protection), so the
    role may update those tables, and write metadata files (never data) in the warehouse."""
    catalog = aws_catalog(config)
    allow_grants(role, catalog.guard_grants(where(role)))
    protected = table_parts(config, protected_only=True)
    if not protected or not catalog.needs_warehouse_buckets():
        return
    if catalog.kind == CatalogKind.GLUE:  # a REST catalog commits with its own credentials
        allow(role, iam.PolicyStatement(actions=["glue:UpdateTable"], resources=glue_table_arns(role, protected)))
    allow(
        role,
        iam.PolicyStatement(
            actions=["s3:PutObject"], resources=[f"{_s3(role)}{b}/*/metadata/*" for b in _aws(config).warehouse_buckets]
        ),
        wildcards="metadata files of the protected tables (new metadata.json and manifests); never data files",
    )
    # new objects in a bucket whose default encryption is a customer-managed key
    allow_keys(role, _aws(config).warehouse_kms_key_arns, "s3", ["kms:GenerateDataKey"])


def allow_password_secret(role: iam.IRole, config: Config) -> None:
    """Basic auth to the configured OpenSearch: `role` may read that one secret (nothing without one)."""
    if config.opensearch.password_secret_arn:
        allow(
            role,
            iam.PolicyStatement(actions=["secretsmanager:GetSecretValue"], resources=[config.opensearch.password_secret_arn]),
        )
        key = _aws(config).password_secret_kms_key_arn
        allow_keys(role, (key,) if key else (), "secretsmanager", ["kms:Decrypt"])


def allow_keys(role: iam.IRole, keys: Sequence[str], service: str, actions: list[str]) -> None:
    """`actions` on customer-managed `keys` (nothing without any), used through `service` only (the
    kms:ViaService condition): the role reads what that service encrypted, never the key directly."""
    if keys:
        allow(
            role,
            iam.PolicyStatement(
                actions=actions,
                resources=list(keys),
                conditions={"StringEquals": {"kms:ViaService": f"{service}.{Stack.of(role).region}.amazonaws.com"}},
            ),
        )


def allow_metrics(role: iam.IRole, namespace: str) -> None:
    allow(
        role,
        iam.PolicyStatement(
            actions=["cloudwatch:PutMetricData"],
            resources=["*"],  # PutMetricData has no resource-level permissions
            conditions={"StringEquals": {"cloudwatch:namespace": namespace}},
        ),
        wildcards="cloudwatch:PutMetricData has no resource-level permissions; a condition limits it to one namespace",
    )


def object_arn(asset: s3_assets.Asset) -> str:
    return f"{_s3(asset)}{asset.s3_bucket_name}/{asset.s3_object_key}"


def glue_log_groups(scope: Construct) -> str:
    """Glue's own log groups, where the jobs log (and the data key may encrypt)."""
    return Stack.of(scope).format_arn(
        service="logs", resource="log-group", resource_name="/aws-glue/*", arn_format=ArnFormat.COLON_RESOURCE_NAME
    )


def _s3(scope: IConstruct) -> str:
    return f"arn:{Stack.of(scope).partition}:s3:::"


def _aws(config: Config) -> AwsConfig:
    assert config.aws is not None  # IcecdcStack refuses a configuration without it
    return config.aws
