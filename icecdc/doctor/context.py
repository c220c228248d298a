"""What every check reads from: the configuration, the caller's AWS session, and the sources.

The session is in the stack's region. The sources are those that can be replaced
(icecdc.doctor.sources). A run reads the deployed stack and the catalog once.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import boto3
from pyiceberg.catalog import Catalog

from icecdc.catalog import open_catalog
from icecdc.config import Config, OpenSearchConfig
from icecdc.config.deploy import AwsConfig
from icecdc.destination.port import Destination, Destinations
from icecdc.doctor.sources import AccountSettings, GlueVersions, JobsOnVersion, LambdaConcurrency
from icecdc.doctor.stack import DeployedStack, state_table_name
from icecdc.errors import ConfigError
from icecdc.state import StateStore


@dataclass(frozen=True)
class Sources:
    """Replaceable data sources; None: ask AWS (the defaults of icecdc.doctor.sources)."""

    glue_versions: GlueVersions | None = None
    lambda_concurrency: LambdaConcurrency | None = None


@dataclass
class Context:
    config: Config
    session: boto3.Session
    region: str
    sources: Sources = field(default_factory=Sources)
    clock: Callable[[], float] = time.time  # the lag check's now
    _clients: dict[str, Any] = field(default_factory=dict, repr=False)
    _destinations: Destinations = field(default_factory=Destinations, repr=False)

    @classmethod
    def open(
        cls, config: Config, sources: Sources | None = None, clock: Callable[[], float] = time.time
    ) -> Context:
        """The caller's credentials, by the SDK's usual chain, in the stack's region.

        The region is `aws.region`, else the SDK's own from AWS_REGION or the
        profile, as `cdk deploy` resolves it.
        """
        if config.aws is None:
            raise ConfigError(
                "the configuration has no `aws:` section: the doctor checks a deployment "
                "(aws.warehouse_buckets at least)"
            )
        session = (
            boto3.Session(region_name=config.aws.region) if config.aws.region else boto3.Session()
        )
        if not session.region_name:
            raise ConfigError("no region: set aws.region in the configuration, or AWS_REGION")
        return cls(config, session, session.region_name, sources or Sources(), clock)

    @property
    def aws(self) -> AwsConfig:
        assert self.config.aws is not None  # Context.open refuses a configuration without it
        return self.config.aws

    @property
    def stack_name(self) -> str:
        return self.aws.stack_name

    def client(self, service: str) -> Any:
        """One client per service for the run (creating one reads the SDK's models: not free)."""
        if service not in self._clients:
            self._clients[service] = self.session.client(service)
        return self._clients[service]

    def destination(self, config: OpenSearchConfig) -> Destination:
        """One destination per OpenSearch section for the run: its secret read once."""
        return self._destinations.of(config)

    @cached_property
    def account(self) -> str:
        """The caller's account (where `cdk deploy` deploys, unless aws.account says otherwise)."""
        return str(self.client("sts").get_caller_identity()["Account"])

    @cached_property
    def stack(self) -> DeployedStack | None:
        return DeployedStack.read(self.client("cloudformation"), self.stack_name)

    @property
    def catalog_region(self) -> str:
        """The Glue Data Catalog's region: the configuration's, else the stack's.

        The stack's region is where the planner and the jobs run and read the catalog.
        """
        properties = self.config.catalog.properties
        return properties.get("glue.region") or properties.get("client.region") or self.region

    @cached_property
    def catalog(self) -> Catalog:
        return open_catalog(self.config.catalog.revised(**{"glue.region": self.catalog_region}))

    @cached_property
    def state_store(self) -> StateStore:
        """The stack's state table, as the planner and the jobs open it."""
        from icecdc.state.dynamodb import DynamoDbStateStore

        return DynamoDbStateStore(state_table_name(self.stack_name), self.region)

    @property
    def glue_versions(self) -> GlueVersions:
        return self.sources.glue_versions or JobsOnVersion(self.client("glue"))

    @property
    def lambda_concurrency(self) -> LambdaConcurrency:
        return self.sources.lambda_concurrency or AccountSettings(self.client("lambda"))
