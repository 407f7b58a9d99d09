"""Wheel-variant metadata shaped after the PEP 825 draft (format v0.1.1, the one uv reads).

For each project and version the index gets ``variants/simple/<project>/`` with:

- ``<name>-<version>-variants.json``: ``{"$schema", "default-priorities": {"namespace": [...]},
  "variants": {label: {namespace: {feature: [values]}}}}`` listing every label on the index;
- variant-labelled copies of the wheels, ``<name>-<version>-<py>-<abi>-<plat>-<label>.whl``, each
  with ``.dist-info/variant.json``: its own label only, the release's namespaces, and a
  ``providers`` table (below). All variants of a release share the public version (0.1.0): the
  label, not the local version, tells them apart.

The two files are read by different consumers, whose formats differ in one table. The index file
follows the PEP 825 draft v0.1.1 exactly (what uv reads; its schema allows no other top-level
key). ``variant.json`` is what ``variantlib`` (0.2.2, the reference implementation, PEP 850's
format v0.2.0) reads from a wheel: it also needs ``providers``, one entry per namespace in
``default-priorities``, each with exactly one of ``requires`` (an installable plugin),
``static-properties`` (values fixed at build time), ``build-requires`` or ``builtin``. Our
namespaces have no plugin, and their values (torch, CUDA, GPU) belong to the environment, not the
build, so each provider is ``{"builtin": "wheelfactory"}``: validators and ``variantlib
generate-index-json`` accept it; a variantlib resolver stops with "builtin providers are not
supported" rather than installing a plugin that does not exist or guessing from static values.

Where the draft is specific we follow it (label and name patterns, the file names, the layout of
the JSON); where it is open (which namespaces describe torch and its toolkits) our properties are:

    torch  :: version            "2.13"        the torch major.minor the wheel is built for
    torch  :: cxx11_abi          "true"/"false"
    torch  :: stable_abi_min     "2.10"        stable-ABI builds: the oldest torch they serve
    nvidia :: cuda_version_lower_bound  "12.8" CUDA builds (same major, this minor or newer)
    nvidia :: sm_arch            "90_real", "120_virtual" (+PTX)
    amd    :: rocm_version       "6.4"
    amd    :: gfx_arch           "gfx942"

No installer consumes this yet; tests/publish/test_variants.py holds our own reading of the
draft's ordering (namespace, feature, value priority; more matching properties first).
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import zipfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from packaging.version import Version

from wheelfactory.errors import ConfigError, IndexBuildError, WheelfactoryError
from wheelfactory.project.keys import file_sha256
from wheelfactory.publish.collect import IndexedWheel, build_record
from wheelfactory.publish.pages import html_page, wheel_anchor
from wheelfactory.support.wheel_rewrite import rewrite_wheel
from wheelfactory.verify.wheel_identity import ZIP_ERRORS

SCHEMA_URL = "https://variants-schema.wheelnext.dev/peps/825/v0.1.1.json"
# variant.json (has providers)
PROVIDERS_SCHEMA_URL = "https://variants-schema.wheelnext.dev/peps/850/v0.2.0.json"
# no installable plugin serves our namespaces (module docstring)
PROVIDER = {"builtin": "wheelfactory"}
NAMESPACES = ("torch", "nvidia", "amd")  # default-priorities: the order properties are weighed in
LABEL = re.compile(r"^[0-9a-z_.]+$")
NAME = re.compile(r"^[a-z0-9_]+$")
VALUE = re.compile(r"^[a-z0-9_.]+$")
VARIANTS_DIR = "variants/simple"
CACHE_DIR = ".index/variant-wheels"  # labelled copies, made again from their source on every run

Properties = dict[str, dict[str, list[str]]]


def label_for(wheel: IndexedWheel) -> str:
    """``torch213_cxx11_cu130``, ``torch213_cxx11_cu130_sm90``: the variant id without arch, OS and
    Python (the wheel tags carry those)."""
    return wheel.variant.build_head.replace("-", "_")


def _archs(wheel: IndexedWheel) -> list[str]:
    """The CUDA archs or gfx targets the wheel's build record lists (bring-your-own: none)."""
    try:
        with zipfile.ZipFile(wheel.local_file) as archive:
            record = build_record(archive, wheel.project, wheel.local_file)
    except ZIP_ERRORS as exc:
        raise ConfigError(
            f"is not a readable wheel ({' '.join(str(exc).split())})", file=str(wheel.source)
        ) from None
    listed = (record or {}).get("arch_list")
    return [str(a) for a in listed] if isinstance(listed, list) else []


