"""The stack's CloudFormation custom resources, one Lambda each, on the runtime's own Python and
boto3 (no layer). Each answers CloudFormation itself (`respond`).

`domain_access`: who may do what on a domain the stack created (fine-grained access control),
through the security plugin's REST API, signed with SigV4 as the domain's master user (that
function's role, which nothing else assumes). On create and update it
- maps the configured admin principal to `all_access` and `security_manager` (added to what the
  mappings hold; never removed, so that someone can still administer a retained domain): an IAM
  role as a backend role, an IAM user as a user,
- puts the role `Role` (body from the template: the configured indexes, their generations and
  aliases, nothing else) and maps the writers to it, alone: the jobs' role and, when it applies
  small batches itself, the planner's,
- turns the security plugin's audit logging on (the domain publishes it to CloudWatch Logs).
On delete it removes the jobs' role and its mapping; a domain already gone is not an error.
Properties (strings but one): Endpoint, RoleName, Role (the role's JSON body), Writer (jobs' role
ARN), Writers (a list: every role ARN mapped to the role, the jobs' first; Writer alone if absent),
Admin (admin ARN).

`publish`: copy an asset to the name its consumer needs (CDK names assets by hash; Glue installs a
zip of wheels only if its name ends in `.gluewheels.zip`). Properties: SourceBucket, SourceKey,
Bucket, Key. Nothing is deleted: a run started before an update still finds its file.

`service_linked_role`: make sure the service-linked role `RoleName` of `ServiceName` (e.g.
opensearchservice.amazonaws.com) exists, creating it when missing: a domain can be placed in a VPC
only once OpenSearch's exists, and a template cannot hold it (AWS::IAM::ServiceLinkedRole fails when
the account has it already). Nothing is deleted: other domains of the account use it.

`settle`: wait `Seconds` on create and update, so that what depends on this resource starts that
much after what it depends on (a created domain after its log groups' resource policy, which
OpenSearch may not see at once).
"""

from __future__ import annotations

import json
import logging
import os
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any

import boto3
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest

log = logging.getLogger()
log.setLevel(logging.INFO)

API = "_plugins/_security/api"
ADMIN_ROLES = ("all_access", "security_manager")
# A domain that CloudFormation reports created may answer 5xx (or not at all) for a few minutes.
# One budget for all the calls of an invocation, within the function's 10-minute timeout
# (infra.domain): a Lambda that times out never answers, and CloudFormation then waits an hour.
READY_SECONDS = 8 * 60


class SecurityApi:
    """The security plugin's REST API of one domain, retrying 5xx and unreachable answers until
    `ready_seconds` after it was made (one budget for every call). `scheme` and `pause` (seconds
    between attempts) are for the tests."""

    def __init__(
        self, endpoint: str, region: str, scheme: str = "https", pause: float = 15, ready_seconds: float = READY_SECONDS
    ) -> None:
        self.base = f"{scheme}://{endpoint}/{API}"
        self.region = region
        self.pause = pause
        self.deadline = time.monotonic() + ready_seconds
        self.credentials = boto3.Session().get_credentials()

    def call(self, method: str, path: str, body: Any = None, missing_ok: bool = False) -> Any:
        data = None if body is None else json.dumps(body).encode()
        deadline = self.deadline
        while True:
            # Signed anew for every attempt: a SigV4 signature expires about 5 minutes after its
            # X-Amz-Date, and a domain may answer 5xx for longer (READY_SECONDS), so a signature
            # made once would turn the later retries into 403s, which are final.
            request = AWSRequest(
                method=method, url=f"{self.base}/{path}", data=data, headers={"Content-Type": "application/json"}
            )
            SigV4Auth(self.credentials, "es", self.region).add_auth(request)
            prepared = urllib.request.Request(request.url, data=data, headers=dict(request.headers), method=method)
            try:
                with urllib.request.urlopen(prepared, timeout=30) as answer:  # noqa: S310 - https to the domain only
                    return json.loads(answer.read() or b"null")
            except urllib.error.HTTPError as exc:
                if exc.code == 404 and missing_ok:
                    return None
                if exc.code < 500 or time.monotonic() > deadline:
                    raise RuntimeError(f"{method} {path}: HTTP {exc.code}: {exc.read()[:500]!r}") from None
            except (urllib.error.URLError, TimeoutError) as exc:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{method} {path}: {exc}") from None
            log.info("%s %s: the domain is not ready yet; trying again", method, path)
            time.sleep(self.pause)


def mapped_as(arn: str) -> str:
    """Where a role mapping names an IAM principal: an IAM user's ARN under `users`, a role's under
    `backend_roles` (fine-grained access control matches a user's ARN as its user name, a role's as a
    backend role)."""
    return "users" if arn.split(":", 5)[-1].startswith("user/") else "backend_roles"


