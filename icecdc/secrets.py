"""Basic-auth credentials for OpenSearch, the password from Secrets Manager when a secret is named.

The configuration names it in `opensearch.password_secret_arn`. A command reads it once, where it
opens its destination (`resolved`), and hands the resolved section to what it runs: the engines,
and Spark's executors in the tasks it ships them. It is never written into a file, an asset or an
argument.
"""

from __future__ import annotations

import json

from icecdc.config import OpenSearchConfig
from icecdc.errors import ConfigError
from icecdc.secret_values import secret_string


def basic_auth(config: OpenSearchConfig) -> tuple[str, str] | None:
    """(username, password) for OpenSearch, or None when the configuration has no basic auth."""
    if config.username is None:
        return None
    if config.password_secret_arn is None:
        assert config.password is not None  # the configuration checked that they go together
        return config.username, config.password
    return config.username, _secret_password(config.password_secret_arn)


def resolved(config: OpenSearchConfig) -> OpenSearchConfig:
    """`config` with the password its secret holds in place of the secret, read once here."""
    if config.password_secret_arn is None:
        return config
    assert config.username is not None  # the configuration checked that they go together
    password = _secret_password(config.password_secret_arn)
    return config.model_copy(update={"password": password, "password_secret_arn": None})


def _secret_password(arn: str) -> str:
    text = secret_string(arn, "opensearch.password_secret_arn")
    if text.startswith("{"):  # a JSON secret, as the console's "other type of secret" stores it
        password = json.loads(text).get("password")
        if not isinstance(password, str):
            raise ConfigError(
                f"opensearch.password_secret_arn {arn}: the secret's JSON has no string 'password'"
            )
        return password
    return text
