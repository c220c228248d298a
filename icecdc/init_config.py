"""`icecdc init`: a commented configuration for a catalog and the tables a user names.

It has every key a first sync needs. The identifier columns are read from each table when
the catalog can be read; else the key is a commented placeholder saying what to put
there. It writes nothing but the file: a SQLite catalog that does not exist is not
created. It never overwrites a file unasked.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

import yaml
from pyiceberg.schema import Schema
from pyiceberg.table import Table

from icecdc.catalog import can_identify, load_table, missing_sqlite_file, open_catalog
from icecdc.config import CatalogConfig, parse_config
from icecdc.errors import IcecdcError, OperationError

DEFAULT_OPENSEARCH = "http://127.0.0.1:9200"  # where `icecdc dev-server` listens by default
# What a table without identifier columns means (README: tables without identifier columns).
WITHOUT_IDENTIFIERS = (
    "icecdc follows appends only (ids from data file and row position), "
    "and the first commit that removes rows fails with a clear error"
)


class CatalogType(StrEnum):
    SQL = "sql"
    GLUE = "glue"
    REST = "rest"


@dataclass(frozen=True)
class InitRequest:
    """What the user named: the catalog, the tables, OpenSearch, and where the file goes."""

    catalog_uri: str | None
    catalog_type: CatalogType
    tables: tuple[str, ...]
    path: Path
    warehouse: str | None = None
    opensearch: str = DEFAULT_OPENSEARCH


@dataclass(frozen=True)
class TableFacts:
    """What the catalog said of a table: its identifier fields and columns.

    `unread` says why it could not say.
    """

    name: str
    identifiers: tuple[str, ...] = ()
    columns: tuple[str, ...] = ()
    unread: str = ""
    # The column the placeholder of identifier_columns names: the likeliest to be a row's
    # identity, of those that can be one (`identity_candidate`); None when none can.
    candidate: str | None = None


def catalog_section(request: InitRequest) -> dict[str, str]:
    """The `catalog:` keys of the request: pyiceberg's `load_catalog` properties."""
    kind = str(request.catalog_type)
    section = {"name": "lake" if kind == CatalogType.SQL else kind, "type": kind}
    if request.catalog_uri:
        section["uri"] = request.catalog_uri
    if request.warehouse:
        section["warehouse"] = request.warehouse
    return section


def read_tables(catalog: dict[str, str], names: tuple[str, ...]) -> list[TableFacts]:
    """Each table's identifier fields and columns, as the catalog has them.

    A table the catalog cannot give, unreachable or missing, says why instead.
    """
    missing = missing_sqlite_file(catalog)
    if missing is not None:
        unread = f"the catalog database {missing} does not exist"
        return [TableFacts(n, unread=unread) for n in names]
    try:
        opened = open_catalog(CatalogConfig.model_validate(catalog))
    except IcecdcError as exc:
        return [TableFacts(n, unread=str(exc)) for n in names]
    facts = []
    for name in names:
        try:
            facts.append(table_facts(name, load_table(opened, name)))
        except IcecdcError as exc:
            facts.append(TableFacts(name, unread=str(exc)))
    return facts


def table_facts(name: str, table: Table) -> TableFacts:
    schema = table.schema()
    names = schema.identifier_field_names()
    identifiers = sorted(names, key=lambda n: schema.find_field(n).field_id)
    columns = tuple(f"{f.name} ({f.field_type})" for f in schema.fields)
    return TableFacts(name, tuple(identifiers), columns, candidate=identity_candidate(schema))


def identity_candidate(schema: Schema) -> str | None:
    """The top-level column likeliest to be a row's identity, of those that can be one.

    An identifier column is primitive and not a float or double (icecdc.catalog). Likeliest:
    `id`, then a name ending in `id`, then a required column, then the first; None when no
    column can be one.
    """
    usable = [field for field in schema.fields if can_identify(field.field_type)]
    ranked = sorted(
        usable,
        key=lambda f: (f.name.lower() != "id", not f.name.lower().endswith("id"), not f.required),
    )
    return ranked[0].name if ranked else None


