"""`icecdc doctor` against moto (the account: Glue Data Catalog with real pyiceberg tables,
S3, CloudFormation, SSM, IAM, DynamoDB, Glue jobs, Lambda, EventBridge, SQS, CloudWatch Logs) and
osmem (the domain): a ready setup passes, and every check that can fail is shown failing with its fix.

Replaced where moto cannot answer (tests/support/doctor.py): which Glue versions a region offers
(no AWS API lists them), Lambda's account concurrency (moto has no GetAccountSettings). Where
moto cannot put a resource into the state a check looks for (a stack rolled back, a Glue run that
FAILED, a security plugin's role mappings), the check's logic is tested on the service's answer.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import boto3
import pytest
import requests

from icecdc.aws.contract import job_name
from icecdc.cli import main
from icecdc.config import parse_config
from icecdc.doctor import Check, Outcome, Phase, Sources, diagnose
from icecdc.doctor.after import LAG_ALARM_SECONDS, last_run
from icecdc.doctor.before import stack_state
from icecdc.doctor.context import Context
from icecdc.doctor.network import GATEWAY_SERVICES, INTERFACE_SERVICES
from icecdc.doctor.search import mapping_checks
from icecdc.doctor.sources import JobsOnVersion, UnsupportedPattern, match_locally
from icecdc.doctor.stack import (
    BOOTSTRAP_VERSION,
    GLUE_VERSION,
    OPENSEARCH_SERVICE,
    OPENSEARCH_SERVICE_LINKED_ROLE,
    DeployedStack,
    Logical,
    bootstrap_parameter,
    expected,
    logical_match,
    named_resources,
    state_table_name,
)
from icecdc.state.dynamodb import create_state_table
from icecdc.sync import sync
from tests.support.aws import REGION, Lake, aws_client, rows
from tests.support.cdk import ADMIN, config_dict
from tests.support.custom_resources import PROPERTIES, FakeSecurityApi, access
from tests.support.doctor import READY, Offered, Quota, deploy, doctor_config, logical_id, table_changed_pattern
from tests.support.faults import FaultProxy

ELSEWHERE = "eu-west-3"  # a region nothing bootstraps: moto's account is shared by the session


@pytest.fixture
def bootstrapped(moto_url: str) -> None:
    """`cdk bootstrap` in REGION: the CDKToolkit stack and its version parameter (what the template checks)."""
    cloudformation = aws_client("cloudformation", moto_url)
    if any(s["StackName"] == "CDKToolkit" for s in cloudformation.describe_stacks()["Stacks"]):
        return
    parameter = {
        "Type": "AWS::SSM::Parameter",
        "Properties": {"Name": bootstrap_parameter(), "Type": "String", "Value": "28"},
    }
    cloudformation.create_stack(StackName="CDKToolkit", TemplateBody=json.dumps({"Resources": {"Version": parameter}}))


def osmem(url: str) -> dict[str, Any]:
    return {"url": url}


def elsewhere(service: str, moto_url: str) -> Any:
    return boto3.client(service, region_name=ELSEWHERE, endpoint_url=moto_url)


# -- what the doctor knows of the stack is the synthesized template's -----------------------------


def test_what_the_doctor_looks_up_is_in_the_synthesized_template(
    existing_endpoint: tuple[Any, Any], created_domain: tuple[Any, Any]
) -> None:
    """Each fact icecdc.doctor.stack states about infra/ (it cannot import it), and the stand-in
    deployment of tests/support/doctor.py, checked against the template `cdk deploy` would deploy."""
    for (template, _), aws in ((existing_endpoint, {}), (created_domain, {"create_domain": True, "domain_admin_arn": ADMIN})):
        config = parse_config(config_dict(aws))
        document = template.to_json()
        resources = document["Resources"]
        for resource in expected(config):
            found = [logical for logical, r in resources.items() if logical_match(resource, logical, r["Type"])]
            assert len(found) == 1, (resource, found)
        [rule] = [r for logical, r in resources.items() if logical_match(Logical.TABLE_CHANGED, logical, r["Type"])]
        assert rule["Properties"]["EventPattern"] == table_changed_pattern(config)
        names = {n.name for n in named_resources(config)}
        given = {
            str(r["Properties"][key])
            for r in resources.values()
            for key in ("TableName", "Name", "LogGroupName", "DashboardName")
            if isinstance(r.get("Properties", {}).get(key), str)
        }
        assert names <= given, names - given
        # the dead-letter bucket and the others: CloudFormation names them, so none is in `names`
        assert not [r for r in resources.values() if r["Type"] == "AWS::S3::Bucket" and "BucketName" in r["Properties"]]
        assert {r["Properties"]["TableName"] for r in resources.values() if r["Type"] == "AWS::DynamoDB::GlobalTable"} == {
            state_table_name("cdc")
        }
        assert {r["Properties"]["GlueVersion"] for r in resources.values() if r["Type"] == "AWS::Glue::Job"} == {GLUE_VERSION}
        lag_alarms = [r["Properties"] for r in resources.values() if r["Type"] == "AWS::CloudWatch::Alarm"]
        assert {a["Threshold"] for a in lag_alarms if a.get("MetricName") == "LagSeconds"} == {LAG_ALARM_SECONDS}
        assert document["Parameters"]["BootstrapVersion"]["Default"] == bootstrap_parameter()
        [assertion] = document["Rules"]["CheckBootstrapVersion"]["Assertions"]
        assert f"version {BOOTSTRAP_VERSION} required" in assertion["AssertDescription"]


# -- before deploying ------------------------------------------------------------------------------


def test_before_a_ready_account_passes(lake: Lake, unique: str, bootstrapped: None, osmem_clone: Any) -> None:
    lake.create_table(f"{lake.database}.orders").append(rows(1, 2))
    domain = f"search-{unique}"
    aws_client("opensearch", lake.moto_url).create_domain(DomainName=domain, EngineVersion="OpenSearch_2.19")
    config = doctor_config(
        lake,
        f"doc-{unique}",
        [{"name": f"{lake.database}.orders"}],
        osmem(osmem_clone.url),
        opensearch_domain_arn=f"arn:aws:es:{REGION}:123456789012:domain/{domain}",
        planner_reserved_concurrency=2,
    )
    diagnosis = diagnose(config, Phase.BEFORE, READY)
    assert diagnosis.ok, [c.lines() for c in diagnosis.failures]
    assert diagnosis.named("cdk bootstrap").detail == "CDKToolkit CREATE_COMPLETE, bootstrap version 28"
    assert diagnosis.named("lambda concurrency").detail == "reserving 2 leaves 998 unreserved (at least 100)"
    assert diagnosis.named("opensearch domain").detail == f"domain {domain} runs OpenSearch_2.19"
    assert diagnosis.named("opensearch reachable").outcome == Outcome.PASSED
    table = f"{lake.database}.orders"
    for name in ("event names", "table exists", "format version", "warehouse location", "identifier columns"):
        assert diagnosis.named(name, table).outcome == Outcome.PASSED, diagnosis.named(name, table)
    assert diagnosis.named("identifier columns", table).detail == "id"
    assert diagnosis.named("service-linked role").outcome == Outcome.SKIPPED
    assert "CloudFormation names the buckets (dead letters" in diagnosis.named("names free").detail


def test_before_a_broken_setup_fails_each_check_with_its_fix(lake: Lake, unique: str, moto_url: str) -> None:
    """In a region nobody bootstrapped, with a retained state table, tables the stack cannot follow,
    an Elasticsearch domain, a bucket that is not the tables', and a quota too low to reserve from."""
    db = lake.database
    lake.create_table(f"{db}.orders").append(rows(1))
    lake.catalog().create_table(f"{db}.legacy", schema=lake.create_table(f"{db}.ok").schema(), properties={"format-version": "1"})
    stack = f"doc-{unique}"
    create_state_table(state_table_name(stack), region=ELSEWHERE, endpoint_url=moto_url)  # left by a deleted stack
    domain = f"legacy-{unique}"
    elsewhere("opensearch", moto_url).create_domain(DomainName=domain, EngineVersion="Elasticsearch_7.10")
    tables = [
        {"name": f"{db.capitalize()}.orders"},  # as someone types it; Glue keeps and announces it in lower case
        {"name": f"{db}.legacy"},
        {"name": f"{db.upper()}.LEGACY", "index": "legacy-twin"},  # the same Glue table again
        {"name": f"{db}.missing"},
        {"name": f"{db}.ok", "identifier_columns": ["order_id"]},
    ]
    config = doctor_config(
        lake,
        stack,
        tables,
        osmem("http://127.0.0.1:9"),
        region=ELSEWHERE,
        account="111111111111",
        warehouse_buckets=[f"elsewhere-{unique}"],
        opensearch_domain_arn=f"arn:aws:es:{ELSEWHERE}:111111111111:domain/{domain}",
        planner_reserved_concurrency=2,
    )
    diagnosis = diagnose(config, Phase.BEFORE, Sources(glue_versions=Offered(False), lambda_concurrency=Quota(10, 10)))

    def fails(name: str, subject: str | None = None) -> str:
        check = diagnosis.named(name, subject)
        assert check.outcome == Outcome.FAILED and check.fix is not None, check
        return "\n".join(check.lines())

    assert "is in account 123456789012, but aws.account is 111111111111" in fails("credentials")
    assert f"$ cdk bootstrap aws://111111111111/{ELSEWHERE}" in fails("cdk bootstrap")
    assert f"Glue {GLUE_VERSION} is not offered in {ELSEWHERE}" in fails("glue version")
    concurrency = fails("lambda concurrency")
    assert "leaves 8 of the account's 10 unreserved; Lambda keeps at least 10" in concurrency
    assert "fix: remove aws.planner_reserved_concurrency" in concurrency and "--quota-code L-B99A9384" in concurrency
    assert "fix: delete it (a retained state table" in fails("names free", state_table_name(stack))
    assert f"s3://elsewhere-{unique}: 404" in fails("warehouse bucket", f"elsewhere-{unique}")
    assert f"$ aws opensearch get-compatible-versions --domain-name {domain}" in fails("opensearch domain")
    assert diagnosis.named("event names", f"{db.capitalize()}.orders").detail == (
        f"Glue announces it as {db}.orders; the rule and the planner match that "
        f"(its job and checkpoint keep the name {db.capitalize()}.orders)"
    )
    assert diagnosis.named("table exists", f"{db.capitalize()}.orders").outcome == Outcome.PASSED
    twins = fails("event names", f"{db.upper()}.LEGACY")
    assert f"{db.upper()}.LEGACY and {db}.legacy name one Glue table, {db}.legacy" in twins and "fix: keep one entry" in twins
    assert f"fix: add {lake.bucket} to aws.warehouse_buckets" in fails("warehouse location", f"{db.capitalize()}.orders")
    assert f"$ ALTER TABLE {db}.legacy SET TBLPROPERTIES ('format-version'='2')" in fails("format version", f"{db}.legacy")
    assert f"$ aws glue get-table --database-name {db} --name missing" in fails("table exists", f"{db}.missing")
    assert "identifier column 'order_id' is not in the current schema" in fails("identifier columns", f"{db}.ok")
    assert "fix: correct tables[4].identifier_columns" in fails("identifier columns", f"{db}.ok")
    assert not diagnosis.ok


