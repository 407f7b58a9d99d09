"""Publishing to a server with the upload API (devpi, pypiserver, Artifactory, PyPI) through
twine, used as a library.

Where the wheels go (``plan_upload``, pure apart from hashing the default wheels' files):

- a per-variant target (``{variant}`` in its URL) gets each variant's wheels in that variant's
  own index (devpi: one index per variant under a user);
- a single-index target gets every variant's wheels (their local labels keep them apart);
- a target that refuses local labels (``local_labels = false``: PyPI) gets only the default
  wheels, rewritten without their label (publish/pypi_default.py); a target that takes labels
  never gets them (there, the labelled wheel of the same variant is already listed).

Files are immutable, as PyPI rules: before anything is uploaded, what each index already holds is
read (``read_held``, publish/held.py: its simple page, PEP 691 JSON or PEP 503 HTML; an index that is not there
at all stops the publish here). A file it holds with the same sha256 is skipped, so a rerun
completes an interrupted publish and uploads nothing new; one it holds with other bytes refuses
the whole publish (exit 7) and nothing is uploaded anywhere.

A twine alias (``pypi``, a ``.pypirc`` name) without ``index_url`` has no page to read: the
server decides. twine's ``skip_existing`` is set where twine supports it (PyPI and its test
instance), so a file already there is skipped, but one with other bytes is not caught
beforehand; give the target an ``index_url`` to have it checked.

Credentials are twine's: ``TWINE_USERNAME`` / ``TWINE_PASSWORD`` (read by twine's own option
parser, as its CLI does), ``.pypirc``, keyring, or trusted publishing; never prompted for. A
failure is one PublishError line with any password in it masked.

twine prints through rich and logs through ``logging``: while it runs, both are captured, so that
they do not mix with the caller's output; progress goes through ``say``.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import logging
import os
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from packaging.utils import canonicalize_name, parse_wheel_filename

from wheelfactory.errors import EnvironmentProblem, PublishError
from wheelfactory.plan.compile_cache_settings import mask_password
from wheelfactory.plan.publish_config import VARIANT_FIELD, UploadTarget
from wheelfactory.project.keys import file_sha256
from wheelfactory.publish.collect import IndexedWheel
from wheelfactory.publish.held import Deadline, one_line, read_held, within

if TYPE_CHECKING:  # twine is the publish extra's: imported where an upload runs
    from twine.settings import Settings


Say = Callable[[str], None]
# One twine call's deadline: a base, and a floor on the rate its files are sent at.
UPLOAD_BASE = 300.0
UPLOAD_RATE = 256 << 10  # bytes per second


@dataclass(frozen=True)
class UploadFile:
    path: Path
    filename: str
    project: str  # canonical name
    sha256: str
    variant: str | None  # the variant id; None for a wheel without its label (PyPI's default)


@dataclass(frozen=True)
class IndexUpload:
    """What one index of the target gets: ``upload`` is sent, ``present`` is already there."""

    variant: str | None  # the variant whose index it is; None: the target's one index
    upload_url: str | None  # None: twine's alias ``repository`` gives it
    repository: str | None
    simple_url: str | None  # where what it holds was read; None: not read (the server decides)
    upload: tuple[UploadFile, ...]
    present: tuple[UploadFile, ...]

    def __str__(self) -> str:
        return self.upload_url or f"repository {self.repository}"


@dataclass(frozen=True)
class UploadPlan:
    target: UploadTarget
    indexes: tuple[IndexUpload, ...]

    @property
    def to_upload(self) -> int:
        return sum(len(index.upload) for index in self.indexes)

    @property
    def present(self) -> int:
        return sum(len(index.present) for index in self.indexes)


@dataclass(frozen=True)
class UploadResult:
    uploaded: int  # files sent (0 on a dry run)
    skipped: int  # files the target already held with the same bytes
    plan: UploadPlan
    dry_run: bool = False

    def __str__(self) -> str:
        if self.dry_run:
            return f"would upload {self.plan.to_upload} file(s), {self.skipped} already there"
        return f"uploaded {self.uploaded} file(s), {self.skipped} already there"


@dataclass(frozen=True)
class HeldQuery:
    """One page ``read_plan`` reads before planning: ``project`` at ``simple_url``;
    ``filenames``: the files planned there (the only ones hashed where the page gives no sha256)."""

    simple_url: str
    project: str
    filenames: frozenset[str]


# ---------------------------------------------------------------------------------------------
# planning (pure)
# ---------------------------------------------------------------------------------------------


def local_file(wheel: IndexedWheel) -> Path:
    """The wheel's file in dist/; PublishError for a wheel listed from what a target holds."""
    source: Path | None = wheel.source
    if source is None:
        raise PublishError(
            f"{wheel.filename}: no file of it in this dist to upload (it was read from a target)"
        )
    return source


