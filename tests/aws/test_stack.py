"""The CDK stack as CloudFormation: aws_cdk.assertions on the synthesized template, and cdk-nag's
AwsSolutions checks. Synthesized with placeholder bundles (no pip run; the template is the same
but for asset hashes)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from aws_cdk import App
from aws_cdk.assertions import Match, Template

from app import build
from icecdc.aws.contract import METRIC_NAMESPACE, PASS_RESERVE_SECONDS, job_name
from icecdc.aws.events import event_tables
from icecdc.config import parse_config
from infra.jobs import DYNAMODB_ACTIONS
from infra.planner import PLANNER_MEMORY_MB, PLANNER_MEMORY_MB_STARTING_JOBS
from infra.stack import check_deployable
from tests.support.cdk import ADMIN, ROOT, TABLES, VPC, config_dict, synth
from tests.support.planner import table_event


def test_table_change_rule_matches_update_table_of_the_configured_tables(existing_endpoint) -> None:
    template, _ = existing_endpoint
    template.has_resource_properties(
        "AWS::Events::Rule",
        {
            "EventPattern": {
                "source": ["aws.glue"],
                "detail-type": ["Glue Data Catalog Table State Change"],
                "detail": {
                    "databaseName": ["crm", "shop"],
                    "tableName": ["accounts", "customers", "orders"],
                    "typeOfChange": ["UpdateTable"],
                },
            },
            "Targets": [Match.object_like({"RetryPolicy": {"MaximumRetryAttempts": 2, "MaximumEventAgeInSeconds": 3600}})],
        },
    )
    template.has_resource_properties("AWS::Events::Rule", {"ScheduleExpression": "rate(7 minutes)"})


def test_one_glue_5_1_job_per_table_with_its_arguments(existing_endpoint) -> None:
    template, _ = existing_endpoint
    jobs = template.find_resources("AWS::Glue::Job")
    assert sorted(j["Properties"]["Name"] for j in jobs.values()) == sorted(job_name("cdc", t) for t in TABLES)
    for job in jobs.values():
        properties = job["Properties"]
        table = properties["DefaultArguments"]["--icecdc_table"]
        assert properties["Name"] == job_name("cdc", table)
        assert properties["GlueVersion"] == "5.1"
        assert properties["Command"]["Name"] == "glueetl"
        assert properties["ExecutionProperty"] == {"MaxConcurrentRuns": 1}
        arguments = properties["DefaultArguments"]
        assert arguments["--enable-auto-scaling"] == "true"
        # the locked wheels (pyiceberg[pyarrow], opensearch-py, ... pinned with hashes), no index
        (_, [scheme, _bucket, key]) = arguments["--additional-python-modules"]["Fn::Join"]
        assert scheme == "s3://" and key.startswith("/python/icecdc-deps-") and key.endswith(".gluewheels.zip")
        assert arguments["--python-modules-installer-option"] == "--no-index"
        # by Ref, so that CloudFormation creates the configuration first (a name alone orders nothing)
        assert properties["SecurityConfiguration"] == {"Ref": "JobSecurity"}
        for name in ("--extra-py-files", "--icecdc_config", "--icecdc_state_table", "--icecdc_region", "--icecdc_dead_letter"):
            assert name in arguments, name
        assert "--icecdc_opensearch_url" not in arguments  # the configured endpoint is used as it is


def test_state_table_is_on_demand_with_pitr_encryption_and_ttl(existing_endpoint) -> None:
    template, _ = existing_endpoint
    template.has_resource_properties(
        "AWS::DynamoDB::GlobalTable",
        {
            "TableName": "cdc-state",
            "BillingMode": "PAY_PER_REQUEST",
            "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
            "SSESpecification": {"SSEEnabled": True},
            "TimeToLiveSpecification": {"AttributeName": "expires_at", "Enabled": True},
            "Replicas": [Match.object_like({"PointInTimeRecoverySpecification": {"PointInTimeRecoveryEnabled": True}})],
        },
    )


def test_planner_is_wired_to_the_state_table_and_the_jobs(existing_endpoint) -> None:
    template, _ = existing_endpoint
    template.has_resource_properties(
        "AWS::Lambda::Function",
        {
            "Runtime": "python3.13",  # Amazon Linux 2023; the layer is locked and tested for it
            "Handler": "handler.handler",
            "Environment": {
                "Variables": Match.object_like(
                    {"ICECDC_CONFIG": "icecdc.yaml", "ICECDC_STACK_NAME": "cdc", "ICECDC_STATE_TABLE": Match.any_value()}
                )
            },
        },
    )


def statements(template: Template) -> list[dict[str, Any]]:
    found = []
    for policy in template.find_resources("AWS::IAM::Policy").values():
        found += policy["Properties"]["PolicyDocument"]["Statement"]
    return found


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


@pytest.mark.parametrize("variant", ["existing_endpoint", "created_domain"])
def test_iam_lists_actions_and_scopes_resources(variant: str, request: pytest.FixtureRequest) -> None:
    template, _ = request.getfixturevalue(variant)
    found = statements(template)
    assert found
    for statement in found:
        for action in as_list(statement["Action"]):
            assert "*" not in action, statement
        if "*" in as_list(statement["Resource"]):
            # only the API without resource-level permissions, and only for one namespace
            assert (
                statement["Action"] == "cloudwatch:PutMetricData"
                and "cloudwatch:namespace" in statement["Condition"]["StringEquals"]
            )
    text = str(found)
    # Glue: the configured tables, read only; the planner may start exactly the stack's jobs
    assert "table/shop/orders" in text and "table/crm/accounts" in text and "glue:UpdateTable" not in text
    start = [s for s in found if s["Action"] == "glue:StartJobRun"]
    assert len(start) == 1 and len(start[0]["Resource"]) == len(TABLES)
    # S3: objects of the warehouse bucket (and listing it: a gone key is a 404), no writes there
    assert ":s3:::lake-bucket/*" in text
    writes = [s for s in found if "s3:PutObject" in as_list(s["Action"])]
    # the jobs and the planner write dead letters only; the publisher of the jobs'
    # wheels writes exactly one key of the stack's artifacts bucket, none of the warehouse
    publisher = [s for s in writes if "python/icecdc-deps-" in str(s["Resource"])]
    assert len(publisher) == 1 and str(publisher[0]["Resource"]).endswith(".gluewheels.zip']]}")
    writes = [s for s in writes if s not in publisher]
    assert len(writes) == 2 and all("dead-letter/*" in str(w["Resource"]) for w in writes)  # the job's, the planner's


@pytest.mark.parametrize("variant", ["existing_endpoint", "created_domain"])
def test_a_domain_is_written_with_sigv4_rights_on_the_configured_indexes_only(
    variant: str, request: pytest.FixtureRequest
) -> None:
    """Reads anywhere on the domain; PUT, POST and DELETE on the configured indexes' paths and the
    few cluster APIs icecdc calls, never on every path of the domain (existing or created)."""
    template, _ = request.getfixturevalue(variant)
    es = [s for s in statements(template) if any(a.startswith("es:") for a in as_list(s["Action"]))]
    for statement in es:
        actions = set(as_list(statement["Action"]))
        for resource in as_list(statement["Resource"]):
            path = json.dumps(resource).rsplit("domain", 1)[-1]
            if path.endswith('/*"') and path.count("/") <= 2:  # every path of the domain
                assert actions <= {"es:ESHttpGet", "es:ESHttpHead"}, statement
            provisioner = "_plugins/_security" in path
            if actions & {"es:ESHttpPut", "es:ESHttpDelete"} and "_search/scroll" not in path and not provisioner:
                assert any(f"/{index}" in path for index in ("orders", "customers", "accounts")), statement
    if variant == "existing_endpoint":
        template.resource_count_is("AWS::OpenSearchService::Domain", 0)
        assert all("domain/search/" in json.dumps(s["Resource"]) for s in es)


def test_alarms_publish_only_for_the_rule_and_the_planner_logs_are_encrypted(existing_endpoint) -> None:
    """EventBridge publishes to the alarm topic for its rule of this account only; the planner's
    log group (its systemic-failure errors quote sample documents) is under the data key."""
    template, _ = existing_endpoint
    [policy] = template.find_resources("AWS::SNS::TopicPolicy").values()
    [publish] = [
        s
        for s in policy["Properties"]["PolicyDocument"]["Statement"]
        if s.get("Principal") == {"Service": "events.amazonaws.com"}
    ]
    assert set(publish["Condition"]) == {"ArnEquals", "StringEquals"}
    assert "aws:SourceArn" in publish["Condition"]["ArnEquals"]
    assert publish["Condition"]["StringEquals"] == {"aws:SourceAccount": "123456789012"}
    groups = template.find_resources("AWS::Logs::LogGroup")
    [planner] = [g for i, g in groups.items() if i.startswith("PlannerLogs")]
    assert planner["Properties"]["KmsKeyId"] == {"Fn::GetAtt": ["DataKey17AFBB84", "Arn"]}
    assert planner["Properties"]["LogGroupName"] == "/icecdc/cdc/planner"


def test_created_domain_is_encrypted_https_fine_grained_and_given_to_the_job(created_domain) -> None:
    template, _ = created_domain
    template.has_resource_properties(
        "AWS::OpenSearchService::Domain",
        {
            "DomainEndpointOptions": Match.object_like({"EnforceHTTPS": True}),
            "NodeToNodeEncryptionOptions": {"Enabled": True},
            "EncryptionAtRestOptions": {"Enabled": True},
            "AdvancedSecurityOptions": Match.object_like(
                {"Enabled": True, "InternalUserDatabaseEnabled": False, "MasterUserOptions": {"MasterUserARN": Match.any_value()}}
            ),
        },
    )
    for job in template.find_resources("AWS::Glue::Job").values():
        assert "--icecdc_opensearch_url" in job["Properties"]["DefaultArguments"]


def test_operations_alarms_dead_letters_and_dashboard(existing_endpoint) -> None:
    template, _ = existing_endpoint
    template.has_resource_properties(
        "AWS::Events::Rule",
        {
            "EventPattern": Match.object_like(
                {"detail-type": ["Glue Job State Change"], "detail": Match.object_like({"state": ["FAILED", "TIMEOUT", "ERROR"]})}
            )
        },
    )
    template.has_resource_properties("AWS::CloudWatch::Alarm", {"MetricName": "Errors", "Namespace": "AWS/Lambda"})
    template.resource_properties_count_is("AWS::CloudWatch::Alarm", {"MetricName": "LagSeconds"}, len(TABLES))
    template.resource_count_is("AWS::CloudWatch::Dashboard", 1)
    template.has_resource_properties("AWS::SNS::Subscription", {"Protocol": "email", "Endpoint": "ops@example.com"})


def test_dead_letters_alarm_per_table_and_the_job_may_publish_them(existing_endpoint) -> None:
    template, _ = existing_endpoint
    (topic,) = template.find_resources("AWS::SNS::Topic")
    for name in TABLES:
        template.has_resource_properties(
            "AWS::CloudWatch::Alarm",
            {
                "Namespace": METRIC_NAMESPACE,
                "MetricName": "DeadLetters",
                "Dimensions": [{"Name": "Table", "Value": name}],
                "Statistic": "Sum",
                "Threshold": 0,
                "ComparisonOperator": "GreaterThanThreshold",
                "AlarmActions": [{"Ref": topic}],
            },
        )
    template.resource_properties_count_is("AWS::CloudWatch::Alarm", {"MetricName": "DeadLetters"}, len(TABLES))
    (job_role,) = template.find_resources("AWS::IAM::Role", {"Properties": {"Description": "icecdc Glue job"}})
    job_policies = template.find_resources("AWS::IAM::Policy", {"Properties": {"Roles": [{"Ref": job_role}]}})
    job_statements = [s for policy in job_policies.values() for s in policy["Properties"]["PolicyDocument"]["Statement"]]
    assert {
        "Action": "cloudwatch:PutMetricData",
        "Effect": "Allow",
        "Resource": "*",
        "Condition": {"StringEquals": {"cloudwatch:namespace": METRIC_NAMESPACE}},
    } in job_statements


@pytest.mark.parametrize("variant", ["existing_endpoint", "created_domain"])
def test_cdk_nag_aws_solutions_passes(variant: str, request: pytest.FixtureRequest) -> None:
    _, annotations = request.getfixturevalue(variant)
    errors = annotations.find_error("*", Match.string_like_regexp("AwsSolutions-.*"))
    warnings = annotations.find_warning("*", Match.string_like_regexp("AwsSolutions-.*"))
    assert [e.entry.data for e in errors] == []
    assert [w.entry.data for w in warnings] == []


def test_the_stack_refuses_a_catalog_other_than_glue(tmp_path: Path) -> None:
    config = {
        "catalog": {"name": "lake", "type": "sql", "uri": "sqlite:///x.db"},
        "state": {"type": "sqlite", "path": "/tmp/x.db"},
        "opensearch": {"url": "http://127.0.0.1:9200"},
        "tables": [{"name": "db.t"}],
        "aws": {"warehouse_buckets": ["b"]},
    }
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    with pytest.raises(SystemExit, match="catalog.type must be 'glue' or 'rest', not 'sql'"):
        build(App(context={"icecdc:config": str(path), "icecdc:placeholderBundles": "true"}, outdir=str(tmp_path / "out")))


def test_protected_tables_may_commit_tags_to_their_own_metadata_only(tmp_path: Path) -> None:
    tables = [{"name": "shop.orders", "protect_checkpoint": True}, {"name": "crm.accounts"}]
    template, annotations = synth(tmp_path, {}, tables=tables)
    found = statements(template)
    updates = [s for s in found if s["Action"] == "glue:UpdateTable"]
    assert len(updates) == 2  # the job's role and the planner's
    assert all("table/shop/orders" in str(s["Resource"]) and "crm/accounts" not in str(s["Resource"]) for s in updates)
    metadata = [s for s in found if "s3:PutObject" in as_list(s["Action"]) and "metadata" in str(s["Resource"])]
    assert len(metadata) == 2 and all(":s3:::lake-bucket/*/metadata/*" in str(s["Resource"]) for s in metadata)
    assert annotations.find_error("*", Match.string_like_regexp("AwsSolutions-.*")) == []


def planner_of(template: Template) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The planner function and the statements of its role's policies."""
    (planner,) = template.find_resources("AWS::Lambda::Function", {"Properties": {"Handler": "handler.handler"}}).values()
    role = planner["Properties"]["Role"]["Fn::GetAtt"][0]
    policies = [p for p in template.find_resources("AWS::IAM::Policy").values() if {"Ref": role} in p["Properties"]["Roles"]]
    return planner, [st for p in policies for st in p["Properties"]["PolicyDocument"]["Statement"]]


