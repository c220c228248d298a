"""OpenSearch Serverless: an existing collection (`aws.opensearch_collection_arn`) and one the stack
creates (`aws.create_collection`): the template's IAM grants, data access, encryption and network
policies (Template assertions), and the configurations refused."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from aws_cdk.assertions import Match

from icecdc.aws.contract import SERVERLESS_COLLECTION_PERMISSIONS, SERVERLESS_INDEX_PERMISSIONS
from icecdc.config import parse_config
from icecdc.doctor.stack import Kind, named_resources
from icecdc.errors import ConfigError
from infra.stack import check_deployable
from tests.support.cdk import (
    ADMIN,
    COLLECTION_ARN,
    COLLECTION_ID,
    ROOT,
    ROUTED_VPC,
    actions,
    config_dict,
    lint_findings,
    resources,
    role_statements,
    serverless,
)
from tests.support.cdk import synth_collection as synth
from tests.support.iam import Enforcer, Names, Request, RolePolicy, aoss_calls, role_id

NAG = Match.string_like_regexp("AwsSolutions-.*")
EXISTING = {"opensearch_collection_arn": COLLECTION_ARN, "collection_name": "search"}
CREATED = {"create_collection": True, "collection_admin_arn": ADMIN}
WRITER_INDEXES = [f"index/{{c}}/{i}" for name in ("accounts", "customers", "orders") for i in (name, f"{name}-*")]


@pytest.fixture(scope="module")
def existing_collection(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, Any]:
    return synth(tmp_path_factory.mktemp("existing"), EXISTING)


@pytest.fixture(scope="module")
def created_collection(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, Any]:
    return synth(tmp_path_factory.mktemp("created"), CREATED)


def aoss_statements(template: Any, description: str) -> list[dict[str, Any]]:
    return [s for s in role_statements(template, description) if any(a.startswith("aoss:") for a in actions(s))]


def data_policies(template: Any) -> dict[str, list[dict[str, Any]]]:
    """The data access policies by name, their documents resolved but for the roles' ARNs."""
    policies = template.find_resources("AWS::OpenSearchServerless::AccessPolicy").values()
    return {p["Properties"]["Name"]: p["Properties"]["Policy"] for p in policies}


def writers_document(template: Any, name: str) -> tuple[list[dict[str, Any]], list[Any]]:
    """The writers' policy's rules and principals (the role ARNs are GetAtts in an Fn::Join)."""
    policy = data_policies(template)[name]
    parts = policy["Fn::Join"][1]
    text = "".join(p if isinstance(p, str) else json.dumps("ROLE")[1:-1] for p in parts)
    (statement,) = json.loads(text)
    return statement["Rules"], [p for p in parts if not isinstance(p, str)]


@pytest.mark.parametrize("variant", ["existing_collection", "created_collection"])
def test_the_writers_may_reach_the_one_collection_and_write_their_indexes_only(
    variant: str, request: pytest.FixtureRequest
) -> None:
    template, annotations = request.getfixturevalue(variant)
    (job_role,) = template.find_resources("AWS::IAM::Role", {"Properties": {"Description": "icecdc Glue job"}})
    (planner_role,) = template.find_resources("AWS::IAM::Role", {"Properties": {"Description": "icecdc planner"}})
    created = template.find_resources("AWS::OpenSearchServerless::Collection")
    arn = {"Fn::GetAtt": [next(iter(created)), "Arn"]} if created else COLLECTION_ARN
    for role in ("icecdc Glue job", "icecdc planner"):
        (statement,) = aoss_statements(template, role)  # IAM: the data plane, on that collection only
        assert actions(statement) == ["aoss:APIAccessAll"] and resources(statement) == [arn]
    collection = "cdc" if created else "search"
    rules, principals = writers_document(template, "cdc-writers")
    (indexes,) = [r for r in rules if r["ResourceType"] == "index"]
    assert indexes["Resource"] == sorted(i.format(c=collection) for i in WRITER_INDEXES)
    # the index permissions a sync needs (the doctor checks the same), every one named: no wildcard
    assert indexes["Permission"] == list(SERVERLESS_INDEX_PERMISSIONS)
    assert {"aoss:WriteDocument", "aoss:CreateIndex", "aoss:DeleteIndex"} <= set(indexes["Permission"])
    (items,) = [r for r in rules if r["ResourceType"] == "collection"]
    assert items["Resource"] == [f"collection/{collection}"]
    assert items["Permission"] == list(SERVERLESS_COLLECTION_PERMISSIONS)
    assert not any("*" in p for r in rules for p in r["Permission"])
    assert not any("aoss:*" in r["Permission"] or any(x.endswith("/*") for x in r["Resource"]) for r in rules)
    assert principals == [{"Fn::GetAtt": [job_role, "Arn"]}, {"Fn::GetAtt": [planner_role, "Arn"]}]
    template.resource_count_is("AWS::OpenSearchService::Domain", 0)
    assert annotations.find_error("*", NAG) == [] and annotations.find_warning("*", NAG) == []


