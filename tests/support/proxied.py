"""Syncs of the orders table with OpenSearch reached through the fault proxy."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from icecdc.config import Config, parse_config
from icecdc.sync import SyncResult, sync
from tests.support.faults import FaultProxy
from tests.support.pipeline import Pipeline

CHUNK = 5


def proxied_raw(pipeline: Pipeline, proxy: FaultProxy, **settings: Any) -> dict[str, Any]:
    """The pipeline's configuration mapping with OpenSearch reached through the proxy; `settings` are
    further top-level sections, `opensearch` merged into the proxy's (over the pipeline's own: a
    collection's signing). Verification goes direct."""
    raw = pipeline.config_dict([{"name": "db.orders"}])
    raw.update({k: v for k, v in settings.items() if k != "opensearch"})
    given = settings.get("opensearch", {})
    raw["opensearch"] = {**raw["opensearch"], "url": proxy.url, "bulk_chunk_size": CHUNK, **given}
    return raw


def proxied(pipeline: Pipeline, proxy: FaultProxy, **settings: Any) -> Config:
    return parse_config(proxied_raw(pipeline, proxy, **settings))


def run(pipeline: Pipeline, config: Config) -> SyncResult:
    (result,) = sync(config, pipeline.spark, ["db.orders"])
    return result


def converged(pipeline: Pipeline, config: Config) -> None:
    pipeline.assert_index_equals_table(config, "db.orders")
    table = pipeline.catalog.load_table("db.orders")
    assert pipeline.store().get_checkpoint("db.orders").snapshot_id == table.current_snapshot().snapshot_id
    assert pipeline.store().pending_items("db.orders") == []


def dead_letters(directory: Path) -> list[dict[str, Any]]:
    """Every dead letter under the directory: a JSON object per line, in any file."""
    return [
        json.loads(line)
        for path in sorted(directory.rglob("*"))
        if path.is_file()
        for line in path.read_text().splitlines()
        if line.strip()
    ]