def actions(found: list[dict[str, Any]], prefix: str) -> set[str]:
    return {a for st in found for a in as_list(st["Action"]) if a.startswith(prefix)}


def test_the_planner_applies_small_batches_with_the_jobs_rights_memory_and_time(existing_endpoint) -> None:
    template, _ = existing_endpoint
    planner, found = planner_of(template)
    properties = planner["Properties"]
    (layer,) = template.find_resources("AWS::Lambda::LayerVersion").values()
    assert layer["Properties"]["CompatibleRuntimes"] == ["python3.13"]
    # a whole core and ~3x the largest default pass's memory; a pass starts only with PASS_RESERVE_SECONDS left
    assert (properties["MemorySize"], properties["Timeout"]) == (PLANNER_MEMORY_MB, 300) and PLANNER_MEMORY_MB >= 1769
    assert properties["Timeout"] >= 2 * PASS_RESERVE_SECONDS
    assert actions(found, "dynamodb:") == set(DYNAMODB_ACTIONS)  # it plans and checkpoints, as the job does
    assert actions(found, "es:") == {"es:ESHttpGet", "es:ESHttpHead", "es:ESHttpPut", "es:ESHttpPost", "es:ESHttpDelete"}
    # dead letters are SSE-KMS under the data key: written, and read back (a pass reads open letters)
    assert actions(found, "kms:") == {"kms:Decrypt", "kms:GenerateDataKey"}
    variables = properties["Environment"]["Variables"]
    assert "ICECDC_DEAD_LETTER" in variables and "ICECDC_OPENSEARCH_URL" not in variables  # the configured endpoint
    assert "VpcConfig" not in properties


