"""One build session: matrix.toml -> plan -> engine -> every selected variant built into dist/.

What ``wheelfactory build`` and the public ``wheelfactory.build`` both run; the CLI adds only the
presentation (the live view, the summary). The session decides; it prints nothing itself.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from wheelfactory.engines import Engine
from wheelfactory.engines.capacity import Capacity
from wheelfactory.engines.choose import EngineRequest, NotBuilt, choose_engine, host_tools
from wheelfactory.engines.dockerd import DEBIAN_BASE_PACKAGES, set_up_emulation, start_engine
from wheelfactory.errors import ConfigError
from wheelfactory.plan.build_config import ENGINES, BuildConfig
from wheelfactory.plan.compat import load_table
from wheelfactory.plan.matrix import load_matrix
from wheelfactory.project.kinds import LoadContext, resolve_kind
from wheelfactory.project.stage import Staged, Target
from wheelfactory.project.vcs_version import VersionProbe
from wheelfactory.project.wheel_checks import check_sources
from wheelfactory.runner.run import Outcome, run_matrix
from wheelfactory.support.host_env import HostEnvRequest, ensure_host_env
from wheelfactory.support.outputs import check_output_directory
from wheelfactory.support.paths import StrPath
from wheelfactory.support.proc import CommandFailed, run
from wheelfactory.support.progress import Listener, Notice, ignore


@dataclass(frozen=True, kw_only=True)
class BuildResult:
    """What a session did: where, with which engine, and each variant's outcome; ``not_built``: the
    selected variants no engine here could build (``wheelfactory build`` exits 5 for them)."""

    out: Path
    engine: str
    outcomes: tuple[Outcome, ...]
    not_built: tuple[NotBuilt, ...] = ()

    @property
    def failed(self) -> tuple[Outcome, ...]:
        return tuple(o for o in self.outcomes if o.entry.status == "failed")


@dataclass(frozen=True, kw_only=True)
class PreparedBuild:
    """A session with every decision made (project, engine, variants, parallelism) and nothing built."""

    out: Path
    engine: Engine[Any] | None  # None: no engine here builds any selected variant
    summary: str  # the engine decision in one line, what `wheelfactory build` prints first
    # what the engine builds: the plan's variants, or a pure-Python project's builds
    variants: tuple[Target, ...]
    capacity: Capacity | None  # None: nothing compiles
    stage_for: Callable[[Any], Staged]  # how the project's kind stages one (project/kinds.py)
    not_built: tuple[NotBuilt, ...] = ()
    wheel_size_limit: int = BuildConfig().wheel_size_limit  # [build] wheel_size_limit, in bytes
    # held open while the run builds (engines/choose.py Chosen.lifetime)
    lifetime: AbstractContextManager[object] = field(default_factory=nullcontext)

    @property
    def build_ids(self) -> tuple[str, ...]:
        """What ``run`` builds, by variant id (the rows of a live view)."""
        return tuple(v.id for v in self.variants) if self.engine is not None else ()

    @property
    def title(self) -> str:
        """The run's parallelism and memory, for the live view; "" where nothing compiles."""
        return self.capacity.describe() if self.capacity is not None else ""

    def run(self, progress: Listener = ignore) -> BuildResult:
        name = self.engine.name if self.engine else "none"
        if self.engine is None or not self.variants:
            return BuildResult(out=self.out, engine=name, outcomes=(), not_built=self.not_built)
        with self.lifetime:
            outcomes = run_matrix(
                self.stage_for,
                self.variants,
                self.engine,
                self.out,
                jobs=self.capacity.jobs if self.capacity else 1,
                progress=progress,
                wheel_size_limit=self.wheel_size_limit,
            )
        return BuildResult(
            out=self.out, engine=name, outcomes=tuple(outcomes), not_built=self.not_built
        )


