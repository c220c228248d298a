"""Before the first `cdk deploy`: what makes the deploy fail, or the first commit go nowhere.

It checks with the caller's credentials and the configuration.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

from botocore.exceptions import ClientError
from pyiceberg.table import Table

from icecdc.catalog import glue_name, identifier_columns, load_table
from icecdc.config import TableConfig
from icecdc.doctor.catalogs import check_catalog_kind
from icecdc.doctor.collections import check_collection
from icecdc.doctor.context import Context
from icecdc.doctor.model import Check, failed, passed, skipped, warned
from icecdc.doctor.network import check_vpc
from icecdc.doctor.search import check_domain
from icecdc.doctor.stack import (
    BOOTSTRAP_STACK,
    BOOTSTRAP_VERSION,
    GLUE_VERSION,
    NOT_FOUND,
    OPENSEARCH_SERVICE_LINKED_ROLE,
    DeployedStack,
    Logical,
    bootstrap_parameter,
    error_code,
    name_taken,
    named_resources,
)
from icecdc.errors import PlanningError


def check_credentials(ctx: Context) -> Iterator[Check]:
    """Whose credentials, in which account.

    `cdk deploy` deploys into `aws.account` when it is set.
    """
    identity = ctx.client("sts").get_caller_identity()
    account = str(identity["Account"])
    if ctx.aws.account and ctx.aws.account != account:
        yield failed(
            "credentials",
            f"{identity['Arn']} is in account {account}, but aws.account is {ctx.aws.account}",
            f"use credentials of account {ctx.aws.account} (AWS_PROFILE), or correct aws.account",
        )
        return
    yield passed("credentials", f"{identity['Arn']} in account {account}, region {ctx.region}")


def check_stack_state(ctx: Context) -> Iterator[Check]:
    yield stack_state(ctx.stack, ctx.stack_name, ctx.region)


def stack_state(stack: DeployedStack | None, name: str, region: str) -> Check:
    """The stack is in a state a deploy can start from.

    A stack whose creation failed cannot be updated; one being changed cannot be deployed. A stack
    in REVIEW_IN_PROGRESS holds only a change set never executed: `cdk deploy` creates it.
    """
    if stack is None or stack.status == "REVIEW_IN_PROGRESS":
        return passed("stack state", f"no stack {name} yet: the deploy creates it")
    if stack.status == "ROLLBACK_COMPLETE" or stack.status.endswith("_FAILED"):
        return failed(
            "stack state",
            f"stack {stack.name} is {stack.status} ({stack.reason or 'no reason given'}): "
            "CloudFormation cannot update it",
            "delete it (its retained resources stay: see the names check), then deploy again",
            f"aws cloudformation delete-stack --stack-name {stack.name} --region {region}",
        )
    if stack.status.endswith("_IN_PROGRESS"):
        return failed(
            "stack state",
            f"stack {stack.name} is {stack.status}",
            "wait until it is complete, then deploy",
        )
    return passed("stack state", f"stack {stack.name} is {stack.status}: the deploy updates it")


def check_bootstrap(ctx: Context) -> Iterator[Check]:
    """The account and region are bootstrapped, as `cdk deploy` needs.

    `cdk deploy` uploads the assets to the bootstrap bucket, and the template's rule reads the
    bootstrap version from SSM. Both come from `cdk bootstrap` in this account and region.
    """
    command = f"cdk bootstrap aws://{ctx.aws.account or 'ACCOUNT'}/{ctx.region}"
    bootstrap = DeployedStack.read(ctx.client("cloudformation"), BOOTSTRAP_STACK)
    try:
        version = ctx.client("ssm").get_parameter(Name=bootstrap_parameter())["Parameter"]["Value"]
    except ClientError as exc:
        if error_code(exc) not in NOT_FOUND:
            raise
        version = None
    if bootstrap is None or version is None:
        missing = (
            "no CDKToolkit stack"
            if bootstrap is None
            else f"no SSM parameter {bootstrap_parameter()}"
        )
        yield failed(
            "cdk bootstrap",
            f"{ctx.region} is not bootstrapped for the CDK ({missing})",
            "bootstrap it once",
            command,
        )
    elif not version.isdigit() or int(version) < BOOTSTRAP_VERSION:
        yield failed(
            "cdk bootstrap",
            f"bootstrap version {version}: the template requires {BOOTSTRAP_VERSION} or later",
            "bootstrap again with a recent CDK CLI",
            command,
        )
    else:
        yield passed("cdk bootstrap", f"CDKToolkit {bootstrap.status}, bootstrap version {version}")


def check_glue_version(ctx: Context) -> Iterator[Check]:
    offered = ctx.glue_versions.offers(GLUE_VERSION)
    if offered is None:
        yield warned(
            "glue version",
            f"cannot tell whether Glue {GLUE_VERSION} is offered in {ctx.region}: no Glue "
            "API lists versions, and no "
            f"job of this account runs on {GLUE_VERSION} there",
            f"confirm that {ctx.region} offers Glue {GLUE_VERSION} (AWS Glue versions in the "
            "Glue developer guide); "
            "the deploy fails on the jobs (Job0...) otherwise",
        )
    elif offered:
        yield passed("glue version", f"Glue {GLUE_VERSION} runs jobs in {ctx.region}")
    else:
        yield failed(
            "glue version",
            f"Glue {GLUE_VERSION} is not offered in {ctx.region}: the jobs cannot be created",
            f"deploy to a region with Glue {GLUE_VERSION} (aws.region); the tables' catalog "
            "may stay where it is "
            "(the catalog's glue.region)",
        )


def check_concurrency(ctx: Context) -> Iterator[Check]:
    """The account's unreserved concurrency leaves room for what the stack reserves.

    Reserved concurrency comes out of the account's unreserved pool, of which Lambda keeps a
    minimum. Reserving more fails the deploy on the planner function.
    """
    reserved = ctx.aws.planner_reserved_concurrency
    if reserved is None:
        yield passed(
            "lambda concurrency", "the stack reserves none (aws.planner_reserved_concurrency unset)"
        )
        return
    account = ctx.lambda_concurrency.account()
    # an update moves the planner's reservation: it is in the pool again
    already = _planner_reservation(ctx)
    left = account.unreserved + already - reserved
    if left < account.minimum_unreserved:
        yield failed(
            "lambda concurrency",
            f"reserving {reserved} for the planner leaves {left} of the account's "
            f"{account.limit} unreserved; Lambda "
            f"keeps at least {account.minimum_unreserved}",
            "remove aws.planner_reserved_concurrency (the queue's event source already "
            "starts at most 2 planners), "
            "or raise the account's quota",
            "aws service-quotas request-service-quota-increase --service-code lambda "
            "--quota-code L-B99A9384 "
            f"--desired-value 1000 --region {ctx.region}",
        )
    else:
        yield passed(
            "lambda concurrency",
            f"reserving {reserved} leaves {left} unreserved (at least "
            f"{account.minimum_unreserved})",
        )


def _planner_reservation(ctx: Context) -> int:
    function = ctx.stack.physical(Logical.PLANNER) if ctx.stack else None
    if function is None:
        return 0
    return int(
        ctx.client("lambda")
        .get_function_concurrency(FunctionName=function)
        .get("ReservedConcurrentExecutions")
        or 0
    )


def check_service_linked_role(ctx: Context) -> Iterator[Check]:
    """A domain in a VPC has OpenSearch's service-linked role, or the stack creates it.

    A template cannot hold the role: it fails where the role exists. So the stack's
    Search/LinkedRole creates it when it is missing.
    """
    if not (ctx.aws.create_domain and ctx.aws.vpc):
        yield skipped("service-linked role", "only a domain the stack creates in a VPC needs it")
        return
    try:
        ctx.client("iam").get_role(RoleName=OPENSEARCH_SERVICE_LINKED_ROLE)
    except ClientError as exc:
        if error_code(exc) not in NOT_FOUND:
            raise
        yield passed(
            "service-linked role",
            f"{OPENSEARCH_SERVICE_LINKED_ROLE} does not exist yet: the stack creates it "
            "before the domain (Search/LinkedRole)",
        )
        return
    yield passed("service-linked role", f"{OPENSEARCH_SERVICE_LINKED_ROLE} exists")


def check_names(ctx: Context) -> Iterator[Check]:
    """Every name the stack gives a resource is free, or already the stack's.

    A table retained from a deleted stack (`<stack>-state`), a job made by hand, a log group Glue
    created itself: each fails the deploy with "already exists".
    """
    stack, names = ctx.stack, named_resources(ctx.config)
    taken = [n for n in names if name_taken(ctx.client, n) and not (stack and stack.owns(n.name))]
    for named in taken:
        yield failed(
            "names free",
            f"{named.kind} {named.name} exists outside stack {ctx.stack_name}: "
            "CloudFormation cannot create it",
            "delete it (a retained state table holds the checkpoints: import it instead with "
            "`cdk import`, or keep it "
            "and choose another aws.stack_name)",
            subject=named.name,
        )
    if not taken:
        yield passed(
            "names free",
            f"the {len(names)} names the stack gives are free or its own; CloudFormation "
            "names the buckets "
            "(dead letters, artifacts, access logs), which cannot collide",
        )


def check_buckets(ctx: Context) -> Iterator[Check]:
    """The warehouse buckets exist, and their customer-managed KMS keys are configured.

    A bucket whose objects are written under a customer-managed KMS key names it in
    aws.warehouse_kms_key_arns. The roles get kms:Decrypt on those keys only.
    """
    s3 = ctx.client("s3")
    for bucket in ctx.aws.warehouse_buckets:
        try:
            s3.head_bucket(Bucket=bucket)
        except ClientError as exc:
            yield failed(
                "warehouse bucket",
                f"s3://{bucket}: {error_code(exc) or exc}",
                "list the buckets that hold the tables' files in aws.warehouse_buckets",
                subject=bucket,
            )
            continue
        key = _customer_key(ctx, _default_key(s3, bucket))
        if key is not None and key not in ctx.aws.warehouse_kms_key_arns:
            yield failed(
                "warehouse bucket",
                f"s3://{bucket} encrypts new objects under the customer-managed key {key}, which "
                "aws.warehouse_kms_key_arns does not list: the roles could not decrypt the "
                "tables' files",
                f"add {key} to aws.warehouse_kms_key_arns",
                subject=bucket,
            )
            continue
        yield passed(
            "warehouse bucket",
            f"s3://{bucket} exists" + (f", under {key} (listed)" if key else ""),
            subject=bucket,
        )


def _default_key(s3: Any, bucket: str) -> str | None:
    """The KMS key a bucket's default encryption names; None for SSE-S3 or S3's AWS-managed key."""
    try:
        rules = s3.get_bucket_encryption(Bucket=bucket)["ServerSideEncryptionConfiguration"][
            "Rules"
        ]
    except ClientError as exc:
        if error_code(exc) == "ServerSideEncryptionConfigurationNotFoundError":
            return None
        raise
    for rule in rules:
        default = rule.get("ApplyServerSideEncryptionByDefault", {})
        if str(default.get("SSEAlgorithm", "")).startswith("aws:kms") and default.get(
            "KMSMasterKeyID"
        ):
            return str(default["KMSMasterKeyID"])
    return None


def _customer_key(ctx: Context, key: str | None) -> str | None:
    """The key's ARN when the account manages it, None otherwise.

    An AWS-managed key needs no grant.
    """
    if key is None:
        return None
    metadata = ctx.client("kms").describe_key(KeyId=key)["KeyMetadata"]
    return str(metadata["Arn"]) if metadata.get("KeyManager") == "CUSTOMER" else None


def check_password_secret(ctx: Context) -> Iterator[Check]:
    """Basic auth: the password's secret exists, and a customer-managed key of it is configured."""
    arn = ctx.config.opensearch.password_secret_arn
    if arn is None:
        yield skipped("password secret", "no opensearch.password_secret_arn")
        return
    try:
        secret = ctx.client("secretsmanager").describe_secret(SecretId=arn)
    except ClientError as exc:
        if error_code(exc) not in NOT_FOUND:
            raise
        yield failed(
            "password secret",
            f"{arn} does not exist",
            "create it with the password (or JSON with a 'password' key)",
        )
        return
    key = _customer_key(ctx, secret.get("KmsKeyId"))
    if key is not None and key != ctx.aws.password_secret_kms_key_arn:
        yield failed(
            "password secret",
            f"{secret['Name']} is encrypted under the customer-managed key {key}: the roles "
            "could not decrypt it",
            f"set aws.password_secret_kms_key_arn: {key}",
        )
        return
    yield passed("password secret", f"{secret['Name']} exists")