def test_a_planner_that_does_not_apply_only_reads_state_and_starts_jobs(tmp_path: Path) -> None:
    template, annotations = synth(
        tmp_path, {"planner_applies": False, "vpc": VPC, "create_domain": True, "domain_admin_arn": ADMIN}
    )
    planner, found = planner_of(template)
    assert planner["Properties"]["MemorySize"] == PLANNER_MEMORY_MB_STARTING_JOBS
    assert actions(found, "dynamodb:") == {"dynamodb:GetItem", "dynamodb:Query"}
    assert actions(found, "es:") == actions(found, "kms:") == actions(found, "s3:PutObject") == set()
    assert "VpcConfig" not in planner["Properties"]  # it reaches only AWS's endpoints
    assert set(planner["Properties"]["Environment"]["Variables"]) == {
        "ICECDC_CONFIG", "ICECDC_STATE_TABLE", "ICECDC_STACK_NAME", "ICECDC_CATALOG_PROPERTIES",
    }  # fmt: skip
    (access,) = template.find_resources("Custom::IcecdcDomainAccess").values()
    assert len(access["Properties"]["Writers"]) == 1  # the jobs' role alone
    assert annotations.find_error("*", Match.string_like_regexp("AwsSolutions-.*")) == []


def test_a_planner_that_applies_writes_to_a_created_domain_in_the_vpc_through_its_own_group(tmp_path: Path) -> None:
    template, annotations = synth(tmp_path, {"vpc": VPC, "create_domain": True, "domain_admin_arn": ADMIN})
    planner, found = planner_of(template)
    properties = planner["Properties"]
    assert "ICECDC_OPENSEARCH_URL" in properties["Environment"]["Variables"]  # the created domain's endpoint
    assert sorted(properties["VpcConfig"]["SubnetIds"]) == sorted(s["id"] for s in VPC["subnets"])
    ((group,),) = [properties["VpcConfig"]["SecurityGroupIds"]]
    group_id = group["Fn::GetAtt"][0]
    template.has_resource_properties(
        "AWS::EC2::SecurityGroup",
        {
            "GroupDescription": "icecdc planner Lambda",
            "SecurityGroupEgress": [Match.object_like({"FromPort": 443, "ToPort": 443})],
        },
    )
    # the domain admits HTTPS from the planner's group, as from the jobs' and the provisioning Lambda's
    template.has_resource_properties(
        "AWS::EC2::SecurityGroupIngress",
        {"FromPort": 443, "ToPort": 443, "SourceSecurityGroupId": {"Fn::GetAtt": [group_id, "GroupId"]}},
    )
    assert "ec2:CreateNetworkInterface" in actions(found, "ec2:")
    # the planner's role is mapped to the writer role with the jobs', before the planner may run
    (access_id, access), *_ = template.find_resources("Custom::IcecdcDomainAccess").items()
    writers = access["Properties"]["Writers"]
    assert len(writers) == 2 and {"Fn::GetAtt": [planner["Properties"]["Role"]["Fn::GetAtt"][0], "Arn"]} in writers
    assert access_id in planner["DependsOn"]
    assert annotations.find_error("*", Match.string_like_regexp("AwsSolutions-.*")) == []


