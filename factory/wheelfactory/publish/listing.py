"""An index's listing (its ``index.json``) read back: the one ``index`` wrote in this dist, which
``serve`` announces (``read_listing``), and a publish target's, whose wheels a new release is
listed beside (``wheels_from_listing``, as IndexedWheel without a file here).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from wheelfactory.errors import ConfigError
from wheelfactory.plan.identity import InvalidVariantId, VariantId
from wheelfactory.publish.collect import TOOLKIT_VERSION, TORCH_VERSION, IndexedWheel, one_line
from wheelfactory.publish.generations import INDEX_LINK
from wheelfactory.publish.index_json import VARIANT_KEYS, InvalidListing, check_listing, quoted
from wheelfactory.runner.provenance import SUFFIX as PROVENANCE_SUFFIX
from wheelfactory.support import paths
from wheelfactory.support.inputs import read_input

_SHA256 = re.compile(r"[0-9a-f]{64}")
_PROJECT = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")  # a canonical project name
_LISTING_HINT = (
    "the target's index.json is not what wheelfactory writes: restore it, or publish to a fresh "
    "target"
)


def wheels_from_listing(listing: Mapping[str, object], *, where: str) -> list[IndexedWheel]:
    """The wheels a published index.json lists, as IndexedWheel without a source: what a publish
    target already holds, for ``plan_index`` to list beside the new ones. A listing is read from a
    target that others can write, so each entry must be what ``plan_index`` writes (every path the
    one the layout gives its variant, project and file name; hashes, sizes and versions well
    formed; the variant fields those of its id): anything else is a ConfigError naming ``where``
    and the entry. A listing written before core metadata and sizes were listed is refused too."""
    variants = listing.get("variants")
    if not isinstance(variants, list):
        raise ConfigError("variants: expected a list", file=where, hint=_LISTING_HINT)
    wheels: list[IndexedWheel] = []
    seen: set[str] = set()
    for number, entry in enumerate(variants):
        wheel = _listed_wheel(entry, f"variants[{number}]", where)
        if wheel.path in seen:
            raise ConfigError(
                f"variants[{number}]: {wheel.path} is listed twice", file=where, hint=_LISTING_HINT
            )
        seen.add(wheel.path)
        wheels.append(wheel)
    return wheels


def _listed_wheel(entry: object, at: str, where: str) -> IndexedWheel:
    def bad(key: str, problem: str) -> ConfigError:
        shown = quoted(entry.get(key)) if isinstance(entry, dict) else ""
        return ConfigError(f"{at}: {key}: {shown} {problem}", file=where, hint=_LISTING_HINT)

    if not isinstance(entry, dict):
        raise ConfigError(
            f"{at}: expected an object, got {quoted(entry)}", file=where, hint=_LISTING_HINT
        )
    for key, types in VARIANT_KEYS.items():
        if key not in entry and key in _OPTIONAL_KEYS:
            continue
        if key not in entry and key in _NEWER_KEYS:
            raise ConfigError(
                f"{at}: missing key {key}: an older wheelfactory wrote this index.json",
                file=where,
                hint="index the earlier releases' dist again with this version and publish it first",
            )
        if key not in entry:
            raise ConfigError(f"{at}: missing key {key}", file=where, hint=_LISTING_HINT)
        if not isinstance(entry[key], types) or (int in types and isinstance(entry[key], bool)):
            raise bad(key, "has the wrong type")
    vid = entry["id"]
    try:
        variant = VariantId.parse(vid)
    except InvalidVariantId as exc:
        raise bad("id", f"is not a variant id ({one_line(exc)})") from None
    if str(variant) != vid:
        raise bad("id", f"is not written as wheelfactory writes it ({variant})")
    project, version, path = entry["project"], entry["version"], entry["wheel"]
    if not _PROJECT.fullmatch(project):
        raise bad("project", "is not a normalized project name")
    try:
        parsed = Version(version)
    except InvalidVersion:
        raise bad("version", "is not a version") from None
    if str(parsed) != version:
        raise bad("version", f"is not normalized ({parsed})")
    filename = path.rsplit("/", 1)[-1]
    if (
        path != f"{vid}/simple/{project}/{filename}"
        or paths.safe_member(filename) is None
        or _UNSAFE_NAME.search(filename)
    ):
        raise bad("wheel", f"is not {vid}/simple/{project}/<wheel file name>")
    try:
        name, wheel_version, _, _ = parse_wheel_filename(filename)
    except (InvalidWheelFilename, InvalidVersion):
        raise bad("wheel", "is not a wheel's file name") from None
    if canonicalize_name(name) != project or wheel_version != parsed:
        raise bad("wheel", f"is not a file name of {project} {version}")
    for key in ("sha256", "core_metadata_sha256"):
        if entry[key] is not None and not _SHA256.fullmatch(entry[key]):
            raise bad(key, "is not a sha256 (64 lowercase hex digits)")
    if entry["size"] < 0:
        raise bad("size", "is negative")
    if not TORCH_VERSION.fullmatch(entry["torch_version"]):
        raise bad("torch_version", "is not a torch release")
    if entry["toolkit"] is not None and not TOOLKIT_VERSION.fullmatch(entry["toolkit"]):
        raise bad("toolkit", "is not a toolkit release")
    if entry["requires_python"] is not None and _UNSAFE_NAME.search(entry["requires_python"]):
        raise bad("requires_python", "holds control characters")
    expected = {
        **variant.axes(),
        "index": f"{vid}/simple/",
        "requirements": f"{vid}/requirements.txt",
    }
    for key, value in expected.items():
        if key in _OPTIONAL_KEYS and key not in entry:
            continue
        if entry[key] != value or type(entry[key]) is not type(value):
            raise bad(key, f"does not match the variant id {vid} (expected {quoted(value)})")
    if entry["provenance"] not in (None, path + PROVENANCE_SUFFIX):
        raise bad("provenance", f"is not {path + PROVENANCE_SUFFIX} or null")
    wheel = IndexedWheel(
        variant,
        project,
        version,
        filename,
        entry["sha256"],
        None,
        entry["torch_version"],
        entry["toolkit"],
        entry["requires_python"],
        None,
        core_metadata_sha256=entry["core_metadata_sha256"],
        size=entry["size"],
        provenance_listed=entry["provenance"] is not None,
    )
    if entry["find_links"] != wheel.findlinks_page:
        raise bad("find_links", f"is not {wheel.findlinks_page}")
    return wheel


_UNSAFE_NAME = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_NEWER_KEYS = ("requires_python", "core_metadata_sha256", "size")  # listed since PEP 658/691 pages
# listed since split builds; the id says it too, so an older listing may lack it
_OPTIONAL_KEYS = ("gpu",)


def read_listing(dist: Path) -> dict[str, object]:
    """dist/index/index.json (what ``serve`` announces), checked as select.py checks it
    (publish/index_json.py ``check_listing``): ConfigError naming the file when corrupt or wrong-shaped."""
    return read_listing_at(dist / INDEX_LINK, hint=f"run `wheelfactory index -o {dist}` again")


def read_listing_at(root: Path, *, hint: str) -> dict[str, object]:
    """``root/index.json``, checked as ``read_listing`` checks it; ``hint`` says how to make it again."""
    path = root / "index.json"
    try:
        raw = read_input(path)
    except OSError as exc:
        raise ConfigError(
            f"cannot read it ({exc.strerror or exc})", file=str(path), hint=hint
        ) from None
    try:
        return check_listing(raw)
    except InvalidListing as exc:
        raise ConfigError(one_line(exc), file=str(path), hint=hint) from None
