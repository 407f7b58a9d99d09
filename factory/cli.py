"""The ``wheelfactory`` command line. Fatal errors are caught once, in ``main``."""

from __future__ import annotations

import sys
from collections.abc import Callable
from functools import partial
from pathlib import Path

import click

from . import __version__
from .baseimage import DEFAULT_MIRROR, SUITES  # [base-image]
from .compat import load_table
from .errors import ConfigError, WheelfactoryError
from .matrix import load_matrix
from .plan import Plan, expand, parse_shard
from .render import console, github_json, plan_json, print_plan

MATRIX_OPTION = click.option(
    "-m", "--matrix", "matrix_path", type=click.Path(path_type=Path, dir_okay=False),
    default=Path("matrix.toml"), show_default=True, help="The matrix file.")
COMPAT_OPTION = click.option(
    "--compat", "compat_path", type=click.Path(path_type=Path, dir_okay=False), default=None,
    help="A compatibility table to use instead of the bundled one (same schema).")


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="wheelfactory")
def cli() -> None:
    """Build one repaired, verified wheel per torch x backend x ABI variant of a kernel project."""


def _load_plan(matrix_path: Path, compat_path: Path | None) -> Plan:
    table = load_table(compat_path)
    matrix = load_matrix(matrix_path, table, display=str(matrix_path))
    return expand(matrix, table)


@cli.command()
@MATRIX_OPTION
@COMPAT_OPTION
@click.option("--format", "fmt", type=click.Choice(["table", "json", "github"]), default="table",
              show_default=True, help="table for people, json per the contract, github for strategy.matrix.")
@click.option("--shard", "shard", metavar="I/N", default=None,
              help="Only shard I of N (deterministic, disjoint; together the shards cover the plan).")
@click.option("--explain", is_flag=True, help="Also list the pruned combinations and why.")
def plan(matrix_path: Path, compat_path: Path | None, fmt: str, shard: str | None, explain: bool) -> None:
    """Expand matrix.toml into variants, pruning what cannot exist."""
    shard_spec = parse_shard(shard) if shard else None
    result = _load_plan(matrix_path, compat_path)
    if shard_spec:
        result = result.shard(*shard_spec)
    if fmt == "json":
        click.echo(plan_json(result))
    elif fmt == "github":
        click.echo(github_json(result))
    else:
        title = f"Plan for {matrix_path}" + (f" (shard {shard})" if shard else "")
        print_plan(console(), result, explain=explain, title=title)


@cli.command()
@MATRIX_OPTION
@COMPAT_OPTION
@click.option("-o", "--out", "out_dir", type=click.Path(path_type=Path, file_okay=False), default=None,
              help="Output directory (default: [build].out of the matrix, i.e. dist/).")
@click.option("--engine", type=click.Choice(["auto", "docker", "host"]), default=None,
              help="docker: every variant in its image. host: the one variant the torch of --python is. "
                   "auto (default: the matrix's [build].engine): docker when an engine answers, else host.")
@click.option("--python", "python", default=sys.executable, show_default="this interpreter",
              help="Interpreter whose torch the host engine builds for.")