def test_a_stack_whose_creation_rolled_back_must_be_deleted_first() -> None:
    """moto never leaves a stack rolled back: the check's answer to CloudFormation's status."""
    rolled_back = DeployedStack("icecdc", "ROLLBACK_COMPLETE", "Job0 failed: Glue version 5.1 is not supported", {})
    check = stack_state(rolled_back, "icecdc", REGION)
    assert check.outcome == Outcome.FAILED
    assert check.lines() == [
        (
            "✗ stack state: stack icecdc is ROLLBACK_COMPLETE (Job0 failed: Glue version 5.1 is not supported): "
            "CloudFormation cannot update it"
        ),
        "    fix: delete it (its retained resources stay: see the names check), then deploy again",
        f"    $ aws cloudformation delete-stack --stack-name icecdc --region {REGION}",
    ]
    assert stack_state(DeployedStack("icecdc", "REVIEW_IN_PROGRESS", "", {}), "icecdc", REGION).outcome == Outcome.PASSED
    assert stack_state(DeployedStack("icecdc", "UPDATE_IN_PROGRESS", "", {}), "icecdc", REGION).outcome == Outcome.FAILED


def test_a_domain_created_in_a_vpc_needs_a_logs_policy_and_endpoints(lake: Lake, unique: str, moto_url: str) -> None:
    """Room for one more CloudWatch Logs resource policy, subnets that reach the services (one with
    no route and no endpoint, one behind a NAT gateway), and, when the stack creates the endpoints,
    none there already; OpenSearch's service-linked role is created by the stack when missing."""
    lake.create_table(f"{lake.database}.orders")
    ec2 = elsewhere("ec2", moto_url)
    vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
    isolated, natted = (
        ec2.create_subnet(VpcId=vpc, CidrBlock=f"10.0.{n}.0/24", AvailabilityZone=f"{ELSEWHERE}{zone}")["Subnet"]["SubnetId"]
        for n, zone in ((1, "a"), (2, "b"))
    )
    private = ec2.create_route_table(VpcId=vpc)["RouteTable"]["RouteTableId"]
    ec2.associate_route_table(RouteTableId=private, SubnetId=isolated)
    outbound = ec2.create_route_table(VpcId=vpc)["RouteTable"]["RouteTableId"]
    ec2.associate_route_table(RouteTableId=outbound, SubnetId=natted)
    nat = ec2.create_nat_gateway(SubnetId=natted, AllocationId=ec2.allocate_address(Domain="vpc")["AllocationId"])
    ec2.create_route(RouteTableId=outbound, DestinationCidrBlock="0.0.0.0/0", NatGatewayId=nat["NatGateway"]["NatGatewayId"])
    logs = elsewhere("logs", moto_url)
    policies = [f"taken-{unique}-{n}" for n in range(10)]
    for name in policies:
        logs.put_resource_policy(policyName=name, policyDocument=json.dumps({"Version": "2012-10-17", "Statement": []}))
    subnets = [{"id": isolated, "availability_zone": f"{ELSEWHERE}a"}, {"id": natted, "availability_zone": f"{ELSEWHERE}b"}]
    config = doctor_config(
        lake,
        f"doc-{unique}",
        [{"name": f"{lake.database}.orders"}],
        osmem("http://127.0.0.1:9"),
        region=ELSEWHERE,
        create_domain=True,
        domain_admin_arn=ADMIN,
        vpc={"vpc_id": vpc, "subnets": subnets},
    )
    try:
        diagnosis = diagnose(config, Phase.BEFORE, READY)
    finally:
        for name in policies:
            logs.delete_resource_policy(policyName=name)

    assert diagnosis.named("service-linked role").detail == (
        f"{OPENSEARCH_SERVICE_LINKED_ROLE} does not exist yet: the stack creates it before the domain (Search/LinkedRole)"
    )
    full = diagnosis.named("logs resource policies")
    assert full.outcome == Outcome.FAILED and full.fix is not None
    assert full.detail.startswith(f"{ELSEWHERE} has 10 CloudWatch Logs resource policies, the most a region may have")
    blind = diagnosis.named("vpc endpoints", isolated)
    assert blind.outcome == Outcome.FAILED and blind.fix is not None and blind.fix.text.startswith("let the stack create")
    assert "no endpoint for s3, dynamodb, glue, monitoring, logs, kms, sts:" in blind.detail
    assert diagnosis.named("vpc endpoints", natted).detail == f"routes to a NAT gateway ({outbound})"

    # the endpoints it lacked; then the stack must not create its own (create_endpoints: the same services)
    for service in GATEWAY_SERVICES:
        ec2.create_vpc_endpoint(
            VpcId=vpc, ServiceName=f"com.amazonaws.{ELSEWHERE}.{service}", VpcEndpointType="Gateway", RouteTableIds=[private]
        )
    for service in INTERFACE_SERVICES:
        ec2.create_vpc_endpoint(
            VpcId=vpc,
            ServiceName=f"com.amazonaws.{ELSEWHERE}.{service}",
            VpcEndpointType="Interface",
            SubnetIds=[isolated],
            PrivateDnsEnabled=True,
        )
    iam = aws_client("iam", moto_url)
    # moto's CreateServiceLinkedRole names it after the service principal, not as AWS does: made as AWS names it
    iam.create_role(
        RoleName=OPENSEARCH_SERVICE_LINKED_ROLE, Path=f"/aws-service-role/{OPENSEARCH_SERVICE}/", AssumeRolePolicyDocument="{}"
    )
    try:
        again = diagnose(config, Phase.BEFORE, READY)
    finally:
        iam.delete_role(RoleName=OPENSEARCH_SERVICE_LINKED_ROLE)
    assert again.named("service-linked role").detail == f"{OPENSEARCH_SERVICE_LINKED_ROLE} exists"
    assert again.named("logs resource policies").outcome == Outcome.PASSED
    assert again.named("vpc endpoints", isolated).detail == "gateway and interface endpoints for every service it calls"
    routed = [{**subnets[0], "route_table_id": private}, {**subnets[1], "route_table_id": outbound}]
    creating = config.revised(
        aws={**config.aws.as_mapping(), "vpc": {"vpc_id": vpc, "subnets": routed, "create_endpoints": True}}
    )
    collision = diagnose(creating, Phase.BEFORE, READY).named("vpc endpoints")
    assert collision.outcome == Outcome.FAILED and collision.fix is not None
    assert collision.detail.startswith(f"{vpc} has endpoints already for glue (private DNS), monitoring (private DNS)")
    assert f"s3 on {private}, dynamodb on {private}: the stack's own would collide" in collision.detail
    assert collision.fix.text.startswith("set aws.vpc.create_endpoints: false")


