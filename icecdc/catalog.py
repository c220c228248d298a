"""Loading configured tables through pyiceberg, with their identifier columns and their lineage.

The lineage is that of the table's current snapshot.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from pyiceberg.catalog import Catalog, load_catalog
from pyiceberg.exceptions import NoSuchTableError
from pyiceberg.table import Table
from pyiceberg.table.snapshots import Snapshot
from pyiceberg.types import DoubleType, FloatType, IcebergType, NestedField, PrimitiveType

from icecdc.config import CatalogConfig, TableConfig, TableIndexConfig
from icecdc.errors import ConfigError, PlanningError
from icecdc.memo import Memo
from icecdc.model import AnyItem
from icecdc.secret_values import secret_string


@dataclass
class RunCredentials:
    """A run's OAuth2 client credentials, read from Secrets Manager by the first catalog it opens.

    Every catalog the run opens (the planner's sweep opens one a table, in threads) takes them
    from here: a sweep of 500 tables reads the secret once, not 500 times. A refusal is kept as
    well, so that it costs one read too. pyiceberg keeps the credential in the catalog it opened,
    and fetches a new token with it when one expires.
    """

    _read: Memo[str, str] = field(default_factory=Memo, repr=False)

    def of(self, arn: str) -> str:
        """pyiceberg's `credential` from the secret `arn`, read on the run's first call."""
        return self._read.get(arn, _client_credentials)


def open_catalog(
    config: CatalogConfig, create: bool = False, credentials: RunCredentials | None = None
) -> Catalog:
    """The configured catalog.

    A SQLite catalog's file must exist unless `create` (the demo's): SQLite would create an empty
    one for a mistyped path, whose tables are then all "not found". `credentials`: the run's, when
    it opens the catalog more than once; without them the secret is read for this catalog."""
    missing = None if create else missing_sqlite_file(config.properties)
    if missing is not None:
        raise ConfigError(
            f"catalog {config.name!r}: the SQLite file {missing} (catalog.uri) does not exist: "
            "check the path; icecdc opens a catalog and never creates one (pyiceberg or Spark "
            "creates it with its first table)"
        )
    properties = config.properties
    if config.credential_secret_arn is not None:
        read = credentials if credentials is not None else RunCredentials()
        properties["credential"] = read.of(config.credential_secret_arn)
    try:
        return load_catalog(config.name, **properties)
    # Any catalog's failure to connect: reported with its own words, nothing written yet.
    except Exception as exc:  # noqa: BLE001
        raise PlanningError(f"cannot open catalog {config.name!r}: {exc}") from None


def _client_credentials(arn: str) -> str:
    """pyiceberg's `credential` ("<client id>:<client secret>") from the secret `arn`."""
    setting = "catalog.credential_secret_arn"
    text = secret_string(arn, setting)
    if text.startswith("{"):
        found = json.loads(text)
        client_id, client_secret = found.get("client_id"), found.get("client_secret")
        if not isinstance(client_id, str) or not isinstance(client_secret, str):
            raise ConfigError(
                f"{setting} {arn}: the secret's JSON needs client_id and client_secret"
            )
        return f"{client_id}:{client_secret}"
    if ":" not in text:
        raise ConfigError(f"{setting} {arn}: the secret must be '<client id>:<client secret>'")
    return text


def missing_sqlite_file(catalog: dict[str, str]) -> Path | None:
    """The file a catalog's `sqlite:///path` URI names when it does not exist, else None.

    Opening the catalog would create that file. Any other catalog gives None: another database, an
    in-memory SQLite, a file that exists.
    """
    uri = catalog.get("uri", "")
    if not uri.startswith("sqlite"):
        return None
    from sqlalchemy.engine import make_url  # pyiceberg's SQL catalog's dependency

    database = make_url(uri).database
    if not database or database == ":memory:" or database.startswith("file:"):
        return None
    path = Path(database)
    return None if path.exists() else path


def glue_name(name: str) -> str:
    """A `<database>.<table>` as the Glue Data Catalog stores it and names it in its events.

    Glue lowercases database and table names: a configured `Sales.Orders` is `sales.orders`.
    """
    return name.lower()


def is_glue(catalog: Catalog) -> bool:
    """Whether `catalog` is pyiceberg's Glue catalog (never imported here: it imports boto3)."""
    glue = sys.modules.get("pyiceberg.catalog.glue")
    return glue is not None and isinstance(catalog, glue.GlueCatalog)


def load_table(catalog: Catalog, name: str) -> Table:
    """The table `name`, a `<database>.<table>`; from a Glue catalog by the name Glue stores.

    Glue's name is `glue_name`'s.
    """
    try:
        return catalog.load_table(glue_name(name) if is_glue(catalog) else name)
    except NoSuchTableError:
        raise PlanningError(f"table {name!r} does not exist in catalog {catalog.name!r}") from None
    # Unreachable catalog, denied access: reported with its own words.
    except Exception as exc:  # noqa: BLE001
        raise PlanningError(
            f"cannot load table {name!r} from catalog {catalog.name!r}: {exc}"
        ) from None


