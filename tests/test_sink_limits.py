"""Bulk requests are bounded by bytes, not only by count.

The fault proxy stands in for a domain's HTTP payload limit: with `faults.MAX_BODY_BYTES` set, it
answers 413 to any request body over it without forwarding it, as Amazon OpenSearch Service does
above 10 MiB. The client logs every request it makes with the status it got (logger "opensearch"),
so a request the proxy refused shows there and not in the proxy's log of forwarded requests.
"""

from __future__ import annotations

import json
import logging
import re
from typing import Any

import pytest
from opensearchpy import OpenSearch

from icecdc.config import OpenSearchConfig, parse_config
from icecdc.destination import sink
from icecdc.destination.sink import Refusal, write_documents
from icecdc.errors import ConfigError, SinkError
from icecdc.model import VersionType, Write
from tests.support import faults
from tests.support.faults import FaultProxy

INDEX = "things"
LIMIT = 4000  # bytes of bulk body per request, for these tests


def sink_config(url: str, **settings: Any) -> OpenSearchConfig:
    return OpenSearchConfig(url=url, initial_backoff_seconds=0.01, max_backoff_seconds=0.05, max_chunk_bytes=LIMIT, **settings)


def doc(i: int, text: str) -> Write:
    return Write(str(i), 1, f'{{"n":{i},"text":"{text}"}}')


def ids_in(client: OpenSearch) -> list[str]:
    client.indices.refresh(index=INDEX)
    return sorted(h["_id"] for h in client.search(index=INDEX, body={"size": 1000})["hits"]["hits"])


def bulk_statuses(caplog: pytest.LogCaptureFixture) -> list[int]:
    """The status of every bulk request the client made, as opensearch-py logs it ("POST url [status:...]")."""
    return [
        int(record.args[2])
        for record in caplog.records
        if record.name == "opensearch" and isinstance(record.args, tuple) and "/_bulk" in str(record.args[1])
    ]


class Letters:
    def __init__(self) -> None:
        self.refused: list[Refusal] = []

    def __call__(self, refused: list[Refusal]) -> None:
        self.refused += refused


@pytest.fixture
def opensearch_log(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.INFO, logger="opensearch")
    return caplog


def test_the_default_limit_is_below_the_smallest_managed_domain_limit_and_must_be_positive() -> None:
    assert 0 < OpenSearchConfig(url="http://localhost:9200").max_chunk_bytes < 10 * 1024 * 1024
    raw = {"catalog": {"name": "c"}, "state": {"path": "/s.db"}, "tables": [{"name": "db.t"}]}
    with pytest.raises(ConfigError, match=r"opensearch.max_chunk_bytes must be above 0, got 0"):
        parse_config({**raw, "opensearch": {"url": "http://localhost:9200", "max_chunk_bytes": 0}})


