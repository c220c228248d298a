"""The shared state-store contract suite (tests/test_state_contract.py), run against DynamoDB in moto.

Every name of the contract module is taken over except its `make_store` fixture, which is replaced
by one that opens clients of one fresh DynamoDB table: the same test functions, another store.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from icecdc.state import StateStore
from icecdc.state.dynamodb import DynamoDbStateStore
from tests.aws.conftest import REGION

_contract = pytest.importorskip("tests.test_state_contract", reason="the core contract suite is not there yet")
globals().update({name: value for name, value in vars(_contract).items() if not name.startswith("__") and name != "make_store"})


@pytest.fixture
def make_store(state_table: str, moto_url: str) -> Iterator[Callable[[], StateStore]]:
    opened: list[StateStore] = []

    def make() -> StateStore:
        opened.append(DynamoDbStateStore(state_table, region=REGION, endpoint_url=moto_url))
        return opened[-1]

    yield make
    for store in opened:
        store.close()
