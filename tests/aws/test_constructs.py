"""Each construct of the stack alone in a bare stack (Template assertions), and what holds across
the composed stack: scoped cdk-nag suppressions and the logical IDs of stateful resources."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from aws_cdk import aws_iam as iam
from aws_cdk.assertions import Match

from icecdc.aws.contract import METRIC_NAMESPACE
from icecdc.config import parse_config
from icecdc.errors import ConfigError
from infra.collection import Collection
from infra.domain import Search
from infra.jobs import Jobs
from infra.operations import Operations
from infra.planner import Planner
from infra.state import State
from tests.support.cdk import ADMIN, COLLECTION_ARN, TABLES, VPC, Parts, config_dict, synth


def job_role(parts: Parts) -> iam.Role:
    return iam.Role(parts.stack, "JobRole", assumed_by=iam.ServicePrincipal("glue.amazonaws.com"))


def retention(template: Any, name: str) -> int:
    (group,) = template.find_resources("AWS::Logs::LogGroup", {"Properties": {"LogGroupName": name}}).values()
    return int(group["Properties"]["RetentionInDays"])


def test_state_alone_keeps_checkpoints_and_dead_letters_retained_under_the_data_key(tmp_path: Path) -> None:
    parts = Parts(tmp_path, config_dict({"dead_letter_retention_days": 30}))
    State(parts.stack, "State", aws=parts.config.aws)
    template = parts.template()
    template.has_resource(
        "AWS::DynamoDB::GlobalTable", {"DeletionPolicy": "Retain", "Properties": Match.object_like({"TableName": "cdc-state"})}
    )
    template.has_resource(
        "AWS::KMS::Key", {"DeletionPolicy": "Retain", "Properties": Match.object_like({"EnableKeyRotation": True})}
    )
    template.has_resource_properties(
        "AWS::S3::Bucket", {"LifecycleConfiguration": {"Rules": [Match.object_like({"ExpirationInDays": 30})]}}
    )
    # a deployed stack keeps its table, key and buckets: their logical IDs are those of the flat stack
    assert {"State1C20CC9A", "DataKey17AFBB84", "DeadLettersBBF8BAAB", "AccessLogs8B620ECA"} <= set(
        template.to_json()["Resources"]
    )


@pytest.mark.parametrize("days", [None, 90])
def test_jobs_alone_log_into_groups_of_their_own_with_a_retention(tmp_path: Path, days: int | None) -> None:
    parts = Parts(tmp_path, config_dict({"log_retention_days": days} if days else {}))
    state = State(parts.stack, "State", aws=parts.config.aws)
    Jobs(parts.stack, "Jobs", config=parts.config, bundles=parts.bundles, state=state, role=job_role(parts))
    template = parts.template()
    for kind in ("output", "error"):
        assert retention(template, f"/aws-glue/jobs/cdc/{kind}") == (days or 30)
        template.has_resource_properties(
            "AWS::Logs::LogGroup", {"LogGroupName": f"/aws-glue/jobs/cdc/{kind}", "KmsKeyId": Match.any_value()}
        )
    jobs = template.find_resources("AWS::Glue::Job")
    assert sorted(jobs) == ["Job0", "Job1", "Job2"]  # the flat stack's logical IDs (the jobs are named)
    for job in jobs.values():
        assert job["Properties"]["DefaultArguments"]["--custom-logGroup-prefix"] == "/aws-glue/jobs/cdc"
        assert len(job["DependsOn"]) == 3  # a first run finds the groups and its wheels in place
    template.has_resource_properties("AWS::Glue::SecurityConfiguration", {"Name": "cdc-jobs"})


def test_planner_alone_is_triggered_by_commits_and_the_sweep_and_logs_with_a_retention(tmp_path: Path) -> None:
    parts = Parts(tmp_path, config_dict({"log_retention_days": 14}))
    state = State(parts.stack, "State", aws=parts.config.aws)
    role = job_role(parts)
    search = Search(parts.stack, "Search", config=parts.config, bundles=parts.bundles, writer=role)
    jobs = Jobs(parts.stack, "Jobs", config=parts.config, bundles=parts.bundles, state=state, role=role)
    Planner(parts.stack, "Planner", config=parts.config, bundles=parts.bundles, state=state, jobs=jobs, search=search)
    template = parts.template()
    (planner,) = template.find_resources("AWS::Lambda::Function", {"Properties": {"Handler": "handler.handler"}}).values()
    logs = template.to_json()["Resources"][planner["Properties"]["LoggingConfig"]["LogGroup"]["Ref"]]
    assert logs["Properties"]["RetentionInDays"] == 14
    template.has_resource_properties("AWS::Events::Rule", {"ScheduleExpression": "rate(5 minutes)"})
    template.has_resource_properties(
        "AWS::Events::Rule", {"EventPattern": Match.object_like({"detail-type": ["Glue Data Catalog Table State Change"]})}
    )


def test_search_alone_grants_an_existing_domain_or_creates_one(tmp_path: Path) -> None:
    (tmp_path / "existing").mkdir()
    existing = Parts(tmp_path / "existing", config_dict({"opensearch_domain_arn": "arn:aws:es:us-east-1:123456789012:domain/d"}))
    search = Search(existing.stack, "Search", config=existing.config, bundles=existing.bundles, writer=job_role(existing))
    assert search.url is None
    existing.template().resource_count_is("AWS::OpenSearchService::Domain", 0)

    (tmp_path / "created").mkdir()
    created = Parts(tmp_path / "created", config_dict({"create_domain": True, "domain_admin_arn": ADMIN}))
    search = Search(created.stack, "Search", config=created.config, bundles=created.bundles, writer=job_role(created))
    assert search.url is not None
    template = created.template()
    template.resource_count_is("AWS::OpenSearchService::Domain", 1)
    assert "Domain66AC69E0" in template.to_json()["Resources"]


def test_a_collection_alone_grants_an_existing_one_or_creates_one(tmp_path: Path) -> None:
    (tmp_path / "existing").mkdir()
    existing = Parts(
        tmp_path / "existing", config_dict({"opensearch_collection_arn": COLLECTION_ARN, "collection_name": "search"})
    )
    state = State(existing.stack, "State", aws=existing.config.aws)
    collection = Collection(
        existing.stack, "Collection", config=existing.config, writer=job_role(existing), data_key=state.data_key
    )
    assert collection.url is None and collection.arn == COLLECTION_ARN
    template = existing.template()
    template.resource_count_is("AWS::OpenSearchServerless::Collection", 0)
    template.resource_count_is("AWS::OpenSearchServerless::AccessPolicy", 1)

    (tmp_path / "created").mkdir()
    created = Parts(tmp_path / "created", config_dict({"create_collection": True, "collection_admin_arn": ADMIN}))
    state = State(created.stack, "State", aws=created.config.aws)
    collection = Collection(created.stack, "Collection", config=created.config, writer=job_role(created), data_key=state.data_key)
    assert collection.url is not None
    template = created.template()
    template.resource_count_is("AWS::OpenSearchServerless::Collection", 1)
    template.resource_count_is("AWS::OpenSearchServerless::SecurityPolicy", 2)
    template.resource_count_is("AWS::OpenSearchServerless::AccessPolicy", 2)


def operations(parts: Parts) -> Any:
    """The template of the operations construct and what it watches: the jobs and the planner."""
    state = State(parts.stack, "State", aws=parts.config.aws)
    role = job_role(parts)
    search = Search(parts.stack, "Search", config=parts.config, bundles=parts.bundles, writer=role)
    jobs = Jobs(parts.stack, "Jobs", config=parts.config, bundles=parts.bundles, state=state, role=role)
    planner = Planner(parts.stack, "Planner", config=parts.config, bundles=parts.bundles, state=state, jobs=jobs, search=search)
    Operations(parts.stack, "Operations", config=parts.config, jobs=jobs, planner=planner)
    return parts.template()


def test_operations_alone_alarm_per_table_and_on_the_planner(tmp_path: Path) -> None:
    template = operations(Parts(tmp_path, config_dict({"alarm_email": "ops@example.com"})))
    template.resource_count_is("AWS::CloudWatch::Alarm", 3 + 3 * len(TABLES))  # lag, dead letters, drift per table
    template.has_resource_properties("AWS::SNS::Topic", {"KmsMasterKeyId": Match.any_value()})
    resources = template.to_json()["Resources"]
    widgets = dashboard_widgets(resources["Dashboard9E4231ED"]["Properties"]["DashboardBody"])
    metrics = {tuple(p for p in m if isinstance(p, str)) for w in widgets.values() for m in w["properties"].get("metrics", [])}
    for metric in ("LagSeconds", "RowsApplied", "FilesRead", "DeadLetters", "Drift"):  # per table
        assert {(METRIC_NAMESPACE, metric, "Table", name) for name in TABLES} <= metrics, metric
    assert any(m[:2] == ("AWS/Events", "TriggeredRules") for m in metrics)  # the jobs' failed runs
    planner = {m[1] for m in widgets["Planner"]["properties"]["metrics"]}
    assert {"Errors", "PlanningErrors", "Invocations"} <= planner


def dashboard_widgets(body: Any) -> dict[str, Any]:
    """A dashboard's widgets by title, from its body as CloudFormation joins it (tokens as "?")."""
    parts = body["Fn::Join"][1] if isinstance(body, dict) else [body]
    text = "".join(p if isinstance(p, str) else "?" for p in parts)
    return {w["properties"]["title"]: w for w in json.loads(text)["widgets"]}


