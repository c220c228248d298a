"""The stack's custom resources (lambdas/custom_resources/handler.py) run here as CloudFormation
would run them: `domain_access` against a fake of the security plugin's REST API (no OpenSearch
with the security plugin runs on this machine), `publish` against moto's S3; every outcome is
answered to a local stand-in for CloudFormation's response URL."""

from __future__ import annotations

import contextlib
import http.server
import json
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.support.aws import aws_client
from tests.support.cdk import ADMIN
from tests.support.custom_resources import PROPERTIES, FakeSecurityApi, access


def test_the_handler_maps_admin_and_writer_and_turns_audit_logging_on_idempotently() -> None:
    api = FakeSecurityApi()
    access["apply"](api, PROPERTIES)
    access["apply"](api, PROPERTIES)  # an update, or a retried create
    assert api.docs["rolesmapping/all_access"]["all_access"]["backend_roles"] == ["arn:aws:iam::123456789012:role/master", ADMIN]
    assert api.docs["rolesmapping/security_manager"]["security_manager"]["backend_roles"] == [ADMIN]
    assert api.docs["roles/cdc-writer"] == json.loads(PROPERTIES["Role"])
    assert api.docs["rolesmapping/cdc-writer"] == {
        "cdc-writer": {"backend_roles": [PROPERTIES["Writer"]]}
    }  # the jobs' role alone
    assert api.docs["audit"]["config"]["enabled"] is True and api.docs["audit"]["config"]["compliance"] == {"enabled": True}
    assert api.calls.count(("PUT", "audit/config")) == 1

    access["remove"](api, PROPERTIES)
    assert "roles/cdc-writer" not in api.docs and "rolesmapping/cdc-writer" not in api.docs
    assert ADMIN in api.docs["rolesmapping/all_access"]["all_access"]["backend_roles"]  # a retained domain keeps its admin


@contextlib.contextmanager
def serving(method: str, answer: Callable[[http.server.BaseHTTPRequestHandler], None]) -> Iterator[str]:
    """A local HTTP server answering `method` requests with `answer(request)`; yields its host:port."""
    handler = type("Handler", (http.server.BaseHTTPRequestHandler,), {f"do_{method}": answer, "log_message": lambda *a: None})
    server = http.server.HTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()


@pytest.fixture
def cloudformation() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """A local stand-in for CloudFormation's presigned response URL."""
    answers: list[dict[str, Any]] = []

    def put(request: http.server.BaseHTTPRequestHandler) -> None:
        answers.append(json.loads(request.rfile.read(int(request.headers["Content-Length"]))))
        request.send_response(200)
        request.end_headers()

    with serving("PUT", put) as host:
        yield f"http://{host}/response", answers


def event(kind: str, url: str, properties: dict[str, Any] = PROPERTIES) -> dict[str, Any]:
    return {
        "RequestType": kind,
        "ResponseURL": url,
        "StackId": "arn:aws:cloudformation:us-east-1:123456789012:stack/cdc/x",
        "RequestId": "r-1",
        "LogicalResourceId": "SearchAccess",
        "ResourceProperties": properties,
    }


def test_the_handler_tells_cloudformation_every_outcome(
    cloudformation: tuple[str, list[dict[str, Any]]], monkeypatch: pytest.MonkeyPatch
) -> None:
    url, answers = cloudformation
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    fake = FakeSecurityApi()
    access["domain_access"](event("Create", url), None, lambda endpoint, region: fake)
    assert answers[-1]["Status"] == "SUCCESS" and answers[-1]["PhysicalResourceId"] == f"{PROPERTIES['Endpoint']}/cdc-writer"

    def refusing(endpoint: str, region: str) -> Any:
        raise RuntimeError("PUT roles/cdc-writer: HTTP 403")

    access["domain_access"](event("Update", url), None, refusing)
    assert answers[-1]["Status"] == "FAILED" and "HTTP 403" in answers[-1]["Reason"]
    access["domain_access"](event("Delete", url), None, refusing)  # a domain that cannot be reached must not block deletion
    assert answers[-1]["Status"] == "SUCCESS"


