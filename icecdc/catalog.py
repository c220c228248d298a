"""Loading configured tables through pyiceberg and resolving their identifier columns."""

from __future__ import annotations

from pyiceberg.catalog import Catalog, load_catalog
from pyiceberg.exceptions import NoSuchTableError
from pyiceberg.table import Table
from pyiceberg.table.snapshots import Snapshot
from pyiceberg.types import NestedField, PrimitiveType

from icecdc.config import CatalogConfig, TableConfig
from icecdc.errors import PlanningError


def open_catalog(config: CatalogConfig) -> Catalog:
    try:
        return load_catalog(config.name, **config.properties)
    except Exception as exc:  # noqa: BLE001 - any catalog's failure to connect: reported with its own words, nothing written yet
        raise PlanningError(f"cannot open catalog {config.name!r}: {exc}") from None


def load_table(catalog: Catalog, name: str) -> Table:
    try:
        return catalog.load_table(name)
    except NoSuchTableError:
        raise PlanningError(f"table {name!r} does not exist in catalog {catalog.name!r}") from None
    except Exception as exc:  # noqa: BLE001 - unreachable catalog, denied access: reported with its own words
        raise PlanningError(f"cannot load table {name!r} from catalog {catalog.name!r}: {exc}") from None


def identifier_columns(table: Table, config: TableConfig) -> tuple[str, ...]:
    """The configured identifier columns, else the schema's identifier fields; () when neither.

    Every column must be a primitive field of the current schema: the document `_id` is made
    from their values.
    """
    schema = table.schema()
    names = config.identifier_columns
    if names is None:
        names = tuple(sorted(schema.identifier_field_names(), key=lambda n: schema.find_field(n).field_id))
    for name in names:
        try:
            field: NestedField = schema.find_field(name)
        except ValueError:
            columns = ", ".join(f.name for f in schema.fields)
            raise PlanningError(
                f"table {config.name!r}: identifier column {name!r} is not in the current schema (columns: {columns})"
            ) from None
        if not isinstance(field.field_type, PrimitiveType):
            raise PlanningError(
                f"table {config.name!r}: identifier column {name!r} has type {field.field_type}; it must be a primitive type"
            )
    return tuple(names)


def sequence_number(snapshot: Snapshot) -> int:
    """A snapshot's sequence number: set in every format v2+ table, the only ones icecdc follows
    (pyiceberg types it optional for v1, whose snapshots have none: 0, as the spec reads them)."""
    return snapshot.sequence_number or 0


def last_sequence_number(table: Table) -> int:
    """The newest sequence number the table's metadata has handed out (0 for format v1)."""
    return getattr(table.metadata, "last_sequence_number", 0)
