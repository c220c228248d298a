"""The YAML configuration: validated strictly into frozen pydantic models before anything runs.

The keys are a contract other tools rely on (see the README). Every unknown key and every bad
value raises `ConfigError` naming its path in the file, e.g. ``tables[1].identifier_columns``.
Each default is written once, on its field. Values are strict: a number is never read from a
string, a bool never from a number (or the reverse); an explicit ``null`` means the default.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any, Literal, Self, TypeVar
from urllib.parse import urlsplit

import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_core import ErrorDetails

from icecdc.errors import ConfigError
from icecdc.model import EngineChoice, StateStoreType

# Stands for the path of the key a validator checks, in the messages the validators raise:
# `_message` puts the path there (a validator sees values, not where they are in the file).
_AT = "{at}"


def _not_blank(value: str) -> str:
    if not value.strip():
        raise ValueError(f"{_AT} must not be empty")
    return value


def _scalar_text(value: Any) -> Any:
    """A catalog property or Spark setting as the string its consumer expects (YAML `true` → "true")."""
    if isinstance(value, dict | list):
        raise ValueError(f"{_AT} must be a scalar setting, got {value!r}")  # noqa: TRY004 (pydantic reports ValueErrors)
    return str(value).lower() if isinstance(value, bool) else str(value)


Text = Annotated[str, AfterValidator(_not_blank)]
Setting = Annotated[str, BeforeValidator(_scalar_text)]


class _Model(BaseModel):
    """A section of the file: unknown keys refused, values strict, instances immutable."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    @model_validator(mode="before")
    @classmethod
    def _null_means_default(cls, data: Any) -> Any:
        return {k: v for k, v in data.items() if v is not None} if isinstance(data, dict) else data

    def as_mapping(self) -> dict[str, Any]:
        """The section's keys as the file names them (sections within stay models)."""
        keys = {field.alias or name: getattr(self, name) for name, field in type(self).model_fields.items()}
        return {**keys, **(self.__pydantic_extra__ or {})}

    def revised(self, **changes: Any) -> Self:
        """A copy with `changes` (keys as the file names them; a section may be given as a mapping),
        validated as the file is: `model_copy(update=...)` would check nothing."""
        return _validated(type(self), {**self.as_mapping(), **changes})


class CatalogConfig(_Model):
    """Any pyiceberg catalog: ``load_catalog(name, **properties)``; every key but `name` is a property."""

    model_config = ConfigDict(extra="allow")
    __pydantic_extra__: dict[str, Setting] = Field(init=False)

    name: Text

    @property
    def properties(self) -> dict[str, str]:
        return dict(self.__pydantic_extra__ or {})


class _StoreConfig(_Model):
    lease_seconds: float = Field(60.0, gt=0)  # a table's processing lease; renewed while held, so it outlives no crash by more


class SqliteStateConfig(_StoreConfig):
    """Checkpoints and work items in a local SQLite file."""

    type: Literal[StateStoreType.SQLITE] = StateStoreType.SQLITE
    path: Text


class DynamoDbStateConfig(_StoreConfig):
    """Checkpoints and work items in a DynamoDB table (the stack's, in AWS)."""

    type: Literal[StateStoreType.DYNAMODB] = StateStoreType.DYNAMODB
    table: Text
    region: Text | None = None
    endpoint_url: Text | None = None  # moto, DynamoDB local
    done_ttl_days: int = Field(7, ge=1)  # finished work items are deleted by DynamoDB's TTL after this


# Where checkpoints and work items live; `type` picks the store (default sqlite).
StateConfig = Annotated[SqliteStateConfig | DynamoDbStateConfig, Field(discriminator="type")]


