"""Before the first deploy: what the configured catalog's kind needs beyond the stack.

S3 Tables announces a commit only through CloudTrail: without a trail recording management events
in the region, the stack's rule never fires and the sweep alone plans (every
`aws.schedule_minutes`). Glue's REST endpoint reads through Lake Formation, whose grants the stack
cannot make.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from botocore.exceptions import ClientError

from icecdc.aws.catalogs import AwsCatalog, CatalogKind
from icecdc.doctor.context import Context
from icecdc.doctor.model import Check, failed, passed, warned
from icecdc.doctor.stack import error_code

NAME = "commit events"


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
            "grant the JobRole and PlannerRole in Lake Formation after the deploy (docs/deploy.md, "
            '"Catalogs")',
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
