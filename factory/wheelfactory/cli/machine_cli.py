"""The ``wheelfactory`` commands about the machine builds run on: its Docker engine (``engine
start``), the Debian base images made here (``base-image``), the disk the wheelhouse holds
(``gc``), and ROCm device code compiled where no ROCm torch is reachable (``rocm-check``).
cli/main.py adds them to the command line."""

from __future__ import annotations

import time
from pathlib import Path

import click

from wheelfactory.cli.options import COMPAT_OPTION, MATRIX_OPTION, OUT_OPTION
from wheelfactory.cli.render import console
from wheelfactory.errors import BuildFailed
from wheelfactory.images.base_image import SUITES
from wheelfactory.images.emulation import DEBIAN_ARCH
from wheelfactory.plan.compat import load_table
from wheelfactory.plan.matrix import load_matrix


@click.group("engine")
def engine_group() -> None:
    """The Docker engine that `wheelfactory build` builds in."""


@engine_group.command("start")
@click.option(
    "--no-install",
    "no_install",
    is_flag=True,
    help="Only start dockerd; never install packages (default: as root with apt-get, install docker.io "
    "and debootstrap where missing).",
)
@click.option(
    "--log",
    "log",
    type=click.Path(path_type=Path, dir_okay=False),
    envvar="DOCKERD_LOG",
    default=Path("/tmp/dockerd.log"),
    show_default=True,
    help="dockerd's output (env DOCKERD_LOG).",
)
@click.option(
    "--wait",
    "wait_s",
    type=click.IntRange(min=1),
    envvar="DOCKERD_WAIT",
    default=60,
    show_default=True,
    help="Seconds to wait for the engine to answer (env DOCKERD_WAIT).",
)
@click.option(
    "--emulate",
    "emulate",
    multiple=True,
    type=click.Choice(sorted(DEBIAN_ARCH)),
    help="Also make this arch's code run here, through QEMU user emulation where it is not the "
    "machine's own (as root: mounts binfmt_misc, installs qemu-user-static and binfmt-support, from "
    "the release's backports where its QEMU is older than 10). Repeatable.",
)
def engine_start(no_install: bool, log: Path, wait_s: int, emulate: tuple[str, ...]) -> None:
    """Make a Docker engine answer here: install Debian's docker.io (as root, with apt-get) and start dockerd
    without a bridge network, as CI runs it. Nothing is done when an engine already answers."""
    from wheelfactory.engines.dockerd import set_up_emulation, start_engine
    from wheelfactory.errors import DockerUnavailable, EnvironmentProblem

    started = time.monotonic()
    result = start_engine(install=not no_install, log=log, wait_s=wait_s, say=click.echo)
    if not result.ready:
        raise DockerUnavailable(result.detail)
    if result.warning:
        click.echo(f"engine: {result.warning}", err=True)
    done = list(result.done)
    if emulate:
        emulation = set_up_emulation(emulate, install=not no_install, say=click.echo)
        done.extend(emulation.done)
        if not emulation.ready:
            first = next(s for s in emulation.support if not s.runs)
            raise EnvironmentProblem(
                f"{first.arch} code cannot run here: {first.how}; fix: {first.fix}"
            )
    said = "; ".join(done) or "nothing to do"
    click.echo(f"engine: {result.detail} ready ({said}; {time.monotonic() - started:.1f} s)")


# [rocm-check] (factory/wheelfactory/verify/rocm_device_code.py): hipify + hipcc for the gfx targets, where no ROCm torch is reachable.
# MI200 and the newest Instinct target Debian's hipcc 5.2 (clang 15) knows
DEFAULT_GFX = ("gfx90a", "gfx940")


@click.command("rocm-check")
@MATRIX_OPTION
@COMPAT_OPTION
@OUT_OPTION
@click.option(
    "--gfx",
    "gfx",
    multiple=True,
    metavar="TARGET",
    help="gfx targets (default: [rocm] gfx_targets of the matrix, else gfx90a and gfx940).",
)
def rocm_check_command(
    matrix_path: Path, compat_path: Path | None, out_dir: Path, gfx: tuple[str, ...]
) -> None:
    """Hipify the kernel's CUDA sources and compile its device code with hipcc for gfx targets."""
    from wheelfactory.cli.render import EventRenderer
    from wheelfactory.engines.choose import debian_bases
    from wheelfactory.images.containers import docker_client
    from wheelfactory.project.kernel_toml import load_kernel
    from wheelfactory.verify.rocm_device_code import check_device_code

    table = load_table(compat_path)
    matrix = load_matrix(matrix_path, table, display=str(matrix_path))
    kernel = load_kernel(matrix.project.path)
    targets = gfx or matrix.rocm.gfx_targets or DEFAULT_GFX
    client = docker_client()
    out_console = console()
    base = (
        debian_bases(client, matrix, EventRenderer(out_console))(matrix.build.debian_base, "x86_64")
        if matrix.build.debian_base
        else matrix.build.base_image("x86_64")
    )
    out = out_dir.resolve()
    log = out / "rocm-check.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    result = check_device_code(
        client, base, kernel, targets, work=out / ".work" / "rocm-check", log=log
    )
    out_console.print(
        f"{kernel.name} device code, hipified: {result.describe()} (log: {log})", markup=False
    )
    out_console.print(
        "Verified: the hipified kernels compile for these targets. Not verified here: linking "
        "against a ROCm torch (none is reachable) and running.",
        markup=False,
    )
    if not result.ok:
        raise BuildFailed("the device code does not compile for every target")


