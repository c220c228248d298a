"""The errors icecdc raises on purpose; each message names its culprit."""

from __future__ import annotations

import re


class IcecdcError(Exception):
    """Base of every error icecdc raises deliberately."""


class ConfigError(IcecdcError):
    """The configuration file is malformed; raised before anything is written."""


class StateError(IcecdcError):
    """The state store cannot be used; nothing was read from it or advanced.

    The state file is not a database, or it is damaged or unreadable.
    """


class StateUnwritable(StateError):
    """The state cannot be written: its file or directory is read-only, or the disk is full.

    The file itself may be intact, and is kept: moving it aside would export every table again.
    """


class PlanningError(IcecdcError):
    """A table's history cannot be turned into work items; nothing is planned or advanced."""


class ProcessingError(IcecdcError):
    """A batch could not be applied; the checkpoint stays where it was."""


class SinkError(ProcessingError):
    """OpenSearch refused writes for a reason other than a newer version."""


class DestinationDenied(SinkError):
    """OpenSearch accepted the credentials and denied a request (403): a right the caller lacks."""


class NothingApplied(SinkError):
    """A write failed before OpenSearch may have applied any of it.

    Every request of it was refused whole, answered 429 or 503, or the first documents were refused
    for their own fault with nowhere to dead-letter them: the index is as it was.
    """


class UnexpectedAnswer(SinkError):
    """OpenSearch answered a request without what icecdc reads of it: a key missing.

    The message names the request and the key: the server is not OpenSearch as icecdc knows it.
    """


class LeaseLost(ProcessingError):
    """This run no longer holds the table's processing lease: it must not advance the checkpoint.

    The lease ran out before a renewal (a stalled process, a store out of reach) or another run
    took it; the store cannot tell the two apart, so the message names both.
    """

    @classmethod
    def of(cls, table_name: str) -> LeaseLost:
        return cls(
            f"table {table_name!r}: this run's processing lease ran out or another run took it; "
            "this run stops and advances nothing"
        )


class FilesGone(ProcessingError):
    """A file a batch needs is missing: its snapshot expired after planning, or the table lost it.

    `path` is the file's, where the reader knows it; read back from the message when not given, as
    an error Spark carries back is its text alone.
    """

    def __init__(self, message: str, path: str | None = None) -> None:
        super().__init__(message)
        named = re.search(r" file (\S+) is missing", message)
        self.path = path if path is not None else named[1] if named else ""

    def __reduce__(self) -> tuple[object, ...]:  # picklable with its path, as workers ship errors
        return (type(self), (str(self), self.path))


class UnreadableFile(ProcessingError):
    """A data or delete file a batch needs is there but cannot be read: corrupt, or not Parquet."""


class DuplicateIdentifier(ProcessingError):
    """Two live rows of one snapshot share an identifier: the index can hold only one document."""

    def __init__(
        self, doc_id: str, sequence_number: int, documents: list[str], files: tuple[str, ...] = ()
    ) -> None:
        super().__init__(self.describe(doc_id, sequence_number, documents, files))
        self.doc_id = doc_id
        self.sequence_number = sequence_number
        self.documents = documents
        self.files = files  # the data files the rows are in, where the reader knows them

    def __reduce__(self) -> tuple[object, ...]:  # picklable with its fields, as Spark ships errors
        return (type(self), (self.doc_id, self.sequence_number, self.documents, self.files))

    @staticmethod
    def describe(
        doc_id: str, sequence_number: int, documents: list[str], files: tuple[str, ...]
    ) -> str:
        """The error's line: how many rows share the id, at which sequence number, where."""
        where = f" (in {' and '.join(files)})" if files else ""
        return (
            f"{len(documents)} live rows share the identifier {doc_id!r} at sequence number "
            f"{sequence_number}{where}"
        )


class HeldOutIdentifier(DuplicateIdentifier):
    """A new row of an id whose rows are dead letters for sharing it: it joins them.

    The index holds no document of such an id until `icecdc dead-letters replay` finds one
    live row of it. Until then the pass cannot tell whether the other rows still live.
    """

    @staticmethod
    def describe(
        doc_id: str, sequence_number: int, documents: list[str], files: tuple[str, ...]
    ) -> str:
        return (
            f"rows with open dead letters share the identifier {doc_id!r}: its row at sequence "
            f"number {sequence_number} waits with them until `icecdc dead-letters replay` finds "
            "one live row"
        )


class SystemicDeadLetters(ProcessingError):
    """A pass's dead letters show a cause many rows share: the pass fails and its checkpoint stays.

    Such a cause is the configuration, the mapping, or identifier columns that are
    not unique, not the rows' own faults.
    """


