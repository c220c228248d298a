"""Synthesizing the stack, or one of its constructs alone, for Template assertions (placeholder
bundles: no pip run; the template is the same but for asset hashes)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import yaml

os.environ.setdefault("JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION", "1")

from aws_cdk import App, Environment, Stack
from aws_cdk.assertions import Annotations, Template

from icecdc.config import Config, load_config
from infra.bundling import Bundles, build_bundles

ROOT = Path(__file__).resolve().parents[2]
TABLES = ["shop.orders", "shop.customers", "crm.accounts"]
ENV = Environment(account="123456789012", region="us-east-1")
ADMIN = "arn:aws:iam::123456789012:role/SearchAdmins"  # aws.domain_admin_arn of the created domains
COLLECTION_ID = "a1b2c3d4e5f6g7h8i9j0"  # an existing OpenSearch Serverless collection's id
COLLECTION_ARN = f"arn:aws:aoss:us-east-1:123456789012:collection/{COLLECTION_ID}"
VPC = {  # aws.vpc: an existing VPC's private subnets
    "vpc_id": "vpc-0123456789abcdef0",
    "subnets": [
        {"id": "subnet-0123456789abcdef0", "availability_zone": "us-east-1a"},
        {"id": "subnet-0123456789abcdef1", "availability_zone": "us-east-1b"},
        {"id": "subnet-0123456789abcdef2", "availability_zone": "us-east-1c"},
    ],
}


# aws.vpc with the subnets' route tables, as aws.vpc.create_endpoints needs them
ROUTED_VPC = {**VPC, "subnets": [{**s, "route_table_id": f"rtb-0123456789abcdef{n}"} for n, s in enumerate(VPC["subnets"])]}


def config_dict(
    aws: dict[str, Any] | None = None,
    opensearch: dict[str, Any] | None = None,
    tables: list[dict[str, Any]] | None = None,
    catalog: dict[str, Any] | None = None,
) -> dict[str, Any]:
    return {
        "catalog": catalog or {"name": "lake", "type": "glue"},
        "state": {"type": "sqlite", "path": "/tmp/unused.db"},
        "opensearch": opensearch or {"url": "https://search-x.us-east-1.es.amazonaws.com", "aws_region": "us-east-1"},
        "tables": tables or [{"name": t} for t in TABLES],
        "aws": {
            "stack_name": "cdc",
            "warehouse_buckets": ["lake-bucket"],
            "region": "us-east-1",
            "account": "123456789012",
            **(aws or {}),
        },
    }


def write_config(tmp_path: Path, raw: dict[str, Any]) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


class Parts:
    """A bare stack to put one construct (and what it needs) into, with the config and bundles."""

    def __init__(self, tmp_path: Path, raw: dict[str, Any]) -> None:
        path = write_config(tmp_path, raw)
        self.config: Config = load_config(path)
        self.bundles: Bundles = build_bundles(ROOT, path, placeholder=True)
        self.app = App(outdir=str(tmp_path / "cdk.out"))
        self.stack = Stack(self.app, "Parts", env=ENV)

    def template(self) -> Template:
        return Template.from_stack(self.stack)


def synth(
    tmp_path: Path,
    aws: dict[str, Any],
    opensearch: dict[str, Any] | None = None,
    tables: list[dict[str, Any]] | None = None,
    catalog: dict[str, Any] | None = None,
) -> tuple[Template, Annotations]:
    """The whole stack as `app.py` builds it (cdk-nag included)."""
    from app import build

    path = write_config(tmp_path, config_dict(aws, opensearch, tables, catalog))
    app = App(context={"icecdc:config": str(path), "icecdc:placeholderBundles": "true"}, outdir=str(tmp_path / "cdk.out"))
    stack = build(app)
    return Template.from_stack(stack), Annotations.from_stack(stack)


def serverless(config: Config, service: str = "aoss") -> Config:
    """`config` signing for `service` (OpenSearch Serverless: aoss), a value the runtime section's
    own validation may not accept yet."""
    return config.model_copy(update={"opensearch": config.opensearch.model_copy(update={"aws_service": service})})


def synth_collection(
    tmp_path: Path, aws: dict[str, Any], opensearch: dict[str, Any] | None = None, service: str = "aoss"
) -> tuple[Template, Annotations]:
    """The whole stack as `app.py` builds it, for a configuration signing for `service`."""
    from app import build_stack

    opensearch = opensearch or {"url": f"https://{COLLECTION_ID}.us-east-1.aoss.amazonaws.com", "aws_region": "us-east-1"}
    path = write_config(tmp_path, config_dict(aws, opensearch))
    app = App(context={"icecdc:placeholderBundles": "true"}, outdir=str(tmp_path / "cdk.out"))
    stack = build_stack(app, serverless(load_config(path), service), path)
    return Template.from_stack(stack), Annotations.from_stack(stack)


def lint_findings(template: Template) -> list[str]:
    """cfn-lint's findings on a synthesized template, one line each."""
    from cfnlint.api import ManualArgs, lint

    matches = lint(json.dumps(template.to_json()), config=ManualArgs(regions=["us-east-1"]))
    return [f"{m.rule.id} {m.message} at {'/'.join(map(str, m.path))}" for m in matches]


def role_statements(template: Any, description: str) -> list[dict[str, Any]]:
    (role,) = template.find_resources("AWS::IAM::Role", {"Properties": {"Description": description}})
    policies = template.find_resources("AWS::IAM::Policy").values()
    return [
        s for p in policies if {"Ref": role} in p["Properties"]["Roles"] for s in p["Properties"]["PolicyDocument"]["Statement"]
    ]


def actions(statement: dict[str, Any]) -> list[str]:
    return statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]


def resources(statement: dict[str, Any]) -> list[Any]:
    return statement["Resource"] if isinstance(statement["Resource"], list) else [statement["Resource"]]
