"""The index's lifecycle: its mapping, derived from the Iceberg schema, and its identity.

**Mapping.** `mappings_for` derives an explicit mapping from the table's schema, so that the type of
a field never depends on the first documents OpenSearch sees: each Iceberg type maps to the field
type that keeps its meaning for the JSON `icecdc.documents` writes for it (the README's "Documents"
section documents both tables; keep the three in step). The root is `dynamic: strict`: a field not
in the schema is refused. `index_spec` merges a table's `mappings` and `settings` overrides over it
(`merge_mappings`), or names the index template that applies instead; `create_index` creates an
index from that spec, and `add_missing_fields` puts the fields a schema change added into an
existing index's mapping.

**Identity.** A checkpoint records the index's UUID (`index.uuid` in its settings). When the index is
deleted, or deleted and created again, behind icecdc's back, the UUID no longer matches: writing the
next changes into it would leave an index with only those documents, so the table is exported again.
"""

from __future__ import annotations

import copy
import logging
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from typing import Any

from opensearchpy import NotFoundError, OpenSearch
from opensearchpy.exceptions import RequestError, TransportError
from pyiceberg.schema import Schema
from pyiceberg.types import (
    BinaryType,
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    FixedType,
    FloatType,
    IcebergType,
    IntegerType,
    ListType,
    LongType,
    MapType,
    StringType,
    StructType,
    TimestampNanoType,
    TimestampType,
    TimestamptzNanoType,
    TimestamptzType,
    TimeType,
    UUIDType,
)

from icecdc.config import StringMapping, TableConfig
from icecdc.errors import SinkError
from icecdc.model import Checkpoint, PassPoint, Probe

log = logging.getLogger(__name__)

# Mapping = OpenSearch's JSON: a field's parameters, `properties` of an object, a whole mapping.
Mapping = dict[str, Any]

# What queries may also say for a date field, after the documents' own exact format (which
# OpenSearch also prints values in): OpenSearch's default, so `"gte": "2026-11-21"` works.
QUERY_DATE_FORMATS = "strict_date_optional_time||epoch_millis"
# The documents' text of each temporal type, as java.time patterns (icecdc.documents: isoformat
# with microseconds; timestamptz always in UTC as +00:00). `uuuu`: the proleptic year (a `yyyy`
# year-of-era needs an era under a strict resolver).
DATE_FORMAT = "uuuu-MM-dd"
TIME_FORMAT = "HH:mm:ss.SSSSSS"
TIMESTAMP_FORMAT = "uuuu-MM-dd'T'HH:mm:ss.SSSSSS"
TIMESTAMPTZ_FORMAT = "uuuu-MM-dd'T'HH:mm:ss.SSSSSSxxx"
# A decimal's unscaled value is stored as a long in a `scaled_float`: up to 18 digits fit (10^18 < 2^63).
SCALED_FLOAT_MAX_PRECISION = 18
# OpenSearch's dynamic mapping keeps strings up to 256 characters in the keyword sub-field; a
# keyword-only string keeps up to 8191, the most whose UTF-8 always fits Lucene's 32766-byte term.
KEYWORD_SUBFIELD_IGNORE_ABOVE = 256
KEYWORD_IGNORE_ABOVE = 8191

_FIXED_TYPES: dict[type[IcebergType], Mapping] = {
    BooleanType: {"type": "boolean"},
    IntegerType: {"type": "integer"},
    LongType: {"type": "long"},
    FloatType: {"type": "float"},
    DoubleType: {"type": "double"},
    DateType: {"type": "date", "format": f"{DATE_FORMAT}||{QUERY_DATE_FORMATS}"},
    TimeType: {"type": "date", "format": f"{TIME_FORMAT}||strict_hour_minute_second||epoch_millis"},
    TimestampType: {"type": "date", "format": f"{TIMESTAMP_FORMAT}||{QUERY_DATE_FORMATS}"},
    TimestampNanoType: {"type": "date", "format": f"{TIMESTAMP_FORMAT}||{QUERY_DATE_FORMATS}"},
    TimestamptzType: {"type": "date", "format": f"{TIMESTAMPTZ_FORMAT}||{QUERY_DATE_FORMATS}"},
    TimestamptzNanoType: {"type": "date", "format": f"{TIMESTAMPTZ_FORMAT}||{QUERY_DATE_FORMATS}"},
    UUIDType: {"type": "keyword"},
    BinaryType: {"type": "binary"},
    FixedType: {"type": "binary"},
}
_STRINGS: dict[StringMapping, Mapping] = {
    "text": {
        "type": "text",
        "fields": {"keyword": {"type": "keyword", "ignore_above": KEYWORD_SUBFIELD_IGNORE_ABOVE}},
    },
    "keyword": {"type": "keyword", "ignore_above": KEYWORD_IGNORE_ABOVE},
}
# Types icecdc has no field type for (Iceberg v3's unknown, geometry, geography): kept in `_source`,
# not indexed, so that their documents are still accepted by the strict mapping.
_NOT_INDEXED: Mapping = {"type": "object", "enabled": False}


