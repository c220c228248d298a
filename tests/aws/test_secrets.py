"""The OpenSearch password from AWS Secrets Manager (moto's server): read where a client opens,
never in the configuration file; a missing secret is an error naming the secret, not its value."""

from __future__ import annotations

import json
from typing import Any

import pytest

from icecdc.config import OpenSearchConfig
from icecdc.destination.client import open_client
from icecdc.errors import ConfigError
from icecdc.secrets import basic_auth
from tests.support.aws import REGION, aws_client


@pytest.fixture
def secrets(moto_url: str, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("AWS_ENDPOINT_URL", moto_url)
    return aws_client("secretsmanager", moto_url)


def test_the_password_comes_from_the_secret_as_text_or_json(secrets: Any, unique: str) -> None:
    plain = secrets.create_secret(Name=f"plain-{unique}", SecretString="s3cret")["ARN"]
    as_json = secrets.create_secret(Name=f"json-{unique}", SecretString=json.dumps({"username": "x", "password": "j5on"}))["ARN"]
    assert basic_auth(OpenSearchConfig(url="https://search", username="icecdc", password_secret_arn=plain)) == (
        "icecdc",
        "s3cret",
    )
    assert basic_auth(OpenSearchConfig(url="https://search", username="icecdc", password_secret_arn=as_json)) == (
        "icecdc",
        "j5on",
    )
    assert basic_auth(OpenSearchConfig(url="https://search", username="icecdc", password="local")) == ("icecdc", "local")
    assert basic_auth(OpenSearchConfig(url="https://search")) is None


def test_a_missing_secret_is_an_error_naming_it(secrets: Any) -> None:
    arn = f"arn:aws:secretsmanager:{REGION}:123456789012:secret:nowhere-AbCdEf"
    with pytest.raises(ConfigError, match="password_secret_arn .*nowhere.*ResourceNotFoundException"):
        basic_auth(OpenSearchConfig(url="https://search", username="icecdc", password_secret_arn=arn))


def test_the_client_authenticates_with_the_secrets_password(secrets: Any, unique: str) -> None:
    arn = secrets.create_secret(Name=f"client-{unique}", SecretString="s3cret")["ARN"]
    client = open_client(OpenSearchConfig(url="https://search", username="icecdc", password_secret_arn=arn))
    assert client.transport.kwargs["http_auth"] == ("icecdc", "s3cret")
