"""variants.json after the PEP 825 draft (v0.1.1): its shape, the labelled wheels, our selection."""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import json
import zipfile
from pathlib import Path

import pytest
from tests.publish.dist_fakes import make_dist
from wheelfactory.publish.collect import collect
from wheelfactory.publish.variant_metadata import (
    SCHEMA_URL,
    check_document,
    environment_properties,
    select_label,
    variant_metadata,
)
from wheelfactory.runner import manifest

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
