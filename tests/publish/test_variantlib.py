"""The labelled wheels against the real consumer, variantlib 0.2.2 (the reference implementation):
its ``analyze-wheel`` accepts each one, and its ``generate-index-json`` merges them into an index
file that agrees with ours on every label and property. Run as subprocesses, as a user would."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest
from tests.publish.dist_fakes import make_dist
from tests.publish.test_variants import SCHEMA_0_1_1
from tests.testkit import make_wheel, write_provenance
from wheelfactory.publish.collect import collect
from wheelfactory.publish.variant_metadata import (
    PROVIDER,
    PROVIDERS_SCHEMA_URL,
    check_document,
    variant_metadata,
)
from wheelfactory.plan.identity import VariantId
from wheelfactory.runner import manifest

VARIANTLIB = Path(sys.executable).parent / "variantlib"  # the console script of the test extra


def _add_wheel(dist: Path, vid: str, toolkit: str, record: dict[str, object]) -> None:
    entries = manifest.read(dist)
    # The local label a build gives it (VariantId.local_label), and the provenance record it writes.
    wheel = make_wheel(dist / vid, "tiny", f"0.1.0+{VariantId.parse(vid).local_label}",
                       files={"tiny/__init__.py": "VALUE = 1\n"}, build_record=record,
                       metadata="Requires-Python: >=3.9\nLicense-Expression: MIT\n")
    write_provenance(wheel, vid)
    entries[vid] = manifest.Entry(status="built", wheel=f"{vid}/{wheel.name}",
                                  sha256=hashlib.sha256(wheel.read_bytes()).hexdigest(), seconds=1.0, key="k",
                                  log=f"{vid}/build.log", error=None, engine="docker", image=None,
                                  torch_version="2.13.0", toolkit=toolkit)
    manifest.write(dist, entries)


def _add_rocm_wheel(dist: Path) -> None:
    """A ROCm build next to make_dist's CPU and CUDA ones: a release using all three namespaces."""
    _add_wheel(dist, "torch213-cxx11-rocm64-x86_64-linux", "6.4",
               {"namespace": "_tiny_rocm_0123abcd", "arch_list": ["gfx942"]})


SPLIT_PARTS = {"sm80": "8.0", "ptx120": "12.0+PTX-only"}


def _add_split_wheels(dist: Path) -> None:
    """Two parts of a CUDA 12.6 build split by GPU architecture ([cuda] split_archs)."""
    for part, arch in SPLIT_PARTS.items():
        _add_wheel(dist, f"torch213-cxx11-cu126-{part}-x86_64-linux", "12.6",
                   {"namespace": "_tiny_cuda_4567cdef", "arch_list": [arch], "parts": list(SPLIT_PARTS)})


@pytest.fixture
def published(tmp_path: Path) -> tuple[dict[str, object], Path]:
    """Our index-level variants.json and a folder holding the labelled wheels (as served)."""
    dist = tmp_path / "dist"
    make_dist(dist)
    _add_rocm_wheel(dist)
    _add_split_wheels(dist)
    wheels, _ = collect(dist, manifest.read(dist))
    pages, links = variant_metadata(wheels, dist)
    served = tmp_path / "simple"
    served.mkdir()
    for _, path in links:
        shutil.copy(path, served / path.name)
    return json.loads(dict(pages)["variants/simple/tiny/tiny-0.1.0-variants.json"]), served


def _own(wheel: Path) -> dict[str, Any]:
    with zipfile.ZipFile(wheel) as archive:
        data: dict[str, Any] = json.loads(archive.read("tiny-0.1.0.dist-info/variant.json"))
    return data


def _variantlib(*args: str) -> subprocess.CompletedProcess[str]:
    assert VARIANTLIB.exists(), "variantlib is in the test extra: pip install -e '.[test]'"
    return subprocess.run([str(VARIANTLIB), *args], capture_output=True, text=True, timeout=120)


