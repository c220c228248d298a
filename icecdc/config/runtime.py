"""The runtime configuration: validated strictly into frozen pydantic models before anything runs.

The keys are a contract other tools rely on (docs/configuration.md). Every unknown key and every bad
value raises `ConfigError` naming its path in the file (`icecdc.config.loader`). Each default is
written once, on its field.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, Self
from urllib.parse import urlsplit

from pydantic import ConfigDict, Field, field_validator, model_validator
from pyiceberg.expressions.parser import parse
from pyparsing import ParseException

from icecdc.config.deploy import AwsConfig
from icecdc.config.loader import AT, Section, Setting, Text, quoted, read_yaml, validated
from icecdc.documents import Shape
from icecdc.errors import ConfigError
from icecdc.model import EngineChoice, StateStoreType


class CatalogConfig(Section):
    """Any pyiceberg catalog: ``load_catalog(name, **properties)``.

    Every key but `name` is a property.
    """

    model_config = ConfigDict(extra="allow")
    __pydantic_extra__: dict[str, Setting] = Field(init=False)

    name: Text
    # A REST catalog's OAuth2 client credentials in Secrets Manager ("<id>:<secret>", or JSON with
    # client_id and client_secret), read when the catalog is opened: never in the file.
    credential_secret_arn: Text | None = None

    @property
    def properties(self) -> dict[str, str]:
        """pyiceberg's properties, as written (the secret's credentials are added on opening)."""
        return dict(self.__pydantic_extra__ or {})


class _StoreConfig(Section):
    # a table's processing lease; renewed while held, so it outlives no crash by more
    lease_seconds: float = Field(60.0, gt=0)


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
    # finished work items are deleted by DynamoDB's TTL after this
    done_ttl_days: int = Field(7, ge=1)


# Where checkpoints and work items live; `type` picks the store (default sqlite).
StateConfig = Annotated[SqliteStateConfig | DynamoDbStateConfig, Field(discriminator="type")]


# A fenced request leaves only while the lease outlives its landing bound times this
FENCE_SHARE = 7 / 6
# Index settings a Serverless collection keeps to itself
SERVERLESS_MANAGED_SETTINGS = frozenset(
    {"number_of_shards", "number_of_replicas", "refresh_interval"}
)


def _flat(settings: Mapping[str, Any], prefix: str = "") -> Iterator[tuple[str, Any]]:
    """Each setting of nested or dotted `settings` as (dotted name, value)."""
    for key, value in settings.items():
        if isinstance(value, Mapping):
            yield from _flat(value, f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}", value


class OpenSearchConfig(Section):
    url: Text
    username: Text | None = None
    password: str | None = Field(None, repr=False)  # never in a repr, a log line or an error
    # Or the password in AWS Secrets Manager (the secret's string, or its JSON's "password"), read
    # once a run, where it opens OpenSearch: in AWS, no secret is in the config file, an asset or
    # the template.
    password_secret_arn: Text | None = None
    aws_region: Text | None = None  # set to sign requests with SigV4
    # es: an OpenSearch Service domain; aoss: a Serverless search collection (docs/deploy.md)
    aws_service: Literal["es", "aoss"] = "es"
    # Serverless: seconds a write may take to be seen by search, as there is no refresh
    visibility_seconds: float = Field(15.0, ge=0)
    # Serverless: the longest a bulk request may still be applied after it left. A request leaves
    # only while the table's lease outlives this and a sixth more (docs/guarantees.md).
    landing_seconds: float = Field(30.0, gt=0)
    verify_certs: bool = True
    bulk_chunk_size: int = Field(500, ge=1)  # documents per bulk request
    # Bytes of bulk body per request (action lines and documents, as sent). Amazon OpenSearch
    # Service refuses HTTP requests over 10 MiB on its smallest instance types (100 MiB on large
    # ones), and AWS advises bulk requests of 5 to 15 MiB: 5 MiB stays under every domain's limit. A
    # document whose action alone is larger is a dead letter, never sent.
    max_chunk_bytes: int = Field(5 * 1024 * 1024, gt=0)
    # for 429 and 5xx answers, with exponential backoff and jitter
    max_retries: int = Field(5, ge=1)
    initial_backoff_seconds: float = Field(0.5, gt=0)
    max_backoff_seconds: float = Field(30.0, gt=0)

    @field_validator("url")
    @classmethod
    def _http(cls, url: str) -> str:
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"{AT} must start with http:// or https://, got {quoted(url)}")
        if "@" in urlsplit(url).netloc:  # the URL is not quoted back: it holds a secret
            raise ValueError(
                f"{AT} must not carry credentials (user:password@host): they would reach "
                "logs and error "
                "messages; set opensearch.username and opensearch.password instead"
            )
        return url.rstrip("/")

    @model_validator(mode="after")
    def _serverless_signs(self) -> Self:
        if self.aws_service == "aoss" and (self.aws_region is None or self.username is not None):
            raise ValueError(
                f"{AT}.aws_service 'aoss' (a Serverless collection) takes SigV4 only: set "
                f"{AT}.aws_region, and no username or password"
            )
        return self

    @model_validator(mode="after")
    def _one_way_to_authenticate(self) -> Self:
        if self.password is not None and self.password_secret_arn is not None:
            raise ValueError(f"{AT}: set password or password_secret_arn, not both")
        if (self.username is None) != (self.password is None and self.password_secret_arn is None):
            raise ValueError(
                f"{AT}.username and {AT}.password (or password_secret_arn) go together"
            )
        if self.username is not None and self.aws_region is not None:
            raise ValueError(
                f"{AT}: choose basic auth (username/password) or SigV4 (aws_region), not both"
            )
        return self


class SparkConfig(Section):
    master: Text | None = None
    conf: dict[str, Setting] = Field(default_factory=dict)


class BatchConfig(Section):
    """How much one pass applies (a Glue run makes as many passes as it has time for).

    Each pass ends with a checkpoint, and an export's files are recorded as they complete, so a run
    that is stopped resumes where the last pass ended. A pass always takes at least one snapshot, or
    one export file; a single change snapshot larger than the caps is still applied whole."""

    max_files: int = Field(default=10_000, gt=0)  # data and delete files to read in one pass
    max_bytes: int = Field(default=64 * 2**30, gt=0)  # their total size (compressed, as stored)
    # The memory budget of one task reading a copy-on-write rewrite (compressed bytes as stored):
    # a partition's rewrite up to this size is read whole, so unchanged rows cancel in Arrow; a
    # larger one is cut into ranges of its identifier, each about this size, read in parallel
    # (without column bounds in the manifests: file by file, cancelled after the shuffle). A task
    # holds 10-40 times this in memory, as the data compresses (make bench: memory probe).
    max_rewrite_bytes: int = Field(default=16 * 2**20, gt=0)


class EngineConfig(Section):
    """Where each pass runs.

    `auto` runs a pass in-process when it reads at most all three limits, else on Spark.
    In-process means Arrow and no JVM: seconds for a small commit. `spark` or `in_process`
    force one engine. A pass never mixes them.

    In-process, a pass of many rows is read by worker processes, one per usable core
    (`in_process_workers`). Its changed rows are held in memory, about 0.7 KiB a row. The limits
    bound its time and memory, well within the planner Lambda's.
    """

    use: Literal[EngineChoice.AUTO, EngineChoice.SPARK, EngineChoice.IN_PROCESS] = EngineChoice.AUTO
    # What a pass reads (data and delete files, their rows, their bytes as stored) up to which
    # `auto` stays in-process. Measured (`python -m bench.crossover`): on 2 cores the in-process
    # engine was faster than Spark at every size up to 10^6 rows read; 500,000 rows take it about 30
    # s and 400 MiB, so that a planner Lambda applies them within its time budget.
    in_process_max_rows: int = Field(default=500_000, gt=0)
    in_process_max_bytes: int = Field(default=64 * 2**20, gt=0)
    in_process_max_files: int = Field(default=200, gt=0)
    # Processes that read a large in-process pass at once, each holding its part's rows being
    # converted. None: one per core this process may use; in AWS Lambda, its memory's whole vCPUs
    # (one per 1,769 MB: one at the planner's 2,048 MB).
    in_process_workers: int | None = Field(default=None, gt=0)


# How string columns are mapped: text with a `keyword` sub-field, or keyword only
# (icecdc.destination.index).
StringMapping = Literal["text", "keyword"]


class IndexConfig(Section):
    """One index a table writes: its name, its shape, its ingest pipeline, and how it is created.

    The shape says which columns and rows of the table it holds, and how its documents are routed.
    The index's writes go through its ingest pipeline. icecdc creates it with the mapping derived
    from the shape's columns (icecdc.destination.index), with `mappings` merged over it, and these
    `settings`.
    Or, instead, from the index template named `index_template`.
    """

    index: Text
    # Projection: these columns only, or every column but these (dotted paths reach into structs).
    columns: tuple[Text, ...] | None = Field(None, strict=False)
    exclude_columns: tuple[Text, ...] | None = Field(None, strict=False)
    where: Text | None = None  # the rows the index holds, in Iceberg's expression syntax
    routing: Text | None = None  # the column whose value routes each document
    pipeline: Text | None = None  # the ingest pipeline every index write goes through
    strings: StringMapping = "text"
    mappings: dict[str, Any] | None = None
    settings: dict[str, Any] | None = None
    index_template: Text | None = None
    # Take the index name over when an index or alias icecdc did not create for this table holds
    # it (icecdc.destination.index.ownership): a concrete index is kept as
    # `<index>-preicecdc-<UTC time>`, the indexes an alias names stay where they are. Unset, such
    # an index is refused.
    index_takeover: bool = False

    @property
    def shape(self) -> Shape:
        return Shape(self.columns, self.exclude_columns or (), self.where, self.routing)

    @field_validator("index")
    @classmethod
    def _valid_index_name(cls, index: str) -> str:
        problem = index_name_problem(index)
        if problem is not None:
            raise ValueError(
                f"{AT} {quoted(index)} is not a valid OpenSearch index name: {problem}"
            )
        return index

    @field_validator("columns", "exclude_columns")
    @classmethod
    def _column_list(cls, columns: tuple[str, ...] | None) -> tuple[str, ...] | None:
        return _column_names(columns)

    @field_validator("where")
    @classmethod
    def _iceberg_expression(cls, where: str) -> str:
        try:
            parse(where)
        # whether its columns exist is checked against the schema, when the table is loaded
        except ParseException as exc:
            raise ValueError(f"{AT} {quoted(where)} is not an Iceberg expression: {exc}") from None
        return where

    @field_validator("mappings")
    @classmethod
    def _mapping_of_fields(cls, mappings: dict[str, Any] | None) -> dict[str, Any] | None:
        properties = (mappings or {}).get("properties", {})
        if not isinstance(properties, dict):
            raise ValueError(
                f"{AT}.properties must be a mapping of field names to fields, "
                f"got {quoted(properties)}"
            )
        _check_fields(properties, f"{AT}.properties")
        return mappings

    @model_validator(mode="after")
    def _template_or_own_mapping(self) -> Self:
        if self.index_template is not None and (
            self.mappings is not None or self.settings is not None or self.strings != "text"
        ):
            raise ValueError(
                f"{AT}: index_template applies the template's mappings and settings; "
                "choose it or mappings/settings/strings, not both"
            )
        if self.columns is not None and self.exclude_columns is not None:
            raise ValueError(
                f"{AT}: set columns (the index's columns) or exclude_columns (all but "
                "these), not both"
            )
        return self


# What an OpenSearch index name may not hold (nor start with _, - or +, nor have upper case, nor
# be . or ..): OpenSearch's rules for the name of an index it creates.
_INDEX_NAME_FORBIDS = ' "*\\<|,>/?#:'
# The bytes icecdc appends to an index's name: a generation is `<index>-<n>`, a concrete index taken
# over is kept as `<index>-preicecdc-<UTC time>` (14 digits), 25 bytes.
INDEX_SUFFIX_BYTES = 25
# OpenSearch's limit of an index name is 255 bytes: the names icecdc makes stay within it.
MAX_INDEX_NAME_BYTES = 255 - INDEX_SUFFIX_BYTES


def index_name_problem(name: str) -> str | None:
    """The rule of OpenSearch's index names that `name` breaks (suffixes icecdc adds counted).

    None when it breaks none.
    """
    forbidden = sorted({c for c in name if c in _INDEX_NAME_FORBIDS})
    size = len(name.encode())
    if name in (".", ".."):
        return "an index may not be named '.' or '..'"
    if name != name.lower():
        return "it must be lower case"
    if name.startswith(("_", "-", "+")):
        return "it must not start with _, - or +"
    if forbidden:
        shown = " ".join("space" if c == " " else c for c in forbidden)
        return f"it must hold no space nor any of {_INDEX_NAME_FORBIDS.strip()} (it holds {shown})"
    if size > MAX_INDEX_NAME_BYTES:
        return (
            f"it is {size} bytes, over {MAX_INDEX_NAME_BYTES}: OpenSearch allows 255, and icecdc "
            f"appends up to {INDEX_SUFFIX_BYTES} ('-<generation>', or '-preicecdc-<time>' on a "
            "takeover)"
        )
    return None


def _index_name_like(name: str) -> str:
    """A valid index name close to `name`: lower case, each forbidden character an underscore."""
    cleaned = "".join("_" if c in _INDEX_NAME_FORBIDS else c for c in name.lower()).lstrip("_-+")
    cleaned = cleaned.encode()[:MAX_INDEX_NAME_BYTES].decode(errors="ignore")
    return cleaned if cleaned.strip(".") else "my-index"


class TableKeys(Section):
    """The keys of a table itself, apart from the index or indexes it writes."""

    name: Text  # "<namespace>.<table>" as the catalog knows it
    # None: the schema's identifier fields
    identifier_columns: tuple[Text, ...] | None = Field(None, strict=False)
    export: bool = True
    # Keep Iceberg tags on the checkpoint snapshot and every snapshot not yet applied, so that
    # snapshot expiration keeps what icecdc still has to read (see icecdc.protection).
    protect_checkpoint: bool = False

    @field_validator("name")
    @classmethod
    def _qualified(cls, name: str) -> str:
        if "." not in name:
            raise ValueError(f"{AT} must be '<namespace>.<table>', got {name!r}")
        return name

    @field_validator("identifier_columns")
    @classmethod
    def _distinct_columns(cls, columns: tuple[str, ...] | None) -> tuple[str, ...] | None:
        return _column_names(columns)


class TableIndexConfig(IndexConfig, TableKeys):
    """One index of a table: the table's keys and that index's own, what a pass writes by.

    `TableConfig.each_index` builds one per index the table writes.
    """

    @property
    def whole_rows(self) -> bool:
        """The index holds whole rows: no columns, where, routing or pipeline shape it."""
        return self.shape == Shape() and self.pipeline is None


class TableConfig(IndexConfig, TableKeys):
    """A table and the index it writes, or, under `indexes`, the several indexes it writes.

    The single index takes the keys of `IndexConfig` here; under `indexes`,
    each index has its own (see `each_index`).
    """

    index: Text  # default: the name's last part
    indexes: tuple[IndexConfig, ...] | None = Field(None, strict=False)

    @model_validator(mode="before")
    @classmethod
    def _index_defaults_to_the_table(cls, data: Any) -> Any:
        if (
            isinstance(data, dict)
            and data.get("index") is None
            and isinstance(data.get("name"), str)
        ):
            derived = data["name"].split(".")[-1]
            if data.get("indexes") is not None:  # unused: each entry of indexes names its index
                return {**data, "index": _index_name_like(derived)}
            problem = index_name_problem(derived)
            if problem is not None:  # say where the name came from: the user never wrote it
                raise ValueError(
                    f"{AT}: the index name {quoted(derived)}, derived from the table name "
                    f"{quoted(data['name'])}, is not a valid OpenSearch index name ({problem}): "
                    "name the index with the table's `index` key, "
                    f"e.g. index: {_index_name_like(derived)}"
                )
            return {**data, "index": derived}
        return data

    @model_validator(mode="before")
    @classmethod
    def _index_keys_in_one_place(cls, data: Any) -> Any:
        """With `indexes`, every index's keys are in its entry: none on the table."""
        if isinstance(data, dict) and data.get("indexes") is not None:
            last = data["name"].split(".")[-1] if isinstance(data.get("name"), str) else None
            defaults = {last, _index_name_like(last)} if last is not None else set()
            given = {k for k in IndexConfig.model_fields if data.get(k) is not None}
            misplaced = sorted(given - ({"index"} if data.get("index") in defaults else set()))
            if misplaced:
                raise ValueError(
                    f"{AT}: with indexes, set {', '.join(misplaced)} in each entry of "
                    "indexes, not on the table"
                )
        return data

    @field_validator("indexes")
    @classmethod
    def _some_distinct_indexes(
        cls, indexes: tuple[IndexConfig, ...] | None
    ) -> tuple[IndexConfig, ...] | None:
        if indexes is not None and not indexes:
            raise ValueError(f"{AT} must list at least one index")
        names = [i.index for i in indexes or ()]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"{AT} lists index {twice[0]!r} more than once")
        return indexes

    @property
    def whole_rows(self) -> bool:
        """The table writes one index of whole rows: no shape and no `indexes`.

        No columns, where, routing or pipeline shape it. This is what the audit, a repair of a scope
        and a replay compare and write.
        """
        return self.indexes is None and self.shape == Shape() and self.pipeline is None

    def each_index(self) -> tuple[ConfiguredIndex, ...]:
        """Each index the table writes, as the table's keys and that index's, with its state's key.

        The key is the table's name in the single-index form, `<table>#<index>` under `indexes`.
        """
        table = {k: v for k, v in self.as_mapping().items() if k in TableKeys.model_fields}
        if self.indexes is None:
            own = {k: v for k, v in self.as_mapping().items() if k in IndexConfig.model_fields}
            return (ConfiguredIndex(validated(TableIndexConfig, {**table, **own}), self.name),)
        return tuple(
            ConfiguredIndex(
                validated(TableIndexConfig, {**table, **index.as_mapping()}),
                f"{self.name}#{index.index}",
            )
            for index in self.indexes
        )