def prepare_build(
    matrix: StrPath,
    *,
    compat: StrPath | None = None,
    out: StrPath | None = None,
    engine: str | None = None,
    python: str | None = None,
    only: Sequence[str] = (),
    shard: tuple[int, int] | None = None,
    jobs: int | None = None,
    max_memory: int | None = None,
    setup: bool = False,
    progress: Listener = ignore,
) -> PreparedBuild:
    """Read the matrix and the project (through its kind, project/kinds.py), choose the engine
    (building or reusing its images: progress goes to ``progress``) and the parallelism. A project
    that compiles nothing gets the engine that only writes its wheels. ``setup``: first make a
    Docker engine answer where this machine allows (engines/dockerd.py), with what the matrix's
    route needs; reported, never fatal. Raises the errors in wheelfactory.errors."""
    path = Path(matrix)
    table = load_table(Path(compat) if compat is not None else None)
    spec = load_matrix(path, table, display=str(path))
    choice = next((e for e in ENGINES if e == engine), spec.build.engine)
    if setup:
        set_up_engine(
            choice, debian_base=bool(spec.build.debian_base), progress=progress, archs=spec.arch
        )
    out_dir = Path(out or (path.resolve().parent / spec.build.out)).resolve()
    # before any engine or image is made
    check_output_directory("-o" if out else "[build] out", out_dir)
    if spec.test is not None:  # now, not per variant: one clear error before anything builds
        check_sources(spec.test, spec.project.path)
    kind = resolve_kind(spec.project)
    loaded = kind.load(
        LoadContext(
            matrix=spec,
            table=table,
            matrix_file=str(path),
            run_probe=lambda probe: run_version_probe(host_tools(spec), probe),
        )
    )
    request = EngineRequest(
        matrix=spec,
        table=table,
        choice=choice,
        python=python or sys.executable,
        out=out_dir,
        only=tuple(only),
        shard=shard,
        generated_packaging=loaded.facts.generated_packaging,
        matrix_file=str(path),
        constraints=loaded.constraints,
        jobs=jobs or spec.build.jobs,
        max_memory=max_memory,
        pure_python=loaded.pure_python,
    )
    chosen = choose_engine(request, progress)
    return PreparedBuild(
        out=out_dir,
        engine=chosen.engine,
        summary=chosen.summary,
        variants=chosen.variants,
        capacity=chosen.capacity,
        stage_for=loaded.stage_for,
        not_built=chosen.not_built,
        wheel_size_limit=spec.build.wheel_size_limit,
        lifetime=chosen.lifetime,
    )


def set_up_engine(
    choice: str, *, debian_base: bool, progress: Listener, archs: Sequence[str] = ()
) -> None:
    """build --setup: make a Docker engine answer where this machine allows, and the matrix's
    archs run (QEMU user emulation for a foreign one); report, never fail."""
    if choice == "host":
        progress(Notice("setup: --engine host needs no Docker engine; nothing to set up"))
        return
    result = start_engine(
        say=lambda line: progress(Notice(line)), route=DEBIAN_BASE_PACKAGES if debian_base else {}
    )
    if result.ready and archs:
        set_up_emulation(archs, say=lambda line: progress(Notice(f"setup: {line}")))
    if result.warning:
        progress(Notice(f"setup: {result.warning}"))
    if not result.ready:
        then = (
            "going on with what the host can build"
            if choice == "auto"
            else "the docker engine cannot build"
        )
        progress(Notice(f"setup: no Docker engine here: {result.detail}; {then}"))


def run_version_probe(tools: Path, probe: VersionProbe) -> str:
    """Run the project's version tool on its checkout (project/vcs_version.py), the tool installed
    from its own requirement into a host tool environment under ``tools``."""
    env = ensure_host_env(
        tools,
        HostEnvRequest((probe.requirement,), purpose=f"{probe.tool}'s version of the project"),
    )
    try:
        return run([sys.executable, "-c", probe.program, *probe.args], env={"PYTHONPATH": str(env)})
    except CommandFailed as exc:
        raise ConfigError(
            f"{probe.tool} could not compute the project's version from git: {exc.last_line}",
            key="build-system.requires",
            hint="build from a git checkout (with a version tag), or set the tool's fallback version",
        ) from None
