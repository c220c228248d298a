"""The bundle on an OpenSearch Serverless collection, under its own IAM: the stack synthesized for an
existing collection and for one it creates, the planner (first export, applied by itself) and the
Glue job's entry (a copy-on-write commit) run as the template's roles against the Serverless
stand-in. Each role signs for `aoss` with its own access key, which the stand-in verifies; IAM's
aoss:APIAccessAll on the collection and the template's data access policies (each request's
permission on the index or the collection it names) are enforced. After every pass the index
equals the table, and nothing was refused; a right withheld fails the pass in one line.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from pyiceberg.expressions import EqualTo

from icecdc.config import parse_config
from icecdc.destination.client import open_client
from icecdc.verify import diff_index
from tests.support.aws import REGION, Lake, rows
from tests.support.deployed import Deployed, Shape
from tests.support.iam import DataAccess, Enforcer, RolePolicy
from tests.support.planner import handler_module, load_glue_entry, table_event
from tests.support.serverless import ACCESS_KEY, SECRET_KEY, ServerlessStandIn

pytest.importorskip("awsglue", reason="awsglue 5.1 requires Python 3.11, as Glue 5.1")

COLLECTION_ID = "a1b2c3d4e5f6g7h8i9j0"
COLLECTION_ARN = f"arn:aws:aoss:{REGION}:123456789012:collection/{COLLECTION_ID}"
# signed for aoss; searches see writes after the stand-in's delay, within visibility_seconds
SIGNED = {"aws_region": REGION, "aws_service": "aoss", "visibility_seconds": 0.3, "landing_seconds": 1.0}

EXISTING = Shape(
    "an existing collection",
    {"opensearch_collection_arn": COLLECTION_ARN, "collection_name": "search"},
    {"url": f"https://{COLLECTION_ID}.{REGION}.aoss.amazonaws.com", **SIGNED},
    {},
)
CREATED = Shape(
    "a collection the stack creates",
    {"create_collection": True, "collection_admin_arn": "arn:aws:iam::123456789012:role/SearchAdmins"},
    SIGNED,
    {},
)

job = load_glue_entry("icecdc_job_iam_collection")


@pytest.fixture
def collection(serverless: ServerlessStandIn) -> Iterator[ServerlessStandIn]:
    serverless.search_delay = 0.2
    yield serverless
    assert serverless.replay_failures() == []


def deploy(shape: Shape, lake: Lake, search: ServerlessStandIn, enforcer: Enforcer, monkeypatch: pytest.MonkeyPatch) -> Deployed:
    table = lake.create_table(f"{lake.database}.orders")
    table.append(rows(1, 2, 3))
    table.append(rows(4, region="eu"))
    return Deployed(shape, lake, search, enforcer, monkeypatch)


def commit_event(deployed: Deployed) -> dict[str, Any]:
    body = json.dumps(table_event(deployed.lake.database, "orders"))
    return {"Records": [{"messageId": "0", "body": body, "eventSource": "aws:sqs"}]}


def refused(search: ServerlessStandIn) -> dict[str, int]:
    """What the stand-in refused: unsigned or forbidden, an operation or a parameter it lacks."""
    kinds = ("unauthenticated", "forbidden", "unsupported")
    return {k: n for k, n in search.counts().items() if k in kinds or k.endswith("refused")}


def assert_index_equals_table(deployed: Deployed, search: ServerlessStandIn, monkeypatch: pytest.MonkeyPatch) -> None:
    deployed.enforcer.assert_no_refusals()
    assert refused(search) == {}
    config = parse_config(yaml.safe_load(deployed.config_path.read_text()))
    with monkeypatch.context() as env:  # read with the stand-in's own key, as `icecdc verify` does
        env.setenv("AWS_ACCESS_KEY_ID", ACCESS_KEY)
        env.setenv("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
        client = open_client(config.opensearch)
        table = deployed.lake.catalog().load_table(deployed.table)
        diff = diff_index(table, ("id",), client, "orders")
    assert not diff, diff.summary()


@pytest.mark.parametrize("shape", [EXISTING, CREATED], ids=["existing", "created"])
def test_the_planner_and_the_job_write_a_collection_under_the_roles(
    shape: Shape, lake: Lake, collection: ServerlessStandIn, iam_enforcer: Enforcer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The planner's first export, applied by itself, then a copy-on-write commit by the job: each
    request signed with the role's own key, allowed by IAM and by the data access policy."""
    deployed = deploy(shape, lake, collection, iam_enforcer, monkeypatch)
    assert deployed.planner(commit_event(deployed), handler_module.handler) == {"batchItemFailures": []}
    assert_index_equals_table(deployed, collection, monkeypatch)

    table = lake.catalog().load_table(deployed.table)
    table.delete(EqualTo("id", 2))  # copy-on-write: the file rewritten without the row
    table.append(rows(5, 6, region="eu"))
    [result] = deployed.job(job.main)
    assert (result.writes.indexed, result.writes.deleted) == (2, 1)
    assert_index_equals_table(deployed, collection, monkeypatch)

    # the table dropped and created again under its name: a reset into a new generation, the
    # alias swapped to it (`_aliases`), the old generation deleted
    lake.catalog().drop_table(deployed.table)
    lake.create_table(deployed.table).append(rows(21, 22))
    assert deployed.planner(commit_event(deployed), handler_module.handler) == {"batchItemFailures": []}
    assert list(collection.client().indices.get_alias(name="orders")) == ["orders-2"]
    assert not collection.client().indices.exists(index="orders-1")
    assert_index_equals_table(deployed, collection, monkeypatch)

    roles = {role for role, action, _ in iam_enforcer.exercised if action == "aoss:APIAccessAll"}
    assert roles == {"planner", "job"}
    permissions = {(role, action) for role, action, resource in iam_enforcer.exercised if resource.startswith("index/")}
    assert {("planner", "aoss:CreateIndex"), ("planner", "aoss:DeleteIndex"), ("job", "aoss:WriteDocument")} <= permissions
    items = {(role, action) for role, action, resource in iam_enforcer.exercised if resource.startswith("collection/")}
    assert ("planner", "aoss:CreateCollectionItems") in items  # the alias swap


