"""Planner Lambda: EventBridge events (a Glue table change, or the schedule) → for each table,
whether it has work (metadata and checkpoint only) → a small batch applied here, in-process, or
the table's Glue job started, which plans and applies the rest.

The stack delivers the events through an SQS queue, in batches (Lambda's SQS event source with a
batching window): each table a batch names is planned once, however many events named it, and
the messages of a table that failed are reported back (`batchItemFailures`) so that SQS delivers
them again; the others are done. One event invoked directly (an operator's test) is planned the
same way, and the invocation fails after every table was tried if any failed.

Thin on purpose: the decisions live in `icecdc.aws` and `icecdc.status`. The environment the
stack sets is `icecdc.aws.contract.PlannerEnvironment`.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import logging
import os
from typing import Any

import boto3

from icecdc.aws.contract import PlannerEnvironment
from icecdc.aws.deployed import read_text, runtime_config
from icecdc.aws.events import batch_tables, event_tables, is_batch
from icecdc.aws.planner import Sweep, TableOutcome, plan_and_start_each, planner_deadline
from icecdc.config import Config
from icecdc.logs import quiet_chatty_libraries
from icecdc.state import open_state_store

log = logging.getLogger("icecdc.planner")
logging.getLogger().setLevel(logging.INFO)  # Lambda's root handler exists already; set its level only
quiet_chatty_libraries()


class PlanningFailed(RuntimeError):
    """Raised after every table was tried, so the invocation counts as an error (alarm, retry)."""


@functools.lru_cache(maxsize=4)
def _config(
    config_uri: str,
    state_table: str,
    region: str | None,
    catalog_properties: str,
    opensearch_url: str | None,
    dead_letter: str | None,
) -> Config:
    # Cached per container: the file and the environment do not change between invocations.
    config = runtime_config(
        read_text(config_uri), state_table, region, opensearch_url, catalog_properties=json.loads(catalog_properties)
    )
    return config.with_dead_letter(dead_letter) if dead_letter else config


def handler(event: Any, context: Any = None) -> dict[str, Any]:
    env = PlannerEnvironment.read(os.environ)
    config = _config(
        env.config, env.state_table, os.environ.get("AWS_REGION"), env.catalog_properties, env.opensearch_url, env.dead_letter
    )
    if is_batch(event):
        batch = batch_tables(event, config)
        for reason in batch.ignored:
            log.warning("no work for %s", reason)
        failed = batch.failed_messages(_plan(config, env, batch.tables, context))
        return {"batchItemFailures": [{"itemIdentifier": message} for message in failed]}

    selected = event_tables(event, config)
    if selected.ignored:
        log.warning("no work for this event: %s", selected.ignored)
        return {"tables": [], "ignored": selected.ignored}
    outcomes = _plan(config, env, selected.tables, context)
    failed = [o for o in outcomes if o.error]
    if failed:
        raise PlanningFailed("; ".join(f"{o.table}: {o.error}" for o in failed))
    return {"tables": [dataclasses.asdict(o) for o in outcomes]}


def _plan(config: Config, env: PlannerEnvironment, tables: tuple[str, ...], context: Any) -> list[TableOutcome]:
    if not tables:
        return []
    store = open_state_store(config.state)  # the stack's DynamoDB table (runtime_config)
    try:
        glue, cloudwatch = boto3.client("glue"), boto3.client("cloudwatch")
        sweep = Sweep(config, store, glue, cloudwatch, planner_deadline(context))
        return plan_and_start_each(sweep, tables, env.stack_name)
    finally:
        store.close()
