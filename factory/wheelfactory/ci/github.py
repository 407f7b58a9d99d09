"""``wheelfactory ci github``: a GitHub Actions workflow generated from the plan.

Pure: a plan, its matrix and the options in, YAML text out; the same inputs give the same bytes
(a ``[publish]`` directory is named relative to the working directory, as the CLI names every path).
The workflow's jobs:

``plan``
    installs wheelfactory, shows the plan (``plan --explain``), fails while the committed workflow
    is not what this plan generates (``ci github ... --check FILE``: a stale file stops the builds)
    and emits ``plan --format github`` as its output ``matrix`` (``shards`` too with ``--shards``),
    for workflows that consume it.
``build``
    one job per variant, whose ``strategy.matrix`` is ``plan --format github`` written into the
    file (a pull request's diff shows the variants it adds or drops; ``--check`` keeps it current),
    running ``wheelfactory build --engine docker --only ID``; or, with ``--shards N``, one job per
    shard (``build --shard I/N``). Docker is on GitHub's Ubuntu runners and every variant builds in
    its own image. ``dist/`` (wheels, manifest, logs) is uploaded as ``wheels-<id>`` /
    ``wheels-shard-<i>`` even when the build fails, so that its logs can be read.
``index``
    downloads every ``wheels-*`` artifact into its own directory, combines them with
    ``wheelfactory merge`` and runs ``wheelfactory index``; the index (pages, wheels) is uploaded
    as the artifact ``index``.

``publish`` (when matrix.toml has a ``[publish]`` table with targets)
    on a tag, after the builds and the index job succeeded: redoes the merge and the index from the
    build artifacts and runs ``wheelfactory publish``, with PyPI's trusted publishing (OIDC) where
    PyPI is a target and only the secrets the other targets need (ci/github_publish.py).

``watch-torch`` (``--watch-torch``)
    a weekly scheduled job that runs ``compat refresh`` and fails, or opens a pull request with
    the refreshed table, when new torch releases are out (ci/watch_torch.py).

Tags ``v*`` and manual runs build; a pull request that touches the matrix or the workflow runs
the plan job only. With ``[build] debian_base`` each build job first makes the offline base
images its variants need, with sudo (debootstrap needs root; the build then finds them by tag).
"""

from __future__ import annotations

import difflib
import os
import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from wheelfactory import __version__
from wheelfactory.ci import watch_torch
from wheelfactory.ci.github_publish import publish_job, publish_plan
from wheelfactory.ci.workflow import (
    ARTIFACT_PREFIX,
    ATTEST,
    CHECKOUT,
    DIST,
    PLAN_RUNNER,
    RUNNERS,
    UPLOAD,
    Flow,
    FlowList,
    by_variant,
    compact_json,
    condition,
    dump,
    merge_builds,
    script,
    setup_steps,
    wf,
)
from wheelfactory.ci.workflow import repo_path as repo_path  # the command's: how paths are named
from wheelfactory.errors import UsageError
from wheelfactory.images.spec import debian_toolkit
from wheelfactory.plan.expand import Plan
from wheelfactory.plan.identity import Variant
from wheelfactory.plan.matrix import Matrix
from wheelfactory.support import atomic

DEFAULT_WORKFLOW = ".github/workflows/wheels.yml"
DEFAULT_PYTHON = "3.12"
SITE = "site"  # the index job's copy of dist/index, symlinks resolved, for upload-artifact
MAX_MATRIX_JOBS = 256  # GitHub: "A matrix can generate a maximum of 256 jobs per workflow run"
JOB_MINUTES_MAX = 360  # GitHub-hosted runners stop a job after 6 hours
CPU_MINUTES = 60  # a job's timeout per variant: a CPU build is minutes,
ACCELERATOR_MINUTES = 240  # nvcc for a dozen archs on a 4-core runner is hours
# Big preinstalled SDKs a CUDA build does not use; the toolkit, torch and the images need the room.
UNUSED_SDKS = (
    "/usr/share/dotnet",
    "/usr/local/lib/android",
    "/opt/ghc",
    "/opt/hostedtoolcache/CodeQL",
)


