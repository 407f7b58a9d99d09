"""variants.json after the PEP 825 draft (v0.1.1): its shape, the labelled wheels, our selection."""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import json
import zipfile
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest
from wheelfactory.plan.versions import major_minor
from wheelfactory.publish.collect import collect
from wheelfactory.publish.variant_metadata import (
    SCHEMA_URL,
    Properties,
    check_document,
    variant_metadata,
)
from wheelfactory.runner import manifest

from tests.publish.dist_fakes import make_dist

# The draft's schema (peps/pep-0825/variant-schema-0.1.1.json), transcribed: required keys, no
# extra keys, and the name patterns for labels, namespaces, features and values.
SCHEMA_0_1_1 = {
    "type": "object",
    "required": ["$schema", "default-priorities", "variants"],
    "additionalProperties": False,
    "properties": {
        "$schema": {"type": "string"},
        "default-priorities": {
            "type": "object", "required": ["namespace"], "additionalProperties": False,
            "properties": {"namespace": {"type": "array", "minItems": 1, "uniqueItems": True,
                                         "items": {"type": "string", "pattern": "^[a-z0-9_]+$"}}},
        },
        "variants": {
            "type": "object", "additionalProperties": False,
            "patternProperties": {"^[a-z0-9_.]+$": {
                "type": "object", "additionalProperties": False,
                "patternProperties": {"^[a-z0-9_]+$": {
                    "type": "object", "additionalProperties": False,
                    "patternProperties": {"^[a-z0-9_]+$": {
                        "type": "array", "minItems": 1, "uniqueItems": True,
                        "items": {"type": "string", "pattern": "^[a-z0-9_.]+$"}}},
                }},
            }},
        },
    },
}


@pytest.fixture
def metadata(tmp_path: Path) -> tuple[dict[str, object], dict[str, Path]]:
    make_dist(tmp_path)
    wheels, _ = collect(tmp_path, manifest.read(tmp_path))
    pages, links = variant_metadata(wheels, tmp_path)
    doc = json.loads(dict(pages)["variants/simple/tiny/tiny-0.1.0-variants.json"])
    return doc, {Path(rel).name: path for rel, path in links}


def test_variants_json_validates_against_the_drafts_schema(metadata: tuple[dict[str, object], dict[str, Path]]
                                                           ) -> None:
    import jsonschema

    doc, _ = metadata
    jsonschema.validate(doc, SCHEMA_0_1_1)
    assert doc["$schema"] == SCHEMA_URL and check_document(doc) == []
    assert doc["default-priorities"] == {"namespace": ["torch", "nvidia"]}
    assert doc["variants"]["torch213_cxx11_cu130"] == {  # type: ignore[index]
        "torch": {"cxx11_abi": ["true"], "version": ["2.13"]},
        # 12.0+PTX: sm_120's SASS and compute_120's PTX
        "nvidia": {"cuda_version_lower_bound": ["13.0"], "sm_arch": ["120_real", "120_virtual", "80_real", "90_real"]}}
    assert set(doc["variants"]) == {"torch213_cxx11_cpu", "torch26_cxx98_cpu", "torch213_cxx11_cu130"}  # type: ignore[arg-type]


def test_labelled_wheels_carry_variant_json_and_a_consistent_record(
        metadata: tuple[dict[str, object], dict[str, Path]]) -> None:
    _, copies = metadata
    name = "tiny-0.1.0-cp39-abi3-manylinux_2_28_x86_64-torch213_cxx11_cu130.whl"
    with zipfile.ZipFile(copies[name]) as archive:
        own = json.loads(archive.read("tiny-0.1.0.dist-info/variant.json"))
        assert list(own["variants"]) == ["torch213_cxx11_cu130"]
        assert b"Version: 0.1.0\n" in archive.read("tiny-0.1.0.dist-info/METADATA")
        rows = list(csv.reader(io.StringIO(archive.read("tiny-0.1.0.dist-info/RECORD").decode())))
        for path, digest, size in rows:
            if not digest:
                continue
            data = archive.read(path)
            expected = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            assert digest == f"sha256={expected}" and int(size) == len(data)
        assert {r[0] for r in rows} == set(archive.namelist())


# What no installer does yet: our reading of the draft's ordering, an environment's side.

