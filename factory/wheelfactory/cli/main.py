"""The ``wheelfactory`` command line. Fatal errors are caught once, in ``main``."""

from __future__ import annotations

import errno
import os
import shlex
import signal
import sys
from pathlib import Path
from typing import cast

import click
from rich.markup import escape

from wheelfactory import __version__
from wheelfactory.cli.compat_cli import compat_group
from wheelfactory.cli.machine_cli import base_image, engine_group, gc_command, rocm_check_command
from wheelfactory.cli.options import (
    ALLOW_UNATTESTED_OPTION,
    COMPAT_OPTION,
    MATRIX_OPTION,
    OUT_OPTION,
)
from wheelfactory.cli.render import console, github_json, plan_json, print_plan
from wheelfactory.errors import (
    BuildFailed,
    ConfigError,
    UsageError,
    WheelfactoryError,
    WorkflowStale,
    WriteFailed,
)
from wheelfactory.plan.compat import load_table
from wheelfactory.plan.expand import Plan, parse_shard
from wheelfactory.plan.matrix import load_matrix
from wheelfactory.project.kinds import project_plan


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="wheelfactory")
def cli() -> None:
    """Build one repaired, verified wheel per torch x backend x ABI variant of a kernel project."""


def _load_plan(matrix_path: Path, compat_path: Path | None) -> Plan:
    table = load_table(compat_path)
    matrix = load_matrix(matrix_path, table, display=str(matrix_path))
    return project_plan(matrix, table)