def mappings_for(schema: Schema, strings: StringMapping = "text") -> Mapping:
    """The mapping of the documents of `schema`: every column, `dynamic: strict` at the root."""
    return {"dynamic": "strict", "properties": _properties(schema.as_struct(), strings)}


def _properties(struct: StructType, strings: StringMapping) -> Mapping:
    return {f.name: field_mapping(f.field_type, strings) for f in struct.fields}


def field_mapping(field_type: IcebergType, strings: StringMapping = "text") -> Mapping:
    """The OpenSearch field of one Iceberg type, for the JSON `icecdc.documents.converter_for` writes."""
    if isinstance(field_type, StructType):
        # OpenSearch answers an object without `type` (object is the default); so does this
        return {"properties": _properties(field_type, strings)} if field_type.fields else {"type": "object"}
    if isinstance(field_type, ListType):
        return field_mapping(field_type.element_type, strings)  # every OpenSearch field takes an array
    if isinstance(field_type, MapType):
        # nested: a query for a key and a value matches them in the same pair
        pair = {"key": field_mapping(field_type.key_type, strings), "value": field_mapping(field_type.value_type, strings)}
        return {"type": "nested", "properties": pair}
    if isinstance(field_type, DecimalType):
        # documents carry the exact digits as a string; OpenSearch coerces it into a numeric field
        if field_type.precision <= SCALED_FLOAT_MAX_PRECISION:
            return {"type": "scaled_float", "scaling_factor": float(10**field_type.scale)}
        return {"type": "double"}
    if isinstance(field_type, StringType):
        return copy.deepcopy(_STRINGS[strings])
    for iceberg_type, mapping in _FIXED_TYPES.items():
        if isinstance(field_type, iceberg_type):
            return dict(mapping)
    return dict(_NOT_INDEXED)