def test_publish_copies_the_asset_to_the_name_glue_requires(
    cloudformation: tuple[str, list[dict[str, Any]]], moto_url: str, unique: str
) -> None:
    url, answers = cloudformation
    s3 = aws_client("s3", moto_url)
    for bucket in (f"assets-{unique}", f"artifacts-{unique}"):
        s3.create_bucket(Bucket=bucket)
    s3.put_object(Bucket=f"assets-{unique}", Key="0123abcd.zip", Body=b"zip of wheels")
    properties = {
        "SourceBucket": f"assets-{unique}",
        "SourceKey": "0123abcd.zip",
        "Bucket": f"artifacts-{unique}",
        "Key": "python/icecdc-deps-0123.gluewheels.zip",
    }
    access["publish"](event("Create", url, properties), None, s3)
    assert answers[-1]["Status"] == "SUCCESS"
    assert answers[-1]["PhysicalResourceId"] == f"s3://artifacts-{unique}/python/icecdc-deps-0123.gluewheels.zip"
    copied = s3.get_object(Bucket=f"artifacts-{unique}", Key="python/icecdc-deps-0123.gluewheels.zip")["Body"].read()
    assert copied == b"zip of wheels"

    access["publish"](event("Update", url, {**properties, "SourceKey": "missing.zip"}), None, s3)
    assert answers[-1]["Status"] == "FAILED" and "NoSuchKey" in answers[-1]["Reason"]
    access["publish"](event("Delete", url, properties), None, s3)  # kept: a running job may still read it
    assert answers[-1]["Status"] == "SUCCESS"
    assert s3.head_object(Bucket=f"artifacts-{unique}", Key="python/icecdc-deps-0123.gluewheels.zip")


def test_settle_waits_on_create_and_update_only(cloudformation: tuple[str, list[dict[str, Any]]]) -> None:
    url, answers = cloudformation
    slept: list[float] = []
    for kind in ("Create", "Update", "Delete"):
        access["settle"](event(kind, url, {"Seconds": "60"}), None, slept.append)  # CloudFormation sends strings
        assert answers[-1]["Status"] == "SUCCESS"
    assert slept == [60.0, 60.0]


def test_every_attempt_at_the_security_api_is_signed_anew(monkeypatch: pytest.MonkeyPatch) -> None:
    """A domain may answer 5xx for minutes; a signature expires after about 5: each retry carries a
    signature of its own time."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    seen: list[tuple[str, str]] = []

    def ready_third_time(request: http.server.BaseHTTPRequestHandler) -> None:
        seen.append((request.headers["X-Amz-Date"], request.headers["Authorization"]))
        ready = len(seen) > 2
        request.send_response(200 if ready else 503)
        request.end_headers()
        request.wfile.write(b'{"config": {}}' if ready else b"not ready")

    with serving("GET", ready_third_time) as host:
        api = access["SecurityApi"](host, "us-east-1", scheme="http", pause=1.1)
        assert api.call("GET", "audit") == {"config": {}}
    assert len(seen) == 3 and len({date for date, _ in seen}) == 3 and len({auth for _, auth in seen}) == 3


def test_the_retries_of_all_calls_share_one_budget_within_the_functions_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    """A create makes several calls: were each given the whole retry budget, a domain answering 5xx
    would keep the Lambda past its timeout, and CloudFormation, never answered, waits an hour. Once
    the budget is spent a call is tried once, and its error goes to CloudFormation."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    attempts: list[str] = []

    def never_ready(request: http.server.BaseHTTPRequestHandler) -> None:
        attempts.append(request.path)
        request.send_response(503)
        request.end_headers()

    with serving("GET", never_ready) as host:
        api = access["SecurityApi"](host, "us-east-1", scheme="http", pause=0.2, ready_seconds=1)
        with pytest.raises(RuntimeError, match="GET rolesmapping/all_access: HTTP 503"):
            api.call("GET", "rolesmapping/all_access")
        first = len(attempts)
        with pytest.raises(RuntimeError, match="GET audit: HTTP 503"):
            api.call("GET", "audit")
    assert first > 1 and len(attempts) == first + 1


def test_an_admin_that_is_an_iam_user_is_mapped_as_a_user() -> None:
    """Fine-grained access control matches an IAM user's ARN under `users`, a role's under
    `backend_roles`."""
    user = "arn:aws:iam::123456789012:user/ops/alice"
    api = FakeSecurityApi()
    access["apply"](api, {**PROPERTIES, "Admin": user})
    for role in ("all_access", "security_manager"):
        mapping = api.docs[f"rolesmapping/{role}"][role]
        assert mapping["users"] == [user] and user not in mapping["backend_roles"]
    assert access["mapped_as"](ADMIN) == "backend_roles" and access["mapped_as"](user) == "users"


def test_the_service_linked_role_is_created_when_missing_and_kept(
    cloudformation: tuple[str, list[dict[str, Any]]], moto_url: str
) -> None:
    """OpenSearch places a domain in a VPC only once its service-linked role exists."""
    url, answers = cloudformation
    iam = aws_client("iam", moto_url)
    properties = {"ServiceName": "opensearchservice.amazonaws.com", "RoleName": "AWSServiceRoleForAmazonOpenSearchService"}
    for kind in ("Create", "Update", "Delete"):  # created once; an existing one is fine; never deleted
        access["service_linked_role"](event(kind, url, properties), None, iam)
        assert answers[-1]["Status"] == "SUCCESS", answers[-1]
    roles = iam.list_roles(PathPrefix="/aws-service-role/opensearchservice.amazonaws.com/")["Roles"]
    assert len(roles) == 1  # (moto names it otherwise than IAM's AWSServiceRoleForAmazonOpenSearchService)
