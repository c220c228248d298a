"""Whose an index is, and whether one found under a table's index name is this table's.

Pure, from facts read once: the markers of the indexes found, and the uuids the table's state names.

An index is this table's when the table's state names it: the checkpoint's index, or one an export's
earlier passes wrote to. So a concrete index made by an icecdc before generations, which carries no
marker, keeps being written. An index is also this table's when icecdc's marker in its mapping's
`_meta` names this alias and this table. The marker names the table by catalog and identifier, or by
the table's UUID, as markers of older versions record no catalog or identifier. A table dropped and
created again under its name is the same owner, and a reset.

Every other index is someone else's: a user's, or another deployment's or table's.
icecdc never deletes, remaps or writes it.
"""

from __future__ import annotations

from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from pyiceberg.table import Table

from icecdc.destination.index.mappings import Mapping

# Where a generation records that it is icecdc's, for which alias and table: `_meta` of its mapping.
MARKER = "icecdc"
# Catalog properties that tell one catalog from another of the same name, the first one set.
CATALOG_LOCATORS = ("uri", "warehouse", "glue.id", "client.region", "region_name")


@dataclass(frozen=True)
class Owner:
    """The table an index of icecdc's holds: its catalog, its identifier in it, and its UUID.

    The catalog is given by its name and where it is.
    """

    catalog: str = ""
    table: str = ""
    table_uuid: str = ""

    @classmethod
    def of(cls, table: Table) -> Owner:
        """The owner of `table`'s index: its catalog, identifier and UUID."""
        catalog = table.catalog
        return cls(
            catalog_identity(catalog.name, catalog.properties),
            ".".join(table.name()),
            str(table.metadata.table_uuid),
        )

    def fields(self) -> Mapping:
        """What a marker records of the owner."""
        return {"catalog": self.catalog, "table": self.table, "table_uuid": self.table_uuid}

    def owns(self, recorded: Mapping) -> bool:
        """Whether a marker's owner fields, `recorded`, name this owner.

        They do with the same catalog and identifier, or the same table UUID, which is
        all a marker of an older version names.
        """
        if self.table_uuid and recorded.get("table_uuid") == self.table_uuid:
            return True
        return bool(recorded.get("table")) and (recorded.get("catalog"), recorded.get("table")) == (
            self.catalog,
            self.table,
        )

    def describe(self) -> str:
        return f"table {self.table!r} of catalog {self.catalog!r}"


def catalog_identity(name: str, properties: Mapping) -> str:
    """The catalog's name and where it is (its URI, warehouse or Glue catalog; no credentials)."""
    locator = next((str(properties[k]) for k in CATALOG_LOCATORS if properties.get(k)), "")
    parts = urlsplit(locator)
    if parts.netloc and "@" in parts.netloc:  # never record user:password in an index's mapping
        locator = urlunsplit(parts._replace(netloc=parts.netloc.rsplit("@", 1)[1]))
    return f"{name} ({locator})" if locator else name


def marker(index: str, table_uuid: str, shape: str = "", owner: Owner | None = None) -> Mapping:
    """The `_meta` of a generation of the alias `index`, holding table `table_uuid`'s documents.

    It records the index's `shape` (`Shape.fingerprint`, absent for
    the whole table) and its `owner`.
    """
    owned = {**(owner.fields() if owner is not None else {}), "table_uuid": table_uuid}
    return {MARKER: {"index": index, **owned, **({"shape": shape} if shape else {})}}


def recorded_marker(body: Mapping) -> Mapping | None:
    """icecdc's marker in an index's `_meta` (`body`: the index as GET returns it); None: none."""
    meta = (body.get("mappings") or {}).get("_meta") or {}
    found = meta.get(MARKER) if isinstance(meta, dict) else None
    return found if isinstance(found, dict) else None


@dataclass(frozen=True)
class Held:
    """A concrete index under a table's index name: its name, uuid and icecdc's marker (or None)."""

    name: str
    uuid: str
    marker: Mapping | None


@dataclass(frozen=True)
class NameHolder:
    """What holds a table's index name in OpenSearch: an alias and its indexes, or one index.

    The one index is a concrete index of that name.
    """

    alias: bool
    indexes: tuple[Held, ...]

    def describe(self, index: str) -> str:
        names = ", ".join(repr(h.name) for h in self.indexes)
        return f"alias {index!r} (over {names})" if self.alias else f"index {index!r}"


def foreign(
    holder: NameHolder | None,
    index: str,
    owner: Owner,
    known: AbstractSet[str],
) -> list[Held]:
    """The indexes under the name `index` that are not icecdc's for `owner`.

    Empty when the name is free, or every index under it is this table's. `known`
    holds the uuids the table's state names.
    """
    if holder is None:
        return []
    return [held for held in holder.indexes if not _owned(held, index, owner, known)]


def _owned(held: Held, index: str, owner: Owner, known: AbstractSet[str]) -> bool:
    if held.uuid and held.uuid in known:
        return True
    recorded = held.marker
    return recorded is not None and recorded.get("index") == index and owner.owns(recorded)


def refusal(holder: NameHolder | None, index: str, owner: Owner, known: AbstractSet[str]) -> str:
    """Why icecdc must not write the index `index` for `owner`, or "" when it may.

    The reason is one line naming the index, whose it is and the way forward.
    """
    others = foreign(holder, index, owner, known)
    if holder is None or not others:
        return ""
    whose = "; ".join(_whose(held, index) for held in others)
    return (
        f"{holder.describe(index)} is not icecdc's for {owner.describe()} ({whose}); "
        "nothing was written: configure another index name, or set index_takeover: true to take "
        f"the name over (an index is first kept as '{index}{KEPT_SUFFIX}<time>', the indexes an "
        "alias names stay as they are)"
    )


# The name a taken-over concrete index is kept under: `<index><KEPT_SUFFIX><UTC time>`.
KEPT_SUFFIX = "-preicecdc-"


def _whose(held: Held, index: str) -> str:
    recorded = held.marker
    if recorded is None:
        return f"{held.name!r} carries no icecdc marker"
    if recorded.get("index") != index:
        return f"{held.name!r} is icecdc's generation of index {recorded.get('index')!r}"
    table = recorded.get("table") or f"uuid {recorded.get('table_uuid')}"
    catalog = f" of catalog {recorded['catalog']!r}" if recorded.get("catalog") else ""
    return f"{held.name!r} holds table {table!r}{catalog}"


def held(name: str, body: Any) -> Held:
    """The `Held` of the index `name` as GET returns it (`body`)."""
    return Held(name, str(body["settings"]["index"].get("uuid", "")), recorded_marker(body))
