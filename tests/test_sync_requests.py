"""State requests of whole syncs with the state in DynamoDB (moto's server, requests counted by
operation, `bench.state_requests`): a one-row commit and a sync with nothing to do cost no more
than before the control plane was batched (23 and 9 requests)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.state_requests import measure
from tests.support.aws import REGION

pytestmark = [pytest.mark.aws, pytest.mark.opensearch]


def test_a_one_row_commit_and_a_sync_with_nothing_to_do_cost_no_more_requests_than_before(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE"):
        monkeypatch.setenv(name, "testing")  # restored after the test (measure sets fake ones)
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    counts = measure(20, None, tmp_path)
    assert counts["one_row_commit"]["total"] <= 23, counts["one_row_commit"]
    assert counts["nothing_to_do"]["total"] <= 9, counts["nothing_to_do"]
    # the checkpoint is read once a round: twice in a sync with nothing to do (before and under the lease)
    assert counts["nothing_to_do"].get("GetItem", 0) <= 3, counts["nothing_to_do"]
