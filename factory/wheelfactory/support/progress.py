"""One progress channel: what long side-effecting work reports (image builds, the engine choice,
each variant's phases) as typed events handed to a ``Listener``. Library code only emits; the CLI
decides how events look (cli/render.py), a caller of the API passes its own listener or none.
Nothing below cli/ prints."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class StepStarted:
    """A new step begins (e.g. "debootstrap bookworm")."""

    title: str


@dataclass(frozen=True)
class CommandRun:
    """A command (already quoted) or a build instruction runs now."""

    command: str


@dataclass(frozen=True)
class StepDone:
    """A step ended: what it gave and how long it took."""

    text: str


@dataclass(frozen=True)
class ToolOutput:
    """Output of a tool that failed, as it printed it: what a person reads to see why."""

    text: str


@dataclass(frozen=True)
class Notice:
    """One line of what a step found or decided (the engine set-up: "Docker 28.2.2 already answers")."""

    text: str


@dataclass(frozen=True)
class VariantPhase:
    """A variant enters a phase (building, repairing, built, failed, cached ...); ``variant`` "*" is
    about the run itself (e.g. containers a killed run left, reclaimed)."""

    variant: str
    phase: str
    detail: str = ""


Event = StepStarted | CommandRun | StepDone | ToolOutput | Notice | VariantPhase
Listener = Callable[[Event], None]


def ignore(event: Event) -> None:
    """The listener of a caller that wants no progress."""
