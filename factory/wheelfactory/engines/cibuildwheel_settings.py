"""What cibuildwheel is told for one variant of the Docker engine (engines/docker.py): the
CIBW_* settings (its container's mounts and limits, the build's environment and PATH, the steps
before the build, the frontend, the repair), with what the project's own cibuildwheel table adds
once decided (project/cibw_table.py) and the -march=native shims (engines/cpu_baseline.py) in
front of the compile cache's. Pure: the engine runs cibuildwheel with them."""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from packaging.utils import canonicalize_name

from wheelfactory.engines import cpu_baseline
from wheelfactory.engines.compile_cache import SETUP_SCRIPT, STATS, Wiring
from wheelfactory.engines.compile_flags import with_compile_flags
from wheelfactory.engines.prepared_env import WHEELHOUSE_MOUNT, PreparedEnv, installed_releases
from wheelfactory.errors import DockerBuildError
from wheelfactory.images.dockerfiles import ImageRef
from wheelfactory.plan.identity import Variant
from wheelfactory.project.cibw_table import CibwDecision, CibwTable, decide, read_cibw_table
from wheelfactory.project.keys import DEFAULT_SOURCE_DATE_EPOCH
from wheelfactory.project.stage import Stage
from wheelfactory.support.timeline import marker_command
from wheelfactory.verify.repair import AUDITWHEEL_EXCLUDES