def test_customer_managed_keys_of_the_inputs_must_be_configured(
    lake: Lake, unique: str, moto_url: str, bootstrapped: None
) -> None:
    """A warehouse bucket and the password's secret under customer-managed KMS keys: the roles get
    kms:Decrypt only on the keys the configuration lists."""
    lake.create_table(f"{lake.database}.orders")
    kms = aws_client("kms", moto_url)
    bucket_key, secret_key = (kms.create_key(Description=f"doctor {unique}")["KeyMetadata"]["Arn"] for _ in range(2))
    aws_client("s3", moto_url).put_bucket_encryption(
        Bucket=lake.bucket,
        ServerSideEncryptionConfiguration={
            "Rules": [{"ApplyServerSideEncryptionByDefault": {"SSEAlgorithm": "aws:kms", "KMSMasterKeyID": bucket_key}}]
        },
    )
    secret = aws_client("secretsmanager", moto_url).create_secret(Name=f"search-{unique}", SecretString="pw", KmsKeyId=secret_key)
    search = {"url": "http://127.0.0.1:9", "username": "icecdc", "password_secret_arn": secret["ARN"]}
    tables = [{"name": f"{lake.database}.orders"}]
    unlisted = diagnose(doctor_config(lake, f"doc-{unique}", tables, search), Phase.BEFORE, READY)
    bucket = unlisted.named("warehouse bucket", lake.bucket)
    assert bucket.outcome == Outcome.FAILED and bucket.fix is not None
    assert bucket.fix.text == f"add {bucket_key} to aws.warehouse_kms_key_arns"
    password = unlisted.named("password secret")
    assert password.outcome == Outcome.FAILED and password.fix is not None
    assert password.fix.text == f"set aws.password_secret_kms_key_arn: {secret_key}"

    keys = {"warehouse_kms_key_arns": [bucket_key], "password_secret_kms_key_arn": secret_key}
    listed = diagnose(doctor_config(lake, f"doc-{unique}", tables, search, **keys), Phase.BEFORE, READY)
    assert listed.named("warehouse bucket", lake.bucket).detail == f"s3://{lake.bucket} exists, under {bucket_key} (listed)"
    assert listed.named("password secret").outcome == Outcome.PASSED

    missing = {**search, "password_secret_arn": secret["ARN"].replace(f"search-{unique}", f"gone-{unique}")}
    gone = diagnose(doctor_config(lake, f"doc-{unique}", tables, missing, **keys), Phase.BEFORE, READY).named("password secret")
    assert gone.outcome == Outcome.FAILED and gone.detail.endswith("does not exist")


