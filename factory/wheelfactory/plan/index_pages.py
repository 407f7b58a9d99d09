"""A package index's project page, read (pure): PEP 691 JSON or PEP 503 HTML into the files it
lists, with the hash and the metadata URL (PEP 658 / PEP 714) the page gives for each. The one
page reader: ``compat refresh`` reads torch's page with it, ``publish`` the pages of the index it
uploads to, ``serve`` answers in its media type."""

from __future__ import annotations

import html.parser
import json
import re
from dataclasses import dataclass
from urllib.parse import unquote, urljoin

JSON_CONTENT = "application/vnd.pypi.simple.v1+json"
_SHA256 = re.compile(r"[0-9a-f]{64}")


class InvalidPage(ValueError):
    """A project page that is neither PEP 691 JSON nor PEP 503 HTML listing files."""


@dataclass(frozen=True)
class ListedFile:
    """One file a project page lists, and where the index serves its core metadata apart from
    the wheel (PEP 658 / PEP 714), when it does."""

    name: str
    metadata_url: str | None = None
    # the hash the page gives (JSON ``hashes``, an HTML ``#sha256=`` fragment)
    sha256: str | None = None
    url: str = ""  # the file's URL, absolute


def listed_files(body: bytes, content_type: str, page_url: str) -> list[ListedFile]:
    """The files a project page lists: PEP 691 JSON (``files[].filename``) when the server says
    so, else PEP 503 HTML (the last path segment of each anchor's href). A file's metadata URL is
    set where the page says the index serves it (``core-metadata``, or the older
    ``dist-info-metadata``): a wheel's Requires-Dist without downloading the wheel. InvalidPage
    when the page is neither format."""
    if content_type.split(";")[0].strip().lower() == JSON_CONTENT or body.lstrip()[:1] == b"{":
        return _json_files(body, page_url)
    return _html_files(body, page_url)


def _json_files(body: bytes, page_url: str) -> list[ListedFile]:
    try:
        document = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise InvalidPage(f"not PEP 691 JSON ({exc})") from None
    entries = document.get("files") if isinstance(document, dict) else None
    if not isinstance(entries, list):
        raise InvalidPage("a PEP 691 page needs a files list")
    found = []
    for entry in entries:
        if not isinstance(entry, dict) or not isinstance(entry.get("filename"), str):
            continue
        offered = entry.get("core-metadata", entry.get("dist-info-metadata"))
        url = entry.get("url")
        where = urljoin(page_url, url.split("#", 1)[0]) if isinstance(url, str) else ""
        hashes = entry.get("hashes")
        digest = hashes.get("sha256") if isinstance(hashes, dict) else None
        found.append(
            ListedFile(
                entry["filename"],
                where + ".metadata" if offered and where else None,
                _sha256_or_none(digest),
                where,
            )
        )
    return found


def _html_files(body: bytes, page_url: str) -> list[ListedFile]:
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidPage(f"neither PEP 691 JSON nor PEP 503 HTML ({exc})") from None
    if "<" not in text:
        raise InvalidPage("neither PEP 691 JSON nor PEP 503 HTML")
    parser = _Anchors()
    parser.feed(text)
    listed = []
    for href, offered in parser.links:
        path, _, fragment = href.partition("#")
        name = unquote(path.rstrip("/").rsplit("/", 1)[-1])
        algorithm, _, digest = fragment.partition("=")
        if name:
            where = urljoin(page_url, path)
            listed.append(
                ListedFile(
                    name,
                    where + ".metadata" if offered else None,
                    _sha256_or_none(digest) if algorithm == "sha256" else None,
                    where,
                )
            )
    return listed


def _sha256_or_none(value: object) -> str | None:
    return value.lower() if isinstance(value, str) and _SHA256.fullmatch(value.lower()) else None


class _Anchors(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.links: list[tuple[str, bool]] = []  # (href, metadata offered)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            found = dict(attrs)  # an attribute without a value is present: offered (PEP 714)
            offered = any(
                key in found and found[key] != "false"
                for key in ("data-core-metadata", "data-dist-info-metadata")
            )
            self.links.append((found.get("href") or "", offered))
