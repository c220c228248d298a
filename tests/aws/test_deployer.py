"""What a deployer meets around `cdk deploy`: the example configuration refused, the stack's
outputs (what docs/deploy.md asks to map or to point icecdc at), and what `cdk destroy` keeps."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from aws_cdk import App, CfnDeletionPolicy, CfnResource

from app import build, build_stack
from icecdc.config import load_config, parse_config
from infra.stack import EXAMPLE_CONFIG, IcecdcStack, check_not_example
from tests.support.cdk import ADMIN, COLLECTION_ID, ROOT, config_dict, serverless, write_config

DEPLOY_DOC = ROOT / "docs" / "deploy.md"
CREATED_COLLECTION = {"create_collection": True, "collection_admin_arn": ADMIN}
AOSS = {"url": f"https://{COLLECTION_ID}.us-east-1.aoss.amazonaws.com", "aws_region": "us-east-1"}
REFUSED = (
    "{keys} still hold the placeholders of example-config.yaml: set your own in a copy and "
    "synthesize it with -c icecdc:config=path/to/your.yaml "
    "(-c icecdc:example=true synthesizes the example as it is)"
)


def build_with(tmp_path: Path, config: Path | None = None) -> IcecdcStack:
    """The stack as `cdk synth` builds it for `config` (by default the example, as in cdk.json)."""
    context = {"icecdc:placeholderBundles": "true"}
    if config is not None:
        context["icecdc:config"] = str(config)
    return build(App(context=context, outdir=str(tmp_path / "cdk.out")))


def test_synth_refuses_the_example_configuration_naming_what_to_set(tmp_path: Path) -> None:
    """cdk.json's default is the example: `cdk deploy` without `-c icecdc:config=` stops."""
    keys = "aws.warehouse_buckets, aws.opensearch_domain_arn, opensearch.url"
    with pytest.raises(SystemExit) as refused:
        build_with(tmp_path)
    assert str(refused.value) == f"{EXAMPLE_CONFIG}: {REFUSED.format(keys=keys)}"
    # a copy with only its buckets changed still names the rest
    raw = yaml.safe_load(EXAMPLE_CONFIG.read_text())
    raw["aws"]["warehouse_buckets"] = ["my-lake"]
    copy = tmp_path / "mine.yaml"
    copy.write_text(yaml.safe_dump(raw))
    with pytest.raises(SystemExit) as refused:
        build_with(tmp_path, copy)
    keys = "aws.opensearch_domain_arn, opensearch.url"
    assert str(refused.value) == f"{copy}: {REFUSED.format(keys=keys)}"


def test_a_configuration_of_ones_own_is_not_the_example() -> None:
    example, mine = load_config(EXAMPLE_CONFIG), Path("mine.yaml")
    check_not_example(parse_config(config_dict()), example, mine)
    # a created domain replaces opensearch.url: the example's URL left there is no placeholder
    created = config_dict({"create_domain": True, "domain_admin_arn": ADMIN})
    created["opensearch"]["url"] = example.opensearch.url
    check_not_example(parse_config(created), example, mine)
    existing = {**created, "aws": config_dict()["aws"]}
    with pytest.raises(SystemExit, match=r"^mine\.yaml: opensearch\.url still holds"):
        check_not_example(parse_config(existing), example, mine)


def logical_id(template: Any, kind: str, prefix: str) -> str:
    (found,) = [name for name in template.find_resources(kind) if name.startswith(prefix)]
    return found


def outputs(template: Any) -> dict[str, Any]:
    return {name: output["Value"] for name, output in template.find_outputs("*").items()}


def test_the_stack_outputs_every_arn_and_name_a_deployer_maps(
    existing_endpoint: Any,
    created_domain: Any,
) -> None:
    template, _ = existing_endpoint
    dead_letters, role = {"Ref": "DeadLettersBBF8BAAB"}, "AWS::IAM::Role"
    expected = {
        "JobRoleArn": {"Fn::GetAtt": [logical_id(template, role, "JobRole"), "Arn"]},
        "PlannerRoleArn": {"Fn::GetAtt": [logical_id(template, role, "PlannerRole"), "Arn"]},
        "StateTableName": {"Ref": "State1C20CC9A"},
        "DeadLetterBucketName": dead_letters,
        "DeadLetterUrl": {"Fn::Join": ["", ["s3://", dead_letters, "/dead-letter/"]]},
        "AlarmTopicArn": {"Ref": logical_id(template, "AWS::SNS::Topic", "OperationsAlarms")},
    }
    assert outputs(template) == expected
    domain, _ = created_domain
    endpoint = {"Fn::GetAtt": ["Domain66AC69E0", "DomainEndpoint"]}
    assert outputs(domain) == {
        **{name: outputs(domain)[name] for name in expected},  # other logical IDs, the same values
        "DomainArn": {"Fn::GetAtt": ["Domain66AC69E0", "Arn"]},
        "DomainEndpoint": {"Fn::Join": ["", ["https://", endpoint]]},
    }
    # docs/deploy.md says what each is for
    documented = set(re.findall(r"^\| `(\w+)` \|", DEPLOY_DOC.read_text(), flags=re.MULTILINE))
    assert set(outputs(domain)) <= documented


def test_the_teardown_section_names_every_resource_cdk_destroy_keeps(tmp_path: Path) -> None:
    """docs/deploy.md names, by construct path, what `cdk destroy` keeps: what the stack retains,
    with a created domain or a created collection."""
    config = write_config(tmp_path, config_dict({"create_domain": True, "domain_admin_arn": ADMIN}))
    (tmp_path / "collection").mkdir()
    collection = write_config(tmp_path / "collection", config_dict(CREATED_COLLECTION, AOSS))
    context = {"icecdc:placeholderBundles": "true"}
    stacks = [
        build_with(tmp_path, config),
        build_stack(App(context=context), serverless(load_config(collection)), collection),
    ]
    retained = {
        resource.node.path.removeprefix(f"{stack.node.path}/").removesuffix("/Resource")
        for stack in stacks
        for resource in stack.node.find_all()
        if isinstance(resource, CfnResource) and resource.cfn_options.deletion_policy == CfnDeletionPolicy.RETAIN
    }
    section = DEPLOY_DOC.read_text().split("## Teardown")[1].split("\n## ")[0]
    documented = set(re.findall(r"^\| `([\w/]+)`[^|]*\| retained", section, flags=re.MULTILINE))
    assert retained and documented == retained
