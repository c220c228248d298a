"""Glue 5.1 job: arguments → `icecdc.sync.sync` for the one table the job was started for.

Thin on purpose: the same `sync` as `icecdc sync` (plan, then process until caught up), so a run
started by the planner also picks up commits made while it works. The icecdc package arrives
through --extra-py-files (a zip the stack builds from this repo), its dependencies through
--additional-python-modules: the locked, hashed wheels of infra/locks/glue.txt, installed with
--no-index (infra/bundling.py).

Arguments (the stack sets them as job defaults; the planner repeats --icecdc_table):
  --icecdc_config        s3:// URI (or local path) of the YAML configuration
  --icecdc_table         the table to sync, "<database>.<table>"
  --icecdc_state_table   the DynamoDB table of checkpoints and work items
  --icecdc_region        the region of the state table and the domain
  --icecdc_dead_letter   s3://bucket/prefix/ for documents OpenSearch rejects
  --icecdc_opensearch_url  optional: the endpoint of a domain the stack created (SigV4)
  --icecdc_mode          optional: sync (the default), or audit / audit-and-repair (the scheduled trigger)
"""

from __future__ import annotations

import logging
import sys
from typing import Any

import boto3
from awsglue.utils import getResolvedOptions

from icecdc.aws.contract import (
    ARG_CONFIG,
    ARG_DEAD_LETTER,
    ARG_MODE,
    ARG_OPENSEARCH_URL,
    ARG_REGION,
    ARG_STATE_TABLE,
    ARG_TABLE,
    JobMode,
    audits_location,
)
from icecdc.aws.deployed import read_text, runtime_config
from icecdc.aws.job import AuditOutcome, scheduled_audit
from icecdc.aws.metrics import put_run_metrics
from icecdc.errors import access_denied
from icecdc.logs import quiet_chatty_libraries
from icecdc.sync import SyncResult, sync

log = logging.getLogger("icecdc.glue_job")

REQUIRED = [ARG_CONFIG, ARG_TABLE, ARG_STATE_TABLE, ARG_REGION, ARG_DEAD_LETTER]
OPTIONAL = [ARG_OPENSEARCH_URL, ARG_MODE]


def main(argv: list[str], spark: Any = None) -> list[SyncResult] | AuditOutcome:
    """Run the job; `spark` lets a local run reuse a session (on Glue, the first pass that needs
    Spark gets Glue's session from the builder; small passes run in-process)."""
    # getResolvedOptions fails on a listed option that is absent, so optional ones are listed only when given.
    args = getResolvedOptions(argv, REQUIRED + [o for o in OPTIONAL if f"--{o}" in argv])
    config = runtime_config(
        read_text(args[ARG_CONFIG]),
        args[ARG_STATE_TABLE],
        args[ARG_REGION],
        opensearch_url=args.get(ARG_OPENSEARCH_URL),
    )
    # Documents OpenSearch refuses for good go to the stack's dead-letter prefix, not into a failed run.
    config = config.with_dead_letter(args[ARG_DEAD_LETTER])
    mode = JobMode(args.get(ARG_MODE, JobMode.SYNC))
    if mode != JobMode.SYNC:
        cloudwatch = boto3.client("cloudwatch", region_name=args[ARG_REGION])
        findings = audits_location(args[ARG_DEAD_LETTER])
        return scheduled_audit(config, args[ARG_TABLE], mode, findings, cloudwatch)
    log.info("syncing %s (dead-letter location %s)", args[ARG_TABLE], args[ARG_DEAD_LETTER])
    results = sync(config, spark, [args[ARG_TABLE]])
    cloudwatch = boto3.client("cloudwatch", region_name=args[ARG_REGION])
    for r in results:
        log.info(
            "%s: %d snapshots, %d files, %d rows read, %d indexed, %d deleted, %d superseded, %d dead-lettered in %.1fs",
            r.table,
            r.snapshots,
            r.files,
            r.changes.rows,
            r.writes.indexed,
            r.writes.deleted,
            r.writes.superseded,
            r.writes.dead_lettered,
            r.seconds,
        )
        # Every run publishes its counts, zeros included: the stack alarms on dead letters above zero.
        put_run_metrics(cloudwatch, r.table, r.writes.dead_lettered, r.changes.rows, r.files)
    return results


def run(argv: list[str], spark: Any = None) -> int:
    """`main`, and the exit code: 2 with one line for a request the job's role may not make."""
    try:
        main(argv, spark)
    except Exception as exc:
        denied = access_denied(exc)
        if denied is None:
            raise  # a failure of its own: Glue keeps its traceback
        log.error("%s", denied)
        return 2
    return 0


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    quiet_chatty_libraries()
    code = run(sys.argv)
    if code:
        sys.exit(code)
