"""The OpenSearch Serverless stand-in (tests/support/serverless.py) against osmem.

opensearch-py signs with `AWSV4SignerAuth(credentials, region, "aoss")`, as icecdc's Serverless
destination does. Each documented operation passes; each undocumented one is refused as
Serverless refuses it, and nothing of it reaches osmem; SigV4 is verified; writes are seen by
searches only after the stand-in's delay; requests are counted by operation.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from typing import Any

import pytest
import requests
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from opensearchpy import AWSV4SignerAuth, OpenSearch, RequestsHttpConnection
from opensearchpy.exceptions import AuthorizationException, NotFoundError, RequestError

from tests.support.faults import FaultProxy
from tests.support.iam import Call, DataAccess, Enforcer, Refusal, Request, RolePolicy, Statement
from tests.support.serverless import ServerlessStandIn

INDEX = "orders"
DELAY = 1.0  # seconds; Serverless's own refresh is about 10
NOT_SUPPORTED = "not supported in OpenSearch Serverless"


def client(serverless: ServerlessStandIn) -> OpenSearch:
    return serverless.client()


def direct(serverless: ServerlessStandIn) -> OpenSearch:
    """Straight to the upstream osmem clone: what really reached the server."""
    return OpenSearch(hosts=[serverless.upstream_url])


def created(serverless: ServerlessStandIn, *docs: tuple[str, int]) -> OpenSearch:
    """A client, after creating INDEX and indexing the (id, n) documents into it."""
    os = client(serverless)
    os.indices.create(index=INDEX, body={"mappings": {"properties": {"n": {"type": "long"}}}})
    for doc_id, n in docs:
        os.index(index=INDEX, id=doc_id, body={"n": n})
    return os


def signed(
    serverless: ServerlessStandIn,
    method: str,
    path: str,
    body: bytes = b"",
    service: str = "aoss",
    credentials: Credentials | None = None,
    content_hash: str | None = "",
) -> requests.Response:
    """A request signed by botocore; `content_hash` "" is the body's, None leaves the header out."""
    url = serverless.url + path
    request = AWSRequest(method, url, data=body, headers={"Content-Type": "application/json"})
    if content_hash is not None:
        request.headers["X-Amz-Content-SHA256"] = content_hash or hashlib.sha256(body).hexdigest()
    SigV4Auth(credentials or serverless.credentials, service, serverless.region).add_auth(request)
    headers = dict(request.headers.items())
    return requests.request(method, url, data=body, headers=headers, timeout=30)


# -- SigV4 ---------------------------------------------------------------------------------


def test_a_request_signed_for_aoss_with_the_body_hash_passes(serverless: ServerlessStandIn) -> None:
    body = json.dumps({"mappings": {"properties": {"n": {"type": "long"}}}}).encode()
    answer = signed(serverless, "PUT", f"/{INDEX}", body)
    assert answer.status_code == 200, answer.text
    assert direct(serverless).indices.exists(index=INDEX)


@pytest.mark.parametrize(
    ("case", "message"),
    [
        ("unsigned", "Missing Authentication Token"),
        ("service es", "Credential should be scoped to correct service: 'aoss'."),
        ("no body hash", "Missing required header for this request: x-amz-content-sha256"),
        ("wrong body hash", "The provided 'x-amz-content-sha256' header does not match"),
        ("wrong secret", "The request signature we calculated does not match"),
        ("other key", "The security token included in the request is invalid."),
    ],
)
def test_a_request_not_signed_as_serverless_wants_is_refused_403(
    serverless: ServerlessStandIn,
    case: str,
    message: str,
) -> None:
    body, path, theirs = json.dumps({"mappings": {}}).encode(), f"/{INDEX}", serverless.credentials
    if case == "unsigned":
        answer = requests.put(f"{serverless.url}{path}", data=body, timeout=30)
    elif case == "service es":
        answer = signed(serverless, "PUT", path, body, service="es")
    elif case == "no body hash":
        answer = signed(serverless, "PUT", path, body, content_hash=None)
    elif case == "wrong body hash":
        other_hash = hashlib.sha256(b"{}").hexdigest()
        answer = signed(serverless, "PUT", path, body, content_hash=other_hash)
    elif case == "wrong secret":
        guess = Credentials(theirs.access_key, "guess")
        answer = signed(serverless, "PUT", path, body, credentials=guess)
    else:
        other = Credentials("AKIAOTHER", theirs.secret_key)
        answer = signed(serverless, "PUT", path, body, credentials=other)
    assert answer.status_code == 403
    assert message in answer.json()["message"]
    assert not direct(serverless).indices.exists(index=INDEX)
    assert serverless.counts() == {"unauthenticated": 1}


