"""One index's destination for a run: opened once per index per run, claimed once.

It holds the client (its secrets read when it is opened), what the destination can do, and the
index's alias once its name is claimed. A run asks it for each of them, instead of opening a
client or claiming the name again at every step.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from icecdc.config import OpenSearchConfig
from icecdc.destination.capabilities import Capabilities, capabilities_of
from icecdc.destination.client import OpenSearch, open_client
from icecdc.destination.facts import Facts, IndexQuery, read_facts
from icecdc.destination.index import IndexAlias


@dataclass
class Destination:
    """Where a run writes one index: the client, the capabilities, the claimed alias."""

    client: OpenSearch
    _claimed: IndexAlias | None = field(default=None, repr=False)

    @classmethod
    def open(cls, config: OpenSearchConfig) -> Destination:
        """The destination `config` names, its client opened."""
        return cls(open_client(config))

    @property
    def capabilities(self) -> Capabilities:
        return capabilities_of(self.client)

    def claimed(self, claim: Callable[[OpenSearch], IndexAlias]) -> IndexAlias:
        """The index's alias, claimed by `claim` the first time it is asked for, once per run."""
        if self._claimed is None:
            self._claimed = claim(self.client)
        return self._claimed

    def facts(self, query: IndexQuery) -> Facts:
        """Every fact the verdicts need of the claimed index, read in one order (`read_facts`)."""
        assert self._claimed is not None, "the index's name is claimed before its facts are read"
        return read_facts(self._claimed, query)