def render(request: InitRequest, facts: list[TableFacts]) -> str:
    """The configuration file's text: every key a first sync needs, each with a comment."""
    here = request.path.resolve().parent
    catalog = yaml.safe_dump({"catalog": catalog_section(request)}, sort_keys=False).rstrip()
    lines = [
        "# icecdc configuration, written by `icecdc init` (docs/getting-started.md).",
        "# Next: `icecdc check` (verifies all of it, writes nothing), `icecdc sync --dry-run`,",
        "# then `icecdc sync`, `icecdc status`, `icecdc verify`.",
        "",
        "# The Iceberg catalog: any pyiceberg catalog; every key but `name` is a property",
        "# pyiceberg's load_catalog is given.",
        *_catalog_hints(request),
        catalog,
        "",
        "# Where icecdc keeps each table's checkpoint and work items: a local SQLite file",
        "# (in AWS: type: dynamodb, table: <name>). Without it, the next sync exports again.",
        "state:",
        "  type: sqlite",
        f"  path: {_scalar(str(here / 'icecdc-state.db'))}",
        "",
        "# OpenSearch: `icecdc dev-server` runs a local one at http://127.0.0.1:9200.",
        "opensearch:",
        f"  url: {_scalar(request.opensearch)}",
        "  # username: admin          # basic auth: username and password go together",
        "  # password: ...",
        "  # aws_region: eu-west-1    # or SigV4 signing for an Amazon OpenSearch Service domain",
        "",
        "# Documents OpenSearch refuses for their own fault (too large, a value the mapping",
        "# refuses) are kept here, and the sync goes on; `icecdc dead-letters list` shows them.",
        "dead_letter:",
        f"  path: {_scalar(str(here / 'dead-letters'))}",
        "",
        "# Where each pass runs. auto: in-process (no JVM) for small passes, Spark for large ones",
        "# (pip install 'icecdc[spark]'); spark or in_process force one.",
        "engine:",
        "  use: auto",
        "",
        "tables:",
    ]
    for fact in facts:
        lines += _table_lines(fact)
    return "\n".join(lines) + "\n"


def _catalog_hints(request: InitRequest) -> list[str]:
    if request.catalog_type == CatalogType.GLUE:
        return [
            "# glue.id: '123456789012'      # the Glue Data Catalog's account, if not the caller's",
            "# client.region: eu-west-1",
        ]
    if request.catalog_type == CatalogType.REST:
        return ["# credential: client_id:client_secret   # or token: ... (pyiceberg's REST keys)"]
    if request.warehouse:
        return []
    return ["# warehouse: file:///path/to/warehouse   # where new tables' files go"]


def _table_lines(fact: TableFacts) -> list[str]:
    index = fact.name.split(".")[-1].lower()
    lines = [
        f"  - name: {_scalar(fact.name)}",
        "    # The index: an alias over generations <index>-<n>, which icecdc creates and owns.",
        f"    index: {_scalar(index)}",
        "    # The columns whose values make a document's _id (a row's identity); unset: the",
        "    # schema's identifier fields. Without any:",
        *_comment(f"{WITHOUT_IDENTIFIERS}.", "    # "),
    ]
    if fact.unread:
        lines += [
            f"    # Not read from the table: {fact.unread}.",
            "    # identifier_columns: [<column>]",
        ]
    elif fact.identifiers:
        lines += [
            "    # Read from the table's schema (its identifier fields):",
            f"    identifier_columns: {_flow(list(fact.identifiers))}",
        ]
    else:
        lines += [
            "    # The table's schema names no identifier fields: name a row's identity columns:",
            f"    # columns: {', '.join(fact.columns)}",
            f"    # identifier_columns: [{fact.candidate}]"
            if fact.candidate is not None
            else "    # (none can be one: each is a float, double, struct, list or map)",
        ]
    return lines


def _comment(text: str, prefix: str) -> list[str]:
    """`text` as comment lines, each starting with `prefix`, within 100 characters."""
    return [prefix + line for line in textwrap.wrap(text, 100 - len(prefix))]


def _scalar(value: str) -> str:
    """`value` as a YAML scalar (quoted where YAML would read it otherwise)."""
    return yaml.safe_dump(value, default_style=None).removesuffix("\n...\n").strip()


def _flow(values: list[Any]) -> str:
    return yaml.safe_dump(values, default_flow_style=True).strip()


def write_config(request: InitRequest, force: bool) -> list[TableFacts]:
    """Write the configuration file, and return what was read of each table.

    It is refused when the file exists, unless `force`. The text is checked with the configuration's
    own parser before it is written.
    """
    if request.path.exists() and not force:
        overwrite = "give --force to overwrite it, or another --config"
        raise OperationError(f"{request.path} exists; nothing was written: {overwrite}")
    facts = read_tables(catalog_section(request), request.tables)
    text = render(request, facts)
    parse_config(yaml.safe_load(text))  # a file `init` writes always loads
    request.path.parent.mkdir(parents=True, exist_ok=True)
    request.path.write_text(text)
    return facts