def merge_mappings(derived: Mapping, overrides: Mapping) -> Mapping:
    """`overrides` over `derived`, deeply: keys merge level by level (a mapping into a mapping), any
    other value replaces. In `properties`, a field whose override sets a different `type` starts
    over from the override (the derived field's parameters would not fit that type) but keeps the
    derived `properties` of an object; an override without `type` adds its parameters to the field."""
    merged = copy.deepcopy(derived)
    for key, value in overrides.items():
        if key == "properties" and isinstance(value, dict):
            merged[key] = _merge_properties(merged.get(key, {}), value)
        elif isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = merge_mappings(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def _merge_properties(derived: Mapping, overrides: Mapping) -> Mapping:
    merged = dict(derived)
    for name, override in overrides.items():
        base = derived.get(name)
        if not isinstance(base, dict) or not isinstance(override, dict):
            merged[name] = copy.deepcopy(override)
            continue
        if "type" in override and override["type"] != _type_of(base):
            base = {"properties": base["properties"]} if "properties" in base else {}
        merged[name] = merge_mappings(base, override)
    return merged


def _type_of(field_mapping: Mapping) -> str:
    return str(field_mapping.get("type", "object"))


@dataclass(frozen=True)
class IndexSpec:
    """How icecdc creates a table's index: with this mapping and these settings, or, when `template`
    names an index template, with no body of its own, so that the template applies."""

    mappings: Mapping | None = None
    settings: Mapping = field(default_factory=dict)
    template: str | None = None
    table_uuid: str = ""  # the table whose documents it holds: recorded in each generation's marker

    def body(self) -> Mapping | None:
        """The body of the create-index request."""
        body = {k: v for k, v in (("mappings", self.mappings), ("settings", self.settings)) if v}
        return body or None


def index_spec(schema: Schema, config: TableConfig, table_uuid: str = "") -> IndexSpec:
    """The table's index as configured: the derived mapping with the table's overrides, and its settings."""
    if config.index_template is not None:
        return IndexSpec(template=config.index_template, table_uuid=table_uuid)
    mappings = merge_mappings(mappings_for(schema, config.strings), config.mappings or {})
    return IndexSpec(mappings, copy.deepcopy(config.settings or {}), table_uuid=table_uuid)


def check_template(client: OpenSearch, template: str, index: str) -> None:
    """Raise SinkError unless the index template `template` (composable, or legacy) exists and its
    patterns match `index`: otherwise the index would be created with OpenSearch's dynamic mapping."""
    try:
        found = client.indices.get_index_template(name=template)["index_templates"]
        patterns = [p for t in found for p in t["index_template"].get("index_patterns", [])]
        aliases = [a for t in found for a in (t["index_template"].get("template") or {}).get("aliases") or {}]
    except NotFoundError:
        try:
            legacy = client.indices.get_template(name=template).values()
            patterns = [p for t in legacy for p in t.get("index_patterns", [])]
            aliases = [a for t in legacy for a in t.get("aliases") or {}]
        except NotFoundError:
            raise SinkError(f"index template {template!r} (for index {index!r}) does not exist; nothing was written") from None
    if aliases:
        raise SinkError(_TEMPLATE_ALIASES.format(template=repr(template), aliases=", ".join(sorted(aliases))))
    patterns = [patterns] if isinstance(patterns, str) else patterns
    if not any(fnmatchcase(index, pattern) for pattern in patterns):
        raise SinkError(
            f"index template {template!r} does not apply to index {index!r} (its patterns: {', '.join(patterns)}); "
            "nothing was written"
        )


# Every generation would get a template's aliases at creation: searches would read two generations
# during a rebuild, and the alias would name two indices.
_TEMPLATE_ALIASES = (
    "index template {template} declares aliases ({aliases}): every generation icecdc creates would get them, "
    "so searches would read two generations during a rebuild; remove the aliases from the template "
    "(icecdc manages the index's alias); nothing was written"
)


def create_index(client: OpenSearch, index: str, spec: IndexSpec | None) -> None:
    """Create `index` from `spec` (None: OpenSearch's defaults and dynamic mapping); an index created
    meanwhile by another writer is fine."""
    if spec is not None and spec.template is not None:
        check_template(client, spec.template, index)
    try:
        client.indices.create(index=index, body=spec.body() if spec is not None else None)
    except RequestError as exc:
        if exc.error != "resource_already_exists_exception":
            raise


def add_missing_fields(client: OpenSearch, index: str, spec: IndexSpec) -> None:
    """Put the fields of `spec` the index does not map yet (columns a schema change added) into its
    mapping, before documents with them are written: a strict mapping refuses them otherwise.

    A field the index maps differently (a type change, or an index mapped by an earlier icecdc or by
    hand) is left as it is, with a warning: OpenSearch cannot change a field's mapping in place, and
    documents whose values do not fit it are refused as they always were. An index made from a
    template is the template's: icecdc leaves its mapping alone."""
    if spec.mappings is None:
        return
    current = client.indices.get_mapping(index=index)
    for concrete, found in current.items():
        mapped = found.get("mappings", {}).get("properties", {})
        additions, conflicts = _missing(mapped, spec.mappings.get("properties", {}), "")
        if conflicts:
            log.warning(
                "index %r maps %s otherwise than the table's schema now does; documents whose values do not fit "
                "the index's mapping are refused (reset the table to rebuild the index with the new mapping)",
                concrete,
                ", ".join(conflicts),
            )
        if additions:
            log.info("index %r: adding %s to the mapping", concrete, ", ".join(_paths(additions, "")))
            client.indices.put_mapping(index=concrete, body={"properties": additions})


def mapping_conflicts(client: OpenSearch, index: str, spec: IndexSpec) -> list[str]:
    """The fields the index `index` maps otherwise than `spec` (a type change such as int → long):
    OpenSearch cannot change them in place, so a rewrite resync builds a new generation instead."""
    if spec.mappings is None:
        return []
    conflicts: list[str] = []
    for found in client.indices.get_mapping(index=index).values():
        mapped = found.get("mappings", {}).get("properties", {})
        conflicts += _missing(mapped, spec.mappings.get("properties", {}), "")[1]
    return conflicts


def _missing(mapped: Mapping, wanted: Mapping, prefix: str) -> tuple[Mapping, list[str]]:
    """(the part of the `wanted` properties absent from the `mapped` ones, the paths of fields mapped otherwise)."""
    additions: Mapping = {}
    conflicts: list[str] = []
    for name, want in wanted.items():
        have = mapped.get(name)
        path = f"{prefix}{name}"
        if have is None:
            additions[name] = want
        elif _type_of(have) != _type_of(want) or ("properties" not in want and _parameters(have) != _parameters(want)):
            conflicts.append(f"{path} ({_type_of(have)}, the schema's {_type_of(want)})")
        elif "properties" in want:
            inner, inner_conflicts = _missing(have.get("properties", {}), want["properties"], f"{path}.")
            conflicts += inner_conflicts
            if inner:  # restate the object's own parameters (a nested object must stay nested)
                additions[name] = {**{k: v for k, v in want.items() if k != "properties"}, "properties": inner}
    return additions, conflicts


def _parameters(field_mapping: Mapping) -> Mapping:
    # the parameters that decide what a field accepts (OpenSearch answers numbers as it stores them)
    return {k: float(v) if isinstance(v, int | float) and not isinstance(v, bool) else v for k, v in field_mapping.items()}


def _paths(properties: Mapping, prefix: str) -> list[str]:
    paths: list[str] = []
    for name, mapping in properties.items():
        paths += _paths(mapping["properties"], f"{prefix}{name}.") if "properties" in mapping else [f"{prefix}{name}"]
    return paths


def index_uuid(client: OpenSearch, index: str) -> str | None:
    """The UUID of the index `index` names (an index, or an alias of exactly one); None when there is none."""
    try:
        found = client.indices.get_settings(index=index)
    except NotFoundError:
        return None
    uuids = sorted({settings["settings"]["index"].get("uuid", "") for settings in found.values()})
    if len(uuids) != 1:
        raise SinkError(f"index {index!r} names {len(found)} indices ({', '.join(sorted(found))}); icecdc writes to exactly one")
    return str(uuids[0])


@dataclass(frozen=True)
class IndexAlias:
    """A table's index as icecdc keeps it: the alias `name` over its generations, on `client`."""

    client: OpenSearch
    name: str

    def unfinished(self, checkpoint: Checkpoint | None) -> str:
        """Why the index needs a pass although no work item is pending ("" when it does not): a
        rebuild's swap not made, the index deleted or replaced, a generation left over. An index
        that cannot be read is reported as fine, with a warning: the next commit's pass finds it."""
        try:
            return self._unfinished(checkpoint)
        except (TransportError, SinkError) as exc:
            log.warning("index %r: cannot tell whether it is as the checkpoint left it (%s)", self.name, exc)
            return ""

    def _unfinished(self, checkpoint: Checkpoint | None) -> str:
        if checkpoint is None or not checkpoint.index_uuid:
            return ""
        found = index_uuid(self.client, self.name)
        if found != checkpoint.index_uuid:
            built = [g for g, uuid in generations(self.client, self.name).items() if uuid == checkpoint.index_uuid]
            if built:
                return f"the alias {self.name!r} was not swapped to the rebuilt generation {built[0]!r}"
            return f"index {self.name!r} was deleted" if found is None else f"index {self.name!r} was replaced by another index"
        leftovers = leftover_generations(self.client, self.name)
        return f"generations {', '.join(leftovers)} of index {self.name!r} are left over" if leftovers else ""


# What an index under construction runs with until its swap: no refreshes, no replicas to copy to.
BUILD_SETTINGS: Mapping = {"refresh_interval": "-1", "number_of_replicas": 0}


def generation(index: str, number: int) -> str:
    """The name of the index's generation `number` (from 1): the concrete index the alias `index` names."""
    return f"{index}-{number}"


def generation_number(index: str, concrete: str) -> int | None:
    """`concrete`'s generation of `index`: 0 for a pre-alias index named `index` itself, None for another index."""
    if concrete == index:
        return 0
    number = concrete.removeprefix(f"{index}-")
    return int(number) if concrete.startswith(f"{index}-") and number.isdigit() and not number.startswith("0") else None


def current_generation(client: OpenSearch, index: str) -> str | None:
    """The concrete index searches of `index` read: the alias's index, or a concrete index named
    `index` (made by an icecdc before generations, or auto-created by a write); None when neither exists."""
    try:
        found = client.indices.get_alias(name=index)
    except NotFoundError:
        found = {}
    if len(found) > 1:
        raise SinkError(f"alias {index!r} names {len(found)} indices ({', '.join(sorted(found))}); icecdc writes to exactly one")
    if found:
        return str(next(iter(found)))
    return index if client.indices.exists(index=index) else None


# Where a generation records that it is icecdc's, for which alias and table: `_meta` of its mapping.
MARKER = "icecdc"


def marker(index: str, table_uuid: str) -> Mapping:
    """The `_meta` of a generation of the alias `index` holding the documents of table `table_uuid`."""
    return {MARKER: {"index": index, "table_uuid": table_uuid}}


def generations(client: OpenSearch, index: str) -> dict[str, str]:
    """Every generation of `index` that exists, with its uuid: an index named `<index>-<n>` whose
    marker names `index` (another index of that name pattern, another table's or a user's, is never one)."""
    try:
        found = client.indices.get(index=f"{index}-*")
    except NotFoundError:
        return {}
    return {
        name: str(body["settings"]["index"].get("uuid", ""))
        for name, body in found.items()
        if generation_number(index, name) and _marked(body, index)
    }


def _marked(body: Mapping, index: str) -> bool:
    meta = (body.get("mappings") or {}).get("_meta") or {}
    owner = meta.get(MARKER) if isinstance(meta, dict) else None
    return isinstance(owner, dict) and owner.get("index") == index


def leftover_generations(client: OpenSearch, index: str) -> list[str]:
    """The generations of `index` the alias does not name: a rebuild's, under way or abandoned,
    or the old one a swap did not get to delete."""
    current = current_generation(client, index)
    return sorted(name for name in generations(client, index) if name != current)


def delete_leftover_generations(client: OpenSearch, index: str) -> list[str]:
    """Delete the generations the alias does not name (only when no rebuild is under way); return them."""
    leftovers = leftover_generations(client, index)
    for name in leftovers:
        log.info("index %r: deleting generation %r, which the alias does not name", index, name)
        client.indices.delete(index=name, ignore=404)
    return leftovers


def _create_generation_index(client: OpenSearch, index: str, after: str | None, spec: IndexSpec) -> str:
    """Create the first free generation of `index` numbered above `after`'s, with icecdc's marker;
    return its name. A name taken by an index that is not a generation of `index` is skipped."""
    number = (generation_number(index, after) or 0) + 1 if after is not None else 1
    number = max([number, *((generation_number(index, g) or 0) + 1 for g in generations(client, index))])
    while client.indices.exists(index=generation(index, number)):
        number += 1
    name = generation(index, number)
    if spec.template is not None:
        check_template(client, spec.template, name)
    body = dict(spec.body() or {})
    body["mappings"] = {**(body.get("mappings") or {}), "_meta": marker(index, spec.table_uuid)}
    client.indices.create(index=name, body=body)
    taken = sorted(a for found in client.indices.get_alias(index=name).values() for a in found.get("aliases") or {})
    if taken:  # a template we did not name (a component, another pattern) gave it aliases
        client.indices.delete(index=name, ignore=404)
        raise SinkError(_TEMPLATE_ALIASES.format(template=f"matching {name!r}", aliases=", ".join(taken)))
    return name


def create_generation(client: OpenSearch, index: str, spec: IndexSpec | None) -> str:
    """Create the next generation of `index` and point the alias at it, when `index` names no index:
    the first sync, or its generation was deleted. Return the generation's name."""
    name = _create_generation_index(client, index, None, spec or IndexSpec())
    client.indices.put_alias(index=name, name=index)
    log.info("index %r: created generation %r", index, name)
    return name


def resumable_generation(client: OpenSearch, index: str, spec: IndexSpec, resumable: set[str]) -> tuple[str, str] | None:
    """(name, uuid) of the generation a rebuild of `index` resumes: one the alias does not name whose
    uuid is in `resumable` (where the rebuild's earlier passes wrote) and whose mapping can take
    `spec` (not one a type changed meanwhile); None when the rebuild starts a new one. Reads only."""
    current = current_generation(client, index)
    for name, uuid in generations(client, index).items():
        if name != current and uuid in resumable:
            conflicts = mapping_conflicts(client, name, spec)
            if not conflicts:
                return name, uuid
            log.warning(
                "index %r: generation %r maps %s otherwise than the schema now does; restarting the rebuild",
                index,
                name,
                ", ".join(conflicts),
            )
    return None


def start_generation(client: OpenSearch, index: str, spec: IndexSpec, resumable: set[str]) -> str:
    """The generation a rebuild of `index` writes to while the current one keeps serving searches.

    The `resumable_generation` is resumed, its mapping brought up to `spec` (columns added meanwhile).
    Otherwise every generation the alias does not name is deleted and the next one is created from
    `spec`, with `BUILD_SETTINGS` (but for an index from a template: its settings are the
    template's) until `finish_generation`."""
    resumed = resumable_generation(client, index, spec, resumable)
    if resumed is not None:
        log.info("index %r: resuming the rebuild into generation %r", index, resumed[0])
        add_missing_fields(client, resumed[0], spec)
        return resumed[0]
    current = current_generation(client, index)
    delete_leftover_generations(client, index)
    name = _create_generation_index(client, index, current, spec)
    if spec.template is None:
        client.indices.put_settings(index=name, body={"index": BUILD_SETTINGS})
    log.info("index %r: building generation %r (searches read %r until the swap)", index, name, current)
    return name


def finish_generation(client: OpenSearch, index: str, name: str, spec: IndexSpec, probe: Probe | None = None) -> None:
    """Restore the generation `name`'s settings, point the alias `index` at it in one atomic request,
    and delete the generation it named. A pre-alias index named `index` is deleted in that same
    request (`remove_index`): searches see the old index, then the new one, never neither."""
    if spec.template is None:
        client.indices.put_settings(index=name, body={"index": {k: _setting(spec.settings, k) for k in BUILD_SETTINGS}})
    # Searches must find every document, and on every copy, from the first request after the swap.
    client.indices.refresh(index=name)
    wait_for_copies(client, name)
    current = current_generation(client, index)
    actions: list[Mapping] = [{"add": {"index": name, "alias": index}}]
    if current == index:
        actions.insert(0, {"remove_index": {"index": index}})
    elif current is not None and current != name:
        actions.insert(0, {"remove": {"index": current, "alias": index}})
    client.indices.update_aliases(body={"actions": actions})
    log.info("index %r: swapped from %r to generation %r", index, current, name)
    if probe is not None:
        probe(PassPoint.SWAPPED)
    if current is not None and current not in (index, name):
        client.indices.delete(index=current, ignore=404)


# Seconds a swap waits for the new generation's shards to be active: primaries, and replicas
# where the cluster has the nodes to place them.
COPIES_WAIT_SECONDS = 120
TIMED_OUT = 408


def wait_for_copies(client: OpenSearch, name: str) -> None:
    """Wait until the index's primaries, and its replicas where the cluster has nodes enough to
    place them (a one-node cluster never has), are active; raise SinkError when they are not in time."""
    health = client.cluster.health()
    nodes = int(health.get("number_of_data_nodes", health.get("number_of_nodes", 1)))
    found = client.indices.get_settings(index=name, flat_settings=True)[name]["settings"]
    replicas = int(found.get("index.number_of_replicas", 1))
    status = "green" if replicas < nodes else "yellow"
    try:
        # The wait's own `timeout` in the URL: opensearch-py takes that parameter for its request timeout.
        client.transport.perform_request(
            "GET",
            f"/_cluster/health/{name}?wait_for_status={status}&timeout={COPIES_WAIT_SECONDS}s",
            params={"request_timeout": COPIES_WAIT_SECONDS + 30},
        )
    except TransportError as exc:
        if exc.status_code != TIMED_OUT:
            raise
        raise SinkError(
            f"index {name!r} is not {status} after {COPIES_WAIT_SECONDS} s ({replicas} replicas, {nodes} data nodes); "
            "the alias was not swapped: searches would miss documents"
        ) from None


def _setting(settings: Mapping, name: str) -> Any:
    """The value `settings` (nested or flat) gives the index setting `name`; None: the default."""
    nested = settings.get("index")
    for value in (nested.get(name) if isinstance(nested, dict) else None, settings.get(f"index.{name}"), settings.get(name)):
        if value is not None:
            return value
    return None