def test_the_domain_access_handler_maps_every_writer_to_the_writer_role() -> None:
    from tests.support.custom_resources import PROPERTIES, FakeSecurityApi, access

    api = FakeSecurityApi()
    planner = "arn:aws:iam::123456789012:role/cdc-PlannerRole"
    access["apply"](api, {**PROPERTIES, "Writers": [PROPERTIES["Writer"], planner]})
    assert api.docs["rolesmapping/cdc-writer"] == {"cdc-writer": {"backend_roles": [PROPERTIES["Writer"], planner]}}


@pytest.mark.parametrize(
    ("engine", "refusal"),
    [
        ({"use": "in_process"}, "engine.use: in_process with aws.planner_applies"),
        ({"in_process_max_rows": 2_000_000}, "may take 222 s in the planner Lambda"),
    ],
)
def test_the_stack_refuses_engine_settings_the_planner_could_not_finish(
    tmp_path: Path, engine: dict[str, Any], refusal: str
) -> None:
    raw = config_dict({})
    raw["engine"] = engine
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(raw))
    with pytest.raises(SystemExit, match=refusal):
        build(App(context={"icecdc:config": str(path), "icecdc:placeholderBundles": "true"}, outdir=str(tmp_path / "out")))
    raw["aws"]["planner_applies"] = False  # the planner starts jobs only: any engine setting is the job's
    path.write_text(yaml.safe_dump(raw))
    build(App(context={"icecdc:config": str(path), "icecdc:placeholderBundles": "true"}, outdir=str(tmp_path / "out2")))


