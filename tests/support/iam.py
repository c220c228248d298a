"""IAM enforced in the tests: the roles' statements from the synthesized template, every AWS
request the code under test makes turned into the (action, resource) IAM authorizes it as, and a
verdict.

Moto's own IAM enforcement authorizes actions only, and only for some services; this checks every
request a role's credentials sign, whatever client made it (boto3, pyiceberg's Glue and S3 calls
through pyarrow, fsspec's s3fs, opensearch-py's SigV4), by the credential scope in its signature:

- `RolePolicy.from_template`: a role's statements, CloudFormation intrinsics resolved to the names
  the test gave the stack's resources (`Names`);
- `aws_calls` / `es_calls` / `aoss_calls`: a request → the calls IAM checks (S3's REST API, the JSON
  and CBOR protocols of DynamoDB, Glue, Secrets Manager, KMS, SQS and CloudWatch; the es:ESHttp*
  paths; a Serverless collection's aoss:APIAccessAll);
  a request of a shape it does not know is refused, so no service escapes the check;
- `Enforcer`: access key → role; `authorize` answers a refusal (as the service spells it) for a
  request the role's statements do not allow, and records every (role, action, resource) it saw;
  `serverless_guard` checks aoss:APIAccessAll on a collection for the Serverless stand-in, and
  `data_access_guard` a request's permission on its index or collection by the collection's
  data access policies (`DataAccess`).

What AWS does on the role's behalf is checked as well: an object read from or written to a bucket
whose default encryption is a customer-managed key needs kms:Decrypt / kms:GenerateDataKey on that
key, through S3 (`Names.bucket_keys`).
"""

from __future__ import annotations

import fnmatch
import json
import re
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from botocore.parsers import RpcV2CBORParser

REGION = "us-east-1"
ACCOUNT = "123456789012"
PARTITION = "aws"

_CREDENTIAL = re.compile(r"Credential=([^/]+)/\d{8}/([^/]+)/([^/]+)/aws4_request")


@dataclass(frozen=True)
class Call:
    """One authorization IAM makes for a request: an action on a resource, with its context keys."""

    action: str
    resource: str
    context: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Statement:
    """One statement of an identity policy (Allow or Deny; Action/NotAction, Resource/NotResource)."""

    effect: str
    actions: tuple[str, ...]
    resources: tuple[str, ...]
    conditions: Mapping[str, Mapping[str, Any]]
    not_actions: bool = False
    not_resources: bool = False

    def applies(self, call: Call) -> bool:
        action = any(_like(call.action.lower(), a.lower()) for a in self.actions)
        resource = any(_like(call.resource, r) for r in self.resources)
        return (action != self.not_actions) and (resource != self.not_resources) and self._conditions_hold(call)

    def _conditions_hold(self, call: Call) -> bool:
        context = dict(call.context)
        for operator, keys in self.conditions.items():
            for key, wanted in keys.items():
                value = context.get(key.lower())
                wanted_values = [wanted] if isinstance(wanted, str) else list(wanted)
                if value is None:
                    return False  # a key the request does not carry never satisfies a condition
                if operator in ("StringEquals", "ArnEquals") and value not in wanted_values:
                    return False
                if operator in ("StringLike", "ArnLike") and not any(_like(value, w) for w in wanted_values):
                    return False
                if operator not in ("StringEquals", "ArnEquals", "StringLike", "ArnLike"):
                    raise ValueError(f"condition operator {operator} is not modelled by the test harness")
        return True


@dataclass(frozen=True)
class Names:
    """The physical names the test gave the stack's resources, by logical id (what CloudFormation
    would have generated), and the customer-managed key of each bucket encrypted with one."""

    physical: Mapping[str, str]
    bucket_keys: Mapping[str, str] = field(default_factory=dict)  # bucket name → key ARN
    # S3 Tables: a table's storage bucket → (table ARN, namespace, name): its objects are
    # authorized as s3tables:GetTableData / PutTableData on the table, not as s3:*
    table_storage: Mapping[str, tuple[str, str, str]] = field(default_factory=dict)
    secret_keys: Mapping[str, str] = field(default_factory=dict)  # secret ARN → its key's ARN


