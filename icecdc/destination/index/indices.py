"""One concrete index in OpenSearch, by name: its uuid, its creation, its mapping, its copies.

It is created from an `IndexSpec` or a template. This module finds the fields its
mapping lacks or maps otherwise, and waits for its copies. What an alias and its
generations are is `icecdc.destination.index.alias`'s.
"""

from __future__ import annotations

import logging
from fnmatch import fnmatchcase

from opensearchpy import NotFoundError, OpenSearch
from opensearchpy.exceptions import RequestError, TransportError

from icecdc.destination.index.mappings import IndexSpec, field_paths, missing
from icecdc.errors import IndexStateError

log = logging.getLogger(__name__)


def index_uuid(client: OpenSearch, index: str) -> str | None:
    """The UUID of the index `index` names, or None when there is none.

    `index` names an index, or an alias of exactly one.
    """
    try:
        found = client.indices.get_settings(index=index)
    except NotFoundError:
        return None
    uuids = sorted({settings["settings"]["index"].get("uuid", "") for settings in found.values()})
    if len(uuids) != 1:
        raise IndexStateError(
            f"index {index!r} names {len(found)} indices ({', '.join(sorted(found))}); "
            "icecdc writes to exactly one"
        )
    return str(uuids[0])


def check_template(client: OpenSearch, template: str, index: str) -> None:
    """Raise IndexStateError unless the index template `template` exists and matches `index`.

    The template may be composable or legacy. Otherwise the index would be
    created with OpenSearch's dynamic mapping.
    """
    try:
        found = client.indices.get_index_template(name=template)["index_templates"]
        patterns = [p for t in found for p in t["index_template"].get("index_patterns", [])]
        aliases = [
            a
            for t in found
            for a in (t["index_template"].get("template") or {}).get("aliases") or {}
        ]
    except NotFoundError:
        try:
            legacy = client.indices.get_template(name=template).values()
            patterns = [p for t in legacy for p in t.get("index_patterns", [])]
            aliases = [a for t in legacy for a in t.get("aliases") or {}]
        except NotFoundError:
            raise IndexStateError(
                f"index template {template!r} (for index {index!r}) does not exist; nothing "
                "was written"
            ) from None
    if aliases:
        raise IndexStateError(
            TEMPLATE_ALIASES.format(template=repr(template), aliases=", ".join(sorted(aliases)))
        )
    patterns = [patterns] if isinstance(patterns, str) else patterns
    if not any(fnmatchcase(index, pattern) for pattern in patterns):
        raise IndexStateError(
            f"index template {template!r} does not apply to index {index!r} (its patterns: "
            f"{', '.join(patterns)}); "
            "nothing was written"
        )


def check_pipeline(client: OpenSearch, pipeline: str, index: str) -> None:
    """Raise IndexStateError unless the ingest pipeline `pipeline` exists.

    OpenSearch would refuse every write through a missing one, one bulk item at a time.
    """
    try:
        client.ingest.get_pipeline(id=pipeline)
    except NotFoundError:
        raise IndexStateError(
            f"ingest pipeline {pipeline!r} (for index {index!r}) does not exist; nothing was "
            "written"
        ) from None


# Every generation would get a template's aliases at creation: searches would read two generations
# during a rebuild, and the alias would name two indices.
TEMPLATE_ALIASES = (
    "index template {template} declares aliases ({aliases}): every generation icecdc creates "
    "would get them, "
    "so searches would read two generations during a rebuild; remove the aliases from the template "
    "(icecdc manages the index's alias); nothing was written"
)


def create_index(client: OpenSearch, index: str, spec: IndexSpec | None) -> None:
    """Create `index` from `spec`; an index created meanwhile by another writer is fine.

    A `spec` of None leaves OpenSearch's defaults and dynamic mapping.
    """
    if spec is not None and spec.template is not None:
        check_template(client, spec.template, index)
    try:
        client.indices.create(index=index, body=spec.body() if spec is not None else None)
    except RequestError as exc:
        if exc.error != "resource_already_exists_exception":
            raise


def add_missing_fields(client: OpenSearch, index: str, spec: IndexSpec) -> None:
    """Put the fields of `spec` the index does not map yet into its mapping.

    These are columns a schema change added. They go in before documents with them are written, as a
    strict mapping refuses them otherwise.

    A field the index maps differently is left as it is, with a warning: a type change, or an index
    mapped by an earlier icecdc or by hand. OpenSearch cannot change a field's mapping in place, and
    documents whose values do not fit it are refused as they always were. An index made from a
    template is the template's: icecdc leaves its mapping alone.
    """
    if spec.mappings is None:
        return
    current = client.indices.get_mapping(index=index)
    for concrete, found in current.items():
        mapped = found.get("mappings", {}).get("properties", {})
        additions, conflicts = missing(mapped, spec.mappings.get("properties", {}))
        if conflicts:
            log.warning(
                "index %r maps %s otherwise than the table's schema now does; documents "
                "whose values do not fit "
                "the index's mapping are refused (`icecdc repair --table TABLE --rebuild`, for the "
                "table that writes index %r, rebuilds it with the new mapping, without downtime)",
                concrete,
                ", ".join(conflicts),
                index,
            )
        if additions:
            log.info(
                "index %r: adding %s to the mapping", concrete, ", ".join(field_paths(additions))
            )
            client.indices.put_mapping(index=concrete, body={"properties": additions})


def mapping_conflicts(client: OpenSearch, index: str, spec: IndexSpec) -> list[str]:
    """The fields the index `index` maps otherwise than `spec`, such as int where `spec` has long.

    OpenSearch cannot change them in place, so a rewrite resync builds a new generation instead.
    """
    if spec.mappings is None:
        return []
    conflicts: list[str] = []
    for found in client.indices.get_mapping(index=index).values():
        mapped = found.get("mappings", {}).get("properties", {})
        conflicts += missing(mapped, spec.mappings.get("properties", {}))[1]
    return conflicts


# Seconds a swap waits for the new generation's shards to be active: primaries, and replicas
# where the cluster has the nodes to place them.
COPIES_WAIT_SECONDS = 120
TIMED_OUT = 408


def wait_for_copies(client: OpenSearch, name: str) -> None:
    """Wait until the index's copies are active; raise IndexStateError when they are not in time.

    The copies are its primaries, and its replicas where the cluster has nodes enough to place them.
    A one-node cluster never has.
    """
    health = client.cluster.health()
    nodes = int(health.get("number_of_data_nodes", health.get("number_of_nodes", 1)))
    found = client.indices.get_settings(index=name, flat_settings=True)[name]["settings"]
    replicas = int(found.get("index.number_of_replicas", 1))
    status = "green" if replicas < nodes else "yellow"
    try:
        # The wait's own `timeout` in the URL: opensearch-py takes that
        # parameter for its request timeout.
        client.transport.perform_request(
            "GET",
            f"/_cluster/health/{name}?wait_for_status={status}&timeout={COPIES_WAIT_SECONDS}s",
            params={"request_timeout": COPIES_WAIT_SECONDS + 30},
        )
    except TransportError as exc:
        if exc.status_code != TIMED_OUT:
            raise
        raise IndexStateError(
            f"index {name!r} is not {status} after {COPIES_WAIT_SECONDS} s ({replicas} "
            f"replicas, {nodes} data nodes); "
            "the alias was not swapped: searches would miss documents"
        ) from None
