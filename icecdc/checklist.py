"""Checks with their fixes, as `icecdc doctor` and `icecdc check` report them.

One `Check` per thing verified, its `Outcome`, and the `Fix` for one that failed. Plain values: the
CLI prints them, `--json` dumps them, the tests compare them.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Outcome(StrEnum):
    PASSED = "pass"
    FAILED = "fail"  # the deploy or the first commit would fail: the exit status says so
    WARNING = "warn"  # could not be confirmed, or works but deserves a look; does not fail the run
    SKIPPED = "skip"  # does not apply to this configuration

    @property
    def mark(self) -> str:
        return {"pass": "✓", "fail": "✗", "warn": "!", "skip": "-"}[self.value]


@dataclass(frozen=True)
class Fix:
    """What to do about a failed check: in words, and the command that does it when there is one."""

    text: str
    command: str | None = None


@dataclass(frozen=True)
class Check:
    """One thing verified.

    `subject`: the table, job or index it is about, when there are several."""

    name: str
    outcome: Outcome
    detail: str
    fix: Fix | None = None
    subject: str | None = None

    @property
    def title(self) -> str:
        return f"{self.name} ({self.subject})" if self.subject else self.name

    def lines(self) -> list[str]:
        """The check as the command prints it: the mark and what was found, then the fix."""
        lines = [f"{self.outcome.mark} {self.title}: {self.detail}"]
        if self.fix is not None:
            lines.append(f"    fix: {self.fix.text}")
            if self.fix.command:
                lines += [f"    $ {line}" for line in self.fix.command.splitlines()]
        return lines


def passed(name: str, detail: str, subject: str | None = None) -> Check:
    return Check(name, Outcome.PASSED, detail, subject=subject)


def failed(
    name: str,
    detail: str,
    fix: str,
    command: str | None = None,
    subject: str | None = None,
) -> Check:
    return Check(name, Outcome.FAILED, detail, Fix(fix, command), subject)


def warned(
    name: str,
    detail: str,
    fix: str | None = None,
    command: str | None = None,
    subject: str | None = None,
) -> Check:
    return Check(name, Outcome.WARNING, detail, Fix(fix, command) if fix else None, subject)


def skipped(name: str, detail: str, subject: str | None = None) -> Check:
    return Check(name, Outcome.SKIPPED, detail, subject=subject)


def summary(checks: tuple[Check, ...] | list[Check], ready: str = "ready") -> str:
    """One line counting the checks by outcome: `ready` (or NOT `ready`) first."""
    counts = {o: sum(c.outcome == o for c in checks) for o in Outcome}
    verdict = ready if not counts[Outcome.FAILED] else f"NOT {ready}"
    return (
        f"{verdict}: {counts[Outcome.PASSED]} passed, {counts[Outcome.FAILED]} failed, "
        f"{counts[Outcome.WARNING]} to look at, {counts[Outcome.SKIPPED]} not applicable"
    )
