"""The names infra/ and the AWS entries share.

They are the events, the Glue job arguments, the planner's environment, the job names and the
metrics. The stack sets them and the Lambda and the Glue job read them: one source each, so that
the two sides cannot drift apart.

Imports nothing of icecdc and no AWS client: infra/ reads it when it synthesizes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import ClassVar

GLUE_EVENT_SOURCE = "aws.glue"
GLUE_EVENT_TYPE = "Glue Data Catalog Table State Change"
SCHEDULE_EVENT_SOURCE = "aws.events"
SCHEDULE_EVENT_TYPE = "Scheduled Event"
SQS_EVENT_SOURCE = "aws:sqs"  # a batch of buffered events, as Lambda's SQS event source delivers it
METRIC_NAMESPACE = "icecdc"

# A Serverless collection's data access policy: what the writers may do to each configured index
# and its generations (create a generation, mappings and settings, documents, delete an old one),
# and to the collection's aliases (the swap) and templates (read). infra.collection grants them,
# `icecdc doctor after` checks them.
SERVERLESS_INDEX_PERMISSIONS = (
    "aoss:CreateIndex",
    "aoss:DeleteIndex",
    "aoss:UpdateIndex",
    "aoss:DescribeIndex",
    "aoss:ReadDocument",
    "aoss:WriteDocument",
)
SERVERLESS_COLLECTION_PERMISSIONS = (
    "aoss:CreateCollectionItems",
    "aoss:UpdateCollectionItems",
    "aoss:DescribeCollectionItems",
)

# Glue job arguments (without their leading "--", as getResolvedOptions names them).
ARG_CONFIG = "icecdc_config"
ARG_TABLE = "icecdc_table"
ARG_STATE_TABLE = "icecdc_state_table"
ARG_REGION = "icecdc_region"
ARG_OPENSEARCH_URL = "icecdc_opensearch_url"
ARG_DEAD_LETTER = "icecdc_dead_letter"
ARG_MODE = "icecdc_mode"  # what a job run does (JobMode); absent: a sync

# Where the scheduled audits keep their findings: beside the dead letters (the job may write there).
AUDITS_FOLDER = "_audits"

# No pass starts in the planner with less than this left before the Lambda's timeout: a pass the
# in-process engine takes (engine.in_process_max_bytes) ends well within it.
PASS_RESERVE_SECONDS = 120.0


class JobMode(StrEnum):
    """What a run of a table's Glue job does: catch the index up, or audit it (scheduled)."""

    SYNC = "sync"
    AUDIT = "audit"
    AUDIT_AND_REPAIR = "audit-and-repair"


def audits_location(dead_letter: str) -> str:
    """Where the job keeps each table's last audit.

    `icecdc status --json` and `repair --from-audit --findings` read it there.
    """
    return f"{dead_letter.rstrip('/')}/{AUDITS_FOLDER}"


def planner_log_group(stack_name: str) -> str:
    """The planner's log group, named so that the data key's policy can name it.

    Its errors may quote sample documents, so it is encrypted like the jobs' logs.
    """
    return f"/icecdc/{stack_name}/planner"


def job_name(stack_name: str, table_name: str) -> str:
    """The Glue job of one table: one job per table, so that no table's run blocks another's."""
    return f"{stack_name}-{table_name}"


@dataclass(frozen=True)
class PlannerEnvironment:
    """The planner Lambda's environment, under the names `VARIABLES` gives, their one source.

    The stack sets it in infra/planner.py and the handler reads it in lambdas/planner/handler.py.
    """

    config: str  # the configuration's path or URI (the YAML bundled with the code)
    state_table: str  # the stack's DynamoDB state table
    stack_name: str  # the prefix of the per-table Glue job names
    catalog_properties: str = "{}"  # JSON merged into `catalog:` (how the Lambda reads files)
    # Where the planner applies batches itself (`aws.planner_applies`): the endpoint of a domain the
    # stack created (signed with SigV4), and the stack's dead-letter location, as the job's.
    opensearch_url: str | None = None
    dead_letter: str | None = None

    VARIABLES: ClassVar[dict[str, str]] = {
        "config": "ICECDC_CONFIG",
        "state_table": "ICECDC_STATE_TABLE",
        "stack_name": "ICECDC_STACK_NAME",
        "catalog_properties": "ICECDC_CATALOG_PROPERTIES",
        "opensearch_url": "ICECDC_OPENSEARCH_URL",
        "dead_letter": "ICECDC_DEAD_LETTER",
    }

    def variables(self) -> dict[str, str]:
        """The environment variables, as the stack sets them: those without a value left out."""
        values = {name: getattr(self, field) for field, name in self.VARIABLES.items()}
        return {name: value for name, value in values.items() if value is not None}

    @classmethod
    def read(cls, environ: Mapping[str, str]) -> PlannerEnvironment:
        """From the Lambda's environment; an empty optional variable counts as unset."""
        names = cls.VARIABLES
        return cls(
            environ[names["config"]],
            environ[names["state_table"]],
            environ[names["stack_name"]],
            environ.get(names["catalog_properties"], "{}"),
            environ.get(names["opensearch_url"]) or None,
            environ.get(names["dead_letter"]) or None,
        )
