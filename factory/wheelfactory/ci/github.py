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
    PyPI is a target and only the secrets the other targets need (``publish_plan``).

``watch-torch`` (``--watch-torch``)
    a weekly scheduled job that runs ``compat refresh`` and fails, or opens a pull request with
    the refreshed table, when new torch releases are out (ci/watch_torch.py).

Tags ``v*`` and manual runs build; a pull request that touches the matrix or the workflow runs
the plan job only. With ``[build] debian_base`` each build job first makes the offline base
images its variants need, with sudo (debootstrap needs root; the build then finds them by tag).
"""

from __future__ import annotations

import difflib
import json
import os
import re
import shlex
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, TypeVar

import yaml

from wheelfactory import __version__
from wheelfactory.ci import watch_torch
from wheelfactory.errors import UsageError, WriteFailed
from wheelfactory.images.spec import debian_toolkit
from wheelfactory.plan.expand import Plan
from wheelfactory.plan.identity import Variant
from wheelfactory.plan.matrix import Matrix
from wheelfactory.plan.publish_config import (
    LABEL_REFUSING_ALIASES,
    BucketTarget,
    DirectoryTarget,
    PublishConfig,
    UploadTarget,
)
from wheelfactory.support import atomic

DEFAULT_WORKFLOW = ".github/workflows/wheels.yml"
DEFAULT_PYTHON = "3.12"
DIST = "dist"  # the build output in every job: `-o dist`
PARTS = "parts"  # where the index job downloads the build artifacts, one directory each
SITE = "site"  # the index job's copy of dist/index, symlinks resolved, for upload-artifact
ARTIFACT_PREFIX = "wheels-"
MAX_MATRIX_JOBS = 256  # GitHub: "A matrix can generate a maximum of 256 jobs per workflow run"
JOB_MINUTES_MAX = 360  # GitHub-hosted runners stop a job after 6 hours
CPU_MINUTES = 60  # a job's timeout per variant: a CPU build is minutes,
ACCELERATOR_MINUTES = 240  # nvcc for a dozen archs on a 4-core runner is hours
RUNNERS = {"x86_64": "ubuntu-latest", "aarch64": "ubuntu-24.04-arm"}  # Docker is on both
PLAN_RUNNER = RUNNERS["x86_64"]
# Pinned to major versions: the runner resolves each to its newest release.
CHECKOUT = "actions/checkout@v4"
SETUP_PYTHON = "actions/setup-python@v5"
UPLOAD = "actions/upload-artifact@v4"
DOWNLOAD = "actions/download-artifact@v4"
# Sigstore-signed SLSA build provenance from the workflow's own OIDC identity (no key to keep);
# verified with `gh attestation verify WHEEL --repo OWNER/REPO`.
ATTEST = "actions/attest-build-provenance@v4"
# Big preinstalled SDKs a CUDA build does not use; the toolkit, torch and the images need the room.
UNUSED_SDKS = (
    "/usr/share/dotnet",
    "/usr/local/lib/android",
    "/opt/ghc",
    "/opt/hostedtoolcache/CodeQL",
)
# The publish job. PyPI's trusted publisher (the project's Publishing settings) names the workflow
# file and this environment; twine (>= 6.1) then mints its upload token from the job's OIDC identity.
PYPI_ENVIRONMENT = "pypi"
# an upload server other than PyPI (twine reads them)
TWINE_SECRETS = ("TWINE_USERNAME", "TWINE_PASSWORD")
BUCKET_SECRETS = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")  # a bucket (boto3 reads them)
PUBLISHED_PREFIX = "published-"  # a directory target's pages, uploaded from the runner


T = TypeVar("T", int, str)


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


def repo_path(path: Path, option: str, *, cwd: Path | None = None) -> str:
    """``path`` as the workflow names it: relative to the repository root, which is where this
    command runs (the jobs run there too). An absolute path is made relative to the working
    directory; one outside it, or one that climbs out with ``..``, cannot be named in a workflow."""
    here = (cwd or Path.cwd()).resolve()
    if path.is_absolute():
        try:
            path = path.resolve().relative_to(here)
        except ValueError:
            raise UsageError(
                f"{option} {path}: not under the working directory {here}; run `wheelfactory ci "
                f"github` from the repository root, with paths inside it"
            ) from None
    text = PurePosixPath(os.path.normpath(path.as_posix())).as_posix()
    if text == ".." or text.startswith("../"):
        raise UsageError(
            f"{option} {path}: outside the repository root (the working directory); the jobs "
            f"run at the root of the checkout"
        )
    return text


def render_workflow(plan: Plan, matrix: Matrix, options: GithubOptions) -> str:
    """The workflow file: a header comment, then the YAML of ``workflow``."""
    header = [
        f"# Generated by `wheelfactory ci github` from the plan of {options.matrix_file}: do not edit it by hand.",
        "# After changing the matrix (or upgrading wheelfactory), regenerate it and commit the result:",
        f"#   {options.regenerate}",
        "# The plan job fails while this file is not what the plan generates.",
    ]
    body = yaml.dump(
        workflow(plan, matrix, options),
        Dumper=_Dumper,
        sort_keys=False,
        default_flow_style=False,
        width=1 << 20,
        allow_unicode=False,
    )
    return "\n".join(header) + "\n" + body


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
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise UsageError(
            f"cannot write the workflow {path}: {path.parent} is not a directory"
        ) from None
    except OSError as exc:
        raise WriteFailed(
            f"cannot write the workflow {path}: cannot make {path.parent} ({exc.strerror or exc})"
        ) from None
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
        jobs["publish"] = _publish_job(options, publishing)
    if options.watch_torch:
        # The schedule runs the watch job only: the plan job (and so the builds after it) is
        # skipped on a scheduled run.
        triggers["schedule"] = [{"cron": watch_torch.SCHEDULE}]
        jobs["plan"] = {**jobs["plan"], "if": "${{ github.event_name != 'schedule' }}"}
        jobs["watch-torch"] = watch_torch.watch_job(
            watch_torch.with_token_checkout(_setup(options), CHECKOUT),
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


def _setup(options: GithubOptions) -> list[dict[str, Any]]:
    return [
        {"uses": CHECKOUT},
        {"uses": SETUP_PYTHON, "with": {"python-version": options.python}},
        {
            "name": "Install wheelfactory",
            "run": f"python -m pip install {shlex.quote(options.install_spec)}",
        },
    ]


def _wf(*args: str) -> str:
    return shlex.join(["wheelfactory", *args])


def _matrix_args(options: GithubOptions) -> list[str]:
    return [
        "-m",
        options.matrix_file,
        *(["--compat", options.compat_file] if options.compat_file else []),
    ]


def _plan_job(options: GithubOptions) -> dict[str, Any]:
    outputs = {"matrix": "${{ steps.emit.outputs.matrix }}"}
    emit = [
        f"matrix=$({_wf('plan', *_matrix_args(options), '--format', 'github')})",
        'echo "matrix=$matrix" >> "$GITHUB_OUTPUT"',
    ]
    if options.shards is not None:
        outputs["shards"] = "${{ steps.emit.outputs.shards }}"
        emit.append(
            f'echo {shlex.quote("shards=" + _json(_shard_matrix(options.shards)))} >> "$GITHUB_OUTPUT"'
        )
    return {
        "name": "plan",
        "runs-on": PLAN_RUNNER,
        "outputs": outputs,
        "steps": [
            *_setup(options),
            {"name": "Show the plan", "run": _wf("plan", *_matrix_args(options), "--explain")},
            {"name": "Check that this workflow is what the plan generates", "run": options.check},
            {"name": "Emit the matrix", "id": "emit", "run": _script(emit)},
        ],
    }


def _build_job(plan: Plan, matrix: Matrix, options: GithubOptions) -> dict[str, Any]:
    variants = plan.variants
    build_args = [*_matrix_args(options), "--engine", "docker"]
    if options.shards is None:
        strategy_matrix: dict[str, Any] = {"include": [_Flow(entry) for entry in _include(plan)]}
        name = "build ${{ matrix.id }}"
        artifact = ARTIFACT_PREFIX + "${{ matrix.id }}"
        env = {"VARIANT": "${{ matrix.id }}"}
        build = f'{_wf("build", *build_args)} --only "$VARIANT" -o {DIST}'
        runner = _by_variant(variants, lambda v: RUNNERS[v.key.arch], "arch", lambda v: v.key.arch)
        timeout = _by_variant(variants, _minutes, "backend", lambda v: v.key.backend.kind)
        accelerated = _condition(
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
        build = f'{_wf("build", *build_args)} --shard "$SHARD/{count}" -o {DIST}'
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
    steps += _setup(options)
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
        *_setup(options),
        {
            "name": "Download the builds",
            "uses": DOWNLOAD,
            "with": {"pattern": ARTIFACT_PREFIX + "*", "path": PARTS},
        },
        {"name": "Merge them into one dist", "run": f"wheelfactory merge {PARTS}/* -o {DIST}"},
        {
            "name": "Write the index",
            "run": _script([_wf("index", "-o", DIST), f"cp -RL {DIST}/index {SITE}"]),
        },
        *attest,
        {"name": "Upload the index", "uses": UPLOAD, "with": {"name": "index", "path": f"{SITE}/"}},
        # The matrix at a glance: the grid with every variant's status, linking to its log.
        {
            "name": "Write the matrix report",
            "if": "${{ always() }}",
            "run": _wf("report", *_matrix_args(options), "-o", DIST),
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


@dataclass(frozen=True)
class PublishPlan:
    """What the publish job needs from the targets of ``[publish]``."""

    trusted: bool  # PyPI is a target: OIDC (id-token: write) in the PYPI_ENVIRONMENT, no token
    # the repository secrets the other targets read, as environment variables
    secrets: tuple[str, ...]
    # directory targets, relative to the repository root: uploaded as artifacts
    directories: tuple[str, ...]


def publish_plan(
    config: PublishConfig, matrix_file: str, *, cwd: Path | None = None
) -> PublishPlan | None:
    """None without targets (no publish job). A target the job could not reach is a UsageError:
    a twine alias other than PyPI's (the runner has no ~/.pypirc), PyPI beside another upload
    server (twine would send that server's TWINE_PASSWORD to PyPI instead of minting a token), a
    directory outside the repository (``cwd``, where ``ci github`` runs, as for every path it names)."""
    if not config.targets:
        return None
    where = f"{matrix_file} [publish]"
    uploads = [t for t in config.targets if isinstance(t, UploadTarget)]
    for target in uploads:
        if target.repository is not None and target.repository not in LABEL_REFUSING_ALIASES:
            raise UsageError(
                f"{where}: the twine alias {target.repository!r} is read from ~/.pypirc, which a "
                f"GitHub runner does not have; write the server's upload URL instead"
            )
    pypi = [t for t in uploads if _trusted(t)]
    others = [t for t in uploads if not _trusted(t)]
    if pypi and others:
        raise UsageError(
            f"{where}: PyPI ({pypi[0]}) and another upload server ({others[0]}) cannot share the "
            f"publish job: PyPI's trusted publishing needs no TWINE_PASSWORD and the other server's "
            f"would be sent to PyPI; publish to one of them from this workflow (e.g. a second "
            f"matrix file for the other)"
        )
    secrets: list[str] = []
    if others:
        secrets += TWINE_SECRETS
    if any(isinstance(t, BucketTarget) for t in config.targets):
        secrets += BUCKET_SECRETS
    directories = []
    for directory in (t for t in config.targets if isinstance(t, DirectoryTarget)):
        try:
            directories.append(repo_path(directory.path, "", cwd=cwd))
        except UsageError:
            raise UsageError(
                f"{where}: the directory {directory.path} is outside the repository, and the "
                f"publish job runs on a GitHub runner; name a directory in the repository (its "
                f"pages are uploaded as an artifact) or publish there by hand"
            ) from None
    return PublishPlan(bool(pypi), tuple(secrets), tuple(directories))


def _trusted(target: UploadTarget) -> bool:
    """PyPI or TestPyPI: the servers that refuse local version labels take OIDC tokens."""
    return target.repository in LABEL_REFUSING_ALIASES or not target.local_labels


def _publish_job(options: GithubOptions, plan: PublishPlan) -> dict[str, Any]:
    job: dict[str, Any] = {
        "name": "publish",
        # The builds too: a tag publishes every variant or none (`index` also runs after failed builds).
        "needs": ["build", "index"],
        "if": "${{ startsWith(github.ref, 'refs/tags/') && needs.build.result == 'success' "
        "&& needs.index.result == 'success' }}",
        "runs-on": PLAN_RUNNER,
        # Publishing reads what the target holds and writes every page from old plus new files: two
        # tags publishing at once would each drop the other's files. Queued, never cancelled.
        "concurrency": {"group": "${{ github.workflow }}-publish", "cancel-in-progress": False},
    }
    if plan.trusted:
        # OIDC for this job alone; the environment is the one PyPI's trusted publisher names.
        job["permissions"] = {"id-token": "write", "contents": "read"}
        job["environment"] = PYPI_ENVIRONMENT
    publish: dict[str, Any] = {"name": "Publish"}
    if plan.secrets:
        publish["env"] = {name: f"${{{{ secrets.{name} }}}}" for name in plan.secrets}
    publish["run"] = _wf("publish", "-o", DIST, *_matrix_args(options))
    uploads = [
        {
            "name": f"Upload the published directory {path}",
            "uses": UPLOAD,
            "with": {"name": f"{PUBLISHED_PREFIX}{number}", "path": f"{path}/"},
        }
        for number, path in enumerate(plan.directories, start=1)
    ]
    # The merge again, from the build artifacts the index job merged, rather than a merged dist/
    # uploaded by it: those artifacts are already stored, so this costs one download and a local
    # copy, where an artifact of dist/ would upload and store every wheel (GBs with CUDA) a second time.
    job["steps"] = [
        *_setup(options),
        {
            "name": "Install what publishing needs (twine, boto3)",
            "run": "python -m pip install "
            + " ".join(shlex.quote(r) for r in publish_requirements()),
        },
        {
            "name": "Download the builds",
            "uses": DOWNLOAD,
            "with": {"pattern": ARTIFACT_PREFIX + "*", "path": PARTS},
        },
        {"name": "Merge them into one dist", "run": f"wheelfactory merge {PARTS}/* -o {DIST}"},
        {"name": "Write the index", "run": _wf("index", "-o", DIST)},
        publish,
        *uploads,
    ]
    return job


def publish_requirements() -> list[str]:
    """The ``publish`` extra's requirements, as this wheelfactory declares them: installed beside
    whatever --install names (a version, a path, a URL), to which an extra cannot always be added."""
    from importlib.metadata import PackageNotFoundError, requires

    try:
        declared = requires("wheelfactory") or []
    except PackageNotFoundError:  # a source tree never installed: the bounds pyproject.toml gives
        declared = []
    found = sorted(
        r.split(";", 1)[0].strip()
        for r in declared
        if re.search(r"extra\s*==\s*['\"]publish['\"]", r)
    )
    return found or ["twine>=6.1", "boto3>=1.34"]


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
            f"contains(fromJSON('{_json(builds)}'), matrix.build) && '{suite}'"
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
    step["run"] = _script(
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
    return {"shard": _FlowList(range(1, count + 1))}


def _minutes(variant: Variant) -> int:
    return CPU_MINUTES if variant.key.backend.kind == "cpu" else ACCELERATOR_MINUTES


def _by_variant(
    variants: Sequence[Variant],
    value: Callable[[Variant], T],
    field: str,
    key: Callable[[Variant], str],
) -> T | str:
    """A job setting that depends on the variant: the value itself when every variant has the same,
    else an expression over ``matrix.<field>``: a branch per value of the field whose setting is not
    the last one's, then the last one's as the default."""
    values: dict[str, T] = {}
    for variant in variants:
        values.setdefault(key(variant), value(variant))
    ordered = sorted(values.items())
    default = ordered[-1][1]
    if all(v == default for _, v in ordered):
        return default
    branches: list[str] = [
        f"matrix.{field} == {_literal(k)} && {_literal(v)}" for k, v in ordered if v != default
    ]
    return "${{ " + " || ".join([*branches, _literal(default)]) + " }}"


def _condition(
    variants: Sequence[Variant], predicate: Callable[[Variant], bool], expression: str
) -> bool | str:
    """True or False when ``predicate`` holds for all or none of the variants, else a step ``if``."""
    held = {predicate(v) for v in variants}
    return held.pop() if len(held) == 1 else f"${{{{ {expression} }}}}"


def _literal(value: object) -> str:
    if isinstance(value, int):
        return str(value)
    return "'" + str(value).replace("'", "''") + "'"


def _json(value: object) -> str:
    return json.dumps(value, separators=(",", ":"))


def _script(lines: Sequence[str]) -> str:
    return "\n".join(lines) + "\n"


# YAML: block style with literal `|` scripts; a matrix entry is one flow mapping per line (a diff
# shows one line per variant added or dropped); the key `on` unquoted, as GitHub's docs write it.


class _Flow(dict[str, object]):
    """A mapping written on one line."""


class _FlowList(list[int]):
    """A list written on one line."""


class _Dumper(yaml.SafeDumper):
    def increase_indent(self, flow: bool = False, indentless: bool = False) -> None:
        # list items indented under their key, as GitHub's docs do
        super().increase_indent(flow, False)


def _represent_str(dumper: yaml.SafeDumper, data: str) -> yaml.Node:
    style = "|" if "\n" in data else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style=style)


def _represent_flow(dumper: yaml.SafeDumper, data: Mapping[str, object]) -> yaml.Node:
    return dumper.represent_mapping("tag:yaml.org,2002:map", data, flow_style=True)


def _represent_flow_list(dumper: yaml.SafeDumper, data: Sequence[int]) -> yaml.Node:
    return dumper.represent_sequence("tag:yaml.org,2002:seq", data, flow_style=True)


_Dumper.add_representer(str, _represent_str)
_Dumper.add_representer(_Flow, _represent_flow)
_Dumper.add_representer(_FlowList, _represent_flow_list)
# YAML 1.1 reads a bare `on` as true, so PyYAML quotes the string; GitHub reads YAML 1.2 (`on` is
# a string), and `on:` is how workflows are written. Only the key `on` is affected here.
_BOOL = "tag:yaml.org,2002:bool"
_Dumper.yaml_implicit_resolvers = {
    first: list(resolvers) for first, resolvers in yaml.SafeDumper.yaml_implicit_resolvers.items()
}
for _first in "oO":
    _Dumper.yaml_implicit_resolvers[_first] = [
        (tag, re.compile(r"^(?:off|Off|OFF)$") if tag == _BOOL else regexp)
        for tag, regexp in _Dumper.yaml_implicit_resolvers.get(_first, [])
    ]
