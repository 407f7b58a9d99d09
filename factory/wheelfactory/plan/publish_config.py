"""Where ``wheelfactory publish`` sends a release: matrix.toml's ``[publish]`` table and the
``--to`` option, read into typed targets. Pure: nothing here opens a connection.

A target is named by one string, the same in the file and on the command line:

``s3://bucket/prefix``
    a static bucket over the S3 API (any S3-compatible store: ``endpoint_url``, or the
    ``AWS_ENDPOINT_URL`` boto3 reads). It gets the pages ``wheelfactory index`` writes.
``./site``, ``/srv/whl``, ``file:///srv/whl``
    a plain directory (a GitHub Pages checkout, anything a static host serves): the same pages.
``http://host/user/{variant}/``, ``https://host/legacy/``
    a server speaking the upload API twine, devpi, pypiserver and PyPI speak; ``{variant}`` in it
    gives each variant its own index (devpi: one index per variant under a user).
``pypi``, ``testpypi``, any ``.pypirc`` repository name
    a twine repository alias: twine resolves its URL (``~/.pypirc`` or twine's own defaults), so
    no upload host is written here. ``pypi`` and ``testpypi`` refuse local version labels.

Credentials are never part of a target: the upload API's come from ``TWINE_USERNAME`` /
``TWINE_PASSWORD`` or keyring (twine reads them; trusted publishing on CI), a bucket's from
boto3's chain (environment, ``~/.aws``). A URL holding a user or password is refused.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlsplit

from wheelfactory.plan.identity import InvalidVariantId, VariantId
from wheelfactory.plan.toml_model import AnyOf, Flag, Key, Section, Sections, Text
from wheelfactory.plan.tomlsource import Table

VARIANT_FIELD = "{variant}"  # in an upload URL: that variant's own index
# twine's aliases for PyPI and its test instance: both refuse PEP 440 local labels (+cu130torch2.13)
LABEL_REFUSING_ALIASES = ("pypi", "testpypi")
_ALIAS = re.compile(r"[a-z][a-z0-9_.-]*")
_BUCKET = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")  # S3's bucket naming rule
_SAFE_PREFIX = re.compile(r"[A-Za-z0-9._~+-]+(?:/[A-Za-z0-9._~+-]+)*")


class InvalidTarget(ValueError):
    """A publish target that cannot be read; the message quotes it and says what to write."""


@dataclass(frozen=True)
class DirectoryTarget:
    path: Path  # absolute
    base_url: str | None  # where users reach it; None: a file:// URL of the directory

    def __str__(self) -> str:
        return str(self.path)


@dataclass(frozen=True)
class BucketTarget:
    bucket: str
    prefix: str  # "" or "a/b": no slash at either end
    # None: boto3's own resolution (AWS_ENDPOINT_URL, profile, the service)
    endpoint_url: str | None
    base_url: str | None  # where users reach it; None: the endpoint's path-style URL of the prefix

    def key(self, path: str) -> str:
        return f"{self.prefix}/{path}" if self.prefix else path

    def __str__(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}" if self.prefix else f"s3://{self.bucket}"


@dataclass(frozen=True)
class UploadTarget:
    """A server with the upload API. ``url`` is its upload URL or None where ``repository`` (a
    twine alias) gives it; ``index_url`` is where its simple pages are read, to learn what it
    already holds (None: derived from ``url``, see ``simple_url``)."""

    url: str | None
    repository: str | None
    index_url: str | None
    # False: the server refuses local labels; only the PyPI default variant goes there
    local_labels: bool

    @property
    def per_variant(self) -> bool:
        return VARIANT_FIELD in (self.url or "") or VARIANT_FIELD in (self.index_url or "")

    def upload_url(self, variant: str) -> str | None:
        return self.url.replace(VARIANT_FIELD, variant) if self.url else None

    def simple_url(self, variant: str) -> str | None:
        """The PEP 503 root of the index ``variant``'s wheels go to: ``index_url``, else devpi's
        ``<index>/+simple/`` for a ``{variant}`` URL, else the server root's ``simple/``
        (pypiserver's); None for a twine alias without ``index_url`` (what it holds is not read)."""
        if self.index_url:
            return _slash(self.index_url.replace(VARIANT_FIELD, variant))
        if not self.url:
            return None
        url = _slash(self.url.replace(VARIANT_FIELD, variant))
        if self.per_variant:
            return url + "+simple/"
        parts = urlsplit(url)
        return f"{parts.scheme}://{parts.netloc}/simple/"

    def __str__(self) -> str:
        return self.url or f"repository {self.repository}"


Target = DirectoryTarget | BucketTarget | UploadTarget


@dataclass(frozen=True)
class PublishConfig:
    targets: tuple[Target, ...] = ()
    # True: the variant PyPI's own torch build of the newest torch matches (publish/pypi_default.py);
    # a variant id: that one; False: none. It goes, without its local label, to targets that refuse labels.
    pypi_default: bool | VariantId = False


def _slash(url: str) -> str:
    return url if url.endswith("/") else url + "/"


def parse_target(
    text: str,
    *,
    base_dir: Path,
    base_url: str | None = None,
    endpoint_url: str | None = None,
    index_url: str | None = None,
    local_labels: bool | None = None,
    directory: bool = False,
) -> Target:
    """One target string (see the module docstring); relative directories are taken from
    ``base_dir``; ``directory``: the string is a path whatever it looks like. InvalidTarget says
    what is wrong with it."""
    text = text.strip()
    if not text:
        raise InvalidTarget(
            "an empty target; write s3://bucket/prefix, a directory, an upload URL or an alias"
        )
    if any(ord(c) < 32 or ord(c) == 127 for c in text):
        raise InvalidTarget(f"{text!r} holds control characters")
    for name, value in (
        ("base_url", base_url),
        ("endpoint_url", endpoint_url),
        ("index_url", index_url),
    ):
        if value is not None:
            _check_http(value, name)
    only = {"endpoint_url": endpoint_url, "index_url": index_url, "local_labels": local_labels}
    if text.startswith("s3://"):
        _refuse_keys(text, only, allowed=("endpoint_url",))
        return _bucket(text, endpoint_url, base_url)
    if text.startswith(("http://", "https://")):
        _refuse_keys(text, {"endpoint_url": endpoint_url, "base_url": base_url}, allowed=())
        _check_http(text, "the upload URL")
        if VARIANT_FIELD in text.replace(VARIANT_FIELD, "", 1):
            raise InvalidTarget(f"{text!r} names {VARIANT_FIELD} twice")
        return UploadTarget(text, None, index_url, True if local_labels is None else local_labels)
    if text.startswith("file://"):
        try:  # a URL's path is percent-encoded: file:///srv/my%20site is the folder "my site"
            path = unquote(urlsplit(text).path, errors="strict")
        except UnicodeDecodeError:
            raise InvalidTarget(f"{text!r}: its percent-encoding is not UTF-8") from None
        if (
            urlsplit(text).netloc not in ("", "localhost")
            or not path.startswith("/")
            or "\0" in path
        ):
            raise InvalidTarget(
                f"{text!r} is not a file:// URL of a local directory (file:///srv/whl)"
            )
        _refuse_keys(text, only, allowed=())
        return DirectoryTarget(Path(path), base_url)
    if "://" in text:
        raise InvalidTarget(
            f"{text!r}: unknown scheme; write s3://, http(s)://, file:// or a directory path"
        )
    if _ALIAS.fullmatch(text) and not directory:
        try:
            _refuse_keys(text, {"endpoint_url": endpoint_url, "base_url": base_url}, allowed=())
        except InvalidTarget as exc:
            raise InvalidTarget(
                f"{exc}: a bare name is a twine repository alias; write ./{text} for a directory"
            ) from None
        labels = local_labels if local_labels is not None else text not in LABEL_REFUSING_ALIASES
        return UploadTarget(None, text, index_url, labels)
    _refuse_keys(text, only, allowed=())
    return DirectoryTarget((base_dir / Path(text).expanduser()).resolve(), base_url)


def _refuse_keys(text: str, given: Mapping[str, object], allowed: tuple[str, ...]) -> None:
    for name, value in given.items():
        if value is not None and name not in allowed:
            raise InvalidTarget(f"{name} does not apply to {text!r}")


def _check_http(url: str, what: str) -> None:
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 (raises on a bad port)
    except ValueError as exc:
        raise InvalidTarget(f"{what} {url!r}: {exc}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InvalidTarget(f"{what} {url!r} is not an http:// or https:// URL with a host")
    if parts.username or parts.password or "@" in parts.netloc:
        raise InvalidTarget(
            f"{what} holds credentials; remove them and set TWINE_USERNAME / TWINE_PASSWORD "
            "(or keyring) in the environment instead"
        )
    if parts.query or parts.fragment:
        raise InvalidTarget(f"{what} {url!r} may not hold a query or a fragment")


def _bucket(text: str, endpoint_url: str | None, base_url: str | None) -> BucketTarget:
    rest = text[len("s3://") :]
    bucket, _, prefix = rest.partition("/")
    prefix = prefix.strip("/")
    if not _BUCKET.fullmatch(bucket) or ".." in bucket:
        raise InvalidTarget(
            f"{text!r}: {bucket!r} is not an S3 bucket name (3-63 lowercase letters, digits, . and -)"
        )
    if prefix and (
        not _SAFE_PREFIX.fullmatch(prefix) or any(p in (".", "..") for p in prefix.split("/"))
    ):
        raise InvalidTarget(
            f"{text!r}: the prefix {prefix!r} may hold only letters, digits and ._~+- between "
            "slashes (no . or .. parts)"
        )
    return BucketTarget(
        bucket,
        prefix,
        endpoint_url.rstrip("/") if endpoint_url else None,
        base_url.rstrip("/") if base_url else None,
    )


# ---------------------------------------------------------------------------------------------
# matrix.toml's [publish] table, declared once (plan/toml_model.py)
# ---------------------------------------------------------------------------------------------

_BASE_URL = Key(
    "base_url",
    Text(pattern=r"^https?://\S+$", examples=("https://wheels.example.org/whl",)),
    "the URL users reach the pages at (select.py and the install commands name it)",
)
_BUCKET_TABLE = Section(
    (
        Key(
            "url",
            Text(pattern=r"^s3://\S+$", examples=("s3://my-bucket/whl",)),
            "s3://bucket/prefix",
            required=True,
        ),
        Key(
            "endpoint_url",
            Text(pattern=r"^https?://\S+$", examples=("http://127.0.0.1:9000",)),
            "an S3-compatible store's endpoint (default: boto3's own, e.g. AWS_ENDPOINT_URL)",
        ),
        _BASE_URL,
    ),
    description="a static bucket over the S3 API",
)
_DIRECTORY_TABLE = Section(
    (
        Key(
            "path",
            Text(pattern=r"\S", examples=("site", "/srv/whl")),
            "the directory, relative to matrix.toml",
            required=True,
        ),
        _BASE_URL,
    ),
    description="a directory a static host serves",
)
_UPLOAD_TABLE = Section(
    (
        Key(
            "url",
            Text(
                pattern=r"^(https?://\S+|[a-z][a-z0-9_.-]*)$",
                examples=("http://127.0.0.1:3141/me/{variant}/", "pypi"),
            ),
            "the upload URL ({variant}: one index per variant) or a twine repository alias",
            required=True,
        ),
        Key(
            "index_url",
            Text(
                pattern=r"^https?://\S+$", examples=("http://127.0.0.1:3141/me/{variant}/+simple/",)
            ),
            "where the server's simple pages are read (default: derived from url)",
        ),
        Key(
            "local_labels",
            Flag(),
            "false where the server refuses local version labels (PyPI): only the "
            "pypi_default variant goes there, without its label",
        ),
    ),
    description="a server with the upload API (twine, devpi, pypiserver, PyPI)",
)

PUBLISH_SECTION = Section(
    (
        Key(
            "bucket",
            Sections(_BUCKET_TABLE),
            "[[publish.bucket]]: a static bucket the release is published to",
        ),
        Key(
            "directory",
            Sections(_DIRECTORY_TABLE),
            "[[publish.directory]]: a directory the release is published to",
        ),
        Key(
            "upload",
            Sections(_UPLOAD_TABLE),
            "[[publish.upload]]: an upload server the release is published to",
        ),
        Key(
            "pypi_default",
            AnyOf((Flag(), Text(pattern=r"^torch", examples=("torch213-cxx11-cpu-x86_64-linux",)))),
            "true: also publish the variant PyPI's torch build of the newest torch matches, without its local "
            "label, to servers that refuse labels; or name the variant",
            default=False,
        ),
    ),
    description="`wheelfactory publish`: where a built release goes",
)


def parse_publish_table(table: Table, *, base_dir: Path) -> PublishConfig:
    table.reject_unknown(PUBLISH_SECTION.names())
    targets: list[Target] = []
    for kind, declared, key, example in (
        ("bucket", _BUCKET_TABLE, "url", "s3://my-bucket/whl"),
        ("directory", _DIRECTORY_TABLE, "path", "site"),
        ("upload", _UPLOAD_TABLE, "url", "pypi"),
    ):
        for entry in table.tables(kind):
            entry.reject_unknown(declared.names())
            text = entry.string(key)
            if text is None:
                entry.error(None, f"needs {key}", f'e.g. {key} = "{example}"')
            if kind == "directory" and ("://" in text or text.startswith("s3:")):
                entry.error(
                    key,
                    f"{text!r} is a URL, not a directory",
                    "use [[publish.bucket]] or [[publish.upload]]",
                )
            if kind == "upload" and text.startswith("s3://"):
                entry.error(key, f"{text!r} is a bucket", "use [[publish.bucket]]")
            try:
                targets.append(
                    parse_target(
                        text,
                        base_dir=base_dir,
                        base_url=entry.string("base_url"),
                        endpoint_url=entry.string("endpoint_url"),
                        index_url=entry.string("index_url"),
                        local_labels=entry.boolean("local_labels"),
                        directory=kind == "directory",
                    )
                )
            except InvalidTarget as exc:
                entry.error(key, str(exc))
    return PublishConfig(tuple(targets), _pypi_default(table))


def _pypi_default(table: Table) -> bool | VariantId:
    value = table.data.get("pypi_default", False)
    if isinstance(value, bool):
        return value
    if not isinstance(value, str):
        table.error("pypi_default", "must be true, false or a variant id")
    try:
        return VariantId.parse(value)
    except InvalidVariantId as exc:
        table.error(
            "pypi_default",
            str(exc),
            "e.g. pypi_default = true, or a variant id from `wheelfactory plan`",
        )
