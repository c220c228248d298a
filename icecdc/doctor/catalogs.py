"""What the configured catalog's kind needs beyond the stack, before and after the deploy.

S3 Tables announces a commit only through CloudTrail: without a trail recording management events
in the region, the stack's rule never fires and the sweep alone plans (every
`aws.schedule_minutes`). Glue's REST endpoint reads through Lake Formation, whose grants the stack
cannot make: once the stack's roles exist, `doctor after` lists what Lake Formation grants them on
the configured databases and tables.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from botocore.exceptions import ClientError

from icecdc.aws.catalogs import AwsCatalog, CatalogKind
from icecdc.doctor.context import Context
from icecdc.doctor.model import Check, failed, passed, skipped, warned
from icecdc.doctor.stack import Logical, error_code

NAME = "commit events"
LAKE_FORMATION = "lake formation"
# What reading a table through Lake Formation takes: (resource type, permission), by what it is on.
DATABASE_PERMISSIONS = ("DESCRIBE",)
TABLE_PERMISSIONS = ("SELECT", "DESCRIBE")


def check_catalog_kind(ctx: Context) -> Iterator[Check]:
    """Whether the catalog's commits announce themselves to the stack, or only the sweep plans."""
    catalog = AwsCatalog.of(ctx.config.catalog.properties, [t.name for t in ctx.config.tables])
    if catalog.kind == CatalogKind.S3_TABLES:
        yield from _table_bucket(ctx, catalog)
        yield _management_trail(ctx)
    elif catalog.kind == CatalogKind.GLUE_REST:
        yield warned(
            NAME,
            "Glue's REST endpoint: whether federated tables announce commits is not documented, "
            "so the sweep plans them every aws.schedule_minutes; Lake Formation must grant the "
            "stack's roles DESCRIBE on the databases and SELECT on the tables",
            "grant the JobRole and PlannerRole in Lake Formation after the deploy; `icecdc doctor "
            'after` checks the grants (docs/deploy.md, "Catalogs")',
        )


def _table_bucket(ctx: Context, catalog: AwsCatalog) -> Iterator[Check]:
    """The table bucket the warehouse names, and each configured table in it."""
    bucket = str(catalog.properties.get("warehouse"))
    s3tables = ctx.client("s3tables")
    try:
        s3tables.get_table_bucket(tableBucketARN=bucket)
    except ClientError as exc:
        yield failed(
            "table bucket",
            f"{bucket}: {error_code(exc) or exc}",
            "create the table bucket, or correct catalog.warehouse (its ARN)",
            f"aws s3tables create-table-bucket --name {bucket.rsplit('/', 1)[-1]} "
            f"--region {ctx.region}",
        )
        return
    yield passed("table bucket", bucket)
    for name in catalog.tables:
        namespace, table = name.split(".", 1)
        try:
            s3tables.get_table(tableBucketARN=bucket, namespace=namespace, name=table)
        except ClientError as exc:
            yield failed(
                "table exists",
                f"{name} in {bucket}: {error_code(exc) or exc}",
                "create the table in the table bucket, or correct the name (<namespace>.<table>)",
                subject=name,
            )
            continue
        yield passed("table exists", f"{name} in {bucket}", subject=name)


def _management_trail(ctx: Context) -> Check:
    """A trail that logs in this region and records management events (writes at least)."""
    cloudtrail = ctx.client("cloudtrail")
    try:
        trails = cloudtrail.describe_trails(includeShadowTrails=True)["trailList"]
        recording = [t for t in trails if _logs_here(cloudtrail, t, ctx.region)]
    except ClientError as exc:
        return warned(
            NAME,
            f"could not read the trails ({error_code(exc) or exc}): S3 Tables commits reach the "
            "stack only through a trail recording management events",
            "allow cloudtrail:DescribeTrails, GetTrailStatus, GetEventSelectors; or check by hand",
        )
    if not recording:
        return warned(
            NAME,
            f"no trail records management events in {ctx.region}: S3 Tables commits reach the "
            "stack only through CloudTrail, so the sweep alone plans (every aws.schedule_minutes)",
            "create a trail with management events (write) in this region",
            "aws cloudtrail create-trail --name icecdc-events --s3-bucket-name <bucket> "
            f"--region {ctx.region}",
        )
    return passed(
        NAME, f"trail {recording[0]['Name']} records management events: commits announce themselves"
    )


def _logs_here(cloudtrail: Any, trail: dict[str, Any], region: str) -> bool:
    if trail.get("HomeRegion") != region and not trail.get("IsMultiRegionTrail"):
        return False
    if not cloudtrail.get_trail_status(Name=trail["TrailARN"]).get("IsLogging"):
        return False
    selectors = cloudtrail.get_event_selectors(TrailName=trail["TrailARN"])
    basic = selectors.get("EventSelectors") or []
    advanced = selectors.get("AdvancedEventSelectors") or []
    if not basic and not advanced:
        return True  # a trail's default: every management event
    if any(
        s.get("IncludeManagementEvents", True) and s.get("ReadWriteType") in ("All", "WriteOnly")
        for s in basic
    ):
        return True
    return any(
        f.get("Field") == "eventCategory" and "Management" in f.get("Equals", [])
        for s in advanced
        for f in s.get("FieldSelectors", [])
    )


