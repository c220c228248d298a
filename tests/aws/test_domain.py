"""A domain the stack creates: a separate admin, the jobs' role mapped to a role
that writes the configured indexes only, audit logs, and, with `aws.vpc`, the domain and the jobs
in the VPC: the template (Template assertions). The custom resource's handler: test_custom_resources.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from aws_cdk.assertions import Match

from icecdc.config import parse_config
from icecdc.errors import ConfigError
from infra.domain import availability_zones, writer_role
from tests.support.cdk import ADMIN, ROUTED_VPC, VPC, actions, config_dict, resources, role_statements, synth

PROVISIONER = "icecdc: the created domain's master user; its Lambda maps roles at deploy time"
NAG = Match.string_like_regexp("AwsSolutions-.*")


def test_the_admin_is_separate_and_the_jobs_may_write_their_indexes_only(created_domain: Any) -> None:
    template, _ = created_domain
    (domain_id, domain) = next(iter(template.find_resources("AWS::OpenSearchService::Domain").items()))
    (provisioner,) = template.find_resources("AWS::IAM::Role", {"Properties": {"Description": PROVISIONER}})
    (job_role,) = template.find_resources("AWS::IAM::Role", {"Properties": {"Description": "icecdc Glue job"}})
    security = domain["Properties"]["AdvancedSecurityOptions"]
    assert security["MasterUserOptions"]["MasterUserARN"] == {"Fn::GetAtt": [provisioner, "Arn"]}  # not the jobs' role
    assert domain["Properties"]["LogPublishingOptions"]["AUDIT_LOGS"]["Enabled"] is True

    (access,) = template.find_resources("Custom::IcecdcDomainAccess").values()
    properties = access["Properties"]
    assert properties["Admin"] == ADMIN and properties["Writer"] == {"Fn::GetAtt": [job_role, "Arn"]}
    assert properties["RoleName"] == "cdc-writer"
    role = json.loads(properties["Role"])
    (indexes,) = role["index_permissions"]
    assert indexes["index_patterns"] == ["accounts", "accounts-*", "customers", "customers-*", "orders", "orders-*"]
    assert "*" not in indexes["index_patterns"] and set(indexes["allowed_actions"]) == {"crud", "manage"}

    # IAM: PUT and DELETE only on the indexes' paths (and DELETE of a scroll), never on the whole domain
    es = [s for s in role_statements(template, "icecdc Glue job") if any(a.startswith("es:") for a in actions(s))]
    for statement in es:
        if {"es:ESHttpPut", "es:ESHttpDelete"} & set(actions(statement)):
            paths = [json.dumps(r) for r in resources(statement)]
            assert all(
                domain_id in p and ("/orders" in p or "/customers" in p or "/accounts" in p or "/_search/scroll" in p)
                for p in paths
            ), paths
    assert {a for s in es for a in actions(s)} == {
        "es:ESHttpGet",
        "es:ESHttpHead",
        "es:ESHttpPost",
        "es:ESHttpPut",
        "es:ESHttpDelete",
    }
    provisioning = [s for s in role_statements(template, PROVISIONER) if any(a.startswith("es:") for a in actions(s))]
    assert [json.dumps(resources(s)) for s in provisioning] == [
        json.dumps([{"Fn::Join": ["", [{"Fn::GetAtt": [domain_id, "Arn"]}, "/_plugins/_security/api/*"]]}])
    ]


def test_the_domain_and_the_jobs_in_a_vpc(tmp_path: Path) -> None:
    template, annotations = synth(tmp_path, {"create_domain": True, "domain_admin_arn": ADMIN, "vpc": VPC})
    (domain,) = template.find_resources("AWS::OpenSearchService::Domain").values()
    options = domain["Properties"]["VPCOptions"]
    assert options["SubnetIds"] == ["subnet-0123456789abcdef0", "subnet-0123456789abcdef1"]  # 2 nodes: 2 zones
    (domain_group,) = options["SecurityGroupIds"]
    (connection,) = template.find_resources("AWS::Glue::Connection").values()
    requirements = connection["Properties"]["ConnectionInput"]["PhysicalConnectionRequirements"]
    assert connection["Properties"]["ConnectionInput"]["ConnectionType"] == "NETWORK"
    assert requirements["SubnetId"] == "subnet-0123456789abcdef0" and requirements["AvailabilityZone"] == "us-east-1a"
    (jobs_group,) = requirements["SecurityGroupIdList"]
    for job in template.find_resources("AWS::Glue::Job").values():
        assert job["Properties"]["Connections"] == {"Connections": ["cdc-vpc"]}
    # HTTPS into the domain from the jobs and the provisioning Lambda, nothing else
    ingress = template.find_resources("AWS::EC2::SecurityGroupIngress")
    into_domain = [i["Properties"] for i in ingress.values() if i["Properties"]["GroupId"] == domain_group]
    # the jobs', the applying planner's and the provisioning Lambda's groups
    assert len(into_domain) == 3 and all(i["FromPort"] == 443 == i["ToPort"] for i in into_domain)
    assert jobs_group in [i["SourceSecurityGroupId"] for i in into_domain]
    (provisioning,) = template.find_resources(
        "AWS::Lambda::Function", {"Properties": {"Handler": "handler.domain_access"}}
    ).values()
    assert provisioning["Properties"]["VpcConfig"]["SubnetIds"]
    # OpenSearch's service-linked role exists before the domain is placed in the VPC
    (linked_id, linked) = next(iter(template.find_resources("Custom::IcecdcServiceLinkedRole").items()))
    assert linked["Properties"]["ServiceName"] == "opensearchservice.amazonaws.com"
    assert linked_id in next(iter(template.find_resources("AWS::OpenSearchService::Domain").values()))["DependsOn"]
    glue = [s for s in role_statements(template, "icecdc Glue job") if "glue:GetConnection" in actions(s)]
    assert len(glue) == 1
    assert annotations.find_error("*", NAG) == [] and annotations.find_warning("*", NAG) == []


@pytest.mark.parametrize(
    ("aws", "message"),
    [
        ({"create_domain": True}, "domain_admin_arn is required with create_domain"),
        ({"domain_admin_arn": ADMIN}, "domain_admin_arn is for a domain the stack creates"),
        ({"create_domain": True, "domain_admin_arn": "admin"}, "must be an IAM role or user ARN"),
        ({"vpc": {**VPC, "subnets": [VPC["subnets"][0], VPC["subnets"][0]]}}, "different availability zones"),
    ],
)
def test_the_config_refuses_a_domain_without_a_separate_admin(aws: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_config(config_dict(aws))


@pytest.mark.parametrize(
    ("nodes", "subnets", "zones"), [(1, 3, 1), (2, 3, 2), (3, 3, 3), (6, 3, 3), (4, 3, 2), (3, 2, 1), (2, None, 2)]
)
def test_a_domain_spans_the_zones_its_nodes_divide_among(nodes: int, subnets: int | None, zones: int) -> None:
    aws: dict[str, Any] = {"create_domain": True, "domain_admin_arn": ADMIN, "domain_instance_count": nodes}
    if subnets:
        aws["vpc"] = {**VPC, "subnets": VPC["subnets"][:subnets]}
    config = parse_config(config_dict(aws))
    assert config.aws is not None and availability_zones(config.aws) == zones


def test_the_domain_is_created_after_its_log_groups_policy_has_settled(created_domain: Any) -> None:
    """OpenSearch refuses a domain whose log groups' resource policy it cannot see yet ("does not grant
    sufficient permissions"): the domain depends on the policy and on a wait after it."""
    template, _ = created_domain
    (policy_id,) = template.find_resources("AWS::Logs::ResourcePolicy")
    (settled_id, settled) = next(iter(template.find_resources("Custom::IcecdcSettle").items()))
    (domain,) = template.find_resources("AWS::OpenSearchService::Domain").values()
    assert {policy_id, settled_id} <= set(domain["DependsOn"])
    assert settled["Properties"]["Policy"] == {"Ref": policy_id} and settled["Properties"]["Seconds"] >= 60