def test_glue_versions_are_known_from_the_accounts_jobs(moto_url: str, unique: str) -> None:
    glue = elsewhere("glue", moto_url)
    assert JobsOnVersion(glue).offers(GLUE_VERSION) is None  # cannot tell: no API lists versions
    glue.create_job(
        Name=f"etl-{unique}", Role="arn:aws:iam::123456789012:role/etl", Command={"Name": "glueetl"}, GlueVersion=GLUE_VERSION
    )
    try:
        assert JobsOnVersion(glue).offers(GLUE_VERSION) is True
    finally:
        glue.delete_job(JobName=f"etl-{unique}")


# -- after deploying -------------------------------------------------------------------------------


def planner_logged(moto_url: str, group: str, *messages: str, at: float | None = None) -> None:
    """Lines in the planner's log group, as Lambda writes them (one stream per container)."""
    logs = aws_client("logs", moto_url)
    stream = "2026/01/01/[$LATEST]0123456789abcdef"
    logs.create_log_stream(logGroupName=group, logStreamName=stream)
    stamp = int((at or time.time()) * 1000)
    logs.put_log_events(
        logGroupName=group, logStreamName=stream, logEvents=[{"timestamp": stamp, "message": m} for m in messages]
    )


def test_after_a_synced_deployment_passes(lake: Lake, unique: str, osmem_clone: Any) -> None:
    """The stack's stand-in, the tables synced once through it (the state in its DynamoDB table,
    the documents in osmem), the planner's log as a sweep leaves it."""
    lake.create_table(f"{lake.database}.orders").append(rows(1, 2, 3))
    stack = f"doc-{unique}"
    tables = [{"name": f"{lake.database}.orders"}]
    # signed as the deployed writers sign (SigV4): osmem takes any signature
    config = doctor_config(lake, stack, tables, {"url": osmem_clone.url, "aws_region": REGION})
    physical = deploy(lake.moto_url, config)
    synced = config.revised(
        state={"type": "dynamodb", "table": state_table_name(stack), "region": REGION}, engine={"use": "in_process"}
    )
    [result] = sync(synced)
    assert result.writes.indexed == 3
    planner_logged(
        lake.moto_url, physical[logical_id(Logical.PLANNER_LOGS)], f"[INFO] {lake.database}.orders: caught up, no job started"
    )

    diagnosis = diagnose(config, Phase.AFTER, READY)
    assert diagnosis.ok, [c.lines() for c in diagnosis.failures]
    table = f"{lake.database}.orders"
    assert diagnosis.named("stack").detail == f"{stack} CREATE_COMPLETE, {len(physical)} resources"
    assert diagnosis.named("state table").detail.endswith("ACTIVE: 1 of 1 indexes checkpointed, 0 items pending")
    assert (
        diagnosis.named("glue job", table).detail
        == f"{job_name(stack, table)}: no run yet (the planner applies small work itself)"
    )
    assert diagnosis.named("planner").detail.endswith("no errors in a day")
    assert diagnosis.named("failed events").outcome == Outcome.PASSED
    rule = diagnosis.named("event rule", table)
    assert rule.outcome == Outcome.PASSED
    assert "evaluated here: TestEventPattern gave no result" in rule.detail  # moto answers TestEventPattern with nothing
    assert diagnosis.named("opensearch writes", "orders").outcome == Outcome.PASSED
    assert diagnosis.named("writer mapping").outcome == Outcome.SKIPPED  # osmem has no security plugin
    assert diagnosis.named("lag", table).detail == "0 s behind, 0 snapshots, 0 items pending"