def without_permission(deployed: Deployed, permission: str) -> None:
    """The stack's data access policies, but `permission` taken from every rule."""
    policy = deployed.data_access
    statements = tuple(
        {**s, "Rules": [{**r, "Permission": [p for p in r["Permission"] if p != permission]} for r in s["Rules"]]}
        for s in policy.statements
    )
    withheld = DataAccess(policy.collection, statements)
    assert isinstance(deployed.search, ServerlessStandIn)
    deployed.search.access = deployed.enforcer.data_access_guard(withheld, deployed.principals)


def without_api_access(deployed: Deployed, role: str = "job") -> None:
    """The role's statements, but aoss:APIAccessAll."""
    policy = deployed.roles[role]
    kept = tuple(s for s in policy.statements if "aoss:APIAccessAll" not in s.actions)
    deployed.enforcer.act_as(deployed.access_key(role), RolePolicy(policy.role, kept))


@pytest.mark.parametrize(
    ("withhold", "needed"),
    [
        (without_api_access, "aoss:APIAccessAll"),
        (lambda deployed: without_permission(deployed, "aoss:WriteDocument"), "aoss:WriteDocument"),
    ],
    ids=["iam", "data access policy"],
)
def test_a_right_withheld_fails_the_job_in_one_line_and_nothing_advances(
    withhold: Any,
    needed: str,
    lake: Lake,
    collection: ServerlessStandIn,
    iam_enforcer: Enforcer,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    deployed = deploy(EXISTING, lake, collection, iam_enforcer, monkeypatch)
    withhold(deployed)
    with caplog.at_level(logging.ERROR, logger="icecdc.glue_job"):
        assert deployed.job(job.run) == 2
    line = refused_in_one_line(deployed, caplog, "icecdc.glue_job", needed)
    assert "denied a" in line and "403" in line and "aoss:APIAccessAll and its data access policy" in line, line


def refused_in_one_line(deployed: Deployed, caplog: pytest.LogCaptureFixture, logger: str, needed: str) -> str:
    """The one error line `logger` logged, without a traceback, once `needed` alone was refused and
    nothing advanced."""
    [line] = [r.getMessage() for r in caplog.records if r.name == logger and r.levelno >= logging.ERROR]
    assert "\n" not in line and not any(r.exc_info for r in caplog.records if r.name == logger), line
    assert deployed.checkpoint() is None
    assert {r.call.action for r in deployed.enforcer.refusals} == {needed}
    deployed.enforcer.refusals.clear()
    return line


def test_a_right_withheld_from_the_planner_fails_the_tables_message_in_one_line(
    lake: Lake,
    collection: ServerlessStandIn,
    iam_enforcer: Enforcer,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The planner applying a table's work without aoss:APIAccessAll: the table's message is
    handed back to SQS, one line logged naming the denial, nothing advanced."""
    deployed = deploy(CREATED, lake, collection, iam_enforcer, monkeypatch)
    without_api_access(deployed, "planner")
    with caplog.at_level(logging.ERROR, logger="icecdc.aws.planner"):
        answer = deployed.planner(commit_event(deployed), handler_module.handler)
    assert answer == {"batchItemFailures": [{"itemIdentifier": "0"}]}
    line = refused_in_one_line(deployed, caplog, "icecdc.aws.planner", "aoss:APIAccessAll")
    assert "OpenSearch denied GET /orders (403" in line and "aoss:APIAccessAll" in line, line
