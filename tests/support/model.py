"""The vocabulary and mechanics of the model-based test of the whole pipeline (tests/test_model.py).

Everything a step of the state machine does (tests/support/model_machine.py) is named here by a
small StrEnum, so that a shrunk failure reads as a sequence of operations: the table's identifier
type, the writers, the table operations, the index's shape, the index and cluster events, the
batch caps of a sync and the point where a sync crashes. The table is a `Table` (one per example): its schema holds
columns by *role* (key, row number, region, text, ...), tracked by field id, so that renames,
drops and widenings never confuse the writers.

Every row carries `n`, a long never reused within an example and never changed: the key is a
function of `n` (for every key type), so rows are picked, updated and deleted by `n` whatever the
identifier is, and no writer makes two rows with one key but `ModelTable.duplicate`, which appends
a row with the key of another (`ModelTable.twins`), as a user's mistake would.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import random
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from decimal import Decimal
from enum import StrEnum
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.expressions import AlwaysTrue, In
from pyiceberg.manifest import DataFileContent, ManifestContent, ManifestEntryStatus
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.table import Table
from pyiceberg.transforms import BucketTransform, IdentityTransform
from pyiceberg.types import (
    BinaryType,
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    FixedType,
    FloatType,
    IcebergType,
    IntegerType,
    LongType,
    NestedField,
    StringType,
    StructType,
    TimestampType,
    TimestamptzType,
    TimeType,
    UUIDType,
)

from icecdc.documents import DocumentMapper, encode_document
from icecdc.testing.commits import compact
from tests.support.spark_sql import SparkSql, spark_catalog, write_equality_deletes

TABLE = "db.t"
INDEX = "t"
SECOND_INDEX = "t_more"  # a table split into two indexes (IndexShape.SPLIT) writes this one too
RENAMED_INDEX = "t_renamed"  # the index's name after the operator renames it (Reconfig.INDEX_NAME)
# A second table of the catalog that the configuration lists, or not (Reconfig.SIDE_TABLE).
SIDE_TABLE = "db.side"
SIDE_INDEX = "side"
SPARK_TABLE = f"lake.{TABLE}"
REGIONS = ("us", "eu", "apac")
# Bulk requests are bounded by this many bytes (opensearch.max_chunk_bytes); a document over it can
# never be sent: the oversized rows' text is longer.
MAX_CHUNK_BYTES = 8192
OVERSIZE = 9000
EPOCH = dt.datetime(2020, 1, 1)


class KeyType(StrEnum):
    """The identifier of the table: one column of each supported type, a composite key, a nested field."""

    LONG = "long"
    INT = "int"
    STRING = "string"
    UUID = "uuid"
    DATE = "date"
    TIMESTAMP = "timestamp"
    TIMESTAMPTZ = "timestamptz"
    DECIMAL = "decimal"
    FIXED = "fixed"
    BINARY = "binary"
    TIME = "time"  # Spark has no time type: such a table is written by pyiceberg only
    COMPOSITE = "composite (string, boolean, int)"
    NESTED = "nested (key.id)"

    @property
    def spark(self) -> bool:
        """Whether Spark can read and write a table with this key."""
        return self != KeyType.TIME

    @property
    def equality_deletes(self) -> bool:
        """Whether Iceberg's Java equality-delete writer (tests/support/spark_sql.py) takes this key
        from Spark-typed rows (Spark has no uuid or fixed type; the helper takes top-level columns)."""
        return self not in (KeyType.UUID, KeyType.FIXED, KeyType.NESTED, KeyType.TIME)


class Role(StrEnum):
    """What a column is to the writers; by field id, so it survives renames."""

    KEY = "key"
    N = "n"  # the row number the key is made of; never changed, never dropped
    REGION = "region"  # a partition source
    TEXT = "text"  # may turn oversized
    COUNT = "count"  # int, widened to long
    RATIO = "ratio"  # float, widened to double
    CODE = "code"  # a string the index maps as long (a user mapping): an unmappable value is the document's fault
    EXTRA = "extra"  # added by a schema change


class Writer(StrEnum):
    """A commit of rows, as production writers make them."""

    PY_APPEND = "pyiceberg append"
    PY_UPDATE = "pyiceberg overwrite of rows (update)"
    PY_DELETE = "pyiceberg delete"
    PY_UPSERT = "pyiceberg upsert"
    PY_REPLACE_ALL = "pyiceberg overwrite of the whole table"
    SPARK_INSERT = "spark insert"
    SPARK_UPDATE = "spark update"
    SPARK_DELETE = "spark delete"
    SPARK_MERGE = "spark merge"
    EQ_UPSERT = "equality-delete upsert (Flink style)"
    EQ_DELETE = "equality delete"

    @property
    def pyiceberg(self) -> bool:
        return self.name.startswith("PY_")


# A pyiceberg writer's Spark counterpart: for tables pyiceberg cannot commit to (v3) or scan (live equality deletes).
SPARK_COUNTERPART = {
    Writer.PY_APPEND: Writer.SPARK_INSERT,
    Writer.PY_UPDATE: Writer.SPARK_UPDATE,
    Writer.PY_DELETE: Writer.SPARK_DELETE,
    Writer.PY_UPSERT: Writer.SPARK_MERGE,
    Writer.PY_REPLACE_ALL: Writer.SPARK_MERGE,
}
# A Spark writer's pyiceberg counterpart: for tables Spark cannot read (a time key).
PYICEBERG_COUNTERPART = {
    Writer.SPARK_INSERT: Writer.PY_APPEND,
    Writer.SPARK_UPDATE: Writer.PY_UPDATE,
    Writer.SPARK_DELETE: Writer.PY_DELETE,
    Writer.SPARK_MERGE: Writer.PY_UPSERT,
    Writer.EQ_UPSERT: Writer.PY_UPSERT,
    Writer.EQ_DELETE: Writer.PY_DELETE,
}
# The Flink-style upsert's Spark counterpart: for tables whose live data files are in older partition
# specs. (An equality delete there stays: it leaves the row live, which the index must then hold too.)
EQUALITY_COUNTERPART = {Writer.EQ_UPSERT: Writer.SPARK_MERGE}


class Writers(StrEnum):
    """Who writes the example's data files (Spark writes strings as `string`, pyiceberg as `large_string`)."""

    BOTH = "pyiceberg and Spark"
    PYICEBERG = "pyiceberg only"
    SPARK = "Spark only"


class StoreKind(StrEnum):
    """Where the example keeps icecdc's state: the local default, or the AWS bundle's store."""

    SQLITE = "a SQLite file"
    DYNAMODB = "a DynamoDB table on moto's server"


class CatalogKind(StrEnum):
    """The catalog icecdc reads the example's table through; the writers write it through the SQL
    catalog (Spark too, over its JDBC database), which the REST stand-in serves."""

    SQL = "pyiceberg's SQL catalog"
    REST = "the REST catalog stand-in over the SQL catalog (type: rest)"


class DestinationKind(StrEnum):
    """Where icecdc writes the example's index: osmem as a domain, or behind the Serverless
    stand-in (tests/support/serverless.py: no versions, refresh or scroll; writes fenced)."""

    DOMAIN = "an OpenSearch domain"
    SERVERLESS = "a Serverless collection (the stand-in over osmem)"


class WriteMode(StrEnum):
    COPY_ON_WRITE = "copy-on-write"
    MERGE_ON_READ = "merge-on-read"  # v2: position deletes; v3: deletion vectors