@dataclass(frozen=True)
class ConfiguredIndex:
    """One index of a table: its configuration, and its state's key."""

    config: TableIndexConfig
    key: str


def _column_names(columns: tuple[str, ...] | None) -> tuple[str, ...] | None:
    if columns is not None and not columns:
        raise ValueError(f"{AT} must be a non-empty list of column names, got []")
    if columns is not None and len(set(columns)) != len(columns):
        raise ValueError(f"{AT} lists a column twice: {quoted(list(columns))}")
    return columns


def _check_fields(properties: dict[str, Any], at: str) -> None:
    """Each field of a mapping's `properties` is a mapping; an object's `properties` too, within."""
    for name, field in properties.items():
        if not isinstance(field, dict):
            raise ValueError(
                f"{at}.{name} must be a mapping of the field's parameters, got {quoted(field)}"
            )
        inner = field.get("properties", {})
        if not isinstance(inner, dict):
            raise ValueError(
                f"{at}.{name}.properties must be a mapping of field names to fields, "
                f"got {quoted(inner)}"
            )
        _check_fields(inner, f"{at}.{name}.properties")


class DeadLetterConfig(Section):
    """Where documents that can never be written go, and when dead letters fail the pass instead.

    Without a location, such a document fails the batch. When a pass's dead letters show
    a cause many rows share, the pass fails: more than `max_share` of its rows, and at
    least `min_count` (docs/dead-letters.md).
    """

    path: Text | None = None
    max_share: float = Field(default=0.1, ge=0, le=1)
    min_count: int = Field(default=10, ge=1)

    @field_validator("path")
    @classmethod
    def _absolute(cls, path: str) -> str:
        if not path.startswith(("s3://", "/")):
            raise ValueError(
                f"{AT} must be an absolute directory or an s3:// location, got {path!r}"
            )
        return path