@dataclass(frozen=True)
class RolePolicy:
    """A role's statements, as the template gives them."""

    role: str  # a label: planner, job
    statements: tuple[Statement, ...]

    @classmethod
    def from_template(cls, label: str, template: Mapping[str, Any], role_id: str, names: Names) -> RolePolicy:
        resources = template["Resources"]
        documents = [p["PolicyDocument"] for p in resources[role_id]["Properties"].get("Policies", [])]
        if resources[role_id]["Properties"].get("ManagedPolicyArns"):
            raise ValueError(f"{role_id}: managed policies are not modelled by the test harness")
        for resource in resources.values():
            roles = resource.get("Properties", {}).get("Roles", [])
            if resource["Type"] == "AWS::IAM::Policy" and {"Ref": role_id} in roles:
                documents.append(resource["Properties"]["PolicyDocument"])
        resolve = Resolver(resources, names)
        statements = [_statement(s, resolve) for d in documents for s in d["Statement"]]
        return cls(label, tuple(statements))

    def allows(self, call: Call) -> bool:
        if any(s.effect == "Deny" and s.applies(call) for s in self.statements):
            return False
        return any(s.effect == "Allow" and s.applies(call) for s in self.statements)


def role_id(template: Mapping[str, Any], prefix: str) -> str:
    """The logical id of the template's one role whose id starts with `prefix` (JobRole, PlannerRole)."""
    ids = [i for i, r in template["Resources"].items() if r["Type"] == "AWS::IAM::Role" and i.startswith(prefix)]
    assert len(ids) == 1, f"roles starting with {prefix}: {ids}"
    return ids[0]


def _statement(raw: Mapping[str, Any], resolve: Resolver) -> Statement:
    def listed(value: Any) -> tuple[str, ...]:
        return tuple(resolve(v) for v in (value if isinstance(value, list) else [value]))

    return Statement(
        effect=raw["Effect"],
        actions=listed(raw.get("Action", raw.get("NotAction"))),
        resources=listed(raw.get("Resource", raw.get("NotResource"))),
        conditions={op: dict(keys) for op, keys in raw.get("Condition", {}).items()},
        not_actions="NotAction" in raw,
        not_resources="NotResource" in raw,
    )


@dataclass
class Resolver:
    """CloudFormation intrinsics → strings, the stack's resources named as `Names` says."""

    resources: Mapping[str, Any]
    names: Names

    def __call__(self, value: Any) -> str:
        if isinstance(value, str):
            return value
        if "Fn::Join" in value:
            delimiter, items = value["Fn::Join"]
            return str(delimiter).join(self(i) for i in items)
        if "Ref" in value:
            return self._ref(value["Ref"])
        if "Fn::GetAtt" in value:
            logical, attribute = value["Fn::GetAtt"]
            return self._attribute(logical, attribute)
        raise ValueError(f"intrinsic {value} is not modelled by the test harness")

    def _ref(self, logical: str) -> str:
        pseudo = {"AWS::Partition": PARTITION, "AWS::Region": REGION, "AWS::AccountId": ACCOUNT}
        if logical in pseudo:
            return pseudo[logical]
        return self._name(logical)

    def _name(self, logical: str) -> str:
        properties = self.resources[logical].get("Properties", {})
        for key in ("TableName", "BucketName", "QueueName", "LogGroupName", "Name"):
            if isinstance(properties.get(key), str):
                return str(properties[key])
        return self.names.physical.get(logical, f"unnamed-{logical}")

    def _attribute(self, logical: str, attribute: str) -> str:
        kind = self.resources[logical]["Type"]
        name = self._name(logical)
        arns = {
            "AWS::S3::Bucket": f"arn:{PARTITION}:s3:::{name}",
            "AWS::DynamoDB::GlobalTable": f"arn:{PARTITION}:dynamodb:{REGION}:{ACCOUNT}:table/{name}",
            "AWS::DynamoDB::Table": f"arn:{PARTITION}:dynamodb:{REGION}:{ACCOUNT}:table/{name}",
            "AWS::KMS::Key": f"arn:{PARTITION}:kms:{REGION}:{ACCOUNT}:key/{name}",
            "AWS::SQS::Queue": f"arn:{PARTITION}:sqs:{REGION}:{ACCOUNT}:{name}",
            "AWS::Logs::LogGroup": f"arn:{PARTITION}:logs:{REGION}:{ACCOUNT}:log-group:{name}:*",
            "AWS::SNS::Topic": f"arn:{PARTITION}:sns:{REGION}:{ACCOUNT}:{name}",
            "AWS::OpenSearchService::Domain": f"arn:{PARTITION}:es:{REGION}:{ACCOUNT}:domain/{name}",
            "AWS::Glue::Job": f"arn:{PARTITION}:glue:{REGION}:{ACCOUNT}:job/{name}",
            "AWS::IAM::Role": f"arn:{PARTITION}:iam::{ACCOUNT}:role/{name}",
        }
        if kind == "AWS::OpenSearchServerless::Collection":  # its ARN carries its id, not its name
            collection_id = self.names.physical.get(logical, f"unnamed-{logical}")
            arns[kind] = f"arn:{PARTITION}:aoss:{REGION}:{ACCOUNT}:collection/{collection_id}"
        if attribute != "Arn" or kind not in arns:
            return f"unresolved-{logical}.{attribute}"  # matches no request
        return arns[kind]


