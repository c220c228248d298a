"""The stack as deployed, under its own IAM: synthesized for a configuration, its resources made in
moto under the names the template gives them, and the planner handler and the Glue job's entry
run as the template's roles (each signing with an access key of its own, which the IAM enforcement
of tests/support/moto.py and a guard in front of OpenSearch check against that role's statements).
In front of a Serverless stand-in the roles' keys are the ones it verifies, its guard checks
aoss:APIAccessAll and its `access` hook the template's data access policies.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import pytest
import yaml
from aws_cdk import App

from icecdc.model import Checkpoint
from icecdc.state.dynamodb import DynamoDbStateStore, create_state_table
from tests.support.aws import REGION, Lake, aws_client
from tests.support.faults import FaultProxy
from tests.support.iam import ACCOUNT, DataAccess, Enforcer, Names, Resolver, RolePolicy, role_id
from tests.support.serverless import ServerlessStandIn

DEAD_LETTERS = "DeadLetters"  # the logical id's prefix of the stack's dead-letter bucket
SECRET_KEY = "role-secret"


@dataclass(frozen=True)
class Shape:
    """One configuration the docs offer, as the harness deploys it."""

    label: str
    aws: dict[str, Any]  # the config's `aws:` beyond the names the harness sets
    opensearch: dict[str, Any]  # the config's `opensearch:`; a `url` is the one synth is told
    table: dict[str, Any]  # the config's table entry beyond its name


@dataclass(frozen=True)
class Catalogued:
    """Another catalog than the lake's Glue one: its properties (no keys), and, for S3 Tables, each
    table's storage bucket → (table ARN, namespace, name)."""

    properties: dict[str, str]
    table_storage: dict[str, tuple[str, str, str]]