def test_a_body_changed_after_signing_is_refused(serverless: ServerlessStandIn) -> None:
    url = f"{serverless.url}/{INDEX}"
    request = AWSRequest("PUT", url, data=b"{}", headers={"Content-Type": "application/json"})
    request.headers["X-Amz-Content-SHA256"] = hashlib.sha256(b"{}").hexdigest()
    SigV4Auth(serverless.credentials, "aoss", serverless.region).add_auth(request)
    headers = dict(request.headers.items())
    answer = requests.put(url, data=b'{"settings": {}}', headers=headers, timeout=30)
    assert answer.status_code == 403
    assert "x-amz-content-sha256" in answer.json()["message"]


def test_opensearch_py_signing_for_es_is_refused(serverless: ServerlessStandIn) -> None:
    with pytest.raises(AuthorizationException) as refused:
        serverless.client(service="es").indices.create(index=INDEX)
    assert refused.value.status_code == 403
    assert "scoped to correct service: 'aoss'" in str(refused.value.info)


def test_the_guard_refuses_with_serverless_own_403(serverless: ServerlessStandIn) -> None:
    asked: list[tuple[str, str, str | None]] = []

    def guard(request: Request) -> Refusal | None:
        credential = request.credential()
        asked.append((request.method, request.path, credential[0] if credential else None))
        collection = "arn:aws:aoss:us-east-1:123456789012:collection/c"
        return Refusal("planner", Call("aoss:APIAccessAll", collection))

    serverless.guard = guard
    with pytest.raises(AuthorizationException) as refused:
        client(serverless).indices.create(index=INDEX)
    assert refused.value.info["error"] == {"reason": "403 Forbidden", "type": "Forbidden"}
    assert asked == [("PUT", f"/{INDEX}", serverless.credentials.access_key)]
    assert not direct(serverless).indices.exists(index=INDEX)


def test_the_iam_harness_checks_api_access_all_on_the_collection(
    serverless: ServerlessStandIn,
) -> None:
    collection = "arn:aws:aoss:us-east-1:123456789012:collection/orders"
    allowed = Statement("Allow", ("aoss:APIAccessAll",), (collection,), {})
    enforcer = Enforcer()
    enforcer.act_as(serverless.credentials.access_key, RolePolicy("planner", (allowed,)))
    serverless.guard = enforcer.serverless_guard(collection)
    client(serverless).indices.create(index=INDEX)
    assert ("planner", "aoss:APIAccessAll", collection) in enforcer.exercised
    enforcer.act_as(serverless.credentials.access_key, RolePolicy("job", ()))
    with pytest.raises(AuthorizationException):
        client(serverless).indices.delete(index=INDEX)
    refused = [str(r) for r in enforcer.refusals]
    assert refused == [f"role job may not aoss:APIAccessAll on {collection}"]
    assert direct(serverless).indices.exists(index=INDEX)


def test_each_accepted_key_signs_with_its_own_secret(serverless: ServerlessStandIn) -> None:
    """A role's key the stand-in accepts signs with that key's secret only; the guard sees it."""
    serverless.accept("AKIAJOBROLE", "job-secret")
    keys: list[str | None] = []
    serverless.guard = lambda request: keys.append((request.credential() or ("",))[0]) or None
    serverless.client(Credentials("AKIAJOBROLE", "job-secret")).indices.create(index=INDEX)
    with pytest.raises(AuthorizationException) as refused:
        serverless.client(Credentials("AKIAJOBROLE", serverless.credentials.secret_key)).indices.get(index=INDEX)
    assert "signature we calculated does not match" in str(refused.value.info)
    client(serverless).indices.get(index=INDEX)
    assert keys == ["AKIAJOBROLE", serverless.credentials.access_key]