def test_an_existing_collection_gets_no_policy_but_the_writers(existing_collection: Any) -> None:
    template, _ = existing_collection
    assert list(data_policies(template)) == ["cdc-writers"]
    template.resource_count_is("AWS::OpenSearchServerless::Collection", 0)
    template.resource_count_is("AWS::OpenSearchServerless::SecurityPolicy", 0)
    outputs = template.to_json()["Outputs"]
    assert "CollectionEndpoint" not in outputs and "DomainEndpoint" not in outputs


def test_a_created_collection_is_a_search_one_under_its_policies(created_collection: Any) -> None:
    template, _ = created_collection
    ((collection_id, collection),) = template.find_resources("AWS::OpenSearchServerless::Collection").items()
    assert collection["Properties"]["Type"] == "SEARCH" and collection["Properties"]["Name"] == "cdc"
    assert collection["DeletionPolicy"] == "Retain"
    policies = template.find_resources("AWS::OpenSearchServerless::SecurityPolicy")
    by_type = {p["Properties"]["Type"]: (i, p) for i, p in policies.items()}
    assert set(by_type) == {"encryption", "network"} and set(collection["DependsOn"]) >= {i for i, _ in by_type.values()}
    (key_id,) = template.find_resources("AWS::KMS::Key", {"Properties": {"Description": "icecdc dead letters and Glue output"}})
    encryption = by_type["encryption"][1]["Properties"]["Policy"]
    assert {"Fn::GetAtt": [key_id, "Arn"]} in encryption["Fn::Join"][1]  # the stack's data key
    assert '"AWSOwnedKey":false' in "".join(p for p in encryption["Fn::Join"][1] if isinstance(p, str))
    (network,) = json.loads(by_type["network"][1]["Properties"]["Policy"])
    assert network == {"Rules": [{"ResourceType": "collection", "Resource": ["collection/cdc"]}], "AllowFromPublic": True}
    (admin,) = json.loads(data_policies(template)["cdc-admin"])
    assert admin["Principal"] == [ADMIN]
    assert {r["ResourceType"]: r["Resource"] for r in admin["Rules"]} == {
        "index": ["index/cdc/*"],
        "collection": ["collection/cdc"],
    }
    outputs = template.to_json()["Outputs"]
    assert outputs["CollectionEndpoint"]["Value"] == {"Fn::GetAtt": [collection_id, "CollectionEndpoint"]}
    documented = set(re.findall(r"^\| `(\w+)` \|", (ROOT / "docs" / "deploy.md").read_text(), flags=re.MULTILINE))
    assert {"CollectionArn", "CollectionEndpoint"} <= set(outputs) <= documented
    endpoint = json.dumps({"Fn::GetAtt": [collection_id, "CollectionEndpoint"]})
    jobs = template.find_resources("AWS::Glue::Job").values()
    assert jobs and all(endpoint in json.dumps(j["Properties"]["DefaultArguments"]) for j in jobs)  # the jobs write there
    assert all(p in data_policies(template) for p in ("cdc-writers", "cdc-admin"))