class OpenSearchConfig(_Model):
    url: Text
    username: Text | None = None
    password: str | None = Field(None, repr=False)  # never in a repr, a log line or an error
    # Or the password in AWS Secrets Manager (the secret's string, or its JSON's "password"), read
    # when a client is opened: in AWS, no secret is in the config file, an asset or the template.
    password_secret_arn: Text | None = None
    aws_region: Text | None = None  # set to sign requests with SigV4
    aws_service: Literal["es"] = "es"  # managed domains; Serverless ("aoss") is refused, see _managed_domains_only
    verify_certs: bool = True
    bulk_chunk_size: int = Field(500, ge=1)  # documents per bulk request
    # Bytes of bulk body per request (action lines and documents, as sent). Amazon OpenSearch Service
    # refuses HTTP requests over 10 MiB on its smallest instance types (100 MiB on large ones), and
    # AWS advises bulk requests of 5 to 15 MiB: 5 MiB stays under every domain's limit. A document
    # whose action alone is larger is a dead letter, never sent.
    max_chunk_bytes: int = Field(5 * 1024 * 1024, gt=0)
    max_retries: int = Field(5, ge=1)  # for 429 and 5xx answers, with exponential backoff and jitter
    initial_backoff_seconds: float = Field(0.5, gt=0)
    max_backoff_seconds: float = Field(30.0, gt=0)

    @field_validator("url")
    @classmethod
    def _http(cls, url: str) -> str:
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"{_AT} must start with http:// or https://, got {url!r}")
        if "@" in urlsplit(url).netloc:  # the URL is not quoted back: it holds a secret
            raise ValueError(
                f"{_AT} must not carry credentials (user:password@host): they would reach logs and error "
                "messages; set opensearch.username and opensearch.password instead"
            )
        return url.rstrip("/")

    @field_validator("aws_service", mode="before")
    @classmethod
    def _managed_domains_only(cls, service: Any) -> Any:
        if service == "aoss":
            raise ValueError(
                f"{_AT} 'aoss' (OpenSearch Serverless) is not supported: icecdc checks an endpoint with GET /, which "
                "Serverless answers 404; a resync removes what the table lost with a scroll, which Serverless lacks; "
                "and Serverless does not document external versions, which keep replayed writes harmless "
                "(docs/deploy.md). Use a managed domain (aws_service: es)"
            )
        return service

    @model_validator(mode="after")
    def _one_way_to_authenticate(self) -> Self:
        if self.password is not None and self.password_secret_arn is not None:
            raise ValueError(f"{_AT}: set password or password_secret_arn, not both")
        if (self.username is None) != (self.password is None and self.password_secret_arn is None):
            raise ValueError(f"{_AT}.username and {_AT}.password (or password_secret_arn) go together")
        if self.username is not None and self.aws_region is not None:
            raise ValueError(f"{_AT}: choose basic auth (username/password) or SigV4 (aws_region), not both")
        return self


class SparkConfig(_Model):
    master: Text | None = None
    conf: dict[str, Setting] = Field(default_factory=dict)


class BatchConfig(_Model):
    """How much one pass applies (a Glue run makes as many passes as it has time for). Each pass
    ends with a checkpoint, and an export's files are recorded as they complete, so a run that is
    stopped resumes where the last pass ended. A pass always takes at least one snapshot, or one
    export file; a single change snapshot larger than the caps is still applied whole."""

    max_files: int = Field(default=10_000, gt=0)  # data and delete files to read in one pass
    max_bytes: int = Field(default=64 * 2**30, gt=0)  # their total size (compressed, as stored)
    # The memory budget of one task reading a copy-on-write rewrite (compressed bytes as stored):
    # a partition's rewrite up to this size is read whole, so unchanged rows cancel in Arrow; a
    # larger one is cut into ranges of its identifier, each about this size, read in parallel
    # (without column bounds in the manifests: file by file, cancelled after the shuffle). A task
    # holds 10-40 times this in memory, as the data compresses (make bench: memory probe).
    max_rewrite_bytes: int = Field(default=16 * 2**20, gt=0)


class EngineConfig(_Model):
    """Where each pass runs. `auto`: in-process (Arrow, no JVM: seconds for a small commit) when the
    pass reads at most all three limits, else Spark; `spark` or `in_process` force one engine. A
    pass never mixes them. In-process, one core reads and a pass's changed rows are held in memory
    (about 0.7 KiB a row): the limits bound its time and memory, well within the planner Lambda's."""

    use: Literal[EngineChoice.AUTO, EngineChoice.SPARK, EngineChoice.IN_PROCESS] = EngineChoice.AUTO
    # What a pass reads (data and delete files, their rows, their bytes as stored) up to which `auto`
    # stays in-process. Measured (`python -m bench.crossover`): on 2 cores the in-process engine was
    # faster than Spark at every size up to 10^6 rows read; 500,000 rows take it about 30 s and
    # 400 MiB, so that a planner Lambda applies them within its time budget.
    in_process_max_rows: int = Field(default=500_000, gt=0)
    in_process_max_bytes: int = Field(default=64 * 2**20, gt=0)
    in_process_max_files: int = Field(default=200, gt=0)