def test_the_data_access_policy_is_checked_on_the_index_or_collection_a_request_names(
    serverless: ServerlessStandIn,
) -> None:
    """`DataAccess`: each request's permission (its route's) on the indexes its path or its bulk
    names, or on the collection for aliases; a principal without it gets Serverless's 403."""
    role = "arn:aws:iam::123456789012:role/job"
    rules = [
        {"ResourceType": "index", "Resource": ["index/search/orders", "index/search/orders-*"], "Permission": ["aoss:*"]},
        {"ResourceType": "collection", "Resource": ["collection/search"], "Permission": ["aoss:DescribeCollectionItems"]},
    ]
    enforcer = Enforcer()
    enforcer.act_as(serverless.credentials.access_key, RolePolicy("job", ()))
    policy = DataAccess("search", ({"Rules": rules, "Principal": [role]},))
    serverless.access = enforcer.data_access_guard(policy, {serverless.credentials.access_key: role})
    os = client(serverless)
    os.indices.create(index="orders-1")
    os.bulk(body=[{"index": {"_index": "orders-1", "_id": "1"}}, {"a": 1}])
    os.indices.get_alias(index="orders-1")
    with pytest.raises(AuthorizationException):
        os.indices.create(index="customers")
    with pytest.raises(AuthorizationException):
        os.bulk(body=[{"index": {"_index": "customers", "_id": "1"}}, {"a": 1}])
    with pytest.raises(AuthorizationException):
        os.indices.update_aliases(body={"actions": [{"add": {"index": "orders-1", "alias": "orders"}}]})
    assert sorted(str(r) for r in enforcer.refusals) == [
        "role job may not aoss:CreateCollectionItems on collection/search",
        "role job may not aoss:CreateIndex on index/search/customers",
        "role job may not aoss:WriteDocument on index/search/customers",
    ]
    assert not direct(serverless).indices.exists(index="customers")
    assert serverless.count("forbidden") == 3


# -- what passes ---------------------------------------------------------------------------


def test_index_create_exists_get_and_delete_pass(serverless: ServerlessStandIn) -> None:
    os = client(serverless)
    assert not os.indices.exists(index=INDEX)
    os.indices.create(index=INDEX, body={"mappings": {"properties": {"n": {"type": "long"}}}})
    assert os.indices.exists(index=INDEX)
    assert INDEX in os.indices.get(index=INDEX)
    assert os.indices.get_settings(index=INDEX)[INDEX]["settings"]["index"]
    assert [row["index"] for row in os.cat.indices(format="json")] == [INDEX]
    os.indices.delete(index=INDEX)
    assert not direct(serverless).indices.exists(index=INDEX)


def test_a_signed_delete_passes_through_the_fault_proxy(serverless: ServerlessStandIn) -> None:
    """requests signs a DELETE without a body with `Content-Length: 0`; the proxy must send that
    header on, or the signature no longer matches (the model-based test's rebuild found it)."""
    proxy = FaultProxy(serverless.url).start()
    try:
        signer = AWSV4SignerAuth(serverless.credentials, serverless.region, "aoss")
        client = OpenSearch(hosts=[proxy.url], http_auth=signer, connection_class=RequestsHttpConnection)
        client.indices.create(index="t-1")
        client.indices.delete(index="t-1")
        assert not client.indices.exists(index="t-1")
    finally:
        proxy.stop()


def test_mappings_get_and_put_pass(serverless: ServerlessStandIn) -> None:
    os = created(serverless)
    os.indices.put_mapping(index=INDEX, body={"properties": {"name": {"type": "keyword"}}})
    properties = os.indices.get_mapping(index=INDEX)[INDEX]["mappings"]["properties"]
    assert properties == {"n": {"type": "long"}, "name": {"type": "keyword"}}