class SparkRequired(ProcessingError):
    """A pass needs the Spark engine where there is none: it was left untouched, for a Glue run.

    The planner Lambda has no Spark. A Glue run applies the pass.
    """


class OperationError(IcecdcError):
    """An operator's command cannot run as asked; nothing was written.

    The commands are audit, repair and dead-letter replay.
    """


class IndexStateError(SinkError):
    """The index is not as icecdc can write it; nothing was written.

    An alias naming several indices, a template that does not fit, a write block, a
    generation whose copies are not active.
    """


class IndexNotOwned(IndexStateError):
    """An index or alias under the table's index name is not icecdc's for this table.

    It is a user's, another table's or another deployment's. Nothing was written, nothing advanced.
    """


# What AWS answers a request the caller's IAM policies do not allow, by protocol: the JSON and
# query protocols' code, S3's, and pyarrow's S3 filesystem's wording of S3's.
# What an OpenSearch 403 means and what to grant (docs/deploy.md, the roles' rights; Serverless)
DENIED = (
    "the credentials are accepted but lack a permission: grant the user or role icecdc runs as "
    "access to the table's indexes and aliases (create, write, read, alias; on a Serverless "
    "collection, aoss:APIAccessAll and its data access policy)"
)
_DENIED_CODES = ("AccessDenied", "AccessDeniedException", "UnauthorizedOperation")
_DENIED_WORDS = ("ACCESS_DENIED", "AccessDenied")


def access_denied(exc: BaseException) -> str | None:
    """One line for a request IAM or OpenSearch denied, anywhere in `exc`'s chain; else None.

    OpenSearch's is a `DestinationDenied`, whose line it is, or an OpenSearch client's 403 that
    names its request (`denied_request`, set by `icecdc.destination.client`).

    AWS's message names the role, the action and the resource ("User: arn:aws:sts::…:assumed-role/
    <role>/… is not authorized to perform: s3:ListBucket on resource: …"); the line keeps it whole
    and says where the rights are granted. Duck-typed (botocore's `response`, pyarrow's OSError), so
    that this bottom module needs neither library.
    """
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        error = (
            getattr(current, "response", {}).get("Error", {})
            if hasattr(current, "response")
            else {}
        )
        if isinstance(error, dict) and error.get("Code") in _DENIED_CODES:
            operation = getattr(current, "operation_name", "a request")
            return _denied_line(operation, str(error.get("Message") or current))
        if isinstance(current, DestinationDenied):  # its line names the request and the fix
            return str(current)
        request = getattr(current, "denied_request", None)  # an OpenSearch client's 403
        if isinstance(request, str):
            return f"OpenSearch denied {request} ({_opensearch_reason(current)}): {DENIED}"
        if isinstance(current, OSError) and any(w in str(current) for w in _DENIED_WORDS):
            return _denied_line(_s3_request(str(current)), str(current))
        current = current.__cause__ or current.__context__
    return None


# pyarrow's S3 filesystem names S3's operation, the key and the bucket; IAM names the action
_PYARROW_S3 = re.compile(
    r"key '(?P<key>[^']*)' in bucket '(?P<bucket>[^']*)'.*during (?P<operation>\w+) operation"
)
_S3_ACTIONS = {
    "HeadObject": "GetObject",
    "ListObjectsV2": "ListBucket",
    "CreateMultipartUpload": "PutObject",
}


def _s3_request(message: str) -> str:
    """'s3:<action> on <ARN> (<operation>)' from pyarrow's wording (a HEAD's 403 has no body)."""
    found = _PYARROW_S3.search(message)
    if found is None:
        return "an S3 request"
    operation = found["operation"]
    action = _S3_ACTIONS.get(operation, operation)
    arn = f"arn:aws:s3:::{found['bucket']}" + ("" if action == "ListBucket" else f"/{found['key']}")
    # S3 answers 403 for a missing key to a caller that may not list the bucket
    hint = (
        f"; or the key is gone and s3:ListBucket on arn:aws:s3:::{found['bucket']} is not granted"
    )
    return f"s3:{action} on {arn} ({operation}{hint if action == 'GetObject' else ''})"


def _opensearch_reason(exc: BaseException) -> str:
    """`403: <reason>` of an OpenSearch client's 403 (its `info.error.reason`), duck-typed."""
    info = getattr(exc, "info", None)
    error = info.get("error") if isinstance(info, dict) else None
    reason = error.get("reason") if isinstance(error, dict) else None
    return f"403: {reason}" if reason else "403"


def _denied_line(operation: str, message: str) -> str:
    flat = " ".join(message.split())[:500]
    return (
        f"AWS refused {operation}: {flat} (the stack grants its roles' rights: see docs/deploy.md,"
        ' "The roles\' AWS rights")'
    )