class Poison(StrEnum):
    """A row whose document is refused for its own fault: it must become a dead letter naming it."""

    NONE = "none"
    OVERSIZED = "oversized"  # larger than a bulk request may be
    UNMAPPABLE = "unmappable"  # a value its field's mapping refuses
    # an appended row whose key makes an `_id` OpenSearch refuses (string and composite keys)
    LONG_ID = "an id over 512 bytes"
    EMPTY_ID = "an empty id"
    NULL_ID = "a null identifier (a key the configuration names, so nullable)"

    @property
    def of_the_id(self) -> bool:
        return self in (Poison.LONG_ID, Poison.EMPTY_ID, Poison.NULL_ID)


class TableOp(StrEnum):
    ADD_COLUMN = "add column"
    RENAME_COLUMN = "rename column"
    DROP_COLUMN = "drop column"
    WIDEN_INT = "widen int to long"
    WIDEN_FLOAT = "widen float to double"
    PARTITION_BY_REGION = "partition by region (identity)"
    PARTITION_BY_BUCKET = "partition by bucket(4, n)"
    UNPARTITION = "remove every partition field"
    COMPACT = "compaction"
    ROLLBACK = "rollback"
    SET_CURRENT_OFF_LINEAGE = "set current to a snapshot off main (a rollback undone)"
    CHERRY_PICK = "cherry-pick"
    FAST_FORWARD = "fast-forward main to a branch"
    EXPIRE_SNAPSHOTS = "expire snapshots"
    DROP_AND_RECREATE = "drop and re-create the table"
    UPGRADE_TO_V3 = "upgrade to format v3"


class IndexEvent(StrEnum):
    DELETE_GENERATION = "generation deleted"
    RECREATE_AS_INDEX = "generation deleted, someone else's index made under the alias's name"
    FOREIGN_ALIAS = "generation deleted, the alias's name given to someone else's index"
    FOREIGN_GENERATION = "another index named like a generation"
    BLOCK_WRITES = "write block set"
    LIFT_BLOCK = "write block lifted"


class IndexShape(StrEnum):
    """What of the table the index holds (icecdc's index shaping: `columns`, `exclude_columns`,
    `where`, `routing`), over columns no table operation renames or drops. The oracle applies it
    to the table's rows by hand: a row's region decides the filter and the routing."""

    WHOLE = "whole rows"
    COLUMNS = "columns n, region, code"
    EXCLUDE = "every column but region"
    WHERE = "rows whose region is eu"
    ROUTED = "routed by region"
    ALL = "columns n, region, code, rows whose region is not us, routed by region"
    SPLIT = "two indexes: the rows whose region is eu, and the rows and columns of ALL"

    def indexes(self, index: str = INDEX) -> dict[str, IndexShape]:
        """Each index the table writes, and its shape (`index`: the first index's name)."""
        if self == IndexShape.SPLIT:
            return {index: IndexShape.WHERE, SECOND_INDEX: IndexShape.ALL}
        return {index: self}

    def entry(self, common: dict[str, Any], index: str = INDEX) -> dict[str, Any]:
        """The index keys of the table's entry in icecdc's configuration; `common`: what every
        index has; `index`: the first index's name."""
        if self == IndexShape.SPLIT:
            indexes = self.indexes(index).items()
            return {"indexes": [{"index": name, **common, **shape.keys()} for name, shape in indexes]}
        return {"index": index, **common, **self.keys()}

    def keys(self) -> dict[str, Any]:
        """The shape's keys in an index's entry."""
        columns = {"columns": ["n", "region", "code"]}
        return {
            IndexShape.WHOLE: {},
            IndexShape.COLUMNS: columns,
            IndexShape.EXCLUDE: {"exclude_columns": ["region"]},
            IndexShape.WHERE: {"where": "region = 'eu'"},
            IndexShape.ROUTED: {"routing": "region"},
            IndexShape.ALL: {**columns, "where": "region != 'us'", "routing": "region"},
        }[self]

    def holds(self, row: dict[str, Any]) -> bool:
        if self == IndexShape.WHERE:
            return bool(row["region"] == "eu")
        return self != IndexShape.ALL or row["region"] != "us"

    def project(self, document: dict[str, Any]) -> dict[str, Any]:
        if self in (IndexShape.COLUMNS, IndexShape.ALL):
            return {k: v for k, v in document.items() if k in ("n", "region", "code")}
        if self == IndexShape.EXCLUDE:
            return {k: v for k, v in document.items() if k != "region"}
        return document

    def routing(self, row: dict[str, Any]) -> str | None:
        return str(row["region"]) if self in (IndexShape.ROUTED, IndexShape.ALL) else None


class Identifiers(StrEnum):
    """The identifier columns the configuration names: part of the index's identity, so a change
    rebuilds the index in a new generation (the table's key, n, and both are each unique)."""

    AS_CREATED = "as the example made them (the schema's, or the key in the configuration)"
    KEY_AND_N = "the key and n"
    N = "n"


class Reconfig(StrEnum):
    """An operator's change of icecdc's configuration between syncs."""

    IDENTIFIERS = "identifier columns"
    MAPPING = "a mapping override for region (keyword) on or off"
    STRINGS = "strings: text or keyword"
    SETTINGS = "index settings: a refresh interval on or off"
    DEAD_LETTERS = "dead letters on or off (off: a row's own fault fails the pass)"
    INDEX_NAME = "the index renamed (t to t_renamed, or back)"
    SIDE_TABLE = "a second table committed to, then added to or removed from the configuration"


@dataclass
class Settings:
    """What the configuration says beyond the index's shape; `Reconfig` changes one at a time."""

    identifiers: Identifiers = Identifiers.AS_CREATED
    region_keyword: bool = False
    keyword_strings: bool = False
    refresh: bool = False
    dead_letters: bool = True
    index: str = INDEX  # the (first) index's name
    side: bool = False  # whether the configuration lists SIDE_TABLE

    def common(self) -> dict[str, Any]:
        """The keys every index entry of the table gets."""
        properties: dict[str, Any] = {"code": {"type": "long"}}
        if self.region_keyword:
            properties["region"] = {"type": "keyword"}
        common: dict[str, Any] = {"mappings": {"properties": properties}}
        if self.keyword_strings:
            common["strings"] = "keyword"
        if self.refresh:
            common["settings"] = {"refresh_interval": "5s"}
        return common


class Twin(StrEnum):
    """A row appended with the key of a live row (a later snapshot), and what happens next."""

    KEEP = "both rows kept"
    DELETE_ORIGINAL = "the original row deleted in the next commit"
    DELETE_COPY = "the copy deleted in the next commit"


class Operator(StrEnum):
    """An operator's command (the CLI's, in this process), run between syncs."""

    AUDIT = "audit"
    VERIFY = "verify"
    REPAIR_FROM_AUDIT = "repair --from-audit"
    REPAIR_PARTITION = "repair --partition"
    REPAIR_IDS = "repair --id"
    REPAIR_KEYS = "repair --key"  # the rows' identifier values as JSON
    REPAIR_IDS_FILE = "repair --ids-file"  # one JSON string per line
    REPAIR_REBUILD = "repair --rebuild"
    REPLAY = "dead-letters replay"

    @property
    def writes(self) -> bool:
        return self not in (Operator.AUDIT, Operator.VERIFY)

    @property
    def names_rows(self) -> bool:
        """Whether the command names rows of the table (ids or keys) to repair."""
        return self in (Operator.REPAIR_IDS, Operator.REPAIR_KEYS, Operator.REPAIR_IDS_FILE)


class Look(StrEnum):
    """A command that reads and writes nothing, run between steps (the CLI's, in this process)."""

    CHECK = "check"
    DRY_RUN = "sync --dry-run"


