"""``[publish]``'s job in the generated workflow (when matrix.toml has targets): on a tag, after
the builds and the index job succeeded, it redoes the merge and the index from the build artifacts
and runs ``wheelfactory publish``, with PyPI's trusted publishing (OIDC) where PyPI is a target
and only the secrets the other targets need (``publish_plan``). Pure: options in, job out.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from wheelfactory.ci.workflow import DIST, PLAN_RUNNER, UPLOAD, merge_builds, repo_path, wf
from wheelfactory.errors import UsageError
from wheelfactory.plan.publish_config import (
    LABEL_REFUSING_ALIASES,
    BucketTarget,
    DirectoryTarget,
    PublishConfig,
    UploadTarget,
)

# PyPI's trusted publisher (the project's Publishing settings) names the workflow file and this
# environment; twine (>= 6.1) then mints its upload token from the job's OIDC identity.
PYPI_ENVIRONMENT = "pypi"
# an upload server other than PyPI (twine reads them)
TWINE_SECRETS = ("TWINE_USERNAME", "TWINE_PASSWORD")
BUCKET_SECRETS = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")  # a bucket (boto3 reads them)
PUBLISHED_PREFIX = "published-"  # a directory target's pages, uploaded from the runner


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


def publish_job(
    plan: PublishPlan, setup: list[dict[str, Any]], matrix_args: list[str]
) -> dict[str, Any]:
    """The ``publish`` job. ``setup``: the steps that check out and install wheelfactory;
    ``matrix_args``: how its commands name the matrix (and the compatibility table)."""
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
    publish["run"] = wf("publish", "-o", DIST, *matrix_args)
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
        *setup,
        {
            "name": "Install what publishing needs (twine, boto3)",
            "run": "python -m pip install "
            + " ".join(shlex.quote(r) for r in publish_requirements()),
        },
        *merge_builds(),
        {"name": "Write the index", "run": wf("index", "-o", DIST)},
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
