"""The OpenSearch checks: the domain before deploying, and whether the writers can write after.

Before, the domain's engine and reachability (a Serverless collection's: a signed request). After,
a scratch index is created, written and deleted with the configured credentials, a collection's
endpoint is reached again, and the security plugin's role mapping of the writers' roles is read.
"""

from __future__ import annotations

import fnmatch
import uuid
from collections.abc import Iterator
from typing import Any

from icecdc.config import OpenSearchConfig
from icecdc.destination.client import (
    REACHABILITY_PROBE,
    OpenSearch,
    OpenSearchConnectionError,
    TransportError,
    capabilities_of,
    check_reachable,
    reach,
)
from icecdc.doctor.context import Context
from icecdc.doctor.model import Check, Outcome, failed, passed, skipped, warned
from icecdc.doctor.stack import Logical
from icecdc.errors import SinkError

ENGINE = "opensearch domain"
WRITES = "opensearch writes"
MAPPING = "writer mapping"
REACHABLE = "opensearch reachable"

# What the writers need (infra.domain.writer_role): on the indexes,
# and on the cluster (_bulk, GET /).
INDEX_ACTIONS = {"crud", "manage"}
CLUSTER_ACTIONS = {"cluster_monitor", "cluster_composite_ops"}
ALL_INDEX_ACTIONS = {"*", "indices_all", "indices:*"}
ALL_CLUSTER_ACTIONS = {"*", "cluster_all", "cluster:*"}
SECURITY_API = "/_plugins/_security/api"
MAPPING_COMMANDS = (
    "awscurl --service es -X PUT https://DOMAIN/_plugins/_security/api/roles/{role} -d '{body}'\n"
    "awscurl --service es -X PUT https://DOMAIN/_plugins/_security/api/rolesmapping/{role}"
    " -d '{{\"backend_roles\": [{arns}]}}'"
)


def check_domain(ctx: Context) -> Iterator[Check]:
    """Before deploying: an existing domain runs OpenSearch and answers GET /.

    icecdc calls `_plugins/...` and composable index templates, which Elasticsearch domains lack.
    """
    aws = ctx.aws
    if aws.create_domain:
        yield skipped(ENGINE, "the stack creates an OpenSearch 2.19 domain")
        return
    if aws.collection:
        yield skipped(ENGINE, "the destination is a Serverless collection (serverless collection)")
        if not aws.create_collection:  # a created one has no endpoint before the deploy
            reached = collection_reachable(ctx, ctx.config.opensearch, ctx.config.index_names)
            yield reached if aws.vpc is None else _from_outside(reached)
        return
    in_vpc = False
    if aws.opensearch_domain_arn:
        name = aws.opensearch_domain_arn.rsplit("/", 1)[-1]
        status = ctx.client("opensearch").describe_domain(DomainName=name)["DomainStatus"]
        in_vpc = bool(status.get("VPCOptions", {}).get("VPCId")) or "vpc" in status.get(
            "Endpoints", {}
        )
        engine = str(status.get("EngineVersion", ""))
        if not engine.startswith("OpenSearch_"):
            yield failed(
                ENGINE,
                f"domain {name} runs {engine}: icecdc needs OpenSearch (1.0 or later; the "
                "stack creates 2.19)",
                "upgrade the domain to OpenSearch (a snapshot first; one of the versions AWS "
                "lists for it), or point the "
                "configuration at an OpenSearch domain",
                f"aws opensearch get-compatible-versions --domain-name {name}\n"
                f"aws opensearch upgrade-domain --domain-name {name} --target-version "
                "OpenSearch_<version>",
            )
            return
        yield passed(ENGINE, f"domain {name} runs {engine}")
    index = (*ctx.config.index_names, "icecdc")[0]
    yield from _reachable(ctx, ctx.config.opensearch, in_vpc, index)


def _reachable(ctx: Context, config: OpenSearchConfig, in_vpc: bool, index: str) -> Iterator[Check]:
    client = ctx.destination(config).client
    try:
        found = check_reachable(client, config.url, index)
    except (SinkError, TransportError) as exc:
        if in_vpc:  # this machine is outside the VPC; the jobs and the planner run in it (aws.vpc)
            yield warned(
                REACHABLE,
                f"{exc}; the domain is in a VPC, which this machine may not reach",
                "run the doctor where the VPC is reachable, or confirm after deploying "
                "(icecdc doctor after)",
            )
            return
        yield failed(
            REACHABLE,
            str(exc),
            "check opensearch.url and the credentials (opensearch.username and "
            "password_secret_arn, or the AWS identity "
            "with aws_region); the domain's access policy must admit the caller",
        )
        return
    distribution, _, number = found.partition(" ")
    if capabilities_of(client).cluster_info and distribution != "opensearch":
        yield failed(
            REACHABLE,
            f"{config.url} answers as Elasticsearch {number}: icecdc needs OpenSearch",
            "point opensearch.url at an OpenSearch cluster (1.0 or later)",
        )
        return
    shown = f"OpenSearch {number}" if capabilities_of(client).cluster_info else found
    yield passed(REACHABLE, f"{config.url} answers: {shown}")