class OperatorCrash(StrEnum):
    """Where an operator's command dies (the fault proxy, at its Nth bulk request)."""

    NONE = "none"
    BULK_UNSENT = "Nth bulk request dropped unsent"
    BULK_APPLIED = "Nth bulk request applied, its answer lost"


class Caps(StrEnum):
    """The batch caps of a sync (config `batch`)."""

    NONE = "none"
    ONE_FILE = "max_files=1"
    TWO_FILES = "max_files=2"
    ONE_BYTE = "max_bytes=1"
    TINY_REWRITE = "max_rewrite_bytes=1"  # below a row group: key ranges
    SMALL_REWRITE = "max_rewrite_bytes=2048"
    ALL_TINY = "max_files=1, max_bytes=1, max_rewrite_bytes=1"

    def batch(self) -> dict[str, int]:
        if self == Caps.NONE:
            return {}
        return {k.strip(): int(v) for k, v in (part.split("=") for part in self.value.split(","))}

    @property
    def key_ranges(self) -> bool:
        return "max_rewrite_bytes" in self.value


class CrashAt(StrEnum):
    """Where a sync dies; the next sync resumes. Probe points (icecdc.model.PassPoint), the Nth bulk
    request (the fault proxy), or the state store's `complete`."""

    PLANNED = "after planning"
    WRITTEN = "after a pass's writes"
    MARKED_APPLIED = "after mark_applied"
    CHECKPOINTED = "between the checkpoint and the swap"
    SWAPPED = "after the swap, before the old generation's delete"
    BULK_UNSENT = "Nth bulk request dropped unsent"
    BULK_APPLIED = "Nth bulk request applied, its answer lost"
    BULK_REFUSED = "Nth bulk request and every later one answered 503"
    COMPLETE_BEFORE = "in complete, before the store writes"
    COMPLETE_AFTER = "in complete, after the store wrote"


class KnownBug(StrEnum):
    """Bugs being fixed in parallel; the default profile may leave out what triggers one (the report
    lists each). ICECDC_MODEL_EXCLUDE=none turns every operation on."""

    MIXED_STRING_TYPES = "mixed-string-types"  # string and large_string files in one rewrite
    SCHEMA_CHANGE_IN_CAPPED_REBUILD = "schema-change-in-capped-rebuild"
    KEY_RANGES_ON_UUID = "key-ranges-on-uuid"  # the known bug names nested keys too: those pass here
    UNSWAPPED_AFTER_CRASH = "unswapped-after-crash"  # has_work misses a swap not made
    RECREATED_TABLE = "recreated-table"  # a dropped-and-recreated table leaves the old table's pending items
    FOREIGN_GENERATIONS = "foreign-generations"  # another index taken for a generation
    # a routed row moved by a commit after a sync a write block refused: the pass after the block,
    # exporting with external_gte, deleted its new document under the old routing value
    COMMIT_DURING_A_BLOCKED_SYNC = "commit-during-a-blocked-sync"
    # a table moved into or out of `indexes` keeps its index but not its checkpoint (the state's
    # key changes): the first export went into the existing index and left the documents of rows
    # that left it (found 2026-11-27)
    INDEX_STATE_UNDER_ANOTHER_KEY = "index-state-under-another-key"
    # a filtered index's rebuild planned its export's files pruned by the filter; the shape changed
    # again before the rebuild ran, and the rebuild wrote the new shape from the old filter's
    # files: rows outside the old filter had no document (found 2026-11-27)
    RESHAPE_DURING_A_FILTERED_REBUILD = "reshape-during-a-filtered-rebuild"
    # fixed beside the rules that find them: the index's identity when the identifier columns
    # change, replay's version beside a run of commits that collapses, verify, audit and repair of
    # dead-lettered rows
    IDENTIFIERS_CHANGED = "identifiers-changed"
    REPLAY_BESIDE_A_COLLAPSED_RUN = "replay-beside-a-collapsed-run"
    OPERATORS_ON_BAD_ROWS = "operators-on-bad-rows"
    LETTERS_WRITTEN_AGAIN = "letters-written-again"  # one open letter per row and reason
    HOSTILE_IDS = "hostile-ids"  # ids OpenSearch refuses, the rows' own fault
    # found by this test, not in the known list: never stepped around by default
    EMPTY_RECREATED_TABLE = "empty-recreated-table"  # a table re-created with no snapshot keeps the old documents


class InjectedCrash(Exception):
    """What a crash point raises: the process dies here."""


# -- the table ------------------------------------------------------------------------------------


def key_fields(key: KeyType, required: bool = True) -> list[NestedField]:
    """The key columns of a new table (field ids are assigned by the catalog); a string key the
    configuration names (not the schema, whose identifier fields are required) may be null."""
    types: dict[KeyType, IcebergType] = {
        KeyType.LONG: LongType(),
        KeyType.INT: IntegerType(),
        KeyType.STRING: StringType(),
        KeyType.UUID: UUIDType(),
        KeyType.DATE: DateType(),
        KeyType.TIMESTAMP: TimestampType(),
        KeyType.TIMESTAMPTZ: TimestamptzType(),
        KeyType.DECIMAL: DecimalType(12, 2),
        KeyType.FIXED: FixedType(8),
        KeyType.BINARY: BinaryType(),
        KeyType.TIME: TimeType(),
    }
    if key == KeyType.COMPOSITE:
        return [
            NestedField(1, "tenant", StringType(), required=required),
            NestedField(2, "flag", BooleanType(), required=True),
            NestedField(3, "k", IntegerType(), required=True),
        ]
    if key == KeyType.NESTED:
        return [
            NestedField(
                1,
                "key",
                StructType(NestedField(2, "id", LongType(), required=True), NestedField(3, "tag", StringType())),
                required=True,
            )
        ]
    return [NestedField(1, "k", types[key], required=required or key != KeyType.STRING)]


def identifier_names(key: KeyType) -> list[str]:
    if key == KeyType.COMPOSITE:
        return ["tenant", "flag", "k"]
    if key == KeyType.NESTED:
        return ["key.id"]
    return ["k"]


VALUE_COLUMNS = [
    ("n", LongType(), Role.N),
    ("region", StringType(), Role.REGION),
    ("text", StringType(), Role.TEXT),
    ("count", IntegerType(), Role.COUNT),
    ("ratio", FloatType(), Role.RATIO),
    ("code", StringType(), Role.CODE),
]


def initial_schema(key: KeyType, identifiers_in_schema: bool) -> Schema:
    fields = key_fields(key, required=identifiers_in_schema)
    next_id = 10
    for name, type_, _ in VALUE_COLUMNS:
        fields.append(NestedField(next_id, name, type_, required=name == "n"))
        next_id += 1
    schema = Schema(*fields)
    if not identifiers_in_schema:
        return schema
    ids = [schema.find_field(name).field_id for name in identifier_names(key)]
    return Schema(*fields, identifier_field_ids=ids)


