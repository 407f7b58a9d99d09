"""``wheelfactory compat``: the compatibility table against what the package indexes publish."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click


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
    default=None,
    help="The table to compare (default: the bundled one).",
)
@click.option(
    "--write",
    "write_path",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help="Write the table with the new releases appended here (for `plan --compat FILE`).",
)
def refresh_command(
    index_urls: tuple[str, ...], compat_path: Path | None, write_path: Path | None
) -> None:
    """Report torch releases, patches, builds, Pythons and platform floors the table lacks.

    Standard output is TOML: the findings as comments, then a ready [torch."X.Y"] table per new
    release (each fact's origin in `source`, `unverified` where inferred). Exit 0: nothing new;
    1: the table is behind (for schedulers); 2: bad input or an index that cannot be read."""
    from wheelfactory.ci.compat_refresh import default_indexes, refresh, write_merged
    from wheelfactory.plan.compat import load_table
    from wheelfactory.plan.indexes import Indexes

    table = load_table(compat_path)
    notes: list[str] = []
    if index_urls:
        urls = list(index_urls)
    else:
        urls, notes = default_indexes(table, Indexes.configure((), os.environ))
    for note in notes:
        click.echo(f"note: {note}", err=True)
    shown = str(compat_path) if compat_path else "the bundled table"
    result = refresh(table, urls)
    if not result.behind:
        click.echo(
            f"{shown} knows every torch release, build and Python on {', '.join(urls)}", err=True
        )
        return
    lines = [f"# The compatibility table ({shown}) is behind {', '.join(urls)}:"]
    lines += [f"# - {finding.minor} {finding.what}: {finding.text}" for finding in result.findings]
    for _, toml in (*result.fragments, *result.toolkits):
        lines += ["", toml.rstrip("\n")]
    click.echo("\n".join(lines))
    if write_path is not None:
        write_merged(compat_path, result, write_path)
        click.echo(
            f"wrote {write_path}: plan with `wheelfactory plan --compat {write_path}`", err=True
        )
    sys.exit(1)
