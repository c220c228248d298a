"""The Iceberg catalogs AWS offers, one kind each: what the bundle needs to read through it.

For each kind, in one place: how a configuration is recognised as it (the plain pyiceberg
properties), the IAM rights the planner and the jobs need to read its tables (and to write, for
the opt-in expiry guard), the EventBridge patterns of the events that announce a commit, and how
such an event names a configured table. `infra/`, the planner and doctor ask this module; nothing
else knows the kind. Events are hints: the stack's sweep plans every table on its schedule.

- **glue**: the Glue Data Catalog through pyiceberg's GlueCatalog (`type: glue`); the data in
  the warehouse buckets (`aws.warehouse_buckets`).
- **s3tables**: S3 Tables' Iceberg REST endpoint (`type: rest`, `uri:
  https://s3tables.<region>.amazonaws.com/iceberg`, `warehouse: <table bucket ARN>`, SigV4 signing
  name `s3tables`); the table bucket holds metadata and data (`s3tables:GetTableData`).
- **glue-rest**: Glue's Iceberg REST endpoint (`uri: https://glue.<region>.amazonaws.com/iceberg`,
  signing name `glue`), a federated catalog such as `<account>:s3tablescatalog/<bucket>` as the
  warehouse; Lake Formation vends the data access (`lakeformation:GetDataAccess`).
- **rest**: any other REST catalog (Polaris, Nessie, Unity, Lakekeeper), with OAuth2 client
  credentials from Secrets Manager (`catalog.credential_secret_arn`); its files in
  `aws.warehouse_buckets`; no events: the sweep plans.
- **rest-sigv4**: a REST catalog signed with SigV4 for a service the user names
  (`rest.signing-name`, e.g. `execute-api` for one behind API Gateway). The stack cannot guess
  what that service authorizes: the user lists it in `aws.catalog_grants` (actions of that
  service only, never a wildcard action), which synth requires; its files in
  `aws.warehouse_buckets`; no events: the sweep plans.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from icecdc.aws.contract import GLUE_EVENT_SOURCE, GLUE_EVENT_TYPE

CLOUDTRAIL_EVENT_TYPE = "AWS API Call via CloudTrail"
S3TABLES_EVENT_SOURCE = "aws.s3tables"
S3TABLES_COMMIT = "UpdateTableMetadataLocation"
_TABLE_BUCKET = re.compile(
    r"^arn:(?P<partition>aws[\w-]*):s3tables:(?P<region>[\w-]+):(?P<account>\d{12}):"
    r"bucket/(?P<bucket>[a-z0-9_-]{3,63})$"
)
_GLUE_WAREHOUSE = re.compile(r"^(?P<account>\d{12})(?::(?P<catalog>[\w-]+(?:/[\w-]+)*))?$")


class CatalogKind(StrEnum):
    """Which of AWS's Iceberg catalogs the configuration reads."""

    GLUE = "glue"
    S3_TABLES = "s3tables"
    GLUE_REST = "glue-rest"
    REST = "rest"
    REST_SIGV4 = "rest-sigv4"


def catalog_kind(properties: Mapping[str, str]) -> CatalogKind:
    """The kind of the configuration's `catalog:` properties (pyiceberg's own keys)."""
    if properties.get("type") == "glue":
        return CatalogKind.GLUE
    signing = properties.get("rest.signing-name", "")
    if (
        properties.get("type") == "rest"
        and properties.get("rest.sigv4-enabled", "").lower() == "true"
    ):
        if signing == "s3tables":
            return CatalogKind.S3_TABLES
        if signing == "glue":
            return CatalogKind.GLUE_REST
        return CatalogKind.REST_SIGV4
    return CatalogKind.REST


@dataclass(frozen=True)
class Grant:
    """One IAM statement as data: `infra/` makes it a policy statement."""

    actions: tuple[str, ...]
    resources: tuple[str, ...]
    why: str
    conditions: Mapping[str, Mapping[str, Any]] | None = None
    wildcards: str | None = None  # why a resource holds a wildcard (cdk-nag's IAM5)


@dataclass(frozen=True)
class EventPattern:
    """An EventBridge pattern, as `events.EventPattern` takes it."""

    source: tuple[str, ...]
    detail_type: tuple[str, ...]
    detail: Mapping[str, Any]
    description: str


@dataclass(frozen=True)
class Where:
    """The account, region and partition the stack runs in (tokens at synth time)."""

    partition: str
    region: str
    account: str