def test_dead_letters_and_job_output_are_under_a_rotated_customer_key_and_expire(existing_endpoint) -> None:
    template, _ = existing_endpoint
    keys = template.find_resources("AWS::KMS::Key", {"Properties": {"Description": "icecdc dead letters and Glue output"}})
    ((key_id, key),) = keys.items()
    assert key["Properties"]["EnableKeyRotation"] is True
    buckets = [
        b["Properties"]
        for b in template.find_resources("AWS::S3::Bucket").values()
        if "dead-letters/" in str(b["Properties"].get("LoggingConfiguration"))
    ]
    (bucket,) = buckets
    (encryption,) = bucket["BucketEncryption"]["ServerSideEncryptionConfiguration"]
    assert encryption["ServerSideEncryptionByDefault"]["SSEAlgorithm"] == "aws:kms"
    assert key_id in str(encryption["ServerSideEncryptionByDefault"]["KMSMasterKeyID"])
    assert bucket["LifecycleConfiguration"]["Rules"][0]["ExpirationInDays"] == 90
    ((security_id, security),) = template.find_resources("AWS::Glue::SecurityConfiguration").items()
    encryption_config = security["Properties"]["EncryptionConfiguration"]
    assert encryption_config["S3Encryptions"][0]["S3EncryptionMode"] == "SSE-KMS"
    assert encryption_config["CloudWatchEncryption"]["CloudWatchEncryptionMode"] == "SSE-KMS"
    assert encryption_config["JobBookmarksEncryption"]["JobBookmarksEncryptionMode"] == "CSE-KMS"
    jobs = template.find_resources("AWS::Glue::Job").values()
    assert all(job["Properties"]["SecurityConfiguration"] == {"Ref": security_id} for job in jobs)