def key_values(key: KeyType, n: int) -> dict[str, Any]:
    """The key columns' values of row `n` (pyiceberg's Python types)."""
    if key == KeyType.COMPOSITE:
        return {"tenant": f"t{n % 3}", "flag": n % 2 == 0, "k": n}
    if key == KeyType.NESTED:
        return {"key": {"id": n, "tag": f"g{n}"}}
    value: Any = {
        KeyType.LONG: n,
        KeyType.INT: n,
        KeyType.STRING: f'k{n:05d},"ü|日/',  # separators, quotes and non-ASCII in every id
        KeyType.UUID: uuid.UUID(int=n * 7919 + 1).bytes,
        KeyType.DATE: (EPOCH + dt.timedelta(days=n)).date(),
        KeyType.TIMESTAMP: EPOCH + dt.timedelta(seconds=n, microseconds=n),
        KeyType.TIMESTAMPTZ: (EPOCH + dt.timedelta(minutes=n)).replace(tzinfo=dt.UTC),
        KeyType.DECIMAL: Decimal(n) + Decimal("0.25"),
        KeyType.FIXED: n.to_bytes(8, "big"),
        KeyType.BINARY: b"b" + n.to_bytes(4, "big"),
        KeyType.TIME: (EPOCH + dt.timedelta(seconds=n)).time(),
    }[key]
    return {"k": value}


def to_spark(value: Any, field_type: IcebergType) -> Any:
    """A pyiceberg Python value as PySpark takes it for the field's Spark type."""
    if value is None:
        return None
    if isinstance(field_type, UUIDType):
        return str(value if isinstance(value, uuid.UUID) else uuid.UUID(bytes=value))
    if isinstance(field_type, StructType):
        return {f.name: to_spark(value.get(f.name), f.field_type) for f in field_type.fields}
    if isinstance(field_type, (FixedType, BinaryType)):
        return bytearray(value)
    return value


def from_spark(value: Any, field_type: IcebergType) -> Any:
    """A value Spark read, as pyiceberg would have read it (for the documents of the oracle)."""
    if value is None:
        return None
    if isinstance(field_type, UUIDType):
        return uuid.UUID(value)
    if isinstance(field_type, StructType):
        row = value.asDict() if hasattr(value, "asDict") else value
        return {f.name: from_spark(row.get(f.name), f.field_type) for f in field_type.fields}
    if isinstance(field_type, (FixedType, BinaryType)):
        return bytes(value)
    if isinstance(field_type, TimestamptzType):
        return value.astimezone(dt.UTC)  # PySpark hands a naive local time
    return value


@dataclass
class Lake:
    """One example's catalog and Spark access to it."""

    workdir: Path
    spark: Any

    def __post_init__(self) -> None:
        self.catalog = SqlCatalog(
            "lake", uri=f"sqlite:///{self.workdir / 'catalog.db'}", warehouse=(self.workdir / "warehouse").as_uri()
        )
        self.catalog.create_namespace_if_not_exists("db")

    def load(self) -> Table:
        return self.catalog.load_table(TABLE)

    def exists(self) -> bool:
        return bool(self.catalog.table_exists(TABLE))

    @contextlib.contextmanager
    def sql(self) -> Iterator[SparkSql]:
        """A child Spark session on this catalog, its JDBC connections closed after (SQLite: one writer)."""
        session = spark_catalog(self.spark, self.workdir)  # the namespace statement also loads the catalog
        try:
            yield session
        finally:
            session.close()

    def run(self, *statements: str) -> None:
        with self.sql() as ss:
            for statement in statements:
                ss.sql(statement).collect()


def has_equality_deletes(table: Table) -> bool:
    """Whether the current snapshot has live equality-delete files (pyiceberg cannot scan those)."""
    snapshot = table.current_snapshot()
    if snapshot is None:
        return False
    for manifest in snapshot.manifests(table.io):
        if manifest.content != ManifestContent.DELETES:
            continue
        for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=True):
            if entry.status != ManifestEntryStatus.DELETED and entry.data_file.content == DataFileContent.EQUALITY_DELETES:
                return True
    return False


def data_in_older_specs(table: Table) -> bool:
    """Whether live data files of the current snapshot were written under an older partition spec.

    An equality delete applies to a data file only in the same spec and partition, or when the
    delete is unpartitioned (Iceberg's spec, "Scan Planning"). Flink writes its deletes under the
    current spec: after a partition change, its upsert of a row in an older file leaves the old row
    live beside the new one, a table with two rows of one identifier."""
    snapshot = table.current_snapshot()
    if snapshot is None:
        return False
    current = table.spec().spec_id
    for manifest in snapshot.manifests(table.io):
        if manifest.content != ManifestContent.DATA or manifest.partition_spec_id == current:
            continue
        if manifest.has_added_files() or manifest.has_existing_files():
            return True
    return False


def current_rows(lake: Lake, table: Table) -> list[dict[str, Any]]:
    """Every row of the current snapshot as pyiceberg types, read by pyiceberg, or by Spark when
    pyiceberg cannot (live equality deletes)."""
    if table.current_snapshot() is None:
        return []
    if not has_equality_deletes(table):
        return table.scan().to_arrow().to_pylist()
    schema = table.schema()
    with lake.sql() as ss:
        rows = ss.sql(f"SELECT * FROM {SPARK_TABLE}").collect()
    return [{f.name: from_spark(row[f.name], f.field_type) for f in schema.fields} for row in rows]


# OpenSearch refuses an `_id` longer than this many bytes (UTF-8), or empty.
MAX_ID_BYTES = 512


def table_documents(
    lake: Lake,
    table: Table,
    identifiers: tuple[str, ...],
    shape: IndexShape = IndexShape.WHOLE,
    unindexable: list[dict[str, Any]] | None = None,
    shared: dict[str, list[dict[str, Any]]] | None = None,
) -> tuple[dict[str, str], dict[str, str | None]]:
    """id -> document text of every row the index's `shape` holds: what the index must hold (but
    dead letters); and id -> the routing of each. A row no `_id` can be made of (a null identifier,
    an empty id, one over 512 bytes) is not there: it goes to `unindexable`, when given. Nor is an
    id several rows the shape holds share: id -> those rows go to `shared`, when given."""
    mapper = DocumentMapper(table.schema(), identifiers)
    documents: dict[str, str] = {}
    routings: dict[str, str | None] = {}
    rows = current_rows(lake, table)
    held: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        if shape.holds(row):
            with contextlib.suppress(ValueError):
                held.setdefault(mapper.document_id(mapper.document(row)), []).append(row)
    several = {doc_id: copies for doc_id, copies in held.items() if doc_id and len(copies) > 1}
    assert shared is not None or not several, f"the test made two rows with key {sorted(several)[:3]}"
    if shared is not None:
        shared.update(several)
    for row in rows:
        document = mapper.document(row)
        try:
            doc_id = mapper.document_id(document)
        except ValueError:  # a null identifier
            doc_id = ""
        if not doc_id or len(doc_id.encode()) > MAX_ID_BYTES:
            if unindexable is not None and shape.holds(row):
                unindexable.append(row)
            continue
        if doc_id in several:
            continue
        if doc_id not in routings or shape.holds(row):  # a shared key's row the shape holds routes it
            routings[doc_id] = shape.routing(row)
        if shape.holds(row):
            documents[doc_id] = encode_document(shape.project(document))
    return documents, {i: r for i, r in routings.items() if i in documents}


def poisoned(document: str) -> bool:
    """Whether a document is refused for its own fault: over the bulk limit, or a code the mapping cannot take."""
    if len(document.encode()) > MAX_CHUNK_BYTES:
        return True
    code = json.loads(document).get("code")
    return code is not None and not str(code).lstrip("-").isdigit()


def refused_row(row: dict[str, Any]) -> bool:
    """Whether a row's document is refused for its own fault (`Poison.OVERSIZED`, `UNMAPPABLE`)."""
    code = row.get("code")
    oversized = any(isinstance(v, str) and len(v) >= OVERSIZE for v in row.values())
    return oversized or (code is not None and not str(code).lstrip("-").isdigit())


