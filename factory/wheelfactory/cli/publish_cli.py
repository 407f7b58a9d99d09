"""The ``wheelfactory`` commands that publish what was built: ``index`` (pip indexes over dist/),
``report`` (the matrix report), ``export`` (the Hugging Face kernels layout) and ``publish`` (to
buckets, directories and upload servers). Each calls its function of the API and says what it
did."""

from __future__ import annotations

from pathlib import Path

import click
from rich.markup import escape

import wheelfactory
from wheelfactory.cli.options import ALLOW_UNATTESTED_OPTION, COMPAT_OPTION, OUT_OPTION
from wheelfactory.cli.render import console, refused_error, tagged, unattested_warning
from wheelfactory.errors import PublishError


# [index] (factory/wheelfactory/publish/index.py): PEP 503 indexes, find-links pages and variant metadata over dist/.
@click.command("index")
@OUT_OPTION
@click.option(
    "--base-url",
    metavar="URL",
    help="Where the index will be served, for the pip commands on its pages "
    "(default: http://127.0.0.1:8000, what `wheelfactory serve` uses).",
)
@ALLOW_UNATTESTED_OPTION
def index_command(out_dir: Path, base_url: str | None, allow_unattested: bool) -> None:
    """Write dist/index: one pip index per variant, find-links pages, variants.json, an overview.

    A wheel that is not what its manifest entry says (file name tags, local version label, build
    record, RECORD, provenance record) is refused: the others are listed, then the command exits 7."""
    done = wheelfactory.index_dist(out_dir, base_url=base_url, allow_unattested=allow_unattested)
    out_console = console()
    for wheel in done.plan.wheels:
        out_console.print(f"{wheel.variant_id}: {done.base_url}/{wheel.simple}/", markup=False)
    for skip in done.plan.skipped:
        tag = "[red]refused[/]" if skip.refused else "[yellow]not listed[/]"
        tagged(out_console, tag, skip.variant_id, skip.reason)
    state = "written" if done.changed else "unchanged"
    refused = [skip.variant_id for skip in done.refused]
    out_console.print(
        f"{done.link} -> {done.generation.name} ({state}): {len(done.plan.wheels)} variant(s)"
        f"{f', {len(refused)} refused' if refused else ''}; "
        f"serve it with `wheelfactory serve -o {out_dir}`",
        markup=False,
    )
    for copy in done.tampered:
        out_console.print(f"[red]refused[/] variant wheel {escape(copy)}", highlight=False)
    unattested_warning(done.unattested, "listed")
    refused_error(
        refused + [f"{len(done.tampered)} variant wheel copy(ies)"] * bool(done.tampered),
        "wheelfactory index",
    )


# [report] (factory/wheelfactory/publish/reporting.py): the matrix report, dist/report.html and an SVG of the grid.
@click.command("report")
@click.option(
    "-m",
    "--matrix",
    "matrix_path",
    type=click.Path(path_type=Path, dir_okay=False),
    help="The matrix, for pruned combinations and planned variants not built yet "
    "(default: matrix.toml if it exists).",
)
@COMPAT_OPTION
@OUT_OPTION
@click.option(
    "--html",
    "html_path",
    type=click.Path(path_type=Path, allow_dash=True),
    help="Where to write the page (default: DIST/report.html; -: stdout).",
)
@click.option(
    "--svg",
    "svg_path",
    type=click.Path(path_type=Path, allow_dash=True),
    help="Where to write the grid as SVG (default: beside the page, DIST/report.svg; -: stdout).",
)
def report_command(
    matrix_path: Path | None,
    compat_path: Path | None,
    out_dir: Path,
    html_path: Path | None,
    svg_path: Path | None,
) -> None:
    """Write a static HTML report of the matrix (and an SVG of its grid) from dist/manifest.json."""
    done = wheelfactory.report_dist(
        out_dir, matrix=matrix_path, compat=compat_path, html=html_path, svg=svg_path
    )
    written = done.written
    if written.stdout:  # stdout is exactly the file; the paths and the summary go to stderr
        click.echo(written.stdout, nl=False)
    click.echo(f"{written.html}\n{written.svg}", err=bool(written.stdout))
    click.echo(done.report.summary(), err=bool(written.stdout))