def test_basic_auth_reads_one_secret_and_a_password_never_reaches_an_asset(tmp_path: Path) -> None:
    arn = "arn:aws:secretsmanager:us-east-1:123456789012:secret:icecdc-search-AbCdEf"
    opensearch = {"url": "https://search.example.com", "username": "icecdc", "password_secret_arn": arn}
    (tmp_path / "secret").mkdir()
    (tmp_path / "plain").mkdir()
    template, _ = synth(tmp_path / "secret", {}, opensearch=opensearch)
    reads = [s for s in statements(template) if "secretsmanager:GetSecretValue" in as_list(s["Action"])]
    assert len(reads) == 2 and all(r["Resource"] == arn for r in reads)  # the job's role and the planner's
    with pytest.raises(SystemExit, match="opensearch.password would be uploaded"):
        synth(tmp_path / "plain", {}, opensearch={"url": "https://search.example.com", "username": "u", "password": "p"})


def test_planner_invocations_that_fail_after_retries_are_kept_and_alarmed(existing_endpoint) -> None:
    template, _ = existing_endpoint
    (config,) = template.find_resources("AWS::Lambda::EventInvokeConfig").values()
    assert config["Properties"]["MaximumRetryAttempts"] == 2
    destination = config["Properties"]["DestinationConfig"]["OnFailure"]["Destination"]
    # the failure queue (the other queue is the planner's buffer, which redrives to it: see test_planner_buffers_events)
    (queue_id,) = [q for q, r in template.find_resources("AWS::SQS::Queue").items() if "RedrivePolicy" not in r["Properties"]]
    assert queue_id in str(destination)
    alarms = template.find_resources(
        "AWS::CloudWatch::Alarm", {"Properties": {"MetricName": "ApproximateNumberOfMessagesVisible"}}
    )
    assert len(alarms) == 1


