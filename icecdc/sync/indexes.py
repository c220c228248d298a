"""A table's index as a sync finds it: claimed, the spec a pass writes, where a pass wrote.

`claim_index` checks that an index's name holds nothing but this table's index before anything is
written. A capped pass records in `WorkItem.applied_to` where its items' rows are
(`AppliedMark`); `applied_indexes` reads those marks back.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass

from pyiceberg.table import Table

from icecdc.config import TableIndexConfig
from icecdc.destination.client import OpenSearch
from icecdc.destination.index import IndexAlias, IndexSpec, Owner, index_spec
from icecdc.model import ItemHead, ItemStatus, sha256
from icecdc.state import StateStore


def claim_index(
    client: OpenSearch,
    config: TableIndexConfig,
    store: StateStore,
    table: Table,
) -> IndexAlias:
    """The table's index, after checking that its name holds nothing but this table's index.

    `IndexAlias.claim` checks it: it raises IndexNotOwned, or takes the name over on the user's
    opt-in. `store` is the index's state, and the uuids it names are the table's.
    """
    alias = alias_of(client, config, table)
    checkpoint = store.get_checkpoint(config.name)
    known = {checkpoint.index_uuid} if checkpoint is not None and checkpoint.index_uuid else set()
    known |= applied_indexes(store.pending_heads(config.name))
    alias.claim(Owner.of(table), known, config.index_takeover)
    return alias


def alias_of(client: OpenSearch, config: TableIndexConfig, table: Table) -> IndexAlias:
    """The table's index as icecdc keeps it, its generations marked with the table as owner."""
    return IndexAlias(client, config.index, Owner.of(table))


def spec_of(table: Table, config: TableIndexConfig) -> IndexSpec:
    """The index of the documents a pass writes: the mapping of the table's current schema."""
    return index_spec(table.schema(), config, str(table.metadata.table_uuid))


@dataclass(frozen=True)
class AppliedMark:
    """Where a capped pass wrote its items' rows, as `WorkItem.applied_to` records it.

    `<index uuid>@schema-<id>@ids-<digest>`: the index, the schema the rows were read with (a
    schema change before the export ends makes them stale), and a digest of the identifier columns
    their ids were made of. Marks written before hold fewer parts; a part not recorded is "".
    """

    index_uuid: str
    schema: str = ""  # `schema-<id>`
    identifiers: str = ""  # `ids-<digest>` (`_ids`)

    @classmethod
    def of(cls, index_uuid: str, schema_id: int, identifiers: tuple[str, ...]) -> AppliedMark:
        return cls(index_uuid, f"schema-{schema_id}", _ids(identifiers))

    @classmethod
    def parse(cls, text: str) -> AppliedMark:
        index_uuid, schema, identifiers, *_ = (*text.split("@"), "", "")
        return cls(index_uuid, schema, identifiers)

    def __str__(self) -> str:
        return "@".join(part for part in (self.index_uuid, self.schema, self.identifiers) if part)

    def has_ids_of(self, identifiers: tuple[str, ...]) -> bool:
        """Whether its rows have ids of these columns; a mark that records none counts for any."""
        return not self.identifiers or self.identifiers == _ids(identifiers)


def applied_mark(index_uuid: str, schema_id: int, identifiers: tuple[str, ...]) -> str:
    """What a capped pass records in `WorkItem.applied_to` (an `AppliedMark`)."""
    return str(AppliedMark.of(index_uuid, schema_id, identifiers))


def applied_indexes(
    items: Iterable[ItemHead], identifiers: tuple[str, ...] | None = None
) -> frozenset[str]:
    """The uuids of the indexes the APPLIED ones of `items` were written to.

    With `identifiers`, only indexes whose rows have ids of these columns count: a rebuild does not
    resume, nor a first export go on in, an index holding ids of other columns.
    """
    marks = [
        AppliedMark.parse(i.applied_to)
        for i in items
        if i.status == ItemStatus.APPLIED and i.applied_to
    ]
    return frozenset(
        m.index_uuid for m in marks if identifiers is None or m.has_ids_of(identifiers)
    )


def _ids(identifiers: tuple[str, ...]) -> str:
    """The identifier columns as an applied mark records them: a digest of their names."""
    return f"ids-{sha256(json.dumps(identifiers))[:16]}"