def test_documents_crud_by_id_pass_and_are_real_time(serverless: ServerlessStandIn) -> None:
    serverless.search_delay = 60  # GET by id does not wait for a refresh
    os = created(serverless, ("a/1 x", 1))
    assert os.get(index=INDEX, id="a/1 x")["_source"] == {"n": 1}
    os.create(index=INDEX, id="b", body={"n": 2})
    os.update(index=INDEX, id="b", body={"doc": {"n": 3}})
    assert os.get(index=INDEX, id="b")["_source"] == {"n": 3}
    os.delete(index=INDEX, id="a/1 x")
    with pytest.raises(NotFoundError):
        os.get(index=INDEX, id="a/1 x")
    docs = os.mget(index=INDEX, body={"ids": ["a/1 x", "b"]})["docs"]
    assert [(d["_id"], d["found"]) for d in docs] == [("a/1 x", False), ("b", True)]


def test_bulk_index_create_and_delete_with_custom_ids_pass(serverless: ServerlessStandIn) -> None:
    os = created(serverless, ("gone", 0))
    lines = [
        {"index": {"_index": INDEX, "_id": "1"}},
        {"n": 1},
        {"create": {"_index": INDEX, "_id": "2"}},
        {"n": 2},
        {"delete": {"_index": INDEX, "_id": "gone"}},
    ]
    answer = os.bulk(body=lines)
    assert not answer["errors"]
    assert [next(iter(i.values()))["status"] for i in answer["items"]] == [201, 201, 200]
    docs = os.mget(index=INDEX, body={"ids": ["1", "2", "gone"]})["docs"]
    assert [d["_id"] for d in docs if d["found"]] == ["1", "2"]


def test_a_bulk_answer_is_filtered_as_filter_path_asks(serverless: ServerlessStandIn) -> None:
    serverless.search_delay = DELAY
    os = created(serverless)
    lines = [
        {"index": {"_index": INDEX, "_id": "1", "version": 2, "version_type": "external"}},
        {"n": 1},
        {"index": {"_index": INDEX, "_id": "2"}},
        {"n": 2},
    ]
    answer = os.bulk(body=lines, filter_path="errors,items.*.status,items.*.error.type")
    assert answer == {
        "errors": True,
        "items": [
            {"index": {"status": 400, "error": {"type": "illegal_argument_exception"}}},
            {"index": {"status": 201}},
        ],
    }
    time.sleep(DELAY)
    assert [h["_id"] for h in os.search(index=INDEX)["hits"]["hits"]] == ["2"]
    assert serverless.replay_failures() == []


def test_search_with_sort_and_search_after_and_count_pass(serverless: ServerlessStandIn) -> None:
    os = created(serverless, *((str(n), n) for n in range(5)))
    pages, after = [], None
    while True:
        body: dict[str, Any] = {"size": 2, "sort": [{"n": "asc"}]}
        if after is not None:
            body["search_after"] = after
        hits = os.search(index=INDEX, body=body)["hits"]["hits"]
        if not hits:
            break
        pages.append([h["_id"] for h in hits])
        after = hits[-1]["sort"]
    assert pages == [["0", "1"], ["2", "3"], ["4"]]
    assert os.count(index=INDEX)["count"] == 5
    assert os.count(index=INDEX, body={"query": {"range": {"n": {"gte": 3}}}})["count"] == 2


def test_aliases_get_and_post_pass(serverless: ServerlessStandIn) -> None:
    os = created(serverless, ("1", 1))
    os.indices.update_aliases(body={"actions": [{"add": {"index": INDEX, "alias": "current"}}]})
    assert os.indices.get_alias(name="current") == {INDEX: {"aliases": {"current": {}}}}
    assert "current" in os.transport.perform_request("GET", "/_aliases")[INDEX]["aliases"]
    assert os.count(index="current")["count"] == 1


def test_index_templates_pass(serverless: ServerlessStandIn) -> None:
    os = client(serverless)
    mappings = {"properties": {"n": {"type": "long"}}}
    template = {"index_patterns": ["orders-*"], "template": {"mappings": mappings}}
    os.indices.put_index_template(name="orders", body=template)
    assert os.indices.get_index_template(name="orders")["index_templates"][0]["name"] == "orders"
    os.indices.create(index="orders-1")
    assert os.indices.get_mapping(index="orders-1")["orders-1"]["mappings"] == mappings
    os.indices.delete_index_template(name="orders")
    with pytest.raises(NotFoundError):
        os.indices.get_index_template(name="orders")


