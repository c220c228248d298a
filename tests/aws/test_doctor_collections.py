"""`icecdc doctor` with an OpenSearch Serverless collection, against moto's `opensearchserverless`
(collections and security policies): an existing collection must exist under its configured name,
be ACTIVE and of type SEARCH; a created one's names must be free. Moto has no data access policies
(no GetAccessPolicy): the writers' check is tested on the policy document Serverless returns."""

from __future__ import annotations

import json
from typing import Any

import pytest

from icecdc.aws.contract import SERVERLESS_COLLECTION_PERMISSIONS, SERVERLESS_INDEX_PERMISSIONS
from icecdc.doctor import Outcome, Phase, diagnose
from icecdc.doctor.collections import access_problems, check_collection, check_collection_access
from icecdc.doctor.context import Context
from icecdc.doctor.search import check_domain, check_endpoint, check_mapping
from tests.support.aws import REGION, Lake, aws_client
from tests.support.cdk import ADMIN, VPC, serverless
from tests.support.doctor import READY, deploy, doctor_config
from tests.support.iam import Call, Refusal
from tests.support.serverless import ACCESS_KEY, SECRET_KEY, ServerlessStandIn

JOB = "arn:aws:iam::123456789012:role/cdc-JobRole"
PLANNER = "arn:aws:iam::123456789012:role/cdc-PlannerRole"
KEY = "arn:aws:kms:us-east-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab"  # as the stack's data key


def collection(lake: Lake, name: str, kind: str = "SEARCH") -> dict[str, Any]:
    """A collection in moto, under the encryption policy Serverless requires first."""
    client = aws_client("opensearchserverless", lake.moto_url)
    rules = {"Rules": [{"ResourceType": "collection", "Resource": [f"collection/{name}"]}], "AWSOwnedKey": False, "KmsARN": KEY}
    client.create_security_policy(name=name, type="encryption", policy=json.dumps(rules))
    return dict(client.create_collection(name=name, type=kind)["createCollectionDetail"])


def context(lake: Lake, stack: str, endpoint: str = "https://x.us-east-1.aoss.amazonaws.com", **aws: Any) -> Context:
    url = {"url": endpoint, "aws_region": REGION}
    config = doctor_config(lake, stack, [{"name": f"{lake.database}.orders", "index": "orders"}], url, **aws)
    return Context.open(serverless(config))


def test_before_an_existing_search_collection_passes_and_others_fail_naming_why(lake: Lake, unique: str) -> None:
    name = f"c-{unique}"
    found = collection(lake, name)
    ctx = context(lake, f"s{unique}", opensearch_collection_arn=found["arn"], collection_name=name)
    [check] = check_collection(ctx)
    assert (check.outcome, check.detail) == (Outcome.PASSED, f"collection {found['id']} ({name}) is an ACTIVE SEARCH collection")
    domain = next(check_domain(ctx))  # GET / is not how a collection answers: not tried
    assert domain.outcome == Outcome.SKIPPED

    [wrong] = check_collection(context(lake, f"s{unique}", opensearch_collection_arn=found["arn"], collection_name="other"))
    assert wrong.outcome == Outcome.FAILED and f"it is named '{name}', not aws.collection_name 'other'" in wrong.detail

    series = collection(lake, f"t-{unique}", kind="TIMESERIES")
    [timeseries] = check_collection(
        context(lake, f"s{unique}", opensearch_collection_arn=series["arn"], collection_name=f"t-{unique}")
    )
    assert timeseries.outcome == Outcome.FAILED
    assert "of type TIMESERIES: icecdc updates and deletes documents by their ids, and such a collection assigns the ids" in (
        timeseries.detail
    )
    assert timeseries.fix is not None and "let the stack create one (aws.create_collection)" in timeseries.fix.text

    gone = found["arn"].rsplit("/", 1)[0] + "/abcdefghij0123456789"
    [missing] = check_collection(context(lake, f"s{unique}", opensearch_collection_arn=gone, collection_name=name))
    assert missing.outcome == Outcome.FAILED and missing.detail.endswith(f"in {REGION}: not found")


def test_before_a_created_collection_needs_its_names_free(lake: Lake, unique: str) -> None:
    """The stack names its collection and security policies: one taken fails the deploy."""
    stack = f"s{unique}"
    ctx = context(lake, stack, create_collection=True, collection_admin_arn=ADMIN)
    [check] = check_collection(ctx)
    assert check.outcome == Outcome.SKIPPED and check.detail == f"the stack creates the SEARCH collection {stack}"
    diagnosis = diagnose(ctx.config, Phase.BEFORE, READY)
    assert diagnosis.named("names free").outcome == Outcome.PASSED
    collection(lake, stack)  # made by hand: the collection and its encryption policy
    diagnosis = diagnose(ctx.config, Phase.BEFORE, READY)
    taken = sorted(c.detail.split(" exists")[0] for c in diagnosis.checks if c.name == "names free")
    assert taken == [f"Serverless collection {stack}", f"Serverless encryption policy {stack}"]


def test_after_a_collection_has_no_security_plugin_to_read(lake: Lake, unique: str) -> None:
    [check] = check_mapping(context(lake, f"s{unique}", create_collection=True, collection_admin_arn=ADMIN))
    assert check.outcome == Outcome.SKIPPED and "data access policy maps the writers" in check.detail
    ctx = context(lake, f"s{unique}", create_collection=True, collection_admin_arn=ADMIN)
    checks = list(check_collection_access(ctx))  # no stack deployed: the created collection is missing
    assert checks[0].outcome == Outcome.FAILED and checks[0].detail.endswith("not found")
    assert checks[0].fix is not None and checks[0].fix.text.startswith("deploy the stack (cdk deploy)")
    assert checks[-1].detail == "the stack's writer roles were not found"


