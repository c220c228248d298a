"""Where the last audit of each table is kept, for `icecdc repair --from-audit`.

It is a JSON file per table beside a local state store, or at a location given: a directory or
`s3://bucket/prefix`.
"""

from __future__ import annotations

from pathlib import Path

from icecdc.audit.report import AuditReport
from icecdc.config import Config, SqliteStateConfig
from icecdc.errors import OperationError
from icecdc.storage import Location, name_part


def findings_location(config: Config, given: str | None = None) -> str:
    """`given`, else the directory `audits` beside a SQLite state file.

    A DynamoDB state needs one given.
    """
    if given:
        return given
    if isinstance(config.state, SqliteStateConfig):
        return str(Path(config.state.path).resolve().parent / "audits")
    raise OperationError(
        "the state is in DynamoDB: name where audits are kept "
        "(a directory or s3://bucket/prefix) with --findings"
    )


def save_findings(location: str, report: AuditReport) -> None:
    Location(location).put(f"{name_part(report.table)}.json", report.to_json())


def load_findings(location: str, table_name: str) -> AuditReport:
    """The table's last audit; OperationError when there is none at the location."""
    text = Location(location).get(f"{name_part(table_name)}.json")
    if text is None:
        raise OperationError(
            f"no audit of table {table_name!r} is kept at {location}: run icecdc audit first"
        )
    return AuditReport.from_json(text)
