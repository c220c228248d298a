"""An icecdc export's documents per second against raw opensearch-py bulk of the very same documents
into the same mapping, and against the peer's initial load (results key `sink`)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from opensearchpy import helpers

from bench.harness import peer
from bench.harness.sampling import measured
from bench.harness.session import Bench, counters, measure_fields
from bench.harness.tables import create_table
from icecdc.catalog import identifier_columns
from icecdc.destination.index import IndexAlias, index_spec
from icecdc.destination.sink import write_documents
from icecdc.model import Write
from icecdc.verify import table_documents


def sink_efficiency(bench: Bench) -> dict[str, Any]:
    """The export of a new table; then the same documents by `bulk`, `parallel_bulk` (the faster is
    the ceiling) and icecdc's `write_documents` alone, each into a fresh index of icecdc's mapping."""
    name = "db.sink"
    create_table(bench.spark, name, bench.scale.sink_rows, bench.scale.rows_per_file)
    export, export_result = bench.sync(bench.config(name, "ice-export"))
    with measured(bench.sampler) as peer_load:
        peer.load(bench.spark, name, "peer-load", bench.opensearch_url)
    for index in ("ice-export", "peer-load"):
        bench.drop_index(index)  # osmem keeps everything in memory
    table = bench.table(name)
    sequence_number = table.current_snapshot().sequence_number  # type: ignore[union-attr]
    documents = table_documents(table, identifier_columns(table, bench.config(name, "ice-export").tables[0]))
    count = len(documents)

    def actions(index: str) -> list[dict[str, Any]]:
        # The same writes as icecdc's export: index, external version = the snapshot's sequence number.
        return [
            {"_op_type": "index", "_index": index, "_id": i, "_source": d, "version": sequence_number, "version_type": "external"}
            for i, d in documents
        ]

    # The raw writes go into an index with the same mapping icecdc's export writes into (typed, from
    # the table's schema): a dynamic mapping indexes differently, and the ratio would compare mappings.
    spec = index_spec(table.schema(), bench.config(name, "ice-export").tables[0])

    def timed(index: str, write: Callable[[list[dict[str, Any]]], None]) -> float:
        IndexAlias(bench.client, index).ensure(spec)
        batch = actions(index)
        started = time.perf_counter()
        write(batch)
        seconds = time.perf_counter() - started
        assert bench.count(index) == count, f"raw bulk into {index} lost documents"
        bench.drop_index(index)
        return seconds

    raw = {
        "bulk": timed("raw-bulk", lambda a: helpers.bulk(bench.client, a, chunk_size=500)),
        "parallel_bulk_2_threads": timed(
            "raw-parallel", lambda a: _drain(helpers.parallel_bulk(bench.client, a, thread_count=2, chunk_size=500))
        ),
        "icecdc_write_documents": timed("raw-icecdc-sink", lambda a: _icecdc_sink(bench, a)),
    }
    rates = {k: count / v for k, v in raw.items()}
    ceiling = max(rates["bulk"], rates["parallel_bulk_2_threads"])
    sync_rate = export_result.writes.indexed / export.seconds
    return {
        "documents": count,
        "icecdc_export_docs_per_second": sync_rate,
        "raw_docs_per_second": rates,
        "ceiling_docs_per_second": ceiling,
        "ratio_sync_to_ceiling": sync_rate / ceiling,
        "ratio_icecdc_sink_alone_to_ceiling": rates["icecdc_write_documents"] / ceiling,
        "export": {"icecdc": {**measure_fields(export), **counters(export_result)}, "peer_load": measure_fields(peer_load)},
        "ratio_export_icecdc_to_peer_load": export.seconds / peer_load.seconds,
    }


def _drain(results: Any) -> None:
    for ok, item in results:
        if not ok:
            raise RuntimeError(f"raw parallel_bulk failed: {item}")


def _icecdc_sink(bench: Bench, actions: list[dict[str, Any]]) -> None:
    """icecdc's sink alone (sink.write_documents, one thread) on the same documents, no Spark."""
    config = bench.config("db.sink", "x").opensearch
    writes = (Write(a["_id"], a["version"], a["_source"]) for a in actions)
    write_documents(bench.client, config, actions[0]["_index"], writes)
