"""Basic-auth credentials for OpenSearch, the password from Secrets Manager when a secret is named.

The configuration names it in `opensearch.password_secret_arn`. It is read where a client is opened,
on the driver and on each executor, so it is never written into a file, an asset or an argument.
"""

from __future__ import annotations

import json

from icecdc.config import OpenSearchConfig
from icecdc.errors import ConfigError


def basic_auth(config: OpenSearchConfig) -> tuple[str, str] | None:
    """(username, password) for OpenSearch, or None when the configuration has no basic auth."""
    if config.username is None:
        return None
    if config.password_secret_arn is None:
        assert config.password is not None  # the configuration checked that they go together
        return config.username, config.password
    return config.username, _secret_password(config.password_secret_arn)


def _secret_password(arn: str) -> str:
    import boto3  # only this path needs it
    from botocore.exceptions import ClientError

    region = arn.split(":")[3] if arn.startswith("arn:") and arn.count(":") >= 6 else None
    # a session of its own: the planner's sweep opens clients in threads, and the default session
    # boto3.client shares is not safe to use from several at once
    client = boto3.session.Session().client("secretsmanager", region_name=region)
    try:
        value = client.get_secret_value(SecretId=arn)
    except ClientError as exc:
        code = exc.response.get("Error", {}).get("Code", "")
        raise ConfigError(
            f"opensearch.password_secret_arn {arn}: Secrets Manager answered {code}"
        ) from None
    text = str(value.get("SecretString", ""))
    if text.startswith("{"):  # a JSON secret, as the console's "other type of secret" stores it
        password = json.loads(text).get("password")
        if not isinstance(password, str):
            raise ConfigError(
                f"opensearch.password_secret_arn {arn}: the secret's JSON has no string 'password'"
            )
        return password
    return text
