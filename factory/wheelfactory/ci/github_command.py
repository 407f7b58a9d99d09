"""``wheelfactory ci github``: the GitHub Actions workflow of a matrix's plan (ci/github.py renders
it) written to a file, returned for standard output, or compared with the committed one."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from wheelfactory.ci import github as gh
from wheelfactory.errors import UsageError, WorkflowStale
from wheelfactory.plan.read import read_matrix
from wheelfactory.project.kinds import project_plan
from wheelfactory.support.outputs import check_outputs, is_stdout
from wheelfactory.support.paths import StrPath


@dataclass(frozen=True)
class Workflow:
    """The generated workflow and what became of it: written to ``written``, or (neither written
    nor checked) for standard output; checked: ``diff`` from the committed file ("" current)."""

    text: str
    options: gh.GithubOptions
    written: Path | None = None
    checked: Path | None = None
    diff: str = ""


def github_workflow(
    matrix: StrPath = "matrix.toml",
    *,
    compat: StrPath | None = None,
    workflow: StrPath | None = None,
    check: StrPath | None = None,
    shards: int | None = None,
    install: str | None = None,
    python: str | None = None,
    watch_torch: bool = False,
    attest: bool = False,
) -> Workflow:
    """The workflow: a plan job, one build job per variant (or ``shards`` jobs, each building
    shard I/N), an index job. ``workflow``: the file to write it to, atomically (None or -:
    standard output); ``check``: the committed file to compare it with (WorkflowStale when that
    is missing). The output is checked before anything is read."""
    workflow_file = Path(workflow) if workflow is not None else None
    check_file = Path(check) if check is not None else None
    matrix_path = Path(matrix)
    compat_path = Path(compat) if compat is not None else None
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
    spec, table = read_matrix(matrix_path, compat_path)
    text = gh.render_workflow(project_plan(spec, table), spec, options)
    if check_file is not None:
        committed = _committed(check_file, options)
        diff = gh.stale_diff(committed, text, options.workflow_file)
        return Workflow(text, options, checked=check_file, diff=diff)
    if workflow_file is not None:
        gh.write_workflow(text, workflow_file)
    return Workflow(text, options, written=workflow_file)


def _committed(check_file: Path, options: gh.GithubOptions) -> str:
    # a device such as /dev/zero never ends
    if check_file.exists() and not check_file.is_file():
        raise UsageError(f"--check {check_file}: not a regular file; name the committed workflow")
    try:
        return check_file.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise WorkflowStale(
            f"{check_file} does not exist; generate it with: {options.regenerate}"
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        reason = getattr(exc, "strerror", None) or str(exc)
        raise UsageError(
            f"--check {check_file}: cannot be read ({reason}); name the committed workflow"
        ) from None