def _dist_file(wheel: IndexedWheel) -> UploadFile:
    return UploadFile(
        local_file(wheel), wheel.filename, wheel.project, wheel.sha256, wheel.variant_id
    )


def _default_file(path: Path) -> UploadFile:
    name, _, _, _ = parse_wheel_filename(path.name)
    return UploadFile(path, path.name, canonicalize_name(name), file_sha256(path), None)


def _by_name(files: Iterable[UploadFile]) -> tuple[UploadFile, ...]:
    return tuple(sorted(files, key=lambda f: f.filename))


def _one_index(target: UploadTarget, files: Iterable[UploadFile]) -> list[IndexUpload]:
    """The target's one index, with every file that may go there (none planned yet)."""
    return [
        IndexUpload(None, target.url, target.repository, target.simple_url(""), _by_name(files), ())
    ]


def _indexes(
    target: UploadTarget, wheels: Sequence[IndexedWheel], default_wheels: Sequence[Path]
) -> list[IndexUpload]:
    in_url = VARIANT_FIELD in (target.url or "")
    in_index_url = VARIANT_FIELD in (target.index_url or "")
    if target.index_url and in_url != in_index_url:
        raise PublishError(
            f"{target}: url and index_url must both name {VARIANT_FIELD} or neither (one index "
            "per variant is read where it is uploaded to)"
        )
    if target.per_variant and not target.url:
        raise PublishError(
            f"{target}: a twine alias is one index; {VARIANT_FIELD} in index_url needs an upload "
            f"URL with {VARIANT_FIELD}"
        )
    if not target.local_labels:
        if target.per_variant:
            raise PublishError(
                f"{target}: local_labels = false takes only the unlabelled default wheels, which "
                f"have no variant index; give it one index (no {VARIANT_FIELD})"
            )
        if not default_wheels:
            raise PublishError(
                f"{target} refuses local version labels (local_labels = false), so only PyPI's "
                "default variant goes there, without its label, and there is none: set "
                "[publish] pypi_default = true (or name the variant)"
            )
        return _one_index(target, (_default_file(p) for p in default_wheels))
    if target.per_variant:
        variants = sorted({w.variant_id for w in wheels})
        return [
            IndexUpload(
                v,
                target.upload_url(v),
                None,
                target.simple_url(v),
                _by_name(_dist_file(w) for w in wheels if w.variant_id == v),
                (),
            )
            for v in variants
        ]
    if not wheels:
        return []
    return _one_index(target, (_dist_file(w) for w in wheels))


def held_queries(
    target: UploadTarget, wheels: Sequence[IndexedWheel], default_wheels: Sequence[Path]
) -> list[HeldQuery]:
    """The pages to read (``read_held``) before ``plan_upload``: one per index and project."""
    queries = []
    for index in _indexes(target, wheels, default_wheels):
        if index.simple_url is None:
            continue
        for project in sorted({f.project for f in index.upload}):
            queries.append(
                HeldQuery(
                    index.simple_url,
                    project,
                    frozenset(f.filename for f in index.upload if f.project == project),
                )
            )
    return queries