@dataclass(frozen=True)
class AwsCatalog:
    """The configured catalog as the bundle reads it: its kind, properties and tables."""

    kind: CatalogKind
    properties: Mapping[str, str]
    tables: tuple[str, ...]  # "<namespace>.<table>", as configured
    protected: tuple[str, ...] = ()  # the tables under the expiry guard
    credential_secret_arn: str | None = None  # a REST catalog's OAuth2 client credentials
    user_grants: tuple[Grant, ...] = ()  # rest-sigv4: aws.catalog_grants, as the user lists them

    @classmethod
    def of(
        cls,
        properties: Mapping[str, str],
        tables: Sequence[str],
        protected: Sequence[str] = (),
        credential_secret_arn: str | None = None,
        user_grants: Sequence[Grant] = (),
    ) -> AwsCatalog:
        kind = catalog_kind(properties)
        return cls(
            kind,
            dict(properties),
            tuple(tables),
            tuple(protected),
            credential_secret_arn,
            tuple(user_grants),
        )

    @property
    def table_bucket(self) -> re.Match[str] | None:
        """S3 Tables: the warehouse's table bucket ARN, parsed."""
        return _TABLE_BUCKET.match(self.properties.get("warehouse", ""))

    def problem(self) -> str | None:
        """What keeps the stack from deploying with this catalog, in one line; None when nothing."""
        if self.kind == CatalogKind.S3_TABLES and self.table_bucket is None:
            return (
                "catalog.warehouse must be a table bucket ARN for S3 Tables "
                f"(arn:aws:s3tables:<region>:<account>:bucket/<name>), got {self._warehouse!r}"
            )
        glue_rest = _GLUE_WAREHOUSE.match(self._warehouse or "")
        if self.kind == CatalogKind.GLUE_REST and glue_rest is None:
            return (
                "catalog.warehouse must be '<account>' or '<account>:<catalog>' for Glue's REST "
                f"endpoint, got {self._warehouse!r}"
            )
        kind = self.properties.get("type")
        if kind != "rest" and self.kind == CatalogKind.REST:
            return (
                "the stack reads the Glue Data Catalog, S3 Tables or Glue's REST endpoint: "
                f"catalog.type must be 'glue' or 'rest', not {kind!r}"
            )
        uploaded = sorted(k for k in ("credential", "token") if k in self.properties)
        if uploaded:
            return (
                f"catalog.{uploaded[0]} would be uploaded with the configuration asset: keep "
                "the client credentials in Secrets Manager, named by catalog.credential_secret_arn"
            )
        if self.kind == CatalogKind.REST and self.credential_secret_arn is None:
            return (
                'a REST catalog needs `rest.sigv4-enabled: "true"` and a `rest.signing-name` '
                "(s3tables, glue, or another service with aws.catalog_grants), or OAuth2 client "
                "credentials in catalog.credential_secret_arn"
            )
        return self._user_grants_problem()

    def _user_grants_problem(self) -> str | None:
        """What is wrong with aws.catalog_grants for this kind, in one line; None when nothing.

        Only rest-sigv4 takes them, and only for the service it signs for."""
        signing = self.properties.get("rest.signing-name", "")
        if self.kind != CatalogKind.REST_SIGV4:
            if self.user_grants:
                return (
                    "aws.catalog_grants is for a REST catalog signed with SigV4 for another "
                    f"service than s3tables or glue; the {self.kind} catalog's rights are the "
                    "stack's: remove it"
                )
            return None
        if not self.user_grants:
            return (
                f"catalog signs for {signing!r}: the stack cannot know what that service "
                f"authorizes; list it in aws.catalog_grants (actions such as '{signing}:Invoke' "
                "and the ARNs they are on: docs/deploy.md, Catalogs)"
            )
        foreign = [a for g in self.user_grants for a in g.actions if a.split(":", 1)[0] != signing]
        if foreign:
            return (
                f"aws.catalog_grants: {foreign[0]!r} is not an action of {signing!r}, the "
                "service the catalog signs for (rest.signing-name): the roles' other rights "
                "are the stack's"
            )
        return None

    @property
    def _warehouse(self) -> str | None:
        return self.properties.get("warehouse")

    def needs_warehouse_buckets(self) -> bool:
        """Whether the tables' files are in buckets the configuration must list.

        They are for the Glue Data Catalog and any REST catalog that vends no access (S3 Tables
        and Lake Formation do).
        """
        return self.kind in (CatalogKind.GLUE, CatalogKind.REST, CatalogKind.REST_SIGV4)

    # -- IAM ---------------------------------------------------------------------------------

    def read_grants(self, where: Where) -> list[Grant]:
        """What reading the configured tables needs of the catalog (for Glue: not the files')."""
        if self.kind == CatalogKind.S3_TABLES:
            return self._s3tables_grants(where, write=False)
        if self.kind == CatalogKind.GLUE_REST:
            return self._glue_rest_grants(where)
        grants = list(self.user_grants)
        if self.credential_secret_arn is not None:
            secret = (self.credential_secret_arn,)
            why = "the REST catalog's OAuth2 client credentials, read when the catalog is opened"
            grants.append(Grant(("secretsmanager:GetSecretValue",), secret, why))
        return grants

    def guard_grants(self, where: Where) -> list[Grant]:
        """What the expiry guard's tags need: a commit of the protected tables' metadata."""
        if self.kind == CatalogKind.S3_TABLES and self.protected:
            return self._s3tables_grants(where, write=True)
        return []

    def _s3tables_grants(self, where: Where, write: bool) -> list[Grant]:
        found = self.table_bucket
        assert found is not None, self.problem()
        root = f"arn:{where.partition}:s3tables:{where.region}:{where.account}"
        bucket = f"{root}:bucket/{found['bucket']}"
        names = self.protected if write else self.tables
        namespaces = sorted({t.split(".", 1)[0] for t in names})
        tables = sorted({t.split(".", 1)[1] for t in names})
        # table ARNs end in the table's id, unknown until it exists: scoped by name instead
        scoped = {"StringEquals": {"s3tables:namespace": namespaces, "s3tables:tableName": tables}}
        why_ids = (
            "a table's ARN ends in its id, known only once it exists: the bucket's tables, "
            "scoped by namespace and name"
        )
        if write:
            return [
                Grant(
                    ("s3tables:UpdateTableMetadataLocation", "s3tables:PutTableData"),
                    (f"{bucket}/table/*",),
                    "the expiry guard commits tags to the protected tables' metadata",
                    scoped,
                    why_ids,
                )
            ]
        return [
            Grant(
                (
                    "s3tables:GetTableBucket",
                    "s3tables:ListNamespaces",
                    "s3tables:ListTables",
                    "s3tables:GetNamespace",
                ),
                (bucket,),
                "the REST endpoint's config and namespace lookups on the configured table bucket",
            ),
            Grant(
                ("s3tables:GetTable", "s3tables:GetTableMetadataLocation", "s3tables:GetTableData"),
                (f"{bucket}/table/*",),
                "loading the configured tables and reading their metadata and data files",
                scoped,
                why_ids,
            ),
        ]

    def _glue_rest_grants(self, where: Where) -> list[Grant]:
        found = _GLUE_WAREHOUSE.match(self.properties.get("warehouse", ""))
        assert found is not None, self.problem()
        catalog = found["catalog"]
        root = f"arn:{where.partition}:glue:{where.region}:{where.account}"
        resources = [f"{root}:catalog"]
        if catalog:
            parts = catalog.split("/")
            resources += [f"{root}:catalog/{'/'.join(parts[: n + 1])}" for n in range(len(parts))]
        prefix = f"{catalog}/" if catalog else ""
        for name in self.tables:
            database, table = name.split(".", 1)
            resources += [
                f"{root}:database/{prefix}{database}",
                f"{root}:table/{prefix}{database}/{table}",
            ]
        return [
            Grant(
                ("glue:GetCatalog", "glue:GetDatabase", "glue:GetTable", "glue:GetTables"),
                tuple(sorted(set(resources))),
                "the federated catalog, the configured databases and tables, read only",
            ),
            Grant(
                ("lakeformation:GetDataAccess",),
                ("*",),
                "Lake Formation vends the tables' data access",
                wildcards="lakeformation:GetDataAccess has no resource-level permissions: "
                "Lake Formation's own grants scope it",
            ),
        ]

    # -- events --------------------------------------------------------------------------------

    def commit_events(self, glue_names: Sequence[tuple[str, str]] = ()) -> list[EventPattern]:
        """The events that announce a commit of a configured table (none: the sweep alone)."""
        if self.kind == CatalogKind.GLUE:
            databases = sorted({d for d, _ in glue_names})
            tables = sorted({t for _, t in glue_names})
            changed = {
                "databaseName": databases,
                "tableName": tables,
                "typeOfChange": ["UpdateTable"],
            }
            glue = "an Iceberg commit through the Glue Data Catalog (UpdateTable) of a table"
            return [EventPattern((GLUE_EVENT_SOURCE,), (GLUE_EVENT_TYPE,), changed, glue)]
        if self.kind == CatalogKind.S3_TABLES:
            bucket = self.properties["warehouse"]
            recorded: dict[str, Any] = {
                "eventSource": ["s3tables.amazonaws.com"],
                "eventName": [S3TABLES_COMMIT],
                "requestParameters": {"tableBucketARN": [bucket]},
            }
            s3tables = (
                "an Iceberg commit to the table bucket (UpdateTableMetadataLocation, CloudTrail)"
            )
            return [
                EventPattern((S3TABLES_EVENT_SOURCE,), (CLOUDTRAIL_EVENT_TYPE,), recorded, s3tables)
            ]
        return []  # Glue's REST endpoint: whether federated tables announce commits is undocumented


def s3tables_event_table(event: Mapping[str, Any], warehouse: str) -> str | None:
    """'<namespace>.<table>' of an S3 Tables commit CloudTrail recorded in `warehouse`'s bucket."""
    detail = event.get("detail")
    if event.get("source") != S3TABLES_EVENT_SOURCE or not isinstance(detail, dict):
        return None
    if detail.get("eventName") != S3TABLES_COMMIT:
        return None
    parameters = detail.get("requestParameters")
    if not isinstance(parameters, dict) or parameters.get("tableBucketARN") != warehouse:
        return None
    namespace, name = parameters.get("namespace"), parameters.get("name")
    if not isinstance(namespace, str) or not isinstance(name, str) or not namespace or not name:
        return None
    return f"{namespace}.{name}"
