"""One index's destination for a run: opened once per index per run, claimed once.

It holds the client (its secrets read once, when it is opened), the configuration with those
secrets resolved (for what runs elsewhere: Spark's executors), what the destination can do, the
index's dead letters, and the index's alias once its name is claimed. A run asks it for each of
them, instead of opening a client, reading a secret or claiming the name again at every step.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field

from icecdc.config import OpenSearchConfig
from icecdc.deadletters import DeadLetters
from icecdc.destination.capabilities import Capabilities, capabilities_of
from icecdc.destination.client import OpenSearch, open_client
from icecdc.destination.facts import Facts, IndexQuery, read_facts
from icecdc.destination.index import IndexAlias
from icecdc.memo import Memo
from icecdc.secrets import resolved


@dataclass
class Destination:
    """Where a run writes one index: the client, the capabilities, the dead letters, the alias.

    `opensearch`: the section the client was opened from, its secret resolved; `dead_letter`:
    where the run keeps its dead letters, if anywhere.
    """

    client: OpenSearch
    opensearch: OpenSearchConfig | None = None
    dead_letter: str | None = None
    _claimed: IndexAlias | None = field(default=None, repr=False)
    _letters: DeadLetters | None = field(default=None, repr=False)
    # the process that opened the client: a forked worker must not share its connections
    pid: int = field(default_factory=os.getpid, repr=False)

    @classmethod
    def open(cls, config: OpenSearchConfig, dead_letter: str | None = None) -> Destination:
        """The destination `config` names, its secret read and its client opened."""
        config = resolved(config)
        return cls(open_client(config), config, dead_letter)

    def another(self) -> Destination:
        """A destination for another index on the same client: nothing opened or read again."""
        return Destination(self.client, self.opensearch, self.dead_letter)

    @property
    def here(self) -> bool:
        """Whether this is the process that opened the client (not a worker forked from it)."""
        return self.pid == os.getpid()

    @property
    def capabilities(self) -> Capabilities:
        return capabilities_of(self.client)

    @property
    def dead_letters(self) -> DeadLetters | None:
        """The run's dead-letter sink, None without a dead-letter location."""
        if self._letters is None and self.dead_letter is not None:
            self._letters = DeadLetters(self.dead_letter)
        return self._letters

    def claimed(self, claim: Callable[[OpenSearch], IndexAlias]) -> IndexAlias:
        """The index's alias, claimed by `claim` the first time it is asked for, once per run."""
        if self._claimed is None:
            self._claimed = claim(self.client)
        return self._claimed

    def facts(self, query: IndexQuery) -> Facts:
        """Every fact the verdicts need of the claimed index, read in one order (`read_facts`)."""
        assert self._claimed is not None, "the index's name is claimed before its facts are read"
        return read_facts(self._claimed, query)


@dataclass
class Destinations:
    """A command's destinations, one per OpenSearch section, each opened (its secret read) once.

    For a command whose steps each name a section (the doctor), or that opens them from threads
    (the planner's sweep). A secret's refusal is kept too: it costs one read as well.
    """

    dead_letter: str | None = None
    _opened: Memo[OpenSearchConfig, Destination] = field(default_factory=Memo, repr=False)

    def of(self, config: OpenSearchConfig) -> Destination:
        """The destination `config` names, opened on the first call for it."""
        return self._opened.get(config, lambda c: Destination.open(c, self.dead_letter))