# A collection's refusals: its SigV4 front end's (a `message`), or its policies' (`error`)
UNSIGNED_FIX = (
    "sign as a valid AWS identity for the collection's region (opensearch.aws_region, "
    "aws_service: aoss): check the AWS credentials this runs with and the machine's clock"
)
DENIED_FIX = (
    "grant the caller aoss:APIAccessAll on the collection (IAM) and a data access policy rule "
    "with aoss:DescribeIndex on the configured indexes (docs/deploy.md, OpenSearch Serverless)"
)


def collection_reachable(ctx: Context, config: OpenSearchConfig, indexes: tuple[str, ...]) -> Check:
    """A Serverless collection's endpoint answers a signed request (`reach`: HEAD of an index).

    The first configured index, 200 or 404 alike; a refused signature or a denied request fails."""
    client = ctx.destination(config).client
    index = (*indexes, REACHABILITY_PROBE)[0]
    try:
        found = reach(client, index)
    except OpenSearchConnectionError as exc:
        return failed(
            REACHABLE,
            f"{config.url} is unreachable: {exc.info or exc}",
            "check opensearch.url (the collection's endpoint) and that the collection's network "
            "policy admits this machine",
        )
    except TransportError as exc:
        return _refused(client, config.url, index, exc)
    return passed(REACHABLE, f"{config.url} answers a signed request: {found}")


def _refused(client: OpenSearch, url: str, index: str, exc: TransportError) -> Check:
    """The failed check for a collection's refusal of the reachability HEAD.

    A HEAD's answer has no body: the same request as a GET says whose refusal it is."""
    try:
        client.indices.get(index=index)
    except TransportError as again:
        exc = again if again.status_code == exc.status_code else exc
    info = exc.info if isinstance(exc.info, dict) else {}
    if "message" in info or exc.status_code == 401:
        return failed(
            REACHABLE, f"{url} refused the signature: {info.get('message')}", UNSIGNED_FIX
        )
    error = info.get("error")
    reason = error.get("reason") if isinstance(error, dict) else None
    status = str(exc.status_code)
    shown = f"{status} {reason or ''}".strip()
    why = reason if reason and reason.startswith(status) else shown
    return failed(REACHABLE, f"{url} denied the request: {why}", DENIED_FIX)


def _from_outside(check: Check) -> Check:
    """`check` as a warning when it failed: the jobs reach the collection through `aws.vpc`.

    This machine may be outside the collection's network policy, as outside a domain's VPC."""
    if check.outcome != Outcome.FAILED:
        return check
    return warned(
        REACHABLE,
        f"{check.detail}; the jobs reach the collection through the VPC (aws.vpc), and its "
        "network policy may not admit this machine",
        "run the doctor where the VPC is reachable, or confirm after deploying "
        "(icecdc doctor after)",
    )


def check_endpoint(ctx: Context) -> Iterator[Check]:
    """After deploying: a Serverless collection's endpoint, the writers', answers a signed request.

    A domain's is reached by `check_writes`."""
    if not ctx.aws.collection:
        yield skipped(REACHABLE, "a domain: the writes check reaches it")
        return
    yield collection_reachable(ctx, search_config(ctx), ctx.config.index_names)


def search_config(ctx: Context) -> OpenSearchConfig:
    """The endpoint and credentials the deployed writers use.

    They are the configured ones, or the endpoint of the domain the stack created, signed with
    SigV4, as icecdc.aws.deployed.runtime_config has them.
    """
    config = ctx.config.opensearch
    if ctx.aws.create_collection:
        name = ctx.aws.target_collection_name
        answer = ctx.client("opensearchserverless").batch_get_collection(names=[name])
        found = [c["collectionEndpoint"] for c in answer.get("collectionDetails") or []]
        return config.revised(url=found[0]) if found else config
    domain = ctx.stack.physical(Logical.DOMAIN) if ctx.aws.create_domain and ctx.stack else None
    if domain is None:
        return config
    status = ctx.client("opensearch").describe_domain(DomainName=domain)["DomainStatus"]
    endpoint = status.get("Endpoint") or status.get("Endpoints", {}).get("vpc")
    signed = {
        "username": None,
        "password": None,
        "password_secret_arn": None,
        "aws_region": ctx.region,
    }
    return config.revised(url=f"https://{endpoint}", **signed)