# CloudWatch Logs keeps at most this many resource policies per region, a quota that cannot be
# raised; a domain the stack creates needs one (Search/LogsPolicy) for its log groups.
LOGS_RESOURCE_POLICIES = 10


def check_logs_policies(ctx: Context) -> Iterator[Check]:
    if not ctx.aws.create_domain:
        yield skipped("logs resource policies", "only a domain the stack creates needs one")
        return
    policies = ctx.client("logs").describe_resource_policies()["resourcePolicies"]
    names = [str(p["policyName"]) for p in policies]
    if ctx.stack is not None and any(ctx.stack.owns(name) for name in names):
        yield passed("logs resource policies", "the stack has its policy already")
    elif len(names) >= LOGS_RESOURCE_POLICIES:
        yield failed(
            "logs resource policies",
            f"{ctx.region} has {len(names)} CloudWatch Logs resource policies, the most a "
            "region may have: the domain's "
            "log groups cannot get theirs",
            "delete a policy nothing uses (AWS advises one policy over several domains' log "
            "groups)",
            f"aws logs describe-resource-policies --region {ctx.region}\naws logs "
            "delete-resource-policy --policy-name NAME",
        )
    else:
        yield passed(
            "logs resource policies",
            f"{len(names)} of {LOGS_RESOURCE_POLICIES} in {ctx.region}: room for the domain's",
        )


