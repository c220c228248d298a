"""Where checkpoints and work items live: the `StateStore` contract, its SQLite (local) and
DynamoDB (AWS, `icecdc.state.dynamodb`, imported only when configured: boto3 is optional)
implementations, the factory and the processing lease."""

from icecdc.state.factory import open_state_store
from icecdc.state.lease import Lease
from icecdc.state.scoped import ScopedStore, index_stores
from icecdc.state.sqlite import SqliteStateStore
from icecdc.state.store import PendingOnce, PendingPage, StateStore

__all__ = [
    "Lease",
    "PendingOnce",
    "PendingPage",
    "ScopedStore",
    "SqliteStateStore",
    "StateStore",
    "index_stores",
    "open_state_store",
]
