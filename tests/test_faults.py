"""Sink faults: the test proxy itself, then syncs through it against real Iceberg, Spark and osmem.

The first group checks tests/faults.py with opensearch-py against osmem, so the later tests can
trust that a fault they inject is the fault they meant. The second group syncs a real table
through the proxy: 429 and 5xx answers, partial bulk failures, lost connections and documents
refused for good. Every sync that should converge is checked with the invariant (the index
equals the table) and the checkpoint; every sync that should fail is checked for a checkpoint
that did not move and a rerun that converges.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from opensearchpy import OpenSearch, helpers
from opensearchpy.exceptions import ConnectionError as OpenSearchConnectionError
from opensearchpy.exceptions import TransportError
from pyiceberg.expressions import EqualTo, In

from icecdc.config import Config, parse_config
from icecdc.errors import IcecdcError
from icecdc.testing.commits import update
from icecdc.verify import table_documents
from tests.support import faults
from tests.support.faults import BulkItem, FaultProxy
from tests.support.pipeline import Pipeline
from tests.support.proxied import CHUNK, converged, dead_letters, proxied, proxied_raw, run
from tests.support.tables import orders, rows

# Small bulk requests, so a batch of a few dozen documents is several requests and a fault can
# land in the middle of it.

# the syncs draw their destination; the proxy's own tests reach osmem unsigned, on a domain
pytestmark = pytest.mark.drawn_destination


def direct(osmem_clone: Any) -> OpenSearch:
    """A client straight to osmem: what really reached the server."""
    return OpenSearch(hosts=[osmem_clone.url])


def through(proxy: FaultProxy) -> OpenSearch:
    """A client through the proxy that does not retry, so each injected fault is seen as it is."""
    return OpenSearch(hosts=[proxy.url], max_retries=0)


def bulk_body(index: str, *ids: str) -> list[dict[str, Any]]:
    body: list[dict[str, Any]] = []
    for doc_id in ids:
        body += [{"index": {"_index": index, "_id": doc_id}}, {"n": doc_id}]
    return body


def ids_in(client: OpenSearch, index: str) -> list[str]:
    client.indices.refresh(index=index)
    return sorted(h["_id"] for h in client.search(index=index, body={"size": 1000})["hits"]["hits"])


# -- the proxy ------------------------------------------------------------------------------------


def test_proxy_forwards_requests_and_counts_them_per_path(fault_proxy: FaultProxy, osmem_clone: Any) -> None:
    client = through(fault_proxy)
    assert not client.indices.exists(index="things")  # HEAD: no body, the status alone answers
    client.indices.create(index="things")
    assert client.indices.exists(index="things")
    answer = client.bulk(body=bulk_body("things", "a", "b"), refresh=True)
    assert not answer["errors"] and [i["index"]["status"] for i in answer["items"]] == [201, 201]
    assert client.get(index="things", id="a")["_source"] == {"n": "a"}
    assert ids_in(direct(osmem_clone), "things") == ["a", "b"]

    assert fault_proxy.counts["HEAD /things"] == 2
    assert fault_proxy.count("_bulk") == 1 and fault_proxy.count("/things") == 4
    assert [s.items for s in fault_proxy.seen("_bulk")] == [2]


def test_fail_next_answers_the_status_and_forwards_nothing(fault_proxy: FaultProxy, osmem_clone: Any) -> None:
    client = through(fault_proxy)
    client.indices.create(index="things")
    fault_proxy.fail_next(2, status=503, path_contains="_bulk")
    for _ in range(2):
        with pytest.raises(TransportError) as refused:
            client.bulk(body=bulk_body("things", "a"))
        assert (refused.value.status_code, refused.value.error) == (503, "unavailable_shards_exception")
    assert client.count(index="things")["count"] == 0  # other paths pass; the failed writes never arrived
    fault_proxy.fail_next(1, status=429, path_contains="_bulk")
    with pytest.raises(TransportError) as throttled:
        client.bulk(body=bulk_body("things", "a"))
    assert (throttled.value.status_code, throttled.value.error) == (429, "es_rejected_execution_exception")
    assert not client.bulk(body=bulk_body("things", "a"), refresh=True)["errors"]  # the rules are used up
    assert ids_in(direct(osmem_clone), "things") == ["a"]
    assert [s.outcome for s in fault_proxy.seen("_bulk")] == ["failed 503", "failed 503", "failed 429", "forwarded"]


def test_fail_items_answers_like_a_partial_bulk_failure(fault_proxy: FaultProxy, osmem_clone: Any) -> None:
    client = through(fault_proxy)
    client.indices.create(index="things", body={"mappings": {"properties": {"n": {"type": "keyword"}, "k": {"type": "integer"}}}})
    fault_proxy.fail_items(3, status=429)
    first = client.bulk(body=bulk_body("things", "a", "b"))
    second = client.bulk(body=bulk_body("things", "c", "d", "e"), refresh=True)
    assert first["errors"] and second["errors"]
    statuses = [next(iter(i.values()))["status"] for i in first["items"] + second["items"]]
    assert statuses == [429, 429, 429, 201, 201]  # three in all, the first of each request
    assert ids_in(direct(osmem_clone), "things") == ["d", "e"]  # a throttled item was not applied

    # The injected item has the shape of a real refusal from the server (here a mapping conflict).
    real = direct(osmem_clone).bulk(body=[{"index": {"_index": "things", "_id": "x"}}, {"k": "not a number"}])
    injected = first["items"][0]["index"]
    assert real["errors"] and set(injected) <= set(real["items"][0]["index"])
    assert set(injected["error"]) <= set(real["items"][0]["index"]["error"])


@pytest.mark.parametrize("forward", [True, False])
def test_drop_connection_after_closes_the_connection_unanswered(fault_proxy: FaultProxy, osmem_clone: Any, forward: bool) -> None:
    client = through(fault_proxy)
    client.indices.create(index="things")
    fault_proxy.drop_connection_after(1, times=1, path_contains="_bulk", forward=forward)
    client.bulk(body=bulk_body("things", "a"))
    with pytest.raises(OpenSearchConnectionError):
        client.bulk(body=bulk_body("things", "b"))
    client.bulk(body=bulk_body("things", "c"))  # a new connection works again
    # forward=True: the server applied the write whose answer was lost
    assert ids_in(direct(osmem_clone), "things") == (["a", "b", "c"] if forward else ["a", "c"])
    assert [s.outcome for s in fault_proxy.seen("_bulk")] == [
        "forwarded",
        "dropped after forwarding" if forward else "dropped",
        "forwarded",
    ]


def test_reject_documents_fails_the_chosen_items_every_time(fault_proxy: FaultProxy, osmem_clone: Any) -> None:
    client = through(fault_proxy)
    client.indices.create(index="things")
    fault_proxy.reject_documents(lambda item: item.source is not None and item.source.get("n") == "b")
    for _ in range(2):
        results = list(
            helpers.streaming_bulk(client, [{"_index": "things", "_id": i, "n": i} for i in "abc"], raise_on_error=False)
        )
        outcomes = [(r["index"]["_id"], r["index"]["status"], r["index"].get("error", {}).get("type")) for _, r in results]
        assert outcomes[1] == ("b", 400, "mapper_parsing_exception")
        assert [o[1] for o in outcomes[::2]] in ([201, 201], [200, 200])
    # a delete is an item too: the predicate sees it without a source
    seen: list[BulkItem] = []
    fault_proxy.reject_documents(lambda item: seen.append(item) or False)
    client.bulk(body=[{"delete": {"_index": "things", "_id": "a", "version": 7, "version_type": "external"}}])
    assert seen == [BulkItem("delete", "things", "a", 7, None)]
    assert ids_in(direct(osmem_clone), "things") == ["c"]


def test_fail_for_fails_every_request_of_an_outage(fault_proxy: FaultProxy) -> None:
    client = through(fault_proxy)
    fault_proxy.fail_for(0.5, status=503, path_contains="_cluster")
    client.indices.exists(index="things")  # not matching: no outage starts
    time.sleep(0.6)  # nor does time pass for it: the outage starts with its first request
    for _ in range(3):
        with pytest.raises(TransportError):
            client.cluster.health()
    time.sleep(0.6)
    assert client.cluster.health()["status"]
    assert [s.outcome for s in fault_proxy.seen("_cluster")] == ["failed 503"] * 3 + ["forwarded"]


def test_delay_next_holds_the_answer_and_wait_for_sees_the_request_first(fault_proxy: FaultProxy) -> None:
    client = through(fault_proxy)
    fault_proxy.delay_next(1, seconds=1.0, path_contains="_cluster")
    caller = threading.Thread(target=client.cluster.health)
    caller.start()
    assert fault_proxy.wait_for(1, path_contains="_cluster", timeout=5)
    assert fault_proxy.count("_cluster", answered=True) == 0  # received, answer held
    assert fault_proxy.wait_for(1, path_contains="_cluster", answered=True, timeout=5)
    caller.join()
    assert not fault_proxy.wait_for(2, path_contains="_cluster", timeout=0.2)


def test_the_proxy_is_loopback_only_and_bounded(fault_proxy: FaultProxy, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ValueError, match="not a loopback address"):
        FaultProxy("http://192.0.2.1:9200")  # TEST-NET-1: never routed, and never tried
    assert fault_proxy.url.startswith("http://127.0.0.1:")
    monkeypatch.setattr(faults, "MAX_BODY_BYTES", 1000)
    with pytest.raises(TransportError) as too_big:
        through(fault_proxy).bulk(body=bulk_body("things", *[str(i) for i in range(100)]))
    assert too_big.value.status_code == 413


# -- syncs through the proxy ----------------------------------------------------------------------


def synced_orders(pipeline: Pipeline, proxy: FaultProxy, **settings: Any) -> tuple[Any, Config]:
    """An orders table of 20 rows in two partitions, synced without faults; then a batch of changes to apply."""
    table = orders(pipeline)
    table.append(rows(*range(1, 11), region="us"))
    table.append(rows(*range(11, 21), region="eu"))
    config = proxied(pipeline, proxy, **settings)
    run(pipeline, config)
    converged(pipeline, config)
    update(table, In("id", list(range(1, 21, 2))), lambda r: {**r, "status": "paid"})  # 10 documents
    table.delete(In("id", [2, 12]))
    table.append(rows(*range(21, 31), region="apac"))
    return table, config


def test_503_on_whole_bulk_requests_is_retried_and_the_sync_converges(pipeline: Pipeline, fault_proxy: FaultProxy) -> None:
    _, config = synced_orders(pipeline, fault_proxy)
    fault_proxy.fail_next(3, status=503, path_contains="_bulk")
    before = fault_proxy.count("_bulk")
    result = run(pipeline, config)
    converged(pipeline, config)
    assert (result.writes.indexed, result.writes.deleted) == (20, 2)
    assert [s.outcome for s in fault_proxy.seen("_bulk")].count("failed 503") == 3
    assert fault_proxy.count("_bulk") - before >= 3 + 22 // CHUNK  # every failed request was sent again


def test_429_on_a_whole_bulk_request_is_retried_and_the_sync_converges(pipeline: Pipeline, fault_proxy: FaultProxy) -> None:
    _, config = synced_orders(pipeline, fault_proxy)
    fault_proxy.fail_next(1, status=429, path_contains="_bulk")
    result = run(pipeline, config)
    converged(pipeline, config)
    assert (result.writes.indexed, result.writes.deleted, result.writes.superseded) == (20, 2, 0)


@pytest.mark.parametrize("status", [429, 503])
def test_429_and_5xx_on_bulk_items_are_retried_and_the_sync_converges(
    pipeline: Pipeline, fault_proxy: FaultProxy, status: int
) -> None:
    """OpenSearch answers a partial failure item by item: only those items are sent again, after a backoff."""
    _, config = synced_orders(pipeline, fault_proxy, opensearch={"initial_backoff_seconds": 0.4})
    fault_proxy.fail_items(4, status=status)
    result = run(pipeline, config)
    converged(pipeline, config)
    assert (result.writes.indexed, result.writes.deleted, result.writes.superseded, result.writes.retried) == (20, 2, 0, 4)
    bulks = fault_proxy.seen("_bulk")
    for refused in (s for s in bulks if s.failed_ids):
        retry = next(s for s in bulks if s.at > refused.at and set(refused.failed_ids) <= set(s.ids))
        assert set(retry.ids) == set(refused.failed_ids)  # only the failed items, not the whole chunk
        assert retry.at - refused.at >= 0.1  # not at once: a backoff (of 0.4 s, with jitter)


def test_429_past_max_retries_fails_the_batch_and_the_checkpoint_stays(pipeline: Pipeline, fault_proxy: FaultProxy) -> None:
    """Retries are bounded: a cluster that keeps refusing fails the batch instead of hanging it."""
    _, config = synced_orders(pipeline, fault_proxy, opensearch={"max_retries": 1})
    checkpoint = pipeline.store().get_checkpoint("db.orders")
    fault_proxy.fail_items(1_000_000, status=429)
    with pytest.raises(IcecdcError, match="429"):
        run(pipeline, config)
    assert pipeline.store().get_checkpoint("db.orders") == checkpoint
    assert pipeline.store().pending_items("db.orders")

    fault_proxy.clear()
    run(pipeline, config)
    converged(pipeline, config)


def test_a_connection_lost_after_the_write_is_retried_and_the_replay_is_harmless(
    pipeline: Pipeline, fault_proxy: FaultProxy
) -> None:
    _, config = synced_orders(pipeline, fault_proxy)
    # the server applies the request, the answer is lost, the client sends it again
    fault_proxy.drop_connection_after(1, times=1, path_contains="_bulk", forward=True)
    result = run(pipeline, config)
    converged(pipeline, config)
    assert "dropped after forwarding" in [s.outcome for s in fault_proxy.seen("_bulk")]
    if not pipeline.versioned:  # a collection: the same content written again, the same result
        assert (result.writes.indexed, result.writes.deleted, result.writes.superseded) == (20, 2, 0)
        return
    # the replayed request met its own writes: refused by version, counted as superseded
    assert result.writes.superseded >= 1
    assert result.writes.indexed + result.writes.deleted + result.writes.superseded == 22


def test_losing_the_connection_mid_batch_fails_it_without_advancing_and_a_rerun_converges(
    pipeline: Pipeline, fault_proxy: FaultProxy
) -> None:
    _, config = synced_orders(pipeline, fault_proxy, opensearch={"max_retries": 1})
    checkpoint = pipeline.store().get_checkpoint("db.orders")
    fault_proxy.drop_connection_after(2, path_contains="_bulk", forward=True)  # then every bulk request
    with pytest.raises(IcecdcError):
        run(pipeline, config)
    assert pipeline.store().get_checkpoint("db.orders") == checkpoint
    assert pipeline.store().pending_items("db.orders")
    assert "dropped after forwarding" in [s.outcome for s in fault_proxy.seen("_bulk")]

    fault_proxy.clear()
    run(pipeline, config)
    converged(pipeline, config)


# -- whole-request outages, dead letters ----------------------------------------------------------


def test_an_outage_longer_than_the_transport_retries_is_ridden_out(pipeline: Pipeline, fault_proxy: FaultProxy) -> None:
    """opensearch-py's transport retries a 503 at once, max_retries times, within milliseconds; a
    node restart of a second outlasts that. Backoff between bulk attempts rides it out."""
    _, config = synced_orders(pipeline, fault_proxy, opensearch={"max_retries": 5})
    fault_proxy.fail_for(1.5, status=503, path_contains="_bulk")
    run(pipeline, config)
    converged(pipeline, config)
    assert "failed 503" in [s.outcome for s in fault_proxy.seen("_bulk")]


def status_dead_letters(config_path: Path, table: str) -> int:
    """The `dead letters` count `icecdc status` prints for the table (a column of its table, or `dead letters: N`)."""
    result = subprocess.run(
        [sys.executable, "-m", "icecdc.cli", "status", "--config", str(config_path)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    header = next(line for line in lines if "dead letters" in line)
    row = next(line for line in lines if line.split() and line.split()[0] == table)
    if header.split()[0] == "table":  # a column: the value stands under the header's last character
        column = header.index("dead letters") + len("dead letters")
        return int(row[:column].split()[-1])
    return int(row.split("dead letters")[1].strip(" :=").split()[0])


def assert_dead_letter(letter: dict[str, Any], table: Any, doc_id: str, status: int, reason: str) -> None:
    snapshot = table.current_snapshot()
    assert {"table", "snapshot_id", "sequence_number", "doc_id", "status", "reason", "document"} <= set(letter)
    assert (letter["table"], letter["doc_id"], letter["status"]) == ("db.orders", doc_id, status)
    assert (letter["snapshot_id"], letter["sequence_number"]) == (snapshot.snapshot_id, snapshot.sequence_number)
    assert reason in letter["reason"]
    expected = dict(table_documents(table, ("id",)))[doc_id]
    document = letter["document"]
    assert (json.loads(document) if isinstance(document, str) else document) == json.loads(expected)


def test_documents_refused_for_good_go_to_dead_letters_and_the_batch_completes(
    pipeline: Pipeline, fault_proxy: FaultProxy, tmp_path: Path
) -> None:
    table = orders(pipeline)
    table.append(rows(*range(1, 11)))
    dead = tmp_path / "dead-letters"
    raw = proxied_raw(pipeline, fault_proxy, dead_letter={"path": str(dead)})
    config = parse_config(raw)
    fault_proxy.reject_documents(lambda item: item.id in ("2", "7"))
    result = run(pipeline, config)

    assert pipeline.store().get_checkpoint("db.orders").snapshot_id == table.current_snapshot().snapshot_id
    assert result.writes.indexed == 8
    assert sorted(pipeline.documents("orders"), key=int) == ["1", "3", "4", "5", "6", "8", "9", "10"]
    letters = sorted(dead_letters(dead), key=lambda letter: letter["doc_id"])
    assert [letter["doc_id"] for letter in letters] == ["2", "7"]
    for letter in letters:
        assert_dead_letter(letter, table, letter["doc_id"], 400, "mapper_parsing_exception")
    config_path = tmp_path / "icecdc.yaml"
    config_path.write_text(yaml.safe_dump(raw))
    assert status_dead_letters(config_path, "db.orders") == 2

    # once the server accepts it again, the key's next change indexes it: a dead letter is not a stuck key
    fault_proxy.clear()
    update(table, In("id", [2, 7]), lambda r: {**r, "status": "fixed"})
    run(pipeline, config)
    converged(pipeline, config)


def test_a_real_mapping_conflict_goes_to_dead_letters(pipeline: Pipeline, tmp_path: Path) -> None:
    """No proxy: osmem itself refuses the document, as a cluster with a conflicting mapping would."""
    table = orders(pipeline)
    table.append(rows(1, 2, status="5"))
    dead = tmp_path / "dead-letters"
    # a mapping override the table's later rows do not fit
    status_as_integer = {"properties": {"status": {"type": "integer"}}}
    raw = {**pipeline.config_dict([{"name": "db.orders", "mappings": status_as_integer}]), "dead_letter": {"path": str(dead)}}
    config = parse_config(raw)
    run(pipeline, config)  # a number in text: the integer field takes it
    table.append(rows(3, status="7"))  # a number in text: the integer field takes it
    update(table, EqualTo("id", 1), lambda r: {**r, "status": "paid"})  # text: refused for good
    run(pipeline, config)

    assert pipeline.store().get_checkpoint("db.orders").snapshot_id == table.current_snapshot().snapshot_id
    (letter,) = dead_letters(dead)
    assert_dead_letter(letter, table, "1", 400, "mapper_parsing_exception")
    assert "3" in pipeline.documents("orders")
    config_path = tmp_path / "icecdc.yaml"
    config_path.write_text(yaml.safe_dump(raw))
    assert status_dead_letters(config_path, "db.orders") == 1
