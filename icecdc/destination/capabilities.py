"""What a destination can do, as data: the facts every command and the verdict read of it.

An OpenSearch domain has external versions, scroll, refresh, `GET /` and index settings. A
Serverless search collection documents none of them (docs/deploy.md, "OpenSearch Serverless"):
icecdc writes to it in order under the table's lease, scans with `search_after`, waits for
visibility instead of refreshing, and leaves replicas and the refresh interval to the collection.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from icecdc.config import FENCE_SHARE, OpenSearchConfig

# A Serverless request's timeout
SERVERLESS_REQUEST_SECONDS = 20.0


class DestinationKind(StrEnum):
    """Which search engine the index lives in."""

    DOMAIN = "domain"  # OpenSearch, self-managed or an Amazon OpenSearch Service domain
    SERVERLESS = "serverless"  # an Amazon OpenSearch Serverless search collection


class ScanMethod(StrEnum):
    """How every document of an index is read."""

    SCROLL = "scroll"
    SEARCH_AFTER = "search_after"  # sorted by `_id`, page after page, with no server-side context


@dataclass(frozen=True)
class Capabilities:
    """What the destination offers; what it lacks, icecdc replaces."""

    kind: DestinationKind
    versions: bool  # external versions on writes: replayed or reordered writes never overwrite
    scan: ScanMethod
    refresh: bool  # an explicit refresh makes the writes visible to search at once
    cluster_info: bool  # `GET /` answers with the cluster's name and version
    managed_settings: bool  # shards, replicas and the refresh interval can be set
    # Seconds a write may take to become visible to search where there is no refresh
    visibility_seconds: float = 0.0
    # Seconds the client waits for an answer
    request_seconds: float = 60.0
    # Seconds within which a request that left lands, or never does; a fenced request leaves only
    # while the lease outlives `fence_seconds`. 0: versions order the writes.
    landing_seconds: float = 0.0

    @property
    def fence_seconds(self) -> float:
        """How long the lease must outlive a request that leaves.

        That is its landing bound and a margin for the clocks of two machines.
        """
        return self.landing_seconds * FENCE_SHARE

    @classmethod
    def domain(cls) -> Capabilities:
        """An OpenSearch domain's: everything icecdc uses."""
        return cls(
            DestinationKind.DOMAIN,
            versions=True,
            scan=ScanMethod.SCROLL,
            refresh=True,
            cluster_info=True,
            managed_settings=True,
        )

    @classmethod
    def of(cls, config: OpenSearchConfig) -> Capabilities:
        """The capabilities of the destination `config` names."""
        if config.aws_service != "aoss":
            return cls.domain()
        return cls(
            DestinationKind.SERVERLESS,
            versions=False,
            scan=ScanMethod.SEARCH_AFTER,
            refresh=False,
            cluster_info=False,
            managed_settings=False,
            visibility_seconds=config.visibility_seconds,
            request_seconds=SERVERLESS_REQUEST_SECONDS,
            landing_seconds=config.landing_seconds,
        )


def capabilities_of(client: object) -> Capabilities:
    """What the destination of an OpenSearch client can do: a domain's, unless it says otherwise.

    A client `icecdc.destination.client.open_client` opened carries its destination's.
    """
    found = getattr(client, "capabilities", None)
    return found if isinstance(found, Capabilities) else Capabilities.domain()
