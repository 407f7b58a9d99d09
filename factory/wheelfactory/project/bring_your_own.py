"""Bring-your-own projects: any setup.py/pyproject torch extension, built per variant unchanged.

The factory copies the project as it is, sets the variables its build reads (TORCH_CUDA_ARCH_LIST,
FORCE_CUDA-style switches from matrix.toml, the version its git checkout gives: project/vcs_version.py),
builds it with the build system its pyproject.toml declares (project/build_system.py) and repairs it
like a native kernel, and only then gives the wheel its variant's PEP 440 local label (merged into
one the version has already) and (``[build] torch_requirement = "pinned"``) its torch pin: the
project's sources are never edited.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from packaging.utils import parse_wheel_filename
from packaging.version import Version

from wheelfactory.errors import ConfigError
from wheelfactory.plan.identity import Variant
from wheelfactory.plan.matrix import ProjectConfig
from wheelfactory.plan.project_tests import ProjectTests
from wheelfactory.plan.torch_pin import TorchRequirement, torch_requires_dist
from wheelfactory.project.build_system import LEGACY, BuildSystem, read_build_system
from wheelfactory.project.cibw_table import identifier_for
from wheelfactory.project.cibw_tests import project_table_tests
from wheelfactory.project.keys import tree_digest
from wheelfactory.project.kind_facts import BRING_YOUR_OWN, KindFacts
from wheelfactory.project.stage import CompiledStage
from wheelfactory.project.vcs_version import ProbeRunner, VcsVersion, vcs_version
from wheelfactory.project.wheel_checks import WheelChecks
from wheelfactory.support.project_copy import copy_project_tree, project_files
from wheelfactory.support.wheel_rewrite import rewrite_wheel

IGNORED = ("__pycache__", "*.egg-info", "build", "dist", ".git", ".tox", ".venv", "*.so", "*.o")
# Build machines have no GPU: a project that builds its GPU code only when torch.cuda.is_available()
# or a switch is set (FORCE_CUDA: torchvision, detectron2, the PyG family; WITH_CUDA, USE_CUDA:
# others) would build a CPU-only wheel. GPU variants get the switches on; [project] env and
# cuda_env override them. CPU variants get none: "0" would read as on where only presence counts.
GPU_SWITCHES = {
    "cuda": (("FORCE_CUDA", "1"), ("WITH_CUDA", "1"), ("USE_CUDA", "1")),
    "rocm": (("FORCE_CUDA", "1"), ("WITH_CUDA", "1"), ("USE_ROCM", "1")),
}


@dataclass(frozen=True)
class ByoProject:
    root: Path
    import_name: str
    env: tuple[tuple[str, str], ...]
    cpu_env: tuple[tuple[str, str], ...]
    cuda_env: tuple[tuple[str, str], ...]
    build_system: BuildSystem = LEGACY
    vcs: VcsVersion | None = None  # the version the git checkout gives, where the build reads git

    def files(self) -> list[Path]:
        """What a build copies (outputs, VCS and caches left out), inside symlinks followed; what
        would take a file from outside the project is refused (support/project_copy.py)."""
        if not self.root.is_dir():
            return []  # nothing there to build from (load_byo refuses such a project first)
        return project_files(self.root, ignore=shutil.ignore_patterns(*IGNORED))


def load_byo(config: ProjectConfig, matrix_file: str, run_probe: ProbeRunner) -> ByoProject:
    """The project as matrix.toml names it. ``run_probe`` computes the version of a project whose
    build reads git (project/vcs_version.py)."""
    if not ((config.path / "setup.py").is_file() or (config.path / "pyproject.toml").is_file()):
        raise ConfigError(
            f"{config.path} has neither setup.py nor pyproject.toml",
            file=matrix_file,
            key="project.path",
            hint="point it at a torch extension project",
        )
    if config.import_name is None:
        raise ConfigError(
            "a bring-your-own project needs the module its wheel provides",
            file=matrix_file,
            key="project.import_name",
            hint='e.g. import_name = "my_ext" (the smoke test imports it)',
        )
    # refused now, before any engine
    project_files(config.path, ignore=shutil.ignore_patterns(*IGNORED))
    system = read_build_system(config.path)
    return ByoProject(
        config.path,
        config.import_name,
        config.env,
        config.cpu_env,
        config.cuda_env,
        system,
        vcs_version(config.path, system, run_probe),
    )


@dataclass(frozen=True)
class ByoStage(CompiledStage):
    project: ByoProject
    variant: Variant
    torch_requirement: TorchRequirement = "pinned"  # [build] torch_requirement
    # matrix.toml [test], else the project's cibuildwheel test options
    tests: ProjectTests | None = None

    @property
    def package(self) -> str:
        return self.project.import_name

    @property
    def checks(self) -> WheelChecks:
        return WheelChecks(self.project.root, self.project.import_name, tests=self.tests)

    @property
    def kind(self) -> KindFacts:
        return BRING_YOUR_OWN

    @property
    def source_root(self) -> Path:
        return self.project.root

    @property
    def build_system(self) -> BuildSystem:
        return self.project.build_system

    def build_env(self) -> dict[str, str]:
        """GPU_SWITCHES for GPU variants and the git version, then [project] env, then cpu_env or cuda_env."""
        kind = self.variant.key.backend.kind
        device = self.project.cuda_env if kind in ("cuda", "rocm") else self.project.cpu_env
        vcs = self.project.vcs.build_env() if self.project.vcs else {}
        return {**dict(GPU_SWITCHES.get(kind, ())), **vcs, **dict(self.project.env), **dict(device)}

    @property
    def requires_torch(self) -> str | None:
        """The torch requirement the finished wheel gets; None (unpinned): as the project declares it."""
        return None if self.torch_requirement == "unpinned" else torch_requires_dist(self.variant)

    def key_material(self) -> object:
        return [
            tree_digest(self.project.root, self.project.files()),
            self.build_env(),
            self.checks.key_material(),
            self.requires_torch,
            self.project.vcs and self.project.vcs.version,
        ]

    def write(self, dest: Path) -> None:
        if dest.exists():
            shutil.rmtree(dest)
        # Inside symlinks as what they point to (the stage is self-contained); the others refused.
        copy_project_tree(self.project.root, ".", dest, ignore=shutil.ignore_patterns(*IGNORED))
        for name, text in (
            self.project.vcs.staged_files(self.package) if self.project.vcs else {}
        ).items():
            (dest / name).write_text(text)

    def finish(self, wheel: Path, dest_dir: Path) -> Path:
        return set_local_version(
            wheel, self.variant.local_version, dest_dir, requires_torch=self.requires_torch
        )


def plan_byo_stage(
    project: ByoProject,
    variant: Variant,
    *,
    tests: ProjectTests | None = None,
    torch_requirement: TorchRequirement = "pinned",
) -> ByoStage:
    """The variant's stage; what the project's own files tell now about a build that cannot give
    the wheel the plan asks for is a one-line error before anything is downloaded or compiled."""
    system = project.build_system
    if variant.key.python == "abi3" and system.abi3 == "no":
        raise ConfigError(
            f"{variant.id}: [matrix] python asks for one abi3 wheel, and {project.root} does not build "
            f"abi3 wheels ({system.family} build backend, {system.declared_in})",
            key="matrix.python",
            hint=f'{system.abi3_fix()}; or list CPython versions, e.g. python = ["3.11"]',
        )
    if tests is None:  # matrix.toml's [test] wins; else the project's own cibuildwheel test options
        tests = project_table_tests(
            project.root, identifier_for(variant.key.python, variant.key.arch)
        )
    return ByoStage(project, variant, torch_requirement, tests)


def set_local_version(
    wheel: Path, label: str, dest_dir: Path, *, requires_torch: str | None = None
) -> Path:
    """A copy of ``wheel`` whose version carries ``+label`` (METADATA, .dist-info name, RECORD
    and file name rewritten together, so installers see one consistent version); a version that has
    a local label already (setuptools-scm's ``+g9e9fa53`` on an untagged commit) keeps it, the
    variant's label after it: ``0.9.3.dev12+g9e9fa53.cputorch2.13``. With ``requires_torch``, every
    Requires-Dist on torch becomes that (added where there is none)."""
    _, version, _, _ = parse_wheel_filename(wheel.name)
    return rewrite_wheel(
        wheel, dest_dir, version=merge_local_label(version, label), torch_requirement=requires_torch
    )


def merge_local_label(version: Version, label: str) -> Version:
    """``version`` with ``label`` as the last part of its local label."""
    return Version(
        f"{version.public}+{version.local}.{label}" if version.local else f"{version}+{label}"
    )
