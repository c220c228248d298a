"""Basic-auth credentials for OpenSearch, the password from Secrets Manager when a secret is named.

The configuration names it in `opensearch.password_secret_arn`. It is read where a client is opened,
on the driver and on each executor, so it is never written into a file, an asset or an argument.
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