def test_a_vpc_without_nat_gets_the_endpoints_the_stack_needs(tmp_path: Path) -> None:
    """`aws.vpc.create_endpoints`: gateway endpoints for S3 and DynamoDB on the subnets' route tables,
    interface endpoints (private DNS) for the other services, reachable on 443 from the stack's
    groups only."""
    vpc = {**ROUTED_VPC, "create_endpoints": True}
    template, annotations = synth(tmp_path, {"create_domain": True, "domain_admin_arn": ADMIN, "vpc": vpc})
    endpoints = [e["Properties"] for e in template.find_resources("AWS::EC2::VPCEndpoint").values()]

    def service(e: dict[str, Any]) -> str:
        return json.dumps(e["ServiceName"]).split(".")[-1].strip('"]} ')

    gateways = {service(e): e for e in endpoints if e.get("VpcEndpointType") == "Gateway"}
    interfaces = {service(e): e for e in endpoints if e.get("VpcEndpointType") == "Interface"}
    assert set(gateways) == {"s3", "dynamodb"}
    assert all(sorted(e["RouteTableIds"]) == sorted(s["route_table_id"] for s in vpc["subnets"]) for e in gateways.values())
    assert set(interfaces) == {"glue", "monitoring", "logs", "kms", "sts"}  # no basic auth: no Secrets Manager
    assert all(e["PrivateDnsEnabled"] is True for e in interfaces.values())
    ((group_id, group),) = template.find_resources(
        "AWS::EC2::SecurityGroup", {"Properties": {"GroupDescription": "icecdc VPC interface endpoints"}}
    ).items()
    ingress = [i["Properties"] for i in template.find_resources("AWS::EC2::SecurityGroupIngress").values()]
    into = [i for i in ingress if i["GroupId"] == {"Fn::GetAtt": [group_id, "GroupId"]}]
    assert len(into) == 3 and all(i["FromPort"] == 443 == i["ToPort"] for i in into)  # jobs, planner, provisioning
    assert annotations.find_error("*", NAG) == []

    (tmp_path / "secret").mkdir()
    opensearch = {
        "url": "https://search.internal",
        "username": "u",
        "password_secret_arn": "arn:aws:secretsmanager:us-east-1:123456789012:secret:s-AbCdEf",
    }
    template, _ = synth(tmp_path / "secret", {"vpc": vpc}, opensearch=opensearch)
    names = [json.dumps(e["Properties"]["ServiceName"]) for e in template.find_resources("AWS::EC2::VPCEndpoint").values()]
    assert any("secretsmanager" in n for n in names)
    with pytest.raises(ConfigError, match="route_table_id"):
        parse_config(config_dict({"vpc": {**VPC, "create_endpoints": True}}))


def test_without_create_endpoints_the_vpc_is_left_as_it_is(tmp_path: Path) -> None:
    template, _ = synth(tmp_path, {"vpc": ROUTED_VPC})
    template.resource_count_is("AWS::EC2::VPCEndpoint", 0)


def test_the_writer_role_covers_every_index_of_a_table_and_its_pipelines() -> None:
    indexes = [{"index": "orders-eu", "pipeline": "embed"}, {"index": "orders-us"}]
    role = writer_role(parse_config(config_dict(tables=[{"name": "db.orders", "indexes": indexes}])))
    (patterns,) = [p["index_patterns"] for p in role["index_permissions"]]
    assert patterns == ["orders-eu", "orders-eu-*", "orders-us", "orders-us-*"]
    assert "cluster:admin/ingest/pipeline/get" in role["cluster_permissions"]
