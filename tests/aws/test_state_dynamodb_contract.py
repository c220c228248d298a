"""The shared state-store contract suite (tests/test_state_contract.py), run against DynamoDB in moto.

Every name of the contract module is taken over except its `store` fixture, which is replaced by
one that gives a DynamoDbStateStore on a fresh table: the same test functions, another store.
"""

from __future__ import annotations

from typing import Callable, Iterator

import pytest

from icecdc.state_dynamodb import DynamoDbStateStore
from tests.aws.conftest import REGION

_contract = pytest.importorskip("tests.test_state_contract", reason="the core contract suite is not there yet")
globals().update({name: value for name, value in vars(_contract).items() if not name.startswith("__") and name != "store"})


@pytest.fixture
def store(state_table_factory: Callable[[], str], moto_url: str) -> Iterator[DynamoDbStateStore]:
    dynamodb = DynamoDbStateStore(state_table_factory(), region=REGION, endpoint_url=moto_url)
    yield dynamodb
    dynamodb.close()
