"""Options several ``wheelfactory`` commands share, declared once."""

from __future__ import annotations

from pathlib import Path

import click

MATRIX_OPTION = click.option(
    "-m",
    "--matrix",
    "matrix_path",
    type=click.Path(path_type=Path, dir_okay=False),
    default=Path("matrix.toml"),
    show_default=True,
    help="The matrix file.",
)
COMPAT_OPTION = click.option(
    "--compat",
    "compat_path",
    type=click.Path(path_type=Path, dir_okay=False),
    help="A compatibility table to use instead of the bundled one (same schema).",
)
OUT_OPTION = click.option(
    "-o",
    "--out",
    "out_dir",
    type=click.Path(path_type=Path, file_okay=False),
    default=Path("dist"),
    show_default=True,
    help="The output directory of `wheelfactory build`.",
)
ALLOW_UNATTESTED_OPTION = click.option(
    "--allow-unattested",
    is_flag=True,
    help="Take a wheel that has no provenance record (<wheel>.intoto.json, e.g. an older wheelfactory's "
    "build); by default it is refused. A record of other bytes or another variant is refused all the same.",
)
ONLY_OPTION = click.option(
    "--only", multiple=True, metavar="PATTERN", help="Only variants whose id matches (fnmatch)."
)
SHARD_OPTION = click.option(
    "--shard",
    metavar="I/N",
    help="Only shard I of N of the plan (as `plan --shard` lists it); --only then filters within it.",
)
