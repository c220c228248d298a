"""The end-to-end tests' destination: drawn per test from its node id, forced by ICECDC_DESTINATION."""

from __future__ import annotations

import pytest

from tests.support.destinations import Destination, destination_for, drawn_for, forced

NODES = [f"tests/test_sync.py::test_{n}[spark]" for n in range(300)]


def test_a_third_of_the_tests_draw_serverless_and_the_same_on_every_run() -> None:
    drawn = [drawn_for(node) for node in NODES]
    assert drawn == [drawn_for(node) for node in NODES]
    assert 0.25 < drawn.count(Destination.SERVERLESS) / len(NODES) < 0.42


def test_the_environment_forces_a_kind_except_for_domain_only_tests(monkeypatch: pytest.MonkeyPatch) -> None:
    node = next(n for n in NODES if drawn_for(n) == Destination.DOMAIN)
    monkeypatch.setenv("ICECDC_DESTINATION", "serverless")
    assert destination_for(node, domain_only=False, drawn=False) == Destination.SERVERLESS
    assert destination_for(node, domain_only=True, drawn=True) == Destination.DOMAIN
    monkeypatch.setenv("ICECDC_DESTINATION", "drawn")
    assert destination_for(node, domain_only=False, drawn=True) == Destination.DOMAIN
    assert destination_for(node, domain_only=False, drawn=False) == Destination.DOMAIN


def test_an_unknown_kind_is_refused_naming_the_variable() -> None:
    with pytest.raises(ValueError, match="ICECDC_DESTINATION='aoss': expected one of domain, serverless, drawn"):
        forced("aoss")