def test_a_created_collection_in_a_vpc_is_reached_through_its_endpoint(tmp_path: Path) -> None:
    template, annotations = synth(tmp_path, {**CREATED, "vpc": ROUTED_VPC})
    ((endpoint_id, endpoint),) = template.find_resources("AWS::OpenSearchServerless::VpcEndpoint").items()
    assert endpoint["Properties"]["SubnetIds"] == [s["id"] for s in ROUTED_VPC["subnets"]]
    (group,) = endpoint["Properties"]["SecurityGroupIds"]
    (network,) = [
        p
        for p in template.find_resources("AWS::OpenSearchServerless::SecurityPolicy").values()
        if p["Properties"]["Type"] == "network"
    ]
    document = network["Properties"]["Policy"]["Fn::Join"][1]
    assert {"Fn::GetAtt": [endpoint_id, "Id"]} in document and '"AllowFromPublic":false' in "".join(
        p for p in document if isinstance(p, str)
    )
    ingress = [i["Properties"] for i in template.find_resources("AWS::EC2::SecurityGroupIngress").values()]
    into = [i for i in ingress if i["GroupId"] == group]
    assert len(into) == 2 and all(i["FromPort"] == 443 == i["ToPort"] for i in into)  # the jobs and the planner
    assert annotations.find_error("*", NAG) == [] and annotations.find_warning("*", NAG) == []
    assert lint_findings(template) == []


@pytest.mark.parametrize("variant", ["existing_collection", "created_collection"])
def test_a_collection_lints_clean(variant: str, request: pytest.FixtureRequest) -> None:
    template, _ = request.getfixturevalue(variant)
    assert lint_findings(template) == []