@dataclass(frozen=True)
class GithubOptions:
    """What the workflow is generated from, besides the plan. Paths are relative to the repository
    root (where the jobs run) and written as POSIX paths."""

    matrix_file: str
    workflow_file: str = DEFAULT_WORKFLOW
    compat_file: str | None = None
    shards: int | None = None  # None: one build job per variant
    install: str | None = None  # the pip requirement for wheelfactory; None: this version
    python: str = DEFAULT_PYTHON  # the runners' Python (setup-python)
    watch_torch: bool = False  # the scheduled watch-torch job (ci/watch_torch.py)
    attest: bool = False  # the index job signs every wheel's provenance (ATTEST)

    def __post_init__(self) -> None:
        if not re.fullmatch(r"3\.\d{1,2}", self.python):
            raise UsageError(
                f"--python {self.python!r}: expected a CPython version such as {DEFAULT_PYTHON}"
            )
        if self.shards is not None and self.shards < 1:
            raise UsageError(f"--shards {self.shards}: N must be at least 1")
        if self.install is not None and not self.install.strip():
            raise UsageError(
                "--install: give a pip requirement, e.g. wheelfactory==0.1.0 or . (this checkout)"
            )

    @property
    def install_spec(self) -> str:
        return self.install if self.install is not None else default_install()

    def args(self) -> list[str]:
        """The options of ``wheelfactory ci github`` that give this workflow (defaults left out)."""
        args = ["-m", self.matrix_file]
        if self.compat_file is not None:
            args += ["--compat", self.compat_file]
        if self.shards is not None:
            args += ["--shards", str(self.shards)]
        if self.install is not None and self.install != default_install():
            args += ["--install", self.install]
        if self.python != DEFAULT_PYTHON:
            args += ["--python", self.python]
        if self.watch_torch:
            args.append("--watch-torch")
        if self.attest:
            args.append("--attest")
        return args

    def command(self, *extra: str) -> str:
        return shlex.join(["wheelfactory", "ci", "github", *self.args(), *extra])

    @property
    def regenerate(self) -> str:
        return self.command("--workflow", self.workflow_file)

    @property
    def check(self) -> str:
        return self.command("--check", self.workflow_file)


def default_install() -> str:
    return f"wheelfactory=={__version__}"


def render_workflow(plan: Plan, matrix: Matrix, options: GithubOptions) -> str:
    """The workflow file: a header comment, then the YAML of ``workflow``."""
    header = [
        f"# Generated by `wheelfactory ci github` from the plan of {options.matrix_file}: do not edit it by hand.",
        "# After changing the matrix (or upgrading wheelfactory), regenerate it and commit the result:",
        f"#   {options.regenerate}",
        "# The plan job fails while this file is not what the plan generates.",
    ]
    return "\n".join(header) + "\n" + dump(workflow(plan, matrix, options))


def stale_diff(committed: str, generated: str, path: str) -> str:
    """A unified diff from the committed workflow to the generated one; "" when they are equal."""
    lines = difflib.unified_diff(
        committed.splitlines(keepends=True),
        generated.splitlines(keepends=True),
        fromfile=f"{path} (committed)",
        tofile=f"{path} (generated)",
    )
    return "".join(line if line.endswith("\n") else line + "\n" for line in lines)


def write_workflow(text: str, path: Path) -> None:
    """Write the workflow atomically (support/atomic.py); makes its directory. A path that cannot
    name a file is a UsageError (exit 2); a failed write (no space, a read-only directory) is
    WriteFailed (exit 9), one line, the old file kept and no temp file left."""
    # os.path.isdir, not Path.is_dir: it answers False for a name too long rather than raising.
    if os.path.isdir(path):
        raise UsageError(
            f"cannot write the workflow {path}: it is a directory; name a file, "
            f"e.g. {path / 'wheels.yml'}"
        )
    atomic.make_parent(path, what="the workflow")
    atomic.write_text(path, text, what="the workflow")


