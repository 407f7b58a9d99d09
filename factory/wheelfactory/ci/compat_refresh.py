"""``wheelfactory compat refresh``: read torch's project page on package indexes and report what
the compatibility table in use lacks (plan/torch_releases.py and plan/table_refresh.py decide; this
module fetches and writes).

Indexes: those given with ``--index``, else the ones the table names by alias: ``pypi`` (the index
pip is configured with on this host: ``PIP_INDEX_URL``, pip's config files, else pip's own
default) and ``pytorch`` (PyTorch's per-build indexes, where configured: WHEELFACTORY_INDEX_PYTORCH
or matrix.toml ``[indexes]``; its root page lists every build with its local version label).
"""

from __future__ import annotations

import os
import ssl
import sys
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse
from urllib.request import url2pathname

from wheelfactory.errors import ConfigError, UsageError
from wheelfactory.plan.compat import CompatTable, load_table
from wheelfactory.plan.index_pages import JSON_CONTENT, InvalidPage, listed_files
from wheelfactory.plan.indexes import PYPI, Indexes, IndexRef, is_url
from wheelfactory.plan.table_refresh import Refresh, compare, merged_table
from wheelfactory.plan.torch_releases import (
    ReleaseFacts,
    TorchFile,
    build_of_metadata,
    release_facts,
    torch_files,
)
from wheelfactory.support import atomic
from wheelfactory.support.paths import StrPath
from wheelfactory.support.proc import CommandFailed, Runner, run

PROJECT = "torch"
PAGE_LIMIT = 64 << 20  # torch's page lists a few thousand files: far less than this
ACCEPT = f"{JSON_CONTENT}, application/vnd.pypi.simple.v1+html;q=0.2, text/html;q=0.1"


@dataclass(frozen=True)
class Page:
    index: str
    body: bytes
    content_type: str


def project_url(index: str) -> str:
    return f"{index.rstrip('/')}/{PROJECT}/"


METADATA_LIMIT = 1 << 20  # a wheel's METADATA is kilobytes


def _download(
    url: str, *, limit: int, timeout: float, accept: str | None = None
) -> tuple[bytes, str]:
    """(at most ``limit`` bytes, content type) of an http(s) URL, or of a file:// one (a directory
    reads as its index.html: a PEP 503 tree on disk). urllib's errors and OSError pass through,
    ValueError for another scheme: the callers say what was being read."""
    parsed = urlparse(url)
    if parsed.scheme == "file":
        path = Path(url2pathname(parsed.path))
        with (path / "index.html" if path.is_dir() else path).open("rb") as handle:
            return handle.read(limit), "text/html"
    if parsed.scheme not in ("http", "https"):
        raise ValueError(f"{url}: not an http(s) or file URL")
    request = urllib.request.Request(url, headers={"Accept": accept} if accept else {})
    with urllib.request.urlopen(request, timeout=timeout, context=_tls()) as answer:  # noqa: S310 (checked above)
        return bytes(answer.read(limit)), answer.headers.get("Content-Type", "text/html")


def read_url(url: str, *, timeout: float = 60.0) -> bytes:
    """A small file (a wheel's METADATA) from an index; ConfigError when it cannot be read."""
    try:
        return _download(url, limit=METADATA_LIMIT, timeout=timeout)[0]
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise ConfigError(f"cannot read {url}: {getattr(exc, 'reason', None) or exc}") from None


def fetch(index: str, *, timeout: float = 60.0) -> Page:
    """The torch page of ``index`` (http(s), or a file:// PEP 503 tree); ConfigError naming the URL
    when it cannot be read."""
    url = project_url(index)
    if urlparse(url).scheme not in ("http", "https", "file"):
        raise UsageError(f"--index {index}: not an http(s) or file URL")
    try:
        body, content_type = _download(url, limit=PAGE_LIMIT, timeout=timeout, accept=ACCEPT)
    except urllib.error.HTTPError as exc:
        exc.close()  # it holds the server's answer, and with it the connection
        raise ConfigError(
            f"cannot read the torch page of {index}: HTTP {exc.code} {exc.reason}",
            hint="check the --index URL (the index root, which has /torch/ under it)",
        ) from None
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", None) or getattr(exc, "strerror", None) or exc
        raise ConfigError(
            f"cannot read the torch page of {index}: {reason}",
            hint="check the --index URL and the network",
        ) from None
    return Page(index, body, content_type)


