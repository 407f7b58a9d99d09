"""The engine of a project that compiles nothing (a noarch kernel-builder kernel, project/noarch.py):
its build writes the build's ``py3-none-any`` wheel and checks that pip itself installs it. It runs
through the runner as a compiled variant's engine does (runner/run.py), one build per backend."""

from __future__ import annotations

import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from wheelfactory.engines import BuildResult, EngineIdentity
from wheelfactory.errors import VariantBuildError
from wheelfactory.project.noarch import NoarchStage, write_noarch_wheel
from wheelfactory.support.proc import call
from wheelfactory.support.timeline import Timeline


@dataclass(frozen=True)
class PurePythonEngine:
    name: str = "none"  # no engine compiles: what the summary and the manifest say

    def identity(self, stage: NoarchStage) -> EngineIdentity:
        return EngineIdentity("none")  # the wheel is its files and metadata: the stage's key

    def reclaim(self) -> list[str]:
        return []  # nothing runs beside the factory

    def build(
        self, stage: NoarchStage, workdir: Path, log: Path, timeline: Timeline
    ) -> BuildResult:
        """The wheel, checked by a real ``pip install`` into a scratch directory; it consumes
        nothing besides the project, so no provenance record is written for it."""
        with timeline.phase("wheel"):
            wheel = write_noarch_wheel(stage.build, stage.spec, workdir)
        with timeline.phase("verify"):
            check_installs(wheel, stage.package)
        return BuildResult(wheel, inputs=None)


def check_installs(wheel: Path, package: str) -> None:
    """pip itself installs it (the wheel format, RECORD's hashes) and the package is there."""
    with tempfile.TemporaryDirectory(prefix="wheelfactory-noarch-") as target:
        result = call(
            [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index"]
            + ["--disable-pip-version-check", "--target", target, str(wheel)]
        )
        if result.returncode != 0 or not (Path(target) / package / "__init__.py").is_file():
            tail = (result.stderr or result.stdout).strip().splitlines()
            raise VariantBuildError(
                f"{wheel.name} does not install: {tail[-1] if tail else 'no package'}",
                explained=True,
            )