@click.command("export")
@OUT_OPTION
@click.option(
    "--hf-layout",
    type=click.Path(path_type=Path, file_okay=False),
    required=True,
    help="Directory to write the Hugging Face kernels layout into (DIR/build/<variant>/).",
)
@click.option(
    "--skip-abi-check",
    is_flag=True,
    help="export even libraries that fail kernel-abi-check, e.g. for local use; the Hub would "
    "reject them",
)
@ALLOW_UNATTESTED_OPTION
def export_command(
    out_dir: Path, hf_layout: Path, skip_abi_check: bool, allow_unattested: bool
) -> None:
    """Export the built wheels in the Hugging Face kernels layout (kernels.get_local_kernel).

    Every library must pass the Hub's checker (kernel-abi-check: manylinux_2_28, Python 3.9 abi3),
    and every wheel must be what its manifest entry says (as `index` checks); a variant that fails
    either is not exported and the command exits 7 after writing the others."""
    if skip_abi_check:
        console(stderr=True).print(
            "[yellow]warning[/] --skip-abi-check: libraries are exported without "
            "kernel-abi-check; the Hub would reject any that fail it",
            highlight=False,
        )
    result = wheelfactory.export_hf(
        out_dir, hf_layout, abi_check=not skip_abi_check, allow_unattested=allow_unattested
    )
    out_console = console()
    for item in result.exported:
        out_console.print(f"{item.variant_id}: {item.path}", markup=False)
    for skip in result.skipped:
        tagged(out_console, "[yellow]not exported[/]", skip.variant_id, skip.reason)
    for refusal in result.refused:
        tagged(out_console, "[red]refused[/]", refusal.variant_id, refusal.reason)
    out_console.print(
        f"{len(result.exported)} variant(s) in {hf_layout}; load with "
        f"kernels.get_local_kernel(Path({str(hf_layout.resolve())!r}))",
        markup=False,
    )
    unattested_warning(len(result.unattested), "exported")
    if result.refused_by_abi_check:
        raise PublishError(
            f"{len(result.refused)} variant(s) refused: their libraries fail kernel-abi-check "
            f"(the Hub's manylinux_2_28 / Python 3.9 abi3 rules): build them on a manylinux_2_28 "
            f'base (the default base_image, or debian_base = "bullseye"), or pass --skip-abi-check '
            f"for local use"
        )
    refused_error([r.variant_id for r in result.refused], "wheelfactory export")
    if not result.exported:  # every variant failed to build, or was skipped: nothing to load
        raise PublishError(
            f"nothing was exported: {result.manifest} holds no built variant the "
            f"layout can take ({len(result.skipped)} not exported, listed above); build them "
            f"first (`wheelfactory build -o {out_dir}`)"
        )


# [publish] (factory/wheelfactory/publish/publishing.py): a built release to buckets, directories and upload servers.
@click.command("publish")
@OUT_OPTION
@click.option(
    "-m",
    "--matrix",
    "matrix_path",
    type=click.Path(path_type=Path, dir_okay=False),
    help="The matrix whose [publish] table names the targets (default: matrix.toml if it exists).",
)
@COMPAT_OPTION
@click.option(
    "--to",
    "targets",
    multiple=True,
    metavar="TARGET",
    help="Where to publish, instead of [publish]'s targets (repeatable): s3://bucket/prefix, a "
    "directory (./site, file:///srv/whl), an upload URL ({variant}: one index per variant) or "
    "a twine repository alias such as pypi.",
)
@click.option(
    "--base-url",
    metavar="URL",
    help="With --to: where users reach the bucket or directory targets (select.py and the pages' "
    "install commands name it).",
)
@click.option(
    "--dry-run",
    is_flag=True,
    help="Print what would be uploaded and which pages change; write nothing.",
)
@ALLOW_UNATTESTED_OPTION
def publish_command(
    out_dir: Path,
    matrix_path: Path | None,
    compat_path: Path | None,
    targets: tuple[str, ...],
    base_url: str | None,
    dry_run: bool,
    allow_unattested: bool,
) -> None:
    """Publish dist's wheels: releases accumulate on each target, and a published file never changes.

    Static targets (a bucket, a directory) get the pages `index` writes, made again from every
    release published there before plus this one; upload servers get the wheels through twine.
    Credentials come from the environment (TWINE_USERNAME / TWINE_PASSWORD, keyring; boto3's
    AWS_* chain), never from files in the project."""
    result = wheelfactory.publish_dist(
        out_dir,
        matrix=matrix_path,
        compat=compat_path,
        targets=targets,
        base_url=base_url,
        dry_run=dry_run,
        allow_unattested=allow_unattested,
        say=click.echo,
    )
    for line in result.lines:
        click.echo(line)
    unattested_warning(result.unattested, "published")


COMMANDS = (index_command, report_command, export_command, publish_command)