@pytest.mark.parametrize(
    ("aws", "message"),
    [
        ({"create_collection": True}, "collection_admin_arn is required with create_collection"),
        ({"collection_admin_arn": ADMIN}, "collection_admin_arn is for a collection the stack creates"),
        ({**CREATED, "collection_admin_arn": "admin"}, "collection_admin_arn must be an IAM role or user ARN"),
        ({**CREATED, **EXISTING}, "choose create_collection or opensearch_collection_arn"),
        ({**CREATED, "create_domain": True, "domain_admin_arn": ADMIN}, "one destination only"),
        ({**EXISTING, "opensearch_domain_arn": "arn:aws:es:us-east-1:123456789012:domain/d"}, "one destination only"),
        ({**EXISTING, "opensearch_collection_arn": "arn:aws:es:us-east-1:1:domain/d"}, "must be a collection's ARN"),
        ({"opensearch_collection_arn": COLLECTION_ARN}, "collection_name is required with opensearch_collection"),
        ({"collection_name": "search"}, "collection_name is for a collection"),
        ({**CREATED, "collection_name": "Search"}, "collection_name must be 3 to 32 lower-case letters"),
        ({**CREATED, "stack_name": "ab"}, r"stack_name must be 3 to 32 lower-case .*, got 'ab'"),
        ({**CREATED, "stack_name": "a" * 25}, r"stack_name must be 3 to 24 .*<stack>-writers\), got 'a{25}'"),
    ],
)
def test_the_config_refuses_a_collection_it_cannot_deploy(aws: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_config(config_dict(aws))


AOSS_URL = {"url": f"https://{COLLECTION_ID}.us-east-1.aoss.amazonaws.com", "aws_region": "us-east-1"}


@pytest.mark.parametrize(
    ("aws", "opensearch", "service", "message"),
    [
        (EXISTING, AOSS_URL, "es", "aws.opensearch_collection_arn needs opensearch.aws_service: aoss"),
        (CREATED, AOSS_URL, "es", "aws.create_collection needs opensearch.aws_service: aoss"),
        ({}, AOSS_URL, "aoss", "aoss needs aws.opensearch_collection_arn or aws.create_collection"),
        (EXISTING, {**AOSS_URL, "url": "https://other.us-east-1.aoss.amazonaws.com"}, "aoss", "is not the endpoint of"),
    ],
)
def test_the_stack_refuses_a_collection_signed_for_another_service(
    aws: dict[str, Any], opensearch: dict[str, Any], service: str, message: str
) -> None:
    config = serverless(parse_config(config_dict(aws, opensearch)), service)
    with pytest.raises(SystemExit, match=message):
        check_deployable(config)


def signed(host: str, path: str = "/orders-1/_bulk", service: str = "aoss", key: str = "AKIAJOB") -> Request:
    """A request as opensearch-py's SigV4 signs it for `service`, with `key`'s credentials."""
    authorization = f"AWS4-HMAC-SHA256 Credential={key}/20260101/us-east-1/{service}/aws4_request, Signature=x"
    return Request.of("POST", path, {"Host": host, "Authorization": authorization}, b"")


def test_the_harness_authorizes_a_request_signed_for_aoss_as_api_access_on_its_collection(
    existing_collection: Any, tmp_path: Path
) -> None:
    """IAM's half of Serverless: a request signed for aoss is aoss:APIAccessAll on the collection
    whose id is the endpoint's first label; a role without it, or another collection, is refused."""
    host = f"{COLLECTION_ID}.us-east-1.aoss.amazonaws.com"
    assert aoss_calls(signed(host)) == [aoss_calls(signed("127.0.0.1:9200"), COLLECTION_ARN)[0]]
    assert aoss_calls(signed(host))[0].action == "aoss:APIAccessAll"
    template = existing_collection[0].to_json()
    enforcer = Enforcer(names=Names({}))
    enforcer.act_as("AKIAJOB", RolePolicy.from_template("job", template, role_id(template, "JobRole"), Names({})))
    assert enforcer.authorize(signed(host), opensearch=True) is None
    refused = enforcer.authorize(signed("other0000000000.us-east-1.aoss.amazonaws.com"), opensearch=True)
    other = "arn:aws:aoss:us-east-1:123456789012:collection/other0000000000"
    assert str(refused) == f"role job may not aoss:APIAccessAll on {other}"
    # a planner that only starts jobs writes nowhere: it lacks the right
    lean, _ = synth(tmp_path, {**EXISTING, "planner_applies": False})
    lean_template = lean.to_json()
    planner = RolePolicy.from_template("planner", lean_template, role_id(lean_template, "PlannerRole"), Names({}))
    enforcer.act_as("AKIAPLANNER", planner)
    refused = enforcer.authorize(signed(host, key="AKIAPLANNER"), opensearch=True)
    assert str(refused) == f"role planner may not aoss:APIAccessAll on {COLLECTION_ARN}"


def test_the_serverless_names_the_doctor_checks_are_the_templates(created_collection: Any) -> None:
    """icecdc.doctor.stack cannot import infra/: the names it checks are free are the template's."""
    template, _ = created_collection
    config = serverless(parse_config(config_dict(CREATED, AOSS_URL)))
    serverless_kinds = {Kind.COLLECTION, Kind.ENCRYPTION_POLICY, Kind.NETWORK_POLICY}
    names = {(n.kind, n.name) for n in named_resources(config) if n.kind in serverless_kinds}
    types = {
        "AWS::OpenSearchServerless::Collection": Kind.COLLECTION,
        "AWS::OpenSearchServerless::SecurityPolicy": None,
    }
    given = set()
    for resource in template.to_json()["Resources"].values():
        if resource["Type"] in types:
            properties = resource["Properties"]
            kind = (
                types[resource["Type"]]
                or {"encryption": Kind.ENCRYPTION_POLICY, "network": Kind.NETWORK_POLICY}[properties["Type"]]
            )
            given.add((kind, properties["Name"]))
    assert names == given and len(names) == 3
