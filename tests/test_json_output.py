"""`--json` on sync, verify, audit and status: one JSON document on stdout and nothing else (logs
go to stderr), times in ISO 8601 UTC, counts as numbers."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from icecdc.model import EngineKind
from tests.support.cli import icecdc
from tests.support.pipeline import Pipeline
from tests.support.tables import orders, rows

NAME = "db.orders"


@pytest.fixture
def local(tmp_path: Path, osmem_clone: Any) -> Pipeline:
    return Pipeline(tmp_path, osmem_clone.url, spark=None, engine=EngineKind.IN_PROCESS)


def document(*args: str, logs: bool = False) -> Any:
    """The command's stdout as JSON (it parses whole: nothing else is printed). `logs`: its INFO
    logs are on stderr."""
    run = icecdc(*args)
    assert run.returncode == 0, run.stderr
    assert (" INFO " in run.stderr) == logs, run.stderr
    return json.loads(run.stdout)


def utc(text: str) -> dt.datetime:
    assert text.endswith("Z"), text
    return dt.datetime.fromisoformat(text)


def test_sync_verify_audit_and_status_print_one_json_document(local: Pipeline) -> None:
    orders(local).append(rows(1, 2, 3))
    path = local.workdir / "icecdc.yaml"
    path.write_text(yaml.safe_dump(local.config_dict([{"name": NAME}])))
    config = ("--config", str(path), "--json")

    synced = document("sync", *config, logs=True)
    assert utc(synced["started_at"]) <= utc(synced["finished_at"])
    (table,) = synced["tables"]
    assert table["table"] == NAME and table["indexed"] == 3 and table["rows_read"] == 3
    current = local.catalog.load_table(NAME).metadata.current_snapshot_id
    assert table["checkpoint"]["snapshot_id"] == current

    verified = document("verify", *config)
    utc(verified["verified_at"])
    (index,) = verified["indexes"]
    assert verified["equal"] is True and index["equal"] is True and index["counts"]["missing"] == 0

    (audited,) = document("audit", *config)  # its summary is the document: not logged too
    assert audited["drifted"] is False and audited["rows"] == 3
    utc(audited["audited_at"])

    (status,) = document("status", *config)
    assert status["lag_snapshots"] == 0 and status["pending_items"] == 0
    utc(status["checkpointed_at"])
    assert utc(status["last_audit"]["audited_at"]) == utc(audited["audited_at"])
