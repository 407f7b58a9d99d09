"""The ``wheelfactory`` commands that plan and build: ``plan``, ``build`` and ``new`` (a kernel
library to start from)."""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from pathlib import Path

import click

import wheelfactory
from wheelfactory.cli.options import COMPAT_OPTION, MATRIX_OPTION, ONLY_OPTION, SHARD_OPTION
from wheelfactory.cli.render import (
    BuildView,
    EventRenderer,
    console,
    github_json,
    plan_json,
    print_build_summary,
    print_plan,
)
from wheelfactory.engines.capacity import parse_size
from wheelfactory.errors import BuildFailed, UsageError, VariantsNotBuilt
from wheelfactory.plan.compat import load_table
from wheelfactory.plan.expand import parse_shard
from wheelfactory.project.scaffold import first_build_command, plan_scaffold, write_scaffold


@click.command()
@MATRIX_OPTION
@COMPAT_OPTION
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["table", "json", "github"]),
    default="table",
    show_default=True,
    help="table for people, json per the contract, github for strategy.matrix.",
)
@click.option(
    "--shard",
    metavar="I/N",
    help="Only shard I of N (deterministic, disjoint; together the shards cover the plan).",
)
@click.option("--explain", is_flag=True, help="Also list the pruned combinations and why.")
def plan(
    matrix_path: Path, compat_path: Path | None, fmt: str, shard: str | None, explain: bool
) -> None:
    """Expand matrix.toml into variants, pruning what cannot exist."""
    shard_spec = parse_shard(shard) if shard else None
    result = wheelfactory.load_plan(matrix_path, compat_path, shard=shard_spec)
    if fmt == "json":
        click.echo(plan_json(result))
    elif fmt == "github":
        click.echo(github_json(result))
    else:
        title = f"Plan for {matrix_path}" + (f" (shard {shard})" if shard else "")
        print_plan(console(), result, explain=explain, title=title)


@click.command()
@MATRIX_OPTION
@COMPAT_OPTION
@click.option(
    "-o",
    "--out",
    "out_dir",
    type=click.Path(path_type=Path, file_okay=False),
    help="Output directory (default: [build].out of the matrix, i.e. dist/).",
)
@click.option(
    "--engine",
    type=click.Choice(["auto", "docker", "host"]),
    help="docker: every variant in its image. host: the one variant the torch of --python is. "
    "auto (default: the matrix's [build].engine): docker when an engine answers, else host.",
)
@click.option(
    "--python",
    default=sys.executable,
    show_default="this interpreter",
    help="Interpreter whose torch the host engine builds for.",
)
@ONLY_OPTION
@SHARD_OPTION
@click.option(
    "-j",
    "--jobs",
    type=click.IntRange(min=0),
    help="Parallel builds (0 or unset: from cores and free memory).",
)
@click.option(
    "--max-memory",
    metavar="SIZE",
    help="Cap the run's memory, e.g. 16G: fewer parallel builds, each container limited to its share.",
)
@click.option(
    "--setup",
    is_flag=True,
    help="First make a Docker engine answer where this machine allows (as `wheelfactory engine start`: "
    "as root on Debian/Ubuntu it installs docker.io and starts dockerd); otherwise go on with "
    "what the host can build.",
)
@click.option("-q", "--quiet", is_flag=True, help="Only the summary and errors.")
@click.option(
    "-v", "--verbose", is_flag=True, help="Stream each variant's build log (the tools' own output)."
)
def build(
    matrix_path: Path,
    compat_path: Path | None,
    out_dir: Path | None,
    engine: str | None,
    python: str,
    only: tuple[str, ...],
    shard: str | None,
    jobs: int | None,
    max_memory: str | None,
    setup: bool,
    quiet: bool,
    verbose: bool,
) -> None:
    """Build, repair and check one wheel per variant into the output directory."""
    # here, not at the top, as the other function-level imports of cli/: they would load the
    # engines, images and ctypes for every command, `--help` too
    from wheelfactory.runner.cancel import CANCEL
    from wheelfactory.runner.session import prepare_build

    shard_spec = parse_shard(shard) if shard else None
    memory_cap = parse_size(max_memory) if max_memory else None
    if quiet and verbose:
        raise UsageError("-q and -v: choose one")
    out_console = console()
    shown = EventRenderer(out_console, quiet=quiet)  # the progress channel, rendered
    prepared = prepare_build(
        matrix_path,
        compat=compat_path,
        out=out_dir,
        engine=engine,
        python=python,
        only=only,
        shard=shard_spec,
        jobs=jobs,
        max_memory=memory_cap,
        setup=setup,
        progress=shown,
    )
    if not quiet:
        out_console.print(prepared.summary, markup=False)
    not_built = {n.variant.id: n.reason for n in prepared.not_built}
    with CANCEL.installed():  # Ctrl-C and SIGTERM cancel: children stopped, earlier results kept
        if prepared.build_ids:
            with BuildView(
                out_console,
                list(prepared.build_ids),
                title=prepared.title,
                not_built=not_built,
                quiet=quiet,
                verbose=verbose,
                out_dir=prepared.out,
            ) as view:
                shown.view = view
                result = prepared.run(progress=shown)
            shown.view = None
        else:
            result = prepared.run()
    outcomes = list(result.outcomes)
    print_build_summary(out_console, outcomes, str(result.out), not_built=result.not_built)
    if result.failed:
        raise BuildFailed(
            f"{len(result.failed)} of {len(outcomes)} variant(s) failed; see the logs above"
        )
    if result.not_built:
        first = result.not_built[0]
        raise VariantsNotBuilt(
            f"{len(result.not_built)} of {len(result.not_built) + len(outcomes)} selected "
            f"variant(s) not built here ({first.reason}); to build them: {first.action}"
        )


# [new] (factory/wheelfactory/project/scaffold.py): a kernel library to start from.
@click.command("new")
@click.argument("name")
@click.option(
    "--path",
    type=click.Path(path_type=Path),
    help="The directory to create (default: ./NAME); an existing one must be empty.",
)
def new_command(name: str, path: Path | None) -> None:
    """Start a kernel library NAME: kernel.toml, one op with CPU and CUDA sources, its reference op and
    sample inputs, tests run against every built wheel, and a matrix.toml."""
    scaffold = plan_scaffold(name)
    shown = path if path is not None else Path(name)
    write_scaffold(scaffold, shown)
    click.echo(
        f"{shown}: kernel library {name!r} ({len(scaffold.files)} files); next: "
        f"cd {shlex.quote(str(shown))} && wheelfactory plan && {_first_build_command()}"
    )


def _first_build_command() -> str:
    """What `new` says to run first, from this machine's facts (project/scaffold.py decides)."""
    # importlib.metadata is slow to import, for every command: here, as in build
    from importlib.metadata import PackageNotFoundError, version

    try:
        torch: str | None = version("torch")
    except PackageNotFoundError:
        torch = None
    compilers = (
        os.environ.get("CXX", "").split(" ")[0],
        "c++",
        "g++",
        "clang++",
    )  # as the host probe
    compiler = any(shutil.which(name) for name in compilers if name)
    releases = tuple(release.minor for release in load_table().releases)
    return first_build_command(torch, releases, compiler)


COMMANDS = (plan, build, new_command)