def test_after_a_broken_deployment_fails_each_check_with_its_fix(lake: Lake, unique: str, osmem_clone: Any) -> None:
    """Deployed by a version that matched names as written (the rule then waits for `Orders`, which
    Glue never sends), one job deleted, events in the Failures queue, a planner logging errors, a read-only
    cluster, and tables never exported two hours after their commit."""
    db = lake.database
    lake.create_table(f"{db}.orders").append(rows(1))
    lake.create_table(f"{db}.customers").append(rows(7))
    stack = f"doc-{unique}"
    mixed = f"{db}.Orders"
    config = doctor_config(lake, stack, [{"name": mixed, "index": "orders"}, {"name": f"{db}.customers"}], osmem(osmem_clone.url))
    physical = deploy(lake.moto_url, config, pattern=table_changed_pattern(config, as_glue_names_them=False))
    later = time.time() + 2 * 3600  # the doctor runs two hours after the commits
    aws_client("glue", lake.moto_url).delete_job(JobName=job_name(stack, f"{db}.customers"))
    failures = physical[logical_id(Logical.FAILURES)]
    aws_client("sqs", lake.moto_url).send_message(QueueUrl=failures, MessageBody=json.dumps({"source": "aws.glue"}))
    planner_logged(
        lake.moto_url,
        physical[logical_id(Logical.PLANNER_LOGS)],
        f"[ERROR]\t2026-01-01T00:00:00Z\tabc\t{db}.customers: planning failed: access denied",
        at=later - 60,
    )
    requests.put(
        f"{osmem_clone.url}/_cluster/settings", json={"persistent": {"cluster.blocks.read_only": True}}, timeout=10
    ).raise_for_status()

    diagnosis = diagnose(config, Phase.AFTER, READY, clock=lambda: later)

    def fails(name: str, subject: str | None = None) -> str:
        check = diagnosis.named(name, subject)
        assert check.outcome == Outcome.FAILED and check.fix is not None, check
        return "\n".join(check.lines())

    rule = fails("event rule", mixed)
    assert f"a commit of {db}.orders (Glue's event, evaluated here" in rule and "does not match it" in rule
    assert "fix: deploy the stack again from this configuration" in rule
    assert diagnosis.named("event rule", f"{db}.customers").outcome == Outcome.PASSED
    assert "does not exist" in fails("glue job", f"{db}.customers")
    assert "1 events the planner could not plan" in fails("failed events") and f"--queue-url {failures}" in fails("failed events")
    planner = fails("planner")
    assert (
        "1 error lines in a day" in planner
        and "planning failed: access denied" in planner
        and "--filter-pattern ERROR" in planner
    )
    writes = fails("opensearch writes", "orders")
    assert "cluster_block_exception" in writes and "cluster.blocks.read_only" in writes
    assert "not exported yet (7" in fails("lag", mixed)  # 2 h after the commit: over the Lag alarm's hour


