"""Planner Lambda: an EventBridge event (a Glue table change, or the schedule) → for each table,
whether it has work (metadata and checkpoint only) → start its Glue job, which plans and applies.

Thin on purpose: the decisions live in `icecdc.aws` and `icecdc.planning`. Environment (set by
the stack): ICECDC_CONFIG (the bundled YAML), ICECDC_STATE_TABLE, ICECDC_STACK_NAME (prefix of the
per-table Glue job names), optional ICECDC_CATALOG_PROPERTIES (JSON merged into `catalog:`).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import logging
import os
from typing import Any

import boto3

from icecdc.aws import event_tables, plan_and_start_each, read_text, runtime_config
from icecdc.config import Config
from icecdc.state import open_state_store

log = logging.getLogger("icecdc.planner")
logging.getLogger().setLevel(logging.INFO)  # Lambda's root handler exists already; set its level only


class PlanningFailed(RuntimeError):
    """Raised after every table was tried, so the invocation counts as an error (alarm, retry)."""


@functools.lru_cache(maxsize=4)
def _config(config_uri: str, state_table: str, region: str | None, catalog_properties: str) -> Config:
    # Cached per container: the file and the environment do not change between invocations.
    return runtime_config(read_text(config_uri), state_table, region, catalog_properties=json.loads(catalog_properties))


def handler(event: Any, context: Any = None) -> dict[str, Any]:
    env = os.environ
    config = _config(
        env["ICECDC_CONFIG"], env["ICECDC_STATE_TABLE"], env.get("AWS_REGION"), env.get("ICECDC_CATALOG_PROPERTIES", "{}")
    )
    selected = event_tables(event, config)
    if selected.ignored:
        log.warning("no work for this event: %s", selected.ignored)
        return {"tables": [], "ignored": selected.ignored}

    store = open_state_store(config.state)  # the stack's DynamoDB table (runtime_config)
    glue, cloudwatch = boto3.client("glue"), boto3.client("cloudwatch")
    try:
        outcomes = plan_and_start_each(config, store, selected.tables, env["ICECDC_STACK_NAME"], glue, cloudwatch)
    finally:
        store.close()
    failed = [o for o in outcomes if o.error]
    if failed:
        raise PlanningFailed("; ".join(f"{o.table}: {o.error}" for o in failed))
    return {"tables": [dataclasses.asdict(o) for o in outcomes]}