class Deployed:
    """One synthesized stack, deployed into moto: `planner(event)` and `job(*args)` run as its roles."""

    def __init__(
        self,
        shape: Shape,
        lake: Lake,
        search: FaultProxy | ServerlessStandIn,
        enforcer: Enforcer,
        monkeypatch: pytest.MonkeyPatch,
        catalog: Catalogued | None = None,
    ) -> None:
        self.lake, self.search, self.enforcer, self.monkeypatch = lake, search, enforcer, monkeypatch
        self.catalogued = catalog
        self.stack = f"c{lake.database.rsplit('_', 1)[-1]}"
        self.table = f"{lake.database}.orders"
        self.dead_letter_bucket = f"dl-{self.stack}"
        raw = self._config(shape)
        self.config_path = lake.workdir / "icecdc.yaml"
        # the run reaches the stand-in, wherever the stack was told the endpoint is
        self.config_path.write_text(yaml.safe_dump({**raw, "opensearch": {**raw["opensearch"], "url": search.url}}))
        self.template = _synth(lake.workdir, raw)
        resources = self.template["Resources"]
        physical = {i: self.dead_letter_bucket for i in resources if i.startswith(DEAD_LETTERS)}
        data_key = next(i for i, r in resources.items() if r["Type"] == "AWS::KMS::Key" and i.startswith("DataKey"))
        self.resolve = Resolver(resources, Names(physical))
        key_arn = self.resolve({"Fn::GetAtt": [data_key, "Arn"]})
        storage = catalog.table_storage if catalog else {}
        secret, secret_key = shape.opensearch.get("password_secret_arn"), shape.aws.get("password_secret_kms_key_arn")
        secret_keys = {secret: secret_key} if secret and secret_key else {}
        names = Names(physical, {self.dead_letter_bucket: key_arn, **self._warehouse_keys(shape)}, storage, secret_keys)
        self.resolve = Resolver(resources, names)
        kinds = ("AWS::OpenSearchService::Domain", "AWS::OpenSearchServerless::Collection")
        created = [i for i, r in resources.items() if r["Type"] in kinds]
        existing = shape.aws.get("opensearch_domain_arn") or shape.aws.get("opensearch_collection_arn")
        domain_arn = self.resolve({"Fn::GetAtt": [created[0], "Arn"]}) if created else existing
        self.roles = {
            label: RolePolicy.from_template(label, self.template, role_id(self.template, prefix), names)
            for label, prefix in (("planner", "PlannerRole"), ("job", "JobRole"))
        }
        self._create_resources()
        enforcer.names, enforcer.domain_arn = names, domain_arn
        for label, policy in self.roles.items():
            enforcer.act_as(_access_key(self.stack, label), policy)
        search.guard = lambda request: enforcer.authorize(request, opensearch=True)
        if isinstance(search, ServerlessStandIn):
            self._admit(shape, search, names)

    def _admit(self, shape: Shape, search: ServerlessStandIn, names: Names) -> None:
        """The stand-in verifies the roles' signatures and applies the template's data access
        policies to them, by their role ARNs."""
        principals = {}
        for label, prefix in (("planner", "PlannerRole"), ("job", "JobRole")):
            search.accept(_access_key(self.stack, label), SECRET_KEY)
            arn = self.resolve({"Fn::GetAtt": [role_id(self.template, prefix), "Arn"]})
            principals[_access_key(self.stack, label)] = arn
        resources = self.template["Resources"].values()
        created = [r["Properties"]["Name"] for r in resources if r["Type"] == "AWS::OpenSearchServerless::Collection"]
        collection = shape.aws.get("collection_name") or created[0]
        self.data_access = DataAccess.from_template(self.template, collection, Resolver(self.template["Resources"], names))
        self.principals = principals  # access key → role ARN, as the data access policies name it
        search.access = self.enforcer.data_access_guard(self.data_access, principals)

    def _config(self, shape: Shape) -> dict[str, Any]:
        glue = {k: v for k, v in self.lake.catalog_properties.items() if "access-key" not in k}
        return {
            # the roles' own credentials: no keys in the file
            "catalog": dict(self.catalogued.properties) if self.catalogued else glue,
            "state": {"type": "sqlite", "path": "/tmp/unused.db"},
            "opensearch": {"url": self.search.url, **shape.opensearch},
            "tables": [{"name": self.table, "index": "orders", **shape.table}],
            "aws": {
                "stack_name": self.stack,
                "warehouse_buckets": [self.lake.bucket],
                "region": REGION,
                "account": ACCOUNT,
                **shape.aws,
            },
        }

    def _warehouse_keys(self, shape: Shape) -> dict[str, str]:
        keys = shape.aws.get("warehouse_kms_key_arns", [])
        return {self.lake.bucket: keys[0]} if keys else {}

    def _create_resources(self) -> None:
        moto = self.lake.moto_url
        resources = self.template["Resources"]
        state = next(r for r in resources.values() if r["Type"] == "AWS::DynamoDB::GlobalTable")
        create_state_table(state["Properties"]["TableName"], region=REGION, endpoint_url=moto)
        s3 = aws_client("s3", moto)
        s3.create_bucket(Bucket=self.dead_letter_bucket)
        glue = aws_client("glue", moto)
        for job in (r["Properties"] for r in resources.values() if r["Type"] == "AWS::Glue::Job"):
            glue.create_job(
                Name=job["Name"],
                Role="arn:aws:iam::123456789012:role/icecdc-job",
                Command={"Name": "glueetl", "ScriptLocation": "s3://assets/icecdc_job.py", "PythonVersion": "3"},
                ExecutionProperty={"MaxConcurrentRuns": 1},
                GlueVersion="5.1",
            )
            config_uri = job["DefaultArguments"]["--icecdc_config"]
            bucket, _, key = config_uri.removeprefix("s3://").partition("/")
            with contextlib.suppress(s3.exceptions.BucketAlreadyOwnedByYou):
                s3.create_bucket(Bucket=bucket)
            s3.put_object(Bucket=bucket, Key=key, Body=self.config_path.read_bytes())

    # -- the entries, as the roles -----------------------------------------------------------

    def access_key(self, label: str) -> str:
        return _access_key(self.stack, label)

    @contextlib.contextmanager
    def acting_as(self, label: str) -> Iterator[None]:
        """The role's credentials in the environment (what Lambda and Glue give the code)."""
        with pytest.MonkeyPatch.context() as env:
            env.setenv("AWS_ACCESS_KEY_ID", _access_key(self.stack, label))
            env.setenv("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
            env.delenv("AWS_SESSION_TOKEN", raising=False)
            # boto3's default session keeps the credentials it first found: a fresh one per role
            env.setattr(boto3, "DEFAULT_SESSION", None)
            yield

    def planner_environment(self) -> dict[str, str]:
        function = next(
            r["Properties"]
            for i, r in self.template["Resources"].items()
            if i.startswith("PlannerFunction") and r["Type"] == "AWS::Lambda::Function"
        )
        variables = {k: self.resolve(v) for k, v in function["Environment"]["Variables"].items()}
        variables["ICECDC_CONFIG"] = str(self.config_path)  # the YAML bundled beside the handler
        # The Lambda reads files with fsspec's s3fs, which its layer has and the tests' venv not:
        # here pyarrow's S3 reads them, the same requests (GetObject on the warehouse's objects).
        variables.pop("ICECDC_CATALOG_PROPERTIES", None)
        if "ICECDC_OPENSEARCH_URL" in variables:
            variables["ICECDC_OPENSEARCH_URL"] = self.search.url  # the created domain's endpoint
        return {**variables, "AWS_REGION": REGION}

    def planner(self, event: dict[str, Any], handler: Any) -> dict[str, Any]:
        with self.acting_as("planner"), pytest.MonkeyPatch.context() as env:
            for name, value in self.planner_environment().items():
                env.setenv(name, value)
            answer: dict[str, Any] = handler(event, None)
            return answer

    def job_argv(self, *extra: str) -> list[str]:
        job = next(
            r["Properties"]
            for r in self.template["Resources"].values()
            if r["Type"] == "AWS::Glue::Job" and r["Properties"]["DefaultArguments"]["--icecdc_table"] == self.table
        )
        arguments = {k: self.resolve(v) for k, v in job["DefaultArguments"].items() if k.startswith("--icecdc_")}
        if "--icecdc_opensearch_url" in arguments:
            arguments["--icecdc_opensearch_url"] = self.search.url
        flat = [part for pair in arguments.items() for part in pair]
        return ["icecdc_job.py", "--JOB_NAME", job["Name"], *flat, *extra]

    def checkpoint(self) -> Checkpoint | None:
        """The table's checkpoint in the stack's state table (read with the tests' own keys)."""
        state = next(r for r in self.template["Resources"].values() if r["Type"] == "AWS::DynamoDB::GlobalTable")
        store = DynamoDbStateStore(state["Properties"]["TableName"], REGION, self.lake.moto_url)
        try:
            return store.get_checkpoint(self.table)
        finally:
            store.close()

    def job(self, main: Any, *extra: str, spark: Any = None) -> Any:
        with self.acting_as("job"):
            return main(self.job_argv(*extra), spark)


def _access_key(stack: str, label: str) -> str:
    return f"AKIA{label.upper()}{stack.upper()}"


def _synth(workdir: Path, raw: dict[str, Any]) -> dict[str, Any]:
    """The whole stack as `app.py` builds it (placeholder bundles), as a template dict."""
    from aws_cdk.assertions import Template

    from app import build

    path = workdir / "synth.yaml"
    path.write_text(yaml.safe_dump(raw))
    context = {"icecdc:config": str(path), "icecdc:placeholderBundles": "true"}
    stack = build(App(context=context, outdir=str(workdir / "cdk.out")))
    template: dict[str, Any] = json.loads(json.dumps(Template.from_stack(stack).to_json()))
    return template