def test_a_failed_glue_run_fails_the_job_check_with_its_error() -> None:
    """moto's job runs stay STARTING in this suite: the check on a run as Glue's GetJobRuns lists a failed one."""
    from datetime import UTC, datetime

    runs = [
        {"Id": "jr_old", "JobRunState": "SUCCEEDED", "StartedOn": datetime(2026, 1, 1, 10, 0, tzinfo=UTC)},
        {
            "Id": "jr_new",
            "JobRunState": "FAILED",
            "StartedOn": datetime(2026, 1, 1, 11, 0, tzinfo=UTC),
            "ErrorMessage": "SinkError: OpenSearch at https://search refused the credentials (403)",
        },
    ]
    check = last_run("icecdc", "shop.orders", "icecdc-shop.orders", runs)
    assert check.lines() == [
        (
            "✗ glue job (shop.orders): icecdc-shop.orders: the last run started 2026-01-01 11:00 UTC is FAILED: "
            "SinkError: OpenSearch at https://search refused the credentials (403)"
        ),
        "    fix: read the run's error log; the next sweep starts the job again",
        "    $ aws logs tail /aws-glue/jobs/icecdc/error --log-stream-name-prefix jr_new --since 1d",
    ]


def test_the_writers_mapping_is_read_from_the_security_plugin(lake: Lake, unique: str, moto_url: str) -> None:
    """The mapping the stack's custom resource makes passes; a domain where nobody mapped the
    writers fails with the commands that map them. (No OpenSearch with the security plugin runs
    here: its answers are the documents the plugin's REST API returns.)"""
    config = doctor_config(
        lake, "cdc", [{"name": "shop.orders", "index": "orders"}], {"url": "https://search", "aws_region": REGION}
    )
    context = Context.open(config)
    writers = {"jobs": PROPERTIES["Writer"]}
    api = FakeSecurityApi()
    access["apply"](api, PROPERTIES)
    roles = {"cdc-writer": json.loads(PROPERTIES["Role"])}
    roles["cdc-writer"]["cluster_permissions"] = ["cluster_monitor", "cluster_composite_ops"]
    mappings = {
        path.split("/")[-1]: doc[path.split("/")[-1]] for path, doc in api.docs.items() if path.startswith("rolesmapping/")
    }
    [mapped] = mapping_checks(context, writers, mappings, roles)
    assert mapped.outcome == Outcome.PASSED, mapped

    unmapped = {"all_access": {"backend_roles": [ADMIN]}}
    [check] = mapping_checks(context, writers, unmapped, roles)
    assert check.outcome == Outcome.FAILED and check.fix is not None
    assert check.detail == f"{PROPERTIES['Writer']} is mapped to no role"
    assert check.fix.command is not None and '"index_patterns": ["orders", "orders-*"]' in check.fix.command
    assert f'rolesmapping/cdc-writer -d \'{{"backend_roles": ["{PROPERTIES["Writer"]}"]}}\'' in check.fix.command

    read_only = {
        "cdc-reader": {
            "cluster_permissions": ["cluster_monitor"],
            "index_permissions": [{"index_patterns": ["orders*"], "allowed_actions": ["read"]}],
        }
    }
    [check] = mapping_checks(context, writers, {"cdc-reader": {"backend_roles": [PROPERTIES["Writer"]]}}, read_only)
    assert check.detail == (
        "its roles (cdc-reader) lack cluster_composite_ops on the cluster; its roles (cdc-reader) lack crud, manage on 'orders'; "
        "its roles (cdc-reader) lack crud, manage on 'orders-1'"
    )


