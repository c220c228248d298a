"""A table's index as icecdc keeps it: an alias over generations `<index>-<n>`, and its lifecycle.

**Identity.** A checkpoint records the index's UUID (`index.uuid` in its settings). When the index
is deleted, or deleted and created again, behind icecdc's back, the UUID no longer matches: writing
the next changes into it would leave an index with only those documents, so the table is exported
again.

**Generations.** A generation carries icecdc's marker (the alias, the table's catalog, identifier
and UUID in the mapping's `_meta`), so no other index is ever taken for one. A rebuild writes the
next generation while the alias serves the current one, then swaps the alias in one request.

**Ownership.** An index or alias under the name that is not this table's
(`icecdc.destination.index.ownership`) is refused before anything is written, or, on the user's
explicit opt-in, taken over: a concrete index is kept under another name first, an alias's indexes
stay where they are.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from opensearchpy import NotFoundError, OpenSearch
from opensearchpy.exceptions import ConnectionError as OpenSearchConnectionError
from opensearchpy.exceptions import TransportError

from icecdc.destination.capabilities import capabilities_of
from icecdc.destination.index.indices import (
    TEMPLATE_ALIASES,
    add_missing_fields,
    check_template,
    index_uuid,
    mapping_conflicts,
    wait_for_copies,
)
from icecdc.destination.index.mappings import IndexSpec, Mapping
from icecdc.destination.index.ownership import (
    KEPT_SUFFIX,
    MARKER,
    NameHolder,
    Owner,
    foreign,
    held,
    marker,
    recorded_marker,
    refusal,
)
from icecdc.errors import IndexNotOwned, IndexStateError, SinkError
from icecdc.model import Checkpoint, PassPoint, Probe
from icecdc.verdict import IndexFound, replaced, reshaped, unfinished

log = logging.getLogger(__name__)

# What an index under construction runs with until its swap: no refreshes, no replicas to copy to.
BUILD_SETTINGS: Mapping = {"refresh_interval": "-1", "number_of_replicas": 0}
# Settings that make an index, or every index of the cluster, refuse writes.
INDEX_WRITE_BLOCKS = (
    "index.blocks.write",
    "index.blocks.read_only",
    "index.blocks.read_only_allow_delete",
)
CLUSTER_WRITE_BLOCKS = ("cluster.blocks.read_only", "cluster.blocks.read_only_allow_delete")


def generation(index: str, number: int) -> str:
    """The name of the index's generation `number`, counted from 1.

    It is the concrete index the alias `index` names.
    """
    return f"{index}-{number}"


def generation_number(index: str, concrete: str) -> int | None:
    """`concrete`'s generation of `index`.

    It is 0 for a pre-alias index named `index` itself, and None for another index.
    """
    if concrete == index:
        return 0
    number = concrete.removeprefix(f"{index}-")
    return (
        int(number)
        if concrete.startswith(f"{index}-") and number.isdigit() and not number.startswith("0")
        else None
    )


@dataclass(frozen=True)
class IndexAlias:
    """A table's index as icecdc keeps it: the alias `name` over its generations, on `client`.

    `owner` is the table whose index it is, recorded in the generations it creates. When it is None,
    only the alias is recorded, and any generation of the alias is taken for the table's.
    """

    client: OpenSearch
    name: str
    owner: Owner | None = None

    # -- identity ----------------------------------------------------------------------------

    def uuid(self) -> str | None:
        """The UUID of the index the alias names; None when there is none."""
        return index_uuid(self.client, self.name)

    def current(self) -> str | None:
        """The concrete index searches of the alias read; None when there is none.

        It is the alias's index, or a concrete index named like the alias, made by an icecdc before
        generations or auto-created by a write.
        """
        try:
            found = self.client.indices.get_alias(name=self.name)
        except NotFoundError:
            found = {}
        if len(found) > 1:
            raise IndexStateError(
                f"alias {self.name!r} names {len(found)} indices ({', '.join(sorted(found))}); "
                "icecdc writes to exactly one"
            )
        if found:
            return str(next(iter(found)))
        return self.name if self.client.indices.exists(index=self.name) else None

    def generations(self) -> dict[str, str]:
        """Every generation of the alias that exists, with its uuid.

        A generation is an index named `<name>-<n>` whose marker names the alias. Another index of
        that name pattern, another table's or a user's, is never one.
        """
        try:
            found = self.client.indices.get(index=f"{self.name}-*")
        except NotFoundError:
            return {}
        return {
            name: str(body["settings"]["index"].get("uuid", ""))
            for name, body in found.items()
            if generation_number(self.name, name) and self._marked(body)
        }

    def _marked(self, body: Mapping) -> bool:
        recorded = recorded_marker(body)
        if recorded is None or recorded.get("index") != self.name:
            return False
        return self.owner is None or self.owner.owns(recorded)

    # -- ownership ---------------------------------------------------------------------------

    def holder(self) -> NameHolder | None:
        """What holds the name: an alias and its indexes, or an index; None: nothing."""
        try:
            found = self.client.indices.get(index=self.name)
        except NotFoundError:
            return None
        indexes = tuple(held(name, body) for name, body in sorted(found.items()))
        return NameHolder(list(found) != [self.name], indexes)

    def refused(self, owner: Owner, known: AbstractSet[str]) -> str:
        """Why a pass refuses the index in `claim`; "" when it does not.

        It is "" with a warning too when the index cannot be read. It answers the planner's and
        `status`'s questions.
        """
        return self._or_unknown("whose it is", lambda: self._refusal(owner, known))

    def _refusal(self, owner: Owner, known: AbstractSet[str]) -> str:
        return refusal(self.holder(), self.name, owner, known)

    def claim(self, owner: Owner, known: AbstractSet[str], takeover: bool = False) -> None:
        """Raise IndexNotOwned when the name holds an index or alias that is not `owner`'s.

        Its marker says whose it is, or `known` does: the uuids the table's state names. With
        `takeover`, the user's opt-in, it frees the name instead with `take_over`. It only reads
        when the name is the table's.
        """
        holder = self.holder()
        refused = refusal(holder, self.name, owner, known)
        if not refused:
            return
        if not takeover or holder is None:
            raise IndexNotOwned(refused)
        self.take_over(holder, [h.name for h in foreign(holder, self.name, owner, known)])

    def take_over(self, holder: NameHolder, others: list[str]) -> None:
        """Free the name for icecdc's alias.

        An alias is removed from the indexes it names, which stay as they are. A concrete index is
        copied, with its mapping and settings, to `<name>-preicecdc-<UTC time>`, then deleted once
        the copy holds every document.
        """
        if holder.alias:
            actions = [{"remove": {"index": h.name, "alias": self.name}} for h in holder.indexes]
            self.client.indices.update_aliases(body={"actions": actions})
            log.warning(
                "index %r: taken over (index_takeover); the alias left %s, which stay as they were",
                self.name,
                ", ".join(others),
            )
            return
        kept = f"{self.name}{KEPT_SUFFIX}{datetime.now(UTC).strftime('%Y%m%d%H%M%S')}"
        documents = _copy_index(self.client, self.name, kept)
        self.client.indices.delete(index=self.name)
        log.warning(
            "index %r: taken over (index_takeover); its old index is kept as %r (%d documents)",
            self.name,
            kept,
            documents,
        )

    def leftovers(self) -> list[str]:
        """The generations the alias does not name.

        They are a rebuild's, under way or abandoned, or the old one a swap did not get to delete.
        """
        current = self.current()
        return sorted(name for name in self.generations() if name != current)

    def delete_leftovers(self) -> list[str]:
        """Delete the generations the alias does not name; return them.

        Call it only when no rebuild is under way.
        """
        leftovers = self.leftovers()
        for name in leftovers:
            log.info(
                "index %r: deleting generation %r, which the alias does not name", self.name, name
            )
            self.client.indices.delete(index=name, ignore=404)
        return leftovers

    # -- what a run left behind --------------------------------------------------------------

    def unfinished(self, checkpoint: Checkpoint | None) -> str:
        """Why the index needs a pass although no work item is pending; "" when it does not.

        The reasons are a rebuild's swap not made, the index deleted or replaced, and a generation
        left over. An index that cannot be read is reported as fine, with a warning: the next
        commit's pass finds it.
        """
        return self._or_unknown(
            "whether it is as the checkpoint left it", lambda: self._unfinished(checkpoint)
        )

    def _or_unknown(self, question: str, ask: Callable[[], str]) -> str:
        """`ask()`, or "" with a warning when the index cannot be read.

        It serves the planner's questions, which the pass asks again, and fails on, when it runs.
        """
        try:
            return ask()
        except (TransportError, SinkError) as exc:
            log.warning("index %r: cannot tell %s (%s)", self.name, question, exc)
            return ""

    def _unfinished(self, checkpoint: Checkpoint | None) -> str:
        against = self._against(checkpoint)
        if checkpoint is None or against is None:
            return ""
        found, built = against
        swapped = not built and found == checkpoint.index_uuid  # only then are leftovers asked
        leftovers = tuple(self.leftovers()) if swapped else ()
        index = IndexFound(found, tuple(built), leftovers)
        return unfinished(self.name, checkpoint.index_uuid, index)

    def _against(self, checkpoint: Checkpoint | None) -> tuple[str | None, list[str]] | None:
        """The uuid the alias names, and the generations a rebuild built for the checkpoint.

        The generations are read only when the uuid is not the checkpoint's. The answer is None
        when the checkpoint names no index.
        """
        if checkpoint is None or not checkpoint.index_uuid:
            return None
        found = self.uuid()
        if found == checkpoint.index_uuid:
            return found, []
        return found, [
            name for name, uuid in self.generations().items() if uuid == checkpoint.index_uuid
        ]

    def replaced_since(self, checkpoint: Checkpoint | None, spec: IndexSpec) -> str:
        """Why the checkpoint's documents are no longer in the index ("" when they are).

        A rebuild records its new generation in the checkpoint before it swaps the alias: when a run
        stopped in between, the swap is done now."""
        against = self._against(checkpoint)
        if checkpoint is None or against is None:
            return ""
        found, built = against
        if built:
            log.warning(
                "index %r: a rebuild stopped before its swap; swapping to generation %r now",
                self.name,
                built[0],
            )
            self.finish(built[0], spec)
            found = self.uuid()
        return replaced(self.name, checkpoint.index_uuid, found)

    def unaccounted(
        self, written: AbstractSet[str] = frozenset(), *, tolerant: bool = False
    ) -> str:
        """Why the index holds writes no checkpoint accounts for.

        The answer is "" when there is no index, or it is one of `written`: the uuids a first
        export's earlier passes wrote to. An empty index counts too: OpenSearch keeps a deleted
        document's version, and refuses an export's write of the row at an older one (a rollback
        brings such rows back). It is asked when the table has no checkpoint, as its state store
        was lost, or its state is kept under another key because the table moved into or out of
        `indexes`. A first export into such an index would leave the documents of rows gone since,
        so it builds a new generation instead. With `tolerant`, an index that cannot be read is
        reported as holding none, with a warning, as `unfinished` does for the planner's question.
        """
        if tolerant:
            return self._or_unknown("whether it holds documents", lambda: self.unaccounted(written))
        uuid = self.uuid()
        if uuid is None or uuid in written:
            return ""
        try:  # so that the count sees the last writes; an index that refuses it is counted as it is
            if capabilities_of(self.client).refresh:
                self.client.indices.refresh(index=self.name)
        except TransportError as exc:
            log.debug("index %r: not refreshed before counting (%s)", self.name, exc)
        held = int(self.client.count(index=self.name)["count"])
        # with none, its deletes' versions outlive the documents and would refuse older rows
        what = f"holds {held} documents" if held else "may hold deletes"
        return f"index {self.name!r} {what} no checkpoint of the table accounts for"

    def shape_changed(self, shape: str) -> str:
        """Why the index holds another shape of the table than `shape`; "" when it holds this one.

        `shape` is a `Shape.fingerprint`. A generation records its shape in icecdc's marker. A
        concrete index named like the alias, made by an icecdc before generations or by a stray
        write, records none and is taken to hold every column and row. For another shape it is
        rebuilt into a generation, as a marked generation of another shape is.
        """
        current = self.current()
        recorded = self._recorded_shape(current) if current not in (None, self.name) else ""
        return reshaped(self.name, current, recorded, shape)

    def _recorded_shape(self, generation: str) -> str:
        """The shape a generation's marker records: the shape it was built for.

        The shape is a `Shape.fingerprint`.
        """
        meta = (
            self.client.indices.get_mapping(index=generation)
            .get(generation, {})
            .get("mappings", {})
            .get("_meta")
            or {}
        )
        return meta.get(MARKER, {}).get("shape", "") if isinstance(meta.get(MARKER), dict) else ""

    def mapping_changed(self, spec: IndexSpec) -> bool:
        """Whether the index the alias names maps a field otherwise than `spec`.

        Every pass of a rewrite checks it again, as the current generation does not change until
        the swap.
        """
        if self.current() is None:
            return False
        conflicts = mapping_conflicts(self.client, self.name, spec)
        if conflicts:
            log.info(
                "index %r maps %s otherwise than the schema: rebuilding it in a new generation",
                self.name,
                ", ".join(conflicts),
            )
        return bool(conflicts)

    # -- writing -----------------------------------------------------------------------------

    def check_writable(self, index_exists: bool = True) -> None:
        """Raise IndexStateError naming the block when the index or the cluster refuses writes.

        The index is checked when it exists. Settings that cannot be read, by a role allowed to
        write but not to read them or on a service without the API, skip their check with a
        warning: the bulk answers' block errors still fail the batch.
        """
        blocks: list[str] = []
        cluster = {}  # a Serverless collection has no cluster settings
        if capabilities_of(self.client).cluster_info:
            cluster = _read_settings(
                lambda: self.client.cluster.get_settings(flat_settings=True), "the cluster"
            )
        for scope in ("persistent", "transient"):
            blocks += [
                f"{name} ({scope})"
                for name in CLUSTER_WRITE_BLOCKS
                if _is_true(cluster.get(scope, {}).get(name))
            ]
        if index_exists:
            indices = _read_settings(
                lambda: self.client.indices.get_settings(index=self.name, flat_settings=True),
                f"index {self.name!r}",
            )
            for concrete, settings in indices.items():
                # an alias names its indices
                named = f" on index {concrete!r}" if concrete != self.name else ""
                blocks += [
                    f"{name}{named}"
                    for name in INDEX_WRITE_BLOCKS
                    if _is_true(settings.get("settings", {}).get(name))
                ]
        if blocks:
            raise IndexStateError(
                f"OpenSearch index {self.name!r} does not accept writes: "
                f"{', '.join(blocks)} is set; nothing was written "
                "(a flood-stage disk watermark sets read_only_allow_delete: "
                "free disk space, then clear the block)"
            )

    def ensure(self, spec: IndexSpec | None = None) -> None:
        """Create the first generation from `spec`, or add the fields of `spec` the index lacks.

        The first generation goes behind the alias when it names no index, so an empty table still
        has one. When it names one, the fields of `spec` its mapping lacks are added: columns a
        schema change added. It raises IndexStateError first when the index or the cluster refuses
        writes, or the spec's index template is missing, so that nothing of the batch is written.
        Without `spec`, OpenSearch's dynamic mapping applies. A concrete index named like the alias,
        made by an icecdc before generations, is written to as it is, until a rebuild replaces it
        with a generation.
        """
        current = self.current()
        self.check_writable(index_exists=current is not None)
        if current is None:
            name = self._create_generation(None, spec or IndexSpec())
            self.client.indices.put_alias(index=name, name=self.name)
            log.info("index %r: created generation %r", self.name, name)
        elif spec is not None:
            add_missing_fields(self.client, self.name, spec)

    # -- rebuilding --------------------------------------------------------------------------

    def resumable(self, spec: IndexSpec, resumable: AbstractSet[str]) -> tuple[str, str] | None:
        """(name, uuid) of the generation a rebuild resumes; None when the rebuild starts a new one.

        It is one the alias does not name whose uuid is in `resumable`, where the rebuild's earlier
        passes wrote. It was built for the shape of `spec`, and its mapping can take `spec`, so it
        is not one a type changed meanwhile. It only reads.
        """
        current = self.current()
        for name, uuid in self.generations().items():
            if name != current and uuid in resumable:
                # its earlier passes wrote another shape
                if self._recorded_shape(name) != spec.shape:
                    log.warning(
                        "index %r: generation %r holds another shape; restarting the rebuild",
                        self.name,
                        name,
                    )
                    continue
                conflicts = mapping_conflicts(self.client, name, spec)
                if not conflicts:
                    return name, uuid
                log.warning(
                    "index %r: generation %r maps %s otherwise than the schema now does; "
                    "restarting the rebuild",
                    self.name,
                    name,
                    ", ".join(conflicts),
                )
        return None

    def start_rebuild(self, spec: IndexSpec, resumable: AbstractSet[str]) -> str:
        """The generation a rebuild writes to while the current one keeps serving searches.

        It first checks that the cluster accepts writes. A rebuild is the only way to let versions
        go backwards.

        The `resumable` generation is resumed, its mapping brought up to `spec` for columns added
        meanwhile. Otherwise every generation the alias does not name is deleted and the next one is
        created from `spec`. That is the configured mapping and settings, or template, never what
        the old index had, so a reset also applies a changed configuration. It has `BUILD_SETTINGS`
        until `finish`, but for an index from a template, whose settings are the template's.
        """
        self.check_writable(index_exists=False)
        resumed = self.resumable(spec, resumable)
        if resumed is not None:
            log.info("index %r: resuming the rebuild into generation %r", self.name, resumed[0])
            add_missing_fields(self.client, resumed[0], spec)
            return resumed[0]
        current = self.current()
        self.delete_leftovers()
        name = self._create_generation(current, spec)
        if spec.template is None and capabilities_of(self.client).managed_settings:
            self.client.indices.put_settings(index=name, body={"index": BUILD_SETTINGS})
        serving = f"searches read {current!r}" if current else "no index serves searches"
        log.info("index %r: building generation %r (%s until the swap)", self.name, name, serving)
        return name

    def finish(self, name: str, spec: IndexSpec, probe: Probe | None = None) -> None:
        """Restore the generation `name`'s settings and swap the alias to it in one atomic request.

        Then it deletes the generation the alias named. A pre-alias index named like the alias is
        deleted in the swap's own request with `remove_index`. Searches see the old index, then the
        new one, never neither.
        """
        self._settle(name, spec)
        current = self.current()
        actions: list[Mapping] = [{"add": {"index": name, "alias": self.name}}]
        if current == self.name:
            actions.insert(0, {"remove_index": {"index": self.name}})
        elif current is not None and current != name:
            actions.insert(0, {"remove": {"index": current, "alias": self.name}})
        self.client.indices.update_aliases(body={"actions": actions})
        if current is None:
            log.info("index %r: generation %r swapped in (no index served before)", self.name, name)
        else:
            log.info("index %r: swapped from %r to generation %r", self.name, current, name)
        if probe is not None:
            probe(PassPoint.SWAPPED)
        if current is not None and current not in (self.name, name):
            self.client.indices.delete(index=current, ignore=404)

    def _settle(self, name: str, spec: IndexSpec) -> None:
        """Make searches find every document of generation `name`, on every copy.

        A domain restores the generation's settings, refreshes and waits for the replicas. A
        Serverless collection manages both itself and has no refresh: the swap waits until the
        last writes are visible to search.
        """
        capabilities = capabilities_of(self.client)
        if not capabilities.managed_settings:
            log.info(
                "index %r: waiting %.0f s for generation %r's writes to be visible to search",
                self.name,
                capabilities.visibility_seconds,
                name,
            )
            time.sleep(capabilities.visibility_seconds)
            return
        if spec.template is None:
            restored = {k: _setting(spec.settings, k) for k in BUILD_SETTINGS}
            self.client.indices.put_settings(index=name, body={"index": restored})
        self.client.indices.refresh(index=name)
        wait_for_copies(self.client, name)

    def _create_generation(self, after: str | None, spec: IndexSpec) -> str:
        """Create the first free generation numbered above `after`'s, with icecdc's marker.

        The answer is its name. A name taken by an index that is not a generation of the alias is
        skipped.
        """
        number = (generation_number(self.name, after) or 0) + 1 if after is not None else 1
        number = max(
            [number, *((generation_number(self.name, g) or 0) + 1 for g in self.generations())]
        )
        while self.client.indices.exists(index=generation(self.name, number)):
            number += 1
        name = generation(self.name, number)
        if spec.template is not None:
            check_template(self.client, spec.template, name)
        body = dict(spec.body() or {})
        table_uuid = self.owner.table_uuid if self.owner else spec.table_uuid
        meta = marker(self.name, table_uuid, spec.shape, self.owner)
        body["mappings"] = {**(body.get("mappings") or {}), "_meta": meta}
        self.client.indices.create(index=name, body=body)
        taken = sorted(
            a
            for found in self.client.indices.get_alias(index=name).values()
            for a in found.get("aliases") or {}
        )
        if taken:  # a template we did not name (a component, another pattern) gave it aliases
            self.client.indices.delete(index=name, ignore=404)
            raise IndexStateError(
                TEMPLATE_ALIASES.format(template=f"matching {name!r}", aliases=", ".join(taken))
            )
        return name


# Settings OpenSearch sets on an index itself: a copy gets its own.
_OWN_SETTINGS = (
    *("uuid", "creation_date", "provided_name", "version"),
    *("resize", "routing", "blocks", "replication"),
)


def _copy_index(client: OpenSearch, source: str, target: str) -> int:
    """Copy the index `source` to a new index `target` with its mapping and settings.

    The answer is the documents it holds. It copies with `_reindex`, as clone needs a write block
    and not every service has it. It raises IndexStateError, deleting nothing, when the copy does
    not hold every document.
    """
    body = client.indices.get(index=source)[source]
    found = body.get("settings", {}).get("index") or {}
    settings = {k: v for k, v in found.items() if k not in _OWN_SETTINGS}
    created = {"mappings": body.get("mappings") or {}, "settings": {"index": settings}}
    client.indices.create(index=target, body=created)
    copy = {"source": {"index": source}, "dest": {"index": target}}
    client.reindex(body=copy, refresh=True, request_timeout=3600)
    client.indices.refresh(index=source)
    documents, copied = (int(client.count(index=name)["count"]) for name in (source, target))
    if copied != documents:
        raise IndexStateError(
            f"index {source!r}: its copy {target!r} holds {copied} of its {documents} documents; "
            "the index was not taken over (nothing of it was deleted)"
        )
    return documents


def _read_settings(read: Callable[[], dict[str, Any]], what: str) -> dict[str, Any]:
    try:
        return read()
    except OpenSearchConnectionError:
        raise
    except TransportError as exc:
        log.warning(
            "cannot read the settings of %s to check for write blocks (%s %s); writing anyway",
            what,
            exc.status_code,
            exc.error,
        )
        return {}


def _is_true(value: Any) -> bool:
    return str(value).lower() == "true"  # settings come back as strings


def _setting(settings: Mapping, name: str) -> Any:
    """The value `settings` (nested or flat) gives the index setting `name`; None: the default."""
    nested = settings.get("index")
    for value in (
        nested.get(name) if isinstance(nested, dict) else None,
        settings.get(f"index.{name}"),
        settings.get(name),
    ):
        if value is not None:
            return value
    return None