WRITERS = [
    {
        "Rules": [
            {
                "ResourceType": "index",
                "Resource": ["index/search/orders", "index/search/orders-*"],
                "Permission": list(SERVERLESS_INDEX_PERMISSIONS),
            },
            {
                "ResourceType": "collection",
                "Resource": ["collection/search"],
                "Permission": list(SERVERLESS_COLLECTION_PERMISSIONS),
            },
        ],
        "Principal": [JOB, PLANNER],
    }
]


def without(permission: str) -> list[dict[str, Any]]:
    rules = [{**r, "Permission": [p for p in r["Permission"] if p != permission]} for r in WRITERS[0]["Rules"]]
    return [{**WRITERS[0], "Rules": rules}]


def generations_only() -> list[dict[str, Any]]:
    index, items = WRITERS[0]["Rules"]
    return [{**WRITERS[0], "Rules": [{**index, "Resource": ["index/search/orders-*"]}, items]}]


@pytest.mark.parametrize(
    ("policy", "writer", "problems"),
    [
        (WRITERS, JOB, []),
        (WRITERS, PLANNER, []),
        ([{"Rules": [{"ResourceType": "index", "Resource": ["index/search/*"], "Permission": ["aoss:*"]}]}], JOB, None),
        ([{**WRITERS[0], "Principal": [JOB]}], PLANNER, [f"{PLANNER} is not a principal"]),
        (
            without("aoss:WriteDocument"),
            JOB,
            [
                f"{JOB} lacks aoss:WriteDocument on index/search/orders",
                f"{JOB} lacks aoss:WriteDocument on index/search/orders-1",
            ],
        ),
        (
            without("aoss:UpdateCollectionItems"),
            JOB,
            [f"{JOB} lacks aoss:UpdateCollectionItems on collection/search (aliases, templates)"],
        ),
        (
            generations_only(),
            JOB,
            [f"{JOB} lacks {', '.join(sorted(WRITERS[0]['Rules'][0]['Permission']))} on index/search/orders"],
        ),
    ],
)
def test_the_writers_data_access_is_read_from_the_policy(
    policy: list[dict[str, Any]], writer: str, problems: list[str] | None
) -> None:
    found = access_problems(policy, writer, "search", ["orders"])
    if problems is None:  # a policy that names no principal grants nobody
        assert found == [f"{writer} is not a principal"]
    else:
        assert found == problems


def test_after_the_writers_are_found_and_their_policy_asked_for(lake: Lake, unique: str) -> None:
    """Against the stack's stand-in: the collection passes, the writers' roles are found, and the
    policy is asked of Serverless, which moto cannot answer (GetAccessPolicy is not implemented):
    the doctor reports a check it could not finish, the others still run."""
    name = f"c-{unique}"
    found = collection(lake, name)
    ctx = context(lake, f"s{unique}", opensearch_collection_arn=found["arn"], collection_name=name)
    deploy(lake.moto_url, ctx.config)
    diagnosis = diagnose(ctx.config, Phase.AFTER, READY)
    assert diagnosis.named("serverless collection").outcome == Outcome.PASSED
    unfinished = diagnosis.named("collection access")
    assert unfinished.outcome == Outcome.FAILED and "GetAccessPolicy" in unfinished.detail
    assert diagnosis.named("writer mapping").outcome == Outcome.SKIPPED


def test_the_endpoint_answers_a_signed_request_before_and_after(
    lake: Lake, unique: str, serverless: ServerlessStandIn, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`reach`'s signed HEAD of the first index, through the Serverless stand-in: it passes, a
    refused signature and a request the policies deny fail, each naming its fix."""
    name = f"c-{unique}"
    found = collection(lake, name)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", ACCESS_KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
    # a doctor run's client signs with the identity it started with: one run per identity here
    ctx = context(lake, f"s{unique}", serverless.url, opensearch_collection_arn=found["arn"], collection_name=name)
    for checks in (check_domain(ctx), check_endpoint(ctx)):
        *_, reached = checks
        assert (reached.name, reached.outcome) == ("opensearch reachable", Outcome.PASSED)
        assert reached.detail == f"{serverless.url} answers a signed request: an OpenSearch Serverless collection"
    assert [(s.method, s.path) for s in serverless.seen()] == [("HEAD", "/orders")] * 2

    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "guess")
    ctx = context(lake, f"s{unique}", serverless.url, opensearch_collection_arn=found["arn"], collection_name=name)
    for checks in (check_domain(ctx), check_endpoint(ctx)):
        *_, unsigned = checks
        assert unsigned.outcome == Outcome.FAILED and "refused the signature: The request signature" in unsigned.detail
        assert unsigned.fix is not None and "opensearch.aws_region" in unsigned.fix.text

    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
    ctx = context(lake, f"s{unique}", serverless.url, opensearch_collection_arn=found["arn"], collection_name=name)
    serverless.guard = lambda request: Refusal("doctor", Call("aoss:APIAccessAll", found["arn"]))
    for checks in (check_domain(ctx), check_endpoint(ctx)):
        *_, denied = checks
        assert denied.outcome == Outcome.FAILED and denied.detail == f"{serverless.url} denied the request: 403 Forbidden"
        assert denied.fix is not None and "aoss:APIAccessAll on the collection" in denied.fix.text
    # the jobs in a VPC (aws.vpc): this machine may be outside the collection's network policy
    in_vpc = context(lake, f"s{unique}", serverless.url, opensearch_collection_arn=found["arn"], collection_name=name, vpc=VPC)
    *_, outside = check_domain(in_vpc)
    assert outside.outcome == Outcome.WARNING and outside.detail.startswith(f"{serverless.url} denied the request")