def check_tables(ctx: Context) -> Iterator[Check]:
    for position, table_config in enumerate(ctx.config.tables):
        yield from _table(ctx, position, table_config)


def _table(ctx: Context, position: int, config: TableConfig) -> Iterator[Check]:
    yield _event_names(ctx, config)
    name, announced = config.name, glue_name(config.name)
    try:
        # as the planner and the jobs load it (by the name Glue stores)
        table = load_table(ctx.catalog, name)
    except PlanningError as exc:
        database, _, short = announced.partition(".")
        yield failed(
            "table exists",
            str(exc),
            "create the table in the Glue Data Catalog, or correct the name (<database>.<table>)",
            f"aws glue get-table --database-name {database} --name {short} --region "
            f"{ctx.catalog_region}",
            subject=name,
        )
        return
    yield passed("table exists", f"{table.metadata_location}", subject=name)
    yield _format_version(table, announced, name)
    yield _warehouse(ctx, table, name)
    yield _identifiers(table, config, position)


def _event_names(ctx: Context, config: TableConfig) -> Check:
    """Two configured tables that differ only in case: they name one Glue table.

    Glue announces a commit under the names it stores, in lower case, and the rule and the planner
    match it so (icecdc.catalog.glue_name).
    """
    announced = glue_name(config.name)
    twins = [
        t.name for t in ctx.config.tables if t is not config and glue_name(t.name) == announced
    ]
    if twins:
        return failed(
            "event names",
            f"{config.name} and {', '.join(twins)} name one Glue table, {announced}: Glue "
            "stores names in lower case",
            "keep one entry per table (synth refuses both)",
            subject=config.name,
        )
    spelled = (
        "" if announced == config.name else f" (its job and checkpoint keep the name {config.name})"
    )
    return passed(
        "event names",
        f"Glue announces it as {announced}; the rule and the planner match that{spelled}",
        subject=config.name,
    )