def plan_upload(
    target: UploadTarget,
    wheels: Sequence[IndexedWheel],
    default_wheels: Sequence[Path],
    held: Mapping[str, Mapping[str, str]],
) -> UploadPlan:
    """Which file goes to which index, and which each already holds (the module docstring says
    the rules). ``held``: per simple URL (``UploadTarget.simple_url``), file name -> sha256 of
    what that index holds; an index missing from it holds nothing. PublishError, naming the file,
    the index and both hashes, when an index holds a file of the same name with other bytes: then
    nothing may be uploaded anywhere."""
    planned: list[IndexUpload] = []
    conflicts: list[str] = []
    for index in _indexes(target, wheels, default_wheels):
        there = held.get(index.simple_url, {}) if index.simple_url else {}
        ours: dict[str, str] = {}
        upload: list[UploadFile] = []
        present: list[UploadFile] = []
        where = str(index)
        for item in index.upload:
            if item.filename in ours:
                if ours[item.filename] != item.sha256:
                    raise PublishError(
                        f"{item.filename}: this dist has two files of that name with other bytes "
                        f"for {where}; rebuild so that each wheel has its own name"
                    )
                continue
            ours[item.filename] = item.sha256
            theirs = there.get(item.filename)
            if theirs is None:
                upload.append(item)
            elif theirs == item.sha256:
                present.append(item)
            else:
                conflicts.append(
                    f"{item.filename}: {where} already holds it with sha256 {theirs}, "
                    f"this dist's is {item.sha256}"
                )
        planned.append(replace(index, upload=tuple(upload), present=tuple(present)))
    if conflicts:
        more = f" ({len(conflicts) - 1} more conflicting)" if len(conflicts) > 1 else ""
        raise PublishError(
            f"{conflicts[0]}{more}; a published file name is never reused with other bytes "
            f"(PyPI's rule), so nothing was uploaded to {target}: publish a new version"
        )
    return UploadPlan(target, tuple(planned))


def render_plan(plan: UploadPlan) -> list[str]:
    """The plan as lines (``--dry-run``): each file to upload and where, each skipped as there."""
    lines = []
    for index in plan.indexes:
        for item in index.upload:
            lines.append(f"upload {item.filename} -> {index}")
        for item in index.present:
            lines.append(f"skip {item.filename}: {index} already holds these bytes")
        if index.simple_url is None and index.upload:
            lines.append(
                f"note: what {index} holds is not read (it has no index_url): the server decides whether "
                "a file is already there"
            )
    if not lines:
        lines.append(f"nothing to upload to {plan.target}")
    return lines


# ---------------------------------------------------------------------------------------------
# uploading
# ---------------------------------------------------------------------------------------------


def _masked(text: str, secret: str | None) -> str:
    """``text`` fit to print: URL passwords and the password itself as ***."""
    if secret:
        text = text.replace(secret, "***")
    return re.sub(r"[a-zA-Z][a-zA-Z0-9+.-]*://\S+", lambda m: mask_password(m.group(0)), text)


def twine_settings(index: IndexUpload) -> Settings:
    """twine's settings for one index, made by twine's own option parser: it reads
    TWINE_USERNAME, TWINE_PASSWORD, TWINE_CERT... as twine's CLI does. Never interactive."""
    from twine import exceptions as twine_exceptions
    from twine.settings import Settings

    parser = argparse.ArgumentParser(add_help=False, exit_on_error=False)
    Settings.register_argparse_arguments(parser)
    args = ["--non-interactive", "--disable-progress-bar"]
    if index.upload_url:
        args += ["--repository-url", index.upload_url]
    else:  # the alias, not a TWINE_REPOSITORY_URL the environment may hold
        args += ["--repository", index.repository or "", "--repository-url", ""]
    settings = Settings.from_argparse(parser.parse_args(args))
    # nothing read: let twine skip what the server has, where it can tell
    if index.simple_url is None:
        settings.skip_existing = True
        try:
            settings.verify_feature_capability()
        except twine_exceptions.UnsupportedConfiguration:
            settings.skip_existing = False
    return settings


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


@contextlib.contextmanager
def _captured() -> Iterator[tuple[io.StringIO, _Records]]:
    """twine's rich prints (to sys.stdout) and its log records, kept from the caller's output."""
    out, records = io.StringIO(), _Records()
    logger = logging.getLogger("twine")
    propagate = logger.propagate
    logger.addHandler(records)
    logger.propagate = False
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            yield out, records
    finally:
        logger.removeHandler(records)
        logger.propagate = propagate


def _failure(index: IndexUpload, exc: Exception, secret: str | None) -> PublishError:
    import requests

    where = mask_password(str(index))
    if isinstance(exc, requests.HTTPError) and exc.response is not None:
        status = exc.response.status_code
        hint = ""
        if status in (401, 403):
            hint = "; check TWINE_USERNAME / TWINE_PASSWORD (or keyring) for it"
        elif status in (400, 409):
            hint = (
                "; the server may hold a file of that name already (rerun to compare what it holds)"
            )
        return PublishError(
            _masked(f"upload to {where} refused: HTTP {status} {exc.response.reason}{hint}", secret)
        )
    if isinstance(exc, requests.ConnectionError):
        return PublishError(f"cannot reach {where} to upload: is the server up and the URL right?")
    detail = _masked(one_line(str(exc)), secret) or type(exc).__name__
    return PublishError(f"upload to {where} failed: {detail}")