def _like(value: str, pattern: str) -> bool:
    """IAM's wildcard match: `*` any run of characters (slashes too), `?` one character."""
    return fnmatch.fnmatchcase(value, pattern.replace("[", "[[]"))


# -- requests → calls ------------------------------------------------------------------------


@dataclass(frozen=True)
class Request:
    """What the harness sees of an HTTP request to an AWS endpoint (moto) or to OpenSearch."""

    method: str
    path: str  # without the query
    query: Mapping[str, list[str]]
    headers: Mapping[str, str]  # lower-case names
    body: bytes

    @classmethod
    def of(cls, method: str, target: str, headers: Mapping[str, str], body: bytes) -> Request:
        parts = urlsplit(target)
        lower = {k.lower(): v for k, v in headers.items()}
        return cls(method, unquote(parts.path), parse_qs(parts.query, keep_blank_values=True), lower, body)

    def credential(self) -> tuple[str, str] | None:
        """(access key id, signing service) of the request's SigV4 signature, if it has one."""
        found = _CREDENTIAL.search(self.headers.get("authorization", ""))
        if found is None and "X-Amz-Credential" in self.query:
            found = _CREDENTIAL.search("Credential=" + self.query["X-Amz-Credential"][0] + "/")
        return (found.group(1), found.group(3)) if found else None


class UnknownRequest(ValueError):
    """A request the harness cannot turn into calls: refused, so that no service escapes."""


def aws_calls(service: str, request: Request, names: Names) -> list[Call]:
    """The calls IAM makes for a request to AWS service `service` (its SigV4 signing name)."""
    if service == "s3":
        return _s3_calls(request, names)
    operation, params = _rpc(service, request)
    calls = _RPC_CALLS.get(service, _unknown_service)(operation, params)
    if service == "secretsmanager":  # a secret under a customer-managed key: decrypted as the caller
        via = (("kms:viaservice", f"secretsmanager.{REGION}.amazonaws.com"),)
        keys = [names.secret_keys.get(c.resource) for c in calls]
        calls += [Call("kms:Decrypt", key, via) for key in keys if key]
    return calls


def _rpc(service: str, request: Request) -> tuple[str, dict[str, Any]]:
    """(operation, parameters) of a JSON (X-Amz-Target), CBOR (smithy RPC v2) or query request."""
    target = request.headers.get("x-amz-target")
    if target:
        return target.rsplit(".", 1)[-1], json.loads(request.body or b"{}")
    if request.headers.get("smithy-protocol") == "rpc-v2-cbor":
        operation = request.path.rsplit("/operation/", 1)[-1]
        # botocore's own CBOR decoder (it has no public entry for a request body)
        return operation, RpcV2CBORParser()._initial_body_parse(request.body)  # noqa: SLF001
    form = parse_qs(request.body.decode(errors="replace"))
    if "Action" in form:
        return form["Action"][0], {k: v[0] for k, v in form.items()}
    raise UnknownRequest(f"{service}: {request.method} {request.path}: no operation found")


def _arn(service: str, resource: str) -> str:
    return f"arn:{PARTITION}:{service}:{REGION}:{ACCOUNT}:{resource}"


def _dynamodb(operation: str, params: dict[str, Any]) -> list[Call]:
    tables: list[str] = []
    if "TableName" in params:
        index = params.get("IndexName")
        tables.append(params["TableName"] + (f"/index/{index}" if index else ""))
    tables += list(params.get("RequestItems", {}))
    for item in params.get("TransactItems", []):
        tables += [action["TableName"] for action in item.values()]
    if operation == "TransactWriteItems":
        return [Call(f"dynamodb:{o}", _arn("dynamodb", f"table/{t}")) for t, o in _transact(params)]
    return [Call(f"dynamodb:{operation}", _arn("dynamodb", f"table/{t}")) for t in sorted(set(tables))]


