"""The index's one owner: its mapping, one concrete index by name, the alias over its generations.

`mappings` derives the mapping from the schema, purely. `indices` handles one concrete index by
name. `alias` owns the alias over the generations and their lifecycle.
"""

from icecdc.destination.index.alias import BUILD_SETTINGS, IndexAlias, generation, generation_number
from icecdc.destination.index.indices import (
    COPIES_WAIT_SECONDS,
    add_missing_fields,
    check_pipeline,
    check_template,
    create_index,
    index_uuid,
    mapping_conflicts,
    wait_for_copies,
)
from icecdc.destination.index.mappings import (
    IndexSpec,
    Mapping,
    field_mapping,
    index_spec,
    mappings_for,
    merge_mappings,
)
from icecdc.destination.index.ownership import MARKER, Owner, marker
from icecdc.errors import IndexStateError

__all__ = [
    "BUILD_SETTINGS",
    "COPIES_WAIT_SECONDS",
    "MARKER",
    "IndexAlias",
    "IndexSpec",
    "IndexStateError",
    "Mapping",
    "Owner",
    "add_missing_fields",
    "check_pipeline",
    "check_template",
    "create_index",
    "field_mapping",
    "generation",
    "generation_number",
    "index_spec",
    "index_uuid",
    "mapping_conflicts",
    "mappings_for",
    "marker",
    "merge_mappings",
    "wait_for_copies",
]
