"""The work of the commands about the machine builds run on: its Docker engine (``engine start``),
an offline Debian base image (``base-image``), the disk the wheelhouse holds (``gc``), and ROCm
device code compiled where no ROCm torch is reachable (``rocm-check``). Each takes plain values
and returns what it did; cli/machine_cli.py says it."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from wheelfactory.engines.choose import DEFAULT_CACHE, debian_bases
from wheelfactory.engines.dockerd import DEFAULT_LOG, DEFAULT_WAIT_S, set_up_emulation, start_engine
from wheelfactory.engines.prepared_env import collect_garbage as collect_prepared
from wheelfactory.engines.wheelhouse import Wheelhouse
from wheelfactory.errors import DockerUnavailable, EnvironmentProblem
from wheelfactory.images.base_image import BaseImage, base_spec, ensure_base_image, parse_suite
from wheelfactory.images.containers import docker_client
from wheelfactory.images.emulation import host_arch
from wheelfactory.images.rocm_base import rocm_check_base
from wheelfactory.plan.indexes import debian_mirror
from wheelfactory.plan.read import read_matrix
from wheelfactory.project.kernel_toml import load_kernel
from wheelfactory.support.host_env import collect_garbage as collect_host_tools
from wheelfactory.support.linkstore import Removed
from wheelfactory.support.paths import StrPath
from wheelfactory.support.progress import Listener, ignore
from wheelfactory.verify.rocm_device_code import RocmCheck, check_device_code

# MI200 and the newest Instinct target Debian's hipcc 5.2 (clang 15) knows
DEFAULT_GFX = ("gfx90a", "gfx940")
Say = Callable[[str], None]


def _quiet(line: str) -> None:
    pass


def start_docker(
    *,
    install: bool = True,
    log: StrPath = DEFAULT_LOG,
    wait_s: int = DEFAULT_WAIT_S,
    emulate: Sequence[str] = (),
    say: Say = _quiet,
    warn: Say = _quiet,
) -> tuple[str, tuple[str, ...]]:
    """``wheelfactory engine start``: make a Docker engine answer here (Debian's docker.io, as root
    with apt-get where ``install``; dockerd without a bridge network, as CI runs it) and the
    ``emulate`` archs run through QEMU user emulation; each step is told to ``say`` before it
    runs, a part missing for the build route to ``warn``. Returns (the engine, what was done);
    DockerUnavailable or EnvironmentProblem when it cannot be done."""
    result = start_engine(install=install, log=Path(log), wait_s=wait_s, say=say)
    if not result.ready:
        raise DockerUnavailable(result.detail)
    if result.warning:
        warn(result.warning)
    done = list(result.done)
    if emulate:
        emulation = set_up_emulation(emulate, install=install, say=say)
        done.extend(emulation.done)
        if not emulation.ready:
            first = next(s for s in emulation.support if not s.runs)
            raise EnvironmentProblem(
                f"{first.arch} code cannot run here: {first.how}; fix: {first.fix}"
            )
    return result.detail, tuple(done)


def make_base_image(
    suite: str = "bookworm",
    *,
    mirror: str | None = None,
    tag: str | None = None,
    arch: str | None = None,
    cache_dir: StrPath = Path(".cache/wheelfactory"),
    idle: bool = False,
    progress: Listener = ignore,
) -> BaseImage:
    """``wheelfactory base-image``: make (or reuse, by its content tag) a Debian-based image with
    the manylinux layout for ``arch`` (default: this machine's), without a container registry.
    A failure's tool output goes to ``progress`` before ImageBuildFailed (ensure_base_image)."""
    client = docker_client(hint="start one (e.g. .ci/start-docker)")
    spec = base_spec(parse_suite(suite), debian_mirror(mirror), arch or host_arch(), tag=tag)
    return ensure_base_image(
        client, spec, cache_dir=Path(cache_dir).resolve(), progress=progress, idle=idle
    )


@dataclass(frozen=True)
class Collected:
    """What ``collect_garbage`` removed (or, dry run, would remove) under ``wheelhouse``."""

    wheelhouse: Path
    environments: tuple[Removed, ...]  # prepared build environments
    wheel_sets: tuple[Removed, ...]
    host_tools: tuple[Removed, ...]  # the host engine's tool environments

    @property
    def removed(self) -> tuple[Removed, ...]:
        return self.environments + self.wheel_sets + self.host_tools


def collect_garbage(
    wheelhouse: StrPath | None = None,
    *,
    matrix: StrPath = "matrix.toml",
    unused_days: float = 7.0,
    dry_run: bool = False,
) -> Collected:
    """``wheelfactory gc``: remove the prepared build environments, the wheel sets and the host's
    tool environments under ``wheelhouse`` (default: [build] wheelhouse of ``matrix`` when that
    file exists, else ~/.cache/wheelfactory/wheelhouse) that no build used for ``unused_days``,
    and what a killed run left half-made."""
    if wheelhouse is None:
        matrix_path = Path(matrix)
        configured = read_matrix(matrix_path)[0].build.wheelhouse if matrix_path.is_file() else None
        wheelhouse = configured or DEFAULT_CACHE / "wheelhouse"
    root = Path(wheelhouse)
    unused_for_s = unused_days * 86400
    return Collected(
        root,
        tuple(collect_prepared(root / "envs", unused_for_s=unused_for_s, dry_run=dry_run)),
        tuple(Wheelhouse(root).collect_garbage(unused_for_s=unused_for_s, dry_run=dry_run)),
        tuple(collect_host_tools(root / "host-tools", unused_for_s=unused_for_s, dry_run=dry_run)),
    )


@dataclass(frozen=True)
class RocmChecked:
    kernel: str  # the kernel's name
    check: RocmCheck
    log: Path


def rocm_check(
    matrix: StrPath = "matrix.toml",
    *,
    compat: StrPath | None = None,
    out: StrPath = "dist",
    gfx: Sequence[str] = (),
    progress: Listener = ignore,
) -> RocmChecked:
    """``wheelfactory rocm-check``: hipify the kernel's CUDA sources and compile its device code
    with hipcc for the ``gfx`` targets (default: [rocm] gfx_targets of the matrix, else
    DEFAULT_GFX), in an image over the ROCm check's base (images/rocm_base.py); the log is
    ``out``/rocm-check.log."""
    spec, _ = read_matrix(Path(matrix), Path(compat) if compat is not None else None)
    kernel = load_kernel(spec.project.path)
    targets = tuple(gfx) or spec.rocm.gfx_targets or DEFAULT_GFX
    client = docker_client()
    base = rocm_check_base(spec.build, debian_bases(client, spec, progress))
    dist = Path(out).resolve()
    log = dist / "rocm-check.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    check = check_device_code(
        client, base, kernel, targets, work=dist / ".work" / "rocm-check", log=log
    )
    return RocmChecked(kernel.name, check, log)
