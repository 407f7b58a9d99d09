"""index.json's shape, as its readers check it: ``check_listing`` for select.py, ``serve`` and a
publish target's listing read back (publish/listing.py), and the PEP 440 order select.py sorts
releases by (``version_key``).

Standard library only, and the runtime's fit rule the one other import: select.py carries this
module's text (publish/select_script.py), to run where wheelfactory is not installed.
"""

import json
import re

from wheelfactory._runtime._fit import parse_major_minor

# Every key `wheelfactory index` writes into a variant's entry (publish/pages.py), with its JSON
# types: what select.py, serve and a publish target's read-back (publish/listing.py) check.
VARIANT_KEYS: dict[str, tuple[type, ...]] = {
    "id": (str,),
    "project": (str,),
    "version": (str,),
    "torch": (str,),
    "torch_version": (str,),
    "backend": (str,),
    "toolkit": (str, type(None)),
    "cxx11_abi": (bool,),
    "python": (str,),
    "arch": (str,),
    "stable_abi": (bool,),
    "gpu": (str,),
    "wheel": (str,),
    "sha256": (str,),
    "index": (str,),
    "find_links": (str,),
    "requirements": (str,),
    "provenance": (str, type(None)),
    "requires_python": (str, type(None)),
    "core_metadata_sha256": (str, type(None)),
    "size": (int,),
}
# What select.py reads of each variant: the fit rule's keys and the pip command's, in every
# listing; then those a listing may lack (older ones lack the last four), checked where present.
_READ = ("id", "project", "torch", "backend", "cxx11_abi", "python", "arch", "index")
_READ_IF_PRESENT = (
    "toolkit",
    "stable_abi",
    "version",
    "gpu",
    "requires_python",
    "core_metadata_sha256",
    "size",
)


class InvalidListing(ValueError):
    """index.json is not what `wheelfactory index` writes; the message says where in it."""


def quoted(value: object) -> str:
    """``value`` as JSON, cut to 60 characters: a listing's bad value, quoted in one line."""
    try:
        text = json.dumps(value, ensure_ascii=True)
    except (ValueError, TypeError, RecursionError):
        text = type(value).__name__
    return text if len(text) <= 60 else text[:60] + "..."


def check_listing(raw: bytes) -> dict[str, object]:
    """index.json's text as a listing: an object whose ``variants`` is a list of objects with the
    keys ``choose`` reads, of the right types (versions that parse); InvalidListing otherwise."""
    try:
        data = json.loads(raw.decode("utf-8"))
    except (ValueError, RecursionError) as exc:
        raise InvalidListing(f"not JSON ({exc})") from None
    if not isinstance(data, dict):
        raise InvalidListing("not a JSON object")
    try:  # a "\\udcff" escape parses to a lone surrogate, which no page or file can be written with
        json.dumps(data, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidListing(
            f"holds {exc.object[exc.start : exc.end]!a}, an escape of no character"
        ) from None
    variants = data.get("variants", [])
    if not isinstance(variants, list):
        raise InvalidListing("variants: expected a list")
    for number, variant in enumerate(variants):
        if not isinstance(variant, dict):
            raise InvalidListing(f"variants[{number}]: expected an object, got {quoted(variant)}")
        for key in (*_READ, *_READ_IF_PRESENT):
            if key not in variant and key in _READ_IF_PRESENT:
                continue
            if key not in variant:
                raise InvalidListing(f"variants[{number}]: missing key {key}")
            if not isinstance(variant[key], VARIANT_KEYS[key]) or (
                key == "size" and isinstance(variant[key], bool)
            ):
                raise InvalidListing(
                    f"variants[{number}]: {key}: {quoted(variant[key])} has the wrong type"
                )
        if "version" in variant and _VERSION.fullmatch(str(variant["version"])) is None:
            raise InvalidListing(
                f"variants[{number}]: version: {quoted(variant['version'])} is not a "
                "normalized PEP 440 version"
            )
        for key in ("torch", "toolkit", "python"):
            value = variant.get(key)
            if value is None or (key == "python" and value == "abi3"):
                continue
            try:
                parse_major_minor(str(value))
            except ValueError:
                raise InvalidListing(
                    f"variants[{number}]: {key}: {quoted(value)} is not a major.minor version"
                ) from None
    return data


# A PEP 440 version as index.json writes it (normalized: packaging's str(Version)).
_VERSION = re.compile(
    r"(?:(?P<epoch>[0-9]+)!)?(?P<release>[0-9]+(?:\.[0-9]+)*)(?:(?P<pre_l>a|b|rc)(?P<pre_n>[0-9]+))?"
    r"(?:\.post(?P<post>[0-9]+))?(?:\.dev(?P<dev>[0-9]+))?(?:\+(?P<local>[a-z0-9]+(?:\.[a-z0-9]+)*))?"
)
VersionKey = tuple[
    int,
    tuple[int, ...],
    tuple[int, str, int],
    tuple[int, int],
    tuple[int, int],
    tuple[int, tuple[tuple[int, int, str], ...]],
]
_LOWEST: VersionKey = (-1, (), (-1, "", 0), (-1, 0), (-1, 0), (-1, ()))


def version_key(version: str) -> VersionKey:
    """A normalized version ordered as PEP 440 (and packaging's Version) orders it; standard
    library only, for select.py. Anything else sorts below every version."""
    found = _VERSION.fullmatch(version)
    if found is None:
        return _LOWEST
    release = [int(part) for part in found["release"].split(".")]
    while release and release[-1] == 0:  # 1.0 == 1
        release.pop()
    post, dev = found["post"], found["dev"]
    if found["pre_l"]:
        pre = (0, found["pre_l"], int(found["pre_n"]))  # a < b < rc, as strings too
    else:
        # 1.0.dev1 < 1.0a1; 1.0 > 1.0rc1
        pre = (-1, "", 0) if dev is not None and post is None else (1, "", 0)
    local = found["local"]
    return (
        int(found["epoch"] or 0),
        tuple(release),
        pre,
        (-1, 0) if post is None else (0, int(post)),
        (1, 0) if dev is None else (0, int(dev)),  # 1.0.dev1 < 1.0
        (-1, ())
        if local is None
        # 1.0 < 1.0+anything; in a label, words before numbers
        else (0, tuple((1, int(p), "") if p.isdigit() else (0, 0, p) for p in local.split("."))),
    )
