"""`icecdc check`: everything a first sync needs, verified without writing anything.

The configuration parses, the state can be read and written, the catalog opens, and each table
loads, in format v2 or later, with its identifier columns. OpenSearch answers and admits the
credentials, the ingest pipelines named exist, and each index name is free or icecdc's
for its table (`icecdc.destination.index.ownership`).

Each check is a `Check` with its fix, as `icecdc doctor` reports them (`icecdc.checklist`). A check
that cannot run because an earlier one failed is skipped, saying which.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

from pyiceberg.catalog import Catalog
from pyiceberg.table import Table

from icecdc.catalog import identifier_columns, load_table, missing_sqlite_file, open_catalog
from icecdc.checklist import Check, failed, passed, skipped, warned
from icecdc.config import Config, SqliteStateConfig, TableConfig, TableIndexConfig, load_config
from icecdc.destination.client import (
    REACHABILITY_PROBE,
    OpenSearch,
    OpenSearchConnectionError,
    TransportError,
    describe_failure,
    reach,
)
from icecdc.destination.index import IndexAlias, Owner, check_pipeline
from icecdc.destination.index.ownership import refusal
from icecdc.destination.port import Destination
from icecdc.errors import IcecdcError, StateUnwritable
from icecdc.init_config import WITHOUT_IDENTIFIERS
from icecdc.state import StateStore
from icecdc.state.scratch import scratch_copy
from icecdc.state.sqlite import (
    CORRUPT_FIX,
    NEW_FILE_FIX,
    UNWRITABLE_FIX,
    holds_state,
    unwritable,
)
from icecdc.words import counted

CONFIG, STATE, CATALOG, TABLE = "config", "state", "catalog", "table"
IDENTIFIERS, OPENSEARCH, PIPELINE, INDEX = "identifier columns", "opensearch", "pipeline", "index"
NO_IDENTIFIERS = f"none: {WITHOUT_IDENTIFIERS}"
CREDENTIALS = "check opensearch.username/password or the AWS identity, and its permissions"
START_SERVER = "start one (`icecdc dev-server` runs a local server), or correct opensearch.url"


@dataclass(frozen=True)
class _Loaded:
    """A configured table and what the catalog gave of it."""

    config: TableConfig
    table: Table


def check(path: Path) -> list[Check]:
    """Every check of the configuration file `path`, in order. Reads only."""
    try:
        config = load_config(path)
    except IcecdcError as exc:
        return [failed(CONFIG, str(exc), "correct the key it names (docs/getting-started.md)")]
    indexes = counted(len(config.index_names), "index", "indexes")
    counts = f"{counted(len(config.tables), 'table')}, {indexes}"
    checks = [passed(CONFIG, f"{path} parses: {counts}")]
    state, known = _state(config)
    catalog, opened = _catalog(config)
    checks += [state, catalog]
    loaded: list[_Loaded] = []
    for table_config in config.tables:
        if opened is None:
            checks.append(skipped(TABLE, "the catalog did not open", subject=table_config.name))
            continue
        found, table = _table(table_config, opened)
        checks += found
        loaded += [_Loaded(table_config, table)] if table is not None else []
    reachable, client = _opensearch(config)
    checks.append(reachable)
    for item in loaded:
        checks += _indexes(client, config.opensearch.url, item, known)
    return checks


def _state(config: Config) -> tuple[Check, dict[str, set[str]]]:
    """The state can be read and written, and the index uuids each index's checkpoint names.

    A copy of the state is read, as reading a SQLite file must not create it; a SQLite file's
    filesystem is probed for a write (`sqlite.unwritable`). The uuids a checkpoint names are the
    table's, whatever their marker.
    """
    keys = [configured.key for table in config.tables for configured in table.each_index()]
    state = config.state
    where = state.path if isinstance(state, SqliteStateConfig) else f"DynamoDB table {state.table}"
    with tempfile.TemporaryDirectory(prefix="icecdc-check-") as scratch:
        try:
            store = scratch_copy(config.state, keys, Path(scratch))
        except IcecdcError as exc:
            fix = UNWRITABLE_FIX if isinstance(exc, StateUnwritable) else CORRUPT_FIX
            return failed(STATE, str(exc), fix), {}
        try:
            known = _known_indexes(store, keys)
        finally:
            store.close()
    refused = unwritable(Path(state.path)) if isinstance(state, SqliteStateConfig) else None
    if refused is not None:
        fix = UNWRITABLE_FIX if holds_state(Path(where)) else NEW_FILE_FIX
        return failed(STATE, str(refused), fix), known
    synced = sum(bool(uuids) for uuids in known.values())
    first = f"{len(keys) - synced} to export first" if synced < len(keys) else "all synced"
    found = f"{where}: {synced} of {len(keys)} indexes have a checkpoint ({first})"
    return passed(STATE, found), known


def _known_indexes(store: StateStore, keys: list[str]) -> dict[str, set[str]]:
    known = {}
    for key in keys:
        checkpoint = store.get_checkpoint(key)
        uuid = checkpoint.index_uuid if checkpoint is not None else ""
        known[key] = {uuid} if uuid else set()
    return known


def _catalog(config: Config) -> tuple[Check, Catalog | None]:
    properties = config.catalog.properties
    missing = missing_sqlite_file(properties)
    if missing is not None:
        fix = "correct catalog.uri (sqlite:///<absolute path>)"
        return failed(CATALOG, f"the catalog database {missing} does not exist", fix), None
    try:
        catalog = open_catalog(config.catalog)
    except IcecdcError as exc:
        fix = "correct the catalog's keys (pyiceberg's load_catalog properties)"
        return failed(CATALOG, str(exc), fix), None
    kind = properties.get("type", "default type")
    return passed(CATALOG, f"catalog {config.catalog.name!r} ({kind}) opens"), catalog


def _table(table_config: TableConfig, catalog: Catalog) -> tuple[list[Check], Table | None]:
    """The table loads, is format v2+, and has identifier columns icecdc can use (or none, said)."""
    name = table_config.name
    try:
        table = load_table(catalog, name)
    except IcecdcError as exc:
        fix = "correct tables[].name (<namespace>.<table>), or create the table"
        return [failed(TABLE, str(exc), fix, subject=name)], None
    if table.format_version < 2:
        upgrade = "set the table property format-version=2 (documents are versioned by it)"
        return [failed(TABLE, "Iceberg format v1", upgrade, subject=name)], None
    current = table.current_snapshot()
    at = f"current snapshot {current.snapshot_id}" if current is not None else "no snapshot yet"
    loads = passed(
        TABLE,
        f"loads: format v{table.format_version}, "
        f"{counted(len(table.snapshots()), 'snapshot')}, {at}",
        subject=name,
    )
    try:
        columns = identifier_columns(table, table_config)
    except IcecdcError as exc:
        fix = "correct identifier_columns (or the index's shape) to name columns of the table"
        return [loads, failed(IDENTIFIERS, str(exc), fix, subject=name)], None
    if not columns:
        fix = "set identifier_columns: [<column>, ...], or identifier fields in its schema"
        return [loads, warned(IDENTIFIERS, NO_IDENTIFIERS, fix, subject=name)], table
    configured = table_config.identifier_columns is not None
    source = "configured" if configured else "the schema's identifier fields"
    return [
        loads,
        passed(IDENTIFIERS, f"{', '.join(columns)} ({source}): each document's _id", subject=name),
    ], table


def _opensearch(config: Config) -> tuple[Check, OpenSearch | None]:
    url = config.opensearch.url
    client = Destination.open(config.opensearch).client
    try:
        found = reach(client, (*config.index_names, REACHABILITY_PROBE)[0])
    except TransportError as exc:
        unreachable = isinstance(exc, OpenSearchConnectionError)
        fix = START_SERVER if unreachable else CREDENTIALS
        return failed(OPENSEARCH, describe_failure(exc, url), fix), None
    return passed(OPENSEARCH, f"{url} answers and admits the credentials: {found}"), client


def _indexes(
    client: OpenSearch | None,
    url: str,
    loaded: _Loaded,
    known: dict[str, set[str]],
) -> list[Check]:
    """Each index of the table: its pipeline exists, and its name is free or the table's."""
    checks: list[Check] = []
    for configured in loaded.config.each_index():
        index = configured.config.index
        if client is None:
            checks.append(skipped(INDEX, "OpenSearch did not answer", subject=index))
            continue
        if configured.config.pipeline is not None:
            checks.append(_pipeline(client, configured.config.pipeline, index))
        uuids = known.get(configured.key, set())
        checks.append(_ownership(client, url, configured.config, loaded.table, uuids))
    return checks