# The workflow as data.


def workflow(plan: Plan, matrix: Matrix, options: GithubOptions) -> dict[str, Any]:
    variants = plan.variants
    if not variants:
        raise UsageError(
            f"the plan of {options.matrix_file} has no variants: nothing to build "
            f"(`wheelfactory plan -m {options.matrix_file} --explain` says why)"
        )
    if options.shards is None and len(variants) > MAX_MATRIX_JOBS:
        raise UsageError(
            f"{len(variants)} variants, and a GitHub matrix makes at most {MAX_MATRIX_JOBS} jobs: "
            f"use --shards N (N <= {MAX_MATRIX_JOBS})"
        )
    if options.shards is not None and options.shards > min(len(variants), MAX_MATRIX_JOBS):
        limit = min(len(variants), MAX_MATRIX_JOBS)
        raise UsageError(
            f"--shards {options.shards}: the plan has {len(variants)} variant(s), so N must be "
            f"1 to {limit} (every shard builds at least one variant)"
        )
    paths = [
        options.matrix_file,
        options.workflow_file,
        *([options.compat_file] if options.compat_file else []),
    ]
    triggers: dict[str, Any] = {
        "push": {"tags": ["v*"]},
        # A pull request that touches what the workflow is generated from runs the plan job
        # only: the plan, and the check that this file is current.
        "pull_request": {"paths": paths},
        "workflow_dispatch": None,
    }
    jobs = {
        "plan": _plan_job(options),
        "build": _build_job(plan, matrix, options),
        "index": _index_job(options),
    }
    publishing = publish_plan(matrix.publish, options.matrix_file)
    if publishing is not None:
        jobs["publish"] = publish_job(
            publishing, setup_steps(options.python, options.install_spec), _matrix_args(options)
        )
    if options.watch_torch:
        # The schedule runs the watch job only: the plan job (and so the builds after it) is
        # skipped on a scheduled run.
        triggers["schedule"] = [{"cron": watch_torch.SCHEDULE}]
        jobs["plan"] = {**jobs["plan"], "if": "${{ github.event_name != 'schedule' }}"}
        jobs["watch-torch"] = watch_torch.watch_job(
            watch_torch.with_token_checkout(
                setup_steps(options.python, options.install_spec), CHECKOUT
            ),
            options.compat_file,
            PLAN_RUNNER,
        )
    return {
        "name": "wheels",
        "on": triggers,
        "permissions": {"contents": "read"},
        "concurrency": {
            "group": "${{ github.workflow }}-${{ github.ref }}",
            "cancel-in-progress": "${{ github.event_name == 'pull_request' }}",
        },
        "env": {"PIP_DISABLE_PIP_VERSION_CHECK": "1"},
        "jobs": jobs,
    }


def _matrix_args(options: GithubOptions) -> list[str]:
    return [
        "-m",
        options.matrix_file,
        *(["--compat", options.compat_file] if options.compat_file else []),
    ]


def _plan_job(options: GithubOptions) -> dict[str, Any]:
    outputs = {"matrix": "${{ steps.emit.outputs.matrix }}"}
    emit = [
        f"matrix=$({wf('plan', *_matrix_args(options), '--format', 'github')})",
        'echo "matrix=$matrix" >> "$GITHUB_OUTPUT"',
    ]
    if options.shards is not None:
        outputs["shards"] = "${{ steps.emit.outputs.shards }}"
        emit.append(
            f'echo {shlex.quote("shards=" + compact_json(_shard_matrix(options.shards)))} >> "$GITHUB_OUTPUT"'
        )
    return {
        "name": "plan",
        "runs-on": PLAN_RUNNER,
        "outputs": outputs,
        "steps": [
            *setup_steps(options.python, options.install_spec),
            {"name": "Show the plan", "run": wf("plan", *_matrix_args(options), "--explain")},
            {"name": "Check that this workflow is what the plan generates", "run": options.check},
            {"name": "Emit the matrix", "id": "emit", "run": script(emit)},
        ],
    }