def test_a_caller_who_may_not_read_mappings_is_told_how_to(lake: Lake, unique: str, osmem_clone: Any) -> None:
    """The security plugin answers 403 to a caller without security_manager (injected in front of osmem)."""
    lake.create_table(f"{lake.database}.orders").append(rows(1))
    with FaultProxy(osmem_clone.url) as proxy:
        proxy.fail_next(2, status=403, path_contains="_plugins/_security")
        config = doctor_config(
            lake, f"doc-{unique}", [{"name": f"{lake.database}.orders"}], {"url": proxy.url, "aws_region": REGION}
        )
        deploy(lake.moto_url, config)
        [check] = [c for c in diagnose(config, Phase.AFTER, READY).checks if c.name == "writer mapping"]
        url = proxy.url
    assert check.outcome == Outcome.WARNING and check.fix is not None
    assert check.fix.command == f"awscurl --service es {url}/_plugins/_security/api/rolesmapping"


def test_patterns_are_matched_as_eventbridge_matches_them() -> None:
    config = parse_config(config_dict({}, tables=[{"name": "Sales.Orders", "index": "orders"}]))
    pattern = table_changed_pattern(config, as_glue_names_them=False)  # EventBridge compares case-sensitively
    event = {
        "source": "aws.glue",
        "detail-type": "Glue Data Catalog Table State Change",
        "detail": {"typeOfChange": "UpdateTable"},
    }
    assert not match_locally(pattern, {**event, "detail": {**event["detail"], "databaseName": "sales", "tableName": "orders"}})
    assert match_locally(pattern, {**event, "detail": {**event["detail"], "databaseName": "Sales", "tableName": "Orders"}})
    with pytest.raises(UnsupportedPattern):
        match_locally({"detail": {"tableName": [{"prefix": "ord"}]}}, event)


# -- the command ----------------------------------------------------------------------------------


def test_without_credentials_the_one_finding_says_they_are_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """No check can run without credentials: one line says so, not each check's "Unable to locate"."""
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_DEFAULT_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    for name in ("AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE"):
        monkeypatch.setenv(name, str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.delenv("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", raising=False)
    path = tmp_path / "icecdc.yaml"
    raw = {
        "catalog": {"name": "lake", "type": "glue"},
        "state": {"type": "sqlite", "path": str(tmp_path / "unused.db")},
        "opensearch": {"url": "http://127.0.0.1:9"},
        "tables": [{"name": "db.orders"}],
        "aws": {"warehouse_buckets": ["lake"], "stack_name": "doc-none", "region": REGION},
    }
    path.write_text(json.dumps(raw))
    for phase in ("before", "after"):
        assert main(["doctor", phase, "--config", str(path)]) == 1
        out = capsys.readouterr().out
        failures = [line for line in out.splitlines() if line.startswith("✗")]
        assert len(failures) == 1 and failures[0].startswith("✗ credentials: no AWS credentials found ("), out
        assert failures[0].endswith("every check needs them"), out
        assert "Unable to locate credentials" not in out and "AWS_PROFILE" in out


def test_the_command_prints_each_check_with_its_fix_and_fails(
    lake: Lake, unique: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], bootstrapped: None
) -> None:
    lake.create_table(f"{lake.database}.orders").append(rows(1))
    path = tmp_path / "icecdc.yaml"
    raw = {
        "catalog": lake.catalog_properties,
        "state": {"type": "sqlite", "path": str(tmp_path / "unused.db")},
        "opensearch": {"url": "http://127.0.0.1:9"},
        "tables": [{"name": f"{lake.database}.orders"}, {"name": f"{lake.database}.missing"}],
        "aws": {"warehouse_buckets": [lake.bucket], "stack_name": f"doc-{unique}", "region": REGION},
    }
    path.write_text(json.dumps(raw))  # YAML is a superset of JSON

    assert main(["doctor", "before", "--config", str(path)]) == 1
    out = capsys.readouterr().out
    assert out.startswith(f"icecdc doctor before: stack doc-{unique} in {REGION}\n")
    assert f"✗ table exists ({lake.database}.missing): table '{lake.database}.missing' does not exist" in out
    assert "    fix: create the table in the Glue Data Catalog, or correct the name (<database>.<table>)\n" in out
    assert f"    $ aws glue get-table --database-name {lake.database} --name missing --region {REGION}\n" in out
    assert "✗ opensearch reachable: OpenSearch at http://127.0.0.1:9 is unreachable" in out
    assert out.rstrip().splitlines()[-1].startswith("NOT ready: ") and ", 2 failed, " in out

    assert main(["doctor", "after", "--config", str(path), "--json"]) == 1  # not deployed
    report = json.loads(capsys.readouterr().out)
    assert report["phase"] == "after" and report["ok"] is False
    stack_check = next(c for c in report["checks"] if c["name"] == "stack")
    assert stack_check["outcome"] == "fail" and stack_check["fix"]["command"] == "cdk deploy -c icecdc:config=path/to/icecdc.yaml"
    state = next(c for c in report["checks"] if c["name"] == "state table")
    assert state["outcome"] == "fail" and state["detail"] == f"doc-{unique}-state does not exist"


