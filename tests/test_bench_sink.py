"""The bench's in-memory sink (bench/harness/sink.py) answers icecdc's sink and index lifecycle with
OpenSearch's versioning semantics, so that `make bench`'s throughput figures measure icecdc and
still mean what they would against OpenSearch. The bench's own tool, not a correctness oracle:
every other test runs against osmem."""

from __future__ import annotations

from collections.abc import Iterator
from itertools import count
from typing import Any

import pytest
from opensearchpy import NotFoundError, OpenSearch, RequestError, helpers

from bench.harness.sink import SinkServer
from icecdc.config import OpenSearchConfig
from icecdc.destination.index import BUILD_SETTINGS, IndexAlias, IndexSpec, index_uuid
from icecdc.destination.sink import BULK_ANSWER, BulkMode, delete_older, write_documents
from icecdc.errors import SinkError
from icecdc.model import VersionType, Write
from icecdc.verify import index_documents

_names = count()


@pytest.fixture(scope="module")
def server() -> Iterator[SinkServer]:
    with SinkServer.start() as running:
        yield running


@pytest.fixture
def client(server: SinkServer) -> OpenSearch:
    return OpenSearch(hosts=[server.url], timeout=30)


@pytest.fixture
def config(server: SinkServer) -> OpenSearchConfig:
    return OpenSearchConfig(url=server.url, bulk_chunk_size=3)


@pytest.fixture
def index() -> str:
    return f"bench-{next(_names)}"


def write(
    client: OpenSearch, config: OpenSearchConfig, index: str, *writes: Write, version_type: VersionType = VersionType.EXTERNAL
) -> dict[str, int]:
    stats = write_documents(client, config, index, writes, mode=BulkMode(version_type))
    # the documents' outcomes; `reached` counts requests (those OpenSearch may have applied)
    return {k: v for k, v in vars(stats).items() if v and k != "reached"}


def test_external_versions_refuse_older_and_equal_writes_and_deletes_keep_a_tombstone(
    client: OpenSearch, config: OpenSearchConfig, index: str
) -> None:
    IndexAlias(client, index).ensure()
    assert write(client, config, index, Write("a", 5, '{"v": 5}'), Write("b", 5, '{"v": 5}')) == {"indexed": 2}
    assert write(client, config, index, Write("a", 5, '{"v": 55}'), Write("a", 4, '{"v": 4}')) == {"superseded": 2}
    assert write(client, config, index, Write("a", 6, '{"v": 6}')) == {"indexed": 1}
    assert write(client, config, index, Write("b", 7, None)) == {"deleted": 1}
    # the tombstone keeps version 7: an older or equal index of b is refused, a newer one is not
    assert write(client, config, index, Write("b", 7, '{"v": 7}'), Write("b", 6, '{"v": 6}')) == {"superseded": 2}
    # a delete of an absent document answers 404 (counted as done) and leaves a tombstone too
    assert write(client, config, index, Write("c", 3, None)) == {"deleted": 1}
    assert write(client, config, index, Write("c", 3, '{"v": 3}')) == {"superseded": 1}
    assert write(client, config, index, Write("c", 4, '{"v": 4}'), Write("b", 8, '{"v": 8}')) == {"indexed": 2}
    # a resync's external_gte rewrites documents of equal version, never older ones
    assert write(client, config, index, Write("a", 6, '{"v": 66}'), version_type=VersionType.EXTERNAL_GTE) == {"indexed": 1}
    assert write(client, config, index, Write("a", 5, '{"v": 5}'), version_type=VersionType.EXTERNAL_GTE) == {"superseded": 1}
    assert index_documents(client, index) == {"a": '{"v":66}', "b": '{"v":8}', "c": '{"v":4}'}
    assert client.count(index=index)["count"] == 3
    assert client.get(index=index, id="a")["_version"] == 6


def test_unversioned_writes_as_the_peer_sends_them(client: OpenSearch, index: str) -> None:
    actions = [
        {"_op_type": "index", "_index": index, "_id": "1", "_source": {"x": 1}},
        {"_op_type": "index", "_index": index, "_id": "1", "_source": {"x": 2}},
        {"_op_type": "delete", "_index": index, "_id": "2"},
    ]
    ok, errors = helpers.bulk(client, actions, raise_on_error=False)
    assert ok == 2
    assert [next(iter(e.values()))["status"] for e in errors] == [404]  # auto-created index, absent document
    assert client.get(index=index, id="1")["_version"] == 2


