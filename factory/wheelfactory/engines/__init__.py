"""Build engines: where a variant's wheel is made. Each engine satisfies ``Engine``: a Docker
engine (engines/docker.py), the host's interpreter (engines/host.py), or for a project that
compiles nothing, the writing of its wheel (engines/pure_python.py)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, TypeVar

from wheelfactory.errors import Findings
from wheelfactory.support.timeline import Timeline


@dataclass(frozen=True)
class BuildInputs:
    """What one build consumed besides the project: the provenance record's dependencies
    (runner/provenance.py)."""

    engine: str  # docker, host
    interpreter: str  # cp311-cp311 in an image; the host interpreter's path
    image: str | None = None  # the build image's id (sha256:...); None on the host
    image_tag: str | None = None
    # (file name, sha256): the wheel set torch and the tools came from
    wheels: tuple[tuple[str, str], ...] = ()
    # (name, version) of what drove the build from outside it
    tools: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class EngineIdentity:
    """What about the engine changes a variant's wheel: ``key`` goes into its build's cache key
    (runner/run.py cache_key), ``image`` (the id of the image it builds in; None: no image) into
    its manifest entry."""

    key: str
    image: str | None = None


@dataclass(frozen=True)
class BuildResult:
    """What one build made: the finished wheel (inside the build's ``workdir``), what it consumed
    (None: nothing besides the project, and no provenance record is written for it) and what
    verifying the wheel found (its tests, the stable-ABI gate, the warnings)."""

    wheel: Path
    inputs: BuildInputs | None
    found: Findings = Findings()


StageT = TypeVar("StageT", contravariant=True)


class Engine(Protocol[StageT]):
    """Settled when made (engines/choose.py: its images' settings, the parallelism of one build);
    a build's results come back from ``build``, its failures as VariantBuildError carrying what
    was found before (``VariantBuildError.found``)."""

    @property
    def name(self) -> str:
        """docker, host: what the summary and the manifest call it."""

    def identity(self, stage: StageT) -> EngineIdentity:
        """What about the engine changes this stage's wheel (interpreter and torch, image id)."""

    def reclaim(self) -> list[str]:
        """Remove what a killed run on the same output left running (containers); their names."""

    def build(self, stage: StageT, workdir: Path, log: Path, timeline: Timeline) -> BuildResult:
        """Build, repair and check one variant. Each step runs as a phase of ``timeline`` (its
        seconds go to the manifest; for a compiled wheel one phase is ``compile``, the build
        backend's run)."""
