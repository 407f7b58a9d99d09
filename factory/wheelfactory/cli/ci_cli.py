"""The ``wheelfactory`` commands for CI: ``bake`` (the plan's build images for any BuildKit
builder), ``ci github`` (a workflow that builds the plan) and ``merge`` (the build jobs' output
directories combined into one, for ``index``)."""

from __future__ import annotations

from pathlib import Path

import click
from rich.markup import escape

import wheelfactory
from wheelfactory.cli.options import (
    ALLOW_UNATTESTED_OPTION,
    COMPAT_OPTION,
    MATRIX_OPTION,
    ONLY_OPTION,
    OUT_OPTION,
    SHARD_OPTION,
)
from wheelfactory.cli.render import console, plain, refused_error, unattested_warning
from wheelfactory.errors import WorkflowStale
from wheelfactory.plan.expand import parse_shard


# [bake] (factory/wheelfactory/ci/bake.py): the plan's build images as a `docker buildx bake` file, for any BuildKit builder.
@click.command("bake")
@MATRIX_OPTION
@COMPAT_OPTION
@click.option(
    "--file",
    "bake_file",
    type=click.Path(path_type=Path, allow_dash=True),
    metavar="FILE",
    help="Write the bake file (JSON) here, atomically. Default, or -: stdout.",
)
@ONLY_OPTION
@SHARD_OPTION
def bake_command(
    matrix_path: Path,
    compat_path: Path | None,
    bake_file: Path | None,
    only: tuple[str, ...],
    shard: str | None,
) -> None:
    """Write a `docker buildx bake` file: one target per build image the plan needs, tagged by content."""
    shard_spec = parse_shard(shard) if shard else None
    baked = wheelfactory.bake(
        matrix_path, compat=compat_path, file=bake_file, only=only, shard=shard_spec
    )
    if baked.file is None:
        click.echo(baked.plan.dumps(), nl=False)
    err = console(stderr=True)
    shown = "FILE" if baked.file is None else str(baked.file)
    for note in baked.plan.notes(shown):
        plain(err, f"note: {note}")
    if baked.file is not None:
        plain(
            err,
            f"{baked.file}: {len(baked.plan.targets)} target(s) for {len(baked.variants)} "
            f"variant(s); build them with `docker buildx bake -f {baked.file}`",
        )


# [ci] (factory/wheelfactory/ci/github.py): a GitHub Actions workflow generated from the plan.
@click.group("ci")
def ci_group() -> None:
    """Generate CI workflows that build the plan."""


@ci_group.command("github")
@MATRIX_OPTION
@COMPAT_OPTION
@click.option(
    "--workflow",
    "workflow_file",
    type=click.Path(path_type=Path, allow_dash=True),
    metavar="FILE",
    help="Write the workflow here, atomically (default, or -: stdout), e.g. "
    ".github/workflows/wheels.yml.",
)
@click.option(
    "--shards",
    type=int,
    metavar="N",
    help="N build jobs, each building shard I/N of the plan (default: one job per variant).",
)
@click.option(
    "--install",
    metavar="SPEC",
    help="What the jobs pip-install wheelfactory from (default: wheelfactory==<this version>; "
    "`.` for the checkout).",
)
@click.option("--python", metavar="3.X", help="The runners' Python (default: 3.12).")
@click.option(
    "--check",
    "check_file",
    type=click.Path(path_type=Path, dir_okay=False),
    metavar="FILE",
    help="Write nothing; exit 1 with a diff if FILE is not what the plan generates.",
)
@click.option(
    "--watch-torch",
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
    done = wheelfactory.github_workflow(
        matrix_path,
        compat=compat_path,
        workflow=workflow_file,
        check=check_file,
        shards=shards,
        install=install,
        python=python,
        watch_torch=watch_torch,
        attest=attest,
    )
    err = console(stderr=True)
    if done.checked is not None:
        if done.diff:
            click.echo(done.diff, nl=False)
            raise WorkflowStale(
                f"{done.checked} is not what the plan of {done.options.matrix_file} generates "
                f"(diff above); regenerate with: {done.options.regenerate}"
            )
        plain(err, f"{done.checked} is current")
    elif done.written is None:
        click.echo(done.text, nl=False)
    else:
        if not done.options.workflow_file.startswith(".github/workflows/"):
            plain(
                err,
                "note: GitHub runs only the workflows in .github/workflows/, not "
                f"{done.options.workflow_file}",
            )
        jobs = f"{shards} shard job(s)" if shards else "one build job per variant"
        plain(err, f"{done.written}: {jobs}; commit it (the plan job checks that it stays current)")


# [merge] (factory/wheelfactory/ci/merge.py): build output directories (CI artifacts) combined into one.
@click.command("merge")
@click.argument("parts", nargs=-1, required=True, type=click.Path(path_type=Path))
@OUT_OPTION
@ALLOW_UNATTESTED_OPTION
def merge_command(parts: tuple[Path, ...], out_dir: Path, allow_unattested: bool) -> None:
    """Combine build output directories (manifest, wheels, logs) into one dist, for `index`.

    A part's wheel that is not what its manifest entry says (as `index` checks) is refused: the
    rest is merged, then the command exits 7."""
    done = wheelfactory.merge(parts, out_dir, allow_unattested=allow_unattested)
    out_console = console()
    for choice in done.choices:
        origin = "kept" if choice.origin == done.out else f"from {choice.origin}"
        plain(out_console, f"{choice.variant_id}: {choice.entry.status} ({origin})")
        for note in choice.notes:
            plain(out_console, f"  {note}")
    ok, failed = done.counts()
    plain(
        out_console,
        f"{done.out}: {len(done.choices)} variant(s) ({ok} built or cached, {failed} failed) from "
        f"{len(parts)} part(s), {len(done.copies)} file(s) copied; next: "
        f"`wheelfactory index -o {out_dir}`",
    )
    for refusal in done.refused:
        out_console.print(
            f"[red]refused[/] {escape(refusal.variant_id)} from {escape(str(refusal.part))}: "
            f"{escape(refusal.reason)}",
            highlight=False,
        )
    unattested_warning(len(done.unattested), "merged")
    refused_error(sorted({r.variant_id for r in done.refused}), "wheelfactory merge")


COMMANDS = (bake_command, ci_group, merge_command)
