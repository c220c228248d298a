"""What `icecdc doctor` reports: one `Check` per thing verified, its `Outcome`, and the `Fix` for one
that failed. Plain values: the CLI prints them, `--json` dumps them, the tests compare them."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from enum import StrEnum
from typing import Any


class Phase(StrEnum):
    """When the checks apply: before the first `cdk deploy`, or against the deployed stack."""

    BEFORE = "before"
    AFTER = "after"


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
    """One thing verified. `subject`: the table, job or index it is about, when there are several."""

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


def failed(name: str, detail: str, fix: str, command: str | None = None, subject: str | None = None) -> Check:
    return Check(name, Outcome.FAILED, detail, Fix(fix, command), subject)


def warned(name: str, detail: str, fix: str | None = None, command: str | None = None, subject: str | None = None) -> Check:
    return Check(name, Outcome.WARNING, detail, Fix(fix, command) if fix else None, subject)


def skipped(name: str, detail: str, subject: str | None = None) -> Check:
    return Check(name, Outcome.SKIPPED, detail, subject=subject)


@dataclass(frozen=True)
class Diagnosis:
    """Every check of one run, in the order they ran."""

    phase: Phase
    stack: str
    region: str
    checks: tuple[Check, ...]

    @property
    def failures(self) -> tuple[Check, ...]:
        return tuple(c for c in self.checks if c.outcome == Outcome.FAILED)

    @property
    def ok(self) -> bool:
        return not self.failures

    def named(self, name: str, subject: str | None = None) -> Check:
        """The check called `name` (about `subject`); KeyError when it did not run."""
        for check in self.checks:
            if check.name == name and (subject is None or check.subject == subject):
                return check
        raise KeyError(f"no check {name!r}" + (f" about {subject!r}" if subject else ""))

    def as_json(self) -> dict[str, Any]:
        return {
            "phase": self.phase.value,
            "stack": self.stack,
            "region": self.region,
            "ok": self.ok,
            "failed": len(self.failures),
            "checks": [asdict(c) for c in self.checks],
        }

    def summary(self) -> str:
        counts = {o: sum(c.outcome == o for c in self.checks) for o in Outcome}
        return (
            f"{'ready' if self.ok else 'NOT ready'}: {counts[Outcome.PASSED]} passed, {counts[Outcome.FAILED]} failed, "
            f"{counts[Outcome.WARNING]} to look at, {counts[Outcome.SKIPPED]} not applicable"
        )
