"""The moto server fixtures (real HTTP on 127.0.0.1), registered by tests/conftest.py: the AWS
tests and the DynamoDB half of the state-store contract use them."""

from __future__ import annotations

import io
import logging
import threading
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
import requests

from tests.support.aws import REGION
from tests.support.iam import Enforcer, Refusal, Request, refusal_answer


@dataclass
class OneDynamoDbRequestAtATime:
    """WSGI middleware: moto answers DynamoDB's conditional puts and transactions without a lock, so
    two racing requests can both pass their condition (seen in CI: 30 wins for 29 items among three
    racing planners). Real DynamoDB serialises them; so does this, by taking its requests in turn."""

    app: Any
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        if not environ.get("HTTP_X_AMZ_TARGET", "").startswith("DynamoDB_"):
            return self.app(environ, start_response)  # type: ignore[no-any-return]
        with self.lock:
            return list(self.app(environ, start_response))


@dataclass
class IamEnforcement:
    """WSGI middleware: a request signed with a role's access key (tests/support/iam.py) is
    authorized against that role's statements from the template, and refused with a 403 as AWS
    words it when they do not allow it; every other request goes to moto as it came."""

    app: Any
    enforcer: Enforcer

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        if not self.enforcer.signed_by_a_role(environ.get("HTTP_AUTHORIZATION", "")):
            return self.app(environ, start_response)  # type: ignore[no-any-return]
        body = _body(environ)
        environ["wsgi.input"], environ["CONTENT_LENGTH"] = io.BytesIO(body), str(len(body))
        query = environ.get("QUERY_STRING", "")
        headers = {k[5:].replace("_", "-"): v for k, v in environ.items() if k.startswith("HTTP_")}
        headers["content-type"] = environ.get("CONTENT_TYPE", "")
        target = environ.get("PATH_INFO", "/") + (f"?{query}" if query else "")
        request = Request.of(environ["REQUEST_METHOD"], target, headers, body)
        refusal = self.enforcer.authorize(request)
        if refusal is None:
            hidden = self.enforcer.hides_missing_keys(request)
            return self._answer(environ, start_response, hidden) if hidden else self.app(environ, start_response)  # type: ignore[no-any-return]
        credential = request.credential()
        status, answer_headers, answer = refusal_answer(credential[1] if credential else "", request, refusal)
        start_response(f"{status} Forbidden", [*answer_headers, ("Content-Length", str(len(answer)))])
        return [answer]

    def _answer(self, environ: dict[str, Any], start_response: Callable[..., Any], hidden: Refusal) -> Iterable[bytes]:
        """moto's answer, but a 404 turned into S3's 403: a caller that may not list the bucket
        is not told that a key does not exist."""
        captured: list[tuple[str, list[tuple[str, str]]]] = []
        body = b"".join(self.app(environ, lambda status, headers, *_: captured.append((status, headers))))
        status, headers = captured[0]
        if status.startswith("404"):
            request = Request.of(environ["REQUEST_METHOD"], environ.get("PATH_INFO", "/"), {}, b"")
            code, headers, body = refusal_answer("s3", request, hidden)
            status = f"{code} Forbidden"
            headers = [*headers, ("Content-Length", str(len(body)))]
        start_response(status, headers)
        return [body]


def _body(environ: dict[str, Any]) -> bytes:
    """The whole request body: by its length, or to its end when the server framed it (chunked)."""
    if environ.get("CONTENT_LENGTH"):
        return bytes(environ["wsgi.input"].read(int(environ["CONTENT_LENGTH"])))
    if environ.get("wsgi.input_terminated"):
        return bytes(environ["wsgi.input"].read())
    return b""


@dataclass
class MotoServer:
    """moto's server on a free port in a thread (moto's ThreadedMotoServer, with DynamoDB
    serialised, and IAM enforced for the roles' access keys)."""

    server: Any = None
    thread: threading.Thread | None = None
    enforcer: Enforcer = field(default_factory=Enforcer)

    def start(self) -> str:
        from moto.server import DomainDispatcherApplication, create_backend_app
        from werkzeug.serving import make_server

        app = IamEnforcement(OneDynamoDbRequestAtATime(DomainDispatcherApplication(create_backend_app)), self.enforcer)
        self.server = make_server("127.0.0.1", 0, app, threaded=True)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        return self.url

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_port}"

    def stop(self) -> None:
        self.server.shutdown()
        assert self.thread is not None
        self.thread.join()


@pytest.fixture(scope="session")
def moto_server() -> Iterator[MotoServer]:
    """A moto server for the whole session; every boto3 and pyiceberg client of the tests talks to it."""
    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # one line per request otherwise
    with pytest.MonkeyPatch.context() as env:
        # Fake credentials, so nothing here can reach a real account, and no config file is read.
        for name, value in {
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_SESSION_TOKEN": "testing",
            "AWS_DEFAULT_REGION": REGION,
            "AWS_CONFIG_FILE": "/dev/null",
            "AWS_SHARED_CREDENTIALS_FILE": "/dev/null",
        }.items():
            env.setenv(name, value)
        server = MotoServer()
        url = server.start()
        # Glue job runs stay STARTING (moto finishes them at once by default): a started run is
        # "already running" for the rest of the test, as a real one would be for minutes.
        requests.post(
            f"{url}/moto-api/state-manager/set-transition",
            json={"model_name": "glue::job_run", "transition": {"progression": "manual", "times": 10**9}},
            timeout=10,
        ).raise_for_status()
        try:
            yield server
        finally:
            server.stop()


@pytest.fixture(scope="session")
def moto_url(moto_server: MotoServer) -> str:
    return moto_server.url


@pytest.fixture
def iam_enforcer(moto_server: MotoServer) -> Iterator[Enforcer]:
    """The session's IAM enforcement (tests/support/iam.py), reset after the test."""
    try:
        yield moto_server.enforcer
    finally:
        moto_server.enforcer.reset()


@pytest.fixture
def unique() -> str:
    """A name part no other test uses."""
    return uuid.uuid4().hex[:10]


@pytest.fixture
def state_table_factory(moto_url: str) -> Callable[[], str]:
    """Creates a fresh DynamoDB state table in moto and returns its name."""
    from icecdc.state.dynamodb import create_state_table

    def create() -> str:
        name = f"icecdc-state-{uuid.uuid4().hex[:10]}"
        create_state_table(name, region=REGION, endpoint_url=moto_url)
        return name

    return create


@pytest.fixture
def state_table(state_table_factory: Callable[[], str]) -> str:
    return state_table_factory()