def properties_for(wheel: IndexedWheel, archs: Sequence[str] = ()) -> Properties:
    key = wheel.variant
    torch: dict[str, list[str]] = {"cxx11_abi": ["true" if key.cxx11_abi else "false"]}
    torch["stable_abi_min" if key.stable_abi else "version"] = [key.torch]
    props: Properties = {"torch": torch}
    if key.backend.kind == "cuda":
        part = key.gpu_slice  # a split build's part: its one arch, whatever its record says
        sm = [part.sm_arch] if part else sorted({value for a in archs for value in _sm_arch(a)})
        props["nvidia"] = {
            "cuda_version_lower_bound": [key.backend.version or ""],
            **({"sm_arch": sm} if sm else {}),
        }
    elif key.backend.kind == "rocm":
        props["amd"] = {
            "rocm_version": [key.backend.version or ""],
            **({"gfx_arch": sorted(archs)} if archs else {}),
        }
    return props


def _sm_arch(arch: str) -> list[str]:
    """``"9.0"`` -> 90_real; ``"12.0+PTX"`` -> 120_real and 120_virtual; ``"12.0+PTX-only"`` -> 120_virtual."""
    digits = arch.split("+")[0].replace(".", "")
    return ([] if arch.endswith("+PTX-only") else [f"{digits}_real"]) + (
        [f"{digits}_virtual"] if arch.endswith(("+PTX", "+PTX-only")) else []
    )


def document(variants: Mapping[str, Properties]) -> dict[str, object]:
    """The index-level ``<name>-<version>-variants.json`` (PEP 825 draft v0.1.1)."""
    return {
        "$schema": SCHEMA_URL,
        "default-priorities": {"namespace": _namespaces(variants)},
        "variants": {label: variants[label] for label in sorted(variants)},
    }


def wheel_document(variants: Mapping[str, Properties], label: str) -> dict[str, object]:
    """A wheel's ``.dist-info/variant.json`` (variantlib's format v0.2.0): its own label, the
    release's namespace priorities (the same in every wheel of the release, so variantlib can merge
    them) and a provider for each of those namespaces."""
    namespaces = _namespaces(variants)
    return {
        "$schema": PROVIDERS_SCHEMA_URL,
        "default-priorities": {"namespace": namespaces},
        "providers": {ns: dict(PROVIDER) for ns in namespaces},
        "variants": {label: variants[label]},
    }


def _namespaces(variants: Mapping[str, Properties]) -> list[str]:
    used = {ns for props in variants.values() for ns in props}
    return [ns for ns in NAMESPACES if ns in used]


def check_document(doc: Mapping[str, object]) -> list[str]:
    """Problems against the draft's shape (the schema's required keys and name patterns); a
    document with ``providers`` (a wheel's variant.json) must name the v0.2.0 schema and have a
    provider for exactly the namespaces in ``default-priorities``, as variantlib demands."""
    problems = []
    keys = {"$schema", "default-priorities", "variants"}
    if set(doc) not in (keys, keys | {"providers"}):
        problems.append(f"top-level keys {sorted(doc)}")
    priorities = doc.get("default-priorities")
    namespaces = priorities.get("namespace", []) if isinstance(priorities, dict) else []
    if "providers" in doc:
        providers = doc["providers"]
        if doc.get("$schema") != PROVIDERS_SCHEMA_URL:
            problems.append(f"providers under $schema {doc.get('$schema')!r}")
        if not isinstance(providers, dict) or sorted(providers) != sorted(namespaces):
            problems.append(f"providers {providers!r} for namespaces {namespaces!r}")
    elif doc.get("$schema") != SCHEMA_URL:
        problems.append(f"$schema {doc.get('$schema')!r}")
    variants = doc.get("variants")
    if not isinstance(variants, dict):
        return [*problems, "variants is not an object"]
    for label, props in variants.items():
        if not LABEL.match(label):
            problems.append(f"label {label!r}")
        for ns, features in props.items():
            if not NAME.match(ns) or ns not in namespaces:
                problems.append(f"namespace {ns!r} of {label} (missing from default-priorities?)")
            for feature, values in features.items():
                if not NAME.match(feature) or not values or not all(VALUE.match(v) for v in values):
                    problems.append(f"{label}: {ns} :: {feature} = {values!r}")
    return problems