def _tls() -> ssl.SSLContext:
    """The CA bundle pip is told to use on this host, where one is set (corporate mirrors)."""
    bundle = next(
        (
            os.environ[name]
            for name in ("PIP_CERT", "SSL_CERT_FILE", "REQUESTS_CA_BUNDLE")
            if os.environ.get(name)
        ),
        None,
    )
    return (
        ssl.create_default_context(cafile=bundle)
        if bundle and Path(bundle).is_file()
        else ssl.create_default_context()
    )


def pip_index_url(python: str = sys.executable, *, runner: Runner = run) -> str:
    """The index pip uses on this host: PIP_INDEX_URL, else pip's configuration, else pip's default
    (asked from pip itself: no registry host is written here)."""
    if os.environ.get("PIP_INDEX_URL"):
        return os.environ["PIP_INDEX_URL"].split()[0]
    for line in _output_of(runner, [python, "-m", "pip", "config", "list"]).splitlines():
        key, _, value = line.partition("=")
        if key.strip().endswith(".index-url") and value.strip().strip("'\""):
            return value.strip().strip("'\"").split()[0]
    printed = _output_of(
        runner,
        [python, "-c", "from pip._internal.models.index import PyPI; print(PyPI.simple_url)"],
    )
    # the last line: a warning on stderr may come first
    default = printed.strip().rpartition("\n")[2].strip()
    if not is_url(default):
        raise ConfigError(
            "no package index is configured for pip on this host and pip names no default",
            hint="pass --index URL",
        )
    return default


def _output_of(runner: Runner, command: list[str]) -> str:
    """What ``command`` printed; "" when it failed (pip without a configuration, no pip at all)."""
    try:
        return runner(command, timeout=60)
    except CommandFailed:
        return ""


def default_indexes(table: CompatTable, indexes: Indexes) -> tuple[list[str], list[str]]:
    """(index URLs, notes): the table's pypi alias, and its pytorch alias's root where configured."""
    urls, notes = [pip_index_url()], []
    pytorch = table.pytorch_index.alias
    if pytorch != PYPI:
        try:
            root = indexes.url(IndexRef(pytorch))
        except ConfigError:
            root = None
            notes.append(
                f"the {pytorch!r} index alias is not configured: builds other than PyPI's are not checked "
                f"(set WHEELFACTORY_INDEX_{pytorch.upper()} or pass --index)"
            )
        if root:
            urls.append(root.replace("/{path}", "").replace("{path}", ""))
    return urls, notes


def refresh(table: CompatTable, index_urls: list[str]) -> Refresh:
    files = []
    metadata: dict[str, str] = {}  # file name -> its METADATA's URL, where the index serves it
    for index in index_urls:
        page = fetch(index)
        try:
            listed = listed_files(page.body, page.content_type, project_url(index))
        except InvalidPage as exc:
            raise ConfigError(
                f"the torch page of {index} is not an index page: {exc}",
                hint="pass the index root (PEP 503 or PEP 691), e.g. <URL>/simple",
            ) from None
        files.extend(torch_files((f.name for f in listed), index))
        metadata.update({f.name: f.metadata_url for f in listed if f.metadata_url})
    if not files:
        raise ConfigError(
            f"no torch wheel is listed at {', '.join(project_url(i) for i in index_urls)}",
            hint="pass the index root (PEP 503 or PEP 691) that serves torch",
        )
    facts = release_facts(files)
    return compare(
        table,
        facts,
        _default_builds(table, facts, files, metadata),
        _default_builds(table, facts, files, metadata, machine="aarch64"),
    )