def check_lake_formation(ctx: Context) -> Iterator[Check]:
    """Glue's REST endpoint: whether Lake Formation lets the stack's roles read each table.

    The job's and the planner's roles need DESCRIBE on each configured database, SELECT and
    DESCRIBE on each table; a role without one fails, naming the role, the permission and the
    grant that gives it."""
    catalog = AwsCatalog.of(ctx.config.catalog.properties, [t.name for t in ctx.config.tables])
    if catalog.kind != CatalogKind.GLUE_REST:
        return
    stack = ctx.stack if ctx.stack is not None and ctx.stack.usable else None
    roles = (
        {r: stack.physical(r) for r in (Logical.JOB_ROLE, Logical.PLANNER_ROLE)} if stack else {}
    )
    if not roles or None in roles.values():
        yield skipped(LAKE_FORMATION, "the stack is not deployed: its roles have no grants yet")
        return
    catalog_id = str(catalog.properties.get("warehouse"))
    try:
        arns = {
            str(role): str(ctx.client("iam").get_role(RoleName=name)["Role"]["Arn"])
            for role, name in roles.items()
        }
        held = [
            *_permissions(ctx.client("lakeformation"), "DATABASE"),
            *_permissions(ctx.client("lakeformation"), "TABLE"),
        ]
    except ClientError as exc:
        yield warned(
            LAKE_FORMATION,
            f"could not list Lake Formation's permissions ({error_code(exc) or exc}): the roles "
            "read the tables only with DESCRIBE and SELECT granted there",
            "run the doctor as a data lake administrator, or check the grants by hand",
            f"aws lakeformation list-permissions --resource-type TABLE --region {ctx.region}",
        )
        return
    for name in catalog.tables:
        database, table = name.split(".", 1)
        for role, arn in arns.items():
            missing = missing_grants(held, arn, catalog_id, database, table)
            if not missing:
                granted = ", ".join(TABLE_PERMISSIONS)
                yield passed(LAKE_FORMATION, f"{role} may {granted} {name}", subject=name)
                continue
            lacks = " and ".join(
                f"{', '.join(p)} on {'database ' + database if kind == 'DATABASE' else name}"
                for kind, p in missing.items()
            )
            commands = [
                grant_command(ctx.region, arn, catalog_id, database, table, kind, p)
                for kind, p in missing.items()
            ]
            yield failed(
                LAKE_FORMATION,
                f"{role} ({arn}) lacks {lacks} in Lake Formation",
                "as a data lake administrator, grant the role (docs/deploy.md, Catalogs)",
                "\n".join(commands),
                subject=name,
            )


def _permissions(lakeformation: Any, resource_type: str) -> Iterator[Mapping[str, Any]]:
    """Every permission Lake Formation lists on resources of a type, page by page."""
    token = None
    while True:
        page = lakeformation.list_permissions(
            ResourceType=resource_type, **({"NextToken": token} if token else {})
        )
        yield from page.get("PrincipalResourcePermissions", [])
        token = page.get("NextToken")
        if not token:
            return


def missing_grants(
    held: Iterable[Mapping[str, Any]], principal: str, catalog_id: str, database: str, table: str
) -> dict[str, tuple[str, ...]]:
    """What `principal` lacks to read `database`.`table` of `catalog_id`; {} when nothing.

    The permissions lacking by "DATABASE" and "TABLE". ALL covers every permission, a grant on
    all the database's tables (TableWildcard) the table."""
    on_database: set[str] = set()
    on_table: set[str] = set()
    for grant in held:
        if grant.get("Principal", {}).get("DataLakePrincipalIdentifier") != principal:
            continue
        resource = grant.get("Resource", {})
        permissions = set(grant.get("Permissions", []))
        found = resource.get("Database")
        if found and (found.get("CatalogId"), found.get("Name")) == (catalog_id, database):
            on_database |= permissions
        found = resource.get("Table")
        in_database = found and (found.get("CatalogId"), found.get("DatabaseName")) == (
            catalog_id,
            database,
        )
        if in_database and (found.get("Name") == table or "TableWildcard" in found):
            on_table |= permissions
    missing = {
        "DATABASE": tuple(p for p in DATABASE_PERMISSIONS if p not in on_database),
        "TABLE": tuple(p for p in TABLE_PERMISSIONS if p not in on_table),
    }
    everything = {"DATABASE": "ALL" in on_database, "TABLE": "ALL" in on_table}
    return {kind: p for kind, p in missing.items() if p and not everything[kind]}


def grant_command(
    region: str,
    principal: str,
    catalog_id: str,
    database: str,
    table: str,
    kind: str,
    permissions: Iterable[str],
) -> str:
    """The AWS CLI command that grants `permissions` on the database or the table."""
    if kind == "DATABASE":
        resource: dict[str, Any] = {"Database": {"CatalogId": catalog_id, "Name": database}}
    else:
        resource = {"Table": {"CatalogId": catalog_id, "DatabaseName": database, "Name": table}}
    return (
        f"aws lakeformation grant-permissions --region {region} --principal "
        f"DataLakePrincipalIdentifier={principal} --resource '{json.dumps(resource)}' "
        f"--permissions {' '.join(permissions)}"
    )
