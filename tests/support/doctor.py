"""An icecdc deployment as `icecdc doctor` finds it in an account, made in moto.

moto's CloudFormation cannot create the synthesized template (Glue jobs, a DynamoDB global table,
custom resources, KMS-encrypted queues and logs are beyond it), so the stack here holds the
resources the doctor looks up, under logical IDs of the shape CDK gives them (path + 8-character
hash), with the EventBridge pattern the stack writes; the resources the stack names itself (the
state table, the jobs) are made directly under those names. tests/aws/test_doctor.py checks both
against the synthesized template (`table_changed_pattern`, the doctor's lookups), so this stays the
stack's shape as infra/ changes.
"""

from __future__ import annotations

import json
from typing import Any

from icecdc.aws.contract import GLUE_EVENT_SOURCE, GLUE_EVENT_TYPE, job_name
from icecdc.catalog import glue_name
from icecdc.config import Config, parse_config
from icecdc.doctor.context import Sources
from icecdc.doctor.sources import AccountConcurrency
from icecdc.doctor.stack import GLUE_VERSION, Logical, state_table_name
from icecdc.state.dynamodb import create_state_table
from tests.support.aws import REGION, Lake, aws_client

HASH = "0A1B2C3D"  # what CDK appends to a construct's path; any 8 upper-case characters


def logical_id(resource: Logical) -> str:
    return resource.value if resource == Logical.DOMAIN else f"{resource.value}{HASH}"


def table_changed_pattern(config: Config, as_glue_names_them: bool = True) -> dict[str, Any]:
    """The TableChanged rule's pattern as infra.planner writes it: the configured databases and tables
    as Glue names them (a test compares this with the synthesized template); `as_glue_names_them=False`:
    as written, which the stack did before it matched names in lower case."""
    names = [glue_name(t.name) if as_glue_names_them else t.name for t in config.tables]
    databases = sorted({n.split(".", 1)[0] for n in names})
    tables = sorted({n.split(".", 1)[1] for n in names})
    return {
        "source": [GLUE_EVENT_SOURCE],
        "detail-type": [GLUE_EVENT_TYPE],
        "detail": {"databaseName": databases, "tableName": tables, "typeOfChange": ["UpdateTable"]},
    }


def template(config: Config, pattern: dict[str, Any]) -> dict[str, Any]:
    trust = {
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Principal": {"Service": "lambda.amazonaws.com"}, "Action": "sts:AssumeRole"}],
    }
    resources: dict[Logical, dict[str, Any]] = {
        Logical.JOB_ROLE: {"Type": "AWS::IAM::Role", "Properties": {"AssumeRolePolicyDocument": trust}},
        Logical.PLANNER_ROLE: {"Type": "AWS::IAM::Role", "Properties": {"AssumeRolePolicyDocument": trust}},
        Logical.PLANNER_LOGS: {"Type": "AWS::Logs::LogGroup", "Properties": {}},
        Logical.FAILURES: {"Type": "AWS::SQS::Queue", "Properties": {}},
        Logical.BUFFER: {"Type": "AWS::SQS::Queue", "Properties": {}},
        Logical.PLANNER: {
            "Type": "AWS::Lambda::Function",
            "Properties": {
                "Runtime": "python3.11",
                "Handler": "handler.handler",
                "Role": {"Fn::GetAtt": [logical_id(Logical.PLANNER_ROLE), "Arn"]},
                "Code": {"ZipFile": "def handler(event, context):\n    return {}\n"},
            },
        },
        Logical.TABLE_CHANGED: {
            "Type": "AWS::Events::Rule",
            "Properties": {
                "EventPattern": pattern,
                "State": "ENABLED",
                "Targets": [{"Arn": {"Fn::GetAtt": [logical_id(Logical.BUFFER), "Arn"]}, "Id": "Target0"}],
            },
        },
        Logical.SWEEP: {
            "Type": "AWS::Events::Rule",
            "Properties": {"ScheduleExpression": "rate(5 minutes)", "State": "ENABLED"},
        },
    }
    return {"Resources": {logical_id(r): body for r, body in resources.items()}}


def deploy(moto_url: str, config: Config, pattern: dict[str, Any] | None = None) -> dict[str, str]:
    """The stack's stand-in, its state table and its jobs; the physical IDs of the looked-up resources.
    `pattern`: the TableChanged rule's, if not the one this version writes."""
    assert config.aws is not None
    stack = config.aws.stack_name
    cloudformation = aws_client("cloudformation", moto_url)
    body = template(config, pattern or table_changed_pattern(config))
    cloudformation.create_stack(StackName=stack, TemplateBody=json.dumps(body))
    create_state_table(state_table_name(stack), region=REGION, endpoint_url=moto_url)
    glue = aws_client("glue", moto_url)
    for table in config.tables:
        glue.create_job(
            Name=job_name(stack, table.name),
            Role="arn:aws:iam::123456789012:role/icecdc-job",
            Command={"Name": "glueetl", "ScriptLocation": "s3://assets/icecdc_job.py", "PythonVersion": "3"},
            GlueVersion=GLUE_VERSION,
            ExecutionProperty={"MaxConcurrentRuns": 1},
        )
    resources = cloudformation.describe_stack_resources(StackName=stack)["StackResources"]
    return {r["LogicalResourceId"]: r["PhysicalResourceId"] for r in resources}


class Offered:
    """Glue's versions in the region, as the account would answer (no Glue API lists them)."""

    def __init__(self, answer: bool | None) -> None:
        self.answer = answer

    def offers(self, version: str) -> bool | None:
        return self.answer


class Quota:
    """Lambda's account settings (moto has no GetAccountSettings)."""

    def __init__(self, limit: int, unreserved: int) -> None:
        self.settings = AccountConcurrency(limit, unreserved)

    def account(self) -> AccountConcurrency:
        return self.settings


# a region that offers Glue 5.1, and room to reserve concurrency from
READY = Sources(glue_versions=Offered(True), lambda_concurrency=Quota(1000, 1000))


def doctor_config(lake: Lake, stack: str, tables: list[dict[str, Any]], opensearch: dict[str, Any], **aws: Any) -> Config:
    return parse_config(
        {
            "catalog": lake.catalog_properties,
            "state": {"type": "sqlite", "path": str(lake.workdir / "unused.db")},
            "opensearch": opensearch,
            "tables": tables,
            "aws": {"warehouse_buckets": [lake.bucket], "stack_name": stack, "region": REGION, **aws},
        }
    )
