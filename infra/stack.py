"""The icecdc stack: EventBridge → planner Lambda → DynamoDB work queue → one Glue 5.1 job per table → OpenSearch.

A few lines composing constructs, each in its own module and testable alone (tests/aws/test_constructs.py):
`State` (table, data key, dead letters), `Network` (with `aws.vpc`: security groups, the Glue
connection), `Search` (the domain, or rights on an existing one), `Jobs` (the Glue jobs), `Planner`
(the Lambda and its triggers), `Operations` (alarms, dashboard).

Everything is named from `aws.stack_name`, so the planner finds each table's job by name
(`icecdc.aws.job_name`). IAM is least privilege: listed actions only, resources scoped to the
configured tables, the warehouse buckets, the state table, the assets, the dead-letter prefix and
the domain; the few statements that need `Resource: *` are the APIs without resource-level
permissions, each narrowed by a condition. Every cdk-nag finding accepted is suppressed on the one
resource it is about, for exactly the resources or actions it names, with its reason.
"""

from __future__ import annotations

from aws_cdk import Stack
from aws_cdk import aws_iam as iam
from constructs import Construct

from icecdc.config import Config
from infra.bundling import Bundles
from infra.domain import Search
from infra.jobs import Jobs
from infra.network import Network
from infra.operations import Operations
from infra.planner import Planner
from infra.state import State


class IcecdcStack(Stack):
    def __init__(self, scope: Construct, construct_id: str, *, config: Config, bundles: Bundles, **kwargs: object) -> None:
        super().__init__(scope, construct_id, **kwargs)
        check_deployable(config)
        assert config.aws is not None
        state = State(self, "State", aws=config.aws)
        network = Network(self, "Network", aws=config.aws) if config.aws.vpc else None
        # The jobs' identity: the OpenSearch side grants it its rights, the jobs run as it.
        job_role = iam.Role(self, "JobRole", assumed_by=iam.ServicePrincipal("glue.amazonaws.com"), description="icecdc Glue job")
        self.search = Search(self, "Search", config=config, bundles=bundles, writer=job_role, network=network)
        self.jobs = Jobs(
            self,
            "Jobs",
            config=config,
            bundles=bundles,
            state=state,
            role=job_role,
            opensearch_url=self.search.url,
            network=network,
        )
        self.planner = Planner(self, "Planner", config=config, bundles=bundles, state=state, jobs=self.jobs)
        self.operations = Operations(self, "Operations", config=config, jobs=self.jobs, planner=self.planner)
        self.state = state


def check_deployable(config: Config) -> None:
    """What the stack needs of the configuration beyond what the file's own validation checks."""
    if config.aws is None:
        raise SystemExit("the configuration has no `aws:` section: the stack needs at least aws.warehouse_buckets")
    if config.catalog.properties.get("type") != "glue":
        raise SystemExit(
            f"the stack plans from the Glue Data Catalog: catalog.type must be 'glue', not {config.catalog.properties.get('type')!r}"
        )
    if config.opensearch.password is not None:
        raise SystemExit(
            "opensearch.password would be uploaded with the configuration asset: keep the password in AWS "
            "Secrets Manager and set opensearch.password_secret_arn"
        )
