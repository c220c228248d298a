"""Where checkpoints and work items live.

The package holds the `StateStore` contract, its SQLite implementation for local runs and its
DynamoDB one for AWS, the factory and the processing lease. `icecdc.state.dynamodb` is imported
only when configured, as boto3 is optional.
"""

from icecdc.state.bodies import ItemBodies
from icecdc.state.factory import open_state_store
from icecdc.state.lease import Lease
from icecdc.state.scoped import ScopedStore, index_stores
from icecdc.state.sqlite import SqliteStateStore
from icecdc.state.store import PendingOnce, PendingPage, StateStore

__all__ = [
    "ItemBodies",
    "Lease",
    "PendingOnce",
    "PendingPage",
    "ScopedStore",
    "SqliteStateStore",
    "StateStore",
    "index_stores",
    "open_state_store",
]
