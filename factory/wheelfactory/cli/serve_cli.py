"""The ``wheelfactory`` commands for those who install: ``serve`` (the index over HTTP, for pip
and uv) and ``which`` (the pip command for the variant that fits an environment's torch)."""

from __future__ import annotations

import signal
import sys
from pathlib import Path

import click

import wheelfactory
from wheelfactory.cli.options import OUT_OPTION
from wheelfactory.cli.render import console, plain
from wheelfactory.errors import UsageError


@click.command("which")
@click.option(
    "--index",
    metavar="URL|DIR",
    help="The served index's URL or a dist directory (default: http://127.0.0.1:8000).",
)
@click.option(
    "--python",
    default=sys.executable,
    show_default="this interpreter",
    help="The interpreter (with torch) you are installing into.",
)
@click.option("-q", "--quiet", is_flag=True, help="Print only the --index-url value.")
@click.option(
    "--project",
    metavar="NAME",
    help="The project the index must serve (default, with no --index: the kernel project this "
    "directory builds, if any).",
)
@click.option(
    "--gpu",
    "gpus",
    multiple=True,
    metavar="M.m",
    help="Choose for a GPU of this compute capability (9.0) instead of the machine's; repeat it for a "
    "cluster with several kinds (the parts of a [cuda] split_archs build).",
)
def which_command(
    index: str | None, python: str, quiet: bool, project: str | None, gpus: tuple[str, ...]
) -> None:
    """Print the pip command for the variant that fits an environment's torch, or say why none does."""
    code = wheelfactory.which(python, index, quiet=quiet, project=project, gpus=gpus)
    if code:
        sys.exit(code)


def _interrupted(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


@click.command("serve")
@OUT_OPTION
@click.option(
    "--root",
    type=click.Path(path_type=Path, file_okay=False),
    metavar="DIR",
    help="Serve this directory instead of DIST/index: an index `index` or a publish to a directory wrote.",
)
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="Address to bind (0.0.0.0: every interface).",
)
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=8000,
    show_default=True,
    help="0: any free port.",
)
@click.option(
    "--base-url",
    metavar="URL",
    help="The URL clients reach this server at, written into the served select.py "
    "(default: the bound address; with --host 0.0.0.0, select.py as `index` wrote it). "
    "The request's Host header is never used.",
)
def serve_command(
    out_dir: Path, root: Path | None, host: str, port: int, base_url: str | None
) -> None:
    """Serve dist/index (or --root DIR) over HTTP for pip and uv (until Ctrl-C).

    Hardened for untrusted clients: no directory listings, malformed paths get a 400, log lines
    have control characters escaped. Simple-API pages answer HTML or PEP 691 JSON by the Accept header."""
    if root is not None and (
        click.get_current_context().get_parameter_source("out_dir")
        is click.core.ParameterSource.COMMANDLINE
    ):
        raise UsageError("--root and -o both name what to serve: give one")
    err = console(stderr=True)

    def log(line: str) -> None:
        plain(err, line)

    serving = wheelfactory.open_index(
        out_dir, root=root, host=host, port=port, base_url=base_url, log_line=log
    )
    server = serving.server
    click.echo(f"serving {serving.root} at {server.url}/", err=False)
    for vid, project, index in serving.variants:
        click.echo(f"  {vid}: pip install --index-url {serving.base_url}/{index} {project}")
    sys.stdout.flush()
    # A terminated server stops like an interrupted one: its queued log lines are written first.
    signal.signal(signal.SIGTERM, _interrupted)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        click.echo("stopped", err=True)
    finally:
        server.log_line.flush()
        server.server_close()


COMMANDS = (which_command, serve_command)