@click.option("--only", multiple=True, metavar="PATTERN", help="Only variants whose id matches (fnmatch).")
@click.option("-j", "--jobs", type=click.IntRange(min=0), default=None, help="Parallel builds (0: automatic).")
def build(matrix_path: Path, compat_path: Path | None, out_dir: Path | None, engine: str | None, python: str,
          only: tuple[str, ...], jobs: int | None) -> None:
    """Build, repair and check one wheel per variant into the output directory."""
    from .build import default_jobs, run_matrix
    from .byo import ByoStage, load_byo
    from .engines.choose import choose_engine
    from .kernel import is_native_project, load_kernel
    from .render import BuildView, print_build_summary
    from .stage import Stage, plan_stage
    from .variant import Variant

    table = load_table(compat_path)
    matrix = load_matrix(matrix_path, table, display=str(matrix_path))
    out = (out_dir or (matrix_path.resolve().parent / matrix.build.out)).resolve()
    project = matrix.project
    stage_for: Callable[[Variant], Stage]
    native = project.kind == "native" or (project.kind == "auto" and is_native_project(project.path))
    if native:
        kernel = load_kernel(project.path)
        stage_for = partial(plan_stage, kernel)
    else:
        stage_for = partial(ByoStage, load_byo(project, str(matrix_path)))
    out_console = console()
    chosen = choose_engine(matrix, table, choice=engine or matrix.build.engine, python=python, out=out, only=only,
                           native=native, console=out_console, matrix_file=str(matrix_path))
    builder, variants = chosen.engine, chosen.variants
    out_console.print(chosen.summary, markup=False)
    with BuildView(out_console, [v.id for v in variants]) as view:
        outcomes = run_matrix(stage_for, variants, builder, out, observe=view,
                              jobs=jobs or matrix.build.jobs or default_jobs(builder.name))
    print_build_summary(out_console, outcomes, str(out))
    failed = sum(o.entry.status == "failed" for o in outcomes)
    if failed:
        raise BuildFailed(f"{failed} of {len(outcomes)} variant(s) failed; see the logs above")


# [base-image] (factory/baseimage.py): an offline manylinux-layout base image from Debian packages.
@cli.command("base-image")
@click.option("--suite", type=click.Choice(list(SUITES)), default="bookworm", show_default=True,
              help="Debian release: " + "; ".join(f"{s.name} glibc {s.glibc}, Python {s.python}"
                                                  for s in SUITES.values()) + ".")
@click.option("--mirror", default=DEFAULT_MIRROR, show_default=True, help="Debian mirror.")
@click.option("--tag", default=None, help="Image name (default: wheelfactory/base:<suite>-<content hash>).")
@click.option("--cache-dir", type=click.Path(path_type=Path, file_okay=False), default=Path(".cache/wheelfactory"),
              show_default=True, help="Where the temporary rootfs and the logs go.")
def base_image(suite: str, mirror: str, tag: str | None, cache_dir: Path) -> None:
    """Make (or reuse) a Debian-based image with the manylinux layout, without a container registry."""
    from .baseimage import BaseImageSpec, ensure_base_image, parse_suite
    from .containers import docker_client
    from .errors import ImageBuildFailed
    from .progress import ConsoleProgress

    err = console(stderr=True)
    client = docker_client(hint="start one (e.g. .ci/start-docker)")
    spec = BaseImageSpec(parse_suite(suite), mirror, tag)
    try:
        image = ensure_base_image(client, spec, cache_dir=cache_dir.resolve(), progress=ConsoleProgress(err))
    except ImageBuildFailed as exc:
        if exc.tail:
            err.print(exc.tail, markup=False, highlight=False)
        raise
    steps = ", ".join(f"{name} {seconds:.1f} s" for name, seconds in image.timings) or "reused"
    made = image.suite
    err.print(f"{image.tag}: Debian {made.name}, glibc {made.glibc} (C++ extensions {made.manylinux_cxx}, "
              f"any wheel at most {made.manylinux_max}), /opt/python/{made.abi}-{made.abi}; {steps}", markup=False)
    click.echo(f"{image.tag} {image.id}")

class BuildFailed(WheelfactoryError):
    exit_code = 1


def main(argv: list[str] | None = None) -> None:
    """Entry point: run the CLI; turn known failures into one line on stderr and an exit code."""
    try:
        cli.main(args=argv, prog_name="wheelfactory", standalone_mode=False)
    except WheelfactoryError as exc:
        label = "config error" if isinstance(exc, ConfigError) else "error"
        click.echo(f"wheelfactory: {label}: {exc}", err=True)
        sys.exit(exc.exit_code)
    except click.exceptions.Abort:
        click.echo("wheelfactory: interrupted", err=True)
        sys.exit(130)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    sys.exit(0)