def _format_version(table: Table, announced: str, name: str) -> Check:
    version = table.format_version
    if version < 2:
        return failed(
            "format version",
            f"format version {version}: icecdc needs 2 or 3 (v1 snapshots have no sequence "
            "numbers to version documents by)",
            "upgrade the table (Spark SQL with the Iceberg extensions)",
            f"ALTER TABLE {announced} SET TBLPROPERTIES ('format-version'='2')",
            subject=name,
        )
    return passed("format version", f"v{version}", subject=name)


def _warehouse(ctx: Context, table: Table, name: str) -> Check:
    """Each table's files are in the warehouse buckets.

    The roles read only the warehouse buckets: a table whose files live
    elsewhere fails its first sync.
    """
    buckets = {
        urlsplit(location).netloc
        for location in (table.metadata_location, table.location())
        if location.startswith("s3")
    }
    outside = sorted(buckets - set(ctx.aws.warehouse_buckets))
    if outside:
        return failed(
            "warehouse location",
            f"its files are in {', '.join(outside)}, which aws.warehouse_buckets does not "
            "list: the roles may not read them",
            f"add {', '.join(outside)} to aws.warehouse_buckets",
            subject=name,
        )
    return passed(
        "warehouse location", f"in {', '.join(sorted(buckets)) or 'no S3 bucket'}", subject=name
    )


def _identifiers(table: Table, config: TableConfig, position: int) -> Check:
    try:
        columns = identifier_columns(table, config)
    except PlanningError as exc:
        return failed(
            "identifier columns",
            str(exc),
            f"correct tables[{position}].identifier_columns (columns of the current schema, "
            "primitive types, not float or double)",
            subject=config.name,
        )
    if not columns:
        return warned(
            "identifier columns",
            "none: the table is synced as insert-only (a commit that removes rows, an update "
            "or a delete, fails to plan)",
            f"set tables[{position}].identifier_columns, or the table's identifier fields",
            f"ALTER TABLE {glue_name(config.name)} SET IDENTIFIER FIELDS <column>",
            subject=config.name,
        )
    return passed("identifier columns", ", ".join(columns), subject=config.name)


CHECKS = (
    check_credentials,
    check_stack_state,
    check_bootstrap,
    check_glue_version,
    check_concurrency,
    check_service_linked_role,
    check_names,
    check_buckets,
    check_password_secret,
    check_vpc,
    check_logs_policies,
    check_domain,
    check_collection,
    check_catalog_kind,
    check_tables,
)