def _transact(params: dict[str, Any]) -> list[tuple[str, str]]:
    """A transaction is authorized as its parts: (table, PutItem | UpdateItem | DeleteItem | ConditionCheckItem)."""
    kinds = {"Put": "PutItem", "Update": "UpdateItem", "Delete": "DeleteItem", "ConditionCheck": "ConditionCheckItem"}
    return sorted({(action["TableName"], kinds[kind]) for item in params["TransactItems"] for kind, action in item.items()})


def _glue(operation: str, params: dict[str, Any]) -> list[Call]:
    catalog = _arn("glue", "catalog")
    database = params.get("DatabaseName") or params.get("Name") if "Table" not in operation else None
    if operation in ("StartJobRun", "GetJobRun", "GetJobRuns", "GetJob", "BatchStopJobRun"):
        return [Call(f"glue:{operation}", _arn("glue", f"job/{params['JobName']}"))]
    resources = [catalog]
    if "DatabaseName" in params:
        resources.append(_arn("glue", f"database/{params['DatabaseName']}"))
        table = params.get("Name") or params.get("TableName") or params.get("TableInput", {}).get("Name")
        if table:
            resources.append(_arn("glue", f"table/{params['DatabaseName']}/{table}"))
    elif database and operation == "GetDatabase":
        resources.append(_arn("glue", f"database/{database}"))
    return [Call(f"glue:{operation}", r) for r in resources]


def _secretsmanager(operation: str, params: dict[str, Any]) -> list[Call]:
    secret = str(params.get("SecretId", "*"))
    resource = secret if secret.startswith("arn:") else _arn("secretsmanager", f"secret:{secret}")
    return [Call(f"secretsmanager:{operation}", resource)]


def _kms(operation: str, params: dict[str, Any]) -> list[Call]:
    key = str(params.get("KeyId", "*"))
    return [Call(f"kms:{operation}", key if key.startswith("arn:") else _arn("kms", f"key/{key}"))]


def _cloudwatch(operation: str, params: dict[str, Any]) -> list[Call]:
    context = (("cloudwatch:namespace", str(params["Namespace"])),) if "Namespace" in params else ()
    return [Call(f"cloudwatch:{operation}", "*", context)]


def _sqs(operation: str, params: dict[str, Any]) -> list[Call]:
    url = str(params.get("QueueUrl", ""))
    name = url.rstrip("/").rsplit("/", 1)[-1] or params.get("QueueName", "*")
    return [Call(f"sqs:{operation}", _arn("sqs", name))]


def _sts(operation: str, params: dict[str, Any]) -> list[Call]:
    return [Call(f"sts:{operation}", "*")]  # GetCallerIdentity needs no permission; kept for the record


def _unknown_service(operation: str, params: dict[str, Any]) -> list[Call]:
    raise UnknownRequest(f"{operation}: a service the harness does not model")


_RPC_CALLS = {
    "dynamodb": _dynamodb,
    "glue": _glue,
    "secretsmanager": _secretsmanager,
    "kms": _kms,
    "monitoring": _cloudwatch,
    "sqs": _sqs,
    "sts": _sts,
}

# bucket subresources read or written by a GET/PUT on the bucket, as IAM names them
_BUCKET_GETS = {
    "location": "GetBucketLocation",
    "versioning": "GetBucketVersioning",
    "encryption": "GetEncryptionConfiguration",
    "policy": "GetBucketPolicy",
    "acl": "GetBucketAcl",
    "tagging": "GetBucketTagging",
    "versions": "ListBucketVersions",
    "uploads": "ListBucketMultipartUploads",
    "lifecycle": "GetLifecycleConfiguration",
    "notification": "GetBucketNotification",
    "logging": "GetBucketLogging",
}


