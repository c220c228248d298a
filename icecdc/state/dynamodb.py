"""The AWS state store: checkpoints, export claims and work items in one DynamoDB table.

Layout (partition key `pk` = the configured table name, sort key `sk`):

| record      | sk                                   | lifetime                                 |
|-------------|--------------------------------------|------------------------------------------|
| checkpoint  | `checkpoint`                         | forever                                  |
| export base | `export|<table uuid>|<replaced snapshot>` | forever                             |
| lease       | `lease`                              | until released or expired                |
| pending     | `pending|<sequence number:020d>|<key>` | until `complete`                       |
| done        | `done|<key>`                         | `expires_at` (DynamoDB TTL), default 7 d |

Pending and done items live under different sort-key prefixes so that `pending_page` is one
strongly consistent Query over pending records only, in sequence-number order (its cursor: the
sort key after `pending|`), however many finished items await their TTL (a status attribute plus
a filter would read them all; a sparse index would be eventually consistent). `put_items` writes
each item's pending record only if neither it nor its done record exists (a Put and a
ConditionCheck), up to 50 items a transaction:
a transaction one item's condition cancelled (its `CancellationReasons` name the action) is sent
again without that item, so each item stays put-if-absent on its own, and a crash between two
transactions leaves some items written, as one transaction per item would; planning again writes
the rest. Planning an already applied snapshot again is still a no-op while the done record
lives; after its TTL, a re-planned item is at or below the checkpoint and the processor retires it
unread (see `icecdc.state`). The planner's changes after its checkpoint replace a done record
(`replace_done`: the snapshot came back on the lineage) in the same transaction that writes the
pending one.

`mark_applied` batches its conditional Updates the same way (an item completed meanwhile is
dropped from its transaction, never resurrected), each transaction with the lease check when
fenced. It sets the record's `status` and `applied_to` beside its body, which keeps the item's
files as planned, so that it marks by key, from a head (`ItemHead`); a record is read as its body
with those two. `bodies` fetches the records of heads with BatchGetItem, 100 keys a request,
strongly consistent.

`complete` writes the checkpoint first (in one transaction with a check of the lease, when
fenced), then retires the items in transactions that each write an item's done record (its key,
status and expiry: nothing reads its files again) and delete its pending record together. A crash
between any two writes leaves pending items that the new checkpoint supersedes
(`Checkpoint.supersedes`), and the next pass retires them unread; an item is never half done (a
done record beside its pending one, or neither).

Every write is retried when it lost a race on an item, not a condition: a transaction cancelled
with a `TransactionConflict` reason (another transaction or write touched one of its items), or a
single write refused with `TransactionConflictException` (it met a transaction in flight).
botocore retries neither (only throttling and transient errors), so the store does, with
exponential backoff and full jitter. A cancellation naming `ConditionalCheckFailed` is an answer
(the item exists, the lease is another's) and is never retried.
"""

from __future__ import annotations

import itertools
import json
import logging
import random
import time
from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import Any

import boto3
from botocore.config import Config as BotoConfig
from botocore.exceptions import ClientError

from icecdc.errors import LeaseLost
from icecdc.model import AnyItem, Checkpoint, ItemHead, ItemStatus, WorkItem
from icecdc.state.store import PENDING_PAGE_SIZE, Completion, PendingPage, StateStore

log = logging.getLogger(__name__)

PARTITION_KEY = "pk"
SORT_KEY = "sk"
TTL_ATTRIBUTE = "expires_at"
# How long finished items are kept: long enough that a planner racing a processor finds them.
DEFAULT_DONE_TTL_SECONDS = 7 * 24 * 3600
# Items put, marked or retired per transaction: two actions each at most, within DynamoDB's 100
# actions per transaction; and at most this many bytes of requests (DynamoDB takes 4 MB).
ITEMS_PER_TRANSACTION = 50
TRANSACTION_BYTES = 2_000_000
# A write that lost a race (TransactionConflict) is tried again this many times, after a random
# wait of up to CONFLICT_BACKOFF_SECONDS * 2**attempt, at most CONFLICT_BACKOFF_CAP_SECONDS
# (about 6 s in all).
CONFLICT_RETRIES = 8
CONFLICT_BACKOFF_SECONDS = 0.05
CONFLICT_BACKOFF_CAP_SECONDS = 2.0