# How string columns are mapped: text with a `keyword` sub-field, or keyword only (icecdc.index).
StringMapping = Literal["text", "keyword"]


class TableConfig(_Model):
    name: Text  # "<namespace>.<table>" as the catalog knows it
    index: Text  # default: the name's last part
    identifier_columns: tuple[Text, ...] | None = Field(None, strict=False)  # None: the schema's identifier fields
    export: bool = True
    # Keep Iceberg tags on the checkpoint snapshot and every snapshot not yet applied, so that
    # snapshot expiration keeps what icecdc still has to read (see icecdc.protection).
    protect_checkpoint: bool = False
    # The index icecdc creates: the mapping derived from the schema (icecdc.index) with `mappings`
    # merged over it and these `settings`; or, instead, the index template named `index_template`.
    strings: StringMapping = "text"
    mappings: dict[str, Any] | None = None
    settings: dict[str, Any] | None = None
    index_template: Text | None = None

    @model_validator(mode="before")
    @classmethod
    def _index_defaults_to_the_table(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("index") is None and isinstance(data.get("name"), str):
            return {**data, "index": data["name"].split(".")[-1]}
        return data

    @field_validator("name")
    @classmethod
    def _qualified(cls, name: str) -> str:
        if "." not in name:
            raise ValueError(f"{_AT} must be '<namespace>.<table>', got {name!r}")
        return name

    @field_validator("index")
    @classmethod
    def _valid_index_name(cls, index: str) -> str:
        if index != index.lower() or index.startswith(("_", "-", "+")) or any(c in index for c in ' "*\\<|,>/?#:'):
            raise ValueError(f"{_AT} {index!r} is not a valid OpenSearch index name")
        return index

    @field_validator("mappings")
    @classmethod
    def _mapping_of_fields(cls, mappings: dict[str, Any] | None) -> dict[str, Any] | None:
        properties = (mappings or {}).get("properties", {})
        if not isinstance(properties, dict):
            raise ValueError(f"{_AT}.properties must be a mapping of field names to fields, got {properties!r}")
        _check_fields(properties, f"{_AT}.properties")
        return mappings

    @model_validator(mode="after")
    def _template_or_own_mapping(self) -> Self:
        if self.index_template is not None and (self.mappings is not None or self.settings is not None or self.strings != "text"):
            raise ValueError(
                f"{_AT}: index_template applies the template's mappings and settings; "
                "choose it or mappings/settings/strings, not both"
            )
        return self

    @field_validator("identifier_columns")
    @classmethod
    def _distinct_columns(cls, columns: tuple[str, ...] | None) -> tuple[str, ...] | None:
        if columns is not None and not columns:
            raise ValueError(f"{_AT} must be a non-empty list of column names, got []")
        if columns is not None and len(set(columns)) != len(columns):
            raise ValueError(f"{_AT} lists a column twice: {list(columns)!r}")
        return columns


def _check_fields(properties: dict[str, Any], at: str) -> None:
    """Each field of a mapping's `properties` is a mapping; an object's `properties` too, within."""
    for name, field in properties.items():
        if not isinstance(field, dict):
            raise ValueError(f"{at}.{name} must be a mapping of the field's parameters, got {field!r}")
        inner = field.get("properties", {})
        if not isinstance(inner, dict):
            raise ValueError(f"{at}.{name}.properties must be a mapping of field names to fields, got {inner!r}")
        _check_fields(inner, f"{at}.{name}.properties")


# The retention periods CloudWatch Logs accepts, in days (aws.log_retention_days).
LOG_RETENTION_DAYS = (1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288, 3653)


class SubnetConfig(_Model):
    id: Text
    availability_zone: Text
    route_table_id: Text | None = None  # the subnet's route table: where aws.vpc.create_endpoints adds S3 and DynamoDB


class VpcConfig(_Model):
    """An existing VPC (section `aws.vpc`): the Glue jobs run in it (a Glue network connection in the
    first subnet) and a domain the stack creates is placed in it, with security groups the stack creates."""

    vpc_id: Text
    # Private subnets, one per availability zone; a created domain spans the first two or three.
    subnets: tuple[SubnetConfig, ...] = Field(strict=False, min_length=1)
    # The stack creates the VPC endpoints its parts need (for subnets without a NAT gateway): gateway
    # endpoints for S3 and DynamoDB on the subnets' route tables, interface endpoints for the rest
    # (docs/deploy.md). False: the VPC must reach those services already.
    create_endpoints: bool = False

    @field_validator("subnets")
    @classmethod
    def _one_per_zone(cls, subnets: tuple[SubnetConfig, ...]) -> tuple[SubnetConfig, ...]:
        zones = [s.availability_zone for s in subnets]
        if len(set(zones)) != len(zones):
            raise ValueError(f"{_AT} must be in different availability zones, got {zones}")
        return subnets

    @model_validator(mode="after")
    def _routes_for_gateways(self) -> Self:
        missing = [s.id for s in self.subnets if s.route_table_id is None]
        if self.create_endpoints and missing:
            raise ValueError(
                f"{_AT}.create_endpoints needs each subnet's route_table_id (the S3 and DynamoDB gateway endpoints are "
                f"routes): missing for {', '.join(missing)}"
            )
        return self


def _key_arn(key: str) -> None:
    """A KMS key by its ARN (a policy's Resource: an alias or a bare ID would grant nothing)."""
    if not re.fullmatch(r"arn:aws[\w-]*:kms:[\w-]+:\d{12}:key/[\w-]+", key):
        raise ValueError(f"{_AT} must be KMS key ARNs (arn:aws:kms:<region>:<account>:key/<id>), got {key!r}")


class AwsConfig(_Model):
    """What the CDK stack needs beyond the pipeline settings (section `aws:`, read at synth time)."""

    # The buckets holding the tables' metadata and data: the only ones the roles read.
    warehouse_buckets: tuple[str, ...] = Field(strict=False)
    # Customer-managed KMS keys the warehouse buckets' objects are encrypted with (SSE-KMS): the roles
    # that read them get kms:Decrypt on these keys, through S3 only. Default: none (SSE-S3, or AWS-managed keys).
    warehouse_kms_key_arns: tuple[str, ...] = Field((), strict=False)
    # The customer-managed KMS key of opensearch.password_secret_arn, if it has one: kms:Decrypt through
    # Secrets Manager for the roles that read the secret. Default: none (the secret's AWS-managed key).
    password_secret_kms_key_arn: Text | None = None
    stack_name: Text = "icecdc"  # also the prefix of every resource name
    account: Text | None = None  # default: CDK_DEFAULT_ACCOUNT (none needed to synthesize)
    region: Text | None = None  # default: CDK_DEFAULT_REGION
    schedule_minutes: int = Field(5, ge=1)  # the fallback sweep over all tables (Glue's events are best-effort)
    # The planner's events wait in a queue up to this long (Lambda's SQS batching window, at most 300 s),
    # so that a burst of commits of one table is planned once.
    planner_batch_window_seconds: int = Field(20, ge=1, le=300)
    # The planner applies a batch the in-process engine takes (see `engine:`) itself, in seconds and
    # without a Glue run; it then reaches OpenSearch from the Lambda. False: every batch starts the job.
    planner_applies: bool = True
    # Concurrency reserved for the planner, or none (the default): the queue's event source already
    # starts at most 2 planners at once, and reserving fails to deploy in accounts whose Lambda
    # concurrency quota is low (Lambda keeps 100 unreserved). At least the event source's 2, or it
    # would be throttled (docs/deploy.md).
    planner_reserved_concurrency: int | None = Field(None, ge=2)
    glue_worker_type: Text = "G.1X"
    glue_max_workers: int = 10  # auto scaling's upper bound per table's job
    glue_timeout_minutes: int = Field(120, ge=1)
    opensearch_domain_arn: Text | None = None  # an existing domain signed with SigV4: scopes the roles' es:ESHttp* rights
    create_domain: bool = False  # the stack creates an OpenSearch domain; opensearch.url is then replaced by its endpoint
    domain_instance_type: Text = "r7g.large.search"
    domain_instance_count: int = Field(2, ge=1)
    domain_volume_gb: int = Field(20, ge=1)
    # With create_domain: the IAM role (or user) that administers the domain (all_access and
    # security_manager); the domain's master user is a role of the stack that maps roles at deploy time.
    domain_admin_arn: Text | None = None
    vpc: VpcConfig | None = None  # the jobs (and a created domain) in an existing VPC; default: public endpoints
    dead_letter_prefix: Text = "dead-letter/"
    dead_letter_retention_days: int = Field(90, ge=1)  # dead letters hold whole documents (personal data)
    alarm_email: Text | None = None  # subscribed to the alarms' SNS topic
    log_retention_days: int = 30  # the jobs', the planner's and a created domain's log groups (CloudWatch's periods)

    @model_validator(mode="before")
    @classmethod
    def _moved_keys(cls, data: Any) -> Any:
        if isinstance(data, dict) and "done_ttl_days" in data:
            raise ValueError(
                f"{_AT}.done_ttl_days moved to state.done_ttl_days (with state type dynamodb; at run time the stack's "
                "state table keeps it)"
            )
        return data

    @field_validator("warehouse_buckets")
    @classmethod
    def _bucket_names(cls, buckets: tuple[str, ...]) -> tuple[str, ...]:
        if not buckets or not all(b and "/" not in b and "*" not in b for b in buckets):
            raise ValueError(f"{_AT} must list bucket names (no paths, no wildcards), got {list(buckets)!r}")
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
            raise ValueError(f"{_AT} must be letters, digits and '-', starting with a letter, got {name!r}")
        return name

    @field_validator("glue_max_workers")
    @classmethod
    def _driver_and_executor(cls, workers: int) -> int:
        if workers < 2:
            raise ValueError(f"{_AT} must be at least 2 (a driver and an executor), got {workers}")
        return workers

    @field_validator("log_retention_days")
    @classmethod
    def _cloudwatch_period(cls, days: int) -> int:
        if days not in LOG_RETENTION_DAYS:
            raise ValueError(
                f"{_AT} must be one of CloudWatch Logs' periods {', '.join(map(str, LOG_RETENTION_DAYS))}, got {days}"
            )
        return days

    @field_validator("dead_letter_prefix")
    @classmethod
    def _one_trailing_slash(cls, prefix: str) -> str:
        return prefix.strip("/") + "/"

    @model_validator(mode="after")
    def _one_domain(self) -> Self:
        if self.create_domain and self.opensearch_domain_arn is not None:
            raise ValueError(f"{_AT}: choose create_domain or opensearch_domain_arn, not both")
        if self.create_domain and self.domain_admin_arn is None:
            raise ValueError(
                f"{_AT}.domain_admin_arn is required with create_domain: the IAM role that administers the domain "
                "(the jobs' role only writes the configured indexes)"
            )
        if self.domain_admin_arn is not None and not self.create_domain:
            raise ValueError(f"{_AT}.domain_admin_arn is for a domain the stack creates (create_domain: true)")
        if self.domain_admin_arn is not None and not re.fullmatch(
            r"arn:aws[\w-]*:iam::\d{12}:(role|user)/.+", self.domain_admin_arn
        ):
            raise ValueError(f"{_AT}.domain_admin_arn must be an IAM role or user ARN, got {self.domain_admin_arn!r}")
        return self


class DeadLetterConfig(_Model):
    """Where documents that can never be written go; without one, such a document fails the batch."""

    path: Text | None = None

    @field_validator("path")
    @classmethod
    def _absolute(cls, path: str) -> str:
        if not path.startswith(("s3://", "/")):
            raise ValueError(f"{_AT} must be an absolute directory or an s3:// location, got {path!r}")
        return path


class Config(_Model):
    catalog: CatalogConfig
    state: StateConfig
    opensearch: OpenSearchConfig
    spark: SparkConfig = Field(default_factory=SparkConfig)
    batch: BatchConfig = Field(default_factory=BatchConfig)
    engine: EngineConfig = Field(default_factory=EngineConfig)
    tables: tuple[TableConfig, ...] = Field(strict=False)
    aws: AwsConfig | None = None
    # The file's `dead_letter:` section; read `dead_letter` (its path).
    dead_letter_section: DeadLetterConfig = Field(default_factory=DeadLetterConfig, alias="dead_letter")

    @property
    def dead_letter(self) -> str | None:
        """Where documents that can never be written go (a directory or s3://bucket/prefix), or None."""
        return self.dead_letter_section.path

    def with_dead_letter(self, path: str) -> Config:
        return self.revised(dead_letter={"path": path})

    @field_validator("state", mode="before")
    @classmethod
    def _sqlite_by_default(cls, state: Any) -> Any:
        if isinstance(state, dict) and state.get("type") is None:
            return {**state, "type": SqliteStateConfig.model_fields["type"].default}
        return state

    @field_validator("aws", mode="before")
    @classmethod
    def _empty_aws_is_none(cls, aws: Any) -> Any:
        return None if aws == {} else aws

    @field_validator("tables")
    @classmethod
    def _some_tables(cls, tables: tuple[TableConfig, ...]) -> tuple[TableConfig, ...]:
        if not tables:
            raise ValueError(f"{_AT} must list at least one entry")
        return tables

    @model_validator(mode="after")
    def _one_index_per_table(self) -> Self:
        names = [t.name for t in self.tables]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"tables lists {duplicates[0]!r} more than once")
        # Two tables writing one index would overwrite and delete each other's documents (and a resync
        # of one would wipe the other), so each index belongs to exactly one table.
        owners: dict[str, int] = {}
        for position, table in enumerate(self.tables):
            first = owners.setdefault(table.index, position)
            if first != position:
                raise ValueError(
                    f"tables[{first}] ({self.tables[first].name!r}) and tables[{position}] ({table.name!r}) "
                    f"both write index {table.index!r}: each table needs its own index"
                )
        return self

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
    return _validated(Config, {} if raw is None else raw)