def _s3_calls(request: Request, names: Names) -> list[Call]:
    """S3's REST API, path-style (`/bucket/key`) as the tests' clients address moto."""
    bucket, _, key = request.path.lstrip("/").partition("/")
    query, method = request.query, request.method
    if not bucket:
        if method == "GET":
            return [Call("s3:ListAllMyBuckets", "*")]
        raise UnknownRequest(f"s3: {method} /")
    bucket_arn = f"arn:{PARTITION}:s3:::{bucket}"
    if bucket in names.table_storage:
        return _table_data_calls(request, names.table_storage[bucket])
    if not key:
        return _s3_bucket_calls(request, bucket, bucket_arn)
    object_arn = f"{bucket_arn}/{key}"
    if method in ("GET", "HEAD"):
        action = "s3:GetObjectTagging" if "tagging" in query else "s3:GetObject"
        calls = [Call(action, object_arn)]
        return calls + _through_s3(names, bucket, "kms:Decrypt")
    if method in ("PUT", "POST"):
        calls = [Call("s3:PutObject", object_arn)]
        source = request.headers.get("x-amz-copy-source")
        if source:
            calls.append(Call("s3:GetObject", f"arn:{PARTITION}:s3:::{unquote(source).lstrip('/')}"))
        return calls + _through_s3(names, bucket, "kms:GenerateDataKey")
    if method == "DELETE":
        return [Call("s3:AbortMultipartUpload" if "uploadId" in query else "s3:DeleteObject", object_arn)]
    raise UnknownRequest(f"s3: {method} {request.path}")


def _s3_bucket_calls(request: Request, bucket: str, bucket_arn: str) -> list[Call]:
    query, method = request.query, request.method
    if method == "POST" and "delete" in query:
        keys = re.findall(rb"<Key>(.*?)</Key>", request.body)
        return [Call("s3:DeleteObject", f"{bucket_arn}/{k.decode()}") for k in keys]
    if method == "HEAD":
        return [Call("s3:ListBucket", bucket_arn)]
    if method == "GET":
        for subresource, action in _BUCKET_GETS.items():
            if subresource in query:
                return [Call(f"s3:{action}", bucket_arn)]
        prefix = query.get("prefix", [""])[0]
        return [Call("s3:ListBucket", bucket_arn, (("s3:prefix", prefix),))]
    raise UnknownRequest(f"s3: {method} /{bucket} {sorted(query)}")


def _table_data_calls(request: Request, table: tuple[str, str, str]) -> list[Call]:
    """An S3 Tables table's objects, read or written through S3's API."""
    arn, namespace, name = table
    context = (("s3tables:namespace", namespace), ("s3tables:tablename", name))
    if request.method in ("GET", "HEAD"):
        return [Call("s3tables:GetTableData", arn, context)]
    if request.method in ("PUT", "POST"):
        return [Call("s3tables:PutTableData", arn, context)]
    raise UnknownRequest(f"s3tables data: {request.method} {request.path}")


# S3 Tables' Iceberg REST endpoint: the route → the IAM actions AWS documents for it
_S3TABLES_ROUTES: dict[tuple[str, str], tuple[str, ...]] = {
    ("GET", "config"): ("s3tables:GetTableBucket",),
    ("GET", "namespaces"): ("s3tables:ListNamespaces",),
    ("POST", "namespaces"): ("s3tables:CreateNamespace",),
    ("GET", "namespace"): ("s3tables:GetNamespace",),
    ("HEAD", "namespace"): ("s3tables:GetNamespace",),
    ("GET", "tables"): ("s3tables:ListTables",),
    ("POST", "tables"): ("s3tables:CreateTable",),
    ("GET", "table"): ("s3tables:GetTable", "s3tables:GetTableMetadataLocation"),
    ("HEAD", "table"): ("s3tables:GetTable",),
    ("POST", "table"): ("s3tables:UpdateTableMetadataLocation",),
    ("DELETE", "table"): ("s3tables:DeleteTable",),
}


def s3tables_calls(method: str, raw_path: str, bucket_arn: str, table_arn: Callable[[str, str], str]) -> list[Call]:
    """The calls of a request to S3 Tables' REST endpoint; `table_arn(namespace, name)`."""
    segments = [unquote(part) for part in raw_path.split("/")]
    if segments[:3] == ["", "v1", "config"]:
        kind, namespace, name = "config", "", ""
    else:
        rest = segments[3:]  # after /v1/<prefix>
        namespace = rest[1] if len(rest) > 1 else ""
        name = rest[3] if len(rest) > 3 else ""
        kind = {1: "namespaces", 2: "namespace", 3: "tables", 4: "table"}.get(len(rest), "unknown")
    actions = _S3TABLES_ROUTES.get((method, kind))
    if actions is None:
        raise UnknownRequest(f"s3tables: {method} {raw_path}")
    if kind != "table":
        return [Call(a, bucket_arn) for a in actions]
    context = (("s3tables:namespace", namespace), ("s3tables:tablename", name))
    return [Call(a, table_arn(namespace, name), context) for a in actions]