def test_a_shaped_index_gets_no_scheduled_audit_which_would_fail_every_day(tmp_path: Path) -> None:
    """The audit compares whole rows and refuses a shaped index (or several of a table): such a
    table gets no audit trigger and no Drift alarm; the others keep theirs."""
    tables = [
        {"name": "shop.orders"},
        {"name": "shop.customers", "columns": ["id", "name"]},
        {"name": "crm.accounts", "indexes": [{"index": "accounts"}, {"index": "accounts_copy"}]},
    ]
    template = operations(Parts(tmp_path, config_dict({}, tables=tables)))
    (trigger,) = template.find_resources("AWS::Glue::Trigger").values()
    (job,) = [j for j, r in template.find_resources("AWS::Glue::Job").items() if r["Properties"]["Name"] == "cdc-shop.orders"]
    assert trigger["Properties"]["Actions"][0]["JobName"] == {"Ref": job}
    (drift,) = template.find_resources("AWS::CloudWatch::Alarm", {"Properties": {"MetricName": "Drift"}}).values()
    assert drift["Properties"]["Dimensions"] == [{"Name": "Table", "Value": "shop.orders"}]


@pytest.mark.parametrize("variant", ["existing_endpoint", "created_domain"])
def test_every_suppression_names_the_findings_it_accepts_on_one_resource(variant: str, request: pytest.FixtureRequest) -> None:
    template, _ = request.getfixturevalue(variant)
    suppressed: list[tuple[str, dict[str, Any]]] = []
    for logical_id, resource in template.to_json()["Resources"].items():
        for rule in resource.get("Metadata", {}).get("cdk_nag", {}).get("rules_to_suppress", []):
            suppressed.append((logical_id, rule))
            assert rule["reason"], rule
            assert resource["Type"] != "AWS::IAM::Role", f"{logical_id}: a whole role's findings are suppressed"
            if rule["id"] in ("AwsSolutions-IAM4", "AwsSolutions-IAM5"):
                assert rule.get("applies_to"), f"{logical_id}: {rule['id']} suppressed for every resource"
                assert all(str(a).startswith(("Resource::", "Action::", "Policy::")) for a in rule["applies_to"])
    assert suppressed