def test_the_release_uses_all_three_namespaces(published: tuple[dict[str, object], Path]) -> None:
    doc, served = published
    assert doc["default-priorities"] == {"namespace": ["torch", "nvidia", "amd"]}
    assert doc["variants"]["torch213_cxx11_rocm64"] == {  # type: ignore[index]
        "torch": {"cxx11_abi": ["true"], "version": ["2.13"]}, "amd": {"rocm_version": ["6.4"], "gfx_arch": ["gfx942"]}}
    assert len(list(served.glob("*.whl"))) == 6
    for part, value in (("sm80", "80_real"), ("ptx120", "120_virtual")):  # one GPU architecture each
        assert doc["variants"][f"torch213_cxx11_cu126_{part}"] == {  # type: ignore[index]
            "torch": {"cxx11_abi": ["true"], "version": ["2.13"]},
            "nvidia": {"cuda_version_lower_bound": ["12.6"], "sm_arch": [value]}}


def test_variantlib_analyze_wheel_accepts_each_labelled_wheel(published: tuple[dict[str, object], Path]) -> None:
    doc, served = published
    for wheel in sorted(served.glob("*.whl")):
        label = wheel.name[:-len(".whl")].rsplit("-", 1)[1]
        result = _variantlib("analyze-wheel", "-i", str(wheel))
        assert result.returncode == 0, result.stderr
        assert f"Variant: `{label}`" in result.stdout
        printed = {line for line in result.stdout.splitlines() if " :: " in line}
        ours = {f"{ns} :: {feature} :: {value}" for ns, features in doc["variants"][label].items()  # type: ignore[index]
                for feature, values in features.items() for value in values}
        assert printed == ours


def test_variantlib_generate_index_json_agrees_with_ours(published: tuple[dict[str, object], Path]) -> None:
    doc, served = published
    result = _variantlib("generate-index-json", "-d", str(served))
    # it logs a bad wheel as a warning and goes on (exit 0): any warning is a failure here
    assert result.returncode == 0 and "WARNING" not in result.stderr and "ERROR" not in result.stderr, result.stderr
    theirs = json.loads((served / "tiny-0.1.0-variants.json").read_text())
    assert theirs["variants"] == doc["variants"]
    assert theirs["default-priorities"] == doc["default-priorities"]
    assert theirs["providers"] == {ns: PROVIDER for ns in ("torch", "nvidia", "amd")}


def test_variant_json_is_the_index_document_plus_providers(published: tuple[dict[str, object], Path]) -> None:
    """What differs between the two consumers is the providers table, nothing else: without it,
    each wheel's variant.json is valid against the PEP 825 draft's schema."""
    import jsonschema

    doc, served = published
    jsonschema.validate(doc, SCHEMA_0_1_1)
    for wheel in served.glob("*.whl"):
        own = _own(wheel)
        assert check_document(own) == [] and own["$schema"] == PROVIDERS_SCHEMA_URL
        assert own["default-priorities"] == doc["default-priorities"]  # the same in every wheel: variantlib merges
        label, = own["variants"]
        assert own["variants"][label] == doc["variants"][label]  # type: ignore[index]
        jsonschema.validate({**{k: v for k, v in own.items() if k != "providers"}, "$schema": doc["$schema"]},
                            SCHEMA_0_1_1)


def test_cached_copies_are_rewritten_when_the_releases_namespaces_change(tmp_path: Path) -> None:
    """A CPU wheel's variant.json names the release's namespaces, so a new CUDA build changes it."""
    dist = tmp_path / "dist"
    make_dist(dist, failed="torch213-cxx11-cu130-x86_64-linux")
    wheels, _ = collect(dist, manifest.read(dist))
    _, links = variant_metadata(wheels, dist)
    assert {_own(path)["default-priorities"]["namespace"][-1] for _, path in links} == {"torch"}
    make_dist(dist)
    wheels, _ = collect(dist, manifest.read(dist))
    _, links = variant_metadata(wheels, dist)
    for rel, path in links:
        assert _own(path)["default-priorities"] == {"namespace": ["torch", "nvidia"]}, rel