class Config(Section):
    catalog: CatalogConfig
    state: StateConfig
    opensearch: OpenSearchConfig
    spark: SparkConfig = Field(default_factory=SparkConfig)
    batch: BatchConfig = Field(default_factory=BatchConfig)
    engine: EngineConfig = Field(default_factory=EngineConfig)
    tables: tuple[TableConfig, ...] = Field(strict=False)
    aws: AwsConfig | None = None
    # The file's `dead_letter:` section; read `dead_letter` (its path).
    dead_letter_section: DeadLetterConfig = Field(
        default_factory=DeadLetterConfig, alias="dead_letter"
    )

    @property
    def dead_letter(self) -> str | None:
        """Where documents that can never be written go, or None.

        A directory, or s3://bucket/prefix.
        """
        return self.dead_letter_section.path

    def with_dead_letter(self, path: str) -> Config:
        return self.revised(dead_letter={**self.dead_letter_section.as_mapping(), "path": path})

    @model_validator(mode="after")
    def _lease_outlives_a_request(self) -> Self:
        # A renewal comes every third of the lease, so two thirds of it are always left; a request
        # without versions leaves only while the lease outlives its landing bound and a margin.
        needed = FENCE_SHARE * self.opensearch.landing_seconds
        if self.opensearch.aws_service == "aoss" and self.state.lease_seconds * 2 / 3 <= needed:
            raise ValueError(
                f"state.lease_seconds must be over {needed * 1.5:g} with a Serverless collection "
                f"(opensearch.landing_seconds {self.opensearch.landing_seconds:g}): a write "
                "leaves only while the lease outlives it, and a renewal leaves two thirds of it"
            )
        return self

    @model_validator(mode="after")
    def _serverless_indexes(self) -> Self:
        if self.opensearch.aws_service != "aoss":
            return self
        for position, table in enumerate(self.tables):
            for configured in table.each_index():
                index = configured.config
                if index.index_takeover:
                    raise ValueError(
                        f"tables[{position}].index_takeover ({index.index!r}) cannot be used with "
                        "a Serverless collection: a takeover keeps the index by copying it with "
                        "_reindex, which Serverless lacks"
                    )
                flat = {k.removeprefix("index."): v for k, v in _flat(index.settings or {})}
                managed = sorted(set(flat) & SERVERLESS_MANAGED_SETTINGS)
                if managed:
                    raise ValueError(
                        f"tables[{position}].settings ({index.index!r}) sets {managed[0]}: a "
                        "Serverless collection manages shards, replicas and refreshes itself"
                    )
        return self

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
            raise ValueError(f"{AT} must list at least one entry")
        return tables

    @model_validator(mode="after")
    def _one_index_per_table(self) -> Self:
        names = [t.name for t in self.tables]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"tables lists {duplicates[0]!r} more than once")
        # Two tables writing one index would overwrite and delete each other's documents (and a
        # resync of one would wipe the other), so each index belongs to exactly one table.
        written = [
            (position, configured.config)
            for position, table in enumerate(self.tables)
            for configured in table.each_index()
        ]
        owners: dict[str, int] = {}
        for position, table in written:
            first = owners.setdefault(table.index, position)
            if first != position:
                raise ValueError(
                    f"tables[{first}] ({self.tables[first].name!r}) and tables[{position}] "
                    f"({table.name!r}) "
                    f"both write index {table.index!r}: each table needs its own index"
                )
        # An index is an alias over generations `<index>-<n>`: another index of that form would
        # share its name space (icecdc's markers keep them apart, but not a reader's eye).
        for position, table in written:
            for other, taken in written:
                suffix = taken.index.removeprefix(f"{table.index}-")
                if taken.index.startswith(f"{table.index}-") and suffix.isdigit():
                    raise ValueError(
                        f"tables[{other}] ({taken.name!r}) writes index {taken.index!r}, a "
                        "name of the form of the "
                        f"generations of tables[{position}]'s index {table.index!r} "
                        f"({table.index}-<n>): rename one"
                    )
        return self

    @property
    def index_names(self) -> tuple[str, ...]:
        """Every index the tables write (each of a table's `indexes`), in the order configured."""
        return tuple(
            configured.config.index for table in self.tables for configured in table.each_index()
        )

    def table(self, name: str) -> TableConfig:
        for table in self.tables:
            if table.name == name:
                return table
        known = ", ".join(t.name for t in self.tables)
        raise ConfigError(f"table {name!r} is not in the configuration (configured: {known})")


def load_config(path: str | Path) -> Config:
    """Read and validate a configuration file."""
    return parse_config(read_yaml(path))


def parse_config(raw: Any) -> Config:
    """Validate an already-parsed configuration mapping."""
    return validated(Config, {} if raw is None else raw)
