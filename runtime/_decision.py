"""The decision record: one accepted/rejected entry, with a human reason, per candidate tried."""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

__all__ = ["Decision", "format_decisions"]


# Result records are NamedTuples (immutable, typed, and ~8x cheaper to define than a dataclass):
# the whole runtime is imported inside the measured "first op call" of a cache hit.
class Decision(NamedTuple):
    """One candidate tried, accepted or rejected, and why in words."""

    candidate: str  # "prebuilt" | "jit" | "reference"
    accepted: bool
    reason: str

    def __str__(self) -> str:
        return f"{self.candidate}: {self.reason}"

    def as_dict(self) -> dict[str, object]:
        return {"candidate": self.candidate, "accepted": self.accepted, "reason": self.reason}


def format_decisions(decisions: Iterable[Decision], indent: str = "  ") -> str:
    return "\n".join(f"{indent}[{'accepted' if d.accepted else 'rejected'}] {d}" for d in decisions)