def check_writes(ctx: Context) -> Iterator[Check]:
    """After deploying: each configured index's pattern takes a write.

    The write goes to a scratch index, `<index>-doctor-…`, inside the writer role's `<index>-*` and
    never an icecdc generation. It is created, written with an external version as a sync does, and
    deleted (a Serverless collection's without a version). With basic auth this is the writers'
    own user; with SigV4 it is the caller, and `check_mapping` covers the writers' roles.
    """
    config = search_config(ctx)
    client = ctx.destination(config).client
    for index in ctx.config.index_names:
        yield _scratch_write(client, index, config)


def _scratch_write(client: OpenSearch, index: str, config: OpenSearchConfig) -> Check:
    scratch = f"{index}-doctor-{uuid.uuid4().hex[:8]}"
    identity = (
        f"user {config.username}"
        if config.username
        else "the caller's AWS identity"
        if config.aws_region
        else "no credentials"
    )
    try:
        client.indices.create(index=scratch)
        try:
            # an empty document: a template with a strict mapping that
            # matches `<index>-*` takes it too
            versioned = {"version": 1, "version_type": "external"}
            client.index(
                index=scratch,
                id="doctor",
                body={},
                **(versioned if capabilities_of(client).versions else {}),
            )
        finally:
            client.indices.delete(index=scratch)
    except OpenSearchConnectionError as exc:
        return failed(
            WRITES,
            f"{config.url} is unreachable: {exc.info or exc}",
            "check opensearch.url; a domain in a VPC: run the doctor where the VPC is reachable",
            subject=index,
        )
    except TransportError as exc:
        return failed(
            WRITES,
            f"{identity} could not write {scratch!r}: {exc.status_code} {exc.error}",
            *_write_fix(exc, config.url),
            subject=index,
        )
    return passed(
        WRITES, f"{identity} created, wrote and deleted {scratch!r} on {config.url}", subject=index
    )


# What to do about a refused scratch write, by OpenSearch's answer.
BLOCKED = (
    "the cluster or index refuses writes (a flood-stage disk watermark sets "
    "read_only_allow_delete): free disk space "
    "or add storage, then clear the block"
)
UNBLOCK = (
    "curl -X PUT {url}/_cluster/settings -H 'Content-Type: application/json' "
    '-d \'{{"persistent": {{"cluster.blocks.read_only": null, '
    '"cluster.blocks.read_only_allow_delete": null}}}}\''
)
DENIED = (
    "map the writers to a role that may write the configured indexes (docs/deploy.md, "
    "fine-grained access control)"
)


def _write_fix(exc: TransportError, url: str) -> tuple[str, str | None]:
    text = str(exc.info)
    if "cluster_block_exception" in text or "read_only" in text:
        return BLOCKED, UNBLOCK.format(url=url)
    if exc.status_code in (401, 403):
        return DENIED, None
    return "see OpenSearch's answer above", None


def check_mapping(ctx: Context) -> Iterator[Check]:
    """After deploying, with SigV4: the writers' roles are mapped to a role that covers the indexes.

    The jobs' role, and the applying planner's, must be mapped to a role whose permissions cover
    every configured index and its generations, as the stack's `<stack>-writer` does. Reading the
    security plugin's role mappings needs the caller to be a security admin.
    """
    if ctx.aws.collection:
        yield skipped(MAPPING, "a Serverless collection: its data access policy maps the writers")
        return
    config = search_config(ctx)
    if config.aws_region is None:
        who = (
            f"basic auth: the writers sign in as {config.username}"
            if config.username
            else "no authentication"
        )
        yield skipped(MAPPING, f"{who}, as the scratch write did")
        return
    writers = writer_arns(ctx) if ctx.stack is not None else {}
    if not writers:
        yield failed(
            MAPPING, "the stack's writer roles were not found", "deploy the stack (cdk deploy)"
        )
        return
    client = ctx.destination(config).client
    try:
        mappings = client.transport.perform_request("GET", f"{SECURITY_API}/rolesmapping")
        roles = client.transport.perform_request("GET", f"{SECURITY_API}/roles")
    except TransportError as exc:
        if exc.status_code in (400, 404):  # "no handler found": the domain has no security plugin
            yield skipped(
                MAPPING,
                "no fine-grained access control: IAM alone decides, and the stack gave the "
                "writers es:ESHttp* on the domain",
            )
        else:
            yield warned(
                MAPPING,
                f"the caller may not read role mappings ({exc.status_code}): cannot tell "
                "whether the writers are mapped",
                "run the doctor as the domain's admin (security_manager), or read the "
                "mapping yourself",
                f"awscurl --service es {config.url}{SECURITY_API}/rolesmapping",
            )
        return
    yield from mapping_checks(ctx, writers, mappings, roles)


