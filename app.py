#!/usr/bin/env python3
"""CDK app entry: `cdk synth` / `cdk deploy`, or plain `python app.py` (no AWS account, no Docker).

Context: icecdc:config (path of the YAML, default infra/example-config.yaml, whose placeholders are
refused unless icecdc:example=true) and icecdc:placeholderBundles=true (skip pip: a template for
checks only, not deployable).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

os.environ.setdefault("JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION", "1")

from aws_cdk import App, Aspects, Environment
from cdk_nag import AwsSolutionsChecks

from icecdc.config import Config, load_config
from icecdc.errors import IcecdcError
from infra.bundling import build_bundles
from infra.stack import EXAMPLE_CONFIG, IcecdcStack, check_not_example

ROOT = Path(__file__).resolve().parent


def build(app: App) -> IcecdcStack:
    config_path = (ROOT / (app.node.try_get_context("icecdc:config") or "infra/example-config.yaml")).resolve()
    return build_stack(app, load_config(config_path), config_path)


def build_stack(app: App, config: Config, config_path: Path) -> IcecdcStack:
    """The stack of `config`, read from `config_path` (the jobs' and the planner's asset)."""
    # S3 server access logs delivered under a bucket policy (AWS's recommendation), not the legacy
    # LogDeliveryWrite ACL on the access-log bucket (cfn-lint W3045); set before any construct exists.
    app.node.set_context("@aws-cdk/aws-s3:serverAccessLogsUseBucketPolicy", True)
    if str(app.node.try_get_context("icecdc:example")).lower() != "true":
        check_not_example(config, load_config(EXAMPLE_CONFIG), config_path)
    placeholder = str(app.node.try_get_context("icecdc:placeholderBundles")).lower() == "true"
    bundles = build_bundles(ROOT, config_path, placeholder=placeholder)
    aws = config.aws
    account = (aws.account if aws else None) or os.environ.get("CDK_DEFAULT_ACCOUNT")
    region = (aws.region if aws else None) or os.environ.get("CDK_DEFAULT_REGION")
    stack = IcecdcStack(
        app,
        aws.stack_name if aws else "icecdc",
        config=config,
        bundles=bundles,
        env=Environment(account=account, region=region) if account or region else None,
    )
    Aspects.of(app).add(AwsSolutionsChecks(verbose=True))
    return stack


def main() -> int:
    """Synthesize; a bad configuration is one line on stderr and exit 2, as the CLI's errors."""
    cdk_app = App()
    try:
        build(cdk_app)
    except IcecdcError as exc:
        print(f"icecdc synth: {exc}", file=sys.stderr)
        return 2
    cdk_app.synth()
    return 0


if __name__ == "__main__":
    sys.exit(main())
