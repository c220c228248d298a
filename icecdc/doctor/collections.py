"""The OpenSearch Serverless checks: the collection before deploying, its data access after.

Before, an existing collection (`aws.opensearch_collection_arn`) must exist under its configured
name, be ACTIVE and of type SEARCH: icecdc updates and deletes documents by their ids, which a
time-series or vector search collection assigns itself. After, the same of the collection the
writers use, and the stack's data access policy (`<stack>-writers`) must give the jobs' role and
the applying planner's what a sync does to every configured index and its generations.
"""

from __future__ import annotations

import fnmatch
import json
from collections.abc import Iterator
from typing import Any

from botocore.exceptions import ClientError

from icecdc.aws.contract import SERVERLESS_COLLECTION_PERMISSIONS, SERVERLESS_INDEX_PERMISSIONS
from icecdc.config.deploy import AwsConfig
from icecdc.doctor.context import Context
from icecdc.doctor.model import Check, failed, passed, skipped
from icecdc.doctor.search import writer_arns
from icecdc.doctor.stack import NOT_FOUND, error_code

COLLECTION = "serverless collection"
ACCESS = "data access policy"
INDEX_PERMISSIONS = frozenset(SERVERLESS_INDEX_PERMISSIONS)
COLLECTION_PERMISSIONS = frozenset(SERVERLESS_COLLECTION_PERMISSIONS)
DEPLOY = "deploy the stack (cdk deploy): it creates the collection and its policies"


def check_collection(ctx: Context) -> Iterator[Check]:
    """Before deploying: an existing collection exists, is named as configured, ACTIVE, SEARCH."""
    aws = ctx.aws
    if not aws.collection:
        yield skipped(COLLECTION, "the destination is an OpenSearch domain")
        return
    if aws.create_collection:
        yield skipped(
            COLLECTION, f"the stack creates the SEARCH collection {aws.target_collection_name}"
        )
        return
    yield _described(ctx, aws)


def check_collection_access(ctx: Context) -> Iterator[Check]:
    """After deploying: the collection, and the writers in its data access policy."""
    aws = ctx.aws
    if not aws.collection:
        yield skipped(ACCESS, "the destination is an OpenSearch domain")
        return
    yield _described(ctx, aws)
    writers = writer_arns(ctx) if ctx.stack is not None else {}
    if not writers:
        yield failed(
            ACCESS, "the stack's writer roles were not found", "deploy the stack (cdk deploy)"
        )
        return
    name = aws.data_access_policy("writers")
    try:
        detail = ctx.client("opensearchserverless").get_access_policy(name=name, type="data")
    except ClientError as exc:
        if error_code(exc) not in NOT_FOUND:
            raise
        yield failed(ACCESS, f"no data access policy {name} in {ctx.region}", DEPLOY, "cdk deploy")
        return
    document = detail["accessPolicyDetail"]["policy"]
    policy = json.loads(document) if isinstance(document, str) else document
    indexes = list(ctx.config.index_names)
    for label, arn in writers.items():
        problems = access_problems(policy, arn, aws.target_collection_name, indexes)
        if problems:
            yield failed(
                ACCESS,
                f"{name}: " + "; ".join(problems),
                "the stack writes this policy on every deploy: deploy again (cdk deploy), and "
                "undo any edit made to it by hand",
                "cdk deploy",
                subject=label,
            )
        else:
            yield passed(
                ACCESS,
                f"{name} lets {arn} write {', '.join(indexes)} and their generations",
                subject=label,
            )


def _described(ctx: Context, aws: AwsConfig) -> Check:
    """The collection, by its id (existing) or its name (created), against what icecdc needs."""
    client = ctx.client("opensearchserverless")
    if aws.collection_id is not None:
        answer = client.batch_get_collection(ids=[aws.collection_id])
        which = f"{aws.collection_id} ({aws.target_collection_name})"
    else:
        answer = client.batch_get_collection(names=[aws.target_collection_name])
        which = aws.target_collection_name
    details = answer.get("collectionDetails") or []
    problem = collection_problem(details[0] if details else None, aws.target_collection_name)
    if problem is not None:
        fix = (
            DEPLOY
            if aws.create_collection
            else "create a SEARCH collection and point aws.opensearch_collection_arn and "
            "aws.collection_name at it, or let the stack create one (aws.create_collection)"
        )
        return failed(COLLECTION, f"collection {which} in {ctx.region}: {problem}", fix)
    return passed(COLLECTION, f"collection {which} is an ACTIVE SEARCH collection")


def collection_problem(detail: dict[str, Any] | None, name: str) -> str | None:
    """What makes a collection (BatchGetCollection's detail, None when not found) unfit, or None."""
    if detail is None:
        return "not found"
    if detail.get("name") != name:
        return f"it is named {detail.get('name')!r}, not aws.collection_name {name!r}"
    kind = detail.get("type")
    if kind != "SEARCH":
        return (
            f"of type {kind}: icecdc updates and deletes documents by their ids, and such a "
            "collection assigns the ids itself (only a SEARCH collection takes them)"
        )
    status = detail.get("status")
    if status != "ACTIVE":
        return f"{status}, not ACTIVE: it takes no writes until it is"
    return None


def access_problems(
    policy: list[dict[str, Any]], writer: str, collection: str, indexes: list[str]
) -> list[str]:
    """What `writer` may not do that a sync does, by a data access policy's document.

    Each index is checked as the alias `<index>` and a generation `<index>-1`; [] when nothing."""
    rules = [
        r
        for statement in policy
        if writer in statement.get("Principal", [])
        for r in statement.get("Rules", [])
    ]
    if not rules:
        return [f"{writer} is not a principal"]

    def granted(kind: str, resource: str) -> set[str]:
        return {
            p
            for r in rules
            if r.get("ResourceType") == kind
            and any(fnmatch.fnmatchcase(resource, x) for x in r.get("Resource", []))
            for p in r.get("Permission", [])
        }

    problems = []
    items = granted("collection", f"collection/{collection}")
    if "aoss:*" not in items and not items >= COLLECTION_PERMISSIONS:
        missing = ", ".join(sorted(COLLECTION_PERMISSIONS - items))
        problems.append(f"{writer} lacks {missing} on collection/{collection} (aliases, templates)")
    for index in indexes:
        for name in (index, f"{index}-1"):
            permissions = granted("index", f"index/{collection}/{name}")
            if "aoss:*" not in permissions and not permissions >= INDEX_PERMISSIONS:
                missing = ", ".join(sorted(INDEX_PERMISSIONS - permissions))
                problems.append(f"{writer} lacks {missing} on index/{collection}/{name}")
    return problems