def _build_job(plan: Plan, matrix: Matrix, options: GithubOptions) -> dict[str, Any]:
    variants = plan.variants
    build_args = [*_matrix_args(options), "--engine", "docker"]
    if options.shards is None:
        strategy_matrix: dict[str, Any] = {"include": [Flow(entry) for entry in _include(plan)]}
        name = "build ${{ matrix.id }}"
        artifact = ARTIFACT_PREFIX + "${{ matrix.id }}"
        env = {"VARIANT": "${{ matrix.id }}"}
        build = f'{wf("build", *build_args)} --only "$VARIANT" -o {DIST}'
        runner = by_variant(variants, lambda v: RUNNERS[v.key.arch], "arch", lambda v: v.key.arch)
        timeout = by_variant(variants, _minutes, "backend", lambda v: v.key.backend.kind)
        accelerated = condition(
            variants, lambda v: v.key.backend.kind != "cpu", "matrix.backend != 'cpu'"
        )
    else:
        count = options.shards
        archs = sorted({v.key.arch for v in variants})
        if len(archs) > 1:
            raise UsageError(
                f"--shards {count}: the plan has {' and '.join(archs)} variants, and a shard mixes "
                f"them (round-robin) while a runner builds for its own arch; generate one job per "
                f"variant (no --shards), or plan one arch per matrix file"
            )
        strategy_matrix = _shard_matrix(count)
        name = f"build shard ${{{{ matrix.shard }}}}/{count}"
        artifact = ARTIFACT_PREFIX + "shard-${{ matrix.shard }}"
        env = {"SHARD": "${{ matrix.shard }}"}
        build = f'{wf("build", *build_args)} --shard "$SHARD/{count}" -o {DIST}'
        runner = RUNNERS[archs[0]]
        timeout = max(
            min(JOB_MINUTES_MAX, sum(_minutes(v) for v in plan.shard(i, count).variants))
            for i in range(1, count + 1)
        )
        accelerated = any(v.key.backend.kind != "cpu" for v in variants)
    steps: list[dict[str, Any]] = []
    if accelerated is not False:
        free: dict[str, Any] = {
            "name": "Free disk space for the toolkit, torch and the build images"
        }
        if accelerated is not True:
            free["if"] = accelerated
        free["run"] = shlex.join(["sudo", "rm", "-rf", *UNUSED_SDKS])
        steps.append(free)
    steps += setup_steps(options.python, options.install_spec)
    steps += _debian_bases(matrix, variants, sharded=options.shards is not None)
    steps += [
        {"name": "Build", "env": env, "run": build},
        {
            "name": "Upload the wheels, the manifest and the logs",
            "if": "${{ always() }}",
            "uses": UPLOAD,
            "with": {"name": artifact, "path": f"{DIST}/", "if-no-files-found": "error"},
        },
    ]
    return {
        "name": name,
        "needs": "plan",
        # A pull request runs the plan job only (see `on`).
        "if": "${{ github.event_name != 'pull_request' }}",
        "runs-on": runner,
        "timeout-minutes": timeout,
        "strategy": {"fail-fast": False, "matrix": strategy_matrix},
        "steps": steps,
    }


