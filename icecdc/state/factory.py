"""The store a configuration names."""

from __future__ import annotations

from icecdc.config import DynamoDbStateConfig, StateConfig
from icecdc.state.sqlite import SqliteStateStore
from icecdc.state.store import StateStore

SECONDS_PER_DAY = 24 * 3600


def open_state_store(config: StateConfig) -> StateStore:
    """The store the configuration names."""
    if isinstance(config, DynamoDbStateConfig):
        from icecdc.state.dynamodb import DynamoDbStateStore  # boto3 is an optional dependency

        return DynamoDbStateStore(
            state_table=config.table,
            region=config.region,
            endpoint_url=config.endpoint_url,
            done_ttl_seconds=config.done_ttl_days * SECONDS_PER_DAY,
        )
    return SqliteStateStore(config.path)