def test_stateful_and_named_resources_keep_their_logical_ids(tmp_path: Path) -> None:
    template, _ = synth(tmp_path, {"create_domain": True, "domain_admin_arn": ADMIN})
    resources = template.to_json()["Resources"]
    assert {
        "State1C20CC9A": "AWS::DynamoDB::GlobalTable",
        "DataKey17AFBB84": "AWS::KMS::Key",
        "AlarmKeyE05DE300": "AWS::KMS::Key",
        "AccessLogs8B620ECA": "AWS::S3::Bucket",
        "DeadLettersBBF8BAAB": "AWS::S3::Bucket",
        "Domain66AC69E0": "AWS::OpenSearchService::Domain",
        "JobSecurity": "AWS::Glue::SecurityConfiguration",
        "Dashboard9E4231ED": "AWS::CloudWatch::Dashboard",
        "Job0": "AWS::Glue::Job",
    }.items() <= {k: v["Type"] for k, v in resources.items()}.items()


def test_log_retention_must_be_a_cloudwatch_period() -> None:
    with pytest.raises(ConfigError, match="log_retention_days must be one of"):
        parse_config(config_dict({"log_retention_days": 31}))


def test_network_alone_makes_the_jobs_security_group_and_glue_connection(tmp_path: Path) -> None:
    from infra.network import Network

    parts = Parts(tmp_path, config_dict({"vpc": VPC}))
    network = Network(parts.stack, "Network", aws=parts.config.aws)
    network.allow_glue(job_role(parts))
    template = parts.template()
    template.has_resource_properties(
        "AWS::Glue::Connection",
        {"ConnectionInput": Match.object_like({"Name": "cdc-vpc", "ConnectionType": "NETWORK"})},
    )
    (group,) = template.find_resources("AWS::EC2::SecurityGroup").values()
    egress = group["Properties"]["SecurityGroupEgress"]
    assert [(e.get("CidrIp"), e["FromPort"]) for e in egress] == [("0.0.0.0/0", 443)]  # HTTPS out; all TCP among workers below
    template.resource_count_is("AWS::EC2::SecurityGroupIngress", 1)
    template.resource_count_is("AWS::EC2::SecurityGroupEgress", 1)