def test_planner_buffers_events_and_coalesces_them_in_batches(tmp_path: Path) -> None:
    template, annotations = synth(tmp_path, {"planner_batch_window_seconds": 30})
    queues = template.find_resources("AWS::SQS::Queue")
    ((buffer_id, buffer),) = [(q, r) for q, r in queues.items() if "RedrivePolicy" in r["Properties"]]
    ((failures_id, _),) = [(q, r) for q, r in queues.items() if q != buffer_id]
    assert buffer["Properties"]["RedrivePolicy"] == {
        "deadLetterTargetArn": {"Fn::GetAtt": [failures_id, "Arn"]},
        "maxReceiveCount": 5,
    }
    assert buffer["Properties"]["SqsManagedSseEnabled"] is True  # EventBridge can send to it
    assert buffer["Properties"]["VisibilityTimeout"] >= 6 * 300 + 30
    # both rules send to the buffer, none invokes the planner directly
    for rule in template.find_resources("AWS::Events::Rule", {"Properties": {"State": "ENABLED"}}).values():
        if "Glue Job State Change" in str(rule["Properties"].get("EventPattern")):
            continue
        (target,) = rule["Properties"]["Targets"]
        assert target["Arn"] == {"Fn::GetAtt": [buffer_id, "Arn"]}
    template.has_resource_properties(
        "AWS::Lambda::EventSourceMapping",
        {
            "EventSourceArn": {"Fn::GetAtt": [buffer_id, "Arn"]},
            "BatchSize": 1000,
            "MaximumBatchingWindowInSeconds": 30,
            "FunctionResponseTypes": ["ReportBatchItemFailures"],
            "ScalingConfig": {"MaximumConcurrency": 2},
        },
    )
    template.has_resource_properties("AWS::CloudWatch::Alarm", {"Namespace": METRIC_NAMESPACE, "MetricName": "PlanningErrors"})
    assert annotations.find_error("*", Match.string_like_regexp("AwsSolutions-.*")) == []


def test_the_planner_reserves_concurrency_only_when_configured(existing_endpoint, tmp_path: Path) -> None:
    """Reserving fails in accounts whose concurrency quota is low (Lambda keeps 100 unreserved): by
    default the queue's event source alone bounds the planner."""
    template, _ = existing_endpoint
    planner, _ = planner_of(template)
    assert "ReservedConcurrentExecutions" not in planner["Properties"]
    (source,) = template.find_resources("AWS::Lambda::EventSourceMapping").values()
    assert source["Properties"]["ScalingConfig"] == {"MaximumConcurrency": 2}
    template, _ = synth(tmp_path, {"planner_reserved_concurrency": 3})
    planner, _ = planner_of(template)
    assert planner["Properties"]["ReservedConcurrentExecutions"] == 3


def test_mixed_case_table_names_are_matched_as_glue_stores_them(tmp_path: Path) -> None:
    """Glue stores database and table names in lower case, and its events name them so: the rule,
    the catalog ARNs and the planner's lookup use those names."""
    tables = [{"name": "Sales.Orders", "index": "orders", "protect_checkpoint": True}]
    template, _ = synth(tmp_path, {}, tables=tables)
    template.has_resource_properties(
        "AWS::Events::Rule",
        {"EventPattern": Match.object_like({"detail": Match.object_like({"databaseName": ["sales"], "tableName": ["orders"]})})},
    )
    arns = json.dumps(template.find_resources("AWS::IAM::Policy"))
    assert ":table/sales/orders" in arns and ":database/sales" in arns and "/Sales" not in arns  # the job keeps its name
    config = parse_config(config_dict(tables=tables))
    assert event_tables(table_event("sales", "orders"), config).tables == ("Sales.Orders",)  # the configured name: its job
    with pytest.raises(SystemExit, match="name one Glue table"):
        check_deployable(parse_config(config_dict(tables=[*tables, {"name": "sales.ORDERS", "index": "orders2"}])))


WAREHOUSE_KEY = "arn:aws:kms:us-east-1:123456789012:key/11111111-2222-3333-4444-555555555555"
SECRET_KEY = "arn:aws:kms:us-east-1:123456789012:key/66666666-7777-8888-9999-000000000000"