def upload_index(index: IndexUpload, *, say: Say) -> int:
    """Send ``index.upload`` with twine in one call; the number of files the server took (twine's
    skip_existing may skip some). PublishError, one masked line, when it fails; EnvironmentProblem
    where twine is not installed."""
    try:
        import requests
        from twine import exceptions as twine_exceptions
        from twine.commands.upload import upload as twine_upload
    except ImportError:
        raise EnvironmentProblem(
            f"uploading to {mask_password(str(index))} needs twine, which is not installed: "
            "pip install 'wheelfactory[publish]'"
        ) from None
    secret: str | None = None
    try:
        settings = twine_settings(index)
        secret = settings.auth.input.password
        for item in index.upload:
            say(f"uploading {item.filename} -> {index}")
        files = [str(item.path) for item in index.upload]
        with _captured() as (_, records):
            # twine's requests calls carry no timeout: a server that never answers would hold the publish
            within(
                upload_deadline(index),
                f"uploading {len(files)} file(s) to {mask_password(str(index))}",
                lambda: twine_upload(settings, files),
                hint=f"{UPLOAD_BASE:.0f} s, and 1 s per {UPLOAD_RATE >> 10} KiB sent; is the server overloaded?",
            )
    except (
        twine_exceptions.TwineException,
        requests.RequestException,
        argparse.ArgumentError,
        OSError,
    ) as exc:
        raise _failure(index, exc, secret) from None
    skipped = sum(1 for message in records.messages if message.startswith("Skipping "))
    if skipped:
        say(f"{index}: {skipped} file(s) already there, skipped by the server")
    return len(index.upload) - skipped


def upload_deadline(index: IndexUpload) -> float:
    """Seconds one twine call may take: UPLOAD_BASE, and one more per UPLOAD_RATE bytes sent."""
    return UPLOAD_BASE + sum(item.path.stat().st_size for item in index.upload) / UPLOAD_RATE


def read_plan(
    target: UploadTarget, wheels: Sequence[IndexedWheel], default_wheels: Sequence[Path]
) -> UploadPlan:
    """What each index of ``target`` holds, read, then ``plan_upload``: PublishError on a
    conflict, before anything is sent. A caller publishing to several targets plans them all
    first, so that a conflict at any one leaves every one unchanged."""
    if target.repository:
        check_alias(target.repository)
    held: dict[str, dict[str, str]] = {}
    deadline = Deadline.from_now()
    for query in held_queries(target, wheels, default_wheels):
        held.setdefault(query.simple_url, {}).update(
            read_held(query.simple_url, query.project, only=query.filenames, deadline=deadline)
        )
    return plan_upload(target, wheels, default_wheels, held)


def check_alias(alias: str) -> None:
    """A twine repository alias twine can resolve (``~/.pypirc``, TWINE_CONFIG_FILE, or twine's
    own pypi / testpypi), checked before anything is written: else one line saying what to add."""
    try:
        from twine import exceptions as twine_exceptions
        from twine import utils as twine_utils
    except ImportError:
        return  # the upload itself says to install the publish extra
    config = os.environ.get("TWINE_CONFIG_FILE") or twine_utils.DEFAULT_CONFIG_FILE
    try:
        twine_utils.get_repository_from_config(config, alias)
    except twine_exceptions.InvalidConfiguration:
        raise PublishError(
            f"the twine repository alias {alias!r} is not in {config}: add a [{alias}] section "
            f"with its repository URL there (or write ./{alias} for a directory)"
        ) from None


def execute_plan(plan: UploadPlan, *, say: Say) -> UploadResult:
    """Upload what ``plan`` says, index by index (twine, one call each)."""
    uploaded = 0
    for index in plan.indexes:
        for item in index.present:
            say(f"skip {item.filename}: {index} already holds these bytes")
        if index.upload:
            uploaded += upload_index(index, say=say)
    return UploadResult(uploaded, plan.present + plan.to_upload - uploaded, plan)
