"""`icecdc doctor`: what makes a first deploy or a first commit fail, each finding with its fix.

It checks with the caller's credentials against the configuration.

- `before` (icecdc.doctor.before) checks the tables, the account, an existing domain, and the names
  the stack gives its resources. A table must be in the Glue Data Catalog, of format v2 or later,
  with identifier columns, lower-case names as Glue's events carry them, and files in the warehouse
  buckets. The account needs credentials, the CDK bootstrap, Glue 5.1, Lambda concurrency for what
  the stack reserves, and OpenSearch's service-linked role for a VPC domain. An existing domain must
  run OpenSearch and be reachable; an existing Serverless collection must be an ACTIVE SEARCH one
  (icecdc.doctor.collections). The names must be free, or the stack's own.
- `after` (icecdc.doctor.after) checks the deployed stack's resources, the state table, the jobs'
  and the planner's last runs and errors, the failed-events queue, the rule against each table's
  event, the writers' access to the indexes (icecdc.doctor.search; on a collection, its data
  access policy) and each table's lag.

Each check is a function of a `Context` yielding `Check`s. One that cannot finish, as when denied or
throttled, is reported as failed with the error, and the others still run. Without credentials no
check can run: that is the one finding.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator

from botocore.exceptions import BotoCoreError, ClientError

from icecdc.config import Config
from icecdc.doctor import after, before
from icecdc.doctor.context import Context, Sources
from icecdc.doctor.model import Check, Diagnosis, Fix, Outcome, Phase, failed
from icecdc.errors import IcecdcError

log = logging.getLogger(__name__)

__all__ = ["Check", "Diagnosis", "Fix", "Outcome", "Phase", "Sources", "diagnose"]

CheckFunction = Callable[[Context], Iterator[Check]]
PHASES: dict[Phase, tuple[CheckFunction, ...]] = {
    Phase.BEFORE: before.CHECKS,
    Phase.AFTER: after.CHECKS,
}


def diagnose(
    config: Config,
    phase: Phase,
    sources: Sources | None = None,
    clock: Callable[[], float] = time.time,
) -> Diagnosis:
    """Run every check of `phase`.

    `sources` replaces what the tests' AWS cannot answer
    (icecdc.doctor.sources); `clock` is the lag check's now."""
    context = Context.open(config, sources, clock)
    missing = _no_credentials(context)
    if missing is not None:  # no check could run: the one finding
        return Diagnosis(phase, context.stack_name, context.region, (missing,))
    checks = [check for function in PHASES[phase] for check in _run(function, context)]
    return Diagnosis(phase, context.stack_name, context.region, tuple(checks))


_GIVE_CREDENTIALS = (
    "give the SDK credentials: AWS_PROFILE, AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or "
    "`aws sso login`"
)


def _no_credentials(context: Context) -> Check | None:
    """The failed credentials check when the SDK finds no credentials, or cannot read them."""
    try:
        found = context.session.get_credentials()
    except BotoCoreError as exc:  # a profile or a credentials file it cannot read
        return failed(
            "credentials", f"the AWS credentials cannot be read: {exc}", _GIVE_CREDENTIALS
        )
    if found is not None:
        return None
    return failed(
        "credentials",
        "no AWS credentials found (environment, AWS_PROFILE's files, SSO, the instance's role): "
        "every check needs them",
        _GIVE_CREDENTIALS,
    )


def _run(function: CheckFunction, context: Context) -> list[Check]:
    name = function.__name__.removeprefix("check_").replace("_", " ")
    checks: list[Check] = []
    try:
        for check in function(context):
            checks.append(check)
    except (ClientError, BotoCoreError, IcecdcError) as exc:
        # Denied, throttled, unreachable: this check cannot tell, the others still run.
        checks.append(
            failed(
                name,
                f"could not check: {exc}",
                "give the caller the read access the error names, or correct what it says",
            )
        )
    for check in checks:
        log.debug("%s: %s: %s", check.title, check.outcome, check.detail)
    return checks