def environment_properties(
    torch_version: str,
    cxx11_abi: bool,
    cuda: str | None = None,
    sm: Sequence[str] = (),
    rocm: str | None = None,
    gfx: Sequence[str] = (),
) -> Properties:
    """What an environment supports, each feature's values best first (what a provider plugin
    would report): this torch; stable-ABI builds for any torch from 2.0 up to it; CUDA builds of
    this major and minor <= this one, newest first; the GPU's own archs."""
    major, minor = major_minor(torch_version)
    props: Properties = {
        "torch": {
            "version": [f"{major}.{minor}"],
            "cxx11_abi": ["true" if cxx11_abi else "false"],
            "stable_abi_min": [f"{major}.{m}" for m in range(minor, -1, -1)],
        }
    }
    if cuda:
        cmajor, cminor = major_minor(cuda)
        props["nvidia"] = {
            "cuda_version_lower_bound": [f"{cmajor}.{m}" for m in range(cminor, -1, -1)],
            "sm_arch": [
                s
                for cap in sm
                for s in (f"{cap.replace('.', '')}_real", f"{cap.replace('.', '')}_virtual")
            ],
        }
    if rocm:
        props["amd"] = {"rocm_version": [rocm], "gfx_arch": list(gfx)}
    return props


def select_label(doc: Mapping[str, object], supported: Properties) -> str | None:
    """The best label for an environment, after the draft's ordering: a variant is compatible
    when each of its features has a value the environment supports; compatible variants are
    compared by their sorted (namespace, feature, value) priority keys, and one whose keys run
    out first loses (more matching properties win); a full tie goes to the label order."""
    order = list(doc["default-priorities"]["namespace"])  # type: ignore[index]
    best: tuple[list[tuple[int, int, int]], str] | None = None
    for label, props in doc["variants"].items():  # type: ignore[attr-defined]
        keys = _priority_keys(props, supported, order)
        if keys is not None and (best is None or _better((keys, label), best)):
            best = (keys, label)
    return best[1] if best else None


def _priority_keys(
    props: Properties, supported: Properties, order: list[str]
) -> list[tuple[int, int, int]] | None:
    """Sorted (namespace, feature, value) ranks of a variant's properties; None: incompatible."""
    keys = []
    for ns, features in props.items():
        have = supported.get(ns, {})
        for feature, values in features.items():
            offered = have.get(feature, [])
            ranks = [offered.index(v) for v in values if v in offered]
            if not ranks:
                return None
            keys.append((order.index(ns), list(have).index(feature), min(ranks)))
    return sorted(keys)


def _better(
    a: tuple[list[tuple[int, int, int]], str], b: tuple[list[tuple[int, int, int]], str]
) -> bool:
    for x, y in zip(a[0], b[0]):
        if x != y:
            return x < y
    if len(a[0]) != len(b[0]):
        return len(a[0]) > len(b[0])
    return a[1] < b[1]


@pytest.mark.parametrize("environment, expected", [
    (dict(torch_version="2.13.0", cxx11_abi=True), "torch213_cxx11_cpu"),
    (dict(torch_version="2.13.1", cxx11_abi=True, cuda="13.2", sm=["9.0"]), "torch213_cxx11_cu130"),
    (dict(torch_version="2.13.0", cxx11_abi=True, cuda="13.0", sm=["7.5"]), "torch213_cxx11_cpu"),  # no sm_75 build
    (dict(torch_version="2.13.0", cxx11_abi=True, cuda="12.8", sm=["9.0"]), "torch213_cxx11_cpu"),  # older CUDA
    (dict(torch_version="2.6.0", cxx11_abi=False), "torch26_cxx98_cpu"),
    (dict(torch_version="2.6.0", cxx11_abi=True), None),
    (dict(torch_version="2.14.0", cxx11_abi=True), None),
])
def test_selection_follows_the_drafts_ordering(metadata: tuple[dict[str, object], dict[str, Path]],
                                               environment: dict[str, object], expected: str | None) -> None:
    doc, _ = metadata
    assert select_label(doc, environment_properties(**environment)) == expected  # type: ignore[arg-type]


def test_a_held_variant_page_gives_only_its_own_anchor_lines() -> None:
    """with_earlier_files takes over anchors of the shape the module writes, to files beside the
    page; anything else a target's page holds (a link out, a script) is dropped."""
    from wheelfactory.publish.variant_metadata import with_earlier_files

    mine = '<a href="t-0.2.0-variants.json">t-0.2.0-variants.json</a><br/>'
    page = f"<html><body>\n    {mine}\n</body></html>\n"
    good = '<a href="t-0.1.0-variants.json">t-0.1.0-variants.json</a><br/>'
    held = "\n".join([good, mine, '<a href="../../evil.whl">x</a><br/>', '<a href="http://elsewhere/x.whl">x</a><br/>',
                      "<script>alert(1)</script>"]).encode()
    (path, text), = with_earlier_files([("variants/simple/t/index.html", page)], lambda _: held)
    assert good in text and text.count(mine) == 1
    assert "evil" not in text and "elsewhere" not in text and "script" not in text
    assert text.index(good) < text.index(mine)  # the earlier release first
    untouched = [("variants/simple/index.html", page), ("x/simple/t/index.html", page)]
    assert with_earlier_files(untouched, lambda _: held) == tuple(untouched)