def test_customer_managed_keys_of_the_inputs_are_granted_decrypt_where_they_are_read(tmp_path: Path) -> None:
    """SSE-KMS warehouse buckets and a secret under a customer-managed key need kms:Decrypt of
    whoever reads them (the jobs, the planner), through that service only."""
    arn = "arn:aws:secretsmanager:us-east-1:123456789012:secret:icecdc-search-AbCdEf"
    opensearch = {"url": "https://search.example.com", "username": "icecdc", "password_secret_arn": arn}
    (tmp_path / "keys").mkdir()
    (tmp_path / "none").mkdir()
    aws = {"warehouse_kms_key_arns": [WAREHOUSE_KEY], "password_secret_kms_key_arn": SECRET_KEY}
    template, annotations = synth(tmp_path / "keys", aws, opensearch=opensearch)
    decrypts = [s for s in statements(template) if "kms:Decrypt" in as_list(s["Action"])]
    for key, service in ((WAREHOUSE_KEY, "s3"), (SECRET_KEY, "secretsmanager")):
        granted = [s for s in decrypts if s["Resource"] == key]
        assert len(granted) == 2, granted  # the jobs' role and the planner's
        assert all(s["Condition"] == {"StringEquals": {"kms:ViaService": f"{service}.us-east-1.amazonaws.com"}} for s in granted)
    assert annotations.find_error("*", Match.string_like_regexp("AwsSolutions-.*")) == []
    template, _ = synth(tmp_path / "none", {}, opensearch=opensearch)
    assert not [s for s in statements(template) if s["Resource"] in (WAREHOUSE_KEY, SECRET_KEY)]


def test_each_tables_job_audits_its_index_on_a_schedule_and_drift_is_alarmed(existing_endpoint, tmp_path: Path) -> None:
    """A Glue scheduled trigger per table starts its job in audit mode (daily by default); the
    job publishes Drift, alarmed on per table; `audit_schedule: null` turns it off."""
    template, _ = existing_endpoint
    triggers = template.find_resources("AWS::Glue::Trigger")
    assert len(triggers) == len(TABLES)
    for trigger in triggers.values():
        properties = trigger["Properties"]
        assert (properties["Type"], properties["Schedule"], properties["StartOnCreation"]) == (
            "SCHEDULED",
            "cron(0 3 * * ? *)",
            True,
        )
        (action,) = properties["Actions"]
        assert action["Arguments"] == {"--icecdc_mode": "audit"} and "Ref" in action["JobName"]
    template.resource_properties_count_is("AWS::CloudWatch::Alarm", {"MetricName": "Drift"}, len(TABLES))
    (tmp_path / "repairs").mkdir()
    (tmp_path / "off").mkdir()
    repairing, _ = synth(tmp_path / "repairs", {"audit_repairs": True, "audit_schedule": "cron(0 4 ? * SUN *)"})
    for trigger in repairing.find_resources("AWS::Glue::Trigger").values():
        assert trigger["Properties"]["Schedule"] == "cron(0 4 ? * SUN *)"
        assert trigger["Properties"]["Actions"][0]["Arguments"] == {"--icecdc_mode": "audit-and-repair"}
    off, _ = synth(tmp_path / "off", {"audit_schedule": None})
    off.resource_count_is("AWS::Glue::Trigger", 0)
    off.resource_properties_count_is("AWS::CloudWatch::Alarm", {"MetricName": "Drift"}, 0)


def test_synth_of_a_bad_config_is_one_line_and_exit_2(tmp_path: Path) -> None:
    """Reproduced: `make synth` with `aws.glue_max_worker` (a typo) showed a 15-line traceback. The
    Makefile's command, `python app.py`, run as make runs it."""
    raw = config_dict({"glue_max_worker": 3})
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(raw))
    context = {"icecdc:config": str(path), "icecdc:placeholderBundles": "true"}
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "CDK_OUTDIR": str(tmp_path / "cdk.out")}
    run = subprocess.run(
        [sys.executable, "app.py"],
        cwd=ROOT,
        env={**env, "CDK_CONTEXT_JSON": json.dumps(context)},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert run.returncode == 2 and "Traceback" not in run.stderr, run.stderr
    lines = [line for line in run.stderr.splitlines() if not line.startswith("b'!!")]  # jsii's node banner
    assert lines == ["icecdc synth: unknown key aws.glue_max_worker"], run.stderr
    assert not list((tmp_path / "cdk.out").glob("*"))  # no template, no manifest