def can_identify(field_type: IcebergType) -> bool:
    """Whether a column of this type can be an identifier column: a primitive, not a float.

    Iceberg allows no float or double identifier field.
    """
    return isinstance(field_type, PrimitiveType) and not isinstance(
        field_type, FloatType | DoubleType
    )


def identifier_columns(table: Table, config: TableConfig | TableIndexConfig) -> tuple[str, ...]:
    """The configured identifier columns, else the schema's identifier fields; () when neither.

    Every column must be a primitive field of the current schema, not a float or double (which
    Iceberg does not allow as identifier fields): the document `_id` is made from their values.
    The shape (columns, `where`, routing) of every index the table writes, or of the one index
    given, is checked against the same schema here, before anything is read or written.
    """
    schema = table.schema()
    names = config.identifier_columns
    if names is None:
        names = tuple(
            sorted(schema.identifier_field_names(), key=lambda n: schema.find_field(n).field_id)
        )
    for name in names:
        try:
            field: NestedField = schema.find_field(name)
        except ValueError:
            columns = ", ".join(f.name for f in schema.fields)
            raise PlanningError(
                f"table {config.name!r}: identifier column {name!r} is not in the current "
                f"schema (columns: {columns})"
            ) from None
        if not isinstance(field.field_type, PrimitiveType):
            raise PlanningError(
                f"table {config.name!r}: identifier column {name!r} has type "
                f"{field.field_type}; it must be a primitive type"
            )
        if not can_identify(field.field_type):
            # NaN equals no value, -0.0 and 0.0 are one number, and JSON has no NaN or infinity
            raise PlanningError(
                f"table {config.name!r}: identifier column {name!r} has type "
                f"{field.field_type}; Iceberg does not allow float or double identifier fields "
                "(NaN and rounding give no stable identity): choose another column"
            )
    indexes = (
        [c.config for c in config.each_index()] if isinstance(config, TableConfig) else [config]
    )
    for index in indexes:
        try:
            index.shape.check(schema)
        except ValueError as exc:
            raise PlanningError(f"table {config.name!r}, index {index.index!r}: {exc}") from None
    return tuple(names)


def sequence_number(snapshot: Snapshot) -> int:
    """A snapshot's sequence number: set in every format v2+ table, the only ones icecdc follows.

    pyiceberg types it optional for v1, whose snapshots have none; they read as 0, as in the spec.
    """
    return snapshot.sequence_number or 0


def snapshots_by_id(table: Table) -> dict[int, Snapshot]:
    """The table's snapshots by id (pyiceberg's `snapshot_by_id` walks the list on every call)."""
    return {s.snapshot_id: s for s in table.snapshots()}


def last_sequence_number(table: Table) -> int:
    """The newest sequence number the table's metadata has handed out (0 for format v1)."""
    return getattr(table.metadata, "last_sequence_number", 0)


@dataclass(frozen=True)
class Lineage:
    """The current snapshot's ancestry as one view of the table knows it.

    These are the only commits the index may follow. A commit off it was rolled back,
    or left behind when `main` was moved.
    """

    snapshot_ids: tuple[int, ...]  # oldest first, ending with the current snapshot
    known_sequence_number: int  # the newest sequence number this view knows (last_sequence_number)
    # the table this view is of; an item of another (dropped) table is off its lineage
    table_uuid: str

    @classmethod
    def of(cls, table: Table) -> Lineage:
        # by a map of the snapshots: pyiceberg's ancestors_of looks each parent up in the list
        by_id = snapshots_by_id(table)
        ancestors: list[int] = []
        snapshot = table.current_snapshot()
        while snapshot is not None:
            ancestors.append(snapshot.snapshot_id)
            parent = snapshot.parent_snapshot_id
            snapshot = by_id.get(parent) if parent is not None else None
        return cls(
            tuple(reversed(ancestors)), last_sequence_number(table), str(table.metadata.table_uuid)
        )

    @cached_property
    def _positions(self) -> dict[int, int]:
        return {snapshot_id: position for position, snapshot_id in enumerate(self.snapshot_ids)}

    def position(self, snapshot_id: int) -> int | None:
        """Where the snapshot is on the lineage, or None when it is not on it.

        0 is the oldest known ancestor.
        """
        return self._positions.get(snapshot_id)

    def abandoned(self, item: AnyItem) -> bool:
        """Whether the item must never be applied.

        That is the item of a table dropped since, with another UUID. It is also an item whose
        snapshot is off the lineage and is not a commit newer than this view, which a planner with a
        fresher view may have planned.
        """
        if item.table_uuid != self.table_uuid:
            return True
        return (
            item.snapshot_id not in self._positions
            and item.sequence_number <= self.known_sequence_number
        )
