"""What some checks read that has no plain API, or that moto does not emulate.

moto is the tests' AWS. Each source is a small interface with the default that asks AWS, so the
tests can hand in the account's answer and test the check's logic. tests/aws/test_doctor.py says
which ones it replaces, and why.

- Which Glue versions a region offers: no Glue API lists them. The default answers only what the
  account proves, a job on that version in the region, else "cannot tell".
- Lambda's account concurrency (GetAccountSettings): moto has no such route.
- Whether an EventBridge pattern matches an event (TestEventPattern): moto accepts the call and
  answers nothing, and a caller may lack `events:TestEventPattern`. Then the pattern is evaluated
  here, for the part of EventBridge's pattern language the stack writes (`match_locally`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

from botocore.exceptions import BotoCoreError, ClientError

from icecdc.aws.contract import GLUE_EVENT_SOURCE, GLUE_EVENT_TYPE
from icecdc.catalog import glue_name


class GlueVersions(Protocol):
    def offers(self, version: str) -> bool | None:
        """Whether Glue offers `version` in the region; None when it cannot be told."""


class LambdaConcurrency(Protocol):
    def account(self) -> AccountConcurrency:
        """The region's concurrency quota and what functions have not reserved of it."""


@dataclass(frozen=True)
class AccountConcurrency:
    limit: int  # AccountLimit.ConcurrentExecutions
    unreserved: int  # AccountLimit.UnreservedConcurrentExecutions

    @property
    def minimum_unreserved(self) -> int:
        """What Lambda keeps unreserved: 100, or the whole quota of an account whose quota is lower.

        AWS's Lambda guide: "You can reserve up to the Unreserved account concurrency value minus
        100". New accounts often have a quota of 10: their functions can reserve nothing.
        """
        return min(100, self.limit)


@dataclass(frozen=True)
class JobsOnVersion:
    """Glue offers a version in a region if a job of the account runs on it there.

    Without one it cannot be told: AWS documents Glue versions per region only in its guides."""

    glue: Any

    def offers(self, version: str) -> bool | None:
        for page in self.glue.get_paginator("get_jobs").paginate():
            if any(job.get("GlueVersion") == version for job in page["Jobs"]):
                return True
        return None


@dataclass(frozen=True)
class AccountSettings:
    lambda_client: Any

    def account(self) -> AccountConcurrency:
        limits = self.lambda_client.get_account_settings()["AccountLimit"]
        return AccountConcurrency(
            int(limits["ConcurrentExecutions"]), int(limits["UnreservedConcurrentExecutions"])
        )


def glue_event(account: str, region: str, table_name: str) -> dict[str, Any]:
    """What EventBridge delivers for a commit of `table_name` through the Glue Data Catalog.

    Glue names the database and the table as it stores them, in lower case.
    """
    database, _, name = glue_name(table_name).partition(".")
    return {
        "version": "0",
        "id": "00000000-0000-0000-0000-000000000000",
        "detail-type": GLUE_EVENT_TYPE,
        "source": GLUE_EVENT_SOURCE,
        "account": account,
        "time": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "region": region,
        "resources": [f"arn:aws:glue:{region}:{account}:table/{database}/{name}"],
        "detail": {
            "databaseName": database,
            "tableName": name,
            "typeOfChange": "UpdateTable",
            "changedPartitions": [],
        },
    }


@dataclass(frozen=True)
class PatternMatch:
    matches: bool
    how: str  # "EventBridge" or why the pattern was evaluated here


def match_pattern(events: Any, pattern: str, event: dict[str, Any]) -> PatternMatch:
    """Whether `event` matches the rule's `pattern`, as EventBridge's TestEventPattern answers.

    The pattern is evaluated here when EventBridge does not answer:
    denied, or an emulator without it.
    """
    try:
        answer = events.test_event_pattern(EventPattern=pattern, Event=json.dumps(event))
    except (ClientError, BotoCoreError) as exc:
        return PatternMatch(
            match_locally(json.loads(pattern), event),
            f"evaluated here: TestEventPattern failed ({exc})",
        )
    if "Result" not in answer:
        return PatternMatch(
            match_locally(json.loads(pattern), event),
            "evaluated here: TestEventPattern gave no result",
        )
    return PatternMatch(bool(answer["Result"]), "EventBridge")


class UnsupportedPattern(ValueError):
    """A pattern operator `match_locally` does not evaluate (the stack writes none)."""


def match_locally(pattern: dict[str, Any], event: dict[str, Any]) -> bool:
    """EventBridge's matching for exact values.

    Every field of the pattern must be in the event. A list of values matches when the event's value
    is one of them; an event's list matches when one of its values is. A nested object matches the
    event's object at that key. Strings compare case-sensitively, as EventBridge does: which is why
    a table configured `Sales.Orders` never matches Glue's event, whose names are lower-case.
    Content filters such as `prefix` and `anything-but` raise UnsupportedPattern.
    """
    for key, wanted in pattern.items():
        if isinstance(wanted, dict):
            value = event.get(key)
            if not isinstance(value, dict) or not match_locally(wanted, value):
                return False
            continue
        if not isinstance(wanted, list):
            raise UnsupportedPattern(f"the value of {key!r} is not a list: {wanted!r}")
        # a content filter matches even absent fields (`exists`)
        if any(isinstance(w, dict) for w in wanted):
            raise UnsupportedPattern(f"content filters are not evaluated here: {key!r}: {wanted!r}")
        if key not in event:
            return False
        values = event[key] if isinstance(event[key], list) else [event[key]]
        if not any(v in wanted for v in values):
            return False
    return True
