"""Every fact of an index that the verdicts decide on, read in one place, in one order.

`status` (and the planner, replay, repair), a run before its pass, and the pass before it writes
each ask `read_facts` one `Question`; `icecdc.verdict` decides from the frozen facts it returns.
A fact is read only when the question asks it and the facts before it leave it open:

1. `refused`: whose the name is, as the table's state knows it. STATUS, given the owner: a run
   has claimed the name before it asks.
2. the alias against the checkpoint: STATUS reads what a run left `unfinished` (a swap not made,
   the index deleted or replaced, leftovers); CHECK makes a stopped swap, then reads whether the
   checkpoint's documents were `replaced`. Unless the name was refused.
3. `unaccounted`: with no checkpoint, documents none accounts for. CHECK, unless replaced;
   STATUS of an empty table (an index that cannot be read holds none, with a warning).
4. `reshaped`: once synced, another shape than the configured one. STATUS and CHECK, unless a
   fact above says something, or a rebuild is under way.
5. `versions`: the destination's capabilities; no request. WRITE.
6. `takes_rewrite`: a rewrite in place needs the index's mapping and shape. WRITE, for a rewrite
   that could be made in place.
7. `resumable`: the generation a rebuild's earlier passes wrote. WRITE, for a new generation.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import StrEnum

from icecdc.destination.capabilities import capabilities_of
from icecdc.destination.index import IndexAlias, IndexSpec, Owner
from icecdc.model import Checkpoint, ResyncKind
from icecdc.verdict import DestinationFacts, IndexFacts, needs_generation


class Question(StrEnum):
    """What the caller asks of the index, and so which facts are read."""

    STATUS = "status"  # is there work, and why (`index_verdict`): it only reads
    CHECK = "check"  # what a pass makes of its index before its batch (`pass_verdict`)
    WRITE = "write"  # which copy a pass writes (`copy_to_write`)


@dataclass(frozen=True)
class IndexQuery:
    """What the caller knows of the table's index, for `read_facts`.

    `spec`: the mapping and shape written (STATUS gives only the shape). `owner`: the table, given
    when the name is not claimed. `written`: the uuids of the indexes the pending APPLIED items
    name. `rebuilding`: a rebuild's items are pending. `resync` and `export_anew`: the batch's
    kinds of rebuild, and a first export into a new generation (WRITE). `empty`: the table has
    no snapshot (STATUS).
    """

    question: Question
    checkpoint: Checkpoint | None = None  # not asked by WRITE
    spec: IndexSpec = IndexSpec()
    owner: Owner | None = None
    written: frozenset[str] = frozenset()
    rebuilding: bool = False
    resync: frozenset[ResyncKind] = frozenset()
    export_anew: bool = False
    empty: bool = False

    @property
    def known(self) -> frozenset[str]:
        """The uuids the table's state names: the checkpoint's index, where items were applied."""
        at = self.checkpoint.index_uuid if self.checkpoint is not None else ""
        return frozenset({at} if at else ()) | self.written


@dataclass(frozen=True)
class Facts:
    """What `read_facts` found: the index's facts, the write's, the generation to resume."""

    index: IndexFacts = IndexFacts()
    destination: DestinationFacts = DestinationFacts()
    resumed: tuple[str, str] | None = None  # (name, uuid) of the generation a rebuild resumes


def read_facts(alias: IndexAlias, query: IndexQuery) -> Facts:
    """The facts `query` asks of the index `alias`, read in the module's order, each when open.

    Only CHECK writes: a swap a rebuild recorded but did not make is made first (`replaced`).
    """
    if query.question == Question.WRITE:
        return _write_facts(alias, query)
    status, checkpoint = query.question == Question.STATUS, query.checkpoint
    facts = IndexFacts(rebuilding=query.rebuilding)
    if status and query.owner is not None:
        facts = replace(facts, refused=alias.refused(query.owner, query.known))
    if status and not facts.refused:
        facts = replace(facts, unfinished=alias.unfinished(checkpoint))
    elif not status:
        facts = replace(facts, replaced=alias.replaced_since(checkpoint, query.spec))
    if checkpoint is None and not (facts.refused or facts.replaced) and (query.empty or not status):
        facts = replace(facts, unaccounted=alias.unaccounted(query.written, tolerant=status))
    said = facts.refused or facts.unfinished or facts.replaced or facts.rebuilding
    if checkpoint is not None and not said:
        facts = replace(facts, reshaped=alias.shape_changed(query.spec.shape))
    return Facts(facts)


def _write_facts(alias: IndexAlias, query: IndexQuery) -> Facts:
    """Facts 5 to 7: what the destination can do, whether the index takes a rewrite, a resume."""
    versions = capabilities_of(alias.client).versions
    facts = DestinationFacts(query.resync, query.export_anew, versions=versions)
    # in place unless a type changed, or the configuration reshaped the index meanwhile (a run
    # plans no reset beside a resync)
    if ResyncKind.REWRITE in facts.resync and not needs_generation(facts):
        changed = alias.mapping_changed(query.spec) or alias.shape_changed(query.spec.shape)
        facts = replace(facts, takes_rewrite=not changed)
    if not needs_generation(facts):
        return Facts(destination=facts)
    resumed = alias.resumable(query.spec, query.written)
    return Facts(destination=replace(facts, resumable=resumed is not None), resumed=resumed)