# Glue's Iceberg REST endpoint: the route → the Glue actions it needs (a load that vends
# credentials asks Lake Formation for the data access too)
_GLUE_REST_ROUTES: dict[tuple[str, str], tuple[str, ...]] = {
    ("GET", "config"): ("glue:GetCatalog",),
    ("GET", "namespaces"): ("glue:GetDatabases",),
    ("GET", "namespace"): ("glue:GetDatabase",),
    ("HEAD", "namespace"): ("glue:GetDatabase",),
    ("GET", "tables"): ("glue:GetTables",),
    ("GET", "table"): ("glue:GetTable", "lakeformation:GetDataAccess"),
    ("HEAD", "table"): ("glue:GetTable",),
}


def glue_rest_calls(method: str, raw_path: str, catalog: str) -> list[Call]:
    """The calls of a request to Glue's REST endpoint for the federated `catalog`
    (e.g. s3tablescatalog/lakehouse): each on the catalogs, database and table it names."""
    segments = [unquote(part) for part in raw_path.split("/")]
    rest = [] if segments[:3] == ["", "v1", "config"] else segments[3:]
    kind = "config" if not rest else {1: "namespaces", 2: "namespace", 3: "tables", 4: "table"}.get(len(rest), "?")
    actions = _GLUE_REST_ROUTES.get((method, kind))
    if actions is None:
        raise UnknownRequest(f"glue rest: {method} {raw_path}")
    parts = catalog.split("/")
    resources = [_arn("glue", "catalog")] + [_arn("glue", f"catalog/{'/'.join(parts[: n + 1])}") for n in range(len(parts))]
    if len(rest) > 1:
        resources.append(_arn("glue", f"database/{catalog}/{rest[1]}"))
    if len(rest) > 3:
        resources.append(_arn("glue", f"table/{catalog}/{rest[1]}/{rest[3]}"))
    calls = [Call(a, r) for a in actions if a.startswith("glue:") for r in resources]
    return calls + [Call(a, "*") for a in actions if a.startswith("lakeformation:")]


def _through_s3(names: Names, bucket: str, action: str) -> list[Call]:
    """What S3 asks KMS, as the caller, for an object of a bucket under a customer-managed key."""
    key = names.bucket_keys.get(bucket)
    via = (("kms:viaservice", f"s3.{REGION}.amazonaws.com"),)
    return [Call(action, key, via)] if key else []


def aoss_calls(request: Request, collection_arn: str = "") -> list[Call]:
    """OpenSearch Serverless's IAM: aoss:APIAccessAll on the collection, whatever the path (its data
    access policy decides the rest). The collection is the endpoint's, its id the host's first
    label (`<id>.<region>.aoss.amazonaws.com`); a stand-in on another host is `collection_arn`."""
    host = request.headers.get("host", "").split(":", 1)[0]
    if host.endswith(".aoss.amazonaws.com"):
        collection_id, region = host.split(".")[:2]
        collection_arn = f"arn:{PARTITION}:aoss:{region}:{ACCOUNT}:collection/{collection_id}"
    if not collection_arn:
        raise UnknownRequest(f"aoss: {request.method} {request.path} to {host!r}: no collection")
    return [Call("aoss:APIAccessAll", collection_arn)]