_M = TypeVar("_M", bound=_Model)


def _validated(model: type[_M], raw: Any) -> _M:
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError("; ".join(_message(e) for e in exc.errors())) from None


# pydantic's errors as the file's reader reads them, filled from the error's path, input and ctx
# (a validator's own ValueError names its problem itself: see `_AT`).
_PROBLEMS = {
    "extra_forbidden": "unknown key {path}",
    "missing": "{path} is required",
    "union_tag_invalid": "{path}.{discriminator} must be {expected_tags}, got {tag!r}",
    "literal_error": "{path} must be {expected}, got {input!r}",
    "greater_than": "{path} must be above {gt:g}, got {input!r}",
    "greater_than_equal": "{path} must be at least {ge:g}, got {input!r}",
    "bool_type": "{path} must be bool, got {input!r}",
    "string_type": "{path} must be str, got {input!r}",
    "int_type": "{path} must be int, got {input!r}",
    "float_type": "{path} must be int or float, got {input!r}",
    "list_type": "{path} must be list, got {input!r}",
    "tuple_type": "{path} must be list, got {input!r}",
    "dict_type": "{path} must be a mapping, got {input!r}",
    "model_type": "{path} must be a mapping, got {input!r}",
    "model_attributes_type": "{path} must be a mapping, got {input!r}",
}
# A discriminated union puts the chosen variant's tag into the location (state.dynamodb.table); the file has no such key.
_UNIONS = {name for name, field in Config.model_fields.items() if field.discriminator}


def _path(loc: tuple[int | str, ...]) -> str:
    """pydantic's location of an error as the key's path in the file: ``tables[0].index``."""
    if loc[:1] and loc[0] in _UNIONS:
        loc = loc[:1] + loc[2:]
    path = ""
    for part in loc:
        path += f"[{part}]" if isinstance(part, int) else f".{part}" if path else str(part)
    return path


def _message(error: ErrorDetails) -> str:
    path, ctx = _path(error["loc"]) or "the configuration", error.get("ctx", {})
    if error["type"] == "value_error":
        return str(ctx["error"]).replace(_AT, path)
    if error["type"] == "union_tag_invalid":  # pydantic quotes them: "'type'", "'sqlite', 'dynamodb'"
        ctx = {
            **ctx,
            "discriminator": ctx["discriminator"].strip("'"),
            # enum tags print as "<StateStoreType.SQLITE: 'sqlite'>": keep what the file would say
            "expected_tags": re.sub(r"<\w+\.\w+: ('[^']*')>", r"\1", ctx["expected_tags"]).replace(", ", " or "),
        }
    return _PROBLEMS.get(error["type"], "{path}: {msg}").format(path=path, input=error["input"], msg=error["msg"], **ctx)
