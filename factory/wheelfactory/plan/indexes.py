"""Where packages come from: package indexes by alias, and the Debian mirror, from the user's configuration.

wheelfactory names no registry host in its code, data, docs or tests. Every index is an *alias*,
resolved here and nowhere else:

- ``pypi``: the index pip is configured with on the host (pip's config files, ``PIP_INDEX_URL``,
  ``PIP_EXTRA_INDEX_URL``). Nothing is passed to pip for it, so pip uses the host's own
  configuration: corporate mirrors work as they do for every other ``pip install``.
- any other alias (the compatibility table uses ``pytorch``, PyTorch's per-build indexes): a URL
  from the environment variable ``WHEELFACTORY_INDEX_<ALIAS>`` (``-`` becomes ``_``), else from the
  ``[indexes]`` table of matrix.toml (``pytorch = "<URL>"``); the environment wins. A reference
  ``alias/path`` (``pytorch/cu126``) is the alias's URL followed by ``/path``, or the URL with
  ``{path}`` replaced where it contains one.

An index URL written in matrix.toml (``[build] torch_index``, ``[indexes]``) is the user's data
and is used as written.

The Debian mirror is ``[build] debian_mirror`` (or ``--mirror``) where given, else the first
Debian main archive the host's apt sources name (/etc/apt/sources.list, sources.list.d/*.list and
deb822 sources.list.d/*.sources).

Pure except for :func:`read_apt_sources`, which only reads files; the environment is passed in.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from wheelfactory.errors import ConfigError

PYPI = "pypi"  # the alias of the index pip is configured with on the host
ENV_PREFIX = "WHEELFACTORY_INDEX_"
ALIAS = re.compile(r"[a-z][a-z0-9_-]*")
URL = re.compile(r"(https?|file)://\S+")


class InvalidIndexRef(ValueError):
    """Text that is not ``alias`` or ``alias/path``."""


@dataclass(frozen=True)
class IndexRef:
    """An index by alias, with the path under it: ``pypi``, ``pytorch/cu126``."""

    alias: str
    path: str = ""

    def __post_init__(self) -> None:
        parts = self.path.split("/") if self.path else ()
        if not ALIAS.fullmatch(self.alias) or any(
            p in (".", "..") or not re.fullmatch(r"[\w.+{}-]+", p) for p in parts
        ):
            raise InvalidIndexRef(
                f"{str(self)!r} is not an index alias (e.g. 'pytorch' or 'pytorch/cu126')"
            )

    @classmethod
    def parse(cls, text: str) -> IndexRef:
        alias, slash, path = text.partition("/")
        if slash and not path:
            raise InvalidIndexRef(
                f"{text!r} is not an index alias (e.g. 'pytorch' or 'pytorch/cu126')"
            )
        return cls(alias, path)

    def __str__(self) -> str:
        return f"{self.alias}/{self.path}" if self.path else self.alias


def env_name(alias: str) -> str:
    """The environment variable that configures ``alias``: ``WHEELFACTORY_INDEX_PYTORCH``."""
    return ENV_PREFIX + alias.upper().replace("-", "_")


def is_url(text: str) -> bool:
    return URL.fullmatch(text) is not None


@dataclass(frozen=True)
class Indexes:
    """The configured aliases (alias -> URL): matrix.toml ``[indexes]``, overridden by the environment."""

    urls: tuple[tuple[str, str], ...] = ()
    file: str = "matrix.toml"  # where [indexes] lives, for the hint

    @classmethod
    def configure(
        cls, table: Iterable[tuple[str, str]], env: Mapping[str, str], *, file: str = "matrix.toml"
    ) -> Indexes:
        urls = dict(table)
        for name, value in env.items():
            if name.startswith(ENV_PREFIX) and value.strip():
                urls[name[len(ENV_PREFIX) :].lower().replace("_", "-")] = value.strip()
        urls.pop(PYPI, None)  # pypi is always the host's pip configuration
        return cls(tuple(sorted(urls.items())), file)

    def url(self, ref: IndexRef) -> str | None:
        """The URL of ``ref``; None for ``pypi``: the index pip is configured with on the host."""
        if ref.alias == PYPI:
            return None
        configured = dict(self.urls)
        # An alias spelled with "_" or "-" is one alias: the environment can only spell "_".
        base = configured.get(ref.alias) or configured.get(ref.alias.replace("_", "-"))
        if base is None:
            raise ConfigError(
                f"index alias {ref.alias!r} is not configured: set "
                f'{env_name(ref.alias)}=<index URL> or add {ref.alias} = "<index URL>" to [indexes] in {self.file}'
            )
        if "{path}" in base:
            return base.replace("{path}", ref.path)
        return f"{base.rstrip('/')}/{ref.path}" if ref.path else base

    def torch_url(self, table_ref: IndexRef, build_path: str, override: str | None) -> str | None:
        """Where a variant's torch comes from. ``table_ref``: the compatibility table's index for the
        build; ``build_path``: its path on a per-build index; ``override``: ``[build] torch_index``
        (an alias, or a URL used as written)."""
        if override is None:
            return self.url(table_ref)
        if is_url(override):
            return override
        return self.url(IndexRef(override, "" if override == PYPI else build_path))


# -- the Debian mirror ----------------------------------------------------------------------------

# Suite names of the Debian archive itself: a source for one of these (not -security, -updates,
# -backports, nor a third-party repository's own suite) is the main archive.
DEBIAN_SUITE_NAMES = frozenset(
    {
        "bullseye",
        "bookworm",
        "trixie",
        "forky",
        "duke",
        "sid",
        "stable",
        "testing",
        "unstable",
        "oldstable",
        "oldoldstable",
        "buster",
        "stretch",
    }
)
APT_SOURCES = ("etc/apt/sources.list", "etc/apt/sources.list.d")


def _main_archive(uri: str, suites: Iterable[str], components: Iterable[str]) -> str | None:
    if not re.fullmatch(r"https?://\S+", uri) or "main" not in components:
        return None
    if not any(suite in DEBIAN_SUITE_NAMES for suite in suites):
        return None
    return uri.rstrip("/")


def _one_line(text: str) -> Iterable[str]:
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        line = re.sub(r"\[[^\]]*\]", " ", line)  # [arch=amd64 signed-by=...]
        words = line.split()
        if len(words) >= 4 and words[0] == "deb":
            found = _main_archive(words[1], words[2:3], words[3:])
            if found:
                yield found


def _deb822(text: str) -> Iterable[str]:
    stanzas: list[dict[str, str]] = [{}]
    key = None
    for raw in text.splitlines():
        if raw.startswith("#"):
            continue
        if not raw.strip():
            if stanzas[-1]:
                stanzas.append({})
            key = None
        elif raw[0] in " \t" and key is not None:
            stanzas[-1][key] += " " + raw.strip()
        elif ":" in raw:
            key, _, value = raw.partition(":")
            key = key.strip().lower()
            stanzas[-1][key] = value.strip()
    for stanza in stanzas:
        if (
            "deb" not in stanza.get("types", "").split()
            or stanza.get("enabled", "yes").lower() == "no"
        ):
            continue
        for uri in stanza.get("uris", "").split():
            found = _main_archive(
                uri, stanza.get("suites", "").split(), stanza.get("components", "").split()
            )
            if found:
                yield found


def parse_apt_sources(files: Iterable[tuple[str, str]]) -> str | None:
    """The first Debian main archive URI in apt source files, given as (name, text) in the order apt
    reads them; ``*.sources`` files are deb822, the others one-line. None: none names one."""
    for name, text in files:
        for found in _deb822(text) if name.endswith(".sources") else _one_line(text):
            return found
    return None


def read_apt_sources(root: Path = Path("/")) -> list[tuple[str, str]]:
    """The host's apt source files as (path, text), in apt's order: sources.list, then
    sources.list.d/*.list and *.sources by name. Unreadable files are skipped."""
    main, directory = (root / p for p in APT_SOURCES)
    paths = [main] + (
        sorted(p for p in directory.iterdir() if p.suffix in (".list", ".sources"))
        if directory.is_dir()
        else []
    )
    out = []
    for path in paths:
        try:
            out.append((str(path), path.read_text(encoding="utf-8", errors="replace")))
        except OSError:
            continue
    return out


def debian_mirror(configured: str | None, *, root: Path = Path("/")) -> str:
    """``configured`` ([build] debian_mirror, --mirror) or the host's apt mirror; one line when neither."""
    if configured:
        return configured.rstrip("/")
    found = parse_apt_sources(read_apt_sources(root))
    if found is None:
        raise ConfigError(
            f"no Debian mirror: none configured and no Debian main archive in "
            f"{root / APT_SOURCES[0]}*: set [build] debian_mirror in matrix.toml "
            f"(or pass --mirror)"
        )
    return found
