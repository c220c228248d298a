"""The moto server fixtures (real HTTP on 127.0.0.1), registered by tests/conftest.py: the AWS
tests and the DynamoDB half of the state-store contract use them."""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
import requests

from tests.support.aws import REGION


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
class MotoServer:
    """moto's server on a free port in a thread (moto's ThreadedMotoServer, with DynamoDB serialised)."""

    server: Any = None
    thread: threading.Thread | None = None

    def start(self) -> str:
        from moto.server import DomainDispatcherApplication, create_backend_app
        from werkzeug.serving import make_server

        app = OneDynamoDbRequestAtATime(DomainDispatcherApplication(create_backend_app))
        self.server = make_server("127.0.0.1", 0, app, threaded=True)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        return f"http://127.0.0.1:{self.server.server_port}"

    def stop(self) -> None:
        self.server.shutdown()
        assert self.thread is not None
        self.thread.join()


@pytest.fixture(scope="session")
def moto_url() -> Iterator[str]:
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
            yield url
        finally:
            server.stop()


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