def pyiceberg_writes(table: Table) -> bool:
    """Whether pyiceberg can commit rows to the table: format v2, and a spec of identity fields
    (other transforms need pyiceberg-core, which the project does not install)."""
    return table.format_version == 2 and all(isinstance(f.transform, IdentityTransform) for f in table.spec().fields)


def row_numbers(lake: Lake, table: Table) -> list[int]:
    return sorted(int(r["n"]) for r in current_rows(lake, table))


def pick(numbers: list[int], seed: int, count: int) -> list[int]:
    return sorted(random.Random(seed).sample(numbers, min(count, len(numbers))))


def arrow_schema(table: Table, large_strings: bool) -> pa.Schema:
    """The table's Arrow schema (pyiceberg's: large_string) with strings as `string` unless `large_strings`."""
    schema = table.schema().as_arrow()
    if large_strings:
        return schema

    def narrow(t: pa.DataType) -> pa.DataType:
        if pa.types.is_large_string(t):
            return pa.string()
        if pa.types.is_struct(t):
            return pa.struct([f.with_type(narrow(f.type)) for f in t])
        return t

    return pa.schema([f.with_type(narrow(f.type)) for f in schema], metadata=schema.metadata)


def partition_sources(table: Table) -> list[str]:
    schema = table.schema()
    return [schema.find_column_name(f.source_id) for f in table.spec().fields]  # type: ignore[misc]


