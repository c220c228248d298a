"""The YAML configuration: parsed strictly into dataclasses before anything runs.

The keys are a contract other tools rely on (see the README). Every unknown key and every bad
value raises `ConfigError` naming its path in the file, e.g. ``tables[1].identifier_columns``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from icecdc.errors import ConfigError


@dataclass(frozen=True)
class CatalogConfig:
    """Any pyiceberg catalog: ``load_catalog(name, **properties)``."""

    name: str
    properties: dict[str, str]


@dataclass(frozen=True)
class StateConfig:
    """Where checkpoints and work items live."""

    type: str  # "sqlite" or "dynamodb"
    path: str | None = None  # sqlite
    table: str | None = None  # dynamodb
    region: str | None = None  # dynamodb
    endpoint_url: str | None = None  # dynamodb (moto, DynamoDB local)
    lease_seconds: float = 60.0  # a table's processing lease; renewed while held, so it outlives no crash by more


@dataclass(frozen=True)
class OpenSearchConfig:
    url: str
    username: str | None = None
    password: str | None = None
    aws_region: str | None = None  # set to sign requests with SigV4
    aws_service: str = "es"  # "es" for managed domains, "aoss" for Serverless
    verify_certs: bool = True
    bulk_chunk_size: int = 500  # documents per bulk request
    max_retries: int = 5  # for 429 and 5xx answers, with exponential backoff and jitter
    initial_backoff_seconds: float = 0.5
    max_backoff_seconds: float = 30.0


@dataclass(frozen=True)
class SparkConfig:
    master: str | None = None
    conf: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class TableConfig:
    name: str  # "<namespace>.<table>" as the catalog knows it
    index: str
    identifier_columns: tuple[str, ...] | None  # None: the schema's identifier fields
    export: bool = True
    # Keep Iceberg tags on the checkpoint snapshot and every snapshot not yet applied, so that
    # snapshot expiration keeps what icecdc still has to read (see icecdc.protection).
    protect_checkpoint: bool = False


@dataclass(frozen=True)
class Config:
    catalog: CatalogConfig
    state: StateConfig
    opensearch: OpenSearchConfig
    spark: SparkConfig
    tables: tuple[TableConfig, ...]
    aws: AwsConfig | None = None
    # Where documents that can never be written go (a directory or s3://bucket/prefix);
    # without one, such a document fails the batch.
    dead_letter: str | None = None

    def table(self, name: str) -> TableConfig:
        for table in self.tables:
            if table.name == name:
                return table
        known = ", ".join(t.name for t in self.tables)
        raise ConfigError(f"table {name!r} is not in the configuration (configured: {known})")


def load_config(path: str | Path) -> Config:
    """Read and validate a configuration file."""
    path = Path(path)
    try:
        raw = yaml.safe_load(path.read_text())
    except FileNotFoundError:
        raise ConfigError(f"configuration file {path} does not exist") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"configuration file {path} is not valid YAML: {exc}") from None
    return parse_config(raw)


def parse_config(raw: Any) -> Config:
    """Validate an already-parsed configuration mapping."""
    top = _Section(raw, "")
    config = Config(
        catalog=_parse_catalog(top.section("catalog")),
        state=_parse_state(top.section("state")),
        opensearch=_parse_opensearch(top.section("opensearch")),
        spark=_parse_spark(top.section("spark", required=False)),
        tables=_parse_tables(top.list("tables")),
        aws=_parse_aws(top.section("aws", required=False)),
        dead_letter=_parse_dead_letter(top.section("dead_letter", required=False)),
    )
    top.reject_unknown()
    return config


class _Section:
    """A mapping of the file, read key by key; remembers which keys were read."""

    def __init__(self, raw: Any, path: str) -> None:
        if raw is None:
            raw = {}
        if not isinstance(raw, dict):
            raise ConfigError(f"{path or 'the configuration'} must be a mapping, got {type(raw).__name__}")
        self.raw = raw
        self.path = path
        self.read: set[str] = set()

    def _where(self, key: str) -> str:
        return f"{self.path}.{key}" if self.path else key

    def get(self, key: str, kind: type | tuple[type, ...], default: Any = None, required: bool = False) -> Any:
        self.read.add(key)
        if key not in self.raw or self.raw[key] is None:
            if required:
                raise ConfigError(f"{self._where(key)} is required")
            return default
        value = self.raw[key]
        # bool is an int in Python; never accept one where a number is meant, or the reverse
        if not isinstance(value, kind) or (isinstance(value, bool) and bool not in _as_tuple(kind)):
            expected = " or ".join(k.__name__ for k in _as_tuple(kind))
            raise ConfigError(f"{self._where(key)} must be {expected}, got {value!r}")
        return value

    def text(self, key: str, default: str | None = None, required: bool = False) -> str | None:
        value = self.get(key, str, default, required)
        if value is not None and not value.strip():
            raise ConfigError(f"{self._where(key)} must not be empty")
        return value

    def positive_int(self, key: str, default: int) -> int:
        value = self.get(key, int, default)
        if value < 1:
            raise ConfigError(f"{self._where(key)} must be at least 1, got {value}")
        return value

    def positive_number(self, key: str, default: float) -> float:
        value = self.get(key, (int, float), default)
        if value <= 0:
            raise ConfigError(f"{self._where(key)} must be above 0, got {value}")
        return float(value)

    def section(self, key: str, required: bool = True) -> _Section:
        self.get(key, dict, required=required)
        return _Section(self.raw.get(key), self._where(key))

    def list(self, key: str) -> list[Any]:
        value = self.get(key, list, required=True)
        if not value:
            raise ConfigError(f"{self._where(key)} must list at least one entry")
        return value

    def rest(self) -> dict[str, Any]:
        """Every key not read yet, marked as read (free-form sections such as a catalog's)."""
        rest = {k: v for k, v in self.raw.items() if k not in self.read}
        self.read.update(rest)
        return rest

    def reject_unknown(self) -> None:
        unknown = sorted(set(self.raw) - self.read)
        if unknown:
            raise ConfigError(f"unknown key {self._where(unknown[0])}" + (f" (and {unknown[1:]})" if unknown[1:] else ""))


def _as_tuple(kind: type | tuple[type, ...]) -> tuple[type, ...]:
    return kind if isinstance(kind, tuple) else (kind,)


def _parse_catalog(section: _Section) -> CatalogConfig:
    name = section.text("name", required=True)
    properties = {}
    for key, value in section.rest().items():
        if isinstance(value, (dict, list)):
            raise ConfigError(f"catalog.{key} must be a scalar catalog property, got {value!r}")
        properties[str(key)] = str(value).lower() if isinstance(value, bool) else str(value)
    return CatalogConfig(name=name, properties=properties)


def _parse_state(section: _Section) -> StateConfig:
    kind = section.text("type", default="sqlite")
    lease = section.positive_number("lease_seconds", 60.0)
    if kind == "sqlite":
        state = StateConfig(type=kind, path=section.text("path", required=True), lease_seconds=lease)
    elif kind == "dynamodb":
        state = StateConfig(
            type=kind,
            table=section.text("table", required=True),
            region=section.text("region"),
            endpoint_url=section.text("endpoint_url"),
            lease_seconds=lease,
        )
    else:
        raise ConfigError(f"state.type must be 'sqlite' or 'dynamodb', got {kind!r}")
    section.reject_unknown()
    return state


def _parse_opensearch(section: _Section) -> OpenSearchConfig:
    url = section.text("url", required=True)
    if not url.startswith(("http://", "https://")):
        raise ConfigError(f"opensearch.url must start with http:// or https://, got {url!r}")
    service = section.text("aws_service", default="es")
    if service not in ("es", "aoss"):
        raise ConfigError(f"opensearch.aws_service must be 'es' or 'aoss', got {service!r}")
    config = OpenSearchConfig(
        url=url.rstrip("/"),
        username=section.text("username"),
        password=section.get("password", str),
        aws_region=section.text("aws_region"),
        aws_service=service,
        verify_certs=section.get("verify_certs", bool, default=True),
        bulk_chunk_size=section.positive_int("bulk_chunk_size", 500),
        max_retries=section.positive_int("max_retries", 5),
        initial_backoff_seconds=section.positive_number("initial_backoff_seconds", 0.5),
        max_backoff_seconds=section.positive_number("max_backoff_seconds", 30.0),
    )
    if (config.username is None) != (config.password is None):
        raise ConfigError("opensearch.username and opensearch.password go together")
    if config.username is not None and config.aws_region is not None:
        raise ConfigError("opensearch: choose basic auth (username/password) or SigV4 (aws_region), not both")
    section.reject_unknown()
    return config


def _parse_spark(section: _Section) -> SparkConfig:
    master = section.text("master")
    conf = section.section("conf", required=False).rest()
    section.reject_unknown()
    return SparkConfig(master=master, conf={str(k): str(v).lower() if isinstance(v, bool) else str(v) for k, v in conf.items()})


def _parse_tables(entries: list[Any]) -> tuple[TableConfig, ...]:
    tables: list[TableConfig] = []
    for position, entry in enumerate(entries):
        section = _Section(entry, f"tables[{position}]")
        name = section.text("name", required=True)
        if "." not in name:
            raise ConfigError(f"tables[{position}].name must be '<namespace>.<table>', got {name!r}")
        columns = section.get("identifier_columns", list)
        if columns is not None:
            if not columns or not all(isinstance(c, str) and c for c in columns):
                raise ConfigError(
                    f"tables[{position}].identifier_columns must be a non-empty list of column names, got {columns!r}"
                )
            if len(set(columns)) != len(columns):
                raise ConfigError(f"tables[{position}].identifier_columns lists a column twice: {columns!r}")
        index = section.text("index", default=name.split(".")[-1])
        if index != index.lower() or index.startswith(("_", "-", "+")) or any(c in index for c in ' "*\\<|,>/?#:'):
            raise ConfigError(f"tables[{position}].index {index!r} is not a valid OpenSearch index name")
        tables.append(
            TableConfig(
                name=name,
                index=index,
                identifier_columns=tuple(columns) if columns is not None else None,
                export=section.get("export", bool, default=True),
                protect_checkpoint=section.get("protect_checkpoint", bool, default=False),
            )
        )
        section.reject_unknown()
    names = [t.name for t in tables]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ConfigError(f"tables lists {duplicates[0]!r} more than once")
    # Two tables writing one index would overwrite and delete each other's documents (and a resync
    # of one would wipe the other), so each index belongs to exactly one table.
    owners: dict[str, int] = {}
    for position, table in enumerate(tables):
        first = owners.setdefault(table.index, position)
        if first != position:
            raise ConfigError(
                f"tables[{first}] ({tables[first].name!r}) and tables[{position}] ({table.name!r}) "
                f"both write index {table.index!r}: each table needs its own index"
            )
    return tuple(tables)


@dataclass(frozen=True)
class AwsConfig:
    """What the CDK stack needs beyond the pipeline settings (section `aws:`, read at synth time)."""

    warehouse_buckets: tuple[str, ...]  # S3 buckets holding the tables' metadata and data: the only ones the roles read
    stack_name: str = "icecdc"  # also the prefix of every resource name
    account: str | None = None  # default: CDK_DEFAULT_ACCOUNT (none needed to synthesize)
    region: str | None = None  # default: CDK_DEFAULT_REGION
    schedule_minutes: int = 5  # the fallback sweep over all tables (Glue's events are best-effort)
    glue_worker_type: str = "G.1X"
    glue_max_workers: int = 10  # auto scaling's upper bound per table's job
    glue_timeout_minutes: int = 120
    opensearch_domain_arn: str | None = None  # an existing domain signed with SigV4: scopes the roles' es:ESHttp* rights
    create_domain: bool = False  # the stack creates an OpenSearch domain; opensearch.url is then replaced by its endpoint
    domain_instance_type: str = "r7g.large.search"
    domain_instance_count: int = 2
    domain_volume_gb: int = 20
    dead_letter_prefix: str = "dead-letter/"
    alarm_email: str | None = None  # subscribed to the alarms' SNS topic
    done_ttl_days: int = 7  # finished work items are deleted by DynamoDB's TTL after this


def _parse_aws(section: _Section) -> AwsConfig | None:
    if not section.raw:
        return None
    buckets = section.get("warehouse_buckets", list, required=True)
    if not buckets or not all(isinstance(b, str) and b and "/" not in b and "*" not in b for b in buckets):
        raise ConfigError(f"aws.warehouse_buckets must list bucket names (no paths, no wildcards), got {buckets!r}")
    stack_name = section.text("stack_name", default="icecdc")
    if not all(c.isalnum() or c == "-" for c in stack_name) or not stack_name[0].isalpha():
        raise ConfigError(f"aws.stack_name must be letters, digits and '-', starting with a letter, got {stack_name!r}")
    create_domain = section.get("create_domain", bool, default=False)
    domain_arn = section.text("opensearch_domain_arn")
    if create_domain and domain_arn is not None:
        raise ConfigError("aws: choose create_domain or opensearch_domain_arn, not both")
    prefix = section.text("dead_letter_prefix", default="dead-letter/")
    config = AwsConfig(
        warehouse_buckets=tuple(buckets),
        stack_name=stack_name,
        account=section.text("account"),
        region=section.text("region"),
        schedule_minutes=section.positive_int("schedule_minutes", 5),
        glue_worker_type=section.text("glue_worker_type", default="G.1X"),
        glue_max_workers=section.positive_int("glue_max_workers", 10),
        glue_timeout_minutes=section.positive_int("glue_timeout_minutes", 120),
        opensearch_domain_arn=domain_arn,
        create_domain=create_domain,
        domain_instance_type=section.text("domain_instance_type", default="r7g.large.search"),
        domain_instance_count=section.positive_int("domain_instance_count", 2),
        domain_volume_gb=section.positive_int("domain_volume_gb", 20),
        dead_letter_prefix=prefix.strip("/") + "/",
        alarm_email=section.text("alarm_email"),
        done_ttl_days=section.positive_int("done_ttl_days", 7),
    )
    if config.glue_max_workers < 2:
        raise ConfigError("aws.glue_max_workers must be at least 2 (a driver and an executor)")
    section.reject_unknown()
    return config


def _parse_dead_letter(section: _Section) -> str | None:
    path = section.text("path")
    section.reject_unknown()
    if path is not None and not (path.startswith(("s3://", "/"))):
        raise ConfigError(f"dead_letter.path must be an absolute directory or an s3:// location, got {path!r}")
    return path