def _pipeline(client: OpenSearch, pipeline: str, index: str) -> Check:
    try:
        check_pipeline(client, pipeline, index)
    except IcecdcError as exc:
        create = f"create it (PUT _ingest/pipeline/{pipeline}), or remove the index's pipeline key"
        return failed(PIPELINE, str(exc), create, subject=index)
    return passed(PIPELINE, f"ingest pipeline {pipeline!r} exists", subject=index)


def _ownership(
    client: OpenSearch,
    url: str,
    config: TableIndexConfig,
    table: Table,
    known: set[str],
) -> Check:
    """Whether the name is free, icecdc's for this table, or someone else's.

    Someone else's is refused, unless taken over.
    """
    owner = Owner.of(table)
    try:
        holder = IndexAlias(client, config.index).holder()
    except TransportError as exc:
        return failed(
            INDEX,
            describe_failure(exc, url),
            "grant the credentials read access to the index",
            subject=config.index,
        )
    refused = refusal(holder, config.index, owner, known)
    whose = refused.split("; nothing was written")[0]
    if refused and config.index_takeover:
        return warned(
            INDEX,
            f"{whose}: the first sync takes the name over (index_takeover)",
            subject=config.index,
        )
    if refused:
        fix = f"name another index for {config.name!r}, or set index_takeover: true to take it over"
        return failed(INDEX, whose, fix, subject=config.index)
    if holder is None:
        return passed(
            INDEX,
            "free: the first sync creates its first generation and the alias",
            subject=config.index,
        )
    return passed(
        INDEX,
        f"{holder.describe(config.index)} is icecdc's for {owner.describe()}",
        subject=config.index,
    )