@dataclass
class ModelTable:
    """The example's table and how the machine writes and operates it."""

    lake: Lake
    key: KeyType
    identifiers_in_schema: bool  # else the configuration lists the identifier columns
    partitioned: bool  # at creation, by region
    version: int  # at creation; UPGRADE_TO_V3 raises it
    writers: Writers = Writers.BOTH
    roles: dict[int, Role] = field(default_factory=dict)  # field id -> role; a field not here is EXTRA
    mode: WriteMode | None = None  # the Spark write mode the table properties say
    next_n: int = 0
    tag: int = 0  # makes every image of a row differ from the one before
    names: int = 0  # for new column and branch names
    picked: set[int] = field(default_factory=set)  # cherry-picked snapshots (picking twice would duplicate keys)
    string_columns: bool = True  # whether ADD_COLUMN may add a string column
    hostile: dict[int, Any] = field(default_factory=dict)  # row number -> the key value no `_id` is made of
    twins: dict[int, int] = field(default_factory=dict)  # row number -> the row whose key it copies (Twin)

    # -- creation -------------------------------------------------------------------------------

    def create(self) -> Table:
        """The table, as pyiceberg creates it (format v2; v3 through Spark: pyiceberg writes no v3 metadata)."""
        schema = initial_schema(self.key, self.identifiers_in_schema)
        spec = PartitionSpec()
        if self.partitioned:
            region = schema.find_field("region").field_id
            spec = PartitionSpec(PartitionField(source_id=region, field_id=1000, transform=IdentityTransform(), name="region"))
        table = self.lake.catalog.create_table(TABLE, schema=schema, partition_spec=spec, properties={"format-version": "2"})
        by_name = {name: role for name, _, role in VALUE_COLUMNS}
        self.roles = {f.field_id: by_name.get(f.name, Role.KEY) for f in table.schema().fields}
        self.mode = None
        if self.version == 3:
            self.lake.run(f"ALTER TABLE {SPARK_TABLE} SET TBLPROPERTIES ('format-version'='3')")
            table = self.lake.load()
        return table

    @property
    def spark_data(self) -> bool:
        """Whether Spark may write data files (not when Spark cannot read the key, nor when pyiceberg writes alone)."""
        return self.key.spark and self.writers != Writers.PYICEBERG

    @property
    def pyiceberg_data(self) -> bool:
        return self.writers != Writers.SPARK

    def config_identifiers(self) -> list[str] | None:
        return None if self.identifiers_in_schema else identifier_names(self.key)

    def new_numbers(self, count: int) -> list[int]:
        numbers = list(range(self.next_n, self.next_n + count))
        self.next_n += count
        return numbers

    # -- rows -----------------------------------------------------------------------------------

    def role(self, field_id: int) -> Role:
        return self.roles.get(field_id, Role.EXTRA)

    def columns(self, table: Table, *roles: Role) -> list[NestedField]:
        return [f for f in table.schema().fields if self.role(f.field_id) in roles]

    def image(self, schema: Schema, n: int, region: str, poison: Poison = Poison.NONE) -> dict[str, Any]:
        """A new image of row `n` under the current schema (pyiceberg types)."""
        self.tag += 1
        tag = self.tag
        keys = key_values(self.key, self.twins.get(n, n))  # a copy has its original's key
        if n in self.hostile:  # a row keeps its key: the writers find rows by n, or by key
            keys[self.hostile_column] = self.hostile[n]
        row: dict[str, Any] = {}
        oversized_into: str | None = None
        for f in schema.fields:
            role = self.role(f.field_id)
            if role == Role.KEY:
                row[f.name] = keys[f.name]
            elif role == Role.N:
                row[f.name] = n
            elif role == Role.REGION:
                row[f.name] = region
            elif role == Role.TEXT:
                row[f.name] = f"text {n}.{tag}"
                oversized_into = f.name
            elif role == Role.COUNT:
                row[f.name] = (n * 31 + tag) % 100_000
            elif role == Role.RATIO:
                row[f.name] = tag + 0.5
            elif role == Role.CODE:
                row[f.name] = f"bad-{n}" if poison == Poison.UNMAPPABLE else str(n * 1000 + tag)
            elif isinstance(f.field_type, StringType):
                row[f.name] = f"extra {tag}"
                oversized_into = oversized_into or f.name
            elif isinstance(f.field_type, (LongType, IntegerType)):
                row[f.name] = tag
            else:
                row[f.name] = None
        if poison == Poison.OVERSIZED and oversized_into is not None:
            row[oversized_into] = "x" * OVERSIZE
        return row

    def spark_row(self, schema: Schema, row: dict[str, Any]) -> dict[str, Any]:
        return {f.name: to_spark(row.get(f.name), f.field_type) for f in schema.fields}

    def images(self, table: Table, numbers: list[int], rng: random.Random, poison: Poison) -> list[dict[str, Any]]:
        schema = table.schema()
        return [self.image(schema, n, rng.choice(REGIONS), poison if i == 0 else Poison.NONE) for i, n in enumerate(numbers)]

    def arrow(self, table: Table, rows: list[dict[str, Any]], large_strings: bool) -> pa.Table:
        return pa.Table.from_pylist(rows, schema=arrow_schema(table, large_strings))

    # -- writers --------------------------------------------------------------------------------

    def effective(self, writer: Writer, table: Table) -> Writer:
        """The writer that runs: pyiceberg cannot commit to v3 tables, partition by a transform
        without pyiceberg-core (not installed) nor scan live equality deletes (its Spark counterpart
        runs); Spark cannot read a time key (its pyiceberg counterpart runs). A Flink-style upsert
        is not run on tables whose rows sit in older partition specs (`data_in_older_specs`):
        the table would hold two rows of one identifier, which no index can equal."""
        if writer in EQUALITY_COUNTERPART and data_in_older_specs(table):
            writer = EQUALITY_COUNTERPART[writer] if self.spark_data else PYICEBERG_COUNTERPART[writer]
            return self.effective(writer, table)
        if writer.pyiceberg:
            if (
                self.pyiceberg_data
                and pyiceberg_writes(table)
                and (writer == Writer.PY_APPEND or not has_equality_deletes(table))
            ):
                return writer
            return SPARK_COUNTERPART[writer]
        return writer if self.spark_data else PYICEBERG_COUNTERPART[writer]

    @property
    def hostile_column(self) -> str:
        return "tenant" if self.key == KeyType.COMPOSITE else "k"

    def hostile_key(self, poison: Poison, n: int, existing: list[int]) -> tuple[bool, Any]:
        """(True, the key value of new row `n` that `poison` makes), or (False, None) when the key
        cannot take it: not a string key, or another live row holds an empty or null key already."""
        if self.key not in (KeyType.STRING, KeyType.COMPOSITE):
            return False, None
        value: Any = "日" * 171 + str(n)  # 513 bytes and more
        if poison == Poison.EMPTY_ID and self.key == KeyType.STRING:
            value = ""
        elif poison == Poison.NULL_ID and not self.identifiers_in_schema:
            value = None
        if value in (None, "") and any(m in self.hostile and self.hostile[m] == value for m in existing):
            return False, None
        return True, value

    def write(self, writer: Writer, count: int, seed: int, poison: Poison, large_strings: bool, mode: WriteMode) -> str:
        """Commit rows with `writer`; what was done, for the log."""
        table = self.lake.load()
        writer = self.effective(writer, table)
        rng = random.Random(seed)
        existing = row_numbers(self.lake, table)
        picked = pick(existing, seed, count)
        id_poison, poison = (poison, Poison.NONE) if poison.of_the_id else (Poison.NONE, poison)
        if writer in (Writer.PY_APPEND, Writer.SPARK_INSERT) or (not picked and writer != Writer.PY_REPLACE_ALL):
            numbers = self.new_numbers(count)
            if id_poison != Poison.NONE:
                made, value = self.hostile_key(id_poison, numbers[0], existing)
                if made:
                    self.hostile[numbers[0]] = value
            rows = self.images(table, numbers, rng, poison)
            if writer.pyiceberg:
                table.append(self.arrow(table, rows, large_strings))
                return f"{Writer.PY_APPEND} {numbers}"
            self._spark_insert(table, rows)
            return f"{Writer.SPARK_INSERT} {numbers}"
        if writer == Writer.PY_UPDATE:
            table.overwrite(
                self.arrow(table, self.images(table, picked, rng, poison), large_strings), overwrite_filter=In("n", picked)
            )
        elif writer == Writer.PY_DELETE:
            table.delete(In("n", picked))
        elif writer == Writer.PY_UPSERT:
            numbers = picked + self.new_numbers(1)
            frame = self.arrow(table, self.images(table, numbers, rng, poison), large_strings)
            try:
                table.upsert(frame, join_cols=["n"])
            except ValueError as exc:  # pyiceberg 0.12's upsert casts rows of files older than a new column
                if "field names are not matching" not in str(exc):
                    raise
                with table.transaction() as transaction:  # what its upsert commits: rewrite the matches, add the rest
                    transaction.overwrite(
                        frame.filter(pc.is_in(frame["n"], value_set=pa.array(picked, pa.int64()))), In("n", picked)
                    )
                    transaction.append(frame.filter(pc.invert(pc.is_in(frame["n"], value_set=pa.array(picked, pa.int64())))))
            picked = numbers
        elif writer == Writer.PY_REPLACE_ALL:
            changed = picked + self.new_numbers(1)
            schema = arrow_schema(table, large_strings)
            everything = table.scan().to_arrow()
            kept = everything.filter(pc.invert(pc.is_in(everything["n"], value_set=pa.array(picked, pa.int64()))))
            rows = self.arrow(table, self.images(table, changed, rng, poison), large_strings)
            table.overwrite(pa.concat_tables([kept.cast(schema), rows]), overwrite_filter=AlwaysTrue())
            picked = changed
        elif writer == Writer.SPARK_UPDATE:
            self._spark_update(table, picked, rng, poison, mode)
        elif writer == Writer.SPARK_DELETE:
            with self.lake.sql() as ss:
                self._set_mode(ss, mode)
                ss.sql(f"DELETE FROM {SPARK_TABLE} WHERE n IN ({', '.join(map(str, picked))})")
        elif writer == Writer.SPARK_MERGE:
            picked = self._spark_merge(table, picked, rng, poison, mode)
        elif writer in (Writer.EQ_UPSERT, Writer.EQ_DELETE):
            self._equality(table, picked, rng, poison, upsert=writer == Writer.EQ_UPSERT)
        return f"{writer} {picked}"

    def duplicate(self, seed: int, then: Twin) -> str:
        """Append a copy of a live row's key (a new row `n`, its own values) in a commit of its
        own, then perhaps delete one of the two rows in another; what was done."""
        table = self.lake.load()
        rng = random.Random(seed)
        rows = current_rows(self.lake, table)
        # Not a row whose document the index refused: the index holds no document of its key,
        # and icecdc's check of an append asks the index. A key shared before may be shared again:
        # its open letters hold its new rows out too.
        candidates = sorted(int(r["n"]) for r in rows if r["n"] not in self.hostile and not refused_row(r))
        if not candidates:
            return "no-op: no live row to copy the key of"
        original = rng.choice(candidates)
        (n,) = self.new_numbers(1)
        self.twins[n] = original
        rows = self.images(table, [n], rng, Poison.NONE)
        writer = self.effective(Writer.PY_APPEND, table)
        if writer.pyiceberg:
            table.append(self.arrow(table, rows, large_strings=True))
        else:
            self._spark_insert(table, rows)
        done = f"row {n} appended with the key of row {original} ({writer})"
        if then == Twin.KEEP:
            return done
        victim = original if then == Twin.DELETE_ORIGINAL else n
        table = self.lake.load()
        writer = self.effective(Writer.PY_DELETE, table)
        if writer == Writer.PY_DELETE:
            table.delete(In("n", [victim]))
        else:
            with self.lake.sql() as ss:
                self._set_mode(ss, WriteMode.MERGE_ON_READ if seed % 2 else WriteMode.COPY_ON_WRITE)
                ss.sql(f"DELETE FROM {SPARK_TABLE} WHERE n = {victim}")
        return f"{done}, then row {victim} deleted ({writer})"

    def _set_mode(self, ss: SparkSql, mode: WriteMode) -> None:
        if self.mode != mode:
            modes = ", ".join(f"'write.{op}.mode'='{mode}'" for op in ("delete", "update", "merge"))
            ss.sql(f"ALTER TABLE {SPARK_TABLE} SET TBLPROPERTIES ({modes})")
            self.mode = mode

    def _frame(self, ss: SparkSql, table: Table, rows: list[dict[str, Any]], target: str = SPARK_TABLE) -> Any:
        schema = table.schema()
        return ss.session.createDataFrame([self.spark_row(schema, r) for r in rows], ss.session.table(target).schema)

    def _spark_insert(self, table: Table, rows: list[dict[str, Any]], target: str = SPARK_TABLE) -> None:
        with self.lake.sql() as ss:
            self._frame(ss, table, rows, target).writeTo(target).append()

    def _spark_update(
        self, table: Table, picked: list[int], rng: random.Random, poison: Poison, mode: WriteMode, target: str = SPARK_TABLE
    ) -> None:
        self.tag += 1
        first = picked[0]
        sets = []
        for f in table.schema().fields:
            role, name = self.role(f.field_id), f"`{f.name}`"
            if role == Role.TEXT:
                poisoned_text = f"repeat('x', {OVERSIZE})" if poison == Poison.OVERSIZED else f"'text upd {self.tag}'"
                sets.append(f"{name} = CASE WHEN n = {first} THEN {poisoned_text} ELSE concat('text upd {self.tag} ', n) END")
            elif role in (Role.COUNT, Role.RATIO):
                sets.append(f"{name} = {name} + 1")
            elif role == Role.CODE:
                bad = "concat('bad-', n)" if poison == Poison.UNMAPPABLE else f"cast(n * 1000 + {self.tag % 1000} as string)"
                sets.append(f"{name} = CASE WHEN n = {first} THEN {bad} ELSE cast(n * 1000 + {self.tag % 1000} as string) END")
            elif role == Role.REGION and rng.random() < 0.3:
                sets.append(f"{name} = '{rng.choice(REGIONS)}'")  # a partition move
        with self.lake.sql() as ss:
            self._set_mode(ss, mode)
            ss.sql(f"UPDATE {target} SET {', '.join(sets)} WHERE n IN ({', '.join(map(str, picked))})")

    def _spark_merge(self, table: Table, picked: list[int], rng: random.Random, poison: Poison, mode: WriteMode) -> list[int]:
        """One MERGE: the picked rows updated, one of them deleted (of two or more), one row inserted."""
        deleted = picked[-1:] if len(picked) > 1 else []
        numbers = picked + self.new_numbers(1)
        rows = self.images(table, numbers, rng, poison)
        schema = table.schema()
        names = [f.name for f in schema.fields]
        on = " AND ".join(f"t.{c} <=> s.{c}" for c in identifier_names(self.key))  # a null key too
        if self.twins:  # two live rows may share a key: match by n, which no two rows share
            on = "t.n = s.n"
        with self.lake.sql() as ss:
            self._set_mode(ss, mode)
            frame = self._frame(ss, table, rows)
            from pyspark.sql import functions as F  # noqa: N812 - pyspark's convention

            frame = frame.withColumn("_op", F.when(F.col("n").isin(deleted), F.lit("d")).otherwise(F.lit("u")))
            frame.createOrReplaceTempView("model_source")
            ss.sql(
                f"MERGE INTO {SPARK_TABLE} t USING model_source s ON {on} "
                "WHEN MATCHED AND s._op = 'd' THEN DELETE "
                f"WHEN MATCHED THEN UPDATE SET {', '.join(f't.`{c}` = s.`{c}`' for c in names)} "
                f"WHEN NOT MATCHED THEN INSERT ({', '.join(f'`{c}`' for c in names)}) VALUES ({', '.join(f's.`{c}`' for c in names)})"
            ).collect()
        return numbers

    def _equality(self, table: Table, picked: list[int], rng: random.Random, poison: Poison, upsert: bool) -> None:
        """Equality deletes of the picked rows (on the key where Iceberg's Java writer takes it, else
        on `n`) with the partition source columns, and for an upsert their new images in the same commit."""
        schema = table.schema()
        columns = list(identifier_names(self.key)) if self.key.equality_deletes else ["n"]
        columns += [c for c in partition_sources(table) if c not in columns]
        current = {r["n"]: r for r in current_rows(self.lake, table) if r["n"] in picked}
        deletes = [{c: to_spark(current[n][c], schema.find_type(c)) for c in columns} for n in picked]
        images = self.images(table, picked, rng, poison) if upsert else []
        # The Java writer takes the images only in Spark's types: a uuid or fixed key (Spark has neither)
        # has its images appended by Spark right after, a second commit of the same upsert.
        together = self.key.equality_deletes
        inserts = [self.spark_row(schema, r) for r in images] if upsert and together else None
        with self.lake.sql() as ss:
            write_equality_deletes(ss, TABLE, deletes, inserts=inserts)
        if images and not together:
            self._spark_insert(table, images)

    # -- table operations -----------------------------------------------------------------------

    def operate(self, op: TableOp, seed: int, spark: bool) -> str:
        """Apply a table operation, with Spark's SQL or procedures when `spark` (always for a v3
        table: pyiceberg writes no v3 metadata; never for a time key); what was done, for the log."""
        table = self.lake.load()
        use_spark = self.key.spark and (spark or table.format_version >= 3)
        rng = random.Random(seed)
        self.names += 1
        if op in (TableOp.ADD_COLUMN, TableOp.RENAME_COLUMN, TableOp.DROP_COLUMN, TableOp.WIDEN_INT, TableOp.WIDEN_FLOAT):
            return self._schema_change(table, op, rng, use_spark)
        if op in (TableOp.PARTITION_BY_REGION, TableOp.PARTITION_BY_BUCKET, TableOp.UNPARTITION):
            return self._partition_change(table, op, use_spark)
        snapshot = table.current_snapshot()
        if op == TableOp.UPGRADE_TO_V3:
            if table.format_version >= 3 or not self.spark_data:
                return "no-op"
            self.lake.run(f"ALTER TABLE {SPARK_TABLE} SET TBLPROPERTIES ('format-version'='3')")
            return "upgraded"
        if op == TableOp.DROP_AND_RECREATE:
            return self._recreate(table, seed)
        if snapshot is None:
            return "no-op: no snapshot"
        if op == TableOp.COMPACT:
            pyiceberg_can = self.pyiceberg_data and pyiceberg_writes(table) and not has_equality_deletes(table)
            if self.spark_data and (use_spark or not pyiceberg_can):
                self.lake.run(f"CALL lake.system.rewrite_data_files(table => '{TABLE}', options => map('rewrite-all', 'true'))")
            elif pyiceberg_can:
                compact(table)
            else:
                return "no-op"
            return "compacted"
        lineage = [s.snapshot_id for s in ancestors(table)]
        if op == TableOp.ROLLBACK:
            if len(lineage) < 2:
                return "no-op: no ancestor"
            target = rng.choice(lineage[1:])
            if use_spark:
                self.lake.run(f"CALL lake.system.rollback_to_snapshot('{TABLE}', {target})")
            else:
                table.manage_snapshots().rollback_to_snapshot(target).commit()
            return f"rolled back to {target}"
        if op == TableOp.SET_CURRENT_OFF_LINEAGE:
            # A state the table had: a snapshot rolled back (or left behind by a fast-forward),
            # applied or planned by icecdc before, perhaps.
            off = sorted(s.snapshot_id for s in table.snapshots() if s.snapshot_id not in lineage)
            if not off:
                return "no-op: every snapshot is on the lineage"
            target = rng.choice(off)
            if use_spark:
                self.lake.run(f"CALL lake.system.set_current_snapshot('{TABLE}', {target})")
            else:
                table.manage_snapshots().set_current_snapshot(target).commit()
            return f"set current to {target}"
        if op == TableOp.EXPIRE_SNAPSHOTS:
            retain = 1 + seed % 3
            if self.key.spark:
                self.lake.run(
                    f"CALL lake.system.expire_snapshots(table => '{TABLE}', older_than => TIMESTAMP '2999-01-01 00:00:00', "
                    f"retain_last => {retain})"
                )
            else:
                heads = {ref.snapshot_id for ref in table.metadata.refs.values()}
                expired = [
                    s.snapshot_id
                    for s in table.snapshots()
                    if s.snapshot_id not in lineage[:retain] and s.snapshot_id not in heads
                ]
                if expired:
                    table.maintenance.expire_snapshots().by_ids(expired).commit()
            return f"expired all but the last {retain}"
        if not self.key.spark:
            return "no-op: Spark cannot read a time key"
        if op == TableOp.CHERRY_PICK:
            return self._cherry_pick(table, lineage, rng)
        if op == TableOp.FAST_FORWARD:
            return self._fast_forward(table, rng) if self.spark_data else "no-op: Spark writes no data here"
        raise AssertionError(op)

    def _schema_change(self, table: Table, op: TableOp, rng: random.Random, use_spark: bool) -> str:
        if op == TableOp.ADD_COLUMN:
            name, string = f"x{self.names}", rng.random() < 0.5 and self.string_columns
            if use_spark:
                self.lake.run(f"ALTER TABLE {SPARK_TABLE} ADD COLUMN {name} {'STRING' if string else 'BIGINT'}")
            else:
                with table.update_schema() as change:
                    change.add_column(name, StringType() if string else LongType())
            return f"added {name}"
        if op in (TableOp.RENAME_COLUMN, TableOp.DROP_COLUMN):
            candidates = self.columns(table, Role.TEXT, Role.COUNT, Role.RATIO, Role.EXTRA)
        elif op == TableOp.WIDEN_INT:
            # Spark's Iceberg (1.10) cannot read a table whose live equality deletes hold a column since
            # widened from int to long ("Not an instance of java.lang.Long"): the test's oracle reads
            # such tables with Spark, so a key column is not widened under live equality deletes.
            roles = (Role.COUNT, Role.EXTRA) if has_equality_deletes(table) else (Role.COUNT, Role.KEY, Role.EXTRA)
            candidates = [f for f in self.columns(table, *roles) if isinstance(f.field_type, IntegerType)]
        else:
            candidates = [f for f in self.columns(table, Role.RATIO, Role.EXTRA) if isinstance(f.field_type, FloatType)]
        if not candidates:
            return "no-op: no column"
        column = rng.choice(candidates).name
        if op == TableOp.RENAME_COLUMN:
            new = f"{column.split('_r')[0]}_r{self.names}"
            if use_spark:
                self.lake.run(f"ALTER TABLE {SPARK_TABLE} RENAME COLUMN `{column}` TO `{new}`")
            else:
                with table.update_schema() as change:
                    change.rename_column(column, new)
            return f"renamed {column} to {new}"
        if op == TableOp.DROP_COLUMN:
            if use_spark:
                self.lake.run(f"ALTER TABLE {SPARK_TABLE} DROP COLUMN `{column}`")
            else:
                with table.update_schema() as change:
                    change.delete_column(column)
            return f"dropped {column}"
        wider = LongType() if op == TableOp.WIDEN_INT else DoubleType()
        if use_spark:
            self.lake.run(
                f"ALTER TABLE {SPARK_TABLE} ALTER COLUMN `{column}` TYPE {'BIGINT' if op == TableOp.WIDEN_INT else 'DOUBLE'}"
            )
        else:
            with table.update_schema() as change:
                change.update_column(column, wider)
        return f"widened {column}"

    def _partition_change(self, table: Table, op: TableOp, use_spark: bool) -> str:
        spec = table.spec()
        schema = table.schema()
        sources = {(schema.find_column_name(f.source_id), str(f.transform)): f.name for f in spec.fields}
        if op == TableOp.UNPARTITION:
            if not spec.fields:
                return "no-op: unpartitioned"
            if use_spark:
                self.lake.run(*(f"ALTER TABLE {SPARK_TABLE} DROP PARTITION FIELD {f.name}" for f in spec.fields))
            else:
                with table.update_spec() as change:
                    for f in spec.fields:
                        change.remove_field(f.name)
            return "unpartitioned"
        if op == TableOp.PARTITION_BY_REGION:
            if ("region", "identity") in sources:
                return "no-op: partitioned by region already"
            if use_spark:
                self.lake.run(f"ALTER TABLE {SPARK_TABLE} ADD PARTITION FIELD region")
            else:
                with table.update_spec() as change:
                    change.add_identity("region")
            return "partitioned by region"
        if not self.spark_data:
            return "no-op: pyiceberg writes no bucket partitions (without pyiceberg-core), and Spark writes no data here"
        if ("n", "bucket[4]") in sources:
            return "no-op: partitioned by bucket already"
        name = f"n_bucket{self.names}"
        if use_spark:
            self.lake.run(f"ALTER TABLE {SPARK_TABLE} ADD PARTITION FIELD bucket(4, n) AS {name}")
        else:
            with table.update_spec() as change:
                change.add_field("n", BucketTransform(4), name)
        return f"partitioned by bucket(4, n) as {name}"

    def _recreate(self, table: Table, seed: int) -> str:
        """Drop the table and create it again under its name: with 0-3 rows, of the old keys or new ones."""
        version = table.format_version
        count, same_keys = seed % 4, seed % 8 < 4
        old = row_numbers(self.lake, table) if same_keys else []
        self.lake.catalog.drop_table(TABLE)
        self.version = version
        table = self.create()
        numbers = old[:count] if same_keys else self.new_numbers(count)
        if numbers:
            rows = self.images(table, numbers, random.Random(seed), Poison.NONE)
            if not (self.pyiceberg_data and pyiceberg_writes(table)):
                self._spark_insert(table, rows)
            else:
                table.append(self.arrow(table, rows, large_strings=True))
        return f"re-created (v{version}) with rows {numbers}"

    def _cherry_pick(self, table: Table, lineage: list[int], rng: random.Random) -> str:
        """Cherry-pick an append that is off the lineage (rolled back) and adds no key the table has."""
        present = set(row_numbers(self.lake, table))
        candidates = []
        for snapshot in table.snapshots():
            summary = snapshot.summary
            if snapshot.snapshot_id in lineage or snapshot.snapshot_id in self.picked or summary is None:
                continue
            if summary.operation.value != "append" or snapshot.parent_snapshot_id is None:
                continue
            try:
                added = set(table.scan(snapshot_id=snapshot.snapshot_id).to_arrow()["n"].to_pylist()) - set(
                    table.scan(snapshot_id=snapshot.parent_snapshot_id).to_arrow()["n"].to_pylist()
                )
            except (ValueError, FileNotFoundError, OSError):
                continue  # equality deletes pyiceberg cannot read, or files gone
            if added and not added & present:
                candidates.append(snapshot.snapshot_id)
        if not candidates:
            return "no-op: nothing to pick"
        chosen = rng.choice(sorted(candidates))
        self.picked.add(chosen)
        self.lake.run(f"CALL lake.system.cherrypick_snapshot('{TABLE}', {chosen})")
        return f"cherry-picked {chosen}"

    def _fast_forward(self, table: Table, rng: random.Random) -> str:
        """A branch from main, an insert and an update on it, main fast-forwarded to it."""
        branch = f"b{self.names}"
        target = f"{SPARK_TABLE}.branch_{branch}"
        self.lake.run(f"ALTER TABLE {SPARK_TABLE} CREATE BRANCH {branch}")
        numbers = self.new_numbers(1)
        self._spark_insert(table, self.images(table, numbers, rng, Poison.NONE), target)
        existing = row_numbers(self.lake, table)
        if existing:
            self._spark_update(
                table, pick(existing, rng.randrange(1 << 16), 1), rng, Poison.NONE, self.mode or WriteMode.COPY_ON_WRITE, target
            )
        self.lake.run(
            f"CALL lake.system.fast_forward('{TABLE}', 'main', '{branch}')", f"ALTER TABLE {SPARK_TABLE} DROP BRANCH {branch}"
        )
        return f"fast-forwarded to branch {branch} (+{numbers})"


def ancestors(table: Table) -> list[Any]:
    """The current snapshot and its ancestors, newest first."""
    from pyiceberg.table.snapshots import ancestors_of

    current = table.current_snapshot()
    return list(ancestors_of(current, table.metadata)) if current is not None else []