def mapping_checks(
    ctx: Context, writers: dict[str, str], mappings: dict[str, Any], roles: dict[str, Any]
) -> Iterator[Check]:
    """Each writer against the security plugin's role mappings and roles.

    `writers` maps what each writer is to its ARN.
    """
    indexes = list(ctx.config.index_names)
    for label, arn in writers.items():
        problems = mapping_problems(mappings, roles, arn, indexes)
        if problems:
            yield failed(
                MAPPING, "; ".join(problems), *_mapping_fix(ctx, writers, indexes), subject=label
            )
        else:
            yield passed(
                MAPPING,
                f"{arn} may write {', '.join(indexes)} and their generations",
                subject=label,
            )


def writer_arns(ctx: Context) -> dict[str, str]:
    """The writers' role ARNs by what they are.

    The jobs', and the planner's when it applies batches.
    """
    assert ctx.stack is not None
    wanted = [("jobs", Logical.JOB_ROLE)] + (
        [("planner", Logical.PLANNER_ROLE)] if ctx.aws.planner_applies else []
    )
    arns = {}
    for label, logical in wanted:
        name = ctx.stack.physical(logical)
        if name:
            arns[label] = str(ctx.client("iam").get_role(RoleName=name)["Role"]["Arn"])
    return arns


def _mapping_fix(ctx: Context, writers: dict[str, str], indexes: list[str]) -> tuple[str, str]:
    patterns = ", ".join(f'"{p}"' for i in indexes for p in (i, f"{i}-*"))
    role = f"{ctx.stack_name}-writer"
    body = (
        '{"cluster_permissions": ["cluster_monitor", "cluster_composite_ops", '
        '"indices:admin/template/get", '
        f'"indices:admin/index_template/get"], "index_permissions": [{{"index_patterns": '
        f"[{patterns}], "
        '"allowed_actions": ["crud", "manage"]}]}'
    )
    arns = ", ".join(f'"{a}"' for a in writers.values())
    if ctx.aws.create_domain:
        return (
            (
                "the stack maps its writers on every deploy (Custom::IcecdcDomainAccess): deploy "
                "again and read its log"
            ),
            "cdk deploy",
        )
    return (
        "as the domain's admin, map the writers' roles to a role that may write the indexes",
        MAPPING_COMMANDS.format(role=role, body=body, arns=arns),
    )


def mapping_problems(
    mappings: dict[str, Any], roles: dict[str, Any], writer: str, indexes: list[str]
) -> list[str]:
    """What `writer` may not do that a sync does, by the security plugin's role mappings and roles.

    `writer` is a backend role: an IAM role ARN. The mappings and roles are as GET .../rolesmapping
    and .../roles answer. [] when nothing.
    """
    mapped = [
        name for name, mapping in mappings.items() if writer in mapping.get("backend_roles", [])
    ]
    if not mapped:
        return [f"{writer} is mapped to no role"]
    granted = [roles.get(name, {}) for name in mapped]
    problems = []
    cluster = {a for role in granted for a in role.get("cluster_permissions", [])}
    if not cluster & ALL_CLUSTER_ACTIONS and not cluster >= CLUSTER_ACTIONS:
        problems.append(
            f"its roles ({', '.join(mapped)}) lack "
            f"{', '.join(sorted(CLUSTER_ACTIONS - cluster))} on the cluster"
        )
    for index in indexes:
        for name in (index, f"{index}-1"):  # the alias, and a generation
            actions = {
                a
                for role in granted
                for permission in role.get("index_permissions", [])
                if any(fnmatch.fnmatchcase(name, p) for p in permission.get("index_patterns", []))
                for a in permission.get("allowed_actions", [])
            }
            if not actions & ALL_INDEX_ACTIONS and not actions >= INDEX_ACTIONS:
                missing = ", ".join(sorted(INDEX_ACTIONS - actions))
                problems.append(f"its roles ({', '.join(mapped)}) lack {missing} on {name!r}")
    return problems
