"""The index's identity: which concrete OpenSearch index the documents of a checkpoint are in.

A checkpoint records the index's UUID (`index.uuid` in its settings). When the index is deleted,
or deleted and created again, behind icecdc's back, the UUID no longer matches: writing the next
changes into it would leave an index with only those documents, so the table is exported again.
"""

from __future__ import annotations

from opensearchpy import NotFoundError, OpenSearch

from icecdc.errors import SinkError


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
