"""Which kind of destination a test writes to: an OpenSearch domain or a Serverless collection.

The end-to-end modules that say so (`pytestmark = pytest.mark.drawn_destination`) draw it per
test from a stable hash of the test's node id (about a third on Serverless, the same kind on every
run); the others run on a domain until they are looked through. The crash test runs on both.
ICECDC_DESTINATION forces one kind for every test: `domain`, `serverless`, or `drawn` (the
default). A test that asserts what only a domain does (external versions, `_seq_no`, refresh,
scroll, `GET /`) is marked `@pytest.mark.domain_only` and always runs on a domain.
"""

from __future__ import annotations

import hashlib
import os
from enum import StrEnum

ENVIRONMENT = "ICECDC_DESTINATION"
DRAWN = "drawn"
SERVERLESS_SHARE = 3  # one test in this many is drawn on Serverless


class Destination(StrEnum):
    """Where a test's pipeline writes."""

    DOMAIN = "domain"
    SERVERLESS = "serverless"


def forced(value: str | None = None) -> Destination | None:
    """The kind ICECDC_DESTINATION forces (`value` stands for it), or None when tests draw it."""
    chosen = (os.environ.get(ENVIRONMENT, DRAWN) if value is None else value).strip().lower()
    if chosen in ("", DRAWN):
        return None
    try:
        return Destination(chosen)
    except ValueError:
        kinds = ", ".join([*Destination, DRAWN])
        raise ValueError(f"{ENVIRONMENT}={chosen!r}: expected one of {kinds}") from None


def drawn_for(node_id: str) -> Destination:
    """The kind a test draws from its node id: stable across runs, machines and Pythons."""
    digest = hashlib.sha256(node_id.encode()).digest()
    share = int.from_bytes(digest[:8], "big") % SERVERLESS_SHARE
    return Destination.SERVERLESS if share == 0 else Destination.DOMAIN


def destination_for(node_id: str, domain_only: bool, drawn: bool) -> Destination:
    """What a test runs on: a domain when it asserts domain-only behaviour, else the forced kind,
    else its draw when its module draws, else a domain."""
    if domain_only:
        return Destination.DOMAIN
    return forced() or (drawn_for(node_id) if drawn else Destination.DOMAIN)