def test_a_batch_over_the_byte_limit_goes_in_several_requests_each_within_it(
    fault_proxy: FaultProxy, osmem_clone: Any, opensearch_log: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(faults, "MAX_BODY_BYTES", LIMIT)  # the proxy refuses (413) any body over the limit
    # 30 documents of over 450 bytes each: more than 3 requests' worth, far fewer than bulk_chunk_size.
    # Half of them are 2 bytes per character in UTF-8: the limit counts bytes, not characters.
    writes = [doc(i, "x" * 450 if i % 2 else "é" * 225) for i in range(30)]
    client = OpenSearch(hosts=[fault_proxy.url], max_retries=0)
    stats = write_documents(client, sink_config(fault_proxy.url), INDEX, writes, Letters())

    assert (stats.indexed, stats.dead_lettered) == (30, 0)
    assert ids_in(OpenSearch(hosts=[osmem_clone.url])) == sorted(str(i) for i in range(30))
    forwarded = [seen.items for seen in fault_proxy.seen("_bulk")]
    assert len(forwarded) >= 4 and sum(forwarded) == 30
    # every request the client made was within the limit: none answered 413, all of them forwarded
    assert bulk_statuses(opensearch_log) == [200] * len(forwarded)


def test_a_document_over_the_limit_is_a_dead_letter_and_is_never_sent(
    fault_proxy: FaultProxy, osmem_clone: Any, opensearch_log: pytest.LogCaptureFixture
) -> None:
    big = doc(99, "x" * LIMIT)
    writes = [*(doc(i, "small") for i in range(5)), big, *(doc(i, "small") for i in range(5, 10))]
    letters = Letters()
    client = OpenSearch(hosts=[fault_proxy.url], max_retries=0)
    stats = write_documents(client, sink_config(fault_proxy.url), INDEX, writes, letters)

    assert (stats.indexed, stats.dead_lettered) == (10, 1)
    assert ids_in(OpenSearch(hosts=[osmem_clone.url])) == sorted(str(i) for i in range(10))
    ((write, status, reason),) = letters.refused
    assert (write, status) == (big, 413)
    assert re.fullmatch(
        rf"the document's bulk action is \d+ bytes, over opensearch.max_chunk_bytes \({LIMIT}\): not sent", reason
    )
    assert all("99" not in seen.ids for seen in fault_proxy.seen("_bulk"))  # the proxy forwards all: none carried it
    assert set(bulk_statuses(opensearch_log)) == {200}


def test_a_document_over_the_limit_without_dead_letters_fails_the_batch_naming_it(fault_proxy: FaultProxy) -> None:
    writes = [doc(1, "small"), doc(99, "x" * LIMIT), doc(2, "small")]
    client = OpenSearch(hosts=[fault_proxy.url], max_retries=0)
    with pytest.raises(
        SinkError,
        match=rf"did not send 1 document of index '{INDEX}': 99: 413 the document's bulk action is \d+ bytes, "
        rf"over opensearch.max_chunk_bytes \({LIMIT}\): not sent",
    ):
        write_documents(client, sink_config(fault_proxy.url), INDEX, writes)
    assert all("99" not in seen.ids for seen in fault_proxy.seen("_bulk"))


@pytest.mark.parametrize("version_type", list(VersionType))
def test_action_lines_say_what_the_bulk_helper_would_and_chunks_count_the_bytes_sent(version_type: VersionType) -> None:
    """icecdc writes each action line as text (`ActionLines`) instead of the bulk helper's dict: the
    line must mean what the helper's `expand_action` makes of the action dict (ids with quotes,
    escapes, non-ASCII; routing; pipelines; deletes; writes naming their index), and `_chunks` must
    count a chunk's bytes as the request body carries them."""
    from opensearchpy import helpers

    from icecdc.destination.sink import ActionLines, BulkMode

    ids = ["1", 'a"b', "back\\slash", "tab\there", "naïve", "日本", '["x",1]', "\x01ctl"]
    modes = [BulkMode(version_type), BulkMode(version_type, "pipe-é", (("other", "p2"),))]
    for mode in modes:
        lines = ActionLines("idx-ü", mode)
        writes: list[Write] = []
        for n, doc_id in enumerate(ids):
            writes += [Write(doc_id, 10**n, '{"v":"é"}'), Write(doc_id, n, '{"v":1}'), Write(doc_id, 7, None)]
            writes += [
                Write(doc_id, n, '{"v":2}', 'rö"u'),
                Write(doc_id, n, None, "eu"),
                Write(doc_id, n, '{"v":3}', index="other"),
            ]
        for write in writes:
            action: dict[str, Any] = {"_index": write.index or "idx-ü", "_id": write.doc_id, "version": write.version}
            action |= {"version_type": version_type, "_op_type": "delete" if write.document is None else "index"}
            if write.routing is not None:
                action["routing"] = write.routing
            pipeline = mode.pipeline_of(action["_index"], write.index is not None)
            if write.document is not None and pipeline is not None:
                action["pipeline"] = pipeline
            expected, _ = helpers.expand_action(action)
            assert json.loads(lines.line(write)) == expected, write
        config = OpenSearchConfig(url="http://unused", bulk_chunk_size=7, max_chunk_bytes=900)
        chunks = list(sink._chunks(config, lines, writes))
        assert all(isinstance(chunk, sink._Chunk) for chunk in chunks) and len(chunks) > 2
        assert [w for chunk in chunks if isinstance(chunk, sink._Chunk) for w in chunk.writes] == writes
        for chunk in chunks:
            assert isinstance(chunk, sink._Chunk)
            body = "".join(f"{text}\n" for pair in chunk.sent for text in pair if text is not None)
            assert chunk.size == len(body.encode()) <= config.max_chunk_bytes


def test_deletes_of_unknown_routing_are_looked_up_a_chunk_at_a_time_beyond_a_page(
    osmem_clone: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    client = OpenSearch(hosts=[osmem_clone.url])
    client.indices.create(index=INDEX, body={"settings": {"number_of_shards": 3}})
    regions = ["us", "eu", "ap", "us", "eu", "ap", "us"]
    placed = [Write(str(i), 1, f'{{"n":{i}}}', region) for i, region in enumerate(regions)]
    write_documents(client, OpenSearchConfig(url=osmem_clone.url), INDEX, placed)
    monkeypatch.setattr(sink, "LOOKUP_PAGE", 2)  # fewer hits a page than ids a lookup: the scroll takes the rest
    searches: list[list[str]] = []
    search = client.search
    monkeypatch.setattr(client, "search", lambda **kw: searches.append(kw["body"]["query"]["ids"]["values"]) or search(**kw))
    deletes = [Write(str(i), 2, None, routing_lookup=()) for i in range(6)]
    deletes += [Write("6", 2, None, routing_lookup=("us",)), Write("99", 2, None, routing_lookup=())]
    stats = write_documents(client, OpenSearchConfig(url=osmem_clone.url, bulk_chunk_size=4), INDEX, deletes)
    # one lookup a chunk, not one a key; each found more documents than a page: its scroll reads on
    assert searches == [["0", "1", "2", "3"]] * 2 + [["4", "5", "6", "99"]] * 2
    assert stats.deleted == 6  # 6 is held under the routing value excepted, 99 nowhere: neither is sent
    assert ids_in(OpenSearch(hosts=[osmem_clone.url])) == ["6"]