# -- what is refused -----------------------------------------------------------------------

SETTINGS_REFUSED = [
    ("shards, nested", {"settings": {"index": {"number_of_shards": 2}}}),
    ("replicas, flat", {"settings": {"index.number_of_replicas": 0}}),
    ("refresh interval, bare", {"settings": {"refresh_interval": "1s"}}),
]


@pytest.mark.parametrize(("case", "body"), SETTINGS_REFUSED, ids=[c for c, _ in SETTINGS_REFUSED])
def test_index_creation_with_settings_serverless_manages_is_refused_400(
    serverless: ServerlessStandIn, case: str, body: dict[str, Any]
) -> None:
    with pytest.raises(RequestError) as refused:
        client(serverless).indices.create(index=INDEX, body=body)
    assert refused.value.status_code == 400
    assert NOT_SUPPORTED in refused.value.info["error"]["reason"]
    assert not direct(serverless).indices.exists(index=INDEX)


def test_templates_and_settings_updates_with_those_settings_are_refused_400(
    serverless: ServerlessStandIn,
) -> None:
    os = created(serverless)
    settings = {"index": {"number_of_shards": 1}}
    template = {"index_patterns": ["o-*"], "template": {"settings": settings}}
    with pytest.raises(RequestError, match="index.number_of_shards: not supported"):
        os.indices.put_index_template(name="o", body=template)
    with pytest.raises(RequestError, match="index.refresh_interval: not supported"):
        os.indices.put_settings(index=INDEX, body={"index": {"refresh_interval": "1s"}})
    kept = direct(serverless).indices.get_settings(index=INDEX)[INDEX]["settings"]["index"]
    assert "refresh_interval" not in kept
    with pytest.raises(NotFoundError):
        direct(serverless).indices.get_index_template(name="o")


VERSIONED = [
    ("external version", {"version": 5, "version_type": "external"}, "version, version_type"),
    ("sequence number", {"if_seq_no": 0, "if_primary_term": 1}, "if_seq_no, if_primary_term"),
]


@pytest.mark.parametrize(("case", "params", "named"), VERSIONED, ids=[c for c, _, _ in VERSIONED])
def test_versioned_and_conditional_writes_are_refused_400(
    serverless: ServerlessStandIn, case: str, params: dict[str, Any], named: str
) -> None:
    os = created(serverless)
    with pytest.raises(RequestError) as refused:
        os.index(index=INDEX, id="1", body={"n": 1}, params=params)
    assert refused.value.info["error"]["reason"] == f"{named}: {NOT_SUPPORTED}"
    assert not direct(serverless).exists(index=INDEX, id="1")


def test_the_refresh_parameter_gets_serverless_answer(serverless: ServerlessStandIn) -> None:
    os = created(serverless)
    with pytest.raises(RequestError) as refused:
        os.index(index=INDEX, id="1", body={"n": 1}, refresh=True)
    assert refused.value.info["error"]["type"] == "status_exception"
    assert refused.value.info["error"]["reason"] == "true refresh policy is not supported."
    with pytest.raises(RequestError, match="wait_for refresh policy"):
        os.bulk(body=[{"index": {"_index": INDEX, "_id": "2"}}, {"n": 2}], refresh="wait_for")
    assert not direct(serverless).exists(index=INDEX, id="1")
    assert not direct(serverless).exists(index=INDEX, id="2")


