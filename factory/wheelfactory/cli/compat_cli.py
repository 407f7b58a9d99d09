"""``wheelfactory compat``: the compatibility table against what the package indexes publish."""

from __future__ import annotations

import sys
from pathlib import Path

import click

import wheelfactory


@click.group("compat")
def compat_group() -> None:
    """The compatibility table: what torch releases, builds and Pythons it knows."""


@compat_group.command("refresh")
@click.option(
    "--index",
    "index_urls",
    multiple=True,
    metavar="URL",
    help="An index root (PEP 691 JSON or PEP 503 HTML) whose torch page to read; repeatable. "
    "Default: the indexes the table names (pip's configured index; the pytorch alias where set).",
)
@click.option(
    "--compat",
    "compat_path",
    type=click.Path(path_type=Path, dir_okay=False, exists=True),
    help="The table to compare (default: the bundled one).",
)
@click.option(
    "--write",
    "write_path",
    type=click.Path(path_type=Path, dir_okay=False),
    help="Write the table with the new releases appended here (for `plan --compat FILE`).",
)
def refresh_command(
    index_urls: tuple[str, ...], compat_path: Path | None, write_path: Path | None
) -> None:
    """Report torch releases, patches, builds, Pythons and platform floors the table lacks.

    Standard output is TOML: the findings as comments, then a ready [torch."X.Y"] table per new
    release (each fact's origin in `source`, `unverified` where inferred). Exit 0: nothing new;
    1: the table is behind (for schedulers); 2: bad input or an index that cannot be read."""
    done = wheelfactory.refresh_compat(
        index_urls,
        compat=compat_path,
        write=write_path,
        note=lambda line: click.echo(f"note: {line}", err=True),
    )
    if not done.result.behind:
        click.echo(
            f"{done.shown} knows every torch release, build and Python on {', '.join(done.urls)}",
            err=True,
        )
        return
    click.echo(done.toml())
    if done.written is not None:
        click.echo(
            f"wrote {done.written}: plan with `wheelfactory plan --compat {done.written}`", err=True
        )
    sys.exit(1)