@dataclass(frozen=True)
class CibuildwheelSettings:
    """The run's settings every variant's cibuildwheel call shares (DockerOptions' part of them)."""

    compile_jobs: int  # MAX_JOBS in each build
    labels: Mapping[str, str]  # of every container it starts
    container_memory: int | None = None  # docker --memory of each build container

    def settings(
        self,
        variant: Variant,
        image: ImageRef,
        python: str,
        wheelhouse: Path,
        project_env: dict[str, str],
        cache: Wiring | None = None,
        envs: tuple[PreparedEnv, ...] = (),
        epoch: int = DEFAULT_SOURCE_DATE_EPOCH,
        cuda_home: str | None = None,
        cross_bin: str | None = None,
        table: CibwDecision | None = None,
        flags_dir: Path | None = None,
    ) -> dict[str, str]:
        """cibuildwheel's settings for one variant. ``envs``: the prepared environments (tools
        first), mounted read-only and put on PYTHONPATH and PATH; the interpreter itself stays the
        image's /opt/python one, as cibuildwheel checks. ``cross_bin``: cross compilers named cc,
        c++, gcc, g++ and <triplet>-gcc/g++ (what torch, CMake and Debian's sysconfig call), put
        before the image's own on PATH; the compile cache's shims, first, resolve to them.
        ``table``: what the project's own cibuildwheel options add (project/cibw_table.py): its
        environment before the factory's (which wins), its steps before the factory's, its
        frontend args after --no-isolation, its auditwheel flags beside the factory's excludes.
        ``flags_dir``: the -march=native shims' setup (engines/cpu_baseline.py), mounted; they come
        first on PATH, in front of the compile cache's."""
        table = table or CibwDecision(CibwTable("", "", ()), ())
        excludes = " ".join(
            [
                *(
                    f"--exclude {shlex.quote(p)}"
                    for p in (*AUDITWHEEL_EXCLUDES, *table.repair_excludes)
                ),
                *([f"--plat {shlex.quote(table.repair_plat)}"] if table.repair_plat else []),
            ]
        )
        create_args = [
            "--network none",
            f"-v {wheelhouse}:{WHEELHOUSE_MOUNT}:ro",
            *(f"-v {env.path}:{env.mount}:ro" for env in envs),
            *(f"--label {k}={v}" for k, v in self.labels.items()),
        ]
        # swap included: a build over its share is stopped, not swapped
        if self.container_memory is not None:
            create_args.append(
                f"--memory {self.container_memory} --memory-swap {self.container_memory}"
            )
        # SOURCE_DATE_EPOCH: the wheel's file times (setuptools' bdist_wheel and auditwheel's repack
        # both read it). The compile itself is path-independent here: cibuildwheel builds in
        # /project whatever the host's directory is.
        if cache is not None:
            # One cache for every variant and run: an edit recompiles only what it touched, and
            # variants with the same torch share object files.
            create_args.extend(f"-v {host}:{inside}" for host, inside in cache.mounts)
        if flags_dir is not None:
            create_args.append(f"-v {flags_dir}:{cpu_baseline.NOTES_MOUNT}")
        build_env = self.environment(variant, project_env, cache, envs, epoch, cuda_home)
        tag = python.split("-")[0]
        path = ":".join(
            [
                *([cpu_baseline.FLAG_SHIMS] if flags_dir else []),
                *([cache.path_prefix] if cache else []),
                *([cross_bin] if cross_bin else []),
                *(f"{env.mount}/bin" for env in envs),
                *([f"{cuda_home}/bin"] if cuda_home else []),
                "$PATH",
            ]
        )
        return {
            "CIBW_BUILD": f"{tag}-manylinux_{variant.key.arch}",
            "CIBW_ARCHS": variant.key.arch,
            f"CIBW_MANYLINUX_{variant.key.arch.upper()}_IMAGE": image.id,
            "CIBW_CONTAINER_ENGINE": "docker; create_args: " + " ".join(create_args),
            "CIBW_ENVIRONMENT": " ".join(
                [
                    *(assignment for _, assignment in table.environment),
                    *(f"{k}={shlex.quote(v)}" for k, v in build_env.items()),
                    *([f'PATH="{path}"'] if path != "$PATH" else []),
                ]
            ),
            # Nothing to install: torch and the tools are mounted. What is left is the project's
            # own steps, the compile cache's shims, and the marker where the compile starts.
            "CIBW_BEFORE_BUILD": " && ".join(
                [
                    *table.before_build,
                    *([f"sh {STATS}/{SETUP_SCRIPT}"] if cache else []),
                    *([f"sh {cpu_baseline.NOTES_MOUNT}/{cpu_baseline.SETUP}"] if flags_dir else []),
                    marker_command("compile"),
                ]
            ),
            "CIBW_BUILD_FRONTEND": "build; args: "
            + shlex.join(["--no-isolation", *table.frontend_args]),
            **({"CIBW_BEFORE_ALL": " && ".join(table.before_all)} if table.before_all else {}),
            **(
                {"CIBW_ENVIRONMENT_PASS_LINUX": " ".join(table.environment_pass)}
                if table.environment_pass
                else {}
            ),
            **({"CIBW_CONFIG_SETTINGS": table.config_settings} if table.config_settings else {}),
            # The repair step is the first thing cibuildwheel runs after the build, in the same
            # container: the cache's statistics are saved there.
            "CIBW_REPAIR_WHEEL_COMMAND": f"{marker_command('repair')}; "
            + (f"{cache.save_stats}; " if cache and cache.save_stats else "")
            + f"auditwheel repair {excludes} -w {{dest_dir}} {{wheel}}",
            "CIBW_AUDIT_COMMAND": "",  # see the module docstring: abi3audit runs on the host
            "CIBW_BUILD_VERBOSITY": "1",
        }

    def environment(
        self,
        variant: Variant,
        project_env: Mapping[str, str],
        cache: Wiring | None = None,
        envs: tuple[PreparedEnv, ...] = (),
        epoch: int = DEFAULT_SOURCE_DATE_EPOCH,
        cuda_home: str | None = None,
    ) -> dict[str, str]:
        """The variables the factory sets in the build container (PATH aside): the offline pip,
        the job count, the file times, the prepared environments, the compile cache, the toolkit,
        the plan's and the project's settings and compile flags."""
        build_env = {
            "PIP_NO_INDEX": "1",
            "PIP_FIND_LINKS": WHEELHOUSE_MOUNT,
            "MAX_JOBS": str(self.compile_jobs),
            "SOURCE_DATE_EPOCH": str(epoch),
        }
        if envs:
            build_env["PYTHONPATH"] = ":".join(env.mount for env in envs)
        if cache is not None:
            build_env.update(cache.env)
        if variant.key.backend.kind == "cuda":
            build_env["TORCH_CUDA_ARCH_LIST"] = ";".join(variant.arch_list)
        if cuda_home is not None:
            # The toolkit as a developer's machine shows it, from the first hook `build` calls:
            # torch's CUDAExtension reads CUDA_HOME, CMake's enable_language(CUDA) reads CUDACXX.
            build_env.update(CUDA_HOME=cuda_home, CUDACXX=f"{cuda_home}/bin/nvcc")
        build_env.update(project_env)
        build_env.update(dict(variant.settings.env))
        return with_compile_flags(variant, build_env)


def decide_project_table(
    stage: Stage,
    source: Path,
    python: str,
    mounted: tuple[PreparedEnv, ...],
    factory_env: set[str],
    log: Path,
) -> CibwDecision | None:
    """The project's own cibuildwheel options for this build, each decided (honoured, replaced,
    refused) and said in the log; DockerBuildError naming a refused one and its fix."""
    variant = stage.variant
    table = read_cibw_table(source, f"{python.split('-')[0]}-manylinux_{variant.key.arch}")
    if table is None:
        return None
    have = {name for env in mounted for name, _ in installed_releases(env.path)}
    tests = stage.checks.tests
    decision = decide(
        table,
        has_tests=tests is not None and tests.declared_in != table.declared_in,
        installed=lambda name: canonicalize_name(name) in have,
        factory_env=frozenset(factory_env),
    )
    with log.open("a", encoding="utf-8") as sink:
        sink.writelines(f"# {line}\n" for line in decision.log_lines())
    if decision.refused:
        first = decision.refused[0]
        raise DockerBuildError(
            f"{variant.id}: {table.declared_in} {first.option}: refused: {first.note}"
        )
    return decision