@cli.command()
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
    "shard",
    metavar="I/N",
    default=None,
    help="Only shard I of N (deterministic, disjoint; together the shards cover the plan).",
)
@click.option("--explain", is_flag=True, help="Also list the pruned combinations and why.")
def plan(
    matrix_path: Path, compat_path: Path | None, fmt: str, shard: str | None, explain: bool
) -> None:
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
@click.option(
    "-o",
    "--out",
    "out_dir",
    type=click.Path(path_type=Path, file_okay=False),
    default=None,
    help="Output directory (default: [build].out of the matrix, i.e. dist/).",
)
@click.option(
    "--engine",
    type=click.Choice(["auto", "docker", "host"]),
    default=None,
    help="docker: every variant in its image. host: the one variant the torch of --python is. "
    "auto (default: the matrix's [build].engine): docker when an engine answers, else host.",
)
@click.option(
    "--python",
    "python",
    default=sys.executable,
    show_default="this interpreter",
    help="Interpreter whose torch the host engine builds for.",
)
@click.option(
    "--only", multiple=True, metavar="PATTERN", help="Only variants whose id matches (fnmatch)."
)
@click.option(
    "--shard",
    "shard",
    metavar="I/N",
    default=None,
    help="Only shard I of N of the plan (as `plan --shard` lists it); --only then filters within it.",
)
@click.option(
    "-j",
    "--jobs",
    type=click.IntRange(min=0),
    default=None,
    help="Parallel builds (0 or unset: from cores and free memory).",
)
@click.option(
    "--max-memory",
    "max_memory",
    metavar="SIZE",
    default=None,
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
    from wheelfactory.cli.render import BuildView, EventRenderer, print_build_summary
    from wheelfactory.engines.capacity import parse_size
    from wheelfactory.errors import VariantsNotBuilt
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


def _unattested_warning(count: int, verb: str) -> None:
    """The opt-out is said in the summary, so that a log shows what was published unattested."""
    if count:
        console(stderr=True).print(
            f"[yellow]warning[/] --allow-unattested: {count} wheel(s) {verb} without a "
            "provenance record",
            highlight=False,
        )


def _refused_error(refused: list[str], command: str) -> None:
    from wheelfactory.errors import PublishError

    if refused:
        raise PublishError(
            f"{len(refused)} variant(s) refused ({', '.join(refused)}): each is not what its "
            f"manifest entry says it is (the reasons are above); `{command}` wrote the rest. "
            "Rebuild them with `wheelfactory build`"
        )


# [index] (factory/wheelfactory/publish/index.py): PEP 503 indexes, find-links pages and variant metadata over dist/.
@cli.command("index")
@OUT_OPTION
@click.option(
    "--base-url",
    default=None,
    metavar="URL",
    help="Where the index will be served, for the pip commands on its pages "
    "(default: http://127.0.0.1:8000, what `wheelfactory serve` uses).",
)
@ALLOW_UNATTESTED_OPTION
def index_command(out_dir: Path, base_url: str | None, allow_unattested: bool) -> None:
    """Write dist/index: one pip index per variant, find-links pages, variants.json, an overview.

    A wheel that is not what its manifest entry says (file name tags, local version label, build
    record, RECORD, provenance record) is refused: the others are listed, then the command exits 7."""
    from wheelfactory.publish.index import (
        DEFAULT_BASE_URL,
        INDEX_LINK,
        collect,
        plan_index,
        write_index,
    )
    from wheelfactory.publish.report import served_report
    from wheelfactory.publish.variant_metadata import variant_metadata
    from wheelfactory.runner import manifest

    out = out_dir.resolve()
    entries = manifest.read_listed(out, shown=out_dir)
    base = (base_url or DEFAULT_BASE_URL).rstrip("/")
    with manifest.locked(out):
        wheels, skipped = collect(out, entries, allow_unattested=allow_unattested)
        tampered: list[str] = []
        pages, links = variant_metadata(wheels, out, tampered=tampered)
        planned = plan_index(
            wheels,
            skipped,
            base_url=base,
            extra_pages=pages,
            extra_links=links,
            report=served_report(out, entries, frozenset(w.variant_id for w in wheels)),
        )
        generation, changed = write_index(out, planned)
    out_console = console()
    for wheel in planned.wheels:
        out_console.print(f"{wheel.variant_id}: {base}/{wheel.simple}/", markup=False)
    for skip in planned.skipped:
        if skip.refused:
            out_console.print(
                f"[red]refused[/] {escape(skip.variant_id)}: {escape(skip.reason)}", highlight=False
            )
        else:
            out_console.print(
                f"[yellow]not listed[/] {escape(skip.variant_id)}: {escape(skip.reason)}",
                highlight=False,
            )
    state = "written" if changed else "unchanged"
    refused = [skip.variant_id for skip in planned.skipped if skip.refused]
    out_console.print(
        f"{out / INDEX_LINK} -> {generation.name} ({state}): {len(planned.wheels)} variant(s)"
        f"{f', {len(refused)} refused' if refused else ''}; "
        f"serve it with `wheelfactory serve -o {out_dir}`",
        markup=False,
    )
    for copy in tampered:
        out_console.print(f"[red]refused[/] variant wheel {escape(copy)}", highlight=False)
    _unattested_warning(sum(w.provenance is None for w in planned.wheels), "listed")
    _refused_error(
        refused + [f"{len(tampered)} variant wheel copy(ies)"] * bool(tampered),
        "wheelfactory index",
    )


# [publish] (factory/wheelfactory/publish/publishing.py): a built release to buckets, directories and upload servers.
@cli.command("publish")
@OUT_OPTION
@click.option(
    "-m",
    "--matrix",
    "matrix_path",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
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
    default=None,
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
    from dataclasses import replace

    from wheelfactory.plan.publish_config import PublishConfig
    from wheelfactory.publish.publishing import PublishRequest, publish, targets_from_cli

    table = load_table(compat_path)
    if matrix_path is None and Path("matrix.toml").is_file():
        matrix_path = Path("matrix.toml")
    config = (
        load_matrix(matrix_path, table, display=str(matrix_path)).publish
        if matrix_path
        else PublishConfig()
    )
    config = replace(
        config, targets=targets_from_cli(targets, config, Path.cwd(), base_url=base_url)
    )
    request = PublishRequest(
        out_dir.resolve(), config, dry_run=dry_run, allow_unattested=allow_unattested
    )
    result = publish(request, table, lambda line: click.echo(line))
    for line in result.lines:
        click.echo(line)
    _unattested_warning(result.unattested, "published")


# [report] (factory/wheelfactory/publish/report.py): the matrix report, dist/report.html and an SVG of the grid.
@cli.command("report")
@click.option(
    "-m",
    "--matrix",
    "matrix_path",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help="The matrix, for pruned combinations and planned variants not built yet "
    "(default: matrix.toml if it exists).",
)
@COMPAT_OPTION
@OUT_OPTION
@click.option(
    "--html",
    "html_path",
    type=click.Path(path_type=Path, allow_dash=True),
    default=None,
    help="Where to write the page (default: DIST/report.html; -: stdout).",
)
@click.option(
    "--svg",
    "svg_path",
    type=click.Path(path_type=Path, allow_dash=True),
    default=None,
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
    from wheelfactory.publish.report import build_report, probe_dist, report_paths, write_report
    from wheelfactory.runner import manifest
    from wheelfactory.support.outputs import check_outputs, is_stdout
    from wheelfactory.support.paths import safe_member

    if is_stdout(html_path) and is_stdout(svg_path):
        raise UsageError("--html - and --svg -: only one of them can go to standard output")
    out = out_dir.resolve()
    if matrix_path is None and Path("matrix.toml").is_file():
        matrix_path = Path("matrix.toml")
    page, svg = report_paths(out, html_path=html_path, svg_path=svg_path)
    inputs: dict[str, Path | None] = {
        "the manifest": out / manifest.MANIFEST,
        "the matrix": matrix_path,
        "the compatibility table": compat_path,
    }
    # Checked before the manifest is read: a target that is a device or a directory is refused first.
    outputs = {"--html": html_path} if html_path else {"the default page": page}
    outputs.update({"--svg": svg_path} if svg_path else {"the default SVG": svg})
    check_outputs(outputs, inputs, writes="the report")
    entries = manifest.read_listed(out, shown=out_dir)
    linked: dict[str, Path | None] = {}  # the wheels and logs the page links, read for their sizes
    for vid, entry in sorted(entries.items()):
        for what, name in (("wheel", entry.wheel), ("build log", entry.log)):
            member = safe_member(name) if isinstance(name, str) else None
            if member is not None:
                linked[f"the {what} of {vid}"] = out / member
    check_outputs(outputs, linked, writes="the report")
    planned = _load_plan(matrix_path, compat_path) if matrix_path is not None else None
    report = build_report(
        entries,
        planned,
        facts=probe_dist(out, entries),
        matrix=str(matrix_path) if matrix_path is not None else None,
    )
    written = write_report(report, out, html_path=html_path, svg_path=svg_path)
    if written.stdout:  # stdout is exactly the file; the paths and the summary go to stderr
        click.echo(written.stdout, nl=False)
    click.echo(f"{written.html}\n{written.svg}", err=bool(written.stdout))
    click.echo(report.summary(), err=bool(written.stdout))


@cli.command("export")
@OUT_OPTION
@click.option(
    "--hf-layout",
    "hf_layout",
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
    from wheelfactory.errors import PublishError
    from wheelfactory.publish.hf_layout import ABI_REFUSAL, export_dist
    from wheelfactory.runner import manifest

    out = out_dir.resolve()
    out_console = console()
    entries = manifest.read_listed(out, shown=out_dir)
    if skip_abi_check:
        console(stderr=True).print(
            "[yellow]warning[/] --skip-abi-check: libraries are exported without "
            "kernel-abi-check; the Hub would reject any that fail it",
            highlight=False,
        )
    with manifest.locked(out):
        result = export_dist(
            out,
            entries,
            hf_layout.resolve(),
            abi_check=not skip_abi_check,
            allow_unattested=allow_unattested,
        )
    for item in result.exported:
        out_console.print(f"{item.variant_id}: {item.path}", markup=False)
    for skip in result.skipped:
        out_console.print(
            f"[yellow]not exported[/] {escape(skip.variant_id)}: {escape(skip.reason)}",
            highlight=False,
        )
    for refusal in result.refused:
        out_console.print(
            f"[red]refused[/] {refusal.variant_id}: {escape(refusal.reason)}", highlight=False
        )
    out_console.print(
        f"{len(result.exported)} variant(s) in {hf_layout}; load with "
        f"kernels.get_local_kernel(Path({str(hf_layout.resolve())!r}))",
        markup=False,
    )
    _unattested_warning(len(result.unattested), "exported")
    abi = [r for r in result.refused if r.reason.startswith(ABI_REFUSAL)]
    if abi and len(abi) == len(result.refused):
        raise PublishError(
            f"{len(result.refused)} variant(s) refused: their libraries fail kernel-abi-check "
            f"(the Hub's manylinux_2_28 / Python 3.9 abi3 rules): build them on a manylinux_2_28 "
            f'base (the default base_image, or debian_base = "bullseye"), or pass --skip-abi-check '
            f"for local use"
        )
    _refused_error([r.variant_id for r in result.refused], "wheelfactory export")
    if not result.exported:  # every variant failed to build, or was skipped: nothing to load
        raise PublishError(
            f"nothing was exported: {out / manifest.MANIFEST} holds no built variant the layout "
            f"can take ({len(result.skipped)} not exported, listed above); build them first "
            f"(`wheelfactory build -o {out_dir}`)"
        )


@cli.command("which")
@click.option(
    "--index",
    "index",
    default=None,
    metavar="URL|DIR",
    help="The served index's URL or a dist directory (default: http://127.0.0.1:8000).",
)
@click.option(
    "--python",
    "python",
    default=sys.executable,
    show_default="this interpreter",
    help="The interpreter (with torch) you are installing into.",
)
@click.option("-q", "--quiet", is_flag=True, help="Print only the --index-url value.")
@click.option(
    "--project",
    "project",
    default=None,
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
    from wheelfactory.publish.selector import project_here, run_selector

    # the default index is whatever answers on 127.0.0.1:8000: another project's `serve`, perhaps
    code = run_selector(
        python,
        index,
        quiet=quiet,
        gpus=gpus,
        project=project or (project_here(Path.cwd()) if index is None else None),
    )
    if code:
        sys.exit(code)


def _interrupted(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


@cli.command("serve")
@OUT_OPTION
@click.option(
    "--root",
    "root",
    type=click.Path(path_type=Path, file_okay=False),
    default=None,
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
    default=None,
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
    from wheelfactory.publish.index import read_listing, read_listing_at
    from wheelfactory.publish.serve import open_root, open_server

    err = console(stderr=True)

    def log(line: str) -> None:
        err.print(line, markup=False, highlight=False)

    if root is not None:
        if (
            click.get_current_context().get_parameter_source("out_dir")
            is click.core.ParameterSource.COMMANDLINE
        ):
            raise UsageError("--root and -o both name what to serve: give one")
        served = root.resolve()
        hint = "give --root the directory `wheelfactory index` or a publish to a directory wrote"
        if not (served / "index.html").is_file():
            raise UsageError(f"{served} holds no index (no index.html): {hint}")
        # checked before anything listens: a bad index.json is one line
        listing = read_listing_at(served, hint=hint)
        server = open_root(served, host, port, log, base_url, hint=hint)
    else:
        out = out_dir.resolve()
        served = out / "index"
        listing = read_listing(out)
        server = open_server(out, host, port, log, base_url)
    click.echo(f"serving {served} at {server.url}/", err=False)
    shown = server.base_url or server.url
    variants = cast(list[dict[str, str]], listing["variants"])  # checked the shape
    announced: set[tuple[str, str]] = set()
    for variant in variants:  # one entry per release: one line per variant
        if (variant["id"], variant["project"]) not in announced:
            announced.add((variant["id"], variant["project"]))
            click.echo(
                f"  {variant['id']}: pip install --index-url {shown}/{variant['index']} {variant['project']}"
            )
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


# [bake] (factory/wheelfactory/ci/bake.py): the plan's build images as a `docker buildx bake` file, for any BuildKit builder.
@cli.command("bake")
@MATRIX_OPTION
@COMPAT_OPTION
@click.option(
    "--file",
    "bake_file",
    type=click.Path(path_type=Path, allow_dash=True),
    default=None,
    metavar="FILE",
    help="Write the bake file (JSON) here, atomically. Default, or -: stdout.",
)
@click.option(
    "--only", multiple=True, metavar="PATTERN", help="Only variants whose id matches (fnmatch)."
)
@click.option(
    "--shard",
    "shard",
    metavar="I/N",
    default=None,
    help="Only shard I of N of the plan (as `plan --shard` lists it); --only then filters within it.",
)
def bake_command(
    matrix_path: Path,
    compat_path: Path | None,
    bake_file: Path | None,
    only: tuple[str, ...],
    shard: str | None,
) -> None:
    """Write a `docker buildx bake` file: one target per build image the plan needs, tagged by content."""
    from wheelfactory.ci.bake import plan_bake, write_bake
    from wheelfactory.plan.expand import select
    from wheelfactory.plan.indexes import debian_mirror
    from wheelfactory.support.outputs import check_outputs, is_stdout

    shard_spec = parse_shard(shard) if shard else None
    to_stdout = bake_file is None or is_stdout(bake_file)
    check_outputs(
        {"--file": bake_file},
        {"the matrix": matrix_path, "the compatibility table": compat_path},
        writes="the bake file",
    )
    table = load_table(compat_path)
    matrix = load_matrix(matrix_path, table, display=str(matrix_path))
    variants = select(project_plan(matrix, table), only, shard_spec)
    mirror = debian_mirror(matrix.build.debian_mirror) if matrix.build.debian_base else None
    baked = plan_bake(matrix, variants, matrix_file=str(matrix_path), host_mirror=mirror)
    if to_stdout:
        click.echo(baked.dumps(), nl=False)
    else:
        assert bake_file is not None
        write_bake(baked.dumps(), bake_file)
    err = console(stderr=True)
    shown = "FILE" if to_stdout else str(bake_file)
    for note in baked.notes(shown):
        err.print(f"note: {note}", markup=False, highlight=False)
    if not to_stdout:
        err.print(
            f"{bake_file}: {len(baked.targets)} target(s) for {len(variants)} variant(s); build them with "
            f"`docker buildx bake -f {bake_file}`",
            markup=False,
            highlight=False,
        )


# [ci] (factory/wheelfactory/ci/github.py): a GitHub Actions workflow generated from the plan.
@cli.group("ci")
def ci_group() -> None:
    """Generate CI workflows that build the plan."""


@ci_group.command("github")
@MATRIX_OPTION
@COMPAT_OPTION
@click.option(
    "--workflow",
    "workflow_file",
    type=click.Path(path_type=Path, allow_dash=True),
    default=None,
    metavar="FILE",
    help="Write the workflow here, atomically (default, or -: stdout), e.g. "
    ".github/workflows/wheels.yml.",
)
@click.option(
    "--shards",
    type=int,
    default=None,
    metavar="N",
    help="N build jobs, each building shard I/N of the plan (default: one job per variant).",
)
@click.option(
    "--install",
    "install",
    default=None,
    metavar="SPEC",
    help="What the jobs pip-install wheelfactory from (default: wheelfactory==<this version>; "
    "`.` for the checkout).",
)
@click.option(
    "--python", "python", default=None, metavar="3.X", help="The runners' Python (default: 3.12)."
)
@click.option(
    "--check",
    "check_file",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    metavar="FILE",
    help="Write nothing; exit 1 with a diff if FILE is not what the plan generates.",
)
@click.option(
    "--watch-torch",
    "watch_torch",
    is_flag=True,
    help="Add a weekly job that runs `compat refresh` and fails (or, with a table of your own and the "
    "WHEELFACTORY_WATCH_TOKEN secret, opens a pull request) when new torch releases are out.",
)
@click.option(
    "--attest",
    is_flag=True,
    help="Sign the provenance of every published wheel with Sigstore in the index job "
    "(actions/attest-build-provenance; `gh attestation verify WHEEL --repo OWNER/REPO`).",
)
def ci_github_command(
    matrix_path: Path,
    compat_path: Path | None,
    workflow_file: Path | None,
    shards: int | None,
    install: str | None,
    python: str | None,
    check_file: Path | None,
    watch_torch: bool,
    attest: bool,
) -> None:
    """A GitHub Actions workflow: plan job, one build job per variant (or shard), index job."""
    from wheelfactory.ci import github as gh
    from wheelfactory.support.outputs import check_outputs, is_stdout

    if workflow_file is not None and check_file is not None:
        raise UsageError(
            "--workflow writes the file and --check compares with it: give one of them"
        )
    if is_stdout(workflow_file):  # `--workflow -`: stdout, as without --workflow
        workflow_file = None
    check_outputs(
        {"--workflow": workflow_file},
        {"the matrix": matrix_path, "the compatibility table": compat_path},
        writes="the workflow",
    )
    target = workflow_file or check_file
    options = gh.GithubOptions(
        matrix_file=gh.repo_path(matrix_path, "-m"),
        workflow_file=(
            gh.repo_path(target, "--workflow" if workflow_file else "--check")
            if target
            else gh.DEFAULT_WORKFLOW
        ),
        compat_file=gh.repo_path(compat_path, "--compat") if compat_path is not None else None,
        shards=shards,
        install=install,
        python=python or gh.DEFAULT_PYTHON,
        watch_torch=watch_torch,
        attest=attest,
    )
    table = load_table(compat_path)
    matrix = load_matrix(matrix_path, table, display=str(matrix_path))
    text = gh.render_workflow(project_plan(matrix, table), matrix, options)
    err = console(stderr=True)
    if check_file is not None:
        # a device such as /dev/zero never ends
        if check_file.exists() and not check_file.is_file():
            raise UsageError(
                f"--check {check_file}: not a regular file; name the committed workflow"
            )
        try:
            committed = check_file.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise WorkflowStale(
                f"{check_file} does not exist; generate it with: {options.regenerate}"
            ) from None
        except (OSError, UnicodeDecodeError) as exc:
            reason = getattr(exc, "strerror", None) or str(exc)
            raise UsageError(
                f"--check {check_file}: cannot be read ({reason}); name the committed workflow"
            ) from None
        diff = gh.stale_diff(committed, text, options.workflow_file)
        if diff:
            click.echo(diff, nl=False)
            raise WorkflowStale(
                f"{check_file} is not what the plan of {options.matrix_file} generates (diff "
                f"above); regenerate with: {options.regenerate}"
            )
        err.print(f"{check_file} is current", markup=False, highlight=False)
    elif workflow_file is None:
        click.echo(text, nl=False)
    else:
        gh.write_workflow(text, workflow_file)
        if not options.workflow_file.startswith(".github/workflows/"):
            err.print(
                f"note: GitHub runs only the workflows in .github/workflows/, not {options.workflow_file}",
                markup=False,
                highlight=False,
            )
        jobs = f"{shards} shard job(s)" if shards else "one build job per variant"
        err.print(
            f"{workflow_file}: {jobs}; commit it (the plan job checks that it stays current)",
            markup=False,
            highlight=False,
        )


# [merge] (factory/wheelfactory/ci/merge.py): build output directories (CI artifacts) combined into one.
@cli.command("merge")
@click.argument("parts", nargs=-1, required=True, type=click.Path(path_type=Path))
@OUT_OPTION
@ALLOW_UNATTESTED_OPTION
def merge_command(parts: tuple[Path, ...], out_dir: Path, allow_unattested: bool) -> None:
    """Combine build output directories (manifest, wheels, logs) into one dist, for `index`.

    A part's wheel that is not what its manifest entry says (as `index` checks) is refused: the
    rest is merged, then the command exits 7."""
    from wheelfactory.ci.merge import merge

    done = merge(list(parts), out_dir, allow_unattested=allow_unattested)
    out_console = console()
    for choice in done.choices:
        origin = "kept" if choice.origin == done.out else f"from {choice.origin}"
        out_console.print(
            f"{choice.variant_id}: {choice.entry.status} ({origin})", markup=False, highlight=False
        )
        for note in choice.notes:
            out_console.print(f"  {note}", markup=False, highlight=False)
    ok, failed = done.counts()
    out_console.print(
        f"{done.out}: {len(done.choices)} variant(s) ({ok} built or cached, {failed} failed) from "
        f"{len(parts)} part(s), {len(done.copies)} file(s) copied; next: "
        f"`wheelfactory index -o {out_dir}`",
        markup=False,
        highlight=False,
    )
    for refusal in done.refused:
        out_console.print(
            f"[red]refused[/] {escape(refusal.variant_id)} from {escape(str(refusal.part))}: "
            f"{escape(refusal.reason)}",
            highlight=False,
        )
    _unattested_warning(len(done.unattested), "merged")
    _refused_error(sorted({r.variant_id for r in done.refused}), "wheelfactory merge")


# [new] (factory/wheelfactory/project/scaffold.py): a kernel library to start from.
@cli.command("new")
@click.argument("name")
@click.option(
    "--path",
    "path",
    type=click.Path(path_type=Path),
    default=None,
    help="The directory to create (default: ./NAME); an existing one must be empty.",
)
def new_command(name: str, path: Path | None) -> None:
    """Start a kernel library NAME: kernel.toml, one op with CPU and CUDA sources, its reference op and
    sample inputs, tests run against every built wheel, and a matrix.toml."""
    from wheelfactory.project.scaffold import plan_scaffold, write_scaffold

    scaffold = plan_scaffold(name)
    shown = path if path is not None else Path(name)
    write_scaffold(scaffold, shown)
    click.echo(
        f"{shown}: kernel library {name!r} ({len(scaffold.files)} files); next: "
        f"cd {shlex.quote(str(shown))} && wheelfactory plan && {_first_build_command()}"
    )


def _first_build_command() -> str:
    """A first build that works as typed here: with the host engine where this interpreter's torch
    is a CPU build (seconds to start, no image), else the sample CPU variant in Docker."""
    from importlib.metadata import PackageNotFoundError, version

    from packaging.version import InvalidVersion, Version

    try:
        torch = Version(version("torch"))
    except (PackageNotFoundError, InvalidVersion):
        torch = None
    if torch is not None and torch.local == "cpu":
        return (
            f"wheelfactory build --engine host --only 'torch{torch.major}{torch.minor}-cxx11-cpu-*'"
        )
    return (
        "wheelfactory build --only 'torch213-cxx11-cpu-*'  # in Docker (wheelfactory engine start)"
    )


cli.add_command(compat_group)
for command in (engine_group, rocm_check_command, base_image, gc_command):  # cli/machine_cli.py
    cli.add_command(command)


# errno values of a write to standard output or error that cannot go on: the disk or device is full
# or failing. A closed pipe (EPIPE) is not an error: the reader has what it wanted.
OUTPUT_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.EFBIG)
CLOSED_PIPE_EXIT = 141  # 128 + SIGPIPE: what a Unix tool killed by the closed pipe exits with


def main(argv: list[str] | None = None) -> None:
    """Entry point: run the CLI; turn known failures into one line on stderr and an exit code."""
    for stream in (sys.stdout, sys.stderr):  # a name the locale cannot encode is printed escaped
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(errors="backslashreplace")
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        try:
            # make_context + invoke is click's main without its handlers: a closed pipe reaches ours
            # (click's would exit 1, the code of a failed build)
            with cli.make_context("wheelfactory", args) as context:
                cli.invoke(context)
        finally:
            # a full or closed standard output fails here, inside the handlers below
            sys.stdout.flush()
    except WheelfactoryError as exc:
        label = "config error" if isinstance(exc, ConfigError) else "error"
        _say_and_exit(f"wheelfactory: {label}: {exc}", exc.exit_code)
    except (click.exceptions.Abort, KeyboardInterrupt, EOFError):
        from wheelfactory.runner.cancel import CANCEL

        if CANCEL.event.is_set():  # a build: its children were stopped, and nothing earlier changed
            _say_and_exit(
                f"wheelfactory: interrupted by {CANCEL.described}: the builds under way were stopped; "
                "earlier wheels and their manifest entries are kept",
                CANCEL.exit_code,
            )
        _say_and_exit("wheelfactory: interrupted", 130)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except BrokenPipeError:
        _silence_output()
        sys.exit(CLOSED_PIPE_EXIT)
    except OSError as exc:
        if exc.errno == errno.ENAMETOOLONG:
            shown = str(exc.filename or "a path")
            shown = shown if len(shown) <= 80 else shown[:80] + "..."
            _say_and_exit(
                f"wheelfactory: error: {shown}: a name longer than the filesystem allows; use a shorter "
                "path or name",
                UsageError.exit_code,
            )
        if exc.errno not in OUTPUT_ERRNOS:
            raise
        where = exc.filename or "standard output"
        _silence_output()
        _say_and_exit(
            f"wheelfactory: error: cannot write {where}: {exc.strerror}", WriteFailed.exit_code
        )
    sys.exit(0)


def _silence_output() -> None:
    """Point standard output at /dev/null: what is still buffered for a full or closed output is
    dropped instead of failing again when the interpreter exits."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass
    finally:
        os.close(devnull)


def _say_and_exit(line: str, code: int) -> None:
    """The one line on standard error, where it can be written at all; then the exit code."""
    try:  # not click.echo: its stream prints what the locale cannot encode as "?", ours escapes it
        sys.stderr.write(line + "\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass  # standard error is gone too: the exit code is all that is left to say it
    sys.exit(code)