@dataclass(frozen=True)
class DataAccess:
    """A Serverless collection's data access policies (their documents' statements): which
    principal has which permission on which `index/<collection>/<index>` or
    `collection/<collection>`, patterns with `*`."""

    collection: str  # the collection's name, as the rules name it
    statements: tuple[Mapping[str, Any], ...]

    @classmethod
    def from_template(cls, template: Mapping[str, Any], collection: str, resolve: Resolver) -> DataAccess:
        """The template's data access policies (`AWS::OpenSearchServerless::AccessPolicy`)."""
        documents = [
            json.loads(resolve(r["Properties"]["Policy"]))
            for r in template["Resources"].values()
            if r["Type"] == "AWS::OpenSearchServerless::AccessPolicy" and r["Properties"]["Type"] == "data"
        ]
        return cls(collection, tuple(s for document in documents for s in document))

    def allows(self, principal: str, permission: str, kind: str, resource: str) -> bool:
        rules = [r for s in self.statements if principal in s.get("Principal", []) for r in s.get("Rules", [])]
        return any(
            r["ResourceType"] == kind
            and any(_like(resource, pattern) for pattern in r["Resource"])
            and any(_like(permission.lower(), p.lower()) for p in r["Permission"])
            for r in rules
        )

    def calls(self, request: Request, permission: str) -> list[Call]:
        """What the policy must allow for a request that needs `permission` (the stand-in's
        route's): on the collection for its items (aliases, templates), else on each index the
        path or a `_bulk`'s actions name; `index/<collection>/*` for one that names none, whose
        answer Serverless narrows to the indexes the principal may see."""
        if permission.endswith("CollectionItems"):
            return [Call(permission, f"collection/{self.collection}")]
        first = request.path.strip("/").split("/", 1)[0]
        if first and not first.startswith("_"):
            indexes = first.split(",")
        elif first == "_bulk":
            indexes = sorted({_bulk_index(line) for line in request.body.splitlines()} - {""})
        else:
            indexes = ["*"]
        return [Call(permission, f"index/{self.collection}/{index}") for index in indexes]


def _bulk_index(line: bytes) -> str:
    """The `_index` of a bulk body's action line; "" for a document line."""
    try:
        value = json.loads(line)
    except ValueError:
        return ""
    action = next(iter(value.values()), None) if isinstance(value, dict) and len(value) == 1 else None
    return str(action.get("_index", "")) if isinstance(action, dict) else ""


def es_calls(request: Request, domain_arn: str) -> list[Call]:
    """OpenSearch's fine-grained IAM: es:ESHttp<Method> on `<domain ARN>/<path>`."""
    action = "es:ESHttp" + request.method.capitalize()
    return [Call(action, f"{domain_arn}{request.path if request.path != '/' else '/'}")]


# -- the enforcer --------------------------------------------------------------------------


@dataclass(frozen=True)
class Refusal:
    """A call the role's statements do not allow."""

    role: str
    call: Call

    def __str__(self) -> str:
        return f"role {self.role} may not {self.call.action} on {self.call.resource}"


@dataclass
class Enforcer:
    """Access keys → roles; every request signed with one is checked, refused or let through, and
    recorded. Requests signed with other keys (the tests' own setup) pass unchecked."""

    names: Names | None = None
    domain_arn: str = ""  # the domain's, or the collection's (what a stand-in's requests reach)
    roles: dict[str, RolePolicy] = field(default_factory=dict)
    exercised: set[tuple[str, str, str]] = field(default_factory=set)
    refusals: list[Refusal] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def act_as(self, access_key: str, policy: RolePolicy) -> None:
        with self.lock:
            self.roles[access_key] = policy

    def signed_by_a_role(self, authorization: str) -> bool:
        found = _CREDENTIAL.search(authorization)
        with self.lock:
            return found is not None and found.group(1) in self.roles

    def reset(self) -> None:
        with self.lock:
            self.roles.clear()
            self.refusals.clear()
            self.names, self.domain_arn = None, ""

    def authorize(self, request: Request, opensearch: bool = False) -> Refusal | None:
        """None when the request may go on (unsigned by a role, or allowed); else the refusal."""
        credential = request.credential()
        with self.lock:
            names = self.names
        if credential is None or credential[0] not in self.roles or names is None:
            return None
        try:
            if not opensearch:
                calls = aws_calls(credential[1], request, names)
            elif credential[1] == "aoss":
                calls = aoss_calls(request, self.domain_arn)
            else:
                calls = es_calls(request, self.domain_arn)
        except UnknownRequest as unknown:
            calls = [Call(f"unknown:{unknown}", "*")]
        return self.authorize_calls(credential[0], calls)

    def serverless_guard(self, collection_arn: str) -> Callable[[Request], Refusal | None]:
        """A ServerlessStandIn's guard: IAM's aoss:APIAccessAll on the collection, for every
        data-plane request a role signs (its data access policy: `data_access_guard`)."""

        def guard(request: Request) -> Refusal | None:
            credential = request.credential()
            if credential is None:
                return None
            return self.authorize_calls(credential[0], [Call("aoss:APIAccessAll", collection_arn)])

        return guard

    def data_access_guard(self, policy: DataAccess, principals: Mapping[str, str]) -> Callable[[Request, str], Refusal | None]:
        """A ServerlessStandIn's `access`: the data access policy's verdict on a documented
        request that needs a permission, for the role whose access key signed it
        (`principals`: access key → the role's ARN, as the policy names it); recorded."""

        def access(request: Request, permission: str) -> Refusal | None:
            credential = request.credential()
            with self.lock:
                role = self.roles.get(credential[0]) if credential else None
            if credential is None or role is None:
                return None
            principal = principals[credential[0]]

            def allows(call: Call) -> bool:
                kind = call.resource.split("/", 1)[0]
                return policy.allows(principal, call.action, kind, call.resource)

            return self._verdict(role.role, policy.calls(request, permission), allows)

        return access

    def authorize_calls(self, access_key: str, calls: list[Call]) -> Refusal | None:
        """The verdict on calls made with `access_key` (a REST endpoint's hook), recorded."""
        with self.lock:
            policy = self.roles.get(access_key)
        if policy is None:
            return None
        return self._verdict(policy.role, calls, policy.allows)

    def _verdict(self, role: str, calls: list[Call], allows: Callable[[Call], bool]) -> Refusal | None:
        """The last of `calls` that `allows` refuses, or None; each call recorded for `role`."""
        refused = None
        for call in calls:
            allowed = allows(call)
            with self.lock:
                self.exercised.add((role, call.action, call.resource))
                if not allowed:
                    refused = Refusal(role, call)
                    self.refusals.append(refused)
        return refused

    def hides_missing_keys(self, request: Request) -> Refusal | None:
        """For an object read by a role that may not list its bucket, the refusal of that listing:
        S3 answers such a caller 403 for a missing key, never 404."""
        credential = request.credential()
        if credential is None or credential[1] != "s3" or request.method not in ("GET", "HEAD"):
            return None
        bucket, _, key = request.path.lstrip("/").partition("/")
        with self.lock:
            policy = self.roles.get(credential[0])
        listing = Call("s3:ListBucket", f"arn:{PARTITION}:s3:::{bucket}", (("s3:prefix", key),))
        if not key or policy is None or policy.allows(listing):
            return None
        return Refusal(policy.role, listing)

    def assert_no_refusals(self) -> None:
        with self.lock:
            refusals = list(dict.fromkeys(str(r) for r in self.refusals))
        assert not refusals, "requests the roles' statements do not allow:\n" + "\n".join(refusals)