def variant_metadata(
    wheels: Sequence[IndexedWheel], dist: Path | None = None, *, tampered: list[str] | None = None
) -> tuple[tuple[tuple[str, str], ...], tuple[tuple[str, Path], ...]]:
    """Index pages and labelled wheel copies for every (project, public version). Copies are
    made under ``dist/.index/variant-wheels/<source sha>/<variant.json sha>/``, again on every run
    (see below); a copy found there changed is named in ``tampered``."""
    pages: dict[str, str] = {}
    links: list[tuple[str, Path]] = []
    anchors_of: dict[str, list[str]] = {}  # project -> its page's anchors, every release
    groups: dict[tuple[str, str], list[IndexedWheel]] = {}
    for wheel in wheels:
        groups.setdefault((wheel.project, Version(wheel.version).public), []).append(wheel)
    for (project, version), members in sorted(groups.items()):
        labelled: dict[str, Properties] = {}
        label_of: dict[str, str] = {}
        for wheel in members:
            props = properties_for(wheel, _archs(wheel))
            label = label_for(wheel)
            if labelled.get(label, props) != props:  # e.g. aarch64 built for other CUDA archs
                label = f"{label}_{wheel.variant.arch}"
            if labelled.get(label, props) != props:
                raise WheelfactoryError(
                    f"variant label {label} stands for two property sets in {project} {version}"
                )
            labelled[label] = props
            label_of[wheel.variant_id] = label
        doc = document(labelled)
        problems = check_document(doc)
        if problems:
            raise WheelfactoryError(
                f"variants.json for {project} {version} breaks the draft's shape: {problems}"
            )
        folder = f"{VARIANTS_DIR}/{project}"
        json_name = f"{project.replace('-', '_')}-{version}-variants.json"
        pages[f"{folder}/{json_name}"] = json.dumps(doc, indent=2) + "\n"
        anchors = anchors_of.setdefault(project, [])
        anchors.append(f'<a href="{json_name}">{json_name}</a><br/>')
        for wheel in members:
            label = label_of[wheel.variant_id]
            if dist is None:
                continue
            own_doc = wheel_document(labelled, label)
            problems = check_document(own_doc)
            if problems:
                raise WheelfactoryError(
                    f"variant.json of {label} ({project} {version}) is malformed: {problems}"
                )
            own = json.dumps(own_doc, indent=2).encode() + b"\n"
            cache = _cache_dir(dist, wheel.sha256[:16], hashlib.sha256(own).hexdigest()[:16])
            # Made again from its source (checked by collect) on every run, never reused as found:
            # the cache is a directory anyone who can write dist/ can edit, and the index serves
            # what it holds under a sha256 computed from its bytes. The rewrite is deterministic,
            # so an unchanged source gives the same bytes (and the same index digest).
            # The cache holds one copy per (source, variant.json): one found there that is not what
            # the rewrite makes was changed after it was made; it is replaced and named in ``tampered``.
            found = {path.name: file_sha256(path) for path in cache.glob("*.whl") if path.is_file()}
            copy = rewrite_wheel(
                wheel.local_file,
                cache,
                version=Version(version),
                dist_info_files={"variant.json": own},
                variant_label=label,
            )
            if (
                tampered is not None
                and copy.name in found
                and found[copy.name] != file_sha256(copy)
            ):
                tampered.append(
                    f"{cache.relative_to(dist)}/{copy.name} did not match the copy its source "
                    f"{wheel.filename} makes: made again from the source"
                )
            links.append((f"{folder}/{copy.name}", copy))
            sha = file_sha256(copy)
            anchors.append(wheel_anchor(_relabelled(wheel, copy.name, sha), copy.name))
        pages[f"{folder}/index.html"] = html_page(f"Variant wheels of {project}", anchors)
    if dist is not None and (dist / CACHE_DIR).is_dir():  # copies of wheels no longer indexed
        used = {w.sha256[:16] for w in wheels}
        for stale in (dist / CACHE_DIR).iterdir():
            if stale.name not in used:
                _remove(stale)
    if groups:
        pages[f"{VARIANTS_DIR}/index.html"] = html_page(
            "Variant wheels (PEP 825 draft)",
            [f'<a href="{p}/">{p}</a><br/>' for p in sorted({w.project for w in wheels})],
        )
    return tuple(sorted(pages.items())), tuple(links)


