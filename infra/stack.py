"""The icecdc stack: EventBridge → planner Lambda → DynamoDB work queue → one Glue 5.1 job per table → OpenSearch.

A few lines composing constructs, each in its own module and testable alone (tests/aws/test_constructs.py):
`State` (table, data key, dead letters), `Network` (with `aws.vpc`: security groups, the Glue
connection), `Search` (the domain, or rights on an existing one) or `Collection` (an OpenSearch
Serverless collection, existing or created), `Jobs` (the Glue jobs), `Planner`
(the Lambda and its triggers), `Operations` (alarms, dashboard).

Everything is named from `aws.stack_name`, so the planner finds each table's job by name
(`icecdc.aws.contract.job_name`). IAM is least privilege: listed actions only, resources scoped to
the configured tables, the warehouse buckets, the state table, the assets, the dead-letter prefix
and the domain; the few statements that need `Resource: *` are the APIs without resource-level
permissions, each narrowed by a condition. Every cdk-nag finding accepted is suppressed on the one
resource it is about, for exactly the resources or actions it names, with its reason.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit

from aws_cdk import CfnOutput, Stack
from aws_cdk import aws_iam as iam
from constructs import Construct

from icecdc.aws.contract import PASS_RESERVE_SECONDS
from icecdc.catalog import glue_name
from icecdc.config import Config
from icecdc.engines.workers import lambda_vcpus
from icecdc.model import EngineChoice
from infra.bundling import Bundles
from infra.collection import Collection
from infra.common import aws_catalog
from infra.domain import Search
from infra.jobs import Jobs
from infra.network import Network
from infra.operations import Operations
from infra.planner import IN_PROCESS_ROWS_PER_SECOND, PLANNER_MEMORY_MB, Planner
from infra.state import State

# The planner's whole vCPUs at its memory: its in-process engine's worker processes (icecdc.engines.workers).
LAMBDA_CORES = lambda_vcpus(PLANNER_MEMORY_MB)

# What `cdk synth` reads without `-c icecdc:config=...` (cdk.json): an example, not a deployment.
EXAMPLE_CONFIG = Path(__file__).resolve().parent / "example-config.yaml"
# The keys whose values in the example name someone else's resources: a deployment sets its own.
PLACEHOLDER_KEYS = (
    "aws.account",
    "aws.warehouse_buckets",
    "aws.opensearch_domain_arn",
    "aws.domain_admin_arn",
    "opensearch.url",
)


class IcecdcStack(Stack):
    def __init__(self, scope: Construct, construct_id: str, *, config: Config, bundles: Bundles, **kwargs: object) -> None:
        super().__init__(scope, construct_id, **kwargs)
        check_deployable(config)
        assert config.aws is not None
        state = State(self, "State", aws=config.aws)
        secret = config.opensearch.password_secret_arn is not None
        network = Network(self, "Network", aws=config.aws, password_secret=secret) if config.aws.vpc else None
        # The jobs' identity: the OpenSearch side grants it its rights, the jobs run as it.
        job_role = iam.Role(self, "JobRole", assumed_by=iam.ServicePrincipal("glue.amazonaws.com"), description="icecdc Glue job")
        self.search: Search | Collection = (
            Collection(self, "Collection", config=config, writer=job_role, data_key=state.data_key, network=network)
            if config.aws.collection
            else Search(self, "Search", config=config, bundles=bundles, writer=job_role, network=network)
        )
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
        self.planner = Planner(
            self, "Planner", config=config, bundles=bundles, state=state, jobs=self.jobs, search=self.search, network=network
        )
        self.operations = Operations(self, "Operations", config=config, jobs=self.jobs, planner=self.planner)
        self.state = state
        self._outputs(job_role)

    def _outputs(self, job_role: iam.IRole) -> None:
        """What a deployer maps, or points icecdc at, after a deploy (docs/deploy.md)."""
        state, planner = self.state, self.planner
        outputs = {
            # the writers: an existing domain maps both to its writer role (docs/deploy.md)
            "JobRoleArn": (job_role.role_arn, "the Glue jobs' role"),
            "PlannerRoleArn": (planner.role.role_arn, "the planner's role"),
            "StateTableName": (state.table.table_name, "checkpoints and work items (retained)"),
            "DeadLetterBucketName": (state.dead_letters.bucket_name, "the dead letters (retained)"),
            "DeadLetterUrl": (state.dead_letter_url, "dead_letter.path for icecdc dead-letters"),
            "AlarmTopicArn": (self.operations.topic.topic_arn, "the alarms"),
        }
        if isinstance(self.search, Search) and self.search.domain is not None:
            outputs["DomainArn"] = (self.search.domain.domain_arn, "the created domain (retained)")
            outputs["DomainEndpoint"] = (self.search.url or "", "opensearch.url for icecdc")
        if isinstance(self.search, Collection) and self.search.collection is not None:
            outputs["CollectionArn"] = (self.search.arn, "the created collection (retained)")
            outputs["CollectionEndpoint"] = (self.search.url or "", "opensearch.url for icecdc")
        for name, (value, description) in outputs.items():
            CfnOutput(self, name, value=value, description=description)


def check_deployable(config: Config) -> None:
    """What the stack needs of the configuration beyond what the file's own validation checks."""
    if config.aws is None:
        raise SystemExit("the configuration has no `aws:` section: the stack needs at least aws.warehouse_buckets")
    catalog = aws_catalog(config)
    problem = catalog.problem()
    if problem is not None:
        raise SystemExit(problem)
    if catalog.needs_warehouse_buckets() and not config.aws.warehouse_buckets:
        raise SystemExit("aws.warehouse_buckets must list the buckets of the tables' files (the Glue Data Catalog)")
    glue_names = [glue_name(t.name) for t in config.tables]
    same = sorted({t.name for t in config.tables if glue_names.count(glue_name(t.name)) > 1})
    if same:
        raise SystemExit(f"tables {', '.join(same)} name one Glue table: Glue stores database and table names in lower case")
    if config.aws.planner_applies:
        check_planner_applies(config)
    check_signing_service(config)
    if config.opensearch.password is not None:
        raise SystemExit(
            "opensearch.password would be uploaded with the configuration asset: keep the password in AWS "
            "Secrets Manager and set opensearch.password_secret_arn"
        )