def refusal_answer(service: str, request: Request, refusal: Refusal) -> tuple[int, list[tuple[str, str]], bytes]:
    """A 403 as the service spells it (S3's XML, the JSON protocols, CBOR), IAM's own message."""
    message = (
        f"User: arn:aws:sts::{ACCOUNT}:assumed-role/{refusal.role}/test is not authorized to perform: "
        f"{refusal.call.action} on resource: {refusal.call.resource} "
        f"because no identity-based policy allows the {refusal.call.action} action"
    )
    if service == "s3":
        body = f"<Error><Code>AccessDenied</Code><Message>{message}</Message></Error>".encode()
        return 403, [("Content-Type", "application/xml")], body
    if request.headers.get("smithy-protocol") == "rpc-v2-cbor":
        body = _cbor_map({"__type": "AccessDeniedException", "message": message})
        return 403, [("Content-Type", "application/cbor"), ("smithy-protocol", "rpc-v2-cbor")], body
    kind = "com.amazonaws.dynamodb.v20120810#AccessDeniedException" if service == "dynamodb" else "AccessDeniedException"
    body = json.dumps({"__type": kind, "message": message, "Message": message}).encode()
    return 403, [("Content-Type", "application/x-amz-json-1.1"), ("x-amzn-ErrorType", kind)], body


def _cbor_map(values: Mapping[str, str]) -> bytes:
    """A CBOR map of text strings (RFC 8949 major types 5 and 3): what a CBOR error body needs."""

    def head(major: int, n: int) -> bytes:
        if n < 24:
            return bytes([major << 5 | n])
        if n < 256:
            return bytes([major << 5 | 24, n])
        return bytes([major << 5 | 25]) + n.to_bytes(2, "big")

    def text(value: str) -> bytes:
        raw = value.encode()
        return head(3, len(raw)) + raw

    return head(5, len(values)) + b"".join(text(k) + text(v) for k, v in values.items())


def exercised_rows(triples: Iterable[tuple[str, str, str]]) -> list[str]:
    return sorted(f"{role}\t{action}\t{resource}" for role, action, resource in triples)
