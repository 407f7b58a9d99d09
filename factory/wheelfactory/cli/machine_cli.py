"""The ``wheelfactory`` commands about the machine builds run on: its Docker engine (``engine
start``), the Debian base images made here (``base-image``), the disk the wheelhouse holds
(``gc``), and ROCm device code compiled where no ROCm torch is reachable (``rocm-check``).
cli/main.py adds them to the command line."""

from __future__ import annotations

import time
from pathlib import Path

import click

import wheelfactory
from wheelfactory.cli.options import COMPAT_OPTION, MATRIX_OPTION, OUT_OPTION
from wheelfactory.cli.render import EventRenderer, console
from wheelfactory.errors import BuildFailed
from wheelfactory.images.base_image import SUITES
from wheelfactory.images.emulation import DEBIAN_ARCH


@click.group("engine")
def engine_group() -> None:
    """The Docker engine that `wheelfactory build` builds in."""


@engine_group.command("start")
@click.option(
    "--no-install",
    is_flag=True,
    help="Only start dockerd; never install packages (default: as root with apt-get, install docker.io "
    "and debootstrap where missing).",
)
@click.option(
    "--log",
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
    multiple=True,
    type=click.Choice(sorted(DEBIAN_ARCH)),
    help="Also make this arch's code run here, through QEMU user emulation where it is not the "
    "machine's own (as root: mounts binfmt_misc, installs qemu-user-static and binfmt-support, from "
    "the release's backports where its QEMU is older than 10). Repeatable.",
)
def engine_start(no_install: bool, log: Path, wait_s: int, emulate: tuple[str, ...]) -> None:
    """Make a Docker engine answer here: install Debian's docker.io (as root, with apt-get) and start dockerd
    without a bridge network, as CI runs it. Nothing is done when an engine already answers."""
    started = time.monotonic()
    engine, done = wheelfactory.start_docker(
        install=not no_install,
        log=log,
        wait_s=wait_s,
        emulate=emulate,
        say=click.echo,
        warn=lambda warning: click.echo(f"engine: {warning}", err=True),
    )
    said = "; ".join(done) or "nothing to do"
    click.echo(f"engine: {engine} ready ({said}; {time.monotonic() - started:.1f} s)")


# [rocm-check] (factory/wheelfactory/verify/rocm_device_code.py): hipify + hipcc for the gfx targets, where no ROCm torch is reachable.
@click.command("rocm-check")
@MATRIX_OPTION
@COMPAT_OPTION
@OUT_OPTION
@click.option(
    "--gfx",
    multiple=True,
    metavar="TARGET",
    help="gfx targets (default: [rocm] gfx_targets of the matrix, else gfx90a and gfx940).",
)
def rocm_check_command(
    matrix_path: Path, compat_path: Path | None, out_dir: Path, gfx: tuple[str, ...]
) -> None:
    """Hipify the kernel's CUDA sources and compile its device code with hipcc for gfx targets."""
    out_console = console()
    done = wheelfactory.rocm_check(
        matrix_path, compat=compat_path, out=out_dir, gfx=gfx, progress=EventRenderer(out_console)
    )
    result = done.check
    out_console.print(
        f"{done.kernel} device code, hipified: {result.describe()} (log: {done.log})", markup=False
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
@click.option("--mirror", help="Debian mirror (default: the one the host's apt sources use).")
@click.option("--tag", help="Image name (default: wheelfactory/base:<suite>-<content hash>).")
@click.option(
    "--arch",
    type=click.Choice(sorted(DEBIAN_ARCH)),
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
    err = console(stderr=True)
    image = wheelfactory.make_base_image(
        suite,
        mirror=mirror,
        tag=tag,
        arch=arch,
        cache_dir=cache_dir,
        idle=idle_priority,
        progress=EventRenderer(err),
    )
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
    type=click.Path(path_type=Path, file_okay=False),
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
    done = wheelfactory.collect_garbage(
        wheelhouse, matrix=matrix_path, unused_days=unused_days, dry_run=dry_run
    )
    for item in done.removed:
        click.echo(
            f"{'would remove' if dry_run else 'removed'} {item.path} ({item.bytes / 1e6:.0f} MB)"
        )
    total = sum(item.bytes for item in done.removed) / 1e9
    click.echo(
        f"{len(done.environments)} prepared environment(s), {len(done.wheel_sets)} wheel set(s), "
        f"{len(done.host_tools)} host tool environment(s), {total:.2f} GB"
        f"{' (dry run)' if dry_run else ''} under {done.wheelhouse}"
    )