def _index_job(options: GithubOptions) -> dict[str, Any]:
    job: dict[str, Any] = {
        "name": "index",
        "needs": "build",
        # After every build job, failed ones included (merge keeps their logs, index lists what
        # was built), but not when the builds were skipped (a stale workflow, a pull request).
        "if": "${{ !cancelled() && needs.build.result != 'skipped' }}",
        "runs-on": PLAN_RUNNER,
    }
    attest: list[dict[str, Any]] = []
    if options.attest:
        # Only this job may mint the OIDC token the signature needs; the builds stay read-only.
        job["permissions"] = {"contents": "read", "id-token": "write", "attestations": "write"}
        # The wheels the index publishes (per-variant and variant-labelled), not dist/: index
        # keeps out a wheel that does not match the manifest or its record, and that one stays unsigned.
        attest = [
            {
                "name": "Sign the published wheels' provenance (Sigstore)",
                "uses": ATTEST,
                "with": {"subject-path": f"{SITE}/*/simple/*/*.whl"},
            }
        ]
    job["steps"] = [
        *setup_steps(options.python, options.install_spec),
        *merge_builds(),
        {
            "name": "Write the index",
            "run": script([wf("index", "-o", DIST), f"cp -RL {DIST}/index {SITE}"]),
        },
        *attest,
        {"name": "Upload the index", "uses": UPLOAD, "with": {"name": "index", "path": f"{SITE}/"}},
        # The matrix at a glance: the grid with every variant's status, linking to its log.
        {
            "name": "Write the matrix report",
            "if": "${{ always() }}",
            "run": wf("report", *_matrix_args(options), "-o", DIST),
        },
        {
            "name": "Upload the matrix report",
            "if": "${{ always() }}",
            "uses": UPLOAD,
            "with": {
                "name": "report",
                "path": f"{DIST}/report.html\n{DIST}/report.svg\n{DIST}/*/build.log\n",
                "if-no-files-found": "warn",
            },
        },
    ]
    return job


def _debian_bases(
    matrix: Matrix, variants: Sequence[Variant], *, sharded: bool
) -> list[dict[str, Any]]:
    """``[build] debian_base``: the offline base images are made with debootstrap, which needs
    root: made first with sudo, the build then finds them by tag. Every job needs the arch's
    base; a CUDA variant whose toolkit comes from a Debian suite also needs that suite's."""
    build = matrix.build
    if not build.debian_base:
        return []
    mirror = (build.debian_mirror or "").rstrip("/")
    extra: dict[str, list[str]] = {}  # suite -> the builds (cu124) that need it
    for variant in variants:
        suite = debian_toolkit(variant)
        if suite is not None and suite != build.debian_base:
            builds = extra.setdefault(suite, [])
            if variant.backend.build_name not in builds:
                builds.append(variant.backend.build_name)
    suites = [build.debian_base]
    env: dict[str, str] = {}
    everyone = all(debian_toolkit(v) in extra for v in variants)
    if sharded or (len(extra) == 1 and everyone):
        suites += sorted(extra)
    elif extra:
        choices = " || ".join(
            f"contains(fromJSON('{compact_json(builds)}'), matrix.build) && '{suite}'"
            for suite, builds in sorted(extra.items())
        )
        env["TOOLKIT_SUITE"] = f"${{{{ {choices} || '' }}}}"
    make = shlex.join(
        [
            "base-image",
            "--suite",
            "SUITE",
            *(["--mirror", mirror] if mirror else []),
            "--cache-dir",
            "CACHE",
        ]
    )
    make = make.replace("SUITE", '"$suite"').replace("CACHE", '"$RUNNER_TEMP/wheelfactory"')
    listed = " ".join(shlex.quote(s) for s in suites) + (
        ' ${TOOLKIT_SUITE:+"$TOOLKIT_SUITE"}' if env else ""
    )
    step: dict[str, Any] = {"name": "Make the offline Debian base images ([build] debian_base)"}
    if env:
        step["env"] = env
    step["run"] = script(
        [
            "sudo apt-get update -qq",
            "sudo apt-get install -y -qq debootstrap",
            f"for suite in {listed}; do",
            f'  sudo "$(command -v wheelfactory)" {make}',
            "done",
        ]
    )
    return [step]


def _include(plan: Plan) -> list[dict[str, object]]:
    include = plan.github_matrix()["include"]
    assert isinstance(include, list)
    return include


def _shard_matrix(count: int) -> dict[str, Any]:
    return {"shard": FlowList(range(1, count + 1))}


def _minutes(variant: Variant) -> int:
    return CPU_MINUTES if variant.key.backend.kind == "cpu" else ACCELERATOR_MINUTES