def apply(api: SecurityApi, properties: dict[str, Any]) -> None:
    admin = properties["Admin"]
    key = mapped_as(admin)
    for role in ADMIN_ROLES:
        found = (api.call("GET", f"rolesmapping/{role}", missing_ok=True) or {}).get(role, {})
        mapping = {k: found.get(k, []) for k in ("backend_roles", "hosts", "users")}
        if admin not in mapping[key]:
            mapping[key] = [*mapping[key], admin]
            api.call("PUT", f"rolesmapping/{role}", mapping)
    name = properties["RoleName"]
    api.call("PUT", f"roles/{name}", json.loads(properties["Role"]))
    writers = properties.get("Writers") or [properties["Writer"]]
    api.call("PUT", f"rolesmapping/{name}", {"backend_roles": writers})
    audit = api.call("GET", "audit")["config"]
    if not audit.get("enabled"):
        api.call("PUT", "audit/config", {**audit, "enabled": True})


def remove(api: SecurityApi, properties: dict[str, Any]) -> None:
    name = properties["RoleName"]
    for path in (f"rolesmapping/{name}", f"roles/{name}"):
        api.call("DELETE", path, missing_ok=True)


def domain_access(event: dict[str, Any], context: Any, connect: Callable[[str, str], Any] = SecurityApi) -> None:
    """`connect(endpoint, region)`: the API client (the tests pass a fake)."""
    properties = event["ResourceProperties"]
    region = os.environ["AWS_REGION"]

    def delete() -> None:
        try:
            remove(connect(properties["Endpoint"], region), properties)
        except Exception:  # noqa: BLE001 - a domain that is gone must not block the stack's deletion
            log.exception("could not remove the role %s; the domain may be gone", properties["RoleName"])

    run(
        event,
        context,
        f"{properties['Endpoint']}/{properties['RoleName']}",
        lambda: apply(connect(properties["Endpoint"], region), properties),
        delete,
    )


def publish(event: dict[str, Any], context: Any, s3: Any = None) -> None:
    """`s3`: the client (the tests pass moto's)."""
    p = event["ResourceProperties"]

    def copy() -> None:
        (s3 or boto3.client("s3")).copy_object(
            CopySource={"Bucket": p["SourceBucket"], "Key": p["SourceKey"]}, Bucket=p["Bucket"], Key=p["Key"]
        )

    run(event, context, f"s3://{p['Bucket']}/{p['Key']}", copy, lambda: None)


def service_linked_role(event: dict[str, Any], context: Any, iam: Any = None) -> None:
    """Properties: ServiceName, RoleName (the role's fixed name). `iam`: the client (the tests pass moto's)."""
    p = event["ResourceProperties"]

    def ensure() -> None:
        client = iam or boto3.client("iam")
        try:
            client.get_role(RoleName=p["RoleName"])
            log.info("the service-linked role %s exists", p["RoleName"])
        except client.exceptions.NoSuchEntityException:
            try:
                client.create_service_linked_role(AWSServiceName=p["ServiceName"])
                log.info("created the service-linked role %s", p["RoleName"])
            except (client.exceptions.InvalidInputException, client.exceptions.EntityAlreadyExistsException) as exc:
                # created meanwhile (another stack's deploy): IAM says the name "has been taken"
                if "taken" not in str(exc) and "exists" not in str(exc):
                    raise

    run(event, context, f"service-linked-role-{p['ServiceName']}", ensure, lambda: None)


def settle(event: dict[str, Any], context: Any, sleep: Callable[[float], None] = time.sleep) -> None:
    """`sleep`: the tests pass one that records."""
    seconds = float(event["ResourceProperties"]["Seconds"])
    run(event, context, f"settle-{event['LogicalResourceId']}", lambda: sleep(seconds), lambda: None)


def run(
    event: dict[str, Any], context: Any, physical_id: str, create_or_update: Callable[[], None], delete: Callable[[], None]
) -> None:
    """Do what the request asks and tell CloudFormation how it went, whatever happens."""
    try:
        (delete if event["RequestType"] == "Delete" else create_or_update)()
        respond(event, context, "SUCCESS", event.get("PhysicalResourceId") or physical_id)
    except Exception as exc:  # noqa: BLE001 - CloudFormation must hear of every failure, or it waits an hour
        log.exception("failed")
        respond(event, context, "FAILED", event.get("PhysicalResourceId") or physical_id, reason=str(exc)[:1000])


def respond(event: dict[str, Any], context: Any, status: str, physical_id: str, reason: str = "") -> None:
    body = {
        "Status": status,
        "Reason": reason or f"see {getattr(context, 'log_stream_name', 'the function log')}",
        "PhysicalResourceId": physical_id,
        "StackId": event["StackId"],
        "RequestId": event["RequestId"],
        "LogicalResourceId": event["LogicalResourceId"],
    }
    data = json.dumps(body).encode()
    request = urllib.request.Request(event["ResponseURL"], data=data, method="PUT", headers={"Content-Type": ""})
    with urllib.request.urlopen(request, timeout=30):  # noqa: S310 - CloudFormation's presigned S3 URL
        pass