# Keys a `bodies` request asks for: DynamoDB's most for BatchGetItem.
KEYS_PER_BATCH_GET = 100
# What a work item is read from: its body, and the status and mark `mark_applied` sets beside it.
_ITEM_PROJECTION: dict[str, Any] = {
    "ProjectionExpression": "body, #status, applied_to",
    "ExpressionAttributeNames": {"#status": "status"},
}

_CHECKPOINT = "checkpoint"
_LEASE = "lease"
_EXPORT = "export|"
_PASS_END = "pass-end"
_PENDING = "pending|"
_DONE = "done|"


class DynamoDbStateStore(StateStore):
    """`StateStore` on a DynamoDB table with string keys `pk` and `sk`.

    `create_state_table` creates such a table.
    """

    def __init__(
        self,
        state_table: str,
        region: str | None = None,
        endpoint_url: str | None = None,
        done_ttl_seconds: int = DEFAULT_DONE_TTL_SECONDS,
        items_per_transaction: int = ITEMS_PER_TRANSACTION,
        conflict_retries: int = CONFLICT_RETRIES,
    ) -> None:
        self.state_table = state_table
        self.done_ttl_seconds = done_ttl_seconds
        self.items_per_transaction = items_per_transaction
        self.conflict_retries = conflict_retries
        # Standard retry mode retries throttling and transient errors with backoff;
        # conflicts: `_write`.
        options: dict[str, Any] = {
            "region_name": region,
            "endpoint_url": endpoint_url,
            "config": BotoConfig(retries={"mode": "standard", "max_attempts": 10}),
        }
        self.client = boto3.client("dynamodb", **options)

    def get_checkpoint(self, table_name: str) -> Checkpoint | None:
        return self._get_base(table_name, _CHECKPOINT)

    def checkpointed_at(self, table_name: str) -> float | None:
        key = _keys(table_name, _CHECKPOINT)
        asked = {"TableName": self.state_table, "Key": key, "ProjectionExpression": "updated_at"}
        record = self.client.get_item(**asked).get("Item")
        return float(record["updated_at"]["N"]) if record and "updated_at" in record else None

    def claim_export(self, table_name: str, base: Checkpoint, replacing: str = "") -> Checkpoint:
        sk = f"{_EXPORT}{base.table_uuid}|{replacing}"
        self._put_base_if(table_name, sk, base, "attribute_not_exists(pk)")
        recorded = self._get_base(table_name, sk)
        assert recorded is not None  # written above, or by the planner that won the race
        return recorded

    def begin_pass(self, table_name: str, end: Checkpoint) -> Checkpoint | None:
        recorded = self.pass_end(table_name)
        before = (
            recorded if recorded is not None and recorded.table_uuid == end.table_uuid else None
        )
        if before is not None and before.sequence_number >= end.sequence_number:
            return before
        # Another pass may have recorded in between: keep the furthest end of the UUID.
        self._put_base_if(
            table_name,
            _PASS_END,
            end,
            "attribute_not_exists(pk) OR table_uuid <> :uuid OR sequence_number < :seq",
            {":uuid": {"S": end.table_uuid}, ":seq": {"N": str(end.sequence_number)}},
        )
        return before

    def unbegin_pass(self, table_name: str, end: Checkpoint, before: Checkpoint | None) -> None:
        condition = "table_uuid = :uuid AND sequence_number = :seq AND snapshot_id = :snapshot"
        values = {
            ":uuid": {"S": end.table_uuid},
            ":seq": {"N": str(end.sequence_number)},
            ":snapshot": {"N": str(end.snapshot_id)},
        }
        if before is not None:
            self._put_base_if(table_name, _PASS_END, before, condition, values)
            return
        try:
            self._write(
                "delete_item",
                TableName=self.state_table,
                Key=_keys(table_name, _PASS_END),
                ConditionExpression=condition,
                ExpressionAttributeValues=values,
            )
        except ClientError as exc:
            if _code(exc) != "ConditionalCheckFailedException":
                raise

    def pass_end(self, table_name: str) -> Checkpoint | None:
        return self._get_base(table_name, _PASS_END)

    def _put_base_if(
        self,
        table_name: str,
        sk: str,
        base: Checkpoint,
        condition: str,
        values: dict[str, dict[str, str]] | None = None,
    ) -> None:
        """Put a checkpoint-shaped record when `condition` holds.

        A failed condition is not an error.
        """
        try:
            self._write(
                "put_item",
                TableName=self.state_table,
                Item={**_keys(table_name, sk), **_checkpoint_attributes(base)},
                ConditionExpression=condition,
                **({"ExpressionAttributeValues": values} if values else {}),
            )
        except ClientError as exc:
            if _code(exc) != "ConditionalCheckFailedException":
                raise

    def put_items(self, items: Iterable[WorkItem], replace_done: bool = False) -> int:
        unique: dict[str, WorkItem] = {}
        for item in items:  # a transaction may touch a key once
            unique.setdefault(item.key, item)
        puts = [self._put_actions(item, replace_done) for item in unique.values()]
        return sum(self._write_each("", puts))

    def _put_actions(self, item: WorkItem, replace_done: bool) -> list[dict[str, Any]]:
        """An item's put-if-absent: its pending record unless it or its done record exists."""
        done = {"TableName": self.state_table, "Key": _keys(item.table, _DONE + item.key)}
        # Never a done record beside a pending one: replacing, the transaction deletes it.
        on_done = (
            {"Delete": done}
            if replace_done
            else {"ConditionCheck": {**done, "ConditionExpression": "attribute_not_exists(pk)"}}
        )
        record = _pending_record(item)
        put = {
            "TableName": self.state_table,
            "Item": record,
            "ConditionExpression": "attribute_not_exists(pk)",
        }
        return [{"Put": put}, on_done]

    def _write_each(
        self, table_name: str, groups: list[list[dict[str, Any]]], fence: str | None = None
    ) -> list[bool]:
        """Write each group of actions, all or none of it, many groups a transaction.

        A group is one item's actions. The answer is which groups were written. A group whose
        condition fails, as its item exists or is done, is not written: the transaction it
        cancelled is sent again without it, so an item never stops another. With a `fence`, every
        transaction checks its owner's lease too and raises `LeaseLost` when it is gone.
        """
        written = [False] * len(groups)
        for chunk in _transactions(groups, self.items_per_transaction):
            while chunk:
                actions = [action for i in chunk for action in groups[i]]
                if fence is not None:
                    actions.append(self._lease_check(table_name, fence))  # last: the last reason
                try:
                    self._write("transact_write_items", TransactItems=actions)
                except ClientError as exc:
                    reasons = _reasons(exc)
                    if not _condition_failed(exc):
                        raise
                    if fence is not None and reasons[-1] == "ConditionalCheckFailed":
                        raise LeaseLost.of(table_name) from None
                    failed = _failed_groups(chunk, groups, reasons)
                    if not failed:  # reasons that name no action: never loop
                        raise
                    chunk = [i for i in chunk if i not in failed]
                    continue
                for i in chunk:
                    written[i] = True
                chunk = []
        return written

    def pending_page(
        self, table_name: str, after: str | None = None, limit: int = PENDING_PAGE_SIZE
    ) -> PendingPage:
        request: dict[str, Any] = {
            **self._pending_query(table_name),
            **_ITEM_PROJECTION,
            "Limit": limit,
        }
        if after is not None:
            request["ExclusiveStartKey"] = _keys(table_name, _PENDING + after)
        page = self.client.query(**request)
        items = tuple(_item(record) for record in page["Items"])
        last = page.get("LastEvaluatedKey")
        return PendingPage(items, last[SORT_KEY]["S"].removeprefix(_PENDING) if last else None)

    def bodies(self, table_name: str, heads: Sequence[ItemHead]) -> list[WorkItem]:
        found: dict[str, WorkItem] = {}
        for start in range(0, len(heads), KEYS_PER_BATCH_GET):
            keys = [
                _keys(table_name, _pending_sk(h)) for h in heads[start : start + KEYS_PER_BATCH_GET]
            ]
            asked = {self.state_table: {"Keys": keys, "ConsistentRead": True, **_ITEM_PROJECTION}}
            for attempt in itertools.count():
                answer = self.client.batch_get_item(RequestItems=asked)
                records = answer["Responses"].get(self.state_table, [])
                found |= {(item := _item(record)).key: item for record in records}
                asked = answer.get("UnprocessedKeys") or {}
                if not asked:
                    break
                time.sleep(_backoff(attempt))
        return [found[h.key] for h in heads if h.key in found]

    def _complete(self, table_name: str, completion: Completion) -> None:
        if completion.checkpoint is not None:
            self._advance(table_name, completion.checkpoint, completion.replace, completion.fence)
        expires_at = int(time.time()) + self.done_ttl_seconds
        retire: list[list[dict[str, Any]]] = []
        for item in completion.items:  # by key: a done record tells a planner the item exists
            record = {
                **_keys(table_name, _DONE + item.key),
                "status": {"S": ItemStatus.DONE},
                "sequence_number": {"N": str(item.sequence_number)},
                TTL_ATTRIBUTE: {"N": str(expires_at)},
            }
            retire.append(
                [
                    {"Put": {"TableName": self.state_table, "Item": record}},
                    {
                        "Delete": {
                            "TableName": self.state_table,
                            "Key": _keys(table_name, _pending_sk(item)),
                        }
                    },
                ]
            )
        for chunk in _transactions(retire, self.items_per_transaction):
            actions = [action for i in chunk for action in retire[i]]
            self._write("transact_write_items", TransactItems=actions)

    def count_pending(self, table_name: str) -> int:
        # Select=COUNT reads no item into the answer; a page still covers at most 1 MB of records.
        request: dict[str, Any] = {**self._pending_query(table_name), "Select": "COUNT"}
        count = 0
        while True:
            page = self.client.query(**request)
            count += int(page["Count"])
            if "LastEvaluatedKey" not in page:
                return count
            request["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def _pending_query(self, table_name: str) -> dict[str, Any]:
        return {
            "TableName": self.state_table,
            "KeyConditionExpression": "pk = :pk AND begins_with(sk, :pending)",
            "ExpressionAttributeValues": {":pk": {"S": table_name}, ":pending": {"S": _PENDING}},
            # a processor must see what the planner wrote before starting it
            "ConsistentRead": True,
        }

    def mark_applied(
        self, table_name: str, items: Iterable[AnyItem], index_uuid: str, fence: str | None = None
    ) -> None:
        marks = [
            [
                {
                    "Update": {
                        "TableName": self.state_table,
                        "Key": _keys(table_name, _pending_sk(item)),
                        # the record's own status and mark: the body keeps the files as planned
                        "UpdateExpression": "SET #status = :applied, applied_to = :to",
                        # never resurrect an item completed meanwhile: its mark alone is dropped
                        "ConditionExpression": "attribute_exists(pk)",
                        "ExpressionAttributeNames": {"#status": "status"},
                        "ExpressionAttributeValues": {
                            ":applied": {"S": ItemStatus.APPLIED},
                            ":to": {"S": index_uuid},
                        },
                    }
                }
            ]
            for item in items
        ]
        self._write_each(table_name, marks, fence)

    def acquire_lease(self, table_name: str, owner: str, seconds: float) -> bool:
        now = time.time()
        try:
            self._write(
                "put_item",
                TableName=self.state_table,
                Item={
                    **_keys(table_name, _LEASE),
                    "owner": {"S": owner},
                    "lease_expires_at": {"N": repr(now + seconds)},
                },
                ConditionExpression=(
                    "attribute_not_exists(pk) OR #owner = :owner OR lease_expires_at < :now"
                ),
                ExpressionAttributeNames={"#owner": "owner"},
                ExpressionAttributeValues={":owner": {"S": owner}, ":now": {"N": repr(now)}},
            )
        except ClientError as exc:
            if _code(exc) != "ConditionalCheckFailedException":
                raise
            return False
        return True

    def release_lease(self, table_name: str, owner: str) -> None:
        try:
            self._write(
                "delete_item",
                TableName=self.state_table,
                Key=_keys(table_name, _LEASE),
                ConditionExpression="#owner = :owner",
                ExpressionAttributeNames={"#owner": "owner"},
                ExpressionAttributeValues={":owner": {"S": owner}},
            )
        except ClientError as exc:
            # expired and taken over: not ours to release
            if _code(exc) != "ConditionalCheckFailedException":
                raise

    def _advance(
        self, table_name: str, checkpoint: Checkpoint, replace: bool, fence: str | None
    ) -> None:
        """Write the checkpoint unless the stored one is as far or further.

        Only a stored checkpoint of the same table incarnation counts. With a `fence`, the write
        goes in one transaction with a check that its owner holds the lease.
        """
        put: dict[str, Any] = {
            "TableName": self.state_table,
            "Item": {
                **_keys(table_name, _CHECKPOINT),
                **_checkpoint_attributes(checkpoint),
                "updated_at": {"N": repr(time.time())},
            },
        }
        if not replace:
            put["ConditionExpression"] = (
                "attribute_not_exists(pk) OR sequence_number < :seq OR table_uuid <> :uuid"
            )
            put["ExpressionAttributeValues"] = {
                ":seq": {"N": str(checkpoint.sequence_number)},
                ":uuid": {"S": checkpoint.table_uuid},
            }
        actions: list[dict[str, Any]] = [{"Put": put}]
        # the resync's index holds nothing past its checkpoint: the pass end comes down to it
        if replace:
            end_at = Checkpoint(
                checkpoint.table_uuid, checkpoint.snapshot_id, checkpoint.sequence_number
            )
            end = {**_keys(table_name, _PASS_END), **_checkpoint_attributes(end_at)}
            actions.append({"Put": {"TableName": self.state_table, "Item": end}})
        if fence is not None:
            actions.append(self._lease_check(table_name, fence))
        try:
            self._write("transact_write_items", TransactItems=actions)
        except ClientError as exc:
            reasons = _reasons(exc)
            if (
                _code(exc) != "TransactionCanceledException"
                or "ConditionalCheckFailed" not in reasons
            ):
                raise
            # the lease check, last
            if fence is not None and reasons[-1] == "ConditionalCheckFailed":
                raise LeaseLost.of(table_name) from None
            log.info(
                "%s: checkpoint already at or past sequence number %d",
                table_name,
                checkpoint.sequence_number,
            )

    def lease_holder(self, table_name: str) -> tuple[str, float] | None:
        record = self.client.get_item(
            TableName=self.state_table, Key=_keys(table_name, _LEASE), ConsistentRead=True
        ).get("Item")
        if record is None or float(record["lease_expires_at"]["N"]) < time.time():
            return None
        return record["owner"]["S"], float(record["lease_expires_at"]["N"])

    def _lease_check(self, table_name: str, owner: str) -> dict[str, Any]:
        """A transaction's check that `owner` holds the table's lease."""
        return {
            "ConditionCheck": {
                "TableName": self.state_table,
                "Key": _keys(table_name, _LEASE),
                "ConditionExpression": "#owner = :owner AND lease_expires_at >= :now",
                "ExpressionAttributeNames": {"#owner": "owner"},
                "ExpressionAttributeValues": {
                    ":owner": {"S": owner},
                    ":now": {"N": repr(time.time())},
                },
            }
        }

    def _get_base(self, table_name: str, sk: str) -> Checkpoint | None:
        record = self.client.get_item(
            TableName=self.state_table, Key=_keys(table_name, sk), ConsistentRead=True
        ).get("Item")
        if record is None:
            return None
        return Checkpoint(
            record["table_uuid"]["S"],
            int(record["snapshot_id"]["N"]),
            int(record["sequence_number"]["N"]),
            int(record["schema_id"]["N"]) if "schema_id" in record else -1,
            tuple(json.loads(record["identifier_columns"]["S"]))
            if "identifier_columns" in record
            else (),
            record["index_uuid"]["S"] if "index_uuid" in record else "",
        )

    def close(self) -> None:
        self.client.close()

    def _write(self, operation: str, **request: Any) -> Any:
        """One write request, tried again with backoff while it loses races.

        The module's docstring says why races happen and how long the backoff waits.
        """
        for attempt in itertools.count():
            try:
                return getattr(self.client, operation)(**request)
            except ClientError as exc:
                if not _lost_race(exc) or attempt >= self.conflict_retries:
                    raise
                delay = _backoff(attempt)
                log.info(
                    "%s: transaction conflict; trying again in %.2f s (%d of %d)",
                    operation,
                    delay,
                    attempt + 1,
                    self.conflict_retries,
                )
                time.sleep(delay)
        raise AssertionError("unreachable")


def create_state_table(
    state_table: str, region: str | None = None, endpoint_url: str | None = None
) -> None:
    """Create the table as the CDK stack does, for local DynamoDB and tests.

    It has the same keys, on-demand billing and TTL.
    """
    client = boto3.client("dynamodb", region_name=region, endpoint_url=endpoint_url)
    client.create_table(
        TableName=state_table,
        KeySchema=[
            {"AttributeName": PARTITION_KEY, "KeyType": "HASH"},
            {"AttributeName": SORT_KEY, "KeyType": "RANGE"},
        ],
        AttributeDefinitions=[
            {"AttributeName": PARTITION_KEY, "AttributeType": "S"},
            {"AttributeName": SORT_KEY, "AttributeType": "S"},
        ],
        BillingMode="PAY_PER_REQUEST",
    )
    client.get_waiter("table_exists").wait(TableName=state_table)
    client.update_time_to_live(
        TableName=state_table,
        TimeToLiveSpecification={"Enabled": True, "AttributeName": TTL_ATTRIBUTE},
    )


def _backoff(attempt: int) -> float:
    """Seconds to wait before try `attempt + 1`: full jitter under an exponential cap."""
    return random.uniform(
        0, min(CONFLICT_BACKOFF_CAP_SECONDS, CONFLICT_BACKOFF_SECONDS * 2**attempt)
    )


def _keys(table_name: str, sk: str) -> dict[str, dict[str, str]]:
    return {PARTITION_KEY: {"S": table_name}, SORT_KEY: {"S": sk}}


def _pending_record(item: WorkItem) -> dict[str, dict[str, str]]:
    return {
        **_keys(item.table, _pending_sk(item)),
        "status": {"S": item.status},
        "sequence_number": {"N": str(item.sequence_number)},
        "body": {"S": item.to_json()},
    }


def _item(record: dict[str, Any]) -> WorkItem:
    """The work item of a pending record: its body, with the record's status and mark.

    `mark_applied` sets those on the record, not in the body (a record written before holds them in
    both, alike).
    """
    item = WorkItem.from_json(record["body"]["S"])
    status = ItemStatus(record["status"]["S"])
    applied_to = record["applied_to"]["S"] if "applied_to" in record else item.applied_to
    if (status, applied_to) == (item.status, item.applied_to):
        return item
    return replace(item, status=status, applied_to=applied_to)


def _pending_sk(item: AnyItem) -> str:
    # Zero-padded so that the sort key orders by sequence number (a long has at most 19 digits).
    return f"{_PENDING}{item.sequence_number:020d}|{item.key}"


def _checkpoint_attributes(checkpoint: Checkpoint) -> dict[str, dict[str, str]]:
    return {
        "table_uuid": {"S": checkpoint.table_uuid},
        "snapshot_id": {"N": str(checkpoint.snapshot_id)},
        "sequence_number": {"N": str(checkpoint.sequence_number)},
        "schema_id": {"N": str(checkpoint.schema_id)},
        "identifier_columns": {"S": json.dumps(list(checkpoint.identifier_columns))},
        "index_uuid": {"S": checkpoint.index_uuid},
    }


def _code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def _reasons(exc: ClientError) -> list[str]:
    """The cancellation reasons of a cancelled transaction, one per action.

    An action that was fine has the reason "None".
    """
    return [str(r.get("Code")) for r in exc.response.get("CancellationReasons", [])]


def _transactions(groups: list[list[dict[str, Any]]], per_transaction: int) -> list[list[int]]:
    """The groups' indexes cut into transactions.

    Each transaction holds at most `per_transaction` groups and TRANSACTION_BYTES of requests. A
    group has two actions at most, and DynamoDB takes 100 actions a transaction.
    """
    chunks: list[list[int]] = []
    size = 0
    for i, group in enumerate(groups):
        group_size = len(json.dumps(group))
        full = bool(chunks) and len(chunks[-1]) >= per_transaction
        if not chunks or full or size + group_size > TRANSACTION_BYTES:
            chunks.append([])
            size = 0
        chunks[-1].append(i)
        size += group_size
    return chunks


def _condition_failed(exc: ClientError) -> bool:
    """Whether a transaction was cancelled because a condition of one of its actions failed."""
    return _code(exc) == "TransactionCanceledException" and "ConditionalCheckFailed" in _reasons(
        exc
    )


def _failed_groups(
    chunk: list[int], groups: list[list[dict[str, Any]]], reasons: list[str]
) -> set[int]:
    """The groups of a cancelled transaction (`chunk`, in its order) whose conditions failed."""
    failed, at = set(), 0
    for i in chunk:
        if "ConditionalCheckFailed" in reasons[at : at + len(groups[i])]:
            failed.add(i)
        at += len(groups[i])
    return failed


def _lost_race(exc: ClientError) -> bool:
    if _code(exc) == "TransactionConflictException":
        return True
    reasons = _reasons(exc)
    return (
        _code(exc) == "TransactionCanceledException"
        and "TransactionConflict" in reasons
        and "ConditionalCheckFailed" not in reasons
    )
