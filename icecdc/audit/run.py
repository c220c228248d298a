"""The audit and the repair as the command line asks for them.

They take configured tables, opened from the configuration, and the scope of a repair read from its
arguments or from the last audit.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyiceberg.schema import Schema

from icecdc.audit.audit import (
    DEFAULT_LIST_LIMIT,
    DEFAULT_MAX_IDS,
    DEFAULT_SAMPLE,
    AuditOptions,
    TableAndIndex,
    audit_table,
)
from icecdc.audit.findings import findings_location, load_findings, save_findings
from icecdc.audit.repair import repair
from icecdc.audit.report import AuditReport, RepairReport, RepairScope
from icecdc.catalog import identifier_columns, load_table, open_catalog
from icecdc.config import Config
from icecdc.destination.client import check_reachable
from icecdc.destination.port import Destination
from icecdc.documents import DocumentMapper, Shape
from icecdc.errors import OperationError
from icecdc.lookup import whole_rows_only
from icecdc.state import open_state_store

log = logging.getLogger(__name__)


def audit(
    config: Config,
    table_names: Iterable[str] | None = None,
    sample: int = DEFAULT_SAMPLE,
    seed: int | None = None,
    findings: str | None = None,
    max_ids: int = DEFAULT_MAX_IDS,
    list_limit: int = DEFAULT_LIST_LIMIT,
) -> list[AuditReport]:
    """Audit the named tables, every configured one by default, and keep each report.

    A report is kept where `repair --from-audit` finds it, at `findings_location`. `audit_table`
    says what the other arguments ask.
    """
    chosen = [config.table(n) for n in table_names] if table_names else list(config.tables)
    selected = [whole_rows_only(t, "audit") for t in chosen]
    location = findings_location(config, findings)
    options = AuditOptions(sample, seed, max_ids, list_limit)
    destination = Destination.open(config.opensearch, config.dead_letter)
    client, dead_letters = destination.client, destination.dead_letters
    check_reachable(client, config.opensearch.url, *config.index_names[:1])
    catalog = open_catalog(config.catalog)
    store = open_state_store(config.state)
    reports = []
    try:
        for table_config in selected:
            table = load_table(catalog, table_config.name)
            identifiers = identifier_columns(table, table_config)
            opened = TableAndIndex(table, table_config, identifiers, store, client)
            report = audit_table(opened, options, dead_letters)
            save_findings(location, report)
            reports.append(report)
    finally:
        store.close()
    return reports


@dataclass(frozen=True)
class RepairIds:
    """The rows a repair is asked for by name: document ids, and rows by their identifier values.

    The ids are exactly as written. The identifier values map a column to its value as documents
    hold it, and `key_ids` turns them into ids.
    """

    ids: tuple[str, ...] = ()
    keys: tuple[dict[str, Any], ...] = ()

    def __bool__(self) -> bool:
        return bool(self.ids or self.keys)

    @classmethod
    def from_arguments(
        cls,
        ids: Iterable[str],
        keys: Iterable[str],
        ids_file: Path | None = None,
        legacy: Iterable[str] = (),
    ) -> RepairIds:
        """From `--id`, `--key`, `--ids-file` and the deprecated `--ids`.

        - `--id` names an id exactly.
        - `--key` is a JSON object.
        - In `--ids-file`, a line that is a JSON object is a key, a JSON string an id, and any other
          line an id as written.
        - `--ids` is one id with no comma: splitting at commas could not name an id holding one.
        """
        named, objects = list(ids), [_key(text, "--key") for text in keys]
        for text in legacy:
            if "," in text:
                raise OperationError(
                    f"--ids {text!r}: --ids no longer splits at commas (an id may hold one): "
                    "name each id with --id, a composite key with --key JSON, "
                    "or many with --ids-file"
                )
            named.append(text)
        if ids_file is not None:
            try:
                lines = ids_file.read_text().splitlines()
            except OSError as exc:
                raise OperationError(f"--ids-file {str(ids_file)!r}: {exc.strerror}") from None
            for line in (line for line in lines if line.strip()):
                parsed = _json(line)
                if isinstance(parsed, dict):
                    objects.append(parsed)
                else:
                    named.append(parsed if isinstance(parsed, str) else line)
        return cls(tuple(dict.fromkeys(named)), tuple(objects))


def _json(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None


def _key(text: str, option: str) -> dict[str, Any]:
    value = _json(text)
    if not isinstance(value, dict) or not value:
        example = '{"id": 1}'
        raise OperationError(
            f"{option} {text!r}: write a row's identifier values as a JSON object, e.g. {example}"
        )
    return value


def key_ids(
    schema: Schema, name: str, identifiers: tuple[str, ...], keys: Iterable[dict[str, Any]]
) -> list[str]:
    """The `_id` of each key, a map of identifier column to value as documents hold it.

    It raises OperationError naming a key that does not give exactly the identifier columns, or
    gives one as null.
    """
    mapper = DocumentMapper(schema, identifiers, Shape())
    found = []
    for key in keys:
        if not identifiers or set(key) != set(identifiers):
            raise OperationError(
                f"table {name!r}: key {json.dumps(key)} must name exactly its identifier columns "
                f"{list(identifiers)}"
            )
        try:
            found.append(mapper.document_id(_as_document(key)))
        except ValueError as exc:
            raise OperationError(f"table {name!r}: key {json.dumps(key)}: {exc}") from None
    return found


def _as_document(key: dict[str, Any]) -> dict[str, Any]:
    """A key, a map of identifier column to value, as a document holds it.

    A nested column's value, such as `key.id`'s, is under its path.
    """
    document: dict[str, Any] = {}
    for column, value in key.items():
        *parents, leaf = column.split(".")
        place = document
        for part in parents:
            place = place.setdefault(part, {})
        place[leaf] = value
    return document


def repair_scope(
    config: Config,
    name: str,
    partitions: Iterable[str] = (),
    ids: RepairIds | Iterable[str] = (),
    from_audit: bool = False,
    findings: str | None = None,
) -> RepairScope:
    """The scope the arguments name.

    - `partitions` as `column=value[,column=value]`, one partition each;
    - `ids`: document ids, exactly as written, or a `RepairIds`;
    - or the findings of the table's last audit.
    """
    table_config = config.table(name)  # an unknown table fails first
    named = ids if isinstance(ids, RepairIds) else RepairIds(tuple(ids))
    if from_audit:
        if list(partitions) or named:
            raise OperationError("name a scope, or take the last audit's (--from-audit), not both")
        return load_findings(findings_location(config, findings), name).scope()
    parsed = tuple(parse_partition(p) for p in partitions)
    keyed: list[str] = []
    if named.keys:
        table = load_table(open_catalog(config.catalog), name)
        keyed = key_ids(table.schema(), name, identifier_columns(table, table_config), named.keys)
    return RepairScope(parsed, tuple(dict.fromkeys([*named.ids, *keyed])))


def parse_partition(text: str) -> dict[str, Any]:
    """`region=us,day=2024-05-01` → {"region": "us", "day": "2024-05-01"}.

    A value that is JSON `null` names the null partition, a JSON string such as `"null"` its text.
    Any other value is as written.
    """
    partition: dict[str, Any] = {}
    for part in text.split(","):
        column, equals, value = part.partition("=")
        if not equals or not column.strip():
            raise OperationError(
                f"partition {text!r}: write each column as column=value, e.g. region=us"
            )
        partition[column.strip()] = _value(value)
    return partition


def _value(text: str) -> Any:
    try:
        value = json.loads(text)
    except ValueError:
        return text
    return value if value is None or isinstance(value, str) else text


def repair_named(
    config: Config, name: str, scope: RepairScope, destination: Destination | None = None
) -> RepairReport:
    """Repair the scope of a configured table, through the command's `destination` if opened.

    An empty scope, as from an audit that found nothing, writes nothing.
    """
    if not scope:
        log.info("%s: nothing to repair", name)
        return RepairReport(
            name,
            config.table(name).index,
            scope,
            0,
            notes=["nothing to repair: the scope is empty"],
        )
    return repair(config, name, scope, destination)