def test_index_lifecycle_generations_behind_an_alias(client: OpenSearch, config: OpenSearchConfig, index: str) -> None:
    spec = IndexSpec({"dynamic": "strict", "properties": {"x": {"type": "long"}}}, {"number_of_shards": 1})
    IndexAlias(client, index).ensure(spec)
    assert IndexAlias(client, index).current() == f"{index}-1"
    first = index_uuid(client, index)
    assert first is not None
    write(client, config, index, Write("1", 2, '{"x": 1}'))
    IndexAlias(client, index).ensure(IndexSpec({"properties": {"x": {"type": "long"}, "y": {"type": "keyword"}}}))
    assert set(client.indices.get_mapping(index=index)[f"{index}-1"]["mappings"]["properties"]) == {"x", "y"}

    building = IndexAlias(client, index).start_rebuild(spec, resumable=set())
    assert building == f"{index}-2"
    settings = client.indices.get_settings(index=building, flat_settings=True)[building]["settings"]
    assert settings["index.refresh_interval"] == BUILD_SETTINGS["refresh_interval"]
    write(client, config, building, Write("2", 1, '{"x": 2}'))
    assert index_documents(client, index) == {"1": '{"x":1}'}  # searches read the old generation until the swap
    IndexAlias(client, index).finish(building, spec)
    assert IndexAlias(client, index).current() == building
    assert index_uuid(client, index) not in (None, first)
    assert index_documents(client, index) == {"2": '{"x":2}'}
    with pytest.raises(NotFoundError):
        client.indices.get(index=f"{index}-1")


def test_write_blocks_are_seen_and_scrolled_deletes_of_older_documents(
    client: OpenSearch, config: OpenSearchConfig, index: str
) -> None:
    IndexAlias(client, index).ensure()
    write(client, config, index, *(Write(str(i), 1 if i % 2 else 3, f'{{"i": {i}}}') for i in range(25)))
    deleted = sum(delete_older(client, config, index, 3, piece, 3) for piece in range(3))
    assert deleted == 12
    assert sorted(index_documents(client, index), key=int) == [str(i) for i in range(0, 25, 2)]
    client.indices.put_settings(index=index, body={"index": {"blocks": {"write": True}}})
    with pytest.raises(SinkError, match="index.blocks.write"):
        IndexAlias(client, index).check_writable()


def test_a_bulk_answer_cut_by_filter_path_is_osmems(client: OpenSearch, index: str, osmem_clone: Any) -> None:
    """icecdc asks for each item's status and error only (`sink.BULK_ANSWER`); the bench sink must
    answer that as OpenSearch (osmem) does, or the bench would time an answer icecdc never gets."""
    body = (
        f'{{"index":{{"_index":"{index}","_id":"a","version":2,"version_type":"external"}}}}\n{{"v":1}}\n'
        f'{{"index":{{"_index":"{index}","_id":"a","version":1,"version_type":"external"}}}}\n{{"v":0}}\n'
        f'{{"delete":{{"_index":"{index}","_id":"gone","version":3,"version_type":"external"}}}}\n'
    )
    answers = []
    for server in (client, OpenSearch(hosts=[osmem_clone.url])):
        server.indices.create(index=index)
        answer = server.bulk(body=body, filter_path=BULK_ANSWER)
        answers.append(
            {
                **answer,
                "items": [
                    {op: {**item, "error": item.get("error", {}).get("type")}}
                    for entry in answer["items"]
                    for op, item in entry.items()
                ],
            }
        )
    assert answers[0] | {"took": 0} == answers[1] | {"took": 0}
    assert [next(iter(entry.values()))["status"] for entry in answers[0]["items"]] == [201, 409, 404]


def test_an_acknowledging_sink_counts_an_exports_writes_stores_none_and_refuses_the_rest(index: str) -> None:
    """The in-process bench's acknowledging sink: icecdc's `index` writes answered as created and
    counted per index (its `_count` is what the bench checks), nothing stored; a delete, or a bulk
    request that asks for more than each item's status, is refused, not answered wrongly."""
    with SinkServer.start(acknowledge=True) as server:
        client, config = OpenSearch(hosts=[server.url], timeout=30), OpenSearchConfig(url=server.url, bulk_chunk_size=3)
        IndexAlias(client, index).ensure()
        other = f"{index}-other"
        writes = [Write(str(i), 1, f'{{"i": {i}}}', index=other if i % 4 == 0 else None) for i in range(10)]
        assert write(client, config, index, *writes) == {"indexed": 10}
        assert client.count(index=index)["count"] == 7
        assert client.count(index=other)["count"] == 3
        with pytest.raises(NotFoundError):
            client.get(index=index, id="1")
        with pytest.raises(SinkError, match="acknowledging sink answers index actions only"):
            write(client, config, index, Write("1", 2, None))
        with pytest.raises(RequestError) as refused:
            client.bulk(body=f'{{"index":{{"_index":"{index}","_id":"a"}}}}\n{{}}\n')
        assert "acknowledging sink answers with items' status alone" in str(refused.value.info)
        assert client.count(index=index)["count"] == 7


def test_mget_answers_each_id_found_with_its_version_and_source_or_not_found_after_a_delete(
    client: OpenSearch, config: OpenSearchConfig, index: str
) -> None:
    """A pass's lookup of appended keys (`engines/target.py`): one `_mget` per block."""
    IndexAlias(client, index).ensure()
    write(client, config, index, Write("a", 5, '{"v": 5}'), Write("b", 5, '{"v": 5}'))
    write(client, config, index, Write("b", 6, None))
    docs = client.mget(index=index, body={"ids": ["a", "b", "c"]})["docs"]
    assert [(d["_id"], d["found"]) for d in docs] == [("a", True), ("b", False), ("c", False)]
    assert (docs[0]["_version"], docs[0]["_source"]) == (5, {"v": 5})