def test_after_lake_formation_must_grant_the_roles_the_glue_rest_tables(
    moto_url: str, unique: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Glue's REST endpoint over a federated catalog: each role without DESCRIBE on the database,
    or SELECT and DESCRIBE on the table, in Lake Formation (moto's) fails naming the role, what
    it lacks and the grant command; granted, by name or on all the database's tables, it passes."""
    from icecdc.doctor.catalogs import check_lake_formation

    monkeypatch.setenv("AWS_ENDPOINT_URL", moto_url)
    federated = f"123456789012:s3tablescatalog/lake{unique}"
    catalog = {
        "name": "lake",
        "type": "rest",
        "uri": f"https://glue.{REGION}.amazonaws.com/iceberg",
        "warehouse": federated,
        "rest.sigv4-enabled": "true",
        "rest.signing-name": "glue",
        "rest.signing-region": REGION,
    }
    config = parse_config(
        {
            "catalog": catalog,
            "state": {"type": "sqlite", "path": str(tmp_path / "unused.db")},
            "opensearch": osmem("http://127.0.0.1:9"),
            "tables": [{"name": "shop.orders"}, {"name": "shop.returns"}],
            "aws": {"stack_name": f"lf-{unique}", "region": REGION},
        }
    )
    physical = deploy(moto_url, config)
    iam, lakeformation = aws_client("iam", moto_url), aws_client("lakeformation", moto_url)
    job, planner = (
        iam.get_role(RoleName=physical[logical_id(r)])["Role"]["Arn"] for r in (Logical.JOB_ROLE, Logical.PLANNER_ROLE)
    )

    def checks() -> dict[tuple[str, str], Check]:
        found = list(check_lake_formation(Context(config, boto3.Session(region_name=REGION), REGION)))
        return {(c.subject or "", "JobRole" if "JobRole" in c.detail else "PlannerRole"): c for c in found}

    def grant(role: str, resource: dict[str, Any], *permissions: str) -> None:
        lakeformation.grant_permissions(
            Principal={"DataLakePrincipalIdentifier": role}, Resource=resource, Permissions=list(permissions)
        )

    bare = checks()
    assert {c.outcome for c in bare.values()} == {Outcome.FAILED} and len(bare) == 4
    lacking = bare[("shop.orders", "JobRole")]
    assert lacking.detail == (
        f"JobRole ({job}) lacks DESCRIBE on database shop and SELECT, DESCRIBE on shop.orders in Lake Formation"
    )
    assert lacking.fix is not None and lacking.fix.command is not None
    assert f"--principal DataLakePrincipalIdentifier={job}" in lacking.fix.command
    assert f'"Table": {{"CatalogId": "{federated}", "DatabaseName": "shop", "Name": "orders"}}' in lacking.fix.command
    assert lacking.fix.command.splitlines()[1].endswith("--permissions SELECT DESCRIBE")

    shop = {"Database": {"CatalogId": federated, "Name": "shop"}}
    for role in (job, planner):
        grant(role, shop, "DESCRIBE")
    grant(job, {"Table": {"CatalogId": federated, "DatabaseName": "shop", "Name": "orders"}}, "SELECT", "DESCRIBE")
    grant(planner, {"Table": {"CatalogId": federated, "DatabaseName": "shop", "TableWildcard": {}}}, "ALL")
    grant(job, {"Table": {"CatalogId": "123456789012", "DatabaseName": "shop", "Name": "returns"}}, "SELECT", "DESCRIBE")
    after = checks()
    assert {k: c.outcome for k, c in after.items()} == {
        ("shop.orders", "JobRole"): Outcome.PASSED,
        ("shop.orders", "PlannerRole"): Outcome.PASSED,  # all the database's tables
        ("shop.returns", "JobRole"): Outcome.FAILED,  # granted in another catalog
        ("shop.returns", "PlannerRole"): Outcome.PASSED,
    }
    assert after[("shop.returns", "JobRole")].detail.endswith("lacks SELECT, DESCRIBE on shop.returns in Lake Formation")
