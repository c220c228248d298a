"""cfn-lint over every template the stack synthesizes: the example configuration
as `cdk synth` reads it by default, a created domain, and a created domain in a VPC. Errors fail;
so does any warning not fixed or suppressed on its resource with the reason (`infra.common.lint_ignore`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from aws_cdk import App
from aws_cdk.assertions import Template

from tests.support.cdk import ADMIN, ROUTED_VPC, synth
from tests.support.cdk import lint_findings as findings


def test_the_default_configuration_lints_clean(tmp_path: Path) -> None:
    from app import build

    context = {"icecdc:placeholderBundles": "true", "icecdc:example": "true"}  # the example, as it is
    app = App(context=context, outdir=str(tmp_path / "cdk.out"))
    assert findings(Template.from_stack(build(app))) == []


@pytest.mark.parametrize("variant", ["created_domain", "created_domain_in_a_vpc"])
def test_a_created_domain_lints_clean(variant: str, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    if variant == "created_domain":
        template, _ = request.getfixturevalue("created_domain")
    else:
        vpc = {**ROUTED_VPC, "create_endpoints": True}  # its endpoints linted too
        template, _ = synth(tmp_path, {"create_domain": True, "domain_admin_arn": ADMIN, "vpc": vpc})
    assert findings(template) == []


def test_every_suppressed_warning_says_why(created_domain: Any, tmp_path: Path) -> None:
    template, _ = synth(tmp_path, {"create_domain": True, "domain_admin_arn": ADMIN, "vpc": ROUTED_VPC})
    for resource in template.to_json()["Resources"].values():
        ignored = resource.get("Metadata", {}).get("cfn-lint", {}).get("config", {}).get("ignore_checks", [])
        reasons = resource.get("Metadata", {}).get("icecdc:lint", {})
        assert sorted(ignored) == sorted(reasons) and all(reasons.values()), resource