# [base-image] (factory/wheelfactory/images/base_image.py): an offline manylinux-layout base image from Debian packages.
@click.command("base-image")
@click.option(
    "--suite",
    type=click.Choice(list(SUITES)),
    default="bookworm",
    show_default=True,
    help="Debian release: "
    + "; ".join(f"{s.name} glibc {s.glibc}, Python {s.python}" for s in SUITES.values())
    + ".",
)
@click.option(
    "--mirror", default=None, help="Debian mirror (default: the one the host's apt sources use)."
)
@click.option(
    "--tag", default=None, help="Image name (default: wheelfactory/base:<suite>-<content hash>)."
)
@click.option(
    "--arch",
    type=click.Choice(sorted(DEBIAN_ARCH)),
    default=None,
    help="The image's arch (default: this machine's). Another arch needs QEMU user emulation "
    "(wheelfactory engine start registers it); its image also gets cross compilers that "
    "run on this machine.",
)
@click.option(
    "--cache-dir",
    type=click.Path(path_type=Path, file_okay=False),
    default=Path(".cache/wheelfactory"),
    show_default=True,
    help="Where the temporary rootfs and the logs go.",
)
@click.option(
    "--idle-priority",
    is_flag=True,
    default=False,
    help="Use only the CPU other work leaves (debootstrap at nice 19, the apt layer at the engine's "
    "lowest CPU weight): for a base made in the background beside builds or tests.",
)
def base_image(
    suite: str,
    mirror: str | None,
    tag: str | None,
    arch: str | None,
    cache_dir: Path,
    idle_priority: bool,
) -> None:
    """Make (or reuse) a Debian-based image with the manylinux layout, without a container registry."""
    from wheelfactory.cli.render import EventRenderer
    from wheelfactory.errors import ImageBuildFailed
    from wheelfactory.images.base_image import base_spec, ensure_base_image, parse_suite
    from wheelfactory.images.containers import docker_client
    from wheelfactory.images.emulation import host_arch
    from wheelfactory.plan.indexes import debian_mirror

    err = console(stderr=True)
    client = docker_client(hint="start one (e.g. .ci/start-docker)")
    spec = base_spec(parse_suite(suite), debian_mirror(mirror), arch or host_arch(), tag=tag)
    try:
        image = ensure_base_image(
            client,
            spec,
            cache_dir=cache_dir.resolve(),
            progress=EventRenderer(err),
            idle=idle_priority,
        )
    except ImageBuildFailed as exc:
        if exc.tail:
            err.print(exc.tail, markup=False, highlight=False)
        raise
    steps = ", ".join(f"{name} {seconds:.1f} s" for name, seconds in image.timings) or "reused"
    made = image.suite
    err.print(
        f"{image.tag}: Debian {made.name}, glibc {made.glibc} (C++ extensions {made.manylinux_cxx}, "
        f"any wheel at most {made.manylinux_max}), /opt/python/{made.abi}-{made.abi}; {steps}",
        markup=False,
    )
    click.echo(f"{image.tag} {image.id}")


# [gc] (factory/wheelfactory/engines/prepared_env.py, wheelhouse.py): the disk the Docker engine's wheelhouse holds.
@click.command("gc")
@click.option(
    "--wheelhouse",
    "wheelhouse",
    type=click.Path(path_type=Path, file_okay=False),
    default=None,
    help="The wheelhouse to collect (default: [build] wheelhouse of -m when that file exists, else "
    "~/.cache/wheelfactory/wheelhouse).",
)
@MATRIX_OPTION
@click.option(
    "--unused-days",
    type=click.FloatRange(min=0),
    default=7.0,
    show_default=True,
    help="Remove what no build used for this many days (0: everything).",
)
@click.option("--dry-run", is_flag=True, help="Only list what would be removed.")
def gc_command(
    wheelhouse: Path | None, matrix_path: Path, unused_days: float, dry_run: bool
) -> None:
    """Remove the prepared build environments (torch and build tools, made once per image and
    wheelhouse content), the wheel sets (the downloads they were made from) and the host's tool
    environments (projects' build systems for the host engine) that no build used lately, and what
    a killed run left half-made. Run it when no build is running: a build
    downloads and re-makes what it needs."""
    from wheelfactory.engines.choose import DEFAULT_CACHE
    from wheelfactory.engines.prepared_env import collect_garbage
    from wheelfactory.engines.wheelhouse import Wheelhouse
    from wheelfactory.support.host_env import collect_garbage as collect_host_envs

    if wheelhouse is None:
        configured = (
            load_matrix(matrix_path, load_table(), display=str(matrix_path)).build.wheelhouse
            if matrix_path.is_file()
            else None
        )
        wheelhouse = configured or DEFAULT_CACHE / "wheelhouse"
    unused_for_s = unused_days * 86400
    envs = collect_garbage(wheelhouse / "envs", unused_for_s=unused_for_s, dry_run=dry_run)
    sets = Wheelhouse(wheelhouse).collect_garbage(unused_for_s=unused_for_s, dry_run=dry_run)
    tools = collect_host_envs(wheelhouse / "host-tools", unused_for_s=unused_for_s, dry_run=dry_run)
    for item in (*envs, *sets, *tools):
        click.echo(
            f"{'would remove' if dry_run else 'removed'} {item.path} ({item.bytes / 1e6:.0f} MB)"
        )
    total = sum(item.bytes for item in (*envs, *sets, *tools)) / 1e9
    click.echo(
        f"{len(envs)} prepared environment(s), {len(sets)} wheel set(s), {len(tools)} host tool "
        f"environment(s), {total:.2f} GB{' (dry run)' if dry_run else ''} under {wheelhouse}"
    )