def _default_builds(
    table: CompatTable,
    facts: list[ReleaseFacts],
    files: list[TorchFile],
    metadata: dict[str, str],
    *,
    machine: str = "x86_64",
) -> dict[str, tuple[str, str]]:
    """For each new release with unlabelled wheels: the build its Linux ``machine`` wheel is, from
    that wheel's METADATA (PEP 658), where the index serves it; the requirements are read as they
    install on that machine (PyPI's aarch64 and x86_64 wheels are different builds). A failed read
    leaves it inferred."""
    found = {}
    for fact in facts:
        if table.release(fact.minor) is not None or not fact.unlabelled:
            continue
        wheel = min(
            (
                f.filename
                for f in files
                if f.minor == fact.minor
                and f.label is None
                and f.version.public == fact.newest
                and f.filename in metadata
                and any(arch == machine for arch, _ in f.platforms)
            ),
            default=None,
        )
        if wheel is None:
            continue
        try:
            text = read_url(metadata[wheel]).decode("utf-8", errors="replace")
        except ConfigError:
            continue
        build = build_of_metadata(text, machine)
        if build is not None:
            found[fact.minor] = (build[0], f"{wheel}: {build[1]}")
    return found


def table_text(compat_path: Path | None) -> str:
    """The text of the table in use: ``--compat FILE``, else the bundled one."""
    if compat_path is not None:
        return compat_path.read_text(encoding="utf-8")
    from importlib import resources

    return resources.files("wheelfactory.data").joinpath("compat.toml").read_text("utf-8")


def write_merged(compat_path: Path | None, result: Refresh, target: Path) -> None:
    """The table in use with the new releases appended, as ``target``; loaded back to be sure a
    plan can use it (a failure is our bug, and the file is not left behind)."""
    if compat_path is not None and target.exists() and os.path.samefile(target, compat_path):
        raise UsageError(
            f"--write {target} is the table this command reads: write a copy, review its unverified "
            "facts, then replace the table"
        )
    atomic.write_text(
        target, merged_table(table_text(compat_path), result), what="the refreshed table"
    )
    try:
        load_table(target)
    except ConfigError as exc:
        target.unlink(missing_ok=True)
        raise ConfigError(
            f"the refreshed table does not load ({exc}); this is a wheelfactory bug"
        ) from None


@dataclass(frozen=True)
class Refreshed:
    """The table (``shown``: the file, or "the bundled table") against the indexes ``urls``; the
    merged table written to ``written`` where asked and the table is behind."""

    shown: str
    urls: tuple[str, ...]
    result: Refresh
    written: Path | None = None

    def toml(self) -> str:
        """What the table lacks, as TOML: the findings as comments, then a ready [torch."X.Y"]
        table per new release (each fact's origin in ``source``, ``unverified`` where inferred)."""
        lines = [f"# The compatibility table ({self.shown}) is behind {', '.join(self.urls)}:"]
        lines += [f"# - {found.minor} {found.what}: {found.text}" for found in self.result.findings]
        for _, toml in (*self.result.fragments, *self.result.toolkits):
            lines += ["", toml.rstrip("\n")]
        return "\n".join(lines)


def refresh_compat(
    index_urls: Sequence[str] = (),
    *,
    compat: StrPath | None = None,
    write: StrPath | None = None,
    note: Callable[[str], None] = lambda line: None,
) -> Refreshed:
    """``wheelfactory compat refresh``: the torch releases, patches, builds, Pythons and platform
    floors the table ``compat`` (default: the bundled one) lacks, as ``index_urls`` list them
    (default: the indexes the table names; what they leave unchecked goes to ``note`` first);
    with ``write``, the table with the new releases appended is written there when it is behind."""
    compat_path = Path(compat) if compat is not None else None
    table = load_table(compat_path)
    if index_urls:
        urls = list(index_urls)
    else:
        urls, notes = default_indexes(table, Indexes.configure((), os.environ))
        for line in notes:
            note(line)
    shown = str(compat_path) if compat_path else "the bundled table"
    result = refresh(table, urls)
    written = Path(write) if write is not None and result.behind else None
    if written is not None:
        write_merged(compat_path, result, written)
    return Refreshed(shown, tuple(urls), result, written)