def check_signing_service(config: Config) -> None:
    """Requests to a collection are signed for `aoss`, to a domain for `es`: the configured service
    must be the destination's, and an existing collection's endpoint must be that collection's."""
    aws = config.aws
    assert aws is not None
    service: str = config.opensearch.aws_service
    if aws.collection and service != "aoss":
        key = "aws.create_collection" if aws.create_collection else "aws.opensearch_collection_arn"
        raise SystemExit(
            f"{key} needs opensearch.aws_service: aoss (requests to a Serverless collection are signed for aoss), got {service!r}"
        )
    if service == "aoss" and not aws.collection:
        raise SystemExit(
            "opensearch.aws_service: aoss needs aws.opensearch_collection_arn or "
            "aws.create_collection: the roles get Serverless rights on a collection only"
        )
    host = urlsplit(config.opensearch.url).hostname or ""
    if aws.collection_id is not None and host.split(".", 1)[0] != aws.collection_id:
        raise SystemExit(
            f"opensearch.url {config.opensearch.url} is not the endpoint of "
            f"aws.opensearch_collection_arn's collection {aws.collection_id} "
            f"(https://{aws.collection_id}.<region>.aoss.amazonaws.com)"
        )


def check_not_example(config: Config, example: Config, path: Path) -> None:
    """Refuse to synthesize a configuration that still holds the example's placeholders."""
    same = [k for k in PLACEHOLDER_KEYS if values_at(config, k) & values_at(example, k)]
    if config.aws is not None and (config.aws.create_domain or config.aws.create_collection):
        same = [k for k in same if k != "opensearch.url"]  # replaced by the created domain's URL
    if same:
        verb = "holds" if len(same) == 1 else "hold"
        raise SystemExit(
            f"{path}: {', '.join(same)} still {verb} the placeholders of {EXAMPLE_CONFIG.name}: "
            "set your own in a copy and synthesize it with -c icecdc:config=path/to/your.yaml "
            "(-c icecdc:example=true synthesizes the example as it is)"
        )


def values_at(config: Config, key: str) -> set[str]:
    """The values at `key` (dotted; a list gives each of its items), or none when unset."""
    value: object = config
    for part in key.split("."):
        value = getattr(value, part, None)
    if value is None:
        return set()
    return {str(v) for v in value} if isinstance(value, tuple | list) else {str(value)}


def check_planner_applies(config: Config) -> None:
    """A planner that applies small batches must be able to finish any pass it starts: the engine's
    choice must be by size (`auto`), and the largest in-process pass must fit the time the planner
    keeps for one (icecdc.aws.contract.PASS_RESERVE_SECONDS), at the slowest rate measured
    in-process."""
    engine = config.engine
    if engine.use == EngineChoice.IN_PROCESS:
        raise SystemExit(
            "engine.use: in_process with aws.planner_applies: the planner Lambda would apply passes of any size (an "
            "export, a backlog) within its 5-minute timeout; use engine.use: auto (the limits decide) or set "
            "aws.planner_applies: false"
        )
    # the planner's worker processes: its memory's whole vCPUs (one at PLANNER_MEMORY_MB), as at run time
    rate = IN_PROCESS_ROWS_PER_SECOND * min(engine.in_process_workers or LAMBDA_CORES, LAMBDA_CORES)
    seconds = engine.in_process_max_rows / rate
    if engine.use == EngineChoice.AUTO and seconds > PASS_RESERVE_SECONDS:
        raise SystemExit(
            f"engine.in_process_max_rows {engine.in_process_max_rows:,}: such a pass may take {seconds:.0f} s in the "
            f"planner Lambda (at {rate:,} rows/s), more than the {PASS_RESERVE_SECONDS:.0f} s it "
            f"keeps for a pass; lower it to {int(PASS_RESERVE_SECONDS * rate):,} or less, or set "
            "aws.planner_applies: false"
        )
