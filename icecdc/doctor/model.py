"""What `icecdc doctor` reports: one `Check` per thing verified, its `Outcome`, a `Fix` on failure.

Plain values: the CLI prints them, `--json` dumps them, the tests compare them.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from enum import StrEnum
from typing import Any

from icecdc.checklist import Check, Fix, Outcome, failed, passed, skipped, summary, warned

__all__ = ["Check", "Diagnosis", "Fix", "Outcome", "Phase", "failed", "passed", "skipped", "warned"]


class Phase(StrEnum):
    """When the checks apply: before the first `cdk deploy`, or against the deployed stack."""

    BEFORE = "before"
    AFTER = "after"


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
        return summary(self.checks)