def test_bulk_actions_with_versions_fail_alone(serverless: ServerlessStandIn) -> None:
    os = created(serverless, ("3", 0))
    lines = [
        {"index": {"_index": INDEX, "_id": "1", "version": 7, "version_type": "external"}},
        {"n": 1},
        {"index": {"_index": INDEX, "_id": "2"}},
        {"n": 2},
        {"delete": {"_index": INDEX, "_id": "3", "if_seq_no": 0, "if_primary_term": 1}},
    ]
    answer = os.bulk(body=lines)
    assert answer["errors"]
    items = [next(iter(i.values())) for i in answer["items"]]
    assert [(i["_id"], i["status"]) for i in items] == [("1", 400), ("2", 201), ("3", 400)]
    assert items[0]["error"] == {
        "type": "illegal_argument_exception",
        "reason": "version, version_type: not supported in OpenSearch Serverless",
    }
    found = direct(serverless).mget(index=INDEX, body={"ids": ["1", "2", "3"]})["docs"]
    assert [d["found"] for d in found] == [False, True, True]


UNSUPPORTED = [
    ("GET", "/", None),
    ("POST", f"/{INDEX}/_search?scroll=1m", {"query": {"match_all": {}}}),
    ("POST", "/_search/scroll", {"scroll_id": "x", "scroll": "1m"}),
    ("DELETE", "/_search/scroll/_all", None),
    ("POST", f"/{INDEX}/_search/point_in_time?keep_alive=1m", None),
    ("GET", "/_search/point_in_time/_all", None),
    ("POST", f"/{INDEX}/_delete_by_query", {"query": {"match_all": {}}}),
    ("POST", "/_reindex", {"source": {"index": INDEX}, "dest": {"index": "copy"}}),
    ("POST", f"/{INDEX}/_refresh", None),
    ("POST", "/_refresh", None),
    ("POST", f"/{INDEX}/_flush", None),
    ("POST", f"/{INDEX}/_forcemerge", None),
    ("GET", "/_cluster/health", None),
    ("PUT", "/_cluster/settings", {"persistent": {}}),
    ("GET", "/_nodes/stats", None),
    ("GET", "/_cat/shards", None),
    ("GET", "/_cat/health", None),
    ("GET", "/_settings", None),
    ("PUT", "/_template/legacy", {"index_patterns": ["x-*"]}),
    ("PUT", "/_bulk", None),
    ("POST", f"/{INDEX}/_doc/1", {"n": 1}),
    ("HEAD", f"/{INDEX}/_doc/1", None),
]


@pytest.mark.parametrize(
    ("method", "target", "body"),
    UNSUPPORTED,
    ids=[f"{m} {t}" for m, t, _ in UNSUPPORTED],
)
def test_undocumented_operations_are_refused_404(
    serverless: ServerlessStandIn, method: str, target: str, body: dict[str, Any] | None
) -> None:
    os = created(serverless, ("1", 1))
    if method == "HEAD":  # opensearch-py answers a HEAD with whether it found the document
        assert os.transport.perform_request(method, target) is False
    else:
        with pytest.raises(NotFoundError) as refused:
            os.transport.perform_request(method, target, body=body)
        assert refused.value.info["error"]["type"] == "unsupported_operation_exception"
        assert NOT_SUPPORTED in refused.value.info["error"]["reason"]
    assert serverless.count("unsupported") == 1
    assert direct(serverless).count(index=INDEX)["count"] == 1
    assert not direct(serverless).indices.exists(index="copy")


def test_cat_indices_is_the_one_cat_api(serverless: ServerlessStandIn) -> None:
    os = created(serverless)
    rows = os.transport.perform_request("GET", "/_cat/indices", params={"format": "json"})
    assert [row["index"] for row in rows] == [INDEX]


def test_a_point_in_time_in_a_search_is_refused_400(serverless: ServerlessStandIn) -> None:
    os = created(serverless)
    with pytest.raises(RequestError, match="pit"):
        os.search(index=INDEX, body={"pit": {"id": "x", "keep_alive": "1m"}})


# -- search visibility ---------------------------------------------------------------------


def test_a_new_document_is_searched_only_after_the_delay(serverless: ServerlessStandIn) -> None:
    serverless.search_delay = DELAY
    os = created(serverless, ("1", 1))
    assert os.count(index=INDEX)["count"] == 0
    assert os.search(index=INDEX)["hits"]["hits"] == []
    assert os.get(index=INDEX, id="1")["found"]
    assert os.mget(index=INDEX, body={"ids": ["1"]})["docs"][0]["found"]
    time.sleep(DELAY)
    assert os.count(index=INDEX)["count"] == 1
    assert serverless.replay_failures() == []


