"""The OpenSearch client: opened from the configuration, and checked for reachability.

It signs with SigV4, or uses basic auth, with the password from Secrets Manager
when the configuration names a secret.
"""

from __future__ import annotations

import json
from typing import Any

from opensearchpy import JSONSerializer, OpenSearch, RequestsHttpConnection, Transport
from opensearchpy.exceptions import (
    AuthenticationException,
    AuthorizationException,
    SerializationError,
    TransportError,
)
from opensearchpy.exceptions import ConnectionError as OpenSearchConnectionError

from icecdc.config import OpenSearchConfig
from icecdc.destination.capabilities import Capabilities, capabilities_of
from icecdc.errors import DENIED, DestinationDenied, SinkError, UnexpectedAnswer
from icecdc.secrets import basic_auth

__all__ = [
    "IDS_PER_REQUEST",
    "Answer",
    "Client",
    "capabilities_of",
    "OpenSearch",
    "OpenSearchConnectionError",
    "TransportError",
    "check_reachable",
    "describe_failure",
    "is_dev_server",
    "open_client",
    "reach",
]

# The index a Serverless collection is asked about when no configured one is at hand
REACHABILITY_PROBE = "icecdc"

# Ids one `_mget` asks for: audit, repair and replay look documents up by id in pages of this.
IDS_PER_REQUEST = 1000


class _Serializer(JSONSerializer):
    """opensearch-py's JSON serializer, with the same output and one encoder for every call.

    `json.dumps` with options builds an encoder per call, which is most of what
    serializing a bulk action line costs.
    """

    def __init__(self) -> None:
        self._encoder = json.JSONEncoder(
            default=self.default, ensure_ascii=False, separators=(",", ":")
        )

    def dumps(self, data: Any) -> Any:
        # documents are JSON text already: passed through, as opensearch-py does
        if isinstance(data, str):
            return data
        try:
            return self._encoder.encode(data)
        except (ValueError, TypeError) as exc:
            raise SerializationError(data, exc) from exc


class Answer(dict[str, Any]):
    """An OpenSearch answer: a key it lacks is an `UnexpectedAnswer` naming the request and key.

    A map inside it is one too, when read by key; the rest is as the server sent it.
    """

    def __init__(self, data: dict[str, Any], request: str, path: str = "") -> None:
        super().__init__(data)
        self.request = request
        self.path = path

    def __getitem__(self, key: str) -> Any:
        try:
            value = super().__getitem__(key)
        except KeyError:
            raise UnexpectedAnswer(
                f"OpenSearch answered {self.request} without {self.path}{key}: icecdc cannot "
                "read that answer (is the server OpenSearch, of a version icecdc supports?)"
            ) from None
        return Answer(value, self.request, f"{self.path}{key}.") if type(value) is dict else value

    def __reduce__(self) -> tuple[object, ...]:  # pickled as the plain map it is
        return (dict, (dict(self),))


class _Transport(Transport):
    """opensearch-py's transport, its answers `Answer`s naming their request.

    A 403 keeps the request it answered (`denied_request`), for `errors.access_denied`'s line.
    """

    def perform_request(self, method: str, url: str, *args: Any, **kwargs: Any) -> Any:
        try:
            answer = super().perform_request(method, url, *args, **kwargs)
        except AuthorizationException as exc:
            setattr(exc, "denied_request", f"{method} {url}")  # noqa: B010 - opensearch-py's class
            raise
        return Answer(answer, f"{method} {url}") if type(answer) is dict else answer


class Client(OpenSearch):
    """An OpenSearch client that knows what its destination can do (`capabilities`)."""

    def __init__(self, capabilities: Capabilities, **options: Any) -> None:
        super().__init__(**options)
        self.capabilities = capabilities


def open_client(config: OpenSearchConfig) -> Client:
    capabilities = Capabilities.of(config)
    options: dict[str, Any] = {
        "hosts": [config.url],
        "transport_class": _Transport,
        "serializer": _Serializer(),
        "verify_certs": config.verify_certs,
        "timeout": capabilities.request_seconds,
        "max_retries": config.max_retries,
        "retry_on_status": (502, 503, 504),
        "retry_on_timeout": True,
    }
    # the password from Secrets Manager when the config names a secret
    credentials = basic_auth(config)
    if credentials is not None:
        options["http_auth"] = credentials
    elif config.aws_region is not None:
        import boto3  # only the SigV4 path needs it
        from opensearchpy import AWSV4SignerAuth

        credentials = boto3.Session().get_credentials()
        options["http_auth"] = AWSV4SignerAuth(credentials, config.aws_region, config.aws_service)
        options["connection_class"] = RequestsHttpConnection
    return Client(capabilities, **options)


def check_reachable(client: OpenSearch, url: str, index: str = REACHABILITY_PROBE) -> str:
    """What answers at `url`, as `reach` says.

    It fails fast, before anything is written, when OpenSearch cannot be reached or refuses us.
    """
    try:
        return reach(client, index)
    except TransportError as exc:
        denied = isinstance(exc, AuthorizationException)
        raise (DestinationDenied if denied else SinkError)(describe_failure(exc, url)) from None


def reach(client: OpenSearch, index: str = REACHABILITY_PROBE) -> str:
    """What answers: a domain's distribution and version, or a Serverless collection.

    A domain answers `GET /`. A Serverless collection answers 404 to that: it is asked whether
    `index` exists, which it answers once the request is admitted (a data access policy naming the
    index), yes or no. A `TransportError` when unreachable or refused.
    """
    if capabilities_of(client).cluster_info:
        version = client.info().get("version", {})
        return f"{version.get('distribution', 'OpenSearch')} {version.get('number', '?')}"
    client.indices.exists(index=index)
    return "an OpenSearch Serverless collection"


def describe_failure(exc: TransportError, url: str) -> str:
    """One line for a request OpenSearch at `url` failed.

    The request was unreachable, the credentials refused (401), a permission
    missing (403), or another answer came.
    """
    if isinstance(exc, OpenSearchConnectionError):
        return f"OpenSearch at {url} is unreachable: {exc.info if exc.info else exc}"
    if isinstance(exc, AuthenticationException):
        return (
            f"OpenSearch at {url} refused the credentials ({exc.status_code}): "
            "check opensearch.username/password or the AWS identity"
        )
    if isinstance(exc, AuthorizationException):
        return f"OpenSearch at {url} denied a request ({_answer(exc)}): {DENIED}"
    return f"OpenSearch at {url} answered {_answer(exc)}"


def _answer(exc: TransportError) -> str:
    """The status and the reason of an OpenSearch error answer (`error.reason`, else its type)."""
    info, reason = exc.info, exc.error
    if isinstance(info, dict) and isinstance(info.get("error"), dict):
        reason = info["error"].get("reason") or info["error"].get("type") or reason
    return f"{exc.status_code}: {reason}" if reason else str(exc.status_code)


def is_dev_server(client: OpenSearch) -> bool:
    """Whether `client` talks to osmem, the dev server (by its cluster name); False when unknown."""
    if not capabilities_of(client).cluster_info:
        return False
    try:
        return bool(client.info().get("cluster_name") == "osmem")
    except (TransportError, OpenSearchConnectionError):
        return False