_ANCHOR_LINE = re.compile(
    r'<a href="([^"/:#?]+)(?:#sha256=[0-9a-f]{64})?"(?: data-requires-python="[^"<>]*")?>'
    r"[^<>]*</a><br/>"
)


def with_earlier_files(
    pages: Sequence[tuple[str, str]], held_page: Callable[[str], bytes | None]
) -> tuple[tuple[str, str], ...]:
    """``pages`` where each project's variant page also lists what the target's copy of it
    listed (``held_page`` reads it back): on a publish target, earlier releases stay listed
    here as on every other page. Only anchor lines of the shape this module writes, to a file in
    the same folder, are taken over; the rest of a held page is ignored."""
    out: list[tuple[str, str]] = []
    for path, text in pages:
        parts = path.split("/")
        held = (
            held_page(path)
            if len(parts) == 4 and path.startswith(VARIANTS_DIR + "/") and parts[-1] == "index.html"
            else None
        )
        if held:
            lines = [
                line.strip() for line in text.splitlines() if _ANCHOR_LINE.fullmatch(line.strip())
            ]
            now = {_ANCHOR_LINE.fullmatch(line).group(1) for line in lines}  # type: ignore[union-attr]
            earlier = [
                line.strip()
                for line in held.decode("utf-8", errors="replace").splitlines()
                if (found := _ANCHOR_LINE.fullmatch(line.strip())) and found.group(1) not in now
            ]
            text = html_page(f"Variant wheels of {parts[2]}", earlier + lines)
        out.append((path, text))
    return tuple(out)


def _remove(path: Path) -> None:
    """A cache entry: a link (never followed) or a file is unlinked, a directory removed."""
    if path.is_symlink() or not path.is_dir():
        path.unlink(missing_ok=True)
    else:
        shutil.rmtree(path, ignore_errors=True)


def _cache_dir(dist: Path, name: str, document: str) -> Path:
    """``dist/.index/variant-wheels/<name>/<document>/``, made of real directories: nothing under dist is
    followed through a symlink. ``dist/.index`` being a link (it holds the index generations too)
    stops the run; a link in the cache (ours to remake) is removed."""
    generations = dist / CACHE_DIR.split("/")[0]
    if generations.is_symlink():
        raise IndexBuildError(
            f"{generations} is a symlink: the index is written only inside {dist}; remove the link"
        )
    cache = dist / CACHE_DIR
    target = cache / name / document
    for path in (cache, cache / name, target):
        if path.is_symlink() or (path.exists() and not path.is_dir()):
            _remove(path)
    target.mkdir(parents=True, exist_ok=True)
    for entry in target.iterdir():  # a planted link beside the copy is not ours either
        if entry.is_symlink():
            entry.unlink()
    return target


def _relabelled(wheel: IndexedWheel, filename: str, sha256: str) -> IndexedWheel:
    from dataclasses import replace

    # The copy's METADATA is not the source's (its version lost the local label): none is offered.
    return replace(
        wheel, filename=filename, sha256=sha256, core_metadata_sha256=None, core_metadata=None
    )