def test_updates_and_deletes_are_searched_as_they_were_until_the_delay(
    serverless: ServerlessStandIn,
) -> None:
    os = created(serverless, ("1", 1), ("2", 2))
    assert os.count(index=INDEX)["count"] == 2  # no delay yet: seen at once
    serverless.search_delay = DELAY
    os.index(index=INDEX, id="1", body={"n": 10})
    os.bulk(body=[{"delete": {"_index": INDEX, "_id": "2"}}])
    hits = os.search(index=INDEX, body={"sort": [{"n": "asc"}]})["hits"]["hits"]
    assert [(h["_id"], h["_source"]["n"]) for h in hits] == [("1", 1), ("2", 2)]
    time.sleep(DELAY)
    hits = os.search(index=INDEX)["hits"]["hits"]
    assert [(h["_id"], h["_source"]["n"]) for h in hits] == [("1", 10)]
    assert serverless.replay_failures() == []


def test_writes_to_an_index_deleted_before_the_delay_are_never_searched(
    serverless: ServerlessStandIn,
) -> None:
    serverless.search_delay = DELAY
    os = created(serverless, ("1", 1))
    os.indices.delete(index=INDEX)
    os.indices.create(index=INDEX)
    time.sleep(DELAY)
    assert os.count(index=INDEX)["count"] == 0
    assert serverless.replay_failures() == []


def test_documents_written_through_an_alias_are_searched_after_the_delay(
    serverless: ServerlessStandIn,
) -> None:
    serverless.search_delay = DELAY
    os = created(serverless)
    os.indices.put_alias(index=INDEX, name="current")
    os.index(index="current", body={"n": 1})  # an id Serverless gives
    os.bulk(body=[{"index": {"_index": "current"}}, {"n": 2}])
    assert os.count(index="current")["count"] == 0
    time.sleep(DELAY)
    assert sorted(h["_source"]["n"] for h in os.search(index="current")["hits"]["hits"]) == [1, 2]
    assert serverless.replay_failures() == []


def test_concurrent_writes_are_searched_as_the_upstream_holds_them(
    serverless: ServerlessStandIn,
) -> None:
    serverless.search_delay = 0.2
    os = created(serverless)

    def write(n: int) -> None:
        for round_ in range(10):
            value = {"n": n * 100 + round_}
            lines = [x for i in range(5) for x in ({"index": {"_index": INDEX, "_id": str(i)}}, value)]
            os.bulk(body=lines)

    threads = [threading.Thread(target=write, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    time.sleep(0.2)
    hits = os.search(index=INDEX, body={"size": 10})["hits"]["hits"]
    searched = {h["_id"]: h["_source"] for h in hits}
    docs = direct(serverless).mget(index=INDEX, body={"ids": [str(i) for i in range(5)]})["docs"]
    assert searched == {d["_id"]: d["_source"] for d in docs}
    assert serverless.replay_failures() == []


# -- counts --------------------------------------------------------------------------------


def test_requests_are_counted_by_operation(serverless: ServerlessStandIn) -> None:
    os = created(serverless, ("1", 1), ("2", 2))
    os.bulk(body=[{"index": {"_index": INDEX, "_id": "3"}}, {"n": 3}])
    os.search(index=INDEX)
    os.count(index=INDEX)
    os.mget(index=INDEX, body={"ids": ["1"]})
    with pytest.raises(NotFoundError):
        os.info()
    with pytest.raises(RequestError):
        os.index(index=INDEX, id="4", body={"n": 4}, refresh=True)
    requests.get(f"{serverless.url}/{INDEX}/_count", timeout=30)
    assert serverless.counts() == {
        "create index": 1,
        "write document": 2,
        "bulk": 1,
        "search": 1,
        "count": 1,
        "mget": 1,
        "unsupported": 1,
        "write document refused": 1,
        "unauthenticated": 1,
    }
    assert [(s.operation, s.permission) for s in serverless.seen()][:2] == [
        ("create index", "aoss:CreateIndex"),
        ("write document", "aoss:WriteDocument"),
    ]
