"""A secret's string from AWS Secrets Manager, read where it is used, never written anywhere.

The OpenSearch password (`opensearch.password_secret_arn`) and a REST catalog's OAuth2 client
credentials (`catalog.credential_secret_arn`) are read through here.
"""

from __future__ import annotations

from icecdc.errors import ConfigError


def secret_string(arn: str, setting: str) -> str:
    """The string the secret `arn` holds; a refusal is one line naming `setting` and the code."""
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
        raise ConfigError(f"{setting} {arn}: Secrets Manager answered {code}") from None
    return str(value.get("SecretString", ""))
